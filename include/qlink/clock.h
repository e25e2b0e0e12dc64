/* SPDX-License-Identifier: MIT */
/*
 * clock: time stamps and CPU placement for latency measurement.
 *
 * ql_clock_ns() reads CLOCK_MONOTONIC through the vDSO (about 25 ns, no
 * kernel entry) and is the clock every other module reports in. ql_tsc()
 * reads the CPU's time-stamp counter (a few ns) for the tightest loops;
 * ql_tsc_ghz() converts its ticks to time. ql_cpu_pin() and ql_cpu_count()
 * place busy-polling threads, which is how the benchmarks and dispatchers
 * keep their latency steady.
 */
#ifndef QLINK_CLOCK_H
#define QLINK_CLOCK_H

#include <stdint.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Nanoseconds of CLOCK_MONOTONIC: never goes back, unaffected by settimeofday. */
static inline uint64_t ql_clock_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * Time-stamp counter ticks. On x86 this is rdtsc, which is not serializing:
 * it may be reordered with nearby loads, which is acceptable for the
 * round-trip times (hundreds of ns and up) it is used for. Elsewhere it is
 * ql_clock_ns(), so ticks are nanoseconds and ql_tsc_ghz() returns 1.
 */
static inline uint64_t ql_tsc(void)
{
#if defined(__x86_64__) || defined(__i386__)
	return __rdtsc();
#else
	return ql_clock_ns();
#endif
}

/* Ticks of ql_tsc() per nanosecond. Calibrated against CLOCK_MONOTONIC over
 * about 20 ms on the first call (which therefore sleeps), then cached; safe
 * to call from several threads at once. */
double ql_tsc_ghz(void);

/* Pin the calling thread to one CPU. Returns 0, or -EINVAL (and a detail
 * sentence, see ql_error_detail) when cpu is negative, beyond the CPUs this
 * machine has, or outside the set the process may run on (cgroup cpuset). */
int ql_cpu_pin(int cpu);

/* Number of online CPUs (at least 1). CPU ids to pin to are below this
 * number on machines without holes in their numbering. */
int ql_cpu_count(void);

#ifdef __cplusplus
}
#endif
#endif
