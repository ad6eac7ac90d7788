// mark DEV OFFSET_BYTES INDEX: writes one 4 KiB block "ACKMARK <INDEX>" with
// O_DIRECT to the raw device DEV at OFFSET_BYTES + INDEX * 4096, outside the
// filesystem. The guest cannot write dm-log-writes marks into QEMU's
// blklogwrites log, so where this write lands in the log is the moment the
// operation INDEX was acknowledged. No flush: the mark must not add a
// durability point of its own.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: mark DEV OFFSET_BYTES INDEX\n");
        return 2;
    }
    long long off = strtoll(argv[2], 0, 0);
    long idx = strtol(argv[3], 0, 0);
    void *buf;
    if (posix_memalign(&buf, 4096, 4096)) return 1;
    memset(buf, 0, 4096);
    snprintf(buf, 4096, "ACKMARK %ld", idx);
    int fd = open(argv[1], O_WRONLY | O_DIRECT);
    if (fd < 0) {
        fprintf(stderr, "mark: open %s: %s\n", argv[1], strerror(errno));
        return 1;
    }
    if (pwrite(fd, buf, 4096, off + (long long)idx * 4096) != 4096) {
        fprintf(stderr, "mark: write: %s\n", strerror(errno));
        return 1;
    }
    return close(fd) ? 1 : 0;
}
