// The core's schedule validator, exchange lower bounds and phase/schedule files.
#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "shipped_target.hpp"
#include "temp_dir.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/exchange.hpp"
#include "tessera/scheduler.hpp"
#include "tessera/target.hpp"
#include "tessera/testing/phases.hpp"
#include "tessera/testing/targets.hpp"

using namespace tessera;
using tessera::testing::Fabric;
using tessera::testing::fabric_target;
using tessera::testing::TempDir;
using tessera::testing::transfer;

namespace {

// 8 tiles in 2 columns of 4: latency 2 within a column, 3 across; switch cost 1.
Target hand_target() { return fabric_target("hand", Fabric{8, 4, 2, 1.0, 1, true}); }

// Four transfers into tiles 1 and 5, one of them multicast.
ExchangePhase hand_phase() {
  ExchangePhase phase;
  phase.tiles = 8;
  phase.transfers = {transfer(0, {1}, 4), transfer(2, {1}, 3), transfer(4, {1, 5}, 2), transfer(0, {5}, 2)};
  return phase;
}

// Worked by hand: every receive waits for the previous one plus the switch cost.
//   t0 sent 0..3, arrives at 1 in 2..5      t3 sent 4..5, arrives at 5 in 7..8
//   t1 sent 5..7, arrives at 1 in 7..9      t2 sent 8..9, arrives at 5 in 10..11, at 1 in 11..12
Schedule hand_schedule() { return Schedule{{{0, 0, 4}, {1, 5, 3}, {2, 8, 2}, {3, 4, 2}}}; }

ScheduleReport validate_with(std::vector<Segment> segments, const Target& target = hand_target(),
                             const ExchangePhase& phase = hand_phase()) {
  return validate_schedule(phase, Schedule{std::move(segments)}, target);
}

}  // namespace

TEST_CASE("validator accepts a correct hand schedule with its horizon and bounds", "[exchange]") {
  const ScheduleReport report = validate_schedule(hand_phase(), hand_schedule(), hand_target());
  CHECK(report.valid);
  CHECK(report.first_conflict.empty());
  CHECK(report.horizon == 13);
  CHECK(report.endpoint_lower_bound == 9);  // tile 1 receives 4 + 3 + 2 words
  // Tile 1: nothing arrives before cycle 2, 9 words, 3 sources so 2 switches of 1 cycle.
  CHECK(report.lower_bound == 13);
}

TEST_CASE("validator accepts a transfer split into segments in order", "[exchange]") {
  auto report = validate_with({{0, 0, 1}, {0, 1, 3}, {1, 5, 3}, {2, 8, 2}, {3, 4, 1}, {3, 5, 1}});
  CHECK(report.valid);
  CHECK(report.horizon == 13);
  // Preemption with a pause: t3's second word waits, still fine for tile 5.
  report = validate_with({{0, 0, 4}, {1, 5, 3}, {2, 9, 2}, {3, 4, 1}, {3, 6, 1}});
  CHECK(report.valid);
  CHECK(report.horizon == 14);
}

TEST_CASE("validator reports two sends in one cycle with tile, cycle and transfers", "[exchange]") {
  const auto report = validate_with({{0, 0, 4}, {1, 5, 3}, {2, 8, 2}, {3, 2, 2}});
  CHECK_FALSE(report.valid);
  CHECK(report.first_conflict ==
        "send conflict: tile 0 sends words of transfer 0 and transfer 3 in the same cycle 2 (a "
        "tile sends one word per cycle)");
}

TEST_CASE("validator reports two arrivals in one cycle with tile, cycle and transfers", "[exchange]") {
  // t1 sent from cycle 3 arrives at tile 1 from cycle 5, while t0 still arrives there.
  const auto report = validate_with({{0, 0, 4}, {1, 3, 3}, {2, 9, 2}, {3, 4, 2}});
  CHECK_FALSE(report.valid);
  CHECK(report.first_conflict ==
        "receive conflict: tile 1 receives words of transfer 0 (from tile 0) and transfer 1 "
        "(from tile 2) in the same cycle 5 (a tile receives one word per cycle)");
}

