// attnrank/analysis/kernel_analysis.hpp, packed sequences (cu_seqlens): a packed
// question answers what its sequences answer one by one as dense questions -- the
// same proven max errors for the output, dQ, dK, dV and lse, the worst entry at its
// packed token -- with sequences of every length (no queries, N_q != N_k), causal and
// windows aligned within each sequence, ALiBi by sequence and grouped K/V heads.
// Bad offsets and shapes are refused by name.
#include "support.hpp"

#include <attnrank/analysis/kernel_analysis.hpp>
#include <attnrank/numbers/decimal.hpp>

#include <algorithm>
#include <cmath>
#include <random>

using namespace attnrank;
using attnrank::test::input_error_message;

namespace {

NamedTensor tensor(std::vector<std::size_t> shape, std::vector<Eigen::MatrixXd> matrices, std::string name) {
  NamedTensor t;
  t.name = std::move(name);
  t.tensor.shape = std::move(shape);
  t.tensor.dtype = "<f8";
  t.tensor.matrices = std::move(matrices);
  return t;
}

NamedTensor offsets(const std::vector<std::size_t>& c, const std::string& name) {
  Eigen::MatrixXd m(static_cast<Eigen::Index>(c.size()), 1);
  for (std::size_t i = 0; i < c.size(); ++i) m(static_cast<Eigen::Index>(i)) = static_cast<double>(c[i]);
  return tensor({c.size()}, {m}, name);
}

/// A packed (total, heads, d) tensor of random entries: total matrices of heads x d.
NamedTensor packed(std::size_t total, std::size_t heads, Eigen::Index d, std::mt19937_64& rng, const std::string& name) {
  std::normal_distribution<double> g(0.0, 1.0);
  std::vector<Eigen::MatrixXd> m(total, Eigen::MatrixXd(static_cast<Eigen::Index>(heads), d));
  for (Eigen::MatrixXd& x : m)
    for (double& e : x.reshaped()) e = std::ldexp(std::round(std::ldexp(g(rng), 10)), -10);  // short dyadics
  return tensor({total, heads, static_cast<std::size_t>(d)}, std::move(m), name);
}

/// Sequence b of a packed tensor as a dense (heads, n, d) one.
NamedTensor rows_of(const NamedTensor& p, std::size_t first, std::size_t n) {
  const std::size_t heads = p.tensor.shape[1], d = p.tensor.shape[2];
  std::vector<Eigen::MatrixXd> m(heads, Eigen::MatrixXd(static_cast<Eigen::Index>(n), static_cast<Eigen::Index>(d)));
  for (std::size_t r = 0; r < n; ++r)
    for (std::size_t h = 0; h < heads; ++h)
      m[h].row(static_cast<Eigen::Index>(r)) = p.tensor.matrices[first + r].row(static_cast<Eigen::Index>(h));
  return tensor({heads, n, d}, std::move(m), p.name);
}

/// A packed tensor as read_packed_tensor gives it: H matrices of total x d (heads_first).
NamedTensor heads_first(const NamedTensor& p) {
  NamedTensor t = rows_of(p, 0, p.tensor.shape[0]);
  t.tensor.shape = p.tensor.shape;
  t.tensor.heads_first = true;
  return t;
}

struct Packed {
  KernelQuestion q;
  std::vector<std::size_t> cq, ck;
};

/// A random packed question with every backward result; sequence lengths from 0 (no queries)
/// to 5, N_q != N_k, causal or a window or neither, ALiBi slopes per (sequence, head).
Packed gen_packed(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto pick = [&](std::size_t lo, std::size_t hi) { return std::uniform_int_distribution<std::size_t>(lo, hi)(rng); };
  const std::size_t sequences = pick(1, 4), kv_heads = pick(1, 2), heads = kv_heads * pick(1, 3);
  const Eigen::Index d = static_cast<Eigen::Index>(pick(1, 4)), dv = static_cast<Eigen::Index>(pick(1, 3));
  Packed p;
  const std::size_t mask = pick(0, 2);  // causal, a window (left, -1), none
  p.cq = {0};
  p.ck = {0};
  for (std::size_t b = 0; b < sequences; ++b) {
    // With a mask every query row keeps a key in both alignments when N_k >= N_q (and N_q > N_k
    // comes without one).
    const std::size_t n_q = pick(b == 0 ? 1 : 0, 5), n_k = pick(n_q == 0 ? 0 : mask < 2 ? n_q : 1, 6);
    p.cq.push_back(p.cq.back() + n_q);
    p.ck.push_back(p.ck.back() + n_k);
  }
  const std::size_t tq = p.cq.back(), tk = p.ck.back();
  KernelQuestion& q = p.q;
  q.q = packed(tq, heads, d, rng, "q");
  q.k = packed(tk, kv_heads, d, rng, "k");
  q.v = packed(tk, kv_heads, dv, rng, "v");
  q.candidate = packed(tq, heads, dv, rng, "out");
  q.dout = packed(tq, heads, dv, rng, "dout");
  q.dq = packed(tq, heads, d, rng, "dq");
  q.dk = packed(tk, kv_heads, d, rng, "dk");
  q.dv = packed(tk, kv_heads, dv, rng, "dv");
  std::vector<Eigen::MatrixXd> lse(heads, Eigen::MatrixXd::Constant(static_cast<Eigen::Index>(tq), 1, 0.5));
  q.lse = tensor({heads, tq}, lse, "lse");
  q.cu_seqlens_q = offsets(p.cq, "cu_seqlens_q");
  q.cu_seqlens_k = offsets(p.ck, "cu_seqlens_k");
  switch (mask) {
    case 0: q.causal = true; break;
    case 1: q.window = std::pair<long, long>(static_cast<long>(pick(0, 2)), -1); break;
    default: break;
  }
  q.alignment = pick(0, 1) ? MaskAlignment::top_left : MaskAlignment::bottom_right;
  if (pick(0, 1)) {
    std::vector<Eigen::MatrixXd> slopes;
    for (std::size_t b = 0; b < sequences; ++b)
      slopes.push_back(Eigen::VectorXd::LinSpaced(static_cast<Eigen::Index>(heads), 0.25, 0.5 + static_cast<double>(b)));
    q.alibi_slopes = tensor({sequences, heads}, slopes, "slopes");
  }
  q.options.fallback = FallbackPolicy::always;  // MPFI: the same bounds for the same head, packed or not
  return p;
}

/// Sequence b of the packed question as a dense one.
KernelQuestion sequence_question(const Packed& p, std::size_t b) {
  const KernelQuestion& q = p.q;
  KernelQuestion s;
  const std::size_t fq = p.cq[b], nq = p.cq[b + 1] - fq, fk = p.ck[b], nk = p.ck[b + 1] - fk;
  s.q = rows_of(q.q, fq, nq);
  s.k = rows_of(q.k, fk, nk);
  s.v = rows_of(q.v, fk, nk);
  s.candidate = rows_of(*q.candidate, fq, nq);
  s.dout = rows_of(*q.dout, fq, nq);
  s.dq = rows_of(*q.dq, fq, nq);
  s.dk = rows_of(*q.dk, fk, nk);
  s.dv = rows_of(*q.dv, fk, nk);
  std::vector<Eigen::MatrixXd> lse;
  for (const Eigen::MatrixXd& m : q.lse->tensor.matrices)
    lse.push_back(m.middleRows(static_cast<Eigen::Index>(fq), static_cast<Eigen::Index>(nq)));
  s.lse = tensor({lse.size(), nq}, lse, "lse");
  s.causal = q.causal;
  s.window = q.window;
  s.alignment = q.alignment;
  if (q.alibi_slopes)
    s.alibi_slopes = tensor({static_cast<std::size_t>(q.alibi_slopes->tensor.matrices[b].size())}, {q.alibi_slopes->tensor.matrices[b]}, "slopes");
  s.options = q.options;
  return s;
}

const OutputError& error_of(const KernelAnalysis& a, const std::string& role) {
  if (role == "out") return a.result->candidate;
  for (const GradientReport& g : a.gradients)
    if (g.role == role) return g.check.candidate;
  throw std::logic_error("no " + role);
}

}  // namespace

