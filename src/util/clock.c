/* SPDX-License-Identifier: MIT */
/* TSC calibration and CPU pinning (see qlink/clock.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_setaffinity, cpu_set_t */
#endif
#include "qlink/clock.h"

#include "qlink/error.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

static pthread_once_t tsc_once = PTHREAD_ONCE_INIT;
static double tsc_ghz;

#if defined(__x86_64__) || defined(__i386__)
/* One (clock, tsc) pair, taken so that the tsc read sits between two clock
 * reads no more than `best` ns apart: a preemption between them would
 * otherwise skew the ratio. */
static void clock_tsc_pair(uint64_t *ns, uint64_t *tsc)
{
	uint64_t best = UINT64_MAX;

	for (int i = 0; i < 16; i++) {
		uint64_t t0 = ql_clock_ns();
		uint64_t c = ql_tsc();
		uint64_t t1 = ql_clock_ns();

		if (t1 - t0 < best) {
			best = t1 - t0;
			*ns = t0 + (t1 - t0) / 2;
			*tsc = c;
		}
	}
}

static void tsc_calibrate(void)
{
	struct timespec req = { .tv_sec = 0, .tv_nsec = 20 * 1000 * 1000 };
	uint64_t ns0 = 0, ns1 = 0, c0 = 0, c1 = 0;

	clock_tsc_pair(&ns0, &c0);
	/* Sleep rather than spin: on a small VM a spinning vCPU invites the host
	 * to steal it, and both clocks keep counting through a sleep anyway. */
	while (nanosleep(&req, &req) && errno == EINTR)
		;
	clock_tsc_pair(&ns1, &c1);
	if (ns1 > ns0 && c1 > c0)
		tsc_ghz = (double)(c1 - c0) / (double)(ns1 - ns0);
	else
		tsc_ghz = 1.0; /* a broken TSC: at least never divide by zero */
}
#else
static void tsc_calibrate(void)
{
	tsc_ghz = 1.0; /* ql_tsc() is ql_clock_ns() here */
}
#endif

double ql_tsc_ghz(void)
{
	pthread_once(&tsc_once, tsc_calibrate);
	return tsc_ghz;
}

int ql_cpu_count(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n > 0 ? (int)n : 1;
}

int ql_cpu_pin(int cpu)
{
	long ncpu = sysconf(_SC_NPROCESSORS_CONF);
	cpu_set_t set;

	if (cpu < 0 || cpu >= CPU_SETSIZE || (ncpu > 0 && cpu >= ncpu))
		return ql_error_set(-EINVAL, "cpu %d does not exist (this machine has %ld)", cpu,
				    ncpu);
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	/* pid 0 is the calling thread. The kernel refuses (EINVAL) a mask with
	 * no CPU of the process's cpuset, which covers offline CPUs too. */
	if (sched_setaffinity(0, sizeof(set), &set)) {
		int err = -errno;

		if (err == -EINVAL)
			return ql_error_set(err, "cpu %d is not in this process's allowed CPU set",
					    cpu);
		return ql_error_set(err, "sched_setaffinity(cpu %d): %s", cpu, ql_strerror(err));
	}
	return 0;
}
