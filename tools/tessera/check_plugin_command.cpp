// `tessera check-plugin FILE`: loads one plugin library and runs a conformance battery for its
// kind, one PASS/FAIL line per check.
//
// Everything that runs plugin code runs in a forked child with a deadline: a plugin that
// crashes, hangs or calls exit() fails that one check with the reason, and the battery goes on.
// Checks that only read the library (its manifest, its ELF symbol and dependency tables) run in
// this process. The scheduler and cost-model batteries are the test kit's (tessera::testing,
// testing/), which plugins' own tests run in-process; this file runs them in children.
#include "check_plugin_command.hpp"

#include <cxxabi.h>
#include <elf.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tessera/cost_model.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/output_file.hpp"
#include "tessera/pass.hpp"
#include "tessera/plugin_host.hpp"
#include "tessera/scheduler.hpp"
#include "tessera/target.hpp"
#include "tessera/testing/battery.hpp"

namespace tessera::cli {
namespace {

using Clock = std::chrono::steady_clock;

using testing::CheckOutcome;

void write_all(int fd, const std::string& text) {
  std::size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the parent is gone; nothing left to tell
    written += static_cast<std::size_t>(n);
  }
}

// Runs `check` in a forked child and returns what it reported, or why it reported nothing.
CheckOutcome run_in_child(const std::function<CheckOutcome()>& check, unsigned timeout_s) {
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error(std::string("check-plugin: pipe failed: ") + std::strerror(errno));
  std::fflush(stdout);  // or the child would print our buffered lines again
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("check-plugin: fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    ::close(fds[0]);
    CheckOutcome outcome;
    try {
      outcome = check();
    } catch (const std::exception& e) {
      outcome = CheckOutcome::fail(e.what());
    } catch (...) {
      outcome = CheckOutcome::fail("an exception that is not a std::exception escaped");
    }
    write_all(fds[1], (outcome.passed ? "P" : "F") + outcome.detail);
    // No static destructors: the plugin's objects and libraries stay as they are.
    std::fflush(stdout);
    std::fflush(stderr);
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string message;
  bool timed_out = false;
  const auto deadline = Clock::now() + std::chrono::seconds(timeout_s);
  char buffer[4096];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd readable{fds[0], POLLIN, 0};
    const int ready = ::poll(&readable, 1, static_cast<int>(std::min<std::int64_t>(left, 1'000'000)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) continue;  // the deadline check above ends the wait
    if (ready < 0) break;
    const ssize_t n = ::read(fds[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // end of file: the child is done
    message.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  if (timed_out) return CheckOutcome::fail(fmt::format("did not finish within {} s and was killed", timeout_s));
  if (WIFSIGNALED(status))
    return CheckOutcome::fail(
        fmt::format("crashed with signal {} ({})", WTERMSIG(status), ::strsignal(WTERMSIG(status))));
  if (message.empty())
    return CheckOutcome::fail(fmt::format("plugin code ended the process (exit status {}) instead of returning",
                                          WIFEXITED(status) ? WEXITSTATUS(status) : -1));
  return {message[0] == 'P', message.substr(1)};
}

// Prints each check's line as it finishes and counts them; the kit's batteries report here.
class Battery {
public:
  explicit Battery(unsigned timeout_s) : timeout_s_(timeout_s) {}

  void record(const std::string& name, const CheckOutcome& outcome) {
    if (outcome.passed) {
      ++passed_;
      fmt::print("PASS {}{}\n", name, outcome.detail.empty() ? "" : "  [" + outcome.detail + "]");
    } else {
      ++failed_;
      fmt::print("FAIL {}: {}\n", name, outcome.detail);
    }
    std::fflush(stdout);
  }
  void run(const std::string& name, const std::function<CheckOutcome()>& check) {
    record(name, run_in_child(check, timeout_s_));
  }
  /// The kit's options that run each check in a child and print it here as it finishes.
  testing::BatteryOptions kit_options(const CheckPluginRequest& request, const std::optional<Target>& user_target) {
    testing::BatteryOptions options;
    options.budget_ms = request.budget_ms;
    options.extra_target = user_target;
    options.runner = [this](const std::function<CheckOutcome()>& check) { return run_in_child(check, timeout_s_); };
    options.on_result = [this](const testing::CheckResult& result) { record(result.name, result.outcome); };
    return options;
  }
  int passed() const { return passed_; }
  int failed() const { return failed_; }

private:
  unsigned timeout_s_;
  int passed_ = 0, failed_ = 0;
};

// ---- The library file itself: ELF dynamic symbols and needed libraries ----

struct DynamicTables {
  std::vector<std::string> exported;  ///< defined, global or weak, visible symbols
  std::vector<std::string> needed;    ///< DT_NEEDED entries
};

// Far past any plugin; a FIFO or a device is refused before it is read.
constexpr std::uint64_t kMaxLibraryBytes = std::uint64_t{1} << 30;

class ElfReader {
public:
  explicit ElfReader(const std::string& file) : file_(file) {
    bytes_ = read_bounded_file(file, "the library file", kMaxLibraryBytes);
  }

  DynamicTables read() const {
    const auto header = at<Elf64_Ehdr>(0);
    if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 || header.e_ident[EI_CLASS] != ELFCLASS64 ||
        header.e_ident[EI_DATA] != ELFDATA2LSB)
      throw Error(file_ + ": not a 64-bit little-endian ELF file");
    if (header.e_shentsize != sizeof(Elf64_Shdr)) throw Error(file_ + ": unexpected ELF section header size");
    std::vector<Elf64_Shdr> sections;
    for (std::size_t i = 0; i < header.e_shnum; ++i)
      sections.push_back(at<Elf64_Shdr>(header.e_shoff + i * sizeof(Elf64_Shdr)));
    DynamicTables tables;
    for (const Elf64_Shdr& section : sections) {
      if (section.sh_type != SHT_DYNSYM && section.sh_type != SHT_DYNAMIC) continue;
      if (section.sh_link >= sections.size()) throw Error(file_ + ": ELF section links a missing string table");
      const Elf64_Shdr& strings = sections[section.sh_link];
      if (section.sh_type == SHT_DYNSYM) {
        for (std::size_t offset = 0; offset + sizeof(Elf64_Sym) <= section.sh_size; offset += sizeof(Elf64_Sym)) {
          const auto symbol = at<Elf64_Sym>(section.sh_offset + offset);
          const unsigned bind = ELF64_ST_BIND(symbol.st_info);
          const unsigned visibility = ELF64_ST_VISIBILITY(symbol.st_other);
          if (symbol.st_shndx == SHN_UNDEF || symbol.st_name == 0) continue;
          if (bind != STB_GLOBAL && bind != STB_WEAK && bind != STB_GNU_UNIQUE) continue;
          if (visibility != STV_DEFAULT && visibility != STV_PROTECTED) continue;
          tables.exported.push_back(string_at(strings, symbol.st_name));
        }
      } else {
        for (std::size_t offset = 0; offset + sizeof(Elf64_Dyn) <= section.sh_size; offset += sizeof(Elf64_Dyn)) {
          const auto entry = at<Elf64_Dyn>(section.sh_offset + offset);
          if (entry.d_tag == DT_NULL) break;
          if (entry.d_tag == DT_NEEDED) tables.needed.push_back(string_at(strings, entry.d_un.d_val));
        }
      }
    }
    return tables;
  }

private:
  template <typename T>
  T at(std::uint64_t offset) const {
    if (offset > bytes_.size() || bytes_.size() - offset < sizeof(T))
      throw Error(file_ + ": truncated ELF file (a table points past its end)");
    T value;
    std::memcpy(&value, bytes_.data() + offset, sizeof(T));
    return value;
  }
  std::string string_at(const Elf64_Shdr& strings, std::uint64_t index) const {
    const std::uint64_t begin = strings.sh_offset + index;
    const std::uint64_t end = std::min<std::uint64_t>(strings.sh_offset + strings.sh_size, bytes_.size());
    if (begin >= end) throw Error(file_ + ": ELF string index out of range");
    const char* first = bytes_.data() + begin;
    return std::string(first, strnlen(first, end - begin));
  }

  std::string file_;
  std::string bytes_;
};

std::string demangled(const std::string& symbol) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> name(abi::__cxa_demangle(symbol.c_str(), nullptr, nullptr, &status),
                                              std::free);
  return status == 0 && name ? std::string(name.get()) : symbol;
}

CheckOutcome check_exports(const DynamicTables& tables) {
  std::vector<std::string> extra;
  bool has_entry = false;
  for (const auto& symbol : tables.exported) {
    if (symbol == kPluginEntrySymbol) has_entry = true;
    else extra.push_back(symbol);
  }
  if (!has_entry) return CheckOutcome::fail(std::string("does not export '") + kPluginEntrySymbol + "'");
  if (extra.empty()) return CheckOutcome::pass(std::string("only ") + kPluginEntrySymbol);
  std::vector<std::string> shown;
  for (std::size_t i = 0; i < std::min<std::size_t>(extra.size(), 3); ++i)
    shown.push_back("'" + demangled(extra[i]) + "'");
  return CheckOutcome::fail(fmt::format(
      "exports {} symbol(s) besides {} (e.g. {}); another plugin defining the same symbol would interpose it. "
      "Build with tessera_add_plugin() (hidden visibility and a version script keep only the entry point)",
      extra.size(), kPluginEntrySymbol, fmt::join(shown, ", ")));
}

CheckOutcome check_links_core(const DynamicTables& tables) {
  for (const auto& library : tables.needed)
    if (library.rfind("libtessera_core.so", 0) == 0) return CheckOutcome::pass("needs " + library);
  return CheckOutcome::fail(
      fmt::format("does not link libtessera_core.so (needs: {}); a plugin carrying its own copy of the core talks to a "
                  "private copy of its state. Link tessera::core (tessera_add_plugin() does)",
                  tables.needed.empty() ? std::string("nothing") : fmt::format("{}", fmt::join(tables.needed, ", "))));
}

// ---- Manifest and creation, common to every kind ----

bool is_kebab_case(const std::string& text) {
  if (text.empty() || !(text.front() >= 'a' && text.front() <= 'z')) return false;
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; });
}

// Pipelines write options as YAML keys: lower-case, like `order` or `exchange_efficiency`.
bool is_option_name(const std::string& text) {
  if (text.empty() || !(text.front() >= 'a' && text.front() <= 'z')) return false;
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_'; });
}

CheckOutcome check_manifest(const PluginInfo& info) {
  std::vector<std::string> problems;
  if (info.version.empty()) problems.push_back("no version");
  if (info.summary.empty()) problems.push_back("no one-line summary (`tessera plugins list` shows it)");
  if (info.summary.find('\n') != std::string::npos) problems.push_back("the summary spans several lines");
  for (const auto& option : info.options) {
    if (option.doc.empty()) problems.push_back("option '" + option.name + "' has no doc line");
    if (!is_option_name(option.name))
      problems.push_back("option '" + option.name + "' is not a lower-case name (letters, digits, '_', '-')");
  }
  if (!problems.empty()) return CheckOutcome::fail(fmt::format("{}", fmt::join(problems, "; ")));
  std::vector<std::string> options;
  for (const auto& option : info.options)
    options.push_back(fmt::format("{}={}", option.name, option_value_text(option.default_value)));
  return CheckOutcome::pass(
      fmt::format("version {}, options: {}", info.version,
                  options.empty() ? std::string("none") : fmt::format("{}", fmt::join(options, " "))));
}

Options default_options(const PluginHost& host, const PluginInfo& info) {
  return host.resolve_options(info, Options{}, "defaults");
}

std::unique_ptr<PluginObject> create_any(const PluginHost& host, const PluginInfo& info) {
  const Options options = default_options(host, info);
  switch (info.kind) {
    case PluginKind::pass:
      return host.create_pass(info, options);
    case PluginKind::cost_model:
      return host.create_cost_model(info, options);
    case PluginKind::exchange_scheduler:
      return host.create_scheduler(info, options);
  }
  throw std::logic_error("unknown plugin kind");
}

void check_creation(Battery& battery, const PluginHost& host, const PluginInfo& info) {
  battery.run("create", [&] {
    auto object = create_any(host, info);
    return CheckOutcome::pass(fmt::format("{} object created with its default options", plugin_kind_name(info.kind)));
  });
  // A process may hold several objects of one plugin (one per pipeline, several in A/B runs):
  // no singletons, nothing freed twice.
  battery.run("create-twice", [&] {
    auto first = create_any(host, info);
    auto second = create_any(host, info);
    if (first.get() == second.get()) {
      (void)second.release();  // one object: delete it once
      return CheckOutcome::fail("the factory returned the same object twice; create a new one per call");
    }
    first.reset();
    second.reset();
    return CheckOutcome::pass();
  });
}

// ---- Passes: what they declare (running one needs a whole pipeline: `tessera compile`) ----

void check_pass(Battery& battery, const PluginInfo& info) {
  std::vector<std::string> problems;
  if (info.provided_facts.empty())
    problems.push_back("provides no facts; say what the pass establishes so the pipeline loader can order it");
  for (const auto* list : {&info.required_facts, &info.provided_facts})
    for (const auto& fact : *list)
      if (!is_kebab_case(fact)) problems.push_back("fact '" + fact + "' is not kebab-case");
  if (!problems.empty()) {
    battery.record("facts", CheckOutcome::fail(fmt::format("{}", fmt::join(problems, "; "))));
    return;
  }
  battery.record("facts", CheckOutcome::pass(fmt::format("requires: {}; provides: {}",
                                                         info.required_facts.empty()
                                                             ? std::string("nothing")
                                                             : fmt::format("{}", fmt::join(info.required_facts, ", ")),
                                                         fmt::format("{}", fmt::join(info.provided_facts, ", ")))));
}

}  // namespace

