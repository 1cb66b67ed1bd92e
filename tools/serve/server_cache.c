/* server_cache.c - `hamer serve --cache N`: answers for identical requests
 * (same endpoint, query, content type and body bytes) seen within a short
 * window, keyed by SHA-256.
 *
 * SHA-256 rather than a fast non-cryptographic hash: the key is all that is
 * compared (bodies are not kept), so a client able to craft collisions could
 * otherwise be served someone else's result. The cache is a small array
 * searched linearly under one mutex: N is meant to be tens to hundreds of
 * entries, each lookup costs far less than one inference. It is bounded in
 * bytes as well as entries (--cache-mb): N answers of 20 MB PNGs would
 * otherwise be N x 20 MB.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "serve/server.h"

/* ---- SHA-256 (FIPS 180-4) ---- */

static const uint32_t K256[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static uint32_t ror(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

/* One 64-byte block into the state. */
static void sha_block(uint32_t h[8], const uint8_t *p) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = hh + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & f) ^ (~e & g)) + K256[i] + w[i];
        uint32_t t2 = (ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        hh = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += hh;
}

/* Start a digest (the FIPS 180-4 initial hash values). */
void hm_srv_sha256_init(hm_srv_sha256 *s) {
    static const uint32_t H0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(s->h, H0, sizeof H0);
    s->len = 0;
    s->nbuf = 0;
}

/* Absorb len bytes; any split of the input gives the same digest. */
void hm_srv_sha256_update(hm_srv_sha256 *s, const void *data, size_t len) {
    const uint8_t *p = data;
    s->len += len;
    if (s->nbuf) {
        size_t take = 64 - s->nbuf < len ? 64 - s->nbuf : len;
        memcpy(s->buf + s->nbuf, p, take);
        s->nbuf += take, p += take, len -= take;
        if (s->nbuf < 64) return;
        sha_block(s->h, s->buf);
        s->nbuf = 0;
    }
    for (; len >= 64; p += 64, len -= 64) sha_block(s->h, p);
    memcpy(s->buf, p, len);
    s->nbuf = len;
}

void hm_srv_sha256_field(hm_srv_sha256 *s, const void *data, size_t len) {
    uint8_t n[8];
    for (int i = 0; i < 8; i++) n[i] = (uint8_t)((uint64_t)len >> (56 - 8 * i));
    hm_srv_sha256_update(s, n, 8);
    hm_srv_sha256_update(s, data, len);
}

/* Pad, absorb the bit length and write the 32-byte digest. */
void hm_srv_sha256_final(hm_srv_sha256 *s, uint8_t out[32]) {
    uint64_t bits = s->len * 8;
    uint8_t pad[72] = {0x80};
    size_t npad = (s->nbuf < 56 ? 56 : 120) - s->nbuf;
    for (int i = 0; i < 8; i++) pad[npad + i] = (uint8_t)(bits >> (56 - 8 * i));
    /* update() would count the padding into len; the length is already taken. */
    uint64_t keep = s->len;
    hm_srv_sha256_update(s, pad, npad + 8);
    s->len = keep;
    for (int i = 0; i < 8; i++)
        out[4 * i] = (uint8_t)(s->h[i] >> 24), out[4 * i + 1] = (uint8_t)(s->h[i] >> 16),
        out[4 * i + 2] = (uint8_t)(s->h[i] >> 8), out[4 * i + 3] = (uint8_t)s->h[i];
}

/* ---- the cache ---- */

typedef struct {
    uint8_t key[32];
    uint8_t *body;          /* NULL: empty slot */
    size_t len;
    const char *type;       /* a string literal */
    double stored, used;
} entry;

struct hm_srv_cache {
    pthread_mutex_t mu;
    entry *e;
    int n;
    double ttl_s;
    size_t max_bytes, bytes;   /* bound, and the answers' bytes now */
};

