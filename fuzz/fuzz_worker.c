/* fuzz_worker - what `hamer worker` reads off Redis: stream entries (the
 * RESP a server sends, parsed by hiredis's reader, then hm_wk_job_parse)
 * and the --redis URL (hm_wk_url_parse).
 *
 * Input: one byte of mode (bit 0: the rest is a URL, else RESP bytes), then
 * the bytes. Every complete RESP reply in the input is parsed as a job with
 * a 4 KiB payload limit; its boxes, if any, go through the same parser the
 * worker uses (hamer_boxes_parse).
 *
 * Invariants (trap): a job's complaint is one line of printable ASCII (it
 * becomes an error result others read); a job without a complaint has an
 * id of 1..200 printable characters, a rescale in (0, 16], and payload
 * pointers inside the reply; a parsed URL has a port in 1..65535.
 */
#include <hiredis/hiredis.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "hamer.h"
#include "worker/worker.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_line(const char *s) {
    for (const char *p = s; *p; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f) __builtin_trap();
}

static void one_job(const redisReply *r) {
    hm_wk_job job;
    hm_wk_job_parse(r, 4096, &job);
    check_line(job.bad);
    if (job.bad[0] || job.deleted) return;
    size_t n = strlen(job.id);
    if (n < 1 || n > HM_WK_ID_MAX) __builtin_trap();
    check_line(job.id);
    if (!(job.pp.rescale > 0 && job.pp.rescale <= HAMER_MAX_RESCALE)) __builtin_trap();
    if (job.boxes) {
        hamer_box boxes[HAMER_MAX_HANDS];
        int nb = hamer_boxes_parse(job.boxes, job.boxes_len, boxes, HAMER_MAX_HANDS);
        if (nb > HAMER_MAX_HANDS) __builtin_trap();
    }
}

/* hiredis 0.14's reader allocates an array of the count a '*' header
 * declares before any element arrives (it has no maxelements), so a
 * hostile server could make any client allocate gigabytes: the worker
 * trusts its Redis (docs/server.md, "Scaling out"). Inputs declaring more than
 * 2^16 elements or bytes in one header model no server and are skipped. */
static int plausible(const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (p[i] != '*' && p[i] != '$') continue; /* anywhere: payload bytes may realign the reader */
        unsigned long v = 0;
        for (size_t k = i + 1; k < n && p[k] >= '0' && p[k] <= '9'; k++)
            if ((v = v * 10 + (p[k] - '0')) > 65536) return 0;
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    if (data[0] & 1) {
        char *url = malloc(size);
        memcpy(url, data + 1, size - 1);
        url[size - 1] = 0;
        hm_wk_url u;
        char err[256];
        if (hm_wk_url_parse(url, &u, err, sizeof err) == 0 && (u.port < 1 || u.port > 65535)) __builtin_trap();
        free(url);
        return 0;
    }
    if (!plausible(data + 1, size - 1)) return 0;
    redisReader *rd = redisReaderCreate();
    if (!rd) return 0;
    if (redisReaderFeed(rd, (const char *)data + 1, size - 1) == REDIS_OK) {
        for (int k = 0; k < 64; k++) {
            void *reply = NULL;
            if (redisReaderGetReply(rd, &reply) != REDIS_OK || !reply) break;
            one_job(reply);
            freeReplyObject(reply);
        }
    }
    redisReaderFree(rd);
    return 0;
}
