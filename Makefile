# Quick start: `make demo` (build, compile mlp-b2-n3, run it on the simulator) and `make test`.
BUILD ?= build
TESSERA := $(BUILD)/tools/tessera

.PHONY: all bootstrap build demo test bench bench-exchange bench-ab clean

all: build

bootstrap:
	@scripts/bootstrap.sh

build: bootstrap
	@# Ninja is looked up here, after the bootstrap may have installed it.
	@[ -f $(BUILD)/CMakeCache.txt ] || cmake -S . -B $(BUILD) $$(command -v ninja >/dev/null && echo -G Ninja) -DCMAKE_BUILD_TYPE=Release
	cmake --build $(BUILD) --parallel $$(nproc)

demo: build
	$(TESSERA) demo --model configs/models/mlp-b2-n3.yaml --pipeline configs/pipelines/default.yaml \
	  --target configs/targets/t1472.yaml --output $(BUILD)/artifacts/mlp-b2-n3/model.tpkg

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j2

bench: build
	$(BUILD)/bench/bench-compile-run

bench-exchange: build
	$(BUILD)/bench/bench-exchange

bench-ab: build
	$(BUILD)/bench/ab/bench-ab

clean:
	rm -rf $(BUILD)
