/* image_ext.c - the image formats besides JPEG and PNG (format/image.h):
 * WebP with Debian's libwebp, and AVIF, BMP, TIFF and GIF (first frame)
 * with FFmpeg's demuxers and decoders, from memory.
 *
 * Both paths keep image.c's rules: the format comes from the bytes (the
 * caller's magic-number check), the size limits are checked before any
 * pixel memory of ours is allocated (libwebp: the header's size; FFmpeg:
 * the container's size where it gives one, and the decoder's own
 * max_pixels set to HM_IMAGE_MAX_PIXELS either way, so no frame over the
 * limit is ever allocated), damage is an error (libwebp's status; any error
 * FFmpeg's demuxer or decoder logs, caught by format/fflog.h), and every
 * failure is one line naming the source and the format.
 *
 * Colour as OpenCV's imread (IMREAD_COLOR) gives it where it reads the
 * format: alpha dropped without compositing, grey replicated, palettes
 * expanded. YUV (AVIF) is converted by swscale with the frame's own
 * matrix and range (BT.601 limited when unspecified). EXIF and AVIF
 * rotation are not applied.
 */
#include <stdio.h>
#include <string.h>

#ifndef HAMER_NO_FFMPEG
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/imgutils.h>
#include <libswscale/swscale.h>
#endif
#include <webp/decode.h>

#include "core/util.h"
#ifndef HAMER_NO_FFMPEG
#include "format/fflog.h"
#endif
#include "format/image.h"
#include "format/image_ext.h"

/* Size limits shared by every decoder; checked before pixels are allocated. */
int hm_image_check_size(const char *what, const char *fmt, long long w, long long h) {
    if (w <= 0 || h <= 0) return hm_err(HM_E_FORMAT, "%s: %s image has no pixels (%lldx%lld)", what, fmt, w, h);
    if (w > HM_IMAGE_MAX_DIM || h > HM_IMAGE_MAX_DIM)
        return hm_err(HM_E_UNSUPPORTED, "%s: %s image is %lldx%lld; sides over %d pixels are not supported", what, fmt,
                      w, h, HM_IMAGE_MAX_DIM);
    if (w * h > HM_IMAGE_MAX_PIXELS)
        return hm_err(HM_E_UNSUPPORTED, "%s: %s image is %lldx%lld = %.1f megapixels, over the %lld megapixel limit",
                      what, fmt, w, h, (double)(w * h) / 1e6, HM_IMAGE_MAX_PIXELS / 1000000);
    return HM_OK;
}

/* ------------------------------------------------------------------ WebP */

int hm_image_decode_webp(const uint8_t *buf, size_t len, const char *what, hm_image *out) {
    WebPBitstreamFeatures f;
    VP8StatusCode st = WebPGetFeatures(buf, len, &f);
    if (st != VP8_STATUS_OK)
        return hm_err(HM_E_FORMAT, "%s: corrupt or truncated WebP (libwebp status %d)", what, (int)st);
    if (f.has_animation) return hm_err(HM_E_UNSUPPORTED, "%s: animated WebP images are not supported", what);
    int rc = hm_image_check_size(what, "WebP", f.width, f.height);
    if (rc) return rc;
    const size_t stride = (size_t)f.width * 3, n = stride * (size_t)f.height;
    uint8_t *pix = hm_alloc(n);
    if (!pix) return hm_err(HM_E_NOMEM, "%s: out of memory for a %dx%d image", what, f.width, f.height);
    /* the whole bitstream is needed: a truncated file fails here */
    if (!WebPDecodeRGBInto(buf, len, pix, n, (int)stride)) {
        hm_free(pix);
        return hm_err(HM_E_FORMAT, "%s: corrupt or truncated WebP", what);
    }
    out->w = f.width;
    out->h = f.height;
    out->rgb = pix;
    return HM_OK;
}

/* ---------------------------------------------------------------- FFmpeg */

#ifdef HAMER_NO_FFMPEG
/* A build without FFmpeg (cmake -DHAMER_FFMPEG=OFF) reads JPEG, PNG and
 * WebP only. */
int hm_image_decode_ff(const uint8_t *buf, size_t len, const char *what, const char *fmt, const char *demuxer,
                       hm_image *out) {
    (void)buf, (void)len, (void)demuxer;
    memset(out, 0, sizeof *out);
    return hm_err(HM_E_UNSUPPORTED, "%s: %s images are read through FFmpeg, which this build of hamer.c has not "
                  "(configure with -DHAMER_FFMPEG=ON)", what, fmt);
}
#else

typedef struct {
    const uint8_t *p;
    size_t len, pos;
} mem_io;

