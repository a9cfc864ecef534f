// The plugin host: loads plugin libraries with Boost.DLL, checks manifests, creates objects.
#include "tessera/plugin_host.hpp"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <boost/dll/shared_library.hpp>
#include <fmt/format.h>
#include <openssl/evp.h>
#include <spdlog/spdlog.h>
#include <xxhash.h>

#include "tessera/cost_model.hpp"
#include "tessera/isolation.hpp"
#include "tessera/log.hpp"
#include "tessera/output_file.hpp"
#include "tessera/pass.hpp"
#include "tessera/scheduler.hpp"
#include "tessera/strict_yaml.hpp"

namespace fs = std::filesystem;

namespace tessera {

const char* plugin_kind_name(PluginKind kind) {
  switch (kind) {
    case PluginKind::pass:
      return "pass";
    case PluginKind::cost_model:
      return "cost model";
    case PluginKind::exchange_scheduler:
      return "exchange scheduler";
  }
  return "unknown kind";
}

namespace {

// Libraries stay loaded until the process exits: objects, type info and exceptions made by
// plugin code must never outlive its code. Deliberately never destroyed.
std::vector<boost::dll::shared_library>& resident_libraries() {
  static auto* libraries = new std::vector<boost::dll::shared_library>();
  return *libraries;
}

std::string loader_message(const std::string& file) {
  // Boost.DLL reports a generic error code; ask the loader itself for its reason.
  void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle) return "loaded on retry";
  const char* message = dlerror();
  return message ? message : "unknown loader error";
}

// A library the ELF checks refuse: skipped with a warning when found by a folder scan.
class UnloadableLibrary : public Error {
public:
  using Error::Error;
};

#if defined(__x86_64__)
constexpr std::uint16_t kHostMachine = EM_X86_64;
constexpr const char* kHostArch = "x86-64";
#elif defined(__aarch64__)
constexpr std::uint16_t kHostMachine = EM_AARCH64;
constexpr const char* kHostArch = "aarch64";
#else
#error "Tessera's plugin host knows the ELF machine of x86-64 and aarch64 builds only"
#endif
static_assert(sizeof(void*) == 8, "the plugin host checks for 64-bit (ELFCLASS64) libraries");
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the plugin host checks for little-endian (ELFDATA2LSB) libraries"
#endif

std::string machine_name(std::uint16_t machine) {
  switch (machine) {
    case EM_X86_64:
      return "x86-64";
    case EM_AARCH64:
      return "aarch64";
    case EM_386:
      return "i386";
    case EM_ARM:
      return "arm";
    case EM_RISCV:
      return "riscv";
    case EM_PPC64:
      return "ppc64";
    case EM_S390:
      return "s390";
    case EM_MIPS:
      return "mips";
    default:
      return "an unknown machine";
  }
}

// Reads the ELF header, program headers and section header extent of `file` before dlopen, so
// a file that is not a 64-bit little-endian shared library for this machine, or is cut short
// (which makes the loader SIGBUS when it touches a mapped page past the end), is refused with
// a message naming it. Throws UnloadableLibrary.
void check_elf_library(const std::string& file) {
  // A FIFO would block the read below (and dlopen) forever, a device would never end.
  if (struct stat info{}; ::stat(file.c_str(), &info) == 0 && !S_ISREG(info.st_mode))
    throw UnloadableLibrary(file +
                            ": not a regular file (a named pipe or a device would block or never end); give "
                            "a shared library");
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error(file + ": cannot read the plugin library: " + std::strerror(errno));
  in.seekg(0, std::ios::end);
  const std::uint64_t size = static_cast<std::uint64_t>(in.tellg());
  in.seekg(0);
  unsigned char ident[EI_NIDENT] = {};
  in.read(reinterpret_cast<char*>(ident), EI_NIDENT);
  if (static_cast<std::uint64_t>(in.gcount()) < SELFMAG || std::memcmp(ident, ELFMAG, SELFMAG) != 0)
    throw UnloadableLibrary(file + ": not an ELF file");
  const auto truncated = [&](std::uint64_t end) {
    return UnloadableLibrary(file + ": truncated: its segments end at byte " + std::to_string(end) +
                             " but the file has " + std::to_string(size) + " bytes; rebuild or reinstall it");
  };
  if (ident[EI_CLASS] != ELFCLASS64)
    throw UnloadableLibrary(file + ": not a shared library for this machine: it is a " +
                            (ident[EI_CLASS] == ELFCLASS32 ? std::string("32-bit") : "unknown-class") +
                            " ELF file, this tessera is 64-bit " + kHostArch);
  if (ident[EI_DATA] != ELFDATA2LSB)
    throw UnloadableLibrary(file + ": not a shared library for this machine: it is a " +
                            (ident[EI_DATA] == ELFDATA2MSB ? std::string("big-endian") : "unknown-byte-order") +
                            " ELF file, this tessera is little-endian " + kHostArch);
  if (size < sizeof(Elf64_Ehdr)) throw truncated(sizeof(Elf64_Ehdr));
  Elf64_Ehdr header;
  in.seekg(0);
  in.read(reinterpret_cast<char*>(&header), sizeof header);
  if (!in) throw truncated(sizeof(Elf64_Ehdr));
  if (header.e_type != ET_DYN)
    throw UnloadableLibrary(file + ": not a shared library: ELF type " + std::to_string(header.e_type) +
                            (header.e_type == ET_EXEC  ? " (an executable)"
                             : header.e_type == ET_REL ? " (an object file)"
                                                       : "") +
                            ", a plugin must be ET_DYN (link it with -shared)");
  if (header.e_machine != kHostMachine)
    throw UnloadableLibrary(file + ": not a shared library for this machine: built for " +
                            machine_name(header.e_machine) + " (e_machine " + std::to_string(header.e_machine) +
                            "), this tessera is " + kHostArch);
  // 64-bit sums of 16-bit counts and sizes with 64-bit offsets: check the offset first.
  const auto table_end = [](std::uint64_t offset, std::uint64_t count, std::uint64_t entry) {
    const std::uint64_t bytes = count * entry;  // < 2^32
    return offset > UINT64_MAX - bytes ? UINT64_MAX : offset + bytes;
  };
  if (header.e_phnum > 0 && header.e_phentsize < sizeof(Elf64_Phdr))
    throw UnloadableLibrary(file + ": not a valid ELF file: program header entries of " +
                            std::to_string(header.e_phentsize) + " bytes");
  const std::uint64_t ph_end = table_end(header.e_phoff, header.e_phnum, header.e_phentsize);
  const std::uint64_t sh_end = table_end(header.e_shoff, header.e_shnum, header.e_shentsize);
  std::uint64_t end = std::max(ph_end, sh_end);
  if (end <= size) {  // the program headers are all in the file: check every loaded segment
    for (std::uint16_t i = 0; i < header.e_phnum; ++i) {
      Elf64_Phdr segment;
      in.seekg(static_cast<std::streamoff>(header.e_phoff + std::uint64_t{i} * header.e_phentsize));
      in.read(reinterpret_cast<char*>(&segment), sizeof segment);
      if (!in) throw truncated(ph_end);
      if (segment.p_type == PT_LOAD) end = std::max(end, table_end(segment.p_offset, 1, segment.p_filesz));
    }
  }
  if (end > size) throw truncated(end);
}

std::vector<std::string> split_facts(const char* text) {
  std::vector<std::string> facts;
  if (!text) return facts;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (!item.empty()) facts.push_back(item);
  }
  return facts;
}

