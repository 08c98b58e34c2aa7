// The certified errors of a kernel's backward pass (attnrank/attention/gradient_check.hpp).
#include <attnrank/attention/gradient_check.hpp>

#include <attnrank/attention/certified_gradients.hpp>
#include <attnrank/attention/detail/error_accumulator.hpp>
#include <attnrank/attention/detail/interval_attention.hpp>
#include <attnrank/numbers/bands.hpp>
#include <attnrank/numbers/decimal.hpp>

#include <array>
#include <string>

namespace attnrank {
namespace {

using Eigen::Index;

std::string dims(Index rows, Index cols) { return std::to_string(rows) + " x " + std::to_string(cols); }

/// The five results by name, in one order everywhere.
constexpr std::size_t results = 5, dsinks_index = 4;
constexpr std::array<const char*, results> names = {"dq", "dk", "dv", "lse", "dsinks"};

const std::vector<Eigen::MatrixXd>& part(const KernelGradients& g, std::size_t r) {
  return r == 0 ? g.dq : r == 1 ? g.dk : r == 2 ? g.dv : r == 3 ? g.lse : g.dsinks;
}

std::optional<TensorCheck>& part(GradientCheck& c, std::size_t r) {
  return r == 0 ? c.dq : r == 1 ? c.dk : r == 2 ? c.dv : r == 3 ? c.lse : c.dsinks;
}

/// How many matrices result r has (dk, dv: one per K/V head; dsinks: one) and the exact one's shape for matrix t.
std::size_t count(std::size_t r, const std::vector<Eigen::MatrixXd>& q, const std::vector<Eigen::MatrixXd>& k) {
  return r == dsinks_index ? 1 : r == 1 || r == 2 ? k.size() : q.size();
}

std::pair<Index, Index> expected_shape(std::size_t r, std::size_t t, const std::vector<Eigen::MatrixXd>& q,
                                       const std::vector<Eigen::MatrixXd>& k, const std::vector<Eigen::MatrixXd>& v,
                                       const KernelCheckOptions& options) {
  switch (r) {
    case 0: return {q[t].rows(), q[t].cols()};
    case 1: return {k[t].rows(), k[t].cols()};
    case 2: return {v[t].rows(), v[t].cols()};
    case 3: return {q[t].rows(), 1};
    default: return {static_cast<Index>(sink_param_count(q.size(), options)), 1};
  }
}

void check_list(const std::vector<Eigen::MatrixXd>& list, std::size_t r, const std::vector<Eigen::MatrixXd>& q,
                const std::vector<Eigen::MatrixXd>& k, const std::vector<Eigen::MatrixXd>& v, const std::string& who,
                const KernelCheckOptions& options) {
  if (list.empty()) return;
  const std::string name = who + " " + names[r];
  if (r == dsinks_index && options.sinks.empty())
    throw input_error(name + " given, but the attention has no sinks (the gradient of a sink logit needs the sinks)",
                      names[r]);
  const std::size_t n = count(r, q, k);
  if (list.size() != n)
    throw input_error(name + " has " + std::to_string(list.size()) + " matrices for " + std::to_string(n) +
                          (r == dsinks_index ? " (one column of every sink's gradient)"
                           : r == 1 || r == 2 ? " K/V heads" : " heads"), names[r]);
  for (std::size_t t = 0; t < n; ++t) {
    const auto [rows, cols] = expected_shape(r, t, q, k, v, options);
    if (r == dsinks_index && (list[t].rows() != rows || list[t].cols() != cols))
      throw input_error(name + " has " + std::to_string(list[t].size()) + " entries (" +
                            dims(list[t].rows(), list[t].cols()) + ") for " + std::to_string(rows) +
                            " sink parameters (" + dims(rows, 1) + ": one per head's sink)",
                        names[r]);
    if (list[t].rows() != rows || list[t].cols() != cols)
      throw input_error(name + " head " + std::to_string(t) + " is " + dims(list[t].rows(), list[t].cols()) +
                            " but the exact " + names[r] + " is " + dims(rows, cols), names[r]);
  }
}

void add_intervals(Matrix<Interval>& sum, const Matrix<Interval>& part) {
  if (sum.size() == 0) {
    sum = part;
    return;
  }
  for (Index j = 0; j < sum.cols(); ++j)
    for (Index i = 0; i < sum.rows(); ++i) sum(i, j) += part(i, j);
}

}  // namespace

GradientCheck check_kernel_gradients(const std::vector<Eigen::MatrixXd>& q, const std::vector<Eigen::MatrixXd>& k,
                                     const std::vector<Eigen::MatrixXd>& v, const std::vector<Eigen::MatrixXd>& dout,
                                     const KernelGradients& candidate, const KernelGradients* reference,
                                     const KernelCheckOptions& options) {
  if (q.empty()) throw input_error("check_kernel_gradients: no heads");
  detail::check_kv_heads(q.size(), k.size(), v.size(), options, "check_kernel_gradients");
  detail::check_modifiers(q.size(), options, "check_kernel_gradients");
  GradientsWanted wanted{!candidate.dq.empty(), !candidate.dk.empty(), !candidate.dv.empty(), !candidate.lse.empty()};
  wanted.dsink = !candidate.dsinks.empty();
  if (!wanted.any_gradient() && !wanted.lse)
    throw input_error("check_kernel_gradients: no gradient (dq, dk, dv, dsinks) and no lse to check");
  for (std::size_t r = 0; r < names.size(); ++r) {
    check_list(part(candidate, r), r, q, k, v, "the candidate", options);
    if (reference) {
      check_list(part(*reference, r), r, q, k, v, "the reference", options);
      if (!part(*reference, r).empty() && part(candidate, r).empty())
        throw input_error(std::string("a reference ") + names[r] + " needs the candidate's " + names[r] +
                              " (the reference's error is what the candidate's is compared with)", names[r]);
    }
  }
  if (wanted.any_gradient()) {
    if (dout.size() != q.size())
      throw input_error("the gradients need dout: " + std::to_string(dout.size()) + " matrices for " +
                            std::to_string(q.size()) + " heads", "dout");
    for (std::size_t t = 0; t < q.size(); ++t)
      if (dout[t].rows() != q[t].rows() || dout[t].cols() != v[kv_head_of(options, t)].cols())
        throw input_error("dout head " + std::to_string(t) + " is " + dims(dout[t].rows(), dout[t].cols()) +
                              " but the output is " + dims(q[t].rows(), v[kv_head_of(options, t)].cols()) +
                              " (rows of Q x columns of V)",
                          "dout");
  }
  if (options.scale) (void)ScaleBounds::exactly(*options.scale);
  if (options.fallback_bits < 53 || options.fallback_bits > max_precision_bits)
    throw input_error("check_kernel_gradients: fallback precision " + std::to_string(options.fallback_bits) +
                      " bits is outside [53, " + std::to_string(max_precision_bits) + "]");
  static const Eigen::MatrixXd none;

  GradientCheck out;
  const auto run = [&](bool intervals, AttentionProducts products) {
    std::array<detail::ErrorAccumulator, results> c, r;
    const auto add = [&](std::size_t i, std::size_t t, const auto& E) {
      if (part(candidate, i).empty()) return;
      c[i].add(t, E, part(candidate, i)[t]);
      if (reference && !part(*reference, i).empty()) r[i].add(t, E, part(*reference, i)[t]);
    };
    // dK and dV of a K/V head are the sums over the query heads that read it (grouped queries).
    std::vector<BoundsMatrix> dk(k.size()), dv(k.size());
    std::vector<Matrix<Interval>> idk(k.size()), idv(k.size());
    std::vector<bool> read(k.size(), false);
    // A sink parameter's gradient is the sum over the query heads that share it.
    const Index params = static_cast<Index>(sink_param_count(q.size(), options));
    BoundsMatrix dsinks{Eigen::MatrixXd::Zero(params, 1), Eigen::MatrixXd::Zero(params, 1)};
    Matrix<Interval> idsinks = Matrix<Interval>::Constant(params, 1, Interval(0));
    for (std::size_t t = 0; t < q.size(); ++t) {
      const std::size_t j = kv_head_of(options, t);
      read[j] = true;
      const Eigen::MatrixXd& dO = wanted.any_gradient() ? dout[t] : none;
      const Mask* mask = mask_of(options, t);
      if (intervals) {
        detail::IntervalGradients E =
            detail::interval_attention_gradients(q[t], k[j], v[j], dO, options.scale, mask, wanted, modifiers_of(options, t));
        add(0, t, E.dq);
        add(3, t, E.lse);
        if (wanted.dsink) idsinks(static_cast<Index>(sink_param_of(options, t)), 0) += E.dsink(0, 0);
        if (wanted.dk) add_intervals(idk[j], E.dk);
        if (wanted.dv) add_intervals(idv[j], E.dv);
      } else {
        const ScaleBounds s = options.scale ? ScaleBounds::exactly(*options.scale) : ScaleBounds::inverse_sqrt(q[t].cols());
        const GradientBounds E = certified_attention_gradients(q[t], k[j], v[j], dO, s, mask, products, wanted,
                                                               modifiers_of(options, t));
        add(0, t, E.dq);
        add(3, t, E.lse);
        if (wanted.dsink) {
          const Index g = static_cast<Index>(sink_param_of(options, t));
          BoundsMatrix one{dsinks.lo.row(g), dsinks.hi.row(g)};
          detail::add_bounds(one, E.dsink);
          dsinks.lo.row(g) = one.lo;
          dsinks.hi.row(g) = one.hi;
        }
        if (wanted.dk) detail::add_bounds(dk[j], E.dk);
        if (wanted.dv) detail::add_bounds(dv[j], E.dv);
      }
    }
    for (std::size_t j = 0; j < k.size(); ++j) {
      if (!read[j]) {  // read by no query head: dK and dV are exactly 0
        dk[j].lo = dk[j].hi = Eigen::MatrixXd::Zero(k[j].rows(), k[j].cols());
        dv[j].lo = dv[j].hi = Eigen::MatrixXd::Zero(v[j].rows(), v[j].cols());
        idk[j] = Matrix<Interval>::Constant(k[j].rows(), k[j].cols(), Interval(0));
        idv[j] = Matrix<Interval>::Constant(v[j].rows(), v[j].cols(), Interval(0));
      }
      if (intervals) {
        if (wanted.dk) add(1, j, idk[j]);
        if (wanted.dv) add(2, j, idv[j]);
      } else {
        if (wanted.dk) add(1, j, dk[j]);
        if (wanted.dv) add(2, j, dv[j]);
      }
    }
    if (wanted.dsink) {
      if (intervals) add(dsinks_index, 0, idsinks);
      else add(dsinks_index, 0, dsinks);
    }
    out.enclosure_width = 0;
    for (std::size_t i = 0; i < results; ++i) {
      if (part(candidate, i).empty()) continue;
      TensorCheck check;
      check.candidate = c[i].finish();
      if (reference && !part(*reference, i).empty()) {
        check.reference = r[i].finish();
        detail::ratio_bounds(check.candidate, *check.reference, check.ratio_lower, check.ratio_upper);
      }
      out.enclosure_width = std::max(out.enclosure_width, c[i].width());
      part(out, i) = check;
    }
  };
  const auto every = [&](const auto& predicate) {
    for (std::size_t i = 0; i < results; ++i) {
      const std::optional<TensorCheck>& t = part(out, i);
      if (t && (!predicate(t->candidate) || (t->reference && !predicate(*t->reference)))) return false;
    }
    return true;
  };
  const auto tight = [](const OutputError& e) { return e.tight(); };
  const auto within_reach = [](const OutputError& e) { return e.within_reach(); };

  // The forward's policy (attention/kernel_check.hpp).
  run(false, AttentionProducts::a_priori);
  out.method = "double";
  out.products = "a_priori";
  if (!every(tight) && every(within_reach)) {
    run(false, AttentionProducts::directed);
    out.products = "directed";
  }
  double work = 0;
  for (std::size_t t = 0; t < q.size(); ++t)
    work += static_cast<double>(q[t].rows()) * static_cast<double>(k[kv_head_of(options, t)].rows()) *
            static_cast<double>(3 * q[t].cols() + 3 * v[kv_head_of(options, t)].cols());
  const bool wanted_mpfi = options.fallback == FallbackPolicy::always || (!every(tight) && options.fallback != FallbackPolicy::never);
  if (wanted_mpfi && options.fallback == FallbackPolicy::automatic && work > options.fallback_budget) {
    out.fallback_skipped = detail::fallback_skipped_note("the certified double enclosures of the backward pass",
                                                         out.enclosure_width, options, work);
  } else if (wanted_mpfi) {
    const PrecisionScope scope(options.fallback_bits);
    run(true, AttentionProducts::directed);
    out.method = "mpfi";
    out.products = "";
    out.bits = PrecisionScope::bits();
  }
  return out;
}

}  // namespace attnrank
