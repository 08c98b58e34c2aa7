#pragma once
// Module attention: softmax and the multi-head attention layer in every tier,
// with the trace of every intermediate. Depends on linalg and numbers.
#include <attnrank/linalg.hpp>
#include <attnrank/attention/mask.hpp>
#include <attnrank/attention/softmax.hpp>
#include <attnrank/attention/multi_head_attention.hpp>
#include <attnrank/attention/certified_forward.hpp>
#include <attnrank/attention/certified_softmax.hpp>
#include <attnrank/attention/certified_attention.hpp>
#include <attnrank/attention/certified_double_forward.hpp>
#include <attnrank/attention/score_modifiers.hpp>
#include <attnrank/attention/certified_gradients.hpp>
#include <attnrank/attention/gradient_check.hpp>
#include <attnrank/attention/kernel_check.hpp>
#include <attnrank/attention/kernel_tolerance.hpp>
