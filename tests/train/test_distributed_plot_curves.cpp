// tools/plot-curves.py (the training-curve plotter for metrics.jsonl, issue 5) run as a user would. The SVG is
// checked with an independent parser (python's xml.etree): it must be well-formed, have one polyline per curve
// with one vertex per record, and map the values to pixels linearly (y falling as the value rises).
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "support/run.h"
#include "support/temp_dir.h"

namespace {

bool have_python() { return std::system("python3 -c pass >/dev/null 2>&1") == 0; }

std::string plotter() { return std::string(PARLA_SOURCE_DIR) + "/tools/plot-curves.py"; }

// Checks the SVG and prints "series=<points>" per polyline; exits non-zero with a reason when a check fails.
const char* kChecker = R"PY(
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
ns = "{http://www.w3.org/2000/svg}"
assert root.tag == ns + "svg", root.tag
assert root.findall(f".//{ns}rect[@class='axes']"), "no axes"
texts = " ".join(t.text or "" for t in root.iter(ns + "text"))
for label in ("step", "BLEU", "loss"):
    assert label in texts, "missing label " + label
values = {}
for line in sys.argv[2:]:
    name, vals = line.split("=")
    values[name] = [float(v) for v in vals.split(",")]
for pl in root.iter(ns + "polyline"):
    name = pl.get("data-series")
    pts = [tuple(map(float, p.split(","))) for p in pl.get("points").split()]
    print(f"{name}={len(pts)}")
    xs = [p[0] for p in pts]
    assert xs == sorted(xs) and len(set(xs)) == len(xs), name + ": x not increasing with step"
    vals = values[name]
    assert len(vals) == len(pts), name
    # Linear map value -> pixel with negative slope: check through the first and last points.
    (_, y0), (_, y1) = pts[0], pts[-1]
    a = (y1 - y0) / (vals[-1] - vals[0])
    assert a < 0, name + ": larger values must be drawn higher"
    for (_, y), v in zip(pts, vals):
        assert abs(y0 + a * (v - vals[0]) - y) < 0.2, f"{name}: {v} drawn at {y}"
)PY";

}  // namespace

TEST_CASE("plot-curves draws training loss, validation loss and BLEU as polylines of a well-formed SVG",
          "[plot_curves]") {
  if (!have_python()) {
    WARN("python3 not found; skipping");
    return;
  }
  parla::testing::TempDir tmp("plot-curves");
  // Both record shapes parla may write: plain keys and "type"-tagged records, interleaved, out of step order.
  auto metrics = tmp.write("metrics.jsonl",
                           "{\"step\": 100, \"loss\": 9.0, \"ppl\": 8103.1, \"lr\": 0.0001}\n"
                           "{\"step\": 300, \"loss\": 6.0, \"lr\": 0.0003}\n"
                           "\n"
                           "{\"type\": \"train\", \"step\": 200, \"loss\": 7.5, \"lr\": 0.0002}\n"
                           "{\"type\": \"valid\", \"step\": 200, \"loss\": 8.0, \"bleu\": 1.5}\n"
                           "{\"step\": 400, \"valid_loss\": 6.5, \"valid_bleu\": 4.25}\n"
                           "{\"step\": 400, \"loss\": 5.0, \"lr\": 0.0002}\n"
                           "{\"type\": \"info\", \"step\": 0, \"message\": \"not a curve\"}\n");
  auto svg = tmp.file("curves.svg");
  auto r = parla::testing::run("/usr/bin/env", {"python3", plotter(), metrics, "-o", svg, "--title", "tiny run"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  auto script = tmp.write("check.py", kChecker);
  auto check = parla::testing::run("/usr/bin/env", {"python3", script, svg, "train loss=9,7.5,6,5", "valid loss=8,6.5",
                                               "valid BLEU=1.5,4.25", "learning rate=0.0001,0.0002,0.0003,0.0002"});
  INFO(check.err);
  REQUIRE(check.exit_code == 0);
  CHECK(check.out.find("train loss=4") != std::string::npos);
  CHECK(check.out.find("valid loss=2") != std::string::npos);
  CHECK(check.out.find("valid BLEU=2") != std::string::npos);
  CHECK(check.out.find("learning rate=4") != std::string::npos);
}

TEST_CASE("plot-curves rejects a malformed metrics line naming file and line, writing nothing", "[plot_curves]") {
  if (!have_python()) {
    WARN("python3 not found; skipping");
    return;
  }
  parla::testing::TempDir tmp("plot-curves-bad");
  auto metrics = tmp.write("metrics.jsonl", "{\"step\": 1, \"loss\": 2.0}\n{\"step\": 2, \"loss\": \n");
  auto svg = tmp.file("curves.svg");
  auto r = parla::testing::run("/usr/bin/env", {"python3", plotter(), metrics, "-o", svg});
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("metrics.jsonl:2") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(svg));

  auto no_step = tmp.write("nostep.jsonl", "{\"loss\": 2.0}\n");
  r = parla::testing::run("/usr/bin/env", {"python3", plotter(), no_step, "-o", svg});
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("nostep.jsonl:1") != std::string::npos);
  CHECK(r.err.find("step") != std::string::npos);

  r = parla::testing::run("/usr/bin/env", {"python3", plotter(), tmp.file("missing.jsonl"), "-o", svg});
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("missing.jsonl") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(svg));
}
