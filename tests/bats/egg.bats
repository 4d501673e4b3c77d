#!/usr/bin/env bats
# shellcheck disable=SC2154 # bats run sets output, lines and stderr
# The `egg` CLI through its POSIX sh bootstrap: init, install/uninstall codex, fsck, show,
# find, status, and the in-chat controls (on, off, use, next, keep, graph, doctor). Needs
# the environment install.sh makes.

bats_require_minimum_version 1.5.0

setup() {
  load helpers
  egg_setup
  EGG="$T/work.egg"
  HOOKS="$CODEX_HOME/hooks.json"
  HOOK_CMD="$BIN/egg-hook codex"
}

# Events that hold an egg-hook entry, each with its count: {"Stop":1,...}
our_entries() {
  jq -cS --arg cmd "$HOOK_CMD" \
    '[.hooks | to_entries[] | {key, value: ([.value[].hooks[]? | select(.command == $cmd)] | length)} | select(.value > 0)] | from_entries' \
    "$HOOKS"
}

other_hooks() {
  mkdir -p "$CODEX_HOME"
  cat >"$HOOKS" <<'JSON'
{
  "description": "my own hooks",
  "hooks": {
    "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
    "PostToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "audit-log --json"}]}],
    "Notification": [{"hooks": [{"type": "command", "command": "say hi"}]}]
  }
}
JSON
}

@test "egg --help, --version and every subcommand's --help exit 0" {
  run -0 "$BIN/egg" --help
  [[ "$output" == "usage: egg "* ]]
  run -0 "$BIN/egg" --version
  [[ "$output" == "eggshell "* ]]
  for sub in init install uninstall show find fsck compact merge status view on off use next keep drop diff graph why inspect doctor; do
    run -0 "$BIN/egg" "$sub" --help
    [[ "$output" == "usage: egg $sub"* ]]
  done
}

@test "egg with an unknown command exits 2; egg alone outside a chat is egg status" {
  run -2 "$BIN/egg" frobnicate
  cd "$PROJ"
  run -0 "$BIN/egg"
  [[ "$output" == "eggshell "* ]]
  [[ "$output" == *"project    none here"* ]]
}

@test "egg init writes .eggshell.toml and a private .eggs/ with its own .gitignore, and is idempotent" {
  cd "$PROJ"
  run -0 "$BIN/egg" init
  [ -f .eggshell.toml ]
  grep -qx 'project = ".eggs/work.egg"' .eggshell.toml
  grep -qx 'default = "work"' .eggshell.toml
  grep -qx '\[profiles.work\]' .eggshell.toml
  run -1 grep -q '^\[profiles.\(private\|off\)\]' .eggshell.toml  # built in: no file may redefine them
  [ "$(stat -c %a .eggs)" = 700 ]
  grep -qx '\*' .eggs/.gitignore
  grep -qx '!.gitignore' .eggs/.gitignore
  printf 'top_k = 2\n' >.eggshell.toml
  run -0 "$BIN/egg" init
  [[ "$output" == *"kept     $PROJ/.eggshell.toml (already there)"* ]]
  [ "$(cat .eggshell.toml)" = "top_k = 2" ]
}

@test "egg install codex adds one entry per event and keeps every other hook" {
  other_hooks
  run -0 "$BIN/egg" install codex
  [ "$(our_entries)" = '{"PostCompact":1,"PostToolUse":1,"PreToolUse":1,"SessionEnd":1,"SessionStart":1,"Stop":1,"UserPromptSubmit":1}' ]
  [ "$(jq -r .description "$HOOKS")" = "my own hooks" ]
  [ "$(jq -r '.hooks.Stop[0].hooks[0].command' "$HOOKS")" = "notify-send done" ]
  [ "$(jq -r '.hooks.PostToolUse[0].matcher' "$HOOKS")" = "Bash" ]
  [ "$(jq -r '.hooks.Notification[0].hooks[0].command' "$HOOKS")" = "say hi" ]
  # 30 s, but SessionEnd's 3 s: Codex 0.169 cuts a longer one down, warning in every chat
  [ "$(jq -c '[.hooks | to_entries[] | .key as $e | .value[] .hooks[] | select(.command | endswith("egg-hook codex")) | "\($e)=\(.timeout)"] | sort' "$HOOKS")" = '["PostCompact=30","PostToolUse=30","PreToolUse=30","SessionEnd=3","SessionStart=30","Stop=30","UserPromptSubmit=30"]' ]
  [ "$(jq -c '.hooks | keys' "$HOOKS")" = '["Notification","PostCompact","PostToolUse","PreToolUse","SessionEnd","SessionStart","Stop","UserPromptSubmit"]' ]
}

@test "installing twice changes nothing; uninstall restores the original hooks" {
  other_hooks
  jq -S . "$HOOKS" >"$T/original.json"
  run -0 "$BIN/egg" install codex
  cp "$HOOKS" "$T/once.json"
  run -0 "$BIN/egg" install codex
  cmp "$HOOKS" "$T/once.json"
  run -0 "$BIN/egg" uninstall codex
  [[ "$output" == "removed 7 Eggshell hooks from $HOOKS; other hooks were kept" ]]
  jq -S . "$HOOKS" | diff - "$T/original.json"
  run -0 "$BIN/egg" uninstall codex
  [[ "$output" == "nothing to do: no Eggshell hooks in $HOOKS" ]]
}

