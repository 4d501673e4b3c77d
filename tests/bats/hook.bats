#!/usr/bin/env bats
# shellcheck disable=SC2154 # bats run sets output, lines and stderr
# egg-hook codex at the process level: whatever it is fed, stdout is exactly one line
# holding a JSON object and the exit status is 0. Needs the environment install.sh makes.

bats_require_minimum_version 1.5.0

setup() {
  load helpers
  egg_setup
  printf 'egg = ".eggs/work.egg"\n' >"$PROJ/.eggshell.toml"
  STORE="$PROJ/.eggs/work.egg"
  LOG="$EGGSHELL_DATA_ROOT/logs/hook.log"
}

# hook STDIN: run egg-hook codex with STDIN, stderr kept apart from stdout.
hook() { # hook PAYLOAD [HOST]: egg-hook HOST (codex by default), as the host's hooks file runs it
  run -0 --separate-stderr "$BIN/egg-hook" "${2:-codex}" <<<"$1"
  one_json_object
}

# A whole turn: prompt, one tool call, and the final answer (or none).
turn() { # turn TURN PROMPT COMMAND OUTPUT [ANSWER]
  local ids
  ids=$(jq -cn --arg t "$1" '{turn_id:$t}')
  hook "$(payload UserPromptSubmit "$(jq -cn --argjson b "$ids" --arg p "$2" '$b + {prompt:$p}')")"
  hook "$(payload PostToolUse "$(jq -cn --argjson b "$ids" --arg c "$3" --arg o "$4" \
    '$b + {tool_name:"Bash", tool_use_id:("call-" + $b.turn_id), tool_input:{command:$c}, tool_response:$o}')")"
  if [ -n "${5-}" ]; then
    hook "$(payload Stop "$(jq -cn --argjson b "$ids" --arg a "$5" '$b + {last_assistant_message:$a}')")"
  else
    hook "$(payload Stop "$ids")"
  fi
  [ "$output" = "{}" ]
}

@test "malformed JSON: {} and exit 0, logged" {
  hook 'this is not json'
  [ "$output" = "{}" ]
  grep -q "payload is not valid JSON" "$LOG"
  [[ "$stderr" == "egg-hook: failed open"* ]]
}

@test "empty stdin: {} and exit 0" {
  run -0 --separate-stderr "$BIN/egg-hook" codex </dev/null
  one_json_object
  [ "$output" = "{}" ]
}

@test "JSON that is not an object: {} and exit 0" {
  for raw in '[1,2,3]' '"Stop"' 'null' '42'; do
    hook "$raw"
    [ "$output" = "{}" ]
  done
  [ "$(grep -c "not a JSON object" "$LOG")" -eq 4 ]
}

@test "missing hook_event_name, unknown event, missing session_id: {} and exit 0" {
  hook "$(jq -cn --arg cwd "$PROJ" '{session_id:"s", cwd:$cwd}')"
  [ "$output" = "{}" ]
  hook "$(payload SomethingNew)"
  [ "$output" = "{}" ]
  hook "$(payload UserPromptSubmit '{"prompt":"x"}' | jq -c 'del(.session_id)')"
  [ "$output" = "{}" ]
  grep -q "'session_id'" "$LOG"
}

@test "an invalid .eggshell.toml (unknown key): SessionStart says OFF, the rest {}, exit 0, the key is named in the log" {
  printf 'top_k = 3\ntpo_k = 3\n' >"$PROJ/.eggshell.toml"
  for host in codex claude; do  # both show the user a SessionStart systemMessage
    hook "$(payload SessionStart '{"source":"startup"}')" "$host"
    [[ "$(jq -r .systemMessage <<<"$output")" == "Eggshell is OFF for this project: $PROJ/.eggshell.toml line 2: unknown key 'tpo_k' ("* ]]
    [[ "$(jq -r .systemMessage <<<"$output")" == *"; fix it or run \`egg doctor\`" ]]
    [ "$(jq -r 'keys | join(",")' <<<"$output")" = systemMessage ]
  done
  for ev in UserPromptSubmit Stop; do
    hook "$(payload "$ev" '{"prompt":"where is late_fee?"}')"
    [ "$output" = "{}" ]
  done
  # Stop reads no config: it only seals a journaled turn, and none was journaled
  [ "$(grep -c "unknown key 'tpo_k'" "$LOG")" -eq 3 ]
  [ ! -e "$STORE" ]
}

