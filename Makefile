# The two set-up commands of the README, and a few helpers.
#   make demo   install dependencies, build, run the worked example, the appendix and reachability queries
#   make test   install dependencies (with Coq), build, run the test suite with the proofs, all but the
#               nightly-style mutation check (what .ci/run runs)
#   make proofs check proofs/ with coqc alone
#   make mutation  the mutation check of the property suite (about 15 minutes)
BUILD ?= build
JOBS ?= $(shell nproc)
CLI = $(BUILD)/cli/attnrank
DATA = examples/data/worked-example

.PHONY: deps build demo test proofs mutation bench clean

deps:
	scripts/install-deps

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release
	cmake --build $(BUILD) -j$(JOBS)

demo: build
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

# The suite includes the Coq proofs (label: proofs), so test installs Coq too.
test: build
	scripts/install-deps --proofs
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS) -LE mutation

# The mutation check (docs/testing.md): about 15 minutes, so not part of make test.
mutation: build
	cd $(BUILD) && ctest --output-on-failure -L mutation

proofs:
	scripts/install-deps --proofs
	cmake -DSOURCE_DIR=$(CURDIR) -DOUT=$(CURDIR)/$(BUILD)/proofs -P proofs/build.cmake

bench:
	scripts/install-deps --bench
	cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DATTNRANK_BUILD_BENCH=ON -DATTNRANK_BUILD_TESTS=OFF
	cmake --build build-bench -j$(JOBS) --target layer_bench rank_bench reach_bench
	bench/compare-layer build-bench/bench/layer_bench
	bench/compare-rank build-bench/bench/rank_bench
	bench/compare-reach build-bench/bench/reach_bench

clean:
	rm -rf $(BUILD) build-bench
