/* log.h - the library's messages go to a caller-installed callback
 * (hamer_log_set); the library itself never prints. */
#ifndef HM_CORE_LOG_H
#define HM_CORE_LOG_H

/* Same values as hamer_log_level in include/hamer.h. */
enum { HM_LOG_ERROR = 0, HM_LOG_WARN = 1, HM_LOG_INFO = 2, HM_LOG_PROGRESS = 3 };

typedef void (*hm_log_fn)(void *user, int level, const char *msg);

void hm_log_set(hm_log_fn fn, void *user);
/* 1 if a callback is installed (to skip formatting work otherwise). */
int hm_log_enabled(void);
void hm_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
