// The browser check: report pages opened in headless Chromium render their charts and tables
// without script errors.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>
#include <sqlite3.h>

#include "analysis.hpp"
#include "arms.hpp"
#include "browser_check.hpp"
#include "history.hpp"
#include "program_figures.hpp"
#include "report.hpp"
#include "report_testing.hpp"
#include "tessera/package.hpp"

using namespace tessera;
using namespace tessera::testing;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

// Everything a reader of the test log needs when Chromium disagrees.
std::string describe(const RenderedPage& page) {
  std::string text = "chromium finished=" + std::to_string(page.finished) + " exit=" + std::to_string(page.exit_code) +
                     " seconds=" + std::to_string(page.seconds) + "\nconsole:\n";
  for (const auto& line : page.console) text += "  " + line + "\n";
  return text + "log tail:\n" + page.log.substr(page.log.size() > 3000 ? page.log.size() - 3000 : 0);
}

// 6344 -> "6,344", as the page writes numbers.
std::string grouped(std::uint64_t value) {
  std::string digits = std::to_string(value), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

RenderedPage render(const std::string& html) {
  REQUIRE_FALSE(chromium_binary().empty());  // Debian's chromium: run scripts/bootstrap.sh
  RenderedPage page = render_page(html);
  INFO(describe(page));
  REQUIRE(page.finished);
  REQUIRE(page.exit_code == 0);
  REQUIRE_FALSE(page.dom.empty());
  return page;
}

}  // namespace

