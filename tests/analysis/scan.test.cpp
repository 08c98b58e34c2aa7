// attnrank/analysis/scan_analysis.hpp: a scan answers for every head what the
// single-head analyses answer for it, whatever the number of threads; planted
// heads of width r are found within width r; bad slices are named.
#include "support.hpp"

#include <attnrank/analysis.hpp>

#include <cmath>
#include <random>
#include <set>

using namespace attnrank;
using attnrank::test::input_error_message;

namespace {

/// softmax(Q K^T / sqrt(r)) with Q, K of width r: a pattern a head of width r makes.
Eigen::MatrixXd planted(Eigen::Index n, Eigen::Index r, std::mt19937_64& rng, double scale) {
  std::normal_distribution<double> g(0.0, scale);
  Eigen::MatrixXd Q(n, r), K(n, r);
  for (Eigen::Index i = 0; i < Q.size(); ++i) Q(i) = g(rng);
  for (Eigen::Index i = 0; i < K.size(); ++i) K(i) = g(rng);
  Eigen::MatrixXd S = Q * K.transpose() / std::sqrt(static_cast<double>(r));
  S = (S.colwise() - S.rowwise().maxCoeff()).array().exp().matrix();
  return (S.array().colwise() / S.rowwise().sum().array()).matrix();
}

/// A (layers, heads, n, n) stack whose head (l, h) has width widths[l * heads + h].
HeadStack planted_stack(std::size_t layers, std::size_t heads, Eigen::Index n, const std::vector<Eigen::Index>& widths,
                        std::uint64_t seed, double scale) {
  std::mt19937_64 rng(seed);
  HeadStack s;
  s.name = "planted.npy";
  s.shape = {layers, heads, static_cast<std::size_t>(n), static_cast<std::size_t>(n)};
  for (std::size_t l = 0; l < layers; ++l)
    for (std::size_t h = 0; h < heads; ++h) {
      s.index.push_back({l, h});
      s.patterns.push_back(planted(n, widths[l * heads + h], rng, scale));
    }
  return s;
}

}  // namespace

