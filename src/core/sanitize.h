/* sanitize.h - micro-kernels checked by whole operand regions under
 * AddressSanitizer.
 *
 * ASan puts a shadow-memory check before every load and store. In a GEMM
 * micro-kernel's inner loop that is most of the work: the sanitizer build's
 * `hamer run` spent 61 % of its time in the fp32 block kernel, which ran
 * 2.5x slower than the same code uninstrumented, and the sanitizer pass of
 * the test suite is mostly model time. (Its masked vector loads and stores
 * were never checked at all.) A kernel marked HM_ASAN_BY_REGION is compiled
 * without the per-access checks; before its loop it calls hm_asan_region()
 * on every operand region it will touch, so an access past any operand's
 * memory is still reported, as an ordinary ASan error with a stack trace.
 * What this gives up: an indexing bug that stays inside the operands'
 * memory — which the kernels' tests against float64 references catch as
 * wrong numbers. Outside ASan builds both compile to nothing.
 */
#ifndef HM_SANITIZE_H
#define HM_SANITIZE_H

#include <stddef.h>

#if defined(__SANITIZE_ADDRESS__)
#define HM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HM_ASAN 1
#endif
#endif

#ifdef HM_ASAN
#define HM_ASAN_BY_REGION __attribute__((no_sanitize_address))
/* Reports (and, as ASan does, stops the process) when any of the n bytes at
 * p is not addressable; is_write says which kind of access the report names. */
void hm_asan_region(const void *p, size_t n, int is_write);
#else
#define HM_ASAN_BY_REGION
#define hm_asan_region(p, n, is_write) ((void)(p), (void)(n), (void)(is_write))
#endif

#endif
