// Tests for attnrank/io/npy.hpp, safetensors.hpp, binary_array.hpp and
// torch_weights.hpp: every stored number comes back exactly, every defect of a
// file is an input_error that names it.
#include "array_support.hpp"
#include "support.hpp"

#include <attnrank/io/double_tensor.hpp>
#include <attnrank/io/npy.hpp>
#include <attnrank/io/safetensors.hpp>
#include <attnrank/io/torch_weights.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <unistd.h>

using namespace attnrank;
using namespace attnrank::test;

namespace {

Rational exact(double d) {
  Rational q;
  mpq_set_d(q.backend().data(), d);
  return q;
}

/// The value of an IEEE half from its fields, in rationals (independent of the reader's ldexp).
Rational half_value(std::uint16_t h) {
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  Rational v = e == 0 ? Rational(m) : Rational(1024 + m);
  const int shift = (e == 0 ? 1 : e) - 25;
  for (int k = 0; k < std::abs(shift); ++k) v = shift > 0 ? Rational(v * 2) : Rational(v / 2);
  return (h & 0x8000) ? Rational(-v) : v;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const input_error& e) {
    return e.what();
  }
  return "";
}

/// A directory of this process's own for files the tests write.
std::string scratch_dir() {
  const auto dir = std::filesystem::temp_directory_path() / ("attnrank-io-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir.string();
}

/// Doubles that stress an exact reader: subnormals, extremes, signed zeros, integers.
rc::Gen<double> gen_nasty_double() {
  return rc::gen::oneOf(
      rc::gen::map(rc::gen::arbitrary<std::uint64_t>(),
                   [](std::uint64_t u) {
                     double d;
                     std::memcpy(&d, &u, 8);
                     return std::isfinite(d) ? d : 0.5;
                   }),
      rc::gen::element(0.0, -0.0, 5e-324, -5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 0.1, -1.0 / 3),
      rc::gen::map(rc::gen::inRange(-1000, 1000), [](int k) { return k / 8.0; }));
}

}  // namespace

