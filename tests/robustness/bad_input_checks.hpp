// What every bad-input case checks, shared by the robustness test files: the real `tessera`
// binary fails cleanly, names the file and place, and leaves no partial output.
#pragma once
#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "run_command.hpp"
#include "temp_dir.hpp"

namespace tessera::testing {

inline const std::string kSmallModel = source_path("configs/models/mlp-small.yaml");
inline const std::string kSmallPipeline = source_path("configs/pipelines/small.yaml");
inline const std::string kTestPlugins = std::string(TESSERA_BINARY_DIR) + "/test-plugins/";

/// Counts one bad-input case; the total is printed when the test executable exits.
void count_bad_input_case();

std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& bytes);

/// No package and no temporary file of one (".NAME.tmp-PID...") anywhere under `dir`.
void check_no_partial_output(const std::filesystem::path& dir, const std::string& package);

/// One bad-input case: non-zero exit, no signal, no crash or sanitizer report, and a last
/// `error:` line that contains every string of `names` (the file and the place, or the plugin).
void check_clean_error(const CommandResult& r, const std::vector<std::string>& names);

/// check_clean_error, and no package and no temporary left in `dir`.
void check_clean_failure(const CommandResult& r, const std::vector<std::string>& names,
                         const std::filesystem::path& dir, const std::string& package);

/// The last line of stderr that starts with "error: ", or "" when there is none.
std::string last_error_line(const std::string& err);

/// A copy of the small pipeline in `dir` with `from` replaced by `to` (the shipped paths made absolute).
std::string pipeline_with(const TempDir& dir, const std::string& from, const std::string& to,
                          const std::string& name = "pipeline.yaml");
/// The small pipeline with one more plugin folder in front.
std::string pipeline_with_plugin_dir(const TempDir& dir, const std::string& folder);
/// mlp-small, and the t16 target, with `from` replaced by `to`, written into `dir`.
std::string model_with(const TempDir& dir, const std::string& from, const std::string& to);
std::string target_with(const TempDir& dir, const std::string& from, const std::string& to);

/// A second, unprivileged system user (`tessera-robustness`, created with useradd on first use)
/// to own or plant files as; none when not root or when useradd fails (callers then skip).
struct OtherUser {
  uid_t uid;
  gid_t gid;
};
std::optional<OtherUser> other_user();

CommandResult compile(const std::string& model, const std::string& pipeline, const std::string& package,
                      std::vector<std::string> extra = {});

}  // namespace tessera::testing