TEST_CASE("validator reports a receive-mux switch without the idle cycles", "[exchange]") {
  const auto report = validate_with({{0, 0, 4}, {1, 4, 3}, {2, 8, 2}, {3, 4, 2}});
  CHECK_FALSE(report.valid);
  CHECK(report.first_conflict ==
        "switch conflict: tile 1 changes the source it listens to from tile 0 (transfer 0, last "
        "word arrives in cycle 5) to tile 2 (transfer 1, first word arrives in cycle 6) after 0 "
        "idle cycles; target 'hand' needs 1");
  // Without a switch cost the same schedule is fine.
  Target free_switch = hand_target();
  free_switch.switch_cost = 0;
  CHECK(validate_with({{0, 0, 4}, {1, 4, 3}, {2, 8, 2}, {3, 4, 2}}, free_switch).valid);
}

TEST_CASE("validator needs no idle cycles between transfers from the same source", "[exchange]") {
  ExchangePhase phase;
  phase.tiles = 8;
  phase.transfers = {transfer(0, {1}, 3), transfer(0, {1, 2}, 2)};
  const auto report = validate_with({{0, 0, 3}, {1, 3, 2}}, hand_target(), phase);
  CHECK(report.valid);
  CHECK(report.horizon == 7);
}

TEST_CASE("validator reports the earliest of several conflicts", "[exchange]") {
  ExchangePhase phase;
  phase.tiles = 8;
  phase.transfers = {transfer(0, {1}, 5), transfer(0, {2}, 5), transfer(3, {2}, 5), transfer(4, {5}, 5),
                     transfer(6, {5}, 5)};
  Target ideal = tessera::testing::ideal_target("ideal", 8, 4);
  // Tile 0 double-sends from cycle 4, tile 5 double-receives from cycle 2, tile 2 from 6.
  const auto report = validate_with({{0, 0, 5}, {1, 4, 5}, {2, 6, 5}, {3, 0, 5}, {4, 2, 5}}, ideal, phase);
  CHECK_FALSE(report.valid);
  CHECK_THAT(report.first_conflict, Catch::StartsWith("receive conflict: tile 5") && Catch::Contains("transfer 3") &&
                                        Catch::Contains("transfer 4") && Catch::Contains("cycle 2"));
}

TEST_CASE("validator reports words missing, extra, empty segments and bad indices", "[exchange]") {
  CHECK(validate_with({{0, 0, 4}, {1, 5, 3}, {2, 8, 2}}).first_conflict == "transfer 3 has 0 of its 2 words scheduled");
  CHECK(validate_with({{0, 0, 2}, {0, 2, 3}, {1, 6, 3}, {2, 9, 2}, {3, 5, 2}}).first_conflict ==
        "transfer 0 has 5 words scheduled but carries only 4");
  CHECK(validate_with({{0, 0, 4}, {1, 5, 3}, {2, 8, 2}, {3, 4, 2}, {1, 20, 0}}).first_conflict ==
        "segment 4 (transfer 1) carries no words; drop it");
  CHECK(validate_with({{0, 0, 4}, {1, 5, 3}, {2, 8, 2}, {3, 4, 2}, {7, 20, 1}}).first_conflict ==
        "segment 4 names transfer 7 but the phase has 4 transfers");
  CHECK_THAT(validate_with({{0, 0, 4}, {1, 5, 3}, {2, 8, 2}, {3, std::uint64_t{1} << 63, 2}}).first_conflict,
             Catch::Contains("beyond the last supported cycle"));
}

