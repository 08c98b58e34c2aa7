// Attention masks (attnrank/attention/mask.hpp).
#include <attnrank/attention/mask.hpp>

#include <attnrank/io/matrix_spec.hpp>
#include <attnrank/numbers/decimal.hpp>

#include <cstdio>

namespace attnrank {

Mask::Mask(Eigen::Index n, std::vector<unsigned char> allowed, Eigen::Index cols)
    : n_(n), cols_(cols < 0 ? n : cols), allowed_(std::move(allowed)) {
  row_counts_.assign(static_cast<std::size_t>(n_), 0);
  for (Eigen::Index i = 0; i < n_; ++i)
    for (Eigen::Index j = 0; j < cols_; ++j) row_counts_[static_cast<std::size_t>(i)] += allows(i, j) ? 1 : 0;
}

Mask Mask::window(Eigen::Index rows, Eigen::Index cols, long left, long right, MaskAlignment alignment,
                  EmptyRows empty_rows) {
  if (rows < 1 || cols < 1)
    throw input_error("a window mask needs at least one query and one key (got " + std::to_string(rows) + " x " +
                      std::to_string(cols) + ")");
  if (left < -1 || right < -1)
    throw input_error("window_size (" + std::to_string(left) + ", " + std::to_string(right) +
                      "): each side is a number of keys >= 0, or -1 for unbounded");
  const Eigen::Index shift = alignment == MaskAlignment::bottom_right ? cols - rows : 0;
  std::vector<unsigned char> allowed(static_cast<std::size_t>(rows * cols), 0);
  for (Eigen::Index i = 0; i < rows; ++i) {
    const Eigen::Index p = i + shift;
    bool any = false;
    for (Eigen::Index j = 0; j < cols; ++j) {
      const bool ok = (left < 0 || j >= p - left) && (right < 0 || j <= p + right);
      allowed[static_cast<std::size_t>(i * cols + j)] = ok;
      any = any || ok;
    }
    if (!any && empty_rows == EmptyRows::refuse)
      throw input_error("window_size (" + std::to_string(left) + ", " + std::to_string(right) + ") with " +
                        std::to_string(rows) + " queries and " + std::to_string(cols) + " keys, aligned " +
                        (alignment == MaskAlignment::bottom_right ? "bottom-right" : "top-left") + ": query row " +
                        std::to_string(i) + " (0-based) allows no key (softmax over it has no value, so attnrank refuses " +
                        "it; FlashAttention gives such a row the output 0: the empty-rows option 'zero')");
  }
  return Mask(rows, std::move(allowed), cols);
}

Mask Mask::checked(Eigen::Index rows, Eigen::Index cols, std::vector<unsigned char> allowed, const std::string& source,
                   EmptyRows empty_rows) {
  Mask m(rows, std::move(allowed), cols);
  if (const Eigen::Index i = m.first_empty_row(); i >= 0 && empty_rows == EmptyRows::refuse)
    throw input_error(source + ": query row " + std::to_string(i) + " (0-based) allows no key (softmax over it has "
                      "no value, so attnrank refuses it; FlashAttention gives it the output 0: the empty-rows option 'zero')");
  return m;
}

MaskAlignment mask_alignment_from_name(const std::string& name) {
  if (name == "bottom-right") return MaskAlignment::bottom_right;
  if (name == "top-left") return MaskAlignment::top_left;
  throw input_error("alignment '" + name + "' is not 'bottom-right' (FlashAttention) or 'top-left' (PyTorch)");
}

EmptyRows empty_rows_from_name(const std::string& name) {
  if (name == "refuse") return EmptyRows::refuse;
  if (name == "zero") return EmptyRows::zero;
  throw input_error("empty rows '" + name + "' is not 'refuse' (a query row without a key is an error) or 'zero' "
                    "(FlashAttention's output 0)");
}

Eigen::Index Mask::first_empty_row() const {
  for (Eigen::Index i = 0; i < n_; ++i)
    if (row_counts_[static_cast<std::size_t>(i)] == 0) return i;
  return -1;
}

Mask Mask::causal(Eigen::Index n) {
  if (n < 1) throw input_error("a causal mask needs n >= 1 (got " + std::to_string(n) + ")");
  std::vector<unsigned char> allowed(static_cast<std::size_t>(n * n), 0);
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index j = 0; j <= i; ++j) allowed[static_cast<std::size_t>(i * n + j)] = 1;
  return Mask(n, std::move(allowed));
}

Mask Mask::full(Eigen::Index n) {
  if (n < 1) throw input_error("a mask needs n >= 1 (got " + std::to_string(n) + ")");
  return Mask(n, std::vector<unsigned char>(static_cast<std::size_t>(n * n), 1));
}

