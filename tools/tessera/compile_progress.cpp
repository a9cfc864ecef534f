// `tessera compile`'s progress line on a terminal: passes done, elapsed, an estimate, the pass running.
#include "compile_progress.hpp"

#include <chrono>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace tessera::cli {

CompileProgress::CompileProgress(std::string label) : label_(std::move(label)) {
  enabled_ = ab::Progress::mode_for_stderr() == ab::Progress::Mode::live &&
             spdlog::default_logger()->level() >= spdlog::level::warn;
}

CompileProgress::~CompileProgress() {
  if (ticker_.joinable()) {
    ticker_.request_stop();
    ticker_.join();
  }
  progress_.reset();  // erases the line
}

std::function<void(std::size_t, std::size_t, const std::string&)> CompileProgress::on_pass() {
  if (!enabled_) return {};
  return [this](std::size_t index, std::size_t count, const std::string& pass) { pass_started(index, count, pass); };
}

std::function<void(std::uint64_t, std::uint64_t, std::string_view)> CompileProgress::on_pass_progress() {
  if (!enabled_) return {};
  // Only recorded here: the ticker draws it, so a pass may call this per op without flooding.
  return [this](std::uint64_t done, std::uint64_t total, std::string_view unit) {
    std::lock_guard lock(mutex_);
    done_ = done;
    total_ = total;
    if (unit_ != unit) unit_ = unit;
  };
}

std::string CompileProgress::activity_locked() const {
  std::string text = pass_;
  if (total_ == 0 || done_ > total_) return text;
  text += fmt::format(", {}/{} {}", done_, total_, unit_);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - pass_start_).count();
  // The units left are assumed to take what the done ones took on average.
  if (done_ > 0 && done_ < total_ && seconds >= 1)
    text += ", about " +
            ab::format_duration(seconds / static_cast<double>(done_) * static_cast<double>(total_ - done_)) + " left";
  return text;
}

void CompileProgress::pass_started(std::size_t index, std::size_t count, const std::string& pass) {
  if (!progress_) {
    progress_ = std::make_unique<ab::Progress>(count, stderr, ab::Progress::Mode::live);
    progress_->describe(label_, "passes");
    progress_->attach_to_logs();
    ticker_ = std::jthread([this](std::stop_token stop) {
      std::unique_lock lock(mutex_);
      while (!wake_.wait_for(lock, stop, std::chrono::milliseconds(250), [] { return false; })) {
        if (stop.stop_requested()) return;
        progress_->set_activity(activity_locked());  // draws the line again: elapsed time moves
      }
    });
  }
  if (index > 0) progress_->item_finished(true, false);
  std::lock_guard lock(mutex_);
  pass_ = pass;
  pass_start_ = std::chrono::steady_clock::now();
  done_ = total_ = 0;
  progress_->set_activity(activity_locked());
}

}  // namespace tessera::cli
