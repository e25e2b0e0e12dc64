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

#if !defined(QL_TEST_QLINKD) || !defined(QL_TEST_PLUGIN_FAULTY)
#error "QL_TEST_QLINKD and QL_TEST_PLUGIN_FAULTY must be defined by the build"
#endif

static char dir[64];
static char errlog[256], outlog[256];
static int port;
static pid_t qlinkd = -1;
static int run_no;

struct qcs {
	struct ql_ctl_client *ctl;
	struct ql_device *dev;
	struct ql_ring_client *cl;
	uint32_t next;
};

static char *read_file(const char *path)
{
	static char buf[65536];
	FILE *f = fopen(path, "r");
	size_t n = 0;

	if (f) {
		n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
	}
	buf[n] = '\0';
	return buf;
}

static int wait_log(const char *path, const char *what, unsigned ms)
{
	uint64_t t0 = ql_clock_ns();

	while (!strstr(read_file(path), what)) {
		if (ql_clock_ns() - t0 > (uint64_t)ms * 1000000)
			return -1;
		usleep(20000);
	}
	return 0;
}

static void start_qlinkd(void)
{
	char cfg[300], text[700];
	FILE *f;

	strcpy(dir, "/tmp/qlink-test-faults-XXXXXX");
	assert_non_null(mkdtemp(dir));
	run_no++;
	port = 20000 + (int)((getpid() * 3 + run_no) % 20000);
	snprintf(cfg, sizeof(cfg), "%s/qlinkd.yaml", dir);
	snprintf(errlog, sizeof(errlog), "%s/qlinkd.err", dir);
	snprintf(outlog, sizeof(outlog), "%s/qlinkd.out", dir);
	snprintf(text, sizeof(text),
		 "device: soft+shm://qlfault-%d-%d\n"
		 "control: { address: 127.0.0.1, port: %d }\n"
		 "dispatcher: { cpu: -1, idle: yield, call_deadline_ms: 200 }\n"
		 "max_sessions: 8\n"
		 "plugins:\n  - path: %s\n",
		 (int)getpid(), run_no, port, QL_TEST_PLUGIN_FAULTY);
	f = fopen(cfg, "w");
	assert_non_null(f);
	assert_true(fputs(text, f) >= 0);
	assert_int_equal(fclose(f), 0);
	fflush(NULL);
	qlinkd = fork();
	assert_true(qlinkd >= 0);
	if (qlinkd == 0) {
		if (!freopen(errlog, "w", stderr) || !freopen(outlog, "w", stdout))
			_exit(127);
		alarm(60); /* survives exec: a stuck qlinkd cannot outlive the test */
		execl(QL_TEST_QLINKD, "qlinkd", "--config", cfg, (char *)NULL);
		_exit(127);
	}
	assert_int_equal(wait_log(errlog, "listening", 10000), 0);
}

/* Send sig (0: none) and wait up to ms for qlinkd to end; its exit status
 * (or 128 + signal). */
static int end_qlinkd(int sig, unsigned ms, uint64_t *took_ns)
{
	uint64_t t0 = ql_clock_ns();
	int st = 0;
	pid_t r;

	if (sig)
		kill(qlinkd, sig);
	while ((r = waitpid(qlinkd, &st, WNOHANG)) == 0) {
		if (ql_clock_ns() - t0 > (uint64_t)ms * 1000000) {
			kill(qlinkd, SIGKILL);
			waitpid(qlinkd, &st, 0);
			fprintf(stderr, "qlinkd did not stop in %u ms:\n%s\n", ms,
				read_file(errlog));
			qlinkd = -1;
			return -1;
		}
		usleep(10000);
	}
	*took_ns = ql_clock_ns() - t0;
	qlinkd = -1;
	if (WIFEXITED(st) && WEXITSTATUS(st))
		fprintf(stderr, "qlinkd exited %d:\n%s\n", WEXITSTATUS(st), read_file(errlog));
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void cleanup(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd))
		fprintf(stderr, "cannot remove %s\n", dir);
}

