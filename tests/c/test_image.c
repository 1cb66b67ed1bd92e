/* test_image - JPEG/PNG decoding (round trips, every truncation, byte flips,
 * EXIF orientation, size limits, progressive scan limits), box validation
 * and basic crops. */
#include "format/image.h"
#include "pipeline/preprocess.h"
#include "core/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jpeglib.h>
#include <zlib.h>

#include "check.h"

/* A failure with a one-line message. */
/* Decode from an exactly sized heap copy, so ASan sees any overread. */
static int decode_copy(const uint8_t *b, size_t n, hm_image *im) {
    uint8_t *p = malloc(n ? n : 1);
    if (n) memcpy(p, b, n);
    hm_errclear();
    int rc = hm_image_decode(p, n, "test", im);
    free(p);
    return rc;
}

static hm_image make_image(int w, int h, unsigned seed) {
    hm_image im = {w, h, hm_alloc((size_t)w * h * 3)};
    for (int i = 0; i < w * h * 3; i++) {
        seed = seed * 1103515245u + 12345u;
        im.rgb[i] = (uint8_t)((seed >> 16) & 255);
    }
    return im;
}

/* JPEG bytes of `im` (quality 90), with an optional APP1 block; progressive
 * with libjpeg's standard progression (10 scans for colour). */
