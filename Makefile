# Quick start: `make demo` (build, compile mlp-b2-n3, run it on the simulator) and `make test`.
# Each installs what it needs first (scripts/bootstrap.sh --demo / --test) and says what.
BUILD ?= build
TESSERA := $(BUILD)/tools/tessera

.PHONY: all bootstrap bootstrap-demo build build-tests demo test lint test-onnx test-faults test-sanitize fuzz bench bench-exchange bench-ab bench-simulator bench-planning bench-regret bench-fidelity bench-onnx bench-cnn bench-scale calibrate tune clean

all: build

# The packages to build and run tessera (make demo), and those plus the tests' (make test, lint).
bootstrap-demo:
	@scripts/bootstrap.sh --demo

bootstrap:
	@scripts/bootstrap.sh --test

# Ninja is looked up when this runs, after the bootstrap may have installed it. The tests are
# built when Catch2 is there (make test's packages); `make test` turns them on for a build
# folder `make demo` configured first.
CONFIGURE = cmake -S . -B $(BUILD) $$(command -v ninja >/dev/null && echo -G Ninja) -DCMAKE_BUILD_TYPE=Release

build: bootstrap-demo
	@[ -f $(BUILD)/CMakeCache.txt ] || $(CONFIGURE)
	@cmake --build $(BUILD) --parallel $$(nproc)

demo: build
	@$(TESSERA) demo --model mlp-b2-n3 --pipeline default --target t1472 --output $(BUILD)/artifacts/mlp-b2-n3/model.tpkg

build-tests: bootstrap
	@$(CONFIGURE) -DTESSERA_TESTS=ON >/dev/null
	cmake --build $(BUILD) --parallel $$(nproc)

test: build-tests
	ctest --test-dir $(BUILD) --output-on-failure -j2

# The house style: every C++ file as .clang-format lays it out (`clang-format -i FILE` fixes one).
lint: bootstrap
	@git ls-files '*.cpp' '*.hpp' | xargs clang-format --dry-run --Werror && echo "lint: $$(git ls-files '*.cpp' '*.hpp' | wc -l) files as .clang-format lays them out"

# ONNX's backend conformance cases (libonnx-testdata, every node case) on the small target: per
# operator cases, passed, failed, unsupported (docs/onnx.md). Fails if a case fails.
test-onnx: build-tests
	/usr/bin/python3 scripts/onnx_conformance.py --tessera $(TESSERA) --pipeline configs/pipelines/small.yaml \
	  --target configs/targets/t16.yaml --work $(BUILD)/onnx-conformance

# The fault-injection campaign: FAULT_RUNS seeded random compiles and runs with faulty plugins,
# random kills, a full disk and forged packages, ending with a table of problems (all zero, or exit 1).
FAULT_RUNS ?= 1000
FAULT_SEED ?= 1
test-faults: build-tests
	$(BUILD)/tests/faults/fault-campaign --runs $(FAULT_RUNS) --seed $(FAULT_SEED)

# The whole suite under AddressSanitizer and UndefinedBehaviorSanitizer (plugins included: they
# are built with the same flags), in its own build folder; any report fails the test it is in.
SANITIZE_BUILD ?= build-asan
SANITIZE_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
SANITIZE_ENV := ASAN_OPTIONS=halt_on_error=1:abort_on_error=1:detect_leaks=1:strict_string_checks=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:abort_on_error=1
test-sanitize: bootstrap
	cmake -S . -B $(SANITIZE_BUILD) $$(command -v ninja >/dev/null && echo -G Ninja) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  $$(command -v ccache >/dev/null && echo -DCMAKE_CXX_COMPILER_LAUNCHER=ccache) \
	  -DCMAKE_CXX_FLAGS="$(SANITIZE_FLAGS)" -DCMAKE_EXE_LINKER_FLAGS="$(SANITIZE_FLAGS)" \
	  -DCMAKE_SHARED_LINKER_FLAGS="$(SANITIZE_FLAGS)" -DCMAKE_MODULE_LINKER_FLAGS="$(SANITIZE_FLAGS)"
	cmake --build $(SANITIZE_BUILD) --parallel $$(nproc)
	$(SANITIZE_ENV) ctest --test-dir $(SANITIZE_BUILD) --output-on-failure -j2 --timeout 900

