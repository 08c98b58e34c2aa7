// The "approximate" object of reach certificates
// (attnrank/reach/detail/approximate_certificate.hpp).
#include <attnrank/reach/detail/approximate_certificate.hpp>

#include <attnrank/io/detail/json_fields.hpp>
#include <attnrank/numbers/detail/infinity.hpp>
#include <attnrank/io/json.hpp>
#include <attnrank/linalg/exact_rank.hpp>
#include <attnrank/reach/detail/certificate_parts.hpp>
#include <attnrank/reach/detail/order_bound.hpp>
#include <attnrank/reach/embeddings.hpp>
#include <attnrank/reach/masked.hpp>
#include <attnrank/reach/target.hpp>

#include <mpfi.h>
#include <mpfr.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace attnrank::detail {

using Eigen::Index;
using nlohmann::json;

json approximate_claims(const ApproxBounds& b, std::optional<double> epsilon) {
  json a{{"error_lower", b.error_lower},
         {"error_upper", std::isfinite(b.error_upper) ? json(b.error_upper) : json(nullptr)}};
  if (std::isfinite(b.error_upper)) {
    if (b.WQ.size() > 0)
      a["weights"] = {{"W_Q", matrix_json(b.WQ)}, {"W_K", matrix_json(b.WK)}, {"error_bits", b.weights_error_bits}};
    else
      a["witness"] = {{"Q", matrix_json(b.witness.Q)}, {"K", matrix_json(b.witness.K)}, {"error_bits", b.witness.error_bits}};
  }
  if (b.error_lower > 0) {
    const LowerBoundProof& p = b.lower_proof;
    if (p.orders)
      a["lower_proof"] = {{"width", 1},
                          {"orders", true},
                          {"rows", one_based(p.rows)},
                          {"pairs", json::array({one_based({p.cols[0], p.cols[1]}), one_based({p.cols[2], p.cols[3]})})}};
    else
      a["lower_proof"] = {{"width", p.vectors.cols() - 1},
                          {"rows", one_based(p.rows)},
                          {"cols", one_based(p.cols)},
                          {"vectors", matrix_json(p.vectors)}};
  }
  if (epsilon) {
    a["epsilon"] = *epsilon;
    a["epsilon_verdict"] = to_string(epsilon_verdict(b, *epsilon));
  }
  return a;
}

double checked_eta_norm(const Matrix<Rational>& A, const std::vector<Index>& rows, const std::vector<Index>& cols,
                        double eps) {
  if (!(eps >= 0) || !std::isfinite(eps)) return inf;
  const Rational e = to_rational(eps);
  const std::size_t r = rows.size(), c = cols.size();
  mpfi_t x, sum;
  mpfr_t eta, squares, row_sum, top_row, top_col, product;
  mpfi_init2(x, 128);
  mpfi_init2(sum, 128);
  mpfr_inits2(128, eta, squares, row_sum, top_row, top_col, product, static_cast<mpfr_ptr>(nullptr));
  std::vector<mpfr_t> col_sums(c);
  for (auto& s : col_sums) {
    mpfr_init2(s, 128);
    mpfr_set_zero(s, 1);
  }
  mpfr_set_zero(squares, 1);
  mpfr_set_zero(top_row, 1);
  mpfr_set_zero(top_col, 1);
  bool ok = true;
  for (std::size_t s = 0; s < r && ok; ++s) {
    const Index i = rows[s];
    Rational total = 0;
    for (Index j = 0; j < A.cols(); ++j) total += A(i, j);
    const Rational e_total = e * total;  // eps < Â_ij  iff  eps * (row sum) < A_ij
    mpfi_set_q(sum, e_total.backend().data());
    mpfr_set_zero(row_sum, 1);
    for (std::size_t t = 0; t < c; ++t) {
      const Rational& a = A(i, cols[t]);
      if (!(e_total < a)) {
        ok = false;
        break;
      }
      // x = eps / Â_ij = eps * (row sum) / A_ij, then eta = -log(1 - x) = -log1p(-x).
      mpfi_set_q(x, a.backend().data());
      mpfi_div(x, sum, x);
      mpfi_neg(x, x);
      mpfi_log1p(x, x);
      if (mpfi_nan_p(x) || !mpfr_number_p(&x->left)) {
        ok = false;
        break;
      }
      mpfr_neg(eta, &x->left, MPFR_RNDU);  // >= -log(1 - x) for every x in the enclosure
      if (mpfr_sgn(eta) < 0) mpfr_set_zero(eta, 1);
      mpfr_fma(squares, eta, eta, squares, MPFR_RNDU);
      mpfr_add(row_sum, row_sum, eta, MPFR_RNDU);
      mpfr_add(col_sums[t], col_sums[t], eta, MPFR_RNDU);
    }
    mpfr_max(top_row, top_row, row_sum, MPFR_RNDU);
  }
  double bound = inf;
  if (ok) {
    for (auto& s : col_sums) mpfr_max(top_col, top_col, s, MPFR_RNDU);
    mpfr_sqrt(squares, squares, MPFR_RNDU);
    mpfr_mul(product, top_row, top_col, MPFR_RNDU);
    mpfr_sqrt(product, product, MPFR_RNDU);
    mpfr_min(product, product, squares, MPFR_RNDU);
    bound = mpfr_get_d(product, MPFR_RNDU);
  }
  for (auto& s : col_sums) mpfr_clear(s);
  mpfr_clears(eta, squares, row_sum, top_row, top_col, product, static_cast<mpfr_ptr>(nullptr));
  mpfi_clear(x);
  mpfi_clear(sum);
  return std::isfinite(bound) ? bound : inf;
}

