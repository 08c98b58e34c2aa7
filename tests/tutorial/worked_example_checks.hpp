#pragma once
// One generic body for the worked example (Section 2.2.2), instantiated once per
// tier in its own small translation unit (worked_example_<tier>.test.cpp).

#include "reference_values.hpp"
#include "support.hpp"

namespace attnrank::test {

/// Half a unit in the last digit of a reference decimal: the reference is the
/// true value rounded there, so |true - reference| <= this.
inline Rational reference_radius(const std::string& text) {
  const auto dot = text.find('.');
  if (dot == std::string::npos) return Rational(0);  // exact ("1/3" or an integer)
  Integer scale = 1;
  for (std::size_t i = dot + 1; i < text.size(); ++i) scale *= 10;
  return Rational(1, 2 * scale);
}

/// Calls check(computed, reference_text) for every reference value of A_1, A_2,
/// concat row 2 and the output.
template <class L, class N, class Check>
void for_each_reference(const LayerTrace<L, N>& t, Check check) {
  for (Eigen::Index i = 0; i < 3; ++i)
    for (Eigen::Index j = 0; j < 3; ++j) {
      check(t.heads[0].A(i, j), reference::A1[i][j]);
      check(t.heads[1].A(i, j), reference::A2[i][j]);
    }
  for (Eigen::Index j = 0; j < 4; ++j) check(t.concat(1, j), reference::concat_row2[j]);
  for (Eigen::Index i = 0; i < 3; ++i)
    for (Eigen::Index j = 0; j < 4; ++j) check(t.output(i, j), reference::output[i][j]);
}

/// The exact steps (Q, K, V, raw scores) equal the tutorial's integers.
template <class L, class N>
void check_exact_steps(const LayerTrace<L, N>& t) {
  auto same = [](const auto& m, const reference::Rows& ref) {
    for (Eigen::Index i = 0; i < m.rows(); ++i)
      for (Eigen::Index j = 0; j < m.cols(); ++j) {
        INFO("entry (" << i + 1 << ", " << j + 1 << ")");
        CHECK(scalar_traits<L>::contains(m(i, j), parse_rational(ref[i][j])));
      }
  };
  same(t.Q, reference::Q);
  same(t.K, reference::K);
  same(t.V, reference::V);
  same(t.heads[0].scores, reference::scores1);
  same(t.heads[1].scores, reference::scores2);
}

}  // namespace attnrank::test
