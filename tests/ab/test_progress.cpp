// The sweep's progress line: counts, failures, ETA from executed items, live redraw versus plain lines.
#include <catch2/catch.hpp>

#include <cstdio>
#include <string>

#include "progress.hpp"

using namespace tessera::ab;

namespace {

// What a Progress wrote to its stream, read back from a temporary file.
std::string written(std::FILE* file) {
  std::fflush(file);
  std::rewind(file);
  std::string text;
  for (int c = std::fgetc(file); c != EOF; c = std::fgetc(file)) text += static_cast<char>(c);
  return text;
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t found = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++found;
  return found;
}

}  // namespace

TEST_CASE("progress lines: first, last and at most one per interval, ETA from executed items only", "[ab][progress]") {
  std::FILE* file = std::tmpfile();
  REQUIRE(file);
  double clock = 0;
  {
    Progress progress(5, file, Progress::Mode::lines, 30, [&] { return clock; });
    progress.item_finished(false, false);  // skipped at 0 s: printed (the first), no ETA yet
    CHECK(progress.line() == "ab progress: 1/5 items done, 0 failed, 1 skipped, elapsed 0s");
    clock = 10;
    progress.item_finished(true, false);  // 10 s for one executed item, three to go
    CHECK(progress.line() == "ab progress: 2/5 items done, 0 failed, 1 skipped, elapsed 10s, ETA 30s");
    clock = 45;
    progress.item_finished(true, true);  // 45 s since the last line: printed
    clock = 50;
    progress.item_finished(true, false);  // 5 s later: not printed
    clock = 200;
    progress.item_finished(true, false);  // the last: printed, no ETA
  }
  const std::string text = written(file);
  std::fclose(file);
  CHECK(count(text, "\n") == 3);
  CHECK(count(text, "\r") == 0);
  CHECK(text.find("ab progress: 1/5 items done, 0 failed, 1 skipped, elapsed 0s\n") == 0);
  CHECK(text.find("ab progress: 3/5 items done, 1 failed, 1 skipped, elapsed 45s, ETA 45s\n") != std::string::npos);
  CHECK(text.find("ab progress: 5/5 items done, 1 failed, 1 skipped, elapsed 3m20s\n") != std::string::npos);
}

TEST_CASE("progress live line is redrawn in place and stays below log output", "[ab][progress]") {
  std::FILE* file = std::tmpfile();
  REQUIRE(file);
  double clock = 0;
  {
    Progress progress(2, file, Progress::Mode::live, 30, [&] { return clock; });
    clock = 4;
    progress.item_finished(true, false);
    progress.around_output([&] { std::fputs("a log line\n", file); });
    clock = 8;
    progress.item_finished(true, false);
  }
  const std::string text = written(file);
  std::fclose(file);
  const std::string first = "\r\033[Kab progress: 1/2 items done, 0 failed, 0 skipped, elapsed 4s, ETA 4s";
  // Drawn, cleared for the log line, drawn again under it, redrawn at the end, one newline when done.
  CHECK(text == first + "\r\033[Ka log line\n" + first +
                    "\r\033[Kab progress: 2/2 items done, 0 failed, 0 skipped, elapsed 8s\n");
  CHECK(format_duration(7322) == "2h02m");
}
