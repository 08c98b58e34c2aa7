#pragma once
// Umbrella header: includes every public header of attnrank.
#include <attnrank/decimal.hpp>
#include <attnrank/error.hpp>
#include <attnrank/multi_head_attention.hpp>
#include <attnrank/parse.hpp>
#include <attnrank/product.hpp>
#include <attnrank/scalar_traits.hpp>
#include <attnrank/softmax.hpp>
#include <attnrank/tiers.hpp>
#include <attnrank/worked_example.hpp>