@test "an .eggshell.toml that is not TOML: SessionStart names its line, the rest {}, exit 0" {
  printf 'top_k = 3\nmode = = "lexical"\n' >"$PROJ/.eggshell.toml"
  hook "$(payload SessionStart '{"source":"startup"}')"
  [[ "$(jq -r .systemMessage <<<"$output")" == "Eggshell is OFF for this project: $PROJ/.eggshell.toml: not valid TOML: "*"(at line 2, column "* ]]
  hook "$(payload UserPromptSubmit '{"prompt":"x"}')"
  [ "$output" = "{}" ]
  grep -q "not valid TOML" "$LOG"
}

@test "a model that is not installed: SessionStart says prompts are matched lexically only" {
  printf 'model = "BAAI/bge-small-en-v1.5"\n' >"$PROJ/.eggshell.toml"
  hook "$(payload SessionStart '{"source":"startup"}')"
  [ "$(jq -r .systemMessage <<<"$output")" = "Eggshell: recording this project; 0 prior turns in .eggs/work.egg; prompts are matched lexically only (the model BAAI/bge-small-en-v1.5 is not downloaded into $EGGSHELL_PREFIX/share/eggshell/models/fastembed: run \`egg model install BAAI/bge-small-en-v1.5\`, or set mode = \"lexical\")." ]
  [ ! -e "$LOG" ]
}

@test "a damaged store: SessionStart says OFF, exit 0, Stop leaves its bytes alone, the error is logged" {
  turn t1 "where is late_fee computed?" "grep -rn late_fee src/" "src/billing.py:42" "in src/billing.py, line 42"
  damage_egg "$STORE"
  cp "$STORE" "$T/damaged.egg"
  turn t2 "where is late_fee computed now?" "grep -rn late_fee lib/" "lib/fees.py:7" "moved to lib/fees.py"
  hook "$(payload SessionStart)"
  [[ "$(jq -r .systemMessage <<<"$output")" == "Eggshell is OFF for this project: $STORE:"*"; nothing is handed over from it, "*"\`egg fsck $STORE\` says what is wrong" ]]
  cmp "$STORE" "$T/damaged.egg"
  grep -q "Stop EggError: $STORE:" "$LOG"
  # the uncommitted turn is still journaled
  [ "$(find "$EGGSHELL_DATA_ROOT/journal" -name '*.ndjson' | wc -l)" -eq 1 ]
}

@test "a project without .eggshell.toml is left alone: {} and nothing written" {
  rm "$PROJ/.eggshell.toml"
  for ev in SessionStart UserPromptSubmit PostToolUse Stop; do
    hook "$(payload "$ev" '{"prompt":"x","tool_name":"Bash","tool_input":{},"tool_response":"y","last_assistant_message":"z"}')"
    [ "$output" = "{}" ]
  done
  [ ! -e "$EGGSHELL_DATA_ROOT" ]
  [ ! -e "$PROJ/.eggs" ]
  [ -z "$(ls -A "$PROJ")" ]
}

@test "PostToolUse is journaled under the data root when the hook returns" {
  hook "$(payload UserPromptSubmit '{"prompt":"check the disk"}')"
  hook "$(payload PostToolUse '{"tool_name":"Bash","tool_use_id":"c1","tool_input":{"command":"df -h"},"tool_response":"/dev/sda1 40G\n"}')"
  [ "$output" = "{}" ]
  journal="$(find "$EGGSHELL_DATA_ROOT/journal" -name '*.ndjson')"
  [ "$(jq -sc '[.[].event]' "$journal")" = '["prompt","tool"]' ]
  [ "$(jq -sc '.[1] | [.name, .id, .input.command, .output]' "$journal")" = '["Bash","c1","df -h","/dev/sda1 40G\n"]' ]
  [ "$(stat -c %a "$journal")" = 600 ]
  [ ! -e "$STORE" ]
}

