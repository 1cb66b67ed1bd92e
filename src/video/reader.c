/* reader.c - hamer_video: demux + decode on a thread of its own, frames
 * converted to RGB (and rotated upright) into a bounded ring (video.h). */
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/avstring.h>
#include <libavutil/display.h>
#include <libavutil/imgutils.h>
#include <libswscale/swscale.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/util.h"
#include "format/image.h"
#include "format/fflog.h"
#include "video/video.h"

typedef struct {
    uint8_t *rgb;
    long long index, pts;
    double time_s, decode_ms;
} slot;

struct hamer_video {
    char path[1024];
    hamer_video_params p;
    AVFormatContext *fmt;
    AVCodecContext *dec;
    AVStream *st;
    AVPacket *pkt;
    AVFrame *frm;
    struct SwsContext *sws;
    int si, rot, sw, sh, w, h; /* stored size sw x sh, delivered w x h */
    uint8_t *unrotated;        /* sw x sh RGB when rot != 0 */
    int64_t start_pts, last_pts, prev_pts; /* the last two decoded frames' pts */
    long long next_index, emitted;
    double tb, end_s;

    pthread_t thread;
    int thread_started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    slot *ring;
    int nslots, head, count, held; /* held: slot lent to the caller, -1 none */
    int finished, status, stop;
    char msg[2048];
    hm_ff_sink sink;           /* the decode thread's FFmpeg messages */
    /* FFmpeg's own opener, used for the file itself only (open_only_self) */
    int (*ff_open)(AVFormatContext *, AVIOContext **, const char *, int, AVDictionary **);
    int refused;               /* a demuxer asked to open another file or URL */
};

static const char *averr(int e, char *buf, size_t n) {
    av_strerror(e, buf, n);
    return buf;
}

hamer_video_params hm_video_default_params(void) {
    hamer_video_params p = {.start_s = 0.0, .duration_s = 0.0, .stride = 1, .queue = 4, .threads = 1};
    return p;
}


int hm_video_frame_rgb(struct SwsContext **sws, const AVFrame *f, int w, int h, uint8_t *dst, const char *name,
                       char *msg, size_t msglen) {
    *sws = sws_getCachedContext(*sws, f->width, f->height, (enum AVPixelFormat)f->format, w, h, AV_PIX_FMT_RGB24,
                                SWS_BICUBIC, NULL, NULL, NULL);
    if (!*sws) {
        snprintf(msg, msglen, "%s: cannot convert %s frames to RGB", name,
                 av_get_pix_fmt_name((enum AVPixelFormat)f->format));
        return HM_E_UNSUPPORTED;
    }
    /* the frame's own colour matrix and range, as FFmpeg's scale filter takes them */
    const int *coef = sws_getCoefficients(f->colorspace == AVCOL_SPC_UNSPECIFIED ? SWS_CS_DEFAULT : f->colorspace);
    sws_setColorspaceDetails(*sws, coef, f->color_range == AVCOL_RANGE_JPEG, sws_getCoefficients(SWS_CS_DEFAULT), 1,
                             0, 1 << 16, 1 << 16);
    uint8_t *planes[4] = {dst, NULL, NULL, NULL};
    int strides[4] = {3 * w, 0, 0, 0};
    sws_scale(*sws, (const uint8_t *const *)f->data, f->linesize, 0, f->height, planes, strides);
    return HM_OK;
}

/* Clockwise degrees that make the stored picture upright, from the
 * stream's display matrix: 0/90/180/270, or -1 (message) for anything else. */
