#pragma once
// Module io: matrices read exactly from text (parse), values handed over one by one
// (value_cells: Python's lists), NumPy .npy files (npy),
// safetensors files (safetensors, torch_weights) and the command line's matrix
// specifications (matrix_spec), with errors that name file, place and value.
// Depends on numbers.
#include <attnrank/numbers.hpp>
#include <attnrank/io/parse.hpp>
#include <attnrank/io/binary_array.hpp>
#include <attnrank/io/value_cells.hpp>
#include <attnrank/io/npy.hpp>
#include <attnrank/io/double_tensor.hpp>
#include <attnrank/io/safetensors.hpp>
#include <attnrank/io/torch_weights.hpp>
#include <attnrank/io/matrix_spec.hpp>
#include <attnrank/io/json.hpp>
