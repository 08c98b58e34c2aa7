// Formatted matrices as text and JSON (analysis/text_matrix.hpp).
#include <attnrank/analysis/text_matrix.hpp>

#include <algorithm>

namespace attnrank {

std::string render_table(const TextMatrix& m, const std::vector<std::string>& row_labels, int indent) {
  std::size_t label_width = 0;
  for (const auto& l : row_labels) label_width = std::max(label_width, l.size());
  std::vector<std::size_t> width;
  for (const auto& row : m)
    for (std::size_t j = 0; j < row.size(); ++j) {
      if (width.size() <= j) width.push_back(0);
      width[j] = std::max(width[j], row[j].size());
    }
  std::string out;
  for (std::size_t i = 0; i < m.size(); ++i) {
    out.append(static_cast<std::size_t>(indent), ' ');
    if (!row_labels.empty()) {
      const std::string& l = i < row_labels.size() ? row_labels[i] : std::string();
      out += l;
      out.append(label_width - l.size() + 2, ' ');
    }
    for (std::size_t j = 0; j < m[i].size(); ++j) {
      if (j > 0) out += "  ";
      out.append(width[j] - m[i][j].size(), ' ');
      out += m[i][j];
    }
    out += '\n';
  }
  return out;
}

nlohmann::json text_matrix_json(const TextMatrix& m) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& row : m) rows.push_back(row);
  return rows;
}

}  // namespace attnrank
