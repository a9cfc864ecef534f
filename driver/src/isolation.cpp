// Contained plugins, the parent side: finding and starting tessera-plugin-host, supervising the
// child (deadlines, memory limit, fallback) behind IsolatedScheduler and IsolatedCostModel, and
// probing a library in a child before loading it. The protocol is in isolation_protocol.hpp,
// the child's side in isolation_child.cpp.
#include "tessera/isolation.hpp"

#include "isolation_protocol.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <csignal>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <filesystem>
#include <mutex>
#include <utility>
#include <new>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>

#include "tessera/cost_model.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/log.hpp"
#include "tessera/pipeline.hpp"
#include "tessera/plugin_host.hpp"
#include "tessera/program.hpp"
#include "tessera/target.hpp"

// AddressSanitizer reserves terabytes of address space for its shadow, so RLIMIT_AS cannot
// bound a sanitized child; it gets ASan's resident-memory limit instead.
#if defined(__SANITIZE_ADDRESS__)
#define TESSERA_ADDRESS_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TESSERA_ADDRESS_SANITIZER 1
#endif
#endif

namespace fs = std::filesystem;

namespace tessera {

using namespace isolation;

// ---- Finding the child executable ------------------------------------------------------------

std::string find_plugin_host_binary() {
  if (const char* configured = std::getenv("TESSERA_PLUGIN_HOST"); configured && *configured) {
    if (::access(configured, X_OK) == 0) return configured;
    throw Error(std::string("TESSERA_PLUGIN_HOST=") + configured +
                ": not an executable file; unset it or "
                "point it at the tessera-plugin-host binary");
  }
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  std::string tried;
  if (!ec) {
    const fs::path folder = exe.parent_path();
    for (const fs::path& candidate :
         {folder / "tessera-plugin-host", folder / "../tools/tessera-plugin-host",
          folder / "../bin/tessera-plugin-host", folder / "../../tools/tessera-plugin-host"}) {
      const fs::path normal = candidate.lexically_normal();
      if (::access(normal.c_str(), X_OK) == 0) return normal.string();
      tried += (tried.empty() ? "" : ", ") + normal.string();
    }
  }
  throw Error("cannot find the tessera-plugin-host executable needed by 'isolate: process' (tried " +
              (tried.empty() ? std::string("nothing: /proc/self/exe is unreadable") : tried) +
              "); install it beside tessera or set TESSERA_PLUGIN_HOST");
}

std::uint64_t isolation_time_limit_ms(const PluginUse& use, std::uint64_t budget_ms) {
  return use.time_limit_ms ? use.time_limit_ms : budget_ms * 2 + 10000;
}

// ---- Parent side ---------------------------------------------------------------------------

namespace {

// Most of an isolated plugin's stdout and stderr shown in the tool's stderr.
constexpr std::uint64_t kStderrRelayBytes = 1u << 20;

// What went wrong with the child, already phrased for the user.
struct ChildFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Starts tessera-plugin-host with `arguments` (the binary first) in a process group of its
// own (whatever a plugin forks dies with it), dying with us, without core dumps, under
// `memory_limit_mb`: `channel` becomes its fd 3, `output` its stdout and stderr. The caller
// closes its copies of both. Throws ChildFailure.
pid_t spawn_plugin_host(std::vector<std::string> arguments, int channel, int output, std::uint64_t memory_limit_mb) {
  // Everything the child needs is prepared before fork: after it, only async-signal-safe calls.
  std::vector<char*> argv;
  for (auto& argument : arguments) argv.push_back(argument.data());
  argv.push_back(nullptr);
#ifndef TESSERA_ADDRESS_SANITIZER
  rlimit memory{};
  memory.rlim_cur = memory.rlim_max = static_cast<rlim_t>(memory_limit_mb) << 20;
#endif
  // The child's environment: ours, plus (sanitized builds) ASan's memory limit.
  char** child_environment = environ;
#ifdef TESSERA_ADDRESS_SANITIZER
  std::vector<std::string> environment;
  for (char** entry = environ; *entry; ++entry)
    if (std::strncmp(*entry, "ASAN_OPTIONS=", 13) != 0) environment.emplace_back(*entry);
  const char* inherited = std::getenv("ASAN_OPTIONS");
  environment.push_back(std::string("ASAN_OPTIONS=") + (inherited ? inherited : "") +
                        (inherited && *inherited ? ":" : "") + "hard_rss_limit_mb=" + std::to_string(memory_limit_mb));
  std::vector<char*> envp;
  for (auto& entry : environment) envp.push_back(entry.data());
  envp.push_back(nullptr);
  child_environment = envp.data();
#endif
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw ChildFailure(std::string("could not start tessera-plugin-host: fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the compiler
    if (::getppid() != parent) ::_exit(126);
    ::dup2(output, STDERR_FILENO);
    ::dup2(output, STDOUT_FILENO);  // the plugin's prints must not reach the tool's stdout
    if (channel == 3) ::fcntl(3, F_SETFD, 0);
    else ::dup2(channel, 3);  // dup2 clears close-on-exec on the copy
#ifndef TESSERA_ADDRESS_SANITIZER
    ::setrlimit(RLIMIT_AS, &memory);
#endif
    const rlimit no_core_dump{0, 0};  // a crashing plugin must not leave core files behind
    ::setrlimit(RLIMIT_CORE, &no_core_dump);
    ::execve(argv[0], argv.data(), child_environment);
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // as the child does, whichever runs first
  return pid;
}

// One child tessera-plugin-host running one plugin use: spawned on the first request,
// reused for later ones, killed on failure.
class PluginChild {
public:
  PluginChild(const PluginInfo& plugin, const PluginUse& use)
      : plugin_file_(plugin.file),
        plugin_name_(plugin.name),
        kind_(plugin.kind),
        use_(use),
        host_binary_(find_plugin_host_binary()),
        log_(logger("tessera.isolation")) {}
  ~PluginChild() { stop(/*kill_now=*/false); }

  const PluginUse& use() const { return use_; }
  std::uint64_t memory_limit_mb() const { return use_.memory_limit_mb ? use_.memory_limit_mb : kDefaultMemoryLimitMb; }

  // Sends a request (starting the child first if needed) and returns the reply, which must
  // be of type `expected`; a failure reply, a dead child or the deadline are a ChildFailure,
  // a malformed reply a ProtocolError.
  Frame ask(Writer& request, Message expected, std::uint64_t limit_ms) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(limit_ms);
    if (pid_ <= 0) start(deadline, limit_ms);
    Frame reply = exchange(request.frame(), deadline, limit_ms);
    if (reply.type != expected)
      throw ProtocolError("expected message type " + std::to_string(static_cast<int>(expected)) + ", got " +
                          std::to_string(static_cast<int>(reply.type)));
    return reply;
  }

  // Ends the child: politely (close the channel, it exits on end of input) or with SIGKILL.
  void stop(bool kill_now) {
    if (channel_ >= 0) ::close(channel_);
    channel_ = -1;
    if (pid_ > 0 && !kill_now) {
      for (int waited = 0; waited < 500 && pid_ > 0; waited += 2) {
        if (::waitpid(pid_, nullptr, WNOHANG) == pid_) pid_ = -1;
        else std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    }
    kill_group();
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {}
      pid_ = -1;
    }
    // Every writer of the stderr pipe is gone now: the relay reads to its end.
    if (stderr_relay_.joinable()) stderr_relay_.join();
  }

private:
  void start(Clock::time_point deadline, std::uint64_t limit_ms) {
    if (stderr_relay_.joinable()) stderr_relay_.join();  // a child stopped before
    int channel[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, channel) != 0)
      throw ChildFailure(std::string("could not create its channel: ") + std::strerror(errno));
    // The child's stdout and stderr go through a pipe the parent relays, capped (kStderrRelayBytes).
    int errors[2];
    if (::pipe2(errors, O_CLOEXEC) != 0) {
      ::close(channel[0]);
      ::close(channel[1]);
      throw ChildFailure(std::string("could not create its stderr pipe: ") + std::strerror(errno));
    }
    const std::string level(spdlog::level::to_string_view(spdlog::get_level()).data());
    pid_t pid = -1;
    try {
      pid = spawn_plugin_host({host_binary_, "--channel-fd", "3", "--log-level", level}, channel[1], errors[1],
                              memory_limit_mb());
    } catch (const ChildFailure&) {
      for (int fd : {channel[0], channel[1], errors[0], errors[1]}) ::close(fd);
      throw;
    }
    ::close(errors[1]);
    stderr_relay_ = std::thread(relay_stderr, errors[0], plugin_name_, log_);
    ::close(channel[1]);
    channel_ = channel[0];
    pid_ = pid;
    group_ = pid;
    log_->info("started isolated {} plugin=\"{}\" pid={} time_limit_ms={} memory_limit_mb={}", plugin_kind_name(kind_),
               plugin_name_, pid, limit_ms, memory_limit_mb());
    Writer load(Message::load);
    load.put(static_cast<std::uint32_t>(kind_));
    load.put_string(plugin_file_);
    load.put_string(plugin_name_);
    put_options(load, use_.options);
    Frame reply = exchange(load.frame(), deadline, limit_ms);
    if (reply.type != Message::loaded)
      throw ProtocolError("expected 'loaded', got message type " + std::to_string(static_cast<int>(reply.type)));
    Reader(reply.payload).finish();
  }

  Frame exchange(const std::string& request, Clock::time_point deadline, std::uint64_t limit_ms) {
    IoResult result = send_all(channel_, request);
    Frame reply{};
    if (result == IoResult::ok) result = read_frame(channel_, reply, deadline);
    if (result == IoResult::timed_out)
      throw ChildFailure("did not answer within time_limit_ms=" + std::to_string(limit_ms) + " and was killed");
    if (result == IoResult::closed) throw ChildFailure(reap_after_close(deadline));
    if (reply.type == Message::failed) {
      Reader in(reply.payload);
      const bool out_of_memory = in.get<std::uint8_t>() != 0;
      std::string message = in.get_string();
      in.finish();
      if (out_of_memory)
        throw ChildFailure("hit memory_limit_mb=" + std::to_string(memory_limit_mb()) + ": " + message);
      throw ChildFailure(message);
    }
    return reply;
  }

  // The child closed its end: wait (up to the deadline) for it to exit and say how it ended.
  std::string reap_after_close(Clock::time_point deadline) {
    int status = 0;
    while (Clock::now() < deadline) {
      const pid_t done = ::waitpid(pid_, &status, WNOHANG);
      if (done == pid_) {
        pid_ = -1;
        kill_group();
        ::close(channel_);
        channel_ = -1;
        return describe_wait_status(status);
      }
      if (done < 0 && errno != EINTR) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return "closed its channel without answering";
  }

  // Copies the child's output to our stderr up to kStderrRelayBytes, then counts and drops the
  // rest (a plugin printing a gigabyte must not flood the tool's log), until every writer is gone.
  static void relay_stderr(int fd, std::string plugin, std::shared_ptr<spdlog::logger> log) {
    std::uint64_t relayed = 0, dropped = 0;
    char buffer[16384];
    for (;;) {
      const ssize_t got = ::read(fd, buffer, sizeof buffer);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) break;
      const std::uint64_t shown = std::min<std::uint64_t>(static_cast<std::uint64_t>(got), kStderrRelayBytes - relayed);
      for (std::uint64_t written = 0; written < shown;) {
        const ssize_t wrote = ::write(STDERR_FILENO, buffer + written, shown - written);
        if (wrote < 0 && errno == EINTR) continue;
        if (wrote <= 0) break;
        written += static_cast<std::uint64_t>(wrote);
      }
      relayed += shown;
      dropped += static_cast<std::uint64_t>(got) - shown;
    }
    ::close(fd);
    if (dropped > 0)
      log->warn("isolated plugin=\"{}\" wrote {} bytes to stdout and stderr; the first {} were shown, {} dropped",
                plugin, relayed + dropped, relayed, dropped);
  }

  // Kills what is left of the child's process group (processes the plugin forked, which would
  // otherwise outlive the compile and hold its stderr open).
  void kill_group() {
    if (group_ > 0) ::kill(-group_, SIGKILL);
    group_ = -1;
  }

  std::string plugin_file_;
  std::string plugin_name_;
  PluginKind kind_;
  PluginUse use_;
  std::string host_binary_;
  std::shared_ptr<spdlog::logger> log_;
  pid_t pid_ = -1;
  pid_t group_ = -1;  ///< the child's process group, killed once the child is gone
  std::thread stderr_relay_;
  int channel_ = -1;
};

// Runs `call` against the child until it fails once; from then on (and for the failing call)
// `fallback_call` runs instead, after one warning, or a PluginError is thrown when there is
// no fallback. `validate` returns "" or why a reply is unusable.
class Containment {
public:
  Containment(const std::string& plugin, const char* kind, std::string fallback_name)
      : plugin_(plugin), kind_(kind), fallback_name_(std::move(fallback_name)) {}

