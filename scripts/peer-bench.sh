#!/bin/sh
# Runs chipset mail against nubos-pilot side by side (issue 15's goals):
# `cargo bench -p chipset-mail --bench peer`, alternating the two in one run.
#
#   scripts/peer-bench.sh /path/to/nubos-pilot        # a checkout
#   scripts/peer-bench.sh /path/to/nubos-pilot.git    # a bare mirror: HEAD is exported
#
# Environment: PEER_ROUNDS (default 5), PEER_FILL (default 10000), PEER_DIR
# (where the projects are made; default the system temp directory). Needs
# node on PATH. nubos-pilot's code never enters this repository.
set -eu
src=${1:-${NUBOS_PILOT_DIR:-}}
if [ -z "$src" ]; then
    echo "usage: $0 NUBOS_PILOT_CHECKOUT_OR_MIRROR" >&2
    exit 2
fi
if [ -f "$src/lib/messaging.cjs" ]; then
    dir=$src
else
    dir=$(mktemp -d)
    trap 'rm -rf "$dir"' EXIT
    git -C "$src" archive HEAD | tar -x -C "$dir"
fi
NUBOS_PILOT_DIR=$dir exec cargo bench -p chipset-mail --bench peer