TEST_CASE("attnrank::parse_npy") {
  SECTION("float64, C order, version 1: the doubles exactly") {
    std::string data;
    for (double d : {0.1, -2.5, 5e-324, 1e300, -0.0, 3.0}) data += raw_bytes(double_bits(d), 8);
    const Matrix<Rational> m = parse_npy(npy_bytes("<f8", false, {2, 3}, data), "x.npy");
    REQUIRE(m.rows() == 2);
    REQUIRE(m.cols() == 3);
    CHECK(m(0, 0) == exact(0.1));
    CHECK(m(0, 0) != Rational(1, 10));  // the double nearest 0.1, not 0.1
    CHECK(m(0, 2) == exact(5e-324));
    CHECK(m(1, 2) == 3);
  }
  SECTION("Fortran order and big endian, versions 2 and 3") {
    std::string data;
    for (std::int32_t v : {1, 4, 2, 5, 3, 6}) data += raw_bytes(static_cast<std::uint32_t>(v), 4, true);
    for (int version : {2, 3}) {
      const Matrix<Rational> m = parse_npy(npy_bytes(">i4", true, {2, 3}, data, version), "x.npy");
      CHECK(m(0, 0) == 1);
      CHECK(m(0, 1) == 2);
      CHECK(m(1, 0) == 4);
      CHECK(m(1, 2) == 6);
    }
  }
  SECTION("every integer width, signed and unsigned, and bool") {
    CHECK(parse_npy(npy_bytes("|i1", false, {1, 2}, "\xff\x7f"), "x.npy")(0, 0) == -1);
    CHECK(parse_npy(npy_bytes("|u1", false, {1, 2}, "\xff\x7f"), "x.npy")(0, 0) == 255);
    CHECK(parse_npy(npy_bytes("<i2", false, {1, 1}, raw_bytes(0x8000, 2)), "x.npy")(0, 0) == -32768);
    CHECK(parse_npy(npy_bytes("<u8", false, {1, 1}, raw_bytes(~std::uint64_t{0}, 8)), "x.npy")(0, 0) ==
          Rational(Integer("18446744073709551615")));
    CHECK(parse_npy(npy_bytes("<i8", false, {1, 1}, raw_bytes(std::uint64_t{1} << 63, 8)), "x.npy")(0, 0) ==
          Rational(Integer("-9223372036854775808")));
    CHECK(parse_npy(npy_bytes("|b1", false, {1, 2}, std::string("\x01\x00", 2)), "x.npy")(0, 0) == 1);
  }
  SECTION("1-D is one row; 3-D and 4-D need a selection, negative indices count from the end") {
    std::string data;
    for (int k = 0; k < 24; ++k) data += raw_bytes(double_bits(k), 8);
    CHECK(parse_npy(npy_bytes("<f8", false, {4}, data.substr(0, 32)), "v.npy").rows() == 1);
    const std::string a3 = npy_bytes("<f8", false, {2, 3, 4}, data);
    CHECK_THAT(error_of([&] { parse_npy(a3, "a.npy"); }),
               Catch::Contains("shape (2, 3, 4)") && Catch::Contains("a.npy[i]"));
    const Matrix<Rational> m = parse_npy(a3, "a.npy", split_selection("a.npy[1]").second);
    CHECK(m.rows() == 3);
    CHECK(m(0, 0) == 12);
    CHECK(parse_npy(a3, "a.npy", split_selection("a.npy[-1]").second)(2, 3) == 23);
    CHECK_THAT(error_of([&] { parse_npy(a3, "a.npy", split_selection("a.npy[2]").second); }),
               Catch::Contains("index 2 is out of range"));
    const std::string a4 = npy_bytes("<f8", true, {2, 3, 2, 2}, data);  // Fortran: (b, h) index fastest
    CHECK_THAT(error_of([&] { parse_npy(a4, "w.npy"); }), Catch::Contains("w.npy[i,j]") && Catch::Contains("[b,h]"));
    const Matrix<Rational> f = parse_npy(a4, "w.npy", split_selection("w.npy[1,2]").second);
    CHECK(f(0, 0) == 1 + 2 * 2);  // offset b + 2 h
    CHECK(f(1, 0) == 5 + 6);      // + 6 per row
    CHECK(f(0, 1) == 5 + 12);     // + 12 per column
  }
  SECTION("float32 and float16 are the dyadic rationals they store") {
    const float third = 1.0f / 3;
    const Matrix<Rational> m = parse_npy(npy_bytes("<f4", false, {1, 1}, raw_bytes(float_bits(third), 4)), "x.npy");
    CHECK(m(0, 0) == exact(static_cast<double>(third)));
    const std::uint16_t half_third = 0x3555;  // 0.333251953125
    CHECK(parse_npy(npy_bytes("<f2", false, {1, 1}, raw_bytes(half_third, 2)), "x.npy")(0, 0) ==
          Rational(1365, 4096));
    CHECK(parse_npy(npy_bytes("<f2", false, {1, 1}, raw_bytes(0x0001, 2)), "x.npy")(0, 0) ==
          half_value(0x0001));  // the smallest subnormal, 2^-24
  }
  SECTION("defects are input_errors that name them") {
    const std::string good = npy_bytes("<f8", false, {1, 2}, raw_bytes(double_bits(1), 8) + raw_bytes(double_bits(2), 8));
    CHECK_THAT(error_of([&] { parse_npy(good.substr(0, good.size() - 3), "x.npy"); }),
               Catch::Contains("needs 16 bytes of data, the file has 13 (truncated?)"));
    CHECK_THAT(error_of([&] { parse_npy(good + "x", "x.npy"); }), Catch::Contains("the file has 17"));
    CHECK_THAT(error_of([&] { parse_npy(good.substr(0, 9), "x.npy"); }), Catch::Contains("truncated .npy header"));
    CHECK_THAT(error_of([&] { parse_npy(npy_bytes("<c16", false, {1, 1}, std::string(16, '\0')), "x.npy"); }),
               Catch::Contains("complex"));
    CHECK_THAT(error_of([&] { parse_npy(npy_bytes("|O", false, {1, 1}, std::string(8, '\0')), "x.npy"); }),
               Catch::Contains("'|O'"));
    CHECK_THAT(error_of([&] { parse_npy(npy_bytes("<f16", false, {1, 1}, std::string(16, '\0')), "x.npy"); }),
               Catch::Contains("long double"));
    CHECK_THAT(error_of([&] { parse_npy(npy_bytes("<f8", false, {1, 0}, ""), "x.npy"); }), Catch::Contains("empty"));
    CHECK_THAT(error_of([&] { parse_npy(npy_bytes("<f8", false, {}, raw_bytes(0, 8)), "x.npy"); }),
               Catch::Contains("a scalar"));
    const std::string nan = npy_bytes("<f8", false, {1, 2}, raw_bytes(double_bits(1), 8) + raw_bytes(double_bits(NAN), 8));
    CHECK_THAT(error_of([&] { parse_npy(nan, "x.npy"); }), Catch::Contains("x.npy[0, 1] (0-based) is nan"));
    std::string bad_version = good;
    bad_version[6] = 9;
    CHECK_THAT(error_of([&] { parse_npy(bad_version, "x.npy"); }), Catch::Contains("version 9"));
    std::string bad_dict = good;
    bad_dict.replace(bad_dict.find("'shape'"), 7, "'shope'");
    CHECK_THAT(error_of([&] { parse_npy(bad_dict, "x.npy"); }), Catch::Contains("unknown key 'shope'"));
    CHECK_THAT(error_of([&] { parse_npy(good, "x.npy", split_selection("x.npy[0]").second); }),
               Catch::Contains("already a matrix"));
    CHECK_THAT(error_of([&] { split_selection("x.npy[a]"); }), Catch::Contains("'a' is not an index"));
    CHECK_THAT(error_of([&] { split_selection("x.npy[1,,2]"); }), Catch::Contains("an empty index"));
    ParseLimits limits;
    limits.max_columns = 1;
    CHECK_THAT(error_of([&] { parse_npy(good, "x.npy", {}, limits); }), Catch::Contains("2 columns, over the limit of 1"));
  }
}

