// The attnrank command (cli/run.hpp).
#include "run.hpp"

#include <iostream>

int main(int argc, char** argv) { return attnrank::cli::run(argc, argv, std::cout, std::cerr); }
