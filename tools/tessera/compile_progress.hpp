// `tessera compile`'s progress line on a terminal: passes done, elapsed, an estimate, the pass running.
#pragma once
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
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

private:
  void pass_started(std::size_t index, std::size_t count, const std::string& pass);
  std::string label_;
  bool enabled_ = false;
  std::unique_ptr<ab::Progress> progress_;
  std::mutex mutex_;
  std::condition_variable_any wake_;
  std::jthread ticker_;  ///< redraws the line so the elapsed time moves during a long pass
};

}  // namespace tessera::cli
