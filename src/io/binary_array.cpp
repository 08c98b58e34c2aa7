// Binary arrays read exactly (attnrank/io/binary_array.hpp).
#include <attnrank/io/binary_array.hpp>

#include <attnrank/out_of_memory.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace attnrank {
namespace {

std::uint64_t load_unsigned(const unsigned char* p, std::size_t bytes, bool big_endian) {
  std::uint64_t v = 0;
  for (std::size_t k = 0; k < bytes; ++k) {
    const std::size_t at = big_endian ? k : bytes - 1 - k;  // most significant byte first
    v = (v << 8) | p[at];
  }
  return v;
}

/// IEEE half precision, exactly: every half is a double.
double half_to_double(std::uint16_t h) {
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (exponent == 0x1f) return mantissa ? std::numeric_limits<double>::quiet_NaN() : sign * HUGE_VAL;
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);
  return sign * std::ldexp(1024 + mantissa, exponent - 25);
}

bool is_float(const ElementType& t) {
  return t.kind == ElementType::Kind::floating || t.kind == ElementType::Kind::bfloat ||
         t.kind == ElementType::Kind::fp8_e4m3 || t.kind == ElementType::Kind::fp8_e5m2;
}

}  // namespace

double fp8_value(unsigned code, ElementType::Kind kind) {
  const double sign = (code & 0x80) ? -1.0 : 1.0;
  if (kind == ElementType::Kind::fp8_e4m3) {
    const int exponent = (code >> 3) & 0xf, mantissa = code & 0x7;
    if (exponent == 0xf && mantissa == 0x7) return std::numeric_limits<double>::quiet_NaN();
    if (exponent == 0) return sign * std::ldexp(mantissa, -9);
    return sign * std::ldexp(8 + mantissa, exponent - 10);
  }
  const int exponent = (code >> 2) & 0x1f, mantissa = code & 0x3;
  if (exponent == 0x1f) return mantissa ? std::numeric_limits<double>::quiet_NaN() : sign * HUGE_VAL;
  if (exponent == 0) return sign * std::ldexp(mantissa, -16);
  return sign * std::ldexp(4 + mantissa, exponent - 17);
}

std::string element_type_name(const ElementType& t) {
  const std::string bits = std::to_string(8 * t.bytes);
  switch (t.kind) {
    case ElementType::Kind::floating: return "float" + bits;
    case ElementType::Kind::bfloat: return "bfloat16";
    case ElementType::Kind::signed_integer: return "int" + bits;
    case ElementType::Kind::unsigned_integer: return "uint" + bits;
    case ElementType::Kind::boolean: return "bool";
    case ElementType::Kind::fp8_e4m3: return "float8_e4m3fn";
    case ElementType::Kind::fp8_e5m2: return "float8_e5m2";
  }
  return t.name;
}

ElementType fp8_element_type(const std::string& format) {
  if (format == "e4m3" || format == "float8_e4m3fn" || format == "F8_E4M3")
    return ElementType{ElementType::Kind::fp8_e4m3, 1, false, format};
  if (format == "e5m2" || format == "float8_e5m2" || format == "F8_E5M2")
    return ElementType{ElementType::Kind::fp8_e5m2, 1, false, format};
  throw input_error("FP8 format '" + format + "' is not e4m3 (float8_e4m3fn, F8_E4M3) or e5m2 (float8_e5m2, F8_E5M2)");
}