bool is_kebab_case(const std::string& name) {
  if (name.empty() || !std::islower(static_cast<unsigned char>(name.front()))) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '-';
  });
}

// Converts option text (YAML scalar or manifest default) to the declared type.
bool parse_option(const std::string& text, OptionType type, OptionValue& value) {
  switch (type) {
    case OptionType::boolean: {
      bool b;
      if (!yaml::parse_bool(text, b)) return false;
      value = b;
      return true;
    }
    case OptionType::integer: {
      std::int64_t i;
      if (!yaml::parse_int(text, i)) return false;
      value = i;
      return true;
    }
    case OptionType::number: {
      double d;
      if (!yaml::parse_number(text, d)) return false;
      value = d;
      return true;
    }
    case OptionType::string:
    case OptionType::path:
    case OptionType::choice:
      value = text;
      return true;           // a choice is checked against the names later
    case OptionType::map: {  // a manifest default such as "{}"; the pipeline gives a YAML mapping
      try {
        const YAML::Node node = YAML::Load(text);
        if (!node.IsMap()) return false;
        value = MapOption{yaml::flow_layout(node), "", 0};
        return true;
      } catch (const YAML::Exception&) {
        return false;
      }
    }
  }
  return false;
}

// The OptionValue alternative that holds a value of `type`.
std::size_t option_value_index(OptionType type) {
  switch (type) {
    case OptionType::boolean:
      return 0;
    case OptionType::integer:
      return 1;
    case OptionType::number:
      return 2;
    case OptionType::string:
    case OptionType::path:
    case OptionType::choice:
      return 3;
    case OptionType::map:
      return 4;
  }
  return 0;
}