static uint8_t *encode_jpeg_ex(const hm_image *im, const uint8_t *app1, unsigned app1_len, int grey, int progressive,
                               size_t *len) {
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr e;
    unsigned char *buf = NULL;
    unsigned long n = 0;
    c.err = jpeg_std_error(&e);
    jpeg_create_compress(&c);
    jpeg_mem_dest(&c, &buf, &n);
    c.image_width = (JDIMENSION)im->w;
    c.image_height = (JDIMENSION)im->h;
    c.input_components = 3;
    c.in_color_space = JCS_RGB;
    jpeg_set_defaults(&c);
    if (grey) jpeg_set_colorspace(&c, JCS_GRAYSCALE);
    jpeg_set_quality(&c, 90, TRUE);
    if (progressive) jpeg_simple_progression(&c);
    jpeg_start_compress(&c, TRUE);
    if (app1) jpeg_write_marker(&c, JPEG_APP0 + 1, app1, app1_len);
    for (int y = 0; y < im->h; y++) {
        JSAMPROW row = im->rgb + (size_t)y * im->w * 3;
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    *len = n;
    return buf;
}

static uint8_t *encode_jpeg(const hm_image *im, const uint8_t *app1, unsigned app1_len, int grey, size_t *len) {
    return encode_jpeg_ex(im, app1, app1_len, grey, 0, len);
}

/* The SOS segment (marker included) of the last scan of component `id`
 * alone in j; its length in *hlen. NULL if there is none. */
static const uint8_t *last_scan_of(const uint8_t *j, size_t n, int id, size_t *hlen) {
    const uint8_t *found = NULL;
    size_t i = 2;
    while (i + 4 <= n && j[i] == 0xFF && j[i + 1] != 0xD9) {
        size_t seg = (size_t)j[i + 2] << 8 | j[i + 3];
        if (j[i + 1] == 0xDA) {
            if (j[i + 4] == 1 && j[i + 5] == id) found = j + i, *hlen = 2 + seg;
            /* Skip the entropy-coded data: up to a marker that is not a
             * stuffed 0xFF00 or a restart. */
            for (i += 2 + seg; i + 1 < n && !(j[i] == 0xFF && j[i + 1] && (j[i + 1] < 0xD0 || j[i + 1] > 0xD7)); i++) {}
        } else {
            i += 2 + seg;
        }
    }
    return found;
}

/* j with `copies` more copies of the scan header h (no data: empty scans)
 * before its EOI (malloc'd). */
static uint8_t *add_empty_scans(const uint8_t *j, size_t n, const uint8_t *h, size_t hlen, int copies, size_t *len) {
    *len = n + (size_t)copies * hlen;
    uint8_t *b = malloc(*len);
    memcpy(b, j, n - 2);
    for (int k = 0; k < copies; k++) memcpy(b + n - 2 + (size_t)k * hlen, h, hlen);
    memcpy(b + *len - 2, "\xFF\xD9", 2);
    return b;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Progressive JPEGs: the standard progression decodes (to the pixels of the
 * same image coded baseline); empty scans are refused past 256 scans or 64
 * passes over the blocks, before the work is done, and accepted below. */
static void test_jpeg_scans(void) {
    hm_image im = make_image(512, 384, 5), base, prog, t;
    size_t blen, plen, hlen, len;
    uint8_t *bj = encode_jpeg_ex(&im, NULL, 0, 0, 0, &blen), *pj = encode_jpeg_ex(&im, NULL, 0, 0, 1, &plen);
    CHECK(decode_copy(bj, blen, &base) == HM_OK && decode_copy(pj, plen, &prog) == HM_OK);
    CHECK(prog.rgb && base.rgb && prog.w == 512 && prog.h == 384 && !memcmp(prog.rgb, base.rgb, (size_t)512 * 384 * 3));
    /* Luma refinement scans: 4/6 of the blocks each (4:2:0), 20,000 of them
     * (200 KB): refused on the work bound, at about the 90th scan. */
    const uint8_t *y = last_scan_of(pj, plen, 1, &hlen);
    CHECK(y != NULL);
    if (y) {
        uint8_t *b = add_empty_scans(pj, plen, y, hlen, 20000, &len);
        double t0 = now_s();
        int rc = decode_copy(b, len, &t);
        CHECK(rc == HM_E_UNSUPPORTED && clean_error(rc) && strstr(hm_errmsg(), "times the image's blocks") && !t.rgb);
        CHECK(now_s() - t0 < 2.0);
        free(b);
    }
    /* Chroma scans (1/6 of the blocks each): 200 more decode (libjpeg
     * decodes the first block of an empty scan from zero bits: not
     * compared); 300 more pass the scan limit. */
    const uint8_t *cb = last_scan_of(pj, plen, 2, &hlen);
    CHECK(cb != NULL);
    if (cb) {
        uint8_t *b = add_empty_scans(pj, plen, cb, hlen, 200, &len);
        CHECK(decode_copy(b, len, &t) == HM_OK && t.rgb && t.w == 512 && t.h == 384);
        hm_image_free(&t);
        free(b);
        b = add_empty_scans(pj, plen, cb, hlen, 300, &len);
        int rc = decode_copy(b, len, &t);
        CHECK(rc == HM_E_UNSUPPORTED && clean_error(rc) && strstr(hm_errmsg(), "more than 256 scans") && !t.rgb);
        free(b);
    }
    hm_image_free(&base);
    hm_image_free(&prog);
    hm_image_free(&im);
    free(bj);
    free(pj);
}

/* "Exif\0\0" + a TIFF header and IFD0 holding only Orientation = o. */
static unsigned exif_block(uint8_t *b, int o, int big_endian) {
    static const uint8_t le[] = {'E', 'x', 'i', 'f', 0, 0, 'I', 'I', 42, 0, 8, 0, 0, 0, 1, 0,
                                 0x12, 1, 3, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    static const uint8_t be[] = {'E', 'x', 'i', 'f', 0, 0, 'M', 'M', 0, 42, 0, 0, 0, 8, 0, 1,
                                 1, 0x12, 0, 3, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0};
    memcpy(b, big_endian ? be : le, sizeof le);
    if (big_endian) b[6 + 8 + 2 + 8 + 1] = (uint8_t)o;
    else b[6 + 8 + 2 + 8] = (uint8_t)o;
    return sizeof le;
}

static void test_png(void) {
    hm_image im = make_image(37, 23, 1), back;
    uint8_t *png;
    size_t len;
    CHECK(hm_image_encode_png(&im, &png, &len) == HM_OK);
    CHECK(decode_copy(png, len, &back) == HM_OK);
    CHECK(back.w == 37 && back.h == 23 && back.rgb && !memcmp(back.rgb, im.rgb, 37 * 23 * 3));
    hm_image_free(&back);
    /* every truncation fails cleanly */
    int bad = 0;
    for (size_t n = 0; n < len; n++) {
        hm_image t;
        int rc = decode_copy(png, n, &t);
        if (!clean_error(rc) || t.rgb) bad++;
        hm_image_free(&t);
    }
    CHECK(bad == 0);
    /* byte flips: anything but a crash; a success has the right size */
    unsigned seed = 7;
    for (int i = 0; i < 400; i++) {
        uint8_t *m = malloc(len);
        memcpy(m, png, len);
        seed = seed * 1103515245u + 12345u;
        m[(seed >> 8) % len] ^= (uint8_t)(1 + (seed >> 24) % 255);
        hm_image t;
        int rc = decode_copy(m, len, &t);
        CHECK(rc == HM_OK ? t.w == 37 && t.h == 23 : clean_error(rc));
        hm_image_free(&t);
        free(m);
    }
    free(png);
    hm_image_free(&im);
}

/* A PNG signature and IHDR claiming w x h (8-bit RGB), then IEND. */
static size_t fake_png(uint8_t *b, uint32_t w, uint32_t h) {
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    uint8_t ihdr[17] = {'I', 'H', 'D', 'R', w >> 24, w >> 16, w >> 8, w, h >> 24, h >> 16, h >> 8, h, 8, 2, 0, 0, 0};
    size_t n = 0;
    memcpy(b, sig, 8);
    n = 8;
    b[n++] = 0, b[n++] = 0, b[n++] = 0, b[n++] = 13;
    memcpy(b + n, ihdr, 17);
    n += 17;
    uint32_t crc = (uint32_t)crc32(0, ihdr, 17);
    b[n++] = crc >> 24, b[n++] = crc >> 16, b[n++] = crc >> 8, b[n++] = crc;
    /* an empty IDAT (the decoder stops at its header), then IEND */
    static const uint8_t tail[24] = {0, 0, 0, 0, 'I', 'D', 'A', 'T', 0x35, 0xaf, 0x06, 0x1e,
                                     0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xae, 0x42, 0x60, 0x82};
    memcpy(b + n, tail, 24);
    return n + 24;
}

static void test_limits(void) {
    uint8_t b[64];
    hm_image t;
    size_t n = fake_png(b, 20000, 6000); /* 120 MP */
    int rc = decode_copy(b, n, &t);
    CHECK(rc == HM_E_UNSUPPORTED && clean_error(rc) && strstr(hm_errmsg(), "megapixel"));
    n = fake_png(b, 70000, 10);
    rc = decode_copy(b, n, &t);
    CHECK(clean_error(rc) && !t.rgb);
    n = fake_png(b, 0, 10);
    rc = decode_copy(b, n, &t);
    CHECK(clean_error(rc) && !t.rgb);
    rc = decode_copy((const uint8_t *)"GIF89a......", 12, &t);
    CHECK(rc == HM_E_UNSUPPORTED && strstr(hm_errmsg(), "GIF"));
    rc = decode_copy((const uint8_t *)"hello", 5, &t);
    CHECK(rc == HM_E_UNSUPPORTED && clean_error(rc));
    rc = decode_copy(NULL, 0, &t);
    CHECK(clean_error(rc));
    CHECK(clean_error(hm_image_load("/nonexistent/dir/x.png", &t)));
}

static void test_jpeg(void) {
    hm_image im = make_image(37, 23, 2), back;
    for (int y = 0; y < 23; y++) /* smooth, so the lossy round trip is close */
        for (int x = 0; x < 37; x++)
            for (int c = 0; c < 3; c++) im.rgb[(y * 37 + x) * 3 + c] = (uint8_t)(x * 6 + y * 3 * c + 20 * c);
    uint8_t ex[64];
    unsigned exn = exif_block(ex, 1, 0);
    size_t len;
    uint8_t *jpg = encode_jpeg(&im, ex, exn, 0, &len);
    CHECK(decode_copy(jpg, len, &back) == HM_OK);
    CHECK(back.w == 37 && back.h == 23);
    /* lossy, but close */
    long err = 0;
    for (int i = 0; i < 37 * 23 * 3 && back.rgb; i++) err += labs((long)back.rgb[i] - im.rgb[i]);
    CHECK(back.rgb && err / (37 * 23 * 3) < 40);
    hm_image_free(&back);
    int bad = 0;
    for (size_t n = 0; n < len; n++) {
        hm_image t;
        int rc = decode_copy(jpg, n, &t);
        if (!clean_error(rc) || t.rgb) bad++;
        hm_image_free(&t);
    }
    CHECK(bad == 0);
    unsigned seed = 11;
    for (int i = 0; i < 400; i++) {
        uint8_t *m = malloc(len);
        memcpy(m, jpg, len);
        seed = seed * 1103515245u + 12345u;
        m[(seed >> 8) % len] ^= (uint8_t)(1 + (seed >> 24) % 255);
        hm_image t;
        int rc = decode_copy(m, len, &t);
        CHECK(rc == HM_OK ? t.w > 0 && t.h > 0 && (long long)t.w * t.h <= 65535LL * 65535 : clean_error(rc));
        hm_image_free(&t);
        free(m);
    }
    free(jpg);

    /* grey JPEG -> R = G = B */
    jpg = encode_jpeg(&im, NULL, 0, 1, &len);
    CHECK(decode_copy(jpg, len, &back) == HM_OK);
    int same = back.rgb != NULL;
    for (int i = 0; same && i < back.w * back.h; i++)
        same = back.rgb[3 * i] == back.rgb[3 * i + 1] && back.rgb[3 * i] == back.rgb[3 * i + 2];
    CHECK(same);
    hm_image_free(&back);
    free(jpg);
    hm_image_free(&im);
}

/* The same compressed pixels under each EXIF orientation, against the
 * displayed image computed here. */
static void test_orientation(void) {
    hm_image im = make_image(5, 3, 3), ref;
    uint8_t ex[64];
    size_t len;
    unsigned exn = exif_block(ex, 1, 0);
    uint8_t *jpg = encode_jpeg(&im, ex, exn, 0, &len);
    CHECK(decode_copy(jpg, len, &ref) == HM_OK);
    free(jpg);
    for (int be = 0; be < 2; be++)
        for (int o = 1; o <= 9; o++) {
            exn = exif_block(ex, o, be);
            jpg = encode_jpeg(&im, ex, exn, 0, &len);
            hm_image t;
            CHECK(decode_copy(jpg, len, &t) == HM_OK);
            free(jpg);
            const int w = ref.w, h = ref.h, swap = o >= 5 && o <= 8;
            CHECK(t.w == (swap ? h : w) && t.h == (swap ? w : h));
            int ok = t.rgb != NULL && ref.rgb != NULL;
            for (int y = 0; ok && y < t.h; y++)
                for (int x = 0; ok && x < t.w; x++) {
                    /* displayed (x, y) comes from stored (sx, sy) */
                    int sx = x, sy = y;
                    switch (o) {
                    case 2: sx = w - 1 - x; break;
                    case 3: sx = w - 1 - x, sy = h - 1 - y; break;
                    case 4: sy = h - 1 - y; break;
                    case 5: sx = y, sy = x; break;
                    case 6: sx = y, sy = h - 1 - x; break;
                    case 7: sx = w - 1 - y, sy = h - 1 - x; break;
                    case 8: sx = w - 1 - y, sy = x; break;
                    default: break; /* 1, and 9 (invalid: ignored) */
                    }
                    ok = !memcmp(t.rgb + ((size_t)y * t.w + x) * 3, ref.rgb + ((size_t)sy * w + sx) * 3, 3);
                }
            CHECK(ok);
            hm_image_free(&t);
        }
    /* malformed EXIF blocks are ignored */
    uint8_t junk[40];
    exn = exif_block(junk, 6, 0);
    junk[10] = 0xff; /* IFD offset far outside */
    jpg = encode_jpeg(&im, junk, exn, 0, &len);
    hm_image t;
    CHECK(decode_copy(jpg, len, &t) == HM_OK && t.w == 5 && t.h == 3);
    hm_image_free(&t);
    free(jpg);
    jpg = encode_jpeg(&im, junk, 9, 0, &len); /* cut inside the TIFF header */
    CHECK(decode_copy(jpg, len, &t) == HM_OK && t.w == 5 && t.h == 3);
    hm_image_free(&t);
    free(jpg);
    hm_image_free(&ref);
    hm_image_free(&im);
}

static void test_boxes(void) {
    const hm_box good = {10, 10, 50, 80, 1};
    CHECK(hm_box_check(&good, 100, 100) == HM_OK);
    const hm_box bad[] = {
        {NAN, 10, 50, 80, 1}, {10, INFINITY, 50, 80, 1}, {10, 10, -INFINITY, 80, 0}, {10, 10, 10, 80, 1},
        {10, 10, 50, 10, 1},  {50, 10, 10, 80, 1},       {100, 10, 150, 80, 1},      {-50, 10, 0, 80, 1},
        {10, -90, 50, 0, 1},  {10, 100, 50, 180, 1},     {-1e9f, 0, 1e9f, 10, 1},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        hm_errclear();
        CHECK(clean_error(hm_box_check(&bad[i], 100, 100)));
    }
    /* crossing the frame, or up to 16x the image: fine */
    const hm_box big = {-700, -700, 900, 900, 0};
    CHECK(hm_box_check(&big, 100, 100) == HM_OK);

    hm_image im = make_image(300, 200, 4);
    float *crop = malloc(sizeof(float) * 3 * 256 * 192);
    uint8_t *u8 = malloc(256 * 192 * 3);
    /* a 96x128 box at rescale 2 is a 256-pixel square: with an integer
     * centre the warp copies pixels */
    const hm_box id = {150 - 48, 100 - 64, 150 + 48, 100 + 64, 1};
    hm_crop_info info;
    for (int mode = 0; mode < 2; mode++) {
        CHECK(hm_crop(&im, &id, 2.0, mode ? HM_CROP_PAD : HM_CROP_WARP, crop, &info) == HM_OK);
        CHECK(info.size == 256 && fabs(info.cx - 150) < 1e-9 && fabs(info.cy - 100) < 1e-9);
        CHECK(hm_crop_to_u8(crop, u8) == HM_OK);
        int same = 1;
        for (int y = 0; y < 256 && same; y++)
            for (int x = 0; x < 192 && same; x++) {
                const int iy = 100 - 128 + y, ix = 150 - 96 + x;
                const uint8_t *e = iy >= 0 && iy < 200 && ix >= 0 && ix < 300 ? im.rgb + ((size_t)iy * 300 + ix) * 3
                                                                                : NULL;
                const uint8_t zero[3] = {0, 0, 0}, grey[3] = {124, 116, 104};
                if (!e) e = mode ? grey : zero;
                same = !memcmp(u8 + ((size_t)y * 192 + x) * 3, e, 3);
            }
        CHECK(same);
    }
    CHECK(clean_error(hm_crop(&im, &id, 0.0, HM_CROP_WARP, crop, NULL)));
    CHECK(clean_error(hm_crop(&im, &id, NAN, HM_CROP_WARP, crop, NULL)));
    CHECK(clean_error(hm_crop(&im, &id, 17.0, HM_CROP_PAD, crop, NULL)));
    CHECK(clean_error(hm_crop(&im, &id, 2.0, (hm_crop_mode)7, crop, NULL)));
    CHECK(clean_error(hm_crop(&im, &bad[0], 2.0, HM_CROP_WARP, crop, NULL)));
    /* a box too small for float32 source points to differ: degenerate */
    const hm_box tiny = {100, 100, 100.00001f, 100.00001f, 1};
    hm_errclear();
    int rc = hm_crop(&im, &tiny, 2.0, HM_CROP_WARP, crop, NULL);
    CHECK(rc == HM_OK || clean_error(rc));
    free(crop);
    free(u8);
    hm_image_free(&im);
}

int main(void) {
    test_png();
    test_limits();
    test_jpeg();
    test_jpeg_scans();
    test_orientation();
    test_boxes();
    printf("test_image: %d passed, %d failed\n", npass, nfail);
    return nfail ? 1 : 0;
}