TEST_CASE("validator refuses phases the target cannot run", "[exchange]") {
  Target no_multicast = hand_target();
  no_multicast.multicast = false;
  CHECK(validate_schedule(hand_phase(), hand_schedule(), no_multicast).first_conflict ==
        "invalid phase: transfer 2 has 2 destinations but target 'hand' has no multicast; split "
        "it into one transfer per destination");

  ExchangePhase phase = hand_phase();
  phase.transfers[1].destinations = {9};
  CHECK(validate_schedule(phase, hand_schedule(), hand_target()).first_conflict ==
        "invalid phase: transfer 1: destination tile 9 is out of range (the phase has 8 tiles)");
  // The bounds leave out what names a tile beyond the phase, however far.
  phase = hand_phase();
  phase.transfers[0].source = std::numeric_limits<std::uint32_t>::max();
  CHECK(validate_schedule(phase, hand_schedule(), hand_target()).first_conflict ==
        "invalid phase: transfer 0: source tile 4294967295 is out of range (the phase has 8 tiles)");
  CHECK(endpoint_lower_bound(phase) == 5);  // tile 1 still receives transfers 1 and 2
  CHECK(lower_bound(phase, hand_target()) >= 2);
  phase = hand_phase();
  phase.transfers[3].destinations = {0};
  CHECK(validate_schedule(phase, hand_schedule(), hand_target()).first_conflict ==
        "invalid phase: transfer 3: source tile 0 is among its own destinations");
  phase = hand_phase();
  phase.transfers[2].destinations = {1, 1};
  CHECK(validate_schedule(phase, hand_schedule(), hand_target()).first_conflict ==
        "invalid phase: transfer 2: destination tile 1 is listed twice");
  phase = hand_phase();
  phase.tiles = 16;
  CHECK(validate_schedule(phase, hand_schedule(), hand_target()).first_conflict ==
        "invalid phase: the phase has 16 tiles but target 'hand' has only 8");
}

namespace {
// Sends every transfer one after another from cycle 0, counting the calls it gets.
class CountingScheduler final : public ExchangeScheduler {
public:
  int calls = 0;

protected:
  Schedule schedule_impl(const ExchangePhase& phase, const Target&, std::uint64_t) override {
    ++calls;
    Schedule schedule;
    std::uint64_t start = 0;
    for (std::uint32_t index = 0; index < phase.transfers.size(); ++index) {
      schedule.segments.push_back({index, start, phase.transfers[index].words});
      start += phase.transfers[index].words + 8;
    }
    return schedule;
  }
};
}  // namespace

TEST_CASE("check_phase states the one rule every scheduler is given", "[exchange]") {
  CHECK(check_phase(hand_phase(), hand_target()).empty());
  ExchangePhase phase = hand_phase();
  phase.transfers[2].destinations = {1, 1};
  CHECK(check_phase(phase, hand_target()) == "transfer 2: destination tile 1 is listed twice");
  phase = hand_phase();
  phase.transfers[1].destinations.clear();
  CHECK(check_phase(phase, hand_target()) == "transfer 1 (from tile 2) has no destination");
}

TEST_CASE("a malformed phase is the caller's error: the scheduler is neither called nor blamed", "[exchange]") {
  CountingScheduler scheduler;
  ScheduleReport report;
  scheduler.schedule(hand_phase(), hand_target(), 100, &report);
  CHECK(report.valid);
  CHECK(scheduler.calls == 1);

  ExchangePhase phase = hand_phase();
  phase.transfers[3].destinations = {0};
  try {
    scheduler.schedule(phase, hand_target(), 100);
    FAIL("a malformed phase was scheduled");
  } catch (const PluginError& e) {
    FAIL("a malformed phase blamed the plugin: " << e.what());
  } catch (const Error& e) {
    CHECK_THAT(e.what(), Catch::Contains("is malformed: transfer 3: source tile 0 is among its own destinations") &&
                             Catch::Contains("the scheduler was not called"));
  }
  CHECK(scheduler.calls == 1);
}

TEST_CASE("validator accepts the empty phase with horizon 0", "[exchange]") {
  ExchangePhase phase;
  phase.tiles = 8;
  const auto report = validate_schedule(phase, Schedule{}, hand_target());
  CHECK(report.valid);
  CHECK(report.horizon == 0);
  CHECK(report.endpoint_lower_bound == 0);
  CHECK(report.lower_bound == 0);
  CHECK_FALSE(validate_schedule(phase, Schedule{{{0, 0, 1}}}, hand_target()).valid);
}