Mask Mask::from_matrix(const Matrix<Rational>& M, const std::string& source, bool rectangular, EmptyRows empty_rows) {
  if (M.rows() < 1 || M.cols() < 1 || (!rectangular && M.rows() != M.cols()))
    throw input_error(source + ": a mask must be a square matrix of 0s and 1s, but it is " + std::to_string(M.rows()) +
                          " x " + std::to_string(M.cols()),
                      source);
  const Eigen::Index n = M.rows(), cols = M.cols();
  std::vector<unsigned char> allowed(static_cast<std::size_t>(n * cols), 0);
  for (Eigen::Index i = 0; i < n; ++i) {
    bool any = false;
    for (Eigen::Index j = 0; j < cols; ++j) {
      const Rational& v = M(i, j);
      if (v != 0 && v != 1)
        throw input_error(entry_text(source, static_cast<long>(i), static_cast<long>(j)) + " is " +
                              exact_decimal_text(v) + "; a mask holds 1 where a query may attend and 0 where it may not",
                          source, static_cast<long>(i + 1), static_cast<long>(j + 1));
      allowed[static_cast<std::size_t>(i * cols + j)] = v == 1;
      any = any || v == 1;
    }
    if (!any && (!rectangular || empty_rows == EmptyRows::refuse))
      throw input_error(row_text(source, static_cast<long>(i)) +
                            " allows no key, so softmax over it has no value (every row needs at least one 1" +
                            (rectangular ? std::string("; FlashAttention gives such a row the output 0: the empty-rows "
                                                       "option 'zero'")
                                         : std::string()) +
                            "). " + inverted_mask_hint,
                        source, static_cast<long>(i + 1), 0);
  }
  return Mask(n, std::move(allowed), cols);
}

Eigen::Index Mask::allowed_count() const {
  Eigen::Index total = 0;
  for (Eigen::Index c : row_counts_) total += c;
  return total;
}

bool Mask::is_causal() const {
  if (cols_ != n_) return false;
  for (Eigen::Index i = 0; i < n_; ++i)
    for (Eigen::Index j = 0; j < n_; ++j)
      if (allows(i, j) != (j <= i)) return false;
  return true;
}

std::string Mask::name() const {
  if (is_full()) return "none";
  if (is_causal()) return "causal";
  std::uint64_t h = 14695981039346656037ull;  // FNV-1a, 64 bits
  const auto mix = [&h](unsigned char byte) {
    h ^= byte;
    h *= 1099511628211ull;
  };
  for (int shift = 0; shift < 64; shift += 8) mix(static_cast<unsigned char>(static_cast<std::uint64_t>(n_) >> shift));
  if (cols_ != n_)  // a rectangular pattern's keys too (square names stay as they were)
    for (int shift = 0; shift < 64; shift += 8) mix(static_cast<unsigned char>(static_cast<std::uint64_t>(cols_) >> shift));
  for (unsigned char a : allowed_) mix(a);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return std::string("pattern:") + hex;
}

void Mask::require_size(Eigen::Index n, const std::string& what) const {
  if (n != n_)
    throw input_error("the mask is " + std::to_string(n_) + " x " + std::to_string(cols_) + " but " + what + " has " +
                      std::to_string(n) + " rows; they must match");
}

void Mask::require_shape(Eigen::Index rows, Eigen::Index cols, const std::string& what) const {
  if (rows != n_ || cols != cols_)
    throw input_error("the mask is " + std::to_string(n_) + " x " + std::to_string(cols_) + " but " + what + " has " +
                      std::to_string(rows) + " queries and " + std::to_string(cols) + " keys; they must match");
}

std::optional<Mask> named_mask(std::string_view name, Eigen::Index n) {
  if (name == "none") return std::nullopt;
  if (name == "causal") return Mask::causal(n);
  throw input_error("mask '" + std::string(name) + "' is not 'causal' or 'none' (or give a 0/1 matrix)");
}

std::optional<Mask> read_mask_argument(const std::string& argument, Eigen::Index n, const std::string& what,
                                       const ParseLimits& limits, Eigen::Index cols, EmptyRows empty_rows) {
  if (argument == "none") return std::nullopt;
  if (cols >= 0) {  // a kernel check's N_q x N_k
    if (argument == "causal") return Mask::window(n, cols, -1, 0, MaskAlignment::bottom_right, empty_rows);
    Mask mask = Mask::from_matrix(read_matrix_argument(argument, limits), argument, true, empty_rows);
    if (mask.size() != n || mask.cols() != cols)
      throw input_error(argument + ": the mask is " + std::to_string(mask.size()) + " x " + std::to_string(mask.cols()) +
                            " but " + what + " has " + std::to_string(n) + " queries and " + std::to_string(cols) +
                            " keys; they must match",
                        argument);
    return mask;
  }
  if (argument == "causal") return Mask::causal(n);
  Mask mask = Mask::from_matrix(read_matrix_argument(argument, limits), argument);
  if (mask.size() != n)
    throw input_error(argument + ": the mask is " + std::to_string(mask.size()) + " x " + std::to_string(mask.size()) +
                          " but " + what + " has " + std::to_string(n) + " rows; they must match",
                      argument);
  return mask;
}

}  // namespace attnrank
