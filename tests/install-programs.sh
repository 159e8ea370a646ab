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
# prometheus and promtool (the dashboard and alert rules tests), without what Debian recommends
# with it (prometheus-node-exporter, a service of its own)
bare=()
have prometheus || bare+=(prometheus)
[ ${#need[@]} -eq 0 ] && [ ${#bare[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing from Debian's packages: ${need[*]} ${bare[*]}"
    # The tests start each program on loopback with their own configuration: no system service
    # may start (prometheus's would scrape and store on a CI machine with systemd). A policy-rc.d
    # that refuses every start, for the install only, unless one is already there.
    policy=/usr/sbin/policy-rc.d
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\n# tests/install-programs.sh: no service starts while it installs\nexit 101\n' >"$policy"
        chmod 755 "$policy"
        trap 'rm -f "$policy"' EXIT
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    if { [ ${#need[@]} -eq 0 ] || apt-get install -y -qq "${need[@]}" >/dev/null; } &&
        { [ ${#bare[@]} -eq 0 ] || apt-get install -y -qq --no-install-recommends "${bare[@]}" >/dev/null; }; then
        exit 0
    fi
fi
need+=("${bare[@]}")
echo "not installed: ${need[*]} (Debian packages: apt-get install ${need[*]});" \
    "the tests that need them skip"
