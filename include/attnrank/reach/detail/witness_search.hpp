#pragma once
// The search behind error_upper (reach/approximate.hpp): L-BFGS (LBFGSpp) on
// smooth surrogates of the max error, from given starts and seeded restarts,
// within an evaluation budget. Nothing here is trusted or certified: the caller
// certifies the point returned, for exactly those numbers.

#include <attnrank/attention/mask.hpp>
#include <attnrank/reach/approximate.hpp>

#include <Eigen/Core>

#include <vector>

namespace attnrank::detail {

/// The surrogate evaluations a search may spend when each costs
/// `evaluation_flops`: options.max_evaluations when positive; otherwise
/// options.search_flops' worth, raised to options.min_evaluations (to at most
/// options.min_evaluation_flops' worth of them when that is positive), within
/// 0 .. 20000.
long search_budget(const ApproxOptions& options, double evaluation_flops);

/// The point with the smallest double max error |softmax(Q K^T / sqrt(d_k)) - T|
/// that any run met. A point is [vec Q; vec K] (Q, K: n x d_k), or with fixed
/// embeddings X (n x d_model, doubles) [vec W^Q; vec W^K] (d_model x d_k) with
/// Q = X W^Q, K = X W^K. Runs go from each start in turn, then from
/// options.restarts seeded points (even: the first start perturbed; odd: fresh
/// points of its scale, another basin), while the budget lasts (search_budget, at
/// about 6 n^2 d_k flops an evaluation: by default 2.5e10 flops' worth, 50..20000).
/// Empty when no run met a finite point. With `mask` the head is masked: the
/// softmax runs over the allowed keys only (masked scores are -inf, their
/// weights exactly 0), and T must be 0 at the masked positions.
Eigen::VectorXd search_witness(const Eigen::MatrixXd& T, Eigen::Index dk, const Eigen::MatrixXd* X,
                               const std::vector<Eigen::VectorXd>& starts, const ApproxOptions& options,
                               const Mask* mask = nullptr);

/// The surrogate's value and gradient at x (as the search uses them): tau = 0 is
/// sum D^2, tau > 0 is tau log sum exp(D^2 / tau); `max_error` gets max |D|.
/// For the tests, which compare the gradient with finite differences.
double surrogate_value(const Eigen::MatrixXd& T, Eigen::Index dk, const Eigen::MatrixXd* X, double tau,
                       const Eigen::VectorXd& x, Eigen::VectorXd& gradient, double& max_error,
                       const Mask* mask = nullptr);

}  // namespace attnrank::detail
