// Typed plugin options: one declaration binds an option to a member of the plugin's settings and
// gives its manifest entry, type, range or choices and default (as MLIR's Option<T> does).
//
//   static const tessera::OptionTable<MyScheduler>& option_table() {
//     static const tessera::OptionTable<MyScheduler> table{
//         tessera::option("budget_fraction", &MyScheduler::budget_fraction_, 0.4, "share of the
//         budget").above(0).at_most(1), tessera::option("order", &MyScheduler::order_, Order::load_first,
//                         {{"load-first", Order::load_first}, {"phase-order", Order::phase_order}}, "which transfer
//                         first"),
//     };
//     return table;
//   }
//   Status configure(const tessera::Options& options) override { return option_table().assign(options, *this); }
//   ... tessera::make_manifest(kind, name, version, summary, option_table(), "", "", &create) ...
//
// The loader checks each value's type, range and choice against the pipeline before any plugin
// code runs, so `assign` only converts. A refusal of your own: return refuse_option(name, why).
#pragma once
#include <charconv>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessera/diagnostic.hpp"
#include "tessera/options.hpp"
#include "tessera/plugin.hpp"

namespace tessera {

/// A plugin's refusal of one of its options, worded so the host reports it at the pipeline's
/// `file:line:column` of that option: "option 'NAME' WHY" (say what to write instead).
inline Status refuse_option(const std::string& name, const std::string& why) {
  return Status::failure("option '" + name + "' " + why);
}

namespace option_detail {

// YAML text of a number that parses back to the same value (shortest round trip).
template <typename T>
std::string number_text(T value) {
  if constexpr (std::is_floating_point_v<T>) {
    char buffer[64];
    const auto result = std::to_chars(buffer, buffer + sizeof buffer, static_cast<double>(value));
    return std::string(buffer, result.ptr);
  } else {
    return std::to_string(value);
  }
}

}  // namespace option_detail

/// One declared option as the table keeps it: the manifest's texts and how to set the member.
template <typename Settings>
struct OptionEntry {
  std::string name, type, default_text, doc;
  bool has_minimum = false, has_maximum = false;
  std::string minimum, maximum;  ///< YAML number texts
  std::uint32_t flags = 0;       ///< TESSERA_OPTION_MINIMUM_EXCLUDED | TESSERA_OPTION_MAXIMUM_EXCLUDED
  std::string choices;           ///< an enum's names separated by '|'
  std::function<Status(const Options&, Settings&)> assign;

  OptionEntry(std::string name, std::string type, std::string default_text, std::string doc)
      : name(std::move(name)), type(std::move(type)), default_text(std::move(default_text)), doc(std::move(doc)) {}
};

/// One option bound to a member of type T of `Settings`, as tessera::option makes it; an int or
/// float option narrows its range with at_least / at_most / above / below / range.
template <typename Settings, typename T>
class OptionDeclaration {
public:
  explicit OptionDeclaration(OptionEntry<Settings> entry) : entry_(std::move(entry)) {}

  OptionDeclaration at_least(T bound) && requires std::is_arithmetic_v<T> {
    return std::move(*this).bound(true, bound, false);
  }
  OptionDeclaration above(T bound) && requires std::is_arithmetic_v<T> {
    return std::move(*this).bound(true, bound, true);
  }
  OptionDeclaration at_most(T bound) && requires std::is_arithmetic_v<T> {
    return std::move(*this).bound(false, bound, false);
  }
  OptionDeclaration below(T bound) && requires std::is_arithmetic_v<T> {
    return std::move(*this).bound(false, bound, true);
  }
  OptionDeclaration range(T low, T high) && requires std::is_arithmetic_v<T> {
    return std::move(*this).at_least(low).at_most(high);
  }

  /// The entry, with the member type's own limits where none was declared (an unsigned member
  /// is at least 0, a std::uint32_t at most 4294967295), so every accepted value fits.
  operator OptionEntry<Settings>() && {
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      using Limits = std::numeric_limits<T>;
      if (!entry_.has_minimum && std::cmp_greater(Limits::min(), std::numeric_limits<std::int64_t>::min()))
        entry_.has_minimum = true, entry_.minimum = option_detail::number_text(Limits::min());
      if (!entry_.has_maximum && std::cmp_less(Limits::max(), std::numeric_limits<std::int64_t>::max()))
        entry_.has_maximum = true, entry_.maximum = option_detail::number_text(Limits::max());
    }
    return std::move(entry_);
  }

private:
  OptionDeclaration bound(bool lower, T value, bool excluded) && {
    (lower ? entry_.has_minimum : entry_.has_maximum) = true;
    (lower ? entry_.minimum : entry_.maximum) = option_detail::number_text(value);
    if (excluded) entry_.flags |= lower ? TESSERA_OPTION_MINIMUM_EXCLUDED : TESSERA_OPTION_MAXIMUM_EXCLUDED;
    return std::move(*this);
  }

  OptionEntry<Settings> entry_;
};

