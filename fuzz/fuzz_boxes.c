/* fuzz_boxes - hand boxes from strangers: the boxes JSON document
 * (hm_boxes_parse_json, at most HAMER_MAX_HANDS entries), the command line
 * form x1,y1,x2,y2[:left|:right] (hm_box_parse, one per input line), and
 * the check every box meets before cropping (hm_box_check).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "hamer.h"
#include "pipeline/preprocess.h"
#include "pipeline/boxes.h"
#include "core/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const hamer_box *b) {
    hm_box hb = {b->bbox[0], b->bbox[1], b->bbox[2], b->bbox[3], b->is_right};
    (void)hm_box_check(&hb, 640, 480);
    (void)hm_box_check(&hb, 1, 65535);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* jansson gets the exact bytes (no terminator), the line parser C strings. */
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    hamer_box boxes[HAMER_MAX_HANDS];
    /* A smaller caller limit than the library's exercises both bounds. */
    int max = size % 2 ? HAMER_MAX_HANDS : 3;
    int n = hm_boxes_parse_json((const char *)data, size, boxes, max);
    if (n > max) __builtin_trap();
    for (int i = 0; i < n; i++) check(&boxes[i]);
    for (char *line = text, *next; line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        hamer_box b;
        if (hm_box_parse(line, &b) == HM_OK) check(&b);
    }
    free(text);
    return 0;
}