  template <typename Call, typename Validate, typename Fallback>
  auto run(PluginChild& child, Call&& call, Validate&& validate, Fallback&& fallback_call) -> decltype(call()) {
    if (failure_.empty()) {
      std::string what;
      try {
        auto result = call();
        what = validate(result);
        if (what.empty()) return result;
      } catch (const ProtocolError& e) {
        what = std::string("broke the plugin-host protocol: ") + e.what();
      } catch (const ChildFailure& e) {
        what = e.what();
      }
      child.stop(/*kill_now=*/true);
      failure_ = what + " (isolated by " + child.use().place + ")";
      if (!fallback_name_.empty())
        logger("tessera.isolation")
            ->warn(
                "{} plugin=\"{}\" failed in its isolated process: {}; falling back to plugin=\"{}\" for this "
                "and later calls",
                kind_, plugin_, failure_, fallback_name_);
    }
    if (fallback_name_.empty())
      throw PluginError(plugin_, failure_ +
                                     "; add 'fallback: OTHER-PLUGIN' (same kind) to that entry to continue "
                                     "with another plugin");
    return fallback_call();
  }

private:
  std::string plugin_, kind_, fallback_name_;
  std::string failure_;  ///< set once the child failed; later calls go to the fallback
};

}  // namespace

// A friend of PluginObject, so it names itself and the isolated cost model after their plugins.
class IsolatedScheduler final : public ExchangeScheduler {
public:
  IsolatedScheduler(const PluginInfo& plugin, const PluginUse& use, std::unique_ptr<ExchangeScheduler> fallback)
      : child_(plugin, use),
        fallback_(std::move(fallback)),
        containment_(plugin.name, "exchange scheduler", fallback_ ? fallback_->plugin_name() : "") {
    plugin_name_ = plugin.name;
  }
  static void set_plugin_name(PluginObject& object, const std::string& name) { object.plugin_name_ = name; }

protected:
  Schedule schedule_impl(const ExchangePhase& phase, const Target& target, std::uint64_t budget_ms) override {
    std::lock_guard lock(mutex_);  // one child, one request at a time
    return containment_.run(
        child_,
        [&] {
          Writer request(Message::schedule);
          put_target(request, target);
          request.put(budget_ms);
          put_phase(request, phase);
          Frame reply = child_.ask(request, Message::scheduled, isolation_time_limit_ms(child_.use(), budget_ms));
          Reader in(reply.payload);
          Schedule schedule;
          schedule.segments.resize(in.get_count(16));
          for (Segment& segment : schedule.segments) {
            segment.transfer = in.get<std::uint32_t>();
            segment.start = in.get<std::uint64_t>();
            segment.words = in.get<std::uint32_t>();
          }
          in.finish();
          return schedule;
        },
        [&](const Schedule& schedule) -> std::string {
          ScheduleReport checked = validate_schedule(phase, schedule, target);
          if (checked.valid) return "";
          return "returned an invalid schedule for a phase of " + std::to_string(phase.transfers.size()) +
                 " transfers: " + checked.first_conflict;
        },
        [&] { return fallback_->schedule(phase, target, budget_ms); });
  }

private:
  PluginChild child_;
  std::unique_ptr<ExchangeScheduler> fallback_;
  Containment containment_;
  std::mutex mutex_;
};

namespace {

class IsolatedCostModel final : public CostModel {
public:
  IsolatedCostModel(const PluginInfo& plugin, const PluginUse& use, std::unique_ptr<CostModel> fallback)
      : child_(plugin, use),
        fallback_(std::move(fallback)),
        containment_(plugin.name, "cost model", fallback_ ? fallback_->plugin_name() : "") {
    IsolatedScheduler::set_plugin_name(*this, plugin.name);
  }

protected:
  // Both entry points share one child and one containment: once either fails, both fall back.
  CostEstimate estimate_impl(const Program& program, const Target& target) override {
    std::lock_guard lock(mutex_);
    return containment_.run(
        child_,
        [&] {
          Writer request(Message::estimate);
          put_target(request, target);
          put_program(request, program);
          Frame reply = child_.ask(request, Message::estimated, isolation_time_limit_ms(child_.use(), 0));
          Reader in(reply.payload);
          CostEstimate estimate;
          estimate.compute_cycles = in.get<std::uint64_t>();
          estimate.exchange_cycles = in.get<std::uint64_t>();
          estimate.sync_cycles = in.get<std::uint64_t>();
          estimate.peak_tile_bytes = in.get<std::uint64_t>();
          in.finish();
          return estimate;
        },
        [](const CostEstimate&) { return std::string(); },  // any figures are acceptable estimates
        [&] { return fallback_->estimate(program, target); });
  }