static int mem_read(void *opaque, uint8_t *dst, int n) {
    mem_io *m = opaque;
    size_t left = m->len - m->pos;
    if (!left) return AVERROR_EOF;
    if ((size_t)n > left) n = (int)left;
    memcpy(dst, m->p + m->pos, (size_t)n);
    m->pos += (size_t)n;
    return n;
}

static int64_t mem_seek(void *opaque, int64_t off, int whence) {
    mem_io *m = opaque;
    int64_t base;
    switch (whence & ~AVSEEK_FORCE) {
    case AVSEEK_SIZE: return (int64_t)m->len;
    case SEEK_SET: base = 0; break;
    case SEEK_CUR: base = (int64_t)m->pos; break;
    case SEEK_END: base = (int64_t)m->len; break;
    default: return -1;
    }
    if (off < -base || base + off > (int64_t)m->len) return -1;
    m->pos = (size_t)(base + off);
    return (int64_t)m->pos;
}

/* Frames looked at, at most, before one decodes (a still image has one
 * packet; a GIF's first frame is its first packet). */
#define FF_MAX_PACKETS 64

typedef struct {
    AVIOContext *io;
    AVFormatContext *fc;
    AVCodecContext *cc;
    AVPacket *pkt;
    AVFrame *fr;
    struct SwsContext *sws;
} ff_ctx;

static void ff_close(ff_ctx *c) {
    sws_freeContext(c->sws);
    av_frame_free(&c->fr);
    av_packet_free(&c->pkt);
    avcodec_free_context(&c->cc);
    if (c->fc) avformat_close_input(&c->fc);
    if (c->io) av_freep(&c->io->buffer);
    avio_context_free(&c->io);
}

/* Open the container (demuxer by name) and the decoder of its video
 * stream; its size checked when the container gives one. */
static int ff_open(ff_ctx *c, mem_io *m, const char *what, const char *fmt, const char *demuxer, hm_ff_sink *sink) {
    const AVInputFormat *in = av_find_input_format(demuxer);
    uint8_t *iobuf = av_malloc(1 << 16);
    if (!in || !iobuf) {
        av_free(iobuf);
        return hm_err(in ? HM_E_NOMEM : HM_E_UNSUPPORTED, "%s: %s", what,
                      in ? "out of memory" : "this FFmpeg has no demuxer for the format");
    }
    c->io = avio_alloc_context(iobuf, 1 << 16, 0, m, mem_read, NULL, mem_seek);
    c->fc = avformat_alloc_context();
    if (!c->io || !c->fc) {
        if (!c->io) av_free(iobuf);
        return hm_err(HM_E_NOMEM, "%s: out of memory", what);
    }
    c->fc->pb = c->io;
    c->fc->flags |= AVFMT_FLAG_CUSTOM_IO;
    sink->demuxer = c->fc;
    int e = avformat_open_input(&c->fc, NULL, in, NULL);
    if (e < 0) {
        c->fc = NULL; /* freed by avformat_open_input on failure */
        return hm_err(HM_E_FORMAT, "%s: corrupt or truncated %s: %s", what, fmt, sink->damaged ? sink->msg : av_err2str(e));
    }
    const int si = av_find_best_stream(c->fc, AVMEDIA_TYPE_VIDEO, -1, -1, NULL, 0);
    if (si < 0) return hm_err(HM_E_FORMAT, "%s: %s file with no image in it", what, fmt);
    const AVCodecParameters *par = c->fc->streams[si]->codecpar;
    if (par->width > 0 && par->height > 0) {
        int rc = hm_image_check_size(what, fmt, par->width, par->height);
        if (rc) return rc;
    }
    const AVCodec *dec = avcodec_find_decoder(par->codec_id);
    if (!dec) return hm_err(HM_E_UNSUPPORTED, "%s: this FFmpeg has no decoder for the %s image", what, fmt);
    if (!(c->cc = avcodec_alloc_context3(dec)) || !(c->pkt = av_packet_alloc()) || !(c->fr = av_frame_alloc()))
        return hm_err(HM_E_NOMEM, "%s: out of memory", what);
    if (avcodec_parameters_to_context(c->cc, par) < 0) return hm_err(HM_E_NOMEM, "%s: out of memory", what);
    c->cc->max_pixels = HM_IMAGE_MAX_PIXELS; /* the decoder refuses larger frames before allocating them */
    c->cc->thread_count = 1;
    hm_ff_log_also(c->cc);
    e = avcodec_open2(c->cc, dec, NULL);
    if (e < 0) return hm_err(HM_E_FORMAT, "%s: cannot decode the %s image: %s", what, fmt, av_err2str(e));
    c->fc->streams[si]->discard = AVDISCARD_DEFAULT;
    for (unsigned k = 0; k < c->fc->nb_streams; k++)
        if ((int)k != si) c->fc->streams[k]->discard = AVDISCARD_ALL;
    return si;
}

