#pragma once
// The four number tiers. Every algorithm is one template over the scalar; these
// aliases name the scalars and the matrices built from them.
//
// | tier      | type       | guarantee                                             |
// |-----------|------------|-------------------------------------------------------|
// | fast      | `double`   | none (IEEE rounding)                                  |
// | high prec | `Real`     | none, but the error shrinks as precision grows        |
// | certified | `Interval` | the true real value lies in the interval              |
// | exact     | `Rational` | exact (and `Integer` for integer-only algorithms)     |
//
// `Real` and `Interval` have run-time precision: values created while a
// `PrecisionScope` is alive get its precision.

#include <boost/multiprecision/eigen.hpp>
#include <boost/multiprecision/gmp.hpp>
#include <boost/multiprecision/mpfi.hpp>
#include <boost/multiprecision/mpfr.hpp>

#include <Eigen/Core>

#include <cmath>

// Real -> Interval, exactly. Boost 1.74 has no direct conversion from
// mpfr_float to mpfi_float and falls back to generic_interconvert, which
// rebuilds the value from integer chunks and returns [nan, nan] for some
// finite inputs (0x2.5517dd6892f2863p+60 at 68 bits; found by an audit: a NaN
// certified determinant). This explicit specialisation makes every such
// conversion in the program the outward rounding MPFI itself defines
// (mpfi_set_fr, _q, _z), exact when the interval's precision is at least the
// number's. tests/numbers/tiers.test.cpp checks it.
namespace boost::multiprecision::detail {
template <>
inline void generic_interconvert<backends::mpfi_float_backend<0>, backends::mpfr_float_backend<0, allocate_dynamic>>(
    backends::mpfi_float_backend<0>& to, const backends::mpfr_float_backend<0, allocate_dynamic>& from,
    const mpl::int_<number_kind_floating_point>&, const mpl::int_<number_kind_floating_point>&) {
  mpfi_set_fr(to.data(), from.data());
}
// The same for exact sources, which Boost also converts chunk by chunk.
template <>
inline void generic_interconvert<backends::mpfi_float_backend<0>, backends::gmp_rational>(
    backends::mpfi_float_backend<0>& to, const backends::gmp_rational& from, const mpl::int_<number_kind_floating_point>&,
    const mpl::int_<number_kind_rational>&) {
  mpfi_set_q(to.data(), from.data());
}
template <>
inline void generic_interconvert<backends::mpfi_float_backend<0>, backends::gmp_int>(
    backends::mpfi_float_backend<0>& to, const backends::gmp_int& from, const mpl::int_<number_kind_floating_point>&,
    const mpl::int_<number_kind_integer>&) {
  mpfi_set_z(to.data(), from.data());
}
}  // namespace boost::multiprecision::detail

namespace attnrank {

using Real = boost::multiprecision::mpfr_float;
using Interval = boost::multiprecision::mpfi_float;
using Rational = boost::multiprecision::mpq_rational;
using Integer = boost::multiprecision::mpz_int;

template <class T>
using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;
template <class T>
using Vector = Eigen::Matrix<T, Eigen::Dynamic, 1>;

}  // namespace attnrank

// The tiers' run-time precision (PrecisionScope, the bits rules) is its own concept
// in numbers/precision.hpp; included here so that every user of Real and Interval
// has it. (precision.hpp includes this header; #pragma once ends the cycle.)
#include <attnrank/numbers/precision.hpp>