  std::uint64_t estimate_exchange_impl(const ExchangePhase& phase, const Target& target) override {
    std::lock_guard lock(mutex_);
    return containment_.run(
        child_,
        [&] {
          Writer request(Message::estimate_exchange);
          put_target(request, target);
          put_phase(request, phase);
          Frame reply = child_.ask(request, Message::estimated_exchange, isolation_time_limit_ms(child_.use(), 0));
          Reader in(reply.payload);
          const auto cycles = in.get<std::uint64_t>();
          in.finish();
          return cycles;
        },
        [](std::uint64_t) { return std::string(); }, [&] { return fallback_->estimate_exchange(phase, target); });
  }

private:
  PluginChild child_;
  std::unique_ptr<CostModel> fallback_;
  Containment containment_;
  std::mutex mutex_;
};

}  // namespace

std::unique_ptr<ExchangeScheduler> create_isolated_scheduler(const PluginInfo& plugin, const PluginUse& use,
                                                             std::unique_ptr<ExchangeScheduler> fallback) {
  return std::make_unique<IsolatedScheduler>(plugin, use, std::move(fallback));
}

std::unique_ptr<CostModel> create_isolated_cost_model(const PluginInfo& plugin, const PluginUse& use,
                                                      std::unique_ptr<CostModel> fallback) {
  return std::make_unique<IsolatedCostModel>(plugin, use, std::move(fallback));
}

// ---- Loading a library first in a child ------------------------------------------------------

namespace {

constexpr std::size_t kProbesAtOnce = 16;
constexpr std::size_t kProbeReportBytes = 64u << 10;  // "refused MESSAGE" lines are short
constexpr std::size_t kProbeOutputTailBytes = 2048;   // the end of what the library printed

// One child loading one library, watched by the parent's poll loop.
struct ProbeChild {
  pid_t pid = -1;
  int report = -1, output = -1;  // our ends of its fd 3 and of its stdout+stderr
  std::string report_text, output_tail;
  Clock::time_point deadline;
  bool timed_out = false;
  int status = 0;

