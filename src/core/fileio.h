/* fileio.h - outputs that are never half-written and never destroy what
 * was there.
 *
 * A file is written to a temp file in the directory of its final target
 * (a symlink is followed to that target; the link itself stays), fsync'd,
 * and renamed over the target only when complete. A failure at any step
 * removes the temp file and nothing else: the previous file, the link, a
 * device node are untouched. A target that exists and is not a regular
 * file (a directory, /dev/full, a FIFO) is refused before anything is
 * created.
 *
 * Commands with several outputs open and finish all of them first and
 * commit (rename) them last, so that either all are replaced or the
 * caller knows exactly which were.
 *
 * Errors are HM_E_IO (or HM_E_NOMEM) with a message naming the path and
 * the reason: "cannot create 'out/x.npz': Is a directory".
 */
#ifndef HM_FILEIO_H
#define HM_FILEIO_H

#include <stddef.h>
#include <stdio.h>

typedef struct {
    char *path;     /* as the caller named it (for messages) */
    char *target;   /* the file that will be replaced: path with symlinks followed */
    char *tmp;      /* the temp file being written; NULL once committed or aborted */
    FILE *f;        /* open while writing; NULL after hm_outfile_finish */
    int failed;     /* a write failed: finish reports it */
} hm_outfile;

/* Create the temp file for path. On error nothing exists and o is zeroed. */
int hm_outfile_open(hm_outfile *o, const char *path);
/* Append n bytes (buffered; errors are reported by hm_outfile_finish too). */
int hm_outfile_write(hm_outfile *o, const void *data, size_t n);
/* Flush, fsync and close the temp file; it is complete but not yet in
 * place. On error the temp file is removed. */
int hm_outfile_finish(hm_outfile *o);
/* Rename the finished temp file over the target and sync the directory.
 * On error the temp file is removed and the target is as before. */
int hm_outfile_commit(hm_outfile *o);
/* Remove the temp file (if any) and free o; the target is untouched. Safe
 * on a zeroed, committed or already aborted o. */
void hm_outfile_abort(hm_outfile *o);

/* open + write + finish + commit. */
int hm_file_write_atomic(const char *path, const void *data, size_t n);

/* open(path) for reading that does not block on a FIFO or a device
 * (O_NONBLOCK, O_CLOEXEC; a regular file reads as usual): the caller then
 * refuses anything fstat does not call regular. -1 with errno on failure. */
int hm_open_read(const char *path);
/* The same as a stdio stream, for a regular file only: NULL with errno set
 * (EINVAL for a FIFO, a device or a directory) otherwise. Model files are
 * read this way, so a FIFO in their place is refused at once instead of
 * blocking the load. */
FILE *hm_fopen_regular(const char *path);

/* 1 if a and b name the same file (after symlinks; for a path that does
 * not exist yet, the same directory entry), else 0. */
int hm_path_same(const char *a, const char *b);

#endif