TEST_CASE("endpoint bound counts a multicast word once at its sender", "[exchange]") {
  ExchangePhase phase;
  phase.tiles = 8;
  phase.transfers = {transfer(0, {1, 2, 3}, 5)};
  CHECK(endpoint_lower_bound(phase) == 5);
  phase.transfers.push_back(transfer(0, {4}, 2));
  CHECK(endpoint_lower_bound(phase) == 7);  // tile 0 sends 5 + 2
  phase.transfers.push_back(transfer(6, {1}, 3));
  CHECK(endpoint_lower_bound(phase) == 8);  // tile 1 receives 5 + 3
}

TEST_CASE("lower bound adds the latency a sender's last words still travel", "[exchange]") {
  ExchangePhase phase;
  phase.tiles = 8;
  phase.transfers = {transfer(0, {7}, 5), transfer(0, {1}, 5)};  // latency 3 and 2
  CHECK(endpoint_lower_bound(phase) == 10);
  // Whatever goes last still needs at least 2 cycles to land: 10 + 2.
  CHECK(lower_bound(phase, hand_target()) == 12);
  // And 12 is reachable: the far transfer first.
  const auto report = validate_with({{0, 0, 5}, {1, 5, 5}}, hand_target(), phase);
  CHECK(report.valid);
  CHECK(report.horizon == 12);
}

TEST_CASE("lower bound charges a receiver's switch cost per extra source", "[exchange]") {
  Target target = tessera::testing::ideal_target("ideal", 8, 4);
  target.switch_cost = 3;
  ExchangePhase phase;
  phase.tiles = 8;
  for (std::uint32_t source = 1; source <= 5; ++source) phase.transfers.push_back(transfer(source, {0}, 1));
  phase.transfers.push_back(transfer(1, {0}, 2));  // a second transfer from a known source
  CHECK(endpoint_lower_bound(phase) == 7);
  CHECK(lower_bound(phase, target) == 7 + 3 * 4);
}

TEST_CASE("lower bound adds up pairwise-conflicting multicasts", "[exchange]") {
  // Each pair shares a receiver, no tile is shared by all three: the endpoint bound is 20,
  // but with equal latencies no two can ever be in flight together.
  ExchangePhase phase;
  phase.tiles = 8;
  phase.transfers = {transfer(0, {3, 4}, 10), transfer(1, {3, 5}, 10), transfer(2, {4, 5}, 10)};
  const Target ideal = tessera::testing::ideal_target("ideal", 8, 4);
  CHECK(endpoint_lower_bound(phase) == 20);
  CHECK(lower_bound(phase, ideal) == 30);
  const auto serial = validate_with({{0, 0, 10}, {1, 10, 10}, {2, 20, 10}}, ideal, phase);
  CHECK(serial.valid);
  CHECK(serial.horizon == serial.lower_bound);
  CHECK_FALSE(validate_with({{0, 0, 10}, {1, 10, 10}, {2, 15, 10}}, ideal, phase).valid);
}

TEST_CASE("lower bound equals the endpoint bound for unicast on the ideal target", "[exchange]") {
  const Target ideal = tessera::testing::shipped_target("t1472-ideal");
  const ExchangePhase phase = tessera::testing::random_phase({}, 11);
  CHECK(lower_bound(phase, ideal) == endpoint_lower_bound(phase));
  // Latency only raises it.
  CHECK(lower_bound(phase, tessera::testing::shipped_target("t1472")) > endpoint_lower_bound(phase));
}

// ---- the validator against a word-by-word reference on random small cases ----

namespace {

// The rules applied one word at a time: slow, obviously right, for small schedules.
struct WordLevelReference {
  const ExchangePhase& phase;
  const Target& target;
  std::map<std::pair<std::uint32_t, std::uint64_t>, int> sends;               // (tile, cycle)
  std::map<std::pair<std::uint32_t, std::uint64_t>, std::uint32_t> arrivals;  // -> source

