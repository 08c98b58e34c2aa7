// The tutorial appendix's argument, computed (attnrank/tutorial/appendix.hpp).
#include <attnrank/tutorial/appendix.hpp>

#include <attnrank/linalg/exact_rank.hpp>
#include <attnrank/io/matrix_spec.hpp>
#include <attnrank/tutorial/single_key_head.hpp>
#include <attnrank/tutorial/worked_example.hpp>

#include <algorithm>

#include <attnrank/linalg/detail/dense_decompositions.hpp>

namespace attnrank {

std::vector<QuotedHeadCount> quoted_head_counts() {
  return {{1, 512, 24.9}, {4, 128, 25.5}, {8, 64, 25.8}, {16, 32, 25.8}, {32, 16, 25.4}};
}

namespace detail {

Matrix<Rational> diagonal_target(Eigen::Index n) {
  return *builtin_matrix("diag:" + std::to_string(n) + ":0.8");
}

bool intervals_overlap(const Interval& x, const Interval& y) {
  return lower_bound(x) <= upper_bound(y) && lower_bound(y) <= upper_bound(x);
}

SingleKeyArgument single_key_argument() {
  SingleKeyArgument s;
  s.keys = {Rational(2), Rational(0), Rational(1)};
  s.queries = {Rational(2), Rational(1), Rational(0), Rational(-1), Rational(-2)};
  s.sweep = certified_single_key_sweep(s.keys, s.queries);
  for (const Rational& q : s.queries) s.top.push_back(top_tokens(s.keys, q));
  s.winners = possible_winners(s.keys);
  for (Eigen::Index j = 0; j < static_cast<Eigen::Index>(s.keys.size()); ++j)
    if (std::find(s.winners.begin(), s.winners.end(), j) == s.winners.end()) s.locked_out.push_back(j);
  // love's weight is 1 / (1 + e^(2q) + e^q) (keys 2, 0, 1 give scores 2q, 0, q);
  // it exceeds 0.95 iff t^2 + t < 1/19 with t = e^q > 0, i.e. t < (sqrt(23/19) - 1) / 2.
  const Interval root = sqrt(scalar_traits<Interval>::from_rational(Rational(23, 19)));
  s.q_star = log(Interval((root - 1) / 2));
  const Matrix<Interval> at_star = single_key_weights(s.keys, s.q_star);
  s.love_at_q_star = at_star(0, 1);
  // LLMs' weight is e^q / (e^(2q) + 1 + e^q) = 1 / (e^q + 1 + e^(-q)) <= 1/3 since
  // e^q + e^(-q) >= 2, with equality only at q = 0, where the row is exactly flat.
  s.llms_max = Rational(1, 3);
  s.llms_margin = Rational(34, 100) - s.llms_max;
  return s;
}

FloorArgument floor_argument(unsigned bits) {
  FloorArgument f;
  const Eigen::Index n = 3;
  f.target = diagonal_target(n);
  f.log_A = f.target.unaryExpr([](const Rational& q) { return Interval(log(scalar_traits<Interval>::from_rational(q))); });
  // Off-diagonal log 0.1 = b; diagonal log 0.8 = a + b, so a = log 0.8 - log 0.1 = log 8.
  f.b = f.log_A(0, 1);
  f.a = Interval(f.log_A(0, 0) - f.log_A(0, 1));
  f.det_closed_form = Interval(f.a * f.a * (f.a + 3 * f.b));
  f.det_from_matrix = certified_determinant(f.log_A);
  f.det_forms_agree = f.det_from_matrix.preconditioned && intervals_overlap(f.det_closed_form, f.det_from_matrix.det);
  f.rank_log_A = certified_rank(f.log_A);
  // c = -log(A) 1 / n: every column of c 1^T is c, so rank <= 1; >= 1 once c != 0 is proven.
  const Matrix<Interval> c = -(f.log_A.rowwise().sum() / Interval(n)).eval();
  f.rank_c1_lower = certified_rank(Matrix<Interval>(c * Matrix<Interval>::Ones(1, n))).lower;
  f.rank_c1_upper = 1;
  f.seed_floor = std::max<Eigen::Index>(f.rank_log_A.lower - 1, 0);

  ReachOptions o;
  o.bits = bits;
  o.full_floor = true;
  f.dk1 = reach(f.target, 1, o);
  f.dk1_certificate = make_reach_certificate(f.target, f.dk1);
  f.certificate_check = check_reach_certificate(f.target, f.dk1_certificate);
  f.dk2 = reach(f.target, 2, o);
  f.dk2_on_worked_example = reach_with_embeddings(f.target, worked_example::X(), 2, o);
  return f;
}

std::vector<GeneralLength> general_lengths() {
  std::vector<GeneralLength> out;
  ReachOptions o;
  o.full_floor = true;
  o.witness = false;
  for (Eigen::Index n = 3; n <= 10; ++n) {
    const Matrix<Rational> A = diagonal_target(n);
    GeneralLength g;
    g.n = n;
    const ReachResult below = reach(A, n - 2, o);
    g.floor = below.floor;
    g.below = below.verdict;
    g.at = reach(A, n - 1, o).verdict;
    out.push_back(std::move(g));
  }
  return out;
}

std::vector<CausalLength> causal_lengths() {
  std::vector<CausalLength> out;
  std::vector<long> primes;  // enough for 55 entries at n = 10
  for (long p = 2; primes.size() < 64; ++p)
    if (std::all_of(primes.begin(), primes.end(), [p](long q) { return p % q != 0; })) primes.push_back(p);
  for (Eigen::Index n = 3; n <= 10; ++n) {
    const Mask causal = Mask::causal(n);
    Matrix<Rational> diagonal = diagonal_target(n), generic = Matrix<Rational>::Zero(n, n);
    std::size_t next = 0;
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = 0; j < n; ++j) {
        if (j > i) diagonal(i, j) = 0;
        else generic(i, j) = primes[next++];
      }
    out.push_back({n, masked_floor_bounds(diagonal, causal), masked_floor_bounds(generic, causal)});
  }
  return out;
}

std::vector<PracticalSize> practical_sizes() {
  ReachOptions o;
  o.full_floor = true;
  o.witness = false;
  const Matrix<Rational> A = diagonal_target(512);
  std::vector<PracticalSize> out;
  for (const auto& [setting, dk] : {std::pair<const char*, Eigen::Index>{"d_model = 768, h = 12", 64},
                                    std::pair<const char*, Eigen::Index>{"d_model = 768, h = 64", 12}})
    out.push_back({setting, 512, dk, reach(A, dk, o)});
  return out;
}

SoftmaxRaisesRank softmax_raises_rank() {
  SoftmaxRaisesRank s;
  const auto trace = worked_example::layer<Rational>().forward<Interval>(worked_example::X());
  const auto& head = trace.heads.front();
  s.scores_rank = exact_rank(head.scores).rank;
  s.dk = trace.shape.d_k;
  s.rank_A1 = certified_rank(head.A);
  s.det_A1 = certified_determinant(head.A);
  return s;
}

}  // namespace detail

