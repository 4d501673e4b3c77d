#!/bin/sh
# tests/offline.sh CMD [ARG...]: run CMD in a network namespace that has only loopback.
#
# `make test` runs both suites through this, so a test, a host CLI or an Eggshell process
# that tries to reach the network fails here instead of passing quietly (loopback stays:
# the fake model servers and the manager's socket live there). Making a namespace needs
# root (CI runs as root); elsewhere, or with EGGSHELL_TEST_NETWORK=on, CMD runs as it is
# and a line says so.
if [ "${EGGSHELL_TEST_NETWORK:-}" != "on" ] && [ "$(id -u)" = 0 ] && command -v unshare >/dev/null 2>&1 \
  && unshare -n true 2>/dev/null; then
  echo "tests/offline.sh: running in a network namespace with only loopback: $*"
  # shellcheck disable=SC2016 # expanded by the inner shell
  exec unshare -n sh -c 'if command -v ip >/dev/null 2>&1; then ip link set lo up; else ifconfig lo up; fi || exit 1; exec "$@"' sh "$@"
fi
echo "tests/offline.sh: WARNING: running with the network (no network namespace: needs root and unshare): $*" >&2
exec "$@"
