// The tutorial's laws about softmax and the diagonal target, as properties over
// generated inputs (docs/testing.md lists them with the sentence each checks):
// softmax inversion both ways, low-width heads missing the diagonal target by a
// certified margin, double softmax on huge scores, softmax raising rank, and a
// deliberately false law that must fail and shrink to a minimal counterexample.
#include "rank_support.hpp"

#include <attnrank/linalg/certified_rank.hpp>
#include <attnrank/reach/certificate.hpp>

#include <random>

using namespace attnrank;
using namespace attnrank::test;

namespace {

/// Scores users meet and the hard ones: small rationals, 1e-12 .. 1e6 magnitudes, zero rows.
Matrix<Rational> gen_scores(Eigen::Index r, Eigen::Index c) {
  const int exponent = *rc::gen::inRange(-12, 7);
  const Rational scale = exponent >= 0 ? Rational(boost::multiprecision::pow(Integer(10), static_cast<unsigned>(exponent)))
                                       : Rational(1) / Rational(boost::multiprecision::pow(Integer(10), static_cast<unsigned>(-exponent)));
  Matrix<Rational> S = gen_matrix(r, c);
  if (*rc::gen::arbitrary<bool>()) S *= scale;
  return S;
}

Interval log_sum_exp(const Matrix<Interval>& S, Eigen::Index r) {
  Interval total = 0;
  for (Eigen::Index k = 0; k < S.cols(); ++k) total += exp(S(r, k));
  return log(total);
}

bool overlap(const Interval& x, const Interval& y) {
  return lower_bound(x) <= upper_bound(y) && lower_bound(y) <= upper_bound(x);
}

/// softmax(Q K^T / sqrt(dk)) - Â has an entry whose enclosure excludes 0.
bool certainly_misses(const Matrix<Rational>& A, const Matrix<Rational>& Q, const Matrix<Rational>& K) {
  const Matrix<Interval> Qi = from_rational<Interval>(Q), Ki = from_rational<Interval>(K);
  Matrix<Interval> S = Qi * Ki.transpose();
  const Interval root = sqrt(Interval(static_cast<long>(Q.cols())));
  S = S.unaryExpr([&](const Interval& x) { return Interval(x / root); });
  const Matrix<Interval> W = softmax_rows(S), target = normalized_target(A);
  for (Eigen::Index i = 0; i < W.rows(); ++i)
    for (Eigen::Index j = 0; j < W.cols(); ++j) {
      const Interval d = W(i, j) - target(i, j);
      if (lower_bound(d) > 0 || upper_bound(d) < 0) return true;
    }
  return false;
}

Matrix<Rational> exact(const Eigen::MatrixXd& M) {
  return M.unaryExpr([](double x) { return to_rational(x); });
}

}  // namespace

