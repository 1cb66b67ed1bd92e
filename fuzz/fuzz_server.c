/* fuzz_server - the server's request body parsing: multipart/form-data
 * splitting (hm_srv_multipart_parse, tools/serve/server_multipart.c) and, as
 * `hamer serve` does with a 'hands' part, the boxes JSON inside it.
 *
 * Input: the Content-Type header value up to the first '\n', then the body.
 * The query string (?boxes=, rescale, ...) is fuzz_query's.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "pipeline/boxes.h"
#include "serve/server.h"
#include "core/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nl = memchr(data, '\n', size);
    size_t ctlen = nl ? (size_t)(nl - data) : size;
    char *ct = malloc(ctlen + 1);
    if (!ct) return 0;
    memcpy(ct, data, ctlen);
    ct[ctlen] = 0;
    /* The body in its own exactly-sized allocation, as the server holds it. */
    size_t blen = nl ? size - ctlen - 1 : 0;
    uint8_t *body = malloc(blen ? blen : 1);
    if (!body) {
        free(ct);
        return 0;
    }
    if (blen) memcpy(body, nl + 1, blen);
    hm_srv_part parts[HM_SRV_MAX_PARTS];
    char err[256];
    err[0] = 0;
    int n = hm_srv_multipart_parse(ct, body, blen, parts, HM_SRV_MAX_PARTS, err, sizeof err);
    if (n < 0 && (!err[0] || strchr(err, '\n'))) __builtin_trap(); /* a one-line reason */
    if (n > HM_SRV_MAX_PARTS) __builtin_trap();
    volatile uint8_t sink = 0;
    for (int i = 0; i < n; i++) {
        const hm_srv_part *p = &parts[i];
        if (!memchr(p->name, 0, sizeof p->name) || !p->name[0]) __builtin_trap();
        if (p->data < body || p->len > blen || (size_t)(p->data - body) > blen - p->len) __builtin_trap();
        if (p->len) sink ^= p->data[0] ^ p->data[p->len - 1];
        if (!strcmp(p->name, "hands")) {
            hamer_box boxes[HAMER_MAX_HANDS];
            int nb = hm_boxes_parse_json((const char *)p->data, p->len, boxes, HAMER_MAX_HANDS);
            if (nb > HAMER_MAX_HANDS) __builtin_trap();
        }
    }
    (void)sink;
    free(body);
    free(ct);
    return 0;
}
