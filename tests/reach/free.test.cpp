// attnrank/reach/free.hpp and reach/certificate.hpp: the reachability decision, its
// certificates and the independent checker. Oracles: the diagonal target's known
// floor n - 1, targets 2^E whose floor is rank(E C) exactly, the laws of
// softmax (row scaling), and the d_k = 1 argument of Section 2.5.4.
#include "rank_support.hpp"

#include <attnrank/attention/softmax.hpp>
#include <attnrank/io/matrix_spec.hpp>
#include <attnrank/linalg/numeric_rank.hpp>
#include <attnrank/reach/certificate.hpp>
#include <attnrank/tutorial/single_key_head.hpp>

#include <cstdint>
#include <limits>

using namespace attnrank;
using namespace attnrank::test;

namespace {

/// A_ij = 2^E_ij (rows not normalised: softmax does that).
Matrix<Rational> power_of_two_target(const Matrix<Integer>& E) {
  return E.unaryExpr([](const Integer& e) {
    const long k = e.convert_to<long>();
    return k >= 0 ? Rational(Integer(1) << k) : Rational(Integer(1), Integer(1) << -k);
  });
}

Eigen::Index rank_EC(const Matrix<Integer>& E) {
  const Eigen::Index n = E.rows();
  Matrix<Rational> EC = E.unaryExpr([](const Integer& z) { return Rational(z); });
  const Matrix<Rational> C = Matrix<Rational>::Identity(n, n) - Matrix<Rational>::Constant(n, n, Rational(1, n));
  return exact_rank(Matrix<Rational>(EC * C)).rank;
}

}  // namespace

TEST_CASE("attnrank::reach") {
  SECTION("the tutorial's target: unreachable at d_k = 1, reachable at d_k = 2, exact floor 2") {
    const Matrix<Rational> A = *builtin_matrix("diag:3:0.8");
    const ReachResult one = reach(A, 1);
    CHECK(one.verdict == Verdict::unreachable);
    CHECK(one.floor.lower == 2);
    CHECK(one.floor.upper == 2);
    REQUIRE(one.witness);
    CHECK(one.witness->max_abs_error > 0.1);  // a width-1 head misses by a certified margin
    const ReachResult two = reach(A, 2);
    CHECK(two.verdict == Verdict::reachable);
    CHECK(two.witness->max_abs_error < 1e-14);
  }
  SECTION("everyone attends to token 1 with p: floor 1, reachable at d_k = 1 (exact upper bound)") {
    Matrix<Rational> A(5, 5);
    for (Eigen::Index i = 0; i < 5; ++i) A.row(i) << Rational(3, 5), Rational(1, 10), Rational(1, 10), Rational(1, 10), Rational(1, 10);
    const ReachResult r = reach(A, 1);
    CHECK(r.floor.lower == 1);
    CHECK(r.floor.upper == 1);
    CHECK(r.verdict == Verdict::reachable);
    CHECK(check_reach_certificate(A, make_reach_certificate(A, r)).valid);
  }
  SECTION("a block pattern (two groups of three, 1/4 inside, 1/12 across): floor 1, exactly") {
    Matrix<Rational> A(6, 6);
    for (Eigen::Index i = 0; i < 6; ++i)
      for (Eigen::Index j = 0; j < 6; ++j) A(i, j) = (i < 3) == (j < 3) ? Rational(1, 4) : Rational(1, 12);
    const ReachResult r = reach(A, 1);
    CHECK(r.floor.lower == 1);
    CHECK(r.floor.upper == 1);
    CHECK(r.verdict == Verdict::reachable);
    CHECK(r.witness->max_abs_error < 1e-14);
    CHECK(check_reach_certificate(A, make_reach_certificate(A, r)).valid);
  }
  SECTION("a zero entry: unreachable by any finite scores, and the witness says how close") {
    Matrix<Rational> A(2, 2);
    A << 1, 0, Rational(1, 2), Rational(1, 2);
    const ReachResult r = reach(A, 2);
    CHECK(r.verdict == Verdict::unreachable);
    CHECK(r.has_zero_entry);
    CHECK(r.witness->max_abs_error < 1e-6);
    CHECK(check_reach_certificate(A, make_reach_certificate(A, r)).valid);
  }
  SECTION("bad targets and widths are input errors") {
    Matrix<Rational> neg(2, 2), rect(2, 3), zero_row(2, 2);
    neg << 1, -1, 1, 1;
    zero_row << 0, 0, 1, 1;
    rect.setOnes();
    CHECK_THROWS_WITH(reach(neg, 1), Catch::Contains("cannot be negative"));
    CHECK_THROWS_WITH(reach(rect, 1), Catch::Contains("must be square"));
    CHECK_THROWS_WITH(reach(zero_row, 1), Catch::Contains("[0, :] (0-based) is all zeros"));
    // The first problem in reading order is named, whichever column holds it.
    Matrix<Rational> two(3, 3);
    two << 1, 1, -2, -3, 1, 1, 0, 0, 0;
    CHECK_THROWS_WITH(reach(two, 1), Catch::Contains("[0, 2] (0-based) is -2"));
    two(0, 2) = 1;
    CHECK_THROWS_WITH(reach(two, 1), Catch::Contains("[1, 0] (0-based) is -3"));
    two(1, 0) = 0;
    two(1, 2) = -1;
    two(1, 1) = -4;
    CHECK_THROWS_WITH(reach(two, 1), Catch::Contains("[1, 1] (0-based) is -4"));
    two.row(1).setConstant(0);
    CHECK_THROWS_WITH(reach(two, 1), Catch::Contains("[1, :] (0-based) is all zeros"));
    CHECK_THROWS_WITH(reach(*builtin_matrix("diag:3:0.8"), 0), Catch::Contains("out of range"));
    CHECK_THROWS_WITH(reach(*builtin_matrix("diag:3:0.8"), 4), Catch::Contains("out of range"));
  }
  SECTION("a target 1e-30 away from a rank-1 pattern is never called reachable at d_k = 1") {
    Matrix<Rational> A(4, 4);
    for (Eigen::Index i = 0; i < 4; ++i) A.row(i) << 4, 2, 1, 1;
    A(2, 3) += Rational(1, Integer(10) * Integer(boost::multiprecision::pow(Integer(10), 29)));
    const ReachResult r = reach(A, 1);
    CHECK(r.verdict != Verdict::reachable);
    CHECK(r.floor.upper >= 2);  // the exact step sees the perturbation
    ReachOptions high;
    high.bits = 256;
    CHECK(reach(A, 1, high).verdict == Verdict::unreachable);  // enough precision sees it too
  }
}

