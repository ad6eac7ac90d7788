// An LD_PRELOAD shim for the negative controls and for counting the sync
// calls chipset makes. BC_SHIM selects the variant:
//   observe    pass every call through (counts only)
//   nodata     skip every data sync: sync_file_range, fdatasync, syncfs and
//              fsync of a regular file return 0 without doing anything, so
//              a file is renamed into place before its data is written
//   nodirsync  skip fsync of a directory: the new name is never made durable
// BC_SHIM_LOG names a file to which each process appends its counts at exit.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { OBSERVE, NODATA, NODIRSYNC };
static int mode = OBSERVE;
static long n_sfr, n_fdatasync, n_fsync_file, n_fsync_dir, n_syncfs, n_skipped;

__attribute__((constructor)) static void init(void) {
    const char *m = getenv("BC_SHIM");
    if (m && !strcmp(m, "nodata")) mode = NODATA;
    if (m && !strcmp(m, "nodirsync")) mode = NODIRSYNC;
}

__attribute__((destructor)) static void fini(void) {
    const char *log = getenv("BC_SHIM_LOG");
    if (!log) return;
    FILE *f = fopen(log, "a");
    if (!f) return;
    fprintf(f, "sync_file_range=%ld fdatasync=%ld fsync_file=%ld fsync_dir=%ld syncfs=%ld skipped=%ld\n",
            n_sfr, n_fdatasync, n_fsync_file, n_fsync_dir, n_syncfs, n_skipped);
    fclose(f);
}

static int is_dir(int fd) {
    struct stat st;
    return fstat(fd, &st) == 0 && S_ISDIR(st.st_mode);
}

int sync_file_range(int fd, off64_t off, off64_t n, unsigned int flags) {
    static int (*real)(int, off64_t, off64_t, unsigned int);
    __atomic_add_fetch(&n_sfr, 1, __ATOMIC_RELAXED);
    if (mode == NODATA) { __atomic_add_fetch(&n_skipped, 1, __ATOMIC_RELAXED); return 0; }
    if (!real) real = dlsym(RTLD_NEXT, "sync_file_range");
    return real(fd, off, n, flags);
}

int fdatasync(int fd) {
    static int (*real)(int);
    __atomic_add_fetch(&n_fdatasync, 1, __ATOMIC_RELAXED);
    if (mode == NODATA && !is_dir(fd)) { __atomic_add_fetch(&n_skipped, 1, __ATOMIC_RELAXED); return 0; }
    if (!real) real = dlsym(RTLD_NEXT, "fdatasync");
    return real(fd);
}

int fsync(int fd) {
    static int (*real)(int);
    int dir = is_dir(fd);
    __atomic_add_fetch(dir ? &n_fsync_dir : &n_fsync_file, 1, __ATOMIC_RELAXED);
    if ((mode == NODATA && !dir) || (mode == NODIRSYNC && dir)) {
        __atomic_add_fetch(&n_skipped, 1, __ATOMIC_RELAXED);
        return 0;
    }
    if (!real) real = dlsym(RTLD_NEXT, "fsync");
    return real(fd);
}

int syncfs(int fd) {
    static int (*real)(int);
    __atomic_add_fetch(&n_syncfs, 1, __ATOMIC_RELAXED);
    if (mode == NODATA) { __atomic_add_fetch(&n_skipped, 1, __ATOMIC_RELAXED); return 0; }
    if (!real) real = dlsym(RTLD_NEXT, "syncfs");
    return real(fd);
}
