#pragma once
// Everything: every module of attnrank (tests/headers checks that every public
// header is reached from here).
#include <attnrank/error.hpp>
#include <attnrank/out_of_memory.hpp>
#include <attnrank/freed_memory.hpp>
#include <attnrank/numbers.hpp>
#include <attnrank/linalg.hpp>
#include <attnrank/io.hpp>
#include <attnrank/attention.hpp>
#include <attnrank/reach.hpp>
#include <attnrank/tutorial.hpp>
#include <attnrank/analysis.hpp>