TEST_CASE("attnrank::parse_npy properties") {
  rc::prop("a float64 array in either order and byte order reads back exactly", [] {
    const auto rows = *rc::gen::inRange<std::size_t>(1, 6), cols = *rc::gen::inRange<std::size_t>(1, 6);
    const bool fortran = *rc::gen::arbitrary<bool>(), big = *rc::gen::arbitrary<bool>();
    const std::vector<double> values = *rc::gen::container<std::vector<double>>(rows * cols, gen_nasty_double());
    std::string data;
    for (std::size_t k = 0; k < rows * cols; ++k) data += raw_bytes(double_bits(values[k]), 8, big);
    const Matrix<Rational> m = parse_npy(npy_bytes(big ? ">f8" : "<f8", fortran, {rows, cols}, data), "p.npy");
    for (std::size_t i = 0; i < rows; ++i)
      for (std::size_t j = 0; j < cols; ++j)
        RC_ASSERT(m(static_cast<long>(i), static_cast<long>(j)) == exact(values[fortran ? j * rows + i : i * cols + j]));
  });
  rc::prop("every finite float16 bit pattern reads as its exact value", [] {
    std::uint16_t h = *rc::gen::arbitrary<std::uint16_t>();
    if (((h >> 10) & 0x1f) == 0x1f) h &= 0x83ff;  // inf and NaN exponents mapped into range
    RC_ASSERT(parse_npy(npy_bytes("<f2", false, {1, 1}, raw_bytes(h, 2)), "h.npy")(0, 0) == half_value(h));
  });
  rc::prop("a bfloat16 is the float32 with the same top half", [] {
    const float f = *rc::gen::map(rc::gen::arbitrary<std::uint16_t>(), [](std::uint16_t u) {
      float x;
      const std::uint32_t bits = std::uint32_t{u} << 16;
      std::memcpy(&x, &bits, 4);
      return std::isfinite(x) ? x : 1.0f;
    });
    const std::uint16_t top = static_cast<std::uint16_t>(float_bits(f) >> 16);
    const std::string file = safetensors_bytes({{"t", "BF16", {1, 1}, raw_bytes(top, 2)}});
    RC_ASSERT(parse_safetensors(file, "m.safetensors", "t")(0, 0) == exact(static_cast<double>(f)));
  });
}

