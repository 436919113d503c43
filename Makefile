# Developer entry points.  `make run` and `make test` work on a fresh machine with Python 3.10+
# and a C compiler: they create .venv, install gemini into it and build the C parts.
VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3

.PHONY: setup build test run lint clean

$(VENV)/.installed: pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $@

setup: $(VENV)/.installed

build: setup
	$(PY) -m gemini.native._build

test: build
	$(PY) -m pytest -q

run: build
	$(PY) -m gemini.cli.demo

lint: setup
	$(PY) -m ruff check gemini tests tools bench

clean:
	rm -rf build gemini/native/*.so* gemini/native/fake gemini/native/bin
