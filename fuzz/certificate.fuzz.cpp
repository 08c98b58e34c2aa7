// Fuzz target: the certificate JSON reader and checkers (reach/certificate.hpp,
// and reach/masked_certificate.hpp for a causal target).
// The input is JSON, read by parse_certificate. So that mutations reach the mathematics instead of dying at
// the digest, the harness re-stamps the digest and the target's fingerprint.
// Oracle: malformed certificates are rejected, never a crash; and the checker
// never accepts a certificate that contradicts the true floor of the target
// (computed once, exactly decided, by the engine at 256 bits).
#include "fuzz_support.hpp"

#include <attnrank/io/matrix_spec.hpp>
#include <attnrank/reach/certificate.hpp>
#include <attnrank/reach/detail/certificate_parts.hpp>
#include <attnrank/reach/masked_certificate.hpp>

#include <optional>
#include <string>

namespace {

using namespace attnrank;

struct Target {
  Matrix<Rational> A;
  Eigen::Index floor = -1;
  std::optional<Mask> mask;
};

Target make_target(const char* spec) {
  Target t{*builtin_matrix(spec), -1, std::nullopt};
  ReachOptions o;
  o.bits = 256;
  o.full_floor = true;
  const ReachResult r = reach(t.A, 1, o);
  fuzz::require(r.floor.lower == r.floor.upper, "the oracle's floor is not decided");
  t.floor = r.floor.lower;
  return t;
}

/// A 4-token causal pattern (masked floor 2), checked with the causal mask.
Target make_causal_target() {
  Matrix<Rational> A(4, 4);
  A << 1, 0, 0, 0, Rational(3, 10), Rational(7, 10), 0, 0, Rational(2, 10), Rational(5, 10), Rational(3, 10), 0,
      Rational(1, 10), Rational(2, 10), Rational(3, 10), Rational(4, 10);
  Target t{A, -1, Mask::causal(4)};
  ReachOptions o;
  o.bits = 256;
  const MaskedReachResult r = reach(t.A, 1, *t.mask, o);
  fuzz::require(r.floor.lower == r.floor.upper, "the oracle's masked floor is not decided");
  t.floor = r.floor.lower;
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const Target targets[] = {make_target("diag:3:0.8"), make_target("diag:4:1/4"), make_target("hilbert:3")};
  static const Target causal = make_causal_target();
  if (size == 0) return 0;
  // The first byte picks the target: the high bit the masked one, else one of three.
  const Target& t = data[0] & 0x80 ? causal : targets[data[0] % 3];
  nlohmann::json c;
  try {  // the strict reader: duplicate keys and out-of-range numbers are input errors
    c = parse_certificate(std::string(reinterpret_cast<const char*>(data + 1), size - 1), "<fuzz>");
  } catch (const input_error& e) {
    fuzz::require(std::string(e.what()).rfind("<fuzz>: ", 0) == 0, "a reading error that does not name its source");
    return 0;
  }
  if (c.is_object()) {
    c["target_fingerprint"] = target_fingerprint(t.A);
    c["digest"] = detail::digest_of(c);
  }
  const CertificateCheck check = t.mask ? check_masked_reach_certificate(t.A, *t.mask, c) : check_reach_certificate(t.A, c);
  if (!check.valid) {
    fuzz::require(!check.reason.empty(), "a rejection without a reason");
    return 0;
  }
  const Eigen::Index dk = c.at("dk").get<Eigen::Index>();
  const std::string verdict = c.at("verdict").get<std::string>();
  fuzz::require(!c.contains("zero_entry"), "a zero entry accepted for a positive target");
  fuzz::require(c.at("floor_lower").get<Eigen::Index>() <= t.floor && t.floor <= c.at("floor_upper").get<Eigen::Index>(),
                "accepted floor bounds that exclude the true floor");
  fuzz::require(verdict != "unreachable" || dk < t.floor, "accepted 'unreachable' for a reachable width");
  fuzz::require(verdict != "reachable" || dk >= t.floor, "accepted 'reachable' for an unreachable width");
  return 0;
}