TEST_CASE("attnrank::check_reach_certificate rejects what it should") {
  const Matrix<Rational> A = *builtin_matrix("diag:4:0.7");
  const nlohmann::json cert = make_reach_certificate(A, reach(A, 2));
  REQUIRE(check_reach_certificate(A, cert).valid);
  SECTION("one number changed") {
    nlohmann::json t = cert;
    t["witness"]["Q"][0][0] = t["witness"]["Q"][0][0].get<double>() + 1e-9;
    CHECK_FALSE(check_reach_certificate(A, t).valid);
  }
  SECTION("changed and re-digested: the mathematics still rejects it") {
    nlohmann::json t = cert;
    t["floor_lower"] = 2;  // claims less than proven: the minor no longer matches
    t["verdict"] = "undecided";
    t["digest"] = fnv1a_hex([&] { auto u = t; u.erase("digest"); return u.dump(); }());
    CHECK_FALSE(check_reach_certificate(A, t).valid);
    nlohmann::json w = cert;
    w["witness"]["max_abs_error"] = w["witness"]["max_abs_error"].get<double>() / 2;
    w["digest"] = fnv1a_hex([&] { auto u = w; u.erase("digest"); return u.dump(); }());
    CHECK_FALSE(check_reach_certificate(A, w).valid);
  }
  SECTION("another target") {
    CHECK_FALSE(check_reach_certificate(*builtin_matrix("diag:4:0.6"), cert).valid);
  }
  SECTION("malformed fields found by fuzz/certificate.fuzz.cpp are rejected, not undefined behaviour") {
    const auto redigest = [](nlohmann::json t) {
      t["digest"] = fnv1a_hex([&] { auto u = t; u.erase("digest"); return u.dump(); }());
      return t;
    };
    nlohmann::json zero = cert;  // an empty zero_entry was indexed out of range
    for (const char* k : {"floor_lower", "floor_upper", "lower_proof", "upper_proof"}) zero.erase(k);
    zero["zero_entry"] = nlohmann::json::array();
    zero["verdict"] = "unreachable";
    CHECK_THAT(check_reach_certificate(A, redigest(zero)).reason, Catch::Contains("zero_entry must be [row, column]"));
    nlohmann::json far = cert;  // INT64_MIN - 1 overflowed
    far["lower_proof"]["minor_rows"][0] = std::numeric_limits<std::int64_t>::min();
    CHECK_FALSE(check_reach_certificate(A, redigest(far)).valid);
    nlohmann::json precise = cert;  // 2^32 - 1 bits would exhaust memory
    precise["lower_proof"]["bits"] = 4294967295u;
    CHECK_THAT(check_reach_certificate(A, redigest(precise)).reason, Catch::Contains("precision is out of range"));
    nlohmann::json huge = cert;  // a float where an integer belongs: casting 2.3e125 to long was UB
    huge["dk"] = 2.33e125;
    CHECK_THAT(check_reach_certificate(A, redigest(huge)).reason, Catch::Contains("expected an integer"));
  }
}