static int stream_rotation(const AVStream *st, const char *path) {
    size_t size = 0;
#if LIBAVFORMAT_VERSION_MAJOR >= 61
    const AVPacketSideData *sd = av_packet_side_data_get(st->codecpar->coded_side_data,
                                                         st->codecpar->nb_coded_side_data, AV_PKT_DATA_DISPLAYMATRIX);
    const int32_t *m = sd ? (const int32_t *)sd->data : NULL;
    size = sd ? sd->size : 0;
#else
    const int32_t *m = (const int32_t *)av_stream_get_side_data(st, AV_PKT_DATA_DISPLAYMATRIX, &size);
#endif
    if (!m || size < 9 * sizeof(int32_t)) return 0;
    /* a reflection (negative determinant of the 2x2 part) is not a rotation */
    if ((double)m[0] * m[4] - (double)m[1] * m[3] < 0) {
        hm_err(HM_E_UNSUPPORTED, "%s: the display matrix mirrors the picture; only rotations are supported", path);
        return -1;
    }
    double theta = -av_display_rotation_get(m); /* counterclockwise -> clockwise */
    if (!isfinite(theta)) return 0;
    theta -= 360.0 * floor(theta / 360.0);
    const double q = round(theta / 90.0);
    if (fabs(theta - 90.0 * q) > 1.0) {
        hm_err(HM_E_UNSUPPORTED, "%s: rotation of %.1f degrees is not a multiple of 90", path, theta);
        return -1;
    }
    return ((int)q % 4) * 90;
}

/* The decode thread's end: status (0 = clean end) and message, published. */
static void finish(hamer_video *v, int status, const char *msg) {
    pthread_mutex_lock(&v->mu);
    if (!v->finished) {
        v->finished = 1;
        v->status = status;
        if (msg) snprintf(v->msg, sizeof v->msg, "%s", msg);
    }
    pthread_cond_broadcast(&v->cv);
    pthread_mutex_unlock(&v->mu);
}

/* One decoded frame: dropped (before start, off the stride), delivered, or
 * the end reached. 0 go on, 1 stop (end of the range or close), <0 error
 * (message in msg). */
static int take_frame(hamer_video *v, AVFrame *f, double t0, char *msg, size_t msglen) {
    int64_t pts = f->best_effort_timestamp;
    if (pts == AV_NOPTS_VALUE) pts = v->last_pts == AV_NOPTS_VALUE ? v->start_pts : v->last_pts + 1;
    v->prev_pts = v->last_pts;
    v->last_pts = pts;
    const long long rel = (long long)(pts - v->start_pts);
    const double t = rel * v->tb;
    if (f->decode_error_flags || (f->flags & AV_FRAME_FLAG_CORRUPT)) {
        snprintf(msg, msglen, "%s: damaged frame at %.3f s (decoder error flags 0x%x)", v->path, t,
                 (unsigned)f->decode_error_flags);
        return HM_E_FORMAT;
    }
    /* every decoded frame, also those dropped below: the size is fixed at open */
    if (f->width != v->sw || f->height != v->sh) {
        snprintf(msg, msglen, "%s: frame size changes from %dx%d to %dx%d at %.3f s (not supported)", v->path, v->sw,
                 v->sh, f->width, f->height, t);
        return HM_E_UNSUPPORTED;
    }
    if (t < v->p.start_s - 1e-9) return 0;
    if (v->end_s > 0 && t >= v->end_s - 1e-9) return 1;
    const long long idx = v->next_index++;
    if (idx % v->p.stride) return 0;
    /* a free slot: the ring minus the filled ones and the one lent out */
    const double w0 = 1e3 * hm_now();
    pthread_mutex_lock(&v->mu);
    while (!v->stop && v->count + (v->held >= 0) >= v->nslots) pthread_cond_wait(&v->cv, &v->mu);
    t0 += 1e3 * hm_now() - w0; /* waiting for the caller is not decoding */
    const int stop = v->stop;
    int at = (v->head + v->count) % v->nslots;
    if (at == v->held) at = (at + 1) % v->nslots; /* cannot happen with the bound above; kept for safety */
    pthread_mutex_unlock(&v->mu);
    if (stop) return 1;
    slot *s = &v->ring[at];
    int rc = hm_video_frame_rgb(&v->sws, f, v->sw, v->sh, v->rot ? v->unrotated : s->rgb, v->path, msg, msglen);
    if (rc) return rc;
    if (v->rot) hm_video_rotate(v->unrotated, v->sw, v->sh, v->rot, s->rgb);
    s->index = idx;
    s->pts = rel;
    s->time_s = t;
    s->decode_ms = 1e3 * hm_now() - t0;
    pthread_mutex_lock(&v->mu);
    v->count++;
    pthread_cond_broadcast(&v->cv);
    pthread_mutex_unlock(&v->mu);
    return 0;
}

