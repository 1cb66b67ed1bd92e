/* backend.c - the registry of backends and the device names
 * (backend/backend.h). */
#include "backend/backend.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"

static const hm_backend *const hm_all[] = {
    &hm_backend_cpu,
#ifdef HAMER_HAVE_CUDA
    &hm_backend_cuda, /* backend_dl.c: libhamer-cuda.so, loaded on first use */
#endif
};

const hm_backend *const *hm_backends(int *count) {
    *count = (int)(sizeof hm_all / sizeof hm_all[0]);
    return hm_all;
}

/* "cpu, cuda": the names compiled in, for messages. */
static const char *names(char *buf, size_t n) {
    int count;
    const hm_backend *const *all = hm_backends(&count);
    size_t used = 0;
    buf[0] = 0;
    for (int i = 0; i < count && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, i ? ", %s" : "%s", all[i]->name);
    return buf;
}

int hm_device_parse(const char *device, const hm_backend **be, int *dev) {
    *be = NULL;
    *dev = 0;
    if (!device || !*device) device = "cpu";
    char name[32], list[128];
    const char *colon = strchr(device, ':');
    size_t len = colon ? (size_t)(colon - device) : strlen(device);
    if (len == 0 || len >= sizeof name)
        return hm_err(HM_E_ARG, "device '%.64s': expected NAME or NAME:INDEX (backends: %s)", device, names(list, sizeof list));
    memcpy(name, device, len);
    name[len] = 0;
    long index = 0;
    if (colon) {
        char *end;
        errno = 0;
        index = strtol(colon + 1, &end, 10);
        if (!colon[1] || *end || errno || index < 0 || index > 1023)
            return hm_err(HM_E_ARG, "device '%.64s': the index after ':' must be a number 0..1023", device);
    }
    int count;
    const hm_backend *const *all = hm_backends(&count);
    for (int i = 0; i < count; i++) {
        if (strcmp(all[i]->name, name)) continue;
        int n = all[i]->devices();
        if (n < 0) {
            char why[300];
            snprintf(why, sizeof why, "%s", hm_errmsg());
            return hm_err(HM_E_UNSUPPORTED, "device '%.64s' is unavailable: %s", device, why);
        }
        if (index >= n)
            return hm_err(HM_E_UNSUPPORTED, "device '%.64s' is unavailable: the %s backend has %d device%s here", device,
                          name, n, n == 1 ? "" : "s");
        *be = all[i];
        *dev = (int)index;
        return HM_OK;
    }
    return hm_err(HM_E_ARG, "device '%.64s': unknown backend '%s' (this build has: %s)", device, name, names(list, sizeof list));
}

const char *hm_device_name(const hm_backend *be, int dev, char *buf, size_t n) {
    if (!strcmp(be->name, "cpu") && dev == 0) snprintf(buf, n, "cpu");
    else snprintf(buf, n, "%s:%d", be->name, dev);
    return buf;
}
