// Statistics for `tessera ab`; Boost.Math supplies the normal and Student's t distributions.
#include "stats.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <numeric>

#include <boost/math/distributions/normal.hpp>
#include <boost/math/distributions/students_t.hpp>

namespace tessera::ab {

namespace {

constexpr std::size_t kExactLimit = 40;  // total sample size up to which the exact test is used

// Average ranks (1-based) of the pooled samples; also the sum over tie groups of t^3 - t.
std::vector<double> pooled_ranks(const std::vector<double>& pooled, double& tie_term) {
  std::vector<std::size_t> order(pooled.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return pooled[a] < pooled[b]; });
  std::vector<double> ranks(pooled.size());
  tie_term = 0;
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i;
    while (j + 1 < order.size() && pooled[order[j + 1]] == pooled[order[i]]) ++j;
    const double average = (static_cast<double>(i) + static_cast<double>(j)) / 2.0 + 1.0;
    for (std::size_t k = i; k <= j; ++k) ranks[order[k]] = average;
    const double t = static_cast<double>(j - i + 1);
    tie_term += t * t * t - t;
    i = j + 1;
  }
  return ranks;
}

// Number of orderings of n1 + n2 distinct values giving each U of the first sample
// (index u), by the recurrence f(n1, n2, u) = f(n1 - 1, n2, u - n2) + f(n1, n2 - 1, u).
std::vector<double> exact_u_counts(std::size_t n1, std::size_t n2) {
  // table[b][u] holds f(a, b, u) for the current a.
  std::vector<std::vector<double>> table(n2 + 1, std::vector<double>(n1 * n2 + 1, 0.0));
  for (std::size_t b = 0; b <= n2; ++b) table[b][0] = 1;  // a = 0: one ordering, U = 0
  for (std::size_t a = 1; a <= n1; ++a) {
    std::vector<std::vector<double>> next(n2 + 1, std::vector<double>(n1 * n2 + 1, 0.0));
    next[0][0] = 1;  // b = 0: U = 0
    for (std::size_t b = 1; b <= n2; ++b)
      for (std::size_t u = 0; u <= a * b; ++u) next[b][u] = (u >= b ? table[b][u - b] : 0.0) + next[b - 1][u];
    table = std::move(next);
  }
  return table[n2];
}

}  // namespace

MannWhitneyResult mann_whitney_u(const std::vector<double>& first, const std::vector<double>& second,
                                 MannWhitneyMethod method) {
  MannWhitneyResult result;
  const std::size_t n1 = first.size(), n2 = second.size();
  if (n1 == 0 || n2 == 0) return result;
  std::vector<double> pooled(first);
  pooled.insert(pooled.end(), second.begin(), second.end());
  double tie_term = 0;
  const std::vector<double> ranks = pooled_ranks(pooled, tie_term);
  const double rank_sum = std::accumulate(ranks.begin(), ranks.begin() + static_cast<std::ptrdiff_t>(n1), 0.0);
  const double a = static_cast<double>(n1), b = static_cast<double>(n2), n = a + b;
  result.u = rank_sum - a * (a + 1) / 2;

  if (method == MannWhitneyMethod::automatic && tie_term == 0 && n1 + n2 <= kExactLimit) {
    const std::vector<double> counts = exact_u_counts(n1, n2);
    const double total = std::accumulate(counts.begin(), counts.end(), 0.0);
    const auto u = static_cast<std::size_t>(std::llround(result.u));
    const double at_most = std::accumulate(counts.begin(), counts.begin() + static_cast<std::ptrdiff_t>(u) + 1, 0.0);
    const double at_least = std::accumulate(counts.begin() + static_cast<std::ptrdiff_t>(u), counts.end(), 0.0);
    result.exact = true;
    result.p_value = std::min(1.0, 2.0 * std::min(at_most, at_least) / total);
    return result;
  }

  const double mean = a * b / 2;
  const double variance = a * b / 12 * ((n + 1) - tie_term / (n * (n - 1)));
  if (variance <= 0) return result;  // every value tied: no evidence of a difference
  const double distance = std::max(0.0, std::abs(result.u - mean) - 0.5);
  result.z = distance / std::sqrt(variance);
  const boost::math::normal standard_normal;
  result.p_value = std::min(1.0, 2.0 * boost::math::cdf(boost::math::complement(standard_normal, result.z)));
  return result;
}

