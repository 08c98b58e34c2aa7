#pragma once
// Row-wise softmax, stable in every tier.
//
//   softmax(s)_j = exp(s_j) / sum_k exp(s_k)
//
// Each row is first shifted by a point m near its maximum (softmax(s - m) =
// softmax(s), so the shift is exact algebra, whatever m is), then evaluated as
//
//   a_j = 1 / (1 + R_j / e_j),   e_k = exp(s_k - m),   R_j = sum_{k != j} e_k,
//
// with R_j built from prefix and suffix sums (no subtraction). In this form e_j
// and R_j each occur once and a_j is monotone in both, so in interval arithmetic
// the enclosure is as tight as the enclosures of the e_k allow, and it is sound
// for any finite scores: MPFR's exponent range covers exp(+-1e8); beyond it e_k
// becomes [0, tiny] or [huge, +inf] and a_j still encloses the true value.
// In double no exp overflows (all shifted scores are <= 0 up to rounding of m).
// double and Real, which promise no enclosure, take the plain a_j = e_j / sum_k e_k
// instead: one division per entry rather than two, and a few roundings of error.
// double has its own arrangement by columns with a SIMD exp (attention/detail/softmax_double.hpp);
// Real and Interval take exp in fixed point (numbers/detail/fixed_point_exp.hpp): for Real
// the same correctly rounded values as mpfr_exp, for Interval proven enclosures.
//
// With a mask (attention/mask.hpp) the masked scores are minus infinity: their
// entries are exactly 0 in every tier, and the row is normalised over its
// allowed positions (the shift m is taken over those; masked scores are never read).

#include <attnrank/attention/mask.hpp>
#include <attnrank/numbers/detail/fixed_point_exp.hpp>
#include <attnrank/numbers/detail/parallel.hpp>
#include <attnrank/numbers/scalar_traits.hpp>

#include <cmath>
#include <type_traits>
#include <vector>

namespace attnrank {
namespace detail {

/// The softmax's exponential, one per thread: for Real the value mpfr_exp would
/// give (correctly rounded, through numbers/detail/fixed_point_exp.hpp; docs/performance.md); for
/// Interval a proven enclosure of exp over the interval, each end within a few
/// ulps (exp is increasing: a lower bound of exp(left), an upper bound of exp(right)).
class SoftmaxExp {
 public:
  template <class T>
  void operator()(T& out, const T& x) {
    using std::exp;
    out = exp(x);
  }
  void operator()(Real& out, const Real& x) {
    exp_to_nearest(out.backend().data(), x.backend().data(), spare_.backend().data(), workspace_);
  }
  void operator()(Interval& out, const Interval& x) {
    exp_bound(&out.backend().data()->left, &x.backend().data()->left, MPFR_RNDD, workspace_);
    exp_bound(&out.backend().data()->right, &x.backend().data()->right, MPFR_RNDU, workspace_);
  }

 private:
  FixedExpWorkspace workspace_;
  Real spare_;
};

}  // namespace detail

namespace detail {

/// The generic softmax of softmax_rows, over the positions `mask` allows (all
/// when mask is null).
template <class T>
Matrix<T> masked_softmax_rows(const Matrix<T>& S, const Mask* mask) {
  static_assert(!scalar_traits<T>::exact,
                "softmax is transcendental: evaluate it in double, Real or Interval");
  const Eigen::Index n = S.cols();
  if (mask) mask->require_shape(S.rows(), S.cols(), "the score matrix");
  Matrix<T> A(S.rows(), n);
  const auto allowed = [mask](Eigen::Index r, Eigen::Index k) { return !mask || mask->allows(r, k); };
  // Rows are independent: the multiple-precision tiers deal them to threads (an
  // MPFR exponential costs about as much as 50 multiply-adds); doubles stay here.
  const double operations = !scalar_traits<T>::multiprecision ? 0.0 : 50.0 * static_cast<double>(S.rows()) * static_cast<double>(n);
  detail::for_row_blocks(S.rows(), operations, [&](long begin, long end) {
    std::vector<T> e, prefix, suffix;
    std::vector<Eigen::Index> keys;
    detail::SoftmaxExp exp_of;
    for (Eigen::Index r = begin; r < end; ++r) {
      keys.clear();
      for (Eigen::Index k = 0; k < n; ++k)
        if (allowed(r, k)) keys.push_back(k);
        else A(r, k) = 0;
      if (keys.empty()) continue;  // only for n = 0: a Mask allows a key in every row
      Eigen::Index top = keys[0];
      for (Eigen::Index k : keys)
        if (scalar_traits<T>::approx_less(S(r, top), S(r, k))) top = k;
      const T m = scalar_traits<T>::center(S(r, top));
      e.resize(keys.size());
      for (std::size_t k = 0; k < keys.size(); ++k) {
        const T shifted = S(r, keys[k]) - m;
        exp_of(e[k], shifted);
      }
      if constexpr (!scalar_traits<T>::enclosure) {
        T sum = 0;
        for (const T& v : e) sum += v;
        for (std::size_t j = 0; j < e.size(); ++j) A(r, keys[j]) = e[j] / sum;
      } else {
        prefix.resize(e.size() + 1);
        suffix.resize(e.size() + 1);
        prefix[0] = 0;
        for (std::size_t k = 0; k < e.size(); ++k) prefix[k + 1] = prefix[k] + e[k];
        suffix[e.size()] = 0;
        for (std::size_t k = e.size(); k-- > 0;) suffix[k] = suffix[k + 1] + e[k];
        for (std::size_t j = 0; j < e.size(); ++j) {
          const T rest = prefix[j] + suffix[j + 1];
          const T ratio = rest / e[j];
          A(r, keys[j]) = 1 / (1 + ratio);
        }
      }
    }
  });
  return A;
}

}  // namespace detail

/// Softmax of each row of S. Precondition: S has finite entries. For
/// T = Interval the result contains softmax(S') for every real S' in S.
template <class T>
Matrix<T> softmax_rows(const Matrix<T>& S) {
  return detail::masked_softmax_rows(S, nullptr);
}

/// Softmax of each row of S over the positions the mask allows; masked entries
/// are exactly 0. Throws input_error when the mask's size is not S's row count.
/// Precondition: S is square (the mask's size) with finite allowed entries
/// (masked entries are not read).
template <class T>
Matrix<T> softmax_rows(const Matrix<T>& S, const Mask& mask) {
  return detail::masked_softmax_rows(S, &mask);
}

}  // namespace attnrank

#include <attnrank/attention/detail/softmax_double.hpp>
