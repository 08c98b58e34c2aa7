// Properties of the layer's structure (Section 2.2.1, 2.3): exact, over generated layers.
#include "support.hpp"

#include <Eigen/LU>

using namespace attnrank;
using attnrank::test::gen_layer;
using attnrank::test::layer_in;

TEST_CASE("attnrank::MultiHeadAttention structure") {
  rc::prop("concatenating the heads' slices gives back Q, K and V", [] {
    const auto l = gen_layer();
    PrecisionScope scope(64);
    const auto t = layer_in<Rational>(l).forward<Interval>(l.X);
    Matrix<Rational> q(t.Q.rows(), 0), k(t.K.rows(), 0), v(t.V.rows(), 0);
    for (const auto& h : t.heads) {
      q.conservativeResize(Eigen::NoChange, q.cols() + h.Q.cols());
      q.rightCols(h.Q.cols()) = h.Q;
      k.conservativeResize(Eigen::NoChange, k.cols() + h.K.cols());
      k.rightCols(h.K.cols()) = h.K;
      v.conservativeResize(Eigen::NoChange, v.cols() + h.V.cols());
      v.rightCols(h.V.cols()) = h.V;
    }
    RC_ASSERT(q == t.Q);
    RC_ASSERT(k == t.K);
    RC_ASSERT(v == t.V);
    RC_ASSERT(t.Q == l.X * l.wq);
  });

  // proofs/Ceiling.v, rank_scores_le_dk.
  rc::prop("head i's raw scores are Q_i K_i^T, of rank at most d_k", [] {
    const auto l = gen_layer();
    PrecisionScope scope(64);
    const auto t = layer_in<Rational>(l).forward<Interval>(l.X);
    for (const auto& h : t.heads) {
      RC_ASSERT(h.scores == h.Q * h.K.transpose());
      const Eigen::FullPivLU<Matrix<Rational>> lu(h.scores);  // exact: epsilon of mpq is 0
      RC_ASSERT(lu.rank() <= t.shape.d_k);
    }
  });

  rc::prop("head i's weights are softmax(Q_i K_i^T / sqrt(d_k)), rows summing to 1 (Equation 2-1 per head)", [] {
    const auto l = gen_layer();
    PrecisionScope scope(64);
    const auto t = layer_in<Rational>(l).forward<Interval>(l.X);
    const Interval root = sqrt(Interval(static_cast<long>(t.shape.d_k)));
    for (const auto& h : t.heads) {
      const Matrix<Interval> S = from_rational<Interval>(h.scores).unaryExpr([&](const Interval& x) { return Interval(x / root); });
      const Matrix<Interval> expected = softmax_rows(S);
      for (Eigen::Index i = 0; i < expected.rows(); ++i) {
        Interval row_sum = 0;
        for (Eigen::Index j = 0; j < expected.cols(); ++j) {
          const Interval& got = h.A(i, j);
          RC_ASSERT(lower_bound(got) <= upper_bound(expected(i, j)));
          RC_ASSERT(lower_bound(expected(i, j)) <= upper_bound(got));
          row_sum += got;
        }
        RC_ASSERT(scalar_traits<Interval>::contains(row_sum, Rational(1)));
      }
    }
  });

  rc::prop("one wide head and h narrow heads have equal parameter counts (4 d_model^2)", [] {
    const auto heads = *rc::gen::element<Eigen::Index>(1, 2, 3, 4, 6, 8, 12, 16, 64);
    const auto d_model = heads * *rc::gen::inRange<Eigen::Index>(1, 100);
    const auto wide = AttentionShape::make(d_model, 1), narrow = AttentionShape::make(d_model, heads);
    RC_ASSERT(wide.parameter_count() == narrow.parameter_count());
    RC_ASSERT(narrow.parameter_count() == 4 * d_model * d_model);
  });

  rc::prop("the parameter count is the number of stored weights", [] {
    const auto l = gen_layer();
    const auto layer = layer_in<Rational>(l);
    RC_ASSERT(layer.shape().parameter_count() ==
              l.wq.size() + l.wk.size() + l.wv.size() + l.wo.size());
  });

  rc::prop("the output is n x d_model and the concatenation n x h d_v, in every tier", [] {
    const auto l = gen_layer();
    const auto d = layer_in<double>(l).forward(from_rational<double>(l.X));
    RC_ASSERT(d.output.rows() == l.X.rows());
    RC_ASSERT(d.output.cols() == l.X.cols());
    RC_ASSERT(d.concat.cols() == l.heads * d.shape.d_v);
    PrecisionScope scope(64);
    const auto r = layer_in<Real>(l).forward(from_rational<Real>(l.X));
    RC_ASSERT(r.output.rows() == l.X.rows());
    RC_ASSERT(r.output.cols() == l.X.cols());
  });
}

TEST_CASE("attnrank::MultiHeadAttention shape errors") {
  const Matrix<Rational> w = Matrix<Rational>::Zero(4, 4);
  CHECK_THROWS_WITH(AttentionShape::make(5, 2), Catch::Contains("d_model = 5 is not divisible by h = 2"));
  CHECK_NOTHROW(AttentionShape::make(5, 2, 3, 2));  // d_k, d_v given independently (Section 2.5.3)
  CHECK_THROWS_WITH(MultiHeadAttention<Rational>(w, w, w, w, 3), Catch::Contains("not divisible by h = 3"));
  CHECK_THROWS_WITH(MultiHeadAttention<Rational>(w, Matrix<Rational>::Zero(4, 2), w, w, 2),
                    Catch::Contains("W^K is 4 x 2 but W^Q is 4 x 4"));
  CHECK_THROWS_WITH(MultiHeadAttention<Rational>(w, w, w, Matrix<Rational>::Zero(4, 3), 2),
                    Catch::Contains("W^O is 4 x 3"));
  CHECK_THROWS_WITH(MultiHeadAttention<Rational>(w, w, w, w, 0), Catch::Contains("at least 1"));
  const MultiHeadAttention<Rational> layer(w, w, w, w, 2);
  CHECK_THROWS_WITH(layer.forward<double>(Matrix<Rational>::Zero(3, 5)), Catch::Contains("X is 3 x 5"));
  CHECK_THROWS_WITH(layer.forward<double>(Matrix<Rational>::Zero(0, 4)), Catch::Contains("X has no rows"));
  Matrix<double> x = Matrix<double>::Zero(2, 4);
  x(1, 2) = std::numeric_limits<double>::quiet_NaN();
  const MultiHeadAttention<double> dlayer(Matrix<double>::Zero(4, 4), Matrix<double>::Zero(4, 4),
                                          Matrix<double>::Zero(4, 4), Matrix<double>::Zero(4, 4), 2);
  CHECK_THROWS_WITH(dlayer.forward(x), Catch::Contains("X[1, 2] (0-based) is not finite"));
}