namespace {

/// The floating-point element `bits` of type t (floating, bfloat or fp8), exactly.
double float_value(std::uint64_t bits, const ElementType& t) {
  if (t.kind == ElementType::Kind::bfloat) return std::bit_cast<float>(static_cast<std::uint32_t>(bits << 16));
  if (t.kind == ElementType::Kind::fp8_e4m3 || t.kind == ElementType::Kind::fp8_e5m2)
    return fp8_value(static_cast<unsigned>(bits & 0xff), t.kind);
  if (t.bytes == 2) return half_to_double(static_cast<std::uint16_t>(bits));
  if (t.bytes == 4) return std::bit_cast<float>(static_cast<std::uint32_t>(bits));
  return std::bit_cast<double>(bits);
}

std::string index_text(const std::string& source, long i, long j) { return entry_text(source, i, j); }

/// IEEE binary64 or binary32 in this machine's byte order (what NumPy and PyTorch
/// write on x86): read by memcpy in blocks of 64 rows, so that the strided side of
/// the copy stays in cache (the generic decoder below costs ~25 ns an element).
/// Non-finite entries are copied as they are.
template <class F>
void copy_native(const BinaryMatrixView& view, Eigen::MatrixXd& m) {
  constexpr long block = 64;
  for (long i0 = 0; i0 < view.rows; i0 += block) {
    const long i1 = std::min(view.rows, i0 + block);
    for (long j = 0; j < view.columns; ++j) {
      const unsigned char* column = view.data + j * view.column_stride;
      double* out = m.col(j).data();
      for (long i = i0; i < i1; ++i) {
        F x;
        std::memcpy(&x, column + i * view.row_stride, sizeof(F));
        out[i] = static_cast<double>(x);  // exact: a float is a double
      }
    }
  }
}

/// copy_native for the two types it serves; false (m untouched) for any other.
bool decode_native_floats(const BinaryMatrixView& view, Eigen::MatrixXd& m) {
  const ElementType& t = view.type;
  if (t.kind != ElementType::Kind::floating || (t.big_endian && t.bytes > 1) != (std::endian::native == std::endian::big))
    return false;
  static_assert(std::numeric_limits<double>::is_iec559 && std::numeric_limits<float>::is_iec559);
  if (t.bytes == 8) copy_native<double>(view, m);
  else if (t.bytes == 4) copy_native<float>(view, m);
  else return false;
  return true;
}

}  // namespace

void require_matrix_size(long rows, long columns, const std::string& source, const ParseLimits& limits) {
  if (rows < 1 || columns < 1)
    throw input_error(source + ": the matrix is empty (" + std::to_string(rows) + " x " + std::to_string(columns) + ")");
  if (static_cast<std::size_t>(rows) > limits.max_rows)
    throw input_error(source + ": " + std::to_string(rows) + " rows, over the limit of " +
                      std::to_string(limits.max_rows) + " (the size limit, max_size, raises it)");
  if (static_cast<std::size_t>(columns) > limits.max_columns)
    throw input_error(source + ": " + std::to_string(columns) + " columns, over the limit of " +
                      std::to_string(limits.max_columns) + " (the size limit, max_size, raises it)");
  if (static_cast<std::size_t>(rows) * static_cast<std::size_t>(columns) > limits.max_cells)
    throw input_error(source + ": more than " + std::to_string(limits.max_cells) + " entries");
}

void refuse_nonfinite_element(const std::string& source, long i, long j, double d) {
  throw input_error(entry_text(source, i, j) + " is " + (std::isnan(d) ? "nan" : d > 0 ? "inf" : "-inf") +
                        ": not a finite number" + (d < 0 ? std::string(minus_infinity_hint) : std::string()),
                    source, i + 1, j + 1);
}

