/* SPDX-License-Identifier: MIT */
/*
 * qlinkd serving a UC ring (`ring: { qp: uc }`), with losses injected on
 * both wires by the soft NIC: CONNECTION_PARAMS names the QP type and the
 * QCS's ring client follows it; lost requests and responses are resent and
 * answered once; STOP then START resumes serving, the calls written while
 * stopped answered after START, nothing lost. The qlinkd child and the QCS
 * come from tests/qlinkd_fixture.[ch].
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include <cmocka.h>

#include "demo/demo.h"
#include "qlink/control.h"
#include "qlink/ring.h"
#include "qlink/rpc.h"
#include "qlinkd_fixture.h"

static struct qlinkd_fixture qd;

static int start_qlinkd(void **state)
{
	(void)state;
	/* UC rings; qlinkd's device drops every 11th message it sends (a
	 * response): the QCS resends, qlinkd answers from its cache */
	if (qlinkd_fixture_init(&qd, "uc") ||
	    qlinkd_fixture_write_config(&qd,
					"device: soft+shm://qluc-%d?drop_nth=11\n"
					"control: { address: 127.0.0.1, port: %d }\n"
					"dispatcher: { idle: yield }\n"
					"ring: { slots: 16, slot_size: 128, qp: uc }\n"
					"max_sessions: 4\n",
					(int)getpid(), qd.port))
		return -1;
	return qlinkd_fixture_start(&qd);
}

static int stop_qlinkd(void **state)
{
	(void)state;
	/* the test ends qlinkd itself; here only after it failed first */
	return qlinkd_fixture_teardown(&qd);
}

/* The response to the oldest call within ms (request want_id, status 0, its
 * 5-byte result), or 0 if none came. */
static int wait_response(struct qlinkd_qcs *q, unsigned ms, uint32_t want_id)
{
	int32_t status;
	uint32_t len;

	if (!qlinkd_qcs_wait(q, ms, &status, &len))
		return 0;
	assert_int_equal(len, QL_RPC_RESPONSE_SIZE + 5);
	assert_int_equal(q->id, want_id);
	assert_int_equal(status, 0);
	return 1;
}

/* UC through qlinkd with losses both ways, and STOP then START: calls
 * written while stopped wait in the ring and are all answered, in order,
 * after START; qlinkd ran each request once (its request count is the
 * number of calls, though many were resent). */
static void test_uc_stop_start(void **state)
{
	struct ql_ring_client_stats st;
	struct qlinkd_qcs a;
	uint32_t first;
	char uri[64];

	(void)state;
	/* the QCS's device drops 3 % of what it sends (request WRITEs) */
	snprintf(uri, sizeof(uri), "soft+shm://qluc-qcsA-%d?loss=0.03&seed=11", (int)getpid());
	qlinkd_qcs_open(&a, qd.port, "qcsA", uri);
	/* CONNECTION_PARAMS said qp_type "uc"; the client followed it */
	assert_int_equal(a.qp_type, IBV_QPT_UC);
	qlinkd_qcs_calls(&a, 300);
	assert_int_equal(ql_ctl_client_stop(a.ctl), 0);
	/* stopped: 8 calls written, none answered */
	first = a.next;
	for (int i = 0; i < 8; i++)
		qlinkd_qcs_send(&a, QL_DEMO_PARITY_NAME);
	assert_int_equal(wait_response(&a, 100, first), 0);
	ql_ctl_client_keepalive(a.ctl);
	/* START: every one of them is answered, in order */
	assert_int_equal(ql_ctl_client_start(a.ctl), 0);
	for (uint32_t i = 0; i < 8; i++)
		assert_int_equal(wait_response(&a, 5000, first + i), 1);
	qlinkd_qcs_calls(&a, 300);
	assert_int_equal(ql_ring_client_stats(a.cl, &st), 0);
	assert_true(st.resent > 0);
	assert_int_equal(st.lost, 0);
	assert_int_equal(qlinkd_qcs_status(&a, "requests"), 608);
	/* qlinkd counted its side: resends answered from the cache (its
	 * device drops every 11th response), none too old for it */
	assert_true(qlinkd_qcs_status(&a, "dup_answered") > 0);
	assert_int_equal(qlinkd_qcs_status(&a, "dup_missed"), 0);
	qlinkd_qcs_close(&a);
	/* a clean stop on SIGTERM, exit 0 (and, under ASan, no leak or error
	 * report; the fixture prints qlinkd's log otherwise). Asserted here: a
	 * group teardown's failure does not change cmocka's exit status. */
	assert_int_equal(qlinkd_fixture_end(&qd, SIGTERM, 10000, NULL), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_uc_stop_start),
	};

	return cmocka_run_group_tests(tests, start_qlinkd, stop_qlinkd);
}