TEST_CASE("attnrank::fp8_value") {
  SECTION("every E5M2 code is the float16 with the same top byte") {
    for (unsigned c = 0; c < 256; ++c) {
      const double f = fp8_value(c, ElementType::Kind::fp8_e5m2);
      if (((c >> 2) & 0x1f) == 0x1f) {  // the top binade: infinities and NaN, as in float16
        CHECK((c & 3 ? std::isnan(f) : std::isinf(f)));
        continue;
      }
      CHECK(exact(f) == half_value(static_cast<std::uint16_t>(c << 8)));
    }
  }
  SECTION("E4M3 (float8_e4m3fn): bias 7, no infinities, NaN only at S.1111.111") {
    const auto v = [](unsigned c) { return fp8_value(c, ElementType::Kind::fp8_e4m3); };
    CHECK(v(0x38) == 1.0);
    CHECK(v(0xB8) == -1.0);
    CHECK(v(0x7E) == 448.0);   // the largest finite value
    CHECK(v(0xFE) == -448.0);
    CHECK(v(0x01) == 0x1p-9);  // the smallest subnormal
    CHECK(v(0x07) == 7 * 0x1p-9);
    CHECK(v(0x08) == 0x1p-6);  // the smallest normal
    CHECK(v(0x78) == 256.0);   // exponent 15 is an ordinary binade
    CHECK(std::isnan(v(0x7F)));
    CHECK(std::isnan(v(0xFF)));
    CHECK(std::signbit(v(0x80)));
    // Increasing over the positive codes: each a distinct, exactly spaced value.
    for (unsigned c = 1; c < 0x7F; ++c) CHECK(v(c) > v(c - 1));
  }
  SECTION("safetensors F8_E4M3 and F8_E5M2 tensors, and the format names") {
    const std::string file = safetensors_bytes({{"a", "F8_E4M3", {1, 2}, std::string("\x7e\x01", 2)},
                                                {"b", "F8_E5M2", {1, 1}, std::string("\x3c", 1)}});
    const Matrix<Rational> a = parse_safetensors(file, "m.safetensors", "a");
    CHECK(a(0, 0) == 448);
    CHECK(a(0, 1) == exact(0x1p-9));
    CHECK(parse_safetensors(file, "m.safetensors", "b")(0, 0) == 1);
    CHECK(fp8_element_type("float8_e4m3fn").kind == ElementType::Kind::fp8_e4m3);
    CHECK(fp8_element_type("F8_E5M2").kind == ElementType::Kind::fp8_e5m2);
    CHECK_THAT(error_of([] { fp8_element_type("e3m4"); }), Catch::Contains("'e3m4' is not e4m3"));
  }
}

TEST_CASE("attnrank::parse_safetensors") {
  std::string f32, i64;
  for (float v : {0.5f, 1.5f, -2.0f, 0.1f}) f32 += raw_bytes(float_bits(v), 4);
  for (std::int64_t v : {7, -8, 9, 10, 11, 12}) i64 += raw_bytes(static_cast<std::uint64_t>(v), 8);
  const std::string file = safetensors_bytes({{"layer.w", "F32", {2, 2}, f32}, {"idx", "I64", {3, 1, 2}, i64}});
  SECTION("tensors by name, larger ones by selection") {
    const Matrix<Rational> w = parse_safetensors(file, "m.safetensors", "layer.w");
    CHECK(w(1, 1) == exact(static_cast<double>(0.1f)));
    CHECK(parse_safetensors(file, "m.safetensors", "idx", split_selection("idx[2]").second)(0, 1) == 12);
    const auto index = safetensors_index(file, "m.safetensors");
    REQUIRE(index.size() == 2);
    CHECK(index[0].name == "layer.w");  // file order
  }
  SECTION("a missing name lists the tensors; defects are named") {
    CHECK_THAT(error_of([&] { parse_safetensors(file, "m.safetensors", "nope"); }),
               Catch::Contains("no tensor 'nope'") && Catch::Contains("layer.w (2, 2)") && Catch::Contains("idx (3, 1, 2)"));
    CHECK_THAT(error_of([&] { parse_safetensors(file, "m.safetensors", "idx"); }), Catch::Contains("m.safetensors:idx[i]"));
    CHECK_THAT(error_of([&] { parse_safetensors(file.substr(0, file.size() - 1), "m.safetensors", "idx"); }),
               Catch::Contains("lie outside"));
    CHECK_THAT(error_of([&] { parse_safetensors("short", "m.safetensors", "x"); }), Catch::Contains("not a safetensors file"));
    CHECK_THAT(error_of([&] { parse_safetensors(raw_bytes(3, 8) + "{x}", "m.safetensors", "x"); }),
               Catch::Contains("not valid JSON"));
    CHECK_THAT(error_of([&] { parse_safetensors(safetensors_bytes({{"c", "C64", {1}, std::string(8, '\0')}}), "m.safetensors", "c"); }),
               Catch::Contains("'C64'"));
    CHECK_THAT(error_of([&] { parse_safetensors(safetensors_bytes({{"w", "F32", {2, 2}, f32.substr(4)}}), "m.safetensors", "w"); }),
               Catch::Contains("needs 16 bytes"));
  }
}

