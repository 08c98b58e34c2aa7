#pragma once
// The "approximate" object of a reach certificate (free or fixed embeddings):
// the bounds error_lower <= E*(A, d_k) <= error_upper of reach/approximate.hpp
// with what proves them, and the epsilon verdict when an epsilon was asked.
//
//  * error_upper: the witness (Q, K; or with X the weights W^Q, W^K) as exact
//    doubles, with the precision its error was certified at; the checker
//    recomputes that error (MPFI) and requires it <= error_upper.
//  * error_lower: the rows R, columns J (1-based) and the width w (d_k, or
//    min(d_k, rank X)), and approximate right singular vectors V (|J| x (w + 1)).
//    The checker, in its own arithmetic (MPFI throughout, not the producer's
//    directed-rounding doubles), re-proves: every Â_ij > error_lower on R x J,
//    exactly; t >= ||eta(error_lower)||_2 from its own enclosures of
//    eta_ij = -log(1 - error_lower / Â_ij); and sigma_(w+1)(log(Â)_RJ C_J) > t by
//    an interval Cholesky of V^T M^T M V - t^2 V^T V (certify_singular_value_above).
//    By the lemma of docs/math.md that excludes every head within error_lower.
// Checks throw std::invalid_argument naming what fails.

#include <attnrank/attention/mask.hpp>
#include <attnrank/reach/approximate.hpp>

#include <nlohmann/json.hpp>

#include <optional>

namespace attnrank::detail {

/// The "approximate" object for bounds b (epsilon: the one asked, if any).
nlohmann::json approximate_claims(const ApproxBounds& b, std::optional<double> epsilon);

/// Re-proves an "approximate" object for target A and width d_k; X is the fixed
/// embeddings, or null for the free question; `mask` the mask of a masked head
/// (its witness error is then the masked softmax's; the lower proof needs no
/// change: its entries all exceed error_lower, so none is masked).
void check_approximate_claims(const Matrix<Rational>& A, const Matrix<Rational>* X, Eigen::Index dk,
                              const nlohmann::json& claims, const Mask* mask = nullptr);

/// An upper bound on ||eta||_2 over R x J, eta_ij = -log(1 - eps / Â_ij) (Â the
/// row-normalised A), computed in MPFI and MPFR with outward rounding: the
/// smaller of the Frobenius and sqrt(||.||_1 ||.||_inf) norms. +inf unless every
/// Â_ij > eps there (checked exactly).
double checked_eta_norm(const Matrix<Rational>& A, const std::vector<Eigen::Index>& rows,
                        const std::vector<Eigen::Index>& cols, double eps);

}  // namespace attnrank::detail
