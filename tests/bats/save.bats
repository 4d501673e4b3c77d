#!/usr/bin/env bats
# bin/egg-save through its POSIX sh bootstrap: help, saving from stdin, replay, bad lines,
# usage errors. Needs the environment install.sh makes (at $EGGSHELL_PREFIX or ~/.local).

bats_require_minimum_version 1.5.0

setup() {
  REPO="$(cd "$BATS_TEST_DIRNAME/../.." && pwd -P)"
  EGG_SAVE="$REPO/bin/egg-save"
  EGG="$BATS_TEST_TMPDIR/eggs/work.egg"
  venv="${EGGSHELL_PREFIX:-$HOME/.local}/share/eggshell/venv"
  if [ ! -x "$venv/bin/python" ]; then
    echo "no Eggshell environment at $venv: run ./install.sh first" >&2
    return 1
  fi
}

record() { # record TURN PROMPT [ANSWER]
  printf '{"session":"s1","turn":"%s","cwd":"","prompt":"%s","tools":[{"name":"Bash","id":"u-%s","input":{"command":"ls"},"output":{"stdout":"a.txt\\n","stderr":""}}],"answer":"%s"}\n' \
    "$1" "$2" "$1" "${3:-done}"
}

count_commits() { grep -c '"commit":' "$1"; }

@test "egg-save --help exits 0 and describes the input format" {
  run -0 "$EGG_SAVE" --help
  [[ "$output" == *"--egg"* ]]
  for field in '"session"' '"turn"' '"cwd"' '"prompt"' '"tools"' '"answer"'; do
    [[ "$output" == *"$field"* ]]
  done
  [[ "$output" == *"one JSON object per line"* ]]
}

@test "two records from a file on stdin: two index lines, two commits" {
  { record 1 "first prompt"; record 2 "second prompt"; } >"$BATS_TEST_TMPDIR/turns.ndjson"
  run -0 --separate-stderr sh -c '"$1" --egg "$2" <"$3"' _ "$EGG_SAVE" "$EGG" "$BATS_TEST_TMPDIR/turns.ndjson"
  [ -z "$stderr" ]
  [ "${#lines[@]}" -eq 2 ]
  [[ "${lines[0]}" == '{"index":[{"id":"'* ]]
  [[ "${lines[0]}" == *"first prompt"* ]]
  [[ "${lines[1]}" == *"second prompt"* ]]
  [ "$(count_commits "$EGG")" -eq 2 ]
  [ "$(stat -c %a "$EGG")" = 600 ]
  [ "$(stat -c %a "$(dirname "$EGG")")" = 700 ]
}

@test "replaying the same records prints nothing and changes no byte" {
  { record 1 "first prompt"; record 2 "second prompt"; } >"$BATS_TEST_TMPDIR/turns.ndjson"
  run -0 sh -c '"$1" --egg "$2" <"$3"' _ "$EGG_SAVE" "$EGG" "$BATS_TEST_TMPDIR/turns.ndjson"
  cp "$EGG" "$BATS_TEST_TMPDIR/before.egg"
  run -0 --separate-stderr sh -c '"$1" --egg "$2" <"$3"' _ "$EGG_SAVE" "$EGG" "$BATS_TEST_TMPDIR/turns.ndjson"
  [ -z "$output" ]
  [ -z "$stderr" ]
  cmp "$EGG" "$BATS_TEST_TMPDIR/before.egg"
}

@test "a malformed line: exit 1, stderr names its line, the other lines are saved" {
  { record 1 "first prompt"; printf '{"session":"s1","turn":\n'; record 3 "third prompt"; } >"$BATS_TEST_TMPDIR/turns.ndjson"
  run -1 --separate-stderr sh -c '"$1" --egg "$2" <"$3"' _ "$EGG_SAVE" "$EGG" "$BATS_TEST_TMPDIR/turns.ndjson"
  [[ "$stderr" == *"egg-save: <stdin>:2: not valid JSON"* ]]
  [ "$(printf '%s\n' "$stderr" | wc -l)" -eq 1 ]
  [ "${#lines[@]}" -eq 2 ]
  [[ "${lines[1]}" == *"third prompt"* ]]
  [ "$(count_commits "$EGG")" -eq 2 ]
}

@test "a record with a wrong field: exit 1, stderr names line and field, nothing from it is written" {
  { record 1 "first prompt"; printf '{"session":"s1","turn":"2","cwd":"","prompt":"BAD PROMPT","tools":"ls","answer":"a"}\n'; } >"$BATS_TEST_TMPDIR/turns.ndjson"
  run -1 --separate-stderr "$EGG_SAVE" --egg "$EGG" "$BATS_TEST_TMPDIR/turns.ndjson"
  [[ "$stderr" == *"turns.ndjson:2:"*"'tools' must be a list"* ]]
  run ! grep -q "BAD PROMPT" "$EGG"
  [ "$(count_commits "$EGG")" -eq 1 ]
}

@test "without --egg: exit 2 and a usage message" {
  run -2 --separate-stderr sh -c 'printf "%s\n" "$2" | "$1"' _ "$EGG_SAVE" "$(record 1 p)"
  [[ "$stderr" == *"--egg"* ]]
  [ -z "$output" ]
}

@test "a damaged store: exit 2, the error names file and line, the file is untouched" {
  record 1 "first prompt" | "$EGG_SAVE" --egg "$EGG" >/dev/null
  sed -i 's/first prompt/FIRST PROMPT/' "$EGG"
  cp "$EGG" "$BATS_TEST_TMPDIR/damaged.egg"
  run -2 --separate-stderr sh -c 'printf "%s\n" "$2" | "$1" --egg "$3"' _ "$EGG_SAVE" "$(record 2 p)" "$EGG"
  [[ "$stderr" == *"work.egg:"[0-9]*": node id does not match its content"* ]]
  cmp "$EGG" "$BATS_TEST_TMPDIR/damaged.egg"
}
