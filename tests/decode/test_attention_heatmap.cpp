// tools/attention-heatmap.py renders parla-translate's `--alignment soft` output as an SVG heatmap.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <regex>
#include <sstream>

#include "support/files.h"
#include "support/run.h"
#include "support/temp_dir.h"

using Catch::Matchers::Contains;
using parla::testing::run;

namespace {
const std::string kTool = std::string(PARLA_SOURCE_DIR) + "/tools/attention-heatmap.py";
}

TEST_CASE("the attention heatmap has one cell per target and source position, shaded by its weight") {
  if (!parla::testing::have_python()) {
    WARN("python3 not installed: skipped");
    return;
  }
  parla::testing::TempDir dir("heatmap");
  // Two target positions (a piece and EOS) over three source positions (two pieces and EOS).
  const std::vector<std::vector<double>> weights = {{0.9, 0.1, 0.0}, {0.2, 0.35, 0.45}};
  auto input = dir.write("out.soft", "x y ||| 0.9,0.1,0.0 0.2,0.35,0.45\n");
  auto svg_path = dir.file("a.svg");
  auto r = run("/usr/bin/env", {"python3", kTool, input, "--line", "1", "--source", "das Haus", "-o", svg_path});
  REQUIRE(r.exit_code == 0);
  std::ifstream in(svg_path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string svg = ss.str();
  CHECK_THAT(svg, Contains("<svg"));
  CHECK_THAT(svg, Contains(">Haus</text>"));

  // Cells in row-major order; white for 0, full blue for 1: rgb(255(1-w), 255(1-w), 255). (The weights avoid
  // shades that fall on .5, where Python's round-half-even and lround differ.)
  std::regex cell(R"re(fill="rgb\((\d+),(\d+),255\)"[^>]*><title>([0-9.]+)</title>)re");
  std::vector<std::pair<int, double>> cells;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), cell); it != std::sregex_iterator(); ++it)
    cells.emplace_back(std::stoi((*it)[1]), std::stod((*it)[3]));
  REQUIRE(cells.size() == 6);
  for (size_t t = 0; t < 2; ++t) {
    for (size_t s = 0; s < 3; ++s) {
      const auto& [shade, title] = cells[t * 3 + s];
      CHECK(title == Approx(weights[t][s]).margin(5e-4));
      CHECK(shade == static_cast<int>(std::lround(255 * (1 - weights[t][s]))));
    }
  }
}

TEST_CASE("the attention heatmap refuses lines without soft alignments and lines outside the file") {
  if (!parla::testing::have_python()) {
    WARN("python3 not installed: skipped");
    return;
  }
  parla::testing::TempDir dir("heatmap");
  auto input = dir.write("plain.txt", "just a translation\n");
  auto no_alignment = run("/usr/bin/env", {"python3", kTool, input, "-o", dir.file("b.svg")});
  CHECK(no_alignment.exit_code == 1);
  CHECK_THAT(no_alignment.err, Contains("line 1"));
  CHECK_FALSE(std::ifstream(dir.file("b.svg")).good());
  auto outside = run("/usr/bin/env", {"python3", kTool, input, "--line", "5"});
  CHECK(outside.exit_code == 2);
  CHECK_THAT(outside.err, Contains("--line 5"));
}
