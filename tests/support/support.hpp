#pragma once
// Shared test helpers: RapidCheck generators for exact inputs (including the hard
// cases: zeros, repeated rows, large and tiny magnitudes) and small utilities.

// Only the headers the layer tests need: each rank header instantiates heavy
// decompositions, and the umbrella would make every test file pay for them.
#include <attnrank/numbers/decimal.hpp>
#include <attnrank/attention/multi_head_attention.hpp>
#include <attnrank/io/parse.hpp>
#include <attnrank/numbers/scalar_traits.hpp>
#include <attnrank/attention/softmax.hpp>
#include <attnrank/tutorial/worked_example.hpp>

#include <catch2/catch.hpp>
#include <rapidcheck.h>
#include <rapidcheck/catch.h>

#include <functional>
#include <string>

namespace attnrank::test {

/// A rational of the kinds users type: small integers, short decimals, fractions,
/// zero, and occasionally a large or a tiny magnitude.
inline rc::Gen<Rational> gen_rational() {
  return rc::gen::oneOf(
      rc::gen::map(rc::gen::inRange(-9, 10), [](int v) { return Rational(v); }),
      rc::gen::map(rc::gen::inRange(-999, 1000), [](int v) { return Rational(v, 100); }),
      rc::gen::map(rc::gen::pair(rc::gen::inRange(-50, 51), rc::gen::inRange(1, 30)),
                   [](std::pair<int, int> pq) { return Rational(pq.first, pq.second); }),
      rc::gen::just(Rational(0)),
      rc::gen::map(rc::gen::inRange(-3, 4), [](int s) { return Rational(s) * 1000; }),
      rc::gen::map(rc::gen::inRange(1, 10), [](int s) { return Rational(s, 1000000); }));
}

/// An r x c matrix of generated rationals; sometimes with a zero row or a row
/// repeated (the tutorial's abstaining head, repeated keys).
inline Matrix<Rational> gen_matrix(Eigen::Index r, Eigen::Index c) {
  Matrix<Rational> m(r, c);
  for (Eigen::Index i = 0; i < r; ++i)
    for (Eigen::Index j = 0; j < c; ++j) m(i, j) = *gen_rational();
  const int twist = *rc::gen::inRange(0, 4);
  if (r > 0 && c > 0 && twist == 1) m.row(*rc::gen::inRange<Eigen::Index>(0, r)).setConstant(Rational(0));
  if (r > 1 && c > 0 && twist == 2) m.row(1) = m.row(0);  // c > 0: Eigen offsets a null pointer otherwise (UBSan)
  return m;
}

/// A whole random layer with its input: n in [1, 6], d_model in [1, 8],
/// h in [1, 4], d_k and d_v either d_model / h (when it divides) or free.
struct RandomLayer {
  Matrix<Rational> X, wq, wk, wv, wo;
  Eigen::Index heads = 1;
};

inline RandomLayer gen_layer() {
  RandomLayer l;
  const auto n = *rc::gen::inRange<Eigen::Index>(1, 7);
  const auto d_model = *rc::gen::inRange<Eigen::Index>(1, 9);
  l.heads = *rc::gen::inRange<Eigen::Index>(1, 5);
  Eigen::Index d_k = *rc::gen::inRange<Eigen::Index>(1, 5), d_v = *rc::gen::inRange<Eigen::Index>(1, 5);
  if (d_model % l.heads == 0 && *rc::gen::arbitrary<bool>()) d_k = d_v = d_model / l.heads;
  l.X = gen_matrix(n, d_model);
  l.wq = gen_matrix(d_model, l.heads * d_k);
  l.wk = gen_matrix(d_model, l.heads * d_k);
  l.wv = gen_matrix(d_model, l.heads * d_v);
  l.wo = gen_matrix(l.heads * d_v, d_model);
  return l;
}

template <class T>
MultiHeadAttention<T> layer_in(const RandomLayer& l) {
  return MultiHeadAttention<T>(from_rational<T>(l.wq), from_rational<T>(l.wk), from_rational<T>(l.wv),
                               from_rational<T>(l.wo), l.heads);
}

/// The message of the input_error f throws, or "" when it throws none.
inline std::string input_error_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const input_error& e) {
    return e.what();
  }
  return "";
}

/// true when the interval x contains the MPFR number y.
inline bool encloses(const Interval& x, const Real& y) {
  return mpfi_is_inside_fr(y.backend().data(), x.backend().data()) > 0;
}

}  // namespace attnrank::test