Matrix<Rational> decode_binary_matrix(const BinaryMatrixView& view, const std::string& source,
                                      const ParseLimits& limits) {
  require_matrix_size(view.rows, view.columns, source, limits);
  require_memory(static_cast<double>(view.rows) * static_cast<double>(view.columns) * sizeof(Rational),
                 source + " (" + std::to_string(view.rows) + " x " + std::to_string(view.columns) + " exact rationals)");
  const ElementType& t = view.type;
  Matrix<Rational> m(view.rows, view.columns);
  std::size_t total_bits = 0;
  for (long i = 0; i < view.rows; ++i)
    for (long j = 0; j < view.columns; ++j) {
      const unsigned char* p = view.data + i * view.row_stride + j * view.column_stride;
      const std::uint64_t bits = load_unsigned(p, t.bytes, t.big_endian);
      mpq_ptr q = m(i, j).backend().data();
      if (is_float(t)) {
        const double d = float_value(bits, t);
        if (!std::isfinite(d)) refuse_nonfinite_element(source, i, j, d);
        mpq_set_d(q, d);  // exact: a double is a dyadic rational
      } else if (t.kind == ElementType::Kind::signed_integer) {
        const unsigned shift = static_cast<unsigned>(64 - 8 * t.bytes);
        const auto v = static_cast<std::int64_t>(bits << shift) >> shift;  // sign-extend
        mpz_set_si(mpq_numref(q), static_cast<long>(v));
      } else if (t.kind == ElementType::Kind::unsigned_integer) {
        mpz_set_ui(mpq_numref(q), static_cast<unsigned long>(bits));
      } else {
        mpz_set_ui(mpq_numref(q), bits != 0 ? 1u : 0u);
      }
      total_bits += mpz_sizeinbase(mpq_numref(q), 2) + mpz_sizeinbase(mpq_denref(q), 2);
      if (total_bits > limits.max_total_bits)
        throw input_error(source + ": the numbers need more than " + std::to_string(limits.max_total_bits) +
                          " bits in all (ParseLimits::max_total_bits)");
    }
  return m;
}

Eigen::MatrixXd decode_binary_matrix_as_doubles(const BinaryMatrixView& view, const std::string& source,
                                                const ParseLimits& limits, NonFiniteElements nonfinite) {
  require_matrix_size(view.rows, view.columns, source, limits);
  require_memory(static_cast<double>(view.rows) * static_cast<double>(view.columns) * sizeof(double),
                 source + " (" + std::to_string(view.rows) + " x " + std::to_string(view.columns) + " doubles)");
  const ElementType& t = view.type;
  Eigen::MatrixXd m(view.rows, view.columns);
  // The common case fast; a non-finite entry then goes through the loop below, which names it.
  if (decode_native_floats(view, m) && (nonfinite == NonFiniteElements::keep || m.allFinite())) return m;
  constexpr std::uint64_t exact_limit = std::uint64_t{1} << 53;  // every integer up to 2^53 is a double
  for (long j = 0; j < view.columns; ++j)
    for (long i = 0; i < view.rows; ++i) {
      const unsigned char* p = view.data + i * view.row_stride + j * view.column_stride;
      const std::uint64_t bits = load_unsigned(p, t.bytes, t.big_endian);
      double d = 0;
      if (is_float(t)) {
        d = float_value(bits, t);
        if (!std::isfinite(d) && nonfinite == NonFiniteElements::refuse) refuse_nonfinite_element(source, i, j, d);
      } else if (t.kind == ElementType::Kind::signed_integer) {
        const unsigned shift = static_cast<unsigned>(64 - 8 * t.bytes);
        const auto v = static_cast<std::int64_t>(bits << shift) >> shift;  // sign-extend
        const std::uint64_t magnitude = v < 0 ? 0 - static_cast<std::uint64_t>(v) : static_cast<std::uint64_t>(v);
        if (magnitude > exact_limit)
          throw input_error(index_text(source, i, j) + " = " + std::to_string(v) +
                                " is not exactly a double (|n| > 2^53)",
                            source, i + 1, j + 1);
        d = static_cast<double>(v);
      } else if (t.kind == ElementType::Kind::unsigned_integer) {
        if (bits > exact_limit)
          throw input_error(index_text(source, i, j) + " = " + std::to_string(bits) +
                                " is not exactly a double (n > 2^53)",
                            source, i + 1, j + 1);
        d = static_cast<double>(bits);
      } else {
        d = bits != 0 ? 1.0 : 0.0;
      }
      m(i, j) = d;
    }
  return m;
}

