#pragma once
// The double infinity under the short name the library's units use. Defined once
// here, not in each unit: units compiled together (the unity build, CMakeLists.txt)
// must not each bring their own definition of the same name.

#include <limits>

namespace attnrank::detail {

inline constexpr double inf = std::numeric_limits<double>::infinity();

}  // namespace attnrank::detail
