/* common.c - the helpers tools/cli, tools/serve and tools/worker share (common.h). */
#include "common/common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "core/cpu.h"

int hm_tool_fail(int code, const char *fmt, const char *arg) {
    fprintf(stderr, "hamer: ");
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
    return code;
}

void hm_tool_vlog(const char *who, const char *fmt, va_list ap) {
    char line[1024];
    vsnprintf(line, sizeof line, fmt, ap);
    fprintf(stderr, "%s: %s\n", who, line);
}

void hm_tool_library_log(void *user, hamer_log_level level, const char *msg) {
    (void)user;
    if (level == HAMER_LOG_PROGRESS) {
        if (!isatty(2)) return;
        fprintf(stderr, "\rhamer: %s", msg);
        if (strstr(msg, "100%")) fputc('\n', stderr);
        fflush(stderr);
        return;
    }
    fprintf(stderr, "hamer: %s\n", msg);
}

int hm_tool_parse_int(const char *s, long lo, long hi, int *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    *out = (int)v;
    return 0;
}

int hm_tool_parse_threads(const char *s, int *out) { return hm_tool_parse_int(s, 1, 1024, out); }

int hm_tool_threads(int requested) { return requested > 0 ? requested : hm_cpu_online(); }

int hm_tool_parse_rescale(const char *s, double *out) {
    char *end;
    double v = strtod(s, &end);
    /* Decimal only: strtod would also take hex floats, "inf" and "nan". */
    for (const char *p = s; p < end; p++)
        if (!strchr("0123456789.eE+-", *p)) return -1;
    if (end == s || *end || !(v > 0 && v <= HAMER_MAX_RESCALE)) return -1;
    *out = v;
    return 0;
}

int hm_tool_camera_value(const char *name, const char *value, hamer_predict_params *pp) {
    const int focal = !strcmp(name, "focal");
    if (!focal && strcmp(name, "fov")) return -1;
    char *end;
    double v = strtod(value, &end);
    for (const char *p = value; p < end; p++)  /* decimal only (no hex, inf, nan) */
        if (!strchr("0123456789.eE+-", *p)) end = (char *)value;
    if (end == value || *end || !(focal ? v > 0 && v <= HAMER_MAX_FOCAL : v > 0 && v < 180)) return -1;
    if (focal) pp->focal_px = (float)v;
    else pp->fov_deg = (float)v;
    return 0;
}

int hm_tool_parse_precision(const char *s, int *out) {
    if (!strcmp(s, "fp32")) *out = HAMER_PRECISION_FP32;
    else if (!strcmp(s, "fast")) *out = HAMER_PRECISION_FAST;
    else return -1;
    return 0;
}

int hm_tool_parse_draw(const char *s, unsigned *hide) {
    static const struct {
        const char *name;
        unsigned bits;
    } names[] = {{"mesh", HAMER_DRAW_MESH},           {"boxes", HAMER_DRAW_BOXES}, {"keypoints", HAMER_DRAW_KEYPOINTS},
                 {"labels", HAMER_DRAW_LABELS},       {"all", HAMER_DRAW_ALL},     {"none", 0}};
    unsigned draw = 0;
    for (const char *p = s;; p++) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        size_t k = 0;
        while (k < sizeof names / sizeof *names && !(strlen(names[k].name) == len && !strncmp(names[k].name, p, len)))
            k++;
        if (k == sizeof names / sizeof *names) return -1;
        draw |= names[k].bits;
        if (!end) break;
        p = end;
    }
    *hide = HAMER_DRAW_ALL & ~draw;
    return 0;
}

hamer_model *hm_tool_load_model(const char *path, const char *mano, int precision, const char *device) {
    hamer_model_params mp = hamer_model_default_params();
    mp.device = device;
    mp.mano_path = mano;
    mp.progress = 1;
    mp.precision = precision;
    return hamer_model_load(path, &mp);
}

const char hm_tool_mano_advice[] =
    "the released hamer.ckpt carries them (docs/models.md says where to get it); for this checkpoint give "
    "--mano MANO.npz, made from MANO_RIGHT.pkl (https://mano.is.tue.mpg.de, free registration) by "
    "scripts/mano_npz.py";

