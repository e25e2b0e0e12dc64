/* SPDX-License-Identifier: MIT */
/*
 * qlinkd with two dispatchers moves a session to another core on a restart:
 * this process plays three QCSs (control client + ring client each) against
 * a qlinkd child with `dispatcher.cpus: [0, LAST]`. A lands on cpu 0, B on
 * LAST, C on cpu 0 (least-loaded, first on a tie). STOP A and STOP B: a
 * call made to B while it is stopped waits in its ring. START A: the
 * least-loaded dispatcher is now LAST's, so A moves there and its calls are
 * answered; START B answers the call that waited. Every wait is bounded.
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

static struct qlinkd_fixture qd;
static int last_cpu;

static int start_qlinkd(void **state)
{
	(void)state;
	last_cpu = ql_cpu_count() - 1;
	if (qlinkd_fixture_init(&qd, "move") ||
	    qlinkd_fixture_write_config(&qd,
					"device: soft+shm://qlmove-%d\n"
					"control: { address: 127.0.0.1, port: %d }\n"
					"dispatcher: { cpus: [0, %d], idle: yield }\n"
					"max_sessions: 8\n",
					(int)getpid(), qd.port, last_cpu))
		return -1;
	if (last_cpu < 1)
		return 0; /* one core: nothing to move between (skipped) */
	return qlinkd_fixture_start(&qd);
}

static int stop_qlinkd(void **state)
{
	int ret = 0, rc;

	(void)state;
	/* a clean stop on SIGTERM (and, under ASan, no leak or error report) */
	if (qd.pid > 0 && (rc = qlinkd_fixture_end(&qd, SIGTERM, 10000, NULL)) != 0) {
		fprintf(stderr, "qlinkd did not exit 0 on SIGTERM (%d):\n%s\n", rc,
			qlinkd_read_file(qd.errlog));
		ret = -1;
	}
	if (qlinkd_fixture_cleanup(&qd))
		ret = -1;
	return ret;
}

static void qcs_open(struct qlinkd_qcs *q, const char *name)
{
	char uri[64];

	snprintf(uri, sizeof(uri), "soft+shm://qlmove-%s-%d", name, (int)getpid());
	qlinkd_qcs_open(q, qd.port, name, uri);
}

static void send_call(struct qlinkd_qcs *q)
{
	qlinkd_qcs_send(q, QL_DEMO_PARITY_NAME);
}

/* The response to the oldest call within ms (status 0, its 5-byte result),
 * or 0 if none came. */
static int wait_response(struct qlinkd_qcs *q, unsigned ms)
{
	int32_t status;
	uint32_t len;

	if (!qlinkd_qcs_wait(q, ms, &status, &len))
		return 0;
	assert_int_equal(len, QL_RPC_RESPONSE_SIZE + 5);
	assert_int_equal(status, 0);
	return 1;
}

/* "session dispatching session=ID cpu=C": the core of its latest placement. */
static int core_of(unsigned id)
{
	char pat[64];
	const char *log = qlinkd_read_file(qd.errlog), *p, *at = NULL;
	int cpu = -2;

	snprintf(pat, sizeof(pat), "session dispatching session=%u cpu=", id);
	for (p = log; (p = strstr(p, pat)); p++)
		at = p;
	if (at)
		cpu = atoi(at + strlen(pat));
	return cpu;
}

static void test_restart_moves_session(void **state)
{
	struct qlinkd_qcs a, b, c;

	(void)state;
	if (last_cpu < 1)
		skip();
	qcs_open(&a, "qcsA");
	qlinkd_qcs_calls(&a, 100);
	qcs_open(&b, "qcsB");
	qlinkd_qcs_calls(&b, 100);
	qcs_open(&c, "qcsC");
	qlinkd_qcs_calls(&c, 100);
	assert_int_equal(core_of(0), 0);
	assert_int_equal(core_of(1), last_cpu);
	assert_int_equal(core_of(2), 0);

	assert_int_equal(ql_ctl_client_stop(a.ctl), 0);
	assert_int_equal(ql_ctl_client_stop(b.ctl), 0);
	/* stopped: B's call waits in its ring, unanswered */
	send_call(&b);
	assert_int_equal(wait_response(&b, 100), 0);
	ql_ctl_client_keepalive(c.ctl);

	/* restart A: cpu 0 serves C, LAST serves nothing: A moves there */
	assert_int_equal(ql_ctl_client_start(a.ctl), 0);
	assert_int_equal(core_of(0), last_cpu);
	qlinkd_qcs_calls(&a, 100);
	/* restart B: the call that waited is answered */
	assert_int_equal(ql_ctl_client_start(b.ctl), 0);
	assert_int_equal(wait_response(&b, 5000), 1);
	qlinkd_qcs_calls(&b, 100);
	qlinkd_qcs_calls(&c, 100);
	qlinkd_qcs_close(&a);
	qlinkd_qcs_close(&b);
	qlinkd_qcs_close(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_restart_moves_session),
	};

	return cmocka_run_group_tests(tests, start_qlinkd, stop_qlinkd);
}
