/* boxes.h - the boxes a caller gives (`hamer run --boxes`, the server's
 * "hands" part and ?boxes=, the worker's jobs): parsed into hamer_box. */
#ifndef HM_BOXES_H
#define HM_BOXES_H

#include <stddef.h>

#include "hamer.h"

/* Parse a boxes document `[{"bbox":[x1,y1,x2,y2],"is_right":true}, ...]`
 * (is_right optional, default true; other keys ignored), bare or as the
 * "hands" list of an object (hamer detect's output, RESULT.json). At most HAMER_MAX_HANDS entries.
 * Returns the count (>= 0) or a negative error with a message naming the
 * offending entry. */
int hm_boxes_parse_json(const char *text, size_t len, hamer_box *boxes, int max);

/* Parse one `x1,y1,x2,y2[:left|:right]` box; HM_OK or HM_E_ARG. */
int hm_box_parse(const char *s, hamer_box *box);

#endif
