#pragma once
// Certificates for the fixed-embeddings question (reach_embeddings.hpp).
//
// When X has full row rank the question is the free one, and the certificate is
// the free certificate (reach_certificate.hpp) tagged with X's fingerprint.
// Otherwise it states the constraints' status, the minor of the admissible score
// matrix S behind the lower bound, the bases and kernel behind the upper bound,
// and the head weights W^Q, W^K with their error bound; the checker recomputes
// the null space of X, S and the constraints from A and X alone.

#include <attnrank/reach_certificate.hpp>
#include <attnrank/reach_embeddings.hpp>

namespace attnrank {

inline nlohmann::json make_embeddings_certificate(const Matrix<Rational>& A, const Matrix<Rational>& X,
                                                  const EmbeddingsReach& e) {
  using nlohmann::json;
  json c = e.x_full_row_rank ? make_reach_certificate(A, e.result) : json::object();
  c.erase("digest");
  c["question"] = "embeddings";
  c["x_fingerprint"] = target_fingerprint(X);
  c["x_full_row_rank"] = e.x_full_row_rank;
  if (!e.x_full_row_rank) {
    const ReachResult& r = e.result;
    c["format"] = reach_certificate_format;
    c["target_fingerprint"] = target_fingerprint(A);
    c["n"] = r.n;
    c["dk"] = r.dk;
    c["verdict"] = to_string(r.verdict);
    c["constraints"] = e.constraints;
    c["rank_lower"] = r.floor.lower;
    c["rank_upper"] = r.floor.upper;
    c["lower_proof"] = {{"minor_rows", detail::one_based(r.floor.minor_rows)},
                        {"minor_cols", detail::one_based(r.floor.minor_cols)},
                        {"bits", r.floor.lower_bits}};
    json kernel = json::array();
    for (Eigen::Index j = 0; j < r.floor.kernel.cols(); ++j) {
      json col = json::array();
      for (Eigen::Index i = 0; i < r.floor.kernel.rows(); ++i) col.push_back(r.floor.kernel(i, j).str());
      kernel.push_back(col);
    }
    c["upper_proof"] = {{"kernel", kernel}};
  }
  c["weights"] = {{"W_Q", detail::matrix_json(e.WQ)}, {"W_K", detail::matrix_json(e.WK)},
                  {"max_abs_error", e.result.witness ? e.result.witness->max_abs_error : INFINITY}};
  c["digest"] = detail::digest_of(c);
  return c;
}

inline CertificateCheck check_embeddings_certificate(const Matrix<Rational>& A, const Matrix<Rational>& X,
                                                     const nlohmann::json& c) {
  using Eigen::Index;
  const auto reject = [](std::string why) { return CertificateCheck{false, std::move(why)}; };
  try {
    if (!c.is_object() || c.value("question", "") != "embeddings") return reject("not a certificate for fixed embeddings");
    if (c.value("digest", "") != detail::digest_of(c)) return reject("the digest does not match: the certificate was changed");
    if (c.at("target_fingerprint").get<std::string>() != target_fingerprint(A)) return reject("the certificate is for a different target");
    if (c.at("x_fingerprint").get<std::string>() != target_fingerprint(X)) return reject("the certificate is for different embeddings X");
    validate_target(A, "target");
    const Index n = A.rows(), dk = detail::json_integer(c.at("dk"));
    if (X.rows() != n || dk < 1 || dk > X.cols()) return reject("X or d_k do not fit the target");
    const Matrix<Rational> N = kernel_basis(Matrix<Rational>(X.transpose()));
    if ((N.cols() == 0) != c.at("x_full_row_rank").get<bool>()) return reject("X's row rank is not as claimed");
    const nlohmann::json& w = c.at("weights");
    const Eigen::MatrixXd WQ = detail::matrix_from_json(w.at("W_Q"), X.cols(), dk), WK = detail::matrix_from_json(w.at("W_K"), X.cols(), dk);
    if (!(detail::certified_embedding_error(A, X, WQ, WK, 64) <= w.at("max_abs_error").get<double>()))
      return reject("the head weights miss their stated error bound");
    if (N.cols() == 0) {
      nlohmann::json free = c;  // the free certificate inside: drop the embeddings fields, re-digest
      for (const char* k : {"question", "x_fingerprint", "x_full_row_rank", "weights", "digest"}) free.erase(k);
      free["digest"] = detail::digest_of(free);
      const CertificateCheck inner = check_reach_certificate(A, free);
      if (!inner.valid) return inner;
      return CertificateCheck{true, "verified: X has full row rank, so the free certificate decides; " + inner.reason};
    }
    const std::string verdict = c.at("verdict").get<std::string>(), constraints = c.at("constraints").get<std::string>();
    const Index lower = detail::json_integer(c.at("rank_lower")), upper = detail::json_integer(c.at("rank_upper"));
    const PrecisionScope scope(std::max(128u, detail::json_bits(c.at("lower_proof"), 128u)));
    const AdmissibleScores a = admissible_scores(A, N, {});
    if (constraints == "violated (certified)" && !a.violated) return reject("the constraints are not certainly violated");
    if (constraints == "hold (exact)" && !a.hold_exact) return reject("the constraints do not hold exactly");
    const std::vector<Index> rows = detail::zero_based(c.at("lower_proof").at("minor_rows"), n),
                             cols = detail::zero_based(c.at("lower_proof").at("minor_cols"), n);
    if (static_cast<Index>(rows.size()) != lower || static_cast<Index>(cols.size()) != lower) return reject("the minor's size is not rank_lower");
    if (lower > 0 && !certify_nonsingular_minor(a.S, rows, cols)) return reject("the minor behind rank_lower could not be proven nonsingular");
    const nlohmann::json& kj = c.at("upper_proof").at("kernel");
    const Index k = static_cast<Index>(kj.size());
    if (upper != n - k || upper < lower) return reject("rank_upper is not n minus the number of kernel vectors");
    if (k > 0) {
      if (a.parts.empty()) return reject("no exact structure to check the kernel against");
      Matrix<Rational> K(n, k);
      for (Index j = 0; j < k; ++j)
        for (Index i = 0; i < n; ++i) K(i, j) = Rational(Integer(kj.at(static_cast<std::size_t>(j)).at(static_cast<std::size_t>(i)).get<std::string>()));
      for (const Matrix<Rational>& P : a.parts) {
        const Matrix<Rational> PK = P * K;
        for (Index i = 0; i < PK.rows(); ++i)
          for (Index j = 0; j < PK.cols(); ++j)
            if (PK(i, j) != 0) return reject("a kernel vector is not annihilated by every part of S");
      }
      if (bareiss_rank(K).rank != k) return reject("the kernel vectors are not independent");
    }
    const bool unreachable_ok = a.violated || dk < lower, reachable_ok = a.hold_exact && upper <= dk;
    if (verdict == "unreachable" && !unreachable_ok) return reject("unreachable does not follow");
    if (verdict == "reachable" && !reachable_ok) return reject("reachable does not follow");
    if (verdict == "undecided" && (unreachable_ok || reachable_ok)) return reject("undecided, yet the proofs decide");
  } catch (const std::exception& e) {
    return reject(std::string("malformed certificate: ") + e.what());
  }
  return CertificateCheck{true, "verified: constraints, rank bounds, verdict and head weights re-proven from the target and X"};
}

}  // namespace attnrank
