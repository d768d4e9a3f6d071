#pragma once
// The one JSON parse for text that a file or a client brings: bounded in nesting, in linear time, and refusing
// what nlohmann's plain parse would quietly accept.
//
// Why not nlohmann::json::parse: without a callback it has no depth bound (a value nested 150,000 deep overflows the
// stack later, in a copy, a dump or a recursive walk); with a callback it is quadratic, because its
// json_sax_dom_callback_parser::end_object/end_array scan the parent container for discarded values each time a
// child ends (50,000 sibling objects: seconds). Here a SAX handler builds the value itself and refuses a container
// deeper than the limit as it opens, so no deep value ever exists. It lives in core/ so that serve/ (core and text
// only, docs/ARCHITECTURE.md) and formats/ both use it.
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace parla {

struct JsonLimits {
  // The most arrays and objects open at once: 1 allows {"a": 1} but not {"a": []}.
  int max_depth = 64;
  // Refuse an object that names a key twice (nlohmann keeps the last one silently).
  bool refuse_duplicate_keys = false;
  // Accept /* */ and // comments (parla's own config files).
  bool allow_comments = false;
  // The most values (scalars, arrays and objects, keys not counted), 0 for no bound: a parsed value costs 16 bytes
  // and more, so "[{},{},...]" would take about 30 times its text.
  size_t max_values = 0;
};

// Why a parse failed, for callers (parla-serve) that answer each differently.
enum class JsonErrorKind { kInvalid, kTooDeep, kDuplicateKey, kTooManyValues };

// A DataError "WHAT: REASON" whose message names the source given to parse_bounded_json. detail() is the parser's
// own words where the text is not JSON ("at line 1, column 9: ..."), for a caller that words its own message.
class JsonError : public DataError {
 public:
  JsonError(JsonErrorKind kind, const std::string& what, const std::string& reason, std::string detail = {})
      : DataError(what + ": " + reason), kind_(kind), detail_(detail.empty() ? reason : std::move(detail)) {}
  JsonErrorKind kind() const { return kind_; }
  const std::string& detail() const { return detail_; }

 private:
  JsonErrorKind kind_;
  std::string detail_;
};

// `text` parsed as one JSON value; JsonError "WHAT: ..." when it is not JSON (a NUL byte anywhere included: nlohmann
// stops at one and ignores what follows), nests deeper than `limits.max_depth`, repeats a key where refused, or
// holds more than `limits.max_values`.
// Time and memory are linear in the text's size.
nlohmann::json parse_bounded_json(std::string_view text, const JsonLimits& limits, const std::string& what);

// A JSON object's members one at a time: each is handed to `on_member` (which may move from it) as soon as it is
// complete and then dropped, so a large object (a safetensors header of a million tensors) never exists as a whole.
// The same limits and errors as parse_bounded_json, and JsonError "not a JSON object" for any other value; keys
// repeated at the top are for `on_member` to refuse.
using JsonMemberHandler = std::function<void(const std::string& key, nlohmann::json& value)>;
void parse_bounded_json_members(std::string_view text, const JsonLimits& limits, const std::string& what,
                                const JsonMemberHandler& on_member);

}  // namespace parla