TEST_CASE("attnrank::read_matrix reads every format by name") {
  const std::string dir = scratch_dir();
  std::filesystem::create_directories(dir);
  const auto write = [&](const std::string& name, const std::string& bytes) {
    std::ofstream(dir + "/" + name, std::ios::binary) << bytes;
    return dir + "/" + name;
  };
  std::string data;
  for (double d : {1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0}) data += raw_bytes(double_bits(d), 8);
  const std::string npy = write("a.npy", npy_bytes("<f8", false, {2, 2, 2}, data));
  CHECK(read_matrix(npy + "[1]")(0, 0) == 5);
  CHECK_THAT(error_of([&] { read_matrix(npy); }), Catch::Contains("a.npy[i]"));
  const std::string renamed = write("a.dat", npy_bytes("<f8", false, {2, 2}, data.substr(0, 32)));
  CHECK(read_matrix(renamed)(1, 1) == 4);  // an .npy is known by its contents
  const std::string st = write("m.safetensors", safetensors_bytes({{"w.x", "F64", {2, 2}, data.substr(32)}}));
  CHECK(read_matrix(st + ":w.x")(1, 1) == 8);
  CHECK_THAT(error_of([&] { read_matrix(st); }), Catch::Contains("no tensor named") && Catch::Contains("w.x"));
  CHECK_THAT(error_of([&] { read_matrix(write("b.csv", "1,2\n") + "[0]"); }), Catch::Contains("this is text"));
  CHECK_THAT(error_of([&] { read_matrix(write("bin.csv", std::string("\x01\x00\x02", 3))); }),
             Catch::Contains("binary data, not text"));
}

