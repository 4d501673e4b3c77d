# shellcheck shell=bash disable=SC2154 # bats run sets output, lines and stderr
# Shared set-up for the stage, egg and hook bats tests (load with `load helpers`).
#
# Every test runs the checkout's bin/ commands in an isolated world: a temporary
# EGGSHELL_PREFIX whose share/eggshell/venv is a link to the real environment made by
# install.sh (so the user's global config is never read), a temporary data root and a
# temporary CODEX_HOME. Nothing outside $BATS_TEST_TMPDIR is written.

egg_setup() {
  REPO="$(cd "$BATS_TEST_DIRNAME/../.." && pwd -P)"
  BIN="$REPO/bin"
  # The real environment, found before EGGSHELL_PREFIX is replaced.
  REAL_VENV="${EGGSHELL_PREFIX:-$HOME/.local}/share/eggshell/venv"
  if [ ! -x "$REAL_VENV/bin/python" ]; then
    echo "no Eggshell environment at $REAL_VENV: run ./install.sh first" >&2
    return 1
  fi
  T="$BATS_TEST_TMPDIR"
  mkdir -p "$T/prefix/share/eggshell" "$T/proj"
  ln -s "$REAL_VENV" "$T/prefix/share/eggshell/venv"
  EGGSHELL_PREFIX="$T/prefix"
  EGGSHELL_DATA_ROOT="$T/data"
  CODEX_HOME="$T/codex"
  PROJ="$T/proj"
  unset EGGSHELL_BIN
  # Hooks answer and save in their own process here (bats removes $T after each test);
  # a test of the warm manager turns it on and stops it itself.
  EGGSHELL_MANAGER=off
  EGGSHELL_MANAGER_IDLE=10
  export REPO BIN T PROJ EGGSHELL_PREFIX EGGSHELL_DATA_ROOT CODEX_HOME EGGSHELL_MANAGER EGGSHELL_MANAGER_IDLE
}

# A turn record for egg-save: record TURN PROMPT COMMAND OUTPUT ANSWER
record() {
  jq -cn --arg t "$1" --arg p "$2" --arg c "$3" --arg o "$4" --arg a "$5" \
    '{session:"s1", turn:$t, cwd:"", prompt:$p,
      tools:[{name:"Bash", id:("call-" + $t), input:{command:$c}, output:$o}],
      answer:(if $a == "" then null else $a end)}'
}

# The two prior turns most tests search.
sample_turns() {
  record t1 "where is late_fee computed?" "grep -rn late_fee src/" "src/billing.py:42: def late_fee(days):" \
    "late_fee is computed in src/billing.py, line 42"
  record t2 "run the frontend unit tests" "npm test" "12 passing" "all 12 frontend tests pass"
}

# A query line for egg-query.
query_line() { jq -cn --arg q "$1" '{query:{text:$q}}'; }

# Assert that $output (stdout of `run --separate-stderr`) is exactly one line holding a JSON object.
one_json_object() {
  if [ "${#lines[@]}" -ne 1 ]; then
    printf 'expected one line on stdout, got %d:\n%s\n' "${#lines[@]}" "$output" >&2
    return 1
  fi
  jq -e 'type == "object"' <<<"$output" >/dev/null
}

# A Codex hook payload: payload EVENT [JSON] is {hook_event_name, session_id, cwd, turn_id} + JSON.
payload() {
  jq -cn --arg e "$1" --arg cwd "$PROJ" --argjson extra "${2:-"{}"}" \
    '{hook_event_name:$e, session_id:"sess-1", cwd:$cwd, turn_id:"turn-1"} + $extra'
}

# Alter a text node in the middle of a store so its id no longer matches (fsck and loads fail).
damage_egg() {
  sed -i '0,/"text":"/s//"text":"tampered /' "$1"
}
