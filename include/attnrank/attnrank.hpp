#pragma once
// Umbrella header: includes every public header of attnrank.
#include <attnrank/certified_determinant.hpp>
#include <attnrank/certified_rank.hpp>
#include <attnrank/decimal.hpp>
#include <attnrank/directed_rounding.hpp>
#include <attnrank/error.hpp>
#include <attnrank/exact_rank.hpp>
#include <attnrank/matrix_spec.hpp>
#include <attnrank/multi_head_attention.hpp>
#include <attnrank/numeric_rank.hpp>
#include <attnrank/parse.hpp>
#include <attnrank/product.hpp>
#include <attnrank/scalar_traits.hpp>
#include <attnrank/softmax.hpp>
#include <attnrank/structured_matrices.hpp>
#include <attnrank/tiers.hpp>
#include <attnrank/worked_example.hpp>