/* The decoder refused the packet at time t (seconds; <0 unknown) with
 * FFmpeg error r: a frame over the size bound (max_pixels) is a size
 * change, said with the size FFmpeg logged; anything else is damage.
 * what: "decoding failed", "damaged: the decoder rejects the data". */
static int decode_error(hamer_video *v, int r, double t, const char *what, char *msg, size_t msglen) {
    char e[128], at[48] = "";
    int w, h;
    if (t >= 0) snprintf(at, sizeof at, " at %.3f s", t);
    if (hm_ff_refused_size(&v->sink, &w, &h) && (w != v->sw || h != v->sh)) {
        snprintf(msg, msglen, "%s: frame size changes from %dx%d to %dx%d%s (not supported; refused before decoding)",
                 v->path, v->sw, v->sh, w, h, at);
        return HM_E_UNSUPPORTED;
    }
    char hint[160] = "";
    if (r == AVERROR(EINVAL))
        snprintf(hint, sizeof hint, " (what a frame larger than the first, %dx%d, gets: size changes are not supported)",
                 v->sw, v->sh);
    snprintf(msg, msglen, "%s: %s%s: %s%s", v->path, what, at, averr(r, e, sizeof e), hint);
    return HM_E_FORMAT;
}

/* Every frame the decoder has ready. Same returns as take_frame. */
static int drain(hamer_video *v, double *t0, double pkt_t, char *msg, size_t msglen) {
    for (;;) {
        int r = avcodec_receive_frame(v->dec, v->frm);
        if (r == AVERROR(EAGAIN) || r == AVERROR_EOF) return 0;
        if (r < 0) return decode_error(v, r, pkt_t, "decoding failed", msg, msglen);
        r = take_frame(v, v->frm, *t0, msg, msglen);
        av_frame_unref(v->frm);
        *t0 = 1e3 * hm_now();
        if (r) return r;
    }
}

/* A stream that ends clearly before the duration its container states was
 * cut short: the last frame must reach the stated end within 3 frames or
 * 5 %, whichever is more. */
static int truncated(const hamer_video *v, char *msg, size_t msglen) {
    /* the stream's own duration only: a container's may include a longer audio track */
    const double stated = v->st->duration != AV_NOPTS_VALUE && v->st->duration > 0 ? v->st->duration * v->tb : 0;
    if (v->end_s > 0 || !(stated > 0)) return 0;
    const double last = v->last_pts == AV_NOPTS_VALUE ? 0.0 : (v->last_pts - v->start_pts) * v->tb;
    /* a frame's length: the stated rate's, or the last interval seen if longer */
    const double fps = av_q2d(v->st->avg_frame_rate);
    double frame = fps > 0 ? 1.0 / fps : 0.0;
    if (v->prev_pts != AV_NOPTS_VALUE && v->last_pts != AV_NOPTS_VALUE)
        frame = fmax(frame, (v->last_pts - v->prev_pts) * v->tb);
    if (last + frame >= stated - fmax(3 * frame, 0.05 * stated)) return 0;
    snprintf(msg, msglen, "%s: truncated: the stream ends at %.3f s but its container states %.3f s", v->path,
             last + frame, stated);
    return HM_E_FORMAT;
}

