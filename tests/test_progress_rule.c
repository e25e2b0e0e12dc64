/* SPDX-License-Identifier: MIT */
/*
 * test_progress_rule: the one progress=auto rule every software piece
 * weighs (soft+udp's NIC, the soft NIC's mlx5 engine, the GPU emulation;
 * docs/progress.md §2), and the QLINK_PROGRESS variable.
 *
 *  - the rule's table: caller when the free cores (CPUs less the caller's
 *    own thread, less one left to the rest of the host) are fewer than the
 *    spinning threads (those running plus those the new piece adds);
 *  - the rule on this process: its affinity mask (one pinned CPU: caller
 *    whatever runs) and the process-wide count of spinning threads (one
 *    more thread can turn thread into caller);
 *  - QLINK_PROGRESS names the mode where nothing else does (thread, caller,
 *    auto); any other value is ignored (auto); thread and caller resolve
 *    to themselves whatever the rule would say.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>

#include <cmocka.h>

#include "providers/common/progress.h"

static void test_rule_table(void **state)
{
	static const struct {
		unsigned cpus, spinning, more;
		bool caller;
	} t[] = {
		/* the first piece with a thread of its own (more = 1) */
		{ 1, 0, 1, true },  /* no core at all beside the caller's */
		{ 2, 0, 1, true },  /* the laptop / 2-vCPU VM / CI host */
		{ 3, 0, 1, false }, /* caller, the thread, the rest */
		{ 4, 0, 1, false },
		{ 64, 0, 1, false },
		/* a second one: the first one's thread counts */
		{ 3, 1, 1, true },
		{ 4, 1, 1, false },
		/* a third */
		{ 4, 2, 1, true },
		{ 5, 2, 1, false },
		/* a daemon's dispatcher threads count as well */
		{ 6, 4, 1, true },
		{ 7, 4, 1, false },
		/* a piece that would add two */
		{ 3, 0, 2, true },
		{ 4, 0, 2, false },
		/* nothing to add: caller only when even the caller's own
		 * thread and the rest of the host lack a core */
		{ 1, 0, 0, true },
		{ 2, 0, 0, false },
		{ 0, 0, 0, true },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		print_message("cpus %u spinning %u more %u -> %s\n", t[i].cpus, t[i].spinning,
			      t[i].more, t[i].caller ? "caller" : "thread");
		assert_int_equal(ql__progress_rule(t[i].cpus, t[i].spinning, t[i].more),
				 t[i].caller);
	}
}

static void test_rule_on_this_process(void **state)
{
	cpu_set_t saved, one;
	unsigned cpus, n0;
	int cpu = -1;

	(void)state;
	assert_int_equal(sched_getaffinity(0, sizeof(saved), &saved), 0);
	cpus = (unsigned)CPU_COUNT(&saved);
	n0 = ql__progress_threads();
	assert_int_equal(ql__progress_auto_caller(1), ql__progress_rule(cpus, n0, 1));
	/* the count is what the rule weighs: enough spinning threads turn
	 * any host's answer into caller, and their end turns it back */
	ql__progress_threads_add((int)cpus);
	assert_int_equal(ql__progress_threads(), n0 + cpus);
	assert_true(ql__progress_auto_caller(1));
	assert_int_equal(ql__progress_resolve(QL__PROGRESS_AUTO, 1), QL__PROGRESS_CALLER);
	assert_int_equal(ql__progress_resolve(QL__PROGRESS_THREAD, 1), QL__PROGRESS_THREAD);
	ql__progress_threads_add(-(int)cpus);
	assert_int_equal(ql__progress_threads(), n0);
	assert_int_equal(ql__progress_auto_caller(1), ql__progress_rule(cpus, n0, 1));
	/* the affinity mask (taskset, a cgroup's cpuset) is the CPUs: one */
	for (int c = 0; c < CPU_SETSIZE && cpu < 0; c++)
		if (CPU_ISSET(c, &saved))
			cpu = c;
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	assert_int_equal(sched_setaffinity(0, sizeof(one), &one), 0);
	assert_true(ql__progress_auto_caller(0));
	assert_int_equal(ql__progress_resolve(QL__PROGRESS_AUTO, 1), QL__PROGRESS_CALLER);
	assert_int_equal(ql__progress_resolve(QL__PROGRESS_THREAD, 1), QL__PROGRESS_THREAD);
	assert_int_equal(ql__progress_resolve(QL__PROGRESS_CALLER, 0), QL__PROGRESS_CALLER);
	assert_int_equal(sched_setaffinity(0, sizeof(saved), &saved), 0);
}

static void test_environment(void **state)
{
	static const struct {
		const char *value; /* NULL: unset */
		enum ql__progress_mode mode;
	} t[] = {
		{ NULL, QL__PROGRESS_AUTO },
		{ "thread", QL__PROGRESS_THREAD },
		{ "caller", QL__PROGRESS_CALLER },
		{ "auto", QL__PROGRESS_AUTO },
		/* names no mode: ignored, the rule decides */
		{ "sometimes", QL__PROGRESS_AUTO },
		{ "", QL__PROGRESS_AUTO },
		{ "Thread", QL__PROGRESS_AUTO },
		{ "caller ", QL__PROGRESS_AUTO },
	};
	enum ql__progress_mode m;

	(void)state;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		if (t[i].value)
			setenv("QLINK_PROGRESS", t[i].value, 1);
		else
			unsetenv("QLINK_PROGRESS");
		assert_int_equal(ql__progress_default(), t[i].mode);
	}
	unsetenv("QLINK_PROGRESS");
	/* the option's own parse: the three names, nothing else */
	assert_int_equal(ql__progress_parse("caller", &m), 0);
	assert_int_equal(m, QL__PROGRESS_CALLER);
	assert_int_equal(ql__progress_parse("thread", &m), 0);
	assert_int_equal(m, QL__PROGRESS_THREAD);
	assert_int_equal(ql__progress_parse("auto", &m), 0);
	assert_int_equal(m, QL__PROGRESS_AUTO);
	assert_int_equal(ql__progress_parse("sometimes", &m), -22);
	assert_int_equal(ql__progress_parse("", &m), -22);
	assert_int_equal(ql__progress_parse(NULL, &m), -22);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rule_table),
		cmocka_unit_test(test_rule_on_this_process),
		cmocka_unit_test(test_environment),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