# libFuzzer on the readers of untrusted files (clang: scripts/bootstrap-fuzz.sh), each for
# FUZZ_SECONDS. Seeds come from tests/fuzz/corpus/<target>/; new inputs go to
# $(FUZZ_BUILD)/corpus/<target>/ and a crash to $(FUZZ_BUILD)/crashes/ (add it to the seeds once fixed).
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := pipeline model phase_file package state onnx tensor_file
fuzz:
	@scripts/bootstrap-fuzz.sh
	cmake -S . -B $(FUZZ_BUILD) $$(command -v ninja >/dev/null && echo -G Ninja) -DCMAKE_CXX_COMPILER=clang++ \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSERA_FUZZ=ON
	cmake --build $(FUZZ_BUILD) --parallel $$(nproc)
	@mkdir -p $(FUZZ_BUILD)/crashes
	@for target in $(FUZZ_TARGETS); do \
	  mkdir -p $(FUZZ_BUILD)/corpus/$$target; \
	  echo "fuzz: $$target for $(FUZZ_SECONDS) s"; \
	  ASAN_OPTIONS=halt_on_error=1:detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:abort_on_error=1 \
	  $(FUZZ_BUILD)/tests/fuzz/fuzz_$$target -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 \
	    -print_final_stats=1 -artifact_prefix=$(FUZZ_BUILD)/crashes/$$target- \
	    $(FUZZ_BUILD)/corpus/$$target tests/fuzz/corpus/$$target || exit 1; \
	done

bench: build
	$(BUILD)/bench/bench-compile-run

bench-exchange: build
	$(BUILD)/bench/bench-exchange

# `tessera tune` on the default suite: the shipped planner's and schedulers' options
# (configs/tune/default.yaml) by successive halving, then the best against the default pipeline.
tune: build
	$(BUILD)/tools/tessera tune --base configs/pipelines/default.yaml --space configs/tune/default.yaml \
	  --suite configs/suites/default.yaml --jobs 2 --out $(BUILD)/tune-best.yaml --quiet

bench-ab: build
	$(BUILD)/bench/ab/bench-ab

# Each codelet's charge beside poplibs' estimate for the same operation and the two floors.
bench-fidelity: build
	$(BUILD)/bench/bench-fidelity

# `tessera run`'s wall time and peak RSS beside the package's device bytes and host tensor bytes.
bench-simulator: build
	$(BUILD)/bench/simulator/bench-simulator

# The calibrated cost model's tables, one per shipped target, regenerated from this build's
# simulator every time (configs/pipelines/calibrated.yaml reads $(CALIBRATION)/<target>.yaml).
CALIBRATION := $(BUILD)/calibration
calibrate: build
	@for target in configs/targets/*.yaml; do \
	  $(TESSERA) --log-level warn calibrate --target $$target -o $(CALIBRATION)/$$(basename $$target) || exit 1; \
	done

# Per suite model: simulated cycles against the roofline, both cost models' errors, compile time.
bench-planning: calibrate
	$(BUILD)/bench/planning/bench-planning

# The planner's pick beside every plan of its candidate space pinned, compiled and simulated.
bench-regret: build
	$(BUILD)/bench/planning/bench-planning --regret

# The generated ONNX encoders on t1472: compile time, cycles, peak tile bytes, errors against
# the float64 outputs and ONNX Runtime.
bench-onnx: build
	@scripts/bootstrap.sh python3-onnx
	bench/onnx/bench_onnx.sh $(TESSERA) $(CURDIR) $(BUILD)/bench-onnx

# CNNs (resnet18, resnet50, mobilenetv2 at 224x224) on t1472: compile and run wall and RSS, device
# cycles against the chip floor, and per conv layer its cycles against its floor.
bench-cnn: build
	@scripts/bootstrap.sh python3-onnx
	/usr/bin/python3 bench/cnn/bench_cnn.py $(TESSERA) $(CURDIR) $(BUILD)/bench-cnn

# Families of growing models (MLP width at batch 2 and 64, depth, batch; BERT-style layers, width,
# tokens; BERT-base layers as ONNX, which python3-onnx writes; CNN depth) on t1472: per step
# compile s and RSS, copies, run s and RSS against device + host bytes, device cycles; per family
# the growth of compile time with copies and the edge.
bench-scale: build
	@scripts/bootstrap.sh python3-onnx
	/usr/bin/python3 bench/scale/bench_scale.py $(TESSERA) $(CURDIR) $(BUILD)/bench-scale

clean:
	rm -rf $(BUILD)
