// The A/B statistics against published or hand-derived values: Mann-Whitney U, BH, geomean CI.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

#include "analysis.hpp"
#include "stats.hpp"

using namespace tessera::ab;
using Catch::Detail::Approx;

namespace {

// U of every way to split the pooled values into samples of the same sizes: the exact test by brute force.
double brute_force_two_sided_p(const std::vector<double>& x, const std::vector<double>& y) {
  std::vector<double> pooled(x);
  pooled.insert(pooled.end(), y.begin(), y.end());
  auto u_of = [](const std::vector<double>& a, const std::vector<double>& b) {
    double u = 0;
    for (double p : a)
      for (double q : b) u += p > q ? 1.0 : p == q ? 0.5 : 0.0;
    return u;
  };
  const double observed = u_of(x, y);
  std::vector<bool> chosen(pooled.size(), false);
  std::fill(chosen.begin(), chosen.begin() + static_cast<std::ptrdiff_t>(x.size()), true);
  double total = 0, at_most = 0, at_least = 0;
  std::sort(chosen.begin(), chosen.end(), std::greater<>());
  do {
    std::vector<double> a, b;
    for (std::size_t i = 0; i < pooled.size(); ++i) (chosen[i] ? a : b).push_back(pooled[i]);
    const double u = u_of(a, b);
    ++total;
    at_most += u <= observed;
    at_least += u >= observed;
  } while (std::prev_permutation(chosen.begin(), chosen.end()));
  return std::min(1.0, 2 * std::min(at_most, at_least) / total);
}

}  // namespace

TEST_CASE("mann-whitney exact test matches R's wilcox.test example", "[ab][stats]") {
  // R documentation of wilcox.test: W = 35, one-sided p = 0.1272 (exact, no ties).
  const std::vector<double> x = {0.80, 0.83, 1.89, 1.04, 1.45, 1.38, 1.91, 1.64, 0.73, 1.46};
  const std::vector<double> y = {1.15, 0.88, 0.90, 0.74, 1.21};
  const MannWhitneyResult result = mann_whitney_u(x, y);
  CHECK(result.exact);
  CHECK(result.u == 35);
  CHECK(result.p_value == Approx(2 * 0.1272).epsilon(0.001));
  CHECK(result.p_value == Approx(brute_force_two_sided_p(x, y)).epsilon(1e-12));
  // Swapping the samples gives the complementary U and the same two-sided p.
  const MannWhitneyResult swapped = mann_whitney_u(y, x);
  CHECK(swapped.u == 50 - 35);
  CHECK(swapped.p_value == Approx(result.p_value).epsilon(1e-12));
}

TEST_CASE("mann-whitney exact test agrees with brute force on small samples", "[ab][stats]") {
  const std::vector<std::vector<double>> samples = {{1, 2}, {3, 4}, {1.5, 9, 2.5}, {0.1, 0.2, 0.3, 0.4}, {5, 6, 7, 8}};
  for (const auto& x : samples)
    for (const auto& y : samples) {
      if (&x == &y) continue;
      INFO("sizes " << x.size() << " and " << y.size());
      CHECK(mann_whitney_u(x, y).p_value == Approx(brute_force_two_sided_p(x, y)).epsilon(1e-12));
    }
  // Four against four completely separated: the smallest two-sided p, 2 / C(8, 4).
  CHECK(mann_whitney_u({1, 2, 3, 4}, {5, 6, 7, 8}).p_value == Approx(2.0 / 70));
  CHECK(mann_whitney_u({1, 2}, {3, 4}).p_value == Approx(2.0 / 6));
}

TEST_CASE("mann-whitney normal approximation matches SciPy's documented value", "[ab][stats]") {
  // SciPy mannwhitneyu example: males vs females, method="asymptotic": U1 = 17, p = 0.11134688653314041.
  const MannWhitneyResult result = mann_whitney_u({19, 22, 16, 29, 24}, {20, 11, 17, 12}, MannWhitneyMethod::normal);
  CHECK_FALSE(result.exact);
  CHECK(result.u == 17);
  CHECK(result.p_value == Approx(0.11134688653314041).epsilon(1e-9));
  // Without forcing, these untied small samples take the exact test: p = 0.1111 (SciPy, method="exact").
  CHECK(mann_whitney_u({19, 22, 16, 29, 24}, {20, 11, 17, 12}).p_value == Approx(0.1111111111111111).epsilon(1e-9));
}

