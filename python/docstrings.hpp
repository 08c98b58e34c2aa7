#pragma once
// Each question's docstring, from the library's help (analysis/option_help.hpp),
// which the command line's --help prints too: the title, what a result proves, and
// each option's text under its name, wrapped at 88 columns.
#include <string>
#include <string_view>

namespace attnrank::python {

/// docstring(question), kept for the life of the module (pybind11 keeps the pointer).
const char* doc_of(std::string_view question);

}  // namespace attnrank::python
