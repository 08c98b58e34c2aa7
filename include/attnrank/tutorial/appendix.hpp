#pragma once
// The tutorial's argument of Section 2.5.4 and Appendix A, computed: every number
// the reader is asked to check, each from the toolkit's own exact or certified
// routines (nothing here is a stored answer; `tests/cli/appendix_cli.test.cpp` compares it to the
// 40-digit reference values).
//
// What each field proves:
//  * intervals (Interval) contain the true real value; their width depends on
//    `bits`, so a value printed from one is certified to the digits it rounds to;
//  * ranks come as CertifiedRank / FloorBounds proven by nonsingular minors (lower)
//    and exact structure (upper);
//  * verdicts are the reachability engine's, with certificates the independent
//    checker re-verified here (`certificate_check`).
// The one thing that is quoted and not computed is the head-count table of
// Section 2.4: it is the paper's measurement (BLEU), labelled as such.

#include <attnrank/linalg/certified_determinant.hpp>
#include <attnrank/linalg/certified_rank.hpp>
#include <attnrank/reach/free.hpp>
#include <attnrank/reach/masked.hpp>
#include <attnrank/reach/certificate.hpp>
#include <attnrank/reach/embeddings.hpp>

#include <string>
#include <vector>

namespace attnrank {

/// Section 2.5.4 with keys k = (2, 0, 1): the d_k = 1 head and its two "Try it" questions.
struct SingleKeyArgument {
  std::vector<Rational> keys;                      ///< (2, 0, 1) for (I, love, LLMs)
  std::vector<Rational> queries;                   ///< Figure 8's q = 2, 1, 0, -1, -2
  Matrix<Interval> sweep;                          ///< row r: softmax(queries[r] k), certified
  std::vector<std::vector<Eigen::Index>> top;      ///< top-weighted tokens per row (empty: flat)
  std::vector<Eigen::Index> winners;               ///< argmax k and argmin k: the only possible winners
  std::vector<Eigen::Index> locked_out;            ///< every other token
  /// love (key 0) gets weight > 0.95 iff q < q_star, with
  /// q_star = log((sqrt(23/19) - 1) / 2), the root of e^(2q) + e^q = 1/19.
  Interval q_star;
  Interval love_at_q_star;                         ///< the forward pass at q_star: contains 0.95
  /// LLMs (key 1) gets 1 / (1 + 2 cosh q): at most 1/3, attained only at q = 0
  /// where the row is exactly (1/3, 1/3, 1/3); so 0.34 is never reached.
  Rational llms_max;
  Rational llms_margin;                            ///< 0.34 - llms_max = 1/150
};

/// Appendix A on the diagonal target A (0.8 on the diagonal, 0.1 elsewhere).
struct FloorArgument {
  Matrix<Rational> target;
  Interval a, b;                                   ///< log A = a I + b J: a = log 8, b = log 0.1
  Matrix<Interval> log_A;
  Interval det_closed_form;                        ///< a^2 (a + 3 b)
  CertifiedDeterminant det_from_matrix;            ///< certified det of the interval matrix log A
  bool det_forms_agree = false;                    ///< the two enclosures overlap
  CertifiedRank rank_log_A;                           ///< 3 = 3
  Eigen::Index rank_c1_lower = 0, rank_c1_upper = 1;  ///< rank(c 1^T) for c = -log(A) 1 / n
  Eigen::Index seed_floor = 0;                     ///< rank(log A) - 1: the tutorial's floor
  ReachResult dk1;                                 ///< floor = rank(log(A) C), unreachable at d_k = 1
  nlohmann::json dk1_certificate;
  CertificateCheck certificate_check;              ///< the independent checker on dk1_certificate
  ReachResult dk2;                                 ///< reachable at d_k = 2, with a witness Q, K
  EmbeddingsReach dk2_on_worked_example;           ///< head weights W^Q_i, W^K_i for the X of Section 2.2.2
};

/// "For a sentence of any length": the diagonal target at n = 3..10, and the practical sizes.
struct GeneralLength {
  Eigen::Index n = 0;
  FloorBounds floor;                               ///< proven n - 1 = n - 1
  Verdict below = Verdict::undecided;              ///< at d_k = n - 2
  Verdict at = Verdict::undecided;                 ///< at d_k = n - 1
};

/// Decoders: the same question under the causal mask (reach/masked.hpp), n = 3..10.
/// The diagonal target's lower triangle keeps floor n - 1 (each block but the
/// first has rank 1 after centering, each overlap 0); a generic causal pattern,
/// here entries that are distinct primes, has floor(n / 2).
struct CausalLength {
  Eigen::Index n = 0;
  MaskedFloorBounds diagonal;                      ///< the lower triangle of the diagonal target
  MaskedFloorBounds generic;                       ///< distinct primes on and below the diagonal
};
struct PracticalSize {
  std::string setting;                             ///< e.g. "d_model = 768, h = 12"
  Eigen::Index n = 0, dk = 0;
  ReachResult result;                              ///< diagonal target at this n and d_k
};

/// Section 2.2's head 1: softmax raised the rank.
struct SoftmaxRaisesRank {
  Eigen::Index scores_rank = 0;                    ///< exact rank(Q_1 K_1^T)
  Eigen::Index dk = 0;                             ///< the ceiling on it
  CertifiedRank rank_A1;                              ///< certified: 3
  CertifiedDeterminant det_A1;
};

/// The paper's Table 3, row A, quoted by the tutorial's Section 2.4 (not computed here).
struct QuotedHeadCount {
  int h;
  int dk;
  double bleu;
};

struct TutorialAppendix {
  unsigned bits = 0;                               ///< working precision of every interval
  SingleKeyArgument single_key;
  FloorArgument floor;
  std::vector<GeneralLength> general;
  std::vector<CausalLength> causal;
  std::vector<PracticalSize> practical;
  SoftmaxRaisesRank section_2_2;
  std::vector<QuotedHeadCount> head_counts;
};

/// Runs the whole argument at `bits` of working precision (>= 64); the practical
/// sizes (n = 512) take most of the time.
TutorialAppendix tutorial_appendix(unsigned bits);

/// The paper's Table 3, row A (d_model = 512): BLEU for h = 1, 4, 8, 16, 32.
std::vector<QuotedHeadCount> quoted_head_counts();

/// The appendix's pictures, in doubles (numeric, uncertified: every number they
/// show is also in the TutorialAppendix, certified): Figure 8 on a finer grid,
/// the spectrum of log(A) C, and both heads' attention weights of Section 2.2.
struct AppendixFigureData {
  std::vector<std::string> sweep_q;           ///< row labels of the sweep, e.g. "3.0"
  Eigen::MatrixXd sweep;                      ///< softmax(q (2, 0, 1)), one row per q
  Eigen::Index n = 3, floor = 2, seed_floor = 2;
  Eigen::VectorXd singular_values;            ///< of log(A) C
  std::vector<Eigen::MatrixXd> heads;         ///< A_1, A_2 of Section 2.2
};

/// The figures' data for the argument `t` (computed at 64 bits, then rounded).
AppendixFigureData appendix_figure_data(const TutorialAppendix& t);

}  // namespace attnrank
