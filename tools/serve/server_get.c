/* server_get.c - `hamer serve`: the GET endpoints (/healthz, /readyz,
 * /info, /metrics, /openapi.json and the web page's files). */
#include <stdio.h>
#include <string.h>
#include "serve/server_req.h"
#include "core/cpu.h"

/* Whether requests without boxes can be served, and from which models
 * (caller holds s->mu: the warm-up publishes the detector under it). */
static json_t *detector_json(hm_srv *s) {
    if (s->detector)
        return json_pack("{s:b,s:s,s:b,s:b}", "loaded", 1, "dir", hamer_detector_get_dir(s->detector), "lite",
                         s->cfg.detector_lite, "body", hamer_detector_get_body(s->detector) == 1);
    return json_pack("{s:b,s:s}", "loaded", 0, "reason", s->detector_reason);
}

/* 200 once ready, else 503; both with the phase, reason and self-check figures. */
static enum MHD_Result get_readyz(hm_srv *s, struct MHD_Connection *c, hm_srv_req *r) {
    int phase = atomic_load(&s->phase);
    json_t *o = json_object();
    json_object_set_new(o, "ready", json_boolean(phase == HM_SRV_READY));
    json_object_set_new(o, "phase", json_string(hm_srv_phase_name(phase)));
    pthread_mutex_lock(&s->mu);
    json_object_set_new(o, "reason", json_string(s->reason));
    if (s->selfcheck_metric)
        json_object_set_new(o, "self_check",
                            json_pack("{s:s,s:f,s:f}", "metric", s->selfcheck_metric, "value", s->selfcheck_value,
                                      "gate", s->selfcheck_gate));
    json_object_set_new(o, "detector", detector_json(s));
    pthread_mutex_unlock(&s->mu);
    return hm_srv_answer_json(s, c, r, phase == HM_SRV_READY ? 200 : 503, o);
}

/* CPU features the kernels can use (what this machine has, not what runs). */
static json_t *cpu_features(void) {
    json_t *a = json_array();
    char names[128];
    snprintf(names, sizeof names, "%s", hm_cpu_feature_names());
    for (char *save = NULL, *t = strtok_r(names, " ", &save); t; t = strtok_r(NULL, " ", &save))
        json_array_append_new(a, json_string(t));
    return a;
}

/* The /info document (malloc'd), or NULL before the model is loaded. */
char *hm_srv_info_json(hm_srv *s, size_t *len) {
    pthread_mutex_lock(&s->mu);
    hamer_model_info mi = s->info;
    double load_s = s->load_s;
    int loaded = s->model != NULL;
    json_t *detector = detector_json(s);
    pthread_mutex_unlock(&s->mu);
    if (!loaded) {
        json_decref(detector);
        return NULL;
    }
    json_t *model = json_pack("{s:s,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:b,s:f}", "path", s->cfg.model_path,
                              "vit_depth", mi.vit_depth, "vit_dim", mi.vit_dim, "vit_heads", mi.vit_heads, "vit_mlp",
                              mi.vit_mlp, "n_tokens", mi.n_tokens, "head_depth", mi.head_depth, "head_dim",
                              mi.head_dim, "head_heads", mi.head_heads, "head_dim_head", mi.head_dim_head, "head_mlp",
                              mi.head_mlp, "has_mano", mi.has_mano, "load_s", load_s);
#ifdef __SANITIZE_ADDRESS__
    const int sanitize = 1;
#else
    const int sanitize = 0;
#endif
#ifdef __OPTIMIZE__
    const int optimized = 1;
#else
    const int optimized = 0;
#endif
    json_t *build = json_pack("{s:s,s:b,s:b,s:s,s:s}", "compiler", "gcc " __VERSION__, "optimized", optimized,
                              "sanitizers", sanitize, "libmicrohttpd", MHD_get_version(), "jansson", JANSSON_VERSION);
    json_t *cpu = json_pack("{s:i,s:o,s:s}", "online", hm_cpu_online(), "features", cpu_features(), "kernel_isa", mi.isa);
    json_t *limits = json_pack("{s:i,s:i,s:f,s:I,s:I,s:I,s:f,s:f}", "max_connections", s->cfg.max_conns,
                               "max_connections_per_ip", s->cfg.max_conns_per_ip, "header_timeout_s",
                               s->cfg.header_timeout_s, "upload_budget_bytes", (json_int_t)s->cfg.upload_budget,
                               "response_budget_bytes", (json_int_t)s->cfg.response_budget,
                               "cache_bytes", (json_int_t)s->cfg.cache_bytes, "drain_s", s->cfg.drain_s,
                               "pixels_per_byte", s->cfg.pixels_per_byte);
    /* the backends compiled in (where a model can run) and the one in use */
    json_t *backends = json_array();
    for (int i = 0, n = hamer_backend_count(); backends && i < n; i++) {
        hamer_backend_info bi;
        if (hamer_backend_get(i, &bi)) continue;
        json_array_append_new(backends, json_pack("{s:s,s:i,s:s*}", "name", bi.name, "devices", bi.n_devices,
                                                  "unavailable", bi.why));
    }
    json_t *o = json_pack("{s:s,s:o,s:s,s:s,s:s,s:s,s:o,s:i,s:i,s:i,s:I,s:f,s:i,s:o,s:o,s:o,s:o}", "version", hamer_version(),
                          "model", model, "precision", mi.precision == HAMER_PRECISION_FAST ? "fast" : "fp32",
                          "scheme", mi.scheme, "isa", mi.isa, "device", mi.device, "backends", backends,
                          "threads", s->cfg.threads, "workers", s->cfg.workers,
                          "queue", s->cfg.queue, "max_body_bytes", (json_int_t)s->cfg.max_body, "timeout_s",
                          s->cfg.timeout_s, "cache", s->cfg.cache_n, "limits", limits, "detector", detector,
                          "build", build, "cpu", cpu);
    char *text = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    if (text) *len = strlen(text);
    return text;
}

enum MHD_Result hm_srv_get_endpoint(hm_srv *s, struct MHD_Connection *c, hm_srv_req *r) {
    size_t len = 0;
    char *text;
    switch (r->endpoint) {
    case HM_SRV_EP_HEALTHZ:
        return hm_srv_answer_json(s, c, r, 200, json_pack("{s:s}", "status", "ok"));
    case HM_SRV_EP_READYZ:
        return get_readyz(s, c, r);
    case HM_SRV_EP_INFO:
        text = hm_srv_info_json(s, &len);
        if (!text) return hm_srv_answer_error(s, c, r, 503, "the model is not loaded yet");
        return hm_srv_answer(s, c, r, 200, text, len, "application/json", 0);
    case HM_SRV_EP_METRICS:
        text = hm_srv_metrics_text(s, &len);
        if (!text) return hm_srv_answer_error(s, c, r, 500, "out of memory");
        return hm_srv_answer(s, c, r, 200, text, len, "text/plain; version=0.0.4; charset=utf-8", 0);
    case HM_SRV_EP_WEB: {
        const void *data;
        const char *type;
        int status = hm_srv_web_get(s, r->web_file, &data, &len, &type);
        return hm_srv_answer(s, c, r, status, (void *)data, len, type, 1);
    }
    default: {
        const char *doc = hm_srv_openapi_json();
        return hm_srv_answer(s, c, r, 200, (void *)doc, strlen(doc), "application/json", 1);
    }
    }
}