// Reads an option's TesseraOptionLimits (API 2.1) into `spec`, whose type is known. Throws Error
// prefixed with `where` on limits that do not fit the type.
void parse_option_limits(const TesseraOptionLimits& limits, OptionSpec& spec, const std::string& where) {
  const bool numeric = spec.type == OptionType::integer || spec.type == OptionType::number;
  for (auto [text, bound] : {std::pair{limits.minimum, &spec.minimum}, std::pair{limits.maximum, &spec.maximum}}) {
    if (!text) continue;
    OptionValue value;
    if (!numeric || !parse_option(text, spec.type, value))
      throw Error(where + " has bound '" + text + "', which is not a " + option_type_name(spec.type) +
                  " (only int and float options have ranges)");
    *bound = value;
  }
  spec.minimum_excluded = spec.minimum && (limits.flags & TESSERA_OPTION_MINIMUM_EXCLUDED);
  spec.maximum_excluded = spec.maximum && (limits.flags & TESSERA_OPTION_MAXIMUM_EXCLUDED);
  if (limits.choices) {
    if (spec.type != OptionType::choice)
      throw Error(where + " has choices but is of type " + option_type_name(spec.type) + " (declare it as an enum)");
    std::stringstream names(limits.choices);
    for (std::string name; std::getline(names, name, '|');) {
      if (name.empty() || std::find(spec.choices.begin(), spec.choices.end(), name) != spec.choices.end())
        throw Error(where + " has an empty or repeated choice in '" + limits.choices + "'");
      spec.choices.push_back(name);
    }
  }
}

bool parse_option_type(const std::string& text, OptionType& type) {
  if (text == "bool") type = OptionType::boolean;
  else if (text == "int") type = OptionType::integer;
  else if (text == "float") type = OptionType::number;
  else if (text == "string") type = OptionType::string;
  else if (text == "path") type = OptionType::path;
  else if (text == "map") type = OptionType::map;
  else if (text == "enum") type = OptionType::choice;
  else return false;
  return true;
}

// The login name, or the number for a uid without one (a file unpacked from elsewhere).
std::string user_name(uid_t uid) {
  const passwd* entry = ::getpwuid(uid);
  return entry ? entry->pw_name : std::to_string(uid);
}

// OpenSSH StrictModes for plugins, which are native code run with the compiler's rights: the
// library or scanned folder at `path` (canonical) and every folder above it up to / must be
// owned by us or root and not writable by group or others, or another user could swap in
// code that runs as us. A sticky folder (like /tmp) is accepted for a component below it,
// whose owner alone can rename or replace it there (and that owner was checked one step
// before); it is never accepted as the folder that is scanned, where anyone could drop in a
// new library. `what` is "plugin library" or "plugin folder".
void check_trusted_path(const fs::path& path, const char* what, const char* refusing = "refusing to load plugins") {
  const uid_t me = ::geteuid();
  fs::path below;  // the component just checked; empty while checking `path` itself
  for (fs::path current = path;; below = current, current = current.parent_path()) {
    struct stat info {};
    if (::stat(current.c_str(), &info) != 0) {
      if (below.empty()) return;  // missing: the loader reports it with its own reason
      throw Error(fmt::format("{}: {}: cannot check the folder above {} ({})", current.string(), refusing,
                              path.string(), std::strerror(errno)));
    }
    const std::string role = below.empty() ? std::string("the ") + what
                             : below == path && std::string(what) == "plugin library"
                                 ? std::string("the plugin folder")
                                 : "the folder above " + path.string();
    if (info.st_uid != me && info.st_uid != 0)
      throw Error(
          fmt::format("{}: {}: {} is owned by {}, not by you ({}) or root, so that user "
                      "could replace the code the compiler runs; fix: chown {} {} (or move the plugins to a "
                      "folder you own)",
                      current.string(), refusing, role, describe_user(info.st_uid), describe_user(me), user_name(me),
                      current.string()));
    const bool sticky = (info.st_mode & S_ISVTX) != 0;
    if ((info.st_mode & (S_IWGRP | S_IWOTH)) != 0 && !(sticky && S_ISDIR(info.st_mode) && !below.empty())) {
      const char* who = (info.st_mode & S_IWGRP) && (info.st_mode & S_IWOTH) ? "group and others"
                        : (info.st_mode & S_IWGRP)                           ? "its group"
                                                                             : "others";
      throw Error(
          fmt::format("{}: {}: {} is writable by {} (mode {:04o}), so another user "
                      "could replace the code the compiler runs; fix: chmod go-w {}",
                      current.string(), refusing, role, who, info.st_mode & 07777, current.string()));
    }
    if (current == current.root_path()) return;
  }
}

// Plugin folders named relative to the current folder would load whatever that folder holds
// when the compiler runs (`.`, or an empty entry in a colon list).
void check_absolute_plugin_path(const std::string& directory, const std::string& origin) {
  if (directory.empty())
    throw Error(origin +
                ": empty plugin path entry, which would mean the current folder; remove it or give an "
                "absolute folder");
  if (fs::path(directory).is_relative())
    throw Error(origin + ": plugin path '" + directory +
                "' is relative, so it would load whatever the current folder "
                "holds; give an absolute folder (for example " +
                fs::weakly_canonical(fs::absolute(directory)).string() + ")");
}