@test "egg install codex --codex-home writes there" {
  run -0 "$BIN/egg" install codex --codex-home "$T/elsewhere"
  [ -f "$T/elsewhere/hooks.json" ]
  [ ! -e "$HOOKS" ]
  HOOKS="$T/elsewhere/hooks.json" our_entries | jq -e 'length == 7' >/dev/null
}

@test "a malformed hooks.json is refused with a clear message and left unchanged" {
  mkdir -p "$CODEX_HOME"
  printf '{"hooks": {"Stop": [' >"$HOOKS"
  cp "$HOOKS" "$T/before.json"
  run -2 --separate-stderr "$BIN/egg" install codex
  [[ "$stderr" == "egg: $HOOKS: not valid JSON"*"nothing was changed)" ]]
  cmp "$HOOKS" "$T/before.json"
  run -2 --separate-stderr "$BIN/egg" uninstall codex
  cmp "$HOOKS" "$T/before.json"
  [ "$(find "$CODEX_HOME" -type f | wc -l)" -eq 1 ]
}

@test "egg fsck: 0 on a good file, 1 with FILE:LINE on damage, and never changes the file" {
  sample_turns | "$BIN/egg-save" --egg "$EGG" >/dev/null
  cp "$EGG" "$T/good.egg"
  run -0 "$BIN/egg" fsck "$EGG"
  [[ "$output" == "$EGG: ok: "*"2 commits, 2 turns"* ]]
  cmp "$EGG" "$T/good.egg"
  damage_egg "$EGG"
  cp "$EGG" "$T/damaged.egg"
  run -1 "$BIN/egg" fsck "$EGG"
  [[ "${lines[0]}" =~ ^"$EGG":[0-9]+:\ node\ id\ does\ not\ match ]]
  [[ "$output" == *"DAMAGED"* ]]
  cmp "$EGG" "$T/damaged.egg"
  run -1 "$BIN/egg" fsck "$T/good.egg" "$T/missing.egg"
  [[ "$output" == *"$T/missing.egg: no such file"* ]]
}

@test "egg fsck reports a torn last line as damage (exit 1) without trimming it" {
  sample_turns | "$BIN/egg-save" --egg "$EGG" >/dev/null
  printf '{"node":"ab' >>"$EGG"
  cp "$EGG" "$T/torn.egg"
  run -1 "$BIN/egg" fsck "$EGG"
  [[ "$output" == *"DAMAGED: it ends in the middle of a line (11 bytes after byte"* ]]
  [[ "$output" == *"the file was not changed"* ]]
  cmp "$EGG" "$T/torn.egg"
}

@test "egg find and egg show by unique prefix; unknown keys exit 1" {
  sample_turns | "$BIN/egg-save" --egg "$EGG" >/dev/null
  run -0 "$BIN/egg" find late_fee --egg "$EGG"
  key="${output:0:12}"
  [[ "$key" =~ ^[0-9a-f]{12}$ ]]
  run -0 "$BIN/egg" show "${key:0:7}" --egg "$EGG"
  [[ "${lines[0]}" == "turn $key  session s1  turn t1"* ]]
  [[ "$output" == *"late_fee is computed in src/billing.py, line 42" ]]
  run -1 "$BIN/egg" find kubernetes --egg "$EGG"
  [ "$output" = "no matching turns" ]
  run -1 --separate-stderr "$BIN/egg" show 000000000000 --egg "$EGG"
  [[ "$stderr" == *"unknown key 000000000000"* ]]
}

@test "egg forget hides a turn from find, show and egg-query; egg compact --purge removes it from the file" {
  sample_turns | "$BIN/egg-save" --egg "$EGG" >/dev/null
  run -0 "$BIN/egg" find late_fee --egg "$EGG"
  key="${output:0:12}"
  run -0 "$BIN/egg" forget "$key" --egg "$EGG"
  [[ "${lines[0]}" == "forgot turn $key (session s1, turn t1,"* ]]
  [[ "$output" == *"egg compact --purge $EGG"* ]]
  run -1 "$BIN/egg" find late_fee --egg "$EGG"
  run -1 --separate-stderr "$BIN/egg" show "$key" --egg "$EGG"
  [[ "$stderr" == *"$key was forgotten"* ]]
  hits="$(query_line "where is late_fee computed" | "$BIN/egg-query" --egg "$EGG" --mode lexical --no-trace | jq -c .hits)"
  [ "$hits" = "[]" ]
  grep -q late_fee "$EGG"
  run -0 "$BIN/egg" compact --purge "$EGG"
  ! grep -q late_fee "$EGG"
  run -0 "$BIN/egg" fsck "$EGG"
  [[ "$output" == *"1 turn,"* ]]
  run -1 "$BIN/egg" forget --match "no such text" --egg "$EGG"
}