static void *decode_main(void *arg) {
    hamer_video *v = arg;
    char msg[2048] = "", e[128];
    int rc = 0, eof = 0;
    double t0 = 1e3 * hm_now();
    v->sink.demuxer = v->fmt;
    hm_ff_log_enter(&v->sink);
    while (!rc) {
        int r = av_read_frame(v->fmt, v->pkt);
        /* the packet's time, for a decoder's refusal (its frame never comes out) */
        const int64_t ts = r < 0 ? AV_NOPTS_VALUE : v->pkt->pts != AV_NOPTS_VALUE ? v->pkt->pts : v->pkt->dts;
        const double pkt_t = ts == AV_NOPTS_VALUE ? -1.0 : (ts - v->start_pts) * v->tb;
        if (v->sink.damaged) { /* the demuxer saw the damage, whatever it returned */
            snprintf(msg, sizeof msg, "%s: damaged or truncated: %s", v->path, v->sink.msg);
            rc = HM_E_FORMAT;
            if (r >= 0) av_packet_unref(v->pkt);
        } else if (r == AVERROR_EOF) {
            eof = 1;
        } else if (r < 0) {
            snprintf(msg, sizeof msg, "%s: damaged or truncated: %s", v->path, averr(r, e, sizeof e));
            rc = r == AVERROR(EIO) ? HM_E_IO : HM_E_FORMAT;
        } else if (v->pkt->stream_index != v->si) {
            av_packet_unref(v->pkt);
            continue;
        } else if (v->pkt->flags & AV_PKT_FLAG_CORRUPT) {
            snprintf(msg, sizeof msg, "%s: damaged packet (marked corrupt by the demuxer)", v->path);
            rc = HM_E_FORMAT;
            av_packet_unref(v->pkt);
        }
        /* at the end or at damage: flush the decoder, so the frames it holds
         * (reordering delay) still come out */
        r = avcodec_send_packet(v->dec, (eof || rc) ? NULL : v->pkt);
        if (!eof && !rc) av_packet_unref(v->pkt);
        if (r < 0 && r != AVERROR(EAGAIN) && r != AVERROR_EOF) {
            if (!rc) {
                rc = decode_error(v, r, pkt_t, "damaged: the decoder rejects the data", msg, sizeof msg);
                avcodec_send_packet(v->dec, NULL);
            }
        }
        char dmsg[2048];
        int d = drain(v, &t0, pkt_t, dmsg, sizeof dmsg);
        if (d == 1) { /* end of the range, or closing */
            if (!rc) break;
        } else if (d < 0 && !rc) {
            rc = d;
            snprintf(msg, sizeof msg, "%s", dmsg);
        }
        if (eof || rc) break;
    }
    if (!rc && eof) rc = truncated(v, msg, sizeof msg);
    hm_ff_log_leave();
    finish(v, rc, msg);
    return NULL;
}

/* A video is one self-contained file. Demuxers that open further
 * resources named inside the file (HLS playlists' segments, concat lists'
 * entries, DASH manifests) would let a hostile "video" read other local
 * files or reach the network, so every open but that of the file itself is
 * refused, and only the file protocol is allowed. */
static int open_only_self(AVFormatContext *s, AVIOContext **pb, const char *url, int flags, AVDictionary **opts) {
    hamer_video *v = s->opaque;
    if (!url || strcmp(url, v->path) != 0) {
        v->refused = 1;
        return AVERROR(EPERM);
    }
    return v->ff_open(s, pb, url, flags, opts);
}

/* Demuxers whose files are lists of other files. The concat demuxer opens
 * its entries in contexts of its own, out of open_only_self's reach, so
 * these are told apart by their content before anything is opened. */
static int names_list_format(const AVInputFormat *fmt) {
    static const char *const lists[] = {"concat", "hls", "dash", "imf"};
    for (size_t i = 0; fmt && i < sizeof lists / sizeof lists[0]; i++)
        if (av_match_name(lists[i], fmt->name)) return 1;
    return 0;
}

static int names_other_files(const char *path) {
    uint8_t buf[4096 + AVPROBE_PADDING_SIZE];
    memset(buf, 0, sizeof buf);
    FILE *f = fopen(path, "rb");
    if (!f) return 0; /* avformat_open_input reports it */
    size_t n = fread(buf, 1, 4096, f);
    fclose(f);
    AVProbeData pd = {.filename = path, .buf = buf, .buf_size = (int)n};
    int score = 0;
    return names_list_format(av_probe_input_format2(&pd, 1, &score));
}

static int refuse_lists(const hamer_video *v) {
    return hm_err(HM_E_FORMAT, "%s: refers to other files or URLs (a playlist or list); only self-contained video files are read",
                  v->path);
}

/* FFmpeg refused the picture size while opening (its header check, or
 * max_pixels): the standard out-of-range message; 0 if it logged none. */
static int refused_at_open(const hamer_video *v, const hm_ff_sink *log) {
    int w, h;
    if (!hm_ff_refused_size(log, &w, &h)) return 0;
    return hm_err(HM_E_FORMAT, "%s: frame size %dx%d out of range (at most 100 megapixels, %d a side)", v->path, w, h,
                  HM_IMAGE_MAX_DIM);
}

