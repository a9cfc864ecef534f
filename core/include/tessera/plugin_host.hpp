// Finds, loads and checks plugin libraries, and creates configured plugin objects.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "tessera/options.hpp"
#include "tessera/plugin.hpp"

namespace tessera {

class Pass;
class CostModel;
class ExchangeScheduler;

enum class PluginKind : std::uint32_t {
  pass = TESSERA_PLUGIN_PASS,
  cost_model = TESSERA_PLUGIN_COST_MODEL,
  exchange_scheduler = TESSERA_PLUGIN_EXCHANGE_SCHEDULER,
};
const char* plugin_kind_name(PluginKind);

/// A loaded, checked plugin library. Its library stays loaded until the process exits.
struct PluginInfo {
  std::string name;
  std::string version;
  std::string summary;
  std::string file;
  std::string abi_tag;
  PluginKind kind = PluginKind::pass;
  std::uint32_t api_major = 0, api_minor = 0;
  std::vector<OptionSpec> options;
  std::vector<std::string> required_facts, provided_facts;
  const TesseraPluginManifest* manifest = nullptr;
};

/// The SHA-256 of a file's bytes as 64 lower-case hex digits. Throws Error if unreadable.
std::string file_sha256(const std::string& path);

class PluginHost {
public:
  PluginHost();
  ~PluginHost();
  PluginHost(const PluginHost&) = delete;
  PluginHost& operator=(const PluginHost&) = delete;

  /// Loads every shared library (*.so) in `directory`. Throws Error on a library that
  /// fails to load (with dlerror), lacks the entry point, has another API major, a newer
  /// minor, another ABI tag, a bad manifest, or a name already loaded (naming both files).
  /// A directory already scanned is skipped. Refuses (Error naming the path, the reason and
  /// `chmod go-w`) a directory, or a library file or its folder, writable by group or others.
  void load_directory(const std::string& directory);
  /// Loads one library file, with the same checks.
  const PluginInfo& load_file(const std::string& file);
  /// Loads the directories listed in TESSERA_PLUGIN_PATH (colon-separated), if set.
  void load_environment_paths();
  /// Pins plugin `name` to a SHA-256 digest. A library file named after it (NAME.so) is
  /// hashed before it is loaded and refused on a mismatch (Error prefixed with `place`), so
  /// its code never runs; a library declaring the name under another file name is checked
  /// by resolve_pipeline once loaded.
  void pin(const std::string& name, const std::string& sha256, const std::string& place);

  const PluginInfo* find(const std::string& name) const;
  std::vector<const PluginInfo*> plugins() const;  ///< sorted by kind, then name
  /// "unknown exchange scheduler 'gredy'; did you mean 'greedy'? available: a, b".
  std::string unknown_plugin_message(const std::string& name, PluginKind kind) const;

  /// Checks `given` against the plugin's declared options and fills in defaults. Throws
  /// Error (prefixed with `place`, e.g. "file:3:5") on an unknown name or a wrong type.
  Options resolve_options(const PluginInfo& plugin, const Options& given,
                          const std::string& place) const;

  /// Creates and configures the plugin's object; throws PluginError on failure.
  std::unique_ptr<Pass> create_pass(const PluginInfo& plugin, const Options& options) const;
  std::unique_ptr<CostModel> create_cost_model(const PluginInfo& plugin,
                                               const Options& options) const;
  std::unique_ptr<ExchangeScheduler> create_scheduler(const PluginInfo& plugin,
                                                      const Options& options) const;

private:
  std::unique_ptr<PluginObject> create(const PluginInfo& plugin, const Options& options) const;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera
