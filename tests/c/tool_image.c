/* tool_image - decode an image file with the library's decoder
 * (format/image.h), for tests/test_image_formats.py: runs under the
 * sanitizers like any C program (a Python process cannot load the
 * instrumented library).
 *
 *   tool_image IMAGE OUT.npz
 *
 * OUT.npz: member "rgb", uint8 [h, w, 3]. On stdout, once decoded, the
 * size the header declares (hm_image_header_size, what the server bounds a
 * body's pixels by before decoding): "header W H FORMAT", or "header none".
 * Errors: the library's one-line message on stderr ("tool_image:
 * MESSAGE"), exit 1 (2: usage).
 */
#include <stdio.h>
#include <stdlib.h>

#include "core/util.h"
#include "format/image.h"
#include "format/npy.h"

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: tool_image IMAGE OUT.npz\n");
        return 2;
    }
    hm_image img;
    int rc = hm_image_load(argv[1], &img);
    if (!rc) {
        hm_npz_writer *w = NULL;
        const int64_t shape[3] = {img.h, img.w, 3};
        /* one member "rgb" in an .npz: the writer the library has */
        rc = hm_npz_write_begin(argv[2], &w);
        if (!rc) rc = hm_npz_write_add(w, "rgb", HM_DT_U8, 3, shape, img.rgb);
        if (!rc) rc = hm_npz_write_finish(w);
        else if (w) hm_npz_write_abort(w);
        hm_image_free(&img);
    }
    if (!rc) {
        FILE *f = fopen(argv[1], "rb");
        uint8_t *buf = NULL;
        long n = -1;
        if (f && !fseek(f, 0, SEEK_END) && (n = ftell(f)) >= 0 && !fseek(f, 0, SEEK_SET) &&
            (buf = malloc((size_t)n + 1)) && fread(buf, 1, (size_t)n, f) == (size_t)n) {
            const char *fmt = NULL;
            long long hw = 0, hh = 0;
            if (hm_image_header_size(buf, (size_t)n, &fmt, &hw, &hh)) printf("header %lld %lld %s\n", hw, hh, fmt);
            else printf("header none\n");
        } else {
            fprintf(stderr, "tool_image: cannot read %s again\n", argv[1]);
            rc = 2;
        }
        free(buf);
        if (f) fclose(f);
        if (rc) return 2;
    }
    if (rc) {
        fprintf(stderr, "tool_image: %s\n", hm_errmsg());
        return 1;
    }
    return 0;
}
