/* none.c - the video functions of a build without FFmpeg (cmake
 * -DHAMER_FFMPEG=OFF; CMakeLists.txt compiles this file instead of
 * reader.c, writer.c, capture.c and fflog.c): each fails with
 * HAMER_E_UNSUPPORTED and one line saying so. The tracker (src/track/),
 * hamer_live on a frame source of the program's own, and everything else
 * work as in a full build. */
#include <string.h>

#include "core/util.h"
#include "video/video.h"

static int none(const char *what) {
    return hm_err(HM_E_UNSUPPORTED, "%s: this build of hamer.c has no FFmpeg (configure with -DHAMER_FFMPEG=ON and "
                  "Debian's libavdevice-dev libavformat-dev libavcodec-dev libswscale-dev libavutil-dev)", what);
}

hamer_video_params hm_video_default_params(void) {
    hamer_video_params p = {.start_s = 0.0, .duration_s = 0.0, .stride = 1, .queue = 4, .threads = 1};
    return p;
}

int hm_video_check_params(const hamer_video_params *p) { return none("hamer_video_check_params"); }

hamer_video *hm_video_open(const char *path, const hamer_video_params *p) {
    none("hamer_video_open");
    return NULL;
}

int hm_video_info(const hamer_video *v, hamer_video_info *info) { return none("hamer_video_get_info"); }
int hm_video_next(hamer_video *v, hamer_video_frame *frame) { return none("hamer_video_next"); }
void hm_video_close(hamer_video *v) {}

hamer_video_writer *hm_video_writer_open(const char *path, int w, int h, int tb_num, int tb_den, double fps) {
    none("hamer_video_writer_open");
    return NULL;
}

hamer_video_writer *hm_video_writer_open_with(const char *path, int w, int h, int tb_num, int tb_den, double fps,
                                              const char *encoder) {
    none("hamer_video_writer_open");
    return NULL;
}

const char *hm_video_writer_codec(const hamer_video_writer *wr) { return ""; }
int hm_video_writer_write(hamer_video_writer *wr, const uint8_t *rgb, long long pts) {
    return none("hamer_video_writer_write");
}
int hm_video_writer_close(hamer_video_writer *wr, int abort) { return none("hamer_video_writer_close"); }

int64_t hm_video_max_pixels(int w, int h) { return HM_VIDEO_MIN_MAX_PIXELS; }

hamer_capture_params hm_capture_default_params(void) {
    hamer_capture_params p;
    memset(&p, 0, sizeof p);
    p.threads = 1;
    return p;
}

int hm_capture_open(const char *url, const hamer_capture_params *params, hamer_frame_source *out) {
    if (out) memset(out, 0, sizeof *out);
    return none("hamer_capture_open");
}
