/* video/video.h - video files in and out with FFmpeg's libraries
 * (libavformat, libavcodec, libswscale, libavutil): the internal side of
 * hamer_video_* and hamer_video_writer_* (include/hamer.h says what they
 * do; the functions here check their arguments the same way).
 *
 * Reader (reader.c): a decode thread fills a ring of queue + 1 RGB frames
 * (the one handed to the caller stays untouched until the next call), so
 * decoding overlaps the caller's work and at most queue frames are decoded
 * ahead. Rotation (rotate.c) is applied while converting. Damage: a
 * demuxer read error, a packet the decoder rejects, a packet or frame
 * marked corrupt, or a stream that ends before the duration its container
 * states (a truncated file) stops the thread; the frames before it are
 * delivered, then the error.
 *
 * Writer (writer.c): libx264 (preset veryfast, crf 18) when present, else
 * FFmpeg's mpeg4 (qscale 3); yuv420p (yuv444p for odd sizes with libx264,
 * which 4:2:0 cannot hold); the caller's pts rescaled to the muxer's time
 * base. Errors: HM_E_* after hm_err(), the message naming the file.
 */
#ifndef HM_VIDEO_VIDEO_H
#define HM_VIDEO_VIDEO_H

#include <stdint.h>

#include "hamer.h"

/* Bytes after every picture buffer FFmpeg reads or writes: swscale's SIMD
 * code may run past the last pixel of a row. */
#define HM_VIDEO_SLACK 256

/* The decoder's max_pixels is never below this (4 megapixels): small
 * streams' scratch buffers are checked against it too (reader.c). */
#define HM_VIDEO_MIN_MAX_PIXELS (4LL << 20)

/* Longest start_s / duration_s taken (seconds, about 31 years). */
#define HM_VIDEO_MAX_SECONDS 1e9

/* defaults: start 0, to the end, stride 1, queue 4, 1 decoder thread */
hamer_video_params hm_video_default_params(void);
/* HM_OK, or HM_E_ARG naming the first field out of range (hamer.h). */
int hm_video_check_params(const hamer_video_params *params);
/* NULL on failure (hm_err). */
hamer_video *hm_video_open(const char *path, const hamer_video_params *params);
int hm_video_info(const hamer_video *v, hamer_video_info *info);
int hm_video_next(hamer_video *v, hamer_video_frame *frame);
void hm_video_close(hamer_video *v);

hamer_video_writer *hm_video_writer_open(const char *path, int w, int h, int tb_num, int tb_den, double fps);
/* The same with the encoder named ("libx264" or "mpeg4"; NULL: the choice
 * above): the tests' way to the fallback on a machine that has libx264. */
hamer_video_writer *hm_video_writer_open_with(const char *path, int w, int h, int tb_num, int tb_den, double fps,
                                              const char *encoder);
const char *hm_video_writer_codec(const hamer_video_writer *wr);
int hm_video_writer_write(hamer_video_writer *wr, const uint8_t *rgb, long long pts);
int hm_video_writer_close(hamer_video_writer *wr, int abort);

/* A decoder's max_pixels for a stream of w x h (reader.c): its size with
 * the codecs' padding, at least HM_VIDEO_MIN_MAX_PIXELS; the reader and
 * the live capture both bound later frames by it. */
int64_t hm_video_max_pixels(int w, int h);
/* A decoded frame (an AVFrame) converted to packed RGB w x h into dst
 * (3 w bytes a row) by *sws (made or reused for its size and format), in
 * the frame's own colour matrix and range; HM_OK, or HM_E_UNSUPPORTED
 * with "NAME: cannot convert ..." in msg. The reader's and the capture's. */
struct SwsContext;
struct AVFrame;
int hm_video_frame_rgb(struct SwsContext **sws, const struct AVFrame *f, int w, int h, uint8_t *dst, const char *name,
                       char *msg, size_t msglen);

/* The FFmpeg frame source (capture.c): hamer_capture_* checked as
 * include/hamer.h says. */
hamer_capture_params hm_capture_default_params(void);
int hm_capture_open(const char *url, const hamer_capture_params *params, hamer_frame_source *out);

/* Rotate a packed RGB picture (w x h) clockwise by deg (90, 180 or 270;
 * 0 copies) into out, whose size is h x w for 90 and 270. */
void hm_video_rotate(const uint8_t *in, int w, int h, int deg, uint8_t *out);

#endif
