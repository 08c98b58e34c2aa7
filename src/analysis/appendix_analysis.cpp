// The appendix question and its writers (analysis/appendix_analysis.hpp).
#include <attnrank/analysis/appendix_analysis.hpp>

#include <attnrank/analysis/document.hpp>
#include <attnrank/io/json.hpp>
#include <attnrank/numbers/decimal.hpp>
#include <attnrank/reach/certificate.hpp>
#include <attnrank/tutorial/single_key_head.hpp>
#include <attnrank/tutorial/worked_example.hpp>

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>

namespace attnrank {

AppendixDigits::AppendixDigits(int digits) {
  if (digits >= 0) sweep = ab = det = threshold = det_A1 = digits;
}

int AppendixDigits::most() const { return std::max({sweep, ab, det, threshold, det_A1}); }

namespace {

using nlohmann::json;
using Eigen::Index;

std::string token(Index j) { return worked_example::tokens[j]; }

std::string token_list(const std::vector<Index>& ids) {
  std::string s;
  for (std::size_t t = 0; t < ids.size(); ++t) s += (t ? ", " : "") + token(ids[t]);
  return s.empty() ? "none (flat row)" : s;
}

json interval_json(const Interval& x, int digits) {
  const auto [lo, hi] = enclosure_fixed(x, digits);
  const auto value = certified_fixed(x, digits);
  return {{"lower", lo}, {"upper", hi}, {"value", value ? json(*value) : json(nullptr)}};
}

json verdict_json(Verdict v) {
  return v == Verdict::undecided ? json(nullptr) : json(v == Verdict::reachable);
}

std::string matrix_rows(const Eigen::MatrixXd& M, int digits, const std::string& indent) {
  std::string s;
  for (Index i = 0; i < M.rows(); ++i) {
    s += indent;
    for (Index j = 0; j < M.cols(); ++j) {
      const std::string e = format_fixed_point(M(i, j), digits);
      s += (j ? "  " : "") + std::string(e.front() == '-' ? "" : " ") + e;
    }
    s += "\n";
  }
  return s;
}

std::string narrate(const TutorialAppendix& t, const AppendixDigits& d) {
  const SingleKeyArgument& k = t.single_key;
  const FloorArgument& f = t.floor;
  std::ostringstream s;
  s << "attnrank appendix: Section 2.5.4 and Appendix A, every number computed here (intervals at " << t.bits
    << " bits; printed digits are certified)\n\n";
  s << "[2.5.4 The smallest possible head] d_k = 1, keys K_i = (2, 0, 1)^T for (I, love, LLMs)\n"
    << "  scores Q_i K_i^T: row r is q_r (2, 0, 1) - nine entries, three free numbers; rank <= 1\n";
  s << "[Figure 8] softmax(q (2, 0, 1)) as q sweeps:\n           I      love   LLMs    top weight\n";
  for (Index r = 0; r < k.sweep.rows(); ++r) {
    const std::string q = format_fixed(k.queries[static_cast<std::size_t>(r)], 0);
    s << "  q = " << std::string(3 - std::min<std::size_t>(3, q.size()), ' ') << q << ":";
    for (Index j = 0; j < k.sweep.cols(); ++j) s << "  " << certified_or_enclosure(k.sweep(r, j), d.sweep);
    s << "   " << token_list(k.top[static_cast<std::size_t>(r)]) << "\n";
  }
  s << "[A, Question 1] only argmax k (" << token(k.winners.front()) << ", q > 0) or argmin k (" << token(k.winners.back())
    << ", q < 0) can win a row; locked out: " << token_list(k.locked_out) << "\n"
    << "  LLMs gets e^q / (e^2q + 1 + e^q) = 1 / (1 + 2 cosh q) <= 1/3, with equality only at q = 0\n";
  s << "[2.5.4 Try it] love gets more than 0.95 exactly when q < q* = log((sqrt(23/19) - 1) / 2) = "
    << certified_or_enclosure(k.q_star, d.threshold) << "\n"
    << "  check: the forward pass at q* gives love " << certified_or_enclosure(k.love_at_q_star, std::max(d.threshold, 6))
    << "\n  LLMs above 0.34: never - its best is " << k.llms_max.str() << " (at q = 0), "
    << k.llms_margin.str() << " short of 0.34\n\n";

  s << "[2.5.4 A pattern it cannot produce] target A, each token attending mostly to itself:\n";
  for (Index i = 0; i < f.target.rows(); ++i) {
    s << "  ";
    for (Index j = 0; j < f.target.cols(); ++j) s << " " << format_fixed(f.target(i, j), 1);
    s << "\n";
  }
  s << "  row 3 puts its top weight on LLMs, which the sweep never does\n";
  s << "[A, Question 3] softmax inversion (Equation 2-7): S = log A + c 1^T, and log A = a I + b J with\n"
    << "  a = log 0.8 - log 0.1 = log 8 = " << certified_or_enclosure(f.a, d.ab) << "\n"
    << "  b = log 0.1 = " << certified_or_enclosure(f.b, d.ab) << "\n"
    << "  det(log A) = a^2 (a + 3b) = " << certified_or_enclosure(f.det_closed_form, d.det) << "  (closed form)\n"
    << "             = " << certified_or_enclosure(f.det_from_matrix.det, d.det) << "  (certified determinant of the matrix log A; "
    << (f.det_forms_agree ? "the two enclosures agree" : "THE TWO ENCLOSURES DISAGREE") << ")\n"
    << "  rank(log A) = ";
  if (f.rank_log_A.lower == f.rank_log_A.upper) s << f.rank_log_A.lower;
  else s << "between " << f.rank_log_A.lower << " and " << f.rank_log_A.upper;
  s << " (certified: a " << f.rank_log_A.lower << " x " << f.rank_log_A.lower << " minor proven nonsingular)\n"
    << "  rank(c 1^T) = " << f.rank_c1_lower << " (every column is c; c != 0 proven)\n"
    << "  [Equation 2-8, Step B] the tutorial's floor: rank(S) >= rank(log A) - 1 = " << f.seed_floor << "\n";
  const FloorBounds& fl = f.dk1.floor;
  s << "  the exact floor (beyond the tutorial): min over c of rank(log A + c 1^T) = rank(log(A) C) = ";
  if (fl.lower == fl.upper) s << fl.lower;
  else s << "between " << fl.lower << " and " << fl.upper;
  s << "\n    (C = I - 11^T/n; lower: a minor proven nonsingular; upper: " << fl.upper_reason << ")\n";
  s << "[Equation 2-6, Figure 9] ceiling at d_k = 1: rank(Q_i K_i^T) <= 1 < floor " << fl.lower << "\n"
    << "  verdict at d_k = 1: " << to_string(f.dk1.verdict) << " - " << f.dk1.reason << "\n"
    << "    certificate " << f.dk1_certificate.value("format", "") << ", digest " << f.dk1_certificate.value("digest", "")
    << "; independent checker: " << (f.certificate_check.valid ? "accepted" : "REJECTED") << " (" << f.certificate_check.reason << ")\n";
  s << "  beyond the tutorial, verdict at d_k = 2: " << to_string(f.dk2.verdict) << " - " << f.dk2.reason << "\n";
  if (f.dk2.witness) {
    s << "    witness (truncated SVD of log(A) C, " << f.dk2.witness->bits << " bits; 4 decimals shown, exact values in the JSON):\n"
      << "    Q =\n" << matrix_rows(f.dk2.witness->Q, 4, "      ") << "    K =\n" << matrix_rows(f.dk2.witness->K, 4, "      ")
      << "    max |softmax(Q K^T / sqrt 2) - A| <= " << format_upper_bound(f.dk2.witness->max_abs_error) << " (certified)\n";
  }
  const EmbeddingsReach& e = f.dk2_on_worked_example;
  s << "  on the worked example's X (Section 2.2.2): " << to_string(e.result.verdict);
  if (std::isfinite(e.weights_max_abs_error)) {
    s << " - head weights (4 x 2, 4 decimals shown) that make 'I love LLMs' attend with this A\n"
      << "    W^Q_i =\n" << matrix_rows(e.WQ, 4, "      ") << "    W^K_i =\n" << matrix_rows(e.WK, 4, "      ")
      << "    max |softmax((X W^Q_i)(X W^K_i)^T / sqrt 2) - A| <= " << format_upper_bound(e.weights_max_abs_error)
      << " (certified, for these weights as doubles)\n";
  } else {
    s << "\n";
  }

  s << "\n[A, any length] the diagonal target (0.8 on the diagonal) for n = 3..10:\n     n  floor  d_k = n - 2   d_k = n - 1\n";
  for (const GeneralLength& g : t.general) {
    s << "  " << (g.n < 10 ? "   " : "  ") << g.n << "  ";
    if (g.floor.lower == g.floor.upper) s << (g.floor.lower < 10 ? "    " : "   ") << g.floor.lower;
    else s << g.floor.lower << ".." << g.floor.upper;
    s << "  " << to_string(g.below) << "   " << to_string(g.at) << "\n";
  }
  const bool all_n_minus_1 = std::all_of(t.general.begin(), t.general.end(), [](const GeneralLength& g) {
    return g.floor.lower == g.n - 1 && g.floor.upper == g.n - 1;
  });
  s << (all_n_minus_1 ? "  floor = n - 1 for every n checked\n" : "  floor != n - 1 for some n: see the table\n");
  s << "[A, decoders] the causal mask (token i sees tokens 1..i; reach with mask = causal), the staircase formula:\n"
    << "     n  floor: the diagonal target's lower triangle   a generic causal pattern (distinct primes)   floor(n/2)\n";
  bool diagonal_n_minus_1 = true, generic_half = true;
  for (const CausalLength& c : t.causal) {
    const auto bounds = [](const MaskedFloorBounds& f) {
      return f.lower == f.upper ? std::to_string(f.lower) : std::to_string(f.lower) + ".." + std::to_string(f.upper);
    };
    s << "  " << std::setw(4) << c.n << std::setw(42) << bounds(c.diagonal) << std::setw(45) << bounds(c.generic)
      << std::setw(13) << c.n / 2 << "\n";
    diagonal_n_minus_1 = diagonal_n_minus_1 && c.diagonal.lower == c.n - 1 && c.diagonal.upper == c.n - 1;
    generic_half = generic_half && c.generic.lower == c.n / 2 && c.generic.upper == c.n / 2;
  }
  if (diagonal_n_minus_1 && generic_half)
    s << "  causally the diagonal pattern still needs d_k = n - 1, a generic causal one only floor(n/2): a 512-token decoder\n"
         "  pattern needs d_k = 256 in general (docs/math.md, item 11)\n";
  s << "[A, the numbers that matter in practice] a 512 x 512 diagonal target:\n";
  for (const PracticalSize& p : t.practical)
    s << "  " << p.setting << " -> d_k = " << p.dk << ": needs rank " << p.result.floor.lower
      << (p.result.floor.lower == p.result.floor.upper ? " (proven exactly)" : " at least") << ", the head supplies "
      << p.dk << ": " << to_string(p.result.verdict) << "\n";
  const SoftmaxRaisesRank& m = t.section_2_2;
  s << "[A, Common mistake] softmax can raise rank: head 1 of Section 2.2 has rank(Q_1 K_1^T) = " << m.scores_rank
    << " (exact) <= d_k = " << m.dk << ", yet rank(A_1) = " << m.rank_A1.lower << " (certified; det A_1 = "
    << certified_or_enclosure(m.det_A1.det, d.det_A1) << ")\n";
  s << "[2.4, quoted] the paper's Table 3 row A (BLEU, EN-DE dev; their measurement, not computed here), d_model = 512:\n  ";
  for (const QuotedHeadCount& h : t.head_counts) s << " h = " << h.h << " (d_k = " << h.dk << "): " << h.bleu << ";";
  s << "\n";
  return s.str();
}

json appendix_json(const TutorialAppendix& t, const AppendixDigits& d) {
  const SingleKeyArgument& k = t.single_key;
  const FloorArgument& f = t.floor;
  json sweep = json::array();
  for (Index r = 0; r < k.sweep.rows(); ++r) {
    json w = json::array();
    for (Index j = 0; j < k.sweep.cols(); ++j) w.push_back(interval_json(k.sweep(r, j), d.sweep));
    json top = json::array();
    for (Index j : k.top[static_cast<std::size_t>(r)]) top.push_back(token(j));
    sweep.push_back({{"q", k.queries[static_cast<std::size_t>(r)].str()}, {"weights", w}, {"top", top}});
  }
  json general = json::array();
  for (const GeneralLength& g : t.general)
    general.push_back({{"n", g.n}, {"floor_lower", g.floor.lower}, {"floor_upper", g.floor.upper},
                       {"verdict_dk_n_minus_2", to_string(g.below)}, {"verdict_dk_n_minus_1", to_string(g.at)}});
  json causal = json::array();
  for (const CausalLength& c : t.causal)
    causal.push_back({{"n", c.n},
                      {"diagonal_floor_lower", c.diagonal.lower},
                      {"diagonal_floor_upper", c.diagonal.upper},
                      {"generic_floor_lower", c.generic.lower},
                      {"generic_floor_upper", c.generic.upper}});
  json practical = json::array();
  for (const PracticalSize& p : t.practical)
    practical.push_back({{"setting", p.setting}, {"n", p.n}, {"d_k", p.dk}, {"floor_lower", p.result.floor.lower},
                         {"floor_upper", p.result.floor.upper}, {"verdict", to_string(p.result.verdict)}});
  json heads = json::array();
  for (const QuotedHeadCount& h : t.head_counts) heads.push_back({{"h", h.h}, {"d_k", h.dk}, {"bleu", h.bleu}});
  const FloorBounds& fl = f.dk1.floor;
  const EmbeddingsReach& e = f.dk2_on_worked_example;
  return {
      {"bits", t.bits},
      {"keys", {"2", "0", "1"}},
      {"sweep", sweep},
      {"winners", json(std::vector<std::string>{token(k.winners.front()), token(k.winners.back())})},
      {"locked_out", [&] {
         json ids = json::array();
         for (Index j : k.locked_out) ids.push_back(token(j));
         return ids;
       }()},
      {"q_star", interval_json(k.q_star, d.threshold)},
      {"love_at_q_star", interval_json(k.love_at_q_star, std::max(d.threshold, 6))},
      {"llms_max", k.llms_max.str()},
      {"llms_margin_to_0_34", k.llms_margin.str()},
      {"a", interval_json(f.a, d.ab)},
      {"b", interval_json(f.b, d.ab)},
      {"det_log_A", interval_json(f.det_closed_form, d.det)},
      {"det_log_A_from_matrix", interval_json(f.det_from_matrix.det, d.det)},
      {"det_forms_agree", f.det_forms_agree},
      {"rank_log_A", f.rank_log_A.lower == f.rank_log_A.upper ? json(f.rank_log_A.lower) : json(nullptr)},
      {"rank_log_A_lower", f.rank_log_A.lower},
      {"rank_log_A_upper", f.rank_log_A.upper},
      {"rank_c1", f.rank_c1_lower == f.rank_c1_upper ? json(f.rank_c1_lower) : json(nullptr)},
      {"seed_floor", f.seed_floor},
      {"floor", fl.lower == fl.upper ? json(fl.lower) : json(nullptr)},
      {"floor_lower", fl.lower},
      {"floor_upper", fl.upper},
      {"ceiling_dk1", 1},
      {"reachable_dk1", verdict_json(f.dk1.verdict)},
      {"reachable_dk2", verdict_json(f.dk2.verdict)},
      {"certificate_dk1", f.dk1_certificate},
      {"certificate_dk1_check", {{"valid", f.certificate_check.valid}, {"reason", f.certificate_check.reason}}},
      {"certificate_dk2", make_reach_certificate(f.target, f.dk2)},
      {"max_abs_error_dk2", f.dk2.witness ? upper_bound_json(f.dk2.witness->max_abs_error) : json(nullptr)},
      {"worked_example_heads",
       {{"verdict", to_string(e.result.verdict)},
        {"W_Q", matrix_json(e.WQ)},
        {"W_K", matrix_json(e.WK)},
        {"max_abs_error", upper_bound_json(e.weights_max_abs_error)}}},
      {"general_n", general},
      {"causal_n", causal},
      {"practical", practical},
      {"softmax_raises_rank",
       {{"scores_rank", t.section_2_2.scores_rank},
        {"d_k", t.section_2_2.dk},
        {"rank_A1_lower", t.section_2_2.rank_A1.lower},
        {"rank_A1_upper", t.section_2_2.rank_A1.upper},
        {"det_A1", interval_json(t.section_2_2.det_A1.det, d.det_A1)}}},
      {"head_counts", {{"source", "Vaswani et al. (2017), Table 3 row A, quoted by Section 2.4; not computed by attnrank"},
                       {"rows", heads}}}};
}

}  // namespace

AppendixAnalysis analyze_appendix(const AppendixQuestion& q) {
  AppendixAnalysis a;
  a.digits = AppendixDigits(q.digits);
  // Enough bits that each interval is far narrower than the last digit asked.
  a.bits = std::max(128u, bits_for_decimals(a.digits.most()));
  a.appendix = tutorial_appendix(a.bits);
  return a;
}

std::string to_text(const AppendixAnalysis& a) {
  std::string text = narrate(a.appendix, a.digits);
  for (const std::string& f : a.figures) text += "wrote " + f + "\n";
  return text;
}

nlohmann::json to_json(const AppendixAnalysis& a) {
  nlohmann::json j = json_document(appendix_json(a.appendix, a.digits), "appendix");
  if (!a.figures.empty()) j["svg"] = a.figures;
  return j;
}

}  // namespace attnrank
