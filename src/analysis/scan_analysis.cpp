// Every head of a stack, on a pool of threads (analysis/scan_analysis.hpp).
#include <attnrank/analysis/scan_analysis.hpp>

#include <attnrank/analysis/document.hpp>
#include <attnrank/analysis/reach_analysis.hpp>
#include <attnrank/analysis/result_guard.hpp>
#include <attnrank/analysis/width_analysis.hpp>
#include <attnrank/attention/multi_head_attention.hpp>
#include <attnrank/io/double_tensor.hpp>
#include <attnrank/numbers/decimal.hpp>
#include <attnrank/numbers/detail/parallel.hpp>
#include <attnrank/reach/masked.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <sstream>

namespace attnrank {
namespace {

std::string index_text(const std::vector<std::size_t>& index) {
  std::string s = "[";
  for (std::size_t k = 0; k < index.size(); ++k) {
    if (k) s += ',';
    s += std::to_string(index[k]);
  }
  s += ']';
  return s;
}

std::string slice_name(const HeadStack& stack, std::size_t t) {
  std::string name = stack.name;
  if (!stack.index[t].empty()) name += index_text(stack.index[t]);
  return name;
}

/// input_error (naming the slice) when a pattern is not square.
void require_square(const Eigen::MatrixXd& P, const std::string& name) {
  if (P.rows() != P.cols())
    throw input_error(name + ": the pattern is " + std::to_string(P.rows()) + " x " + std::to_string(P.cols()) +
                      ", not square (a scan asks about n x n attention patterns: the last two dimensions)");
}

/// The note on a head with a zero entry (HeadScan::note), its advice read off the
/// smallest positive weight: a softmax gives exact zeros where its exponentials
/// underflow, so the smallest weight it kept says in which precision it ran. The
/// weight itself is not in the note (each head's is in its row), so heads with the
/// same signature share one note.
std::string zero_entry_note(bool zeros_causal, double smallest_weight) {
  if (zeros_causal) return causal_zeros_note;
  const std::string zeros = "exact zeros where a key is allowed: no finite scores give a weight of 0. ";
  // Exactly a subnormal of the format, not merely as small: a signature, not a guess.
  const bool float32_subnormal =
      smallest_weight < 0x1p-126 && static_cast<double>(static_cast<float>(smallest_weight)) == smallest_weight;
  const bool float16_subnormal =
      smallest_weight < 0x1p-14 && std::ldexp(smallest_weight, 24) == std::floor(std::ldexp(smallest_weight, 24));
  if (float32_subnormal)
    return zeros + "The smallest positive weight is a float32 subnormal: the signature of a softmax computed in "
                   "float32, which gives 0 below 1.4e-45. Recompute the pattern in float64 (from Python, "
                   "attnrank.attention_patterns does), or mask those positions";
  if (float16_subnormal)
    return zeros + "The smallest positive weight is a float16 subnormal: the signature of a pattern computed or "
                   "saved in float16, which gives 0 below 6.0e-08. Compute and save the pattern in float64 "
                   "(float32 gives 0 below 1.4e-45), or mask those positions";
  return zeros + "A softmax gives 0 where its exponentials underflow: below 6.0e-08 in float16, 9.2e-41 in "
                 "bfloat16, 1.4e-45 in float32. Compute and save the pattern in float64 (from Python, "
                 "attnrank.attention_patterns does), or mask those positions";
}

HeadScan scan_head(const HeadStack& stack, std::size_t t, const ScanQuestion& q) {
  const auto start = std::chrono::steady_clock::now();
  const std::string name = slice_name(stack, t);
  const Eigen::MatrixXd P = stack.pattern(t);
  const Matrix<Rational> A = exact_of_doubles(P, name);  // validate(stack, q) checked it
  HeadScan h;
  h.index = stack.index[t];
  h.n = A.rows();
  // reach's band at d_k and the width profile share the target's starts, fits
  // and certified logs (the same values either computes alone).
  ApproxMemo memo(A, q.mask);
  ReachQuestion rq;
  rq.memo = &memo;
  rq.dk = std::min<Eigen::Index>(q.dk.value_or(1), h.n);
  rq.mask = q.mask;
  // The floor itself, not only what one width needs (the free floor's quick
  // verdict). A masked floor is whole anyway; its per-block search keeps its budget.
  rq.full_floor = !q.mask.has_value();
  rq.certificate = false;  // a scan prints none
  rq.witness = false;      // nor the exact question's witness
  rq.seed = q.seed;
  rq.refine = q.refine;
  rq.error_bounds = q.dk ? ErrorBoundsPolicy::automatic : ErrorBoundsPolicy::never;
  if (q.dk) rq.epsilon = q.epsilon;
  rq.target_name = name;
  const ReachAnalysis r = analyze_reach(A, rq);
  h.zero_entry = r.has_zero_entry();
  h.smallest_weight = P.maxCoeff();
  for (Eigen::Index i = 0; i < h.n; ++i)
    for (Eigen::Index j = 0; j < h.n; ++j) {
      if (P(i, j) > 0) h.smallest_weight = std::min(h.smallest_weight, P(i, j));
      if (P(i, j) == 0 && (!q.mask || q.mask->allows(i, j))) ++h.zero_entries;
    }
  if (h.zero_entry) h.note = zero_entry_note(r.zeros_causal, h.smallest_weight);
  if (!h.zero_entry) {
    h.floor_lower = r.floor_lower();
    h.floor_upper = r.floor_upper();
  }
  if (q.dk) h.verdict = r.verdict();
  h.refined = r.refinement.ran;
  h.time_limit_reached = r.refinement.time_limit_reached;
  h.still_improving = r.refinement.still_improving;
  std::optional<ApproxBounds> band = r.approx;
  if (band && h.verdict == Verdict::reachable) band->error_lower = band->error_upper = 0;  // E* = 0, exactly
  if (q.epsilon) {
    WidthQuestion wq;
    wq.epsilon = *q.epsilon;
    wq.max_dk = q.max_dk;
    wq.mask = q.mask;
    wq.seed = q.seed;
    wq.refine = q.refine;
    wq.target_name = name;
    wq.memo = &memo;
    if (q.dk) wq.first_fit = rq.dk;  // its fit is in the memo already
    const WidthAnalysis w = analyze_width(A, wq);
    WidthResult width = w.result;
    // One story per head: the band at d_k and the profile are both proven, so each
    // tightens the other (E* is non-increasing in d_k).
    if (band) {
      add_band(width, band->dk, band->error_lower, band->error_upper);
      if (band->dk <= width.max_dk) {
        const WidthProfileEntry& e = width.profile[static_cast<std::size_t>(band->dk - 1)];
        band->error_lower = e.error_lower;
        band->error_upper = e.error_upper;
      }
    }
    h.width_lower = width.width_lower;
    if (width.width_upper != 0) h.width_upper = width.width_upper;
    h.max_dk = width.max_dk;
    h.refined = h.refined || w.refinement.ran;
    h.time_limit_reached = h.time_limit_reached || w.refinement.time_limit_reached;
    h.still_improving = h.still_improving || w.refinement.still_improving;
  }
  if (band) {
    h.error_lower = band->error_lower;
    h.error_upper = band->error_upper;
    if (q.epsilon) h.epsilon_verdict = to_string(epsilon_verdict(*band, *q.epsilon));
  }
  h.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  guard_result(h);
  return h;
}

}  // namespace

HeadStack attention_head_stack(const std::vector<AttentionWeights>& layers, const std::vector<Matrix<Rational>>& inputs,
                               Eigen::Index heads, const std::optional<Mask>& mask,
                               const std::vector<std::string>& layer_names, const std::string& name) {
  if (layers.empty()) throw input_error(name + ": no attention layers");
  if (inputs.size() != 1 && inputs.size() != layers.size())
    throw input_error(name + ": " + std::to_string(inputs.size()) + " layer inputs X for " +
                      std::to_string(layers.size()) + " attention layers (give one X for all, or one per layer)");
  if (heads < 1) throw input_error(name + ": heads = " + std::to_string(heads) + ": a layer has at least one head");
  HeadStack stack;
  stack.name = name;
  const Eigen::Index n = inputs.front().rows();
  stack.shape = {layers.size(), static_cast<std::size_t>(heads), static_cast<std::size_t>(n), static_cast<std::size_t>(n)};
  for (std::size_t l = 0; l < layers.size(); ++l) {
    const Matrix<Rational>& X = inputs.size() == 1 ? inputs.front() : inputs[l];
    const std::string layer = l < layer_names.size() ? layer_names[l] : "layer " + std::to_string(l);
    if (X.rows() != n)
      throw input_error(name + ": the input of " + layer + " has " + std::to_string(X.rows()) + " rows, the first " +
                        std::to_string(n) + " (every layer's patterns are n x n for one n)");
    try {
      const MultiHeadAttention<Rational> exact(layers[l].wq, layers[l].wk, layers[l].wv, layers[l].wo, heads);
      const auto trace = layer_in_tier<double>(exact).forward(to_tier<double>(X), mask ? std::vector<Mask>{*mask}
                                                                                        : std::vector<Mask>{});
      for (std::size_t h = 0; h < trace.heads.size(); ++h) {
        stack.index.push_back({l, h});
        stack.patterns.push_back(trace.heads[h].A);
      }
    } catch (const input_error& e) {
      throw input_error(name + ": " + layer + ": " + e.what());
    }
  }
  return stack;
}

std::string width_known(const HeadScan& h) {
  if (!h.width_lower) return "";
  if (!h.width_upper) return "lower";
  if (*h.width_upper == *h.width_lower) return "exact";
  return *h.width_lower == 1 ? "upper" : "range";
}

HeadStack read_head_stack(const std::vector<std::string>& arguments, const ParseLimits& limits) {
  if (arguments.empty()) throw input_error("no attention patterns to read");
  HeadStack stack;
  stack.name = arguments.size() == 1 ? arguments.front() : arguments.front() + " (and " +
                                                               std::to_string(arguments.size() - 1) + " more)";
  // where[t]: head t is matrix where[t].second of file where[t].first.
  std::vector<std::shared_ptr<const MatrixStackFile>> files;
  std::vector<std::pair<std::size_t, std::size_t>> where;
  for (std::size_t f = 0; f < arguments.size(); ++f) {
    files.push_back(std::make_shared<const MatrixStackFile>(arguments[f], limits));
    const MatrixStackFile& file = *files.back();
    if (f == 0) {
      stack.shape = file.shape();
      if (arguments.size() > 1) stack.shape.insert(stack.shape.begin(), arguments.size());
    }
    for (std::size_t k = 0; k < file.size(); ++k) {
      std::vector<std::size_t> index = file.leading_index(k);
      if (arguments.size() > 1) index.insert(index.begin(), f);
      stack.index.push_back(std::move(index));
      where.emplace_back(f, k);
    }
  }
  stack.read = [files, where](std::size_t t) { return files[where.at(t).first]->matrix(where[t].second); };
  return stack;
}

void validate(const ScanQuestion& q) {
  if (q.epsilon && !(*q.epsilon >= 0 && *q.epsilon <= 1))
    throw input_error("epsilon " + shortest_decimal(*q.epsilon) + " is outside [0, 1] (attention weights lie in [0, 1])");
  validate(q.refine);
}

void validate(const HeadStack& stack, const ScanQuestion& q) {
  validate(q);
  if (stack.size() == 0) throw input_error(stack.name + ": no heads to scan");
  if (stack.index.size() != stack.size())
    throw input_error(stack.name + ": " + std::to_string(stack.index.size()) + " indices for " +
                      std::to_string(stack.size()) + " heads");
  // On the doubles themselves (the exact values they store): no rationals made.
  for (std::size_t t = 0; t < stack.size(); ++t) {
    const Eigen::MatrixXd A = stack.pattern(t);
    const std::string name = slice_name(stack, t);
    require_square(A, name);
    validate_target(A, name);
    if (q.mask) validate_masked_target(A, *q.mask, name);
    if (q.dk && (*q.dk < 1 || *q.dk > A.rows()))
      throw input_error("d_k " + std::to_string(*q.dk) + " is out of range for " + name + ": 1 <= d_k <= n = " +
                        std::to_string(A.rows()));
    if (q.max_dk && (*q.max_dk < 1 || *q.max_dk > A.rows()))
      throw input_error("max_dk " + std::to_string(*q.max_dk) + " is out of range for " + name +
                        ": 1 <= max_dk <= n = " + std::to_string(A.rows()));
  }
}

std::vector<HeadScan> analyze_scan(const HeadStack& stack, const ScanQuestion& q,
                                   const std::function<void(const HeadScan&)>& on_head) {
  validate(stack, q);
  const std::size_t count = stack.size();
  std::vector<HeadScan> out(count);
  std::mutex report;  // guards on_head
  detail::for_each_task(count, q.jobs, [&](std::size_t t) {
    HeadScan h = scan_head(stack, t, q);
    const std::lock_guard<std::mutex> lock(report);
    out[t] = std::move(h);
    if (on_head) on_head(out[t]);
  });
  return out;
}

nlohmann::json to_json(const HeadScan& h) {
  using nlohmann::json;
  json j{{"index", h.index}, {"n", h.n}, {"zero_entry", h.zero_entry}, {"zero_entries", h.zero_entries},
         {"smallest_weight", h.smallest_weight}};
  if (!h.note.empty()) j["note"] = h.note;
  j["floor_lower"] = h.zero_entry ? json(nullptr) : json(h.floor_lower);
  j["floor_upper"] = h.zero_entry ? json(nullptr) : json(h.floor_upper);
  if (h.verdict) j["verdict"] = to_string(*h.verdict);
  if (h.error_lower) {
    j["error_lower"] = lower_bound_json(*h.error_lower);
    j["error_upper"] = upper_bound_json(*h.error_upper);
  }
  if (h.epsilon_verdict) j["epsilon_verdict"] = *h.epsilon_verdict;
  if (h.width_lower) {
    j["width_lower"] = *h.width_lower;
    j["width_upper"] = h.width_upper ? json(*h.width_upper) : json(nullptr);
    j["width_known"] = width_known(h);
    j["max_d_k"] = h.max_dk;
  }
  j["refined"] = h.refined;
  j["time_limit_reached"] = h.time_limit_reached;
  j["still_improving"] = h.still_improving;
  j["seconds"] = h.seconds;
  return j;
}

nlohmann::json scan_document(const HeadStack& stack, const ScanQuestion& q, const std::vector<HeadScan>& heads) {
  using nlohmann::json;
  json list = json::array();
  for (const HeadScan& h : heads) list.push_back(to_json(h));
  return json_document({{"source", stack.name},
                        {"shape", stack.shape},
                        {"d_k", q.dk ? json(*q.dk) : json(nullptr)},
                        {"epsilon", q.epsilon ? json(*q.epsilon) : json(nullptr)},
                        {"mask", q.mask ? q.mask->name() : std::string("none")},
                        {"seed", q.seed},
                        {"refinement", {{"policy", q.refine.policy == RefinePolicy::always  ? "always"
                                                   : q.refine.policy == RefinePolicy::never ? "never"
                                                                                            : "automatic"},
                                        {"time_limit_per_head",
                                         q.refine.time_limit ? json(*q.refine.time_limit) : json(nullptr)},
                                        {"search_flops", q.refine.search_flops}}},
                        {"heads", list}},
                       "scan");
}

std::string scan_text(const HeadStack& stack, const ScanQuestion& q, const std::vector<HeadScan>& heads) {
  std::ostringstream s;
  s << "scan of " << stack.name << ": " << heads.size() << " heads";
  if (q.mask) s << ", mask " << q.mask->name();
  if (q.dk) s << ", d_k = " << *q.dk;
  if (q.epsilon) s << ", epsilon = " << *q.epsilon;
  s << " (every bound certified for its own head)\n";
  s << "  head        n  floor        " << (q.dk ? "verdict      E* at d_k               " : "")
    << (q.epsilon ? "minimal width" : "") << "\n";
  for (const HeadScan& h : heads) {
    std::ostringstream line;
    line << "  " << index_text(h.index);
    std::string l = line.str();
    l.resize(std::max<std::size_t>(l.size() + 1, 12), ' ');
    s << l << h.n << (h.n < 10 ? "    " : h.n < 100 ? "   " : h.n < 1000 ? "  " : " ");
    std::string floor = h.zero_entry ? "zero entry"
                        : h.floor_lower == h.floor_upper
                            ? "= " + std::to_string(h.floor_lower)
                            : std::to_string(h.floor_lower) + ".." + std::to_string(h.floor_upper);
    floor.resize(std::max<std::size_t>(floor.size() + 1, 13), ' ');
    s << floor;
    if (q.dk) {
      std::string v = h.verdict ? to_string(*h.verdict) : "";
      v.resize(13, ' ');
      s << v;
      std::string band = h.error_lower ? format_lower_bound(*h.error_lower) + " .. " + format_upper_bound(*h.error_upper)
                                       : std::string("(n > 512: epsilon)");
      band.resize(std::max<std::size_t>(band.size() + 1, 24), ' ');
      s << band;
    }
    if (q.epsilon && h.width_lower) {
      const std::string known = width_known(h);
      if (known == "exact") s << "= " << *h.width_upper;
      else if (known == "upper") s << "<= " << *h.width_upper;
      else if (known == "range") s << *h.width_lower << ".." << *h.width_upper;
      else s << ">= " << *h.width_lower << " (none within epsilon up to " << h.max_dk << ")";
    }
    if (h.time_limit_reached) s << "  (time limit reached)";
    else if (h.still_improving) s << "  (search still improving)";
    s << "\n";
  }
  if (std::any_of(heads.begin(), heads.end(), [](const HeadScan& h) { return h.still_improving; }))
    s << "search still improving: the optimiser's fixed work ran out while it still lowered its error; "
         "a time limit of 0 (the full search, up to "
      << shortest_decimal(full_search_flops / q.refine.search_flops) << " times the work) may sharpen those rows\n";
  if (q.epsilon)
    s << "minimal width: '= w' proven both ways; '<= w' a certified witness within epsilon at w, no narrower "
         "width proven to miss; 'a..b' every width below a proven to miss, a witness at b\n";
  // Each note once, with the heads it concerns (a stack saved in float16 gives one note, not 144).
  std::vector<std::string> notes;
  for (const HeadScan& h : heads)
    if (!h.note.empty() && std::find(notes.begin(), notes.end(), h.note) == notes.end()) notes.push_back(h.note);
  for (const std::string& note : notes) {
    std::vector<std::string> which;
    Eigen::Index zeros = 0;
    double smallest = std::numeric_limits<double>::infinity();
    for (const HeadScan& h : heads)
      if (h.note == note) {
        which.push_back(index_text(h.index));
        zeros += h.zero_entries;
        smallest = std::min(smallest, h.smallest_weight);
      }
    s << "note (" << which.size() << (which.size() == 1 ? " head" : " heads");
    for (std::size_t k = 0; k < which.size() && k < 4; ++k) s << (k ? ", " : ": ") << which[k];
    if (which.size() > 4) s << ", ...";
    char weight[32];
    std::snprintf(weight, sizeof weight, "%.2g", smallest);
    s << "; " << zeros << " zero entries, smallest positive weight " << weight << "): " << note
      << "\n";
  }
  return s.str();
}

std::string stack_note(const std::vector<std::size_t>& shape) {
  if (shape.size() != 3 || shape[0] != 1) return "";
  return "one head of shape (1, n, n): if these are the weights torch's nn.MultiheadAttention returns "
         "(need_weights=True), they are the average over its heads, which no single head need produce: pass "
         "average_attn_weights=False for each head's pattern, (1, heads, n, n)";
}

}  // namespace attnrank
