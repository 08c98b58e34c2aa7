// Exact input (attnrank/io/parse.hpp): numbers, matrix text, and the dispatch
// to the binary readers.
#include <attnrank/io/parse.hpp>

#include <attnrank/io/detail/text_cells.hpp>
#include <attnrank/io/npy.hpp>
#include <attnrank/io/safetensors.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <tuple>

namespace attnrank {
namespace {

using detail::NotPlainDecimal;
using detail::plain_decimal_ball;
using detail::shown;
using detail::trim;


bool is_number(std::string_view cell) {
  try {
    parse_rational(cell, ParseLimits{});
    return true;
  } catch (const input_error&) {
    return false;
  }
}

/// A cell meant as a number, right or wrong ("0.5", "1e999999", "0,5", "nan"):
/// such a cell makes a row data, never a header.
bool looks_numeric(std::string_view cell) {
  cell = trim(cell);
  std::string lower(cell);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (!lower.empty() && (lower[0] == '+' || lower[0] == '-')) lower.erase(0, 1);
  if (lower == "nan" || lower == "inf" || lower == "infinity") return true;
  bool digit = false;
  for (char c : lower) {
    if (std::isdigit(static_cast<unsigned char>(c))) digit = true;
    else if (std::string_view("+-./e,").find(c) == std::string_view::npos) return false;
  }
  return digit;
}

/// pandas' header line ",0,1,2" or ",a,b": an empty first cell (the index's
/// name), then column names that are not data: labels, or the default 0, 1, 2, ...
bool pandas_header(const std::vector<std::string_view>& cells) {
  if (cells.size() < 2 || !cells.front().empty()) return false;
  bool labels = true, default_names = true;
  for (std::size_t k = 1; k < cells.size(); ++k) {
    labels = labels && !cells[k].empty() && !looks_numeric(cells[k]);
    default_names = default_names && cells[k] == std::to_string(k - 1);
  }
  return labels || default_names;
}

/// "0,5" or "-1,25e-3": a number written with a decimal comma.
bool decimal_comma(std::string_view cell) {
  cell = trim(cell);
  const auto comma = cell.find(',');
  if (comma == std::string_view::npos || cell.find(',', comma + 1) != std::string_view::npos) return false;
  std::string dotted(cell);
  dotted[comma] = '.';
  return comma > 0 && comma + 1 < cell.size() && std::isdigit(static_cast<unsigned char>(cell[comma + 1])) &&
         is_number(dotted);
}

const char* separator_name(char sep) {
  switch (sep) {
    case ',': return "comma";
    case ';': return "semicolon";
    case '\t': return "tab";
    default: return "white-space";
  }
}

/// The separator of a file, from its first data line and the one after it (a
/// one-column header says nothing): ';' if either has one; a tab if cells split
/// at tabs are all decimal-comma numbers (a spreadsheet's "0,5<TAB>0,25", which
/// is then refused as such) or there is no comma; else ','; else white space.
char detect_separator(std::string_view first, std::string_view rest) {
  std::string_view second;
  while (!rest.empty() && second.empty()) {
    const auto nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    if (const auto hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    if (!trim(line).empty()) second = line;
  }
  const auto has = [&](char c) {
    return first.find(c) != std::string_view::npos || second.find(c) != std::string_view::npos;
  };
  if (has(';')) return ';';
  if (has('\t')) {
    if (!has(',')) return '\t';
    bool all_decimal_commas = true;
    for (std::string_view line : {first, second}) {
      while (!line.empty()) {
        const auto tab = line.find('\t');
        const std::string_view cell = trim(line.substr(0, tab));
        all_decimal_commas = all_decimal_commas && (cell.empty() || decimal_comma(cell));
        line = tab == std::string_view::npos ? std::string_view() : line.substr(tab + 1);
      }
    }
    if (all_decimal_commas) return '\t';
  }
  if (has(',')) return ',';
  return ' ';
}

/// The cells of one line, split at `sep` (' ': runs of spaces and tabs; '\t': tabs,
/// and spaces inside a cell too).
void split_cells(std::string_view line, char sep, std::vector<std::string_view>& cells) {
  cells.clear();
  if (sep == ' ') {
    std::size_t at = 0;
    while (true) {
      while (at < line.size() && (line[at] == ' ' || line[at] == '\t' || line[at] == '\r')) ++at;
      if (at >= line.size()) break;
      std::size_t end = at;
      while (end < line.size() && line[end] != ' ' && line[end] != '\t' && line[end] != '\r') ++end;
      cells.push_back(line.substr(at, end - at));
      at = end;
    }
    return;
  }
  while (true) {
    const auto at = line.find(sep);
    const std::string_view cell = trim(line.substr(0, at));
    // Tab-separated text with spaces between some cells too ("0.5 0.5" on one line,
    // "0.001<TAB>-250" on the next): white space inside a cell separates as well.
    if (sep == '\t' && cell.find_first_of(" \r") != std::string_view::npos) {
      std::vector<std::string_view> parts;
      split_cells(cell, ' ', parts);
      cells.insert(cells.end(), parts.begin(), parts.end());
    } else {
      cells.push_back(cell);
    }
    if (at == std::string_view::npos) break;
    line = line.substr(at + 1);
  }
}

std::string place(const std::string& source, std::size_t line, std::size_t column) {
  return source + ": line " + std::to_string(line) + ", column " + std::to_string(column);
}

}  // namespace

/// The matrix text grammar (parse.hpp) once, for every kind of cell: `read_cell`
/// turns a cell into a T (throwing input_error with a reason), `cell_bits` says
/// how many bits it holds (for limits.max_total_bits).
template <class T, class ReadCell, class CellBits>
Matrix<T> parse_cells(std::string_view text, const std::string& source, const ParseLimits& limits, InputNotes* notes,
                      ReadCell&& read_cell, CellBits&& cell_bits) {
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  if (is_npy(text))
    throw input_error(source + ": an .npy file, not text (read it with read_matrix, which recognises it)");
  if (text.substr(0, 4096).find('\0') != std::string_view::npos)
    throw input_error(source + ": binary data, not text (attnrank reads text, .npy files, and tensors of a "
                      ".safetensors file named as FILE.safetensors:TENSOR)");
  const auto note = [&](const std::string& what) {
    if (notes) notes->push_back(source + ": " + what);
  };
  std::vector<std::vector<T>> rows;
  std::vector<std::string_view> cells;
  std::size_t first_width_line = 0, line_no = 0, cell_count = 0, total_bits = 0;
  char sep = 0;               // detected from the first data line
  bool index_column = false;  // the first column holds row labels (pandas' index)
  bool trailing_noted = false;
  while (!text.empty()) {
    ++line_no;
    const auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (const auto hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    if (trim(line).empty()) continue;
    bool first_line = false;
    if (sep == 0) {
      first_line = true;
      sep = detect_separator(line, text);
      if (sep != ',') note(std::string(separator_name(sep)) + "-separated");
    }
    split_cells(line, sep, cells);
    // One trailing separator ("1,2,3,") is an artefact of some writers, not an empty column.
    if (sep != ' ' && cells.size() > 1 && cells.back().empty()) {
      cells.pop_back();
      if (!trailing_noted) note("a trailing '" + std::string(sep == '\t' ? "\\t" : std::string(1, sep)) +
                                "' at the end of line " + std::to_string(line_no) + " (and any later) is ignored");
      trailing_noted = true;
    }
    if (first_line) {
      bool names_only = false;
      for (std::string_view c : cells) names_only = names_only || !c.empty();
      for (std::string_view c : cells) names_only = names_only && !looks_numeric(c);
      const bool with_index = pandas_header(cells);
      if (names_only || with_index) {
        index_column = with_index;
        std::string names;
        for (std::size_t k = 0; k < cells.size() && k < 4; ++k) names += (k ? ", " : "") + shown(cells[k]);
        note("line " + std::to_string(line_no) + " is a header (" + names + (cells.size() > 4 ? ", ..." : "") +
             "), skipped" + (index_column ? "; its empty first cell marks the first column as row labels, dropped" : ""));
        continue;
      }
    }
    std::vector<T> row;
    for (std::size_t k = index_column ? 1 : 0; k < cells.size(); ++k) {
      const std::size_t column = k + 1;
      try {
        if ((sep == ';' || sep == '\t') && decimal_comma(cells[k]))
          throw input_error("'" + shown(cells[k]) +
                            "' has a decimal comma; attnrank reads decimal points only (0.5, not 0,5): "
                            "export with '.' as the decimal separator");
        row.push_back(read_cell(cells[k]));
      } catch (const input_error& e) {
        std::string hint;
        if (sep != ';' && decimal_comma(cells[k])) hint = " (a decimal comma? attnrank reads 0.5, not 0,5)";
        throw input_error(place(source, line_no, column) + ": " + e.what() + hint, source,
                          static_cast<long>(line_no), static_cast<long>(column));
      }
      if (++cell_count > limits.max_cells)
        throw input_error(source + ": more than " + std::to_string(limits.max_cells) + " cells");
      total_bits += cell_bits(row.back());
      if (total_bits > limits.max_total_bits)
        throw input_error(source + ": line " + std::to_string(line_no) + ": the numbers so far need more than " +
                          std::to_string(limits.max_total_bits) + " bits in all (ParseLimits::max_total_bits)");
      if (row.size() > limits.max_columns)
        throw input_error(source + ": line " + std::to_string(line_no) + " has more than " +
                          std::to_string(limits.max_columns) + " columns (the size limit; max_size raises it)");
    }
    if (row.empty()) throw input_error(source + ": line " + std::to_string(line_no) + " has only a row label");
    if (!rows.empty() && row.size() != rows.front().size())
      throw input_error(source + ": line " + std::to_string(line_no) + " has " + std::to_string(row.size()) +
                        " columns, but line " + std::to_string(first_width_line) + " has " +
                        std::to_string(rows.front().size()) + " (rows must have equal length)");
    if (rows.empty()) first_width_line = line_no;
    if (rows.size() == limits.max_rows)
      throw input_error(source + ": line " + std::to_string(line_no) + ": more than " +
                        std::to_string(limits.max_rows) + " rows (the size limit; max_size raises it)");
    rows.push_back(std::move(row));
  }
  if (rows.empty()) throw input_error(source + ": no matrix rows (the input is empty or only comments)");
  Matrix<T> m(static_cast<Eigen::Index>(rows.size()), static_cast<Eigen::Index>(rows.front().size()));
  for (std::size_t i = 0; i < rows.size(); ++i)
    for (std::size_t j = 0; j < rows[i].size(); ++j)
      m(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) = std::move(rows[i][j]);
  return m;
}

Matrix<Rational> parse_matrix(std::string_view text, const std::string& source, const ParseLimits& limits,
                              InputNotes* notes) {
  return parse_cells<Rational>(
      text, source, limits, notes, [&](std::string_view cell) { return parse_rational(cell, limits); },
      [](const Rational& q) {
        return mpz_sizeinbase(mpq_numref(q.backend().data()), 2) + mpz_sizeinbase(mpq_denref(q.backend().data()), 2);
      });
}

std::optional<BallMatrix> parse_plain_decimal_balls(std::string_view text, const std::string& source,
                                                    const ParseLimits& limits, InputNotes* notes) {
  InputNotes seen;
  try {
    const Matrix<std::pair<double, double>> cells = parse_cells<std::pair<double, double>>(
        text, source, limits, &seen, plain_decimal_ball, [](const std::pair<double, double>&) { return 64; });
    BallMatrix out;
    out.mid.resize(cells.rows(), cells.cols());
    out.rad.resize(cells.rows(), cells.cols());
    for (Eigen::Index j = 0; j < cells.cols(); ++j)
      for (Eigen::Index i = 0; i < cells.rows(); ++i) std::tie(out.mid(i, j), out.rad(i, j)) = cells(i, j);
    if (notes) notes->insert(notes->end(), seen.begin(), seen.end());
    return out;
  } catch (const NotPlainDecimal&) {
    return std::nullopt;
  } catch (const input_error&) {
    return std::nullopt;
  }
}

std::string read_text_file(const std::string& path, const ParseLimits& limits) {
  std::ifstream file;
  std::istream* in = &std::cin;
  const bool standard_input = path == "-";
  std::string text;
  if (!standard_input) {
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    if (ec || !std::filesystem::exists(status)) throw input_error(path + ": no such file");
    if (std::filesystem::is_directory(status)) throw input_error(path + ": is a directory, not a file");
    const auto size = std::filesystem::file_size(path, ec);
    if (!ec && size > limits.max_file_bytes)
      throw input_error(path + ": file is " + std::to_string(size) + " bytes, over the limit of " +
                        std::to_string(limits.max_file_bytes) + " (the file size limit, max_file_size, raises it)");
    // The size known up front spares the string its regrowth copies.
    if (!ec && std::filesystem::is_regular_file(status)) text.reserve(static_cast<std::size_t>(size) + 1);
    file.open(path, std::ios::binary);
    if (!file) throw input_error(path + ": cannot be opened for reading");
    in = &file;
  }
  const std::string name = standard_input ? "<stdin>" : path;
  // Read in chunks and stop one byte past the cap: a pipe or /dev/zero has no
  // size to check up front, and must not be read to exhaustion.
  std::vector<char> chunk(std::size_t{1} << 16);
  while (*in) {
    in->read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    text.append(chunk.data(), static_cast<std::size_t>(in->gcount()));
    if (text.size() > limits.max_file_bytes)
      throw input_error(name + ": more than " + std::to_string(limits.max_file_bytes) +
                        " bytes (the file size limit, max_file_size, raises it); stopped reading there");
  }
  if (in->bad()) throw input_error(name + ": read error");
  return text;
}

Matrix<Rational> read_matrix(const std::string& argument, const ParseLimits& limits, InputNotes* notes) {
  // "m.safetensors:NAME[...]": the file name ends at the first ':' after ".safetensors".
  if (const auto st = split_safetensors_argument(argument)) {
    const auto [name, selection] = split_selection(st->rest);  // no name: the error lists the tensors
    return parse_safetensors(read_text_file(st->path, limits), st->path, name, selection, limits);
  }
  // "x.npy[...]": a selection, unless a file of that very name exists.
  auto [path, selection] = split_selection(argument);
  std::error_code ec;
  if (selection.given && std::filesystem::exists(argument, ec)) {
    path = argument;
    selection = {};
  }
  const std::string bytes = read_text_file(path, limits);
  const std::string source = path == "-" ? "<stdin>" : path;
  if (is_npy(bytes)) return parse_npy(bytes, source, selection, limits);
  if (selection.given)
    throw input_error(source + ": a selection [...] picks a matrix out of an .npy file or a safetensors tensor; "
                      "this is text");
  return parse_matrix(bytes, source, limits, notes);
}

}  // namespace attnrank
