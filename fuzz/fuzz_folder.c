/* fuzz_folder - what folder mode reads back from an output folder that
 * anyone may have edited: NAME.json's "input" record (rule 3: whose image
 * owns the name; the escaped path decoded by hm_name_bytes) and the lines
 * of errors.jsonl (rule 5: which failures stand), through hamer_folder_open
 * on a scratch folder. The input is split at its first NUL: NAME.json,
 * then errors.jsonl. Also the names' round trip: hm_name_bytes undoes
 * hm_name_text for any bytes.
 */
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "core/names.h"
#include "hamer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char root[64], json_path[128], errors_path[128], in_dir[96], out_dir[96];

static void put(const char *path, const uint8_t *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (n && fwrite(p, 1, n, f) != n) abort();
    fclose(f);
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

/* The scratch folder goes with the process (test_regression runs every
 * input in a process of its own). */
static void cleanup(void) {
    if (root[0]) nftw(root, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void setup(void) {
    snprintf(root, sizeof root, "/tmp/hamer-fuzz-folder-XXXXXX");
    if (!mkdtemp(root)) abort();
    atexit(cleanup);
    snprintf(in_dir, sizeof in_dir, "%s/in", root);
    snprintf(out_dir, sizeof out_dir, "%s/out", root);
    mkdir(in_dir, 0755), mkdir(out_dir, 0755);
    char p[160];
    /* two images of one NAME (a), one of its own (b) */
    snprintf(p, sizeof p, "%s/a.png", in_dir), put(p, (const uint8_t *)"x", 1);
    snprintf(p, sizeof p, "%s/a.jpg", in_dir), put(p, (const uint8_t *)"xy", 2);
    snprintf(p, sizeof p, "%s/b.png", in_dir), put(p, (const uint8_t *)"xyz", 3);
    snprintf(json_path, sizeof json_path, "%s/a.json", out_dir);
    snprintf(errors_path, sizeof errors_path, "%s/errors.jsonl", out_dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!root[0]) setup();
    const uint8_t *cut = memchr(data, 0, size);
    size_t n1 = cut ? (size_t)(cut - data) : size;
    put(json_path, data, n1);
    put(errors_path, cut ? cut + 1 : data, cut ? size - n1 - 1 : 0);
    hamer_folder_params p = hamer_folder_default_params();
    p.input_dir = in_dir, p.out_dir = out_dir;
    p.render = size & 1, p.vertices = size & 2;
    hamer_folder *f = NULL;
    if (hamer_folder_open(&p, &f) == HAMER_OK) {
        int owners = 0;
        for (int i = 0; i < hamer_folder_get_count(f); i++) {
            hamer_folder_image im;
            if (hamer_folder_get_image(f, i, &im)) __builtin_trap();
            if (im.status == HAMER_FOLDER_COMPUTED) __builtin_trap();   /* nothing ran */
            owners += strncmp(im.rel, "a.", 2) == 0 && !(im.error_stage && !strcmp(im.error_stage, "name"));
        }
        if (hamer_folder_get_count(f) != 3 || owners != 1) __builtin_trap();   /* one image owns NAME a */
        hamer_folder_close(f);
    }
    /* the names' round trip */
    char *bytes = malloc(n1 + 1);
    if (!bytes) return 0;
    memcpy(bytes, data, n1);
    bytes[n1] = 0;
    char *t = hm_name_text(bytes), *back = t ? hm_name_bytes(t) : NULL;
    if (t && (!back || strcmp(back, bytes))) __builtin_trap();
    free(t), free(back), free(bytes);
    return 0;
}
