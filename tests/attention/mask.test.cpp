// attnrank/attention/mask.hpp and the masked softmax of attention/softmax.hpp and
// attention/certified_softmax.hpp, in every tier. Oracles: a masked row is the
// softmax of its allowed entries alone (the unmasked softmax of the shorter
// row), MPFR at four times the precision for the enclosures, and the full mask
// equals no mask.
#include "support.hpp"

#include <attnrank/attention/certified_softmax.hpp>

#include <set>

using namespace attnrank;
using attnrank::test::encloses;
using attnrank::test::input_error_message;

namespace {

/// A random mask of size n with every row allowing at least one key; sometimes
/// causal, sometimes full, sometimes a single allowed key per row.
Mask gen_mask(Eigen::Index n) {
  const int kind = *rc::gen::inRange(0, 4);
  if (kind == 0) return Mask::causal(n);
  if (kind == 1) return Mask::full(n);
  Matrix<Rational> M(n, n);
  for (Eigen::Index i = 0; i < n; ++i) {
    for (Eigen::Index j = 0; j < n; ++j) M(i, j) = kind == 2 ? *rc::gen::inRange(0, 2) : 0;
    M(i, *rc::gen::inRange<Eigen::Index>(0, n)) = 1;
  }
  return Mask::from_matrix(M, "generated");
}

/// The allowed entries of row r, as a 1 x k matrix, and their columns.
template <class T>
std::pair<Matrix<T>, std::vector<Eigen::Index>> allowed_part(const Matrix<T>& S, const Mask& mask, Eigen::Index r) {
  std::vector<Eigen::Index> cols;
  for (Eigen::Index j = 0; j < S.cols(); ++j)
    if (mask.allows(r, j)) cols.push_back(j);
  Matrix<T> row(1, static_cast<Eigen::Index>(cols.size()));
  for (std::size_t k = 0; k < cols.size(); ++k) row(0, static_cast<Eigen::Index>(k)) = S(r, cols[k]);
  return {row, cols};
}

}  // namespace

TEST_CASE("attnrank::named_mask", "[unit]") {
  CHECK_FALSE(named_mask("none", 5));
  const std::optional<Mask> causal = named_mask("causal", 5);
  REQUIRE(causal);
  CHECK(causal->is_causal());
  CHECK(causal->size() == 5);
  for (const char* bad : {"Causal", "", "causal ", "full", "tril"}) {
    INFO(bad);
    CHECK(input_error_message([&] { named_mask(bad, 5); }) ==
          "mask '" + std::string(bad) + "' is not 'causal' or 'none' (or give a 0/1 matrix)");
  }
}

TEST_CASE("attnrank::Mask") {
  SECTION("causal allows j <= i: n (n + 1) / 2 positions, row i allows i + 1 keys") {
    for (Eigen::Index n : {1, 2, 7}) {
      const Mask m = Mask::causal(n);
      CHECK(m.allowed_count() == n * (n + 1) / 2);
      for (Eigen::Index i = 0; i < n; ++i) {
        CHECK(m.allowed_in_row(i) == i + 1);
        for (Eigen::Index j = 0; j < n; ++j) CHECK(m.allows(i, j) == (j <= i));
      }
      CHECK(m.is_causal());
      CHECK(m.name() == (n == 1 ? "none" : "causal"));  // a 1 x 1 causal mask allows everything
    }
    CHECK(Mask::full(4).name() == "none");
  }
  SECTION("a file's mask: equal patterns have equal names, different ones differ") {
    Matrix<Rational> M(3, 3);
    M << 1, 1, 0, 0, 1, 0, 1, 1, 1;
    const Mask a = Mask::from_matrix(M, "a.csv"), b = Mask::from_matrix(M, "b.csv");
    CHECK(a == b);
    CHECK(a.name() == b.name());
    CHECK(a.name().rfind("pattern:", 0) == 0);
    CHECK(a.name().size() == 8 + 16);
    M(0, 2) = 1;
    CHECK(Mask::from_matrix(M, "c.csv").name() != a.name());
    Matrix<Rational> causal(2, 2);
    causal << 1, 0, 1, 1;
    CHECK(Mask::from_matrix(causal, "c.csv").name() == "causal");
  }
  SECTION("bad masks are input errors naming the file, row, column and value") {
    Matrix<Rational> M(2, 2);
    M << 1, Rational(1, 2), 1, 1;
    CHECK(input_error_message([&] { Mask::from_matrix(M, "m.csv"); }).find("m.csv[0, 1] (0-based) is 0.5") == 0);
    M << 1, 0, 0, 0;
    CHECK(input_error_message([&] { Mask::from_matrix(M, "m.csv"); }).find("[1, :] (0-based) allows no key") != std::string::npos);
    CHECK(input_error_message([&] { Mask::from_matrix(Matrix<Rational>::Ones(2, 3), "m.csv"); }).find("square") != std::string::npos);
    CHECK(input_error_message([&] { Mask::causal(0); }).find("n >= 1") != std::string::npos);
    CHECK(input_error_message([&] { Mask::causal(3).require_size(4, "X"); }).find("3 x 3 but X has 4 rows") != std::string::npos);
    CHECK(!read_mask_argument("none", 5, "X"));
    CHECK(read_mask_argument("causal", 5, "X")->is_causal());
  }
}

