/* SPDX-License-Identifier: MIT */
/*
 * qlinkd serving a UC ring (`ring: { qp: uc }`), with losses injected on
 * both wires by the soft NIC: CONNECTION_PARAMS names the QP type and the
 * QCS's ring client follows it; lost requests and responses are resent and
 * answered once; STOP then START resumes serving, the calls written while
 * stopped answered after START, nothing lost.
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

#ifndef QL_TEST_QLINKD
#error "QL_TEST_QLINKD (the qlinkd binary) must be defined by the build"
#endif

static char dir[] = "/tmp/qlink-test-uc-XXXXXX";
static char errlog[256];
static int port;
static pid_t qlinkd = -1;

struct qcs {
	struct ql_ctl_client *ctl;
	struct ql_device *dev;
	struct ql_ring_client *cl;
	uint32_t next;
};

/* The text of qlinkd's log so far. */
static char *read_log(void)
{
	static char buf[65536];
	FILE *f = fopen(errlog, "r");
	size_t n = 0;

	if (f) {
		n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
	}
	buf[n] = '\0';
	return buf;
}

static int start_qlinkd(void **state)
{
	char cfg[256], text[512];
	uint64_t t0;
	FILE *f;

	(void)state;
	if (!mkdtemp(dir))
		return -1;
	port = 20000 + (int)(getpid() % 20000);
	snprintf(cfg, sizeof(cfg), "%s/qlinkd.yaml", dir);
	snprintf(errlog, sizeof(errlog), "%s/qlinkd.err", dir);
	/* UC rings; qlinkd's device drops every 11th message it sends (a
	 * response): the QCS resends, qlinkd answers from its cache */
	snprintf(text, sizeof(text),
		 "device: soft+shm://qluc-%d?drop_nth=11\n"
		 "control: { address: 127.0.0.1, port: %d }\n"
		 "dispatcher: { idle: yield }\n"
		 "ring: { slots: 16, slot_size: 128, qp: uc }\n"
		 "max_sessions: 4\n",
		 (int)getpid(), port);
	f = fopen(cfg, "w");
	if (!f || fputs(text, f) < 0 || fclose(f))
		return -1;
	fflush(NULL);
	qlinkd = fork();
	if (qlinkd < 0)
		return -1;
	if (qlinkd == 0) {
		if (!freopen(errlog, "w", stderr) || !freopen("/dev/null", "w", stdout))
			_exit(127);
		alarm(60); /* survives exec: a stuck qlinkd cannot outlive the test */
		execl(QL_TEST_QLINKD, "qlinkd", "--config", cfg, (char *)NULL);
		_exit(127);
	}
	for (t0 = ql_clock_ns(); !strstr(read_log(), "listening");) {
		if (ql_clock_ns() - t0 > 10000000000ull)
			return -1;
		usleep(20000);
	}
	return 0;
}

static int stop_qlinkd(void **state)
{
	char cmd[300];
	int st = 0;

	(void)state;
	if (qlinkd > 0) {
		kill(qlinkd, SIGTERM);
		waitpid(qlinkd, &st, 0);
		/* a clean stop (and, under ASan, no leak or error report) */
		if (!WIFEXITED(st) || WEXITSTATUS(st))
			fprintf(stderr, "qlinkd did not exit 0 on SIGTERM:\n%s\n", read_log());
	}
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd))
		return -1;
	return WIFEXITED(st) && !WEXITSTATUS(st) ? 0 : -1;
}

static void qcs_open(struct qcs *q, const char *name)
{
	struct ql_ctl_client_config cc = { .name = name };
	struct ql_conn_params sp, cp;
	char hp[64], uri[64];

	memset(q, 0, sizeof(*q));
	snprintf(hp, sizeof(hp), "127.0.0.1:%d", port);
	/* the QCS's device drops 3 % of what it sends (request WRITEs) */
	snprintf(uri, sizeof(uri), "soft+shm://qluc-%s-%d?loss=0.03&seed=11", name, (int)getpid());
	assert_int_equal(ql_ctl_client_create(hp, NULL, 0, &cc, &q->ctl), 0);
	assert_int_equal(ql_ctl_client_discover(q->ctl, 1, &sp), 0);
	/* CONNECTION_PARAMS said qp_type "uc"; the client follows it */
	assert_int_equal(sp.qp_type, IBV_QPT_UC);
	assert_int_equal(ql_device_open(uri, &q->dev), 0);
	assert_int_equal(ql_ring_client_create(q->dev, &sp, NULL, &q->cl), 0);
	assert_int_equal(ql_ring_client_local_params(q->cl, &cp), 0);
	assert_int_equal(ql_ring_client_connect(q->cl, &sp, NULL), 0);
	assert_int_equal(ql_ctl_client_ack(q->ctl, &cp, 1), 0);
	assert_int_equal(ql_ctl_client_start(q->ctl), 0);
}

