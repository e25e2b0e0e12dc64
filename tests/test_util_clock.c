/* SPDX-License-Identifier: MIT */
/* Clocks, TSC calibration and CPU pinning (qlink/clock.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "qlink/clock.h"
#include "qlink/error.h"

static void sleep_ns(long ns)
{
	struct timespec req = { .tv_sec = ns / 1000000000L, .tv_nsec = ns % 1000000000L };

	while (nanosleep(&req, &req) && errno == EINTR)
		;
}

static void test_clock_monotonic(void **state)
{
	uint64_t prev = ql_clock_ns(), t0, dt, mono;
	struct timespec ts;

	assert_true(prev > 0);
	for (int i = 0; i < 100000; i++) {
		uint64_t now = ql_clock_ns();

		assert_true(now >= prev);
		prev = now;
	}
	/* Same clock as CLOCK_MONOTONIC itself, in nanoseconds. */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	mono = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	assert_true(mono >= prev);
	assert_true(mono - prev < 1000000000ull);

	/* A 10 ms sleep is seen as at least 10 ms and, even on a loaded VM,
	 * well under 10 s. */
	t0 = ql_clock_ns();
	sleep_ns(10 * 1000 * 1000);
	dt = ql_clock_ns() - t0;

	assert_true(dt >= 10 * 1000 * 1000ull);
	assert_true(dt < 10 * 1000 * 1000 * 1000ull);
}

static void test_tsc(void **state)
{
	uint64_t prev = ql_tsc(), t0, t1, c0, c1;
	double ghz = ql_tsc_ghz(), tsc_ns, clk_ns;

	for (int i = 0; i < 100000; i++) {
		uint64_t now = ql_tsc();

		assert_true(now >= prev);
		prev = now;
	}
	/* Any real counter ticks between 100 MHz and 10 GHz. */
	assert_true(ghz > 0.1);
	assert_true(ghz < 10.0);
	/* Cached: the same value every time. */
	assert_true(ql_tsc_ghz() == ghz);

	/* Ticks converted with the calibration agree with the monotonic clock
	 * over 50 ms. Both count through a preemption, so host steal does not
	 * matter; allow 10 % for a VM's TSC scaling. */
	t0 = ql_clock_ns();
	c0 = ql_tsc();
	sleep_ns(50 * 1000 * 1000);
	c1 = ql_tsc();
	t1 = ql_clock_ns();
	tsc_ns = (double)(c1 - c0) / ghz;
	clk_ns = (double)(t1 - t0);
	assert_true(tsc_ns > clk_ns * 0.9);
	assert_true(tsc_ns < clk_ns * 1.1);
}

static void *ghz_thread(void *arg)
{
	*(double *)arg = ql_tsc_ghz();
	return NULL;
}

/* First calls from several threads at once all get the one calibration.
 * (Runs before test_tsc so the calibration is not cached yet.) */
static void test_tsc_ghz_threads(void **state)
{
	enum { N = 4 };
	pthread_t t[N];
	double ghz[N];

	for (int i = 0; i < N; i++)
		assert_int_equal(pthread_create(&t[i], NULL, ghz_thread, &ghz[i]), 0);
	for (int i = 0; i < N; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	for (int i = 0; i < N; i++) {
		assert_true(ghz[i] > 0.1);
		assert_true(ghz[i] == ghz[0]);
	}
	assert_true(ql_tsc_ghz() == ghz[0]);
}

static void test_cpu_count(void **state)
{
	int n = ql_cpu_count();

	assert_true(n >= 1);
	assert_int_equal(n, (int)sysconf(_SC_NPROCESSORS_ONLN));
}

struct pin_result {
	int first_cpu;
	int rc_pin;
	int cpu_after_pin;
	int mask_count;
	int mask_has_cpu;
	int rc_neg;
	int rc_huge;
	int rc_beyond;
	int mask_count_after_fail;
	char detail[256];
};

/* Pinning changes a thread's affinity for good, so it runs on a thread of
 * its own and leaves the test process as it was. */
static void *pin_thread(void *arg)
{
	struct pin_result *r = arg;
	cpu_set_t set;

	/* CPU 0 where the process may use it (the usual case), else the first
	 * CPU it may use. */
	CPU_ZERO(&set);
	sched_getaffinity(0, sizeof(set), &set);
	r->first_cpu = -1;
	for (int c = 0; c < CPU_SETSIZE; c++) {
		if (CPU_ISSET(c, &set)) {
			r->first_cpu = c;
			break;
		}
	}
	r->rc_pin = ql_cpu_pin(r->first_cpu);
	r->cpu_after_pin = sched_getcpu();
	CPU_ZERO(&set);
	sched_getaffinity(0, sizeof(set), &set);
	r->mask_count = CPU_COUNT(&set);
	r->mask_has_cpu = CPU_ISSET(r->first_cpu, &set);

	r->rc_neg = ql_cpu_pin(-1);
	r->rc_huge = ql_cpu_pin(100000);
	snprintf(r->detail, sizeof(r->detail), "%s", ql_error_detail());
	r->rc_beyond = ql_cpu_pin((int)sysconf(_SC_NPROCESSORS_CONF));
	CPU_ZERO(&set);
	sched_getaffinity(0, sizeof(set), &set);
	r->mask_count_after_fail = CPU_COUNT(&set);
	return NULL;
}

static void test_cpu_pin(void **state)
{
	struct pin_result r;
	pthread_t t;

	memset(&r, 0, sizeof(r));
	assert_int_equal(pthread_create(&t, NULL, pin_thread, &r), 0);
	assert_int_equal(pthread_join(t, NULL), 0);

	assert_true(r.first_cpu >= 0);
	assert_int_equal(r.rc_pin, 0);
	assert_int_equal(r.cpu_after_pin, r.first_cpu);
	assert_int_equal(r.mask_count, 1);
	assert_true(r.mask_has_cpu);

	assert_int_equal(r.rc_neg, -EINVAL);
	assert_int_equal(r.rc_huge, -EINVAL);
	assert_true(strstr(r.detail, "100000") != NULL);
	assert_int_equal(r.rc_beyond, -EINVAL);
	/* A failed pin leaves the earlier one in place. */
	assert_int_equal(r.mask_count_after_fail, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_clock_monotonic),
		cmocka_unit_test(test_tsc_ghz_threads),
		cmocka_unit_test(test_tsc),
		cmocka_unit_test(test_cpu_count),
		cmocka_unit_test(test_cpu_pin),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
