# Quick start: `make demo` (build, compile mlp-b2-n3, run it on the simulator) and `make test`.
BUILD ?= build
GENERATOR := $(shell command -v ninja >/dev/null 2>&1 && echo "-G Ninja")
TESSERA := $(BUILD)/tools/tessera

.PHONY: all bootstrap build demo test bench bench-exchange clean

all: build

bootstrap:
	@scripts/bootstrap.sh

build: bootstrap
	@[ -f $(BUILD)/CMakeCache.txt ] || cmake -S . -B $(BUILD) $(GENERATOR) -DCMAKE_BUILD_TYPE=Release
	cmake --build $(BUILD)

demo: build
	$(TESSERA) demo --model configs/models/mlp-b2-n3.yaml --pipeline configs/pipelines/default.yaml \
	  --target configs/targets/t1472.yaml --output $(BUILD)/artifacts/mlp-b2-n3/model.tpkg

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j2

bench: build
	$(BUILD)/bench/bench-compile-run

bench-exchange: build
	$(BUILD)/bench/bench-exchange

clean:
	rm -rf $(BUILD)
