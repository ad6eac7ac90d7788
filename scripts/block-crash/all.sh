#!/bin/bash
# The full matrix: both filesystems, every workload, both orderings with
# chipset's default sync order, the observe variant (sync calls counted),
# and the negative controls; two runs at a time. Then report.py writes the
# results table. usage: all.sh [RESULTS.md]   (env as run.sh)
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
JOBS=${JOBS:-2}
S=$(date +%s)
{
  for fs in ext4 xfs; do
    for wl in mixed mail hookbus; do
      echo "$fs $wl default plain"; echo "$fs $wl default eager"
    done
    echo "$fs mixed observe plain"
    echo "$fs mixed nodata plain"; echo "$fs mixed nodirsync plain"
    echo "$fs mail nodata eager"; echo "$fs hookbus nodirsync eager"
  done
} | xargs -P "$JOBS" -L 1 "$HERE/run.sh"
echo "matrix wall time: $(( $(date +%s) - S )) s"
python3 "$HERE/report.py" "${1:-/dev/stdout}" "$(( $(date +%s) - S ))"