namespace {

/// error_upper: the witness's (or the weights') error recomputed at the stated
/// precision, at most the stated bound.
void check_upper(const Matrix<Rational>& A, const Matrix<Rational>* X, Index dk, const json& a, double upper,
                 const Mask* mask) {
  const Index n = A.rows();
  if (X) {
    const json& w = a.at("weights");
    require_fields(w, {"W_Q", "W_K", "error_bits"}, {}, "approximate.weights");
    const Eigen::MatrixXd WQ = matrix_from_json(w.at("W_Q"), X->cols(), dk), WK = matrix_from_json(w.at("W_K"), X->cols(), dk);
    if (!(certified_embedding_error(A, *X, WQ, WK, json_precision(w.at("error_bits")), mask) <= upper))
      throw std::invalid_argument("approximate: the head weights miss error_upper");
  } else {
    const json& w = a.at("witness");
    require_fields(w, {"Q", "K", "error_bits"}, {}, "approximate.witness");
    const Eigen::MatrixXd Q = matrix_from_json(w.at("Q"), n, dk), K = matrix_from_json(w.at("K"), n, dk);
    const unsigned bits = json_precision(w.at("error_bits"));
    // Either route proves it: doubles with directed rounding, or MPFI at the stated bits.
    const bool within = mask ? certified_masked_witness_error(A, *mask, Q, K) <= upper ||
                                   certified_masked_witness_error(A, *mask, Q, K, bits) <= upper
                             : witness_error_within(A, Q, K, bits, upper);
    if (!within) throw std::invalid_argument("approximate: the witness misses error_upper");
  }
}

/// error_lower: the lemma's hypotheses and its singular value, re-proven.
void check_lower(const Matrix<Rational>& A, const Matrix<Rational>* X, Index dk, const json& p, double lower,
                 const Mask* mask) {
  const Index n = A.rows();
  const bool orders = p.contains("orders");
  if (orders) require_fields(p, {"width", "orders", "rows", "pairs"}, {}, "approximate.lower_proof");
  else require_fields(p, {"width", "rows", "cols", "vectors"}, {}, "approximate.lower_proof");
  const Index width = json_integer(p.at("width"));
  const Index expected = X ? std::min(dk, n - exact_kernel_basis(Matrix<Rational>(X->transpose())).cols()) : dk;
  if (width != expected)
    throw std::invalid_argument("approximate: the lower proof's width " + std::to_string(width) + " is not " +
                                (X ? "min(d_k, rank X) = " : "d_k = ") + std::to_string(expected));
  const std::vector<Index> rows = zero_based(p.at("rows"), n);
  if (orders) {
    // The order bound (reach/detail/order_bound.hpp): width 1, two rows, two key pairs.
    if (!p.at("orders").is_boolean() || !p.at("orders").get<bool>())
      throw std::invalid_argument("approximate: the lower proof's \"orders\" is not true");
    const json& pairs = p.at("pairs");
    if (width != 1 || rows.size() != 2 || !pairs.is_array() || pairs.size() != 2)
      throw std::invalid_argument("approximate: an order proof is two rows and two key pairs at width 1");
    const std::vector<Index> first = zero_based(pairs.at(0), n), second = zero_based(pairs.at(1), n);
    if (first.size() != 2 || second.size() != 2)
      throw std::invalid_argument("approximate: an order proof's key pair is not two keys");
    if (!detail::check_order_proof(A, mask, {rows[0], rows[1]}, {first[0], first[1], second[0], second[1]}, lower))
      throw std::invalid_argument("approximate: the order proof's rows do not order its key pairs as no width-1 head "
                                  "can (one alike, one oppositely), with every gap above 2 error_lower");
    return;
  }
  const std::vector<Index> cols = zero_based(p.at("cols"), n);
  if (rows.empty() || cols.size() < 2 || width + 1 > static_cast<Index>(std::min(rows.size(), cols.size())))
    throw std::invalid_argument("approximate: the lower proof's rows and columns are too few for sigma_" +
                                std::to_string(width + 1));
  const Eigen::MatrixXd V = matrix_from_json(p.at("vectors"), static_cast<Index>(cols.size()), width + 1);
  const double eta = checked_eta_norm(A, rows, cols, lower);
  if (!std::isfinite(eta))
    throw std::invalid_argument("approximate: some entry on the lower proof's rows and columns is not above error_lower");
  const PrecisionScope scope(64);
  Matrix<Rational> sub(static_cast<Index>(rows.size()), static_cast<Index>(cols.size()));
  for (std::size_t s = 0; s < rows.size(); ++s)
    for (std::size_t t = 0; t < cols.size(); ++t) sub(static_cast<Index>(s), static_cast<Index>(t)) = A(rows[s], cols[t]);
  if (!certify_singular_value_above(centered_log(sub), V, Interval(eta)))
    throw std::invalid_argument("approximate: sigma_" + std::to_string(width + 1) +
                                " of the centered log could not be proven above the error bound " + std::to_string(eta));
}

}  // namespace

