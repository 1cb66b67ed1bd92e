/* video/fflog.h - FFmpeg's log messages kept off stderr while the library
 * runs FFmpeg, and demuxer errors caught as damage (fflog.c). */
#ifndef HM_VIDEO_FFLOG_H
#define HM_VIDEO_FFLOG_H

typedef struct {
    const void *demuxer; /* the AVFormatContext whose errors mean damage (NULL: none) */
    int damaged;
    char msg[512];       /* its first error message */
} hm_ff_sink;

/* From now on, on this thread, FFmpeg's messages go to sink (kept off
 * stderr) until hm_ff_log_leave. */
void hm_ff_log_enter(hm_ff_sink *sink);
void hm_ff_log_leave(void);

#endif