/* Pixels a decoded picture may have: the stream's size, plus the padding
 * codecs decode to (macroblocks, coding tree units, superblocks) and
 * FFmpeg's stride alignment, and at least 4 megapixels, because decoders
 * check their scratch buffers with the same limit (MPEG-4 asks 192x280 for
 * a 64x48 stream). Set as the decoder's max_pixels, so a later frame that
 * claims a larger size is refused before its buffers are allocated; a
 * change within the bound is refused once decoded (take_frame). */
int64_t hm_video_max_pixels(int w, int h) {
    const int64_t aw = ((int64_t)w + 63) / 64 * 64 + 256, ah = ((int64_t)h + 63) / 64 * 64 + 256;
    const int64_t px = aw * (ah > 768 ? ah : 768);
    return px > HM_VIDEO_MIN_MAX_PIXELS ? px : HM_VIDEO_MIN_MAX_PIXELS;
}

/* Open the file, find its video stream and open the decoder; log holds
 * FFmpeg's messages of the open. */
static int open_stream(hamer_video *v, const hm_ff_sink *log) {
    char e[128];
    if (names_other_files(v->path)) return refuse_lists(v);
    if (!(v->fmt = avformat_alloc_context())) return hm_err(HM_E_NOMEM, "%s: out of memory", v->path);
    v->ff_open = v->fmt->io_open;
    v->fmt->opaque = v;
    v->fmt->io_open = open_only_self;
    AVDictionary *opt = NULL;
    av_dict_set(&opt, "protocol_whitelist", "file", 0);
    int r = avformat_open_input(&v->fmt, v->path, NULL, &opt);
    av_dict_free(&opt);
    if (r < 0 && v->refused) return refuse_lists(v);
    /* a demuxer that checks the size itself (Y4M) fails the open with an
     * error code that does not say so (EBUSY): the logged size does */
    if (r < 0 && refused_at_open(v, log)) return hm_errcode();
    if (r < 0) return hm_err(r == AVERROR(ENOENT) ? HM_E_IO : HM_E_FORMAT, "%s: cannot open as a video: %s", v->path,
                             averr(r, e, sizeof e));
    if ((r = avformat_find_stream_info(v->fmt, NULL)) < 0) {
        if (v->refused) return refuse_lists(v);
        if (refused_at_open(v, log)) return hm_errcode();
        return hm_err(HM_E_FORMAT, "%s: cannot read the stream information: %s", v->path, averr(r, e, sizeof e));
    }
    /* a list the content probe above did not recognise */
    if (names_list_format(v->fmt->iformat)) return refuse_lists(v);
    const AVCodec *codec = NULL;
    v->si = av_find_best_stream(v->fmt, AVMEDIA_TYPE_VIDEO, -1, -1, &codec, 0);
    if (v->si == AVERROR_STREAM_NOT_FOUND) return hm_err(HM_E_FORMAT, "%s: no video stream", v->path);
    if (v->si < 0 || !codec)
        return hm_err(HM_E_UNSUPPORTED, "%s: no decoder in this FFmpeg for its video codec", v->path);
    v->st = v->fmt->streams[v->si];
    const AVCodecParameters *cp = v->st->codecpar;
    /* no size: the decoder refused the one in the stream (a 20000x20000 PNG) */
    if ((cp->width < 1 || cp->height < 1) && refused_at_open(v, log)) return hm_errcode();
    if (cp->width < 1 || cp->height < 1)
        return hm_err(HM_E_FORMAT, "%s: the video stream states no frame size (%dx%d)", v->path, cp->width, cp->height);
    if (cp->width > HM_IMAGE_MAX_DIM || cp->height > HM_IMAGE_MAX_DIM ||
        (long long)cp->width * cp->height > HM_IMAGE_MAX_PIXELS)
        return hm_err(HM_E_FORMAT, "%s: frame size %dx%d out of range (at most 100 megapixels)", v->path, cp->width,
                      cp->height);
    if (!(v->dec = avcodec_alloc_context3(codec))) return hm_err(HM_E_NOMEM, "%s: out of memory", v->path);
    if ((r = avcodec_parameters_to_context(v->dec, cp)) < 0)
        return hm_err(HM_E_FORMAT, "%s: bad codec parameters: %s", v->path, averr(r, e, sizeof e));
    v->dec->thread_count = v->p.threads;
    v->dec->max_pixels = hm_video_max_pixels(cp->width, cp->height);
    v->dec->pkt_timebase = v->st->time_base;
    if ((r = avcodec_open2(v->dec, codec, NULL)) < 0)
        return hm_err(HM_E_UNSUPPORTED, "%s: cannot open the %s decoder: %s", v->path, codec->name,
                      averr(r, e, sizeof e));
    if ((v->rot = stream_rotation(v->st, v->path)) < 0) return hm_errcode();
    v->sw = cp->width, v->sh = cp->height;
    v->w = v->rot % 180 ? v->sh : v->sw;
    v->h = v->rot % 180 ? v->sw : v->sh;
    v->tb = av_q2d(v->st->time_base);
    v->start_pts = v->st->start_time != AV_NOPTS_VALUE ? v->st->start_time : 0;
    v->last_pts = v->prev_pts = AV_NOPTS_VALUE;
    if (v->p.duration_s > 0) v->end_s = v->p.start_s + v->p.duration_s;
    if (v->p.start_s > 0) {
        /* to the key frame at or before the start; frames before it are dropped */
        const int64_t ts = v->start_pts + (int64_t)floor(v->p.start_s / v->tb);
        if (av_seek_frame(v->fmt, v->si, ts, AVSEEK_FLAG_BACKWARD) < 0)
            av_seek_frame(v->fmt, v->si, v->start_pts, AVSEEK_FLAG_BACKWARD); /* not seekable: decode from the start */
        avcodec_flush_buffers(v->dec);
    }
    return HM_OK;
}

