// Properties that tie the tiers together: the interval tier encloses the truth,
// the double tier stays inside its documented error bound (docs/tiers.md).
#include "support.hpp"

#include <cmath>

using namespace attnrank;
using attnrank::test::encloses;
using attnrank::test::gen_layer;
using attnrank::test::layer_in;

namespace {

Matrix<double> abs_double(const Matrix<Rational>& m) { return from_rational<double>(m).cwiseAbs(); }

/// The documented first-order forward error bound of the double tier
/// (docs/tiers.md, "How wrong can double be?"): entrywise bounds propagated
/// through each step with gamma_k = k u / (1 - k u), u = 2^-53.
Matrix<double> double_error_bound(const test::RandomLayer& l, const LayerTrace<double>& t) {
  const double u = std::ldexp(1.0, -53);
  auto gamma = [u](double k) { return k * u / (1 - k * u); };
  const auto d_model = static_cast<double>(l.X.cols());
  const Matrix<double> X = abs_double(l.X), Wq = abs_double(l.wq), Wk = abs_double(l.wk), Wv = abs_double(l.wv),
                       Wo = abs_double(l.wo);
  const Matrix<double> Qb = X * Wq, Kb = X * Wk, Vb = X * Wv;
  const Matrix<double> dQ = gamma(d_model + 2) * Qb, dK = gamma(d_model + 2) * Kb, dV = gamma(d_model + 2) * Vb;
  const auto& s = t.shape;
  const auto n = static_cast<double>(l.X.rows());
  Matrix<double> dC(l.X.rows(), s.heads * s.d_v), Cb(l.X.rows(), s.heads * s.d_v);
  for (Eigen::Index i = 0; i < s.heads; ++i) {
    const Matrix<double> Qi = Qb.middleCols(i * s.d_k, s.d_k), Ki = Kb.middleCols(i * s.d_k, s.d_k);
    const Matrix<double> Vi = Vb.middleCols(i * s.d_v, s.d_v), dVi = dV.middleCols(i * s.d_v, s.d_v);
    const Matrix<double> Sb = Qi * Ki.transpose();
    const Matrix<double> dS = dQ.middleCols(i * s.d_k, s.d_k) * Ki.transpose() +
                              Qi * dK.middleCols(i * s.d_k, s.d_k).transpose() + gamma(static_cast<double>(s.d_k)) * Sb;
    const Matrix<double> dScaled = (dS + 2 * u * Sb) / std::sqrt(static_cast<double>(s.d_k));
    const Matrix<double>& A = t.heads[static_cast<std::size_t>(i)].A;
    Matrix<double> dA(A.rows(), A.cols());
    const Matrix<double>& scaled = t.heads[static_cast<std::size_t>(i)].scaled;
    for (Eigen::Index r = 0; r < A.rows(); ++r) {
      const double shift = u * (scaled.row(r).maxCoeff() - scaled.row(r).minCoeff());
      dA.row(r) = A.row(r) * (std::expm1(2 * (dScaled.row(r).maxCoeff() + shift)) + gamma(n + 8));
    }
    dC.middleCols(i * s.d_v, s.d_v) = dA * Vi + A * dVi + gamma(n) * A * Vi;
    Cb.middleCols(i * s.d_v, s.d_v) = A * Vi;
  }
  return dC * Wo + Cb * Wo * (u + gamma(static_cast<double>(s.heads * s.d_v)));
}

}  // namespace