TEST_CASE("the report page renders its charts and tables in headless Chromium without script errors",
          "[report][browser]") {
  TempDir dir;
  const SmallRun run = compile_and_run_small(dir);
  const std::string html = (dir.path() / "report.html").string();
  const CommandResult reported =
      run_command({tessera_binary(), "report", run.package, "--profile", run.profile, "--html", html});
  INFO(reported.err);
  REQUIRE(reported.exit_code == 0);

  // What the charts must hold, from the package itself.
  const Package package = read_package(run.package);
  const report::ProgramFigures figures =
      report::compute_figures(package, run.package, report::cycles_from_profile(package, run.profile), {});
  std::size_t standard_bars = 0, interleaved_bars = 0, cycle_bars = 0, sends = 0, receives = 0;
  for (const report::TileMemory& m : figures.memory) {
    standard_bars += m.standard_extent > 0;
    interleaved_bars += m.interleaved_extent > 0;
  }
  for (const auto& step : figures.cycles.per_superstep)
    for (std::uint64_t cycles : step) cycle_bars += cycles > 0;
  REQUIRE(figures.selected_phase);
  for (const report::TileTraffic& t : figures.timeline) {
    const TileSuperstep& step = package.tiles[t.tile].supersteps[*figures.selected_phase];
    for (const TileSend& s : step.sends) sends += s.words > 0;
    for (const TileReceive& r : step.receives) receives += r.words > 0;
  }
  REQUIRE(standard_bars + interleaved_bars > 0);
  REQUIRE(cycle_bars > 0);
  REQUIRE(sends + receives > 0);

  const RenderedPage page = render(html);
  INFO(describe(page));
  CHECK(page.uncaught_errors.empty());
  CHECK(attribute(element_by_id(page.dom, "render-errors"), "id") == "render-errors");
  CHECK(count_elements(element_by_id(page.dom, "render-errors"), "li") == 0);
  CHECK(attribute(page.dom.substr(page.dom.find("<body")), "data-render") == "ok");

  const std::string memory = element_by_id(page.dom, "memory-chart");
  CHECK(count_elements(memory, "rect", "mem-standard") == standard_bars);
  CHECK(count_elements(memory, "rect", "mem-interleaved") == interleaved_bars);
  CHECK(count_elements(memory, "line", "capacity") == 1);
  CHECK(count_elements(memory, "line", "boundary") == 1);
  CHECK_THAT(memory, Contains("capacity 638,976 bytes"));

  const std::string cycles = element_by_id(page.dom, "cycles-chart");
  CHECK(count_elements(cycles, "rect", "cyc") == cycle_bars);
  CHECK(count_elements(cycles, "line", "device-line") == 1);

  const std::string exchange = element_by_id(page.dom, "exchange-chart");
  CHECK(count_elements(exchange, "rect", "xsend") == sends);
  CHECK(count_elements(exchange, "rect", "xrecv") == receives);
  CHECK(count_elements(exchange, "line", "bound") == 1);
  CHECK(count_elements(exchange, "line", "horizon") == 1);
  const report::PhaseFigures& phase = figures.phases[*figures.selected_phase];
  CHECK_THAT(exchange, Contains("lower bound " + grouped(phase.lower_bound)));
  CHECK_THAT(exchange, Contains("horizon " + grouped(phase.horizon)));

  CHECK(table_body_rows(element_by_id(page.dom, "package-summary")) >= 8);
  CHECK(table_body_rows(element_by_id(page.dom, "superstep-summary")) == figures.phases.size());
  CHECK(table_body_rows(element_by_id(page.dom, "phase-summary")) == figures.timeline.size());
  CHECK(table_body_rows(element_by_id(page.dom, "tile-summary")) == 16);
  CHECK(count_elements(element_by_id(page.dom, "cycles-superstep"), "option") == figures.phases.size() + 1);
  CHECK(page.seconds < 30);
  // To look at it: TESSERA_REPORT_SCREENSHOT=/tmp/report.png
  if (const char* png = std::getenv("TESSERA_REPORT_SCREENSHOT")) CHECK(screenshot_page(html, png));

  // The other views, chosen in the page's selects: bytes used per region, one superstep.
  std::string text = read_text(html);
  const std::size_t last = figures.phases.size() - 1;
  for (const std::string& option :
       {std::string("<option value=\"used\">"), "<option value=\"" + std::to_string(last) + "\">"}) {
    REQUIRE(text.find(option) != std::string::npos);
    text.insert(text.find(option) + option.size() - 1, " selected");
  }
  const RenderedPage views = render(dir.write("views.html", text));
  INFO(describe(views));
  CHECK(views.uncaught_errors.empty());
  CHECK(attribute(views.dom.substr(views.dom.find("<body")), "data-render") == "ok");
  const std::string used = element_by_id(views.dom, "memory-chart");
  CHECK(count_elements(used, "rect", "mem-standard") == standard_bars);
  CHECK(count_elements(used, "rect", "mem-interleaved") == interleaved_bars);
  CHECK(count_elements(used, "line", "capacity") == 0);
  CHECK_THAT(used, Contains("fullest tile " + grouped(figures.peak_tile_bytes) + " bytes"));
  std::size_t last_bars = 0;
  for (std::uint64_t cycles : figures.cycles.per_superstep[last]) last_bars += cycles > 0;
  CHECK(count_elements(element_by_id(views.dom, "cycles-chart"), "rect", "cyc") == last_bars);
  CHECK(count_elements(element_by_id(views.dom, "cycles-legend"), "span", "swatch") == 1);
}