static void qcs_close(struct qcs *q)
{
	ql_ctl_client_complete(q->ctl);
	ql_ring_client_destroy(q->cl);
	ql_device_close(q->dev);
	ql_ctl_client_destroy(q->ctl);
}

static void send_call(struct qcs *q)
{
	uint8_t msg[128], syn[QL_DEMO_PARITY_ARG_LEN];
	struct ql_rpc_header h = {
		.magic = QL_RPC_MAGIC_REQUEST,
		.function_id = ql_rpc_fnv1a(QL_DEMO_PARITY_NAME),
		.arg_len = sizeof(syn),
		.request_id = q->next++,
	};

	ql_demo_parity_syndrome(1, h.request_id, syn);
	ql_rpc_header_encode(msg, &h);
	memcpy(msg + QL_RPC_HEADER_SIZE, syn, sizeof(syn));
	assert_int_equal(ql_ring_client_send(q->cl, msg, QL_RPC_HEADER_SIZE + sizeof(syn)), 0);
}

/* The response to the oldest call within ms, or 0 if none came. */
static int wait_response(struct qcs *q, unsigned ms, uint32_t want_id)
{
	uint64_t t0 = ql_clock_ns();
	struct ql_ring_response r;
	int n;

	while ((n = ql_ring_client_poll(q->cl, &r, 1)) == 0)
		if (ql_clock_ns() - t0 > (uint64_t)ms * 1000000)
			return 0;
	assert_int_equal(n, 1);
	assert_non_null(r.msg); /* never given up */
	assert_int_equal(r.len, QL_RPC_RESPONSE_SIZE + 5);
	assert_int_equal(ql_rpc_get_u32(r.msg + 12), want_id);
	assert_int_equal(ql_rpc_get_i32(r.msg + 4), 0);
	assert_int_equal(ql_ring_client_release(q->cl, &r), 0);
	return 1;
}

static void calls(struct qcs *q, int n)
{
	for (int i = 0; i < n; i++) {
		send_call(q);
		assert_int_equal(wait_response(q, 5000, q->next - 1), 1);
	}
	ql_ctl_client_keepalive(q->ctl);
}

/* "requests":N from STATUS_REPLY's counters. */
static long status_requests(struct qcs *q)
{
	char json[QL_CTL_STATUS_MAX];
	const char *p;

	assert_int_equal(ql_ctl_client_status(q->ctl, json, sizeof(json)), 0);
	p = strstr(json, "\"requests\":");
	assert_non_null(p);
	return atol(p + strlen("\"requests\":"));
}

/* UC through qlinkd with losses both ways, and STOP then START: calls
 * written while stopped wait in the ring and are all answered, in order,
 * after START; qlinkd ran each request once (its request count is the
 * number of calls, though many were resent). */
static void test_uc_stop_start(void **state)
{
	struct ql_ring_client_stats st;
	struct qcs a;
	uint32_t first;

	(void)state;
	qcs_open(&a, "qcsA");
	calls(&a, 300);
	assert_int_equal(ql_ctl_client_stop(a.ctl), 0);
	/* stopped: 8 calls written, none answered */
	first = a.next;
	for (int i = 0; i < 8; i++)
		send_call(&a);
	assert_int_equal(wait_response(&a, 100, first), 0);
	ql_ctl_client_keepalive(a.ctl);
	/* START: every one of them is answered, in order */
	assert_int_equal(ql_ctl_client_start(a.ctl), 0);
	for (uint32_t i = 0; i < 8; i++)
		assert_int_equal(wait_response(&a, 5000, first + i), 1);
	calls(&a, 300);
	assert_int_equal(ql_ring_client_stats(a.cl, &st), 0);
	assert_true(st.resent > 0);
	assert_int_equal(st.lost, 0);
	assert_int_equal(status_requests(&a), 608);
	/* qlinkd counted its side: resends answered from the cache (its
	 * device drops every 11th response), none too old for it */
	{
		char json[QL_CTL_STATUS_MAX];
		const char *p;

		assert_int_equal(ql_ctl_client_status(a.ctl, json, sizeof(json)), 0);
		p = strstr(json, "\"dup_answered\":");
		assert_non_null(p);
		assert_true(atol(p + strlen("\"dup_answered\":")) > 0);
		assert_non_null(strstr(json, "\"dup_missed\":0"));
	}
	qcs_close(&a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_uc_stop_start),
	};

	return cmocka_run_group_tests(tests, start_qlinkd, stop_qlinkd);
}
