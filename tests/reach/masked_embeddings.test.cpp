// attnrank/reach/masked_embeddings.hpp: a masked head on fixed embeddings X.
// Oracles: the free masked question (which decides for X of full row rank, and
// whose lower bound holds for any X), targets made by a masked head on X (never
// unreachable at their width; the approximate lower bound stays below their
// error), and MPFI at 256 bits for every stated error (each bound for its own
// object: the weights on the exact X, and the rounded Q = X W^Q).
#include "mask_support.hpp"
#include "rank_support.hpp"

#include <attnrank/attention/softmax.hpp>
#include <attnrank/reach/embeddings.hpp>
#include <attnrank/reach/masked_certificate.hpp>
#include <attnrank/reach/masked_embeddings.hpp>

#include <random>

using namespace attnrank;
using namespace attnrank::test;

namespace {

/// A masked target a head of width r on X makes, each entry perturbed by a
/// relative `noise` (0: exactly that head's pattern, up to the double rounding).
Matrix<Rational> masked_head_target(const Eigen::MatrixXd& X, const Mask& mask, Eigen::Index r, double noise,
                                    std::mt19937_64& rng) {
  std::normal_distribution<double> gauss(0, 0.8);
  Eigen::MatrixXd WQ(X.cols(), r), WK(X.cols(), r);
  for (auto& x : WQ.reshaped()) x = gauss(rng);
  for (auto& x : WK.reshaped()) x = gauss(rng);
  const Eigen::MatrixXd P =
      softmax_rows(Eigen::MatrixXd((X * WQ) * (X * WK).transpose() / std::sqrt(static_cast<double>(r))), mask);
  std::uniform_real_distribution<double> wiggle(1 - noise, 1 + noise);
  const Eigen::Index n = X.rows();
  Matrix<Rational> A(n, n);
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index j = 0; j < n; ++j) A(i, j) = mask.allows(i, j) ? Rational(std::max(P(i, j), 1e-300) * wiggle(rng)) : Rational(0);
  return A;
}

Eigen::MatrixXd gen_embeddings(Eigen::Index n, Eigen::Index d) {
  Eigen::MatrixXd X(n, d);
  for (auto& x : X.reshaped()) x = *rc::gen::inRange(-3, 4);
  return X;
}

}  // namespace

TEST_CASE("attnrank::reach_with_embeddings with a mask", "[property]") {
  rc::prop("X of full row rank: the free masked verdict; any X: never reachable without it, unreachable below the free floor", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(2, 7);
    const bool full = *rc::gen::arbitrary<bool>();
    const auto d = full ? *rc::gen::inRange<Eigen::Index>(n, n + 3) : *rc::gen::inRange<Eigen::Index>(1, n);
    Eigen::MatrixXd Xd = gen_embeddings(n, d);
    if (full) Xd.leftCols(n) += 30 * Eigen::MatrixXd::Identity(n, n);  // diagonally dominant (off-diagonal sums <= 15): full row rank
    const Matrix<Rational> X = exact_of(Xd);
    const Mask mask = gen_any_mask(n);
    std::mt19937_64 rng(*rc::gen::arbitrary<std::uint32_t>());
    const auto r = *rc::gen::inRange<Eigen::Index>(1, std::min(n, d) + 1);
    const Matrix<Rational> A = masked_head_target(Xd, mask, r, *rc::gen::element(0.0, 1e-3), rng);
    const auto dk = *rc::gen::inRange<Eigen::Index>(1, d + 1);
    const MaskedEmbeddingsReach e = reach_with_embeddings(A, X, dk, mask);
    const MaskedReachResult free = reach(A, std::min(dk, n), mask);
    RC_LOG() << "mask " << mask.name() << ", d = " << d << ", d_k = " << dk << ": " << to_string(e.result.verdict) << "\n";
    RC_ASSERT(e.x_full_row_rank == full);
    RC_ASSERT(e.result.floor.lower == free.floor.lower);
    if (full) RC_ASSERT(e.result.verdict == free.verdict);
    else RC_ASSERT(e.result.verdict != Verdict::reachable);
    RC_ASSERT((e.result.verdict == Verdict::unreachable) == (free.verdict == Verdict::unreachable));
    // Each bound for its own object, against MPFI at 256 bits (within ~1e-70 of the truth).
    RC_ASSERT(std::isfinite(e.weights_max_abs_error));
    RC_ASSERT(detail::certified_embedding_error(A, X, e.WQ, e.WK, 256, &mask) <= e.weights_max_abs_error + 1e-60);
    RC_ASSERT(e.result.witness.has_value());
    RC_ASSERT(certified_masked_witness_error(A, mask, e.result.witness->Q, e.result.witness->K, 256) <=
              e.result.witness->max_abs_error + 1e-60);
    // The certificate passes its checker, and only with the same X and mask.
    const nlohmann::json c = make_masked_embeddings_certificate(A, X, mask, e);
    const CertificateCheck check = check_masked_embeddings_certificate(A, X, mask, c);
    RC_LOG() << check.reason << "\n";
    RC_ASSERT(check.valid);
    Matrix<Rational> other = X;
    other(0, 0) += 1;
    RC_ASSERT(!check_masked_embeddings_certificate(A, other, mask, c).valid);
    RC_ASSERT(!check_masked_reach_certificate(A, mask, c).valid);
  });
}