TEST_CASE("the browser check catches a report whose script fails", "[report][browser]") {
  TempDir dir;
  const SmallRun run = compile_and_run_small(dir);
  const std::string html = (dir.path() / "report.html").string();
  REQUIRE(run_command({tessera_binary(), "report", run.package, "--html", html}).exit_code == 0);
  std::string text = read_text(html);

  // A syntax error: the main script never runs; the catcher in <head> reports it.
  const std::string call = "drawExchange(data);";
  REQUIRE(text.find(call) != std::string::npos);
  std::string broken = text;
  broken.replace(broken.find(call), call.size(), "drawExchange(data;");
  const std::string broken_path = dir.write("broken.html", broken);
  const RenderedPage syntax = render(broken_path);
  INFO(describe(syntax));
  CHECK_FALSE(syntax.uncaught_errors.empty());
  CHECK(attribute(syntax.dom.substr(syntax.dom.find("<body")), "data-render") == "error");
  CHECK_THAT(element_by_id(syntax.dom, "render-errors"), Contains("SyntaxError"));
  CHECK(count_elements(element_by_id(syntax.dom, "memory-chart"), "rect") == 0);

  // A failure half-way: the memory chart is drawn, then the cycles chart throws.
  std::string throwing = text;
  const std::string cycles_call = "drawCycles(data, select.value);";
  REQUIRE(throwing.find(cycles_call) != std::string::npos);
  throwing.replace(throwing.find(cycles_call), cycles_call.size(), "drawCycles(null, select.value);");
  const RenderedPage thrown = render(dir.write("throwing.html", throwing));
  INFO(describe(thrown));
  CHECK(thrown.uncaught_errors.size() == 1);
  CHECK(attribute(thrown.dom.substr(thrown.dom.find("<body")), "data-render") == "error");
  CHECK(count_elements(element_by_id(thrown.dom, "memory-chart"), "rect", "mem-standard") > 0);
  CHECK(count_elements(element_by_id(thrown.dom, "render-errors"), "li") == 1);
}

TEST_CASE("the DOM queries of the browser check find elements, classes, attributes and rows", "[report][browser]") {
  const std::string html =
      "<body data-render=\"ok\"><div data-id=\"t\"></div><svg id=\"t\"><g><rect class=\"a b\"></rect>"
      "<rect class=\"ab\"></rect><rectangle class=\"a\"></rectangle><svg id=\"inner\"><rect "
      "class=\"a\"/></svg></g></svg>"
      "<table id=\"tab\"><thead><tr><th>h</th></tr></thead><tbody><tr><td>1</td></tr><tr><td>2</td></tr></tbody>"
      "</table></body>";
  const std::string svg = element_by_id(html, "t");
  CHECK(svg.rfind("<svg id=\"t\">", 0) == 0);
  CHECK(svg.size() >= 6);
  CHECK(svg.substr(svg.size() - 6) == "</svg>");
  CHECK(count_elements(svg, "rect") == 3);
  CHECK(count_elements(svg, "rect", "a") == 2);
  CHECK(count_elements(svg, "rect", "b") == 1);
  CHECK(elements_by_class(html, "rect", "a").size() == 2);
  CHECK(element_by_id(html, "missing").empty());
  CHECK(attribute(html, "data-render") == "ok");
  CHECK(attribute(html, "render").empty());
  CHECK(table_body_rows(element_by_id(html, "tab")) == 2);
}

namespace {

// The files of one arm's exchange phases as a sweep kept them (repeat 0): name -> contents.
std::map<std::string, std::string> phase_files(const fs::path& results, const std::string& model,
                                               const std::string& arm) {
  std::map<std::string, std::string> files;
  for (const auto& file : fs::directory_iterator(results / "phases" / model / arm / "repeat-0"))
    files[file.path().filename().string()] = read_text(file.path().string());
  return files;
}

// The elements of `tag` and `css_class` whose `name` attribute is `value`.
std::vector<std::string> with_attribute(const std::vector<std::string>& elements, const std::string& name,
                                        const std::string& value) {
  std::vector<std::string> found;
  for (const std::string& element : elements)
    if (attribute(element, name) == value) found.push_back(element);
  return found;
}

// Runs SQL on the history database (a test's own, never the user's).
void execute_sql(const std::string& database, const std::string& sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(database.c_str(), &db) == SQLITE_OK);
  char* error = nullptr;
  const int code = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
  INFO((error ? error : ""));
  sqlite3_free(error);
  sqlite3_close(db);
  REQUIRE(code == SQLITE_OK);
}