@test "egg status names the prefix, the data root and the project's stores" {
  cd "$PROJ"
  run -0 "$BIN/egg" status
  [[ "$output" == *"prefix     $EGGSHELL_PREFIX"* ]]
  [[ "$output" == *"data root  $EGGSHELL_DATA_ROOT"* ]]
  [[ "$output" == *"project    none here"* ]]
  "$BIN/egg" init >/dev/null
  run -0 "$BIN/egg" status
  [[ "$output" == *"store      $PROJ/.eggs/work.egg (0 turns)  [write]"* ]]
}

@test "egg merge refuses to overwrite without --force" {
  sample_turns | "$BIN/egg-save" --egg "$EGG" >/dev/null
  record t9 "deploy it" "make deploy" "ok" "deployed" | "$BIN/egg-save" --egg "$T/b.egg" >/dev/null
  run -0 "$BIN/egg" merge "$EGG" "$T/b.egg" -o "$T/c.egg"
  run -0 "$BIN/egg" fsck "$T/c.egg"
  [[ "$output" == *"3 turns"* ]]
  cp "$T/c.egg" "$T/c.before"
  run -2 --separate-stderr "$BIN/egg" merge "$EGG" -o "$T/c.egg"
  [[ "$stderr" == *"--force"* ]]
  cmp "$T/c.egg" "$T/c.before"
  run -0 "$BIN/egg" merge "$EGG" -o "$T/c.egg" --force
}

# -- in-chat controls (`!egg ...` in Codex) -------------------------------------------------------

@test "chat controls without a chat id fail with exit 1 and say how to name one" {
  cd "$PROJ"
  "$BIN/egg" init >/dev/null
  for sub in on off "use work" "next private" keep drop diff graph why inspect; do
    # shellcheck disable=SC2086 # word splitting is the point
    run -1 --separate-stderr env -u CODEX_THREAD_ID -u EGGSHELL_CHAT "$BIN/egg" $sub
    [ "$output" = "" ]
    [ "$stderr" = "egg: no chat: run this inside Codex as !egg ... (CODEX_THREAD_ID is unset), or pass --chat ID" ]
  done
}

@test "egg off, use, next and the status line in a Codex chat" {
  cd "$PROJ"
  "$BIN/egg" init >/dev/null
  export CODEX_THREAD_ID=thread-1
  run -0 --separate-stderr "$BIN/egg"
  [ "$output" = "egg on: profile work records each turn to project and reads project; no turn journaled yet" ]
  run -0 "$BIN/egg" use private
  [ "$output" = "egg: from the next prompt on, this chat records nothing and reads project (profile private; was work, which records each turn to project and reads project)" ]
  run -0 "$BIN/egg" next off
  run -0 "$BIN/egg"
  [ "$output" = "egg on: profile private records nothing and reads project; the next turn uses off; no turn journaled yet" ]
  run -1 --separate-stderr "$BIN/egg" use nope
  [[ "$stderr" == "egg: unknown profile 'nope' (known: work, private, off; defined in $PROJ/.eggshell.toml)" ]]
  run -0 "$BIN/egg" off
  [[ "$output" == "egg off (memory disabled"* ]]
  run -0 "$BIN/egg" --chat other
  [[ "$output" == "egg on: profile work "* ]]
  run -0 env -u CODEX_THREAD_ID EGGSHELL_CHAT=thread-1 "$BIN/egg"
  [[ "$output" == "egg off: profile private "* ]]
}

@test "egg off works with a broken config; keep with nothing journaled exits 1" {
  cd "$PROJ"
  printf 'this is [not toml\n' >.eggshell.toml
  export CODEX_THREAD_ID=thread-2
  run -0 "$BIN/egg" off
  run -1 --separate-stderr "$BIN/egg" use work
  [[ "$stderr" == "egg: $PROJ/.eggshell.toml: not valid TOML"* ]]
  rm .eggshell.toml && "$BIN/egg" init >/dev/null
  run -1 --separate-stderr "$BIN/egg" keep
  [[ "$stderr" == "egg: nothing journaled in this chat: no turn to keep"* ]]
  run -0 "$BIN/egg" graph
  [ "$output" = "no handoff was sent to this chat" ]
}

@test "egg doctor prints a checklist and exits 1 while Codex hooks are missing, 0 once installed" {
  cd "$PROJ"
  "$BIN/egg" init >/dev/null
  run -1 env -u CODEX_THREAD_ID "$BIN/egg" doctor
  [[ "${lines[0]}" == "ok   egg-hook is installed at $BIN/egg-hook" ]]
  [[ "$output" == *"FAIL Codex hooks: $CODEX_HOME/hooks.json does not exist: run \`egg install codex\`"* ]]
  "$BIN/egg" install codex >/dev/null
  run -0 "$BIN/egg" doctor
  [[ "$output" == *"note Codex runs new or changed hooks only once you review and trust them"* ]]
  [[ "$output" != *FAIL* ]]
}
