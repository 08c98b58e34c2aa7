#include <attnrank/analysis/option_help.hpp>

#include <attnrank/analysis/det_analysis.hpp>
#include <attnrank/analysis/layer_analysis.hpp>
#include <attnrank/analysis/rank_analysis.hpp>
#include <attnrank/analysis/reach_analysis.hpp>
#include <attnrank/analysis/refinement.hpp>
#include <attnrank/analysis/scan_analysis.hpp>
#include <attnrank/attention/kernel_check.hpp>
#include <attnrank/attention/precision_profile.hpp>
#include <attnrank/numbers/decimal.hpp>

#include <stdexcept>

namespace attnrank {
namespace {

std::string number(double x) { return shortest_decimal(x); }

// Texts several questions share: one wording each.
std::string target_text() {
  return "The target attention matrix A, n x n, each row a probability vector (entries >= 0 summing to 1)";
}
std::string mask_text(const std::string& what) {
  return "causal, none, or a 0/1 matrix (1: the query may attend): " + what +
         ", whose masked scores are -inf (the target must be 0 exactly there)";
}
std::string embeddings_text() {
  return "Fixed embeddings X, n x d_model: decide for scores X M X^T (Q = X W^Q, K = X W^K) instead of free scores";
}
std::string seed_text() { return "Seed of the optimiser's restarts (printed in the result; default 1)"; }
std::string refine_text() {
  return "Whether the optimiser (L-BFGS restarts) sharpens the upper bounds: yes; no (the "
         "cheap band only: the starts and a short search of fixed work, reproducible and quick); or, by default, only "
         "where the cheap band leaves the question open (reach's epsilon undecided; width's bracket, when its best "
         "witness is within 8 times epsilon)";
}
std::string time_limit_text() {
  std::string text("Asks for the full search (");  // in steps: GCC 12 misreads "..." + std::string&& under -Werror
  text += number(full_search_flops / default_search_flops);
  text += " times the default's fixed work) within this many seconds in all; 0: no limit, reproducible from the "
          "seed. Without it the optimiser runs a fixed amount of work, so answers never depend on the clock";
  return text;
}
std::string profile_text() {
  std::string text("A precision profile (");  // in steps: GCC 12 misreads "..." + std::string&& under -Werror
  for (const std::string& name : profile_names()) {
    text += name;
    text += ", ";
  }
  text += "or a JSON object or file of one): judge the output and the logsumexp against its certified error budget, "
          "the largest error any correct kernel of that precision may have on these inputs, entry by entry (within, "
          "exceeded: proven, or undecided)";
  return text;
}
std::string max_dk_text() { return "Largest width tried, 1 <= max_dk <= n (default: min(n, 16))"; }
std::string matrix_text() { return "The matrix M, read exactly (every float is the rational it stores)"; }
std::string bits_text(const std::string& what, unsigned default_bits, const std::string& note = "") {
  return what + ", in bits: " + std::to_string(min_precision_bits) + " .. " + std::to_string(max_precision_bits) +
         " (default " + std::to_string(default_bits) + note + ")";
}

std::string descale_text(const std::string& name) {
  return "FlashAttention-3's " + name + " factors, shape (B, H_kv) or (H_kv,): each multiplies its heads exactly";
}

std::vector<QuestionHelp> build() {
  std::vector<QuestionHelp> all;
  const ReachQuestion reach_defaults;
  all.push_back(
      {"reach",
       "Can a head of width d_k produce the attention pattern A exactly? Yes, no or undecided, with a certificate",
       "verdict is reachable or unreachable only with a proof: floor_lower <= rank(log(A) C) <= floor_upper bound the "
       "floor, and the certificate re-checks the verdict; undecided comes with a hint on how to get further. "
       "max_abs_error is a certified upper bound on the error of the witness head (witness_Q, witness_K). "
       "error_lower <= E* <= error_upper, proven both ways, bound the best error of any head of width d_k (computed up "
       "to n = 512, or whenever epsilon asks), and with epsilon, epsilon_verdict is within, not_within or undecided. "
       "refinement says whether the optimiser ran and why.",
       {{"A", target_text()},
        {"d_k", "Head width d_k, 1 <= d_k <= n"},
        {"epsilon",
         "Also decide whether some head of width d_k comes within this max entrywise error of A, in [0, 1]"},
        {"mask", mask_text("decide for a masked head")},
        {"x", embeddings_text()},
        {"bits", bits_text("Precision of the floor's lower bound", reach_defaults.bits, ": doubles; more: MPFI")},
        {"seed", seed_text()},
        {"full_floor", "Always bound the whole floor, not only what the verdict needs; under a mask, also search each block's own minor wherever the staircase's factorisations fall short, whatever it costs (default: no)"},
        {"refine", refine_text()},
        {"time_limit", time_limit_text()}}});
  all.push_back(
      {"check_certificate", "Re-verify a reach certificate against its target, in the library's interval arithmetic",
       "valid is true with the reason when the certificate proves its verdict for this target, mask and embeddings; a "
       "certificate that does not is refused with the reason.",
       {{"A", target_text()},
        {"certificate", "A certificate reach wrote (its JSON document), re-verified against A with the mask and "
                        "embeddings it was made for"},
        {"mask", mask_text("decide for a masked head")},
        {"x", embeddings_text()}}});
  all.push_back(
      {"width", "The smallest head width within epsilon of a target, with certified bounds",
       "width_lower <= w* <= width_upper, proven: every width below width_lower misses epsilon, and at width_upper a "
       "certified witness is within it (width_upper is null when no width up to max_dk has one). profile lists each "
       "width's proven band error_lower <= E* <= error_upper. refinement says whether the optimiser ran and why.",
       {{"A", target_text()},
        {"epsilon", "Largest acceptable max |softmax(Q K^T / sqrt(d_k)) - A| entry, in [0, 1]"},
        {"max_dk", max_dk_text()},
        {"mask", mask_text("widths of a masked head")},
        {"seed", seed_text()},
        {"refine", refine_text()},
        {"time_limit", time_limit_text()}}});
  all.push_back(
      {"rank", "Rank of a matrix: exact, certified bounds, or numeric (SVD)",
       "mode exact: rational arithmetic, rank_lower == rank_upper. certified: rank_lower <= rank <= rank_upper, "
       "proven in floating-point arithmetic. numeric: an SVD with a tolerance, not proven, so its counts are named "
       "approx_rank_lower and approx_rank_upper.",
       {{"M", matrix_text()},
        {"mode", "exact (default), certified or numeric"},
        {"bits", bits_text("Certified mode: working precision", RankQuestion{}.bits, ": doubles")},
        {"tol", "Numeric mode: singular values above it count (default sigma_max max(m, n) eps)"},
        {"top", "Numeric mode: only the top largest singular values (Lanczos), and the distance to rank top"}}});
  const DetQuestion det_defaults;
  all.push_back({"det", "Determinant of a square matrix: exact, or a certified enclosure",
                 "mode exact: det as an exact rational. certified: an enclosure det_lower <= det <= det_upper, its "
                 "decimals rounded outward.",
                 {{"M", matrix_text()},
                  {"mode", "exact (default) or certified"},
                  {"bits", bits_text("Certified mode: working precision", det_defaults.bits, ": doubles")},
                  {"digits", "Significant digits to print, of the exact value and of the enclosure (default " +
                                 std::to_string(det_defaults.digits) + ")"}}});
  all.push_back({"svd", "Certified bounds on the largest singular values of a matrix",
                 "lower <= sigma_i <= upper, proven, for the top largest singular values; a bound that could not be "
                 "proven finite is null.",
                 {{"M", matrix_text()},
                  {"top", "How many singular values, largest first, 1 <= top <= min(rows, cols) (default: all)"},
                  {"gaps", "Also report proven separations sigma_i - sigma_(i+1) >= gap (null: not separated)"}}});
  all.push_back(
      {"layer", "Multi-head attention on your matrices, with every step",
       "Q, K, V, the scores, the weights A and Z of every head, concat and the output. With tier interval or "
       "certified-double every printed digit is proven (an entry on a rounding tie is printed as its certified "
       "enclosure and counted in enclosures); double and mp are not certified, and certified says so.",
       {{"x", "Embeddings X, n x d_model"},
        {"wq", "W^Q, d_model x h d_k (Q = X W^Q)"},
        {"wk", "W^K, d_model x h d_k"},
        {"wv", "W^V, d_model x h d_v"},
        {"wo", "W^O, h d_v x d_model"},
        {"heads", "Number of heads h, at least 1"},
        {"tier", "interval (exact projections, then certified), certified-double (certified, in doubles; hands over "
                 "to interval when a digit is not certain), mp (MPFR, uncertified) or double"},
        {"digits", "Decimals after the point (default: 6 for text; for JSON and Python, 17 significant digits, which "
                   "read back as the doubles computed)"},
        {"significant", "Significant digits instead of decimals (scientific notation: small weights keep their "
                        "digits)"},
        {"bits", bits_text("Working precision of mp and interval", default_layer_bits,
                           "; interval raises it as the digits need")},
        {"mask", "causal, none, or a 0/1 matrix (1: the query may attend): masked scores are -inf; one for every "
                 "head, or one per head in head order"}}});
  all.push_back(
      {"scan", "Every head of an attention tensor (..., n, n): floors, verdicts, error and width bands",
       "One result per head, in index order: the floor bounds; with d_k, the verdict and the certified band "
       "error_lower <= E* <= error_upper at that width; with epsilon, the certified band width_lower <= w* <= "
       "width_upper on the smallest width within epsilon (width_known says how much is known: exact, upper when "
       "only a witness bounds it, range or lower).",
       {{"tensor", "Attention patterns of shape (..., n, n), any leading dimensions (layers, heads, prompts)"},
        {"d_k", "Also the verdict and the certified error band at this head width"},
        {"epsilon", "Also the certified band on the smallest width within this max entrywise error, in [0, 1]"},
        {"mask", "causal, none, or a 0/1 matrix: every head is masked so"},
        {"max_dk", max_dk_text() + ", for epsilon"},
        {"jobs", "Heads computed at once (default: every core; ATTNRANK_THREADS caps it)"},
        {"seed", seed_text()},
        {"refine", refine_text()},
        {"time_limit", time_limit_text() + ", per question of a head"}}});
  const std::string shapes = "shape (N, d), (H, N, d) or (B, H, N, d), any float dtype, read exactly";
  all.push_back(
      {"check_kernel",
       "The certified error of an attention kernel's forward and backward pass against the exact softmax(s Q K^T) V",
       "Per tensor, max_abs_error_lower <= max |O - exact| <= max_abs_error_upper (decimals rounded outward), the "
       "relative bounds, the mean absolute and RMS error bands and the worst entry; with a reference, ratio_lower and "
       "ratio_upper enclose candidate error / reference error. K and V may have fewer heads than Q when their number "
       "divides Q's (grouped-query and multi-query attention: query head h reads K/V head h / (H / H_kv)). A kernel's "
       "NaN or infinite entries are reported (nonfinite, an infinite error); in Q, K, V or dout they are refused. "
       "max_error_verdict and max_ratio_verdict are within or exceeded only when proven, undecided otherwise; "
       "exceeded lists every tensor proven outside a tolerance.",
       {{"q", "Queries Q, " + shapes},
        {"k", "Keys K, (..., N_k, d)"},
        {"v", "Values V, (..., N_k, d_v)"},
        {"candidate", "The kernel's output O, (..., N, d_v)"},
        {"reference", "A reference output (float32 or float64 attention, say) to compare with"},
        {"dout", "The upstream gradient dO the backward pass ran with, (..., N, d_v)"},
        {"dq", "The kernel's dQ, (..., N, d)"},
        {"dk", "The kernel's dK, (..., N_k, d): K's heads"},
        {"dv", "The kernel's dV, (..., N_k, d_v): K's heads"},
        {"lse", "The kernel's logsumexp of the scaled scores (natural log; FlashAttention's softmax_lse), (N,), (H, N) "
                "or (B, H, N)"},
        {"dsinks", "The kernel's gradient of the sink logits, (H,): each head's summed over batches and sequences, as "
                   "autograd gives a learnable sink (needs sinks and dout)"},
        {"reference_dq", "A reference's dQ"},
        {"reference_dk", "A reference's dK"},
        {"reference_dv", "A reference's dV"},
        {"reference_lse", "A reference's logsumexp"},
        {"reference_dsinks", "A reference's gradient of the sink logits"},
        {"mask", "causal, none, an N_q x N_k 0/1 matrix (1: the query may attend; PyTorch's boolean attn_mask "
                 "convention) for every head, or one of shape (H, N_q, N_k) or (B, H, N_q, N_k): one mask per head"},
        {"window_size", "FlashAttention's window_size (left, right): query i sees keys p - left .. p + right (-1: "
                        "unbounded), p = i + N_k - N_q (see alignment); with the causal mask, right is 0"},
        {"alignment", "Where queries sit among the keys when N_q != N_k, for the causal mask and the window: "
                      "bottom-right (FlashAttention, default) or top-left (PyTorch's is_causal)"},
        {"empty_rows", "A query row whose mask allows no key: refuse (an input error, default) or zero "
                       "(FlashAttention's output 0, logsumexp +inf, gradients 0, each checked exactly)"},
        {"softcap", "FlashAttention's softcap c > 0: scores become c tanh(s q.k / c), before ALiBi and the mask "
                    "(default 0: none)"},
        {"alibi_slopes", "ALiBi: a slope per head, shape (H,) or (B, H); scores get -slope |i + N_k - N_q - j| "
                         "(top-left alignment: -slope |i - j|), after the softcap"},
        {"sinks", "Attention sinks: a logit per head, shape (H,); exp(sink) joins each row's softmax denominator "
                  "(rows then sum to less than 1, and lse includes it)"},
        {"attn_bias", "An additive bias (PyTorch's float attn_mask) of shape (N_q, N_k), (H, N_q, N_k) or (B, H, N_q, "
                      "N_k), added to the scores after the softcap; -inf entries mask their keys"},
        {"fp8_format", "Read uint8 Q, K, V as FP8 codes of this format: e4m3 (float8_e4m3fn) or e5m2 (float8_e5m2)"},
        {"q_descale", descale_text("q_descale")},
        {"k_descale", descale_text("k_descale")},
        {"v_descale", descale_text("v_descale")},
        {"dropout_mask", "Dropout: the kernel's keep-mask (1: kept) of shape (N_q, N_k), (H, N_q, N_k) or (B, H, N_q, "
                         "N_k); O = (P o Z) V / (1 - p), FlashAttention's (lse is before dropout)"},
        {"dropout_p", "Dropout's probability p, 0 <= p < 1 (with dropout_mask; default 0)"},
        {"cu_seqlens_q", "Packed sequences (FlashAttention's varlen): B + 1 offsets of each sequence's queries; Q, the "
                         "output, dout and dQ are (total_q, H, d), lse (H, total_q)"},
        {"cu_seqlens_k", "With cu_seqlens_q: the offsets of each sequence's keys; K, V, dK, dV are (total_k, H_kv, d). "
                         "Masks, bias and dropout masks come padded to (B, H, max_seqlen_q, max_seqlen_k), each "
                         "sequence reading its top-left block"},
        {"max_seqlen_q", "FlashAttention's max_seqlen_q, checked against the offsets (optional)"},
        {"max_seqlen_k", "FlashAttention's max_seqlen_k, checked against the offsets (optional)"},
        {"scale", "Softmax scale s (default 1/sqrt(d)); the double nearest to it"},
        {"fallback", "Recompute with MPFI when the double enclosures are too wide: auto (default: when affordable), "
                     "never, always"},
        {"bits", "Precision of the MPFI fallback in bits, 53 .. " + std::to_string(max_precision_bits) + " (default " +
                     std::to_string(default_fallback_bits) + ")"},
        {"max_error", "A tolerance on max |O - exact|: a tensor whose certified lower bound exceeds it is proven "
                      "outside (exceeded), one whose upper bound is within it proven inside"},
        {"rtol", "With max_error: the tolerance is max_error + rtol max |exact| (torch.testing's form, on the max)"},
        {"max_ratio", "FlashAttention's rule, candidate error <= max_ratio x reference error + ratio_atol, judged "
                      "the same way (2 or 3 in FlashAttention's tests; needs a reference)"},
        {"ratio_atol", "With max_ratio: the floor a of the rule err <= max_ratio err(reference) + a (default 0)"},
        {"profile", profile_text()},
        {"max_ulps", "A tolerance on the output's error in ulps of its dtype, entry by entry |O - exact| / "
                     "ulp(exact): proven within, proven exceeded, or undecided"}}});
  return all;
}

}  // namespace

std::span<const QuestionHelp> question_helps() {
  static const std::vector<QuestionHelp> all = build();
  return all;
}

const QuestionHelp& question_help(std::string_view question) {
  for (const QuestionHelp& q : question_helps())
    if (q.name == question) return q;
  throw std::invalid_argument("no help for the question '" + std::string(question) + "'");
}

const std::string& option_help(std::string_view question, std::string_view option) {
  for (const OptionHelp& o : question_help(question).options)
    if (o.name == option) return o.text;
  throw std::invalid_argument("no help for the option '" + std::string(option) + "' of " + std::string(question));
}

}  // namespace attnrank
