// The command line's shared rules: exit codes, "did you mean", `tessera help`, verbosity, '-'.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "tessera/diagnostic.hpp"
#include "tessera/shipped_configs.hpp"

namespace tessera::cli {

/// Every command's exit status (README "Exit codes").
inline constexpr int kExitSuccess = 0;
inline constexpr int kExitUserError = 1;  ///< a mistake the user can fix, or a failed check
inline constexpr int kExitInternal = 2;   ///< a bug in tessera

/// The global flags: -v/-vv/-q, --log-level; read after parsing by configure_command_logging.
struct LogFlags {
  int verbose = 0;
  bool quiet = false;
  std::string level;  ///< --log-level, when given
};
void add_log_flags(CLI::App& app, LogFlags& flags);

/// Sets the log level: --log-level, else -q (error), -v (info), -vv (debug), -vvv (trace), else
/// warn; then TESSERA_LOG's AREA=LEVEL entries (a bare level there stands in for the default).
/// Throws Error on a bad TESSERA_LOG.
void configure_command_logging(const LogFlags& flags);

/// `tessera help [COMMAND [SUBCOMMAND]]`: that command's --help; the names go to `words`.
CLI::App* add_help_command(CLI::App& app, std::vector<std::string>& words);
/// Prints the help `words` ask for; returns the exit status (1 and a suggestion for an unknown name).
int run_help_command(CLI::App& app, const std::vector<std::string>& words);

/// Unsigned options refuse negative numbers (CLI11 would wrap -5 to 2^64-5); every option of
/// every subcommand, so call it after all are added.
void refuse_negative_unsigned(CLI::App& app);

/// Parses argv. Returns the exit status when the process should stop now (help, version, a
/// parse error printed as `error: ...` with "did you mean" where a name is close), else nullopt.
std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv);

/// A CLI11 transform: a shipped config's name becomes its file (`-p small`, `-t t16`); `kind`
/// is its folder: "pipelines", "targets", "models" or "suites" (tessera::find_config). Inline:
/// `tessera ab` and `tune` (their own library) use it too.
inline CLI::Validator shipped_config(const std::string& kind) {
  return CLI::Validator(
      [kind](std::string& value) -> std::string {
        try {
          value = find_config(value, kind, "");
          return "";
        } catch (const Error& e) {
          return std::string(e.what()).substr(1);  // find_config's message after the empty `what`
        }
      },
      "", "shipped " + kind);
}

/// `-o`'s folder must exist unless --mkdir was given (the writer then makes it): a typo would
/// otherwise make folders. Throws Error naming the option and the folder.
void check_output_folder(const std::string& path, const std::string& option, bool make_folders);

}  // namespace tessera::cli