TEST_CASE("attnrank::approx_error_bounds on embeddings with a mask", "[property]") {
  rc::prop("error_lower <= the generating head's certified error; error_upper <= the mapped start; the certificate checks", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(3, 8);
    const auto d = *rc::gen::inRange<Eigen::Index>(1, n + 2);
    const Eigen::MatrixXd Xd = gen_embeddings(n, d);
    const Matrix<Rational> X = exact_of(Xd);
    const Mask mask = *rc::gen::arbitrary<bool>() ? Mask::causal(n) : gen_any_mask(n);
    std::mt19937_64 rng(*rc::gen::arbitrary<std::uint32_t>());
    std::normal_distribution<double> gauss(0, 0.8);
    const auto r = *rc::gen::inRange<Eigen::Index>(1, d + 1);
    Eigen::MatrixXd WQ(d, r), WK(d, r);
    for (auto& x : WQ.reshaped()) x = gauss(rng);
    for (auto& x : WK.reshaped()) x = gauss(rng);
    const Eigen::MatrixXd P =
        softmax_rows(Eigen::MatrixXd((Xd * WQ) * (Xd * WK).transpose() / std::sqrt(static_cast<double>(r))), mask);
    const double noise = *rc::gen::element(0.0, 3e-2, 0.2);
    std::uniform_real_distribution<double> wiggle(1 - noise, 1 + noise);
    Matrix<Rational> A(n, n);
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = 0; j < n; ++j) A(i, j) = mask.allows(i, j) ? Rational(std::max(P(i, j), 1e-300) * wiggle(rng)) : Rational(0);
    const double generating = detail::certified_embedding_error(A, X, WQ, WK, 64, &mask);
    const auto dk = *rc::gen::inRange<Eigen::Index>(r, d + 1);  // the generating head is one of width dk
    ApproxOptions o;
    o.bisection_steps = 12;
    o.max_iterations = 60;
    const ApproxBounds b = approx_error_bounds(A, X, dk, mask, o);
    RC_LOG() << "mask " << mask.name() << " lower " << b.error_lower << " upper " << b.error_upper << " generating "
             << generating << "\n";
    RC_CLASSIFY(b.error_lower > 0, "error_lower > 0");
    RC_ASSERT(b.error_lower <= generating);
    RC_ASSERT(b.error_lower <= b.error_upper);
    RC_ASSERT(b.error_upper <= b.start_error);
    RC_ASSERT(b.WQ.rows() == d);
    RC_ASSERT(detail::certified_embedding_error(A, X, b.WQ, b.WK, 256, &mask) <= b.error_upper + 1e-60);
    const MaskedEmbeddingsReach e = reach_with_embeddings(A, X, dk, mask);
    const CertificateCheck check = check_masked_embeddings_certificate(A, X, mask, make_masked_embeddings_certificate(A, X, mask, e, &b, 0.05));
    RC_LOG() << check.reason << "\n";
    RC_ASSERT(check.valid);
  });
}

TEST_CASE("attnrank::reach_with_embeddings with a mask: input errors") {
  const Matrix<Rational> A = *builtin_matrix("diag:3:0.8");
  Matrix<Rational> C = A;
  C(0, 1) = C(0, 2) = C(1, 2) = 0;
  Matrix<Rational> X(3, 2);
  X << 1, 0, 0, 1, 1, 1;
  CHECK_THROWS_WITH(reach_with_embeddings(A, X, 1, Mask::causal(3)), Catch::Contains("at a masked position"));
  CHECK_THROWS_WITH(reach_with_embeddings(C, X, 3, Mask::causal(3)), Catch::Contains("1 <= d_k <= d_model"));
  CHECK_THROWS_AS(reach_with_embeddings(C, Matrix<Rational>(2, 2), 1, Mask::causal(3)), input_error);
  CHECK_THROWS_AS(approx_error_bounds(C, X, 1, Mask::causal(4)), input_error);
}
