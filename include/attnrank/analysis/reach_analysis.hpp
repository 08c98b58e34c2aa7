#pragma once
// The reachability question, answered once for every kind of head: free or on
// fixed embeddings X, unmasked or masked, with or without epsilon. One pipeline
// decides what runs (the floor at the asked bits, the error bounds on E* when
// the policy says so, the certificate), picks the witness the verdict quotes,
// and hands back a typed result; one JSON writer and one text writer print it
// for the command line and the Python module alike.
//
// Guarantee: everything the result calls certified is what the reach module
// proved (reach/free.hpp, reach/masked.hpp, reach/approximate.hpp): the verdict
// is about exact producibility, error_lower <= E* <= error_upper are proven, and
// `best_error` is the smallest certified witness error the pipeline holds.
// Nothing here is global: two analyses run side by side in two threads.

#include <attnrank/analysis/refinement.hpp>
#include <attnrank/attention/mask.hpp>
#include <attnrank/reach/approx_memo.hpp>
#include <attnrank/reach/approximate.hpp>
#include <attnrank/reach/embeddings.hpp>
#include <attnrank/reach/masked.hpp>
#include <attnrank/reach/masked_embeddings.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace attnrank {

/// When the bounds on E* (reach/approximate.hpp) run besides the verdict.
enum class ErrorBoundsPolicy {
  automatic,  ///< when epsilon is asked, or n <= ReachQuestion::error_bounds_size_limit
  always,
  never,      ///< never, even with epsilon (epsilon_verdict is then absent)
};

struct ReachQuestion {
  Eigen::Index dk = 1;
  std::optional<Mask> mask;              ///< a masked head (nullopt: every key allowed)
  std::optional<Matrix<Rational>> x;     ///< fixed embeddings X (n x d_model): Q = X W^Q, K = X W^K
  std::optional<double> epsilon;         ///< also decide E* <= epsilon, in [0, 1]
  unsigned bits = 53;                    ///< precision of the floor's lower bound (ReachOptions::bits)
  bool full_floor = false;               ///< ReachOptions::full_floor
  std::uint64_t seed = 1;                ///< the optimiser's restarts (ApproxOptions::seed)
  ErrorBoundsPolicy error_bounds = ErrorBoundsPolicy::automatic;
  Eigen::Index error_bounds_size_limit = 512;
  /// Write the certificate (ReachAnalysis::certificate): its fingerprint of the target
  /// reads every entry as text, a tenth of a scan's time on n = 512 heads, so the
  /// scan, which prints no certificate, turns it off (the certificate is then null).
  bool certificate = true;
  /// Compute the exact question's witness head (ReachOptions::witness): a
  /// scan, which prints none, turns it off (a masked one costs a completion's
  /// SVD and a fit, about a second at n = 1024).
  bool witness = true;
  /// When the optimiser sharpens error_upper (analysis/refinement.hpp): by default
  /// only when epsilon is asked and the cheap band leaves it undecided, for 2 s.
  RefineOptions refine;
  /// Names for messages and reports: the target and X as the user gave them.
  std::string target_name = "target", x_name = "X";
  /// The target's shared approximate work (reach/approx_memo.hpp), made for this
  /// very target and mask, when other questions on it share it (a scan's reach and
  /// width); the answer is the same either way. nullptr: the analysis makes its own.
  ApproxMemo* memo = nullptr;
};

/// What reach and scan say of an unmasked pattern whose zeros are exactly causal.
inline constexpr const char* causal_zeros_note =
    "the zeros are exactly the causal pattern; with the causal mask (mask = causal) the question is the decoder's";

/// The answer with its proofs. Exactly one of free / embeddings / masked /
/// masked_embeddings holds the decision; the accessors read whichever it is.
struct ReachAnalysis {
  Eigen::Index n = 0, dk = 0;
  std::string target_name, x_name;
  std::string mask_name = "none";
  bool rows_sum_to_one = true;  ///< false: everything is about A / rowsums (softmax normalises rows)
  bool zeros_causal = false;    ///< unmasked question on a pattern whose zeros are exactly causal (causal_zeros_note)
  std::optional<ReachResult> free;
  std::optional<EmbeddingsReach> embeddings;
  std::optional<MaskedReachResult> masked;
  std::optional<MaskedEmbeddingsReach> masked_embeddings;
  /// error_lower <= E* <= error_upper, when the policy ran them.
  std::optional<ApproxBounds> approx;
  /// Whether the optimiser refined them, and within what budget.
  Refinement refinement;
  std::optional<double> epsilon;
  std::uint64_t seed = 1;
  Eigen::Index error_bounds_size_limit = 512;
  /// The certified error of the witness that max_abs_error describes (Q and K,
  /// or the head weights on X); nullopt when none could be bounded.
  std::optional<double> witness_error;
  /// The best certified witness error held (witness_error or error_upper,
  /// whichever is smaller and finite): what the verdict line quotes.
  std::optional<double> best_error;
  nlohmann::json certificate;

  bool is_masked() const { return masked || masked_embeddings; }
  bool on_embeddings() const { return embeddings || masked_embeddings; }
  Verdict verdict() const;
  const std::string& reason() const;
  const std::string& hint() const;
  bool has_zero_entry() const;
  /// The floor's bounds (free: rank(log(A) C); masked: the minimal rank over completions).
  Eigen::Index floor_lower() const;
  Eigen::Index floor_upper() const;
  unsigned floor_bits() const;
  /// The witness of the decision (Q, K of reach's log-domain or masked witness), if any.
  const Witness* witness() const;
};

/// Answers `q` for the target A (read exactly). input_error on a bad target,
/// width, mask, X or epsilon, naming q.target_name or q.x_name.
ReachAnalysis analyze_reach(const Matrix<Rational>& A, const ReachQuestion& q);

/// A certificate re-checked against A (with the X and mask it was made for).
struct CertificateAnalysis {
  bool valid = false;
  std::string reason;
};

/// Re-verifies `certificate` (parsed JSON) for A, dispatching on the question
/// the arguments name. input_error (naming `certificate_name`) when it is rejected.
CertificateAnalysis analyze_certificate(const Matrix<Rational>& A, const nlohmann::json& certificate,
                                        const std::optional<Mask>& mask, const std::optional<Matrix<Rational>>& x,
                                        const std::string& certificate_name,
                                        const std::string& target_name = "target");

/// The JSON document of the CLI contract ("attnrank/reach/1", docs/schema/reach.schema.json).
nlohmann::json to_json(const ReachAnalysis& r);
nlohmann::json to_json(const CertificateAnalysis& c);  ///< "attnrank/check/1"

/// The report for people (what `attnrank reach` prints).
std::string to_text(const ReachAnalysis& r);
/// The certificate as a file holds it (--certificate FILE): JSON text a checker reads back.
std::string certificate_file_text(const ReachAnalysis& r);
std::string to_text(const CertificateAnalysis& c);

}  // namespace attnrank