static void qcs_open(struct qcs *q, const char *name)
{
	struct ql_ctl_client_config cc = { .name = name };
	struct ql_conn_params sp, cp;
	char hp[64], uri[64];

	memset(q, 0, sizeof(*q));
	snprintf(hp, sizeof(hp), "127.0.0.1:%d", port);
	snprintf(uri, sizeof(uri), "soft+shm://qlf-%s-%d-%d", name, (int)getpid(), run_no);
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

/* A call to fn: a parity syndrome as arguments (any for the raw faults). */
static void send_call(struct qcs *q, const char *fn)
{
	uint8_t msg[128], syn[QL_DEMO_PARITY_ARG_LEN];
	struct ql_rpc_header h = {
		.magic = QL_RPC_MAGIC_REQUEST,
		.function_id = ql_rpc_fnv1a(fn),
		.arg_len = sizeof(syn),
		.request_id = q->next++,
	};

	ql_demo_parity_syndrome(1, h.request_id, syn);
	ql_rpc_header_encode(msg, &h);
	memcpy(msg + QL_RPC_HEADER_SIZE, syn, sizeof(syn));
	assert_int_equal(ql_ring_client_send(q->cl, msg, QL_RPC_HEADER_SIZE + sizeof(syn)), 0);
}

/* The status of the response to the oldest call within ms; INT32_MIN if
 * none came. */
static int32_t wait_response(struct qcs *q, unsigned ms)
{
	uint64_t t0 = ql_clock_ns();
	struct ql_ring_response r;
	int32_t status;
	int n;

	while ((n = ql_ring_client_poll(q->cl, &r, 1)) == 0)
		if (ql_clock_ns() - t0 > (uint64_t)ms * 1000000)
			return INT32_MIN;
	assert_int_equal(n, 1);
	assert_true(r.len >= QL_RPC_RESPONSE_SIZE);
	status = ql_rpc_get_i32(r.msg + 4);
	assert_int_equal(ql_ring_client_release(q->cl, &r), 0);
	return status;
}

static void calls(struct qcs *q, int n)
{
	for (int i = 0; i < n; i++) {
		send_call(q, QL_DEMO_PARITY_NAME);
		assert_int_equal(wait_response(q, 5000), 0);
	}
	ql_ctl_client_keepalive(q->ctl);
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
	struct qcs a, b;
	uint64_t t0, took;
	int ret = 0;

	(void)state;
	start_qlinkd();
	qcs_open(&a, "hangA");
	qcs_open(&b, "hangB");
	calls(&a, 10);
	calls(&b, 10);
	/* one dispatcher: A and B share its thread, which A's call hangs */
	send_call(&a, "fault_hang");
	calls(&b, 200); /* by the replacement thread once the deadline passed */
	assert_int_equal(wait_log(errlog, "function=fault_hang", 5000), 0);
	calls(&b, 100);

	/* A is told: ABORT naming the function */
	for (t0 = ql_clock_ns(); ret >= 0 && ql_clock_ns() - t0 < 5000000000ull;)
		ret = ql_ctl_client_serve(a.ctl, 100, &ops, NULL);
	assert_int_equal(ret, -ECONNRESET);
	assert_string_equal(abort_reason, "handler 'fault_hang' exceeded its deadline (200 ms)");
	assert_int_equal(wait_log(errlog, "QCS told (ABORT)", 2000), 0);
	assert_int_equal(wait_log(errlog, "handler 'fault_hang' exceeded its deadline", 100), 0);

	/* the control plane still answers; B is still served */
	assert_int_equal(ql_ctl_client_status(b.ctl, json, sizeof(json)), 0);
	assert_non_null(strstr(json, "\"failed\":0"));
	calls(&b, 100);
	ql_ring_client_destroy(a.cl);
	ql_device_close(a.dev);
	ql_ctl_client_destroy(a.ctl);
	qcs_close(&b);

	/* SIGTERM with the stuck thread still spinning: exit 0, promptly */
	assert_int_equal(end_qlinkd(SIGTERM, 10000, &took), 0);
	assert_true(took < 5000000000ull);
	assert_non_null(strstr(read_file(errlog), "exiting with a handler still running"));
	cleanup();
}

static void test_smash(void **state)
{
	struct qcs a;
	uint64_t took;

	(void)state;
	start_qlinkd();
	qcs_open(&a, "smash");
	calls(&a, 5);
	send_call(&a, "fault_smash");
	assert_int_equal(wait_response(&a, 5000), QL_RPC_E_INTERNAL);
	calls(&a, 50);
	kill(qlinkd, SIGUSR1);
	assert_int_equal(wait_log(outlog, "result_overruns=1", 5000), 0);
	assert_int_equal(wait_log(outlog, "function=fault_smash id=", 1000), 0);
	assert_int_equal(
		wait_log(errlog,
			 "\"handler wrote past its result buffer (answered -7)\" session=0 "
			 "function=fault_smash result_overruns=1",
			 1000),
		0);
	assert_non_null(strstr(read_file(outlog), "requests=56 responses=56 ok=55"));
	qcs_close(&a);
	assert_int_equal(end_qlinkd(SIGTERM, 10000, &took), 0);
	cleanup();
}

static void test_segv(void **state)
{
	struct qcs a;
	uint64_t took;

	(void)state;
	start_qlinkd();
	qcs_open(&a, "segv");
	calls(&a, 5);
	send_call(&a, "fault_segv");
	assert_int_equal(end_qlinkd(0, 5000, &took), 128 + SIGSEGV);
	if (!strstr(read_file(errlog), "qlinkd: handler 'fault_segv' crashed with SIGSEGV\n"))
		fail_msg("no crash report naming the function:\n%s", read_file(errlog));
	ql_ring_client_destroy(a.cl);
	ql_device_close(a.dev);
	ql_ctl_client_destroy(a.ctl);
	cleanup();
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