TEST_CASE("attnrank::reach properties", "[property]") {
  // proofs/DiagonalTarget.v, rank_diagonal_floor; proofs/Reachability.v, reachable_iff_floor_le.
  rc::prop("diag:n:p is unreachable for every d_k <= n - 2 and reachable at d_k = n - 1", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(2, 13);
    // p in (1/n, 1): a fraction a / 1000 above 1000 / n
    const int lo = static_cast<int>(1000 / n) + 1;
    const Rational p(*rc::gen::inRange(lo, 1000), 1000);
    Matrix<Rational> A = Matrix<Rational>::Constant(n, n, Rational((1 - p) / (n - 1)));
    A.diagonal().setConstant(p);
    const auto dk = *rc::gen::inRange<Eigen::Index>(1, n + 1);
    const ReachResult r = reach(A, dk);
    RC_ASSERT(r.verdict == (dk <= n - 2 ? Verdict::unreachable : Verdict::reachable));
    RC_ASSERT(check_reach_certificate(A, make_reach_certificate(A, r)).valid);
  });
  // proofs/ExactFloor.v, exact_floor_min; proofs/Reachability.v, reachable_iff_floor_le.
  rc::prop("a target 2^E has floor exactly rank(E C): reachable there, unreachable one below", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(2, 9), k = *rc::gen::inRange<Eigen::Index>(1, 4);
    const Matrix<Integer> E = gen_integer_matrix(n, k, 2) * gen_integer_matrix(k, n, 2);
    const Eigen::Index floor = rank_EC(E);
    const Matrix<Rational> A = power_of_two_target(E);
    const ReachResult at = reach(A, std::max<Eigen::Index>(floor, 1));
    RC_ASSERT(at.floor.lower == floor);
    RC_ASSERT(at.floor.upper == floor);
    RC_ASSERT(at.verdict == Verdict::reachable);
    if (floor >= 2) RC_ASSERT(reach(A, floor - 1).verdict == Verdict::unreachable);
  });
  // proofs/Reachability.v (the witness construction); proofs/SoftmaxInversion.v, softmax_inversion.
  rc::prop("every certificate is accepted by the checker, and witnesses meet their bounds", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(1, 7);
    Matrix<Rational> A(n, n);
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = 0; j < n; ++j) A(i, j) = Rational(*rc::gen::inRange(0, 50), *rc::gen::inRange(1, 20));
    for (Eigen::Index i = 0; i < n; ++i) A(i, i) += 1;  // no zero row
    const ReachResult r = reach(A, *rc::gen::inRange<Eigen::Index>(1, n + 1));
    const CertificateCheck c = check_reach_certificate(A, make_reach_certificate(A, r));
    RC_ASSERT(c.valid);
  });
  // proofs/SoftmaxInversion.v, softmax_iff_log_shift (a row scale is a row constant in log space).
  rc::prop("the verdict does not change when rows of the target are scaled", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(2, 7);
    Matrix<Rational> A(n, n);
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = 0; j < n; ++j) A(i, j) = Rational(*rc::gen::inRange(1, 9), *rc::gen::inRange(1, 9));
    Matrix<Rational> B = A;
    for (Eigen::Index i = 0; i < n; ++i) B.row(i) *= Rational(*rc::gen::inRange(1, 50), *rc::gen::inRange(1, 50));
    const auto dk = *rc::gen::inRange<Eigen::Index>(1, n + 1);
    const ReachResult a = reach(A, dk), b = reach(B, dk);
    RC_ASSERT(a.verdict == b.verdict);
    RC_ASSERT(a.floor.lower == b.floor.lower);
  });
  // proofs/Winners.v, top_is_extreme.
  rc::prop("d_k = 1: the top-weighted token is argmax k or argmin k, or the row is flat (Question 1)", [] {
    const auto n = *rc::gen::inRange<std::size_t>(1, 8);
    std::vector<Rational> keys;
    for (std::size_t j = 0; j < n; ++j) keys.push_back(Rational(*rc::gen::inRange(-5, 6), *rc::gen::inRange(1, 4)));
    const Rational q(*rc::gen::inRange(-30, 31), *rc::gen::inRange(1, 5));
    const PrecisionScope scope(128);
    const Matrix<Interval> W = certified_single_key_sweep(keys, {q});
    const std::vector<Eigen::Index> top = top_tokens(keys, q), winners = possible_winners(keys);
    for (Eigen::Index t : top) {
      RC_ASSERT(std::find(winners.begin(), winners.end(), t) != winners.end());
      for (Eigen::Index j = 0; j < static_cast<Eigen::Index>(n); ++j)  // t's weight is certainly the largest or tied
        RC_ASSERT(!(upper_bound(W(0, t)) < lower_bound(W(0, j))));
    }
    if (top.empty()) RC_ASSERT(q == 0 || std::all_of(keys.begin(), keys.end(), [&](const Rational& k) { return k == keys[0]; }));
  });
}