TEST_CASE("softmax inversion (Equation 2-7)", "[property]") {
  // proofs/SoftmaxInversion.v, softmax_inversion.
  rc::prop("S - log softmax(S) is the row constant c 1^T with c_r = logsumexp of row r", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(1, 7), m = *rc::gen::inRange<Eigen::Index>(1, 5);
    const Matrix<Rational> S = gen_scores(m, n);
    const PrecisionScope scope(128);
    const Matrix<Interval> Si = from_rational<Interval>(S);
    const Matrix<Interval> logA = softmax_rows(Si).unaryExpr([](const Interval& a) { return Interval(log(a)); });
    for (Eigen::Index r = 0; r < m; ++r) {
      const Interval c = log_sum_exp(Si, r);  // independent: no shift, MPFR's range is wide enough
      for (Eigen::Index j = 0; j < n; ++j) RC_ASSERT(overlap(Interval(Si(r, j) - logA(r, j)), c));
    }
  });
  // proofs/SoftmaxInversion.v, softmax_iff_log_shift and softmax_shift.
  rc::prop("softmax(log A + c 1^T) contains A (rows normalised) for positive A and any c", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(1, 7), m = *rc::gen::inRange<Eigen::Index>(1, 5);
    Matrix<Rational> A(m, n), c(m, 1);
    for (Eigen::Index i = 0; i < m; ++i) {
      c(i, 0) = *gen_rational();
      for (Eigen::Index j = 0; j < n; ++j) A(i, j) = Rational(*rc::gen::inRange(1, 1000), *rc::gen::inRange(1, 1000));
    }
    const PrecisionScope scope(96);
    Matrix<Interval> S = A.unaryExpr([](const Rational& q) { return Interval(log(scalar_traits<Interval>::from_rational(q))); });
    for (Eigen::Index i = 0; i < m; ++i) S.row(i).array() += scalar_traits<Interval>::from_rational(c(i, 0));
    const Matrix<Interval> W = softmax_rows(S);
    for (Eigen::Index i = 0; i < m; ++i) {
      const Rational row_sum = A.row(i).sum();
      for (Eigen::Index j = 0; j < n; ++j) RC_ASSERT(scalar_traits<Interval>::contains(W(i, j), Rational(A(i, j) / row_sum)));
    }
  });
  rc::prop("double softmax of scores up to 1e6 in magnitude is a finite distribution next to the certified one", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(1, 8);
    // Up to ~1e6: far beyond exp's double range (709) unless the row maximum is subtracted.
    Matrix<Rational> S = gen_matrix(1, n) * Rational(*rc::gen::element(1, 1000));
    const Eigen::MatrixXd Sd = S.unaryExpr([](const Rational& q) { return scalar_traits<double>::from_rational(q); });
    const Eigen::MatrixXd W = softmax_rows(Sd);
    const PrecisionScope scope(128);
    const Matrix<Interval> Wi = softmax_rows(from_rational<Interval>(exact(Sd)));
    for (Eigen::Index j = 0; j < n; ++j) {
      RC_ASSERT(std::isfinite(W(0, j)));
      // Same exact inputs; the double path's error is a few ulps of each weight
      // (the shift s - max is exact when it matters, by Sterbenz's lemma).
      RC_ASSERT(std::abs(W(0, j) - static_cast<double>(median(Wi(0, j)))) <= 1e-13);
    }
  });
}

TEST_CASE("no head of width d_k <= n - 2 produces the diagonal target (Appendix A)", "[property]") {
  // proofs/DiagonalTarget.v, rank_diagonal_floor; proofs/Reachability.v, unreachable_if_floor_gt.
  rc::prop("every generated width-d_k head misses it by a certified margin, and reach proves it", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(3, 13);
    const auto dk = *rc::gen::inRange<Eigen::Index>(1, n - 1);                    // 1 .. n - 2
    const Rational p = Rational(*rc::gen::inRange(1, 100), 100) * (1 - Rational(1, n)) + Rational(1, n);  // (1/n, 1)
    Matrix<Rational> A = Matrix<Rational>::Constant(n, n, (1 - p) / (n - 1));
    A.diagonal().setConstant(p);
    const ReachResult r = reach(A, dk);
    RC_ASSERT(r.verdict == Verdict::unreachable);
    RC_ASSERT(r.floor.lower == n - 1);
    RC_ASSERT(check_reach_certificate(A, make_reach_certificate(A, r)).valid);
    // Heads: random small-integer ones, zero query rows, and the adversarial
    // best width-d_k head (the truncated SVD of log(A) C), perturbed.
    Matrix<Rational> Q = gen_matrix(n, dk), K = gen_matrix(n, dk);
    if (*rc::gen::arbitrary<bool>()) Q.row(0).setZero();
    if (*rc::gen::arbitrary<bool>() && r.witness) {
      Q = exact(r.witness->Q) + gen_matrix(n, dk) / Rational(1000000);
      K = exact(r.witness->K);
    }
    const PrecisionScope scope(96);
    RC_ASSERT(certainly_misses(A, Q, K));
  });
}

