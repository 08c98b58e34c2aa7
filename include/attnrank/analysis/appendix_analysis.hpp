#pragma once
// The appendix question: Section 2.5.4 and Appendix A of the tutorial
// "Multi-Head Attention" (Hao Ma, haoma7.github.io), every number computed
// (tutorial/appendix.hpp) at a precision that certifies the decimals asked,
// with its two writers.
//
// Guarantee: every decimal the writers print is certified (an interval printed
// as the digits every point of it rounds to, or as its enclosure when they do
// not all agree); the JSON's certificates are the reachability engine's.

#include <attnrank/tutorial/appendix.hpp>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace attnrank {

/// Decimals per quantity: the tutorial's printed digits, or `digits` for all.
struct AppendixDigits {
  int sweep = 2, ab = 3, det = 1, threshold = 4, det_A1 = 4;
  AppendixDigits() = default;
  explicit AppendixDigits(int digits);  ///< digits < 0: the tutorial's
  int most() const;
};

struct AppendixQuestion {
  int digits = -1;  ///< decimals for every number; < 0: as the tutorial prints them
};

struct AppendixAnalysis {
  AppendixDigits digits;
  unsigned bits = 128;  ///< the working precision: far narrower intervals than the last digit asked
  TutorialAppendix appendix;
  std::vector<std::string> figures;  ///< the figure files the caller wrote of it (reported by both writers)
};

/// The appendix at max(128, bits_for_decimals(most digits)) bits.
AppendixAnalysis analyze_appendix(const AppendixQuestion& q);

/// The argument in the tutorial's order, one bracketed step per line group.
std::string to_text(const AppendixAnalysis& a);
/// The document of docs/schema/appendix.schema.json.
nlohmann::json to_json(const AppendixAnalysis& a);

}  // namespace attnrank
