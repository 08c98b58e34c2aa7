// The precision-raising loop of attnrank/attention/certified_forward.hpp.
#include <attnrank/attention/certified_forward.hpp>

#include <attnrank/numbers/decimal.hpp>

#include <algorithm>

namespace attnrank {
namespace {

std::size_t unrounded_entries(const Matrix<Interval>& m, DecimalFormat f) {
  std::size_t count = 0;
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    for (Eigen::Index j = 0; j < m.cols(); ++j)
      if (!certified_decimal(m(i, j), f)) ++count;
  return count;
}

std::size_t unrounded_entries(const LayerTrace<Rational, Interval>& t, DecimalFormat f) {
  std::size_t count = unrounded_entries(t.concat, f) + unrounded_entries(t.output, f);
  for (const auto& h : t.heads)
    count += unrounded_entries(h.scaled, f) + unrounded_entries(h.A, f) + unrounded_entries(h.Z, f);
  return count;
}

}  // namespace

CertifiedTrace certified_forward(const MultiHeadAttention<Rational>& layer, const Matrix<Rational>& X, int decimals,
                                 unsigned min_bits, const std::vector<Mask>& masks) {
  return certified_forward(layer, X, DecimalFormat::decimals(decimals), min_bits, masks);
}

CertifiedTrace certified_forward(const MultiHeadAttention<Rational>& layer, const Matrix<Rational>& X,
                                 DecimalFormat format, unsigned min_bits, const std::vector<Mask>& masks) {
  const unsigned start = std::max(min_bits, format.start_bits());
  const unsigned cap = std::max(start * 8, 4096u);
  CertifiedTrace out;
  for (unsigned b = start;; b *= 2) {
    const PrecisionScope scope(b);
    out.trace = layer.forward<Interval>(X, masks);
    out.requested_bits = b;
    out.bits = PrecisionScope::bits();
    out.unrounded = unrounded_entries(out.trace, format);
    if (out.unrounded == 0 || b * 2 > cap) break;
  }
  return out;
}

}  // namespace attnrank