/// A bool, int (any integer member), float (double member) or string option.
template <typename Settings, typename T>
requires(!std::is_enum_v<T>) OptionDeclaration<Settings, T> option(const char* name, T Settings::*member,
                                                                   std::type_identity_t<T> default_value,
                                                                   const char* doc) {
  OptionEntry<Settings> entry(name, "", "", doc);
  if constexpr (std::is_same_v<T, bool>) {
    entry.type = "bool";
    entry.default_text = default_value ? "true" : "false";
    entry.assign = [name = entry.name, member](const Options& options, Settings& settings) {
      settings.*member = options.get_bool(name);
      return Status::success();
    };
  } else if constexpr (std::is_integral_v<T>) {
    entry.type = "int";
    entry.default_text = option_detail::number_text(default_value);
    entry.assign = [name = entry.name, member](const Options& options, Settings& settings) {
      const std::int64_t value = options.get_int(name);
      // The loader checked the range, which includes the member type's; only a caller that
      // bypassed it gets here with a value that does not fit.
      if (!std::in_range<T>(value)) throw std::logic_error("option '" + name + "' value does not fit its member");
      settings.*member = static_cast<T>(value);
      return Status::success();
    };
  } else if constexpr (std::is_floating_point_v<T>) {
    entry.type = "float";
    entry.default_text = option_detail::number_text(default_value);
    entry.assign = [name = entry.name, member](const Options& options, Settings& settings) {
      settings.*member = static_cast<T>(options.get_number(name));
      return Status::success();
    };
  } else {
    static_assert(std::is_same_v<T, std::string>,
                  "an option member is bool, an integer, a floating point, a "
                  "std::string or an enum (MapOption: map_option)");
    entry.type = "string";
    entry.default_text = default_value;
    entry.assign = [name = entry.name, member](const Options& options, Settings& settings) {
      settings.*member = options.get_string(name);
      return Status::success();
    };
  }
  return OptionDeclaration<Settings, T>(std::move(entry));
}

/// An enum option: the pipeline writes one of the choices' names; the member gets its value.
template <typename Settings, typename E>
requires std::is_enum_v<E> OptionDeclaration<Settings, E> option(
    const char* name, E Settings::*member, std::type_identity_t<E> default_value,
    std::initializer_list<std::pair<const char*, std::type_identity_t<E>>> choices, const char* doc) {
  OptionEntry<Settings> entry(name, "enum", "", doc);
  std::vector<std::pair<std::string, E>> named(choices.begin(), choices.end());
  for (const auto& [choice, value] : named) {
    entry.choices += (entry.choices.empty() ? "" : "|") + choice;
    if (value == default_value && entry.default_text.empty()) entry.default_text = choice;
  }
  entry.assign = [name = entry.name, member, named](const Options& options, Settings& settings) {
    const std::string& text = options.get_string(name);
    for (const auto& [choice, value] : named)
      if (choice == text) {
        settings.*member = value;
        return Status::success();
      }
    throw std::logic_error("option '" + name + "' is not one of its choices: " + text);  // the loader checked them
  };
  return OptionDeclaration<Settings, E>(std::move(entry));
}

/// A file the pipeline names; the loader makes a relative one absolute against the pipeline file.
template <typename Settings>
OptionDeclaration<Settings, std::string> path_option(const char* name, std::string Settings::*member,
                                                     const char* default_value, const char* doc) {
  OptionDeclaration<Settings, std::string> declaration = option(name, member, default_value, doc);
  OptionEntry<Settings> entry = std::move(declaration);
  entry.type = "path";
  return OptionDeclaration<Settings, std::string>(std::move(entry));
}

/// A nested YAML mapping (default `{}`) that `parse` turns into the member; a parse failure is
/// its Status, whose message should name the node's place (MapOption::place).
template <typename Settings, typename M>
OptionDeclaration<Settings, M> map_option(const char* name, M Settings::*member,
                                          Status (*parse)(const MapOption& given, M& member), const char* doc) {
  OptionEntry<Settings> entry(name, "map", "{}", doc);
  entry.assign = [name = entry.name, member, parse](const Options& options, Settings& settings) {
    return parse(options.get_map(name), settings.*member);
  };
  return OptionDeclaration<Settings, M>(std::move(entry));
}

/// The declared options of one plugin: its manifest's tables, and the assignment of every member.
/// Keep it in a function-local static (the manifest points into it); it cannot be copied.
template <typename Settings>
class OptionTable {
public:
  OptionTable(std::initializer_list<OptionEntry<Settings>> entries) : entries_(entries) {
    for (const OptionEntry<Settings>& entry : entries_) {
      specs_.push_back({entry.name.c_str(), entry.type.c_str(), entry.default_text.c_str(), entry.doc.c_str()});
      limits_.push_back({entry.has_minimum ? entry.minimum.c_str() : nullptr,
                         entry.has_maximum ? entry.maximum.c_str() : nullptr, entry.flags,
                         entry.choices.empty() ? nullptr : entry.choices.c_str()});
    }
  }
  OptionTable(const OptionTable&) = delete;
  OptionTable& operator=(const OptionTable&) = delete;

  const TesseraOptionSpec* specs() const { return specs_.data(); }
  const TesseraOptionLimits* limits() const { return limits_.data(); }
  std::uint32_t size() const { return static_cast<std::uint32_t>(specs_.size()); }

  /// Sets every declared member from `options` (checked by the loader, defaults filled in);
  /// the first failure of a map option's parser is returned.
  Status assign(const Options& options, Settings& settings) const {
    for (const OptionEntry<Settings>& entry : entries_)
      if (Status status = entry.assign(options, settings); !status.ok) return status;
    return Status::success();
  }

private:
  std::vector<OptionEntry<Settings>> entries_;
  std::vector<TesseraOptionSpec> specs_;
  std::vector<TesseraOptionLimits> limits_;
};

/// A manifest whose options, with their ranges and choices, come from `options`.
template <typename Settings>
TesseraPluginManifest make_manifest(std::uint32_t kind, const char* name, const char* version, const char* summary,
                                    const OptionTable<Settings>& options, const char* required_facts,
                                    const char* provided_facts, PluginObject* (*create)() noexcept) {
  TesseraPluginManifest manifest = make_manifest(kind, name, version, summary, required_facts, provided_facts, create);
  manifest.options = options.specs();
  manifest.option_count = options.size();
  manifest.option_limits = options.limits();
  return manifest;
}

}  // namespace tessera
