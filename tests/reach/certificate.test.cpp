// Certificates (reach/certificate.hpp, reach/embeddings_certificate.hpp) and the
// witnesses they carry, against the classes an outside audit found:
//  * every certified number is computed for exactly the object it describes
//    (the embeddings witness: the weights' bound was copied onto Q = X W^Q);
//  * producer and checker agree: what the producer writes, its checker accepts;
//  * the checkers accept exactly the format: a missing, unknown, duplicated or
//    re-valued field is rejected even when the digest is re-stamped;
//  * targets beyond the double range get finite witnesses and valid certificates.
#include "certificate_support.hpp"
#include "rank_support.hpp"

#include <attnrank/reach/approximate.hpp>
#include <attnrank/reach/certificate.hpp>
#include <attnrank/reach/detail/certificate_parts.hpp>
#include <attnrank/reach/embeddings.hpp>
#include <attnrank/reach/embeddings_certificate.hpp>

#include <functional>
#include <optional>
#include <string>
#include <vector>

using namespace attnrank;
using namespace attnrank::test;
using nlohmann::json;

namespace {

/// The true error of a double witness, enclosed at 256 bits from its exact
/// entries (an upper bound within ~1e-70 of the true value).
double true_witness_error(const Matrix<Rational>& A, const Eigen::MatrixXd& Q, const Eigen::MatrixXd& K) {
  const auto exact = [](const Eigen::MatrixXd& M) { return Matrix<Rational>(M.unaryExpr([](double x) { return to_rational(x); })); };
  return certified_witness_error(A, exact(Q), exact(K), 256);
}

Matrix<Rational> rational_matrix(const Matrix<Integer>& Z) {
  return Z.unaryExpr([](const Integer& z) { return Rational(z); });
}

Matrix<Rational> gen_positive_target(Eigen::Index n) {
  Matrix<Rational> A(n, n);
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index j = 0; j < n; ++j) A(i, j) = Rational(*rc::gen::inRange(1, 20), *rc::gen::inRange(1, 20));
  return A;
}

}  // namespace

TEST_CASE("attnrank certificates: each bound describes its own object") {
  SECTION("the audit's fixed-embeddings case: Q = X W^Q carries its own bound, not the weights'") {
    Matrix<Rational> A(2, 2), X(2, 4);
    A << Rational(7, 10), Rational(3, 10), Rational(4, 10), Rational(6, 10);
    X << 1, 0, 0, 2, 0, 1, 3, 0;
    const EmbeddingsReach e = reach_with_embeddings(A, X, 1);
    REQUIRE(e.result.witness);
    const Witness& w = *e.result.witness;
    CHECK(true_witness_error(A, w.Q, w.K) <= w.max_abs_error);
    CHECK(detail::certified_embedding_error(A, X, e.WQ, e.WK, 256) <= e.weights_max_abs_error);
    const json cert = make_embeddings_certificate(A, X, e);
    CHECK(cert["witness"]["max_abs_error"].get<double>() == w.max_abs_error);
    CHECK(cert["weights"]["max_abs_error"].get<double>() == e.weights_max_abs_error);
    CHECK(check_embeddings_certificate(A, X, cert).valid);
  }
  SECTION("the tutorial's case: producer and checker agree on what is bounded") {
    const Matrix<Rational> A = *builtin_matrix("diag:3:0.8");
    const Matrix<Rational> X = worked_example::X();
    for (Eigen::Index dk : {1, 2, 3, 4}) {
      INFO("d_k = " << dk);
      const EmbeddingsReach e = reach_with_embeddings(A, X, dk);
      CHECK(check_embeddings_certificate(A, X, make_embeddings_certificate(A, X, e)).valid);
    }
  }
  SECTION("d_k > n with d_model >= d_k: a valid question, and its certificate checks") {
    Matrix<Rational> A(2, 2), X(2, 4);
    A << Rational(7, 10), Rational(3, 10), Rational(4, 10), Rational(6, 10);
    X << 1, 0, 0, 2, 0, 1, 3, 0;
    const EmbeddingsReach e = reach_with_embeddings(A, X, 3);
    CHECK(e.result.verdict == Verdict::reachable);
    const CertificateCheck c = check_embeddings_certificate(A, X, make_embeddings_certificate(A, X, e));
    INFO(c.reason);
    CHECK(c.valid);
  }
}

