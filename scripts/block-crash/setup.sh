#!/bin/bash
# One-time setup for the block-level crash test: packages, a Debian guest
# kernel and its modules, the release chipset binary with its shared
# libraries, the mark tool, the LD_PRELOAD shim, and the initramfs.
# Work folder: $BC_DIR (default target/block-crash). Runs as root.
# Set BC_NO_APT=1 to skip apt-get, BC_NO_BUILD=1 to take the binaries as built,
# BC_PROFILE=debug to use the debug build (what `cargo test` leaves) instead.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd); REPO=$(cd "$HERE/../.." && pwd)
W=${BC_DIR:-$REPO/target/block-crash}; mkdir -p "$W"; cd "$W"; W=$(pwd)

if [ -z "${BC_NO_APT:-}" ]; then
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    qemu-system-x86 busybox-static xfsprogs e2fsprogs gcc libc6-dev
fi

# The guest kernel: Debian's cloud kernel, unpacked, not installed.
if [ ! -e vmlinuz ]; then
  KPKG=$(apt-cache depends linux-image-cloud-amd64 | awk '/Depends: linux-image-6/{print $2}')
  rm -rf debs kpkg; mkdir -p debs
  (cd debs && apt-get download "$KPKG")
  dpkg-deb -x debs/"${KPKG}"_*.deb kpkg
  cp kpkg/boot/vmlinuz-* vmlinuz
fi
MODS=$(echo kpkg/lib/modules/*)
P=${BC_PROFILE:-release}; FLAG=$([ "$P" = release ] && echo --release || true)

if [ -z "${BC_NO_BUILD:-}" ]; then
  (cd "$REPO" && nice -n 5 cargo build $FLAG -p chipset-cli \
    && nice -n 5 cargo build $FLAG -p chipset-mail --example send_batch)
fi
gcc -O2 -Wall -static -o mark "$HERE/mark.c"
gcc -O2 -Wall -shared -fPIC -o bc-shim.so "$HERE/shim.c" -ldl

rm -rf initrd; mkdir -p initrd/{bin,proc,sys,dev,mnt,tmp,data,lib/mod,workloads}
cp /bin/busybox mark initrd/bin/
cp "$REPO/target/$P/chipset" initrd/bin/chipset
cp "$REPO/target/$P/examples/send_batch" initrd/bin/send_batch
# A debug build carries ~200 MB of debug info the guest does not need.
[ "$P" = release ] || strip --strip-debug initrd/bin/chipset initrd/bin/send_batch
cp bc-shim.so initrd/lib/
# The binaries' shared libraries (and the shim's), at the paths ldd names.
for lib in $( (ldd initrd/bin/chipset; ldd initrd/bin/send_batch; ldd bc-shim.so) | grep -o '/[^ ]*' | sort -u); do
  mkdir -p "initrd$(dirname "$lib")"; cp -L "$lib" "initrd$lib"
done
for m in virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci virtio_blk libcrc32c xfs; do
  cp "$(find "$MODS" -name "$m.ko" | head -1)" initrd/lib/mod/
done
cp "$HERE/init" initrd/init; chmod +x initrd/init
cp "$HERE"/workloads/*.sh initrd/workloads/
# Message bodies that span many blocks.
python3 -c "
import random; r = random.Random(31)
for n in (100, 200):
    open('initrd/data/body-%dk.txt' % n, 'w').write(''.join(r.choice('abcdefghij klmnop\n') for _ in range(n * 1000)))"
(cd initrd && find . | busybox cpio -o -H newc 2>/dev/null | gzip -1) > initrd.img
echo "setup done: $W (initrd $(du -h initrd.img | cut -f1), kernel $(basename "$MODS"))"