// Where libraries that loaded cleanly in a child are remembered (GStreamer's registry, in
// small), so each compile does not load every library in a child again. One empty file per
// library sha256 and host: only successes, only in a folder the user alone can write.
class LoadedLibraryCache {
public:
  explicit LoadedLibraryCache(const PluginLoadLimits& limits) {
    const char* setting = std::getenv("TESSERA_PLUGIN_LOAD_CACHE");
    if (setting && std::string(setting) == "off") return;
    const char* cache = std::getenv("XDG_CACHE_HOME");
    const char* home = std::getenv("HOME");
    if (cache && *cache && fs::path(cache).is_absolute()) folder_ = fs::path(cache) / "tessera/loaded-plugins";
    else if (home && *home && fs::path(home).is_absolute()) folder_ = fs::path(home) / ".cache/tessera/loaded-plugins";
    else return;
    const bool existed = fs::exists(folder_);
    try {
      const OwnedFolder made(folder_.string(), "the plugin cache folder", 0700);  // a new one is ours alone
      // A folder another user could fill would vouch for their code.
      check_trusted_path(fs::canonical(folder_), "plugin cache folder",
                         "not remembering which plugin libraries load cleanly");
    } catch (const Error& e) {
      auto log = logger("tessera.plugins");
      if (existed) log->warn("not remembering which plugin libraries load cleanly: {}", e.what());
      else log->debug("not remembering which plugin libraries load cleanly: {}", e.what());  // no writable home
      folder_.clear();
      return;
    }
    host_ = fmt::format("{}|{}|{}|{}|{}", abi_tag(), file_identity(core_library_file()),
                        file_identity(find_plugin_host_binary()), limits.time_limit_ms, limits.memory_limit_mb);
  }
  bool holds(const std::string& file) const {
    std::error_code ec;
    return !folder_.empty() && fs::exists(folder_ / entry(file), ec);
  }
  void remember(const std::string& file) const {
    if (folder_.empty()) return;
    const fs::path path = folder_ / entry(file);
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) ::close(fd);
    // Every rebuild adds entries; past a few thousand, start again (it costs one round of children).
    std::error_code ec;
    std::size_t entries = 0;
    for (auto it = fs::directory_iterator(folder_, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
      ++entries;
    if (entries > kMaxEntries)
      for (auto it = fs::directory_iterator(folder_, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
        if (it->path() != path) fs::remove(it->path(), ec);
  }

private:
  // The library's bytes and the host that loaded them: a rebuilt core or plugin is loaded again.
  std::string entry(const std::string& file) const {
    return file_sha256(file) + "-" + fmt::format("{:016x}", XXH64(host_.data(), host_.size(), 0));
  }
  static std::string core_library_file() {
    Dl_info info{};
    return ::dladdr(reinterpret_cast<const void*>(&abi_tag), &info) && info.dli_fname ? info.dli_fname : "";
  }
  static std::string file_identity(const std::string& file) {
    struct stat info {};
    if (file.empty() || ::stat(file.c_str(), &info) != 0) return file;
    return fmt::format("{}:{}:{}:{}.{}", file, info.st_ino, info.st_size, info.st_mtim.tv_sec, info.st_mtim.tv_nsec);
  }
  static constexpr std::size_t kMaxEntries = 4096;
  fs::path folder_;
  std::string host_;
};

}  // namespace

std::string file_sha256(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot read the file to compute its sha256");
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> context(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  if (!context || EVP_DigestInit_ex(context.get(), EVP_sha256(), nullptr) != 1)
    throw Error(path + ": OpenSSL could not start a sha256 digest");
  std::vector<char> buffer(1 << 16);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    if (in.gcount() > 0 && EVP_DigestUpdate(context.get(), buffer.data(), static_cast<std::size_t>(in.gcount())) != 1)
      throw Error(path + ": OpenSSL failed while hashing the file");
  }
  if (in.bad()) throw Error(path + ": read error while computing its sha256");
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_DigestFinal_ex(context.get(), digest, &length) != 1)
    throw Error(path + ": OpenSSL failed to finish the sha256");
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

struct PluginHost::Impl {
  std::map<std::string, PluginInfo> by_name;
  std::map<std::string, std::string> loaded_files;  // canonical path -> plugin name
  std::vector<std::string> directories;             // canonical, in scan order
  struct Pin {
    std::string sha256, place;
  };
  std::map<std::string, Pin> pins;             // plugin name -> digest
  std::map<std::string, std::string> skipped;  // NAME.so stem -> why a folder scan skipped it
  PluginQuarantine quarantine;
  bool sandbox = true;
  std::optional<PluginLoadLimits> sandbox_limits;  // unset: the defaults (load_limits())

  PluginLoadLimits load_limits() {
    if (sandbox_limits) return *sandbox_limits;
    PluginLoadLimits limits;
    if (const char* value = std::getenv("TESSERA_PLUGIN_LOAD_TIME_LIMIT_MS"); value && *value) {
      std::int64_t ms = 0;
      if (!yaml::parse_int(value, ms) || ms <= 0 || std::uint64_t(ms) > kMaxTimeLimitMs)
        throw Error(std::string("TESSERA_PLUGIN_LOAD_TIME_LIMIT_MS=") + value +
                    ": not a number of milliseconds from 1 to " + std::to_string(kMaxTimeLimitMs) +
                    "; unset it or give one");
      limits.time_limit_ms = std::uint64_t(ms);
    }
    sandbox_limits = limits;
    return limits;
  }
  const LoadedLibraryCache& loaded_cache() {
    if (!cache) cache.emplace(load_limits());
    return *cache;
  }
  // Whether `file` (canonical) must still be loaded in a child before it is loaded here.
  bool needs_child_load(const std::string& file) {
    if (!sandbox || probed.count(file)) return false;
    if (!loaded_cache().holds(file)) return true;
    probed.insert(file);
    return false;
  }
  std::optional<LoadedLibraryCache> cache;
  // Files (canonical) whose child load succeeded: loading them here is what is left.
  std::set<std::string> probed;
  std::map<std::string, LibraryProbe> probes;  // the others, with what their child showed
};

PluginHost::PluginHost() : impl_(std::make_unique<Impl>()) {}
PluginHost::~PluginHost() = default;

void PluginHost::load_directory(const std::string& directory, const std::string& origin) {
  check_absolute_plugin_path(directory, origin);
  std::error_code ec;
  if (!fs::is_directory(directory, ec))
    throw Error(directory + ": plugin path is not a directory (check plugin_paths or TESSERA_PLUGIN_PATH)");
  const std::string canonical = fs::canonical(directory, ec).string();
  if (std::find(impl_->directories.begin(), impl_->directories.end(), canonical) != impl_->directories.end()) return;
  check_trusted_path(canonical, "plugin folder");
  impl_->directories.push_back(canonical);
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(canonical, ec))
    if (entry.path().extension() == ".so" && entry.is_regular_file()) files.push_back(entry.path());
  std::sort(files.begin(), files.end());  // deterministic order, deterministic errors
  // Not a library this tessera can open: the rest of the folder still loads; a pipeline (or
  // command) that names NAME gets this reason as its error (see skipped_library).
  auto skip = [&](const fs::path& file, const std::string& why) {
    logger("tessera.plugins")->warn("skipping {}", why);
    impl_->skipped.emplace(file.stem().string(), why);
  };
  // Checks that read the file alone first, then every library loaded in a child at once.
  std::vector<fs::path> loadable;
  std::vector<std::string> to_probe;
  for (const auto& file : files) {
    try {
      if (const std::string checked = check_before_loading(file.string()); !checked.empty()) {
        loadable.push_back(file);
        if (impl_->needs_child_load(checked)) to_probe.push_back(checked);
      }
    } catch (const UnloadableLibrary& e) {
      skip(file, e.what());
    }
  }
  const auto probing = std::chrono::steady_clock::now();
  const std::vector<LibraryProbe> probes = probe_plugin_libraries(to_probe, impl_->load_limits());
  if (!to_probe.empty())
    logger("tessera.plugins")
        ->debug(
            "loaded libraries in children first folder={} libraries={} elapsed_ms={}", canonical, to_probe.size(),
            std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - probing).count());
  for (std::size_t i = 0; i < to_probe.size(); ++i) {
    if (probes[i].outcome == LibraryProbe::Outcome::loaded) {
      impl_->probed.insert(to_probe[i]);
      impl_->loaded_cache().remember(to_probe[i]);
    } else {
      impl_->probes.emplace(to_probe[i], probes[i]);
    }
  }
  for (const auto& file : loadable) {
    try {
      load_file(file.string());
    } catch (const UnloadableLibrary& e) {
      skip(file, e.what());
    }
  }
}