TEST_CASE("attnrank certificates: properties", "[property]") {
  rc::prop("fixed embeddings: every stated bound holds for its object, and the certificate checks", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(1, 5);
    const auto d = *rc::gen::inRange<Eigen::Index>(1, 6);
    const Matrix<Rational> X = rational_matrix(gen_integer_matrix(n, d, 3));
    const Matrix<Rational> A = gen_positive_target(n);
    const auto dk = *rc::gen::inRange<Eigen::Index>(1, d + 1);
    ReachOptions o;
    o.bits = *rc::gen::element(53u, 64u, 128u);
    const EmbeddingsReach e = reach_with_embeddings(A, X, dk, o);
    if (e.result.witness) {
      const Witness& w = *e.result.witness;
      RC_ASSERT(true_witness_error(A, w.Q, w.K) <= w.max_abs_error + 1e-60);
      RC_ASSERT(detail::certified_embedding_error(A, X, e.WQ, e.WK, 256) <= e.weights_max_abs_error + 1e-60);
    }
    const CertificateCheck c = check_embeddings_certificate(A, X, make_embeddings_certificate(A, X, e));
    RC_LOG() << c.reason;
    RC_ASSERT(c.valid);
  });
  rc::prop("free question: the producer's certificate passes its own checker, at every precision", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(1, 7);
    Matrix<Rational> A = gen_positive_target(n);
    if (n > 1 && *rc::gen::arbitrary<bool>()) A(0, n - 1) = 0;  // a zero entry
    const auto dk = *rc::gen::inRange<Eigen::Index>(1, n + 1);
    ReachOptions o;
    o.bits = *rc::gen::element(53u, 64u, 100u, 200u);
    const ReachResult r = reach(A, dk, o);
    const CertificateCheck c = check_reach_certificate(A, make_reach_certificate(A, r));
    RC_LOG() << c.reason;
    RC_ASSERT(c.valid);
    if (r.witness && r.witness->Q_exact.size() == 0) RC_ASSERT(true_witness_error(A, r.witness->Q, r.witness->K) <= r.witness->max_abs_error + 1e-60);
  });
  rc::prop("approximate bounds: the producer's certificate passes its own checker, free and on embeddings, with zeros and tiny entries", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(2, 7);
    Matrix<Rational> A = gen_positive_target(n);
    for (Eigen::Index i = 0; i < n; ++i) {
      const int kind = *rc::gen::inRange(0, 6);
      if (kind == 0) A(i, (i + 1) % n) = 0;
      if (kind == 1) A(i, (i + 1) % n) = Rational(1, Integer(10) << 200);
    }
    ApproxOptions o;
    o.max_iterations = 30;
    o.restarts = *rc::gen::inRange(0, 2);
    o.seed = *rc::gen::arbitrary<std::uint32_t>();
    const std::optional<double> eps = *rc::gen::element(std::optional<double>(), std::optional<double>(0.05));
    if (*rc::gen::arbitrary<bool>()) {
      const auto dk = *rc::gen::inRange<Eigen::Index>(1, n + 1);
      const ApproxBounds b = approx_error_bounds(A, dk, o);
      RC_ASSERT(b.error_lower <= b.error_upper);
      const CertificateCheck c = check_reach_certificate(A, make_reach_certificate(A, reach(A, dk), &b, eps));
      RC_LOG() << c.reason;
      RC_ASSERT(c.valid);
    } else {
      const auto d = *rc::gen::inRange<Eigen::Index>(1, 6);
      const Matrix<Rational> X = rational_matrix(gen_integer_matrix(n, d, 3));
      const auto dk = *rc::gen::inRange<Eigen::Index>(1, d + 1);
      const ApproxBounds b = approx_error_bounds(A, X, dk, o);
      RC_ASSERT(b.error_lower <= b.error_upper);
      if (std::isfinite(b.error_upper))
        RC_ASSERT(detail::certified_embedding_error(A, X, b.WQ, b.WK, 256) <= b.error_upper + 1e-60);
      const CertificateCheck c =
          check_embeddings_certificate(A, X, make_embeddings_certificate(A, X, reach_with_embeddings(A, X, dk), &b, eps));
      RC_LOG() << c.reason;
      RC_ASSERT(c.valid);
    }
  });
}

