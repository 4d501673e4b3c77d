#!/usr/bin/env bats
# shellcheck disable=SC2154 # bats run sets output, lines and stderr
# The `egg` CLI through its POSIX sh bootstrap: init, install/uninstall codex, fsck, show,
# find, status. Needs the environment install.sh makes.

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
  for sub in init install uninstall show find fsck compact merge status; do
    run -0 "$BIN/egg" "$sub" --help
    [[ "$output" == "usage: egg $sub"* ]]
  done
}

@test "egg with no or an unknown command exits 2" {
  run -2 "$BIN/egg"
  run -2 "$BIN/egg" frobnicate
}

@test "egg init writes .eggshell.toml and a private .eggs/ with its own .gitignore, and is idempotent" {
  cd "$PROJ"
  run -0 "$BIN/egg" init
  [ -f .eggshell.toml ]
  grep -qx 'egg = ".eggs/work.egg"' .eggshell.toml
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
  [ "$(our_entries)" = '{"PostCompact":1,"PostToolUse":1,"PreToolUse":1,"SessionStart":1,"Stop":1,"UserPromptSubmit":1}' ]
  [ "$(jq -r .description "$HOOKS")" = "my own hooks" ]
  [ "$(jq -r '.hooks.Stop[0].hooks[0].command' "$HOOKS")" = "notify-send done" ]
  [ "$(jq -r '.hooks.PostToolUse[0].matcher' "$HOOKS")" = "Bash" ]
  [ "$(jq -r '.hooks.Notification[0].hooks[0].command' "$HOOKS")" = "say hi" ]
  [ "$(jq -c '[.hooks[][] .hooks[] | select(.command | endswith("egg-hook codex")) | .timeout] | unique' "$HOOKS")" = "[30]" ]
  [ "$(jq -c '.hooks | keys' "$HOOKS")" = '["Notification","PostCompact","PostToolUse","PreToolUse","SessionStart","Stop","UserPromptSubmit"]' ]
}

@test "installing twice changes nothing; uninstall restores the original hooks" {
  other_hooks
  jq -S . "$HOOKS" >"$T/original.json"
  run -0 "$BIN/egg" install codex
  cp "$HOOKS" "$T/once.json"
  run -0 "$BIN/egg" install codex
  cmp "$HOOKS" "$T/once.json"
  run -0 "$BIN/egg" uninstall codex
  [[ "$output" == "removed 6 Eggshell hooks from $HOOKS; other hooks were kept" ]]
  jq -S . "$HOOKS" | diff - "$T/original.json"
  run -0 "$BIN/egg" uninstall codex
  [[ "$output" == "nothing to do: no Eggshell hooks in $HOOKS" ]]
}

@test "egg install codex --codex-home writes there" {
  run -0 "$BIN/egg" install codex --codex-home "$T/elsewhere"
  [ -f "$T/elsewhere/hooks.json" ]
  [ ! -e "$HOOKS" ]
  HOOKS="$T/elsewhere/hooks.json" our_entries | jq -e 'length == 6' >/dev/null
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

@test "egg fsck reports a torn last line without trimming it" {
  sample_turns | "$BIN/egg-save" --egg "$EGG" >/dev/null
  printf '{"node":"ab' >>"$EGG"
  cp "$EGG" "$T/torn.egg"
  run -0 "$BIN/egg" fsck "$EGG"
  [[ "$output" == *"an incomplete last line (11 bytes"* ]]
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
