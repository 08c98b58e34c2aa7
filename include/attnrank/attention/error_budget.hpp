#pragma once
// The certified error budget of a precision profile (attention/precision_profile.hpp):
// for given Q, K, V and a profile, an entrywise upper bound B on |O_hat - O| for the
// output O_hat (and the logsumexp) of EVERY correct forward kernel of that profile --
// any key block size of at least min_block, one-pass online softmax or two-pass, up
// to `splits` split-KV partitions merged through their logsumexps, any summation
// order -- where O = softmax(s Q K^T) V is the exact output of these very inputs. A
// kernel whose error is proven above B somewhere is not a correct kernel of the
// profile; one within B everywhere is as accurate as the profile allows.
//
// The model of a correct kernel (FlashAttention's): for each query row, scores
// s_hat_j = s q.k_j + sigma_j; weights p_j = exp(s_hat_j - m) with m the running
// maximum of the computed scores, each rescaled when m grows; P stored in the
// profile's format; numerator sum_j P_j v_j and row sum l = sum_j p_j (or of the
// stored P) accumulated; O_hat = fl_out(fl(numerator / l)); lse_hat = m + log l.
//
// The derivation, row i, output column c. Let w_j = exp(s_j - M) (exact), p_j =
// w_j / W its weights, o = sum_j p_j v_j, and N the keys the mask allows.
//  1. Exponent errors. |sigma_j| <= gamma_{d+x}(u_s) s ||q_i|| max_j ||k_j|| plus
//     6 argument_u (smax + sigma), smax = s ||q_i|| max_j ||k_j|| >= |s_ij| (the
//     argument's scale, log2(e) and max subtraction, three roundings of magnitudes up
//     to 2 smax). With exp_relative e and at most R = ceil(N_k / min_block) - 1
//     rescales (+1 for a split merge), each an exp of a difference of maxima (argument
//     error <= 4 argument_u smax', relative e), every computed weight is w_j lambda_j
//     (times a factor common to the row, which cancels) with lambda_j in [L-, L+]:
//     L+- = e^(+-sigma) (1 +- e) (e^(+-4 argument_u smax') (1 +- e))^R.
//  2. Reweighting. o' = sum_j w_j lambda_j v_j / sum_j w_j lambda_j satisfies
//     o' - o = sum_j w_j (lambda_j - 1)(v_j - o) / sum_j w_j lambda_j, so
//     |o' - o| <= A D,  A = max(L+ - 1, 1 - L-) / L-,  D = sum_j p_j |v_j - o|
//     <= min(S + |o|, sqrt(Q2 - o^2)), S = sum_j p_j |v_j|, Q2 = sum_j p_j v_j^2:
//     both are attention outputs (of |V| and V o V), enclosed with certified_attention.
//  3. Numerator and row sum. P's storage (u_P, and eta_P absolute), the rescales'
//     products (rescale_u each) and P V's accumulation (gamma_{N+R+1+x}(u_pv)) perturb
//     each term of the numerator by a relative g_num = (1 + u_P)(1 + rescale_u)^R
//     (1 + gamma) - 1 and add at most N eta_P max_j |v_j| in all; the row sum's by
//     g_den = (1 + rescale_u)^R (1 + gamma_{N+R+1+x}(u_l)) - 1 (times (1 + u_P), plus
//     eta_P per term, when it adds the stored P). As the row sum is at least its
//     largest term, fl(exp(0)) = 1 within e (m is the maximum): with T2 = g_num (L+ / L-)
//     S + N eta_P max|v| / ((1 - e)(1 - g_den)), |num / l - o'| <= (T2 + |o'| g_den) / (1 - g_den).
//  4. Split-KV merge (splits > 1): partition s's weight exp(lse_s - lse) times its
//     output num_s / l_s is num_s e^(m_s) / L whatever l_s's error, so the partitions'
//     exponent and sum errors are steps 1-3's; the merge adds only its own rounding:
//     each lse_s and the merged lse (scale times maximum, log, add, the sum over the
//     partitions) and the weights' arguments and exps, a relative error e_w on each
//     weight; each partial output is stored in fp32 and the weighted outputs summed.
//     As sum_s w_s |o_s| <= S + B_3, the merge adds (e_w + gamma_splits(divide_u) +
//     divide_u)(S + B_3).
//  5. Division and output: B = B_3 + divide_u |o''| + u_out (1 + divide_u) |o''| + eta_out,
//     |o''| <= |o| + B_3 (B_3 the bound after steps 2-4). Where |o''| may exceed the
//     output format's largest value the budget is +inf (an overflow is not bounded).
//  6. The logsumexp: lse_hat = m + log l_hat = log sum_j exp(s_hat_j) lambda'_j (1 + phi_j)
//     up to its own roundings, so lse_hat - lse lies within max(log(L+ (1 + g_den)),
//     -log(L- (1 - g_den))) + 2 argument_u smax' (the maximum times the scale, which
//     the exponents' arguments rounded differently) + lse_u (2 |log l| + |lse|) (+ the
//     merge's rounding of step 4).
// Every step is evaluated in upward rounding on upper bounds of its inputs (and
// downward where a quantity divides or subtracts), so B is itself an upper bound of
// the formula. Variants (softcap, ALiBi, sinks, biases, dropout, FP8 descales, packed
// sequences) are not modelled yet: a budget for them is refused.

