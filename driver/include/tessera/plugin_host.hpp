// Finds, loads and checks plugin libraries, and creates configured plugin objects.
#pragma once
#include <memory>
#include <optional>
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

/// Libraries the host refuses to open: any inside `folder` (e.g. a reproducer bundle, which may
/// come from another user) except the `allowed_files` the user named. `what` names the folder
/// ("the reproducer bundle"); `fix` is the advice the refusal ends with, followed by the file.
struct PluginQuarantine {
  std::string folder;
  std::vector<std::string> allowed_files;
  std::string what;
  std::string fix;
};

/// Limits of the child in which each library is loaded first (PluginHost::set_load_sandbox).
struct PluginLoadLimits {
  std::uint64_t time_limit_ms = 10000;  ///< TESSERA_PLUGIN_LOAD_TIME_LIMIT_MS overrides the default
  std::uint64_t memory_limit_mb = 4096;
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
  /// A directory already scanned is skipped. Refuses an empty or relative `directory` (Error
  /// prefixed with `origin`: "--plugin-path", "TESSERA_PLUGIN_PATH", "file:line:column").
  /// StrictModes, before anything is opened: the directory, each library and every folder
  /// above them up to / must be owned by the user or root and not writable by group or
  /// others; a sticky folder is accepted only above another component (Error naming the path,
  /// the reason and the fix, `chmod go-w` or `chown`).
  void load_directory(const std::string& directory, const std::string& origin = "plugin path");
  /// Loads one library file, with the same checks (its own folder may be sticky, like /tmp).
  const PluginInfo& load_file(const std::string& file);
  /// Loads the directories listed in TESSERA_PLUGIN_PATH (colon-separated), if set; an empty
  /// or relative entry is an Error naming the variable.
  void load_environment_paths();
  /// From now on, refuses to open any library the quarantine covers (Error naming the file).
  void quarantine(PluginQuarantine quarantine);
  /// Before a library is loaded in this process, it is loaded in a child first
  /// (probe_plugin_libraries, isolation.hpp), a folder's libraries all at once. A library whose
  /// child crashed, hung past `time_limit_ms`, allocated past `memory_limit_mb` or exited is
  /// never loaded here: load_file throws an Error saying what happened, load_directory skips
  /// it with a warning (skipped_library). nullopt loads directly (the child does so itself).
  void set_load_sandbox(std::optional<PluginLoadLimits> limits);
  /// Pins plugin `name` to a SHA-256 digest. A library file named after it (NAME.so) is
  /// hashed before it is loaded and refused on a mismatch (Error prefixed with `place`), so
  /// its code never runs; a library declaring the name under another file name is checked
  /// by resolve_pipeline once loaded.
  void pin(const std::string& name, const std::string& sha256, const std::string& place);

  /// Before dlopen, every library's ELF header is checked: ELF magic, 64-bit, little-endian,
  /// ET_DYN, this machine's e_machine, and no program header table, section header table or
  /// PT_LOAD segment past the end of the file (Error "FILE: not an ELF file", "FILE: not a
  /// shared library for this machine: ...", "FILE: truncated: ..."). load_file throws it;
  /// load_directory skips such a library with a warning and remembers why: the reason a
  /// scanned NAME.so was skipped, or nullptr. A pipeline that names NAME fails with it.
  const std::string* skipped_library(const std::string& name) const;
  const PluginInfo* find(const std::string& name) const;
  std::vector<const PluginInfo*> plugins() const;  ///< sorted by kind, then name
  /// "unknown exchange scheduler 'gredy'; did you mean 'greedy'? available: a, b".
  std::string unknown_plugin_message(const std::string& name, PluginKind kind) const;

  /// Checks `given` against the plugin's declared options (name, type, range, enum choice) and
  /// fills in defaults. Throws Error prefixed with the option's place in `given.places`, else
  /// `place` (e.g. "file:3:5"), naming the fix. The result's places: each given option's, and
  /// `place` for a default (so a plugin's refusal of it points at where the plugin is named).
  Options resolve_options(const PluginInfo& plugin, const Options& given, const std::string& place) const;

  /// Creates and configures the plugin's object; throws PluginError on failure, or Error at the
  /// option's place when configure refuses one as refuse_option() words it ("option 'NAME' ...").
  std::unique_ptr<Pass> create_pass(const PluginInfo& plugin, const Options& options) const;
  std::unique_ptr<CostModel> create_cost_model(const PluginInfo& plugin, const Options& options) const;
  std::unique_ptr<ExchangeScheduler> create_scheduler(const PluginInfo& plugin, const Options& options) const;

private:
  /// Quarantine, StrictModes, pin and ELF checks (nothing is loaded): the canonical file, or
  /// "" if it is loaded already.
  std::string check_before_loading(const std::string& file);
  std::unique_ptr<PluginObject> create(const PluginInfo& plugin, const Options& options) const;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera
