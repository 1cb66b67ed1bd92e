/* format/fflog.h - FFmpeg's log messages kept off stderr while the library
 * runs FFmpeg (video, and images through FFmpeg), and demuxer (or image
 * decoder) errors caught as damage (fflog.c). */
#ifndef HM_FORMAT_FFLOG_H
#define HM_FORMAT_FFLOG_H

typedef struct {
    const void *demuxer; /* the AVFormatContext whose errors mean damage (NULL: none) */
    int damaged;
    char msg[512];       /* its first error message */
    char size_msg[160];  /* the last error naming a picture size (FFmpeg's size and max_pixels checks) */
} hm_ff_sink;

/* Width and height of the picture FFmpeg refused, from a size_msg
 * ("Picture size WxH is invalid", "... exceeds specified max pixel
 * count"); 0 when it names none. */
int hm_ff_refused_size(const hm_ff_sink *sink, int *w, int *h);

/* From now on, on this thread, FFmpeg's messages go to sink (kept off
 * stderr) until hm_ff_log_leave. */
void hm_ff_log_enter(hm_ff_sink *sink);
void hm_ff_log_leave(void);
/* Until hm_ff_log_leave, errors logged by ctx (e.g. an image's decoder)
 * are damage too, like the sink's demuxer's. */
void hm_ff_log_also(const void *ctx);

#endif
