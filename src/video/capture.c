/* capture.c - a live frame source on FFmpeg (hamer_capture_open): a camera
 * (-f v4l2 /dev/video0), a stream (rtsp://..., udp://...), a file played at
 * its own pace, or any input libavdevice / libavformat opens.
 *
 * A thread of its own demuxes and decodes as the input delivers, never
 * waiting for the reader: each decoded frame is converted to RGB into one
 * of three buffers and published as the newest; a frame published while
 * the previous one was still unread replaces it (counted in `dropped`). So
 * a slow reader gets the newest frame, nothing queues, and the input
 * (a camera's driver buffers, a network stream) is always drained.
 *
 * Pace: a file is played at its timestamps (the frame at t s is published
 * t s after the first one, the thread sleeping in between), as a camera
 * would deliver it; a device or a network input (AVFMT_NOFILE) delivers at
 * its own pace and is published at once. HAMER_PACE_OFF publishes as fast
 * as decoding goes, HAMER_PACE_ON paces any input.
 *
 * Limits (docs/limits.md): the decoder's max_pixels is the stream's size
 * (with padding, as the reader's), so a hostile later frame cannot make
 * FFmpeg allocate more; every frame must have the first one's size (a change ends the capture with an
 * error). The URL is the caller's (an operator's choice: `hamer live`
 * takes it from its command line, the server never opens one).
 *
 * libavdevice is loaded here, on the first open, not linked (CMakeLists.txt
 * says why): without it, files and network streams still open, and a
 * device format fails naming what did not load.
 */
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/imgutils.h>
#include <libswscale/swscale.h>
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/util.h"
#include "format/image.h"
#include "format/fflog.h"
#include "video/video.h"

#define NBUF 3

typedef struct {
    char url[1024];
    hamer_capture_params p;
    AVFormatContext *fmt;
    AVCodecContext *dec;
    AVStream *st;
    AVPacket *pkt;
    AVFrame *frm;
    struct SwsContext *sws;
    int si, w, h, pace;
    double tb;
    int64_t first_pts;
    double t_first;            /* hm_now() when the first frame was published */

    pthread_t thread;
    int thread_started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint8_t *buf[NBUF];
    double time_s[NBUF], capture_s[NBUF];
    int newest, lent;          /* buffers: the newest unread one, the caller's; -1 none */
    long long published, delivered, dropped;
    int finished, status;
    atomic_int stop;
    char msg[2048];
    hm_ff_sink sink;
} capture;

static const char *averr(int e, char *buf, size_t n) {
    av_strerror(e, buf, n);
    return buf;
}

hamer_capture_params hm_capture_default_params(void) {
    hamer_capture_params p;
    memset(&p, 0, sizeof p);
    p.threads = 1;
    return p;
}

/* FFmpeg asks this while a read blocks (a camera, a network stream): a
 * stop makes it return. */
static int interrupted(void *opaque) { return atomic_load(&((capture *)opaque)->stop); }