int hm_video_check_params(const hamer_video_params *p) {
    if (!p) return hm_err(HM_E_ARG, "video: params is NULL");
    if (HM_CHECK_RESERVED(p, "hamer_video_params")) return HM_E_ARG;
    /* seconds are bounded (about 31 years) so that start_s / time base
     * always fits the int64 timestamps it is turned into */
    if (!(isfinite(p->start_s) && p->start_s >= 0 && p->start_s <= HM_VIDEO_MAX_SECONDS))
        return hm_err(HM_E_ARG, "video: start_s %g outside 0..%g seconds", p->start_s, HM_VIDEO_MAX_SECONDS);
    if (!(isfinite(p->duration_s) && p->duration_s >= 0 && p->duration_s <= HM_VIDEO_MAX_SECONDS))
        return hm_err(HM_E_ARG, "video: duration_s %g outside 0..%g seconds (0: to the end)", p->duration_s,
                      HM_VIDEO_MAX_SECONDS);
    if (p->stride < 1 || p->stride > 1000000) return hm_err(HM_E_ARG, "video: stride %d outside 1..1000000", p->stride);
    if (p->queue < 1 || p->queue > 64) return hm_err(HM_E_ARG, "video: queue %d outside 1..64", p->queue);
    if (p->threads < 0 || p->threads > 64) return hm_err(HM_E_ARG, "video: threads %d outside 0..64", p->threads);
    return HM_OK;
}

