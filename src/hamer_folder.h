/* hamer_folder.h - what the two files of folder mode share (the public
 * side is include/hamer.h's hamer_folder_*): the folder, its images, and
 * the steps src/hamer_folder_plan.c does for src/hamer_folder.c. Not
 * installed; not part of the library's interface. */
#ifndef HM_HAMER_FOLDER_H
#define HM_HAMER_FOLDER_H

#include <pthread.h>
#include <stddef.h>
#include <sys/types.h>
#include <time.h>

#include "hamer.h"

/* Boxes files are JSON documents of at most 64 hands: far below this. */
#define FOLDER_BOXES_FILE_MAX (64u << 20)

typedef struct {
    char *path;      /* the image file, as the OS names it */
    char *rel;       /* its path below the input folder */
    char *name;      /* rel, escaped (rule 1): NAME.json's "input" */
    char *shown;     /* path, escaped: errors.jsonl and messages */
    char *out_dir;   /* OUT mirrored (NULL without OUT) */
    char *stem;      /* OUT/.../NAME (NULL without OUT) */
    char *json;      /* OUT/.../NAME.json (NULL without OUT) */
    char *boxes;     /* boxes_dir: D/.../NAME.json */
    struct timespec mtime;
    long long size;
    char *clash;     /* rule 3: rel of the image that owns its NAME, when another one does */
    int done;        /* rule 4: complete (computed unless force) */
    hamer_folder_status status;
    const char *stage;  /* the failure recorded (static strings) */
    char *reason;       /* escaped */
} item;

/* The folders seen by the scan (rule 2): an open-addressing hash set of
 * (device, inode). */
typedef struct {
    dev_t dev;
    ino_t ino;
    int used;
} dir_id;

typedef struct {
    dir_id *v;
    size_t n, cap; /* cap: 0 or a power of 2 */
} dir_set;

/* errors.jsonl of an earlier run: one record per line. */
typedef struct {
    char *path, *stage, *reason, *line;
    long long size, mtime_ns;
    int keep;
} err_rec;

struct hamer_folder {
    char *input_dir, *out_dir, *boxes_dir;
    char **globs;
    int n_globs;
    hamer_folder_params p;      /* the flags; its strings are the copies above */
    item *v;
    size_t n, cap;
    dir_set seen;               /* folders scanned, or not to be (the output and boxes folders) */
    size_t entries;             /* names read so far */
    char *errors_path;
    int errfd, lockfd;          /* -1: none */
    pthread_mutex_t mu;         /* errfd and stats */
    hamer_folder_stats stats;
};

/* asprintf; NULL when out of memory. */
char *hm_folder_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A time in nanoseconds. */
long long hm_folder_ns(struct timespec t);
/* An error whose message quotes a name (escaped, rule 1): fmt has two %s,
 * the name and extra ("" when NULL). Returns code. */
int hm_folder_fail_named(int code, const char *fmt, const char *name, const char *extra);
/* dir/name as Python's os.path.join makes it. */
char *hm_folder_path_join(const char *dir, const char *name);
/* 1 when (dev, ino) was not in the set (now it is), 0 when it was, -1 out of memory. */
int hm_folder_dir_add(dir_set *s, dev_t dev, ino_t ino);
/* Rule 2: the files of dir (rel below the input folder, depth folders
 * down) appended to f. 0 or a negative code with the message set. */
int hm_folder_scan(hamer_folder *f, const char *dir, const char *rel, int depth);
/* Rules 3 and 4 for every image: clash, done. 0 or a negative code. */
int hm_folder_plan_stems(hamer_folder *f);
/* Rule 5: what is left to do, the earlier failures that stand,
 * errors.jsonl rewritten to them and opened for this run's lines. */
int hm_folder_plan_todo(hamer_folder *f);
/* Image it failed at stage: its status and reason, a line of errors.jsonl. */
void hm_folder_record_error(hamer_folder *f, item *it, const char *stage, const char *reason);

#endif