std::vector<std::ptrdiff_t> byte_strides(const std::vector<std::size_t>& shape, std::size_t element_bytes,
                                         bool fortran_order) {
  const std::size_t dims = shape.size();
  std::vector<std::ptrdiff_t> strides(dims);
  auto step = static_cast<std::ptrdiff_t>(element_bytes);
  for (std::size_t k = 0; k < dims; ++k) {
    const std::size_t axis = fortran_order ? k : dims - 1 - k;
    strides[axis] = step;
    step *= static_cast<std::ptrdiff_t>(shape[axis]);
  }
  return strides;
}

ElementType numpy_element_type(const std::string& descr, const std::string& source) {
  const auto refuse = [&](const std::string& why) -> ElementType {
    throw input_error(source + ": dtype '" + descr + "' " + why +
                      " (attnrank reads float16/32/64, int8..int64, uint8..uint64 and bool)");
  };
  if (descr.size() < 3) return refuse("is not one attnrank reads");
  ElementType t;
  t.name = descr;
  const char order = descr[0];
  if (order != '<' && order != '>' && order != '|' && order != '=') return refuse("has no byte order");
  t.big_endian = order == '>';
  const char kind = descr[1];
  std::size_t bytes = 0;
  for (std::size_t k = 2; k < descr.size(); ++k) {
    if (descr[k] < '0' || descr[k] > '9' || bytes > 64) return refuse("is not one attnrank reads");
    bytes = bytes * 10 + static_cast<std::size_t>(descr[k] - '0');
  }
  t.bytes = bytes;
  switch (kind) {
    case 'f':
      if (bytes != 2 && bytes != 4 && bytes != 8) return refuse("is a float attnrank cannot read exactly (long double?)");
      t.kind = ElementType::Kind::floating;
      return t;
    case 'i':
    case 'u':
      if (bytes != 1 && bytes != 2 && bytes != 4 && bytes != 8) return refuse("has an unusual integer size");
      t.kind = kind == 'i' ? ElementType::Kind::signed_integer : ElementType::Kind::unsigned_integer;
      return t;
    case 'b':
      if (bytes != 1) return refuse("has an unusual bool size");
      t.kind = ElementType::Kind::boolean;
      return t;
    case 'c': return refuse("is complex");
    case 'O': return refuse("holds Python objects (save a float or integer array)");
    case 'U':
    case 'S':
      return refuse("holds strings, not numbers (exact numbers such as 1/3 are text: a text file, or from Python a "
                    "list of rows or an object array)");
    default: return refuse("is not a numeric type attnrank reads");
  }
}

ElementType safetensors_element_type(const std::string& dtype, const std::string& source) {
  struct Known { const char* name; ElementType::Kind kind; std::size_t bytes; };
  static const Known known[] = {
      {"F64", ElementType::Kind::floating, 8},          {"F32", ElementType::Kind::floating, 4},
      {"F16", ElementType::Kind::floating, 2},          {"BF16", ElementType::Kind::bfloat, 2},
      {"F8_E4M3", ElementType::Kind::fp8_e4m3, 1},      {"F8_E5M2", ElementType::Kind::fp8_e5m2, 1},
      {"I64", ElementType::Kind::signed_integer, 8},    {"I32", ElementType::Kind::signed_integer, 4},
      {"I16", ElementType::Kind::signed_integer, 2},    {"I8", ElementType::Kind::signed_integer, 1},
      {"U64", ElementType::Kind::unsigned_integer, 8},  {"U32", ElementType::Kind::unsigned_integer, 4},
      {"U16", ElementType::Kind::unsigned_integer, 2},  {"U8", ElementType::Kind::unsigned_integer, 1},
      {"BOOL", ElementType::Kind::boolean, 1}};
  for (const Known& k : known)
    if (dtype == k.name) return ElementType{k.kind, k.bytes, false, dtype};
  throw input_error(source + ": dtype '" + dtype +
                    "' is not one attnrank reads (F64, F32, F16, BF16, F8_E4M3, F8_E5M2, I8..I64, U8..U64, BOOL)");
}