TutorialAppendix tutorial_appendix(unsigned bits) {
  require_precision_bits(bits);
  if (bits < 64) throw input_error("the appendix needs at least 64 bits of working precision, not " + std::to_string(bits));
  const PrecisionScope scope(bits);
  TutorialAppendix t;
  t.bits = bits;
  t.single_key = detail::single_key_argument();
  t.floor = detail::floor_argument(bits);
  t.general = detail::general_lengths();
  t.causal = detail::causal_lengths();
  t.practical = detail::practical_sizes();
  t.section_2_2 = detail::softmax_raises_rank();
  t.head_counts = quoted_head_counts();
  return t;
}

AppendixFigureData appendix_figure_data(const TutorialAppendix& t) {
  AppendixFigureData g;
  std::vector<Rational> qs;
  for (int i = 6; i >= -6; --i) qs.emplace_back(i, 2);
  const PrecisionScope scope(64);
  const Matrix<Interval> sweep = certified_single_key_sweep(t.single_key.keys, qs);
  g.sweep = sweep.unaryExpr([](const Interval& x) { return approx_midpoint(x); });
  for (const Rational& q : qs) g.sweep_q.push_back(format_fixed(q, 1));
  const FloorArgument& f = t.floor;
  g.n = f.target.rows();
  g.floor = f.dk1.floor.lower;
  g.seed_floor = f.seed_floor;
  const Eigen::MatrixXd L = f.log_A.unaryExpr([](const Interval& x) { return approx_midpoint(x); });
  const Eigen::MatrixXd C = Eigen::MatrixXd::Identity(g.n, g.n) - Eigen::MatrixXd::Constant(g.n, g.n, 1.0 / static_cast<double>(g.n));
  g.singular_values = Eigen::JacobiSVD<Eigen::MatrixXd>(L * C).singularValues();
  const auto trace = worked_example::layer<Rational>().forward<double>(worked_example::X());
  for (const auto& head : trace.heads) g.heads.push_back(head.A);
  return g;
}

}  // namespace attnrank