  bool fits(std::uint32_t transfer, std::uint64_t start, std::uint32_t words) const {
    const Transfer& t = phase.transfers[transfer];
    for (std::uint64_t c = start; c < start + words; ++c) {
      if (sends.count({t.source, c})) return false;
      for (std::uint32_t d : t.destinations) {
        const std::uint64_t a = c + target.latency(t.source, d);
        if (arrivals.count({d, a})) return false;
        // Another source's word within switch_cost cycles on either side breaks the mux rule.
        for (std::uint64_t k = 1; k <= target.switch_cost; ++k) {
          for (std::uint64_t near : {a + k, a >= k ? a - k : a}) {
            auto it = arrivals.find({d, near});
            if (near != a && it != arrivals.end() && it->second != t.source) return false;
          }
        }
      }
    }
    return true;
  }

  void place(std::uint32_t transfer, std::uint64_t start, std::uint32_t words) {
    const Transfer& t = phase.transfers[transfer];
    for (std::uint64_t c = start; c < start + words; ++c) {
      sends[{t.source, c}] = 1;
      for (std::uint32_t d : t.destinations) arrivals[{d, c + target.latency(t.source, d)}] = t.source;
    }
  }

  // Verdict and horizon of a whole schedule, word by word.
  std::pair<bool, std::uint64_t> judge(const Schedule& schedule) {
    sends.clear();
    arrivals.clear();
    std::vector<std::uint64_t> words(phase.transfers.size(), 0);
    std::uint64_t horizon = 0;
    for (const Segment& s : schedule.segments) {
      if (s.transfer >= phase.transfers.size() || s.words == 0) return {false, 0};
      if (!fits(s.transfer, s.start, s.words)) return {false, 0};
      place(s.transfer, s.start, s.words);
      words[s.transfer] += s.words;
      for (std::uint32_t d : phase.transfers[s.transfer].destinations)
        horizon =
            std::max<std::uint64_t>(horizon, s.start + s.words + target.latency(phase.transfers[s.transfer].source, d));
    }
    for (std::size_t i = 0; i < words.size(); ++i)
      if (words[i] != phase.transfers[i].words) return {false, 0};
    return {true, horizon};
  }
};

// Everything needed to replay a failing random case by hand.
std::string describe(const ExchangePhase& phase, const Schedule& schedule, const Target& target) {
  std::ostringstream text;
  text << "target latency " << target.exchange_base_latency << "+" << target.exchange_latency_per_column
       << "/column, switch " << target.switch_cost << ", multicast " << target.multicast << "\n";
  for (std::size_t i = 0; i < phase.transfers.size(); ++i) {
    text << "transfer " << i << ": " << phase.transfers[i].source << " ->";
    for (std::uint32_t d : phase.transfers[i].destinations) text << " " << d;
    text << ", " << phase.transfers[i].words << " words\n";
  }
  for (const Segment& s : schedule.segments)
    text << "segment transfer " << s.transfer << " start " << s.start << " words " << s.words << "\n";
  return text.str();
}

}  // namespace