std::pair<std::string, ArraySelection> split_selection(const std::string& argument) {
  ArraySelection sel;
  if (argument.empty() || argument.back() != ']') return {argument, sel};
  const std::size_t open = argument.rfind('[');
  if (open == std::string::npos) return {argument, sel};
  sel.given = true;
  const std::string inside = argument.substr(open + 1, argument.size() - open - 2);
  const auto bad = [&](const std::string& why) {
    throw input_error("'" + argument + "': " + why + " (a selection is [i] or [i,j]: integers, e.g. x.npy[0,3])");
  };
  std::size_t at = 0;
  while (at < inside.size()) {
    std::size_t end = inside.find(',', at);
    if (end == std::string::npos) end = inside.size();
    std::string field = inside.substr(at, end - at);
    const auto first = field.find_first_not_of(' '), last = field.find_last_not_of(' ');
    if (first == std::string::npos) bad("an empty index");
    field = field.substr(first, last - first + 1);
    std::size_t k = (field[0] == '-' || field[0] == '+') ? 1 : 0;
    if (k == field.size() || field.size() > 12) bad("'" + field + "' is not an index");
    for (; k < field.size(); ++k)
      if (field[k] < '0' || field[k] > '9') bad("'" + field + "' is not an index");
    sel.indices.push_back(std::stol(field));
    at = end + 1;
    if (end < inside.size() && at == inside.size()) bad("an empty index");
  }
  return {argument.substr(0, open), sel};
}

std::string shape_text(const std::vector<std::size_t>& shape) {
  std::string s = "(";
  for (std::size_t k = 0; k < shape.size(); ++k) s += (k ? ", " : "") + std::to_string(shape[k]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

std::ptrdiff_t select_matrix(const std::vector<std::size_t>& shape, const std::vector<std::ptrdiff_t>& strides,
                             const ArraySelection& selection, const std::string& source, BinaryMatrixView& view) {
  const std::size_t dims = shape.size();
  if (dims == 0) throw input_error(source + ": a scalar (shape ()), not a matrix");
  const std::size_t wanted = dims > 2 ? dims - 2 : 0;
  if (selection.indices.size() != wanted || (selection.given && wanted == 0)) {
    std::string syntax = "";
    for (std::size_t k = 0; k < wanted; ++k) {
      if (k > 0) syntax += ',';
      syntax += static_cast<char>('i' + k);
    }
    if (wanted == 0)
      throw input_error(source + ": shape " + shape_text(shape) +
                        " is already a matrix; drop the selection [...]");
    throw input_error(source + ": shape " + shape_text(shape) + " has " + std::to_string(dims) +
                      " dimensions; pick one matrix with " + std::to_string(wanted) + (wanted > 1 ? " indices" : " index") + ", e.g. '" + source + "[" + syntax + "]' (0-based" +
                      (dims == 4 ? "; for (batch, heads, n, n) attention, [b,h]" : "") + ")");
  }
  std::ptrdiff_t offset = 0;
  for (std::size_t k = 0; k < wanted; ++k) {
    const long extent = static_cast<long>(shape[k]);
    long i = selection.indices[k];
    if (i < -extent || i >= extent)
      throw input_error(source + ": index " + std::to_string(i) + " is out of range for dimension " +
                        std::to_string(k) + " of shape " + shape_text(shape) + " (0-based, from 0 to " +
                        std::to_string(extent - 1) + ")");
    if (i < 0) i += extent;
    offset += static_cast<std::ptrdiff_t>(i) * strides[k];
  }
  if (dims == 1) {
    view.rows = 1;
    view.columns = static_cast<long>(shape[0]);
    view.row_stride = 0;
    view.column_stride = strides[0];
  } else {
    view.rows = static_cast<long>(shape[dims - 2]);
    view.columns = static_cast<long>(shape[dims - 1]);
    view.row_stride = strides[dims - 2];
    view.column_stride = strides[dims - 1];
  }
  return offset;
}

}  // namespace attnrank