TEST_CASE("attnrank certificates: targets beyond the double range") {
  // Rows scaled by 10^400 and 10^-400 (softmax normalises rows), entries like
  // 3e-4000: valid exact decimals that no double holds.
  const Rational big = Rational(boost::multiprecision::pow(Integer(10), 400u)), tiny = Rational(1) / big;
  SECTION("a reachable rank-1 pattern with scaled rows: witness ~1e-16, certificate valid") {
    Matrix<Rational> A(3, 3);
    A << 1, 2, 4, 2, 4, 8, 4, 8, 16;  // log A = i + j (log 2): floor 1
    A.row(0) *= big;
    A.row(2) *= tiny;
    for (unsigned bits : {53u, 128u}) {
      INFO("bits " << bits);
      ReachOptions o;
      o.bits = bits;
      const ReachResult r = reach(A, 1, o);
      CHECK(r.verdict == Verdict::reachable);
      REQUIRE(r.witness);
      CHECK(r.witness->max_abs_error < 1e-14);
      CHECK(r.witness->Q.allFinite());
      CHECK(check_reach_certificate(A, make_reach_certificate(A, r)).valid);
    }
  }
  SECTION("entries of 3e-4000: a finite witness and a valid certificate") {
    Matrix<Rational> A = Matrix<Rational>::Ones(3, 3);
    for (Eigen::Index i = 0; i < 3; ++i) A(i, i) = Rational(3) * Rational(1) / Rational(boost::multiprecision::pow(Integer(10), 4000u));
    const ReachResult r = reach(A, 1);
    REQUIRE(r.witness);
    CHECK(std::isfinite(r.witness->max_abs_error));
    CHECK(r.witness->max_abs_error < 1);
    CHECK(check_reach_certificate(A, make_reach_certificate(A, r)).valid);
    const EmbeddingsReach e = reach_with_embeddings(A, worked_example::X(), 2);
    CHECK(std::isfinite(e.weights_max_abs_error));
    CHECK(check_embeddings_certificate(A, worked_example::X(), make_embeddings_certificate(A, worked_example::X(), e)).valid);
  }
  SECTION("approx_log is accurate far outside the double range") {
    CHECK(std::abs(approx_log(big) - 400 * std::log(10.0)) < 1e-12);
    CHECK(std::abs(approx_log(Rational(3) / Rational(boost::multiprecision::pow(Integer(10), 4000u))) -
                   (std::log(3.0) - 4000 * std::log(10.0))) < 1e-11);
    CHECK(approx_log(Rational(1, 2)) == std::log(0.5));
  }
}

