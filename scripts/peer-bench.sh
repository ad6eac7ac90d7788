#!/bin/sh
# Runs chipset mail against nubos-pilot side by side (issue 15's goals):
# `cargo bench -p chipset-mail --bench peer`, alternating the two in one run.
#
#   scripts/peer-bench.sh /path/to/nubos-pilot        # a checkout
#   scripts/peer-bench.sh /path/to/nubos-pilot.git    # a bare mirror: HEAD is exported
#
# Environment: PEER_ROUNDS (default 5), PEER_FILL (default 10000), PEER_DIR
# (where the projects are made; default the system temp directory),
# PEER_ONLY (a comma-separated list of scenarios: gate, settled, inbox,
# archive, answered, sends), PEER_GATE (open requests in the gate and
# settled scenarios, default 10000), PEER_INBOX (messages in the inbox
# scenario, default 10000), PEER_GATE_ROUNDS (default 3), PEER_REPLIES
# (answered requests present in the answered scenario, default 1000);
# crates/mail/benches/peer.rs says
# what each scenario times. For a journalled ext4 figure, point PEER_DIR and
# TMPDIR at a loop-mounted image:
#
#   truncate -s 4G /tmp/jp.img && mkfs.ext4 -q /tmp/jp.img &&
#   mkdir -p /mnt/jp && mount -o loop /tmp/jp.img /mnt/jp
#   PEER_DIR=/mnt/jp TMPDIR=/mnt/jp scripts/peer-bench.sh ...
#
# Needs node on PATH. nubos-pilot's code never enters this repository.
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