// The distinct builds the database holds values of for one (metric, model, arm).
std::set<std::string> recorded_builds(const std::string& database, const std::string& metric, const std::string& model,
                                      const std::string& arm) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(database.c_str(), &db) == SQLITE_OK);
  sqlite3_stmt* query = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, "SELECT DISTINCT build_hash FROM results WHERE metric = ? AND model = ? AND arm = ?",
                             -1, &query, nullptr) == SQLITE_OK);
  sqlite3_bind_text(query, 1, metric.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(query, 2, model.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(query, 3, arm.c_str(), -1, SQLITE_TRANSIENT);
  std::set<std::string> builds;
  while (sqlite3_step(query) == SQLITE_ROW) builds.insert(reinterpret_cast<const char*>(sqlite3_column_text(query, 0)));
  sqlite3_finalize(query);
  sqlite3_close(db);
  return builds;
}

double number_attribute(const std::string& element, const std::string& name) {
  const std::string value = attribute(element, name);
  REQUIRE_FALSE(value.empty());
  return std::stod(value);
}

}  // namespace

TEST_CASE("the A/B report page renders its tables and charts in headless Chromium without script errors",
          "[report][browser][ab]") {
  TempDir dir;
  const std::string base =
      pipeline_copy(dir, source_path("configs/pipelines/small.yaml"), "finalists: 2", "finalists: 2");
  const std::string html = (dir.path() / "ab.html").string(), report_json = (dir.path() / "ab.json").string();
  const fs::path results = dir.path() / "results";
  const std::string history = (dir.path() / "history.sqlite").string();
  const std::vector<std::string> models = {"mlp-small@t16", "mlp-small-f16@t16"};
  const std::string suite =
      dir.write("two.yaml", "suite: two\nmodels:\n  - {model: " + source_path("configs/models/mlp-small.yaml") +
                                ", target: " + source_path("configs/targets/t16.yaml") +
                                "}\n  - {model: " + source_path("configs/models/mlp-small-f16.yaml") +
                                ", target: " + source_path("configs/targets/t16.yaml") + "}\n");
  // in-order only schedules differently; pinned splits every dense op four ways, another plan than the planner's.
  const std::string pinned = dir.write(
      "pinned.yaml", "passes:\n  - {plugin: select-finalist, options: {column_groups: 4, depth_groups: 1}}\n");
  const std::vector<std::string> command = {
      tessera_binary(), "ab",
      "--base",         base,
      "--arm",          "greedy=",
      "--arm",          "in-order=" + source_path("configs/suites/arms/in-order.yaml"),
      "--arm",          "pinned=" + pinned,
      "--suite",        suite,
      "--repeat",       "2",
      "--results",      results.string(),
      "--lock",         (dir.path() / "device.lock").string(),
      "--history",      history,
      "--html",         html,
      "--json",         report_json,
      "--quiet"};
  const CommandResult first = run_command(command);
  INFO(first.out << first.err);
  REQUIRE(first.exit_code == 0);
  // An earlier build: this sweep's stored values relabelled as another build's and 25% higher. The
  // same command again skips every stored item and records this build once more.
  const std::string earlier = "0123456789abcdef";
  execute_sql(history, "UPDATE sweeps SET build_hash = '" + earlier + "'; UPDATE results SET build_hash = '" + earlier +
                           "', value = value * 1.25;");
  const CommandResult ab = run_command(command);
  INFO(ab.out << ab.err);
  REQUIRE(ab.exit_code == 0);
  const nlohmann::json report = nlohmann::json::parse(read_text(report_json));
  CHECK(report["driver"]["skipped"] == report["items"]["expected"]);

  const RenderedPage page = render(html);
  INFO(describe(page));
  CHECK(page.uncaught_errors.empty());
  // The A/B page's script marks its footer once it has run.
  const std::string footer = element_by_id(page.dom, "ab-footer");
  CHECK(attribute(footer, "data-rendered") == "true");
  const std::string comparisons = attribute(footer, "data-comparisons");
  REQUIRE_FALSE(comparisons.empty());
  CHECK(std::stoul(comparisons) > 0);
  CHECK(table_body_rows(element_by_id(page.dom, "ab-summary")) > 0);

  // At 1,400 px the summary table fits its column: no horizontal scrolling. The page, measured by
  // Chromium itself: a script added at its end writes the widths into the body.
  const std::string measured = (dir.path() / "ab-measured.html").string();
  std::string text = read_text(html);
  text.insert(text.rfind("</body>"),
              "<script>const t = document.getElementById('ab-summary'); document.body.setAttribute('data-widths', "
              "t.scrollWidth + ' ' + t.parentElement.clientWidth);</script>");
  std::ofstream(measured) << text;
  const RenderedPage wide = render_page(measured, std::chrono::seconds(30), 1400);
  INFO(describe(wide));
  const std::string body = wide.dom.substr(wide.dom.find("<body"));
  std::istringstream widths(attribute(body.substr(0, body.find('>') + 1), "data-widths"));
  int table_width = 0, column_width = 0;
  REQUIRE(widths >> table_width >> column_width);
  CHECK(table_width <= column_width);
  CHECK(table_body_rows(element_by_id(page.dom, "ab-models")) == std::stoul(comparisons));
  const std::vector<std::string> charts = elements_by_class(page.dom, "svg", "ab-chart");
  REQUIRE_FALSE(charts.empty());
  for (const std::string& chart : charts) {
    INFO(attribute(chart, "id"));
    CHECK(count_elements(chart, "rect", "ab-bar") > 0);
  }

  // Ratio charts: per judged metric one mark per (model, arm), placed by its ratio; a geomean and
  // its whisker per arm (two models); no per-model whisker, since two samples against two never reach
  // 95% (the exact test's smallest p is 1/3), and the page says so.
  std::vector<std::string> judged;
  for (const auto& metric : report["metrics"])
    if (metric["judged"].get<bool>()) judged.push_back(metric["name"]);
  REQUIRE(judged.size() == 8);
  for (const auto& metric : report["metrics"]) {
    if (!metric["judged"].get<bool>()) continue;
    const std::string name = metric["name"];
    INFO("ratio chart of " << name);
    const std::string chart = element_by_id(page.dom, "ab-ratio-chart-" + name);
    REQUIRE_FALSE(chart.empty());
    const std::vector<std::string> marks = elements_by_class(chart, "circle", "ab-ratio-mark");
    CHECK(marks.size() == 2 * models.size());
    for (const std::string arm : {"in-order", "pinned"}) {
      std::map<double, double> x_by_ratio;
      for (const auto& c : report["comparisons"])
        if (c["arm"] == arm && c["metric"] == name) {
          const std::vector<std::string> mark =
              with_attribute(with_attribute(marks, "data-arm", arm), "data-model", c["model"].get<std::string>());
          REQUIRE(mark.size() == 1);
          x_by_ratio[c["ratio"].get<double>()] = number_attribute(mark[0], "cx");
        }
      REQUIRE(x_by_ratio.size() >= 1);
      for (auto it = x_by_ratio.begin(); std::next(it) != x_by_ratio.end(); ++it)
        CHECK(it->second <= std::next(it)->second);  // a larger ratio is further right
      CHECK(with_attribute(elements_by_class(chart, "path", "ab-geomean-mark"), "data-arm", arm).size() == 1);
      CHECK(with_attribute(elements_by_class(chart, "line", "ab-geomean-whisker"), "data-arm", arm).size() == 1);
    }
    CHECK(count_elements(chart, "line", "ab-ratio-whisker") == 0);
    std::size_t without_interval = 0;
    for (const std::string& value : elements_by_class(chart, "text", "ab-ratio-value"))
      without_interval += value.find("(no 95% interval from 2 and 2 samples)") != std::string::npos;
    CHECK(without_interval == (metric["determinism"] == "noisy" ? 2 * models.size() : 0));
  }

  // Drill-down: in-order's phase files are greedy's, pinned's are not (what the page must reflect).
  for (const std::string& model : models) {
    INFO("exchange phases of " << model);
    const auto greedy_phases = phase_files(results, model, "greedy");
    REQUIRE_FALSE(greedy_phases.empty());
    REQUIRE(phase_files(results, model, "in-order") == greedy_phases);
    const auto pinned_phases = phase_files(results, model, "pinned");
    REQUIRE(pinned_phases != greedy_phases);
    const std::vector<std::string> details =
        with_attribute(elements_by_class(page.dom, "details", "ab-phase-model"), "data-model", model);
    REQUIRE(details.size() == 1);
    const std::vector<std::string> omitted = elements_by_class(details[0], "p", "ab-plan-differs");
    REQUIRE(omitted.size() == 1);
    CHECK(attribute(omitted[0], "data-arm") == "pinned");
    const auto phases = [](std::size_t n) { return std::to_string(n) + " exchange phase" + (n == 1 ? "" : "s"); };
    CHECK_THAT(omitted[0],
               Contains("arm pinned chose a different plan for this model: " + phases(pinned_phases.size()) + " vs " +
                        std::to_string(greedy_phases.size()) + " of greedy") &&
                   Contains("; per-phase comparison omitted</p>"));
    const std::vector<std::string> tables = elements_by_class(details[0], "table", "ab-phase-table");
    REQUIRE(tables.size() == 1);
    CHECK(table_body_rows(tables[0]) == greedy_phases.size());
    CHECK_THAT(tables[0], Contains(">greedy horizon<") && Contains(">in-order horizon<") && !Contains("pinned"));
    const std::vector<std::string> bars = elements_by_class(details[0], "rect", "ab-phase-bar");
    CHECK(with_attribute(bars, "data-arm", "greedy").size() == greedy_phases.size());
    CHECK(with_attribute(bars, "data-arm", "in-order").size() == greedy_phases.size());
    CHECK(with_attribute(bars, "data-arm", "pinned").empty());
    // The JSON report says the same.
    for (const auto& table : report["phases"])
      if (table["model"] == model) {
        CHECK(table["arms"] == nlohmann::json({"greedy", "in-order"}));
        REQUIRE(table["omitted_arms"].size() == 1);
        CHECK(table["omitted_arms"][0]["phases"] == pinned_phases.size());
        CHECK_THAT(omitted[0], Contains(table["omitted_arms"][0]["why"].get<std::string>()));
      }
  }

  // History: per judged metric and model one point per arm and recorded build, this build's
  // label bold, and the earlier build's 25% higher values drawn higher.
  const std::string build = report["tessera"]["build_hash"];
  const std::vector<std::string> history_charts = elements_by_class(page.dom, "svg", "ab-history-chart");
  CHECK(history_charts.size() == judged.size() * models.size());
  for (const std::string& metric : judged)
    for (const std::string& model : models) {
      INFO("history of " << metric << " for " << model);
      const std::vector<std::string> chart =
          with_attribute(with_attribute(history_charts, "data-metric", metric), "data-model", model);
      REQUIRE(chart.size() == 1);
      const std::vector<std::string> current = elements_by_class(chart[0], "text", "ab-history-current");
      REQUIRE(current.size() == 1);
      CHECK(attribute(current[0], "data-build") == build);
      for (const std::string arm : {"greedy", "in-order", "pinned"}) {
        const std::set<std::string> builds = recorded_builds(history, metric, model, arm);
        CHECK(builds == std::set<std::string>{earlier, build});
        const std::vector<std::string> points =
            with_attribute(elements_by_class(chart[0], "circle", "ab-history-point"), "data-arm", arm);
        REQUIRE(points.size() == builds.size());
        CHECK(attribute(points[0], "data-build") == earlier);  // oldest first
        CHECK(attribute(points[1], "data-build") == build);
        CHECK(number_attribute(points[0], "cy") < number_attribute(points[1], "cy"));
        CHECK(count_elements(chart[0], "circle", "ab-history-other-version") == 0);  // the same arm versions
      }
    }
}

