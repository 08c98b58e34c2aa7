// Fuzz target: the built-in matrix specs (io/matrix_spec.hpp).
// Oracle: a spec is an input_error or a square matrix of the stated size; a
// diag:N:P matrix has P on the diagonal and rows that sum to exactly 1.
#include "fuzz_support.hpp"

#include <attnrank/io/matrix_spec.hpp>

#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace attnrank;
  ParseLimits limits;
  limits.max_rows = limits.max_columns = 48;
  limits.max_digits = 256;
  limits.max_exponent = 512;
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::optional<Matrix<Rational>> m;
  try {
    m = builtin_matrix(text, limits);
  } catch (const input_error&) {
    fuzz::require(text.rfind("diag:", 0) == 0 || text.rfind("hilbert:", 0) == 0, "an error for text that is not a spec");
    return 0;
  }
  if (!m) {
    fuzz::require(text.rfind("diag:", 0) != 0 && text.rfind("hilbert:", 0) != 0, "a spec was taken for a path");
    return 0;
  }
  fuzz::require(m->rows() == m->cols() && m->rows() >= 1 && m->rows() <= 48, "a spec matrix of the wrong shape");
  if (text.rfind("diag:", 0) == 0)
    for (Eigen::Index i = 0; i < m->rows(); ++i) {
      Rational sum = 0;
      for (Eigen::Index j = 0; j < m->cols(); ++j) sum += (*m)(i, j);
      fuzz::require(sum == 1, "a diag row does not sum to 1");
      fuzz::require((*m)(i, i) >= 0 && (*m)(i, i) <= 1, "a diag entry is not a probability");
    }
  return 0;
}