  bool reaped() const { return pid < 0; }
};

// Reads what is there from `fd` into `text` (keeping at most `cap` bytes: the first for the
// report, the last for output); closes `fd` at end of file.
void drain(int& fd, std::string& text, std::size_t cap, bool keep_tail) {
  char buffer[4096];
  for (;;) {
    const ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && errno == EAGAIN) return;
    if (got <= 0) {
      ::close(fd);
      fd = -1;
      return;
    }
    text.append(buffer, static_cast<std::size_t>(got));
    if (text.size() > cap) text.erase(keep_tail ? 0 : cap, text.size() - cap);
  }
}

// The last line the library printed, for a failure message ("" if none).
std::string last_output_line(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  const auto start = text.find_last_of('\n');
  text = start == std::string::npos ? text : text.substr(start + 1);
  for (char& c : text)
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  if (text.size() > 200) text = text.substr(0, 200) + "...";
  return text.empty() ? "" : "; its last output: \"" + text + "\"";
}

LibraryProbe probe_outcome(const ProbeChild& child, const PluginLoadLimits& limits) {
  using Outcome = LibraryProbe::Outcome;
  const std::string when = "while loading (in a static initialiser or the plugin's entry point)";
  if (child.timed_out)
    return {Outcome::failed, "did not finish loading within " + std::to_string(limits.time_limit_ms) +
                                 " ms and was killed: a static initialiser or the entry point that never returns? "
                                 "(TESSERA_PLUGIN_LOAD_TIME_LIMIT_MS sets the limit)" +
                                 last_output_line(child.output_tail)};
  const std::string line = child.report_text.substr(0, child.report_text.find('\n'));
  if (line == "memory")
    return {Outcome::failed,
            "allocated past the memory limit of " + std::to_string(limits.memory_limit_mb) + " MiB " + when};
  if (WIFSIGNALED(child.status)) {
    const int signal = WTERMSIG(child.status);
    // SIGSEGV, not "Segmentation fault": the tool's stderr must not read like its own crash.
    const char* name = sigabbrev_np(signal);
    return {Outcome::failed, "crashed " + when + ": killed by signal " + std::to_string(signal) + " (SIG" +
                                 (name ? name : "?") + ")" + last_output_line(child.output_tail)};
  }
  const int code = WIFEXITED(child.status) ? WEXITSTATUS(child.status) : -1;
  if (code == 0 && line.rfind("loaded ", 0) == 0) return {Outcome::loaded, line.substr(7)};
  if (code == 1 && line.rfind("refused ", 0) == 0) return {Outcome::refused, line.substr(8)};
  if (code == 127 && line.empty())
    return {Outcome::failed,
            "could not be loaded: tessera-plugin-host did not start" + last_output_line(child.output_tail)};
  return {Outcome::failed, "exited with status " + std::to_string(code) + " " + when +
                               ", before the host could read its manifest: does a static initialiser call exit()?" +
                               last_output_line(child.output_tail)};
}

}  // namespace