/* n slots, all empty; NULL when off (n < 1) or out of memory. */
hm_srv_cache *hm_srv_cache_new(int n, size_t max_bytes, double ttl_s) {
    if (n < 1) return NULL;
    hm_srv_cache *c = calloc(1, sizeof *c);
    if (!c || !(c->e = calloc((size_t)n, sizeof *c->e))) {
        free(c);
        return NULL;
    }
    pthread_mutex_init(&c->mu, NULL);
    c->n = n;
    c->ttl_s = ttl_s;
    c->max_bytes = max_bytes;
    return c;
}

/* Free every stored answer and the cache (NULL is fine). */
void hm_srv_cache_free(hm_srv_cache *c) {
    if (!c) return;
    for (int i = 0; i < c->n; i++) free(c->e[i].body);
    free(c->e);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

/* 1 and a malloc'd copy of a live entry for key; 0 on a miss (expired entries are dropped). */
int hm_srv_cache_get(hm_srv_cache *c, const uint8_t key[32], uint8_t **body, size_t *len, const char **type) {
    if (!c) return 0;
    double now = hm_now();
    int hit = 0;
    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < c->n; i++) {
        entry *e = &c->e[i];
        if (!e->body || memcmp(e->key, key, 32)) continue;
        if (now - e->stored > c->ttl_s) {
            /* Expired: drop it so the slot is reused first. */
            free(e->body);
            e->body = NULL;
            c->bytes -= e->len;
            break;
        }
        *body = malloc(e->len ? e->len : 1);
        if (*body) {
            memcpy(*body, e->body, e->len);
            *len = e->len;
            *type = e->type;
            e->used = now;
            hit = 1;
        }
        break;
    }
    pthread_mutex_unlock(&c->mu);
    return hit;
}

/* Store a copy (silently skipped when out of memory: the cache is an optimisation). */
/* Empty one slot (caller holds the lock). */
static void drop(hm_srv_cache *c, entry *e) {
    if (!e->body) return;
    free(e->body);
    e->body = NULL;
    c->bytes -= e->len;
    e->len = 0;
}

size_t hm_srv_cache_bytes(hm_srv_cache *c) {
    if (!c) return 0;
    pthread_mutex_lock(&c->mu);
    size_t b = c->bytes;
    pthread_mutex_unlock(&c->mu);
    return b;
}

void hm_srv_cache_put(hm_srv_cache *c, const uint8_t key[32], const uint8_t *body, size_t len, const char *type) {
    if (!c || len > c->max_bytes) return;
    uint8_t *copy = malloc(len ? len : 1);
    if (!copy) return;
    memcpy(copy, body, len);
    double now = hm_now();
    pthread_mutex_lock(&c->mu);
    /* The same key again (two identical requests raced): replace it;
     * otherwise an empty or expired slot, else the least recently used. */
    int slot = -1;
    for (int i = 0; i < c->n && slot < 0; i++)
        if (c->e[i].body && !memcmp(c->e[i].key, key, 32)) slot = i;
    for (int i = 0; i < c->n && slot < 0; i++)
        if (!c->e[i].body || now - c->e[i].stored > c->ttl_s) slot = i;
    if (slot < 0) {
        slot = 0;
        for (int i = 1; i < c->n; i++)
            if (c->e[i].used < c->e[slot].used) slot = i;
    }
    entry *e = &c->e[slot];
    drop(c, e);
    /* Over the byte bound: the least recently used others go first. */
    while (c->bytes + len > c->max_bytes) {
        int lru = -1;
        for (int i = 0; i < c->n; i++)
            if (c->e[i].body && (lru < 0 || c->e[i].used < c->e[lru].used)) lru = i;
        if (lru < 0) break;
        drop(c, &c->e[lru]);
    }
    memcpy(e->key, key, 32);
    e->body = copy, e->len = len, e->type = type, e->stored = e->used = now;
    c->bytes += len;
    pthread_mutex_unlock(&c->mu);
}
