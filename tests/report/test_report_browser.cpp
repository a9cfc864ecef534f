// The browser check: report pages opened in headless Chromium render their charts and tables
// without script errors.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "browser_check.hpp"
#include "program_figures.hpp"
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
  const CommandResult reported = run_command({tessera_binary(), "report", run.package, "--profile", run.profile, "--html", html});
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
  for (const std::string& option : {std::string("<option value=\"used\">"),
                                    "<option value=\"" + std::to_string(last) + "\">"}) {
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
      "<rect class=\"ab\"></rect><rectangle class=\"a\"></rectangle><svg id=\"inner\"><rect class=\"a\"/></svg></g></svg>"
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

TEST_CASE("the A/B report page renders its tables and charts in headless Chromium without script errors",
          "[report][browser][ab]") {
  TempDir dir;
  const std::string base = pipeline_copy(dir, source_path("configs/pipelines/small.yaml"), "finalists: 2", "finalists: 2");
  const std::string html = (dir.path() / "ab.html").string();
  const CommandResult ab = run_command(
      {tessera_binary(), "ab", "--base", base, "--arm", "greedy=", "--arm",
       "in-order=" + source_path("configs/suites/arms/in-order.yaml"), "--suite", source_path("configs/suites/quick.yaml"),
       "--repeat", "2", "--results", (dir.path() / "results").string(), "--lock", (dir.path() / "device.lock").string(),
       "--html", html, "--quiet"});
  INFO(ab.out << ab.err);
  REQUIRE(ab.exit_code == 0);

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
  CHECK(table_body_rows(element_by_id(page.dom, "ab-models")) == std::stoul(comparisons));
  const std::vector<std::string> charts = elements_by_class(page.dom, "svg", "ab-chart");
  REQUIRE_FALSE(charts.empty());
  for (const std::string& chart : charts) {
    INFO(attribute(chart, "id"));
    CHECK(count_elements(chart, "rect", "ab-bar") > 0);
  }
}