std::vector<LibraryProbe> probe_plugin_libraries(const std::vector<std::string>& files,
                                                 const PluginLoadLimits& limits) {
  std::vector<LibraryProbe> results(files.size());
  if (files.empty()) return results;
  const std::string host_binary = find_plugin_host_binary();
  const std::string level(spdlog::level::to_string_view(spdlog::get_level()).data());
  for (std::size_t first = 0; first < files.size(); first += kProbesAtOnce) {
    std::vector<ProbeChild> children(std::min(kProbesAtOnce, files.size() - first));
    for (std::size_t i = 0; i < children.size(); ++i) {
      ProbeChild& child = children[i];
      int report[2], output[2];
      if (::pipe2(report, O_CLOEXEC) != 0)
        throw Error(std::string("cannot create a pipe to load plugins: ") + std::strerror(errno));
      if (::pipe2(output, O_CLOEXEC) != 0) {
        ::close(report[0]);
        ::close(report[1]);
        throw Error(std::string("cannot create a pipe to load plugins: ") + std::strerror(errno));
      }
      try {
        child.pid = spawn_plugin_host({host_binary, "--probe", files[first + i], "--log-level", level}, report[1],
                                      output[1], limits.memory_limit_mb);
      } catch (const ChildFailure& e) {
        for (int fd : {report[0], report[1], output[0], output[1]}) ::close(fd);
        for (ProbeChild& started : children)
          if (started.pid > 0) ::kill(-started.pid, SIGKILL);
        throw Error(files[first + i] + ": cannot load the plugin library in a child first: " + e.what());
      }
      ::close(report[1]);
      ::close(output[1]);
      child.report = report[0];
      child.output = output[0];
      for (int fd : {child.report, child.output}) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
      child.deadline = Clock::now() + std::chrono::milliseconds(limits.time_limit_ms);
    }
    // Until every child is reaped: read their pipes, reap the ones that ended, kill the late.
    for (;;) {
      std::vector<pollfd> waiting;
      bool running = false;
      Clock::time_point next = Clock::time_point::max();
      for (ProbeChild& child : children) {
        if (child.reaped()) continue;
        running = true;
        next = std::min(next, child.deadline);
        for (int fd : {child.report, child.output})
          if (fd >= 0) waiting.push_back({fd, POLLIN, 0});
      }
      if (!running) break;
      // A child whose pipes are closed is reaped by the next round; pipes held open by what it
      // forked must not keep us past its exit, so poll in short rounds.
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now()).count();
      const int timeout_ms = static_cast<int>(std::clamp<long long>(left, 0, 20));
      if (::poll(waiting.data(), waiting.size(), timeout_ms) < 0 && errno != EINTR)
        throw Error(std::string("poll failed while loading plugins: ") + std::strerror(errno));
      for (ProbeChild& child : children) {
        if (child.reaped()) continue;
        if (child.report >= 0) drain(child.report, child.report_text, kProbeReportBytes, false);
        if (child.output >= 0) drain(child.output, child.output_tail, kProbeOutputTailBytes, true);
        pid_t done = ::waitpid(child.pid, &child.status, WNOHANG);
        if (done == 0 && Clock::now() >= child.deadline) {
          child.timed_out = true;
          ::kill(-child.pid, SIGKILL);
          while ((done = ::waitpid(child.pid, &child.status, 0)) < 0 && errno == EINTR) {}
        }
        if (done != child.pid) continue;
        ::kill(-child.pid, SIGKILL);  // what the library forked dies with it
        child.pid = -1;
        // What it wrote before exiting is still in the pipes: read it (non-blocking), then close.
        if (child.report >= 0) drain(child.report, child.report_text, kProbeReportBytes, false);
        if (child.output >= 0) drain(child.output, child.output_tail, kProbeOutputTailBytes, true);
        for (int* fd : {&child.report, &child.output})
          if (*fd >= 0) ::close(std::exchange(*fd, -1));
      }
    }
    for (std::size_t i = 0; i < children.size(); ++i) results[first + i] = probe_outcome(children[i], limits);
  }
  return results;
}

}  // namespace tessera
