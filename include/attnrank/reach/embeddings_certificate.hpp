#pragma once
// Certificates for the fixed-embeddings question (reach/embeddings.hpp).
//
// When X has full row rank (or the target has a zero entry) the question is the
// free one, and the certificate carries the free claims (reach/certificate.hpp)
// with d_k up to d_model, tagged with X's fingerprint. Otherwise it states the
// constraints' status, the minor of the admissible score matrix S behind the
// lower bound and the kernel behind the upper bound. Both carry the head weights
// W^Q, W^K with the error bound computed for exactly those weights on X and the
// precision it was computed at, and optionally the approximate bounds for heads
// on X ("approximate"). The checker accepts exactly these fields and
// recomputes the null space of X, S, the constraints and every bound from A and
// X alone.

#include <attnrank/io/json.hpp>
#include <attnrank/reach/certificate.hpp>
#include <attnrank/reach/embeddings.hpp>

namespace attnrank {

/// The certificate of an embeddings verdict: the free claims when the free
/// question decides, else the constraints, minor and kernel of S; and the head
/// weights with their error bound.
/// With `approx` (approx_error_bounds on the same X and d_k) it also carries the
/// approximate bounds, and the verdict on `epsilon` if asked.
nlohmann::json make_embeddings_certificate(const Matrix<Rational>& A, const Matrix<Rational>& X, const EmbeddingsReach& e,
                                           const ApproxBounds* approx = nullptr, std::optional<double> epsilon = {});

/// Re-checks an embeddings certificate from A and X alone.
CertificateCheck check_embeddings_certificate(const Matrix<Rational>& A, const Matrix<Rational>& X,
                                             const nlohmann::json& certificate);

}  // namespace attnrank
