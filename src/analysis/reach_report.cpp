// The reach analysis as the JSON document of the CLI contract and as the report
// for people (analysis/reach_analysis.hpp): one writer each, for free and masked
// heads, with or without embeddings.
#include <attnrank/analysis/reach_analysis.hpp>

#include <attnrank/analysis/document.hpp>
#include <attnrank/io/json.hpp>
#include <attnrank/numbers/decimal.hpp>

#include <cmath>
#include <sstream>

namespace attnrank {
namespace {

using nlohmann::json;

/// The line every unmasked report of a causal pattern adds.
const MaskedReachResult& masked_result(const ReachAnalysis& r) {
  return r.masked ? *r.masked : r.masked_embeddings->result;
}

const ReachResult& free_result(const ReachAnalysis& r) { return r.free ? *r.free : r.embeddings->result; }

std::pair<Eigen::Index, Eigen::Index> first_zero(const ReachAnalysis& r) {
  return r.is_masked() ? masked_result(r).zeros.at(0) : free_result(r).zeros.at(0);
}

json blocks_json(const std::vector<MaskedBlock>& blocks) {
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

/// "a 3 x 3 minor of log(A) C proven nonsingular (53 bits, ||I - R M|| <= 6.09e-15)".
std::string free_lower_reason(const FloorBounds& f) {
  return "a " + std::to_string(f.lower) + " x " + std::to_string(f.lower) +
         " minor of log(A) C proven nonsingular (" + std::to_string(f.lower_bits) +
         " bits, ||I - R M|| <= " + format_upper_bound(f.minor_residual) + ")";
}

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

/// The line that answers --epsilon first, in the user's terms.
std::string epsilon_line(const ApproxBounds& b, double epsilon) {
  const EpsilonVerdict v = epsilon_verdict(b, epsilon);
  std::ostringstream s;
  s << "epsilon " << epsilon << ": " << to_string(v) << " - ";
  if (v == EpsilonVerdict::within)
    s << "a head of width " << b.dk << " comes within " << format_upper_bound(b.error_upper)
      << " <= epsilon (certified witness)\n";
  else if (v == EpsilonVerdict::not_within)
    s << "every head of width " << b.dk << " misses some entry by more than epsilon (certified: E* >= "
      << format_lower_bound(b.error_lower) << ")\n";
  else
    s << "not settled: the best certified witness misses by " << format_upper_bound(b.error_upper)
      << " and no head is proven to miss by more than epsilon (the problem is NP-hard for d_k > 1; the bounds "
         "below are the honest answer)\n";
  return s.str();
}

/// The verdict, floor and witness lines of both questions.
std::string narrate(const ReachAnalysis& r) {
  const bool masked = r.is_masked();
  const std::string head = masked ? "masked head" : "head";
  std::ostringstream s;
  s << "target " << r.target_name << " (n = " << r.n << "), head width d_k = " << r.dk;
  if (masked) s << ", mask " << r.mask_name << ": masked scores are -inf, so only the allowed entries are asked about\n";
  else s << (r.on_embeddings() ? ", Q = X W^Q and K = X W^K for the given X\n" : ", free Q and K\n");
  if (!r.rows_sum_to_one)
    s << "  note: " << rows_not_normalised_note << "\n";
  const std::string close = r.best_error ? std::string("a ") + (masked ? "masked " : "") + "width-" +
                                               std::to_string(r.dk) + " head comes within " +
                                               format_upper_bound(*r.best_error) + " (certified)"
                                         : "no witness error could be bounded";
  if (r.has_zero_entry()) {
    s << "verdict: unreachable - " << r.reason() << "; " << close << ".\n";
  } else {
    s << (masked ? "  floor    min rank of S = log A + c 1^T on the allowed set: " : "  floor    rank(log(A) C): ");
    if (r.floor_lower() == r.floor_upper()) s << "= " << r.floor_lower();
    else s << r.floor_lower() << " <= floor <= " << r.floor_upper();
    if (masked) {
      const MaskedFloorBounds& f = masked_result(r).floor;
      s << "\n           lower: " << f.lower_reason << " (" << f.lower_bits << " bits)\n";
      s << "           upper: " << f.upper_reason << "\n";
      s << "           " << (f.nested ? "blocks B_k" : "rectangles") << " (rows x columns: floor): "
        << block_list(f.blocks) << "\n";
      if (f.nested && !f.overlaps.empty()) s << "           overlaps O_k: " << block_list(f.overlaps) << "\n";
    } else {
      const FloorBounds& f = free_result(r).floor;
      s << "\n           lower: " << free_lower_reason(f);
      if (f.lower_is_partial) s << " - enough for the verdict; full_floor for the whole bound";
      s << "\n           upper: " << f.upper_reason << "\n";
    }
    s << "  ceiling  rank(Q K^T) <= d_k = " << r.dk << "\n";
    s << "verdict: " << to_string(r.verdict()) << " - ";
    if (r.verdict() == Verdict::unreachable)
      s << "no " << head << " of width " << r.dk << " produces these entries exactly, as written; " << close << ".\n";
    else if (r.verdict() == Verdict::reachable)
      s << "a " << head << " of width " << r.dk << " produces these entries exactly; " << close << ".\n";
    else
      s << "whether a " << head << " of width " << r.dk << " produces these entries exactly is not settled"
        << (masked ? "" : " at this precision") << "; " << close << ".\n";
    s << "  because " << r.reason() << ".\n";
    if (!r.hint().empty()) s << "  to settle it: " << r.hint() << ".\n";
  }
  if (masked) {
    const Witness* w = r.witness();
    if (w && std::isfinite(w->max_abs_error))
      s << "witness at d_k = " << r.dk
        << (r.on_embeddings()            ? " (Q = X W^Q, K = X W^K in doubles: the free masked witness through X's pseudo-inverse)"
            : masked_result(r).floor.nested ? " (minimal-rank completion or row means, then alternating least squares)"
                                         : " (alternating least squares on the allowed set)")
        << ": max |masked softmax(Q K^T / sqrt(d_k)) - A| <= " << format_upper_bound(w->max_abs_error)
        << " (certified)\n";
    return s.str();
  }
  if (r.witness_error && !std::isfinite(*r.witness_error))
    s << "witness at d_k = " << r.dk << ": computed, but its error could not be bounded (nothing is claimed for it)\n";
  else if (r.witness_error)
    s << "witness at d_k = " << r.dk
      << (r.on_embeddings() ? " (head weights W^Q, W^K on X; the JSON lists them)" : " (truncated SVD of log(A) C)")
      << ": max |softmax(Q K^T / sqrt(d_k)) - A| <= " << format_upper_bound(*r.witness_error) << " (certified)\n";
  else if (r.on_embeddings())
    s << "witness: none (the embeddings X are beyond the double range, so no double weights act on them)\n";
  else
    s << "witness: none\n";
  return s.str();
}

/// How a bound's witness error was certified, from the bits it records.
std::string certified_how(unsigned bits) {
  return bits == 53 ? "in doubles with directed rounding" : "in MPFI (" + std::to_string(bits) + " bits)";
}

/// error_lower <= E* <= error_upper with their proofs, in words.
std::string bounds_lines(const ReachAnalysis& r, const ApproxBounds& b) {
  const bool masked = r.is_masked(), embeddings = r.on_embeddings();
  const unsigned bits = embeddings ? b.weights_error_bits : b.witness.error_bits;
  std::ostringstream s;
  s << "how close: " << format_lower_bound(b.error_lower) << " <= E* <= " << format_upper_bound(b.error_upper)
    << " (certified both ways), E* = the smallest max |" << (masked ? "masked " : "")
    << "softmax(Q K^T / sqrt(d_k)) - A| of any " << (masked ? "masked " : "") << "head of width " << b.dk
    << (embeddings ? " with Q = X W^Q, K = X W^K" : "") << "\n";
  if (!std::isfinite(b.error_upper)) {
    s << "  upper: none proven (no witness's error could be bounded: X beyond the double range leaves no double "
         "weights)\n";
  } else if (!r.refinement.ran) {
    s << "  upper: "
      << (masked ? (embeddings ? "the free masked witness at width min(d_k, rank X) mapped through X"
                               : "the masked witness above")
                 : (embeddings ? "the log-domain start (truncated SVD of log(A) C) mapped through X's pseudo-inverse"
                               : "the log-domain start (truncated SVD of log(A) C)"))
      << (b.start_error > b.error_upper ? ", improved by a short search of fixed work" : "") << ", its error certified "
      << certified_how(bits)
      << (b.start_error > b.error_upper ? " (the start alone: " + format_upper_bound(b.start_error) + ")" : "") << "\n";
  } else if (masked) {
    s << "  upper: " << (embeddings ? "optimised head weights on X" : "an optimised masked witness")
      << " (L-BFGS on the masked softmax from "
      << (embeddings ? "the free masked witness at width min(d_k, rank X) mapped through X" : "the witness above")
      << ", seed " << r.seed << "), its error certified " << certified_how(bits)
      << (b.start_error > b.error_upper ? " (the start alone: " + format_upper_bound(b.start_error) + ")" : "") << "\n";
  } else {
    s << "  upper: " << (embeddings ? "optimised head weights on X" : "an optimised witness")
      << " (L-BFGS from the log-domain and floored-target starts and seeded restarts, seed " << r.seed
      << "), its error certified " << certified_how(bits)
      << (b.start_error > b.error_upper ? " (the SVD start alone: " + format_upper_bound(b.start_error) + ")" : "")
      << "\n";
  }
  s << "  lower: " << b.lower_reason;
  if (masked && b.error_lower > 0)
    s << (embeddings ? " (at width min(d_k, rank X))" : "")
      << " (inside the allowed set: every entry it uses exceeds epsilon, so none is masked)";
  s << "\n" << refinement_line(r.refinement);
  return s.str();
}

}  // namespace

json to_json(const ReachAnalysis& r) {
  json j{{"n", r.n},
         {"d_k", r.dk},
         {"question", r.on_embeddings() ? "embeddings" : "free"},
         {"mask", r.mask_name},
         {"verdict", to_string(r.verdict())},
         {"reason", r.reason()},
         {"rows_sum_to_one", r.rows_sum_to_one},
         {"max_abs_error", r.witness_error ? upper_bound_json(*r.witness_error) : json(nullptr)},
         {"certificate", r.certificate}};
  if (r.has_zero_entry()) {
    const auto [row, column] = first_zero(r);
    j["floor_lower"] = nullptr;
    j["floor_upper"] = nullptr;
    j["zero_entry"] = {{"row", row + 1}, {"column", column + 1}};
  } else {
    j["floor_lower"] = r.floor_lower();
    j["floor_upper"] = r.floor_upper();
    j["bits"] = r.floor_bits();
    if (r.is_masked()) {
      const MaskedFloorBounds& f = masked_result(r).floor;
      j["floor_lower_reason"] = f.lower_reason;
      j["floor_upper_reason"] = f.upper_reason;
      j["nested"] = f.nested;
      j["blocks"] = blocks_json(f.blocks);
      j["overlaps"] = blocks_json(f.overlaps);
    } else {
      const FloorBounds& f = free_result(r).floor;
      j["floor_lower_reason"] = free_lower_reason(f);
      j["floor_upper_reason"] = f.upper_reason;
      j["floor_lower_is_partial"] = f.lower_is_partial;
    }
  }
  if (!r.hint().empty()) j["hint"] = r.hint();
  if (r.zeros_causal) j["note"] = causal_zeros_note;
  // The witness heads: the error bounds' one when they ran, else the decision's.
  if (r.on_embeddings()) {
    const EmbeddingsReach* e = r.embeddings ? &*r.embeddings : nullptr;
    j["x_full_row_rank"] = e ? e->x_full_row_rank : r.masked_embeddings->x_full_row_rank;
    if (e) j["constraints"] = e->constraints;
    j["W_Q"] = matrix_json(e ? e->WQ : r.masked_embeddings->WQ);
    j["W_K"] = matrix_json(e ? e->WK : r.masked_embeddings->WK);
  } else if (const Witness* w = r.witness(); w && !r.approx) {
    j["witness_Q"] = matrix_json(w->Q);
    j["witness_K"] = matrix_json(w->K);
  }
  if (const std::optional<ApproxBounds>& b = r.approx) {
    j["error_lower"] = lower_bound_json(b->error_lower);
    j["error_upper"] = upper_bound_json(b->error_upper);
    j["error_lower_reason"] = b->lower_reason;
    j["refinement"] = to_json(r.refinement);
    j["seed"] = r.seed;
    if (r.on_embeddings()) {
      j["witness_W_Q"] = matrix_json(b->WQ);
      j["witness_W_K"] = matrix_json(b->WK);
    } else {
      j["witness_Q"] = matrix_json(b->witness.Q);
      j["witness_K"] = matrix_json(b->witness.K);
    }
    if (r.epsilon) {
      j["epsilon"] = *r.epsilon;
      j["epsilon_verdict"] = to_string(epsilon_verdict(*b, *r.epsilon));
    }
  }
  return json_document(j, "reach");
}

std::string to_text(const ReachAnalysis& r) {
  std::string out = r.approx && r.epsilon ? epsilon_line(*r.approx, *r.epsilon) : "";
  out += narrate(r);
  if (r.zeros_causal) out += std::string("note: ") + causal_zeros_note + "\n";
  const auto not_computed = [&] {
    return "how close: not computed for n > " + std::to_string(r.error_bounds_size_limit) +
           " (an epsilon bounds it)\n";
  };
  if (r.masked_embeddings) {
    const MaskedEmbeddingsReach& e = *r.masked_embeddings;
    out += "head weights W^Q, W^K on X (the JSON lists them): max |masked softmax((X W^Q)(X W^K)^T / sqrt(d_k)) - A| <= " +
           (r.witness_error ? format_upper_bound(*r.witness_error) + " (certified)\n"
                            : std::string("not bounded (X beyond the double range)\n"));
    out += "question: fixed embeddings X from " + r.x_name + " (scores X W^Q W^K^T X^T / sqrt(d_k))";
    out += e.x_full_row_rank ? " - X has full row rank, so every score matrix is reachable through X and the masked "
                               "answer above is the answer.\n"
                             : " - X does not have full row rank: only the free masked floor's lower bound is proven "
                               "for it.\n";
  }
  out += r.approx ? bounds_lines(r, *r.approx) : not_computed();
  if (r.embeddings) {
    out += "question: fixed embeddings X from " + r.x_name + " (scores X W^Q W^K^T X^T / sqrt(d_k))";
    out += r.embeddings->x_full_row_rank
               ? " - X has full row rank, so every score matrix is reachable through X and the free answer above is "
                 "the answer.\n"
               : " - constraints on c: " + r.embeddings->constraints +
                     "; the bounds above are on rank(S) for the admissible S.\n";
  }
  return out;
}

json to_json(const CertificateAnalysis& c) { return json_document({{"valid", c.valid}, {"reason", c.reason}}, "check"); }

std::string to_text(const CertificateAnalysis& c) { return "certificate valid: " + c.reason + "\n"; }

std::string certificate_file_text(const ReachAnalysis& r) { return r.certificate.dump(1) + "\n"; }

}  // namespace attnrank
