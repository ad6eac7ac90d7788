#!/bin/bash
# One block-level crash run: boot the guest on a blklogwrites disk, run a
# workload, replay the log at every crash point and check it.
# usage: run.sh FS WORKLOAD VARIANT [ORDER]
#   FS       ext4 | xfs | ext4nj (ext4 without a journal: chipset picks
#            FileThenDir there; a comparison, not the fast path)
#   WORKLOAD mixed | mail | hookbus  (workloads/NAME.sh)
#   VARIANT  default (chipset as shipped) | observe (the same, sync calls
#            counted) | nodata | nodirsync (negative controls, shim.c)
#   ORDER    plain (default) | eager (write-back and journal commits every
#            second or less: other orderings of the same writes)
# env: BC_DIR (work folder, as setup.sh), SUBSETS (subset states per flush,
#      default 4), SEED, REPLAY_ONLY=1 (check the last boot's log again),
#      BC_PROFILE (release, or debug as setup.sh was given), SMP (the
#      guest's processors, default 1; 2 lets a batch write its temps on
#      two threads, as on a user's machine).
# Prints one summary line; details in the run folder.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd); REPO=$(cd "$HERE/../.." && pwd)
W=${BC_DIR:-$REPO/target/block-crash}; W=$(cd "$W" && pwd)
FS=$1 WL=$2 VAR=$3 ORD=${4:-plain}
MARK=$((60 * 1024 * 1024))
D=$W/runs/$FS-$WL-$VAR-$ORD${SMP:+-smp$SMP}
if [ -n "${REPLAY_ONLY:-}" ]; then cd "$D"; S=$(date +%s.%N); B=$S; else
rm -rf "$D"; mkdir -p "$D"; cd "$D"
truncate -s 64M base.img
if [ "$FS" = ext4 ]; then mkfs.ext4 -F -q -b 4096 base.img 56M
elif [ "$FS" = ext4nj ]; then mkfs.ext4 -F -q -b 4096 -O ^has_journal base.img 56M
else TEST_DIR=1 TEST_DEV=1 QA_CHECK_FS=1 mkfs.xfs -q -f -d size=56m base.img; fi
cp base.img disk.img; : > disk.log     # QEMU will not start without the log file
S=$(date +%s.%N)
timeout 900 nice -n 10 qemu-system-x86_64 -accel tcg -nographic -no-reboot -m 512 -smp "${SMP:-1}" \
  -kernel "$W/vmlinuz" -initrd "$W/initrd.img" \
  -append "console=ttyS0 panic=-1 quiet bc_fs=$FS bc_workload=$WL bc_variant=$VAR bc_order=$ORD bc_mark=$MARK" \
  -drive if=none,id=d0,driver=blklogwrites,file.driver=file,file.filename=disk.img,log.driver=file,log.filename=disk.log,log-sector-size=512 \
  -device virtio-blk-pci,drive=d0 > console.txt 2>&1 || echo "qemu exit $?"
B=$(date +%s.%N)
grep -q '^GUEST: done' console.txt || { echo "guest did not finish"; tail -20 console.txt; exit 1; }
fi
nice -n 5 python3 "$HERE/replay.py" --base base.img --log disk.log --console console.txt \
  --fs "$FS" --mark $MARK --work "$D/work" --chipset "$REPO/target/${BC_PROFILE:-release}/chipset" \
  --subsets "${SUBSETS:-4}" --seed "${SEED:-31}" --summary summary.json > replay.txt
E=$(date +%s.%N)
rm -rf "$D/work"
python3 - "$D" "$FS" "$WL" "$VAR" "$ORD${SMP:+/smp$SMP}" "$S" "$B" "$E" <<'PY'
import json, sys
d, fs, wl, var, order, s, b, e = sys.argv[1:]
j = json.load(open(d + '/summary.json')); st = j['stats']
st.update(fs=fs, workload=wl, variant=var, order=order,
          boot_s=round(float(b) - float(s), 1), replay_s=round(float(e) - float(b), 1))
json.dump(j, open(d + '/summary.json', 'w'), indent=1)
print(f"{fs:4} {wl:7} {var:9} {order:5} ops={st['ops']} acked={st['acked']} points={st['points']} "
      f"images={st['images']} violating_points={st['violating_points']} violations={st['violations']} "
      f"fsck_bad={st['fsck_bad']} guest={st['boot_s']}s replay={st['replay_s']}s")
# Exit 1 when the run disagrees with its variant: a violation under chipset's
# own order, or a negative control that nothing caught.
control = var in ('nodata', 'nodirsync')
if bool(st['violating_points']) != control:
    print('UNEXPECTED: ' + ('the control was not caught' if control else 'violations with the default order'))
    sys.exit(1)
PY
