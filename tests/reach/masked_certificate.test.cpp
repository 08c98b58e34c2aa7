// attnrank/reach/masked_certificate.hpp: certificates for masked heads.
//  * producer and checker agree: what reach with a mask writes, the checker
//    accepts, for every kind of mask, precision and width;
//  * the checker accepts exactly the format and the mathematics: a field
//    removed, added or re-valued, a block's bound raised, a minor moved, another
//    mask or another target is rejected, even with the digest re-stamped;
//  * the free checker sends a masked certificate to --mask, and back.
#include "certificate_support.hpp"
#include "mask_support.hpp"

#include <attnrank/attention/softmax.hpp>
#include <attnrank/io/matrix_spec.hpp>
#include <attnrank/reach/certificate.hpp>
#include <attnrank/reach/embeddings_certificate.hpp>
#include <attnrank/reach/masked.hpp>
#include <attnrank/reach/masked_certificate.hpp>

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>

using namespace attnrank;
using namespace attnrank::test;
using nlohmann::json;

namespace {

/// The masked variants a checker must reject on top of tampered(): the mask
/// renamed, the staircase's flag flipped, a block missing, each block's bounds
/// moved past what its proof shows, a minor index moved, the precision out of
/// range, the witness's bound lowered below what its entries give.
std::vector<std::pair<std::string, json>> masked_tampering(const json& c) {
  std::vector<std::pair<std::string, json>> out;
  const auto add = [&](const std::string& why, const std::function<void(json&)>& change) {
    json t = c;
    change(t);
    out.emplace_back(why, redigest(t));
  };
  add("mask renamed", [](json& t) { t["mask"] = t["mask"] == "causal" ? "none" : "causal"; });
  if (c.contains("nested")) {
    add("nested flipped", [](json& t) { t["nested"] = !t["nested"].get<bool>(); });
    add("bits zero", [](json& t) { t["bits"] = 0; });
    add("floor_lower one more", [](json& t) { t["floor_lower"] = t["floor_lower"].get<long>() + 1; });
    // Both bounds up: still in order, and at d_k = 1 still "unreachable"; only
    // the blocks' sum can reject it.
    if (c["floor_upper"].get<long>() + 1 <= c["n"].get<long>() - 1)
      add("floor bounds both one more", [](json& t) {
        t["floor_lower"] = t["floor_lower"].get<long>() + 1;
        t["floor_upper"] = t["floor_upper"].get<long>() + 1;
      });
    if (c["floor_upper"].get<long>() > 0)
      add("floor_upper one less", [](json& t) { t["floor_upper"] = t["floor_upper"].get<long>() - 1; });
    for (const char* list : {"blocks", "overlaps"}) {
      if (c[list].empty()) continue;
      add(std::string("the last of the ") + list + " removed", [&](json& t) { t[list].erase(t[list].size() - 1); });
      for (std::size_t k = 0; k < c[list].size(); ++k) {
        const json& b = c[list][k];
        const std::string at = std::string(list) + " " + std::to_string(k + 1);
        add(at + ": size changed", [&](json& t) { t[list][k]["size"][0] = b["size"][0].get<long>() + 1; });
        add(at + ": floor_lower one more", [&](json& t) { t[list][k]["floor_lower"] = b["floor_lower"].get<long>() + 1; });
        if (b["floor_upper"].get<long>() > b["floor_lower"].get<long>())
          add(at + ": floor_upper one less", [&](json& t) { t[list][k]["floor_upper"] = b["floor_upper"].get<long>() - 1; });
        if (b.contains("minor_rows") && b["minor_rows"].size() >= 2)
          add(at + ": a minor row repeated", [&](json& t) { t[list][k]["minor_rows"][0] = b["minor_rows"].back(); });
        if (b.contains("ones_row")) {
          add(at + ": ones_row dropped", [&](json& t) { t[list][k].erase("ones_row"); });
          add(at + ": a minor column repeated", [&](json& t) { t[list][k]["minor_cols"][0] = b["minor_cols"].back(); });
        }
        if (b["floor_lower"].get<long>() > 0)
          add(at + ": the minor dropped", [&](json& t) {
            t[list][k].erase("minor");
            t[list][k].erase("minor_rows");
            t[list][k].erase("minor_cols");
          });
      }
    }
  }
  if (c.contains("zero_entry")) add("zero entry moved", [](json& t) { t["zero_entry"][1] = t["zero_entry"][1].get<long>() % 2 + 1; });
  if (c.contains("weights"))
    add("weights bound zero", [](json& t) { t["weights"]["max_abs_error"] = 0.0; });
  if (c.contains("witness")) {
    // Any witness's recomputed enclosure has width > 0; a bound of 0 is never proven.
    add("witness bound zero", [](json& t) { t["witness"]["max_abs_error"] = 0.0; });
    if (c["witness"]["max_abs_error"].get<double>() > 1e-3)  // far above the enclosure's width
      add("witness bound halved", [](json& t) { t["witness"]["max_abs_error"] = t["witness"]["max_abs_error"].get<double>() / 2; });
  }
  return out;
}

template <class Check>
void expect_masked_tampering_rejected(const Matrix<Rational>& A, const json& c, Check check) {
  expect_all_tampering_rejected(c, A.rows(), check);
  for (const auto& [why, t] : masked_tampering(c)) {
    INFO(why);
    const CertificateCheck r = check(t);
    INFO(r.reason);
    CHECK_FALSE(r.valid);
  }
}

void expect_masked_tampering_rejected(const Matrix<Rational>& A, const Mask& mask, const json& c) {
  expect_masked_tampering_rejected(A, c, [&](const json& t) { return check_masked_reach_certificate(A, mask, t); });
}

/// A causal target with structure: 2^M for an integer M of rank 2 (exact
/// kernels bound its blocks), or 17-digit decimals (generic).
Matrix<Rational> causal_target(Eigen::Index n, bool structured, std::mt19937_64& rng) {
  if (!structured) return generic_causal_target(n, rng);
  Matrix<Integer> M(n, n);
  std::uniform_int_distribution<int> small(-2, 2);
  Matrix<Integer> U(n, 2), V(n, 2);
  for (auto& x : U.reshaped()) x = small(rng);
  for (auto& x : V.reshaped()) x = small(rng);
  return masked_power_target(Matrix<Integer>(U * V.transpose()), Mask::causal(n));
}

}  // namespace

