// attnrank reach --mask: the masked question's report (free scores or fixed
// embeddings), its certificate, check and figure.
#include "reach_shared.hpp"
#include "figures.hpp"
#include "run.hpp"
#include "svg.hpp"

#include <attnrank/io/json.hpp>
#include <attnrank/io/matrix_spec.hpp>
#include <attnrank/numbers/decimal.hpp>
#include <attnrank/reach/masked.hpp>
#include <attnrank/reach/masked_certificate.hpp>
#include <attnrank/reach/masked_embeddings.hpp>

#include <cmath>
#include <filesystem>
#include <optional>
#include <sstream>

namespace attnrank::cli {
namespace {

using nlohmann::json;

std::string block_list(const std::vector<MaskedBlock>& blocks) {
  std::ostringstream s;
  for (std::size_t k = 0; k < blocks.size(); ++k) {
    const MaskedBlock& b = blocks[k];
    s << (k ? ", " : "") << b.rows.size() << "x" << b.cols.size() << ":";
    if (b.lower == b.upper) s << b.lower;
    else s << b.lower << ".." << b.upper;
  }
  return s.str();
}

/// The masked verdict in words: floor bounds with the blocks that prove them.
/// The verdict line quotes best_error, the best certified masked witness (the
/// optimised one when the error bounds ran).
std::string narrate_masked(const std::string& name, const MaskedReachResult& r, bool normalised,
                           std::optional<double> best_error, bool embeddings) {
  std::ostringstream s;
  s << "target " << name << " (n = " << r.n << "), head width d_k = " << r.dk << ", mask " << r.mask
    << ": masked scores are -inf, so only the allowed entries are asked about\n";
  if (!normalised)
    s << "  note: rows do not sum to 1; softmax normalises rows, so everything below is about A / rowsums\n";
  const std::string close = best_error && std::isfinite(*best_error)
                                ? "a masked width-" + std::to_string(r.dk) + " head comes within " +
                                      format_upper_bound(*best_error) + " (certified)"
                                : "no witness error could be bounded";
  if (r.has_zero_entry) {
    s << "verdict: unreachable - " << r.reason << "; " << close << ".\n";
  } else {
    const MaskedFloorBounds& f = r.floor;
    s << "  floor    min rank of S = log A + c 1^T on the allowed set: ";
    if (f.lower == f.upper) s << "= " << f.lower;
    else s << f.lower << " <= floor <= " << f.upper;
    s << "\n           lower: " << f.lower_reason << " (" << f.lower_bits << " bits)\n";
    s << "           upper: " << f.upper_reason << "\n";
    s << "           " << (f.nested ? "blocks B_k" : "rectangles") << " (rows x columns: floor): " << block_list(f.blocks) << "\n";
    if (f.nested && !f.overlaps.empty()) s << "           overlaps O_k: " << block_list(f.overlaps) << "\n";
    s << "  ceiling  rank(Q K^T) <= d_k = " << r.dk << "\n";
    s << "verdict: " << to_string(r.verdict) << " - ";
    if (r.verdict == Verdict::unreachable)
      s << "no masked head of width " << r.dk << " produces these entries exactly, as written; " << close << ".\n";
    else if (r.verdict == Verdict::reachable)
      s << "a masked head of width " << r.dk << " produces these entries exactly; " << close << ".\n";
    else
      s << "whether a masked head of width " << r.dk << " produces these entries exactly is not settled; " << close << ".\n";
    s << "  because " << r.reason << ".\n";
    if (!r.hint.empty()) s << "  to settle it: " << r.hint << ".\n";
  }
  if (r.witness && std::isfinite(r.witness->max_abs_error))
    s << "witness at d_k = " << r.dk
      << (embeddings       ? " (Q = X W^Q, K = X W^K in doubles: the free masked witness through X's pseudo-inverse)"
          : r.floor.nested ? " (minimal-rank completion or row means, then alternating least squares)"
                           : " (alternating least squares on the allowed set)")
      << ": max |masked softmax(Q K^T / sqrt(d_k)) - A| <= "
      << format_upper_bound(r.witness->max_abs_error) << " (certified)\n";
  return s.str();
}

nlohmann::json blocks_json(const std::vector<MaskedBlock>& blocks) {
  json out = json::array();
  for (const MaskedBlock& b : blocks) {
    json rows = json::array(), cols = json::array();
    for (Eigen::Index i : b.rows) rows.push_back(i + 1);
    for (Eigen::Index j : b.cols) cols.push_back(j + 1);
    out.push_back({{"rows", rows}, {"columns", cols}, {"floor_lower", b.lower}, {"floor_upper", b.upper},
                   {"upper_reason", b.upper_reason}, {"minor_residual", b.minor_residual}});
  }
  return out;
}

json masked_json(const MaskedReachResult& r, bool normalised, const char* question) {
  json j{{"n", r.n},
         {"d_k", r.dk},
         {"question", question},
         {"mask", r.mask},
         {"verdict", to_string(r.verdict)},
         {"reason", r.reason},
         {"rows_sum_to_one", normalised},
         {"max_abs_error", r.witness ? upper_bound_json(r.witness->max_abs_error) : json(nullptr)}};
  if (r.has_zero_entry) {
    j["floor_lower"] = nullptr;
    j["floor_upper"] = nullptr;
    j["zero_entry"] = {{"row", r.zeros[0].first + 1}, {"column", r.zeros[0].second + 1}};
  } else {
    j["floor_lower"] = r.floor.lower;
    j["floor_upper"] = r.floor.upper;
    j["bits"] = r.floor.lower_bits;
    j["nested"] = r.floor.nested;
    j["floor_lower_reason"] = r.floor.lower_reason;
    j["floor_upper_reason"] = r.floor.upper_reason;
    j["blocks"] = blocks_json(r.floor.blocks);
    j["overlaps"] = blocks_json(r.floor.overlaps);
  }
  if (!r.hint.empty()) j["hint"] = r.hint;
  if (r.witness) {
    j["witness_Q"] = matrix_json(r.witness->Q);
    j["witness_K"] = matrix_json(r.witness->K);
  }
  return j;
}

/// The picture of a masked reach query: the target, the best masked head found
/// (the optimised one when the error bounds ran), and the spectrum of the
/// centered log on the largest fully allowed block (numeric: a picture).
std::string masked_reach_svg(const Matrix<Rational>& A, const Mask& mask, const MaskedReachResult& r,
                             const ApproxBounds* approx, const std::string& name) {
  const Eigen::MatrixXd target = approx_normalized_target(A);
  std::optional<Eigen::MatrixXd> pattern;
  if (approx && std::isfinite(approx->error_upper)) pattern = approx_masked_witness_pattern(approx->witness, mask);
  else if (r.witness) pattern = approx_masked_witness_pattern(*r.witness, mask);
  const std::optional<AllowedBlock> block = r.has_zero_entry ? std::nullopt : largest_allowed_block(mask);
  Eigen::VectorXd spectrum;
  if (block) spectrum = approx_centered_log_spectrum(Matrix<Rational>(A(block->rows, block->cols)), std::min<Eigen::Index>(r.n - 1, 2 * r.dk + 16));
  const std::string caption = std::filesystem::path(name).filename().string() + ", mask " + r.mask + ": " +
                              to_string(r.verdict) + " at d_k = " + std::to_string(r.dk) +
                              (r.has_zero_entry ? "" : " (floor " + std::to_string(r.floor.lower) +
                                                           (r.floor.lower == r.floor.upper ? "" : ".." + std::to_string(r.floor.upper)) + ")");
  const std::string title = block ? "singular values of log(A) C on the largest fully allowed block, " +
                                        std::to_string(block->rows.size()) + " x " + std::to_string(block->cols.size()) +
                                        " (numeric)"
                                  : "no spectrum: a zero at an allowed position";
  return reach_figure(target, pattern ? &*pattern : nullptr, spectrum, r.dk, caption, title);
}

/// How close a masked head comes, in words (after the verdict).
std::string masked_bounds_lines(const ApproxBounds& b, std::uint64_t seed, bool embeddings) {
  std::ostringstream s;
  s << "how close: " << format_lower_bound(b.error_lower) << " <= E* <= " << format_upper_bound(b.error_upper)
    << " (certified both ways), E* = the smallest max |masked softmax(Q K^T / sqrt(d_k)) - A| of any masked head of width "
    << b.dk << (embeddings ? " with Q = X W^Q, K = X W^K" : "") << "\n";
  if (!std::isfinite(b.error_upper)) {
    s << "  upper: none proven (no witness's error could be bounded: X beyond the double range leaves no double weights)\n";
  } else {
    s << "  upper: " << (embeddings ? "optimised head weights on X" : "an optimised masked witness")
      << " (L-BFGS on the masked softmax from "
      << (embeddings ? "the free masked witness at width min(d_k, rank X) mapped through X" : "the witness above") << ", seed "
      << seed << "), its error certified " << (embeddings ? "in MPFI" : "in doubles with directed rounding")
      << (b.start_error > b.error_upper ? " (the start alone: " + format_upper_bound(b.start_error) + ")" : "") << "\n";
  }
  s << "  lower: " << b.lower_reason;
  if (b.error_lower > 0)
    s << (embeddings ? " (at width min(d_k, rank X))" : "")
      << " (inside the allowed set: every entry it uses exceeds epsilon, so none is masked)";
  s << "\n";
  return s.str();
}

}  // namespace

std::string run_masked_reach(const MaskedReachArguments& m) {
  const Matrix<Rational>& A = m.A;
  const Mask& mask = m.mask;
  validate_masked_target(A, mask, m.target);
  std::optional<Matrix<Rational>> X;
  if (!m.x.empty()) X = read_input(m.x);
  if (!m.check.empty()) {
    const json cert = read_certificate_file(m.check);
    const CertificateCheck c = X ? check_masked_embeddings_certificate(A, *X, mask, cert) : check_masked_reach_certificate(A, mask, cert);
    if (!c.valid) throw input_error(m.check + ": certificate rejected: " + c.reason);
    return m.json ? json_document({{"valid", true}, {"reason", c.reason}}, "check") : "certificate valid: " + c.reason + "\n";
  }
  if (!m.has_dk) throw input_error("--dk is required (the head width to decide)");
  if (m.has_epsilon && !(m.epsilon >= 0 && m.epsilon <= 1))
    throw input_error("--epsilon " + std::to_string(m.epsilon) + " is outside [0, 1] (attention weights lie in [0, 1])");
  ReachOptions o;
  o.bits = m.bits;
  ApproxOptions ao;
  ao.bits = std::max(m.bits, 64u);
  ao.seed = m.seed;
  const bool bound_error = m.has_epsilon || A.rows() <= approx_default_limit;
  std::optional<MaskedEmbeddingsReach> emb;
  std::optional<MaskedReachResult> free;
  std::optional<ApproxBounds> approx;
  if (X) {
    try {
      emb = reach_with_embeddings(A, *X, m.dk, mask, o);
      if (bound_error) approx = approx_error_bounds(A, *X, m.dk, mask, ao);
    } catch (const input_error& e) {  // name the file in messages about X
      if (e.subject() != "embeddings X") throw;
      throw input_error(m.x + ": " + e.what(), e.subject());
    }
  } else {
    free = reach(A, m.dk, mask, o);
    if (bound_error) approx = approx_error_bounds(A, m.dk, mask, ao);
  }
  const MaskedReachResult& r = emb ? emb->result : *free;
  const ApproxBounds* approx_ptr = approx ? &*approx : nullptr;
  const std::optional<double> asked = m.has_epsilon ? std::optional<double>(m.epsilon) : std::nullopt;
  const json cert = emb ? make_masked_embeddings_certificate(A, *X, mask, *emb, approx_ptr, asked)
                        : make_masked_reach_certificate(A, mask, r, approx_ptr, asked);
  if (!m.certificate.empty()) write_text_file(m.certificate, cert.dump(1) + "\n");
  if (!m.svg.empty()) write_text_file(m.svg, masked_reach_svg(A, mask, r, approx_ptr, m.target));
  // The witness the text and "max_abs_error" describe: the weights on X, or Q and K.
  std::optional<double> witness_error;
  if (emb) {
    if (std::isfinite(emb->weights_max_abs_error)) witness_error = emb->weights_max_abs_error;
  } else if (r.witness) {
    witness_error = r.witness->max_abs_error;
  }
  if (m.json) {
    json j = masked_json(r, rows_sum_to_one(A), emb ? "embeddings" : "free");
    j["max_abs_error"] = witness_error ? upper_bound_json(*witness_error) : json(nullptr);
    j["certificate"] = cert;
    if (emb) {
      j["x_full_row_rank"] = emb->x_full_row_rank;
      j["W_Q"] = matrix_json(emb->WQ);
      j["W_K"] = matrix_json(emb->WK);
    }
    if (approx) add_approximate_json(j, *approx, m.seed, emb.has_value(), asked);
    return json_document(j, "reach");
  }
  std::string out = approx && m.has_epsilon ? epsilon_line(*approx, m.epsilon) : "";
  std::optional<double> best = witness_error;
  if (approx && (!best || approx->error_upper < *best)) best = approx->error_upper;
  out += narrate_masked(m.target, r, rows_sum_to_one(A), best, emb.has_value());
  if (emb) {
    out += "head weights W^Q, W^K on X (--json lists them): max |masked softmax((X W^Q)(X W^K)^T / sqrt(d_k)) - A| <= " +
           (witness_error ? format_upper_bound(*witness_error) + " (certified)\n" : std::string("not bounded (X beyond the double range)\n"));
    out += "question: fixed embeddings X from " + m.x + " (scores X W^Q W^K^T X^T / sqrt(d_k))";
    out += emb->x_full_row_rank ? " - X has full row rank, so every score matrix is reachable through X and the masked answer above is the answer.\n"
                                : " - X does not have full row rank: only the free masked floor's lower bound is proven for it.\n";
  }
  if (approx) out += masked_bounds_lines(*approx, m.seed, emb.has_value());
  else out += "how close: not computed for n > " + std::to_string(approx_default_limit) + " (pass --epsilon E to bound it)\n";
  return out;
}

}  // namespace attnrank::cli