int hm_tool_require_mano(const hamer_model *model, const char *path) {
    hamer_model_info info;
    if (hamer_model_get_info(model, &info) == HAMER_OK && info.has_mano) return 0;
    fprintf(stderr, "hamer: %s has no MANO buffers (mano.*), so no mesh can be computed: %s\n", path,
            hm_tool_mano_advice);
    return 1;
}

double hm_tool_pcc(const float *a, const float *b, size_t n) {
    double ma = 0, mb = 0, sab = 0, saa = 0, sbb = 0;
    for (size_t i = 0; i < n; i++) ma += a[i], mb += b[i];
    ma /= (double)n, mb /= (double)n;
    for (size_t i = 0; i < n; i++) {
        double x = a[i] - ma, y = b[i] - mb;
        sab += x * y, saa += x * x, sbb += y * y;
    }
    return saa > 0 && sbb > 0 ? sab / sqrt(saa * sbb) : (saa == sbb ? 1.0 : 0.0);
}

int hm_tool_parse_body(const char *s, hamer_body_mode *out) {
    if (!s) return -1;
    if (!strcmp(s, "auto")) return *out = HAMER_BODY_AUTO, 0;
    if (!strcmp(s, "on")) return *out = HAMER_BODY_ON, 0;
    if (!strcmp(s, "off")) return *out = HAMER_BODY_OFF, 0;
    return -1;
}

int hm_tool_parse_proposals(const char *s, hamer_proposals_mode *out) {
    if (!s) return -1;
    if (!strcmp(s, "auto")) return *out = HAMER_PROPOSALS_AUTO, 0;
    if (!strcmp(s, "on")) return *out = HAMER_PROPOSALS_ON, 0;
    if (!strcmp(s, "off")) return *out = HAMER_PROPOSALS_OFF, 0;
    return -1;
}

double hm_tool_proc_status_mb(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    double mb = -1;
    size_t n = strlen(field);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, field, n) && line[n] == ':') {
            mb = strtod(line + n + 1, NULL) / 1024.0;
            break;
        }
    fclose(f);
    return mb;
}

double hm_tool_peak_rss_mb(void) {
    const double mb = hm_tool_proc_status_mb("VmHWM");
    return mb > 0 ? mb : 0;
}

const char *hm_tool_body_name(hamer_body_mode m) {
    return m == HAMER_BODY_ON ? "on" : m == HAMER_BODY_OFF ? "off" : "auto";
}

void hm_tool_detect_defaults(hm_tool_detect_args *d) {
    d->dir = NULL;
    d->lite = 0;
    d->params = hamer_detect_default_params();
}

hamer_detector *hm_tool_load_detector(const hm_tool_detect_args *d) {
    hamer_detector_params p = hamer_detector_default_params();
    p.dir = d->dir;
    p.lite = d->lite;
    /* on: the body models are required; off: not loaded; auto: when installed */
    p.body = d->params.body;
    p.proposals = d->params.proposals;
    return hamer_detector_load(&p);
}

char *hm_tool_read_file(const char *path, size_t max, size_t *len, char *err, size_t errlen) {
    /* O_NONBLOCK: opening a FIFO would otherwise wait for a writer, before
     * the regular-file check could refuse it (regular files ignore it) */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open '%s': %s", path, strerror(errno));
        return NULL;
    }
    return hm_tool_read_fd(fd, path, max, len, err, errlen);
}

char *hm_tool_read_fd(int fd, const char *path, size_t max, size_t *len, char *err, size_t errlen) {
    struct stat st;
    char *buf = NULL;
    /* fstat, not a seek: a directory or a FIFO has no size to trust */
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "'%s': not a regular file", path);
        goto out;
    }
    if ((uintmax_t)st.st_size > max) {
        snprintf(err, errlen, "'%s': larger than %zu MB", path, max >> 20);
        goto out;
    }
    size_t n = (size_t)st.st_size, got = 0;
    if (!(buf = malloc(n + 1))) {
        snprintf(err, errlen, "'%s': out of memory", path);
        goto out;
    }
    while (got < n) {
        ssize_t k = read(fd, buf + got, n - got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            snprintf(err, errlen, "cannot read '%s': %s", path, k < 0 ? strerror(errno) : "shorter than its size");
            free(buf);
            buf = NULL;
            goto out;
        }
        got += (size_t)k;
    }
    buf[n] = 0;
    *len = n;
out:
    close(fd);
    return buf;
}