TEST_CASE("attnrank certificates: the checkers accept exactly the format") {
  SECTION("free certificates: every tampering is rejected, re-digested or not") {
    for (const char* spec : {"diag:4:0.7", "hilbert:3"}) {
      const Matrix<Rational> A = *builtin_matrix(spec);
      for (Eigen::Index dk : {1, 2, 3}) {
        INFO(spec << " at d_k = " << dk);
        expect_all_tampering_rejected(make_reach_certificate(A, reach(A, dk)), A.rows(),
                                      [&](const json& t) { return check_reach_certificate(A, t); });
      }
    }
    Matrix<Rational> Z = *builtin_matrix("diag:3:0.8");
    Z(1, 0) = 0;
    expect_all_tampering_rejected(make_reach_certificate(Z, reach(Z, 1)), 3,
                                  [&](const json& t) { return check_reach_certificate(Z, t); });
  }
  SECTION("embeddings certificates, X of full row rank and not") {
    const Matrix<Rational> A = *builtin_matrix("diag:3:0.8");
    Matrix<Rational> thin(3, 1), ones(3, 2);
    thin << 1, 2, 3;
    ones << 1, 0, 1, 1, 1, 2;
    const Matrix<Rational> B = Matrix<Rational>(ones * ones.transpose()).unaryExpr([](const Rational& e) { return Rational(Integer(1) << e.convert_to<long>()); });
    const std::vector<std::pair<Matrix<Rational>, Matrix<Rational>>> cases = {{A, worked_example::X()}, {A, thin}, {B, ones}};
    for (const auto& [T, X] : cases)
      for (Eigen::Index dk = 1; dk <= X.cols(); ++dk) {
        INFO("X " << X.rows() << " x " << X.cols() << ", d_k = " << dk);
        expect_all_tampering_rejected(make_embeddings_certificate(T, X, reach_with_embeddings(T, X, dk)), T.rows(),
                                      [&, &T = T, &X = X](const json& t) { return check_embeddings_certificate(T, X, t); });
      }
  }
  SECTION("certificates with approximate bounds, free and on embeddings: every tampering is rejected") {
    ApproxOptions quick;
    quick.max_iterations = 40;
    quick.restarts = 0;
    const Matrix<Rational> A = *builtin_matrix("diag:4:0.7");
    for (Eigen::Index dk : {1, 2}) {
      INFO("free, d_k = " << dk);
      const ApproxBounds b = approx_error_bounds(A, dk, quick);
      REQUIRE(b.error_lower > 0);
      for (const std::optional<double> eps : {std::optional<double>(), std::optional<double>(0.2)})
        expect_all_tampering_rejected(make_reach_certificate(A, reach(A, dk), &b, eps), A.rows(),
                                      [&](const json& t) { return check_reach_certificate(A, t); });
    }
    Matrix<Rational> X(4, 2);
    X << 1, 0, 0, 1, 1, 1, 2, -1;
    const ApproxBounds b = approx_error_bounds(A, X, 2, quick);
    REQUIRE(b.error_lower > 0);
    REQUIRE(b.WQ.rows() == 2);
    expect_all_tampering_rejected(make_embeddings_certificate(A, X, reach_with_embeddings(A, X, 2), &b, 0.1), A.rows(),
                                  [&](const json& t) { return check_embeddings_certificate(A, X, t); });
  }
  SECTION("format /2 (before the approximate bounds) is still accepted") {
    const Matrix<Rational> A = *builtin_matrix("diag:4:0.7");
    json c = make_reach_certificate(A, reach(A, 2));
    c["format"] = "attnrank-reach-certificate/2";
    CHECK(check_reach_certificate(A, redigest(c)).valid);
  }
  SECTION("the audit's tampering of an embeddings certificate (X without full row rank)") {
    const Matrix<Rational> A = *builtin_matrix("diag:3:0.8");
    Matrix<Rational> X(3, 1);
    X << 1, 2, 3;
    json t = make_embeddings_certificate(A, X, reach_with_embeddings(A, X, 1));
    t["verdict"] = "banana";
    t["n"] = 4;
    t["format"] = "something-else/9";
    CHECK_FALSE(check_embeddings_certificate(A, X, redigest(t)).valid);
  }
}

TEST_CASE("attnrank::parse_certificate") {
  const Matrix<Rational> A = *builtin_matrix("diag:4:0.7");
  const json cert = make_reach_certificate(A, reach(A, 1));
  const std::string text = cert.dump(1);
  SECTION("the producer's text parses back to the same certificate") { CHECK(parse_certificate(text, "c.json") == cert); }
  SECTION("a key stated twice is refused, whichever value comes last") {
    const std::string doubled = "{\"verdict\": \"reachable\"," + text.substr(1);
    CHECK_THROWS_WITH(parse_certificate(doubled, "c.json"), Catch::Contains("c.json") && Catch::Contains("\"verdict\" appears twice"));
    const std::string nested = "{\"w\": {\"a\": 1, \"a\": 2}}";
    CHECK_THROWS_AS(parse_certificate(nested, "c.json"), input_error);
    CHECK_NOTHROW(parse_certificate("[{\"a\": 1}, {\"a\": 2}]", "c.json"));  // the same key in two objects is fine
  }
  SECTION("numbers beyond the double range are input errors, not internal ones") {
    CHECK_THROWS_AS(parse_certificate("{\"n\": 1e999}", "c.json"), input_error);
    CHECK_THROWS_AS(parse_certificate("{\"n\": " + std::string(4097, '9') + "}", "c.json"), input_error);
    CHECK_THROWS_AS(parse_certificate("{\"n\": ", "c.json"), input_error);
  }
  SECTION("integer fields beyond 64 bits are rejected by the checker") {
    json t = cert;
    t["n"] = json::parse("99999999999999999999999");
    CHECK_FALSE(check_reach_certificate(A, redigest(t)).valid);
  }
}
