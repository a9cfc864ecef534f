// The child side of `isolate: process`, run by tessera-plugin-host: the library probe (load a
// plugin once and report) and the request loop (load, configure, then schedule or estimate).
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <new>

#include "isolation_protocol.hpp"
#include "tessera/cost_model.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/log.hpp"
#include "tessera/plugin_host.hpp"
#include "tessera/scheduler.hpp"

namespace tessera {

using namespace isolation;

// ---- Child side ----------------------------------------------------------------------------

namespace {

// Set by the new-handler: an allocation failed, so the reply says the memory limit was hit
// rather than whatever exception the plugin turned that into.
volatile std::sig_atomic_t allocation_failed = 0;

void note_failed_allocation() {
  allocation_failed = 1;
  std::set_new_handler(nullptr);
  throw std::bad_alloc();
}

bool reply(int fd, Writer& message) { return send_all(fd, message.frame()) == IoResult::ok; }

bool reply_failure(int fd, const std::string& what) {
  Writer failed(Message::failed);
  failed.put(static_cast<std::uint8_t>(allocation_failed != 0));
  failed.put_string(what);
  return reply(fd, failed);
}

}  // namespace

namespace {
int probe_report_fd = -1;

// In the probe child, any failed allocation is the library's doing: say so and stop.
void report_failed_allocation() {
  const char line[] = "memory\n";
  [[maybe_unused]] const ssize_t ignored = ::write(probe_report_fd, line, sizeof line - 1);
  ::_exit(3);
}
}  // namespace

int probe_plugin_library(const std::string& file, int report_fd) {
  probe_report_fd = report_fd;
  std::set_new_handler(&report_failed_allocation);
  std::string line;
  int code = 0;
  try {
    PluginHost host;
    host.set_load_sandbox(std::nullopt);  // this is the sandbox
    line = "loaded " + host.load_file(file).name;
  } catch (const std::exception& e) {
    line = std::string("refused ") + e.what();
    code = 1;
  }
  for (char& c : line)
    if (c == '\n') c = ' ';
  line += '\n';
  std::size_t sent = 0;
  while (sent < line.size()) {
    const ssize_t n = ::write(report_fd, line.data() + sent, line.size() - sent);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return 4;
    sent += static_cast<std::size_t>(n);
  }
  return code;
}

int serve_plugin_requests(int channel_fd) {
  auto log = logger("tessera.isolation");
  PluginHost host;
  host.set_load_sandbox(std::nullopt);  // the compiler loaded the library in a child of its own first
  std::unique_ptr<ExchangeScheduler> scheduler;
  std::unique_ptr<CostModel> cost_model;
  for (;;) {
    Frame request{};
    try {
      if (read_frame(channel_fd, request, Clock::time_point::max()) != IoResult::ok) return 0;  // parent is done
    } catch (const ProtocolError& e) {
      log->error("tessera-plugin-host: {}", e.what());
      return 3;
    }
    allocation_failed = 0;
    std::set_new_handler(&note_failed_allocation);
    try {
      Reader in(request.payload);
      if (request.type == Message::load) {
        const auto kind = static_cast<PluginKind>(in.get<std::uint32_t>());
        const std::string file = in.get_string();
        const std::string name = in.get_string();
        const Options options = get_options(in);
        in.finish();
        const PluginInfo& info = host.load_file(file);
        if (info.name != name) throw Error(file + ": provides plugin '" + info.name + "', not '" + name + "'");
        if (info.kind != kind) throw Error(file + ": plugin '" + name + "' is not a " + plugin_kind_name(kind));
        if (kind == PluginKind::exchange_scheduler) scheduler = host.create_scheduler(info, options);
        else if (kind == PluginKind::cost_model) cost_model = host.create_cost_model(info, options);
        else throw ProtocolError(std::string("plugins of kind ") + plugin_kind_name(kind) + " cannot be isolated");
        Writer loaded(Message::loaded);
        if (!reply(channel_fd, loaded)) return 0;
      } else if (request.type == Message::schedule) {
        if (!scheduler) throw ProtocolError("a schedule request before the plugin was loaded");
        const Target target = get_target(in);
        const auto budget_ms = in.get<std::uint64_t>();
        const ExchangePhase phase = get_phase(in);
        in.finish();
        // schedule() validates too, so an invalid schedule is reported with its conflict.
        const Schedule schedule = scheduler->schedule(phase, target, budget_ms);
        Writer scheduled(Message::scheduled);
        scheduled.put(static_cast<std::uint32_t>(schedule.segments.size()));
        for (const Segment& segment : schedule.segments) {
          scheduled.put(segment.transfer);
          scheduled.put(segment.start);
          scheduled.put(segment.words);
        }
        if (!reply(channel_fd, scheduled)) return 0;
      } else if (request.type == Message::estimate || request.type == Message::estimate_exchange) {
        if (!cost_model) throw ProtocolError("an estimate request before a cost model was loaded");
        const Target target = get_target(in);
        if (request.type == Message::estimate) {
          const Program program = get_program(in);
          in.finish();
          const CostEstimate estimate = cost_model->estimate(program, target);
          Writer estimated(Message::estimated);
          for (std::uint64_t v :
               {estimate.compute_cycles, estimate.exchange_cycles, estimate.sync_cycles, estimate.peak_tile_bytes})
            estimated.put(v);
          if (!reply(channel_fd, estimated)) return 0;
        } else {
          const ExchangePhase phase = get_phase(in);
          in.finish();
          Writer estimated(Message::estimated_exchange);
          estimated.put(cost_model->estimate_exchange(phase, target));
          if (!reply(channel_fd, estimated)) return 0;
        }
      } else {
        throw ProtocolError("unknown message type " + std::to_string(static_cast<int>(request.type)));
      }
    } catch (const PluginError& e) {
      // The parent names the plugin itself; send the reason alone.
      std::string what = e.what();
      const std::string prefix = "plugin '" + e.plugin_name + "': ";
      if (what.rfind(prefix, 0) == 0) what.erase(0, prefix.size());
      if (!reply_failure(channel_fd, what)) return 0;
    } catch (const std::exception& e) {
      if (!reply_failure(channel_fd, e.what())) return 0;
    }
  }
}

}  // namespace tessera
