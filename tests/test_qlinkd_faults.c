/* SPDX-License-Identifier: MIT */
/*
 * qlinkd and handlers that misbehave (tests/plugin_faulty.c), with this
 * process playing the QCSs (control client + ring client each):
 * - fault_hang never returns: with both QCSs on one dispatcher, the other
 *   QCS keeps being served, the hung one is told by ABORT (naming the
 *   function), STATUS still answers, SIGTERM exits 0 in bounded time;
 * - fault_smash writes past its result buffer: answered QL_RPC_E_INTERNAL,
 *   counted (result_overruns=1), the next call is served;
 * - fault_segv dereferences NULL: qlinkd dies of SIGSEGV, but first says
 *   "qlinkd: handler 'fault_segv' crashed with SIGSEGV" on stderr.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "demo/demo.h"
#include "qlink/clock.h"
#include "qlink/control.h"
#include "qlink/ring.h"
#include "qlink/rpc.h"
#include "qlinkd_fixture.h"

#ifndef QL_TEST_PLUGIN_FAULTY
#error "QL_TEST_PLUGIN_FAULTY must be defined by the build"
#endif

static struct qlinkd_fixture qd;

static void start_qlinkd(void)
{
	assert_int_equal(qlinkd_fixture_init(&qd, "faults"), 0);
	assert_int_equal(qlinkd_fixture_write_config(&qd,
						     "device: soft+shm://qlfault-%d-%d\n"
						     "control: { address: 127.0.0.1, port: %d }\n"
						     "dispatcher: { cpu: -1, idle: yield, "
						     "call_deadline_ms: 200 }\n"
						     "max_sessions: 8\n"
						     "plugins:\n  - path: %s\n",
						     (int)getpid(), qd.run, qd.port,
						     QL_TEST_PLUGIN_FAULTY),
			 0);
	assert_int_equal(qlinkd_fixture_start(&qd), 0);
}

static void qcs_open(struct qlinkd_qcs *q, const char *name)
{
	char uri[64];

	snprintf(uri, sizeof(uri), "soft+shm://qlf-%s-%d-%d", name, (int)getpid(), qd.run);
	qlinkd_qcs_open(q, qd.port, name, uri);
}

/* The status of the response to the oldest call within ms; INT32_MIN if
 * none came. */
static int32_t wait_response(struct qlinkd_qcs *q, unsigned ms)
{
	int32_t status;

	return qlinkd_qcs_wait(q, ms, &status, NULL) ? status : INT32_MIN;
}

static int no_program(void *ctx, const void *bytes, size_t len)
{
	(void)ctx;
	(void)bytes;
	(void)len;
	return -ENOTSUP;
}

static int no_trigger(void *ctx)
{
	(void)ctx;
	return -ENOTSUP;
}

static char abort_reason[256];

static void on_abort(void *ctx, const char *reason)
{
	(void)ctx;
	snprintf(abort_reason, sizeof(abort_reason), "%s", reason ? reason : "");
}

static void test_hang(void **state)
{
	struct ql_ctl_client_ops ops = { no_program, no_trigger, on_abort };
	char json[1024];
	struct qlinkd_qcs a, b;
	uint64_t t0, took;
	int ret = 0;

	(void)state;
	start_qlinkd();
	qcs_open(&a, "hangA");
	qcs_open(&b, "hangB");
	qlinkd_qcs_calls(&a, 10);
	qlinkd_qcs_calls(&b, 10);
	/* one dispatcher: A and B share its thread, which A's call hangs */
	qlinkd_qcs_send(&a, "fault_hang");
	qlinkd_qcs_calls(&b, 200); /* by the replacement thread once the deadline passed */
	assert_int_equal(qlinkd_wait_log(qd.errlog, "function=fault_hang", 5000), 0);
	qlinkd_qcs_calls(&b, 100);

	/* A is told: ABORT naming the function */
	for (t0 = ql_clock_ns(); ret >= 0 && ql_clock_ns() - t0 < 5000000000ull;)
		ret = ql_ctl_client_serve(a.ctl, 100, &ops, NULL);
	assert_int_equal(ret, -ECONNRESET);
	assert_string_equal(abort_reason, "handler 'fault_hang' exceeded its deadline (200 ms)");
	assert_int_equal(qlinkd_wait_log(qd.errlog, "QCS told (ABORT)", 2000), 0);
	assert_int_equal(
		qlinkd_wait_log(qd.errlog, "handler 'fault_hang' exceeded its deadline", 100), 0);

	/* the control plane still answers; B is still served */
	assert_int_equal(ql_ctl_client_status(b.ctl, json, sizeof(json)), 0);
	assert_non_null(strstr(json, "\"failed\":0"));
	qlinkd_qcs_calls(&b, 100);
	qlinkd_qcs_drop(&a);
	qlinkd_qcs_close(&b);

	/* SIGTERM with the stuck thread still spinning: exit 0, promptly */
	assert_int_equal(qlinkd_fixture_end(&qd, SIGTERM, 10000, &took), 0);
	assert_true(took < 5000000000ull);
	assert_non_null(
		strstr(qlinkd_read_file(qd.errlog), "exiting with a handler still running"));
	qlinkd_fixture_cleanup(&qd);
}

static void test_smash(void **state)
{
	struct qlinkd_qcs a;
	uint64_t took;

	(void)state;
	start_qlinkd();
	qcs_open(&a, "smash");
	qlinkd_qcs_calls(&a, 5);
	qlinkd_qcs_send(&a, "fault_smash");
	assert_int_equal(wait_response(&a, 5000), QL_RPC_E_INTERNAL);
	qlinkd_qcs_calls(&a, 50);
	kill(qd.pid, SIGUSR1);
	assert_int_equal(qlinkd_wait_log(qd.outlog, "result_overruns=1", 5000), 0);
	assert_int_equal(qlinkd_wait_log(qd.outlog, "function=fault_smash id=", 1000), 0);
	assert_int_equal(
		qlinkd_wait_log(qd.errlog,
				"\"handler wrote past its result buffer (answered -7)\" session=0 "
				"function=fault_smash result_overruns=1",
				1000),
		0);
	assert_non_null(strstr(qlinkd_read_file(qd.outlog), "requests=56 responses=56 ok=55"));
	qlinkd_qcs_close(&a);
	assert_int_equal(qlinkd_fixture_end(&qd, SIGTERM, 10000, &took), 0);
	qlinkd_fixture_cleanup(&qd);
}

static void test_segv(void **state)
{
	struct qlinkd_qcs a;
	uint64_t took;

	(void)state;
	start_qlinkd();
	qcs_open(&a, "segv");
	qlinkd_qcs_calls(&a, 5);
	qlinkd_qcs_send(&a, "fault_segv");
	assert_int_equal(qlinkd_fixture_end(&qd, 0, 5000, &took), 128 + SIGSEGV);
	if (!strstr(qlinkd_read_file(qd.errlog),
		    "qlinkd: handler 'fault_segv' crashed with SIGSEGV\n"))
		fail_msg("no crash report naming the function:\n%s", qlinkd_read_file(qd.errlog));
	qlinkd_qcs_drop(&a);
	qlinkd_fixture_cleanup(&qd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_smash),
		cmocka_unit_test(test_hang),
		cmocka_unit_test(test_segv),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