namespace {

// A sweep made up in memory, for what a real one cannot promise: two models; the baseline "base",
// "fast" (the same exchange phases, 20% less CPU time and memory) and "moved" (its phase has the
// same size but other tiles: another problem hash); four repeats that never tie, so every noisy
// comparison reaches a 95% interval.
ab::Analysis made_up_sweep() {
  ab::Manifest m;
  m.build = {"0.1.0", "cccccccccccccccc"};
  m.suite_name = "made-up";
  m.repeat = 4;
  for (const char* id : {"m1@t16", "m2@t16"})
    m.entries.push_back({id, "/m.yaml", "/t.yaml", "model-hash", "target-hash"});
  for (const char* name : {"base", "fast", "moved"})
    m.arms.push_back({name, "", "", std::string("fp-") + name, {}, {}, ""});
  m.arms.push_back({ab::twin_name("base"), "", "", "fp-base", {}, {}, "base"});
  std::vector<ab::Record> records;
  for (std::size_t e = 0; e < m.entries.size(); ++e)
    for (const ab::ArmInfo& arm : m.arms)
      for (std::uint32_t repeat = 0; repeat < m.repeat; ++repeat) {
        ab::Record r;
        r.model = m.entries[e].id;
        r.arm = arm.name;
        r.repeat = repeat;
        r.arm_fingerprint = arm.fingerprint;
        r.model_hash = "model-hash";
        r.target_hash = "target-hash";
        r.build = m.build;
        r.host = "made-up";
        const double scale = arm.name == "fast" ? 0.8 : 1.0, twin = arm.twin_of.empty() ? 0.0 : 0.5;
        r.compile.process.exit_code = 0;
        r.compile.process.user_ms = scale * (100 + 7.0 * repeat + 3.0 * e) + twin;
        r.compile.process.wall_ms = r.compile.process.user_ms + 10;
        r.compile.process.peak_rss_kib = static_cast<std::int64_t>(scale * (20000 + 50 * repeat + 10 * e) + 2 * twin);
        r.compile.estimated_cycles = 2000;
        r.compile.scheduled_exchange_cycles = arm.name == "moved" ? 120 : 111;
        r.compile.exchange_lower_bound = 96;
        r.compile.peak_tile_bytes = 17088;
        r.compile.package_hash = arm.name == "base" || !arm.twin_of.empty() ? "package-base" : "package-" + arm.name;
        if (repeat == 0) {
          r.compile.phases = {{0, 16, 192, r.compile.scheduled_exchange_cycles, 84, 96,
                               arm.name == "moved" ? "other-tiles" : "same-tiles"}};
          r.run.performed = true;
          r.run.device_cycles = 2300 + r.compile.scheduled_exchange_cycles;
          r.run.exchange_cycles = 200;
        }
        records.push_back(r);
      }
  return ab::analyse(m, records, 0.05);
}

ab::HistoryPoint history_point(const std::string& metric, const std::string& model, const std::string& arm,
                               const std::string& build, const std::string& fingerprint, double value) {
  return {model, metric, "2026-12-05T08:00:00Z", build, "0.1.0", arm, fingerprint, "made-up", value, 1};
}

}  // namespace

