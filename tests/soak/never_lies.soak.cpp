// Never lies: the reachability engine at 64 bits against itself at 512 bits on
// thousands of generated targets. The low-precision run may say `undecided` where
// the high one decides, but must never contradict it: verdicts that are both
// decided agree, and the two floor enclosures intersect. Counts are printed and
// recorded in docs/reliability.md. Seeded (ATTNRANK_SOAK_SEED, ATTNRANK_SOAK_COUNT).
#include "support.hpp"

#include <attnrank/reach/free.hpp>

#include <cstdlib>
#include <iostream>
#include <random>

using namespace attnrank;

namespace {

/// The kinds 0..2 of delicate_target below.
Matrix<Rational> base_target(std::mt19937_64& rng, int kind) {
  std::uniform_int_distribution<int> size(2, 8), small(-2, 2), digits(4, 60), weight(1, 99);
  const Eigen::Index n = size(rng);
  Matrix<Rational> A(n, n);
  if (kind == 2) {
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = 0; j < n; ++j) A(i, j) = Rational(weight(rng), 100);
    return A;
  }
  const Eigen::Index r = std::uniform_int_distribution<Eigen::Index>(0, n)(rng);
  Matrix<Integer> U(n, r), V(r, n);
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index t = 0; t < r; ++t) U(i, t) = small(rng), V(t, i) = small(rng);
  const Matrix<Integer> E = U * V;
  const Rational d = Rational(1) / Rational(boost::multiprecision::pow(Integer(10), static_cast<unsigned>(digits(rng))));
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index j = 0; j < n; ++j) {
      const long e = static_cast<long>(E(i, j));
      Rational a = e >= 0 ? Rational(Integer(1) << static_cast<unsigned>(e))
                          : Rational(Integer(1), Integer(Integer(1) << static_cast<unsigned>(-e)));
      if (kind == 1) a *= 1 + d * small(rng);
      A(i, j) = a;
    }
  return A;
}

/// A positive rational target whose floor is delicate on purpose:
///  0. 2^E (E small integers of rank r): log A = E log 2, floor = rank(E C) exactly;
///  1. 2^E (1 + d F) with d = 10^-k, k in 4..60: the floor is higher, but only by
///     singular values of order d, which 64 bits cannot see and 512 bits can;
///  2. plain random weights (full floor, well separated);
///  3. one of these with rows scaled by 10^400 or 10^-400 (a row constant in log
///     space, so the floor is unchanged), and
///  4. one of these with entries of 3e-4000 (log about -9210): valid exact
///     decimals beyond the double range, the audit's classes.
Matrix<Rational> delicate_target(std::mt19937_64& rng, int& kind) {
  std::uniform_int_distribution<int> pick(0, 4), base_kind(0, 2), scale(-1, 1), coin(0, 3);
  kind = pick(rng);
  if (kind <= 2) return base_target(rng, kind);
  Matrix<Rational> A = base_target(rng, base_kind(rng));
  const Rational big = Rational(boost::multiprecision::pow(Integer(10), 400u));
  const Rational tiny = Rational(3) / Rational(boost::multiprecision::pow(Integer(10), 4000u));
  for (Eigen::Index i = 0; i < A.rows(); ++i) {
    const int s = scale(rng);
    for (Eigen::Index j = 0; j < A.cols(); ++j) {
      if (kind == 3 && s != 0) A(i, j) *= s > 0 ? big : Rational(1) / big;
      if (kind == 4 && coin(rng) == 0) A(i, j) = tiny;
    }
  }
  return A;
}

unsigned long env_or(const char* name, unsigned long fallback) {
  const char* v = std::getenv(name);
  return v ? std::strtoul(v, nullptr, 10) : fallback;
}

}  // namespace

TEST_CASE("reach never contradicts itself across precision (64 against 512 bits)", "[soak]") {
  const unsigned long seed = env_or("ATTNRANK_SOAK_SEED", 20261130), count = env_or("ATTNRANK_SOAK_COUNT", 10000);
  std::cout << "soak: seed " << seed << ", " << count << " targets (ATTNRANK_SOAK_SEED / ATTNRANK_SOAK_COUNT to change)\n";
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> coin(0, 1);
  long decided_both = 0, undecided_low_only = 0, undecided_both = 0, undecided_high_only = 0, contradictions = 0;
  for (unsigned long t = 0; t < count; ++t) {
    int kind = 0;
    const Matrix<Rational> A = delicate_target(rng, kind);
    const Eigen::Index n = A.rows();
    const Eigen::Index dk = std::uniform_int_distribution<Eigen::Index>(1, n)(rng);
    ReachOptions low, high;
    low.bits = 64;
    high.bits = 512;
    low.witness = high.witness = false;
    low.full_floor = high.full_floor = coin(rng) == 1;
    const ReachResult a = reach(A, dk, low), b = reach(A, dk, high);
    INFO("target " << t << " (kind " << kind << ", n = " << n << ", d_k = " << dk << "):\n" << A);
    // The two enclosures of the same floor intersect, and each is consistent.
    CHECK(a.floor.lower <= a.floor.upper);
    CHECK(b.floor.lower <= b.floor.upper);
    CHECK(a.floor.lower <= b.floor.upper);
    CHECK(b.floor.lower <= a.floor.upper);
    const bool da = a.verdict != Verdict::undecided, db = b.verdict != Verdict::undecided;
    if (da && db && a.verdict != b.verdict) ++contradictions;
    if (da && db) ++decided_both;
    else if (!da && db) ++undecided_low_only;
    else if (da && !db) ++undecided_high_only;
    else ++undecided_both;
  }
  std::cout << "soak: decided at both precisions " << decided_both << ", undecided at 64 bits only "
            << undecided_low_only << ", undecided at both " << undecided_both << ", undecided at 512 bits only "
            << undecided_high_only << ", contradictions " << contradictions << "\n";
  CHECK(contradictions == 0);
  CHECK(undecided_high_only == 0);  // more precision never loses a decision
}