@test "Stop commits the turn; a related prompt gets it back, an unrelated one gets {}" {
  hook "$(payload SessionStart)"
  [ "$(jq -r .systemMessage <<<"$output")" = "Eggshell: recording this project; 0 prior turns in .eggs/work.egg." ]
  turn t1 "where is late_fee computed?" "grep -rn late_fee src/" "src/billing.py:42: def late_fee(days):" \
    "late_fee is computed in src/billing.py, line 42"
  [ -f "$STORE" ]
  [ -z "$(find "$EGGSHELL_DATA_ROOT/journal" -name '*.ndjson')" ]
  hook "$(payload SessionStart)"
  [ "$(jq -r .systemMessage <<<"$output")" = "Eggshell: recording this project; 1 prior turn in .eggs/work.egg." ]
  # a later chat (its own session): the first one holds its turn in its own history already
  hook "$(payload UserPromptSubmit '{"turn_id":"t2","session_id":"chat-2","prompt":"how is the late_fee calculated?"}')"
  [ "$(jq -r .hookSpecificOutput.hookEventName <<<"$output")" = UserPromptSubmit ]
  ctx="$(jq -r .hookSpecificOutput.additionalContext <<<"$output")"
  [[ "$ctx" == *"late_fee is computed in src/billing.py, line 42"* ]]
  [[ "$ctx" == *"src/billing.py:42: def late_fee(days):"* ]]
  hook "$(payload UserPromptSubmit '{"turn_id":"t3","session_id":"chat-3","prompt":"set up the kubernetes helm chart"}')"
  [ "$output" = "{}" ]
  [ ! -e "$LOG" ]
}

@test "an interrupted turn stores its tool outcome and no answer" {
  turn t1 "run the migration" "alembic upgrade head" "Running upgrade 1a2b -> 3c4d"
  run -0 "$BIN/egg" find migration --egg "$STORE"
  [ "${#lines[@]}" -eq 1 ] # no "=> answer" line
  run -0 "$BIN/egg" show "${output:0:12}" --egg "$STORE"
  [[ "$output" == *"Running upgrade 1a2b -> 3c4d"* ]]
  [[ "$output" == *"OUTCOME none (interrupted before a final answer)" ]]
}

@test "Claude Code payloads: prompt_id and tool_response as {stdout, stderr}" {
  base="$(jq -cn --arg cwd "$PROJ" '{session_id:"claude-1", cwd:$cwd}')"
  hook "$(jq -c '. + {hook_event_name:"UserPromptSubmit", prompt_id:"p1", prompt:"why does make build fail?"}' <<<"$base")" claude
  hook "$(jq -c '. + {hook_event_name:"PostToolUse", tool_name:"Bash", tool_use_id:"toolu_1", tool_input:{command:"make build"},
    tool_response:{stdout:"cc -c main.c\n", stderr:"main.c:3: error: expected ;"}}' <<<"$base")" claude
  hook "$(jq -c '. + {hook_event_name:"Stop", last_assistant_message:"a missing semicolon in main.c"}' <<<"$base")" claude
  [ "$output" = "{}" ]
  run -0 "$BIN/egg" find make build --egg "$STORE"
  run -0 "$BIN/egg" show "${output:0:12}" --egg "$STORE"
  [[ "$output" == *"session claude-1  turn p1"* ]]
  [[ "$output" == *$'cc -c main.c\nmain.c:3: error: expected ;'* ]]
  [[ "$output" == *"a missing semicolon in main.c" ]]
}

@test "with no Python environment at all, egg-hook still prints {} and exits 0" {
  mkdir "$T/empty"
  EGGSHELL_PREFIX="$T/empty" run -0 --separate-stderr "$BIN/egg-hook" codex <<<"$(payload SessionStart)"
  one_json_object
  [ "$output" = "{}" ]
}

@test "an unknown host: {} and exit 0" {
  run -0 --separate-stderr "$BIN/egg-hook" vim <<<"$(payload SessionStart)"
  one_json_object
  [ "$output" = "{}" ]
  grep -q "unknown host 'vim'" "$LOG"
}

@test "egg-hook --help exits 0" {
  run -0 "$BIN/egg-hook" --help
  [[ "$output" == "usage: egg-hook HOST"* ]]
}
