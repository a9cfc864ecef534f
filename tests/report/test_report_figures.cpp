// The figures `tessera report` draws, on the runtime tests' hand-built 4-tile package.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "html_report.hpp"
#include "program_figures.hpp"
#include "sim_fixture.hpp"
#include "temp_dir.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/runtime/run.hpp"

using namespace tessera;
using namespace tessera::report;
using Catch::Matchers::Contains;

namespace {

std::vector<std::uint32_t> timeline_tiles(const ProgramFigures& figures) {
  std::vector<std::uint32_t> tiles;
  for (const TileTraffic& t : figures.timeline) tiles.push_back(t.tile);
  return tiles;
}

}  // namespace

TEST_CASE("rebuild_phase recovers multicast transfers and unreceived words from the tile images", "[report]") {
  const Package package = testing::small_mlp_package();

  std::uint64_t unreceived = 99;
  const ExchangePhase first = rebuild_phase(package, 0, &unreceived);
  REQUIRE(first.transfers.size() == 1);
  CHECK(first.transfers[0].source == 1);
  CHECK(first.transfers[0].destinations == std::vector<std::uint32_t>{0});
  CHECK(first.transfers[0].words == 8);
  CHECK(unreceived == 0);

  // Tile 0 sends y (8 words from cycle 0): tile 2 hears the first 4, tile 3 all 8; tile 1's
  // 2 words reach nobody.
  const ExchangePhase second = rebuild_phase(package, 1, &unreceived);
  REQUIRE(second.transfers.size() == 2);
  CHECK(second.transfers[0].source == 0);
  CHECK(second.transfers[0].destinations == std::vector<std::uint32_t>{2, 3});
  CHECK(second.transfers[0].words == 4);
  CHECK(second.transfers[1].destinations == std::vector<std::uint32_t>{3});
  CHECK(second.transfers[1].words == 4);
  CHECK(unreceived == 2);
  CHECK(endpoint_lower_bound(second) == 8);
  // Tile 3 hears 8 words and the first can only arrive after the 7-cycle latency.
  CHECK(lower_bound(second, package.target) == 15);
}

TEST_CASE("rebuild_phase refuses a receive that no send matches", "[report]") {
  Package package = testing::small_mlp_package();
  package.tiles[2].supersteps[1].receives[0].arrival = 30;  // sent at 23: tile 0 is silent then
  CHECK_THROWS_WITH(rebuild_phase(package, 1), Contains("superstep 1 ('reduce-bias-relu')") &&
                                                   Contains("tile 2 receives a word from tile 0 sent at cycle 23") &&
                                                   Contains("sends nothing then"));
  package.tiles[2].supersteps[1].receives[0].arrival = 3;  // before the latency of 7
  CHECK_THROWS_WITH(rebuild_phase(package, 1), Contains("arrives at cycle 3, before the 7-cycle latency"));
}

TEST_CASE("compute_figures measures each tile's memory by region as address extents", "[report]") {
  Package package = testing::small_mlp_package();
  const std::uint32_t interleaved = static_cast<std::uint32_t>(package.target.interleaved_start);
  // Two interleaved buffers that share addresses (as buffers with disjoint lifetimes do).
  package.tiles[1].buffers.push_back({interleaved, 256, Region::interleaved});
  package.tiles[1].buffers.push_back({interleaved + 128, 64, Region::interleaved});

  const ProgramFigures figures = compute_figures(package, "fixture.tpkg", cycles_from_package(package), {});
  REQUIRE(figures.memory.size() == 4);
  CHECK(figures.memory[0].standard_extent == 208);  // b ends at 192 + 16
  CHECK(figures.memory[0].interleaved_extent == 0);
  CHECK(figures.memory[0].standard_buffer_bytes == 32 + 64 + 64 + 32 + 16);
  CHECK(figures.memory[0].buffers == 5);
  CHECK(figures.memory[1].standard_extent == 128);
  CHECK(figures.memory[1].interleaved_extent == 256);
  CHECK(figures.memory[1].interleaved_buffer_bytes == 320);
  CHECK(figures.memory[3].total_extent() == 32);
  CHECK(figures.peak_tile == 1);
  CHECK(figures.peak_tile_bytes == 128 + 256);
}

TEST_CASE("compute_figures measures every exchange phase and picks the largest horizon", "[report]") {
  const Package package = testing::small_mlp_package();
  const ProgramFigures figures = compute_figures(package, "fixture.tpkg", cycles_from_package(package), {});
  REQUIRE(figures.phases.size() == 2);
  const PhaseFigures& first = figures.phases[0];
  CHECK(first.label == "matmul");
  CHECK(first.horizon == 14);  // 8 words arriving from cycle 6
  CHECK(first.endpoint_lower_bound == 8);
  CHECK(first.lower_bound == 14);
  CHECK(first.ratio_to_bound() == Approx(1.0));
  const PhaseFigures& second = figures.phases[1];
  CHECK(second.horizon == 15);
  CHECK(second.words_sent == 10);
  CHECK(second.words_received == 12);
  CHECK(second.words_unreceived == 2);
  CHECK(second.transfers == 2);
  CHECK(second.active_tiles == 4);
  REQUIRE(figures.selected_phase);
  CHECK(*figures.selected_phase == 1);
  // Tiles 0 and 3 each move 8 words; tile 3 finishes later, so it ranks first.
  CHECK(timeline_tiles(figures) == std::vector<std::uint32_t>{3, 0, 2, 1});
  CHECK(figures.tile_words_sent == std::vector<std::uint64_t>{8, 8 + 2, 0, 0});
  CHECK(figures.tile_words_received == std::vector<std::uint64_t>{8, 0, 4, 8});
}