static void finish(capture *c, int status, const char *msg) {
    pthread_mutex_lock(&c->mu);
    if (!c->finished) {
        c->finished = 1;
        c->status = status;
        if (msg) snprintf(c->msg, sizeof c->msg, "%s", msg);
    }
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

/* Sleep until hm_now() reaches t, or a stop; 1 when stopped. */
static int sleep_until(capture *c, double t) {
    pthread_mutex_lock(&c->mu);
    while (!atomic_load(&c->stop)) {
        const double now = hm_now();
        if (now >= t) break;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        const double wake = (double)ts.tv_sec + ts.tv_nsec * 1e-9 + (t - now);
        ts.tv_sec = (time_t)wake;
        ts.tv_nsec = (long)((wake - (double)ts.tv_sec) * 1e9);
        pthread_cond_timedwait(&c->cv, &c->mu, &ts);
    }
    const int stopped = atomic_load(&c->stop);
    pthread_mutex_unlock(&c->mu);
    return stopped;
}

/* One decoded frame converted and published. 0 go on, 1 stopped, <0 error. */
static int take(capture *c, AVFrame *f, char *msg, size_t msglen) {
    if (f->width != c->w || f->height != c->h) {
        snprintf(msg, msglen, "%s: frame size changes from %dx%d to %dx%d (not supported)", c->url, c->w, c->h,
                 f->width, f->height);
        return HM_E_UNSUPPORTED;
    }
    int64_t pts = f->best_effort_timestamp;
    if (c->first_pts == AV_NOPTS_VALUE) c->first_pts = pts == AV_NOPTS_VALUE ? 0 : pts;
    double t = pts == AV_NOPTS_VALUE ? (double)c->published / 30.0 : (pts - c->first_pts) * c->tb;
    /* a free buffer: neither the newest unread one nor the caller's */
    pthread_mutex_lock(&c->mu);
    int b = 0;
    while (b == c->newest || b == c->lent) b++;
    pthread_mutex_unlock(&c->mu);
    int rc = hm_video_frame_rgb(&c->sws, f, c->w, c->h, c->buf[b], c->url, msg, msglen);
    if (rc) return rc;
    if (c->pace) {
        if (c->published == 0) c->t_first = hm_now() - t;
        if (sleep_until(c, c->t_first + t)) return 1;
    }
    pthread_mutex_lock(&c->mu);
    if (c->newest >= 0) c->dropped++; /* replaced unread */
    c->newest = b;
    c->time_s[b] = t;
    c->capture_s[b] = hm_now();
    c->published++;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return 0;
}

/* The decoder refused data with FFmpeg error r: a frame over max_pixels
 * is a size change (the size FFmpeg logged), anything else damage. */
static int decode_error(capture *c, int r, const char *what, char *msg, size_t msglen) {
    char e[128];
    int w, h;
    if (hm_ff_refused_size(&c->sink, &w, &h) && (w != c->w || h != c->h)) {
        snprintf(msg, msglen, "%s: frame size changes from %dx%d to %dx%d (not supported; refused before decoding)",
                 c->url, c->w, c->h, w, h);
        return HM_E_UNSUPPORTED;
    }
    snprintf(msg, msglen, "%s: %s: %s", c->url, what, averr(r, e, sizeof e));
    return HM_E_FORMAT;
}

static void *capture_main(void *arg) {
    capture *c = arg;
    char msg[2048] = "", e[128];
    int rc = 0, eof = 0;
    c->sink.demuxer = NULL; /* a live input's demuxer warnings are not damage */
    hm_ff_log_enter(&c->sink);
    while (!rc && !eof && !atomic_load(&c->stop)) {
        int r = av_read_frame(c->fmt, c->pkt);
        if (r == AVERROR_EOF) {
            eof = 1;
        } else if (r == AVERROR(EAGAIN)) {
            continue;
        } else if (r < 0) {
            if (atomic_load(&c->stop)) break;
            snprintf(msg, sizeof msg, "%s: reading failed: %s", c->url, averr(r, e, sizeof e));
            rc = r == AVERROR(EIO) ? HM_E_IO : HM_E_FORMAT;
            break;
        } else if (c->pkt->stream_index != c->si) {
            av_packet_unref(c->pkt);
            continue;
        }
        r = avcodec_send_packet(c->dec, eof ? NULL : c->pkt);
        if (!eof) av_packet_unref(c->pkt);
        if (r < 0 && r != AVERROR(EAGAIN) && r != AVERROR_EOF) {
            rc = decode_error(c, r, "the decoder rejects the data", msg, sizeof msg);
            break;
        }
        for (;;) {
            r = avcodec_receive_frame(c->dec, c->frm);
            if (r == AVERROR(EAGAIN) || r == AVERROR_EOF) break;
            if (r < 0) {
                rc = decode_error(c, r, "decoding failed", msg, sizeof msg);
                break;
            }
            int t = take(c, c->frm, msg, sizeof msg);
            av_frame_unref(c->frm);
            if (t) {
                if (t < 0) rc = t;
                else eof = 1;
                break;
            }
        }
    }
    hm_ff_log_leave();
    finish(c, rc, msg);
    return NULL;
}

/* libavdevice's devices (v4l2, ...) registered with libavformat, once;
 * why it did not load in avdevice_why ("" when it did). */
static char avdevice_why[256];

static void load_avdevice(void) {
    /* libavdevice's major version is libavformat's (FFmpeg releases them
     * together: 58 in 4.x, 59 in 5.x, 60 in 6.x, 61 in 7.x) */
    const char *name = "libavdevice.so." AV_STRINGIFY(LIBAVFORMAT_VERSION_MAJOR);
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    void (*reg)(void) = h ? (void (*)(void))dlsym(h, "avdevice_register_all") : NULL;
    if (!reg) {
        const char *e = dlerror();
        snprintf(avdevice_why, sizeof avdevice_why, "%s", e ? e : name);
        return;
    }
    reg(); /* the handle stays open: libavformat now lists its devices */
}

static int open_input(capture *c) {
    char e[128];
    const AVInputFormat *ifmt = NULL;
    if (c->p.format && !(ifmt = av_find_input_format(c->p.format)))
        return hm_err(HM_E_UNSUPPORTED, "capture: no input format '%s' in this FFmpeg (ffmpeg -formats lists them)%s%s",
                      c->p.format, avdevice_why[0] ? "; libavdevice, which has the devices, did not load: " : "",
                      avdevice_why);
    AVDictionary *opt = NULL;
    if (c->p.options && av_dict_parse_string(&opt, c->p.options, "=", ":", 0) < 0) {
        av_dict_free(&opt);
        return hm_err(HM_E_ARG, "capture: options '%s' are not key=value pairs separated by ':'", c->p.options);
    }
    if (!(c->fmt = avformat_alloc_context())) {
        av_dict_free(&opt);
        return hm_err(HM_E_NOMEM, "%s: out of memory", c->url);
    }
    c->fmt->interrupt_callback = (AVIOInterruptCB){interrupted, c};
    int r = avformat_open_input(&c->fmt, c->url, ifmt, &opt);
    char unused[256] = "";
    const AVDictionaryEntry *left = av_dict_get(opt, "", NULL, AV_DICT_IGNORE_SUFFIX);
    if (left) snprintf(unused, sizeof unused, "%s", left->key);
    av_dict_free(&opt);
    if (r < 0)
        return hm_err(r == AVERROR(ENOENT) ? HM_E_IO : HM_E_FORMAT, "%s: cannot open%s%s: %s", c->url,
                      c->p.format ? " as " : "", c->p.format ? c->p.format : "", averr(r, e, sizeof e));
    if (unused[0]) return hm_err(HM_E_ARG, "%s: the input does not take the option '%s'", c->url, unused);
    if ((r = avformat_find_stream_info(c->fmt, NULL)) < 0)
        return hm_err(HM_E_FORMAT, "%s: cannot read the stream information: %s", c->url, averr(r, e, sizeof e));
    const AVCodec *codec = NULL;
    c->si = av_find_best_stream(c->fmt, AVMEDIA_TYPE_VIDEO, -1, -1, &codec, 0);
    if (c->si < 0 || !codec)
        return hm_err(c->si == AVERROR_STREAM_NOT_FOUND ? HM_E_FORMAT : HM_E_UNSUPPORTED,
                      "%s: %s", c->url, c->si == AVERROR_STREAM_NOT_FOUND ? "no video stream" : "no decoder for its video");
    c->st = c->fmt->streams[c->si];
    const AVCodecParameters *cp = c->st->codecpar;
    if (cp->width < 1 || cp->height < 1 || cp->width > HM_IMAGE_MAX_DIM || cp->height > HM_IMAGE_MAX_DIM ||
        (long long)cp->width * cp->height > HM_IMAGE_MAX_PIXELS)
        return hm_err(HM_E_FORMAT, "%s: frame size %dx%d out of range (at most 100 megapixels)", c->url, cp->width,
                      cp->height);
    if (!(c->dec = avcodec_alloc_context3(codec))) return hm_err(HM_E_NOMEM, "%s: out of memory", c->url);
    if ((r = avcodec_parameters_to_context(c->dec, cp)) < 0)
        return hm_err(HM_E_FORMAT, "%s: bad codec parameters: %s", c->url, averr(r, e, sizeof e));
    c->dec->thread_count = c->p.threads;
    c->dec->pkt_timebase = c->st->time_base;
    /* a later, larger frame is refused by the decoder itself, before its
     * buffers exist (the reader's bound) */
    c->dec->max_pixels = hm_video_max_pixels(cp->width, cp->height);
    if ((r = avcodec_open2(c->dec, codec, NULL)) < 0)
        return hm_err(HM_E_UNSUPPORTED, "%s: cannot open the %s decoder: %s", c->url, codec->name,
                      averr(r, e, sizeof e));
    c->w = cp->width, c->h = cp->height;
    c->tb = av_q2d(c->st->time_base);
    c->first_pts = AV_NOPTS_VALUE;
    const int live = (c->fmt->iformat->flags & AVFMT_NOFILE) != 0;
    c->pace = c->p.pace == HAMER_PACE_ON || (c->p.pace == HAMER_PACE_AUTO && !live);
    return HM_OK;
}

static void cap_close(void *ctx) {
    capture *c = ctx;
    if (!c) return;
    if (c->thread_started) {
        atomic_store(&c->stop, 1);
        pthread_mutex_lock(&c->mu);
        pthread_cond_broadcast(&c->cv);
        pthread_mutex_unlock(&c->mu);
        pthread_join(c->thread, NULL);
    }
    hm_ff_sink quiet = {0};
    hm_ff_log_enter(&quiet);
    for (int i = 0; i < NBUF; i++) hm_free(c->buf[i]);
    sws_freeContext(c->sws);
    av_frame_free(&c->frm);
    av_packet_free(&c->pkt);
    avcodec_free_context(&c->dec);
    avformat_close_input(&c->fmt);
    hm_ff_log_leave();
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c);
}