TEST_CASE("attnrank::read_double_tensor") {
  const std::string dir = scratch_dir();
  const auto write = [&](const std::string& name, const std::string& bytes) {
    std::ofstream(dir + "/" + name, std::ios::binary) << bytes;
    return dir + "/" + name;
  };
  SECTION("a (B, H, N, d) float32 array in C order, and the same in Fortran order, give the same matrices") {
    std::string c_data, f_data;
    const auto value = [](std::size_t b, std::size_t h, std::size_t i, std::size_t j) {
      return static_cast<float>(1000 * b + 100 * h + 10 * i + j) + 0.1f;
    };
    for (std::size_t b = 0; b < 2; ++b)
      for (std::size_t h = 0; h < 3; ++h)
        for (std::size_t i = 0; i < 4; ++i)
          for (std::size_t j = 0; j < 2; ++j) c_data += raw_bytes(float_bits(value(b, h, i, j)), 4);
    for (std::size_t j = 0; j < 2; ++j)
      for (std::size_t i = 0; i < 4; ++i)
        for (std::size_t h = 0; h < 3; ++h)
          for (std::size_t b = 0; b < 2; ++b) f_data += raw_bytes(float_bits(value(b, h, i, j)), 4);
    for (const std::string& path : {write("c.npy", npy_bytes("<f4", false, {2, 3, 4, 2}, c_data)),
                                    write("f.npy", npy_bytes("<f4", true, {2, 3, 4, 2}, f_data))}) {
      const DoubleTensor t = read_double_tensor(path);
      CHECK(t.shape == std::vector<std::size_t>{2, 3, 4, 2});
      CHECK(t.dtype == "float32");  // NumPy's name, whatever the file spells ("<f4")
      REQUIRE(t.matrices.size() == 6);
      CHECK(t.leading_index(4) == std::vector<std::size_t>{1, 1});
      CHECK(t.matrices[4](3, 1) == static_cast<double>(value(1, 1, 3, 1)));  // the float exactly
      CHECK(t.matrices[5](0, 0) == static_cast<double>(value(1, 2, 0, 0)));
    }
  }
  SECTION("read_packed_tensor: a (total, H, d) array head by head, C and Fortran order; NaN named by head") {
    std::string c_data, f_data;
    const auto value = [](std::size_t t, std::size_t h, std::size_t j) {
      return static_cast<float>(100 * t + 10 * h + j) + 0.5f;
    };
    for (std::size_t t = 0; t < 5; ++t)
      for (std::size_t h = 0; h < 3; ++h)
        for (std::size_t j = 0; j < 2; ++j) c_data += raw_bytes(float_bits(value(t, h, j)), 4);
    for (std::size_t j = 0; j < 2; ++j)
      for (std::size_t h = 0; h < 3; ++h)
        for (std::size_t t = 0; t < 5; ++t) f_data += raw_bytes(float_bits(value(t, h, j)), 4);
    for (const std::string& path : {write("pc.npy", npy_bytes("<f4", false, {5, 3, 2}, c_data)),
                                    write("pf.npy", npy_bytes("<f4", true, {5, 3, 2}, f_data))}) {
      const DoubleTensor t = read_packed_tensor(path);
      CHECK(t.shape == std::vector<std::size_t>{5, 3, 2});  // the file's
      CHECK(t.heads_first);
      REQUIRE(t.matrices.size() == 3);
      for (std::size_t h = 0; h < 3; ++h) {
        REQUIRE(t.matrices[h].rows() == 5);
        for (std::size_t r = 0; r < 5; ++r)
          for (std::size_t j = 0; j < 2; ++j)
            CHECK(t.matrices[h](static_cast<Eigen::Index>(r), static_cast<Eigen::Index>(j)) ==
                  static_cast<double>(value(r, h, j)));
      }
      const DoubleTensor tokens = read_double_tensor(path);  // the same values token by token
      CHECK(!tokens.heads_first);
      CHECK(tokens.matrices[4](2, 1) == t.matrices[2](4, 1));
    }
    std::string nan_data = c_data;
    nan_data.replace((4 * 6 + 1 * 2 + 1) * 4, 4, raw_bytes(float_bits(std::numeric_limits<float>::quiet_NaN()), 4));
    const std::string nan_path = write("pn.npy", npy_bytes("<f4", false, {5, 3, 2}, nan_data));
    CHECK_THAT(attnrank::test::input_error_message([&] { (void)read_packed_tensor(nan_path); }),
               Catch::Contains("[:, 1, :] (head 1, a row per packed token)"));
    CHECK(std::isnan(read_packed_tensor(nan_path, {}, NonFiniteElements::keep).matrices[1](4, 1)));
    CHECK(read_packed_tensor(write("p2.npy", npy_bytes("<f4", false, {3, 2}, c_data.substr(0, 24)))).matrices.size() == 1);
  }
  SECTION("safetensors tensors, half precision, integers up to 2^53") {
    const std::string half = raw_bytes(0x3c00, 2) + raw_bytes(0x0001, 2);  // 1 and the smallest subnormal half
    const std::string st = write("h.safetensors", safetensors_bytes({{"o", "F16", {1, 1, 2}, half},
                                                                    {"big", "I64", {1, 1}, raw_bytes((std::uint64_t{1} << 53) + 1, 8)}}));
    const DoubleTensor t = read_double_tensor(st + ":o");
    CHECK(t.matrices.at(0)(0, 1) == std::ldexp(1.0, -24));
    CHECK_THAT(error_of([&] { read_double_tensor(st + ":big"); }), Catch::Contains("not exactly a double"));
    CHECK_THAT(error_of([&] { read_double_tensor(st + ":nope"); }), Catch::Contains("o (1, 1, 2)"));
  }
  SECTION("text holds one matrix, and every entry must be a double") {
    CHECK(read_double_tensor(write("a.csv", "0.5,1\n2,3\n")).matrices.at(0)(0, 0) == 0.5);
    CHECK_THAT(error_of([&] { read_double_tensor(write("b.csv", "0.1,1\n")); }),
               Catch::Contains("[0, 0] (0-based)") && Catch::Contains("not exactly a double"));
  }
  SECTION("too few or too many dimensions, NaN") {
    CHECK_THAT(error_of([&] { read_double_tensor(write("v.npy", npy_bytes("<f8", false, {2}, std::string(16, '\0')))); }),
               Catch::Contains("2 to 4"));
    CHECK_THAT(error_of([&] { read_double_tensor(write("n.npy", npy_bytes("<f8", false, {1, 1}, raw_bytes(0x7ff8000000000000, 8)))); }),
               Catch::Contains("nan"));
  }
}