hamer_video *hm_video_open(const char *path, const hamer_video_params *params) {
    hamer_video_params p = params ? *params : hm_video_default_params();
    if (!path) {
        hm_err(HM_E_ARG, "hamer_video_open: path is NULL");
        return NULL;
    }
    if (hm_video_check_params(&p)) return NULL;
    if (strlen(path) >= sizeof ((hamer_video *)0)->path) {
        hm_err(HM_E_ARG, "hamer_video_open: path too long");
        return NULL;
    }
    hamer_video *v = calloc(1, sizeof *v);
    if (!v) {
        hm_err(HM_E_NOMEM, "hamer_video_open: out of memory");
        return NULL;
    }
    snprintf(v->path, sizeof v->path, "%s", path);
    v->p = p;
    v->held = -1;
    pthread_mutex_init(&v->mu, NULL);
    pthread_cond_init(&v->cv, NULL);
    hm_ff_sink quiet = {0};
    hm_ff_log_enter(&quiet);
    const int orc = open_stream(v, &quiet);
    hm_ff_log_leave();
    if (orc) goto fail;
    v->nslots = p.queue + 1;
    v->pkt = av_packet_alloc();
    v->frm = av_frame_alloc();
    v->ring = calloc((size_t)v->nslots, sizeof *v->ring);
    if (!v->pkt || !v->frm || !v->ring) goto nomem;
    /* swscale's SIMD rows may write past the last pixel: slack after each picture */
    const size_t npix = (size_t)v->w * v->h * 3 + HM_VIDEO_SLACK;
    for (int i = 0; i < v->nslots; i++)
        if (!(v->ring[i].rgb = hm_alloc(npix))) goto fail;
    if (v->rot && !(v->unrotated = hm_alloc(npix))) goto fail;
    if (pthread_create(&v->thread, NULL, decode_main, v)) {
        hm_err(HM_E_NOMEM, "%s: cannot start the decode thread", path);
        goto fail;
    }
    v->thread_started = 1;
    return v;
nomem:
    hm_err(HM_E_NOMEM, "%s: out of memory", path);
fail:
    hm_video_close(v);
    return NULL;
}

int hm_video_info(const hamer_video *v, hamer_video_info *info) {
    if (!v || !info) return hm_err(HM_E_ARG, "hamer_video_get_info: video or info is NULL");
    memset(info, 0, sizeof *info);
    info->width = v->w, info->height = v->h, info->rotation = v->rot;
    const double fps = av_q2d(v->st->avg_frame_rate);
    info->fps = isfinite(fps) && fps > 0 ? fps : 0.0;
    if (v->st->duration != AV_NOPTS_VALUE && v->st->duration > 0) info->duration_s = v->st->duration * v->tb;
    else if (v->fmt->duration != AV_NOPTS_VALUE && v->fmt->duration > 0) info->duration_s = v->fmt->duration / 1e6;
    info->time_base_num = v->st->time_base.num, info->time_base_den = v->st->time_base.den;
    info->frames = v->st->nb_frames > 0 ? v->st->nb_frames : 0;
    info->codec = v->dec->codec ? v->dec->codec->name : "";
    info->format = v->fmt->iformat ? v->fmt->iformat->name : "";
    return HM_OK;
}

int hm_video_next(hamer_video *v, hamer_video_frame *frame) {
    if (!v || !frame) return hm_err(HM_E_ARG, "hamer_video_next: video or frame is NULL");
    memset(frame, 0, sizeof *frame);
    pthread_mutex_lock(&v->mu);
    if (v->held >= 0) { /* the caller is done with the previous frame */
        v->held = -1;
        pthread_cond_broadcast(&v->cv);
    }
    while (!v->count && !v->finished) pthread_cond_wait(&v->cv, &v->mu);
    int rc;
    if (v->count) {
        const slot *s = &v->ring[v->head];
        v->held = v->head;
        v->head = (v->head + 1) % v->nslots;
        v->count--;
        v->emitted++;
        *frame = (hamer_video_frame){s->rgb, v->w, v->h, s->index, s->pts, s->time_s, s->decode_ms};
        rc = 1;
    } else if (v->status) {
        rc = hm_err(v->status, "%s", v->msg);
    } else {
        rc = 0;
    }
    pthread_mutex_unlock(&v->mu);
    return rc;
}

void hm_video_close(hamer_video *v) {
    if (!v) return;
    if (v->thread_started) {
        pthread_mutex_lock(&v->mu);
        v->stop = 1;
        pthread_cond_broadcast(&v->cv);
        pthread_mutex_unlock(&v->mu);
        pthread_join(v->thread, NULL);
    }
    hm_ff_sink quiet = {0};
    hm_ff_log_enter(&quiet);
    for (int i = 0; v->ring && i < v->nslots; i++) hm_free(v->ring[i].rgb);
    free(v->ring);
    hm_free(v->unrotated);
    sws_freeContext(v->sws);
    av_frame_free(&v->frm);
    av_packet_free(&v->pkt);
    avcodec_free_context(&v->dec);
    avformat_close_input(&v->fmt);
    hm_ff_log_leave();
    pthread_mutex_destroy(&v->mu);
    pthread_cond_destroy(&v->cv);
    free(v);
}