TEST_CASE("mann-whitney corrects the variance for ties", "[ab][stats]") {
  // By hand: pooled ranks 1 | 2,2,2 -> 3 | 3,3,3 -> 6 | 4 -> 8 | 9 10 11, so R1 = 1+3+3+6+8 = 21 and
  // U1 = 21 - 15 = 6. Tie term 2 * (3^3 - 3) = 48; variance = 5*6/12 * (12 - 48/110) = 28.909...;
  // z = (|6 - 15| - 0.5) / sqrt(variance) = 1.58089; two-sided p = erfc(z / sqrt 2) = 0.1139031.
  const MannWhitneyResult result = mann_whitney_u({1, 2, 2, 3, 4}, {2, 3, 3, 5, 6, 7});
  CHECK_FALSE(result.exact);  // ties rule the exact test out
  CHECK(result.u == 6);
  CHECK(result.z == Approx(1.5808902038022714).epsilon(1e-9));
  CHECK(result.p_value == Approx(0.11390314458853065).epsilon(1e-9));
  // All values tied: no evidence either way.
  CHECK(mann_whitney_u({5, 5, 5}, {5, 5}).p_value == 1.0);
  CHECK(mann_whitney_u({}, {1, 2}).p_value == 1.0);
}

TEST_CASE("shift interval inverts the Mann-Whitney test: hand-derived k, exact and normal", "[ab][stats]") {
  // Five against five, no ties: U's counts for u = 0..5 are 1, 1, 2, 3, 5, 7 of C(10, 5) = 252.
  // 95%: P(U <= 2) = 4/252 <= 0.025 < P(U <= 3) = 7/252, so k = 3; 90%: P(U <= 4) = 12/252 <= 0.05, k = 5.
  // The 25 differences x - y are 6 (once), 7 (twice), 8 (3), 9 (4), 10 (5), 11 (4), 12 (3), 13 (2), 14 (once).
  const std::vector<double> x = {11, 12, 13, 14, 15}, y = {1, 2, 3, 4, 5};
  const ShiftInterval ninety_five = shift_interval(x, y, 0.95);
  CHECK(ninety_five.low == 7);
  CHECK(ninety_five.high == 13);
  const ShiftInterval ninety = shift_interval(x, y, 0.90);
  CHECK(ninety.low == 8);
  CHECK(ninety.high == 12);
  // Swapping the samples negates the interval.
  const ShiftInterval swapped = shift_interval(y, x, 0.95);
  CHECK(swapped.low == -13);
  CHECK(swapped.high == -7);
  // Four against four: P(U = 0) = 1/70 <= 0.025, so k = 1: the smallest and largest difference.
  const ShiftInterval four = shift_interval({10, 11, 12, 13}, {1, 2, 3, 4}, 0.95);
  CHECK(four.low == 6);
  CHECK(four.high == 12);
  // Three against three: P(U = 0) = 1/20 > 0.025, so no 95% interval; at 90% it is just reached (k = 1).
  CHECK(std::isnan(shift_interval({4, 5, 6}, {1, 2, 3}, 0.95).low));
  CHECK(std::isnan(shift_interval({4, 5, 6}, {1, 2, 3}, 0.95).high));
  const ShiftInterval three = shift_interval({4, 5, 6}, {1, 2, 3}, 0.90);
  CHECK(three.low == 1);
  CHECK(three.high == 5);
  CHECK(std::isnan(shift_interval({}, {1, 2}, 0.95).low));
  // Ties: the normal approximation, k = round(30 / 2 - 1.959964 sqrt(30 * 12 / 12)) = round(4.265) = 4.
  const std::vector<double> tied_x = {1, 2, 2, 3, 4}, tied_y = {2, 3, 3, 5, 6, 7};
  std::vector<double> differences;
  for (double a : tied_x)
    for (double b : tied_y) differences.push_back(a - b);
  std::sort(differences.begin(), differences.end());
  const ShiftInterval tied = shift_interval(tied_x, tied_y, 0.95);
  CHECK(tied.low == differences[3]);
  CHECK(tied.high == differences[26]);
}

TEST_CASE("benjamini-hochberg matches R's p.adjust", "[ab][stats]") {
  // p.adjust(c(0.01, 0.04, 0.03, 0.005), "BH") = 0.02 0.04 0.04 0.02
  const std::vector<double> q = benjamini_hochberg({0.01, 0.04, 0.03, 0.005});
  REQUIRE(q.size() == 4);
  CHECK(q[0] == Approx(0.02));
  CHECK(q[1] == Approx(0.04));
  CHECK(q[2] == Approx(0.04));
  CHECK(q[3] == Approx(0.02));
  // Monotone step-up: a larger p never gets a smaller q, and q never exceeds 1.
  const std::vector<double> p = {0.9, 0.001, 0.2, 0.04, 0.5, 0.03};
  const std::vector<double> adjusted = benjamini_hochberg(p);
  for (std::size_t i = 0; i < p.size(); ++i) {
    CHECK(adjusted[i] >= p[i]);
    CHECK(adjusted[i] <= 1.0);
    for (std::size_t j = 0; j < p.size(); ++j)
      if (p[i] < p[j]) CHECK(adjusted[i] <= adjusted[j]);
  }
  CHECK(adjusted[1] == Approx(0.006));  // 0.001 * 6 / 1
  CHECK(benjamini_hochberg({}).empty());
}

