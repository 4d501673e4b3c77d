#!/usr/bin/env bats
# The POSIX bootstraps and scripts must stay shellcheck-clean and parse as plain sh.

setup() {
  REPO="$(cd "$BATS_TEST_DIRNAME/../.." && pwd)"
}

@test "shellcheck is available (CI installs it: apt-get install shellcheck)" {
  command -v shellcheck
}

@test "bin/* and install.sh are shellcheck-clean" {
  run shellcheck "$REPO"/bin/* "$REPO/install.sh" "$REPO/.ci/run"
  [ "$status" -eq 0 ] || { echo "$output"; false; }
}

@test "bin/* are POSIX sh and parse with sh -n" {
  for f in "$REPO"/bin/*; do
    head -n 1 "$f" | grep -qx '#!/bin/sh'
    sh -n "$f"
  done
}
