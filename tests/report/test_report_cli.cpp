// End to end: `tessera run --trace` and `tessera report` with the real binary on mlp-small/t16.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "program_figures.hpp"
#include "report_testing.hpp"
#include "tessera/exchange.hpp"
#include "tessera/package.hpp"

using namespace tessera;
using namespace tessera::testing;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

// The error line (the last thing on stderr) names `file`; the command failed cleanly.
void check_error_names(const CommandResult& r, const std::string& file, const std::string& what) {
  INFO(r.err);
  CHECK(r.exit_code == 1);
  REQUIRE(r.err.rfind("error: ") != std::string::npos);
  const std::string error = r.err.substr(r.err.rfind("error: "));
  CHECK_THAT(error, Contains(file) && Contains(what));
  CHECK(r.err.find("terminate called") == std::string::npos);
}

std::vector<std::string> leftovers(const fs::path& directory) {
  std::vector<std::string> found;
  for (const auto& entry : fs::directory_iterator(directory))
    if (entry.path().filename().string().front() == '.') found.push_back(entry.path().filename().string());
  return found;
}

std::string embedded_data(const std::string& page) {
  const std::string open = "id=\"report-data\">";
  const std::size_t begin = page.find(open) + open.size();
  return page.substr(begin, page.find("</script>", begin) - begin);
}

// Perfetto's JSON importer turns `us` into integer nanoseconds by truncating us * 1000.
std::int64_t perfetto_ns(const nlohmann::json& microseconds) {
  return static_cast<std::int64_t>(microseconds.get<double>() * 1000.0);
}

}  // namespace

TEST_CASE("tessera run --trace writes a Chrome trace with supersteps, compute and exchange per tile", "[report][e2e]") {
  TempDir dir;
  const SmallRun run = compile_and_run_small(dir);
  CHECK_THAT(run.ran.out, Contains("trace=" + run.trace + "\n"));
  CHECK_THAT(run.ran.out, Contains("numericalTest=PASS"));
  CHECK(leftovers(dir.path()).empty());

  const std::string text = read_text(run.trace);
  // Perfetto reads the file as a stream and stops at a top-level key it does not know.
  CHECK_THAT(text.substr(0, 16), Contains("{\"traceEvents\":["));
  const nlohmann::json trace = nlohmann::json::parse(text);
  const nlohmann::json profile = nlohmann::json::parse(read_text(run.profile));
  const Package package = read_package(run.package);
  const report::ProgramFigures figures =
      report::compute_figures(package, run.package, report::cycles_from_package(package), {});

  std::map<std::int64_t, std::string> track_names;
  std::map<std::int64_t, std::vector<nlohmann::json>> slices_by_track;
  std::size_t compute_slices = 0, tile_exchange_slices = 0;
  std::vector<nlohmann::json> supersteps, device_exchanges;
  for (const nlohmann::json& event : trace["traceEvents"]) {
    REQUIRE(event["ph"].is_string());
    CHECK(event["pid"] == 1);
    if (event["ph"] == "M") {
      if (event["name"] == "thread_name") track_names[event["tid"].get<std::int64_t>()] = event["args"]["name"];
      continue;
    }
    REQUIRE(event["ph"] == "X");
    REQUIRE(event["ts"].is_number());
    REQUIRE(event["dur"].is_number());
    CHECK(event["dur"].get<double>() >= 0);
    REQUIRE(event["args"]["cycles"].is_number_unsigned());
    const std::string category = event["cat"];
    CHECK((category == "superstep" || category == "device" || category == "compute" || category == "exchange"));
    slices_by_track[event["tid"].get<std::int64_t>()].push_back(event);
    if (category == "compute") ++compute_slices;
    if (category == "exchange") ++tile_exchange_slices;
    if (category == "superstep") supersteps.push_back(event);
    if (category == "device" && event["name"].get<std::string>().rfind("exchange", 0) == 0)
      device_exchanges.push_back(event);
  }

  // One named track for the device and one per tile.
  CHECK(track_names.at(1) == "device: supersteps");
  for (std::int64_t tile = 0; tile < 16; ++tile) CHECK(track_names.at(tile + 2) == "tile " + std::to_string(tile));

  // Compute: one slice per tile per superstep that computes; exchange: one per active tile.
  std::size_t computing = 0;
  for (const auto& step : profile["supersteps"])
    for (const auto& cycles : step["tile_compute_cycles"]) computing += cycles.get<std::uint64_t>() > 0;
  CHECK(compute_slices == computing);
  std::size_t active = 0;
  for (const report::PhaseFigures& phase : figures.phases) active += phase.active_tiles;
  CHECK(active > 0);
  CHECK(tile_exchange_slices == active);

  // The superstep slices cover the run end to end.
  REQUIRE(supersteps.size() == profile["supersteps"].size());
  std::uint64_t cycles = 0;
  for (const auto& step : supersteps) {
    CHECK(step["args"]["first_cycle"] == cycles);
    cycles += step["args"]["cycles"].get<std::uint64_t>();
  }
  CHECK(cycles == profile["totals"]["cycles"]);

  // Each tile's exchange slice lies inside its phase's device slice, at the schedule's cycles.
  for (const auto& [track, slices] : slices_by_track) {
    if (track < 2) continue;
    for (const auto& slice : slices) {
      if (slice["cat"] != "exchange") continue;
      const auto phase = std::find_if(device_exchanges.begin(), device_exchanges.end(), [&](const nlohmann::json& d) {
        return d["args"]["superstep"] == slice["args"]["superstep"];
      });
      REQUIRE(phase != device_exchanges.end());
      const std::uint64_t begin = (*phase)["args"]["first_cycle"];
      CHECK(slice["args"]["first_cycle"].get<std::uint64_t>() ==
            begin + slice["args"]["phase_cycle"].get<std::uint64_t>());
      CHECK(slice["args"]["first_cycle"].get<std::uint64_t>() + slice["args"]["cycles"].get<std::uint64_t>() <=
            begin + (*phase)["args"]["horizon"].get<std::uint64_t>());
    }
  }

  // On every track, slices nest or follow each other once Perfetto has rounded them to
  // nanoseconds: a slice that overlaps another without nesting would be misdrawn.
  for (auto& [track, slices] : slices_by_track) {
    std::vector<std::pair<std::int64_t, std::int64_t>> spans;
    for (const auto& s : slices) spans.push_back({perfetto_ns(s["ts"]), perfetto_ns(s["ts"]) + perfetto_ns(s["dur"])});
    std::sort(spans.begin(), spans.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first < b.first : a.second > b.second;
    });
    std::vector<std::int64_t> open_ends;
    for (const auto& [begin, end] : spans) {
      while (!open_ends.empty() && open_ends.back() <= begin) open_ends.pop_back();
      INFO("track " << track << " slice [" << begin << ", " << end << ") ns");
      if (!open_ends.empty()) CHECK(end <= open_ends.back());
      open_ends.push_back(end);
    }
  }
  // Times are microseconds at the target clock: the whole run lasts its cycles / clock.
  const auto& last = supersteps.back();
  const double end_us = last["ts"].get<double>() + last["dur"].get<double>();
  CHECK(end_us == Approx(cycles / package.target.clock_hz * 1e6).margin(0.002));
}