int check_plugin_command(const CheckPluginRequest& request) {
  std::optional<Target> user_target;
  if (!request.target.empty()) user_target = load_target(request.target);
  Battery battery(request.timeout_s);
  PluginHost host;
  const PluginInfo* info = nullptr;
  try {
    info = &host.load_file(request.file);
  } catch (const Error& e) {
    battery.record("load", CheckOutcome::fail(e.what()));
  }
  if (info) {
    battery.record("load", CheckOutcome::pass(fmt::format("{} {}, {}, API {}.{}, ABI {}", info->name, info->version,
                                                          plugin_kind_name(info->kind), info->api_major,
                                                          info->api_minor, info->abi_tag)));
    try {
      const DynamicTables tables = ElfReader(info->file).read();
      battery.record("exports", check_exports(tables));
      battery.record("links-core", check_links_core(tables));
    } catch (const Error& e) {
      battery.record("exports", CheckOutcome::fail(e.what()));
    }
    battery.record("manifest", check_manifest(*info));
    check_creation(battery, host, *info);
    switch (info->kind) {
      case PluginKind::exchange_scheduler:
        (void)testing::scheduler_battery([&] { return host.create_scheduler(*info, default_options(host, *info)); },
                                         battery.kit_options(request, user_target));
        break;
      case PluginKind::cost_model:
        (void)testing::cost_model_battery([&] { return host.create_cost_model(*info, default_options(host, *info)); },
                                          battery.kit_options(request, user_target));
        break;
      case PluginKind::pass:
        check_pass(battery, *info);
        break;
    }
  }
  fmt::print("checks={} passed={} failed={} plugin={} kind=\"{}\" file={}\n", battery.passed() + battery.failed(),
             battery.passed(), battery.failed(), info ? info->name : "-", info ? plugin_kind_name(info->kind) : "-",
             info ? info->file : request.file);
  return battery.failed() == 0 ? 0 : 1;
}

}  // namespace tessera::cli
