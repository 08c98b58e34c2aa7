// Tests for attnrank/attention/certified_forward.hpp: the precision-raising
// forward pass behind every certified digit `attnrank layer` and `example` print.
#include "support.hpp"

#include <attnrank/attention/certified_forward.hpp>
#include <attnrank/io/parse.hpp>
#include <attnrank/reach/target.hpp>

using namespace attnrank;
using attnrank::test::encloses;

namespace {

/// Every non-linear entry of the trace, with a name for the failure message.
template <class F>
void for_each_entry(const LayerTrace<Rational, Interval>& t, F f) {
  auto all = [&](const Matrix<Interval>& m) {
    for (Eigen::Index i = 0; i < m.rows(); ++i)
      for (Eigen::Index j = 0; j < m.cols(); ++j) f(m(i, j));
  };
  for (const auto& h : t.heads) {
    all(h.scaled);
    all(h.A);
    all(h.Z);
  }
  all(t.concat);
  all(t.output);
}

/// A one-token layer whose output is exactly `wo` (softmax of one score is 1).
MultiHeadAttention<Rational> one_token_layer(const Rational& wo) {
  Matrix<Rational> one(1, 1), w(1, 1);
  one << 1;
  w << wo;
  return MultiHeadAttention<Rational>(one, one, one, w, 1);
}

}  // namespace

TEST_CASE("attnrank::certified_forward on the worked example") {
  const auto layer = worked_example::layer<Rational>();
  for (int decimals : {0, 2, 17, 40}) {
    INFO("decimals = " << decimals);
    const CertifiedTrace c = certified_forward(layer, worked_example::X(), decimals);
    CHECK(c.unrounded == 0);
    CHECK(c.requested_bits >= bits_for_decimals(decimals));
    CHECK(c.bits >= c.requested_bits);
    std::size_t rounded = 0, entries = 0;
    for_each_entry(c.trace, [&](const Interval& x) {
      ++entries;
      rounded += certified_fixed(x, decimals).has_value();
    });
    CHECK(entries > 0);
    CHECK(rounded == entries);
  }
  SECTION("the printed output of the tutorial: 1.01 at (1, 1)") {
    const CertifiedTrace c = certified_forward(layer, worked_example::X(), 2);
    CHECK(*certified_fixed(c.trace.output(0, 0), 2) == "1.01");
  }
  SECTION("a larger minimum precision is honoured") {
    CHECK(certified_forward(layer, worked_example::X(), 2, 300).requested_bits == 300);
  }
}

TEST_CASE("attnrank::certified_forward: a true value on a rounding tie stays an enclosure") {
  // output = 3/20 = 0.15 exactly: at one decimal no interval around it rounds to
  // one string, however narrow; the loop stops at its cap and says so.
  const CertifiedTrace c = certified_forward(one_token_layer(Rational(3, 20)), Matrix<Rational>::Ones(1, 1), 1);
  CHECK(c.unrounded == 1);
  CHECK(c.requested_bits * 2 > std::max(bits_for_decimals(1) * 8, 4096u));
  CHECK_FALSE(certified_fixed(c.trace.output(0, 0), 1).has_value());
  CHECK(mpfi_is_inside_q(Rational(3, 20).backend().data(), c.trace.output(0, 0).backend().data()) > 0);
  SECTION("the same value rounds at two decimals") {
    const CertifiedTrace d = certified_forward(one_token_layer(Rational(3, 20)), Matrix<Rational>::Ones(1, 1), 2);
    CHECK(d.unrounded == 0);
    CHECK(*certified_fixed(d.trace.output(0, 0), 2) == "0.15");
  }
}

