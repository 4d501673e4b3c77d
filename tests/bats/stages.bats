#!/usr/bin/env bats
# shellcheck disable=SC2016,SC2154 # sh -c scripts are single-quoted on purpose; bats run sets output, lines, stderr
# The NDJSON stages egg-save, egg-query and egg-extract as standalone filters in shell
# pipelines, through their POSIX sh bootstraps. Needs the environment install.sh makes.

bats_require_minimum_version 1.5.0

setup() {
  load helpers
  egg_setup
  EGG="$T/work.egg"
}

save_sample() {
  sample_turns >"$T/turns.ndjson"
  "$BIN/egg-save" --egg "$EGG" <"$T/turns.ndjson" >/dev/null
}

@test "egg-save, egg-query and egg-extract --help exit 0 and show an example pipeline" {
  for stage in egg-save egg-query egg-extract; do
    run -0 --separate-stderr "$BIN/$stage" --help
    [[ "$output" == "usage: $stage "* ]]
    [[ "$output" == *"--egg"* ]]
    [[ "$output" == *"example:"* ]]
    [ -z "$stderr" ]
  done
}

@test "save, then query | extract: the handoff holds the prior request, answer and evidence" {
  sample_turns >"$T/turns.ndjson"
  run -0 --separate-stderr sh -c '"$1/egg-save" --egg "$2" <"$3" | wc -l' _ "$BIN" "$EGG" "$T/turns.ndjson"
  [ "$output" -eq 2 ]
  query_line "how is the late_fee calculated" >"$T/q.ndjson"
  run -0 --separate-stderr sh -c '"$1/egg-query" --egg "$2" <"$3" | "$1/egg-extract" --egg "$2"' _ "$BIN" "$EGG" "$T/q.ndjson"
  [ "${#lines[@]}" -eq 1 ]
  [ -z "$stderr" ]
  text="$(jq -r .handoff.text <<<"$output")"
  [[ "$text" == "EGGSHELL PRIOR WORK"* ]]
  [[ "$text" == *"where is late_fee computed?"* ]]
  [[ "$text" == *"late_fee is computed in src/billing.py, line 42"* ]]
  [[ "$text" == *"src/billing.py:42: def late_fee(days):"* ]]
  [[ "$text" != *"frontend"* ]]
  [ "$(jq '.handoff.keys | length' <<<"$output")" -eq 2 ]
  [ "$(jq -c .handoff.omitted <<<"$output")" = "[]" ]
}

@test "egg-query writes one hits line per query line, best first, with content ids and keys" {
  save_sample
  { query_line "late_fee"; query_line "kubernetes helm chart"; query_line "frontend unit tests"; } >"$T/q.ndjson"
  run -0 --separate-stderr "$BIN/egg-query" --egg "$EGG" --top-k 5 <"$T/q.ndjson"
  [ "${#lines[@]}" -eq 3 ]
  [ "$(jq -r '.hits[0].turn' <<<"${lines[0]}")" = t1 ]
  jq -e '.hits[0] | (.id | test("^[0-9a-f]{64}$")) and .key == .id[:12] and .rank == 1 and .score > 0 and .session == "s1"' \
    <<<"${lines[0]}" >/dev/null
  [ "$(jq -c .hits <<<"${lines[1]}")" = "[]" ]
  [ "$(jq -r '.hits[0].turn' <<<"${lines[2]}")" = t2 ]
}

@test "an unrelated query gives an empty handoff" {
  save_sample
  query_line "configure the kubernetes helm chart" >"$T/q.ndjson"
  run -0 --separate-stderr sh -c '"$1/egg-query" --egg "$2" <"$3" | "$1/egg-extract" --egg "$2"' _ "$BIN" "$EGG" "$T/q.ndjson"
  [ "$output" = '{"handoff":{"text":"","keys":[],"omitted":[],"deny":false,"covered":[]}}' ]
}

@test "malformed lines are answered in step and make the exit status 1" {
  save_sample
  { echo 'not json'; query_line "late_fee"; echo '{"q":1}'; } >"$T/q.ndjson"
  run -1 --separate-stderr "$BIN/egg-query" --egg "$EGG" <"$T/q.ndjson"
  [ "${#lines[@]}" -eq 3 ]
  jq -e '.hits == [] and (.error | startswith("<stdin>:1: not valid JSON"))' <<<"${lines[0]}" >/dev/null
  jq -e '.hits | length > 0' <<<"${lines[1]}" >/dev/null
  jq -e '.hits == [] and (.error | startswith("<stdin>:3:"))' <<<"${lines[2]}" >/dev/null
  [[ "$stderr" == *"egg-query: <stdin>:1: not valid JSON"* ]]
  run -1 --separate-stderr sh -c '"$1/egg-query" --egg "$2" <"$3" | "$1/egg-extract" --egg "$2"' _ "$BIN" "$EGG" "$T/q.ndjson"
  [ "${#lines[@]}" -eq 3 ]
  [ "$(jq -r .handoff.text <<<"${lines[0]}")" = "" ]
  [[ "$(jq -r .handoff.text <<<"${lines[1]}")" == *"late_fee is computed"* ]]
}

