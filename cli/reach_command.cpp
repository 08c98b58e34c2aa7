// attnrank reach: can a head of width d_k produce this attention pattern?
#include "commands.hpp"
#include "reach_shared.hpp"
#include "run.hpp"
#include "figures.hpp"
#include "svg.hpp"

#include <attnrank/io/json.hpp>
#include <attnrank/numbers/decimal.hpp>
#include <attnrank/io/matrix_spec.hpp>
#include <attnrank/linalg/numeric_rank.hpp>
#include <attnrank/reach/approximate.hpp>
#include <attnrank/reach/certificate.hpp>
#include <attnrank/reach/embeddings_certificate.hpp>
#include <attnrank/reach/masked.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace attnrank::cli {
namespace {

using nlohmann::json;

/// " a width-k head comes within E (certified)" or why there is no such figure.
std::string closeness(const ReachResult& r, std::optional<double> witness_error) {
  if (!witness_error || !std::isfinite(*witness_error)) return "no witness error could be bounded";
  return "a width-" + std::to_string(r.dk) + " head comes within " + format_upper_bound(*witness_error) +
         " (certified)";
}

/// The verdict in words. Every verdict is about the entries exactly as written
/// (each decimal is the rational it spells), so the line says so and puts the
/// witness error beside it: a rounded pattern is almost never exactly producible,
/// and how close a head comes is what such a reader wants to know.
std::string narrate(const std::string& name, const ReachResult& r, bool free_scores, bool normalised,
                    std::optional<double> witness_error, std::optional<double> best_error) {
  std::ostringstream s;
  s << "target " << name << " (n = " << r.n << "), head width d_k = " << r.dk
    << (free_scores ? ", free Q and K\n" : ", Q = X W^Q and K = X W^K for the given X\n");
  if (!normalised)
    s << "  note: rows do not sum to 1; softmax normalises rows, so everything below is about A / rowsums\n";
  if (r.has_zero_entry) {
    s << "verdict: unreachable - " << r.reason << "; " << closeness(r, best_error) << ".\n";
  } else {
    const FloorBounds& f = r.floor;
    s << "  floor    rank(log(A) C): ";
    if (f.lower == f.upper) s << "= " << f.lower;
    else s << f.lower << " <= floor <= " << f.upper;
    s << "\n           lower: a " << f.lower << " x " << f.lower << " minor of log(A) C proven nonsingular ("
      << f.lower_bits << " bits, ||I - R M|| <= " << format_upper_bound(f.minor_residual) << ")";
    if (f.lower_is_partial) s << " - enough for the verdict; --full-floor for the whole bound";
    s << "\n           upper: " << f.upper_reason << "\n";
    s << "  ceiling  rank(Q K^T) <= d_k = " << r.dk << "\n";
    s << "verdict: " << to_string(r.verdict) << " - ";
    if (r.verdict == Verdict::unreachable)
      s << "no head of width " << r.dk << " produces these entries exactly, as written; " << closeness(r, best_error) << ".\n";
    else if (r.verdict == Verdict::reachable)
      s << "a head of width " << r.dk << " produces these entries exactly; " << closeness(r, best_error) << ".\n";
    else
      s << "whether a head of width " << r.dk << " produces these entries exactly is not settled at this precision; "
        << closeness(r, best_error) << ".\n";
    s << "  because " << r.reason << ".\n";
    if (!r.hint.empty()) s << "  to settle it: " << r.hint << ".\n";
  }
  if (witness_error && !std::isfinite(*witness_error))
    s << "witness at d_k = " << r.dk << ": computed, but its error could not be bounded (nothing is claimed for it)\n";
  else if (witness_error)
    s << "witness at d_k = " << r.dk
      << (free_scores ? " (truncated SVD of log(A) C)" : " (head weights W^Q, W^K on X; --json lists them)")
      << ": max |softmax(Q K^T / sqrt(d_k)) - A| <= " << format_upper_bound(*witness_error) << " (certified)\n";
  else
    s << "witness: none (the embeddings X are beyond the double range, so no double weights act on them)\n";
  return s.str();
}

/// The picture of a reach query: target, the witness head's softmax, and the
/// spectrum of log(A) C (numeric: a picture, not a proof).
std::string reach_svg(const Matrix<Rational>& A, const ReachResult& r, const std::string& name) {
  const Eigen::Index n = A.rows();
  const Eigen::MatrixXd target = approx_normalized_target(A);
  std::optional<Eigen::MatrixXd> approx;
  if (r.witness) approx = approx_witness_pattern(*r.witness);
  Eigen::VectorXd spectrum;
  if (!r.has_zero_entry) spectrum = approx_centered_log_spectrum(A, std::min<Eigen::Index>(n - 1, 2 * r.dk + 16));
  const std::string caption = std::filesystem::path(name).filename().string() + ": " + to_string(r.verdict) + " at d_k = " + std::to_string(r.dk) +
                              (r.has_zero_entry ? "" : " (floor " + std::to_string(r.floor.lower) +
                                                           (r.floor.lower == r.floor.upper ? "" : ".." + std::to_string(r.floor.upper)) + ")");
  return reach_figure(target, approx ? &*approx : nullptr, spectrum, r.dk, caption,
                      "singular values of log(A) C (numeric, not certified)");
}

/// error_lower <= E* <= error_upper with their proofs, in words.
std::string bounds_lines(const ApproxBounds& b, std::uint64_t seed, bool embeddings) {
  std::ostringstream s;
  s << "how close: " << format_lower_bound(b.error_lower) << " <= E* <= " << format_upper_bound(b.error_upper)
    << " (certified both ways), E* = the smallest max |softmax(Q K^T / sqrt(d_k)) - A| of any head of width " << b.dk
    << (embeddings ? " with Q = X W^Q, K = X W^K" : "") << "\n";
  if (!std::isfinite(b.error_upper)) {
    s << "  upper: none proven (no witness's error could be bounded: X beyond the double range leaves no double weights)\n";
  } else {
    s << "  upper: " << (embeddings ? "optimised head weights on X" : "an optimised witness")
      << " (L-BFGS from the log-domain and floored-target starts and seeded restarts, seed " << seed
      << "), its error certified in MPFI"
      << (b.start_error > b.error_upper ? " (the SVD start alone: " + format_upper_bound(b.start_error) + ")" : "") << "\n";
  }
  s << "  lower: " << b.lower_reason << "\n";
  return s.str();
}

/// The line every unmasked report of a causal pattern adds.
constexpr const char* causal_note =
    "the zeros are exactly the causal pattern; --mask causal asks the decoder question";

}  // namespace

