#pragma once
// Matrices of already formatted numbers (decimal strings whose digits the
// formatting tier vouched for), as aligned text for people and as JSON.

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace attnrank {

using TextMatrix = std::vector<std::vector<std::string>>;

/// Right-aligned columns, one line per row, each line indented by `indent`
/// spaces; `row_labels` (if not empty) are printed left of the rows.
std::string render_table(const TextMatrix& m, const std::vector<std::string>& row_labels = {}, int indent = 2);

/// The matrix as a JSON array of rows of strings.
nlohmann::json text_matrix_json(const TextMatrix& m);

}  // namespace attnrank
