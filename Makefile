# The two commands in the README: `make demo` (main job on the shared default) and `make test`.
# Both build .venv first when it is missing or stale.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
SHARED ?= ../shared
export TRIEMINE_SHARED := $(abspath $(SHARED))
export PIP_CONSTRAINT := $(CURDIR)/constraints.txt
export TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD := 1
export OMP_NUM_THREADS ?= 1
export PYTHONUNBUFFERED := 1

STAMP := $(VENV)/.installed
SOURCES := setup.cfg setup.py pyproject.toml constraints.txt $(wildcard triemine/trie/*.pyx triemine/trie/*.pxd)

.PHONY: setup test demo bench-quick clean

setup: $(STAMP)

$(STAMP): $(SOURCES) scripts/setup_env.sh
	bash scripts/setup_env.sh

test: $(STAMP)
	$(PY) -m pytest -q tests

demo: $(STAMP)
	bash scripts/demo.sh

bench-quick: $(STAMP)
	for b in bench/*_bench.py; do $(PY) $$b --quick || exit 1; done

clean:
	rm -rf build $(VENV) .cache triemine/trie/*.so triemine/trie/_trie.c
