// Writing and checking embeddings certificates (attnrank/reach/embeddings_certificate.hpp).
#include <attnrank/reach/embeddings_certificate.hpp>
#include <attnrank/io/detail/json_fields.hpp>
#include <attnrank/io/json.hpp>
#include <attnrank/reach/detail/approximate_certificate.hpp>
#include <attnrank/reach/detail/certificate_parts.hpp>

using nlohmann::json;

namespace attnrank {

namespace detail {

std::vector<const char*> joined(std::vector<const char*> a, const std::vector<const char*>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

/// The head weights re-checked against their stated bound, at the stated precision.
void check_weights(const Matrix<Rational>& A, const Matrix<Rational>& X, const json& w, Eigen::Index dk) {
  require_fields(w, {"W_Q", "W_K", "error_bits", "max_abs_error"}, {}, "weights");
  const Eigen::MatrixXd WQ = matrix_from_json(w.at("W_Q"), X.cols(), dk), WK = matrix_from_json(w.at("W_K"), X.cols(), dk);
  const double stated = json_bound(w.at("max_abs_error"), "weights max_abs_error");
  if (!(certified_embedding_error(A, X, WQ, WK, json_precision(w.at("error_bits"))) <= stated))
    throw std::invalid_argument("the head weights miss their stated error bound");
}

}  // namespace detail

nlohmann::json make_embeddings_certificate(const Matrix<Rational>& A, const Matrix<Rational>& X,
                                                  const EmbeddingsReach& e, const ApproxBounds* approx,
                                                  std::optional<double> epsilon) {
  using nlohmann::json;
  const ReachResult& r = e.result;
  json c{{"format", reach_certificate_format},
         {"question", "embeddings"},
         {"target_fingerprint", target_fingerprint(A)},
         {"x_fingerprint", target_fingerprint(X)},
         {"x_full_row_rank", e.x_full_row_rank}};
  if (e.free_question_decides) {
    detail::add_free_claims(c, r);
  } else {
    c["n"] = r.n;
    c["dk"] = r.dk;
    c["verdict"] = to_string(r.verdict);
    c["constraints"] = e.constraints;
    c["rank_lower"] = r.floor.lower;
    c["rank_upper"] = r.floor.upper;
    c["lower_proof"] = {{"minor_rows", detail::one_based(r.floor.minor_rows)},
                        {"minor_cols", detail::one_based(r.floor.minor_cols)},
                        {"bits", r.floor.lower_bits}};
    c["upper_proof"] = {{"kernel", detail::columns_json(r.floor.kernel)}};
  }
  // Weights whose error could not be bounded (X beyond the double range) prove nothing.
  if (std::isfinite(e.weights_max_abs_error))
    c["weights"] = {{"W_Q", matrix_json(e.WQ)},
                    {"W_K", matrix_json(e.WK)},
                    {"error_bits", e.weights_error_bits},
                    {"max_abs_error", e.weights_max_abs_error}};
  if (approx) {
    if (approx->dk != r.dk) throw std::invalid_argument("make_embeddings_certificate: the approximate bounds are for another d_k");
    c["approximate"] = detail::approximate_claims(*approx, epsilon);
  }
  c["digest"] = detail::digest_of(c);
  return c;
}

CertificateCheck check_embeddings_certificate(const Matrix<Rational>& A, const Matrix<Rational>& X,
                                                     const nlohmann::json& c) {
  using Eigen::Index;
  using namespace detail;
  const auto reject = [](std::string why) { return CertificateCheck{false, std::move(why)}; };
  try {
    check_format(c);
    if (c.contains("question") && c.at("question") == "masked_embeddings")
      return reject("this certificate is for a masked head (mask " + (c.contains("mask") ? c.at("mask").dump() : std::string("?")) +
                    "): check it with the same mask");
    if (!c.contains("question") || c.at("question") != "embeddings") return reject("not a certificate for fixed embeddings");
    const bool free_decides = !c.contains("constraints");
    const std::vector<const char*> optional = joined(free_decides ? free_optional_fields : std::vector<const char*>{"approximate"}, {"weights"});
    const std::vector<const char*> required =
        free_decides ? joined(free_required_fields, {"x_fingerprint", "x_full_row_rank"})
                     : joined(free_required_fields, {"x_fingerprint", "x_full_row_rank", "constraints", "rank_lower",
                                                     "rank_upper", "lower_proof", "upper_proof"});
    require_fields(c, required, optional, "the certificate");
    check_header(c, A);
    if (json_string(c.at("x_fingerprint"), "x_fingerprint") != target_fingerprint(X))
      return reject("the certificate is for different embeddings X");
    const Index n = A.rows(), dk = json_integer(c.at("dk"));
    if (X.rows() != n) return reject("X has " + std::to_string(X.rows()) + " rows, the target " + std::to_string(n));
    if (dk < 1 || dk > X.cols()) return reject("d_k = " + std::to_string(dk) + " is outside [1, d_model = " + std::to_string(X.cols()) + "]");
    const Matrix<Rational> N = exact_kernel_basis(Matrix<Rational>(X.transpose()));
    if ((N.cols() == 0) != json_bool(c.at("x_full_row_rank"), "x_full_row_rank")) return reject("X's row rank is not as claimed");
    if (free_decides && N.cols() != 0 && !c.contains("zero_entry"))
      return reject("X does not have full row rank and the target has no zero entry: the free question does not decide");
    if (c.contains("weights")) check_weights(A, X, c.at("weights"), dk);
    if (c.contains("approximate")) check_approximate_claims(A, &X, dk, c.at("approximate"));
    if (free_decides) {
      check_free_claims(A, c, X.cols());
      return CertificateCheck{true, "verified: the free question decides (X has full row rank or the target a zero entry); floor bounds, verdict and errors re-proven from the target and X"};
    }
    const std::string verdict = json_choice(c.at("verdict"), {"reachable", "unreachable", "undecided"}, "verdict");
    const std::string constraints =
        json_choice(c.at("constraints"), {"violated (certified)", "hold (exact)", "unknown"}, "constraints");
    const Index lower = json_integer(c.at("rank_lower")), upper = json_integer(c.at("rank_upper"));
    if (lower < 0 || lower > upper || upper > n) return reject("rank bounds out of order");
    const json& lp = c.at("lower_proof");
    require_fields(lp, {"minor_rows", "minor_cols", "bits"}, {}, "lower_proof");
    const PrecisionScope scope(std::max(128u, json_bits(lp, 128u)));
    const AdmissibleScores a = admissible_scores(A, N, {});
    if (constraints == "violated (certified)" && !a.violated) return reject("the constraints are not certainly violated");
    if (constraints == "hold (exact)" && !a.hold_exact) return reject("the constraints do not hold exactly");
    if (constraints == "unknown" && a.hold_exact) return reject("the constraints hold exactly, not \"unknown\"");
    const std::vector<Index> rows = zero_based(lp.at("minor_rows"), n), cols = zero_based(lp.at("minor_cols"), n);
    if (static_cast<Index>(rows.size()) != lower || static_cast<Index>(cols.size()) != lower) return reject("the minor's size is not rank_lower");
    if (lower > 0 && !certify_nonsingular_minor(a.S, rows, cols)) return reject("the minor behind rank_lower could not be proven nonsingular");
    const json& up = c.at("upper_proof");
    require_fields(up, {"kernel"}, {}, "upper_proof");
    const json& kj = up.at("kernel");
    if (!kj.is_array()) return reject("upper_proof: kernel must be an array");
    const Index k = static_cast<Index>(kj.size());
    if (upper != n - k || upper < lower) return reject("rank_upper is not n minus the number of kernel vectors");
    if (k > 0) {
      if (a.parts.empty()) return reject("no exact structure to check the kernel against");
      Matrix<Rational> K(n, k);
      for (Index j = 0; j < k; ++j) {
        const json& col = kj.at(static_cast<std::size_t>(j));
        if (!col.is_array() || static_cast<Index>(col.size()) != n) return reject("a kernel vector has the wrong length");
        for (Index i = 0; i < n; ++i) K(i, j) = Rational(Integer(json_string(col.at(static_cast<std::size_t>(i)), "a kernel entry")));
      }
      for (const Matrix<Rational>& P : a.parts) {
        const Matrix<Rational> PK = P * K;
        for (Index i = 0; i < PK.rows(); ++i)
          for (Index j = 0; j < PK.cols(); ++j)
            if (PK(i, j) != 0) return reject("a kernel vector is not annihilated by every part of S");
      }
      if (exact_rank_by_elimination(K).rank != k) return reject("the kernel vectors are not independent");
    }
    // The verdict must follow from what the certificate claims and this check proved.
    const bool violated = constraints == "violated (certified)", hold = constraints == "hold (exact)";
    const bool unreachable_ok = violated || dk < lower, reachable_ok = hold && upper <= dk;
    if (verdict == "unreachable" && !unreachable_ok) return reject("unreachable does not follow");
    if (verdict == "reachable" && !reachable_ok) return reject("reachable does not follow");
    if (verdict == "undecided" && (unreachable_ok || reachable_ok)) return reject("undecided, yet the proofs decide");
  } catch (const std::exception& e) {
    return reject(e.what());
  }
  return CertificateCheck{true, "verified: constraints, rank bounds, verdict and head weights re-proven from the target and X"};
}

}  // namespace attnrank
