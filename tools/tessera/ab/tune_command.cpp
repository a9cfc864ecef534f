// `tessera tune`: successive halving over a declared option space, each round an A/B sweep
// through the same executors as `tessera ab`, ending with the best configuration as an overlay
// and a full A/B of it against the base.
#include "tune_command.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "analysis.hpp"
#include "command_line.hpp"
#include "fingerprint.hpp"
#include "history.hpp"
#include "sweep.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/log.hpp"
#include "tessera/output_file.hpp"
#include "tune.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace tessera::cli {

using namespace tessera::ab;

class TuneCommand {
public:
  CLI::App* tune = nullptr;
  std::string base, space, suite, results, out;
  std::string metric = "device_cycles";
  std::size_t configurations = 16, eta = 3;
  std::uint64_t seed = 1;
  std::uint32_t repeat = 3, warmup = 0, threads = 0;
  ExecutorOptions exec;
  ReportOptions report_options;
};

namespace {

constexpr const char* kBaseArm = "base";

// One configuration's standing after a rung.
struct Standing {
  const Configuration* configuration = nullptr;
  double ratio = NAN;                   ///< geomean over the rung's models of metric(configuration) / metric(base)
  std::size_t failed = 0, missing = 0;  ///< of its work items
  std::size_t unrated = 0;              ///< models without a ratio of the metric
  bool valid() const { return std::isfinite(ratio) && failed == 0 && missing == 0 && unrated == 0; }
};

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string default_tune_directory(const TuneCommand& o, const Suite& suite) {
  const std::string identity = fmt::format("{}|{}|{}|{}|{}|{}|{}|{}", hash_text(read_bytes(o.space)),
                                           fs::absolute(o.base).lexically_normal().string(), suite.fingerprint,
                                           o.metric, o.configurations, o.eta, o.seed, current_build().build_hash);
  return (fs::path(cache_root()) / "tune-results" / (suite.name + "-" + hash_text(identity).substr(0, 8))).string();
}

// The suite's entries at `indices`, as a suite of its own (its own name, so its results never
// mix with a sweep of the whole suite).
Suite sub_suite(const Suite& suite, const std::vector<std::size_t>& indices, const std::string& name) {
  Suite sub = suite;
  sub.name = name;
  sub.entries.clear();
  for (std::size_t i : indices) sub.entries.push_back(suite.entries[i]);
  sub.fingerprint = suite_fingerprint(sub.name, sub.entries);
  return sub;
}

// Runs a prepared sweep to the end on the chosen executor and analyses what it recorded.
Analysis execute(const TuneCommand& o, const Suite& suite, const PreparedSweep& sweep, RunnerStats& stats) {
  const ResultsDir results(sweep.results);
  if (o.exec.executor == "slurm") {
    submit_to_slurm(o.exec, suite.slurm, results, sweep.manifest, model_ids(sweep.manifest), false);
    wait_for_slurm(results);
  } else {
    stats = run_locally(o.exec, sweep.manifest, results, sweep.items, false);
  }
  return analyse(sweep.manifest, results.read_all_records(), o.report_options.alpha);
}

// A model the base pipeline itself fails on ranks nothing: say which and where its log is.
void check_base_succeeded(const Analysis& analysis, const std::string& results) {
  for (const ItemStatus& item : analysis.items)
    if (item.arm == kBaseArm && item.status != "ok")
      throw Error(
          fmt::format("the base pipeline {} on model {} (repeat {}); its logs are under {}/logs/{}/{}: fix the base "
                      "or leave the model out of the suite",
                      item.status == "failed" ? "failed" : "has no result", item.model, item.repeat, results,
                      item.model, kBaseArm));
}

std::vector<Standing> rank(const Analysis& analysis, const MetricDefinition& metric,
                           const std::vector<const Configuration*>& candidates, std::size_t models) {
  std::vector<Standing> standings;
  for (const Configuration* configuration : candidates) {
    Standing s;
    s.configuration = configuration;
    for (const ItemStatus& item : analysis.items)
      if (item.arm == configuration->id && item.status != "ok") ++(item.status == "failed" ? s.failed : s.missing);
    s.unrated = models;
    for (const ArmSummary& summary : analysis.summaries)
      if (summary.arm == configuration->id && summary.metric == metric.name) {
        s.unrated = models - std::min(models, summary.interval.count);
        s.ratio = summary.interval.geomean;
      }
    if (metric.direction == Direction::larger_is_better && std::isfinite(s.ratio)) s.ratio = 1 / s.ratio;
    standings.push_back(s);
  }
  std::stable_sort(standings.begin(), standings.end(), [](const Standing& a, const Standing& b) {
    if (a.valid() != b.valid()) return a.valid();
    return a.valid() && a.ratio < b.ratio;
  });
  return standings;
}

std::string standing_table(const std::vector<Standing>& standings, std::size_t kept, const Space& space,
                           const MetricDefinition& metric) {
  std::vector<std::vector<std::string>> rows{
      {"rank", "config", metric.direction == Direction::larger_is_better ? "base/config" : "config/base", "kept",
       "configuration"}};
  for (std::size_t i = 0; i < standings.size(); ++i) {
    const Standing& s = standings[i];
    const std::string score =
        s.valid() ? fmt::format("{:.4f}", s.ratio)
                  : fmt::format("{} failed items, {} missing items, {} models unrated", s.failed, s.missing, s.unrated);
    rows.push_back(
        {std::to_string(i + 1), s.configuration->id, score, i < kept ? "yes" : "", describe(space, *s.configuration)});
  }
  return text_table(rows, 2);
}

json standing_json(const Standing& s) {
  json j = {{"configuration", s.configuration->id},
            {"failed", s.failed},
            {"missing", s.missing},
            {"unrated_models", s.unrated}};
  j["ratio"] = s.valid() ? json(s.ratio) : json(nullptr);
  return j;
}

int run_tune(TuneCommand& o) {
  const auto start = std::chrono::steady_clock::now();
  auto log = logger("tessera.tune");
  if (o.base.empty() || o.space.empty() || o.suite.empty())
    throw Error(
        "tessera tune: give --base PIPELINE, --space SPACE.yaml and --suite SUITE.yaml (see docs/ab-testing.md, "
        "\"Tuning\")");
  check_executor(o.exec);
  if (o.configurations < 1) throw Error("--configurations must be at least 1");
  if (o.eta < 2) throw Error("--eta must be at least 2: each round keeps the best 1/eta of the configurations");
  if (o.repeat < 1) throw Error("--repeat must be at least 1");
  const MetricDefinition* metric = find_metric(o.metric);
  if (!metric || !metric->judged) {
    std::string names;
    for (const MetricDefinition& m : ab_metrics())
      if (m.judged) names += (names.empty() ? "" : ", ") + m.name;
    throw Error("--metric " + o.metric + ": " +
                (metric ? "an estimate or wall time is not a measurement to tune on" : "no such metric") +
                "; choose one of " + names);
  }
  const Suite suite = load_suite(o.suite);
  const Space space = load_space(o.space);
  std::vector<InputFile> inputs{{o.base, "the base pipeline"}, {o.suite, "the suite"}, {o.space, "the tuning space"}};
  check_report_files(o.report_options.files, inputs);
  check_output_file(o.out, "the best configuration (--out)", inputs);
  History history = open_history(o.report_options);

  const std::string directory = o.results.empty() ? default_tune_directory(o, suite) : o.results;
  const fs::path root = fs::absolute(directory).lexically_normal();
  check_owned_folder_if_present(root.string(), "the tune results folder");
  if (fs::is_directory(root) && !fs::is_empty(root) && !fs::exists(root / "tune.json"))
    throw Error(root.string() +
                ": not empty and not a tessera tune results directory (no tune.json); give a new or "
                "empty --results directory");
  const OwnedFolder overlays = OwnedFolder(root.string(), "the tune results folder").folder("overlays");

  const std::vector<Configuration> configurations = draw_configurations(space, o.configurations, o.seed);
  for (const Configuration& c : configurations)
    overlays.write_file(c.id + ".yaml",
                        overlay_yaml(space, c,
                                     fmt::format("# tessera tune configuration {} of {} (seed {}): {}\n", c.id, o.space,
                                                 o.seed, describe(space, c))),
                        "tune configuration overlay");
  // Noisy metrics need repeats to rank; deterministic ones are the same every compile.
  const std::uint32_t rung_repeat = metric->determinism == Determinism::noisy ? o.repeat : 1;
  const std::vector<Rung> schedule = halving_schedule(configurations.size(), suite.entries.size(), o.eta, rung_repeat);
  log->info(
      "tune starting space={} dimensions={} configurations={} rungs={} metric={} suite={} models={} executor={} "
      "results={}",
      o.space, space.dimensions.size(), configurations.size(), schedule.size(), metric->name, suite.name,
      suite.entries.size(), o.exec.executor, root.string());

  json record = {{"space", fs::absolute(o.space).lexically_normal().string()},
                 {"base", fs::absolute(o.base).lexically_normal().string()},
                 {"suite", suite.file},
                 {"metric", metric->name},
                 {"seed", o.seed},
                 {"eta", o.eta},
                 {"configurations", json::array()},
                 {"rungs", json::array()}};
  for (const Configuration& c : configurations)
    record["configurations"].push_back({{"id", c.id},
                                        {"overlay", (root / "overlays" / (c.id + ".yaml")).string()},
                                        {"description", describe(space, c)}});

  std::vector<const Configuration*> survivors;
  for (const Configuration& c : configurations) survivors.push_back(&c);
  RunnerStats total;
  for (std::size_t r = 0; r < schedule.size(); ++r) {
    const Rung& rung = schedule[r];
    const std::vector<std::size_t> models = spread_models(suite.entries.size(), rung.models);
    const Suite rung_suite = sub_suite(suite, models, fmt::format("{}-tune-rung{}", suite.name, r + 1));
    SweepRequest request;
    request.base = o.base;
    request.suite = rung_suite;
    request.arms.push_back({kBaseArm, ""});
    std::string ids;
    for (const Configuration* c : survivors) {
      request.arms.push_back({c->id, (root / "overlays" / (c->id + ".yaml")).string()});
      ids += c->id + ",";
    }
    request.repeat = rung.repeat;
    request.warmup = o.warmup;
    request.threads = o.threads;
    // Named by its arms, so a rerun whose survivors differ never reuses another round's folder.
    request.results = (root / fmt::format("rung-{}-{}", r + 1, hash_text(ids).substr(0, 8))).string();
    log->info("tune rung={} of {} configurations={} models={} repeat={} results={}", r + 1, schedule.size(),
              survivors.size(), models.size(), rung.repeat, request.results);
    PreparedSweep sweep;
    try {
      sweep = prepare_sweep(request);
    } catch (const Error& e) {
      const std::string message = e.what();
      std::string from = o.space;  // the entry whose option the core refused, when it names one
      for (const Dimension& d : space.dimensions)
        if (!d.option.empty() && message.find("option '" + d.option + "'") != std::string::npos) {
          from = d.place + " (" + d.name + ")";
          break;
        }
      throw Error(message + "; the configurations are drawn from " + from +
                  ": change or narrow it (the overlays are "
                  "under " +
                  (root / "overlays").string() + ")");
    }
    RunnerStats stats;
    const Analysis analysis = execute(o, rung_suite, sweep, stats);
    total += stats;
    check_base_succeeded(analysis, sweep.results);
    const std::vector<Standing> standings = rank(analysis, *metric, survivors, models.size());
    const std::size_t next = r + 1 < schedule.size() ? schedule[r + 1].configurations : 1;
    std::size_t kept = 0;
    while (kept < next && kept < standings.size() && standings[kept].valid()) ++kept;
    if (kept == 0)
      throw Error(
          fmt::format("round {}: no configuration compiled and ran on every model (results in {}); see its "
                      "report.html and logs",
                      r + 1, sweep.results));
    fmt::print(
        "tune round {} of {}: {} configurations on {} models, {} compiles each, ranked by the geomean over the "
        "models of {}, {}\n{}\n",
        r + 1, schedule.size(), survivors.size(), models.size(), rung.repeat, metric->name,
        metric->direction == Direction::larger_is_better ? "base / configuration" : "configuration / base",
        standing_table(standings, kept, space, *metric));
    json round = {{"round", r + 1},
                  {"models", json::array()},
                  {"repeat", rung.repeat},
                  {"results", sweep.results},
                  {"standings", json::array()}};
    for (std::size_t i : models) round["models"].push_back(suite.entries[i].id);
    for (const Standing& s : standings) round["standings"].push_back(standing_json(s));
    record["rungs"].push_back(round);
    write_file_atomically((root / "tune.json").string(), record.dump(2) + "\n", "tune record");
    survivors.clear();
    for (std::size_t i = 0; i < kept; ++i) survivors.push_back(standings[i].configuration);
  }

  const Configuration& best = *survivors.front();
  const std::string best_overlay = overlay_yaml(
      space, best,
      fmt::format("# tessera tune: the best of {} configurations of {} on {} (rounds {}, seed {}): {}\n",
                  configurations.size(), o.space, metric->name, schedule.size(), o.seed, describe(space, best)));
  const std::string best_file = (root / "best.yaml").string();
  write_file_atomically(best_file, best_overlay, "best configuration");
  if (!o.out.empty()) write_file_atomically(o.out, best_overlay, "best configuration");
  record["best"] = {{"configuration", best.id}, {"description", describe(space, best)}, {"overlay", best_file}};
  write_file_atomically((root / "tune.json").string(), record.dump(2) + "\n", "tune record");

  // The verdict: the best against the base on the whole suite, with repeats and a noise floor.
  SweepRequest request;
  request.base = o.base;
  request.suite = suite;
  request.arms = {{kBaseArm, ""}, {"best", best_file}};
  request.repeat = o.repeat;
  request.warmup = o.warmup;
  request.threads = o.threads;
  request.results = (root / ("final-" + hash_text(best_overlay).substr(0, 8))).string();
  log->info("tune final configuration={} models={} repeat={} results={}", best.id, suite.entries.size(), o.repeat,
            request.results);
  const PreparedSweep sweep = prepare_sweep(request);
  RunnerStats stats;
  const Analysis analysis = execute(o, suite, sweep, stats);
  total += stats;
  const ResultsDir results(sweep.results);
  const int code = finish_sweep(analysis, driver_stats("tune", results, stats), o.report_options.files,
                                beside_results(results), o.report_options.quiet, start, history);
  for (const ArmSummary& summary : analysis.summaries)
    if (summary.arm == "best" && summary.metric == metric->name) {
      const double wall_ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      const bool beats = summary.better > 0 && summary.worse == 0;
      fmt::print(
          "tune: best {} of {} configurations ({}): {} {} against the base on {} models (better {}, worse {}, "
          "same {}, within noise {}){}\nbest overlay: {}{}\n",
          best.id, configurations.size(), describe(space, best), metric->name, format_change(summary.interval.geomean),
          summary.interval.count, summary.better, summary.worse, summary.same, summary.noise,
          beats ? "" : "; it does not beat the base on every model it changes", best_file,
          o.out.empty() ? "" : " (and " + o.out + ")");
      log->info(
          "tune finished configurations={} rounds={} best={} geomean_ratio={:.4f} better={} worse={} same={} "
          "noise={} executed={} wall_ms={:.0f} results={}",
          configurations.size(), schedule.size(), best.id, summary.interval.geomean, summary.better, summary.worse,
          summary.same, summary.noise, total.executed, wall_ms, root.string());
    }
  return code;
}

}  // namespace

