#pragma once
// Reachability certificates: plain JSON that anyone can keep, send and re-check.
//
// A certificate (format attnrank-reach-certificate/3) states n, d_k, the verdict
// and the floor bounds, with their proofs: the nonsingular minor of log(A) C
// (1-based rows and columns) behind floor_lower, the coprime bases and integer
// kernel vectors behind floor_upper, a zero entry when there is one, and the
// witness Q, K with the error bound computed for exactly those entries and the
// precision it was computed at. It carries a fingerprint of the target and a
// digest of its own content, so a certificate for another target, or one with
// any number changed, is rejected before the mathematics is even redone. With
// approximate bounds it also carries "approximate": error_lower and error_upper
// with their proofs (reach/detail/approximate_certificate.hpp), re-proven by the
// checker in its own arithmetic. Format /2 (no "approximate") is still accepted.
//
// `check_reach_certificate` accepts exactly what the producer writes: every
// field present with its type and range, no unknown field, the format string
// and n equal to the target's. Then it re-verifies everything from the target
// alone: it recomputes log(A) C in MPFI (its own route; the producer works in
// double balls), proves the minor nonsingular, rebuilds every exponent matrix by
// exact division over the bases, checks the kernel vectors exactly, recomputes
// the witness's error at the stated precision, and checks that the verdict
// follows. Read certificate text with parse_certificate (io/detail/json_fields.hpp),
// which also rejects duplicate keys.

#include <attnrank/reach/approximate.hpp>
#include <attnrank/reach/free.hpp>

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

namespace attnrank {

inline constexpr const char* reach_certificate_format = "attnrank-reach-certificate/3";

/// The certificate of a reach result on target A; with `approx` (bounds for the
/// same d_k) also its approximate bounds, and the verdict on `epsilon` if asked.
nlohmann::json make_reach_certificate(const Matrix<Rational>& A, const ReachResult& r,
                                      const ApproxBounds* approx = nullptr, std::optional<double> epsilon = {});

struct CertificateCheck {
  bool valid = false;
  std::string reason;  ///< why it was rejected, or what was verified
};

/// Parses certificate text strictly. Throws input_error naming `source` on
/// invalid JSON, on a key that appears twice in one object (parsers keep one of
/// the values, so "verdict" could be stated twice and read as either), and on a
/// number beyond the double range (1e999, a 4097-digit literal).
nlohmann::json parse_certificate(const std::string& text, const std::string& source);

/// Re-verifies a certificate against target A (see the top of this header).
CertificateCheck check_reach_certificate(const Matrix<Rational>& A, const nlohmann::json& certificate);

/// FNV-1a 64-bit, as 16 hex digits: the fingerprint and digest function.
std::string fnv1a_hex(const std::string& bytes);

/// The fingerprint of a target: its size and exact entries.
std::string target_fingerprint(const Matrix<Rational>& A);

}  // namespace attnrank
