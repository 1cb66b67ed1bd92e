/* writer.c - hamer_video_writer: RGB frames -> H.264 (libx264) or MPEG-4
 * part 2, muxed by the container the file name asks for, through a
 * temporary file renamed at the end (video.h). */
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/opt.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/util.h"
#include "format/image.h"
#include "format/fflog.h"
#include "video/video.h"

struct hamer_video_writer {
    char path[1024], tmp[1100];
    AVFormatContext *fmt;
    AVCodecContext *enc;
    AVStream *st;
    AVFrame *frm;
    AVPacket *pkt;
    struct SwsContext *sws;
    uint8_t *rgb;              /* the caller's frame copied, with slack for swscale's reads */
    int w, h, header_written;
    long long last_pts;
    AVRational in_tb;
};

static const char *averr(int e, char *buf, size_t n) {
    av_strerror(e, buf, n);
    return buf;
}

/* Every packet the encoder has ready, into the file. */
static int write_packets(hamer_video_writer *wr) {
    char e[128];
    for (;;) {
        int r = avcodec_receive_packet(wr->enc, wr->pkt);
        if (r == AVERROR(EAGAIN) || r == AVERROR_EOF) return HM_OK;
        if (r < 0) return hm_err(HM_E_IO, "%s: encoding failed: %s", wr->path, averr(r, e, sizeof e));
        /* without a duration, MP4's edit list would end at the last frame's
         * start and players drop it: the nominal frame time */
        if (wr->pkt->duration <= 0 && wr->enc->framerate.num > 0)
            wr->pkt->duration = av_rescale_q(1, av_inv_q(wr->enc->framerate), wr->enc->time_base);
        av_packet_rescale_ts(wr->pkt, wr->enc->time_base, wr->st->time_base);
        wr->pkt->stream_index = wr->st->index;
        r = av_interleaved_write_frame(wr->fmt, wr->pkt);
        if (r < 0) return hm_err(HM_E_IO, "%s: cannot write: %s", wr->path, averr(r, e, sizeof e));
    }
}

/* The encoder: libx264 when this FFmpeg has it, else mpeg4 (always built
 * in); force names one of the two. */
static int open_encoder(hamer_video_writer *wr, const AVOutputFormat *of, double fps, const char *force) {
    char e[128];
    const AVCodec *c = force && strcmp(force, "libx264") ? NULL : avcodec_find_encoder_by_name("libx264");
    const int x264 = c != NULL;
    if (!c && force && strcmp(force, "mpeg4"))
        return hm_err(HM_E_ARG, "%s: unknown encoder '%s' (libx264 or mpeg4)", wr->path, force);
    if (!c && force && !strcmp(force, "libx264"))
        return hm_err(HM_E_UNSUPPORTED, "%s: this FFmpeg has no libx264 encoder", wr->path);
    if (!c) c = avcodec_find_encoder(AV_CODEC_ID_MPEG4);
    if (!c) return hm_err(HM_E_UNSUPPORTED, "%s: this FFmpeg has neither libx264 nor mpeg4 encoders", wr->path);
    const int odd = (wr->w | wr->h) & 1;
    if (odd && !x264)
        return hm_err(HM_E_UNSUPPORTED, "%s: %dx%d: mpeg4 needs an even width and height", wr->path, wr->w, wr->h);
    if (!(wr->enc = avcodec_alloc_context3(c))) return hm_err(HM_E_NOMEM, "%s: out of memory", wr->path);
    AVCodecContext *enc = wr->enc;
    enc->width = wr->w;
    enc->height = wr->h;
    enc->pix_fmt = odd ? AV_PIX_FMT_YUV444P : AV_PIX_FMT_YUV420P;
    /* The caller's time base keeps every timestamp exact; MPEG-4 part 2
     * caps the denominator at 65535, so there millisecond ticks are used. */
    enc->time_base = wr->in_tb;
    if (!x264 && wr->in_tb.den > 65535) enc->time_base = (AVRational){1, 1000};
    enc->framerate = av_d2q(fps, 100000);
    enc->color_range = AVCOL_RANGE_MPEG;
    enc->colorspace = AVCOL_SPC_BT470BG;
    enc->thread_count = 1; /* the cores belong to inference */
    if (of->flags & AVFMT_GLOBALHEADER) enc->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
    AVDictionary *opt = NULL;
    if (x264) {
        av_dict_set(&opt, "preset", "veryfast", 0);
        av_dict_set(&opt, "crf", "18", 0);
    } else {
        enc->flags |= AV_CODEC_FLAG_QSCALE;
        enc->global_quality = FF_QP2LAMBDA * 3;
    }
    int r = avcodec_open2(enc, c, &opt);
    av_dict_free(&opt);
    if (r < 0) return hm_err(HM_E_UNSUPPORTED, "%s: cannot open the %s encoder: %s", wr->path, c->name,
                             averr(r, e, sizeof e));
    return HM_OK;
}