const std::string* PluginHost::skipped_library(const std::string& name) const {
  auto it = impl_->skipped.find(name);
  return it == impl_->skipped.end() ? nullptr : &it->second;
}

void PluginHost::load_environment_paths() {
  const char* value = std::getenv("TESSERA_PLUGIN_PATH");
  if (!value) return;
  std::stringstream stream(value);
  std::string directory;
  while (std::getline(stream, directory, ':')) load_directory(directory, "TESSERA_PLUGIN_PATH");
  // getline drops a trailing empty entry ("/a:"), which also means the current folder.
  if (*value != '\0' && std::string(value).back() == ':') load_directory("", "TESSERA_PLUGIN_PATH");
}

void PluginHost::quarantine(PluginQuarantine quarantine) {
  std::error_code ec;
  quarantine.folder = fs::weakly_canonical(quarantine.folder, ec).string();
  for (auto& file : quarantine.allowed_files) file = fs::weakly_canonical(file, ec).string();
  impl_->quarantine = std::move(quarantine);
}

void PluginHost::pin(const std::string& name, const std::string& sha256, const std::string& place) {
  impl_->pins[name] = {sha256, place};
}

void PluginHost::set_load_sandbox(std::optional<PluginLoadLimits> limits) {
  impl_->sandbox = limits.has_value();
  impl_->sandbox_limits = limits;
}

