// Matrices handed over value by value (attnrank/io/value_cells.hpp).
#include <attnrank/io/value_cells.hpp>

#include <attnrank/io/binary_array.hpp>
#include <attnrank/out_of_memory.hpp>

#include <cmath>

namespace attnrank {

Matrix<Rational> read_cell_rows(const CellRows& rows, const std::string& source, const ParseLimits& limits) {
  const long height = static_cast<long>(rows.size());
  const long width = rows.empty() ? 0 : static_cast<long>(rows.front().size());
  for (long i = 1; i < height; ++i)
    if (rows[static_cast<std::size_t>(i)].size() != rows.front().size())
      throw input_error(source + ": row " + std::to_string(i) + " has " +
                            std::to_string(rows[static_cast<std::size_t>(i)].size()) + " entries, but row 0 has " +
                            std::to_string(width) + " (rows must have equal length)",
                        source, i + 1);
  require_matrix_size(height, width, source, limits);
  require_memory(static_cast<double>(height) * static_cast<double>(width) * sizeof(Rational),
                 source + " (" + std::to_string(height) + " x " + std::to_string(width) + " exact rationals)");
  Matrix<Rational> m(height, width);
  std::size_t total_bits = 0;
  for (long i = 0; i < height; ++i)
    for (long j = 0; j < width; ++j) {
      const CellValue& cell = rows[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)];
      mpq_ptr q = m(i, j).backend().data();
      if (cell.kind == CellValue::Kind::binary_float) {
        if (!std::isfinite(cell.value)) refuse_nonfinite_element(source, i, j, cell.value);
        mpq_set_d(q, cell.value);  // exact: a double is a dyadic rational
      } else {
        try {
          m(i, j) = parse_rational(cell.kind == CellValue::Kind::missing ? std::string() : cell.text, limits);
        } catch (const input_error& e) {
          throw input_error(entry_text(source, i, j) + ": " + e.what(), source, i + 1, j + 1);
        }
      }
      total_bits += mpz_sizeinbase(mpq_numref(q), 2) + mpz_sizeinbase(mpq_denref(q), 2);
      if (total_bits > limits.max_total_bits)
        throw input_error(source + ": the numbers need more than " + std::to_string(limits.max_total_bits) +
                          " bits in all (ParseLimits::max_total_bits)");
    }
  return m;
}

}  // namespace attnrank
