// The command line's shared rules: exit codes, "did you mean", `tessera help`, verbosity, '-'.
#include "command_line.hpp"

#include <cstdlib>
#include <filesystem>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "tessera/diagnostic.hpp"
#include "tessera/log.hpp"
#include "tessera/log_filter.hpp"
#include "tessera/yaml_text.hpp"

namespace tessera::cli {

namespace {

std::vector<CLI::App*> visible_subcommands(CLI::App& app) {
  // A subcommand in the "" group is internal (e.g. `ab task`, started by Slurm).
  return app.get_subcommands([](CLI::App* sub) { return !sub->get_group().empty(); });
}

std::vector<std::string> names_of(const std::vector<CLI::App*>& subs) {
  std::vector<std::string> names;
  for (const CLI::App* sub : subs) names.push_back(sub->get_name());
  return names;
}

std::string command_path(const std::vector<CLI::App*>& chain) {
  std::string path = "tessera";
  for (std::size_t i = 1; i < chain.size(); ++i) path += " " + chain[i]->get_name();
  return path;
}

std::string help_hint(const std::vector<CLI::App*>& chain) {
  std::string path = "tessera help";
  for (std::size_t i = 1; i < chain.size(); ++i) path += " " + chain[i]->get_name();
  return " (`" + path + "` shows the usage)";
}

const CLI::Option* find_option(const std::vector<CLI::App*>& chain, const std::string& name) {
  for (auto it = chain.rbegin(); it != chain.rend(); ++it)
    for (const CLI::Option* option : (*it)->get_options())
      if (!option->get_positional() && option->check_name(name)) return option;
  return nullptr;
}

std::string unknown_option_message(const std::vector<CLI::App*>& chain, const std::string& name) {
  std::vector<std::string> names;
  for (CLI::App* app : chain)
    for (const CLI::Option* option : app->get_options()) {
      for (const std::string& l : option->get_lnames()) names.push_back("--" + l);
      for (const std::string& s : option->get_snames()) names.push_back("-" + s);
    }
  std::string message = command_path(chain) + ": unknown option " + echoed_token(name);
  if (const std::string near = nearest_name(name, names); !near.empty()) message += "; did you mean '" + near + "'?";
  return message + help_hint(chain);
}

std::string unknown_command_message(CLI::App& app, const std::vector<CLI::App*>& chain, const std::string& word) {
  const std::vector<std::string> names = names_of(visible_subcommands(app));
  std::string message = command_path(chain) + ": unknown command " + echoed_token(word);
  if (const std::string near = nearest_name(word, names); !near.empty()) message += "; did you mean '" + near + "'?";
  return message + fmt::format(" (commands: {})", fmt::join(names, ", "));
}

bool looks_like_number(const std::string& token) {
  char* end = nullptr;
  std::strtod(token.c_str(), &end);
  return end && *end == '\0';
}

// Walks the arguments as CLI11 will, and names the first mistake it can explain better than
// CLI11 does: an unknown command or option (with the nearest name), a missing command. "" when
// it finds none.
std::string explain(CLI::App& app, const std::vector<std::string>& args) {
  std::vector<CLI::App*> chain{&app};
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& token = args[i];
    if (token == "--") break;
    if (token.size() > 1 && token[0] == '-' && !looks_like_number(token)) {
      const std::size_t equals = token.find('=');
      std::string name = token.substr(0, equals);
      if (name[1] != '-') name = name.substr(0, 2);  // -vv, -ofile
      const CLI::Option* option = find_option(chain, name);
      if (!option) return unknown_option_message(chain, name);
      const bool value_attached = equals != std::string::npos || (name[1] != '-' && token.size() > 2);
      if (option->get_expected_min() > 0 && !value_attached) ++i;
      continue;
    }
    CLI::App* current = chain.back();
    auto subs = visible_subcommands(*current);
    bool entered = false;
    for (CLI::App* sub : current->get_subcommands([](CLI::App*) { return true; }))
      if (sub->check_name(token)) {
        chain.push_back(sub);
        entered = true;
        break;
      }
    if (entered) continue;
    const bool takes_words = !current->get_options([](const CLI::Option* o) { return o->get_positional(); }).empty();
    if (!subs.empty() && !takes_words) return unknown_command_message(*current, chain, token);
  }
  CLI::App* last = chain.back();
  if (last->get_require_subcommand_min() > 0)
    return command_path(chain) + ": no command given" +
           fmt::format(" (commands: {})", fmt::join(names_of(visible_subcommands(*last)), ", ")) + help_hint(chain);
  return "";
}

}  // namespace