/* The target must name one video file of a container that keeps
 * timestamps, and be a regular file if it exists. Refused (HM_E_ARG):
 * a name with a frame-number pattern ("shot%03d.png": an image sequence);
 * muxers that open files of their own by name (AVFMT_NOFILE: image2 for
 * .png/.jpg/..., HLS, DASH, ...), which would write to the target, or to
 * files numbered after it, directly instead of through the temporary
 * file; muxers without timestamps (AVFMT_NOTIMESTAMPS: raw .h264, .yuv,
 * .mjpeg, ...), which would lose the frames' times. *of: the muxer. */
static int check_target(const char *path, const AVOutputFormat **of) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (av_filename_number_test(base))
        return hm_err(HM_E_ARG, "%s: a frame-number pattern (%%d) names an image sequence; this writes one video "
                                "file (use .mp4, .mkv, .mov, ...)", path);
    *of = av_guess_format(NULL, path, NULL);
    if (!*of) return hm_err(HM_E_ARG, "%s: no container for this file name extension (use .mp4, .mkv, .mov, ...)", path);
    if ((*of)->flags & AVFMT_NOFILE && !strncmp((*of)->name, "image2", 6))
        return hm_err(HM_E_ARG, "%s: an image file name (FFmpeg's '%s' muxer), not a video container (use .mp4, "
                                ".mkv, .mov, ...)", path, (*of)->name);
    if ((*of)->flags & AVFMT_NOFILE)
        return hm_err(HM_E_ARG, "%s: FFmpeg's '%s' muxer writes files of its own (segments, playlists), not one "
                                "video file (use .mp4, .mkv, .mov, ...)", path, (*of)->name);
    if ((*of)->flags & AVFMT_NOTIMESTAMPS)
        return hm_err(HM_E_ARG, "%s: the '%s' format keeps no timestamps (a raw stream or an image), not a video "
                                "container (use .mp4, .mkv, .mov, ...)", path, (*of)->name);
    if ((*of)->video_codec == AV_CODEC_ID_NONE)
        return hm_err(HM_E_ARG, "%s: the '%s' format holds no video (use .mp4, .mkv, .mov, ...)", path, (*of)->name);
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
        return hm_err(HM_E_IO, "%s: exists and is not a regular file", path);
    return HM_OK;
}

static int writer_close(hamer_video_writer *wr, int abort);