@test "egg-save skips a bad line, saves the others and exits 1" {
  { record t1 "first" "ls" "a" "done"; echo '{"session":"s"}'; record t2 "second" "ls" "b" "done"; } >"$T/turns.ndjson"
  run -1 --separate-stderr "$BIN/egg-save" --egg "$EGG" "$T/turns.ndjson"
  [ "${#lines[@]}" -eq 2 ]
  [[ "$stderr" == *"turns.ndjson:2: turn: missing 'turn'; line skipped"* ]]
}

@test "egg-extract keeps its output within --budget" {
  save_sample
  query_line "late_fee" >"$T/q.ndjson"
  run -0 --separate-stderr sh -c '"$1/egg-query" --egg "$2" <"$3" | "$1/egg-extract" --egg "$2" --budget 1200' _ "$BIN" "$EGG" "$T/q.ndjson"
  n="$(jq -r '.handoff.text | length' <<<"$output")"
  [ "$n" -gt 0 ]
  [ "$n" -le 1200 ]
}

@test "bad usage exits 2" {
  run -2 "$BIN/egg-save"
  [[ "$output" == *"required: --egg"* ]]
  run -2 "$BIN/egg-query" --egg "$EGG" --bogus
  [[ "$output" == *"unrecognized arguments: --bogus"* ]]
  run -2 "$BIN/egg-query" --egg "$EGG" --top-k many
  run -2 "$BIN/egg-extract" --bogus
  run -2 "$BIN/egg-extract" --egg "$EGG" --budget 10
  [[ "$output" == *"--budget must be at least 200"* ]]
}

@test "a damaged store is a store error: exit 2, nothing on stdout" {
  save_sample
  damage_egg "$EGG"
  query_line "late_fee" >"$T/q.ndjson"
  run -2 --separate-stderr "$BIN/egg-query" --egg "$EGG" <"$T/q.ndjson"
  [ -z "$output" ]
  [[ "$stderr" == "egg-query: $EGG:"* ]]
}

@test "a reader that goes away: egg-save still commits every line it reads and exits 0, quietly; so does egg show" {
  for i in $(seq 1 200); do record "t$i" "where is handler_$i" "rg -n handler_$i src" "src/a.py:$i: def handler_$i():" "in src/a.py"; done >"$T/turns.ndjson"
  run -0 --separate-stderr bash -c 'set -o pipefail; "$1/egg-save" --egg "$2" <"$3" | head -c 100 >/dev/null' _ "$BIN" "$EGG" "$T/turns.ndjson"
  [ -z "$stderr" ]
  run -0 "$BIN/egg" fsck "$EGG"
  [[ "$output" == *", 200 turns,"* ]]
  # a turn whose output is larger than a pipe holds, shown into a reader that stops at once
  head -c 300000 /dev/zero | tr '\0' 'x' >"$T/big.txt"
  jq -cn --rawfile o "$T/big.txt" '{session:"s2", turn:"big", cwd:"", prompt:"show the big log",
    tools:[{name:"Bash", id:"c-big", input:{command:"cat big.log"}, output:$o}], answer:"it is big"}' >"$T/big.ndjson"
  "$BIN/egg-save" --egg "$EGG" <"$T/big.ndjson" >/dev/null
  key="$(query_line "show the big log" | "$BIN/egg-query" --egg "$EGG" --mode lexical --no-trace | jq -r '.hits[0].key')"
  run -0 --separate-stderr bash -c 'set -o pipefail; "$1/egg" show "$2" --egg "$3" | head -c 10' _ "$BIN" "$key" "$EGG"
  [ "${#output}" -eq 10 ]
  [ -z "$stderr" ]
}

@test "egg-extract without --egg reads the stores its hits name" {
  save_sample
  record t9 "where is the invoice total" "rg -n total src/" "src/invoice.py:3: def total(lines):" "total is in src/invoice.py" \
    | "$BIN/egg-save" --egg "$T/other.egg" >/dev/null
  printf '%s\n%s\n' "$(query_line "how is the late_fee calculated")" "$(query_line "where is the invoice total")" >"$T/q.ndjson"
  run -0 --separate-stderr sh -c '"$1/egg-query" --egg "$2" --egg "$3" <"$4" | "$1/egg-extract"' _ "$BIN" "$EGG" "$T/other.egg" "$T/q.ndjson"
  [ -z "$stderr" ]
  named="$output"
  [[ "$(jq -r .handoff.text <<<"${lines[0]}")" == *"late_fee is computed in src/billing.py, line 42"* ]]
  [[ "$(jq -r .handoff.text <<<"${lines[1]}")" == *"total is in src/invoice.py"* ]]
  run -0 sh -c '"$1/egg-query" --egg "$2" --egg "$3" <"$4" | "$1/egg-extract" --egg "$2" --egg "$3"' _ "$BIN" "$EGG" "$T/other.egg" "$T/q.ndjson"
  [ "$output" = "$named" ]  # the same as naming them
  # a proposed call has no hits to name its stores: it needs --egg, and says so
  run -1 --separate-stderr sh -c 'echo "{\"query\":{\"tool\":{\"name\":\"Bash\",\"input\":{\"command\":\"ls\"}}}}" | "$1/egg-extract"' _ "$BIN"
  [[ "$stderr" == *"<stdin>:1: a proposed call is matched against every stored call: name the stores with --egg"* ]]
  [ "$(jq -r .handoff.deny <<<"$output")" = "false" ]
}