TEST_CASE("the A/B page draws ratio intervals, omits an arm with another plan and draws each build's values once",
          "[report][browser][ab]") {
  const ab::Analysis analysis = made_up_sweep();
  const std::string current = analysis.manifest.build.build_hash;
  // Three builds of history, oldest first; in build b2 base was recorded twice, another version of
  // it first (one point: the later row); "fast" was another version of the arm in b1.
  std::vector<ab::HistoryPoint> history;
  for (const ab::MetricDefinition& metric : ab::ab_metrics())
    for (const ab::SuiteEntry& entry : analysis.manifest.entries)
      for (const std::string build : {"b1", "b2", current.c_str()}) {
        if (build == "b2") history.push_back(history_point(metric.name, entry.id, "base", build, "fp-base-other", 90));
        for (const std::string arm : {"base", "fast", "moved"})
          history.push_back(history_point(metric.name, entry.id, arm, build,
                                          arm == "fast" && build == "b1" ? "fp-fast-old" : "fp-" + arm, 100));
      }
  TempDir dir;
  const std::string html =
      dir.write("made-up.html", ab::html_report(analysis, ab::DriverStats{"ab", "made-up"}, history));
  const RenderedPage page = render(html);
  INFO(describe(page));
  CHECK(page.uncaught_errors.empty());
  CHECK(attribute(element_by_id(page.dom, "ab-footer"), "data-rendered") == "true");

  // Every noisy comparison has its interval: one whisker per (model, arm), around its mark.
  for (const char* metric : {"compile_cpu_ms", "compile_peak_rss_kib"}) {
    INFO(metric);
    const std::string chart = element_by_id(page.dom, std::string("ab-ratio-chart-") + metric);
    const std::vector<std::string> marks = elements_by_class(chart, "circle", "ab-ratio-mark");
    const std::vector<std::string> whiskers = elements_by_class(chart, "line", "ab-ratio-whisker");
    CHECK(marks.size() == 4);
    CHECK(whiskers.size() == 4);
    for (const ab::Comparison& c : analysis.comparisons) {
      if (c.metric != metric) continue;
      REQUIRE(std::isfinite(c.interval_low));
      CHECK(c.interval_low <= c.ratio);
      CHECK(c.ratio <= c.interval_high);
      const auto mark = with_attribute(with_attribute(marks, "data-arm", c.arm), "data-model", c.model);
      const auto whisker = with_attribute(with_attribute(whiskers, "data-arm", c.arm), "data-model", c.model);
      REQUIRE(mark.size() == 1);
      REQUIRE(whisker.size() == 1);
      CHECK(number_attribute(whisker[0], "x1") <= number_attribute(mark[0], "cx"));
      CHECK(number_attribute(mark[0], "cx") <= number_attribute(whisker[0], "x2"));
      CHECK(number_attribute(whisker[0], "x1") < number_attribute(whisker[0], "x2"));
    }
  }
  // Deterministic metrics: points without whiskers.
  const std::string cycles = element_by_id(page.dom, "ab-ratio-chart-device_cycles");
  CHECK(count_elements(cycles, "circle", "ab-ratio-mark") == 4);
  CHECK(count_elements(cycles, "line", "ab-ratio-whisker") == 0);

  // "moved" has the same phase sizes on other tiles: omitted, in words; "fast" shares the plan.
  for (const char* model : {"m1@t16", "m2@t16"}) {
    const auto details = with_attribute(elements_by_class(page.dom, "details", "ab-phase-model"), "data-model", model);
    REQUIRE(details.size() == 1);
    const std::vector<std::string> omitted = elements_by_class(details[0], "p", "ab-plan-differs");
    REQUIRE(omitted.size() == 1);
    CHECK(attribute(omitted[0], "data-arm") == "moved");
    CHECK_THAT(omitted[0],
               Contains(">arm moved chose a different plan for this model: 1 exchange phase vs 1 of base, and "
                        "phase 0 differs (the same 16 transfers and 192 words between other tiles); per-phase "
                        "comparison omitted</p>"));
    const auto bars = elements_by_class(details[0], "rect", "ab-phase-bar");
    CHECK(with_attribute(bars, "data-arm", "fast").size() == 1);
    CHECK(with_attribute(bars, "data-arm", "moved").empty());
  }

  // History: three builds, one point each per arm; the older version of "fast" hollow.
  for (const ab::MetricDefinition& metric : ab::ab_metrics()) {
    const auto charts =
        with_attribute(elements_by_class(page.dom, "svg", "ab-history-chart"), "data-metric", metric.name);
    CHECK(charts.size() == (metric.judged ? 2u : 0u));
    for (const std::string& chart : charts) {
      for (const char* arm : {"base", "fast", "moved"})
        CHECK(with_attribute(elements_by_class(chart, "circle", "ab-history-point"), "data-arm", arm).size() == 3);
      const auto hollow = elements_by_class(chart, "circle", "ab-history-other-version");
      REQUIRE(hollow.size() == 1);
      CHECK(attribute(hollow[0], "data-arm") == "fast");
      CHECK(attribute(hollow[0], "data-build") == "b1");
    }
  }
}
