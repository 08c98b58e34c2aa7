// attnrank/reach/detail/order_bound.hpp: E*(A, 1) from the order of two rows' entries.
//  * sound: on targets a width-1 head makes (free or masked, exactly or with noise)
//    the bound never exceeds that head's certified error, so on an exact one it is 0;
//  * proven twice: every proof the search returns passes the exact rational check,
//    which rejects a raised eps, a row that orders alike, a key the mask hides;
//  * not vacuous: two rows peaking at different keys give the gap they show, and
//    the bound reaches reach's band and its certificate at d_k = 1.
#include "certificate_support.hpp"
#include "mask_support.hpp"

#include <attnrank/attention/softmax.hpp>
#include <attnrank/reach/certificate.hpp>
#include <attnrank/reach/detail/order_bound.hpp>
#include <attnrank/reach/masked.hpp>
#include <attnrank/reach/masked_certificate.hpp>

#include <cmath>
#include <random>

using namespace attnrank;
using namespace attnrank::test;

namespace {

using Eigen::Index;

/// softmax(S) of scores S (n x n) through the mask (or none), its allowed
/// entries multiplied by factors in [1 - noise, 1 + noise], as exact rationals.
Matrix<Rational> pattern_of(const Eigen::MatrixXd& S, const Mask* mask, double noise, std::mt19937_64& rng) {
  const Eigen::MatrixXd P = mask ? softmax_rows(S, *mask) : softmax_rows(S);
  std::uniform_real_distribution<double> wiggle(1 - noise, 1 + noise);
  Matrix<Rational> A(P.rows(), P.cols());
  for (Index i = 0; i < P.rows(); ++i)
    for (Index j = 0; j < P.cols(); ++j)
      A(i, j) = mask && !mask->allows(i, j) ? Rational(0) : Rational(std::max(P(i, j), 1e-300) * wiggle(rng));
  return A;
}

}  // namespace

TEST_CASE("attnrank::detail::order_lower_bound", "[property]") {
  rc::prop("never above the certified error of the width-1 head that made the target (free or masked, with noise)", [] {
    const auto n = *rc::gen::inRange<Index>(2, 16);
    const bool masked = *rc::gen::arbitrary<bool>();
    const Mask mask = *rc::gen::arbitrary<bool>() ? Mask::causal(n) : gen_any_mask(n);
    std::mt19937_64 rng(static_cast<std::uint64_t>(*rc::gen::arbitrary<unsigned>()));
    std::normal_distribution<double> gauss(0, *rc::gen::element(0.5, 2.0, 8.0));
    Eigen::MatrixXd q(n, 1), k(n, 1);
    for (auto& x : q.reshaped()) x = gauss(rng);
    for (auto& x : k.reshaped()) x = gauss(rng);
    const double noise = *rc::gen::element(0.0, 1e-3, 0.1, 0.5);
    const Matrix<Rational> A = pattern_of(q * k.transpose(), masked ? &mask : nullptr, noise, rng);
    const detail::OrderProof p = detail::order_lower_bound(normalized_target_bounds(A), masked ? &mask : nullptr);
    const double made = masked ? certified_masked_witness_error(A, mask, q, k)
                               : certified_masked_witness_error(A, Mask::full(n), q, k);
    RC_LOG() << "n " << n << " noise " << noise << " order bound " << p.eps << " generating head's error " << made << "\n";
    RC_CLASSIFY(p.eps > 0, "a bound > 0");
    RC_ASSERT(p.eps <= made);
    if (noise == 0) RC_ASSERT(p.eps <= 1e-12);  // the head itself is (within rounding) a width-1 head
  });

  rc::prop("every proof it returns passes the exact check, and the check refuses what does not prove", [] {
    const auto n = *rc::gen::inRange<Index>(2, 16);
    const auto r = *rc::gen::inRange<Index>(2, 5);
    const bool masked = *rc::gen::arbitrary<bool>();
    const Mask mask = *rc::gen::arbitrary<bool>() ? Mask::causal(n) : gen_any_mask(n);
    const Mask* m = masked ? &mask : nullptr;
    std::mt19937_64 rng(static_cast<std::uint64_t>(*rc::gen::arbitrary<unsigned>()));
    std::normal_distribution<double> gauss(0, *rc::gen::element(1.0, 3.0));
    Eigen::MatrixXd Q(n, r), K(n, r);
    for (auto& x : Q.reshaped()) x = gauss(rng);
    for (auto& x : K.reshaped()) x = gauss(rng);
    const Matrix<Rational> A = pattern_of(Q * K.transpose(), m, 0.0, rng);
    const detail::OrderProof p = detail::order_lower_bound(normalized_target_bounds(A), m);
    RC_CLASSIFY(p.eps > 0, "a bound > 0");
    if (!(p.eps > 0)) return;
    RC_ASSERT(detail::check_order_proof(A, m, p.rows, p.cols, p.eps));
    RC_ASSERT(detail::check_order_proof(A, m, p.rows, p.cols, 0.0));
    // eps at half the smallest gap or above proves nothing.
    Rational gap = -1;
    for (Index i : p.rows) {
      Rational sum = 0;
      for (Index j = 0; j < n; ++j) sum += A(i, j);
      for (int t = 0; t < 2; ++t) {
        Rational g = (A(i, p.cols[static_cast<std::size_t>(2 * t)]) - A(i, p.cols[static_cast<std::size_t>(2 * t + 1)])) / sum;
        if (g < 0) g = -g;
        if (gap < 0 || g < gap) gap = g;
      }
    }
    const double half = std::nextafter(static_cast<double>(gap / 2), 1.0);
    RC_ASSERT_FALSE(detail::check_order_proof(A, m, p.rows, p.cols, half));
    // The same row twice orders both pairs alike in both: no contradiction.
    RC_ASSERT_FALSE(detail::check_order_proof(A, m, {p.rows[0], p.rows[0]}, p.cols, p.eps));
    // A key the mask hides from one of the rows.
    if (masked)
      for (Index j = 0; j < n; ++j)
        if (!mask.allows(p.rows[0], j)) {
          std::array<Index, 4> hidden = p.cols;
          hidden[3] = j;
          RC_ASSERT_FALSE(detail::check_order_proof(A, m, p.rows, hidden, 0.0));
          break;
        }
  });

  SECTION("two rows peaking at different keys: the bound is half their smallest gap") {
    // Rows 1 and 2 order keys 1, 2 oppositely and keys 3, 4 alike, every gap at least 0.2.
    Matrix<Rational> A(4, 4);
    const double rows[4][4] = {{0.6, 0.1, 0.25, 0.05}, {0.1, 0.6, 0.25, 0.05}, {0.25, 0.25, 0.25, 0.25}, {0.25, 0.25, 0.25, 0.25}};
    for (Index i = 0; i < 4; ++i)
      for (Index j = 0; j < 4; ++j) A(i, j) = Rational(static_cast<long>(std::lround(rows[i][j] * 100)), 100);
    const detail::OrderProof p = detail::order_lower_bound(normalized_target_bounds(A), nullptr);
    CHECK(p.eps > 0.0999);
    CHECK(p.eps < 0.1);
    CHECK(detail::check_order_proof(A, nullptr, p.rows, p.cols, p.eps));
    const ApproxBounds b = approx_error_bounds(A, 1);
    CHECK(b.error_lower >= p.eps);
    CHECK(b.lower_proof.orders);
    CHECK(b.lower_reason.find("no head of width 1") != std::string::npos);
    CHECK(b.error_lower <= b.error_upper);
  }
  SECTION("two rows that order both pairs alike prove nothing, whatever their gaps") {
    Matrix<Rational> A(3, 4);
    const long rows[3][4] = {{60, 10, 25, 5}, {55, 15, 25, 5}, {10, 60, 5, 25}};
    for (Index i = 0; i < 3; ++i)
      for (Index j = 0; j < 4; ++j) A(i, j) = Rational(rows[i][j], 100);
    CHECK_FALSE(detail::check_order_proof(A, nullptr, {0, 1}, {0, 1, 2, 3}, 0.01));
    CHECK_FALSE(detail::check_order_proof(A, nullptr, {0, 2}, {0, 1, 2, 3}, 0.01));  // both reversed: alike again
    CHECK(detail::check_order_proof(A, nullptr, {0, 2}, {0, 1, 3, 2}, 0.01) ==
          detail::check_order_proof(A, nullptr, {0, 2}, {0, 1, 2, 3}, 0.01));  // one pair turned round: the same claim
  }
}