TEST_CASE("validator agrees with a word-by-word reference on random schedules", "[exchange]") {
  std::mt19937_64 random(20261202);
  int valid_seen = 0, invalid_seen = 0;
  for (int trial = 0; trial < 600; ++trial) {
    Target target = tessera::testing::ideal_target("ideal", 8, 4);
    target.exchange_base_latency = static_cast<std::uint32_t>(random() % 3);
    target.exchange_latency_per_column = static_cast<double>(random() % 3);
    target.switch_cost = static_cast<std::uint32_t>(random() % 3);
    target.multicast = random() % 2 == 0;
    tessera::testing::RandomPhaseShape shape;
    shape.tiles = 8;
    shape.transfers = 1 + static_cast<std::uint32_t>(random() % 7);
    shape.max_words = 6;
    shape.multicast_fraction = target.multicast ? 0.5 : 0.0;
    shape.max_fanout = 3;
    const ExchangePhase phase = tessera::testing::random_phase(shape, random());

    // A valid preemptive schedule: random order, random splits, first fit after a random
    // start. Every other trial packs tightly, so the lower bounds get tested near the optimum.
    const bool tight = trial % 2 == 1;
    WordLevelReference reference{phase, target, {}, {}};
    Schedule schedule;
    std::vector<std::uint32_t> order(phase.transfers.size());
    for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), random);
    for (std::uint32_t index : order) {
      std::uint32_t left = phase.transfers[index].words;
      std::uint64_t earliest = tight ? 0 : random() % 4;
      while (left > 0) {
        const std::uint32_t words = 1 + static_cast<std::uint32_t>(random() % left);
        std::uint64_t start = earliest;
        while (!reference.fits(index, start, words)) ++start;
        reference.place(index, start, words);
        schedule.segments.push_back({index, start, words});
        earliest = start + words + (tight ? 0 : random() % 3);
        left -= words;
      }
    }
    std::shuffle(schedule.segments.begin(), schedule.segments.end(), random);
    // Then, often, break it a little.
    if (random() % 3 == 0) {
      Segment& victim = schedule.segments[random() % schedule.segments.size()];
      switch (random() % 3) {
        case 0:
          victim.start = victim.start > 2 ? victim.start - 1 - random() % 2 : victim.start + 1;
          break;
        case 1:
          victim.start += 1 + random() % 2;
          break;
        case 2:
          victim.words += 1;
          break;
      }
    }

    const auto [expected_valid, expected_horizon] = reference.judge(schedule);
    const ScheduleReport report = validate_schedule(phase, schedule, target);
    INFO("trial " << trial << " conflict: " << report.first_conflict << "\n" << describe(phase, schedule, target));
    REQUIRE(report.valid == expected_valid);
    if (expected_valid) {
      ++valid_seen;
      CHECK(report.horizon == expected_horizon);
      CHECK(report.lower_bound <= report.horizon);
      CHECK(report.endpoint_lower_bound <= report.lower_bound);
    } else {
      ++invalid_seen;
      CHECK_FALSE(report.first_conflict.empty());
    }
  }
  CHECK(valid_seen > 300);
  CHECK(invalid_seen > 100);
}

TEST_CASE("validator sweeps 600k transfers on 1472 tiles without per-word work", "[exchange]") {
  tessera::testing::RandomPhaseShape shape;
  shape.transfers = 600000;
  shape.max_words = 48;
  const ExchangePhase phase = tessera::testing::random_phase(shape, 3);
  const Target target = tessera::testing::shipped_target("t1472");
  // Back to back with room for any latency and switch: valid whatever the tiles.
  const std::uint64_t gap = target.latency(0, 1471) + target.switch_cost;
  Schedule schedule;
  std::uint64_t cycle = 0;
  for (std::uint32_t i = 0; i < phase.transfers.size(); ++i) {
    schedule.segments.push_back({i, cycle, phase.transfers[i].words});
    cycle += phase.transfers[i].words + gap;
  }
  const auto started = std::chrono::steady_clock::now();
  const ScheduleReport report = validate_schedule(phase, schedule, target);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  CHECK(report.valid);
  CHECK(report.horizon > cycle - gap);
  // A per-word or quadratic validator takes minutes here; shown, not checked (a busy machine
  // stretches it), and bench-exchange times the validator.
  INFO("validation took " << seconds << " s");
  // And one double send among them is found: move a transfer onto an earlier one of its
  // source.
  std::uint32_t earlier = 399999;
  while (phase.transfers[earlier].source != phase.transfers[400000].source) --earlier;
  schedule.segments[400000].start = schedule.segments[earlier].start;
  const ScheduleReport broken = validate_schedule(phase, schedule, target);
  CHECK_FALSE(broken.valid);
  CHECK_THAT(broken.first_conflict, Catch::Contains(fmt::format("transfer {} and transfer 400000", earlier)));
}