json read_certificate_file(const std::string& path) { return parse_certificate(read_text_file(path, input_limits()), path); }

/// Whether every row of A sums exactly to 1. Softmax normalises rows, so the
/// verdict is about A / rowsums either way; the output says so when it matters.
bool rows_sum_to_one(const Matrix<Rational>& A) {
  for (Eigen::Index i = 0; i < A.rows(); ++i) {
    Rational sum = 0;
    for (Eigen::Index j = 0; j < A.cols(); ++j) sum += A(i, j);
    if (sum != 1) return false;
  }
  return true;
}

void add_approximate_json(json& j, const ApproxBounds& b, std::uint64_t seed, bool embeddings,
                          std::optional<double> epsilon) {
  j["error_lower"] = lower_bound_json(b.error_lower);
  j["error_upper"] = upper_bound_json(b.error_upper);
  j["error_lower_reason"] = b.lower_reason;
  j["seed"] = seed;
  if (embeddings) {
    j["witness_W_Q"] = matrix_json(b.WQ);
    j["witness_W_K"] = matrix_json(b.WK);
  } else {
    j["witness_Q"] = matrix_json(b.witness.Q);
    j["witness_K"] = matrix_json(b.witness.K);
  }
  if (epsilon) {
    j["epsilon"] = *epsilon;
    j["epsilon_verdict"] = to_string(epsilon_verdict(b, *epsilon));
  }
}

/// The line that answers --epsilon first, in the user's terms.
std::string epsilon_line(const ApproxBounds& b, double epsilon) {
  const EpsilonVerdict v = epsilon_verdict(b, epsilon);
  std::ostringstream s;
  s << "epsilon " << epsilon << ": " << to_string(v) << " - ";
  if (v == EpsilonVerdict::within)
    s << "a head of width " << b.dk << " comes within " << format_upper_bound(b.error_upper) << " <= epsilon (certified witness)\n";
  else if (v == EpsilonVerdict::not_within)
    s << "every head of width " << b.dk << " misses some entry by more than epsilon (certified: E* >= "
      << format_lower_bound(b.error_lower) << ")\n";
  else
    s << "not settled: the best certified witness misses by " << format_upper_bound(b.error_upper)
      << " and no head is proven to miss by more than epsilon (the problem is NP-hard for d_k > 1; the bounds below are the honest answer)\n";
  return s.str();
}

