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

#ifndef QL_TEST_QLINKD
#error "QL_TEST_QLINKD (the qlinkd binary) must be defined by the build"
#endif

static char dir[] = "/tmp/qlink-test-move-XXXXXX";
static char errlog[256];
static int port;
static pid_t qlinkd = -1;
static int last_cpu;

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
	last_cpu = ql_cpu_count() - 1;
	if (!mkdtemp(dir))
		return -1;
	port = 20000 + (int)(getpid() % 20000);
	snprintf(cfg, sizeof(cfg), "%s/qlinkd.yaml", dir);
	snprintf(errlog, sizeof(errlog), "%s/qlinkd.err", dir);
	snprintf(text, sizeof(text),
		 "device: soft+shm://qlmove-%d\n"
		 "control: { address: 127.0.0.1, port: %d }\n"
		 "dispatcher: { cpus: [0, %d], idle: yield }\n"
		 "max_sessions: 8\n",
		 (int)getpid(), port, last_cpu);
	f = fopen(cfg, "w");
	if (!f || fputs(text, f) < 0 || fclose(f))
		return -1;
	if (last_cpu < 1)
		return 0; /* one core: nothing to move between (skipped) */
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
	snprintf(uri, sizeof(uri), "soft+shm://qlmove-%s-%d", name, (int)getpid());
	assert_int_equal(ql_ctl_client_create(hp, NULL, 0, &cc, &q->ctl), 0);
	assert_int_equal(ql_ctl_client_discover(q->ctl, 1, &sp), 0);
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
static int wait_response(struct qcs *q, unsigned ms)
{
	uint64_t t0 = ql_clock_ns();
	struct ql_ring_response r;
	int n;

	while ((n = ql_ring_client_poll(q->cl, &r, 1)) == 0)
		if (ql_clock_ns() - t0 > (uint64_t)ms * 1000000)
			return 0;
	assert_int_equal(n, 1);
	assert_int_equal(r.len, QL_RPC_RESPONSE_SIZE + 5);
	assert_int_equal(ql_rpc_get_i32(r.msg + 4), 0);
	assert_int_equal(ql_ring_client_release(q->cl, &r), 0);
	return 1;
}

static void calls(struct qcs *q, int n)
{
	for (int i = 0; i < n; i++) {
		send_call(q);
		assert_int_equal(wait_response(q, 5000), 1);
	}
	ql_ctl_client_keepalive(q->ctl);
}

/* "session dispatching session=ID cpu=C": the core of its latest placement. */
static int core_of(unsigned id)
{
	char pat[64];
	const char *log = read_log(), *p, *at = NULL;
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
	struct qcs a, b, c;

	(void)state;
	if (last_cpu < 1)
		skip();
	qcs_open(&a, "qcsA");
	calls(&a, 100);
	qcs_open(&b, "qcsB");
	calls(&b, 100);
	qcs_open(&c, "qcsC");
	calls(&c, 100);
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
	calls(&a, 100);
	/* restart B: the call that waited is answered */
	assert_int_equal(ql_ctl_client_start(b.ctl), 0);
	assert_int_equal(wait_response(&b, 5000), 1);
	calls(&b, 100);
	calls(&c, 100);
	qcs_close(&a);
	qcs_close(&b);
	qcs_close(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_restart_moves_session),
	};

	return cmocka_run_group_tests(tests, start_qlinkd, stop_qlinkd);
}
