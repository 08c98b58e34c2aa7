// Writing and checking masked certificates (attnrank/reach/masked_certificate.hpp).
#include <attnrank/reach/masked_certificate.hpp>
#include <attnrank/reach/detail/approximate_certificate.hpp>
#include <attnrank/reach/detail/certificate_parts.hpp>

#include <attnrank/io/detail/json_fields.hpp>
#include <attnrank/io/json.hpp>
#include <attnrank/linalg/exact_rank.hpp>
#include <attnrank/reach/embeddings.hpp>

#include <algorithm>
#include <cmath>

namespace attnrank {
namespace {

using Eigen::Index;
using nlohmann::json;

/// The minors of masked blocks are re-proven in MPFI up to this size and in
/// double balls beyond (a causal staircase at n = 512 has a thousand blocks).
constexpr Index mpfi_minor_limit = 64;

bool is_leading(const std::vector<Index>& v) {
  for (std::size_t t = 0; t < v.size(); ++t)
    if (v[t] != static_cast<Index>(t)) return false;
  return true;
}

json block_json(const MaskedBlock& b) {
  json j{{"size", {b.rows.size(), b.cols.size()}}, {"floor_lower", b.lower}, {"floor_upper", b.upper}};
  if (b.lower > 0) {
    if (b.minor_with_ones_row) j["ones_row"] = true;
    if (!b.minor_with_ones_row && is_leading(b.minor_rows) && is_leading(b.minor_cols)) {
      j["minor"] = "leading";
    } else {
      std::vector<Index> rows, cols;  // as the target's own (1-based) indices
      for (Index r : b.minor_rows) rows.push_back(b.rows[static_cast<std::size_t>(r)]);
      for (Index c : b.minor_cols) cols.push_back(b.cols[static_cast<std::size_t>(c)]);
      j["minor_rows"] = detail::one_based(rows);
      j["minor_cols"] = detail::one_based(cols);
    }
  }
  json up = json::object();
  if (b.kernel.cols() > 0) {
    json bases = json::array();
    for (const Integer& p : b.bases) bases.push_back(p.str());
    up["bases"] = bases;
    up["kernel"] = detail::columns_json(b.kernel);
  }
  j["upper_proof"] = up;
  return j;
}

json blocks_json(const std::vector<MaskedBlock>& blocks) {
  json out = json::array();
  for (const MaskedBlock& b : blocks) out.push_back(block_json(b));
  return out;
}

/// Positions of target indices `targets` (from a certificate) in `within`;
/// throws unless each is there, once.
std::vector<Index> positions_in(const json& targets, const std::vector<Index>& within, Index n) {
  const std::vector<Index> absolute = detail::zero_based(targets, n);
  std::vector<Index> out;
  for (Index t : absolute) {
    const auto it = std::find(within.begin(), within.end(), t);
    if (it == within.end()) throw std::invalid_argument("a minor index lies outside its block");
    out.push_back(static_cast<Index>(it - within.begin()));
  }
  return out;
}

/// Re-proves one block's claimed bounds; returns {lower, upper}. The block
/// comes from masked_block_layout; that every position of it is allowed (what
/// both the staircase formula and the rectangle bound assume: a completion
/// restricts to it) is checked here again, entry by entry.
std::pair<Index, Index> check_block(const Matrix<Rational>& A, const Mask& mask, const AllowedBlock& block, const json& j,
                                    unsigned bits, const std::string& what) {
  const Index n = A.rows();
  const Index r = static_cast<Index>(block.rows.size()), m = static_cast<Index>(block.cols.size());
  for (Index i : block.rows)
    for (Index k : block.cols)
      if (!mask.allows(i, k)) throw std::invalid_argument(what + " is not fully allowed by the mask");
  detail::require_fields(j, {"size", "floor_lower", "floor_upper", "upper_proof"},
                         {"minor", "minor_rows", "minor_cols", "ones_row"}, what);
  const json& size = j.at("size");
  if (!size.is_array() || size.size() != 2 || detail::json_integer(size[0]) != r || detail::json_integer(size[1]) != m)
    throw std::invalid_argument(what + " is not " + std::to_string(r) + " x " + std::to_string(m) +
                                ", the size the mask gives it");
  const Index lower = detail::json_integer(j.at("floor_lower")), upper = detail::json_integer(j.at("floor_upper"));
  const Index shape = block_shape(r, m);
  if (lower < 0 || upper > shape || lower > upper) throw std::invalid_argument(what + ": bounds out of order");
  std::vector<Index> minor_rows, minor_cols;
  // "ones_row": true: the minor is [log A_{minor_rows, minor_cols}; 1^T], one more column than rows.
  const bool ones_row = j.contains("ones_row");
  if (ones_row && !(j.at("ones_row").is_boolean() && j.at("ones_row").get<bool>() && j.contains("minor_rows")))
    throw std::invalid_argument(what + ": \"ones_row\" is true or absent, and comes with minor_rows and minor_cols");
  if (j.contains("minor")) {
    if (j.contains("minor_rows") || j.contains("minor_cols")) throw std::invalid_argument(what + ": \"minor\" stands alone");
    detail::json_choice(j.at("minor"), {"leading"}, what + " minor");
    minor_rows = minor_cols = detail::iota_indices(lower);
  } else if (lower > 0) {
    if (!j.contains("minor_rows") || !j.contains("minor_cols")) throw std::invalid_argument(what + ": floor_lower > 0 needs its minor");
    minor_rows = positions_in(j.at("minor_rows"), block.rows, n);
    minor_cols = positions_in(j.at("minor_cols"), block.cols, n);
  } else if (j.contains("minor_rows") || j.contains("minor_cols")) {
    throw std::invalid_argument(what + ": floor_lower = 0 has no minor");
  }
  if (static_cast<Index>(minor_rows.size()) != lower ||
      static_cast<Index>(minor_cols.size()) != lower + (ones_row ? 1 : 0))
    throw std::invalid_argument(what + ": the minor's size is not floor_lower" +
                                std::string(ones_row ? " (rows) and floor_lower + 1 (columns)" : ""));
  if (ones_row) {
    std::vector<Index> rows, cols;
    for (Index t : minor_rows) rows.push_back(block.rows[static_cast<std::size_t>(t)]);
    for (Index t : minor_cols) cols.push_back(block.cols[static_cast<std::size_t>(t)]);
    detail::check_ones_row_minor_proof(A(rows, cols), bits, what + " floor_lower", mpfi_minor_limit);
  } else if (lower > 0) {  // only the minor's rows of the block are read (a causal staircase has a thousand blocks)
    std::vector<Index> rows;
    for (Index t : minor_rows) rows.push_back(block.rows[static_cast<std::size_t>(t)]);
    detail::check_minor_proof(A(rows, block.cols), detail::iota_indices(lower), minor_cols, bits, what + " floor_lower",
                              mpfi_minor_limit);
  }
  const json& up = j.at("upper_proof");
  if (up.is_object() && up.empty()) {
    if (upper != shape) throw std::invalid_argument(what + ": floor_upper below the block's shape needs a kernel proof");
  } else {
    detail::check_kernel_proof(A(block.rows, block.cols), up, upper, what + " floor_upper");
  }
  return {lower, upper};
}

/// Re-proves the floor bounds (no zero entry), then the verdict: with
/// floor_decides (free scores, or X of full row rank) as for the free question,
/// otherwise `unreachable` below floor_lower and `undecided` from there. Throws on failure.
void check_floor(const Matrix<Rational>& A, const Mask& mask, const json& c, Index dk, const std::string& verdict,
                 bool floor_decides) {
  const Index n = A.rows();
  for (const char* k : {"floor_lower", "floor_upper", "nested", "bits", "blocks", "overlaps"})
    if (!c.contains(k)) throw std::invalid_argument(std::string("the certificate has no field \"") + k + "\"");
  const MaskedBlockLayout layout = masked_block_layout(mask);
  if (detail::json_bool(c.at("nested"), "nested") != layout.nested)
    throw std::invalid_argument(layout.nested ? "the mask is nested, the certificate says it is not"
                                              : "the mask is not nested, the certificate says it is");
  const unsigned bits = detail::json_precision(c.at("bits"));
  const json &blocks = c.at("blocks"), &overlaps = c.at("overlaps");
  if (!blocks.is_array() || blocks.size() != layout.blocks.size() || !overlaps.is_array() ||
      overlaps.size() != layout.overlaps.size())
    throw std::invalid_argument("the certificate's blocks are not the " + std::to_string(layout.blocks.size()) +
                                " blocks and " + std::to_string(layout.overlaps.size()) + " overlaps the mask has");
  Index block_lower = 0, block_upper = 0, overlap_lower = 0, overlap_upper = 0, best = 0;
  for (std::size_t k = 0; k < layout.blocks.size(); ++k) {
    const auto [lo, hi] = check_block(A, mask, layout.blocks[k], blocks[k], bits, "block " + std::to_string(k + 1));
    block_lower += lo;
    block_upper += hi;
    best = std::max(best, lo);
  }
  for (std::size_t k = 0; k < layout.overlaps.size(); ++k) {
    const auto [lo, hi] = check_block(A, mask, layout.overlaps[k], overlaps[k], bits, "overlap " + std::to_string(k + 1));
    overlap_lower += lo;
    overlap_upper += hi;
  }
  // What the proven block bounds give: the staircase formula for nested masks
  // (and any single block, whose floor a completion restricts to); the best
  // rectangle and n - 1 otherwise.
  const Index most = std::max<Index>(n - 1, 0);
  const Index proven_lower = layout.nested ? std::max({block_lower - overlap_upper, best, Index{0}}) : best;
  const Index proven_upper = layout.nested ? std::min(block_upper - overlap_lower, most) : most;
  const Index lower = detail::json_integer(c.at("floor_lower")), upper = detail::json_integer(c.at("floor_upper"));
  if (lower < 0 || upper > most || lower > upper) throw std::invalid_argument("floor bounds out of order");
  if (lower > proven_lower)
    throw std::invalid_argument("floor_lower = " + std::to_string(lower) + " exceeds what the blocks prove (" +
                                std::to_string(proven_lower) + ")");
  if (upper < proven_upper)
    throw std::invalid_argument("floor_upper = " + std::to_string(upper) + " is below what the blocks prove (" +
                                std::to_string(proven_upper) + ")");
  if (verdict == "unreachable" && !(dk < lower)) throw std::invalid_argument("unreachable needs d_k < floor_lower");
  if (!floor_decides) {
    if (verdict == "reachable") throw std::invalid_argument("reachable does not follow: X does not have full row rank");
    if (verdict == "undecided" && dk < lower) throw std::invalid_argument("undecided, yet d_k < floor_lower decides");
    return;
  }
  if (verdict == "reachable" && !(upper <= dk)) throw std::invalid_argument("reachable needs floor_upper <= d_k");
  if (verdict == "undecided" && !(lower <= dk && dk < upper)) throw std::invalid_argument("undecided, yet the bounds decide");
}

const std::vector<const char*> required_fields = {"format", "question", "mask", "target_fingerprint", "n", "dk", "verdict", "digest"};
const std::vector<const char*> optional_fields = {"zero_entry", "floor_lower", "floor_upper", "nested", "bits",
                                                  "blocks", "overlaps", "witness", "approximate"};

json witness_json(const Witness& w) {
  return {{"Q", matrix_json(w.Q)}, {"K", matrix_json(w.K)}, {"error_bits", w.error_bits}, {"max_abs_error", w.max_abs_error}};
}

/// The claims of a masked result: mask, n, d_k, verdict, the zero entry or the
/// floor with its blocks, and the witness (whose bound is finite).
json masked_claims(const Matrix<Rational>& A, const Mask& mask, const MaskedReachResult& r, const char* question) {
  if (r.mask != mask.name()) throw std::invalid_argument("a masked certificate: the result is for another mask");
  json c{{"format", reach_certificate_format},
         {"question", question},
         {"mask", r.mask},
         {"target_fingerprint", target_fingerprint(A)},
         {"n", r.n},
         {"dk", r.dk},
         {"verdict", to_string(r.verdict)}};
  if (r.has_zero_entry) {
    c["zero_entry"] = {r.zeros[0].first + 1, r.zeros[0].second + 1};
  } else {
    c["floor_lower"] = r.floor.lower;
    c["floor_upper"] = r.floor.upper;
    c["nested"] = r.floor.nested;
    c["bits"] = r.floor.lower_bits;
    c["blocks"] = blocks_json(r.floor.blocks);
    c["overlaps"] = blocks_json(r.floor.overlaps);
  }
  if (r.witness && std::isfinite(r.witness->max_abs_error)) c["witness"] = witness_json(*r.witness);
  return c;
}

void add_approximate(json& c, Index dk, const ApproxBounds* approx, std::optional<double> epsilon) {
  if (!approx) return;
  if (approx->dk != dk) throw std::invalid_argument("a masked certificate: the approximate bounds are for another d_k");
  c["approximate"] = detail::approximate_claims(*approx, epsilon);
}

/// Everything a masked certificate claims, re-proven (after the question and
/// the field list): the mask, the header, d_k in [1, max_dk], the zero entry or
/// the floor and the verdict (see check_floor), the witness, the approximate
/// bounds. X: the embeddings (its weights' checks are the caller's), or null.
void check_masked_claims(const Matrix<Rational>& A, const Mask& mask, const json& c, const Matrix<Rational>* X,
                         Index max_dk, bool floor_decides) {
  const std::string named = detail::json_string(c.at("mask"), "mask");
  if (named != mask.name())
    throw std::invalid_argument("the certificate is for mask " + named + ", not for the mask given (" + mask.name() + ")");
  detail::check_header(c, A);
  validate_masked_target(A, mask, "target");
  const Index n = A.rows();
  const Index dk = detail::json_integer(c.at("dk"));
  if (dk < 1 || dk > max_dk) throw std::invalid_argument("d_k = " + std::to_string(dk) + " is outside [1, " + std::to_string(max_dk) + "]");
  const std::string verdict = detail::json_choice(c.at("verdict"), {"reachable", "unreachable", "undecided"}, "verdict");
  if (c.contains("zero_entry")) {
    for (const char* k : {"floor_lower", "floor_upper", "nested", "bits", "blocks", "overlaps"})
      if (c.contains(k)) throw std::invalid_argument(std::string("a zero-entry certificate has no field \"") + k + "\"");
    const json& z = c.at("zero_entry");
    if (!z.is_array() || z.size() != 2) throw std::invalid_argument("zero_entry must be [row, column]");
    const Index row = detail::json_integer(z.at(0)), column = detail::json_integer(z.at(1));
    if (row < 1 || column < 1 || row > n || column > n || A(row - 1, column - 1) != 0 || !mask.allows(row - 1, column - 1))
      throw std::invalid_argument("the claimed zero entry is not a zero at an allowed position");
    if (verdict != "unreachable") throw std::invalid_argument("a zero at an allowed position makes the target unreachable");
  } else {
    check_floor(A, mask, c, std::min(dk, n), verdict, floor_decides);
  }
  if (c.contains("witness")) {
    const json& w = c.at("witness");
    detail::require_fields(w, {"Q", "K", "error_bits", "max_abs_error"}, {}, "witness");
    const double stated = detail::json_bound(w.at("max_abs_error"), "witness max_abs_error");
    const double recomputed = certified_masked_witness_error(A, mask, detail::matrix_from_json(w.at("Q"), n, dk),
                                                             detail::matrix_from_json(w.at("K"), n, dk),
                                                             detail::json_precision(w.at("error_bits")));
    if (!(recomputed <= stated))
      throw std::invalid_argument("the witness misses its stated error bound (recomputed " + std::to_string(recomputed) + ")");
  }
  if (c.contains("approximate")) detail::check_approximate_claims(A, X, dk, c.at("approximate"), &mask);
}

std::string verified(const Mask& mask, const json& c, const char* what) {
  return "verified: mask " + mask.name() + (c.contains("zero_entry") ? ", the zero at an allowed position" : ", floor bounds block by block") +
         ", verdict, " + what +
         (c.contains("approximate") ? " and the approximate bounds" : "") + " re-proven from the target";
}

}  // namespace

nlohmann::json make_masked_reach_certificate(const Matrix<Rational>& A, const Mask& mask, const MaskedReachResult& r,
                                             const ApproxBounds* approx, std::optional<double> epsilon) {
  json c = masked_claims(A, mask, r, "masked");
  add_approximate(c, r.dk, approx, epsilon);
  c["digest"] = detail::digest_of(c);
  return c;
}

CertificateCheck check_masked_reach_certificate(const Matrix<Rational>& A, const Mask& mask, const nlohmann::json& c) {
  const auto reject = [](std::string why) { return CertificateCheck{false, std::move(why)}; };
  try {
    detail::check_format(c);
    if (c.contains("question") && c.at("question") == "masked_embeddings")
      return reject("this certificate is for a masked head on fixed embeddings: check it with the same embeddings X");
    if (c.contains("question") && c.at("question") != "masked")
      return reject("this certificate is not for a masked head: check it without a mask");
    detail::require_fields(c, required_fields, optional_fields, "the certificate");
    check_masked_claims(A, mask, c, nullptr, A.rows(), true);
    return CertificateCheck{true, verified(mask, c, "witness error")};
  } catch (const std::exception& e) {
    return reject(e.what());
  }
}

nlohmann::json make_masked_embeddings_certificate(const Matrix<Rational>& A, const Matrix<Rational>& X, const Mask& mask,
                                                  const MaskedEmbeddingsReach& e, const ApproxBounds* approx,
                                                  std::optional<double> epsilon) {
  json c = masked_claims(A, mask, e.result, "masked_embeddings");
  c["x_fingerprint"] = target_fingerprint(X);
  c["x_full_row_rank"] = e.x_full_row_rank;
  // Weights whose error could not be bounded (X beyond the double range) prove nothing.
  if (std::isfinite(e.weights_max_abs_error))
    c["weights"] = {{"W_Q", matrix_json(e.WQ)},
                    {"W_K", matrix_json(e.WK)},
                    {"error_bits", e.weights_error_bits},
                    {"max_abs_error", e.weights_max_abs_error}};
  add_approximate(c, e.result.dk, approx, epsilon);
  c["digest"] = detail::digest_of(c);
  return c;
}

CertificateCheck check_masked_embeddings_certificate(const Matrix<Rational>& A, const Matrix<Rational>& X,
                                                     const Mask& mask, const nlohmann::json& c) {
  const auto reject = [](std::string why) { return CertificateCheck{false, std::move(why)}; };
  try {
    detail::check_format(c);
    if (!c.contains("question") || c.at("question") != "masked_embeddings")
      return reject("this certificate is not for a masked head on fixed embeddings");
    std::vector<const char*> required = required_fields, optional = optional_fields;
    required.insert(required.end(), {"x_fingerprint", "x_full_row_rank"});
    optional.push_back("weights");
    detail::require_fields(c, required, optional, "the certificate");
    if (detail::json_string(c.at("x_fingerprint"), "x_fingerprint") != target_fingerprint(X))
      return reject("the certificate is for different embeddings X");
    detail::validate_embeddings_question(A, X, 1);
    const bool full = exact_kernel_basis(Matrix<Rational>(X.transpose())).cols() == 0;
    if (full != detail::json_bool(c.at("x_full_row_rank"), "x_full_row_rank")) return reject("X's row rank is not as claimed");
    check_masked_claims(A, mask, c, &X, X.cols(), full);
    if (c.contains("weights")) {
      const json& w = c.at("weights");
      detail::require_fields(w, {"W_Q", "W_K", "error_bits", "max_abs_error"}, {}, "weights");
      const Index dk = detail::json_integer(c.at("dk"));
      const double stated = detail::json_bound(w.at("max_abs_error"), "weights max_abs_error");
      const double recomputed = detail::certified_embedding_error(
          A, X, detail::matrix_from_json(w.at("W_Q"), X.cols(), dk), detail::matrix_from_json(w.at("W_K"), X.cols(), dk),
          detail::json_precision(w.at("error_bits")), &mask);
      if (!(recomputed <= stated)) return reject("the head weights miss their stated error bound");
    }
    return CertificateCheck{true, verified(mask, c, "head weights' and witness's errors") + " and X"};
  } catch (const std::exception& e) {
    return reject(e.what());
  }
}

}  // namespace attnrank