TEST_CASE("attnrank::MatrixStackFile", "[property]") {
  // Whatever the source, the matrices read one at a time are read_matrix_stack's,
  // in the same order, and every problem is worded as read_matrix_stack words it.
  const std::string dir = scratch_dir();
  const auto write = [&](const std::string& name, const std::string& bytes) {
    std::ofstream(dir + "/" + name, std::ios::binary) << bytes;
    return dir + "/" + name;
  };
  rc::prop("mapped .npy and safetensors stacks, C and Fortran order, match read_matrix_stack", [&] {
    const auto lead = *rc::gen::container<std::vector<std::size_t>>(
        *rc::gen::inRange<std::size_t>(0, 3), rc::gen::inRange<std::size_t>(1, 4));
    const std::size_t n = *rc::gen::inRange<std::size_t>(1, 6), m = *rc::gen::inRange<std::size_t>(1, 6);
    std::vector<std::size_t> shape = lead;
    shape.push_back(n);
    shape.push_back(m);
    std::size_t cells = 1;
    for (std::size_t d : shape) cells *= d;
    std::vector<float> values;
    for (std::size_t k = 0; k < cells; ++k) values.push_back(static_cast<float>(*gen_nasty_double()));
    std::string c_data;
    for (float v : values) c_data += raw_bytes(float_bits(v), 4);
    // Fortran order: the same array with its axes' order reversed in memory.
    std::string f_data(c_data.size(), '\0');
    for (std::size_t k = 0; k < cells; ++k) {
      std::size_t rest = k, f = 0, step = 1;
      std::vector<std::size_t> idx(shape.size());
      for (std::size_t a = shape.size(); a-- > 0;) {
        idx[a] = rest % shape[a];
        rest /= shape[a];
      }
      for (std::size_t a = 0; a < shape.size(); ++a) {
        f += idx[a] * step;
        step *= shape[a];
      }
      std::memcpy(&f_data[4 * f], &c_data[4 * k], 4);
    }
    const bool finite = std::all_of(values.begin(), values.end(), [](float v) { return std::isfinite(v); });
    const std::string c = write("stack_c.npy", npy_bytes("<f4", false, shape, c_data));
    const std::string f = write("stack_f.npy", npy_bytes("<f4", true, shape, f_data));
    const std::string st = write("stack.safetensors", safetensors_bytes({{"p", "F32", shape, c_data}}));
    for (const std::string& argument : {c, f, st + ":p"}) {
      const std::string whole = error_of([&] { (void)read_matrix_stack(argument); });
      std::unique_ptr<MatrixStackFile> opened;
      const std::string on_open = error_of([&] { opened = std::make_unique<MatrixStackFile>(argument); });
      if (!opened) {  // read whole (Fortran order): its problems are found on opening, worded the same
        RC_ASSERT(argument == f);
        RC_ASSERT(on_open == whole);
        continue;
      }
      const MatrixStackFile& file = *opened;
      RC_ASSERT(file.mapped() == (argument != f));  // Fortran order is read whole
      RC_ASSERT(file.shape() == shape);
      if (finite) {
        RC_ASSERT(whole.empty());
        const DoubleTensor t = read_matrix_stack(argument);
        RC_ASSERT(file.size() == t.matrices.size());
        for (std::size_t k = t.matrices.size(); k-- > 0;) {  // any order
          RC_ASSERT(file.leading_index(k) == t.leading_index(k));
          RC_ASSERT(file.matrix(k) == t.matrices[k]);
        }
      } else {  // the first non-finite matrix, read alone, says what the whole reader says
        RC_ASSERT(!whole.empty());
        std::string first;
        for (std::size_t k = 0; k < file.size() && first.empty(); ++k) first = error_of([&] { (void)file.matrix(k); });
        if (file.mapped()) RC_ASSERT(first == whole);
      }
    }
  });
  SECTION("a missing tensor, a text file, a bad shape and the size limit, in read_matrix_stack's words") {
    const std::string st = write("one.safetensors", safetensors_bytes({{"p", "F64", {2, 2}, std::string(32, '\0')}}));
    CHECK(error_of([&] { const MatrixStackFile file{st + ":q"}; }) == error_of([&] { (void)read_matrix_stack(st + ":q"); }));
    const std::string text = write("one.csv", "0.5,0.5\n0.25,0.75\n");
    const MatrixStackFile t(text);
    CHECK_FALSE(t.mapped());
    CHECK(t.matrix(0) == read_matrix_stack(text).matrices[0]);
    const std::string flat = write("flat.npy", npy_bytes("<f8", false, {4}, std::string(32, '\0')));
    CHECK(error_of([&] { const MatrixStackFile file{flat}; }) == error_of([&] { (void)read_matrix_stack(flat); }));
  }
  SECTION("a mapped stack is limited matrix by matrix, not as a whole: it is never held") {
    // 300 float32 matrices of 1024 x 1024 (1.26 GB, sparse: no disk used), over the
    // whole-file and whole-array caps, read one matrix at a time.
    const std::string path = dir + "/sparse-stack.npy";
    {
      std::ofstream(path, std::ios::binary) << npy_bytes("<f4", false, {300, 1024, 1024}, "");
    }
    const std::uintmax_t header = std::filesystem::file_size(path);
    std::filesystem::resize_file(path, header + std::uintmax_t{300} * 1024 * 1024 * 4);
    CHECK_THAT(error_of([&] { (void)read_matrix_stack(path); }), Catch::Contains("over the limit of"));
    const MatrixStackFile file(path);
    REQUIRE(file.mapped());
    CHECK(file.size() == 300);
    CHECK(file.matrix(299) == Eigen::MatrixXd::Zero(1024, 1024));
    CHECK(file.leading_index(299) == std::vector<std::size_t>{299});
    ParseLimits small;  // a matrix over the per-matrix caps is named when it is read
    small.max_cells = 1000;
    const MatrixStackFile capped(path, small);
    CHECK_THAT(error_of([&] { (void)capped.matrix(3); }), Catch::Contains("sparse-stack.npy[3]"));
    std::filesystem::remove(path);
  }
}

