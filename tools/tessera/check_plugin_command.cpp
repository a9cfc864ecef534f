// `tessera check-plugin FILE`: loads one plugin library and runs a conformance battery for its
// kind, one PASS/FAIL line per check.
//
// Everything that runs plugin code runs in a forked child with a deadline: a plugin that
// crashes, hangs or calls exit() fails that one check with the reason, and the battery goes on.
// Checks that only read the library (its manifest, its ELF symbol and dependency tables) run in
// this process. Schedulers are checked on built-in targets (the ideal fabric, realistic latency
// and switch cost, an exaggerated one, one without multicast) plus the user's --target.
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
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tessera/codelets.hpp"
#include "tessera/cost_model.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/exchange.hpp"
#include "tessera/pass.hpp"
#include "tessera/plugin_host.hpp"
#include "tessera/program.hpp"
#include "tessera/scheduler.hpp"
#include "tessera/target.hpp"

namespace tessera::cli {
namespace {

using Clock = std::chrono::steady_clock;

std::int64_t milliseconds_since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
}

// What one check found: `detail` is the reason of a failure or the figures of a pass.
struct Outcome {
  bool passed = false;
  std::string detail;
  static Outcome pass(std::string figures = "") { return {true, std::move(figures)}; }
  static Outcome fail(std::string why) { return {false, std::move(why)}; }
};

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
Outcome run_in_child(const std::function<Outcome()>& check, unsigned timeout_s) {
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error(std::string("check-plugin: pipe failed: ") + std::strerror(errno));
  std::fflush(stdout);  // or the child would print our buffered lines again
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("check-plugin: fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    ::close(fds[0]);
    Outcome outcome;
    try {
      outcome = check();
    } catch (const std::exception& e) {
      outcome = Outcome::fail(e.what());
    } catch (...) {
      outcome = Outcome::fail("an exception that is not a std::exception escaped");
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
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) return Outcome::fail(fmt::format("did not finish within {} s and was killed", timeout_s));
  if (WIFSIGNALED(status))
    return Outcome::fail(fmt::format("crashed with signal {} ({})", WTERMSIG(status), ::strsignal(WTERMSIG(status))));
  if (message.empty())
    return Outcome::fail(fmt::format("plugin code ended the process (exit status {}) instead of returning",
                                     WIFEXITED(status) ? WEXITSTATUS(status) : -1));
  return {message[0] == 'P', message.substr(1)};
}

// Prints each check's line as it finishes and counts them.
class Battery {
public:
  explicit Battery(unsigned timeout_s) : timeout_s_(timeout_s) {}

  void record(const std::string& name, const Outcome& outcome) {
    if (outcome.passed) {
      ++passed_;
      fmt::print("PASS {}{}\n", name, outcome.detail.empty() ? "" : "  [" + outcome.detail + "]");
    } else {
      ++failed_;
      fmt::print("FAIL {}: {}\n", name, outcome.detail);
    }
    std::fflush(stdout);
  }
  void run(const std::string& name, const std::function<Outcome()>& check) {
    record(name, run_in_child(check, timeout_s_));
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

class ElfReader {
public:
  explicit ElfReader(const std::string& file) : file_(file) {
    std::ifstream in(file, std::ios::binary);
    if (!in) throw Error(file + ": cannot open the library file");
    bytes_.assign(std::istreambuf_iterator<char>(in), {});
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
  std::unique_ptr<char, void (*)(void*)> name(abi::__cxa_demangle(symbol.c_str(), nullptr, nullptr, &status), std::free);
  return status == 0 && name ? std::string(name.get()) : symbol;
}

Outcome check_exports(const DynamicTables& tables) {
  std::vector<std::string> extra;
  bool has_entry = false;
  for (const auto& symbol : tables.exported) {
    if (symbol == kPluginEntrySymbol)
      has_entry = true;
    else
      extra.push_back(symbol);
  }
  if (!has_entry) return Outcome::fail(std::string("does not export '") + kPluginEntrySymbol + "'");
  if (extra.empty()) return Outcome::pass(std::string("only ") + kPluginEntrySymbol);
  std::vector<std::string> shown;
  for (std::size_t i = 0; i < std::min<std::size_t>(extra.size(), 3); ++i) shown.push_back("'" + demangled(extra[i]) + "'");
  return Outcome::fail(fmt::format(
      "exports {} symbol(s) besides {} (e.g. {}); another plugin defining the same symbol would interpose it. "
      "Build with tessera_add_plugin() (hidden visibility and a version script keep only the entry point)",
      extra.size(), kPluginEntrySymbol, fmt::join(shown, ", ")));
}

Outcome check_links_core(const DynamicTables& tables) {
  for (const auto& library : tables.needed)
    if (library.rfind("libtessera_core.so", 0) == 0) return Outcome::pass("needs " + library);
  return Outcome::fail(fmt::format(
      "does not link libtessera_core.so (needs: {}); a plugin carrying its own copy of the core talks to a "
      "private copy of its state. Link tessera::core (tessera_add_plugin() does)",
      tables.needed.empty() ? std::string("nothing") : fmt::format("{}", fmt::join(tables.needed, ", "))));
}

// ---- Manifest and creation, common to every kind ----

bool is_kebab_case(const std::string& text) {
  if (text.empty() || !(text.front() >= 'a' && text.front() <= 'z')) return false;
  return std::all_of(text.begin(), text.end(), [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; });
}

// Pipelines write options as YAML keys: lower-case, like `order` or `exchange_efficiency`.
bool is_option_name(const std::string& text) {
  if (text.empty() || !(text.front() >= 'a' && text.front() <= 'z')) return false;
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_'; });
}

Outcome check_manifest(const PluginInfo& info) {
  std::vector<std::string> problems;
  if (info.version.empty()) problems.push_back("no version");
  if (info.summary.empty()) problems.push_back("no one-line summary (`tessera plugins list` shows it)");
  if (info.summary.find('\n') != std::string::npos) problems.push_back("the summary spans several lines");
  for (const auto& option : info.options) {
    if (option.doc.empty()) problems.push_back("option '" + option.name + "' has no doc line");
    if (!is_option_name(option.name))
      problems.push_back("option '" + option.name + "' is not a lower-case name (letters, digits, '_', '-')");
  }
  if (!problems.empty()) return Outcome::fail(fmt::format("{}", fmt::join(problems, "; ")));
  std::vector<std::string> options;
  for (const auto& option : info.options)
    options.push_back(fmt::format("{}={}", option.name, option_value_text(option.default_value)));
  return Outcome::pass(fmt::format("version {}, options: {}", info.version,
                                   options.empty() ? std::string("none") : fmt::format("{}", fmt::join(options, " "))));
}

Options default_options(const PluginHost& host, const PluginInfo& info) {
  return host.resolve_options(info, Options{}, "defaults");
}

std::unique_ptr<PluginObject> create_any(const PluginHost& host, const PluginInfo& info) {
  const Options options = default_options(host, info);
  switch (info.kind) {
    case PluginKind::pass: return host.create_pass(info, options);
    case PluginKind::cost_model: return host.create_cost_model(info, options);
    case PluginKind::exchange_scheduler: return host.create_scheduler(info, options);
  }
  throw std::logic_error("unknown plugin kind");
}

void check_creation(Battery& battery, const PluginHost& host, const PluginInfo& info) {
  battery.run("create", [&] {
    auto object = create_any(host, info);
    return Outcome::pass(fmt::format("{} object created with its default options", plugin_kind_name(info.kind)));
  });
  // A process may hold several objects of one plugin (one per pipeline, several in A/B runs):
  // no singletons, nothing freed twice.
  battery.run("create-twice", [&] {
    auto first = create_any(host, info);
    auto second = create_any(host, info);
    if (first.get() == second.get()) {
      (void)second.release();  // one object: delete it once
      return Outcome::fail("the factory returned the same object twice; create a new one per call");
    }
    first.reset();
    second.reset();
    return Outcome::pass();
  });
}

// ---- Targets and phases for schedulers ----

Target check_target(const std::string& name, std::uint32_t tiles, std::uint32_t tiles_per_column,
                    std::uint32_t base_latency, double latency_per_column, std::uint32_t switch_cost, bool multicast) {
  Target target;
  target.name = name;
  target.source_file = "(built into tessera check-plugin)";
  target.tiles = tiles;
  target.tiles_per_column = tiles_per_column;
  target.memory_bytes = 638976;
  target.interleaved_start = 262144;
  target.exchange_base_latency = base_latency;
  target.exchange_latency_per_column = latency_per_column;
  target.switch_cost = switch_cost;
  target.multicast = multicast;
  return target;
}

// splitmix64: the phases must be the same on every machine and every run.
class Random {
public:
  explicit Random(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  std::uint32_t below(std::uint32_t bound) { return static_cast<std::uint32_t>(next() % bound); }

private:
  std::uint64_t state_;
};

Transfer make_transfer(std::uint32_t source, std::vector<std::uint32_t> destinations, std::uint32_t words) {
  Transfer transfer;
  transfer.source = source;
  transfer.destinations = std::move(destinations);
  transfer.words = words;
  transfer.destination_addresses.assign(transfer.destinations.size(), 0);
  return transfer;
}

ExchangePhase make_phase(std::uint32_t tiles, std::vector<Transfer> transfers = {}) {
  ExchangePhase phase;
  phase.tiles = tiles;
  phase.transfers = std::move(transfers);
  return phase;
}

// `per_tile` transfers from every tile to random others, 1..max_words words; with multicast,
// one in eight goes to 2..8 distinct tiles at once.
ExchangePhase random_phase(std::uint32_t tiles, std::uint32_t per_tile, std::uint32_t max_words, bool multicast,
                           std::uint64_t seed) {
  Random random(seed);
  ExchangePhase phase = make_phase(tiles);
  if (tiles < 2) return phase;
  for (std::uint32_t source = 0; source < tiles; ++source) {
    for (std::uint32_t k = 0; k < per_tile; ++k) {
      std::uint32_t count = 1;
      if (multicast && random.below(8) == 0) count = std::min(tiles - 1, 2 + random.below(7));
      std::vector<std::uint32_t> destinations;
      while (destinations.size() < count) {
        const std::uint32_t destination = random.below(tiles);
        if (destination != source &&
            std::find(destinations.begin(), destinations.end(), destination) == destinations.end())
          destinations.push_back(destination);
      }
      phase.transfers.push_back(make_transfer(source, std::move(destinations), 1 + random.below(max_words)));
    }
  }
  return phase;
}

// Every other tile sends to tile 0: the receiver changes source each time (switch cost).
ExchangePhase fan_in_phase(std::uint32_t tiles) {
  ExchangePhase phase = make_phase(tiles);
  for (std::uint32_t source = 1; source < tiles; ++source)
    phase.transfers.push_back(make_transfer(source, {0}, 8 + 13 * source % 61));
  return phase;
}

ExchangePhase fan_out_phase(std::uint32_t tiles) {
  ExchangePhase phase = make_phase(tiles);
  for (std::uint32_t destination = 1; destination < tiles; ++destination)
    phase.transfers.push_back(make_transfer(0, {destination}, 8 + 29 * destination % 53));
  return phase;
}

ExchangePhase all_to_all_phase(std::uint32_t tiles) {
  ExchangePhase phase = make_phase(tiles);
  for (std::uint32_t source = 0; source < tiles; ++source)
    for (std::uint32_t destination = 0; destination < tiles; ++destination)
      if (source != destination)
        phase.transfers.push_back(make_transfer(source, {destination}, 1 + (7 * source + 3 * destination) % 13));
  return phase;
}

// Overlapping multicasts: one to everyone, some sharing receivers, some sharing a source.
ExchangePhase multicast_phase(std::uint32_t tiles) {
  ExchangePhase phase = make_phase(tiles);
  std::vector<std::uint32_t> everyone;
  for (std::uint32_t tile = 1; tile < tiles; ++tile) everyone.push_back(tile);
  phase.transfers.push_back(make_transfer(0, everyone, 64));
  phase.transfers.push_back(make_transfer(1, {2, 3, 4}, 32));
  phase.transfers.push_back(make_transfer(2, {0, 5, 9}, 16));
  phase.transfers.push_back(make_transfer(5, {0, 1}, 48));
  phase.transfers.push_back(make_transfer(1, {6, 7}, 8));
  phase.transfers.push_back(make_transfer(9, {10}, 24));
  return phase;
}

// 2^24-word transfers (64 MiB each): nothing may overflow or walk the words one by one.
ExchangePhase huge_words_phase() {
  constexpr std::uint32_t kHuge = 1u << 24;
  return make_phase(4, {make_transfer(0, {1}, kHuge), make_transfer(1, {2}, kHuge), make_transfer(2, {0}, kHuge),
                        make_transfer(3, {0}, kHuge), make_transfer(3, {1, 2}, kHuge)});
}

std::string schedule_figures(const ExchangePhase& phase, const Schedule& schedule, const ScheduleReport& report,
                             const Target& target, std::int64_t elapsed_ms) {
  const std::string ratio =
      report.lower_bound ? fmt::format("{:.3f}", double(report.horizon) / double(report.lower_bound)) : "-";
  return fmt::format("target={} transfers={} segments={} horizon={} lower_bound={} ratio={} elapsed_ms={}",
                     target.name, phase.transfers.size(), schedule.segments.size(), report.horizon,
                     report.lower_bound, ratio, elapsed_ms);
}

// ExchangeScheduler::schedule validates the result and throws PluginError naming the conflict.
Outcome check_valid_schedule(const PluginHost& host, const PluginInfo& info, const ExchangePhase& phase,
                             const Target& target, std::uint64_t budget_ms) {
  auto scheduler = host.create_scheduler(info, default_options(host, info));
  ScheduleReport report;
  const auto started = Clock::now();
  const Schedule schedule = scheduler->schedule(phase, target, budget_ms, &report);
  return Outcome::pass(schedule_figures(phase, schedule, report, target, milliseconds_since(started)));
}

std::string first_difference(const Schedule& a, const Schedule& b) {
  const std::size_t common = std::min(a.segments.size(), b.segments.size());
  for (std::size_t i = 0; i < common; ++i) {
    const Segment& x = a.segments[i];
    const Segment& y = b.segments[i];
    if (x.transfer != y.transfer || x.start != y.start || x.words != y.words)
      return fmt::format("segment {} was (transfer {}, start {}, words {}), now (transfer {}, start {}, words {})", i,
                         x.transfer, x.start, x.words, y.transfer, y.start, y.words);
  }
  if (a.segments.size() != b.segments.size())
    return fmt::format("{} segments, now {}", a.segments.size(), b.segments.size());
  return "";
}

Outcome check_deterministic(const PluginHost& host, const PluginInfo& info, const ExchangePhase& phase,
                            const Target& target, std::uint64_t budget_ms) {
  auto scheduler = host.create_scheduler(info, default_options(host, info));
  const Schedule first = scheduler->schedule(phase, target, budget_ms);
  const Schedule again = scheduler->schedule(phase, target, budget_ms);
  if (auto difference = first_difference(first, again); !difference.empty())
    return Outcome::fail("a second call on the same object returned another schedule: " + difference +
                         "; the same phase must give the same schedule (seed any randomness, and do not let "
                         "wall-clock time decide)");
  auto fresh = host.create_scheduler(info, default_options(host, info));
  const Schedule other = fresh->schedule(phase, target, budget_ms);
  if (auto difference = first_difference(first, other); !difference.empty())
    return Outcome::fail("a new object returned another schedule: " + difference +
                         "; the same phase must give the same schedule");
  return Outcome::pass(fmt::format("target={} transfers={} segments={}, 3 identical schedules", target.name,
                                   phase.transfers.size(), first.segments.size()));
}

// Nanoseconds this thread has waited on a run queue (/proc/thread-self/schedstat), 0 if unknown:
// time a busy machine took from the plugin, not time the plugin spent.
double run_queue_wait_ms() {
  std::ifstream in("/proc/thread-self/schedstat");
  unsigned long long on_cpu_ns = 0, waiting_ns = 0;
  if (!(in >> on_cpu_ns >> waiting_ns)) return 0;
  return static_cast<double>(waiting_ns) / 1e6;
}

Outcome check_time_budget(const PluginHost& host, const PluginInfo& info, const ExchangePhase& phase,
                          const Target& target, std::uint64_t budget_ms) {
  auto scheduler = host.create_scheduler(info, default_options(host, info));
  ScheduleReport report;
  const auto started = Clock::now();
  const double waited_before_ms = run_queue_wait_ms();
  const Schedule schedule = scheduler->schedule(phase, target, budget_ms, &report);
  const std::int64_t elapsed_ms = milliseconds_since(started);
  // The plugin's time is the wall time less what it waited for a CPU: sleeping counts, load does not.
  const double charged_ms = static_cast<double>(elapsed_ms) - (run_queue_wait_ms() - waited_before_ms);
  const std::uint64_t allowed_ms = 2 * budget_ms + 100;
  if (charged_ms > static_cast<double>(allowed_ms))
    return Outcome::fail(fmt::format("took {} ms ({:.0f} ms not counting waits for a busy CPU) on a phase of {} "
                                     "transfers with a budget of {} ms (allowed: 2 x budget + 100 ms = {} ms); stop "
                                     "searching when the budget is spent",
                                     elapsed_ms, charged_ms, phase.transfers.size(), budget_ms, allowed_ms));
  return Outcome::pass(schedule_figures(phase, schedule, report, target, elapsed_ms) +
                       fmt::format(" budget_ms={}", budget_ms));
}

void check_scheduler(Battery& battery, const PluginHost& host, const PluginInfo& info,
                     const CheckPluginRequest& request, const std::optional<Target>& user_target) {
  const Target ideal = check_target("check-ideal-1472", 1472, 64, 0, 0.0, 0, true);
  const Target realistic = check_target("check-latency-1472", 1472, 64, 6, 1.0, 1, true);
  const Target harsh = check_target("check-harsh-16", 16, 4, 20, 8.0, 5, true);
  const Target unicast = check_target("check-unicast-16", 16, 4, 6, 1.0, 1, false);
  const std::uint64_t budget = request.budget_ms;
  auto valid = [&](const std::string& name, const ExchangePhase& phase, const Target& target) {
    battery.run(name, [&] { return check_valid_schedule(host, info, phase, target, budget); });
  };

  valid("empty-phase-1-tile", make_phase(1), realistic);
  valid("empty-phase-1472-tiles", make_phase(1472), realistic);
  valid("zero-word-transfer", make_phase(3, {make_transfer(0, {1}, 0), make_transfer(1, {2}, 5)}), realistic);
  valid("single-transfer", make_phase(2, {make_transfer(0, {1}, 1000)}), realistic);
  valid("fan-out", fan_out_phase(16), harsh);
  valid("fan-in-switch-cost", fan_in_phase(16), harsh);
  valid("all-to-all", all_to_all_phase(16), harsh);
  valid("multicast", multicast_phase(16), harsh);
  valid("no-multicast-target", random_phase(16, 4, 64, false, 11), unicast);
  valid("huge-words", huge_words_phase(), realistic);
  valid("random-1472-ideal", random_phase(1472, 4, 256, true, 1), ideal);
  valid("random-1472-latency", random_phase(1472, 4, 256, true, 2), realistic);
  if (user_target) {
    const Target& target = *user_target;
    valid("random@" + target.name, random_phase(target.tiles, 4, 256, target.multicast, 3), target);
    if (target.tiles >= 2) valid("fan-in@" + target.name, fan_in_phase(std::min<std::uint32_t>(target.tiles, 64)), target);
  }

  const ExchangePhase repeated = random_phase(1472, 4, 256, true, 4);
  battery.run("deterministic", [&] { return check_deterministic(host, info, repeated, realistic, budget); });
  const ExchangePhase large = random_phase(1472, 16, 1024, true, 5);
  battery.run("time-budget", [&] { return check_time_budget(host, info, large, realistic, budget); });
}

// ---- Programs and phases for cost models ----

constexpr std::uint64_t kPlausibleCycles = std::uint64_t{1} << 62;

// A NaN or infinity cast to an integer shows up as a huge (or wrapped) number.
std::string implausible(const CostEstimate& estimate) {
  const std::pair<const char*, std::uint64_t> fields[] = {{"compute_cycles", estimate.compute_cycles},
                                                          {"exchange_cycles", estimate.exchange_cycles},
                                                          {"sync_cycles", estimate.sync_cycles},
                                                          {"peak_tile_bytes", estimate.peak_tile_bytes}};
  for (const auto& [name, value] : fields)
    if (value >= kPlausibleCycles)
      return fmt::format("{}={} is not a finite estimate (a NaN or infinity converted to an integer, or an "
                         "underflow?)",
                         name, value);
  return "";
}

// Adds a call of `codelet` on `tile` in `superstep`, with one buffer per operand sized to what
// the codelet reads or writes, live in that superstep only.
void add_call(Program& program, std::uint32_t superstep, std::uint32_t tile, Codelet codelet,
              std::vector<std::uint32_t> params) {
  if (program.supersteps.size() <= superstep) program.supersteps.resize(superstep + 1);
  for (std::size_t s = 0; s < program.supersteps.size(); ++s)
    if (program.supersteps[s].label.empty()) program.supersteps[s].label = fmt::format("check-{}", s);
  CodeletCall call;
  call.tile = tile;
  call.codelet = codelet;
  call.params = std::move(params);
  for (std::uint32_t operand = 0; operand < codelet_operand_count(codelet); ++operand) {
    Buffer buffer;
    buffer.name = fmt::format("{}-{}-{}", codelet_name(codelet), program.buffers.size(), operand);
    buffer.tile = tile;
    buffer.bytes = static_cast<std::uint32_t>(codelet_operand_words(codelet, call.params, operand) * 4);
    buffer.first_use = buffer.last_use = superstep;
    call.operands.push_back({static_cast<std::uint32_t>(program.buffers.size()), 0});
    program.buffers.push_back(buffer);
  }
  program.supersteps[superstep].compute.push_back(std::move(call));
}

// Adds a copy of `words` words from a buffer on `source` to one on `destination`.
void add_copy(Program& program, std::uint32_t superstep, std::uint32_t source, std::uint32_t destination,
              std::uint32_t words) {
  if (program.supersteps.size() <= superstep) program.supersteps.resize(superstep + 1);
  program.supersteps[superstep].label = fmt::format("check-{}", superstep);
  for (std::uint32_t tile : {source, destination}) {
    Buffer buffer;
    buffer.name = fmt::format("copy-{}", program.buffers.size());
    buffer.tile = tile;
    buffer.bytes = words * 4;
    buffer.first_use = buffer.last_use = superstep;
    program.buffers.push_back(buffer);
  }
  const auto first = static_cast<std::uint32_t>(program.buffers.size() - 2);
  program.supersteps[superstep].copies.push_back({{first, 0}, {first + 1, 0}, words});
}

// The check's own programs must be well formed, or a failure would blame the plugin wrongly.
const Program& well_formed(const Program& program, const Target& target) {
  if (std::string problem = verify_program(program, target); !problem.empty())
    throw std::logic_error("check-plugin built an ill-formed program (a bug in tessera): " + problem);
  return program;
}

struct Step {
  std::string label;
  CostEstimate estimate;
};

// Each step is more work than the one before: its total must not be smaller.
Outcome monotone(const std::vector<Step>& steps, const char* field = "total") {
  std::vector<std::string> figures;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    if (std::string problem = implausible(steps[i].estimate); !problem.empty())
      return Outcome::fail(steps[i].label + ": " + problem);
    const std::uint64_t cycles = steps[i].estimate.total();
    if (i > 0 && cycles < steps[i - 1].estimate.total())
      return Outcome::fail(fmt::format("{} is estimated at {} cycles, fewer than {} at {}: more work must not cost "
                                       "fewer cycles",
                                       steps[i].label, cycles, steps[i - 1].label, steps[i - 1].estimate.total()));
    figures.push_back(fmt::format("{}={}", steps[i].label, cycles));
  }
  return Outcome::pass(fmt::format("{}: {}", field, fmt::join(figures, " ")));
}

std::unique_ptr<CostModel> make_cost_model(const PluginHost& host, const PluginInfo& info) {
  return host.create_cost_model(info, default_options(host, info));
}

void check_cost_model(Battery& battery, const PluginHost& host, const PluginInfo& info,
                      const std::optional<Target>& user_target) {
  std::vector<Target> targets = {check_target("check-latency-1472", 1472, 64, 6, 1.0, 1, true)};
  if (user_target) targets.push_back(*user_target);
  for (const Target& target : targets) {
    const std::string at = user_target && &target != &targets.front() ? "@" + target.name : "";
    const std::uint32_t last_tile = target.tiles - 1;

    battery.run("empty-program" + at, [&] {
      auto model = make_cost_model(host, info);
      const CostEstimate empty = model->estimate(Program{}, target);
      if (std::string problem = implausible(empty); !problem.empty()) return Outcome::fail(problem);
      if (empty.peak_tile_bytes != 0)
        return Outcome::fail(fmt::format("peak_tile_bytes={} for a program without buffers", empty.peak_tile_bytes));
      Program smallest;
      add_call(smallest, 0, 0, Codelet::copy, {1});
      const CostEstimate one = model->estimate(well_formed(smallest, target), target);
      if (empty.total() > one.total())
        return Outcome::fail(fmt::format("the empty program costs {} cycles, more than one 1-word copy ({})",
                                         empty.total(), one.total()));
      return Outcome::pass(fmt::format("total={} (one 1-word copy: {})", empty.total(), one.total()));
    });

    battery.run("empty-exchange-phase" + at, [&] {
      auto model = make_cost_model(host, info);
      const std::uint64_t empty = model->estimate_exchange(make_phase(target.tiles), target);
      if (empty >= kPlausibleCycles) return Outcome::fail(fmt::format("{} cycles is not a finite estimate", empty));
      if (target.tiles < 2) return Outcome::pass(fmt::format("cycles={}", empty));
      const std::uint64_t one = model->estimate_exchange(make_phase(target.tiles, {make_transfer(0, {1}, 1)}), target);
      if (empty > one)
        return Outcome::fail(fmt::format("an empty phase costs {} cycles, more than a 1-word phase ({})", empty, one));
      return Outcome::pass(fmt::format("cycles={} (one word: {})", empty, one));
    });

    battery.run("monotone-matmul-macs" + at, [&] {
      auto model = make_cost_model(host, info);
      std::vector<Step> steps;
      for (std::uint32_t size : {1u, 4u, 8u, 16u, 32u, 64u, 128u}) {
        Program program;
        add_call(program, 0, last_tile, Codelet::matmul, {size, size, size, 0});
        steps.push_back({fmt::format("{}^3", size), model->estimate(well_formed(program, target), target)});
      }
      return monotone(steps);
    });

    battery.run("monotone-elementwise" + at, [&] {
      auto model = make_cost_model(host, info);
      const std::pair<Codelet, std::vector<std::uint32_t>> shapes[] = {
          {Codelet::copy, {0}}, {Codelet::relu, {0}}, {Codelet::add, {0}},
          {Codelet::reduce_add, {4, 0}}, {Codelet::bias_add, {0, 4, 1}},
          {Codelet::reduce_bias, {4, 1, 0, 16384, 1}}};
      std::vector<std::string> figures;
      for (const auto& [codelet, shape] : shapes) {
        std::vector<Step> steps;
        // Up to 16384 elements: every operand still fits one tile's memory.
        for (std::uint32_t count : {1u, 16u, 256u, 4096u, 16384u}) {
          std::vector<std::uint32_t> params = shape;
          // The element count is the first zero in the shape.
          *std::find(params.begin(), params.end(), 0u) = count;
          Program program;
          add_call(program, 0, 0, codelet, params);
          steps.push_back({fmt::format("{}({})", codelet_name(codelet), count),
                           model->estimate(well_formed(program, target), target)});
        }
        Outcome outcome = monotone(steps);
        if (!outcome.passed) return outcome;
        figures.push_back(fmt::format("{} {}..{}", codelet_name(codelet), steps.front().estimate.total(),
                                      steps.back().estimate.total()));
      }
      return Outcome::pass(fmt::format("total: {}", fmt::join(figures, ", ")));
    });

    battery.run("monotone-calls-per-tile" + at, [&] {
      auto model = make_cost_model(host, info);
      std::vector<Step> steps;
      for (std::uint32_t calls : {1u, 2u, 4u, 8u}) {
        Program program;
        for (std::uint32_t i = 0; i < calls; ++i) add_call(program, 0, 0, Codelet::matmul, {16, 16, 16, 0});
        steps.push_back({fmt::format("{}-calls", calls), model->estimate(well_formed(program, target), target)});
      }
      return monotone(steps);
    });

    battery.run("monotone-supersteps" + at, [&] {
      auto model = make_cost_model(host, info);
      std::vector<Step> steps;
      for (std::uint32_t supersteps : {1u, 2u, 4u}) {
        Program program;
        for (std::uint32_t s = 0; s < supersteps; ++s) add_call(program, s, 0, Codelet::matmul, {16, 16, 16, 0});
        steps.push_back({fmt::format("{}-supersteps", supersteps), model->estimate(well_formed(program, target), target)});
      }
      return monotone(steps);
    });

    if (target.tiles >= 2) {
      battery.run("monotone-copy-words" + at, [&] {
        auto model = make_cost_model(host, info);
        std::vector<Step> steps;
        for (std::uint32_t words : {1u, 16u, 256u, 4096u, 65536u}) {
          Program program;
          add_copy(program, 0, 0, last_tile, words);
          steps.push_back({fmt::format("{}-words", words), model->estimate(well_formed(program, target), target)});
        }
        return monotone(steps);
      });

      battery.run("monotone-exchange-words" + at, [&] {
        auto model = make_cost_model(host, info);
        std::vector<Step> steps;
        for (std::uint32_t words : {1u, 16u, 256u, 4096u, 1u << 20}) {
          CostEstimate estimate;
          estimate.exchange_cycles =
              model->estimate_exchange(make_phase(target.tiles, {make_transfer(0, {last_tile}, words)}), target);
          steps.push_back({fmt::format("{}-words", words), estimate});
        }
        return monotone(steps, "exchange cycles");
      });

      battery.run("monotone-exchange-fan-in" + at, [&] {
        auto model = make_cost_model(host, info);
        std::vector<Step> steps;
        for (std::uint32_t senders : {1u, 2u, 8u, 64u}) {
          ExchangePhase phase = make_phase(target.tiles);
          for (std::uint32_t s = 1; s <= std::min(senders, target.tiles - 1); ++s)
            phase.transfers.push_back(make_transfer(s, {0}, 256));
          CostEstimate estimate;
          estimate.exchange_cycles = model->estimate_exchange(phase, target);
          steps.push_back({fmt::format("{}-senders", phase.transfers.size()), estimate});
        }
        return monotone(steps, "exchange cycles");
      });
    }

    battery.run("peak-memory" + at, [&] {
      auto model = make_cost_model(host, info);
      std::uint64_t previous = 0;
      std::vector<std::string> figures;
      for (std::uint32_t size : {8u, 32u, 128u}) {
        Program program;
        add_call(program, 0, 0, Codelet::matmul, {size, size, size, 0});
        std::uint64_t largest = 0;
        for (const Buffer& buffer : program.buffers) largest = std::max<std::uint64_t>(largest, buffer.bytes);
        const CostEstimate estimate = model->estimate(well_formed(program, target), target);
        if (std::string problem = implausible(estimate); !problem.empty()) return Outcome::fail(problem);
        if (estimate.peak_tile_bytes < largest)
          return Outcome::fail(fmt::format("peak_tile_bytes={} is below the {}-byte buffer live on tile 0",
                                           estimate.peak_tile_bytes, largest));
        if (estimate.peak_tile_bytes < previous)
          return Outcome::fail(fmt::format("peak_tile_bytes fell from {} to {} as the buffers grew", previous,
                                           estimate.peak_tile_bytes));
        previous = estimate.peak_tile_bytes;
        figures.push_back(fmt::format("{}^3={}", size, estimate.peak_tile_bytes));
      }
      return Outcome::pass(fmt::format("peak_tile_bytes: {}", fmt::join(figures, " ")));
    });

    battery.run("large-program" + at, [&] {
      // Every tile computes and sends to its neighbour: select-finalist costs programs like
      // this once per candidate, so the figure printed is worth watching.
      Program program;
      for (std::uint32_t tile = 0; tile < target.tiles; ++tile) {
        add_call(program, 0, tile, Codelet::matmul, {32, 32, 32, 0});
        if (target.tiles >= 2) add_copy(program, 0, tile, (tile + 1) % target.tiles, 1024);
      }
      well_formed(program, target);
      auto model = make_cost_model(host, info);
      const auto started = Clock::now();
      const CostEstimate first = model->estimate(program, target);
      const std::int64_t elapsed_ms = milliseconds_since(started);
      if (std::string problem = implausible(first); !problem.empty()) return Outcome::fail(problem);
      const CostEstimate again = model->estimate(program, target);
      if (again.compute_cycles != first.compute_cycles || again.exchange_cycles != first.exchange_cycles ||
          again.sync_cycles != first.sync_cycles || again.peak_tile_bytes != first.peak_tile_bytes)
        return Outcome::fail(fmt::format("two estimates of the same program differ (total {} then {})", first.total(),
                                         again.total()));
      return Outcome::pass(fmt::format("tiles={} compute={} exchange={} sync={} peak_tile_bytes={} elapsed_ms={}",
                                       target.tiles, first.compute_cycles, first.exchange_cycles, first.sync_cycles,
                                       first.peak_tile_bytes, elapsed_ms));
    });
  }
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
    battery.record("facts", Outcome::fail(fmt::format("{}", fmt::join(problems, "; "))));
    return;
  }
  battery.record("facts", Outcome::pass(fmt::format("requires: {}; provides: {}",
                                                    info.required_facts.empty() ? std::string("nothing")
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
    battery.record("load", Outcome::fail(e.what()));
  }
  if (info) {
    battery.record("load", Outcome::pass(fmt::format("{} {}, {}, API {}.{}, ABI {}", info->name, info->version,
                                                     plugin_kind_name(info->kind), info->api_major, info->api_minor,
                                                     info->abi_tag)));
    try {
      const DynamicTables tables = ElfReader(info->file).read();
      battery.record("exports", check_exports(tables));
      battery.record("links-core", check_links_core(tables));
    } catch (const Error& e) {
      battery.record("exports", Outcome::fail(e.what()));
    }
    battery.record("manifest", check_manifest(*info));
    check_creation(battery, host, *info);
    switch (info->kind) {
      case PluginKind::exchange_scheduler: check_scheduler(battery, host, *info, request, user_target); break;
      case PluginKind::cost_model: check_cost_model(battery, host, *info, user_target); break;
      case PluginKind::pass: check_pass(battery, *info); break;
    }
  }
  fmt::print("checks={} passed={} failed={} plugin={} kind=\"{}\" file={}\n", battery.passed() + battery.failed(),
             battery.passed(), battery.failed(), info ? info->name : "-", info ? plugin_kind_name(info->kind) : "-",
             info ? info->file : request.file);
  return battery.failed() == 0 ? 0 : 1;
}

}  // namespace tessera::cli