ShiftInterval shift_interval(const std::vector<double>& first, const std::vector<double>& second, double confidence) {
  assert(confidence > 0 && confidence < 1);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  ShiftInterval result{nan, nan};
  const std::size_t n1 = first.size(), n2 = second.size();
  if (n1 == 0 || n2 == 0) return result;
  std::vector<double> differences;
  for (double x : first)
    for (double y : second) differences.push_back(x - y);
  std::sort(differences.begin(), differences.end());
  std::vector<double> pooled(first);
  pooled.insert(pooled.end(), second.begin(), second.end());
  double tie_term = 0;
  pooled_ranks(pooled, tie_term);
  const double tail = (1 - confidence) / 2;
  std::size_t k = 0;                              // the interval is [d_(k), d_(n1 n2 + 1 - k)], 1-based
  if (tie_term == 0 && n1 + n2 <= kExactLimit) {  // the same choice as mann_whitney_u's automatic method
    const std::vector<double> counts = exact_u_counts(n1, n2);
    const double total = std::accumulate(counts.begin(), counts.end(), 0.0);
    double cumulative = 0;
    for (double count : counts) {  // k = how many u have P(U <= u) <= tail
      cumulative += count;
      if (cumulative / total > tail * (1 + 1e-12)) break;  // a level reached exactly counts despite rounding (1 - 0.9)
      ++k;
    }
  } else {
    const double n = static_cast<double>(n1) * static_cast<double>(n2);
    const double sd = std::sqrt(n * static_cast<double>(n1 + n2 + 1) / 12);
    const double z = boost::math::quantile(boost::math::complement(boost::math::normal(), tail));
    k = static_cast<std::size_t>(std::max(0.0, std::round(n / 2 - z * sd)));
  }
  if (k == 0) return result;
  result.low = differences[k - 1];
  result.high = differences[differences.size() - k];
  return result;
}

std::vector<double> benjamini_hochberg(const std::vector<double>& p_values) {
  const std::size_t m = p_values.size();
  std::vector<std::size_t> order(m);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return p_values[x] < p_values[y]; });
  std::vector<double> q(m);
  double running_min = 1.0;
  for (std::size_t i = m; i-- > 0;) {  // from the largest p down: q_(i) = min_{j >= i} m p_(j) / j
    const double scaled = p_values[order[i]] * static_cast<double>(m) / static_cast<double>(i + 1);
    running_min = std::min(running_min, scaled);
    q[order[i]] = running_min;
  }
  return q;
}

GeomeanInterval geomean_interval(const std::vector<double>& ratios, double confidence) {
  assert(confidence > 0 && confidence < 1);
  GeomeanInterval result;
  result.count = ratios.size();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  result.low = result.high = nan;
  if (ratios.empty()) {
    result.geomean = nan;
    return result;
  }
  std::vector<double> logs;
  for (double ratio : ratios) {
    assert(ratio > 0 && std::isfinite(ratio));
    logs.push_back(std::log(ratio));
  }
  const double n = static_cast<double>(logs.size());
  const double mean = std::accumulate(logs.begin(), logs.end(), 0.0) / n;
  result.geomean = std::exp(mean);
  if (logs.size() < 2) return result;
  double squares = 0;
  for (double value : logs) squares += (value - mean) * (value - mean);
  result.log_sd = std::sqrt(squares / (n - 1));
  const boost::math::students_t student(n - 1);
  const double t = boost::math::quantile(boost::math::complement(student, (1 - confidence) / 2));
  const double half_width = t * result.log_sd / std::sqrt(n);
  result.low = std::exp(mean - half_width);
  result.high = std::exp(mean + half_width);
  return result;
}

double median(std::vector<double> values) {
  if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(values.begin(), values.end());
  const std::size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

std::vector<bool> mad_outliers(const std::vector<double>& values, double threshold) {
  std::vector<bool> outlier(values.size(), false);
  if (values.size() < 3) return outlier;
  const double center = median(values);
  std::vector<double> deviations;
  for (double value : values) deviations.push_back(std::abs(value - center));
  const double mad = median(deviations);
  if (!(mad > 0)) return outlier;
  constexpr double kNormalConsistency = 1.4826;  // 1 / Phi^-1(3/4): MAD * this estimates sigma for normal data
  for (std::size_t i = 0; i < values.size(); ++i) outlier[i] = deviations[i] / (kNormalConsistency * mad) > threshold;
  return outlier;
}

}  // namespace tessera::ab