void add_log_flags(CLI::App& app, LogFlags& flags) {
  app.add_flag("-v,--verbose", flags.verbose,
               "log what each step does: -v the phases and their figures, -vv debug detail, -vvv trace");
  app.add_flag("-q,--quiet", flags.quiet, "errors only: no warnings");
  app.add_option("--log-level", flags.level, "trace, debug, info, warn, error or off (overrides -v and -q)")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
}

void configure_command_logging(const LogFlags& flags) {
  static const char* by_verbosity[] = {"warn", "info", "debug", "trace"};
  const bool chosen = !flags.level.empty() || flags.verbose > 0 || flags.quiet;
  std::string level = by_verbosity[std::min(flags.verbose, 3)];
  if (flags.quiet) level = "error";
  if (!flags.level.empty()) level = flags.level;
  configure_logging(level);
  // The command line's choice of level wins over a bare level in TESSERA_LOG; areas apply on top.
  if (const char* filter = std::getenv("TESSERA_LOG")) set_log_areas(filter, "TESSERA_LOG", !chosen);
}

CLI::App* add_help_command(CLI::App& app, std::vector<std::string>& words) {
  CLI::App* help = app.add_subcommand("help", "show a command's usage: tessera help COMMAND [SUBCOMMAND]");
  help->add_option("command", words, "the command (and subcommand) to explain");
  return help;
}

int run_help_command(CLI::App& app, const std::vector<std::string>& words) {
  std::vector<CLI::App*> chain{&app};
  for (const std::string& word : words) {
    CLI::App* found = nullptr;
    for (CLI::App* sub : chain.back()->get_subcommands([](CLI::App*) { return true; }))
      if (sub->check_name(word)) found = sub;
    if (!found) {
      fmt::print(stderr, "error: {}\n", unknown_command_message(*chain.back(), chain, word));
      return kExitUserError;
    }
    chain.push_back(found);
  }
  std::string prefix = "tessera";
  for (std::size_t i = 1; i + 1 < chain.size(); ++i) prefix += " " + chain[i]->get_name();
  // The root's help() would describe the selected subcommand, `help` itself.
  fmt::print("{}", chain.size() == 1 ? app.get_formatter()->make_help(&app, app.get_name(), CLI::AppFormatMode::Normal)
                                     : chain.back()->help(prefix));
  return kExitSuccess;
}

void refuse_negative_unsigned(CLI::App& app) {
  static const CLI::Validator not_negative(
      [](std::string& value) {
        return value.rfind('-', 0) == 0 ? "must not be negative, got " + value : std::string();
      },
      "", "not negative");
  for (CLI::Option* option : app.get_options([](const CLI::Option*) { return true; }))
    if (option->get_type_name() == "UINT") option->check(not_negative);
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) refuse_negative_unsigned(*sub);
}

std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  // '-' would be taken as a file named '-': refused before CLI11 sees it.
  for (std::size_t i = 0; i < args.size() && args[i] != "--"; ++i) {
    if (args[i] != "-") continue;
    const bool after_option = i > 0 && args[i - 1].size() > 1 && args[i - 1][0] == '-';
    fmt::print(stderr,
               "error: {}'-' (standard input or output) is not supported here; tessera reads and writes named "
               "files, so give a file name\n",
               after_option ? args[i - 1] + " -: " : "");
    return kExitUserError;
  }
  try {
    app.parse(argc, argv);
    return std::nullopt;
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);  // --help, --version
    std::string message = explain(app, args);
    if (message.empty()) message = e.what();
    fmt::print(stderr, "error: {}\n", printable_error(message));
    return kExitUserError;
  }
}

void check_output_folder(const std::string& path, const std::string& option, bool make_folders) {
  if (path.empty()) return;
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  std::error_code ec;
  // Something else there (a file) is the writer's to report: it names what it could not write.
  if (make_folders || folder.empty() || std::filesystem::exists(folder, ec)) return;
  throw Error(fmt::format("{} {}: folder {} does not exist; create it, or add --mkdir to have tessera create it",
                          option, path, folder.string()));
}

}  // namespace tessera::cli
