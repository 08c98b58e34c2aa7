# The two set-up commands of the README, and a few helpers.
#   make demo   install dependencies, build the attnrank command only, run the worked example, the
#               appendix and reachability queries
#   make test   install dependencies (with Coq), build everything, run the test suite with the proofs,
#               all but the nightly-style mutation check (what .ci/run runs)
#   make install   the attnrank command, the library with its headers and the Python module into
#                  PREFIX (default /usr/local); builds them first, not the tests
#   make proofs check proofs/ with coqc alone
#   make mutation  the mutation check of the property suite (about 30 minutes)
#   make hardening the sanitizer suite, short fuzz runs and ThreadSanitizer (part of make test)
#   make fuzz FUZZ_SECONDS=600  each fuzz target for that long (docs/reliability.md)
BUILD ?= build
JOBS ?= $(shell nproc)
CLI = $(BUILD)/cli/attnrank
DATA = examples/data/worked-example

SAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
FUZZ_SECONDS ?= 60
SAN_CASES ?= 5

PREFIX ?= /usr/local

.PHONY: deps deps-cli cli install build demo test proofs mutation bench clean hardening sanitize fuzz-build fuzz tsan

deps:
	scripts/install-deps

deps-cli:
	scripts/install-deps --cli-only

# The command alone: what make demo runs (the tests take most of a full build).
cli: deps-cli
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release
	cmake --build $(BUILD) -j$(JOBS) --target attnrank_cli

# deps first: configuring again then finds pybind11 for the Python module.
build: deps cli
	cmake --build $(BUILD) -j$(JOBS)

# The command, the library and the Python module (not the tests), then installed.
install: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release
	cmake --build $(BUILD) -j$(JOBS) --target attnrank_installed
	cmake --install $(BUILD) --prefix $(PREFIX)

demo: cli
	$(CLI) example
	@echo
	@echo '--- the same layer from CSV files, double tier against certified digits ---'
	$(CLI) layer --x $(DATA)/x.csv --wq $(DATA)/wq.csv --wk $(DATA)/wk.csv --wv $(DATA)/wv.csv --wo $(DATA)/wo.csv --heads 2 --tier double --digits 17 --json | grep -A4 '"output"'
	$(CLI) layer --x $(DATA)/x.csv --wq $(DATA)/wq.csv --wk $(DATA)/wk.csv --wv $(DATA)/wv.csv --wo $(DATA)/wo.csv --heads 2 --tier interval --digits 17 --json | grep -A4 '"output"'
	@echo
	@echo '--- the tutorial target A (0.8 on the diagonal): exact rank and determinant ---'
	$(CLI) rank diag:3:0.8
	$(CLI) det diag:3:0.8
	$(CLI) det diag:3:0.8 --mode certified
	@echo
	@echo '--- Section 2.5.4 and Appendix A, every number certified; figures in $(BUILD)/figures ---'
	$(CLI) appendix --svg $(BUILD)/figures
	@echo
	@echo '--- can a head of width d_k produce a pattern? the tutorial target, then a CSV file ---'
	$(CLI) reach diag:3:0.8 --dk 1
	$(CLI) reach diag:3:0.8 --dk 2
	$(CLI) reach examples/data/previous-token.csv --dk 2 --svg $(BUILD)/figures/previous-token.svg
	@echo
	@echo '--- a decoder (causal) pattern: the masked question, floor floor(n/2) = 4 ---'
	$(CLI) reach examples/data/causal-8.csv --dk 4 | tail -1
	$(CLI) reach examples/data/causal-8.csv --mask causal --dk 3
	$(CLI) reach examples/data/causal-8.csv --mask causal --dk 4 --certificate $(BUILD)/causal-8.certificate.json
	$(CLI) reach examples/data/causal-8.csv --mask causal --check $(BUILD)/causal-8.certificate.json