TEST_CASE("attnrank::softmax_rows with a mask", "[property]") {
  rc::prop("double and MPFR: masked entries are exactly 0; a row is the softmax of its allowed entries alone", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(1, 9);
    const Mask mask = gen_mask(n);
    Matrix<double> S(n, n);
    for (auto& s : S.reshaped()) s = *rc::gen::element(0.0, 1.0, -3.5, 700.0, -700.0, 1e-300) * *rc::gen::inRange(-5, 6);
    const Matrix<double> A = softmax_rows(S, mask);
    PrecisionScope scope(80);
    const Matrix<Rational> exact = S.unaryExpr([](double x) { return Rational(x); });
    const Matrix<Real> AR = softmax_rows(from_rational<Real>(exact), mask);
    for (Eigen::Index r = 0; r < n; ++r) {
      const auto [row, cols] = allowed_part(S, mask, r);
      const Matrix<double> alone = softmax_rows(row);
      for (Eigen::Index j = 0; j < n; ++j)
        if (!mask.allows(r, j)) {
          RC_ASSERT(A(r, j) == 0.0);
          RC_ASSERT(AR(r, j) == 0);
        }
      for (std::size_t k = 0; k < cols.size(); ++k) {
        RC_ASSERT(A(r, cols[k]) == alone(0, static_cast<Eigen::Index>(k)));  // the same arithmetic
        RC_ASSERT(std::abs(static_cast<double>(AR(r, cols[k])) - A(r, cols[k])) <= 1e-14);
      }
    }
  });
  rc::prop("MPFI: the masked softmax encloses the MPFR one at four times the precision; masked entries are [0, 0]", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(1, 7);
    const Mask mask = gen_mask(n);
    Matrix<Rational> S(n, n);
    for (auto& s : S.reshaped()) s = Rational(*rc::gen::inRange(-3000, 3001), 100);
    const unsigned bits = *rc::gen::inRange(40u, 160u);
    Matrix<Interval> enclosure;
    {
      PrecisionScope scope(bits);
      enclosure = softmax_rows(from_rational<Interval>(S), mask);
    }
    PrecisionScope fine(4 * bits);
    const Matrix<Real> value = softmax_rows(from_rational<Real>(S), mask);
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = 0; j < n; ++j) {
        RC_ASSERT(encloses(enclosure(i, j), value(i, j)));
        if (!mask.allows(i, j)) RC_ASSERT(enclosure(i, j) == 0);
      }
  });
  SECTION("the full mask is no mask; a mask of the wrong size is an input error") {
    Matrix<double> S = Matrix<double>::Random(5, 5);
    CHECK(softmax_rows(S, Mask::full(5)) == softmax_rows(S));
    CHECK_THROWS_AS(softmax_rows(S, Mask::causal(4)), input_error);
  }
}

TEST_CASE("attnrank::certified_softmax_bounds with a mask", "[property]") {
  rc::prop("contains the masked MPFR softmax of the scores; masked entries are exactly [0, 0]", [] {
    const auto n = *rc::gen::inRange<Eigen::Index>(1, 9);
    const Mask mask = gen_mask(n);
    BoundsMatrix S{Eigen::MatrixXd(n, n), Eigen::MatrixXd(n, n)};
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = 0; j < n; ++j) {
        // masked bounds are never read: NaN and infinities there change nothing
        if (!mask.allows(i, j) && *rc::gen::arbitrary<bool>()) {
          S.lo(i, j) = std::numeric_limits<double>::quiet_NaN();
          S.hi(i, j) = std::numeric_limits<double>::infinity();
          continue;
        }
        S.lo(i, j) = S.hi(i, j) = *rc::gen::inRange(-4000, 4001) / 100.0;
      }
    const BoundsMatrix P = certified_softmax_bounds(S, mask);
    PrecisionScope fine(200);
    Matrix<Real> point(n, n);
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = 0; j < n; ++j) point(i, j) = mask.allows(i, j) ? Real(S.lo(i, j)) : Real(0);
    const Matrix<Real> value = softmax_rows(point, mask);
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = 0; j < n; ++j) {
        RC_ASSERT(Real(P.lo(i, j)) <= value(i, j));
        RC_ASSERT(value(i, j) <= Real(P.hi(i, j)));
        if (!mask.allows(i, j)) RC_ASSERT(P.lo(i, j) == 0.0 && P.hi(i, j) == 0.0);
      }
  });
}
