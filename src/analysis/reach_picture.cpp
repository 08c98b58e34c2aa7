// The picture data of a reach question (analysis/reach_picture.hpp).
#include <attnrank/analysis/reach_picture.hpp>

#include <attnrank/reach/masked.hpp>

#include <cmath>
#include <filesystem>

namespace attnrank {

ReachPicture reach_picture(const Matrix<Rational>& A, const std::optional<Mask>& mask, const ReachAnalysis& r) {
  const Eigen::Index n = A.rows();
  const Eigen::MatrixXd target = approx_normalized_target(A);
  const Witness* best = r.approx && !r.on_embeddings() && std::isfinite(r.approx->error_upper) && mask
                            ? &r.approx->witness
                            : r.witness();
  std::optional<Eigen::MatrixXd> pattern;
  if (best) pattern = mask ? approx_masked_witness_pattern(*best, *mask) : approx_witness_pattern(*best);
  Eigen::VectorXd spectrum;
  std::string title = "singular values of log(A) C (numeric, not certified)";
  const Eigen::Index leading = std::min<Eigen::Index>(n - 1, 2 * r.dk + 16);
  if (mask) {
    const std::optional<AllowedBlock> block = r.has_zero_entry() ? std::nullopt : largest_allowed_block(*mask);
    if (block) {
      spectrum = approx_centered_log_spectrum(Matrix<Rational>(A(block->rows, block->cols)), leading);
      title = "singular values of log(A) C on the largest fully allowed block, " + std::to_string(block->rows.size()) +
              " x " + std::to_string(block->cols.size()) + " (numeric)";
    } else {
      title = "no spectrum: a zero at an allowed position";
    }
  } else if (!r.has_zero_entry()) {
    spectrum = approx_centered_log_spectrum(A, leading);
  }
  const std::string floor = r.has_zero_entry() ? ""
                            : " (floor " + std::to_string(r.floor_lower()) +
                                  (r.floor_lower() == r.floor_upper() ? "" : ".." + std::to_string(r.floor_upper())) + ")";
  const std::string caption = std::filesystem::path(r.target_name).filename().string() +
                              (mask ? ", mask " + r.mask_name : "") + ": " + to_string(r.verdict()) + " at d_k = " +
                              std::to_string(r.dk) + floor;
  return ReachPicture{target, pattern, spectrum, title, caption, r.dk};
}


}  // namespace attnrank