TEST_CASE("attnrank::certified_forward encloses the layer and rounds what it says it rounds") {
  rc::prop("each entry contains MPFR's value at 256 bits; unrounded counts the entries that do not round", [] {
    // Short decimals of moderate size: gen_layer's 1e3 and 1e-6 entries make the
    // fixed-point products span thousands of bits, and their precision loop is
    // what is under test here, not the products (tested on their own).
    test::RandomLayer l = test::gen_layer();
    for (Matrix<Rational>* m : {&l.X, &l.wq, &l.wk, &l.wv, &l.wo})
      *m = m->unaryExpr([](const Rational& q) { return abs(q) > 10 || (q != 0 && abs(q) < Rational(1, 100)) ? Rational(1, 3) : q; });
    const int decimals = *rc::gen::inRange(6, 26);  // ties (x.5 at d + 1 decimals) are rarer: each runs to the cap
    const CertifiedTrace c = certified_forward(test::layer_in<Rational>(l), l.X, decimals);
    std::size_t not_rounding = 0;
    for_each_entry(c.trace, [&](const Interval& x) { not_rounding += !certified_fixed(x, decimals).has_value(); });
    RC_ASSERT(not_rounding == c.unrounded);
    const PrecisionScope scope(c.requested_bits + 200);
    const auto reference = test::layer_in<Real>(l).forward(from_rational<Real>(l.X));
    for (Eigen::Index i = 0; i < reference.output.rows(); ++i)
      for (Eigen::Index j = 0; j < reference.output.cols(); ++j)
        RC_ASSERT(encloses(c.trace.output(i, j), reference.output(i, j)));
  });
}

TEST_CASE("attnrank::layer_in_tier moves the weights as from_rational does") {
  const auto exact = worked_example::layer<Rational>();
  const auto in_double = layer_in_tier<double>(exact);
  CHECK(in_double.w_q() == from_rational<double>(exact.w_q()));
  CHECK(in_double.w_o() == from_rational<double>(exact.w_o()));
  CHECK(in_double.shape().heads == exact.shape().heads);
  CHECK(in_double.forward(from_rational<double>(worked_example::X())).output.isApprox(
      worked_example::layer<double>().forward(from_rational<double>(worked_example::X())).output));
}

TEST_CASE("attnrank::input_error names its subject: the matrix a layer message is about") {
  Matrix<Rational> w(2, 2), wo(3, 2);
  w.setOnes();
  wo.setOnes();
  try {
    MultiHeadAttention<Rational>(w, w, w, wo, 1);
    FAIL("a 3 x 2 W^O for d_v = 2 was accepted");
  } catch (const input_error& e) {
    CHECK(e.subject() == "W^O");
    CHECK(std::string(e.what()).rfind("W^O is 3 x 2", 0) == 0);
  }
  const MultiHeadAttention<Rational> layer(w, w, w, Matrix<Rational>::Ones(2, 2), 1);
  try {
    layer.forward<Interval>(Matrix<Rational>::Ones(2, 3));
    FAIL("X of the wrong width was accepted");
  } catch (const input_error& e) {
    CHECK(e.subject() == "X");
  }
  CHECK(input_error("no subject").subject().empty());
  CHECK(input_error("no subject").row() == 0);
}

TEST_CASE("attnrank::input_error gives the place of a bad entry: row and column, 1-based") {
  const auto place_of = [](auto&& call) -> std::pair<long, long> {
    try {
      call();
    } catch (const input_error& e) {
      return {e.row(), e.column()};
    }
    return {-1, -1};
  };
  Eigen::MatrixXd bad = Eigen::MatrixXd::Ones(2, 2);
  bad(0, 1) = std::numeric_limits<double>::quiet_NaN();
  const Eigen::MatrixXd ones = Eigen::MatrixXd::Ones(2, 2);
  CHECK(place_of([&] { MultiHeadAttention<double>(ones, bad, ones, ones, 1); }) == std::pair<long, long>{1, 2});
  CHECK(place_of([] { parse_matrix("1,2\n3,x\n", "m.csv"); }) == std::pair<long, long>{2, 2});
  Matrix<Rational> target = Matrix<Rational>::Constant(3, 3, Rational(1, 3));
  target(2, 1) = Rational(-1, 3);
  CHECK(place_of([&] { validate_target(target, "target"); }) == std::pair<long, long>{3, 2});
  target(2, 1) = 0;
  target.row(1).setZero();
  CHECK(place_of([&] { validate_target(target, "target"); }) == std::pair<long, long>{2, 0});
}
