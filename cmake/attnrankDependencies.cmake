# Finds attnrank's dependencies and defines imported targets for the C libraries
# that ship no CMake package (GMP, MPFR, MPFI). Used by the build and, installed,
# by attnrankConfig.cmake, so a downstream find_package(attnrank) sees the same.
include(CMakeFindDependencyMacro)
find_dependency(Eigen3 3.3 NO_MODULE)
find_dependency(Boost 1.74)
find_dependency(spectra 1.0 PATHS /usr/share/spectra/cmake)
find_dependency(Threads)
find_dependency(nlohmann_json 3)

foreach(lib gmp mpfr mpfi)
  if(NOT TARGET attnrank::${lib})
    string(TOUPPER ${lib} LIB)
    find_path(${LIB}_INCLUDE_DIR ${lib}.h)
    find_library(${LIB}_LIBRARY ${lib})
    if(NOT ${LIB}_INCLUDE_DIR OR NOT ${LIB}_LIBRARY)
      message(FATAL_ERROR "attnrank needs ${lib} (Debian: lib${lib}-dev); run scripts/install-deps")
    endif()
    add_library(attnrank::${lib} UNKNOWN IMPORTED)
    set_target_properties(attnrank::${lib} PROPERTIES
      IMPORTED_LOCATION "${${LIB}_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${${LIB}_INCLUDE_DIR}")
  endif()
endforeach()