# The suite includes the Coq proofs (label: proofs), so test installs Coq too. Its build treats
# a warning in our own sources as an error (ATTNRANK_WERROR; make demo's build does not). The
# public headers are compiled alone in the Clang ASan tree (fuzz-build), a third of GCC's time.
test: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DATTNRANK_WERROR=ON -DATTNRANK_HEADERS_ALONE=OFF
	cmake --build $(BUILD) -j$(JOBS)
	scripts/install-deps --test --proofs
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS) -LE mutation
	$(MAKE) hardening FUZZ_SECONDS=10

# Hardening (docs/reliability.md). One Clang tree with ASan + UBSan serves both
# the sanitizer suite and the fuzz targets; a small Clang tree runs TSan (at -O1
# it takes 40% less CPU to build than GCC's tree at -O1, a quarter less than at -O0).
hardening: sanitize fuzz tsan

fuzz-build: deps
	scripts/install-deps --hardening
	CXX=clang++-14 cmake -S . -B $(SAN_BUILD) -DCMAKE_BUILD_TYPE=Sanitize -DCMAKE_CXX_FLAGS_SANITIZE="-O0" \
	  -DATTNRANK_SANITIZE=address,undefined -DATTNRANK_BUILD_FUZZ=ON -DATTNRANK_BUILD_EXAMPLES=OFF \
	  -DATTNRANK_NATIVE=OFF -DATTNRANK_HEADERS_ALONE=ON
	cmake --build $(SAN_BUILD) -j$(JOBS)

# The unit, property and CLI suites (the CLI itself sanitized) and the corpus
# replays; properties at SAN_CASES cases each (default 5, to keep CI near 40
# minutes; the normal run has 100; make hardening SAN_CASES=100 for a long run), slow and proof
# tests left to make test.
sanitize: fuzz-build
	cd $(SAN_BUILD) && RC_PARAMS="max_success=$(SAN_CASES)" ctest --output-on-failure -j$(JOBS) -LE "mutation|slow|proofs|package|large"

# Each fuzz target for FUZZ_SECONDS (two at a time on two cores), from its seed
# corpus; reproducers of anything found land in $(SAN_BUILD)/fuzz-crashes.
fuzz: fuzz-build
	scripts/fuzz $(SAN_BUILD) $(FUZZ_SECONDS)

tsan: deps
	scripts/install-deps --hardening
	CXX=clang++-14 cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=Sanitize -DCMAKE_CXX_FLAGS_SANITIZE="-O1" -DATTNRANK_SANITIZE=thread -DATTNRANK_BUILD_EXAMPLES=OFF \
	  -DATTNRANK_NATIVE=OFF
	cmake --build $(TSAN_BUILD) -j$(JOBS) --target properties_threads_test
	cd $(TSAN_BUILD) && ctest --output-on-failure -R '^properties_threads_test$$'

# The mutation check (docs/testing.md): about 30 minutes, so not part of make test.
mutation: build
	cd $(BUILD) && ctest --output-on-failure -L mutation

proofs:
	scripts/install-deps --proofs
	cmake -DSOURCE_DIR=$(CURDIR) -DOUT=$(CURDIR)/$(BUILD)/proofs -P proofs/build.cmake

bench:
	scripts/install-deps --bench
	cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DATTNRANK_BUILD_BENCH=ON -DATTNRANK_BUILD_TESTS=OFF
	cmake --build build-bench -j$(JOBS) --target layer_bench rank_bench det_bench reach_bench kernel_bench attnrank_cli
	bench/compare-layer build-bench/bench/layer_bench
	bench/compare-rank build-bench/bench/rank_bench
	bench/compare-det build-bench/bench/det_bench build-bench/cli/attnrank
	bench/compare-reach build-bench/bench/reach_bench
	bench/compare-kernel build-bench
	bench/loaded-layer build-bench/bench/layer_bench

clean:
	rm -rf $(BUILD) build-bench $(SAN_BUILD) $(TSAN_BUILD)