TEST_CASE("geomean interval uses student's t on the log ratios", "[ab][stats]") {
  // Ratios 1.1, 0.9, 1.2: mean log m, sd s, t(0.975, 2) = 4.302653; interval exp(m +/- t s / sqrt 3).
  const GeomeanInterval interval = geomean_interval({1.1, 0.9, 1.2}, 0.95);
  CHECK(interval.count == 3);
  CHECK(interval.geomean == Approx(std::cbrt(1.1 * 0.9 * 1.2)));
  CHECK(interval.low == Approx(0.7341255351986038).epsilon(1e-7));
  CHECK(interval.high == Approx(1.5279435047618932).epsilon(1e-7));
  // The interval is symmetric around the geomean in log space.
  CHECK(std::log(interval.high) - std::log(interval.geomean) ==
        Approx(std::log(interval.geomean) - std::log(interval.low)));
  // One ratio: a geomean but no interval; identical ratios: a zero-width interval.
  const GeomeanInterval one = geomean_interval({1.25}, 0.95);
  CHECK(one.geomean == Approx(1.25));
  CHECK(std::isnan(one.low));
  const GeomeanInterval flat = geomean_interval({0.8, 0.8, 0.8, 0.8}, 0.9);
  CHECK(flat.low == Approx(0.8));
  CHECK(flat.high == Approx(0.8));
}

TEST_CASE("verdicts respect direction, significance and the noise floor", "[ab][stats]") {
  CHECK(classify_deterministic(100, 90, Direction::smaller_is_better) == Verdict::better);
  CHECK(classify_deterministic(100, 90, Direction::larger_is_better) == Verdict::worse);
  CHECK(classify_deterministic(100, 100, Direction::smaller_is_better) == Verdict::same);
  CHECK(classify_deterministic(NAN, 100, Direction::smaller_is_better) == Verdict::missing);
  CHECK(classify_noisy(0.8, 0.01, 0.05, 0.0, Direction::smaller_is_better) == Verdict::better);
  CHECK(classify_noisy(0.8, 0.01, 0.05, 0.0, Direction::larger_is_better) == Verdict::worse);
  CHECK(classify_noisy(0.8, 0.2, 0.05, 0.0, Direction::smaller_is_better) == Verdict::noise);    // not significant
  CHECK(classify_noisy(0.5, 0.001, 0.05, NAN, Direction::smaller_is_better) == Verdict::noise);  // no floor measured
  CHECK(classify_noisy(0.95, 0.01, 0.05, std::log(1.1), Direction::smaller_is_better) ==
        Verdict::noise);  // in the floor
  CHECK(classify_noisy(0.8, 0.01, 0.05, std::log(1.1), Direction::smaller_is_better) == Verdict::better);
  // Every metric is tagged, and compile time and memory are the noisy ones.
  for (const MetricDefinition& metric : ab_metrics())
    CHECK((metric.determinism == Determinism::noisy) == (metric.name.rfind("compile_", 0) == 0));
  // An estimate and wall time are shown, never judged; CPU time and the simulator's cycles are.
  for (const auto& [name, judged] : std::vector<std::pair<std::string, bool>>{{"estimated_cycles", false},
                                                                              {"compile_wall_ms", false},
                                                                              {"compile_cpu_ms", true},
                                                                              {"device_cycles", true}}) {
    REQUIRE(find_metric(name));
    CHECK(find_metric(name)->judged == judged);
  }
}

TEST_CASE("median/MAD outliers: a far sample is flagged, a tight or tiny sample is not", "[ab][stats]") {
  CHECK(mad_outliers({100, 102, 98, 101, 400}) == std::vector<bool>{false, false, false, false, true});
  CHECK(mad_outliers({100, 104, 96, 102, 110}) == std::vector<bool>(5, false));  // 110 is 2.7 MADs out
  CHECK(mad_outliers({5, 5, 5, 5, 9}) == std::vector<bool>(5, false));           // MAD 0: nothing to judge by
  CHECK(mad_outliers({1, 1000}) == std::vector<bool>(2, false));                 // two values: no majority
}

