/* sanitize.c - the region check of sanitize.h (AddressSanitizer builds). */
#include "core/sanitize.h"

#ifdef HM_ASAN
#include <sanitizer/asan_interface.h>

void hm_asan_region(const void *p, size_t n, int is_write) {
    if (n == 0) return;
    void *bad = __asan_region_is_poisoned((void *)p, n);
    if (bad)
        __asan_report_error(__builtin_return_address(0), __builtin_frame_address(0), __builtin_frame_address(0), bad,
                            is_write, n - (size_t)((const char *)bad - (const char *)p));
}
#else
/* ISO C wants a translation unit to declare something. */
typedef int hm_sanitize_unused;
#endif
