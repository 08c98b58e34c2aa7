#pragma once
// Module linalg: products in every tier, and exact / certified / approximate rank,
// determinant and singular values. Depends on numbers.
#include <attnrank/numbers.hpp>
#include <attnrank/linalg/product.hpp>
#include <attnrank/linalg/structured_matrices.hpp>
#include <attnrank/linalg/exact_rank.hpp>
#include <attnrank/linalg/accurate_product.hpp>
#include <attnrank/linalg/certified_rank.hpp>
#include <attnrank/linalg/leading_minors.hpp>
#include <attnrank/linalg/certified_determinant.hpp>
#include <attnrank/linalg/numeric_rank.hpp>
#include <attnrank/linalg/certified_svd.hpp>