namespace {

// A manifest of one model and arms A (the baseline), B and A.twin, and records every analysis accepts.
struct SyntheticSweep {
  Manifest manifest;
  std::vector<Record> records;
  SyntheticSweep(std::uint32_t repeat) {
    manifest.build = {"1", "build"};
    manifest.suite_name = "synthetic";
    manifest.entries = {{"m@t", "/m.yaml", "/t.yaml", "mh", "th"}};
    for (const char* name : {"A", "B", "A.twin"}) {
      ArmInfo arm;
      arm.name = name;
      arm.fingerprint = std::string("fp-") + name;
      if (arm.name == "A.twin") arm.twin_of = "A";
      manifest.arms.push_back(arm);
    }
    manifest.repeat = repeat;
  }
  // One compile of `arm`: cpu and wall time in ms, estimated and device cycles.
  void add(const std::string& arm, std::uint32_t repeat, double cpu_ms, double wall_ms, std::uint64_t estimate,
           std::uint64_t cycles) {
    Record r;
    r.model = "m@t";
    r.arm = arm;
    r.repeat = repeat;
    r.arm_fingerprint = manifest.find_arm(arm)->fingerprint;
    r.model_hash = "mh";
    r.target_hash = "th";
    r.build = manifest.build;
    r.host = "host";
    r.compile.process.exit_code = 0;
    r.compile.process.user_ms = cpu_ms * 0.9;
    r.compile.process.system_ms = cpu_ms * 0.1;
    r.compile.process.wall_ms = wall_ms;
    r.compile.process.peak_rss_kib = 1000;
    r.compile.package_hash = arm == "B" ? "pkg-b" : "pkg-a";
    r.compile.estimated_cycles = estimate;
    if (repeat == 0) {
      r.run.performed = true;
      r.run.device_cycles = cycles;
    }
    records.push_back(r);
  }
};

const Comparison& comparison(const Analysis& analysis, const std::string& metric) {
  for (const Comparison& c : analysis.comparisons)
    if (c.arm == "B" && c.metric == metric) return c;
  FAIL("no comparison of B for " << metric);
  static Comparison none;
  return none;
}

}  // namespace

TEST_CASE("ab verdicts: CPU time held to the A-vs-A floor, wall time and estimates information, cycles exact",
          "[ab][stats]") {
  SyntheticSweep sweep(6);
  for (std::uint32_t r = 0; r < 6; ++r) {
    // The twin differs from A by up to 20% in CPU time; B is 10% faster than A: significant, but inside the floor.
    sweep.add("A", r, 1000 + r, 3000 + 500 * r, 5000, 700);
    sweep.add("A.twin", r, (1000 + r) * (r % 2 ? 1.2 : 0.9), 3000, 5000, 700);
    sweep.add("B", r, 900 + r, 2000, 4000, 700);
  }
  Analysis analysis = analyse(sweep.manifest, sweep.records, 0.05);
  const Comparison& cpu = comparison(analysis, "compile_cpu_ms");
  CHECK(cpu.q_value <= 0.05);
  CHECK(cpu.verdict == Verdict::noise);
  CHECK(verdict_text(cpu, 0.05) == "within noise (floor 20.0%)");
  CHECK(comparison(analysis, "compile_wall_ms").verdict == Verdict::information);
  CHECK(comparison(analysis, "estimated_cycles").verdict == Verdict::information);  // -20% estimated, not measured
  CHECK(comparison(analysis, "device_cycles").verdict == Verdict::same);

  SECTION("a change beyond the floor gets its verdict") {
    for (Record& r : sweep.records)
      if (r.arm == "B") r.compile.process.user_ms *= 0.5;
    analysis = analyse(sweep.manifest, sweep.records, 0.05);
    CHECK(comparison(analysis, "compile_cpu_ms").verdict == Verdict::better);
  }
  SECTION("without the twin there is no floor and no timing verdict") {
    std::erase_if(sweep.records, [](const Record& r) { return r.arm == "A.twin"; });
    analysis = analyse(sweep.manifest, sweep.records, 0.05);
    CHECK(comparison(analysis, "compile_cpu_ms").verdict == Verdict::noise);
    CHECK(verdict_text(comparison(analysis, "compile_cpu_ms"), 0.05) == "no verdict: no A-vs-A noise floor measured");
  }
  SECTION("an outlying repeat is left out of the samples and of the floor") {
    for (Record& r : sweep.records)
      if (r.arm == "A" && r.repeat == 3) r.compile.process.user_ms = 20000;
    analysis = analyse(sweep.manifest, sweep.records, 0.05);
    const Comparison& with_outlier = comparison(analysis, "compile_cpu_ms");
    CHECK(with_outlier.outliers == 1);
    CHECK(with_outlier.baseline_samples.size() == 5);
    for (const NoiseFloor& floor : analysis.noise_floors)
      if (floor.metric == "compile_cpu_ms") {
        CHECK(floor.outliers == 1);
        CHECK(floor.pairs == 5);
      }
  }
}