TEST_CASE("compute_figures keeps the tile that sets the horizon on a short timeline", "[report]") {
  Package package = testing::small_mlp_package();
  package.tiles[1].supersteps[1].sends[0].cycle = 20;  // 2 unheard words, the last at cycle 21
  ReportOptions options;
  options.timeline_tiles = 2;
  const ProgramFigures figures = compute_figures(package, "fixture.tpkg", cycles_from_package(package), options);
  CHECK(figures.phases[1].horizon == 22);
  CHECK(timeline_tiles(figures) == std::vector<std::uint32_t>{3, 1});
}

TEST_CASE("compute_figures draws the phase asked for and refuses one that exchanges nothing", "[report]") {
  Package package = testing::small_mlp_package();
  ReportOptions options;
  options.phase = 0;
  CHECK(*compute_figures(package, "fixture.tpkg", cycles_from_package(package), options).selected_phase == 0);
  options.phase = 2;
  CHECK_THROWS_WITH(compute_figures(package, "fixture.tpkg", cycles_from_package(package), options),
                    Contains("fixture.tpkg: there is no exchange phase 2") && Contains("2 supersteps (0..1)") &&
                        Contains("phases with transfers: 0, 1"));
  package.tiles[1].supersteps[0].sends.clear();
  package.tiles[0].supersteps[0].receives.clear();
  options.phase = 0;
  CHECK_THROWS_WITH(compute_figures(package, "fixture.tpkg", cycles_from_package(package), options),
                    Contains("superstep 0 exchanges nothing") && Contains("phases with transfers: 1"));
}

TEST_CASE("cycles from the codelet formulas equal the simulator's profile", "[report]") {
  testing::TempDir dir;
  const Package package = testing::small_mlp_package();
  runtime::RunOptions run;
  run.lock_path = (dir.path() / "sim.lock").string();
  run.profile_path = (dir.path() / "profile.json").string();
  const runtime::RunResult result = runtime::run_package(package, run);
  REQUIRE(result.passed());

  const ComputeCycles from_profile = cycles_from_profile(package, run.profile_path);
  const ComputeCycles from_package = cycles_from_package(package);
  CHECK(from_profile.from_profile);
  CHECK_FALSE(from_package.from_profile);
  CHECK(from_profile.per_superstep == from_package.per_superstep);
  CHECK(from_profile.per_superstep[0] == std::vector<std::uint64_t>{449, 449, 0, 0});
  REQUIRE(from_profile.simulated_total_cycles);
  CHECK(*from_profile.simulated_total_cycles == result.cycles.total());
  CHECK_THAT(from_profile.source, Contains(run.profile_path));
}

TEST_CASE("cycles_from_profile refuses a file that is not this package's profile", "[report]") {
  testing::TempDir dir;
  const Package package = testing::small_mlp_package();
  const std::string missing = (dir.path() / "missing.json").string();
  CHECK_THROWS_WITH(cycles_from_profile(package, missing), Contains(missing) && Contains("cannot read the profile"));
  const std::string garbage = dir.write("garbage.json", "{ not json");
  CHECK_THROWS_WITH(cycles_from_profile(package, garbage), Contains(garbage) && Contains("not valid JSON"));
  const std::string other = dir.write("other.json", R"({"format": "tessera-profile", "tiles": 16, "target": "t16",
                                                       "supersteps": []})");
  CHECK_THROWS_WITH(cycles_from_profile(package, other),
                    Contains(other) && Contains("another package") && Contains("16 tiles") && Contains("'test-4'"));
  const std::string relabelled = dir.write("relabelled.json", R"({"format": "tessera-profile", "tiles": 4,
      "target": "test-4", "supersteps": [{"label": "matmul", "tile_compute_cycles": [1, 2, 3, 4]},
                                          {"label": "other", "tile_compute_cycles": [1, 2, 3, 4]}]})");
  CHECK_THROWS_WITH(cycles_from_profile(package, relabelled),
                    Contains(relabelled) && Contains("superstep 1 is 'other' in the profile but 'reduce-bias-relu'"));
}

TEST_CASE("the report page embeds its data safely and names every chart and table", "[report]") {
  Package package = testing::small_mlp_package();
  package.superstep_labels[1] = "</script><b>&";  // a label must not end the data's <script>
  const ProgramFigures figures = compute_figures(package, "fixture.tpkg", cycles_from_package(package), {});
  const std::string page = render_html_report(figures);
  CHECK(page.find("</script><b>&") == std::string::npos);
  CHECK_THAT(page, Contains("&lt;/script&gt;&lt;b&gt;&amp;"));
  for (const char* id :
       {"package-summary", "memory-chart", "memory-view", "cycles-chart", "cycles-superstep", "exchange-chart",
        "phase-summary", "superstep-summary", "tile-summary", "render-errors", "report-data"})
    CHECK_THAT(page, Contains(std::string("id=\"") + id + "\""));
  CHECK_THAT(page, Contains("<body data-render=\"pending\">"));

  const nlohmann::json data = nlohmann::json::parse(report_data_json(figures));
  CHECK(data["tiles"] == 4);
  CHECK(data["supersteps"][1] == "</script><b>&");
  CHECK(data["memory"]["standard"] == nlohmann::json({208, 128, 16, 32}));
  CHECK(data["phase"]["index"] == 1);
  CHECK(data["phase"]["lower_bound"] == 15);
  REQUIRE(data["phase"]["tiles"].size() == 4);
  CHECK(data["phase"]["tiles"][0]["tile"] == 3);
  CHECK(data["phase"]["tiles"][0]["receives"] == nlohmann::json({{7, 8, 0}}));
  CHECK(data["phase"]["tiles"][1]["sends"] == nlohmann::json({{0, 8}}));
}