TEST_CASE("attnrank::read_torch_attention") {
  const std::string dir = scratch_dir();
  std::filesystem::create_directories(dir);
  // embed_dim 2: in_proj_weight 6 x 2 holding 0..11, out_proj.weight 2 x 2 holding 20..23.
  std::string in, out, zero_bias, bias;
  for (int k = 0; k < 12; ++k) in += raw_bytes(float_bits(static_cast<float>(k)), 4);
  for (int k = 20; k < 24; ++k) out += raw_bytes(float_bits(static_cast<float>(k)), 4);
  for (int k = 0; k < 6; ++k) zero_bias += raw_bytes(0, 4);
  bias = zero_bias;
  bias[0] = 1;
  const auto save = [&](const std::string& name, const std::string& b) {
    std::ofstream(dir + "/" + name, std::ios::binary)
        << safetensors_bytes({{"attn.in_proj_weight", "F32", {6, 2}, in}, {"attn.in_proj_bias", "F32", {6}, b},
                              {"attn.out_proj.weight", "F32", {2, 2}, out}});
    return dir + "/" + name;
  };
  const AttentionWeights w = read_torch_attention(save("mha.safetensors", zero_bias), "attn.");
  // W_q = rows 0-1 of in_proj_weight = [[0, 1], [2, 3]]; attnrank's W^Q is its transpose.
  CHECK(w.wq(0, 1) == 2);
  CHECK(w.wq(1, 0) == 1);
  CHECK(w.wk(0, 0) == 4);
  CHECK(w.wv(1, 1) == 11);
  CHECK(w.wo(0, 1) == 22);
  CHECK_THAT(error_of([&] { read_torch_attention(save("biased.safetensors", bias), "attn."); }),
             Catch::Contains("in_proj_bias is not zero") && Catch::Contains("bias=False"));
  CHECK_THAT(error_of([&] { read_torch_attention(dir + "/mha.safetensors", ""); }),
             Catch::Contains("no in_proj_weight") && Catch::Contains("attn.in_proj_weight"));
}
