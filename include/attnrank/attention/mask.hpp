#pragma once
// Attention masks: which keys each query may attend to.
//
// A mask is an n x n 0/1 pattern Omega, 1 where query i may attend to key j.
// Masked scores are minus infinity, so softmax puts exactly 0 there and
// normalises over the allowed positions of the row. Every row must allow at
// least one key: softmax over an empty row has no value (PyTorch returns NaN
// there); a mask that leaves a row empty is an input error naming the row.
// `Mask::causal(n)` is j <= i (a decoder: token i sees tokens 1..i).
//
// A kernel check may have N_q queries and N_k != N_q keys: `Mask::window` is then an
// N_q x N_k pattern, FlashAttention's causal mask and sliding window aligned at the
// bottom-right (query i sits at key position i + N_k - N_q) or PyTorch's is_causal at
// the top-left; every other use of masks (reachability, the layer) is square. Only a
// kernel check's masks may leave a row without a key, and only when asked to
// (EmptyRows::zero: FlashAttention gives such a row the output 0).

#include <attnrank/error.hpp>
#include <attnrank/io/parse.hpp>
#include <attnrank/numbers/tiers.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace attnrank {

/// Said with a mask that cannot be right (a row with no key; a pattern whose weights sit
/// where the mask blocks): the other common convention.
inline constexpr const char* inverted_mask_hint =
    "An attnrank mask holds 1 where a query may attend; PyTorch's nn.MultiheadAttention and "
    "nn.Transformer boolean masks hold True where it may not: invert such a mask (1 - mask).";

/// Where query 0 sits among the keys when N_q != N_k: FlashAttention's convention
/// (bottom_right: query i at key position i + N_k - N_q) or PyTorch's is_causal (top_left: at i).
enum class MaskAlignment { bottom_right, top_left };
/// "bottom-right" (FlashAttention's), "top-left" (PyTorch's is_causal); input_error otherwise.
MaskAlignment mask_alignment_from_name(const std::string& name);

/// What a kernel check's query row that allows no key means: refused as input (softmax over
/// no key has no value; the default), or FlashAttention's convention: output 0, logsumexp
/// +inf (its stored value, so that its backward's exp(x - lse) is 0), gradients 0; with a
/// sink the row's weights are all 0 and its logsumexp is the sink, exactly.
enum class EmptyRows { refuse, zero };

/// "refuse" or "zero" (the name the CLI and Python take); input_error naming the value otherwise.
EmptyRows empty_rows_from_name(const std::string& name);
/// The name of the convention: "refuse" or "zero".
inline const char* to_string(EmptyRows e) { return e == EmptyRows::zero ? "zero" : "refuse"; }

class Mask {
 public:
  /// The causal mask of size n >= 1: row i allows columns 0..i (0-based).
  static Mask causal(Eigen::Index n);
  /// No mask: every position allowed.
  static Mask full(Eigen::Index n);
  /// FlashAttention's window_size = (left, right) for `rows` queries and `cols` keys:
  /// with p = i + cols - rows (bottom_right) or p = i (top_left), key j is allowed when
  /// p - left <= j <= p + right; left or right = -1 is unbounded on that side, so
  /// (-1, 0) is the causal mask and (-1, -1) no mask. A query row that allows no key
  /// (FlashAttention gives it the output 0) is an input_error naming the row unless
  /// empty_rows is EmptyRows::zero.
  static Mask window(Eigen::Index rows, Eigen::Index cols, long left, long right,
                     MaskAlignment alignment = MaskAlignment::bottom_right, EmptyRows empty_rows = EmptyRows::refuse);
  /// From an n x n matrix of 0s and 1s read from `source` (with `rectangular`, an
  /// N_q x N_k one: a kernel check's queries and keys). Throws input_error naming
  /// source, row, column and value for an entry other than 0 or 1, for a matrix that
  /// is not square (unless rectangular), and for a row with no 1 in it (allowed in a
  /// rectangular one with EmptyRows::zero).
  static Mask from_matrix(const Matrix<Rational>& M, const std::string& source, bool rectangular = false,
                          EmptyRows empty_rows = EmptyRows::refuse);

