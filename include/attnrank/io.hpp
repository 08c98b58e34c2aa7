#pragma once
// Module io: matrices read exactly from text (parse) and from the command line's
// matrix specifications (matrix_spec), with errors that name file, line and column.
// Depends on numbers.
#include <attnrank/numbers.hpp>
#include <attnrank/io/parse.hpp>
#include <attnrank/io/matrix_spec.hpp>
#include <attnrank/io/json.hpp>