TEST_CASE("attnrank::analyze_scan", "[property]") {
  rc::prop("planted heads of width r are reported with width_lower <= width_upper <= r", [] {
    std::vector<Eigen::Index> widths;
    for (int k = 0; k < 6; ++k) widths.push_back(*rc::gen::inRange<Eigen::Index>(1, 4));
#ifdef ATTNRANK_SANITIZED  // -O0 under ASan: n = 24 took 25 s at 5 cases; the normal build runs it
    const Eigen::Index n = 12;
#else
    const Eigen::Index n = 24;
#endif
    const HeadStack s = planted_stack(2, 3, n, widths, *rc::gen::arbitrary<std::uint32_t>(),
                                      *rc::gen::element(0.5, 1.0, 2.0));
    ScanQuestion q;
    q.epsilon = 1e-9;  // far above the rounding of a pattern stored as doubles, far below any real miss
    q.max_dk = 6;
    q.jobs = 2;
    const std::vector<HeadScan> heads = analyze_scan(s, q);
    RC_ASSERT(heads.size() == 6u);
    for (std::size_t t = 0; t < heads.size(); ++t) {
      RC_ASSERT(heads[t].index == s.index[t]);
      RC_ASSERT(heads[t].width_lower.has_value());
      RC_ASSERT(heads[t].width_upper.has_value());
      RC_ASSERT(*heads[t].width_lower <= *heads[t].width_upper);
      RC_ASSERT(*heads[t].width_upper <= widths[t]);
    }
  });

  rc::prop("every head gets the single-head analyses' answer, on one thread or two", [] {
    std::vector<Eigen::Index> widths;
    for (int k = 0; k < 4; ++k) widths.push_back(*rc::gen::inRange<Eigen::Index>(1, 5));
#ifdef ATTNRANK_SANITIZED  // -O0 under ASan: n up to 11 took 73 s at 5 cases
    const Eigen::Index most = 7;
#else
    const Eigen::Index most = 11;
#endif
    const HeadStack s = planted_stack(1, 4, *rc::gen::inRange<Eigen::Index>(3, most + 1), widths,
                                      *rc::gen::arbitrary<std::uint32_t>(), 1.0);
    ScanQuestion q;
    q.dk = *rc::gen::inRange<Eigen::Index>(1, 3);
    q.epsilon = *rc::gen::element(0.01, 0.1);
    q.refine.time_limit.reset();  // reproducible: no clock
    q.jobs = 1;
    const std::vector<HeadScan> one = analyze_scan(s, q);
    q.jobs = 2;
    std::set<std::size_t> seen;
    const std::vector<HeadScan> two = analyze_scan(s, q, [&](const HeadScan& h) { seen.insert(h.index.back()); });
    RC_ASSERT(seen.size() == 4u);  // on_head once per head
    for (std::size_t t = 0; t < one.size(); ++t) {
      nlohmann::json a = to_json(one[t]), b = to_json(two[t]);
      a.erase("seconds");
      b.erase("seconds");
      RC_ASSERT(a == b);
      // ... and that answer is analyze_reach's and analyze_width's on the slice alone.
      Matrix<Rational> A(s.patterns[t].rows(), s.patterns[t].cols());
      for (Eigen::Index i = 0; i < A.size(); ++i) A(i) = Rational(s.patterns[t](i));
      ReachQuestion rq;
      rq.dk = *q.dk;
      rq.full_floor = true;
      rq.epsilon = q.epsilon;
      rq.refine = q.refine;
      const ReachAnalysis r = analyze_reach(A, rq);
      RC_ASSERT(one[t].floor_lower == r.floor_lower());
      RC_ASSERT(one[t].floor_upper == r.floor_upper());
      RC_ASSERT(one[t].verdict == r.verdict());
      // The scan joins both proven answers: its band lies inside reach's and the
      // width profile's at d_k, its width bracket inside width's.
      RC_ASSERT(*one[t].error_upper <= r.approx->error_upper);
      RC_ASSERT(*one[t].error_lower >= r.approx->error_lower);
      WidthQuestion wq;
      wq.epsilon = *q.epsilon;
      wq.refine = q.refine;
      const WidthAnalysis w = analyze_width(A, wq);
      RC_ASSERT(*one[t].width_lower >= w.result.width_lower);
      if (w.result.width_upper) RC_ASSERT(one[t].width_upper.value_or(0) <= w.result.width_upper);
      const WidthProfileEntry& e = w.result.profile[static_cast<std::size_t>(*q.dk - 1)];
      RC_ASSERT(*one[t].error_upper <= e.error_upper);
      RC_ASSERT(*one[t].error_lower >= e.error_lower);
      RC_ASSERT(*one[t].error_lower <= *one[t].error_upper);
    }
  });

  rc::prop("one story per head: the epsilon verdict at d_k and the width bracket agree, free and causal", [] {
    const Eigen::Index n = *rc::gen::inRange<Eigen::Index>(3, 10);
    std::vector<Eigen::Index> widths;
    for (int k = 0; k < 3; ++k) widths.push_back(*rc::gen::inRange<Eigen::Index>(1, n));
    HeadStack s = planted_stack(1, 3, n, widths, *rc::gen::arbitrary<std::uint32_t>(), *rc::gen::element(0.5, 2.0, 4.0));
    const bool causal = *rc::gen::arbitrary<bool>();
    ScanQuestion q;
    if (causal) {
      q.mask = Mask::causal(n);
      for (Eigen::MatrixXd& P : s.patterns) {  // the planted head under the mask, renormalised
        P = P.triangularView<Eigen::Lower>();
        P = (P.array().colwise() / P.rowwise().sum().array()).matrix();
      }
    }
    q.dk = *rc::gen::inRange<Eigen::Index>(1, n + 1);
    q.epsilon = *rc::gen::element(1e-9, 1e-3, 0.02, 0.1, 0.3);
    q.max_dk = *rc::gen::inRange<Eigen::Index>(1, n + 1);
    q.refine.policy = *rc::gen::element(RefinePolicy::never, RefinePolicy::automatic);
    q.refine.time_limit.reset();
    q.jobs = 1;
    RC_TAG(causal ? "causal" : "free");
    for (const HeadScan& h : analyze_scan(s, q)) {
      RC_ASSERT(h.error_lower.has_value());
      const bool within = h.epsilon_verdict == std::string("within");
      const bool misses = h.epsilon_verdict == std::string("not_within");
      RC_ASSERT(within == (*h.error_upper <= *q.epsilon));
      RC_ASSERT(misses == (*h.error_lower > *q.epsilon));
      if (h.verdict == Verdict::reachable) RC_ASSERT(within);  // E* = 0 exactly
      if (*q.dk <= h.max_dk) {
        // A witness within epsilon at d_k is a width <= d_k, and back (E* is non-increasing);
        // every width up to d_k missing is the band at d_k missing.
        RC_ASSERT(within == (h.width_upper && *h.width_upper <= *q.dk));
        RC_ASSERT(misses == (*h.width_lower > *q.dk));
      } else {
        if (misses) RC_ASSERT(*h.width_lower > h.max_dk);  // a miss at d_k is a miss at every narrower width
      }
      if (h.width_upper) RC_ASSERT(*h.width_lower <= *h.width_upper);
      const std::string known = width_known(h);
      RC_ASSERT(known == (!h.width_upper ? "lower"
                          : *h.width_upper == *h.width_lower ? "exact"
                          : *h.width_lower == 1 ? "upper" : "range"));
    }
  });
}

