#include "core/config/schema.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace parla::config {

namespace {
std::string format_number(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

std::string json_kind(const json& j) {
  if (j.is_null()) return "null";
  if (j.is_boolean()) return "a bool";
  if (j.is_number_integer() || j.is_number_unsigned()) return "an int";
  if (j.is_number()) return "a float";
  if (j.is_string()) return "a string";
  if (j.is_array()) return "a list";
  return "an object";
}

[[noreturn]] void type_error(const json& j, const std::string& expected, const std::string& where) {
  std::string shown = j.dump();
  if (shown.size() > 60) shown = shown.substr(0, 57) + "...";
  throw ConfigError(where + ": expected " + expected + ", got " + json_kind(j) + " " + shown);
}
}  // namespace

std::string Check::describe() const {
  if (!choices.empty()) {
    std::string s = "one of: ";
    for (size_t i = 0; i < choices.size(); ++i) s += (i ? ", " : "") + choices[i];
    return s;
  }
  if (min && max) return (min_exclusive ? "> " : ">= ") + format_number(*min) + " and <= " + format_number(*max);
  if (min) return (min_exclusive ? "> " : ">= ") + format_number(*min);
  if (max) return "<= " + format_number(*max);
  return "";
}

Check at_least(double v) { return Check{v, std::nullopt, false, {}}; }
Check greater_than(double v) { return Check{v, std::nullopt, true, {}}; }
Check between(double lo, double hi) { return Check{lo, hi, false, {}}; }
Check one_of(std::vector<std::string> choices) { return Check{std::nullopt, std::nullopt, false, std::move(choices)}; }

namespace detail {

void read_value(const json& j, int64_t& out, const std::string& where) {
  if (j.is_number_integer() || j.is_number_unsigned()) {
    out = j.get<int64_t>();
    return;
  }
  // 1e6 or 4096.0 in a config are whole numbers too; 0.5 is not.
  if (j.is_number_float()) {
    double d = j.get<double>();
    if (std::isfinite(d) && std::floor(d) == d && std::fabs(d) < 9.0e15) {
      out = static_cast<int64_t>(d);
      return;
    }
  }
  type_error(j, "an int", where);
}

void read_value(const json& j, int& out, const std::string& where) {
  int64_t v = 0;
  read_value(j, v, where);
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max())
    throw ConfigError(where + ": " + std::to_string(v) + " does not fit in a 32-bit int");
  out = static_cast<int>(v);
}

void read_value(const json& j, double& out, const std::string& where) {
  if (!j.is_number()) type_error(j, "a number", where);
  out = j.get<double>();
}

void read_value(const json& j, bool& out, const std::string& where) {
  if (!j.is_boolean()) type_error(j, "true or false", where);
  out = j.get<bool>();
}

void read_value(const json& j, std::string& out, const std::string& where) {
  if (!j.is_string()) type_error(j, "a string", where);
  out = j.get<std::string>();
}

void read_value(const json& j, std::vector<std::string>& out, const std::string& where) {
  if (!j.is_array()) type_error(j, "a list of strings", where);
  out.clear();
  for (const auto& e : j) {
    if (!e.is_string()) type_error(j, "a list of strings", where);
    out.push_back(e.get<std::string>());
  }
}

void read_value(const json& j, std::vector<int>& out, const std::string& where) {
  if (!j.is_array()) type_error(j, "a list of ints", where);
  out.clear();
  for (const auto& e : j) {
    int v = 0;
    read_value(e, v, where);
    out.push_back(v);
  }
}

void check_value(double v, const Check& c, const std::string& where) {
  bool ok = std::isfinite(v);
  if (c.min) ok = ok && (c.min_exclusive ? v > *c.min : v >= *c.min);
  if (c.max) ok = ok && v <= *c.max;
  if (!ok) throw ConfigError(where + ": value " + format_number(v) + " is out of range (must be " + c.describe() + ")");
}

void check_value(const std::string& v, const Check& c, const std::string& where) {
  if (c.choices.empty()) return;
  if (std::find(c.choices.begin(), c.choices.end(), v) != c.choices.end()) return;
  std::string msg = where + ": '" + v + "' is not valid (must be " + c.describe() + ")";
  std::string near = nearest(v, c.choices);
  if (!near.empty()) msg += "; did you mean '" + near + "'?";
  throw ConfigError(msg);
}

}  // namespace detail

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string nearest(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = std::numeric_limits<size_t>::max();
  for (const auto& c : candidates) {
    size_t d = edit_distance(word, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  // Suggest only when the typo is plausibly the same word: at most a third of its letters differ.
  size_t limit = std::max<size_t>(2, std::max(word.size(), best.size()) / 3);
  return best_d <= limit ? best : std::string();
}

}  // namespace parla::config
