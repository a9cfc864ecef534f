// Statistics for `tessera ab`: Mann-Whitney U, Benjamini-Hochberg, geometric mean with a t interval, outliers.
#pragma once
#include <cstddef>
#include <vector>

namespace tessera::ab {

/// The outcome of a two-sided Mann-Whitney U test of `first` against `second`.
struct MannWhitneyResult {
  double u = 0;        ///< U of the first sample: pairs (x, y) with x > y, ties counting 1/2
  double p_value = 1;  ///< two-sided
  bool exact = false;  ///< exact permutation distribution (no ties, small samples)
  double z = 0;        ///< the normal approximation's statistic (0 when exact)
};

enum class MannWhitneyMethod {
  automatic,  ///< exact when there are no ties and n1 + n2 <= 40, else the normal approximation
  normal,     ///< always the normal approximation
};

/// Two-sided Mann-Whitney U test. The normal approximation uses the tie-corrected variance
/// and a continuity correction (as R's wilcox.test and SciPy's mannwhitneyu do); the exact
/// test counts the permutation distribution of U. Empty samples give p = 1.
MannWhitneyResult mann_whitney_u(const std::vector<double>& first, const std::vector<double>& second,
                                 MannWhitneyMethod method = MannWhitneyMethod::automatic);

/// A distribution-free confidence interval for the shift d of `first` over `second` (first ~
/// second + d): the Mann-Whitney test inverted (Moses). Of the n1 * n2 pairwise differences
/// sorted, the k-th smallest and the k-th largest, k the largest with 2 P(U <= k - 1) <= 1 -
/// confidence, from U's exact distribution when mann_whitney_u would be exact (as R's
/// wilcox.test(conf.int = TRUE) does), else k = round(n1 n2 / 2 - z
/// sqrt(n1 n2 (n1 + n2 + 1) / 12)), the normal approximation without tie correction.
struct ShiftInterval {
  double low = 0, high = 0;  ///< NaN when no k >= 1 reaches `confidence` (too few samples) or a sample is empty
};
ShiftInterval shift_interval(const std::vector<double>& first, const std::vector<double>& second, double confidence);

/// Benjamini-Hochberg adjusted p-values (q-values), in the order of `p_values`: the false
/// discovery rate is at most alpha among the tests with q <= alpha.
std::vector<double> benjamini_hochberg(const std::vector<double>& p_values);

/// A geometric mean of ratios with a confidence interval from Student's t on the log ratios.
struct GeomeanInterval {
  double geomean = 0;
  double low = 0, high = 0;  ///< NaN when fewer than two ratios (no spread to measure)
  std::size_t count = 0;
  double log_sd = 0;  ///< sample standard deviation of the log ratios
};

/// `ratios` must be positive and finite. `confidence` is the two-sided level, e.g. 0.95.
GeomeanInterval geomean_interval(const std::vector<double>& ratios, double confidence);

double median(std::vector<double> values);

/// Which of `values` are outliers by the modified z-score of Iglewicz and Hoaglin:
/// |x - median| / (1.4826 * MAD) > `threshold` (MAD, the median absolute deviation, scaled to
/// estimate a normal sigma). None with fewer than 3 values or a MAD of 0 (no spread to judge by).
std::vector<bool> mad_outliers(const std::vector<double>& values, double threshold = 3.5);

}  // namespace tessera::ab
