// `tessera compile`'s progress line on a terminal: passes done, elapsed, an estimate, the pass running.
#include "compile_progress.hpp"

#include <chrono>

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

void CompileProgress::pass_started(std::size_t index, std::size_t count, const std::string& pass) {
  if (!progress_) {
    progress_ = std::make_unique<ab::Progress>(count, stderr, ab::Progress::Mode::live);
    progress_->describe(label_, "passes");
    progress_->attach_to_logs();
    ticker_ = std::jthread([this](std::stop_token stop) {
      std::unique_lock lock(mutex_);
      while (!wake_.wait_for(lock, stop, std::chrono::milliseconds(250), [] { return false; })) {
        if (stop.stop_requested()) return;
        progress_->redraw();
      }
    });
  }
  if (index > 0) progress_->item_finished(true, false);
  progress_->set_activity(pass);
}

}  // namespace tessera::cli