TEST_CASE("attnrank::check_masked_reach_certificate") {
  std::mt19937_64 rng(20261202);
  INFO("seed 20261202");
  SECTION("causal targets, generic and structured: the certificate checks, and every tampering is rejected") {
    for (const bool structured : {false, true}) {
      const Matrix<Rational> A = causal_target(6, structured, rng);
      const Mask mask = Mask::causal(6);
      for (Eigen::Index dk : {1, 2, 3, 4}) {
        INFO((structured ? "structured" : "generic") << ", d_k = " << dk);
        const MaskedReachResult r = reach(A, dk, mask);
        if (structured && dk >= 2) CHECK(r.verdict != Verdict::unreachable);  // a width-2 head makes it
        expect_masked_tampering_rejected(A, mask, make_masked_reach_certificate(A, mask, r));
      }
    }
  }
  SECTION("a structured block's upper bound is an exact kernel, and the checker needs it") {
    const Matrix<Rational> A = causal_target(7, true, rng);
    const Mask mask = Mask::causal(7);
    const json c = make_masked_reach_certificate(A, mask, reach(A, 2, mask));
    bool some_kernel = false;
    for (const json& b : c["blocks"]) some_kernel = some_kernel || b["upper_proof"].contains("kernel");
    REQUIRE(some_kernel);
    json t = c;
    for (json& b : t["blocks"]) b["upper_proof"] = json::object();
    CHECK_FALSE(check_masked_reach_certificate(A, mask, redigest(t)).valid);
  }
  SECTION("a block's floor_lower stands only on its minor: raised within its bounds, it is rejected") {
    // Rank-2 exponents and no exact step (the limits refuse it): every block's
    // upper bound is its shape, above its proven rank 2, so a raised lower bound
    // stays in order, and the overlaps' raise even lowers what the formula needs.
    const Matrix<Rational> A = causal_target(8, true, rng);
    const Mask mask = Mask::causal(8);
    ReachOptions no_exact;
    no_exact.limits.max_distinct_values = 0;
    const json c = make_masked_reach_certificate(A, mask, reach(A, 1, mask, no_exact));
    const MaskedBlockLayout layout = masked_block_layout(mask);
    int raised = 0, raised_with_ones_row = 0;
    for (const char* list : {"blocks", "overlaps"})
      for (std::size_t k = 0; k < c[list].size(); ++k) {
        const json& b = c[list][k];
        if (b["floor_lower"].get<long>() + 1 > b["floor_upper"].get<long>()) continue;
        json t = c;
        t[list][k]["floor_lower"] = b["floor_lower"].get<long>() + 1;
        t[list][k].erase("minor_rows");
        t[list][k].erase("minor_cols");
        t[list][k].erase("ones_row");
        t[list][k]["minor"] = "leading";  // a leading minor one larger than the block's rank: singular
        INFO(list << " " << k + 1);
        CHECK_FALSE(check_masked_reach_certificate(A, mask, redigest(t)).valid);
        ++raised;
        // The same raise with a ones-row minor of distinct rows and columns: any
        // one with more than 2 rows is singular (log A has rank 2 plus the ones row).
        const AllowedBlock& block = std::string(list) == "blocks" ? layout.blocks[k] : layout.overlaps[k];
        const auto lower = static_cast<std::size_t>(b["floor_lower"].get<long>() + 1);
        if (lower < 3 || lower > block.rows.size() || lower + 1 > block.cols.size()) continue;
        json u = c;
        u[list][k]["floor_lower"] = lower;
        u[list][k].erase("minor");
        json rows = json::array(), cols = json::array();
        for (std::size_t t_row = 0; t_row < lower; ++t_row) rows.push_back(block.rows[t_row] + 1);
        for (std::size_t t_col = 0; t_col <= lower; ++t_col) cols.push_back(block.cols[t_col] + 1);
        u[list][k]["minor_rows"] = rows;
        u[list][k]["minor_cols"] = cols;
        u[list][k]["ones_row"] = true;
        CHECK_FALSE(check_masked_reach_certificate(A, mask, redigest(u)).valid);
        ++raised_with_ones_row;
      }
    CHECK(raised > 0);
    CHECK(raised_with_ones_row > 0);
  }
  SECTION("a mask that is not nested, and a permuted prefix-LM mask") {
    Matrix<Rational> window = Matrix<Rational>::Zero(6, 6), prefix = Matrix<Rational>::Zero(6, 6);
    for (Eigen::Index i = 0; i < 6; ++i)
      for (Eigen::Index j = 0; j < 6; ++j) {
        window(i, j) = j <= i && i - j < 3 ? 1 : 0;
        prefix(5 - i, j) = j <= std::max<Eigen::Index>(i, 2) ? 1 : 0;
      }
    for (const Mask& mask : {Mask::from_matrix(window, "window"), Mask::from_matrix(prefix, "prefix")}) {
      Matrix<Rational> A = generic_causal_target(6, rng);
      for (Eigen::Index i = 0; i < 6; ++i)
        for (Eigen::Index j = 0; j < 6; ++j) A(i, j) = mask.allows(i, j) ? Rational(1 + i + 2 * j, 7 + j) : Rational(0);
      for (Eigen::Index dk : {1, 3}) {
        INFO(mask.name() << " at d_k = " << dk);
        expect_masked_tampering_rejected(A, mask, make_masked_reach_certificate(A, mask, reach(A, dk, mask)));
      }
    }
  }
  SECTION("a zero at an allowed position: the zero is the proof") {
    Matrix<Rational> A = causal_target(4, false, rng);
    A(2, 1) = 0;
    const Mask mask = Mask::causal(4);
    const MaskedReachResult r = reach(A, 2, mask);
    REQUIRE(r.has_zero_entry);
    const json c = make_masked_reach_certificate(A, mask, r);
    CHECK(c["zero_entry"] == json({3, 2}));
    expect_masked_tampering_rejected(A, mask, c);
    json t = c;
    t["zero_entry"] = {1, 3};  // a masked position: zero, but not a proof
    CHECK_FALSE(check_masked_reach_certificate(A, mask, redigest(t)).valid);
  }
  SECTION("with approximate bounds and an epsilon verdict") {
    const Matrix<Rational> A = causal_target(6, false, rng);
    const Mask mask = Mask::causal(6);
    ApproxOptions quick;
    quick.max_iterations = 40;
    quick.restarts = 0;
    const ApproxBounds b = approx_error_bounds(A, 1, mask, quick);
    REQUIRE(b.error_lower > 0);
    REQUIRE(std::isfinite(b.error_upper));
    for (const std::optional<double> eps : {std::optional<double>(), std::optional<double>(0.05)})
      expect_masked_tampering_rejected(A, mask, make_masked_reach_certificate(A, mask, reach(A, 1, mask), &b, eps));
  }
  SECTION("fixed embeddings, of full row rank and not: every tampering is rejected, and the other checkers say what to do") {
    const Matrix<Rational> A = causal_target(5, false, rng);
    const Mask mask = Mask::causal(5);
    Matrix<Rational> thin(5, 2), wide(5, 6);
    thin << 1, 0, 0, 1, 1, 1, 2, -1, 0, 3;
    wide.setZero();
    for (Eigen::Index i = 0; i < 5; ++i) {
      wide(i, i) = 2;
      wide(i, 5) = i;
    }
    ApproxOptions quick;
    quick.max_iterations = 40;
    quick.restarts = 0;
    for (const Matrix<Rational>& X : {thin, wide})
      for (Eigen::Index dk : {1, 2, 6}) {
        if (dk > X.cols()) continue;
        INFO("d_model = " << X.cols() << ", d_k = " << dk);
        const MaskedEmbeddingsReach e = reach_with_embeddings(A, X, dk, mask);
        CHECK(e.x_full_row_rank == (X.cols() == 6));
        if (X.cols() == 2) CHECK(e.result.verdict != Verdict::reachable);
        const ApproxBounds b = approx_error_bounds(A, X, dk, mask, quick);
        for (const ApproxBounds* approx : {static_cast<const ApproxBounds*>(nullptr), &b}) {
          const json c = make_masked_embeddings_certificate(A, X, mask, e, approx);
          expect_masked_tampering_rejected(A, c, [&](const json& t) { return check_masked_embeddings_certificate(A, X, mask, t); });
          json t = c;
          t["x_full_row_rank"] = !c["x_full_row_rank"].get<bool>();
          CHECK_FALSE(check_masked_embeddings_certificate(A, X, mask, redigest(t)).valid);
          CHECK_THAT(check_masked_reach_certificate(A, mask, c).reason, Catch::Contains("same embeddings X"));
          CHECK_THAT(check_reach_certificate(A, c).reason, Catch::Contains("the same mask"));
          CHECK_THAT(check_embeddings_certificate(A, X, c).reason, Catch::Contains("the same mask"));
        }
      }
  }
  SECTION("another mask, another target, or the other checker: rejected with a reason that says what to do") {
    const Matrix<Rational> A = causal_target(5, false, rng);
    const json c = make_masked_reach_certificate(A, Mask::causal(5), reach(A, 2, Mask::causal(5)));
    Matrix<Rational> bits = Matrix<Rational>::Zero(5, 5);
    for (Eigen::Index i = 0; i < 5; ++i)
      for (Eigen::Index j = 0; j <= i; ++j) bits(i, j) = 1;
    CHECK(check_masked_reach_certificate(A, Mask::from_matrix(bits, "file"), c).valid);  // the same mask from a file
    const CertificateCheck other = check_masked_reach_certificate(A, Mask::full(5), c);
    CHECK_FALSE(other.valid);
    CHECK(other.reason.find("mask causal") != std::string::npos);
    Matrix<Rational> B = A;
    B(4, 0) += Rational(1, 1000);
    CHECK_FALSE(check_masked_reach_certificate(B, Mask::causal(5), c).valid);
    const CertificateCheck free = check_reach_certificate(A, c);
    CHECK_FALSE(free.valid);
    CHECK(free.reason.find("without a mask") == std::string::npos);
    CHECK(free.reason.find("the same mask") != std::string::npos);
    const Matrix<Rational> D = *builtin_matrix("diag:4:0.7");
    const CertificateCheck masked = check_masked_reach_certificate(D, Mask::full(4), make_reach_certificate(D, reach(D, 2)));
    CHECK_FALSE(masked.valid);
    CHECK(masked.reason.find("without a mask") != std::string::npos);
  }
}

