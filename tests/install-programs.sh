#!/usr/bin/env bash
# The system programs the tests start on loopback, from Debian's packages (make test runs this).
# Installed where this user may (root with apt-get); else named here, and the tests that need
# one skip with a message naming it, except under CI=true, where they fail.
set -u
have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ]; }
need=()
have nginx || need+=(nginx-light)
have redis-server || need+=(redis-server)
have openssl || need+=(openssl)
have systemd-analyze || need+=(systemd)
have wrk || need+=(wrk)
have valgrind || need+=(valgrind)
have npm || need+=(nodejs npm)
have prometheus || need+=(prometheus)  # and promtool: the dashboard and alert rules tests
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing from Debian's packages: ${need[*]}"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null && exit 0
fi
echo "not installed: ${need[*]} (Debian packages: apt-get install ${need[*]});" \
    "the tests that need them skip"