TEST_CASE("attnrank::analyze_scan bad slices", "[unit]") {
  HeadStack s = planted_stack(2, 2, 5, {1, 1, 2, 2}, 3, 1.0);
  ScanQuestion q;
  SECTION("a NaN is named with its slice, row and column") {
    s.patterns[3](1, 2) = std::nan("");
    const std::string m = input_error_message([&] { analyze_scan(s, q); });
    CHECK(m.find("planted.npy[1,1]") != std::string::npos);
    CHECK(m.find("[1, 2] (0-based)") != std::string::npos);
  }
  SECTION("a pattern that is not square") {
    s.patterns[1] = Eigen::MatrixXd::Constant(5, 4, 0.25);
    CHECK(input_error_message([&] { analyze_scan(s, q); }).find("[0,1]: the pattern is 5 x 4, not square") !=
          std::string::npos);
  }
  SECTION("a row that does not sum to a positive number") {
    s.patterns[2].row(0).setZero();
    CHECK(input_error_message([&] { analyze_scan(s, q); }).find("planted.npy[1,0]") != std::string::npos);
  }
  SECTION("a mask of the wrong size, a width beyond n, epsilon outside [0, 1]") {
    q.mask = Mask::causal(4);
    CHECK_FALSE(input_error_message([&] { analyze_scan(s, q); }).empty());
    q.mask.reset();
    q.dk = 6;
    CHECK(input_error_message([&] { analyze_scan(s, q); }).find("d_k 6 is out of range") != std::string::npos);
    q.dk.reset();
    q.epsilon = 2;
    CHECK(input_error_message([&] { analyze_scan(s, q); }).find("epsilon 2 is outside [0, 1]") == 0);
  }
  SECTION("a zero entry is reported, not refused: no finite scores produce it") {
    s.patterns[0](0, 1) = 0;
    q.dk = 1;
    const std::vector<HeadScan> heads = analyze_scan(s, q);
    CHECK(heads[0].zero_entry);
    CHECK(heads[0].verdict == Verdict::unreachable);
    CHECK(to_json(heads[0])["floor_lower"].is_null());
  }
}