static hamer_video_writer *writer_open(const char *path, int w, int h, int tb_num, int tb_den, double fps,
                                       const char *force) {
    char e[128];
    if (!path || w < 1 || h < 1 || w > HM_IMAGE_MAX_DIM || h > HM_IMAGE_MAX_DIM ||
        (long long)w * h > HM_IMAGE_MAX_PIXELS || tb_num < 1 || tb_den < 1 || !(fps > 0) || !isfinite(fps)) {
        hm_err(HM_E_ARG, "hamer_video_writer_open: bad arguments (%dx%d, time base %d/%d, fps %g)", w, h, tb_num,
               tb_den, fps);
        return NULL;
    }
    hamer_video_writer *wr = calloc(1, sizeof *wr);
    if (!wr) {
        hm_err(HM_E_NOMEM, "hamer_video_writer_open: out of memory");
        return NULL;
    }
    if (strlen(path) >= sizeof wr->path) {
        hm_err(HM_E_ARG, "hamer_video_writer_open: path too long");
        free(wr);
        return NULL;
    }
    snprintf(wr->path, sizeof wr->path, "%s", path);
    wr->w = w, wr->h = h;
    wr->in_tb = (AVRational){tb_num, tb_den};
    wr->last_pts = -1;
    int r;
    const AVOutputFormat *of = NULL;
    if (check_target(path, &of) || open_encoder(wr, of, fps, force)) goto fail;
    if (avformat_query_codec(of, wr->enc->codec_id, FF_COMPLIANCE_NORMAL) == 0) {
        hm_err(HM_E_ARG, "%s: the '%s' format cannot hold %s video (use .mp4, .mkv, .mov, ...)", path, of->name,
               wr->enc->codec->name);
        goto fail;
    }
    /* The bytes go to a temporary file beside the target. FFmpeg is given
     * only that file's name, behind "file:" (a name like "pipe:1.mp4" or
     * "http:..." stays a local file), both for the muxer's own use of the
     * name and for the I/O context: nothing FFmpeg does can open the
     * target. */
    snprintf(wr->tmp, sizeof wr->tmp, "%s.partXXXXXX", path);
    int fd = mkstemp(wr->tmp);
    if (fd < 0) {
        hm_err(HM_E_IO, "%s: cannot create a temporary file beside it: %s", path, strerror(errno));
        wr->tmp[0] = 0;
        goto fail;
    }
    fchmod(fd, 0644);
    close(fd);
    char url[sizeof wr->tmp + 8];
    snprintf(url, sizeof url, "file:%s", wr->tmp);
    if ((r = avformat_alloc_output_context2(&wr->fmt, of, NULL, url)) < 0 || !wr->fmt) {
        hm_err(HM_E_NOMEM, "%s: cannot set up the container", path);
        goto fail;
    }
    if (!(wr->st = avformat_new_stream(wr->fmt, NULL))) {
        hm_err(HM_E_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    wr->st->time_base = wr->enc->time_base;
    avcodec_parameters_from_context(wr->st->codecpar, wr->enc);
    if ((r = avio_open(&wr->fmt->pb, url, AVIO_FLAG_WRITE)) < 0) {
        hm_err(HM_E_IO, "%s: cannot write: %s", path, averr(r, e, sizeof e));
        goto fail;
    }
    if ((r = avformat_write_header(wr->fmt, NULL)) < 0) {
        /* muxers that do not list their codecs (gif, apng, webp, y4m, ...)
         * refuse a stream they cannot hold only here */
        if (r == AVERROR(EINVAL) || r == AVERROR_INVALIDDATA)
            hm_err(HM_E_ARG, "%s: the '%s' format does not take %s video: %s (use .mp4, .mkv, .mov, ...)", path,
                   of->name, wr->enc->codec->name, averr(r, e, sizeof e));
        else
            hm_err(HM_E_IO, "%s: cannot write the '%s' header: %s", path, of->name, averr(r, e, sizeof e));
        goto fail;
    }
    wr->header_written = 1;
    wr->frm = av_frame_alloc();
    wr->pkt = av_packet_alloc();
    if (!wr->frm || !wr->pkt) {
        hm_err(HM_E_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    wr->frm->format = wr->enc->pix_fmt;
    wr->frm->width = w, wr->frm->height = h;
    if (av_frame_get_buffer(wr->frm, 0) < 0) {
        hm_err(HM_E_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    if (!(wr->rgb = hm_alloc((size_t)w * h * 3 + HM_VIDEO_SLACK))) goto fail;
    wr->sws = sws_getContext(w, h, AV_PIX_FMT_RGB24, w, h, wr->enc->pix_fmt, SWS_BICUBIC, NULL, NULL, NULL);
    if (!wr->sws) {
        hm_err(HM_E_UNSUPPORTED, "%s: cannot convert RGB to %s", path, av_get_pix_fmt_name(wr->enc->pix_fmt));
        goto fail;
    }
    return wr;
fail:
    writer_close(wr, 1);
    return NULL;
}

const char *hm_video_writer_codec(const hamer_video_writer *wr) {
    if (!wr) {
        hm_err(HM_E_ARG, "hamer_video_writer_get_codec: writer is NULL");
        return NULL;
    }
    return wr->enc->codec->name;
}

static int writer_write(hamer_video_writer *wr, const uint8_t *rgb, long long pts) {
    if (!wr || !rgb) return hm_err(HM_E_ARG, "hamer_video_writer_write: writer or frame is NULL");
    const int64_t p = av_rescale_q(pts, wr->in_tb, wr->enc->time_base);
    if (pts < 0 || (wr->last_pts >= 0 && p <= wr->last_pts))
        return hm_err(HM_E_ARG, "%s: pts %lld does not increase", wr->path, pts);
    if (av_frame_make_writable(wr->frm) < 0) return hm_err(HM_E_NOMEM, "%s: out of memory", wr->path);
    memcpy(wr->rgb, rgb, (size_t)wr->w * wr->h * 3);
    const uint8_t *src[4] = {wr->rgb, NULL, NULL, NULL};
    const int stride[4] = {3 * wr->w, 0, 0, 0};
    sws_scale(wr->sws, src, stride, 0, wr->h, wr->frm->data, wr->frm->linesize);
    wr->frm->pts = p;
    wr->last_pts = p;
    char e[128];
    int r = avcodec_send_frame(wr->enc, wr->frm);
    if (r < 0) return hm_err(HM_E_IO, "%s: encoding failed: %s", wr->path, averr(r, e, sizeof e));
    return write_packets(wr);
}

static int writer_close(hamer_video_writer *wr, int abort) {
    if (!wr) return hm_err(HM_E_ARG, "hamer_video_writer_close: writer is NULL");
    int rc = HM_OK;
    char e[128];
    if (!abort && wr->header_written) {
        int r = avcodec_send_frame(wr->enc, NULL);
        rc = r < 0 && r != AVERROR_EOF ? hm_err(HM_E_IO, "%s: encoding failed: %s", wr->path, averr(r, e, sizeof e))
                                       : write_packets(wr);
        if (!rc && (r = av_write_trailer(wr->fmt)) < 0)
            rc = hm_err(HM_E_IO, "%s: cannot finish the file: %s", wr->path, averr(r, e, sizeof e));
    }
    if (wr->fmt && wr->fmt->pb && avio_closep(&wr->fmt->pb) < 0 && !rc && !abort)
        rc = hm_err(HM_E_IO, "%s: cannot write", wr->path);
    if (wr->tmp[0]) {
        if (!abort && !rc && wr->header_written) {
            /* on the disk before the rename, so a crash leaves the old file
             * or the whole new one */
            int fd = open(wr->tmp, O_RDONLY | O_CLOEXEC);
            if (fd < 0 || fsync(fd) != 0) rc = hm_err(HM_E_IO, "%s: cannot sync the finished file: %s", wr->path,
                                                      strerror(errno));
            if (fd >= 0) close(fd);
            if (!rc && rename(wr->tmp, wr->path) != 0)
                rc = hm_err(HM_E_IO, "%s: cannot rename the finished file into place: %s", wr->path, strerror(errno));
        }
        if (abort || rc || !wr->header_written) unlink(wr->tmp);
    }
    sws_freeContext(wr->sws);
    hm_free(wr->rgb);
    av_frame_free(&wr->frm);
    av_packet_free(&wr->pkt);
    avcodec_free_context(&wr->enc);
    avformat_free_context(wr->fmt);
    free(wr);
    return rc;
}

/* The entry points: FFmpeg's messages (x264's banner, ...) kept off stderr. */
hamer_video_writer *hm_video_writer_open(const char *path, int w, int h, int tb_num, int tb_den, double fps) {
    return hm_video_writer_open_with(path, w, h, tb_num, tb_den, fps, NULL);
}

hamer_video_writer *hm_video_writer_open_with(const char *path, int w, int h, int tb_num, int tb_den, double fps,
                                              const char *encoder) {
    hm_ff_sink quiet = {0};
    hm_ff_log_enter(&quiet);
    hamer_video_writer *wr = writer_open(path, w, h, tb_num, tb_den, fps, encoder);
    hm_ff_log_leave();
    return wr;
}

int hm_video_writer_write(hamer_video_writer *wr, const uint8_t *rgb, long long pts) {
    hm_ff_sink quiet = {0};
    hm_ff_log_enter(&quiet);
    int rc = writer_write(wr, rgb, pts);
    hm_ff_log_leave();
    return rc;
}

int hm_video_writer_close(hamer_video_writer *wr, int abort) {
    hm_ff_sink quiet = {0};
    hm_ff_log_enter(&quiet);
    int rc = writer_close(wr, abort);
    hm_ff_log_leave();
    return rc;
}
