#pragma once
// Module numbers: the four tiers (exact, double, MPFR, MPFI), what each scalar
// promises (scalar_traits), precision and directed rounding, certified decimals,
// balls and positive scale factors, rationals enclosed in doubles and logarithms certified at double speed.
// Depends on nothing else in attnrank but error.hpp.
#include <attnrank/error.hpp>
#include <attnrank/numbers/tiers.hpp>
#include <attnrank/numbers/precision.hpp>
#include <attnrank/numbers/rounding_mode.hpp>
#include <attnrank/numbers/scalar_traits.hpp>
#include <attnrank/numbers/directed_rounding.hpp>
#include <attnrank/numbers/balls.hpp>
#include <attnrank/numbers/bands.hpp>
#include <attnrank/numbers/scaling.hpp>
#include <attnrank/numbers/decimal.hpp>
#include <attnrank/numbers/rational_enclosure.hpp>
#include <attnrank/numbers/certified_log.hpp>
#include <attnrank/numbers/certified_tanh.hpp>
