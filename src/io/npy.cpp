// NumPy .npy files read exactly (attnrank/io/npy.hpp). The format:
// numpy.org/doc/stable/reference/generated/numpy.lib.format.html
#include <attnrank/io/npy.hpp>

#include <cctype>

namespace attnrank {
namespace {

/// A cursor over the header's Python dictionary literal.
class DictReader {
 public:
  DictReader(std::string_view text, const std::string& source) : text_(text), source_(source) {}

  [[noreturn]] void fail(const std::string& why) const {
    throw input_error(source_ + ": malformed .npy header (" + why + "): " + printable(text_));
  }
  void skip_space() {
    while (at_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[at_]))) ++at_;
  }
  bool take(char c) {
    skip_space();
    if (at_ < text_.size() && text_[at_] == c) {
      ++at_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!take(c)) fail(std::string("expected '") + c + "'");
  }
  std::string quoted() {
    skip_space();
    if (at_ >= text_.size() || (text_[at_] != '\'' && text_[at_] != '"')) fail("expected a quoted string");
    const char q = text_[at_++];
    const std::size_t end = text_.find(q, at_);
    if (end == std::string_view::npos) fail("unterminated string");
    std::string s(text_.substr(at_, end - at_));
    at_ = end + 1;
    return s;
  }
  std::string word() {
    skip_space();
    const std::size_t from = at_;
    while (at_ < text_.size() && std::isalpha(static_cast<unsigned char>(text_[at_]))) ++at_;
    return std::string(text_.substr(from, at_ - from));
  }
  std::size_t integer() {
    skip_space();
    const std::size_t from = at_;
    std::size_t v = 0;
    while (at_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[at_]))) {
      if (v > (std::size_t{1} << 40)) fail("a dimension is too large");
      v = v * 10 + static_cast<std::size_t>(text_[at_++] - '0');
    }
    if (at_ < text_.size() && text_[at_] == 'L') ++at_;  // Python 2 longs
    if (at_ == from) fail("expected a dimension");
    return v;
  }
  bool at_end() {
    skip_space();
    return at_ >= text_.size();
  }
  char peek() {
    skip_space();
    return at_ < text_.size() ? text_[at_] : '\0';
  }

  static std::string printable(std::string_view s) {
    std::string out;
    for (char c : s.substr(0, 200)) out += std::isprint(static_cast<unsigned char>(c)) ? c : '?';
    return out;
  }

 private:
  std::string_view text_;
  const std::string& source_;
  std::size_t at_ = 0;
};

std::uint64_t little_endian(std::string_view bytes, std::size_t at, std::size_t n) {
  std::uint64_t v = 0;
  for (std::size_t k = 0; k < n; ++k) v |= std::uint64_t{static_cast<unsigned char>(bytes[at + k])} << (8 * k);
  return v;
}

}  // namespace

bool is_npy(std::string_view bytes) { return bytes.substr(0, 6) == std::string_view("\x93NUMPY", 6); }

NpyHeader parse_npy_header(std::string_view bytes, const std::string& source) {
  if (!is_npy(bytes)) throw input_error(source + ": not an .npy file (no \\x93NUMPY magic string)");
  if (bytes.size() < 10) throw input_error(source + ": truncated .npy header");
  NpyHeader h;
  h.major_version = static_cast<unsigned char>(bytes[6]);
  if (h.major_version < 1 || h.major_version > 3)
    throw input_error(source + ": .npy format version " + std::to_string(h.major_version) +
                      " (attnrank reads versions 1 to 3)");
  const std::size_t length_bytes = h.major_version == 1 ? 2 : 4;
  if (bytes.size() < 8 + length_bytes) throw input_error(source + ": truncated .npy header");
  const std::uint64_t header_length = little_endian(bytes, 8, length_bytes);
  h.data_offset = 8 + length_bytes + header_length;
  if (h.data_offset > bytes.size())
    throw input_error(source + ": truncated .npy header (it says " + std::to_string(header_length) +
                      " bytes, the file has " + std::to_string(bytes.size() - 8 - length_bytes) + ")");
  DictReader d(bytes.substr(8 + length_bytes, header_length), source);
  bool seen_descr = false, seen_order = false, seen_shape = false;
  d.expect('{');
  while (!d.take('}')) {
    const std::string key = d.quoted();
    d.expect(':');
    if (key == "descr") {
      if (d.peek() == '[') d.fail("a structured dtype; save a plain numeric array");
      h.type = numpy_element_type(d.quoted(), source);
      seen_descr = true;
    } else if (key == "fortran_order") {
      const std::string w = d.word();
      if (w != "True" && w != "False") d.fail("fortran_order is neither True nor False");
      h.fortran_order = w == "True";
      seen_order = true;
    } else if (key == "shape") {
      d.expect('(');
      while (!d.take(')')) {
        h.shape.push_back(d.integer());
        if (h.shape.size() > 32) d.fail("more than 32 dimensions");
        if (!d.take(',')) {
          d.expect(')');
          break;
        }
      }
      seen_shape = true;
    } else {
      d.fail("unknown key '" + key + "'");
    }
    if (!d.take(',')) {
      d.expect('}');
      break;
    }
  }
  if (!seen_descr || !seen_order || !seen_shape) d.fail("it needs descr, fortran_order and shape");
  std::size_t elements = 1;
  for (std::size_t n : h.shape) {
    if (n != 0 && elements > (std::size_t{1} << 50) / n) throw input_error(source + ": shape " + shape_text(h.shape) + " is too large");
    elements *= n;
  }
  const std::size_t data_bytes = bytes.size() - h.data_offset;
  if (data_bytes != elements * h.type.bytes)
    throw input_error(source + ": shape " + shape_text(h.shape) + " of " + h.type.name + " needs " +
                      std::to_string(elements * h.type.bytes) + " bytes of data, the file has " +
                      std::to_string(data_bytes) + (data_bytes < elements * h.type.bytes ? " (truncated?)" : ""));
  return h;
}

Matrix<Rational> parse_npy(std::string_view bytes, const std::string& source, const ArraySelection& selection,
                           const ParseLimits& limits) {
  const NpyHeader h = parse_npy_header(bytes, source);
  for (std::size_t n : h.shape)
    if (n == 0) throw input_error(source + ": the array is empty (shape " + shape_text(h.shape) + ")");
  const std::vector<std::ptrdiff_t> strides = byte_strides(h.shape, h.type.bytes, h.fortran_order);
  BinaryMatrixView view;
  view.type = h.type;
  const std::ptrdiff_t offset = select_matrix(h.shape, strides, selection, source, view);
  view.data = reinterpret_cast<const unsigned char*>(bytes.data()) + h.data_offset + offset;
  return decode_binary_matrix(view, source, limits);
}

}  // namespace attnrank
