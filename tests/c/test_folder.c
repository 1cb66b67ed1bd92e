/* test_folder.c - folder mode (hamer_folder_*) through the C API alone:
 * the plan of a fresh folder (order, hidden files, globs, a name clash),
 * one image computed with a photo job and its files, a failure recorded
 * in errors.jsonl with the image's size and mtime, the second open
 * skipping what is done and keeping the failure that stands, the lock,
 * and every error path (NULL arguments, missing folders, OUT = input, an
 * image not to be computed, a job-less call for a decoded image) a
 * negative code with a one-line message and nothing written.
 * tests/test_batch.py drives the same code through `hamer batch` and
 * Model.predict_folder on real checkpoints. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "format/image.h"
#include "hamer.h"

static char root[256];

static char *path_of(const char *rel) {
    static char buf[8][512];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", root, rel);
    return buf[k];
}

static void write_file(const char *rel, const char *text) {
    FILE *f = fopen(path_of(rel), "wb");
    if (f) fputs(text, f), fclose(f);
}

static int exists(const char *rel) { return access(path_of(rel), F_OK) == 0; }

static char *read_all(const char *rel) {
    FILE *f = fopen(path_of(rel), "rb");
    if (!f) return NULL;
    char *buf = calloc(1, 1 << 16);
    size_t n = fread(buf, 1, (1 << 16) - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

static void make_png(const char *rel, int w, int h) {
    hm_image img = {.w = w, .h = h, .rgb = malloc((size_t)w * h * 3)};
    for (int i = 0; i < w * h * 3; i++) img.rgb[i] = (uint8_t)(i * 37 % 251);
    hm_image_save_png(path_of(rel), &img);
    free(img.rgb);
}

static hamer_folder_params params_for(const char *out) {
    hamer_folder_params p = hamer_folder_default_params();
    p.input_dir = path_of("in");
    p.out_dir = out ? path_of(out) : NULL;
    p.boxes_dir = path_of("boxes");
    return p;
}

static void errors_paths(void) {
    hamer_folder *f = (hamer_folder *)1;
    CHECK(hamer_folder_open(NULL, &f) == HAMER_E_ARG && f == NULL && clean_error(HAMER_E_ARG));
    hamer_folder_params p = hamer_folder_default_params();
    CHECK(hamer_folder_open(&p, &f) == HAMER_E_ARG && f == NULL && clean_error(HAMER_E_ARG));
    p = params_for("out-missing-in");
    p.input_dir = path_of("no-such-folder");
    int rc = hamer_folder_open(&p, &f);
    CHECK(rc == HAMER_E_IO && f == NULL && clean_error(rc) && strstr(hamer_last_error(), "no-such-folder"));
    CHECK(!exists("out-missing-in"));   /* nothing written */
    p = params_for("in");
    rc = hamer_folder_open(&p, &f);
    CHECK(rc == HAMER_E_ARG && clean_error(rc) && strstr(hamer_last_error(), "must not be the input folder"));
    p = params_for("out");
    p.boxes_dir = path_of("no-boxes");
    rc = hamer_folder_open(&p, &f);
    CHECK(rc == HAMER_E_IO && clean_error(rc) && strstr(hamer_last_error(), "boxes folder"));
    write_file("blocker", "x");
    p = params_for("blocker/out");
    rc = hamer_folder_open(&p, &f);
    CHECK(rc == HAMER_E_IO && clean_error(rc) && strstr(hamer_last_error(), "output folder"));
    CHECK(hamer_folder_get_count(NULL) == 0);
    hamer_folder_image im;
    CHECK(hamer_folder_get_image(NULL, 0, &im) == HAMER_E_ARG);
    CHECK(hamer_folder_process(NULL, 0, NULL, NULL, NULL) == HAMER_E_ARG);
    hamer_folder_stats s;
    CHECK(hamer_folder_get_stats(NULL, &s) == HAMER_E_ARG);
    hamer_folder_close(NULL);   /* a no-op */
    char *t = hamer_name_escape("a\nb\\\xff.png");
    CHECK(t && !strcmp(t, "a\\x0ab\\\\\\xff.png"));
    hamer_free(t);
    CHECK(hamer_name_escape(NULL) == NULL && hamer_last_error_code() == HAMER_E_ARG);
}

/* The index of the image whose rel is `rel`, -1 if none. */
static int find(hamer_folder *f, const char *rel) {
    for (int i = 0; i < hamer_folder_get_count(f); i++) {
        hamer_folder_image im;
        if (hamer_folder_get_image(f, i, &im) == 0 && !strcmp(im.rel, rel)) return i;
    }
    return -1;
}

