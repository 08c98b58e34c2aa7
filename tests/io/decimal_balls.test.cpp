// attnrank/io/parse.hpp parse_plain_decimal_balls: each decimal lies in its ball,
// the grammar is the exact reader's (same shape, same notes), and whatever the
// exact reader would refuse or treat specially goes back to it (nullopt).
#include "support.hpp"

#include <attnrank/io/parse.hpp>

#include <cstdio>
#include <sstream>

using namespace attnrank;

namespace {

/// A plain decimal cell of every kind: integers, points, exponents, signs, zeros,
/// 17 significant digits, tiny and huge magnitudes.
std::string gen_decimal() {
  const int kind = *rc::gen::inRange(0, 6);
  const auto mantissa = *rc::gen::inRange<long>(-999999999, 1000000000);
  char buf[64];
  switch (kind) {
    case 0: return std::to_string(mantissa);
    case 1: std::snprintf(buf, sizeof buf, "%.17g", static_cast<double>(mantissa) / 997.0); return buf;
    case 2: std::snprintf(buf, sizeof buf, "%lde%d", mantissa, *rc::gen::inRange(-300, 300)); return buf;
    case 3: return *rc::gen::element<std::string>("0", "-0", "0.000", "0e5", "+3", "-0.5", "1.", ".25");
    case 4: std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(mantissa) / 1000.0); return buf;
    default: return "0.1";
  }
}

}  // namespace

TEST_CASE("attnrank::parse_plain_decimal_balls", "[property]") {
  rc::prop("each decimal lies in its ball, with the exact reader's shape and notes", [] {
    const auto rows = *rc::gen::inRange(1, 6), cols = *rc::gen::inRange(1, 6);
    const char sep = *rc::gen::element(',', '\t', ' ', ';');
    std::ostringstream text;
    for (int i = 0; i < rows; ++i) {
      for (int j = 0; j < cols; ++j) {
        if (j) text << sep;
        text << gen_decimal();
      }
      text << "\n";
    }
    InputNotes exact_notes, ball_notes;
    const Matrix<Rational> Q = parse_matrix(text.str(), "t", {}, &exact_notes);
    const std::optional<BallMatrix> b = parse_plain_decimal_balls(text.str(), "t", {}, &ball_notes);
    RC_ASSERT(b.has_value());
    RC_ASSERT(b->mid.rows() == Q.rows());
    RC_ASSERT(b->mid.cols() == Q.cols());
    RC_ASSERT(ball_notes == exact_notes);
    for (Eigen::Index i = 0; i < Q.rows(); ++i)
      for (Eigen::Index j = 0; j < Q.cols(); ++j) {
        const Rational mid(b->mid(i, j)), rad(b->rad(i, j));
        RC_ASSERT(rad >= 0);
        RC_ASSERT(mid - rad <= Q(i, j));
        RC_ASSERT(Q(i, j) <= mid + rad);
        if (rad == 0) RC_ASSERT(mid == Q(i, j));
      }
  });
}

TEST_CASE("attnrank::parse_plain_decimal_balls leaves the rest to the exact reader", "[unit]") {
  for (const char* text : {"1/2,1\n1,1\n", "1e400,1\n1,1\n", "1e-400,1\n1,1\n", "nan,1\n1,1\n", "+-1,1\n1,1\n",
                           "1,2\n3\n", "0x10,1\n1,1\n", "", "1,,2\n", "1.5e,1\n1,1\n", "0,5;1\n1;1\n"}) {
    INFO(text);
    CHECK_FALSE(parse_plain_decimal_balls(text, "t"));
  }
  CHECK(parse_plain_decimal_balls("# a comment\n1,2\n3,4\n", "t"));
  CHECK(parse_plain_decimal_balls("a,b\n1,2\n3,4\n", "t"));  // a header, skipped as the exact reader does
}