  /// The N_q x N_k pattern `allowed(i, j)` (true: query i may attend to key j) intersected with
  /// `base` when given (same shape), as a kernel check's mask (an additive bias's -inf entries,
  /// say). input_error naming `source` and the row for a query row left without a key,
  /// unless empty_rows is EmptyRows::zero.
  template <class Allowed>
  static Mask from_pattern(Eigen::Index rows, Eigen::Index cols, const Allowed& allowed, const Mask* base,
                           const std::string& source, EmptyRows empty_rows = EmptyRows::refuse) {
    std::vector<unsigned char> bits(static_cast<std::size_t>(rows * cols), 0);
    for (Eigen::Index i = 0; i < rows; ++i)
      for (Eigen::Index j = 0; j < cols; ++j)
        bits[static_cast<std::size_t>(i * cols + j)] = allowed(i, j) && (!base || base->allows(i, j));
    return checked(rows, cols, std::move(bits), source, empty_rows);
  }

  /// The queries (rows); for a square mask also the keys.
  Eigen::Index size() const { return n_; }
  /// The keys (columns): size() except for a rectangular Mask::window.
  Eigen::Index cols() const { return cols_; }
  bool allows(Eigen::Index row, Eigen::Index col) const {
    return allowed_[static_cast<std::size_t>(row * cols_ + col)] != 0;
  }
  /// Number of allowed keys of the row.
  Eigen::Index allowed_in_row(Eigen::Index row) const { return row_counts_[static_cast<std::size_t>(row)]; }
  /// Total allowed positions.
  Eigen::Index allowed_count() const;
  bool is_full() const { return allowed_count() == n_ * cols_; }
  /// The first query row that allows no key (a kernel check's EmptyRows::zero), or -1.
  Eigen::Index first_empty_row() const;
  bool is_causal() const;

  /// "none" (full), "causal", or "pattern:" followed by 16 hex digits of a 64-bit
  /// FNV-1a hash of n and the row-major bits: the name a JSON report and a
  /// certificate record, equal for equal masks whatever file they came from.
  std::string name() const;

  /// Throws input_error unless the mask has size n (the rows of `what`).
  void require_size(Eigen::Index n, const std::string& what) const;
  /// Throws input_error unless the mask is rows x cols (queries x keys of `what`).
  void require_shape(Eigen::Index rows, Eigen::Index cols, const std::string& what) const;

  friend bool operator==(const Mask& a, const Mask& b) {
    return a.n_ == b.n_ && a.cols_ == b.cols_ && a.allowed_ == b.allowed_;
  }

 private:
  explicit Mask(Eigen::Index n, std::vector<unsigned char> allowed, Eigen::Index cols = -1);
  /// The mask of `allowed` (rows x cols, row-major); input_error naming source and the first
  /// empty row, unless empty_rows is EmptyRows::zero.
  static Mask checked(Eigen::Index rows, Eigen::Index cols, std::vector<unsigned char> allowed, const std::string& source,
                      EmptyRows empty_rows);
  Eigen::Index n_ = 0, cols_ = 0;
  std::vector<unsigned char> allowed_;   // row-major, 0 or 1
  std::vector<Eigen::Index> row_counts_;
};

/// The mask a name gives for n tokens: nullopt for "none" (every key allowed),
/// the causal mask for "causal"; input_error for any other name.
std::optional<Mask> named_mask(std::string_view name, Eigen::Index n);

/// The mask an argument names, for n tokens: "causal", "none" (no mask), or a
/// file of 0s and 1s in any matrix format read_matrix_argument reads. Throws
/// input_error naming the file for a bad entry, an empty row or a size other
/// than n x n (`what` names the matrix whose rows the mask must match). With
/// cols >= 0 the mask is n x cols (queries x keys of a kernel check), "causal" is
/// Mask::window(n, cols, -1, 0) aligned bottom-right, and `empty_rows` says whether a row
/// may be left without a key.
std::optional<Mask> read_mask_argument(const std::string& argument, Eigen::Index n, const std::string& what,
                                       const ParseLimits& limits = {}, Eigen::Index cols = -1,
                                       EmptyRows empty_rows = EmptyRows::refuse);

}  // namespace attnrank
