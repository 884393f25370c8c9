/*
 * core/mw_file.h — output files that appear whole or not at all, and the
 * release of pages of a read-only mapping that are done with.
 *
 * Atomic output (struct mw_outfile): mw_outfile_open creates PATH.tmp.XXXXXX
 * beside PATH (XXXXXX: 6 characters from [A-Za-z0-9], like mkstemp's) with
 * open(O_CREAT | O_EXCL, 0666), so the kernel applies the process umask (and
 * a default ACL) exactly as for any other new file — the process-wide umask
 * is never read or changed. The caller writes; mw_outfile_commit fsyncs,
 * closes, renames onto PATH and fsyncs the directory; mw_outfile_discard (or
 * a failed commit) removes the temp file. Nothing appears under PATH unless
 * commit succeeded, and an existing file there stays intact until then.
 *
 * The temp name is what the front end's signal handlers look for
 * (tools/cmd_signals.c): a regular file open for writing whose name ends in
 * ".tmp." + 6 characters is an unfinished output and is removed on SIGINT,
 * SIGTERM, SIGHUP and SIGBUS. The fd stays open read-write until commit or
 * discard, so every unfinished output of the process is found there; there
 * is no registry (no global state).
 *
 * I/O errors: MW_E_NOSPACE for ENOSPC / EFBIG / EDQUOT, MW_E_IO otherwise;
 * err names PATH (the final name) and the call that failed ("write: ...").
 */
#ifndef MW_FILE_H
#define MW_FILE_H

#include "core/mw.h"

struct mw_outfile {
    int fd;     /* open read-write until commit or discard; -1 after */
    char *path; /* the final name */
    char *tmp;  /* the temp name while it exists; NULL after commit/discard */
};

/* Zero-initialised or after discard: nothing to release. */
#define MW_OUTFILE_INIT {.fd = -1, .path = NULL, .tmp = NULL}

/* Create the temp file beside path. On failure nothing is left behind and
 * *f needs no discard (it is safe to call). */
enum mw_status mw_outfile_open(struct mw_outfile *f, const char *path, struct mw_err *err);
/* write() all n bytes at the file position (EINTR retried). */
enum mw_status mw_outfile_write(struct mw_outfile *f, const void *p, size_t n, struct mw_err *err);
/* pwrite() all n bytes at offset off; `what` names the step in errors. */
enum mw_status mw_outfile_pwrite(struct mw_outfile *f, const void *p, size_t n, uint64_t off,
                                 const char *what, struct mw_err *err);
/* fsync, close, rename onto the final name, fsync the directory (best
 * effort). On failure the temp file is removed. Either way *f is released
 * (mw_outfile_discard is then a no-op). */
enum mw_status mw_outfile_commit(struct mw_outfile *f, struct mw_err *err);
/* Close and remove the temp file if any; free the names. NULL-safe and
 * idempotent. */
void mw_outfile_discard(struct mw_outfile *f);

/* The whole of d[0..n) to path, atomically (open, write, commit). */
enum mw_status mw_file_write_atomic(const char *path, const void *d, size_t n,
                                    struct mw_err *err);

/* The MW_E_IO / MW_E_NOSPACE error for errno value e after step `what`,
 * naming path: "what: strerror(e)". */
enum mw_status mw_file_errno_fail(struct mw_err *err, const char *path, int e, const char *what);

/* All n bytes at offset off of fd, retrying short transfers and EINTR (in
 * chunks of at most 1 GiB). Errors name path and the byte offset:
 * mw_file_errno_fail's codes (a write that makes no progress is ENOSPC:
 * MW_E_NOSPACE); a read past the end of the file is MW_E_TRUNC. */
enum mw_status mw_pwrite_all(int fd, const void *p, uint64_t n, uint64_t off, const char *path,
                             struct mw_err *err);
enum mw_status mw_pread_all(int fd, void *p, uint64_t n, uint64_t off, const char *path,
                            struct mw_err *err);

/* Give back the pages of a read-only (MAP_PRIVATE or MAP_SHARED, never
 * written) file mapping that lie wholly inside [base + from, base + to): they
 * are dropped from this process's resident set (madvise MADV_DONTNEED; the
 * file's page cache is untouched, and a later read faults the same bytes back
 * in). map_base is the start of the mapping (page-aligned). Pages that are
 * only partly inside the range are kept: see mw_file.c for why. */
void mw_map_drop(const void *map_base, uint64_t map_size, uint64_t from, uint64_t to);

#endif /* MW_FILE_H */
