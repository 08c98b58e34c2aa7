// attnrank/reach/detail/masked_fit.hpp: the masked witness's alternating least squares.
//  * AllowedSums: over every allowed set, the sums its two paths (prefix sums along a
//    nested mask's staircase, products with the 0/1 mask otherwise) compute are the
//    sums, entry by entry, up to rounding;
//  * the fit: a target a head of width r makes through a nested mask is fitted at
//    width r to within rounding (the certified error of the witness it gives).
#include "mask_support.hpp"

#include <attnrank/attention/softmax.hpp>
#include <attnrank/reach/detail/masked_fit.hpp>
#include <attnrank/reach/masked.hpp>

#include <cmath>
#include <limits>
#include <random>

using namespace attnrank;
using namespace attnrank::test;

namespace {

using Eigen::Index;
using Eigen::MatrixXd;

/// Columns of mixed magnitude and sign, with exact zeros.
MatrixXd gen_rows(Index n, Index m, std::mt19937_64& rng) {
  std::normal_distribution<double> gauss;
  std::uniform_int_distribution<int> exponent(-40, 40), kind(0, 5);
  MatrixXd F(n, m);
  for (auto& x : F.reshaped()) x = kind(rng) == 0 ? 0.0 : std::ldexp(gauss(rng), exponent(rng));
  return F;
}

}  // namespace

TEST_CASE("attnrank::detail::AllowedSums", "[property]") {
  rc::prop("over_keys and over_queries are the sums over each row's keys and each key's rows, for every mask kind", [] {
    const auto n = *rc::gen::inRange<Index>(1, 24);
    const auto m = *rc::gen::inRange<Index>(1, 6);
    const Mask mask = gen_any_mask(n);
    std::mt19937_64 rng(static_cast<std::uint64_t>(*rc::gen::arbitrary<unsigned>()));
    const MatrixXd F = gen_rows(n, m, rng);
    const detail::AllowedSums sums(mask);
    RC_ASSERT(sums.nested() == staircase_of(mask).has_value());
    const MatrixXd keys = sums.over_keys(F), queries = sums.over_queries(F);
    RC_ASSERT(keys.rows() == n);
    RC_ASSERT(queries.rows() == n);
    // Sums of n terms in any order differ by at most about n u sum |terms|.
    const double u = std::numeric_limits<double>::epsilon();
    for (Index c = 0; c < m; ++c)
      for (Index i = 0; i < n; ++i) {
        double row = 0, row_abs = 0, col = 0, col_abs = 0;
        for (Index j = 0; j < n; ++j) {
          if (mask.allows(i, j)) {
            row += F(j, c);
            row_abs += std::abs(F(j, c));
          }
          if (mask.allows(j, i)) {
            col += F(j, c);
            col_abs += std::abs(F(j, c));
          }
        }
        RC_ASSERT(std::abs(keys(i, c) - row) <= 2 * static_cast<double>(n) * u * row_abs);
        RC_ASSERT(std::abs(queries(i, c) - col) <= 2 * static_cast<double>(n) * u * col_abs);
      }
  });
  SECTION("the causal mask takes the staircase; a sliding window is not nested and takes the product") {
    CHECK(detail::AllowedSums(Mask::causal(9)).nested());
    CHECK_FALSE(detail::AllowedSums(Mask::window(9, 9, 2, 0)).nested());
    CHECK(detail::AllowedSums(Mask::causal(9)).flops(4) < detail::AllowedSums(Mask::window(9, 9, 2, 0)).flops(4));
  }
}

TEST_CASE("attnrank::detail::fit_masked_scores", "[property]") {
  rc::prop("a target a width-r head makes through a causal or prefix-LM mask is fitted at width r within 1e-7", [] {
    const auto n = *rc::gen::inRange<Index>(2, 14);
    const auto r = *rc::gen::inRange<Index>(1, n + 1);
    const Index p = *rc::gen::inRange<Index>(1, n + 1);
    const bool causal = *rc::gen::arbitrary<bool>();
    Matrix<Rational> pattern(n, n);
    for (Index i = 0; i < n; ++i)
      for (Index j = 0; j < n; ++j) pattern(i, j) = (causal ? j <= i : j <= std::max(i, p - 1)) ? 1 : 0;
    const Mask mask = Mask::from_matrix(pattern, "generated");
    std::mt19937_64 rng(static_cast<std::uint64_t>(*rc::gen::arbitrary<unsigned>()));
    std::normal_distribution<double> gauss(0, 0.7);
    MatrixXd Q(n, r), K(n, r);
    for (auto& x : Q.reshaped()) x = gauss(rng);
    for (auto& x : K.reshaped()) x = gauss(rng);
    const MatrixXd P = softmax_rows(MatrixXd(Q * K.transpose() / std::sqrt(static_cast<double>(r))), mask);
    Matrix<Rational> A(n, n);
    for (Index i = 0; i < n; ++i)
      for (Index j = 0; j < n; ++j) A(i, j) = mask.allows(i, j) ? Rational(P(i, j)) : Rational(0);
    const MaskedWitnessStarts starts = masked_witness_starts(A, mask, r);
    const Witness w = approx_masked_witness(starts, r);
    const double error = certified_masked_witness_error(A, mask, w.Q, w.K);
    RC_LOG() << (causal ? "causal" : "prefix-LM") << " n " << n << " r " << r << " error " << error << "\n";
    RC_ASSERT(error <= 1e-7);
  });
}
