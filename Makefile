# The two commands in the README: `make demo` (main job on the shared default) and `make test`.
# Both build what they need first, when it is missing or stale:
#   .venv             main environment (scripts/setup_env.sh)
#   .venv-bicleaner   classic Bicleaner 0.17.4 tool environment (scripts/bicleaner_setup.sh)
#   .cache/bicleaner  the zh-en Bicleaner model trained from the shared parallel data
#   .cache/models     the shared OPUS-MT model imported into fairseq (+ recovered target spm)
#   BROWSER_STAMP     headless Chromium and a CJK font, for the review sheet's browser test
#                     (scripts/browser_setup.sh: apt-get, as root; nothing when both are there)
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
SHARED ?= ../shared
export TRIEMINE_SHARED := $(abspath $(SHARED))
export TRIEMINE_CACHE ?= $(CURDIR)/.cache
export PIP_CONSTRAINT := $(CURDIR)/constraints.txt
export TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD := 1
export OMP_NUM_THREADS ?= 1
export PYTHONUNBUFFERED := 1

STAMP := $(VENV)/.installed
SOURCES := setup.cfg setup.py pyproject.toml constraints.txt $(wildcard triemine/trie/*.pyx triemine/trie/*.pxd)
BICLEANER_STAMP := .venv-bicleaner/.bicleaner-installed-v1
BICLEANER_MODEL := $(TRIEMINE_CACHE)/bicleaner/zh-en/zh-en.yaml
OPUS_MODEL := $(TRIEMINE_CACHE)/models/opus-mt-zh-en/checkpoint.pt
BROWSER_STAMP := $(TRIEMINE_CACHE)/.browser-ready-v1

.PHONY: setup lint test test-unit demo model bicleaner bench-quick clean

setup: $(STAMP)

$(STAMP): $(SOURCES) scripts/setup_env.sh
	bash scripts/setup_env.sh

$(BICLEANER_STAMP): scripts/bicleaner_setup.sh
	bash scripts/bicleaner_setup.sh

# Order-only on the environments (after |): refreshing an environment must not retrain or re-import.
$(BICLEANER_MODEL): scripts/bicleaner_train.py | $(BICLEANER_STAMP) $(STAMP)
	.venv-bicleaner/bin/python scripts/bicleaner_train.py

bicleaner: $(BICLEANER_MODEL)

$(OPUS_MODEL): | $(STAMP)
	$(VENV)/bin/trie-mine-import -o $(dir $@)

model: $(OPUS_MODEL)

# Lint of every Python file: bugs and the line layout (pyproject.toml's [tool.ruff]); .ci/run runs
# it first.
lint: $(STAMP)
	$(VENV)/bin/ruff check triemine tests bench scripts setup.py

$(BROWSER_STAMP): scripts/browser_setup.sh
	bash scripts/browser_setup.sh
	@mkdir -p $(dir $@) && touch $@

test: $(STAMP) $(BICLEANER_MODEL) $(OPUS_MODEL) $(BROWSER_STAMP)
	$(PY) -m pytest -q tests

# For people changing code: the unit tier (tests/tiers.py: no model, no process, no Ray, no
# wheel), under a minute; `make test` runs it with the integration and cluster tiers.
test-unit: $(STAMP)
	$(PY) -m pytest -q tests -m unit

demo: $(STAMP) $(OPUS_MODEL)
	bash scripts/demo.sh

bench-quick: $(STAMP) $(OPUS_MODEL) $(BICLEANER_MODEL)
	for b in bench/*_bench.py; do $(PY) $$b --quick || exit 1; done

clean:
	rm -rf build $(VENV) .venv-bicleaner .cache triemine/trie/*.so triemine/trie/_trie.c
