// What every bad-input case checks (see bad_input_checks.hpp).
#include "bad_input_checks.hpp"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>

namespace fs = std::filesystem;

namespace tessera::testing {

namespace {

// Bad-input cases checked, printed when the test executable exits (for the closing figures).
int g_cases = 0;
struct CaseCountPrinter {
  ~CaseCountPrinter() {
    if (g_cases > 0) std::fprintf(stderr, "bad-input cases checked: %d\n", g_cases);
  }
} g_case_count_printer;

}  // namespace

void count_bad_input_case() { ++g_cases; }

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

void check_no_partial_output(const fs::path& dir, const std::string& package) {
  CHECK_FALSE(fs::exists(package));
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    if (it->is_symlink(ec)) it.disable_recursion_pending();
    INFO("left behind: " << it->path());
    CHECK(it->path().filename().string().find(".tmp-") == std::string::npos);
  }
}

std::string last_error_line(const std::string& err) {
  const auto found = err.rfind("\nerror: ");
  if (found == std::string::npos && err.rfind("error: ", 0) != 0) return "";
  const auto at = found == std::string::npos ? 0 : found + 1;
  return err.substr(at, err.find('\n', at) - at);
}

void check_clean_error(const CommandResult& r, const std::vector<std::string>& names) {
  count_bad_input_case();
  INFO("stderr:\n" << r.err.substr(0, 20000));
  CHECK(r.exit_code > 0);
  CHECK(r.signal == 0);
  for (const char* crash :
       {"terminate called", "internal error", "AddressSanitizer", "runtime error:", "Segmentation fault"})
    CHECK_THAT(r.err, !Catch::Contains(crash));
  const std::string line = last_error_line(r.err);
  REQUIRE_FALSE(line.empty());
  for (const auto& name : names) CHECK_THAT(line, Catch::Contains(name));
}

void check_clean_failure(const CommandResult& r, const std::vector<std::string>& names, const fs::path& dir,
                         const std::string& package) {
  check_clean_error(r, names);
  check_no_partial_output(dir, package);
}

std::string pipeline_with(const TempDir& dir, const std::string& from, const std::string& to, const std::string& name) {
  std::string text = read_file(pipeline_copy(dir, kSmallPipeline, "pipeline: small", "pipeline: small"));
  REQUIRE(text.find(from) != std::string::npos);
  text.replace(text.find(from), from.size(), to);
  return dir.write(name, text);
}

std::optional<OtherUser> other_user() {
  static const std::optional<OtherUser> user = []() -> std::optional<OtherUser> {
    if (::geteuid() != 0) return std::nullopt;
    const std::string name = "tessera-robustness";
    const auto shell = [](const std::string& command) { return run_command({"/bin/sh", "-c", command}); };
    if (shell("id -u " + name).exit_code != 0 &&
        shell("useradd --system --no-create-home --shell /usr/sbin/nologin " + name).exit_code != 0)
      return std::nullopt;
    const CommandResult uid = shell("id -u " + name), gid = shell("id -g " + name);
    if (uid.exit_code != 0 || gid.exit_code != 0) return std::nullopt;
    return OtherUser{static_cast<uid_t>(std::stoul(uid.out)), static_cast<gid_t>(std::stoul(gid.out))};
  }();
  return user;
}

std::string pipeline_with_plugin_dir(const TempDir& dir, const std::string& folder) {
  return pipeline_with(dir, "plugin_paths: [", "plugin_paths: [" + folder + ", ");
}

std::string model_with(const TempDir& dir, const std::string& from, const std::string& to) {
  std::string text = read_file(kSmallModel);
  REQUIRE(text.find(from) != std::string::npos);
  text.replace(text.find(from), from.size(), to);
  return dir.write("model.yaml", text);
}

std::string target_with(const TempDir& dir, const std::string& from, const std::string& to) {
  std::string text = read_file(source_path("configs/targets/t16.yaml"));
  REQUIRE(text.find(from) != std::string::npos);
  text.replace(text.find(from), from.size(), to);
  return dir.write("target.yaml", text);
}

CommandResult compile(const std::string& model, const std::string& pipeline, const std::string& package,
                      std::vector<std::string> extra) {
  std::vector<std::string> arguments{tessera_binary(), "compile", model, "-p", pipeline, "-o", package};
  arguments.insert(arguments.end(), extra.begin(), extra.end());
  return run_command(arguments);
}

}  // namespace tessera::testing
