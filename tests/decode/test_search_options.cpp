// SearchOptions: the one description of a search, built from the `decoding` keys, whose defaults it takes from
// the config section rather than repeating them, and whose equality decides which sentences parla-serve batches.
#include <functional>
#include <vector>

#include <catch2/catch.hpp>

#include "decode/search_options.h"

using parla::DecodingConfig;
using parla::decode::SearchOptions;

TEST_CASE("default search options are the decoding section's defaults", "[search_options]") {
  const DecodingConfig d;
  const SearchOptions o;
  CHECK(o == SearchOptions::from_config(d));
  CHECK(o.beam_size == d.beam_size);
  CHECK(o.n_best == d.n_best);
  CHECK(o.length_penalty == d.length_penalty);
  CHECK(o.max_length_factor == d.max_length_factor);
  CHECK(o.max_length_offset == d.max_length_offset);
  CHECK(o.min_length == d.min_length);
  CHECK(o.attention == (d.alignment != parla::AlignmentOutput::kNone));
  CHECK(o.sampling == d.sampling);
  CHECK(o.temperature == d.temperature);
  CHECK(o.top_k == d.top_k);
  CHECK_FALSE(o.device_candidates);
}

TEST_CASE("from_config carries every search key of the decoding section", "[search_options]") {
  DecodingConfig d;
  d.beam_size = 7;
  d.n_best = 3;
  d.length_penalty = 1.25;
  d.max_length_factor = 1.5;
  d.max_length_offset = 4;
  d.min_length = 2;
  d.alignment = parla::AlignmentOutput::kSoft;
  d.sampling = true;
  d.temperature = 0.7;
  d.top_k = 9;
  const auto o = SearchOptions::from_config(d);
  CHECK(o.beam_size == 7);
  CHECK(o.n_best == 3);
  CHECK(o.length_penalty == 1.25);
  CHECK(o.max_length_factor == 1.5);
  CHECK(o.max_length_offset == 4);
  CHECK(o.min_length == 2);
  CHECK(o.attention);
  CHECK(o.sampling);
  CHECK(o.temperature == 0.7);
  CHECK(o.top_k == 9);
  d.alignment = parla::AlignmentOutput::kHard;
  CHECK(SearchOptions::from_config(d).attention);
}

TEST_CASE("search options are equal only when every field is", "[search_options]") {
  const std::vector<std::function<void(SearchOptions&)>> changes = {
      [](SearchOptions& o) { o.beam_size += 1; },        [](SearchOptions& o) { o.n_best += 1; },
      [](SearchOptions& o) { o.length_penalty += 0.1; }, [](SearchOptions& o) { o.max_length_factor += 1; },
      [](SearchOptions& o) { o.max_length_offset += 1; }, [](SearchOptions& o) { o.min_length += 1; },
      [](SearchOptions& o) { o.attention = !o.attention; }, [](SearchOptions& o) { o.sampling = !o.sampling; },
      [](SearchOptions& o) { o.temperature += 0.5; },    [](SearchOptions& o) { o.top_k += 1; },
      [](SearchOptions& o) { o.device_candidates = !o.device_candidates; },
  };
  const SearchOptions base;
  CHECK(base == SearchOptions{});
  CHECK_FALSE(base != SearchOptions{});
  for (size_t i = 0; i < changes.size(); ++i) {
    SearchOptions other = base;
    changes[i](other);
    INFO("change " << i);
    CHECK_FALSE(other == base);
    CHECK(other != base);
  }
}