TEST_CASE("attnrank::detail::check_order_proof in certificates", "[property]") {
  rc::prop("reach's certificate at d_k = 1 carries the order proof, verifies, and every tampering is rejected", [] {
    const auto n = *rc::gen::inRange<Index>(4, 10);
    const bool masked = *rc::gen::arbitrary<bool>();
    const Mask mask = Mask::causal(n);
    std::mt19937_64 rng(static_cast<std::uint64_t>(*rc::gen::arbitrary<unsigned>()));
    std::normal_distribution<double> gauss(0, 3.0);
    Eigen::MatrixXd Q(n, 3), K(n, 3);
    for (auto& x : Q.reshaped()) x = gauss(rng);
    for (auto& x : K.reshaped()) x = gauss(rng);
    const Matrix<Rational> A = pattern_of(Q * K.transpose(), masked ? &mask : nullptr, 0.0, rng);
    ApproxOptions o;
    o.optimise = false;
    const ApproxBounds b = masked ? approx_error_bounds(A, 1, mask, o) : approx_error_bounds(A, 1, o);
    RC_CLASSIFY(b.lower_proof.orders, "order proof");
    if (!b.lower_proof.orders) return;
    const nlohmann::json c = masked ? make_masked_reach_certificate(A, mask, reach(A, 1, mask), &b, 0.5)
                                    : make_reach_certificate(A, reach(A, 1), &b, 0.5);
    const auto check = [&](const nlohmann::json& t) {
      return masked ? check_masked_reach_certificate(A, mask, t).valid : check_reach_certificate(A, t).valid;
    };
    RC_ASSERT(check(c));
    for (const auto& [why, t] : tampered(c, n)) {
      RC_LOG() << why << "\n";
      RC_ASSERT_FALSE(check(t));
    }
    if (b.error_upper > b.error_lower && std::isfinite(b.error_upper)) {
      nlohmann::json raised = c;
      raised["approximate"]["error_lower"] = b.error_upper;
      RC_ASSERT_FALSE(check(redigest(raised)));
    }
    nlohmann::json same_row = c;
    same_row["approximate"]["lower_proof"]["rows"][1] = same_row["approximate"]["lower_proof"]["rows"][0];
    RC_ASSERT_FALSE(check(redigest(same_row)));
  });
}