// ---- phase and schedule files ----

TEST_CASE("phase files round-trip, with comments and blank lines", "[exchange][files]") {
  TempDir dir;
  const ExchangePhase phase = hand_phase();
  const std::string path = (dir.path() / "hand.phase").string();
  write_phase_file(phase, path);
  const ExchangePhase back = read_phase_file(path);
  REQUIRE(back.tiles == phase.tiles);
  REQUIRE(back.transfers.size() == phase.transfers.size());
  for (std::size_t i = 0; i < phase.transfers.size(); ++i) {
    CHECK(back.transfers[i].source == phase.transfers[i].source);
    CHECK(back.transfers[i].destinations == phase.transfers[i].destinations);
    CHECK(back.transfers[i].words == phase.transfers[i].words);
  }
  const auto commented = dir.write("c.phase", "# a comment\n\n  tiles 4   # trailing\n0 1,2 7\n\t3 0 0\n# end\n");
  const ExchangePhase read = read_phase_file(commented);
  CHECK(read.tiles == 4);
  REQUIRE(read.transfers.size() == 2);
  CHECK(read.transfers[0].destinations == std::vector<std::uint32_t>{1, 2});
  CHECK(read.transfers[1].words == 0);
}

TEST_CASE("phase file errors name the file, line and column", "[exchange][files]") {
  TempDir dir;
  auto expect = [&](const std::string& text, const std::string& place, const std::string& message) {
    const auto path = dir.write("bad.phase", text);
    CHECK_THROWS_WITH(read_phase_file(path), Catch::Contains(path + ":" + place + ": ") && Catch::Contains(message));
  };
  expect("tiles 4\n0 1 5\n1 2 -3\n", "3:5", "negative word count '-3'");
  expect("tiles 4\n0 1 5\n# note\n2 7 1\n", "4:3", "destination tile 7 is out of range: the phase has 4 tiles (0..3)");
  expect("tiles 4\n9 1 1\n", "2:1", "source tile 9 is out of range");
  expect("tiles 4\n2 0,2 1\n", "2:5", "source tile 2 is among its own destinations");
  expect("tiles 4\n2 0,1,0 1\n", "2:7", "destination tile 0 is listed twice");
  expect("tiles 4\n2 0,,1 1\n", "2:5", "empty destination");
  expect("tiles 4\n0 1\n", "2:1", "expected `SRC DST[,DST...] WORDS` (3 fields), found 2 fields");
  expect("tiles 4\n0 1 five\n", "2:5", "expected a non-negative integer word count, found 'five'");
  expect("tiles 4\n0 1 99999999999\n", "2:5", "word count '99999999999' is too large");
  expect("# no header\n0 1 5\n", "2:1", "missing `tiles N` header");
  expect("", "1:1", "missing `tiles N` header");
  expect("tiles 4\ntiles 4\n", "2:1", "a second `tiles` header");
  expect("tiles four\n", "1:7", "expected a non-negative integer tile count");
  CHECK_THROWS_WITH(read_phase_file((dir.path() / "missing.phase").string()),
                    Catch::Contains("missing.phase") && Catch::Contains("cannot read the phase file"));
}

TEST_CASE("schedule files list transfer, start and words per line", "[exchange][files]") {
  TempDir dir;
  const std::string path = (dir.path() / "hand.schedule").string();
  write_schedule_file(hand_schedule(), path);
  std::ifstream in(path);
  std::string line;
  std::vector<std::string> lines;
  while (std::getline(in, line))
    if (!line.empty() && line[0] != '#') lines.push_back(line);
  CHECK(lines == std::vector<std::string>{"0 0 4", "1 5 3", "2 8 2", "3 4 2"});
  // Missing folders are created (as for every atomic output); a folder that is a file cannot be.
  const std::string blocker = dir.write("blocker", "a file");
  CHECK_THROWS_AS(write_schedule_file(hand_schedule(), blocker + "/x"), Error);
}
