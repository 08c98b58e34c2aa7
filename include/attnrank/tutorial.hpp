#pragma once
// Module tutorial: the worked example of the tutorial "Multi-Head Attention" (Hao Ma,
// haoma7.github.io), its single-key head (Section 2.5.4) and the appendix's
// argument, every number computed. Depends on every other module.
#include <attnrank/reach.hpp>
#include <attnrank/tutorial/worked_example.hpp>
#include <attnrank/tutorial/single_key_head.hpp>
#include <attnrank/tutorial/appendix.hpp>
