// Flags generated from the config schema (core/schema_flags.h), checked on a CLI11 parser as the apps build it.
#include <catch2/catch.hpp>

#include <functional>
#include <map>
#include <set>
#include <stdexcept>

#include "core/config.h"
#include "core/schema_flags.h"

using Catch::Matchers::Contains;
using parla::app::SchemaFlags;
using parla::config::json;

namespace {

// Parses `args` with the flags of `exposed` and returns the effective config (or throws what the schema throws).
parla::Config parse(const std::vector<std::string>& exposed, std::vector<std::string> args,
                    const std::map<std::string, std::string>& extra = {}) {
  CLI::App cli("test");
  SchemaFlags flags(cli, exposed, extra);
  args.insert(args.begin(), "test");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  cli.parse(static_cast<int>(argv.size()), argv.data());
  parla::config::ConfigBuilder builder;
  flags.apply(builder);
  return builder.build();
}

std::string flag_error(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const parla::ConfigError& e) {
    return e.what();
  }
  FAIL("expected a ConfigError");
  return "";
}

}  // namespace

TEST_CASE("schema flags: a given flag sets its key, an absent one leaves the default") {
  auto c = parse({"decoding", "runtime"}, {"-b", "3", "--lenpen", "1.5", "--alignment", "soft", "--sampling",
                                           "--cpu-threads", "2", "--device", "cuda:1"});
  CHECK(c.decoding.beam_size == 3);
  CHECK(c.decoding.length_penalty == 1.5);
  CHECK(c.decoding.alignment == parla::AlignmentOutput::kSoft);
  CHECK(c.decoding.sampling);
  CHECK(c.runtime.threads == 2);
  CHECK(c.runtime.device == "cuda:1");
  parla::DecodingConfig defaults;
  CHECK(c.decoding.n_best == defaults.n_best);
  CHECK(c.decoding.line_buffered == defaults.line_buffered);
  CHECK(c.decoding.max_length_factor == defaults.max_length_factor);
}

TEST_CASE("schema flags: a bad value is the schema's error, naming the flag and the key") {
  auto range = flag_error([] { parse({"decoding"}, {"--beam-size", "0"}); });
  CHECK_THAT(range, Contains("--beam-size"));
  CHECK_THAT(range, Contains("decoding.beam_size"));
  CHECK_THAT(range, Contains("out of range"));
  auto type = flag_error([] { parse({"decoding"}, {"-b", "five"}); });
  CHECK_THAT(type, Contains("--beam-size"));
  CHECK_THAT(type, Contains("expected an int"));
  auto fraction = flag_error([] { parse({"decoding"}, {"-b", "2.5"}); });
  CHECK_THAT(fraction, Contains("expected an int"));
  auto choice = flag_error([] { parse({"decoding"}, {"--precision", "fp166"}); });
  CHECK_THAT(choice, Contains("--precision"));
  CHECK_THAT(choice, Contains("did you mean 'fp16'"));
  auto nan = flag_error([] { parse({"decoding"}, {"--temperature", "nan"}); });
  CHECK_THAT(nan, Contains("--temperature"));
}

TEST_CASE("schema flags: a flag's text becomes the JSON its key's type reads") {
  CHECK(SchemaFlags::value_of("12", "int") == json(12));
  CHECK(SchemaFlags::value_of("-3", "int") == json(-3));
  CHECK(SchemaFlags::value_of("1e3", "int") == json(1000.0));  // a whole number, which an int key accepts
  CHECK(SchemaFlags::value_of(".5", "float") == json(0.5));
  CHECK(SchemaFlags::value_of("0.0007", "float") == json(0.0007));
  CHECK(SchemaFlags::value_of("abc", "float") == json("abc"));
  CHECK(SchemaFlags::value_of("", "int") == json(""));
  // A string key keeps the text as written, even when it reads as a number.
  CHECK(SchemaFlags::value_of("1", "string") == json("1"));
  CHECK(SchemaFlags::value_of("true", "string") == json("true"));
}

TEST_CASE("schema flags: an app's extra names come first and name the flag") {
  auto c = parse({"data"}, {"-o", "out/dir"}, {{"data.dir", "-o,--output"}});
  CHECK(c.data.dir == "out/dir");
  auto d = parse({"data"}, {"--data", "d2"}, {{"data.dir", "-o,--output"}});
  CHECK(c.data.dir == "out/dir");
  CHECK(d.data.dir == "d2");
  CLI::App cli("test");
  SchemaFlags flags(cli, {"data"}, {{"data.dir", "-o,--output"}});
  const char* argv[] = {"test", "-o", "x"};
  cli.parse(3, argv);
  CHECK(flags.origin("data.dir") == "--output");
  CHECK(flags.origin("data.src_lang") == "data.src_lang");  // not given: the key names itself
}

TEST_CASE("schema flags: a single key can be exposed without its section") {
  CLI::App cli("test");
  SchemaFlags flags(cli, {"data.dir"});
  CHECK(flags.keys() == std::vector<std::string>{"data.dir"});
  CHECK(cli.get_option_no_throw("--src-lang") == nullptr);
  CHECK_THROWS_AS(SchemaFlags(cli, {"no_such_section"}), std::logic_error);
  CHECK_THROWS_AS(SchemaFlags(cli, {"data.no_such_key"}), std::logic_error);
  CHECK_THROWS_AS(SchemaFlags(cli, {"data.clean.max_tokens"}), std::logic_error);  // a key without names
}

TEST_CASE("schema flags: every named key of a section is an option whose help is the key's doc") {
  for (const char* section : {"data", "vocab", "training", "decoding", "runtime"}) {
    INFO(section);
    CLI::App cli("test");
    SchemaFlags flags(cli, {section});
    std::set<std::string> with_flags;
    for (const auto& k : parla::config::section_keys(section)) {
      if (k.flags.empty()) continue;
      with_flags.insert(std::string(section) + "." + k.key);
      std::string first = k.flags.substr(0, k.flags.find(','));
      const CLI::Option* opt = cli.get_option_no_throw(first);
      REQUIRE(opt != nullptr);
      CHECK_THAT(opt->get_description(), Contains(k.doc));
      CHECK_THAT(opt->get_description(), Contains(std::string(section) + "." + k.key));
      CHECK_THAT(opt->get_description(), Contains(k.constraint));
    }
    auto keys = flags.keys();
    CHECK(std::set<std::string>(keys.begin(), keys.end()) == with_flags);
    CHECK(!with_flags.empty());
  }
}