TEST_CASE("tessera report draws a compiled and run package with the compiler's own bounds", "[report][e2e]") {
  TempDir dir;
  const SmallRun run = compile_and_run_small(dir);
  const std::string page_path = (dir.path() / "out" / "report.html").string();
  const CommandResult reported =
      run_command({tessera_binary(), "report", run.package, "--profile", run.profile, "--html", page_path, "-v"});
  INFO(reported.err);
  REQUIRE(reported.exit_code == 0);
  CHECK_THAT(reported.out, Contains("report=" + page_path + " tiles=16 supersteps="));
  CHECK(field(reported.out, "peak_tile_bytes") == field(run.compiled.out, "peak_tile_bytes"));
  // Per-region peaks from the tile buffer tables agree with place-storage's memory summary.
  const std::size_t summary = run.compiled.err.find("memory summary ");
  REQUIRE(summary != std::string::npos);
  const std::string summary_line = run.compiled.err.substr(summary, run.compiled.err.find('\n', summary) - summary);
  CHECK(field(reported.out, "peak_standard_bytes") == field(summary_line, "peak_standard_bytes"));
  CHECK(field(reported.out, "peak_interleaved_bytes") == field(summary_line, "peak_interleaved_bytes"));
  CHECK(field(reported.out, "peak_tile_bytes") == field(summary_line, "max_tile_bytes"));
  CHECK_THAT(reported.err, Contains("report written path=" + page_path));

  // The phases rebuilt from the package's sends have the bounds of the compiler's phases.
  const Package package = read_package(run.package);
  const report::ProgramFigures figures =
      report::compute_figures(package, run.package, report::cycles_from_profile(package, run.profile), {});
  std::uint64_t horizons = 0, bounds = 0;
  std::size_t compared = 0;
  for (const report::PhaseFigures& phase : figures.phases) {
    horizons += phase.horizon;
    bounds += phase.lower_bound;
    const fs::path phase_file = fs::path(run.phase_directory) / phase_file_name(phase.index);
    CHECK(fs::exists(phase_file) == !phase.empty());
    if (phase.empty()) continue;
    const ExchangePhase compiled = read_phase_file(phase_file.string());
    CHECK(phase.lower_bound == lower_bound(compiled, package.target));
    CHECK(phase.endpoint_lower_bound == endpoint_lower_bound(compiled));
    CHECK(phase.horizon >= phase.lower_bound);
    ++compared;
  }
  CHECK(compared > 0);
  CHECK(std::to_string(horizons) == field(run.compiled.out, "scheduled_exchange_cycles"));
  CHECK(std::to_string(bounds) == field(run.compiled.out, "exchange_lower_bound"));
  REQUIRE(figures.selected_phase);
  const report::PhaseFigures& selected = figures.phases[*figures.selected_phase];
  CHECK(field(reported.out, "phase") == std::to_string(selected.index));
  CHECK(field(reported.out, "horizon") == std::to_string(selected.horizon));
  CHECK(field(reported.out, "lower_bound") == std::to_string(selected.lower_bound));
  for (const report::PhaseFigures& phase : figures.phases) CHECK(phase.horizon <= selected.horizon);

  // Standalone: nothing is fetched; written atomically (no temporary left beside it).
  const std::string page = read_text(page_path);
  for (const char* fetch : {" src=", "<link", "@import", "url(", "<iframe", "fetch("})
    CHECK(page.find(fetch) == std::string::npos);
  CHECK(leftovers(dir.path() / "out").empty());

  // Without a profile the cycles come from the codelet formulas, which the simulator charges.
  const std::string formula_path = (dir.path() / "formulas.html").string();
  const CommandResult formulas = run_command({tessera_binary(), "report", run.package, "--html", formula_path});
  REQUIRE(formulas.exit_code == 0);
  const nlohmann::json with_profile = nlohmann::json::parse(embedded_data(page));
  const nlohmann::json without = nlohmann::json::parse(embedded_data(read_text(formula_path)));
  CHECK(with_profile["cycles"]["source"] == "profile " + run.profile);
  CHECK(without["cycles"]["source"] == "codelet cycle formulas");
  CHECK(with_profile["cycles"]["per_superstep"] == without["cycles"]["per_superstep"]);

  // --phase and --tiles choose what the timeline shows.
  const std::string one_tile = (dir.path() / "one.html").string();
  const CommandResult narrow = run_command({tessera_binary(), "report", run.package, "--html", one_tile, "--phase",
                                            std::to_string(selected.index), "--tiles", "1"});
  REQUIRE(narrow.exit_code == 0);
  CHECK(field(narrow.out, "timeline_tiles") == "1");
}