#include <attnrank/attention/kernel_check.hpp>
#include <attnrank/attention/kernel_tolerance.hpp>
#include <attnrank/attention/precision_profile.hpp>

#include <optional>
#include <vector>

namespace attnrank {

/// The budget of one head's output and logsumexp (N_q x d_v and N_q x 1), with the
/// enclosures of the exact output and logsumexp it was computed from (what a
/// candidate is judged against, judge_budget).
struct HeadBudget {
  Eigen::MatrixXd out;
  Eigen::VectorXd lse;
  BoundsMatrix exact_out, exact_lse;
};

/// The budget of every query head t (q[t], k[kv_heads[t]], v[kv_heads[t]]) under
/// options' scale and mask(s); input_error for a variant the budget does not model,
/// an empty row (EmptyRows::zero), or a non-finite input. Without `with_lse` the
/// logsumexp's budget and enclosure are left empty (one fused pass, about half the work).
std::vector<HeadBudget> error_budget(const std::vector<Eigen::MatrixXd>& q, const std::vector<Eigen::MatrixXd>& k,
                                     const std::vector<Eigen::MatrixXd>& v, const KernelCheckOptions& options,
                                     const PrecisionProfile& profile, bool with_lse = true);

/// One tensor judged against its budget: within (every entry's certified error at most
/// its budget), exceeded (some entry's error proven above it), else undecided; the
/// usage max_ij |err_ij| / B_ij as a certified band, and where its upper end is reached.
struct BudgetVerdict {
  ToleranceVerdict verdict = ToleranceVerdict::undecided;
  double usage_lower = 0, usage_upper = 0;
  std::size_t worst_matrix = 0;
  Eigen::Index worst_row = 0, worst_column = 0;
  double budget_at_worst = 0;  ///< B at that entry
  double max_budget = 0;       ///< the largest B of the tensor
  std::size_t nonfinite = 0;   ///< entries of the candidate that are NaN or infinite (each exceeds)
};

/// `candidate` against the exact value's enclosure `exact` (per matrix, lo <= exact <= hi)
/// and the budget, entry by entry (the same shapes; the budget's rows for a logsumexp).
BudgetVerdict judge_budget(const std::vector<Eigen::MatrixXd>& candidate, const std::vector<BoundsMatrix>& exact,
                           const std::vector<Eigen::MatrixXd>& budget);

}  // namespace attnrank
