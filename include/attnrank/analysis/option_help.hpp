#pragma once
// What each question and each of its options means, written once, in the
// question's own words: the command line's --help and the Python docstrings
// both print these texts, so that `attnrank reach --help` and
// `help(attnrank.reach)` say the same thing about every option.
//
// Guarantee: every option a question's analysis reads has one text here, and a
// default a text states is the library's constant (default_time_limit,
// default_fallback_bits, ...), printed from it. Option names are the Python
// parameters' (d_k, time_limit, window_size); the command line spells them its
// own way (--dk, --time-limit, --window). No text names a flag: an adapter adds
// what is its own (file formats, which flag excludes which).

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace attnrank {

struct OptionHelp {
  std::string name;  ///< the option's name, as Python spells it
  std::string text;  ///< what it asks for, its range and its default
};

struct QuestionHelp {
  std::string name;     ///< "reach", "check_certificate", "width", "rank", "det", "svd", "layer", "scan", "check_kernel"
  std::string title;    ///< one line: the question
  std::string details;  ///< what the result holds and what it proves
  std::vector<OptionHelp> options;
};

/// Every question's help, in the order above.
std::span<const QuestionHelp> question_helps();

/// The help of `question`; std::invalid_argument for a name not in question_helps()
/// (a programming error: the adapters ask only for questions that exist).
const QuestionHelp& question_help(std::string_view question);

/// The text of `option` of `question`; std::invalid_argument when there is none.
const std::string& option_help(std::string_view question, std::string_view option);

}  // namespace attnrank