TEST_CASE("attnrank::analyze_kernel with packed sequences", "[kernel][varlen]") {
  rc::prop("a packed question's max errors are the max over its sequences checked alone", [] {
    const std::uint64_t seed = *rc::gen::arbitrary<std::uint64_t>();
    const Packed p = gen_packed(seed);
    const KernelAnalysis packed = analyze_kernel(p.q);
    const std::size_t sequences = p.cq.size() - 1;
    RC_ASSERT(packed.cu_seqlens_q == p.cq);
    std::size_t with_queries = 0;
    for (std::size_t b = 0; b < sequences; ++b) with_queries += p.cq[b + 1] > p.cq[b];
    RC_ASSERT(packed.heads == with_queries * p.q.q.tensor.shape[1]);
    for (const std::string role : {"out", "dq", "dk", "dv", "lse"}) {
      const OutputError& e = error_of(packed, role);
      RC_ASSERT(e.max_abs_error_lower <= e.max_abs_error_upper);
      double lower = 0, upper = 0;
      for (std::size_t b = 0; b < sequences; ++b) {
        const bool keys_only = p.cq[b + 1] == p.cq[b];
        if (keys_only) {
          // Keys no query reads: their exact dK and dV are 0, so the error is the entry itself.
          if (role == "dk" || role == "dv") {
            const NamedTensor& t = role == "dk" ? *p.q.dk : *p.q.dv;
            for (std::size_t r = p.ck[b]; r < p.ck[b + 1]; ++r) {
              lower = std::max(lower, t.tensor.matrices[r].cwiseAbs().maxCoeff());
              upper = std::max(upper, t.tensor.matrices[r].cwiseAbs().maxCoeff());
            }
          }
          continue;
        }
        const KernelAnalysis single = analyze_kernel(sequence_question(p, b));
        const OutputError& d = error_of(single, role);
        lower = std::max(lower, d.max_abs_error_lower);
        upper = std::max(upper, d.max_abs_error_upper);
      }
      RC_ASSERT(e.max_abs_error_lower == lower);
      RC_ASSERT(e.max_abs_error_upper == upper);
    }
  });

  rc::prop("tensors read head by head, and taken over, give the token-major answer exactly", [] {
    const std::uint64_t seed = *rc::gen::arbitrary<std::uint64_t>();
    const Packed p = gen_packed(seed);
    KernelQuestion h = p.q;
    for (NamedTensor* t : {&h.q, &h.k, &h.v}) *t = heads_first(*t);
    for (std::optional<NamedTensor>* t : {&h.candidate, &h.reference, &h.dout, &h.dq, &h.dk, &h.dv})
      if (*t) **t = heads_first(**t);
    const nlohmann::json want = to_json(analyze_kernel(p.q));
    RC_ASSERT(to_json(analyze_kernel(h)) == want);
    RC_ASSERT(to_json(analyze_kernel(KernelQuestion(h))) == want);  // free to take the tensors over
    // One sequence spanning every tensor: the one case whose tensors are taken, not copied.
    KernelQuestion one = h;
    const std::size_t total_q = h.q.tensor.shape[0], total_k = h.k.tensor.shape[0];
    RC_PRE(total_q > 0 && total_k > 0);
    one.causal = false;  // a window over the joined sequences could leave a row without a key
    one.window.reset();
    one.cu_seqlens_q = offsets({0, total_q}, "cu_seqlens_q");
    one.cu_seqlens_k = offsets({0, total_k}, "cu_seqlens_k");
    one.alibi_slopes.reset();
    one.q_descale.reset();
    one.k_descale.reset();
    one.v_descale.reset();
    one.masks.reset();
    one.bias.reset();
    one.dropout_mask.reset();
    const nlohmann::json copied = to_json(analyze_kernel(one));
    RC_ASSERT(to_json(analyze_kernel(std::move(one))) == copied);
  });

  rc::prop("a planted error is reported at its packed token, sequence and head", [] {
    const std::uint64_t seed = *rc::gen::arbitrary<std::uint64_t>();
    Packed p = gen_packed(seed);
    const std::size_t total = p.cq.back();
    RC_PRE(total > 0);
    const std::size_t token = *rc::gen::inRange<std::size_t>(0, total);
    const std::size_t heads = p.q.q.tensor.shape[1];
    const std::size_t head = *rc::gen::inRange<std::size_t>(0, heads);
    p.q.candidate->tensor.matrices[token](static_cast<Eigen::Index>(head), 0) += 1e6;  // far beyond |V| <= 2^10 ish
    p.q.options.fallback = FallbackPolicy::never;
    const KernelAnalysis a = analyze_kernel(p.q);
    const nlohmann::json worst = to_json(a)["candidate"]["worst"];
    const std::size_t sequence = static_cast<std::size_t>(std::upper_bound(p.cq.begin(), p.cq.end(), token) - p.cq.begin()) - 1;
    RC_ASSERT(worst["token"] == token);
    RC_ASSERT(worst["sequence"] == sequence);
    RC_ASSERT(worst["head"] == head);
    RC_ASSERT(worst["row"] == token - p.cq[sequence]);
    RC_ASSERT(worst["column"] == 0);
    RC_ASSERT(a.result->candidate.max_abs_error_lower > 1e5);
  });

  rc::prop("every verdict in one place: tensor_verdicts, the JSON's verdicts and verdict, the text's line", [] {
    Packed p = gen_packed(*rc::gen::arbitrary<std::uint64_t>());
    p.q.options.fallback = FallbackPolicy::never;
    p.q.max_error = *rc::gen::element(1e-12, 0.5, 1e9);
    p.q.max_error_text = shortest_decimal(*p.q.max_error);
    const KernelAnalysis a = analyze_kernel(p.q);
    const std::vector<TensorVerdict> all = tensor_verdicts(a);
    // One per tensor checked (out, dq, dk, dv, lse), in that order, each its own verdict.
    std::vector<std::string> tensors;
    for (const TensorVerdict& v : all) tensors.push_back(v.tensor);
    RC_ASSERT(tensors == (std::vector<std::string>{"out", "dq", "dk", "dv", "lse"}));
    RC_ASSERT(all[0].verdict == *a.error_verdict);
    for (std::size_t i = 1; i < all.size(); ++i) RC_ASSERT(all[i].verdict == *a.gradients[i - 1].error_verdict);
    const nlohmann::json j = to_json(a);
    for (const TensorVerdict& v : all) RC_ASSERT(j["verdicts"][v.tensor][v.criterion] == to_string(v.verdict));
    std::vector<ToleranceVerdict> verdicts;
    for (const TensorVerdict& v : all) verdicts.push_back(v.verdict);
    RC_ASSERT(j["verdict"] == to_string(*combined_verdict(verdicts)));
    RC_ASSERT((j["verdict"] == "exceeded") == !a.exceeded.empty());
    RC_ASSERT(to_text(a).find(std::string("\nverdict: ") + to_string(*overall_verdict(a)) + " (out max_error ") !=
              std::string::npos);
    // Without a tolerance there is no verdict to summarise.
    p.q.max_error.reset();
    RC_ASSERT(!to_json(analyze_kernel(p.q)).contains("verdicts"));
  });
}

