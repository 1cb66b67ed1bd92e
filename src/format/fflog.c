/* fflog.c - FFmpeg's log while the library reads or writes video or
 * decodes an image through FFmpeg.
 *
 * FFmpeg prints to stderr by default; the library must not print. A log
 * callback, installed once, routes messages by the calling thread: on a
 * thread inside the library's FFmpeg code (a sink is set) they are kept
 * from stderr, and an error from the demuxer of that video (or from the
 * decoder of that image, hm_ff_log_also) is recorded as damage (a
 * truncated Matroska file is only reported this way); on any
 * other thread they go to FFmpeg's default callback, so the rest of the
 * process logs as it did. */
#include <libavutil/log.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "format/fflog.h"

static _Thread_local hm_ff_sink *tl_sink;
static _Thread_local const void *tl_also;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void callback(void *avcl, int level, const char *fmt, va_list vl) {
    hm_ff_sink *s = tl_sink;
    if (!s) {
        av_log_default_callback(avcl, level, fmt, vl);
        return;
    }
    if (level > AV_LOG_ERROR) return;
    const int demuxer = !s->damaged && avcl && (avcl == s->demuxer || avcl == tl_also);
    if (!demuxer && !strstr(fmt, "Picture size")) return;
    int print_prefix = 0;
    char line[sizeof s->msg];
    av_log_format_line(NULL, level, fmt, vl, line, sizeof line, &print_prefix);
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r' || line[n - 1] == '.')) line[--n] = 0;
    const char *size = strstr(line, "Picture size ");
    if (size) snprintf(s->size_msg, sizeof s->size_msg, "%s", size);
    if (!demuxer) return;
    snprintf(s->msg, sizeof s->msg, "%s", line);
    s->damaged = 1;
}

int hm_ff_refused_size(const hm_ff_sink *sink, int *w, int *h) {
    unsigned a, b;
    if (!sink->size_msg[0] || sscanf(sink->size_msg, "Picture size %ux%u", &a, &b) != 2 || a > 1u << 30 || b > 1u << 30)
        return 0;
    *w = (int)a, *h = (int)b;
    return 1;
}

static void install(void) { av_log_set_callback(callback); }

void hm_ff_log_enter(hm_ff_sink *sink) {
    pthread_once(&once, install);
    tl_sink = sink;
}

void hm_ff_log_leave(void) {
    tl_sink = NULL;
    tl_also = NULL;
}

void hm_ff_log_also(const void *ctx) { tl_also = ctx; }
