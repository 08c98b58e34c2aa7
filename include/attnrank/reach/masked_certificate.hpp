#pragma once
// Certificates for the masked question (reach/masked.hpp): the same format as
// the free certificate (attnrank-reach-certificate/3, reach/certificate.hpp)
// with "question": "masked" and the mask's name ("causal", "none" or
// "pattern:<fingerprint>"), so a certificate for one mask is rejected for any
// other.
//
// What it proves, and how the checker re-proves it from the target and the mask
// alone:
//  * a zero entry at an allowed position: the entry is exactly 0 and allowed,
//    so the target is unreachable;
//  * otherwise the floor bounds: the checker derives the blocks itself
//    (masked_block_layout: a function of the mask), requires the certificate's
//    blocks to be exactly those, and re-proves each block's bounds on
//    floor(B) = rank(log(A)_B C): the lower by its nonsingular minor (MPFI, the
//    checker's own route), the upper by the block's shape or by an exact kernel
//    over coprime bases. Then floor_lower and floor_upper must follow from the
//    staircase formula (nested masks) or from the best rectangle and n - 1
//    (others), and the verdict from them and d_k;
//  * the witness Q, K (doubles): its masked softmax error is recomputed in MPFI
//    at the stated precision and must be at most the stated bound;
//  * "approximate" (optional): error_lower and error_upper with their proofs,
//    as for the free question, the witness error recomputed under the mask.
// A digest over the content and the target's fingerprint reject a changed
// certificate or another target before any mathematics.
//
// On fixed embeddings X (reach/masked_embeddings.hpp) the question is
// "masked_embeddings": the same floor claims (the free masked question's) with
// X's fingerprint, whether X has full row rank (re-proven exactly), and the head
// weights W^Q, W^K whose masked error on the exact X is recomputed in MPFI.
// Without full row rank only `unreachable` below floor_lower follows; from
// floor_lower up the verdict must be `undecided`.

#include <attnrank/attention/mask.hpp>
#include <attnrank/reach/certificate.hpp>
#include <attnrank/reach/masked.hpp>
#include <attnrank/reach/masked_embeddings.hpp>

#include <nlohmann/json.hpp>

#include <optional>

namespace attnrank {

/// The certificate of a masked reach result r on target A; with `approx`
/// (masked bounds for the same d_k) also the approximate bounds, and the
/// verdict on `epsilon` if asked. Throws std::invalid_argument when r or approx
/// is for another mask or width.
nlohmann::json make_masked_reach_certificate(const Matrix<Rational>& A, const Mask& mask, const MaskedReachResult& r,
                                             const ApproxBounds* approx = nullptr,
                                             std::optional<double> epsilon = {});

/// Re-verifies a masked certificate against target A and `mask` (see the top of
/// this header). Never throws on a bad certificate: it is rejected with the reason.
CertificateCheck check_masked_reach_certificate(const Matrix<Rational>& A, const Mask& mask,
                                                const nlohmann::json& certificate);

/// The certificate of a masked head on embeddings X; `approx` from
/// approx_error_bounds(A, X, d_k, mask) for the same d_k.
nlohmann::json make_masked_embeddings_certificate(const Matrix<Rational>& A, const Matrix<Rational>& X,
                                                  const Mask& mask, const MaskedEmbeddingsReach& e,
                                                  const ApproxBounds* approx = nullptr,
                                                  std::optional<double> epsilon = {});

/// Re-verifies a masked embeddings certificate against A, X and `mask`.
CertificateCheck check_masked_embeddings_certificate(const Matrix<Rational>& A, const Matrix<Rational>& X,
                                                     const Mask& mask, const nlohmann::json& certificate);

}  // namespace attnrank
