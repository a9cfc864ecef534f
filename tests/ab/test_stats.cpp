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
  const MannWhitneyResult result =
      mann_whitney_u({19, 22, 16, 29, 24}, {20, 11, 17, 12}, MannWhitneyMethod::normal);
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
  CHECK(classify_noisy(0.8, 0.01, 0.05, NAN, Direction::smaller_is_better) == Verdict::better);
  CHECK(classify_noisy(0.8, 0.01, 0.05, NAN, Direction::larger_is_better) == Verdict::worse);
  CHECK(classify_noisy(0.8, 0.2, 0.05, NAN, Direction::smaller_is_better) == Verdict::noise);       // not significant
  CHECK(classify_noisy(0.95, 0.01, 0.05, std::log(1.1), Direction::smaller_is_better) == Verdict::noise);  // in the floor
  CHECK(classify_noisy(0.8, 0.01, 0.05, std::log(1.1), Direction::smaller_is_better) == Verdict::better);
  // Every metric is tagged, and compile time and memory are the noisy ones.
  for (const MetricDefinition& metric : ab_metrics())
    CHECK((metric.determinism == Determinism::noisy) == (metric.name.rfind("compile_", 0) == 0));
}
