#pragma once
// Built-in matrices named on the command line instead of a matrix file:
//   diag:N:P     the tutorial's diagonal target: P on the diagonal and
//                (1 - P) / (N - 1) elsewhere (N >= 2, 0 <= P <= 1, P exact)
//   hilbert:N    the Hilbert matrix 1 / (i + j - 1), the classic ill-conditioned
//                test (N >= 1)
// Both are exact rationals. N is capped by ParseLimits::max_rows (8192 unless
// the caller, or `attnrank --max-size`, raises it).

#include <attnrank/error.hpp>
#include <attnrank/io/parse.hpp>
#include <attnrank/out_of_memory.hpp>
#include <attnrank/numbers/tiers.hpp>

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>

namespace attnrank {

inline constexpr long max_spec_size = static_cast<long>(default_max_dimension);

/// The matrix a spec names, or nothing when `text` is not a spec (then it is a
/// path). Throws input_error for a malformed spec ("diag:1:0.5", "diag:3:2") or
/// one larger than limits.max_rows.
std::optional<Matrix<Rational>> builtin_matrix(std::string_view text, const ParseLimits& limits = {});

/// A spec or a matrix file in any format read_matrix reads, whichever `argument` is.
Matrix<Rational> read_matrix_argument(const std::string& argument, const ParseLimits& limits = {},
                                      InputNotes* notes = nullptr);

namespace detail {
inline long spec_size(std::string_view spec, std::string_view field, long min, const ParseLimits& limits) {
  const long max = static_cast<long>(std::min<std::size_t>(limits.max_rows, 1u << 30));
  const std::string f(field);
  long n = 0;
  std::size_t used = 0;
  try {
    n = std::stol(f, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (f.empty() || used != f.size() || n < min || n > max)
    throw input_error("matrix spec '" + std::string(spec) + "': size '" + f + "' must be an integer in [" +
                      std::to_string(min) + ", " + std::to_string(max) + "]");
  return n;
}

/// An n x n matrix of rationals needs at least sizeof(Rational) bytes an entry.
inline void require_spec_memory(std::string_view spec, long n) {
  require_memory(static_cast<double>(n) * static_cast<double>(n) * sizeof(Rational),
                 "matrix spec '" + std::string(spec) + "' (" + std::to_string(n) + " x " + std::to_string(n) +
                     " exact rationals)");
}
}  // namespace detail

inline std::optional<Matrix<Rational>> builtin_matrix(std::string_view text, const ParseLimits& limits) {
  if (text.rfind("diag:", 0) == 0) {
    const std::string_view rest = text.substr(5);
    const std::size_t colon = rest.find(':');
    if (colon == std::string_view::npos)
      throw input_error("matrix spec '" + std::string(text) + "' must be diag:N:P (for example diag:3:0.8)");
    const long n = detail::spec_size(text, rest.substr(0, colon), 2, limits);
    Rational p;
    try {
      p = parse_rational(rest.substr(colon + 1), limits);
    } catch (const input_error& e) {
      throw input_error("matrix spec '" + std::string(text) + "': P: " + e.what());
    }
    if (p < 0 || p > 1)
      throw input_error("matrix spec '" + std::string(text) + "': P must be in [0, 1] (it is a probability)");
    detail::require_spec_memory(text, n);
    const Rational off = (1 - p) / (n - 1);
    Matrix<Rational> A = Matrix<Rational>::Constant(n, n, off);
    A.diagonal().setConstant(p);
    return A;
  }
  if (text.rfind("hilbert:", 0) == 0) {
    const long n = detail::spec_size(text, text.substr(8), 1, limits);
    detail::require_spec_memory(text, n);
    Matrix<Rational> H(n, n);
    for (long i = 0; i < n; ++i)
      for (long j = 0; j < n; ++j) H(i, j) = Rational(1, i + j + 1);
    return H;
  }
  return std::nullopt;
}

inline Matrix<Rational> read_matrix_argument(const std::string& argument, const ParseLimits& limits,
                                             InputNotes* notes) {
  if (auto m = builtin_matrix(argument, limits)) return std::move(*m);
  return read_matrix(argument, limits, notes);
}

}  // namespace attnrank