TEST_CASE("attnrank::analyze_kernel refuses bad packed sequences", "[kernel][varlen]") {
  Packed p = gen_packed(7);
  while (p.cq.size() < 3 || p.cq.back() == 0) p = gen_packed(p.cq.size() * 31 + p.cq.back() + 1000);
  const auto message = [&](auto&& change) {
    Packed bad = p;
    change(bad.q);
    return input_error_message([&] { (void)analyze_kernel(bad.q); });
  };
  const std::string total = std::to_string(p.cq.back());
  CHECK_THAT(message([](KernelQuestion& q) { q.cu_seqlens_k.reset(); }),
             Catch::Contains("need both cu_seqlens_q and cu_seqlens_k"));
  CHECK_THAT(message([&](KernelQuestion& q) {
               std::vector<std::size_t> c = p.cq;
               c.back() -= 1;
               q.cu_seqlens_q = offsets(c, "cu_seqlens_q");
             }),
             Catch::Contains("the last offset is the total length"));
  CHECK_THAT(message([&](KernelQuestion& q) {
               std::vector<std::size_t> c = p.cq;
               c[0] = 1;
               q.cu_seqlens_q = offsets(c, "cu_seqlens_q");
             }),
             Catch::Contains("cu_seqlens_q (cu_seqlens_q) entry 0 is 1"));
  CHECK_THAT(message([&](KernelQuestion& q) {
               std::vector<std::size_t> c = p.ck;
               c.push_back(c.back());
               q.cu_seqlens_k = offsets(c, "cu_seqlens_k");
             }),
             Catch::Contains("one offset list entry per sequence"));
  CHECK_THAT(message([](KernelQuestion& q) { q.max_seqlen_q = 0; }), Catch::Contains("max_seqlen_q 0 is below"));
  CHECK_THAT(message([&](KernelQuestion& q) {
               q.candidate->tensor.shape[0] += 1;
               q.candidate->tensor.matrices.push_back(q.candidate->tensor.matrices[0]);
             }),
             Catch::Contains("packed sequences (cu_seqlens) need (total_q, H, d)"));
  CHECK_THAT(message([&](KernelQuestion& q) { q.lse->tensor.matrices[0].conservativeResize(0, 1); }),
             Catch::Contains("packed sequences' logsumexp is (H, total_q)"));
  CHECK_THAT(message([&](KernelQuestion& q) {
               q.bias = tensor({1, 1}, {Eigen::MatrixXd::Zero(1, 1)}, "bias.npy");
             }),
             Catch::Contains("smaller than the longest sequences"));
  // A sequence with queries and no keys.
  KernelQuestion q = p.q;
  std::vector<std::size_t> ck(p.ck.size(), 0);
  ck.back() = p.ck.back();
  for (std::size_t b = 0; b + 1 < ck.size(); ++b) ck[b] = 0;
  q.cu_seqlens_k = offsets(ck, "cu_seqlens_k");
  if (p.cq[1] > 0)
    CHECK_THAT(input_error_message([&] { (void)analyze_kernel(q); }), Catch::Contains("queries and no keys"));
}
