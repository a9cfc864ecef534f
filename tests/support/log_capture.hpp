// Captures what one spdlog logger writes while it lives, for tests that check log lines.
#pragma once
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <sstream>
#include <string>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "tessera/log.hpp"

namespace tessera::testing {

class LogCapture {
public:
  /// Adds a sink to `logger_name` (e.g. "tessera.scheduler.milp") at `level` and up; the
  /// destructor removes it and restores the logger's level.
  explicit LogCapture(const std::string& logger_name, spdlog::level::level_enum level = spdlog::level::info)
      : logger_(tessera::logger(logger_name)),
        sink_(std::make_shared<spdlog::sinks::ostream_sink_mt>(stream_)),
        previous_level_(logger_->level()) {
    sink_->set_pattern("%v");
    logger_->sinks().push_back(sink_);
    logger_->set_level(level);
  }
  ~LogCapture() {
    auto& sinks = logger_->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
    logger_->set_level(previous_level_);
  }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  /// Everything captured so far.
  std::string text() const { return stream_.str(); }

  /// The last line containing `marker` since the previous call, which it forgets; the test
  /// fails if there is none.
  std::string take_last_line_with(const std::string& marker) {
    const std::string captured = stream_.str();
    stream_.str("");
    const std::size_t at = captured.rfind(marker);
    INFO("no log line contains '" << marker << "' in:\n" << captured);
    REQUIRE(at != std::string::npos);
    const std::size_t line_start = captured.rfind('\n', at);
    const std::size_t begin = line_start == std::string::npos ? 0 : line_start + 1;
    return captured.substr(begin, captured.find('\n', at) - begin);
  }

private:
  std::shared_ptr<spdlog::logger> logger_;
  std::ostringstream stream_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
  spdlog::level::level_enum previous_level_;
};

}  // namespace tessera::testing
