// `tessera compile`'s progress line on a terminal: passes done, elapsed, an estimate, the pass running.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "progress.hpp"

namespace tessera::cli {

class CompileProgress {
public:
  /// Draws only when stderr is a terminal and the logs are quiet (at -v the phase lines say it
  /// all); `label` starts the line ("compile mlp-b2-n3").
  explicit CompileProgress(std::string label);
  /// Erases the line.
  ~CompileProgress();
  CompileProgress(const CompileProgress&) = delete;
  CompileProgress& operator=(const CompileProgress&) = delete;

  /// For PassManagerOptions::on_pass; empty when nothing is drawn.
  std::function<void(std::size_t index, std::size_t count, const std::string& pass)> on_pass();
  /// For PassManagerOptions::on_pass_progress; empty when nothing is drawn. Thread-safe.
  std::function<void(std::uint64_t done, std::uint64_t total, std::string_view unit)> on_pass_progress();

private:
  void pass_started(std::size_t index, std::size_t count, const std::string& pass);
  /// "select-finalist, 120/480 ops, about 9s left": the running pass and how far it is.
  std::string activity_locked() const;
  std::string label_;
  bool enabled_ = false;
  std::unique_ptr<ab::Progress> progress_;
  std::mutex mutex_;  ///< guards the fields below and the ticker's wait
  std::string pass_;
  std::chrono::steady_clock::time_point pass_start_;
  std::uint64_t done_ = 0, total_ = 0;  ///< the running pass's own progress; total 0: none said
  std::string unit_;
  std::condition_variable_any wake_;
  std::jthread ticker_;  ///< redraws the line so the elapsed time moves during a long pass
};

}  // namespace tessera::cli