TEST_CASE("attnrank::analyze_scan notes", "[unit]") {
  // The traps a researcher falls into, said once per cause: a causal stack scanned without the
  // causal mask, zeros a float16 save makes, logits instead of weights, a mask inverted.
  const Eigen::Index n = 6;
  HeadStack causal;
  causal.name = "causal.npy";
  causal.shape = {2, static_cast<std::size_t>(n), static_cast<std::size_t>(n)};
  std::mt19937_64 rng(11);
  for (std::size_t h = 0; h < 2; ++h) {
    Eigen::MatrixXd P = planted(n, 2, rng, 1.0);
    for (Eigen::Index i = 0; i < n; ++i) {
      for (Eigen::Index j = i + 1; j < n; ++j) P(i, j) = 0;
      P.row(i) /= P.row(i).sum();
    }
    causal.index.push_back({h});
    causal.patterns.push_back(P);
  }
  ScanQuestion q;
  SECTION("causal heads without the causal mask: the note says to pass it, once for both heads") {
    const std::vector<HeadScan> heads = analyze_scan(causal, q);
    for (std::size_t t = 0; t < heads.size(); ++t) {
      CHECK(heads[t].zero_entry);
      CHECK(heads[t].zero_entries == n * (n - 1) / 2);
      CHECK(heads[t].smallest_weight == causal.patterns[t].cwiseMax(0).unaryExpr([](double x) {
        return x > 0 ? x : 2.0;
      }).minCoeff());
      CHECK(heads[t].note.find("the causal mask (mask = causal)") != std::string::npos);
      CHECK(to_json(heads[t])["note"] == heads[t].note);
    }
    const std::string text = scan_text(causal, q, heads);
    CHECK(text.find("note (2 heads: [0], [1]; 30 zero entries") != std::string::npos);
    CHECK(text.find("mask = causal") == text.rfind("mask = causal"));  // said once
  }
  SECTION("with the causal mask there is nothing to say") {
    q.mask = Mask::causal(n);
    for (const HeadScan& h : analyze_scan(causal, q)) {
      CHECK_FALSE(h.zero_entry);
      CHECK(h.zero_entries == 0);
      CHECK(h.note.empty());
      CHECK_FALSE(to_json(h).contains("note"));
    }
  }
  SECTION("zeros that are not causal: what a float16 save does to small weights") {
    HeadStack s = planted_stack(1, 2, n, {2, 2}, 5, 1.0);
    s.patterns[1](0, 3) = 0;
    s.patterns[1](4, 1) = 0;
    const std::vector<HeadScan> heads = analyze_scan(s, q);
    CHECK(heads[0].note.empty());
    CHECK(heads[0].zero_entries == 0);
    CHECK(heads[1].zero_entries == 2);
    CHECK(heads[1].note.find("float16") != std::string::npos);
    CHECK(scan_text(s, q, heads).find("note (1 head: [0,1]; 2 zero entries") != std::string::npos);
  }
  SECTION("logits instead of weights: the value as written, and what to do") {
    HeadStack s = planted_stack(1, 1, 3, {1}, 5, 1.0);
    s.patterns[0](1, 2) = -69.0775527954;
    const std::string m = input_error_message([&] { analyze_scan(s, q); });
    CHECK(m.find("[1, 2] (0-based) is -69.0775527954: attention weights cannot be negative") != std::string::npos);
    CHECK(m.find("softmax first") != std::string::npos);
  }
  SECTION("a mask in PyTorch's convention (True: blocked) is named as such") {
    // Weights on the even columns only, and a mask allowing the odd ones: its complement.
    HeadStack s;
    s.name = "even.npy";
    s.shape = {4, 4};
    s.index.push_back({});
    Eigen::MatrixXd P = Eigen::MatrixXd::Zero(4, 4), M = Eigen::MatrixXd::Zero(4, 4);
    for (Eigen::Index i = 0; i < 4; ++i)
      for (Eigen::Index j = 0; j < 4; ++j) (j % 2 == 0 ? P : M)(i, j) = j % 2 == 0 ? 0.5 : 1;
    s.patterns.push_back(P);
    q.mask = Mask::from_matrix(M.cast<Rational>(), "mask.npy");
    const std::string m = input_error_message([&] { analyze_scan(s, q); });
    CHECK(m.find("[0, 0] (0-based) is 0.5 at a masked position") != std::string::npos);
    CHECK(m.find("invert such a mask") != std::string::npos);
    // A mask whose blocked positions are not exactly the weights' support: no such guess.
    M(0, 0) = 1;
    q.mask = Mask::from_matrix(M.cast<Rational>(), "mask.npy");
    CHECK(input_error_message([&] { analyze_scan(s, q); }).find("invert") == std::string::npos);
  }
  SECTION("a mask row without a key names the other convention") {
    Matrix<Rational> M = Matrix<Rational>::Ones(3, 3);
    M.row(2).setZero();
    CHECK(input_error_message([&] { Mask::from_matrix(M, "mask.csv"); }).find("True where it may not") !=
          std::string::npos);
  }
}