static void cap_stop(void *ctx) {
    capture *c = ctx;
    atomic_store(&c->stop, 1);
    pthread_mutex_lock(&c->mu);
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

static int cap_read(void *ctx, hamer_source_frame *f) {
    capture *c = ctx;
    if (!f) return hm_err(HM_E_ARG, "capture: frame is NULL");
    memset(f, 0, sizeof *f);
    pthread_mutex_lock(&c->mu);
    c->lent = -1; /* the previous frame is the caller's no more */
    while (c->newest < 0 && !c->finished && !atomic_load(&c->stop)) pthread_cond_wait(&c->cv, &c->mu);
    int rc = 0;
    if (c->newest >= 0 && !atomic_load(&c->stop)) {
        const int b = c->lent = c->newest;
        c->newest = -1;
        *f = (hamer_source_frame){.rgb = c->buf[b], .width = c->w, .height = c->h, .index = c->delivered++,
                                  .time_s = c->time_s[b], .capture_s = c->capture_s[b], .dropped = c->dropped};
        rc = 1;
    } else if (c->finished && c->status) {
        rc = hm_err(c->status, "%s", c->msg);
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

int hm_capture_open(const char *url, const hamer_capture_params *params, hamer_frame_source *out) {
    if (out) memset(out, 0, sizeof *out);
    if (!url || !out) return hm_err(HM_E_ARG, "hamer_capture_open: url or out is NULL");
    hamer_capture_params p = params ? *params : hm_capture_default_params();
    if (params && HM_CHECK_RESERVED(params, "hamer_capture_params")) return HM_E_ARG;
    if (p.pace != HAMER_PACE_AUTO && p.pace != HAMER_PACE_ON && p.pace != HAMER_PACE_OFF)
        return hm_err(HM_E_ARG, "hamer_capture_params: pace %d is not HAMER_PACE_AUTO, _ON or _OFF", (int)p.pace);
    if (p.threads < 0 || p.threads > 64) return hm_err(HM_E_ARG, "hamer_capture_params: threads %d outside 0..64", p.threads);
    if (strlen(url) >= sizeof ((capture *)0)->url) return hm_err(HM_E_ARG, "hamer_capture_open: url too long");
    capture *c = calloc(1, sizeof *c);
    if (!c) return hm_err(HM_E_NOMEM, "hamer_capture_open: out of memory");
    snprintf(c->url, sizeof c->url, "%s", url);
    c->p = p;
    c->p.format = c->p.options = NULL; /* used by open_input only, below */
    c->newest = c->lent = -1;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    static pthread_once_t devices = PTHREAD_ONCE_INIT;
    pthread_once(&devices, load_avdevice);
    c->p.format = p.format, c->p.options = p.options;
    hm_ff_sink quiet = {0};
    hm_ff_log_enter(&quiet);
    int rc = open_input(c);
    hm_ff_log_leave();
    c->p.format = c->p.options = NULL; /* the caller's strings are not kept */
    if (rc) goto fail;
    c->pkt = av_packet_alloc();
    c->frm = av_frame_alloc();
    if (!c->pkt || !c->frm) {
        rc = hm_err(HM_E_NOMEM, "%s: out of memory", url);
        goto fail;
    }
    for (int i = 0; i < NBUF; i++)
        if (!(c->buf[i] = hm_alloc((size_t)c->w * c->h * 3 + HM_VIDEO_SLACK))) {
            rc = hm_err(HM_E_NOMEM, "%s: out of memory", url);
            goto fail;
        }
    if (pthread_create(&c->thread, NULL, capture_main, c)) {
        rc = hm_err(HM_E_NOMEM, "%s: cannot start the capture thread", url);
        goto fail;
    }
    c->thread_started = 1;
    *out = (hamer_frame_source){.ctx = c, .read = cap_read, .stop = cap_stop, .close = cap_close};
    return HM_OK;
fail:
    {
        char m[2048];
        snprintf(m, sizeof m, "%s", hm_errmsg());
        cap_close(c);
        return hm_err(rc, "%s", m);
    }
}