TEST_CASE("attnrank::reach at high precision: a 30-digit target of a rank-r score matrix") {
  // S = X Y of rank 2 (n = 6); the target softmax(S) written out to 30 digits
  // is off the rank-2 set by rounding, but a width-2 witness computed at 200
  // bits comes within 1e-28 of it, certified.
  Matrix<Rational> X(6, 2), Y(2, 6);
  X << 1, 0, Rational(1, 2), 1, -1, 2, 0, Rational(-3, 2), 2, 1, 1, 1;
  Y << 1, -1, 0, 2, Rational(1, 3), 1, 0, 1, 1, -1, Rational(1, 2), 2;
  const Matrix<Rational> S = X * Y;
  Matrix<Rational> A(6, 6);
  {
    const PrecisionScope scope(256);
    const Matrix<Interval> P = softmax_rows(from_rational<Interval>(S));
    for (Eigen::Index i = 0; i < 6; ++i)
      for (Eigen::Index j = 0; j < 6; ++j) A(i, j) = parse_rational(format_fixed(to_rational(lower_bound(P(i, j))), 30));
  }
  ReachOptions o;
  o.bits = 200;
  const ReachResult r = reach(A, 2, o);
  REQUIRE(r.witness);
  CHECK(r.witness->max_abs_error < 1e-28);
  CHECK(r.verdict != Verdict::reachable);  // rounding moved it off the rank-2 set
  CHECK(check_reach_certificate(A, make_reach_certificate(A, r)).valid);
  CHECK(reach(A, 2).witness->max_abs_error > 1e-20);  // doubles alone cannot get there
}

TEST_CASE("attnrank::approx_witness_pattern and approx_centered_log_spectrum: the pictures of a verdict") {
  const Matrix<Rational> A = *builtin_matrix("diag:6:0.7");
  SECTION("the witness pattern is the witness head's softmax: rows sum to 1, within its certified error of A") {
    for (Eigen::Index dk : {1, 3, 5}) {
      INFO("d_k = " << dk);
      const ReachResult r = reach(A, dk);
      REQUIRE(r.witness);
      const Eigen::MatrixXd P = approx_witness_pattern(*r.witness);
      REQUIRE(P.rows() == 6);
      REQUIRE(P.cols() == 6);
      for (Eigen::Index i = 0; i < 6; ++i) CHECK(P.row(i).sum() == Approx(1.0).epsilon(1e-14));
      const Eigen::MatrixXd target = approx_normalized_target(A);
      CHECK((P - target).cwiseAbs().maxCoeff() <= r.witness->max_abs_error + 1e-14);
      const Eigen::MatrixXd S = r.witness->Q * r.witness->K.transpose() / std::sqrt(static_cast<double>(dk));
      CHECK(P.isApprox(softmax_rows(Matrix<double>(S)), 1e-13));
    }
  }
  SECTION("the spectrum is log(A) C's: n - 1 equal values and a zero for the diagonal target") {
    const Eigen::VectorXd s = approx_centered_log_spectrum(A, 3);
    REQUIRE(s.size() == 6);
    const double c = std::log(0.7 / (0.3 / 5));
    for (Eigen::Index i = 0; i < 5; ++i) CHECK(s(i) == Approx(c).epsilon(1e-12));
    CHECK(s(5) == Approx(0).margin(1e-12));
    CHECK(s.isApprox(approx_rank(approx_centered_log(A)).singular_values));
  }
}

