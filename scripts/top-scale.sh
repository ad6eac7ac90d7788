#!/usr/bin/env bash
# Times `chipset top` at the issue's scale: 200 agents, 100,000 messages.
#
#   scripts/top-scale.sh [DIR]
#
# Builds the state once under DIR (default target/top-scale; a folder on
# another disk, a journalled ext4 image say, works too) with the console's
# `top` bench, then, with a release build of the binary:
#
# 1. first frame: `chipset top` in a 160x50 tmux session, from the start
#    of the session to the first capture-pane that shows all 200 agents;
#    then when the open requests (read in the background) are shown;
# 2. idle: the CPU time of that running `top` over CHIPSET_TOP_IDLE_SECS
#    (default 60) seconds, from /proc/PID/stat, once it has settled;
# 3. `chipset top --once 120x40`: one frame with everything read;
# 4. `chipset serve`: the dashboard's first page warm (curl, median of 7);
# 5. the bench's in-process figures (first frame, full first load, idle
#    rescan, a load after one change).
#
# Needs tmux. The figures are wall clock on whatever else the machine runs.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$(realpath -m "${1:-target/top-scale}")
idle=${CHIPSET_TOP_IDLE_SECS:-60}

cargo build -q --release -p chipset-cli
state=$(CHIPSET_TOP_STATE="$dir" CHIPSET_TOP_BUILD_ONLY=1 \
    cargo bench -q -p chipset-console --bench top | tail -n 1)
chipset="$PWD/target/release/chipset"
echo "state: $state ($(df --output=fstype "$state" | tail -n 1 | tr -d ' '))"

sock=$(mktemp -u /tmp/top-scale.XXXXXX)
t() { tmux -S "$sock" "$@"; }
trap 't kill-server 2>/dev/null || true; rm -f "$sock"' EXIT
now() { date +%s.%N; }
screen() { t capture-pane -p -t top; }

start=$(now)
t new-session -d -s top -x 160 -y 50 -- "$chipset" --root "$state" top --rescan 10s
until screen | grep -q '\[a\] Agents 200 '; do sleep 0.01; done
echo "top: first frame after $(echo "$(now) - $start" | bc) s"
until screen | grep -q '\[r\] Requests [1-9]'; do sleep 0.05; done
echo "top: open requests shown after $(echo "$(now) - $start" | bc) s"

pid=$(t list-panes -t top -F '#{pane_pid}')
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
hz=$(getconf CLK_TCK)
sleep 5 # the stamps of what the first read wrote settle
before=$(ticks)
sleep "$idle"
after=$(ticks)
cpu=$(echo "scale=3; ($after - $before) / $hz" | bc)
echo "top: idle for $idle s: $cpu s of CPU ($(echo "scale=3; 100 * $cpu / $idle" | bc) % of a core)"
t kill-server

TIMEFORMAT="top --once 120x40: %R s wall, %U s user, %S s system"
time "$chipset" --root "$state" top --once 120x40 >/dev/null

# The dashboard's first page, warm: seven requests after its first load.
log=$(mktemp)
"$chipset" --root "$state" serve --addr 127.0.0.1:0 2>"$log" &
serve=$!
trap 't kill-server 2>/dev/null || true; rm -f "$sock"; kill $serve 2>/dev/null || true; rm -f "$log"' EXIT
until grep -q 'dashboard at' "$log"; do sleep 0.05; done
url=$(sed -n 's/.*dashboard at \(http[^ ]*\).*/\1/p' "$log" | head -n 1)
curl -s -o /dev/null "$url" # the first, cold
for _ in 1 2 3 4 5 6 7; do
    curl -s -o /dev/null -w '%{time_total}\n' "$url"
done | sort -n | awk '{a[NR]=$1} END {printf "dashboard: first page warm, median of 7: %.1f ms (max %.1f ms)\n", a[4]*1000, a[7]*1000}'
kill "$serve"

CHIPSET_TOP_STATE="$dir" cargo bench -q -p chipset-console --bench top
