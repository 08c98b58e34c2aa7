// Docstrings from the library's help (python/docstrings.hpp).
#include "docstrings.hpp"

#include <attnrank/analysis/option_help.hpp>

#include <functional>
#include <map>

namespace attnrank::python {
namespace {

/// `text` broken into lines of at most 88 columns, each indented by `indent`.
std::string wrapped(const std::string& text, std::size_t indent) {
  std::string out, line;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(start, end - start);
    if (!line.empty() && indent + line.size() + 1 + word.size() > 88) {
      out += std::string(indent, ' ') + line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
    start = end + 1;
  }
  if (!line.empty()) out += std::string(indent, ' ') + line + "\n";
  return out;
}

/// A question's docstring, from the library's help (analysis/option_help.hpp), which
/// the command line's --help prints too: the title, what a result proves, and each
/// option's text under its name.
std::string docstring(std::string_view question) {
  const QuestionHelp& h = question_help(question);
  std::string s = h.title + ".\n\n" + wrapped(h.details, 0) + "\nParameters\n----------\n";
  for (const OptionHelp& o : h.options) s += o.name + "\n" + wrapped(o.text, 4);
  return s;
}

}  // namespace

const char* doc_of(std::string_view question) {
  static std::map<std::string, std::string, std::less<>> docs;
  auto it = docs.find(question);
  if (it == docs.end()) it = docs.emplace(std::string(question), docstring(question)).first;
  return it->second.c_str();
}

}  // namespace attnrank::python
