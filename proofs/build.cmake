# Builds proofs/ with coqc and checks what they rest on:
#   cmake -DSOURCE_DIR=<attnrank> -DOUT=<build dir> -P proofs/build.cmake
# (what `make proofs` and the ctest test `proofs_test` run). Fails when a file
# does not compile, when any file contains Admitted, admit, Axiom, Parameter or
# Conjecture, or when a MathComp theorem depends on an axiom.
cmake_minimum_required(VERSION 3.21)
foreach(var SOURCE_DIR OUT)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "usage: cmake -DSOURCE_DIR=<attnrank> -DOUT=<dir> -P build.cmake")
  endif()
endforeach()
find_program(COQC coqc)
if(NOT COQC)
  message(FATAL_ERROR "coqc not found: run scripts/install-deps --proofs (Coq 8.16 + MathComp 1.15)")
endif()

# In dependency order.
set(files Ceiling Subadditivity ExactFloor Reachability DiagonalTarget SoftmaxInversion Winners ApproximateRank
          LogErrorBound MaskedFloor OrderBound Assumptions)

# No proof may be skipped.
foreach(f IN LISTS files)
  file(READ ${SOURCE_DIR}/proofs/${f}.v text)
  foreach(word Admitted admit Axiom Parameter Conjecture)
    string(REGEX MATCH "(^|[^A-Za-z_])${word}([^A-Za-z_]|$)" hit "${text}")
    if(hit)
      message(FATAL_ERROR "proofs/${f}.v contains '${word}': every theorem must be proven")
    endif()
  endforeach()
endforeach()

file(REMOVE_RECURSE ${OUT})
file(MAKE_DIRECTORY ${OUT})
foreach(f IN LISTS files)
  configure_file(${SOURCE_DIR}/proofs/${f}.v ${OUT}/${f}.v COPYONLY)
endforeach()
string(TIMESTAMP start "%s")
foreach(f IN LISTS files)
  execute_process(COMMAND ${COQC} -q -w -notation-overridden,-ambiguous-paths -Q . Attnrank ${f}.v
                  WORKING_DIRECTORY ${OUT} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "coqc proofs/${f}.v failed:\n${out}${err}")
  endif()
  if(f STREQUAL "Assumptions")
    set(assumptions "${out}")
  endif()
endforeach()
string(TIMESTAMP stop "%s")
math(EXPR seconds "${stop} - ${start}")

# Print Assumptions: the ten MathComp theorems are axiom-free; the four on
# Reals use only the standard library's axioms of the real numbers.
string(REGEX MATCHALL "Closed under the global context" closed "${assumptions}")
list(LENGTH closed closed_count)
if(NOT closed_count EQUAL 10)
  message(FATAL_ERROR "expected 10 axiom-free MathComp theorems, got ${closed_count}:\n${assumptions}")
endif()
string(REGEX MATCHALL "\n([A-Za-z_.]+)[ \n]+:" used "${assumptions}")
list(LENGTH used used_count)
if(used_count EQUAL 0)
  message(FATAL_ERROR "no axioms listed for the real-number theorems: the Print Assumptions output changed:\n${assumptions}")
endif()
foreach(line IN LISTS used)
  string(REGEX REPLACE "\n([A-Za-z_.]+)[ \n]+:" "\\1" name "${line}")
  if(NOT name MATCHES "^(ClassicalDedekindReals[.]sig_not_dec|ClassicalDedekindReals[.]sig_forall_dec|FunctionalExtensionality[.]functional_extensionality_dep|Classical_Prop[.]classic)$")
    message(FATAL_ERROR "a theorem rests on an unexpected axiom '${name}':\n${assumptions}")
  endif()
endforeach()
message(STATUS "proofs: ${closed_count} MathComp theorems axiom-free, 10 theorem families checked by coqc in ${seconds} s")
