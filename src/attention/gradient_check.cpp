// The certified errors of a kernel's backward pass (attnrank/attention/gradient_check.hpp).
#include <attnrank/attention/gradient_check.hpp>

#include <attnrank/attention/certified_gradients.hpp>
#include <attnrank/attention/detail/error_accumulator.hpp>
#include <attnrank/attention/detail/interval_attention.hpp>
#include <attnrank/numbers/decimal.hpp>

#include <array>
#include <string>

namespace attnrank {
namespace {

using Eigen::Index;

std::string dims(Index rows, Index cols) { return std::to_string(rows) + " x " + std::to_string(cols); }

/// The four results by name, in one order everywhere.
constexpr std::array<const char*, 4> names = {"dq", "dk", "dv", "lse"};

const std::vector<Eigen::MatrixXd>& part(const KernelGradients& g, std::size_t r) {
  return r == 0 ? g.dq : r == 1 ? g.dk : r == 2 ? g.dv : g.lse;
}

std::optional<TensorCheck>& part(GradientCheck& c, std::size_t r) {
  return r == 0 ? c.dq : r == 1 ? c.dk : r == 2 ? c.dv : c.lse;
}

/// The exact result's shape for head t.
std::pair<Index, Index> expected_shape(std::size_t r, const Eigen::MatrixXd& q, const Eigen::MatrixXd& k,
                                       const Eigen::MatrixXd& v) {
  switch (r) {
    case 0: return {q.rows(), q.cols()};
    case 1: return {k.rows(), k.cols()};
    case 2: return {v.rows(), v.cols()};
    default: return {q.rows(), 1};
  }
}

void check_list(const std::vector<Eigen::MatrixXd>& list, std::size_t r, const std::vector<Eigen::MatrixXd>& q,
                const std::vector<Eigen::MatrixXd>& k, const std::vector<Eigen::MatrixXd>& v, const std::string& who) {
  if (list.empty()) return;
  const std::string name = who + " " + names[r];
  if (list.size() != q.size())
    throw input_error(name + " has " + std::to_string(list.size()) + " matrices for " + std::to_string(q.size()) +
                          " heads", names[r]);
  for (std::size_t t = 0; t < q.size(); ++t) {
    const auto [rows, cols] = expected_shape(r, q[t], k[t], v[t]);
    if (list[t].rows() != rows || list[t].cols() != cols)
      throw input_error(name + " head " + std::to_string(t) + " is " + dims(list[t].rows(), list[t].cols()) +
                            " but the exact " + names[r] + " is " + dims(rows, cols), names[r]);
  }
}

}  // namespace

GradientCheck check_kernel_gradients(const std::vector<Eigen::MatrixXd>& q, const std::vector<Eigen::MatrixXd>& k,
                                     const std::vector<Eigen::MatrixXd>& v, const std::vector<Eigen::MatrixXd>& dout,
                                     const KernelGradients& candidate, const KernelGradients* reference,
                                     const KernelCheckOptions& options) {
  if (q.empty()) throw input_error("check_kernel_gradients: no heads");
  if (k.size() != q.size() || v.size() != q.size())
    throw input_error("check_kernel_gradients: " + std::to_string(q.size()) + " Q matrices, " +
                      std::to_string(k.size()) + " K and " + std::to_string(v.size()) + " V (one of each per head)");
  GradientsWanted wanted{!candidate.dq.empty(), !candidate.dk.empty(), !candidate.dv.empty(), !candidate.lse.empty()};
  if (!wanted.any_gradient() && !wanted.lse)
    throw input_error("check_kernel_gradients: no gradient (dq, dk, dv) and no lse to check");
  for (std::size_t r = 0; r < names.size(); ++r) {
    check_list(part(candidate, r), r, q, k, v, "the candidate");
    if (reference) {
      check_list(part(*reference, r), r, q, k, v, "the reference");
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
      if (dout[t].rows() != q[t].rows() || dout[t].cols() != v[t].cols())
        throw input_error("dout head " + std::to_string(t) + " is " + dims(dout[t].rows(), dout[t].cols()) +
                              " but the output is " + dims(q[t].rows(), v[t].cols()) + " (rows of Q x columns of V)",
                          "dout");
  }
  if (options.scale) (void)ScaleBounds::exactly(*options.scale);
  if (options.fallback_bits < 53 || options.fallback_bits > max_precision_bits)
    throw input_error("check_kernel_gradients: fallback precision " + std::to_string(options.fallback_bits) +
                      " bits is outside [53, " + std::to_string(max_precision_bits) + "]");
  const Mask* mask = options.mask ? &*options.mask : nullptr;
  static const Eigen::MatrixXd none;

  GradientCheck out;
  const auto run = [&](bool intervals, AttentionProducts products) {
    std::array<detail::ErrorAccumulator, 4> c, r;
    for (std::size_t t = 0; t < q.size(); ++t) {
      const Eigen::MatrixXd& dO = wanted.any_gradient() ? dout[t] : none;
      const auto add = [&](std::size_t i, const auto& E) {
        c[i].add(t, E, part(candidate, i)[t]);
        if (reference && !part(*reference, i).empty()) r[i].add(t, E, part(*reference, i)[t]);
      };
      if (intervals) {
        const detail::IntervalGradients E = detail::interval_attention_gradients(q[t], k[t], v[t], dO, options.scale,
                                                                                 mask, wanted);
        const std::array<const Matrix<Interval>*, 4> e = {&E.dq, &E.dk, &E.dv, &E.lse};
        for (std::size_t i = 0; i < 4; ++i)
          if (!part(candidate, i).empty()) add(i, *e[i]);
      } else {
        const ScaleBounds s = options.scale ? ScaleBounds::exactly(*options.scale) : ScaleBounds::inverse_sqrt(q[t].cols());
        const GradientBounds E = certified_attention_gradients(q[t], k[t], v[t], dO, s, mask, products, wanted);
        const std::array<const BoundsMatrix*, 4> e = {&E.dq, &E.dk, &E.dv, &E.lse};
        for (std::size_t i = 0; i < 4; ++i)
          if (!part(candidate, i).empty()) add(i, *e[i]);
      }
    }
    out.enclosure_width = 0;
    for (std::size_t i = 0; i < 4; ++i) {
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
    for (std::size_t i = 0; i < 4; ++i) {
      const std::optional<TensorCheck>& t = part(out, i);
      if (t && (!predicate(t->candidate) || (t->reference && !predicate(*t->reference)))) return false;
    }
    return true;
  };
  const auto tight = [](const OutputError& e) { return e.tight(); };
  const auto within_reach = [](const OutputError& e) {
    return e.tight() || e.max_abs_error_upper - e.max_abs_error_lower <= e.max_abs_error_upper / 8;
  };

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
    work += static_cast<double>(q[t].rows()) * static_cast<double>(k[t].rows()) *
            static_cast<double>(3 * q[t].cols() + 3 * v[t].cols());
  const bool wanted_mpfi = options.fallback == FallbackPolicy::always || (!every(tight) && options.fallback != FallbackPolicy::never);
  if (wanted_mpfi && options.fallback == FallbackPolicy::automatic && work > options.fallback_budget) {
    out.fallback_skipped = "the certified double enclosures of the backward pass (width up to " +
                           format_upper_bound(out.enclosure_width) + ") do not pin every error to 1%; recomputing " +
                           "them with MPFI at " + std::to_string(options.fallback_bits) + " bits takes " +
                           format_upper_bound(work, 2) + " interval multiply-adds, over the automatic budget of " +
                           format_upper_bound(options.fallback_budget, 2) + " (ask for it: fallback always)";
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
