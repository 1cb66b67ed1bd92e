/* result_json.h - the RESULT.json document of `hamer run` (and the server). */
#ifndef HM_RESULT_JSON_H
#define HM_RESULT_JSON_H

#include <jansson.h>

#include "hamer.h"

/* Serialise n hands of a W x H image. detected (1: the built-in detector
 * chose the boxes, 0: the caller gave them) is the one place that decides
 * "boxes" and whether timings_ms has "detect": an image where the detector
 * found nothing is still "detected", which its empty hands list cannot
 * tell. Floats are written with 9 significant digits (exact round trip of
 * float32). Returns a malloc'd NUL-terminated string, or NULL (hm_err) on
 * allocation failure. */
char *hm_result_json(int W, int H, const hamer_hand *hands, int n, int with_vertices, const hamer_timings *tm,
                     int detected);

/* One hand of RESULT.json (bbox, is_right, then the results or "error"),
 * and a detection's "detection" object: the pieces hamer video's lines
 * are made of. New references; NULL only when out of memory. */
json_t *hm_result_hand_json(const hamer_hand *H, int with_vertices);
json_t *hm_result_detection_json(float score, float presence, float handedness, int pass, const float *landmarks);
/* Adds "source" ("palm" / "body" / "body-keypoints" / "proposal") and "person" to a
 * detection object when the body pass found the hand (nothing for
 * palm-only hands); a keypoint-only box's "landmarks" become null. */
void hm_result_detection_body(json_t *o, int source, int body, int person);

/* `hamer detect`'s document: image size, detector (models directory,
 * variant, passes; the body and proposal passes' lines when not NULL), and
 * per hand its box, is_right, scores, pass and landmarks; malloc'd, or
 * NULL (hm_err) when out of memory. */
char *hm_detections_json(int W, int H, const hamer_detection *d, int n, const char *models, int lite, int tiles,
                         const char *body, const char *proposals, double detect_ms);

#endif
