#pragma once
// How the rank, determinant and singular-value reports print numbers: one place
// for the three analyses (analysis/rank_analysis.hpp, det_analysis.hpp,
// svd_analysis.hpp). A proven bound is printed so that the text is still that
// bound. Internal to the analysis module.

#include <attnrank/numbers/decimal.hpp>

#include <nlohmann/json.hpp>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

namespace attnrank::detail {

inline std::vector<Eigen::Index> one_based(const std::vector<Eigen::Index>& v) {
  std::vector<Eigen::Index> out(v);
  for (auto& x : out) ++x;
  return out;
}

inline std::string dimensions_text(Eigen::Index rows, Eigen::Index cols) {
  return std::to_string(rows) + " x " + std::to_string(cols);
}

inline std::string short_double(double x) {
  std::ostringstream s;
  s.precision(6);
  s << x;
  return s.str();
}

inline std::string exact_text(const Rational& q) {
  std::ostringstream s;
  s << q;  // "p/q" or an integer
  return s.str();
}

/// Lower ends rounded down, upper ends up, to 17 significant digits: every double's worth.
inline std::string bound_text(double x, bool up) {
  if (std::isinf(x)) return "inf";
  return up ? format_upper_bound(x, 17) : format_lower_bound(x, 17);
}

inline nlohmann::json bound_json(double x, bool up) {
  return std::isinf(x) ? nlohmann::json(nullptr) : nlohmann::json(bound_text(x, up));
}

}  // namespace attnrank::detail