TEST_CASE("attnrank::fast_certified_witness_error", "[property]") {
  rc::prop("at least the true error (MPFI at 256 bits on the exact witness) and within 1e-13 + 1e-15 max |score| of MPFI at 64 bits; targets with zeros and 2^-200 entries", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(1, 8), dk = *rc::gen::inRange<Eigen::Index>(1, 4);
    Matrix<Rational> A(n, n);
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = 0; j < n; ++j) {
        const int kind = *rc::gen::inRange(0, 6);
        A(i, j) = kind == 0 ? Rational(0) : kind == 1 ? Rational(1, Integer(1) << 200) : Rational(*rc::gen::inRange(1, 50), 7);
      }
    for (Eigen::Index i = 0; i < n; ++i) A(i, i) += 1;
    const double scale = *rc::gen::element(0.1, 1.0, 10.0, 100.0);
    Eigen::MatrixXd Q(n, dk), K(n, dk);
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = 0; j < dk; ++j) {
        Q(i, j) = scale * *rc::gen::inRange(-1000, 1001) / 997.0;
        K(i, j) = scale * *rc::gen::inRange(-1000, 1001) / 991.0;
      }
    const double fast = fast_certified_witness_error(normalized_target_bounds(A), Q, K);
    const auto exact = [](const Eigen::MatrixXd& M) { return Matrix<Rational>(M.unaryExpr([](double x) { return to_rational(x); })); };
    // The 256-bit bound is within 1e-70 of the truth (which is at most 1: MPFI does not clamp).
    RC_ASSERT(fast >= std::min(certified_witness_error(A, exact(Q), exact(K), 256), 1.0) - 1e-70);
    // Both start from the same directed product; the division by sqrt(d_k) in
    // doubles adds about u |score| to each score's width, so the slack scales with
    // the largest score.
    const double largest = (Q * K.transpose()).cwiseAbs().maxCoeff();
    RC_ASSERT(fast <= certified_witness_error(A, Q, K, 64) + 1e-13 + 1e-15 * largest);
  });
  rc::prop("at the ends of the double range (scores past DBL_MAX, subnormal products): at least the true error, never NaN", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(1, 6), dk = *rc::gen::inRange<Eigen::Index>(1, 4);
    Matrix<Rational> A(n, n);
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = 0; j < n; ++j) A(i, j) = Rational(*rc::gen::inRange(1, 50), 7);
    const double q_scale = *rc::gen::element(0x1p-1074, 1e-300, 1.0, 1e154, 1e200, std::numeric_limits<double>::max());
    const double k_scale = *rc::gen::element(0x1p-1074, 1.0, 1e154, std::numeric_limits<double>::max());
    Eigen::MatrixXd Q(n, dk), K(n, dk);
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = 0; j < dk; ++j) {
        Q(i, j) = q_scale * (*rc::gen::inRange(-1000, 1001) / 1000.0);
        K(i, j) = k_scale * (*rc::gen::inRange(-1000, 1001) / 1000.0);
      }
    const double fast = fast_certified_witness_error(normalized_target_bounds(A), Q, K);
    unsigned bits = 0;
    const double stated = stated_witness_error(A, Q, K, 64, bits);
    RC_TAG(std::isfinite(fast) ? "finite" : "overflow");
    RC_ASSERT(!std::isnan(fast));
    RC_ASSERT(!std::isnan(stated));
    const auto exact = [](const Eigen::MatrixXd& M) { return Matrix<Rational>(M.unaryExpr([](double x) { return to_rational(x); })); };
    const double truth = std::min(certified_witness_error(A, exact(Q), exact(K), 256), 1.0) - 1e-70;
    RC_ASSERT(fast >= truth);
    RC_ASSERT(stated >= truth);
  });
}