std::shared_ptr<TuneCommand> add_tune_command(CLI::App& app) {
  auto command = std::make_shared<TuneCommand>();
  TuneCommand& o = *command;
  o.tune = app.add_subcommand("tune",
                              "search a space of plugin options by successive halving over a suite, then A/B "
                              "the best against the base");
  o.tune
      ->add_option("--base", o.base,
                   "base pipeline YAML (or a shipped one's name) every configuration is an overlay of")
      ->transform(shipped_config("pipelines"))
      ->check(CLI::ExistingFile);
  o.tune->add_option("--space", o.space, "YAML with `space:`, the options to search (docs/ab-testing.md, \"Tuning\")")
      ->check(CLI::ExistingFile);
  o.tune->add_option("--suite", o.suite, "suite YAML: the models and targets, or a shipped suite's name")
      ->transform(shipped_config("suites"))
      ->check(CLI::ExistingFile);
  o.tune->add_option("--metric", o.metric, "what to minimise (a judged metric of `tessera ab`)")->capture_default_str();
  o.tune
      ->add_option("--configurations", o.configurations,
                   "configurations drawn from the space (all when it holds no "
                   "more)")
      ->capture_default_str();
  o.tune->add_option("--eta", o.eta, "each round keeps the best 1/eta and gives them eta times the models")
      ->capture_default_str();
  o.tune->add_option("--seed", o.seed, "seed of the draw; the same seed draws the same configurations")
      ->capture_default_str();
  o.tune->add_option("--repeat", o.repeat, "compiles per model and arm in the final A/B (and rounds of a noisy metric)")
      ->capture_default_str();
  o.tune->add_option("--warmup", o.warmup, "discarded compiles before the measured ones")->capture_default_str();
  o.tune->add_option("--threads", o.threads, "passed to every compile as its --threads")->check(CLI::PositiveNumber);
  o.tune->add_option("--results", o.results,
                     "results folder; rerunning resumes it (default: under "
                     "$XDG_CACHE_HOME/tessera/tune-results)");
  o.tune->add_option("--out", o.out, "also write the best configuration's overlay here");
  o.tune->add_option("--lock", o.exec.lock, "device lock file for the simulator runs");
  add_executor_options(*o.tune, o.exec);
  add_report_options(*o.tune, o.report_options);
  return command;
}

bool tune_command_chosen(const TuneCommand& command) { return command.tune && command.tune->parsed(); }

int run_tune_command(TuneCommand& command) { return run_tune(command); }

}  // namespace tessera::cli