void check_approximate_claims(const Matrix<Rational>& A, const Matrix<Rational>* X, Index dk, const json& a,
                              const Mask* mask) {
  const char* witness_key = X ? "weights" : "witness";
  require_fields(a, {"error_lower", "error_upper"}, {witness_key, "lower_proof", "epsilon", "epsilon_verdict"},
                 "approximate");
  ApproxBounds b;
  b.error_lower = json_bound(a.at("error_lower"), "approximate.error_lower");
  if (!a.at("error_upper").is_null()) b.error_upper = json_bound(a.at("error_upper"), "approximate.error_upper");
  if (a.contains(witness_key) != std::isfinite(b.error_upper))
    throw std::invalid_argument(std::string("approximate: a finite error_upper needs the ") + witness_key +
                                ", and only it has one");
  if (b.error_lower > b.error_upper) throw std::invalid_argument("approximate: error_lower exceeds error_upper");
  if (a.contains("lower_proof") != (b.error_lower > 0))
    throw std::invalid_argument("approximate: error_lower > 0 needs a lower_proof, and only it has one");
  if (a.contains("epsilon") != a.contains("epsilon_verdict"))
    throw std::invalid_argument("approximate: epsilon and epsilon_verdict come together");
  if (a.contains("epsilon")) {
    const double epsilon = json_bound(a.at("epsilon"), "approximate.epsilon");
    if (epsilon > 1) throw std::invalid_argument("approximate: epsilon is above 1");
    const std::string v = json_choice(a.at("epsilon_verdict"), {"within", "not_within", "undecided"}, "epsilon_verdict");
    if (v != to_string(epsilon_verdict(b, epsilon)))
      throw std::invalid_argument("approximate: epsilon_verdict \"" + v + "\" does not follow from the bounds");
  }
  if (std::isfinite(b.error_upper)) check_upper(A, X, dk, a, b.error_upper, mask);
  if (b.error_lower > 0) check_lower(A, X, dk, a.at("lower_proof"), b.error_lower, mask);
}

}  // namespace attnrank::detail
