#include "core/bounded_json.h"

#include <cstring>
#include <functional>
#include <vector>

namespace parla {
namespace {

using json = nlohmann::json;

// nlohmann's SAX interface, building the value as json_sax_dom_parser does (a stack of the open containers; a child
// is complete before its next sibling is added, so the pointers into a parent stay valid) with the limits checked
// as each container opens or each key arrives.
class BoundedBuilder {
 public:
  BoundedBuilder(json& root, const JsonLimits& limits, const std::string& what,
                 const JsonMemberHandler* members = nullptr)
      : root_(root), limits_(limits), what_(what), members_(members) {}

  bool null() { return add(nullptr); }
  bool boolean(bool v) { return add(v); }
  bool number_integer(json::number_integer_t v) { return add(v); }
  bool number_unsigned(json::number_unsigned_t v) { return add(v); }
  bool number_float(json::number_float_t v, const json::string_t&) { return add(v); }
  bool string(json::string_t& v) { return add(std::move(v)); }
  bool binary(json::binary_t& v) { return add(json::binary(std::move(v))); }

  bool start_object(std::size_t) { return open(json::value_t::object); }
  bool start_array(std::size_t) { return open(json::value_t::array); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(json::string_t& k) {
    if (members_ && open_.size() == 1) {  // a member of the top object: built on its own, handed over, dropped
      member_key_ = std::move(k);
      slot_ = &member_;
      return true;
    }
    json& object = *open_.back();
    if (limits_.refuse_duplicate_keys && object.contains(k))
      throw JsonError(JsonErrorKind::kDuplicateKey, what_, "an object names the key " + quoted(k) + " twice");
    slot_ = &object[k];
    return true;
  }

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    std::string reason = e.what();
    // "[json.exception.parse_error.101] parse error at line 1, column 9: ..." reads as "at line 1, column 9: ...".
    const auto at = reason.find(" at line ");
    if (at != std::string::npos) reason = reason.substr(at + 1);
    reason = shortened(reason);
    throw JsonError(JsonErrorKind::kInvalid, what_, "not valid JSON (" + reason + ")", reason);
  }

 private:
  static std::string shortened(const std::string& s) { return s.size() <= 200 ? s : s.substr(0, 200) + "..."; }
  static std::string quoted(const std::string& s) { return "\"" + shortened(s) + "\""; }

  template <typename Value>
  json* place(Value&& v) {
    if (limits_.max_values && ++values_ > limits_.max_values)
      throw JsonError(JsonErrorKind::kTooManyValues, what_,
                      "more than " + std::to_string(limits_.max_values) + " JSON values");
    if (open_.empty()) {
      root_ = json(std::forward<Value>(v));
      return &root_;
    }
    json& parent = *open_.back();
    if (parent.is_array()) {
      parent.push_back(json(std::forward<Value>(v)));
      return &parent.back();
    }
    *slot_ = json(std::forward<Value>(v));
    return slot_;
  }

  // The member of the top object just completed, when members are handed over.
  void hand_over_member() {
    if (members_ && open_.size() == 1 && root_.is_object()) {
      (*members_)(member_key_, member_);
      member_ = json();
    }
  }

  template <typename Value>
  bool add(Value&& v) {
    place(std::forward<Value>(v));
    hand_over_member();
    return true;
  }

  bool open(json::value_t type) {
    if (static_cast<int>(open_.size()) >= limits_.max_depth)
      throw JsonError(JsonErrorKind::kTooDeep, what_,
                      "JSON nested deeper than " + std::to_string(limits_.max_depth) + " levels");
    open_.push_back(place(type));
    return true;
  }

  bool close() {
    open_.pop_back();
    hand_over_member();
    return true;
  }

  json& root_;
  const JsonLimits& limits_;
  const std::string& what_;
  std::vector<json*> open_;
  json* slot_ = nullptr;
  size_t values_ = 0;
  const JsonMemberHandler* members_;
  std::string member_key_;
  json member_;
};

}  // namespace

namespace {

void refuse_nul(std::string_view text, const std::string& what) {
  // nlohmann's lexer takes a NUL byte for the end of the input, so "{}\0garbage" would parse as {}. Raw NUL is never
  // valid JSON (inside a string it must be escaped).
  const void* nul = std::memchr(text.data(), '\0', text.size());
  if (!nul) return;
  const std::string detail = "a NUL byte at offset " + std::to_string(static_cast<const char*>(nul) - text.data());
  throw JsonError(JsonErrorKind::kInvalid, what, "not valid JSON (" + detail + ")", detail);
}

}  // namespace

json parse_bounded_json(std::string_view text, const JsonLimits& limits, const std::string& what) {
  refuse_nul(text, what);
  json root;
  BoundedBuilder builder(root, limits, what);
  // The builder throws on any error; strict: nothing but white space may follow the value.
  json::sax_parse(text.begin(), text.end(), &builder, json::input_format_t::json, /*strict=*/true,
                  limits.allow_comments);
  return root;
}

void parse_bounded_json_members(std::string_view text, const JsonLimits& limits, const std::string& what,
                                const JsonMemberHandler& on_member) {
  refuse_nul(text, what);
  json root;
  BoundedBuilder builder(root, limits, what, &on_member);
  json::sax_parse(text.begin(), text.end(), &builder, json::input_format_t::json, /*strict=*/true,
                  limits.allow_comments);
  if (!root.is_object()) throw JsonError(JsonErrorKind::kInvalid, what, "not a JSON object");
}

}  // namespace parla