/* The first frame of stream si into c->fr; 1 when one decoded. */
static int ff_first_frame(ff_ctx *c, int si, int *err) {
    int eof = 0;
    *err = 0;
    for (int k = 0; k < FF_MAX_PACKETS; k++) {
        int e = avcodec_receive_frame(c->cc, c->fr);
        if (e >= 0) return 1;
        if (e != AVERROR(EAGAIN) || eof) {
            *err = e;
            return 0;
        }
        e = av_read_frame(c->fc, c->pkt);
        if (e < 0) {
            eof = 1;
            e = avcodec_send_packet(c->cc, NULL); /* drain */
        } else {
            e = c->pkt->stream_index == si ? avcodec_send_packet(c->cc, c->pkt) : 0;
            av_packet_unref(c->pkt);
        }
        if (e < 0 && e != AVERROR_EOF) {
            *err = e;
            return 0;
        }
    }
    return 0;
}

int hm_image_decode_ff(const uint8_t *buf, size_t len, const char *what, const char *fmt, const char *demuxer,
                       hm_image *out) {
    mem_io m = {buf, len, 0};
    ff_ctx c;
    memset(&c, 0, sizeof c);
    hm_ff_sink sink;
    memset(&sink, 0, sizeof sink);
    hm_ff_log_enter(&sink);
    uint8_t *pix = NULL;
    int rc = ff_open(&c, &m, what, fmt, demuxer, &sink);
    if (rc >= 0) {
        int err = 0;
        const int si = rc;
        rc = HM_OK;
        if (!ff_first_frame(&c, si, &err)) {
            if (sink.damaged) rc = hm_err(HM_E_FORMAT, "%s: corrupt or truncated %s: %s", what, fmt, sink.msg);
            else if (err == AVERROR(EINVAL) && c.cc->width > 0 && (long long)c.cc->width * c.cc->height > HM_IMAGE_MAX_PIXELS)
                rc = hm_image_check_size(what, fmt, c.cc->width, c.cc->height);
            else rc = hm_err(HM_E_FORMAT, "%s: corrupt or truncated %s: %s", what, fmt,
                             err ? av_err2str(err) : "no image decoded");
        } else if (sink.damaged) {
            rc = hm_err(HM_E_FORMAT, "%s: corrupt or truncated %s: %s", what, fmt, sink.msg);
        } else if (!(rc = hm_image_check_size(what, fmt, c.fr->width, c.fr->height))) {
            const AVFrame *f = c.fr;
            c.sws = sws_getContext(f->width, f->height, (enum AVPixelFormat)f->format, f->width, f->height,
                                   AV_PIX_FMT_RGB24, SWS_BILINEAR | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INT, NULL,
                                   NULL, NULL);
            pix = c.sws ? hm_alloc((size_t)f->width * f->height * 3) : NULL;
            if (!c.sws) {
                rc = hm_err(HM_E_UNSUPPORTED, "%s: %s pixel format %s cannot be converted to RGB", what, fmt,
                            av_get_pix_fmt_name((enum AVPixelFormat)f->format) ? av_get_pix_fmt_name((enum AVPixelFormat)f->format) : "?");
            } else if (!pix) {
                rc = hm_err(HM_E_NOMEM, "%s: out of memory for a %dx%d image", what, f->width, f->height);
            } else {
                /* YUV: the frame's matrix and range (BT.601 limited unless it says) */
                const int cs = f->colorspace == AVCOL_SPC_BT709 ? SWS_CS_ITU709
                               : f->colorspace == AVCOL_SPC_BT2020_NCL || f->colorspace == AVCOL_SPC_BT2020_CL
                                   ? SWS_CS_BT2020 : SWS_CS_ITU601;
                int *it, *tb, sr, dr, br, ct, sa;
                if (sws_getColorspaceDetails(c.sws, &it, &sr, &tb, &dr, &br, &ct, &sa) >= 0)
                    sws_setColorspaceDetails(c.sws, sws_getCoefficients(cs), f->color_range == AVCOL_RANGE_JPEG, tb,
                                             1, br, ct, sa);
                uint8_t *dst[4] = {pix, NULL, NULL, NULL};
                const int dst_ls[4] = {f->width * 3, 0, 0, 0};
                if (sws_scale(c.sws, (const uint8_t *const *)f->data, f->linesize, 0, f->height, dst, dst_ls) != f->height)
                    rc = hm_err(HM_E_FORMAT, "%s: %s image could not be converted to RGB", what, fmt);
                else
                    out->w = f->width, out->h = f->height, out->rgb = pix, pix = NULL;
            }
        }
    }
    hm_ff_log_leave();
    hm_free(pix);
    ff_close(&c);
    return rc < 0 ? rc : HM_OK;
}
#endif /* HAMER_NO_FFMPEG */