TEST_CASE("attnrank masked certificates: properties", "[property]") {
  rc::prop("the producer's certificate passes its own checker, for every kind of mask, width and precision", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(2, 9);
    const Mask mask = gen_any_mask(n);
    const auto dk = *rc::gen::inRange<Eigen::Index>(1, n + 1);
    Matrix<Rational> A;
    if (*rc::gen::arbitrary<bool>()) {
      A = masked_power_target(gen_low_rank_exponents(n, *rc::gen::inRange<Eigen::Index>(1, 4)), mask);
    } else {
      A = Matrix<Rational>(n, n);
      for (Eigen::Index i = 0; i < n; ++i)
        for (Eigen::Index j = 0; j < n; ++j)
          A(i, j) = mask.allows(i, j) ? Rational(*rc::gen::inRange(1, 1000), *rc::gen::inRange(1, 1000)) : Rational(0);
      if (*rc::gen::arbitrary<bool>()) {  // sometimes a zero where the mask allows a key
        const auto i = *rc::gen::inRange<Eigen::Index>(0, n);
        for (Eigen::Index j = 0; j < n; ++j)
          if (mask.allows(i, j) && mask.allowed_in_row(i) > 1) {
            A(i, j) = 0;
            break;
          }
      }
    }
    ReachOptions o;
    o.bits = *rc::gen::element(53u, 64u, 128u);
    const MaskedReachResult r = reach(A, dk, mask, o);
    const json c = make_masked_reach_certificate(A, mask, r);
    const CertificateCheck check = check_masked_reach_certificate(A, mask, parse_certificate(c.dump(1), "round trip"));
    RC_LOG() << "mask " << mask.name() << ", d_k = " << dk << ", " << to_string(r.verdict) << ": " << check.reason << "\n";
    RC_CLASSIFY(r.floor.nested, "nested");
    RC_CLASSIFY(r.has_zero_entry, "zero entry");
    RC_ASSERT(check.valid);
  });
}

