// Progress of an A/B sweep: a live line redrawn in place on a terminal, plain periodic lines in logs.
#pragma once
#include <cstddef>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

namespace tessera::ab {

class Progress {
public:
  enum class Mode {
    live,   ///< one line redrawn in place (a terminal)
    lines,  ///< a plain line at the first and last item and at most every `interval_seconds` between
  };
  /// `clock` returns seconds since the sweep started (steady_clock when empty; tests pass their own).
  Progress(std::size_t total, std::FILE* stream, Mode mode, double interval_seconds = 30,
           std::function<double()> clock = {});
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  /// Live on a terminal (stderr is a tty and TERM is not "dumb"), else plain lines, on stderr.
  static Mode mode_for_stderr();

  /// One item finished: `executed` when it was compiled now (not skipped as finished earlier),
  /// `failed` when its compile or run failed. Safe to call from several workers.
  void item_finished(bool executed, bool failed);

  /// "ab progress: 12/40 items done, 1 failed, 0 skipped, elapsed 1m05s, ETA 3m10s"; no ETA
  /// until an item has been executed (skipped ones take no time and predict nothing).
  std::string line() const;

  /// While it lives, log lines of every tessera logger first clear the live line and then redraw
  /// it, so the log scrolls above and the live line stays at the bottom. Live mode only.
  void attach_to_logs();

  /// Runs `write` (a log line's output) with the live line cleared before and drawn again after.
  void around_output(const std::function<void()>& write);

  /// For other long work than a sweep (`tessera compile`'s passes): the line reads "LABEL: 2/5
  /// UNIT done, elapsed 12s, now ACTIVITY", without failed and skipped counts or an ETA, and it is
  /// erased when the progress ends instead of being left on screen.
  void describe(std::string label, std::string unit);
  /// What runs now (a pass's name), shown at the end of the line.
  void set_activity(std::string activity);
  /// Draws the live line again so its elapsed time moves during a long item (live mode only).
  void redraw();

private:
  void draw_locked();
  std::string line_locked() const;
  double now() const;
  std::size_t total_;
  std::FILE* stream_;
  Mode mode_;
  double interval_seconds_;
  std::function<double()> clock_;
  mutable std::mutex mutex_;
  std::size_t done_ = 0, executed_ = 0, failed_ = 0;
  double executed_seconds_ = 0;  ///< the clock when the last executed item finished
  double last_printed_ = -1;
  bool drawn_ = false;
  std::string label_ = "ab progress", unit_ = "items", activity_;
  bool erase_when_done_ = false;
  std::shared_ptr<void> attached_;  ///< the log sink wrapper while attached
};

/// "45s", "3m10s", "2h05m".
std::string format_duration(double seconds);

}  // namespace tessera::ab