TEST_CASE("larger sweeps: the diagonal target up to n = 40 (label slow)", "[.slow]") {
  // proofs/Reachability.v, reachable_iff_floor_le, at the sizes ctest -L slow can afford.
  rc::prop("the diagonal target's floor is n - 1: unreachable at d_k = n - 2, reachable at n - 1, certificates checked", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(13, 41);
    const Rational p = Rational(*rc::gen::inRange(1, 100), 100) * (1 - Rational(1, n)) + Rational(1, n);
    Matrix<Rational> A = Matrix<Rational>::Constant(n, n, (1 - p) / (n - 1));
    A.diagonal().setConstant(p);
    for (const Eigen::Index dk : {n - 2, n - 1}) {
      const ReachResult r = reach(A, dk);
      RC_ASSERT(r.floor.lower == n - 1);
      RC_ASSERT(r.floor.upper == n - 1);
      RC_ASSERT(r.verdict == (dk < n - 1 ? Verdict::unreachable : Verdict::reachable));
      RC_ASSERT(check_reach_certificate(A, make_reach_certificate(A, r)).valid);
    }
  });
}

TEST_CASE("softmax can raise rank (Appendix A, Common mistake)", "[property]") {
  // The seed prints: rank(A_1) = 3 from scores of rank 2. Search generated
  // low-rank score matrices for more, report them, and require that they exist.
  const unsigned seed = 20261130;
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> entry(-3, 3);
  int found = 0, tried = 0;
  for (; tried < 200 && found < 5; ++tried) {
    const Eigen::Index n = 3 + tried % 4, dk = 1 + tried % 2;
    Matrix<Rational> Q(n, dk), K(n, dk);
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = 0; j < dk; ++j) Q(i, j) = entry(rng), K(i, j) = entry(rng);
    const Matrix<Rational> S = Q * K.transpose();
    const Eigen::Index rank_S = exact_rank(S).rank;
    const PrecisionScope scope(128);
    const CertifiedRank rank_A = certified_rank(Matrix<Interval>(softmax_rows(from_rational<Interval>(S))));
    REQUIRE(rank_S <= dk);  // the ceiling holds for every sample
    if (rank_A.lower > rank_S) {
      ++found;
      UNSCOPED_INFO("n = " << n << ", d_k = " << dk << ": rank(S) = " << rank_S << ", rank(softmax S) >= " << rank_A.lower);
    }
  }
  INFO("seed " << seed << ": " << found << " of " << tried << " generated heads raised the rank");
  CHECK(found >= 5);
}

TEST_CASE("a false law fails and shrinks to a minimal counterexample", "[property][shrinking]") {
  // "Every square matrix has rank at most 1" is false; RapidCheck must say so and
  // shrink the counterexample to a 2 x 2 matrix with two entries of magnitude 1.
  Matrix<Integer> last_failure;
  const bool holds = rc::check("deliberately false: every square integer matrix has rank <= 1", [&] {
    const auto n = *rc::gen::inRange<Eigen::Index>(1, 7);
    // Entries 0, -1, 1, -2, 2, ...: shrinking the index towards 0 shrinks magnitudes.
    const auto entry = rc::gen::map(rc::gen::inRange(0, 101), [](int v) { return (v % 2 ? 1 : -1) * (v / 2); });
    Matrix<Integer> M(n, n);
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = 0; j < n; ++j) M(i, j) = *entry;
    const bool ok = exact_rank(M).rank <= 1;
    if (!ok) last_failure = M;
    RC_ASSERT(ok);
  });
  REQUIRE_FALSE(holds);  // the failure RapidCheck printed above is the expected one
  INFO("shrunk counterexample:\n" << last_failure);
  REQUIRE(last_failure.rows() == 2);
  int nonzero = 0;
  for (Eigen::Index i = 0; i < 2; ++i)
    for (Eigen::Index j = 0; j < 2; ++j) {
      CHECK(abs(last_failure(i, j)) <= 1);
      nonzero += last_failure(i, j) != 0;
    }
  CHECK(nonzero == 2);
}