TEST_CASE("attnrank masked error bounds: the searches inside fully allowed blocks", "[property]") {
  // n > 16: three blocks are chosen, and the proof's rows and columns are mapped
  // back from the block to the target; the checker re-proves them on the target.
  rc::prop("a planted masked head's band holds its generating error, and its lower proof passes the checker", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(17, 29);
    const auto r = *rc::gen::inRange<Eigen::Index>(1, 4);
    const auto dk = *rc::gen::inRange<Eigen::Index>(1, r + 2);
    const Mask mask = *rc::gen::arbitrary<bool>() ? Mask::causal(n) : gen_any_mask(n);
    const double noise = *rc::gen::element(0.0, 1e-3, 3e-2);
    std::mt19937_64 rng(static_cast<std::uint64_t>(*rc::gen::arbitrary<unsigned>()));
    std::normal_distribution<double> gauss(0, *rc::gen::element(0.7, 2.0));
    Eigen::MatrixXd Q(n, r), K(n, r);
    for (auto& x : Q.reshaped()) x = gauss(rng);
    for (auto& x : K.reshaped()) x = gauss(rng);
    const Eigen::MatrixXd P = softmax_rows(Eigen::MatrixXd(Q * K.transpose() / std::sqrt(static_cast<double>(r))), mask);
    std::uniform_real_distribution<double> wiggle(1 - noise, 1 + noise);
    Matrix<Rational> A(n, n);
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = 0; j < n; ++j)
        A(i, j) = mask.allows(i, j) ? Rational(std::max(P(i, j), 1e-300) * wiggle(rng)) : Rational(0);
    const double generating = certified_masked_witness_error(A, mask, Q, K);
    ApproxOptions quick;
    quick.optimise = false;
    quick.bisection_steps = 12;
    const ApproxBounds b = approx_error_bounds(A, dk, mask, quick);
    const bool from_block = b.lower_reason.find("fully allowed block") != std::string::npos;
    RC_LOG() << "mask " << mask.name() << ", r = " << r << ", d_k = " << dk << ": [" << b.error_lower << ", "
             << b.error_upper << "], generating " << generating << "; " << b.lower_reason << "\n";
    RC_CLASSIFY(from_block, "proof from a block");
    RC_ASSERT(b.error_lower <= b.error_upper);
    if (dk >= r) RC_ASSERT(b.error_lower <= generating);
    for (const Eigen::Index i : b.lower_proof.rows)
      for (const Eigen::Index j : b.lower_proof.cols) RC_ASSERT(mask.allows(i, j));
    const json c = make_masked_reach_certificate(A, mask, reach(A, dk, mask), &b, std::nullopt);
    const CertificateCheck check = check_masked_reach_certificate(A, mask, parse_certificate(c.dump(1), "round trip"));
    RC_LOG() << check.reason << "\n";
    RC_ASSERT(check.valid);
  });
}
