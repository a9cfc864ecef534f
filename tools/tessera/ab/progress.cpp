// A/B sweep progress: counts, failures and an ETA from the items executed so far.
#include "progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <vector>

#include <fmt/format.h>
#include <spdlog/sinks/sink.h>
#include <spdlog/spdlog.h>

namespace tessera::ab {

namespace {

const char* kClearLine = "\r\033[K";  // carriage return, then erase to the end of the line

// Wraps a logger's sink so each log line clears the live line first and redraws it after.
class LiveLineSink final : public spdlog::sinks::sink {
public:
  LiveLineSink(std::shared_ptr<spdlog::sinks::sink> inner, Progress& progress)
      : inner_(std::move(inner)), progress_(progress) {}
  void log(const spdlog::details::log_msg& message) override {
    progress_.around_output([&] {
      inner_->log(message);
      inner_->flush();
    });
  }
  void flush() override { inner_->flush(); }
  void set_pattern(const std::string& pattern) override { inner_->set_pattern(pattern); }
  void set_formatter(std::unique_ptr<spdlog::formatter> formatter) override {
    inner_->set_formatter(std::move(formatter));
  }
  const std::shared_ptr<spdlog::sinks::sink>& inner() const { return inner_; }

private:
  std::shared_ptr<spdlog::sinks::sink> inner_;
  Progress& progress_;
};

// Unwraps every logger's sinks when the progress line goes away, loggers created meanwhile included.
struct AttachedSinks {
  ~AttachedSinks() {
    spdlog::apply_all([](std::shared_ptr<spdlog::logger> logger) {
      for (spdlog::sink_ptr& sink : logger->sinks())
        if (auto* wrapper = dynamic_cast<LiveLineSink*>(sink.get())) sink = wrapper->inner();
    });
    if (auto fallback = spdlog::default_logger())  // the default logger is what new loggers are cloned from
      for (spdlog::sink_ptr& sink : fallback->sinks())
        if (auto* wrapper = dynamic_cast<LiveLineSink*>(sink.get())) sink = wrapper->inner();
  }
};

}  // namespace

std::string format_duration(double seconds) {
  const auto total = static_cast<long long>(std::llround(std::max(0.0, seconds)));
  if (total < 60) return fmt::format("{}s", total);
  if (total < 3600) return fmt::format("{}m{:02}s", total / 60, total % 60);
  return fmt::format("{}h{:02}m", total / 3600, total % 3600 / 60);
}

Progress::Progress(std::size_t total, std::FILE* stream, Mode mode, double interval_seconds,
                   std::function<double()> clock)
    : total_(total), stream_(stream), mode_(mode), interval_seconds_(interval_seconds), clock_(std::move(clock)) {
  if (!clock_) {
    const auto start = std::chrono::steady_clock::now();
    clock_ = [start] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  }
}

Progress::~Progress() {
  attached_.reset();  // the loggers get their own sinks back before the line is finished
  std::lock_guard lock(mutex_);
  if (mode_ == Mode::live && drawn_)
    std::fputs(erase_when_done_ ? kClearLine : "\n", stream_);  // or leave it on screen
  std::fflush(stream_);
}

Progress::Mode Progress::mode_for_stderr() {
  const char* term = std::getenv("TERM");
  const bool dumb = term && std::string(term) == "dumb";
  return ::isatty(STDERR_FILENO) && !dumb ? Mode::live : Mode::lines;
}

double Progress::now() const { return clock_(); }

std::string Progress::line() const {
  std::lock_guard lock(mutex_);
  return line_locked();
}

std::string Progress::line_locked() const {
  std::string text = fmt::format("{}: {}/{} {} done", label_, done_, total_, unit_);
  if (!erase_when_done_) text += fmt::format(", {} failed, {} skipped", failed_, done_ - executed_);
  text += ", elapsed " + format_duration(now());
  // Passes differ too much in length for an average to say anything: a described line's
  // activity carries its own estimate instead.
  if (executed_ > 0 && done_ < total_ && !erase_when_done_) {
    // Every remaining item is assumed to take what the executed ones took on average.
    const double per_item = executed_seconds_ / static_cast<double>(executed_);
    text += ", ETA " + format_duration(per_item * static_cast<double>(total_ - done_));
  }
  if (!activity_.empty()) text += ", now " + activity_;
  return text;
}

void Progress::draw_locked() {
  std::fputs(kClearLine, stream_);
  std::fputs(line_locked().c_str(), stream_);
  std::fflush(stream_);
  drawn_ = true;
}

void Progress::item_finished(bool executed, bool failed) {
  std::lock_guard lock(mutex_);
  ++done_;
  if (executed) {
    ++executed_;
    executed_seconds_ = now();
  }
  if (failed) ++failed_;
  if (mode_ == Mode::live) {
    draw_locked();
    return;
  }
  const double at = now();
  if (last_printed_ < 0 || done_ == total_ || at - last_printed_ >= interval_seconds_) {
    std::fputs((line_locked() + "\n").c_str(), stream_);
    std::fflush(stream_);
    last_printed_ = at;
  }
}

void Progress::around_output(const std::function<void()>& write) {
  std::lock_guard lock(mutex_);
  if (drawn_) std::fputs(kClearLine, stream_);
  std::fflush(stream_);
  write();
  if (drawn_) draw_locked();
}

void Progress::describe(std::string label, std::string unit) {
  std::lock_guard lock(mutex_);
  label_ = std::move(label);
  unit_ = std::move(unit);
  erase_when_done_ = true;
}

void Progress::set_activity(std::string activity) {
  std::lock_guard lock(mutex_);
  activity_ = std::move(activity);
  if (mode_ == Mode::live) draw_locked();
}

void Progress::redraw() {
  std::lock_guard lock(mutex_);
  if (mode_ == Mode::live) draw_locked();
}

void Progress::attach_to_logs() {
  if (mode_ != Mode::live || attached_) return;
  auto attached = std::make_shared<AttachedSinks>();
  std::map<spdlog::sinks::sink*, spdlog::sink_ptr> wrapped;  // loggers share sinks: wrap each once
  std::vector<std::shared_ptr<spdlog::logger>> loggers{spdlog::default_logger()};
  spdlog::apply_all([&](std::shared_ptr<spdlog::logger> logger) { loggers.push_back(std::move(logger)); });
  for (const auto& logger : loggers) {
    if (!logger) continue;
    for (spdlog::sink_ptr& sink : logger->sinks()) {
      if (dynamic_cast<LiveLineSink*>(sink.get())) continue;  // the default logger is registered too
      auto& wrapper = wrapped[sink.get()];
      if (!wrapper) wrapper = std::make_shared<LiveLineSink>(sink, *this);
      sink = wrapper;
    }
  }
  attached_ = attached;
}

}  // namespace tessera::ab