TEST_CASE("tessera report names the file in its errors and writes nothing then", "[report][e2e]") {
  TempDir dir;
  const SmallRun run = compile_and_run_small(dir);
  const std::string page = (dir.path() / "report.html").string();

  check_error_names(run_command({tessera_binary(), "report", run.package, "--html", page, "--phase", "9"}), run.package,
                    "no exchange phase 9");
  const std::string other = dir.write("other-profile.json", R"({"format": "tessera-profile", "tiles": 4,
      "target": "test-4", "supersteps": []})");
  check_error_names(run_command({tessera_binary(), "report", run.package, "--profile", other, "--html", page}), other,
                    "another package");
  const std::string not_a_package = dir.write("garbage.tpkg", "definitely not a package");
  check_error_names(run_command({tessera_binary(), "report", not_a_package, "--html", page}), not_a_package, "");
  const std::string blocker = dir.write("blocker", "a file where a folder should be");
  const std::string unwritable = blocker + "/report.html";
  check_error_names(run_command({tessera_binary(), "report", run.package, "--html", unwritable}), unwritable, "");
  CHECK_FALSE(fs::exists(page));
  CHECK(leftovers(dir.path()).empty());

  const CommandResult no_page = run_command({tessera_binary(), "report", run.package});
  CHECK(no_page.exit_code != 0);
  CHECK_THAT(no_page.out + no_page.err, Contains("--html"));
}