TEST_CASE("attnrank::MultiHeadAttention tiers") {
  rc::prop("every interval result contains the MPFR result at higher precision", [] {
    const auto l = gen_layer();
    const unsigned bits = *rc::gen::inRange(53u, 160u);
    LayerTrace<Interval> interval;
    LayerTrace<Rational, Interval> exact_path;
    {
      PrecisionScope scope(bits);
      interval = layer_in<Interval>(l).forward(from_rational<Interval>(l.X));
      exact_path = layer_in<Rational>(l).forward<Interval>(l.X);
    }
    PrecisionScope fine(bits + 200);
    const auto ref = layer_in<Real>(l).forward(from_rational<Real>(l.X));
    for (std::size_t i = 0; i < ref.heads.size(); ++i)
      for (Eigen::Index r = 0; r < ref.heads[i].A.rows(); ++r)
        for (Eigen::Index c = 0; c < ref.heads[i].A.cols(); ++c) {
          RC_ASSERT(encloses(interval.heads[i].A(r, c), ref.heads[i].A(r, c)));
          RC_ASSERT(encloses(exact_path.heads[i].A(r, c), ref.heads[i].A(r, c)));
        }
    for (Eigen::Index r = 0; r < ref.output.rows(); ++r)
      for (Eigen::Index c = 0; c < ref.output.cols(); ++c) {
        RC_ASSERT(encloses(interval.output(r, c), ref.output(r, c)));
        RC_ASSERT(encloses(exact_path.output(r, c), ref.output(r, c)));
      }
  });

  rc::prop("the double result is within its documented error bound of the MPFR result", [] {
    const auto l = gen_layer();
    const auto t = layer_in<double>(l).forward(from_rational<double>(l.X));
    const Matrix<double> bound = double_error_bound(l, t);
    PrecisionScope scope(256);
    const auto ref = layer_in<Real>(l).forward(from_rational<Real>(l.X));
    for (Eigen::Index r = 0; r < ref.output.rows(); ++r)
      for (Eigen::Index c = 0; c < ref.output.cols(); ++c) {
        const double err = std::abs(t.output(r, c) - static_cast<double>(ref.output(r, c)));
        RC_LOG() << "entry (" << r << ", " << c << "): error " << err << ", bound " << bound(r, c) << "\n";
        RC_ASSERT(err <= 2 * bound(r, c) + 1e-300);
      }
  });

  rc::prop("scores up to 1e6 do not overflow: weights sum to 1 and the interval tier stays sound", [] {
    auto l = gen_layer();
    const int k = *rc::gen::element(0, 3, 6);
    for (int i = 0; i < k; ++i) l.wq *= Rational(10);
    const auto t = layer_in<double>(l).forward(from_rational<double>(l.X));
    RC_ASSERT(t.output.allFinite());
    for (const auto& h : t.heads)
      for (Eigen::Index r = 0; r < h.A.rows(); ++r) RC_ASSERT(std::abs(h.A.row(r).sum() - 1) <= 1e-12);
    LayerTrace<Rational, Interval> e;
    {
      PrecisionScope scope(64);
      e = layer_in<Rational>(l).forward<Interval>(l.X);
    }
    PrecisionScope fine(300);
    const auto ref = layer_in<Real>(l).forward(from_rational<Real>(l.X));
    for (Eigen::Index r = 0; r < ref.output.rows(); ++r)
      for (Eigen::Index c = 0; c < ref.output.cols(); ++c) {
        RC_ASSERT(scalar_traits<Interval>::is_finite(e.output(r, c)));
        RC_ASSERT(encloses(e.output(r, c), ref.output(r, c)));
      }
  });

  rc::prop("with masks (causal or random, shared or one per head): intervals contain MPFR, double within its bound, masked weights exactly 0", [] {
    const auto l = gen_layer();
    const Eigen::Index n = l.X.rows();
    std::vector<Mask> masks;
    const int count = *rc::gen::element(1, static_cast<int>(l.heads));
    for (int m = 0; m < count; ++m) {
      if (*rc::gen::arbitrary<bool>()) {
        masks.push_back(Mask::causal(n));
        continue;
      }
      Matrix<Rational> M(n, n);
      for (Eigen::Index i = 0; i < n; ++i) {
        for (Eigen::Index j = 0; j < n; ++j) M(i, j) = *rc::gen::inRange(0, 2);
        M(i, *rc::gen::inRange<Eigen::Index>(0, n)) = 1;
      }
      masks.push_back(Mask::from_matrix(M, "generated"));
    }
    LayerTrace<Rational, Interval> exact_path;
    {
      PrecisionScope scope(*rc::gen::inRange(53u, 160u));
      exact_path = layer_in<Rational>(l).forward<Interval>(l.X, masks);
    }
    const auto t = layer_in<double>(l).forward(from_rational<double>(l.X), masks);
    // The documented bound holds under a mask: a row's allowed spread is at most
    // its whole spread, its allowed count at most n, and masked weights are exact.
    const Matrix<double> bound = double_error_bound(l, t);
    PrecisionScope fine(400);
    const auto ref = layer_in<Real>(l).forward(from_rational<Real>(l.X), masks);
    for (std::size_t i = 0; i < ref.heads.size(); ++i) {
      const Mask& mask = masks[masks.size() == 1 ? 0 : i];
      RC_ASSERT(t.heads[i].mask && *t.heads[i].mask == mask);
      for (Eigen::Index r = 0; r < n; ++r)
        for (Eigen::Index c = 0; c < n; ++c) {
          RC_ASSERT(encloses(exact_path.heads[i].A(r, c), ref.heads[i].A(r, c)));
          if (!mask.allows(r, c)) {
            RC_ASSERT(t.heads[i].A(r, c) == 0.0);
            // Tested as bools: RapidCheck would print the MPFR and MPFI values through Boost's
            // operator<<, where GCC 12 reports a false -Warray-bounds in std::string.
            const bool reference_zero = ref.heads[i].A(r, c) == 0;
            const bool interval_zero = lower_bound(exact_path.heads[i].A(r, c)) == 0 && upper_bound(exact_path.heads[i].A(r, c)) == 0;
            RC_ASSERT(reference_zero);
            RC_ASSERT(interval_zero);
          }
        }
    }
    for (Eigen::Index r = 0; r < ref.output.rows(); ++r)
      for (Eigen::Index c = 0; c < ref.output.cols(); ++c) {
        RC_ASSERT(encloses(exact_path.output(r, c), ref.output(r, c)));
        RC_ASSERT(std::abs(t.output(r, c) - static_cast<double>(ref.output(r, c))) <= 2 * bound(r, c) + 1e-300);
      }
  });

  SECTION("a wrong number of masks, or masks of the wrong size, are input errors") {
    const auto layer = worked_example::layer<Rational>();
    CHECK_THROWS_AS(layer.forward<Interval>(worked_example::X(), {Mask::causal(3), Mask::causal(3), Mask::causal(3)}), input_error);
    CHECK_THROWS_AS(layer.forward<Interval>(worked_example::X(), {Mask::causal(4)}), input_error);
  }
}