std::string PluginHost::check_before_loading(const std::string& file_name) {
  std::error_code ec;
  const std::string file = fs::weakly_canonical(file_name, ec).string();
  if (impl_->loaded_files.count(file)) return "";

  // Checked before dlopen: loading runs the library's initialisers.
  if (const PluginQuarantine& quarantine = impl_->quarantine; !quarantine.folder.empty()) {
    const bool inside = file.rfind(quarantine.folder + "/", 0) == 0;  // both canonical
    if (inside && std::find(quarantine.allowed_files.begin(), quarantine.allowed_files.end(), file) ==
                      quarantine.allowed_files.end())
      throw Error(file + ": refusing to load a plugin library from inside " + quarantine.what + " " +
                  quarantine.folder + ", which may come from anyone; " + quarantine.fix + " " + file);
  }
  check_trusted_path(file, "plugin library");
  if (auto pinned = impl_->pins.find(fs::path(file).stem().string()); pinned != impl_->pins.end()) {
    const std::string actual = file_sha256(file);
    if (actual != pinned->second.sha256)
      throw Error(pinned->second.place + ": plugin '" + pinned->first + "' library " + file +
                  " does not match its sha256 pin: expected " + pinned->second.sha256 + ", actual " + actual +
                  " (refused before loading it; rebuild or reinstall the pinned library, or update the pin "
                  "after checking the new file)");
  }
  check_elf_library(file);  // a broken file gives a clean error here instead of SIGBUS or ENOENT in the loader
  return file;
}

