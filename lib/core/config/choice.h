#pragma once
// Keys with a fixed set of values (model.type, decoding.precision, ...) are enums from the moment the config is
// parsed. Each enum names its values once, with PARLA_CHOICES; the schema reads, checks, documents and writes the
// key by those names, in that order. Every later comparison is on the enum, so a misspelt choice does not compile.
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace parla::config {

// Specialised for each enum by PARLA_CHOICES: `names`, an array of {value, name} in documentation order.
template <class E>
struct Choices;

template <class E, class = void>
struct is_choice : std::false_type {};
template <class E>
struct is_choice<E, std::void_t<decltype(Choices<E>::names)>> : std::true_type {};
template <class E>
inline constexpr bool is_choice_v = is_choice<E>::value;

// A list of choices (model.sparse_pattern): std::vector of such an enum.
template <class T>
struct is_choice_list : std::false_type {};
template <class E>
struct is_choice_list<std::vector<E>> : is_choice<E> {};
template <class T>
inline constexpr bool is_choice_list_v = is_choice_list<T>::value;

// The config's spelling of a value ("transformer" for ModelType::kTransformer).
template <class E>
const char* name_of(E value) {
  for (const auto& [v, name] : Choices<E>::names)
    if (v == value) return name;
  return "";  // unreachable for a value of the enum: PARLA_CHOICES lists them all
}

template <class E>
std::vector<std::string> names_of() {
  std::vector<std::string> out;
  for (const auto& [v, name] : Choices<E>::names) out.emplace_back(name);
  return out;
}

// "a, b, c": the names, for messages.
template <class E>
std::string names_joined() {
  std::string out;
  for (const auto& [v, name] : Choices<E>::names) out += (out.empty() ? "" : ", ") + std::string(name);
  return out;
}

// False when `text` names no value of E.
template <class E>
bool parse_choice(std::string_view text, E& out) {
  for (const auto& [v, name] : Choices<E>::names) {
    if (text == name) {
      out = v;
      return true;
    }
  }
  return false;
}

}  // namespace parla::config

// At namespace scope outside any namespace: PARLA_CHOICES(ModelType, {ModelType::kTransformer, "transformer"}, ...)
#define PARLA_CHOICES(E, ...)                                          \
  template <>                                                          \
  struct parla::config::Choices<E> {                                   \
    static constexpr std::pair<E, const char*> names[] = {__VA_ARGS__}; \
  }
