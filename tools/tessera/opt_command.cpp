// `tessera opt`: read a state, run named passes on it through a Session, write the state.
#include "opt_command.hpp"

#include <chrono>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "command_line.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/output_file.hpp"
#include "tessera/session.hpp"
#include "tessera/state_file.hpp"

namespace tessera::cli {

CLI::App* add_opt_command(CLI::App& app, OptRequest& request) {
  auto* opt = app.add_subcommand("opt", "run passes on a saved compilation state (from --dump-after or a reproducer)");
  opt->add_option("state", request.state, "state file (.tstate)")->required()->check(CLI::ExistingFile);
  opt->add_option("--pipeline,-p", request.pipeline,
                  "pipeline YAML or a shipped pipeline's name: plugin paths, cost model, scheduler, pass options")
      ->required()
      ->transform(shipped_config("pipelines"))
      ->check(CLI::ExistingFile);
  opt->add_option("--pass", request.passes, "pass to run (repeat for several, in order)")->required();
  opt->add_option("--option", request.options, "KEY=VALUE for the pass, over the pipeline's (one --pass only)");
  opt->add_option("--output,-o", request.output, "state file to write");
  opt->add_option("--dump", request.dump, "also write the text dump of the result here");
  opt->add_option("--package", request.package, "also write the package (.tpkg), once emit-tile-code has run");
  opt->add_option("--dump-filter", request.dump_filter, "what the text dump shows: tile=0-3,op=dense1");
  opt->add_flag("--print", request.print, "print the text dump of the result");
  return opt;
}

int opt_command(const OptRequest& request) {
  if (request.output.empty() && request.dump.empty() && request.package.empty() && !request.print)
    throw Error("tessera opt: nothing to write; give -o STATE, --dump FILE, --package FILE or --print");
  if (!request.options.empty() && request.passes.size() != 1)
    throw Error("--option applies to one pass; run one --pass at a time to give options");
  const DumpFilter filter = parse_dump_filter(request.dump_filter);
  const std::vector<InputFile> inputs{{request.state, "the state"}, {request.pipeline, "the pipeline (-p)"}};
  check_output_file(request.output, "the state (-o)", inputs);
  check_output_file(request.dump, "the dump (--dump)", inputs);
  check_output_file(request.package, "the package (--package)", inputs);

  SessionOptions options;
  options.pipeline = request.pipeline;
  Session session(options);
  std::vector<PluginUse> uses;
  for (const std::string& pass : request.passes) uses.push_back(session.pass_use(pass, request.options));
  using Clock = std::chrono::steady_clock;
  const auto ms = [](Clock::duration d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); };
  const auto read_start = Clock::now();
  CompilationState state = read_state(request.state);
  const auto before = state_sections(state);
  const auto start = Clock::now();
  const Status status = session.run_passes(state, uses);
  const auto ran = Clock::now();
  if (!status.ok) throw Error(status.message);

  std::vector<std::string> changed;
  const auto after = state_sections(state);
  for (std::size_t i = 0; i < after.size(); ++i)
    if (before[i] != after[i]) changed.push_back(after[i].first);
  const auto write_start = Clock::now();
  if (!request.package.empty()) {
    if (!state.facts.count(facts::tile_images))
      throw Error("--package: the state has no tile images yet; run emit-tile-code on it (add --pass emit-tile-code)");
    write_package(session.finish(state), request.package);
  }
  if (!request.output.empty()) write_state(state, request.output);
  if (!request.dump.empty()) write_file_atomically(request.dump, dump_state(state, filter), "the dump (--dump)");
  if (request.print) fmt::print("{}", dump_state(state, filter));
  fmt::print("state={} passes={} changed={} read_ms={} elapsed_ms={} write_ms={}\n",
             request.output.empty() ? "-" : request.output, fmt::join(request.passes, ","),
             changed.empty() ? "none" : fmt::format("{}", fmt::join(changed, ",")), ms(start - read_start),
             ms(ran - start), ms(Clock::now() - write_start));
  return 0;
}

}  // namespace tessera::cli