const PluginInfo& PluginHost::load_file(const std::string& file_name) {
  std::error_code ec;
  if (auto it = impl_->loaded_files.find(fs::weakly_canonical(file_name, ec).string()); it != impl_->loaded_files.end())
    return impl_->by_name.at(it->second);
  const std::string file = check_before_loading(file_name);
  // Its initialisers run in a child first: a crash, hang, allocation or exit() costs that child.
  if (impl_->needs_child_load(file)) {
    if (!impl_->probes.count(file))
      impl_->probes.emplace(file, probe_plugin_libraries({file}, impl_->load_limits()).at(0));
    const LibraryProbe& probe = impl_->probes.at(file);
    if (probe.outcome == LibraryProbe::Outcome::failed) throw UnloadableLibrary(file + ": " + probe.message);
    if (probe.outcome == LibraryProbe::Outcome::refused) throw Error(probe.message);
    impl_->probed.insert(file);
    impl_->loaded_cache().remember(file);
  }
  boost::dll::shared_library library;
  library.load(file, ec, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
  if (ec) throw Error(file + ": cannot load plugin library: " + loader_message(file));
  if (!library.has(kPluginEntrySymbol))
    throw Error(file + ": not a Tessera plugin: it does not export '" + std::string(kPluginEntrySymbol) +
                "' (define it with TESSERA_PLUGIN(manifest_function))");
  TesseraPluginEntry& entry = library.get_alias<TesseraPluginEntry>(kPluginEntrySymbol);
  const TesseraPluginManifest* manifest = entry();
  if (!manifest) throw Error(file + ": the plugin's entry point returned no manifest");
  if (manifest->struct_size < TESSERA_MANIFEST_SIZE_2_0)
    throw Error(file + ": plugin manifest is " + std::to_string(manifest->struct_size) +
                " bytes, the host needs at least " + std::to_string(TESSERA_MANIFEST_SIZE_2_0) +
                " (rebuild the plugin against this Tessera SDK)");
  if (manifest->api_major != kPluginApiMajor)
    throw Error(file + ": wrong plugin API major version: plugin has " + std::to_string(manifest->api_major) + "." +
                std::to_string(manifest->api_minor) + ", host supports " + std::to_string(kPluginApiMajor) + "." +
                std::to_string(kPluginApiMinor) + " (rebuild the plugin against this Tessera SDK)");
  if (manifest->api_minor > kPluginApiMinor)
    throw Error(file + ": plugin needs a newer host: plugin API " + std::to_string(manifest->api_major) + "." +
                std::to_string(manifest->api_minor) + ", host supports up to " + std::to_string(kPluginApiMajor) + "." +
                std::to_string(kPluginApiMinor));
  const std::string plugin_abi = manifest->abi_tag ? manifest->abi_tag : "";
  if (plugin_abi != abi_tag())
    throw Error(file + ": ABI mismatch: plugin built as '" + plugin_abi + "', host is '" + abi_tag() +
                "' (rebuild the plugin with the same compiler, Boost and Tessera)");

  PluginInfo info;
  info.file = file;
  info.manifest = manifest;
  info.api_major = manifest->api_major;
  info.api_minor = manifest->api_minor;
  info.abi_tag = plugin_abi;
  info.name = manifest->name ? manifest->name : "";
  info.version = manifest->version ? manifest->version : "";
  info.summary = manifest->summary ? manifest->summary : "";
  if (!is_kebab_case(info.name))
    throw Error(file + ": plugin name '" + info.name + "' must be kebab-case (lower-case letters, digits, '-')");
  if (manifest->kind < TESSERA_PLUGIN_PASS || manifest->kind > TESSERA_PLUGIN_EXCHANGE_SCHEDULER)
    throw Error(file + ": plugin '" + info.name + "' declares unknown kind " + std::to_string(manifest->kind));
  info.kind = static_cast<PluginKind>(manifest->kind);
  if (!manifest->create) throw Error(file + ": plugin '" + info.name + "' has no factory");
  if (manifest->option_count > 0 && !manifest->options)
    throw Error(file + ": plugin '" + info.name + "' declares options but gives no list");
  // Limits came with API 2.1; a 2.0 manifest ends before the field.
  const TesseraOptionLimits* limits = manifest->api_minor >= 1 && manifest->struct_size >= sizeof(TesseraPluginManifest)
                                          ? manifest->option_limits
                                          : nullptr;
  for (std::uint32_t i = 0; i < manifest->option_count; ++i) {
    const TesseraOptionSpec& raw = manifest->options[i];
    if (!raw.name || !raw.type || !raw.default_value)
      throw Error(file + ": plugin '" + info.name + "' option " + std::to_string(i) + " lacks a name, type or default");
    const std::string where = file + ": plugin '" + info.name + "' option '" + raw.name + "'";
    OptionSpec spec;
    spec.name = raw.name;
    spec.doc = raw.doc ? raw.doc : "";
    if (!parse_option_type(raw.type, spec.type))
      throw Error(where + " has unknown type '" + raw.type + "' (bool, int, float, string, path, map or enum)");
    if (limits) parse_option_limits(limits[i], spec, where);
    if (spec.type == OptionType::choice && spec.choices.empty())
      throw Error(where + " is an enum without choices (declare it with tessera::option and its named choices)");
    if (!parse_option(raw.default_value, spec.type, spec.default_value))
      throw Error(where + " default '" + raw.default_value + "' is not a " + option_type_name(spec.type));
    if (std::string problem = option_limits_problem(spec, spec.default_value); !problem.empty())
      throw Error(where + " default " + problem);
    info.options.push_back(std::move(spec));
  }
  info.required_facts = split_facts(manifest->required_facts);
  info.provided_facts = split_facts(manifest->provided_facts);

  if (auto it = impl_->by_name.find(info.name); it != impl_->by_name.end())
    throw Error("duplicate plugin name '" + info.name + "': defined by " + it->second.file + " and by " + file +
                " (remove one from the plugin paths)");
  resident_libraries().push_back(std::move(library));
  impl_->loaded_files[file] = info.name;
  spdlog::debug("loaded plugin name={} file={}", info.name, file);
  return impl_->by_name.emplace(info.name, std::move(info)).first->second;
}

const PluginInfo* PluginHost::find(const std::string& name) const {
  auto it = impl_->by_name.find(name);
  return it == impl_->by_name.end() ? nullptr : &it->second;
}

std::vector<const PluginInfo*> PluginHost::plugins() const {
  std::vector<const PluginInfo*> list;
  for (const auto& [name, info] : impl_->by_name) list.push_back(&info);
  std::stable_sort(list.begin(), list.end(), [](auto* a, auto* b) { return a->kind < b->kind; });
  return list;
}

std::string PluginHost::unknown_plugin_message(const std::string& name, PluginKind kind) const {
  std::vector<std::string> same_kind;
  for (const auto& [n, info] : impl_->by_name)
    if (info.kind == kind) same_kind.push_back(n);
  if (const std::string* reason = skipped_library(name))
    return std::string("cannot load ") + plugin_kind_name(kind) + " '" + name + "': " + *reason;
  std::string message = std::string("unknown ") + plugin_kind_name(kind) + " '" + name + "'";
  if (const PluginInfo* other = find(name))
    return message + ": '" + name + "' is of kind " + plugin_kind_name(other->kind) + " (" + other->file + ")";
  if (auto near = yaml::nearest(name, same_kind); !near.empty()) message += "; did you mean '" + near + "'?";
  message += " available: ";
  for (std::size_t i = 0; i < same_kind.size(); ++i) message += (i ? ", " : "") + same_kind[i];
  if (same_kind.empty()) message += "none";
  message += " (searched:";
  for (const auto& d : impl_->directories) message += " " + d;
  if (impl_->directories.empty()) message += " no plugin paths";
  return message + ")";
}

Options PluginHost::resolve_options(const PluginInfo& plugin, const Options& given, const std::string& place) const {
  Options resolved;
  for (const auto& spec : plugin.options) {
    resolved.values[spec.name] = spec.default_value;
    resolved.places[spec.name] = place;
  }
  for (const auto& [name, value] : given.values) {
    // Each error points at the option's own line when the pipeline gave one.
    const std::string& option_place = given.places.count(name) ? given.places.at(name) : place;
    auto spec = std::find_if(plugin.options.begin(), plugin.options.end(), [&given_name = name](const OptionSpec& s) {
      return s.name == given_name;
    });  // clang 14: no binding captures
    if (spec == plugin.options.end()) {
      std::vector<std::string> names;
      for (const auto& s : plugin.options) names.push_back(s.name);
      std::string message = option_place + ": unknown option '" + name + "' for plugin '" + plugin.name + "'";
      if (auto near = yaml::nearest(name, names); !near.empty()) message += "; did you mean '" + near + "'?";
      message += " (options:";
      for (const auto& n : names) message += " " + n;
      if (names.empty()) message += " none";
      throw Error(message + ")");
    }
    OptionValue typed;
    const bool ok = std::holds_alternative<std::string>(value)
                        ? parse_option(std::get<std::string>(value), spec->type, typed)
                    : (spec->type == OptionType::number && std::holds_alternative<std::int64_t>(value))
                        ? (typed = static_cast<double>(std::get<std::int64_t>(value)), true)
                        : (value.index() == option_value_index(spec->type) && (typed = value, true));
    if (!ok)
      throw Error(option_place + ": option '" + name + "' of plugin '" + plugin.name + "' must be " +
                  (spec->type == OptionType::choice ? option_limits_text(*spec) : option_type_name(spec->type)) +
                  ", got '" + option_value_text(value) + "'");
    if (std::string problem = option_limits_problem(*spec, typed); !problem.empty())
      throw Error(option_place + ": option '" + name + "' of plugin '" + plugin.name + "' " + problem);
    resolved.values[name] = typed;
    resolved.places[name] = option_place;
  }
  return resolved;
}

std::unique_ptr<PluginObject> PluginHost::create(const PluginInfo& plugin, const Options& options) const {
  PluginObject* raw = plugin.manifest->create();
  if (!raw) throw PluginError(plugin.name, "its factory failed to create an object (" + plugin.file + ")");
  std::unique_ptr<PluginObject> object(raw);
  object->plugin_name_ = plugin.name;
  Status status = Status::success();
  try {
    status = object->configure(options);
  } catch (const std::exception& e) {
    throw PluginError(plugin.name, std::string("configure threw: ") + e.what());
  } catch (...) {
    throw PluginError(plugin.name, "configure threw an unknown exception");
  }
  if (!status.ok) {
    // A refusal worded as refuse_option() words it is reported where the pipeline gave the option.
    for (const OptionSpec& spec : plugin.options)
      if (status.message.rfind("option '" + spec.name + "'", 0) == 0 && options.places.count(spec.name))
        throw Error(options.places.at(spec.name) + ": plugin '" + plugin.name +
                    "' rejected its options: " + status.message);
    throw PluginError(plugin.name, "rejected its options: " + status.message);
  }
  return object;
}

static void check_kind(const PluginInfo& plugin, PluginKind kind) {
  if (plugin.kind != kind)
    throw PluginError(plugin.name, std::string("is of kind ") + plugin_kind_name(plugin.kind) + ", not " +
                                       plugin_kind_name(kind) + " (" + plugin.file + ")");
}

template <typename Interface>
static std::unique_ptr<Interface> downcast(std::unique_ptr<PluginObject> object, const PluginInfo& plugin,
                                           PluginKind kind) {
  auto* typed = dynamic_cast<Interface*>(object.get());
  if (!typed)
    throw PluginError(plugin.name, std::string("declares kind ") + plugin_kind_name(kind) +
                                       " but its factory made another kind of object (" + plugin.file + ")");
  object.release();
  return std::unique_ptr<Interface>(typed);
}

std::unique_ptr<Pass> PluginHost::create_pass(const PluginInfo& plugin, const Options& options) const {
  check_kind(plugin, PluginKind::pass);
  return downcast<Pass>(create(plugin, options), plugin, PluginKind::pass);
}
std::unique_ptr<CostModel> PluginHost::create_cost_model(const PluginInfo& plugin, const Options& options) const {
  check_kind(plugin, PluginKind::cost_model);
  return downcast<CostModel>(create(plugin, options), plugin, PluginKind::cost_model);
}
std::unique_ptr<ExchangeScheduler> PluginHost::create_scheduler(const PluginInfo& plugin,
                                                                const Options& options) const {
  check_kind(plugin, PluginKind::exchange_scheduler);
  return downcast<ExchangeScheduler>(create(plugin, options), plugin, PluginKind::exchange_scheduler);
}

}  // namespace tessera