static void run_folder(hamer_state *st) {
    hamer_job *job = hamer_job_new(st, NULL, NULL);
    CHECK(job != NULL);
    hamer_folder_params p = params_for("out");
    hamer_folder *f = NULL;
    CHECK(hamer_folder_open(&p, &f) == HAMER_OK && f);
    if (!f) return;
    /* by name (bytes: '.' sorts before 'a'); b.png and b.txt (no glob): one
     * NAME, the first by name owns it; .hidden left out */
    CHECK(hamer_folder_get_count(f) == 4);
    int a = find(f, "a.png"), bp = find(f, "b.png"), bt = find(f, "b.txt"), bad = find(f, "bad.png");
    CHECK(a == 0 && bp == 1 && bt == 2 && bad == 3);
    hamer_folder_image im;
    CHECK(hamer_folder_get_image(f, bt, &im) == 0 && im.status == HAMER_FOLDER_FAILED &&
          !strcmp(im.error_stage, "name") && strstr(im.error_reason, "b.png") && im.result_path == NULL);
    CHECK(hamer_folder_get_image(f, 9, &im) == HAMER_E_ARG);
    /* another open of the same OUT: the lock */
    hamer_folder *g = NULL;
    int rc = hamer_folder_open(&p, &g);
    CHECK(rc == HAMER_E_IO && g == NULL && strstr(hamer_last_error(), "another hamer batch"));
    /* a.png computed with its files, NAME.json with the input record first */
    char *doc = NULL;
    CHECK(hamer_folder_process(f, a, job, NULL, &doc) == HAMER_OK && doc);
    const char *head = "{\"input\":{\"path\":\"a.png\",\"size\":";
    CHECK(doc && !strncmp(doc, head, strlen(head)));
    char *disk = read_all("out/a.json");
    CHECK(disk && doc && !strcmp(disk, doc));
    free(disk);
    hamer_free(doc);
    CHECK(hamer_folder_get_image(f, a, &im) == 0 && im.status == HAMER_FOLDER_COMPUTED && im.error_stage == NULL);
    /* not TODO any more; a decoded image needs a job */
    CHECK(hamer_folder_process(f, a, job, NULL, NULL) == HAMER_E_ARG && clean_error(HAMER_E_ARG));
    hamer_folder_decoded pre = {.rgb = (const uint8_t *)"x", .width = 1, .height = 1};
    CHECK(hamer_folder_process(f, bp, NULL, &pre, NULL) == HAMER_E_ARG);
    /* bad.png does not decode: FAILED, one line in errors.jsonl */
    CHECK(hamer_folder_process(f, bad, job, NULL, &doc) == HAMER_OK && doc == NULL);
    CHECK(hamer_folder_get_image(f, bad, &im) == 0 && im.status == HAMER_FOLDER_FAILED &&
          !strcmp(im.error_stage, "decode"));
    /* b.png's boxes file is missing: stage boxes */
    CHECK(hamer_folder_process(f, bp, job, NULL, NULL) == HAMER_OK);
    CHECK(hamer_folder_get_image(f, bp, &im) == 0 && !strcmp(im.error_stage, "boxes"));
    hamer_folder_stats s;
    CHECK(hamer_folder_get_stats(f, &s) == 0 && s.images == 4 && s.todo == 3 && s.computed == 1 && s.failed == 3 &&
          s.hands == 1 && s.skipped == 0);
    hamer_folder_close(f);
    char *errs = read_all("out/errors.jsonl");
    CHECK(errs && strstr(errs, "\"stage\":\"name\"") && strstr(errs, "\"stage\":\"decode\"") &&
          strstr(errs, "\"stage\":\"boxes\"") && strstr(errs, "\"mtime_ns\":"));
    free(errs);

    /* Again: a.png done, bad.png's decode failure and b.txt's clash stand, b.png retried */
    f = NULL;
    CHECK(hamer_folder_open(&p, &f) == HAMER_OK && f);
    if (f) {
        CHECK(hamer_folder_get_image(f, a, &im) == 0 && im.status == HAMER_FOLDER_SKIPPED && im.error_stage == NULL &&
              im.result_path && strstr(im.result_path, "out/a.json"));
        CHECK(hamer_folder_get_image(f, bad, &im) == 0 && im.status == HAMER_FOLDER_SKIPPED &&
              !strcmp(im.error_stage, "decode"));
        CHECK(hamer_folder_get_image(f, bp, &im) == 0 && im.status == HAMER_FOLDER_TODO && im.error_stage == NULL);
        CHECK(hamer_folder_get_image(f, bt, &im) == 0 && im.status == HAMER_FOLDER_SKIPPED &&
              !strcmp(im.error_stage, "name"));
        CHECK(hamer_folder_get_stats(f, &s) == 0 && s.skipped == 3 && s.failed_earlier == 2 && s.todo == 1);
        hamer_folder_close(f);
    }
    errs = read_all("out/errors.jsonl");
    CHECK(errs && strstr(errs, "\"stage\":\"decode\"") && !strstr(errs, "\"stage\":\"boxes\""));
    free(errs);

    /* Without OUT: nothing written, nothing skipped, the result handed back */
    p = params_for(NULL);
    p.globs = (const char *const[]){"a.*"};
    p.n_globs = 1;
    f = NULL;
    CHECK(hamer_folder_open(&p, &f) == HAMER_OK && hamer_folder_get_count(f) == 1);
    if (f) {
        doc = NULL;
        CHECK(hamer_folder_get_image(f, 0, &im) == 0 && im.status == HAMER_FOLDER_TODO && im.result_path == NULL);
        CHECK(hamer_folder_process(f, 0, job, NULL, &doc) == HAMER_OK && doc && strstr(doc, "\"hands\""));
        hamer_free(doc);
        hamer_folder_close(f);
    }
    hamer_job_free(job);
}

int main(void) {
    snprintf(root, sizeof root, "/tmp/hamer-test-folder-XXXXXX");
    if (!mkdtemp(root)) return 1;
    mkdir(path_of("in"), 0755);
    mkdir(path_of("boxes"), 0755);
    make_png("in/a.png", 64, 48);
    write_file("boxes/a.json", "[{\"bbox\": [4, 4, 40, 40], \"is_right\": true}]");
    make_png("in/b.png", 32, 32);
    write_file("in/b.txt", "not an image");
    write_file("in/bad.png", "\x89PNG not really");
    write_file("in/.hidden.png", "x");
    errors_paths();
    hamer_model_params mp = hamer_model_default_params();
    mp.no_cache = 1;
    hamer_model *m = hamer_model_load(check_tiny_model(), &mp);
    CHECK(m != NULL);
    hamer_state *st = m ? hamer_state_new(m, 4, 1) : NULL;
    if (st) run_folder(st);
    hamer_state_free(st);
    hamer_model_free(m);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", root);
    return check_summary();
}