void add_reach_command(CLI::App& app, std::string& out) {
  auto* cmd = app.add_subcommand("reach", "Can a head of width d_k produce this attention pattern? Yes, no or undecided, with a certificate");
  struct Options {
    std::string target, certificate, check, x, svg, mask = "none";
    long dk = 0;
    unsigned bits = 53;
    double epsilon = -1;
    std::uint64_t seed = 1;
    bool json = false, full_floor = false;
  };
  auto opt = std::make_shared<Options>();
  cmd->add_option("TARGET", opt->target, "Target attention matrix: a matrix file (text, .npy[i,j], F.safetensors:NAME, - for stdin) or diag:N:P")->required();
  CLI::Option* dk_option = cmd->add_option("--dk", opt->dk, "Head width d_k (1 <= d_k <= n); REQUIRED unless --check");
  cmd->add_option("--bits", opt->bits, "Precision of the floor's lower bound (53: doubles; more: MPFI)")
      ->check(CLI::Range(min_precision_bits, max_precision_bits));
  cmd->add_option("--x", opt->x, "Fixed embeddings X (n x d_model, a matrix file): decide for scores X M X^T instead of free scores");
  CLI::Option* epsilon_option =
      cmd->add_option("--epsilon", opt->epsilon, "Also decide whether some head of width d_k comes within this max entrywise error, in [0, 1]");
  cmd->add_option("--seed", opt->seed, "Seed of the optimiser's restarts for the error bounds (printed)");
  cmd->add_option("--mask", opt->mask,
                  "causal, none, or a file of 0s and 1s (1: the query may attend): decide for a masked head, whose "
                  "masked scores are -inf (the target must be 0 exactly there)");
  cmd->add_flag("--full-floor", opt->full_floor, "Always bound the whole floor, not only what the verdict needs");
  cmd->add_option("--certificate", opt->certificate, "Also write the certificate (JSON) to this file");
  cmd->add_option("--check", opt->check, "Re-verify a certificate file against TARGET (with the --x X and --mask M it was made for) instead of deciding");
  cmd->add_option("--svg", opt->svg, "Also draw the target, the best width-d_k head and the spectrum of log(A) C (SVG file)");
  cmd->add_flag("--json", opt->json, "Print JSON instead of text");
  cmd->callback([opt, dk_option, epsilon_option, &out] {
    const Matrix<Rational> A = read_input(opt->target);
    validate_target(A, opt->target);
    if (const std::optional<Mask> mask = read_mask_input(opt->mask, A.rows(), opt->target)) {
      MaskedReachArguments m{A, *mask, opt->target, opt->x, opt->check, opt->certificate, opt->svg, opt->dk,
                             dk_option->count() > 0, opt->bits, epsilon_option->count() > 0, opt->epsilon, opt->seed,
                             opt->json};
      out = run_masked_reach(m);
      return;
    }
    if (!opt->check.empty()) {
      const json cert = read_certificate_file(opt->check);
      const CertificateCheck c = opt->x.empty() ? check_reach_certificate(A, cert)
                                                : check_embeddings_certificate(A, read_input(opt->x), cert);
      if (!c.valid) throw input_error(opt->check + ": certificate rejected: " + c.reason);
      out = opt->json ? json_document({{"valid", true}, {"reason", c.reason}}, "check") : "certificate valid: " + c.reason + "\n";
      return;
    }
    if (dk_option->count() == 0) throw input_error("--dk is required (the head width to decide)");
    const bool has_epsilon = epsilon_option->count() > 0;
    if (has_epsilon && !(opt->epsilon >= 0 && opt->epsilon <= 1))
      throw input_error("--epsilon " + std::to_string(opt->epsilon) + " is outside [0, 1] (attention weights lie in [0, 1])");
    ReachOptions o;
    o.bits = opt->bits;
    o.full_floor = opt->full_floor;
    std::optional<EmbeddingsReach> emb;
    Matrix<Rational> X;
    if (!opt->x.empty()) {
      X = read_input(opt->x);
      try {
        emb = reach_with_embeddings(A, X, opt->dk, o);
      } catch (const input_error& e) {  // name the file in messages about X
        if (e.subject() != "embeddings X") throw;
        throw input_error(opt->x + ": " + e.what(), e.subject());
      }
    }
    const ReachResult r = emb ? emb->result : reach(A, opt->dk, o);
    // How close a head comes: certified bounds on E*, by default up to n = 512
    // (the optimiser and a certified SVD), beyond that when --epsilon asks.
    std::optional<ApproxBounds> approx;
    if (has_epsilon || r.n <= approx_default_limit) {
      ApproxOptions ao;
      ao.bits = std::max(opt->bits, 64u);
      ao.seed = opt->seed;
      approx = emb ? approx_error_bounds(A, X, opt->dk, ao) : approx_error_bounds(A, opt->dk, ao);
    }
    const ApproxBounds* approx_ptr = approx ? &*approx : nullptr;
    const std::optional<double> asked = has_epsilon ? std::optional<double>(opt->epsilon) : std::nullopt;
    const json cert = emb ? make_embeddings_certificate(A, X, *emb, approx_ptr, asked)
                          : make_reach_certificate(A, r, approx_ptr, asked);
    if (!opt->certificate.empty()) write_text_file(opt->certificate, cert.dump(1) + "\n");
    if (!opt->svg.empty()) write_text_file(opt->svg, reach_svg(A, r, opt->target));
    // The error of the witness the text and "max_abs_error" describe: the head
    // weights on X for the embeddings question, Q and K for the free one.
    std::optional<double> witness_error;
    if (emb) {
      if (std::isfinite(emb->weights_max_abs_error)) witness_error = emb->weights_max_abs_error;
    } else if (r.witness) {
      witness_error = r.witness->max_abs_error;
    }
    if (!opt->json) {
      out.clear();
      if (approx && has_epsilon) out = epsilon_line(*approx, opt->epsilon);
      // The verdict line quotes the best certified witness: the optimised one when
      // the error bounds ran, the log-domain one otherwise.
      std::optional<double> best = witness_error;
      if (approx && best && approx->error_upper < *best) best = approx->error_upper;
      out += narrate(opt->target, r, !emb, rows_sum_to_one(A), witness_error, best);
      if (zeros_are_causal(A)) out += std::string("note: ") + causal_note + "\n";
      if (approx) out += bounds_lines(*approx, opt->seed, emb.has_value());
      else out += "how close: not computed for n > " + std::to_string(approx_default_limit) + " (pass --epsilon E to bound it)\n";
      if (emb) {
        out += "question: fixed embeddings X from " + opt->x + " (scores X W^Q W^K^T X^T / sqrt(d_k))";
        out += emb->x_full_row_rank ? " - X has full row rank, so every score matrix is reachable through X and the free answer above is the answer.\n"
                                    : " - constraints on c: " + emb->constraints + "; the bounds above are on rank(S) for the admissible S.\n";
      }
      return;
    }
    json j{{"n", r.n},
           {"d_k", r.dk},
           {"question", emb ? "embeddings" : "free"},
           {"verdict", to_string(r.verdict)},
           {"reason", r.reason},
           {"rows_sum_to_one", rows_sum_to_one(A)},
           {"max_abs_error", witness_error ? upper_bound_json(*witness_error) : json(nullptr)},
           {"certificate", cert}};
    if (r.has_zero_entry) {
      j["floor_lower"] = nullptr;
      j["floor_upper"] = nullptr;
      j["zero_entry"] = cert["zero_entry"];
    } else {
      j["floor_lower"] = r.floor.lower;
      j["floor_upper"] = r.floor.upper;
      j["floor_lower_is_partial"] = r.floor.lower_is_partial;
      j["bits"] = r.floor.lower_bits;
    }
    if (!r.hint.empty()) j["hint"] = r.hint;
    j["mask"] = "none";
    if (zeros_are_causal(A)) j["note"] = causal_note;
    if (approx) add_approximate_json(j, *approx, opt->seed, emb.has_value(), asked);
    if (emb) {
      j["x_full_row_rank"] = emb->x_full_row_rank;
      j["constraints"] = emb->constraints;
      j["W_Q"] = matrix_json(emb->WQ);
      j["W_K"] = matrix_json(emb->WK);
    }
    out = json_document(j, "reach");
  });
}

}  // namespace attnrank::cli
