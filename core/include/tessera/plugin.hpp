// The plugin ABI: the one exported entry point, its manifest, and the base of plugin objects.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include <boost/config.hpp>
#include <boost/dll/alias.hpp>
#include <boost/version.hpp>

#include "tessera/diagnostic.hpp"
#include "tessera/options.hpp"
#include "tessera/version.hpp"

#define TESSERA_STRINGIFY_(x) #x
#define TESSERA_STRINGIFY(x) TESSERA_STRINGIFY_(x)
/// The ABI tag of the translation unit that expands it; host and plugin must agree.
#define TESSERA_ABI_TAG                                                                                    \
  "gcc-" TESSERA_STRINGIFY(__GNUC__) "." TESSERA_STRINGIFY(__GNUC_MINOR__) "/cxx11abi-" TESSERA_STRINGIFY( \
      _GLIBCXX_USE_CXX11_ABI) "/boost-" TESSERA_STRINGIFY(BOOST_VERSION) "/core-" TESSERA_CORE_VERSION_STRING

namespace tessera {

/// Base of every object a plugin creates. The host names it and configures it once.
class PluginObject {
public:
  virtual ~PluginObject();
  const std::string& plugin_name() const { return plugin_name_; }
  /// Receives the validated options (defaults filled in) once, before any other call.
  virtual Status configure(const Options& options);

private:
  friend class PluginHost;
  friend class IsolatedScheduler;  // names itself after the plugin it runs in a child process
  std::string plugin_name_;
};

}  // namespace tessera

extern "C" {

enum TesseraPluginKind : std::uint32_t {
  TESSERA_PLUGIN_PASS = 1,
  TESSERA_PLUGIN_COST_MODEL = 2,
  TESSERA_PLUGIN_EXCHANGE_SCHEDULER = 3,
};

/// One declared option. `type` is "bool", "int", "float", "string", "path" (API 1.1: a
/// file the pipeline names, relative to the pipeline file), "map" (2.0) or "enum" (2.1: one of
/// the names in its TesseraOptionLimits); `default_value` is its YAML text.
struct TesseraOptionSpec {
  const char* name;
  const char* type;
  const char* default_value;
  const char* doc;
};

/// Bits of TesseraOptionLimits::flags: a bound the value may not equal.
enum : std::uint32_t { TESSERA_OPTION_MINIMUM_EXCLUDED = 1, TESSERA_OPTION_MAXIMUM_EXCLUDED = 2 };

/// API 2.1: what an option accepts beyond its type, at the same index as its TesseraOptionSpec.
/// The loader refuses a value outside it with the pipeline's file:line:column and these limits.
struct TesseraOptionLimits {
  const char* minimum;  ///< int or float: YAML number text; null = unbounded below
  const char* maximum;  ///< null = unbounded above
  std::uint32_t flags;  ///< TESSERA_OPTION_MINIMUM_EXCLUDED | TESSERA_OPTION_MAXIMUM_EXCLUDED
  const char* choices;  ///< "enum": the names it accepts, separated by '|'; null otherwise
};

/// Plain data returned by the entry point. Append fields only (and bump the minor).
struct TesseraPluginManifest {
  std::uint32_t struct_size;
  std::uint32_t api_major;
  std::uint32_t api_minor;
  const char* abi_tag;
  std::uint32_t kind;  ///< a TesseraPluginKind
  const char* name;    ///< kebab-case, unique among loaded plugins
  const char* version;
  const char* summary;  ///< one line
  const TesseraOptionSpec* options;
  std::uint32_t option_count;
  const char* required_facts;  ///< passes: comma-separated facts needed, e.g. "plan,storage"
  const char* provided_facts;  ///< passes: comma-separated facts made
  /// Creates the plugin's object (a Pass, CostModel or ExchangeScheduler); null on failure.
  tessera::PluginObject* (*create)() noexcept;
  /// API 2.1: `option_count` limits, one per option, or null (no option has limits).
  const TesseraOptionLimits* option_limits;
};

/// A 2.0 manifest ends before `option_limits`; the host still loads one (fields are appended).
#define TESSERA_MANIFEST_SIZE_2_0 offsetof(TesseraPluginManifest, option_limits)

/// Signature of the exported entry point.
typedef const TesseraPluginManifest* TesseraPluginEntry() noexcept;

}  // extern "C"

namespace tessera {

/// Name of the exported alias the host looks up.
inline constexpr const char* kPluginEntrySymbol = "tessera_plugin_manifest";

/// Fills the fixed fields of a manifest from this translation unit's build.
template <std::size_t N>
constexpr TesseraPluginManifest make_manifest(std::uint32_t kind, const char* name, const char* version,
                                              const char* summary, const TesseraOptionSpec (&options)[N],
                                              const char* required_facts, const char* provided_facts,
                                              PluginObject* (*create)() noexcept) {
  return TesseraPluginManifest{sizeof(TesseraPluginManifest),
                               kPluginApiMajor,
                               kPluginApiMinor,
                               TESSERA_ABI_TAG,
                               kind,
                               name,
                               version,
                               summary,
                               options,
                               static_cast<std::uint32_t>(N),
                               required_facts,
                               provided_facts,
                               create,
                               nullptr};
}

/// For plugins without options.
inline constexpr TesseraOptionSpec kNoOptions[1] = {{nullptr, nullptr, nullptr, nullptr}};
constexpr TesseraPluginManifest make_manifest(std::uint32_t kind, const char* name, const char* version,
                                              const char* summary, const char* required_facts,
                                              const char* provided_facts, PluginObject* (*create)() noexcept) {
  return TesseraPluginManifest{sizeof(TesseraPluginManifest),
                               kPluginApiMajor,
                               kPluginApiMinor,
                               TESSERA_ABI_TAG,
                               kind,
                               name,
                               version,
                               summary,
                               nullptr,
                               0,
                               required_facts,
                               provided_facts,
                               create,
                               nullptr};
}

/// Creates a T with `new`, turning any exception into null (the host reports it).
template <typename T>
PluginObject* create_plugin_object() noexcept {
  try {
    return new T();
  } catch (...) {
    return nullptr;
  }
}

/// Wall time spent inside cost-model and scheduler calls by this process so far, summed over
/// threads (a call made inside another counts once); the pass manager reads it around passes.
struct PluginCallTotals {
  std::uint64_t cost_model_ns = 0, cost_model_calls = 0;
  std::uint64_t scheduler_ns = 0, scheduler_calls = 0;
};
PluginCallTotals plugin_call_totals();

}  // namespace tessera

/// Exports `manifest_function` (extern "C", noexcept, returning const TesseraPluginManifest*)
/// as the plugin's one entry point.
#define TESSERA_PLUGIN(manifest_function) BOOST_DLL_ALIAS(manifest_function, tessera_plugin_manifest)
