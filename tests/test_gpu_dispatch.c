/* SPDX-License-Identifier: MIT */
/*
 * The GPU dispatcher end to end, its body run by the host emulation (a
 * thread stands in for the GPU) and its SENDs posted as mlx5 work requests
 * that the soft NIC's engine executes:
 *
 * - across processes over soft+shm: a dispatcher process and an unmodified
 *   QCS (the VPPU on the reference ring client) in this one, parameters
 *   exchanged as text: every answer checked (qlink_parity, a typed
 *   function of the test's own, echo), closed loop and paced, the
 *   dispatcher's counters matching the client's;
 * - hostile requests through the same ring (short, bad magic, arg_len past
 *   the message, unknown function, wrong argument size, a handler's own
 *   status) answered with the CPU daemon's statuses, request_id echoed;
 * - the host's control: is_running, start/stop/restart with the ring's
 *   progress kept, counters read while it runs, register refused while
 *   running, start refused before connect;
 * - the dispatcher process killed: the client ends with an error, no hang;
 * - on a GPU (CUDA build and a device): the same calls through the
 *   persistent kernel; skipped, with the reason, where there is none;
 * - the channel in GPU memory (memory QL_MEM_GPU): without a CUDA driver
 *   -ENODEV and why; with a stand-in driver on the soft NIC, host memory
 *   mapped into the GPU, served by the emulation as before.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "demo/demo.h"
#include <qlink/clock.h>
#include <qlink/error.h>
#include <qlink/gpu.h>
#include <qlink/rpc.h>
#include <qlink/vppu.h>

#include "cuda_fake.h"
#include "expect_detail.h"
#include "hotpath.h"
#include "transport/rendezvous.h" /* libqlink.a: parameters over pipes, as qlink bench */

/* internal (static library): the soft NIC's engine driven by hand, and one
 * turn of the dispatch body on this thread */
int ql__soft_mlx5_engine_manual(struct ql_device *d);
int ql__soft_mlx5_engine_poll(struct ql_device *d);
int ql__gpu_dispatcher_step(struct ql_gpu_dispatcher *d);

/* a typed function of the test's own, host+device */
QL_HD static int32_t axpy(float a, const float *x, int32_t n, float *y, int32_t *status)
{
	float s = 0;

	for (int i = 0; i < 8; i++)
		s += a * x[i];
	*y = s;
	*status = n;
	return n < 0 ? 5 : 0; /* a handler status for a negative n */
}
QL_GPU_FN(axpy, QL_ARG_F32, QL_ARG_F32_ARRAY(8), QL_ARG_I32, QL_RES_F32, QL_RES_I32);

static int write_line(int fd, const char *s)
{
	return ql__write_all(fd, s, strlen(s)) || ql__write_all(fd, "\n", 1) ? -1 : 0;
}

static int register_all(struct ql_gpu_dispatcher *d)
{
	int ret = ql_gpu_dispatcher_register(d, ql_gpu_builtin_function("qlink_parity"));

	if (!ret)
		ret = ql_gpu_dispatcher_register(d, ql_gpu_builtin_function("echo"));
	if (!ret)
		ret = ql_gpu_dispatcher_register(d, &QL_GPU_FUNCTION(axpy));
	return ret;
}

/* The dispatcher process: serve until "stop", then report its counters. */
static int server(int rfd, int wfd, enum ql_gpu_mode mode)
{
	struct ql_gpu_config gc = { .mode = mode, .num_slots = 32, .slot_size = 128, .cpu = -1 };
	struct ql_device *dev;
	struct ql_gpu_dispatcher *d;
	struct ql_conn_params sp, cp;
	struct ql_gpu_stats st;
	char uri[64], line[512];
	int ret;

	snprintf(uri, sizeof(uri), "soft+shm://gpu-srv%d", (int)getpid());
	if (ql_device_open(uri, &dev))
		return 10;
	ret = ql_gpu_dispatcher_create(dev, &gc, &d);
	if (ret) {
		fprintf(stderr, "server: %s\n", ql_error_detail());
		return 11;
	}
	if (register_all(d) || ql_gpu_dispatcher_local_params(d, &sp))
		return 12;
	if (ql__send_params(wfd, &sp) || ql__recv_params(rfd, &cp))
		return 13;
	if (ql_gpu_dispatcher_connect(d, &cp, NULL) || ql_gpu_dispatcher_start(d))
		return 14;
	/* (caller progress: the body runs in this wait) */
	if (ql_gpu_dispatcher_serve_until(d, rfd) != 1 ||
	    ql__read_line(rfd, line, sizeof(line)) < 0)
		return 15;
	if (ql_gpu_dispatcher_stop(d))
		return 16;
	ql_gpu_dispatcher_stats(d, &st);
	snprintf(line, sizeof(line),
		 "%" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64
		 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %d",
		 st.requests, st.completed, st.ok, st.handler_error, st.err_short, st.err_bad_magic,
		 st.err_bad_length, st.err_unknown_function, st.err_args, st.handled,
		 ql_gpu_dispatcher_error(d));
	write_line(wfd, line);
	ql_gpu_dispatcher_destroy(d);
	ql_device_close(dev);
	return 0;
}

struct peer {
	pid_t pid;
	int to, from;
	struct ql_device *dev;
	struct ql_ring_client *cl;
};

static void connect_peer(struct peer *p, enum ql_gpu_mode mode)
{
	int a[2], b[2];
	char uri[64];
	struct ql_conn_params sp, cp;

	assert_int_equal(pipe(a), 0);
	assert_int_equal(pipe(b), 0);
	fflush(NULL);
	p->pid = fork();
	assert_true(p->pid >= 0);
	if (p->pid == 0) {
		close(a[1]);
		close(b[0]);
		alarm(60);
		_exit(server(a[0], b[1], mode));
	}
	close(a[0]);
	close(b[1]);
	p->to = a[1];
	p->from = b[0];
	assert_int_equal(ql__recv_params(p->from, &sp), 0);
	snprintf(uri, sizeof(uri), "soft+shm://gpu-cli%d", (int)getpid());
	assert_int_equal(ql_device_open(uri, &p->dev), 0);
	assert_int_equal(ql_ring_client_create(p->dev, &sp, NULL, &p->cl), 0);
	assert_int_equal(ql_ring_client_local_params(p->cl, &cp), 0);
	assert_int_equal(ql_ring_client_connect(p->cl, &sp, NULL), 0);
	assert_int_equal(ql__send_params(p->to, &cp), 0);
}

static void close_peer(struct peer *p)
{
	ql_ring_client_destroy(p->cl);
	assert_int_equal(ql_device_close(p->dev), 0);
	close(p->to);
	close(p->from);
}

/* "stop", then the server's counters; the process must exit 0. */
static void stop_peer(struct peer *p, uint64_t c[10], int *err)
{
	char line[512];
	int st;

	assert_int_equal(write_line(p->to, "stop"), 0);
	assert_true(ql__read_line(p->from, line, sizeof(line)) > 0);
	assert_int_equal(sscanf(line,
				"%" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64
				" %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %d",
				&c[0], &c[1], &c[2], &c[3], &c[4], &c[5], &c[6], &c[7], &c[8],
				&c[9], err),
			 11);
	assert_int_equal(waitpid(p->pid, &st, 0), p->pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

/* ---- axpy as a VPPU call ------------------------------------------------ */

static void axpy_args(void *ctx, uint64_t n, uint8_t *a)
{
	(void)ctx;
	ql_rpc_put_f32(a, 0.5f);
	for (int i = 0; i < 8; i++)
		ql_rpc_put_f32(a + 4 + 4 * i, (float)((n + (uint64_t)i) % 97));
	ql_rpc_put_i32(a + 36, (int32_t)(n % 1000));
}

static int axpy_check(void *ctx, uint64_t n, int32_t status, const uint8_t *r, uint32_t len)
{
	uint8_t a[40];
	float x[8], y;
	int32_t k;

	(void)ctx;
	axpy_args(NULL, n, a);
	for (int i = 0; i < 8; i++)
		x[i] = ql_rpc_get_f32(a + 4 + 4 * i);
	axpy(0.5f, x, (int32_t)(n % 1000), &y, &k);
	return status != 0 || len != 8 || ql_rpc_get_f32(r) != y || ql_rpc_get_i32(r + 4) != k;
}

static void run_calls(struct peer *p, uint64_t *total)
{
	struct ql_vppu_call call;
	struct ql_vppu_report rep;
	struct ql_vppu_config cfg = { .window = 8, .count = 20000, .timeout_ns = 5000000000ull };
	struct ql_vppu_call ax = {
		.function = "axpy", .arg_len = 40, .make_args = axpy_args, .check = axpy_check
	};
	uint64_t seed = 7;

	ql_demo_parity_call(&call, &seed);
	assert_int_equal(ql_vppu_run(p->cl, &call, &cfg, &rep), 0);
	assert_int_equal(rep.transport_error, 0);
	assert_int_equal(rep.ok, 20000);
	assert_int_equal(rep.wrong + rep.unexpected + rep.lost + rep.protocol_errors, 0);
	/* paced, on the same connection */
	cfg = (struct ql_vppu_config){ .window = 16, .rate_hz = 100000, .count = 5000 };
	assert_int_equal(ql_vppu_run(p->cl, &call, &cfg, &rep), 0);
	assert_int_equal(rep.ok, 5000);
	assert_int_equal(rep.lost, 0);
	cfg = (struct ql_vppu_config){ .window = 4, .count = 3000, .timeout_ns = 5000000000ull };
	assert_int_equal(ql_vppu_run(p->cl, &ax, &cfg, &rep), 0);
	assert_int_equal(rep.ok, 3000);
	assert_int_equal(rep.wrong + rep.lost + rep.protocol_errors + rep.handler_errors, 0);
	*total = 28000;
}

static void test_calls_checked_and_counted(void **state)
{
	struct peer p;
	uint64_t c[10], total;
	int err;

	(void)state;
	connect_peer(&p, QL_GPU_MODE_EMULATE);
	run_calls(&p, &total);
	stop_peer(&p, c, &err);
	assert_int_equal(c[0], total); /* requests */
	assert_int_equal(c[1], total); /* SENDs completed */
	assert_int_equal(c[2], total); /* ok */
	assert_int_equal(c[9], total); /* handled */
	assert_int_equal(err, 0);
	close_peer(&p);
}

/* ---- hostile requests ------------------------------------------------------ */

/* Send len bytes of msg as one request and return the response's status
 * (and check request_id came back). */
/* The dispatcher of this process, when the test serves itself: waits
 * progress it (caller progress runs its body in them; a thread's run
 * needs nothing). */
static struct ql_gpu_dispatcher *self_served;

static int32_t call_raw(struct ql_ring_client *cl, const uint8_t *msg, uint32_t len, uint32_t rid,
			uint32_t *result_len)
{
	struct ql_ring_response r;
	struct ql_rpc_response h = { 0 };
	uint64_t t0 = ql_clock_ns();
	int n;

	assert_int_equal(ql_ring_client_send(cl, msg, len), 0);
	while ((n = ql_ring_client_poll(cl, &r, 1)) == 0) {
		if (self_served)
			assert_true(ql_gpu_dispatcher_progress(self_served) >= 0);
		assert_true(ql_clock_ns() - t0 < 5000000000ull);
	}
	assert_int_equal(n, 1);
	assert_int_equal(ql_rpc_response_parse(r.msg, r.len, &h, NULL), 0);
	if (len >= QL_RPC_HEADER_SIZE)
		assert_int_equal(h.request_id, rid);
	*result_len = h.result_len;
	assert_int_equal(ql_ring_client_release(cl, &r), 0);
	return h.status;
}

static uint32_t build(uint8_t *m, uint32_t id, uint32_t arg_len, uint32_t rid)
{
	struct ql_rpc_header h = { QL_RPC_MAGIC_REQUEST, id, arg_len, rid, 42 };

	ql_rpc_header_encode(m, &h);
	memset(m + QL_RPC_HEADER_SIZE, 0x11, arg_len);
	return QL_RPC_HEADER_SIZE + arg_len;
}

static void test_hostile_requests(void **state)
{
	struct peer p;
	uint8_t m[128];
	uint64_t c[10];
	uint32_t n, rl;
	int err;

	(void)state;
	connect_peer(&p, QL_GPU_MODE_EMULATE);
	n = build(m, ql_rpc_fnv1a("echo"), 4, 1);
	assert_int_equal(call_raw(p.cl, m, 10, 1, &rl), QL_RPC_E_SHORT);
	n = build(m, ql_rpc_fnv1a("echo"), 4, 2);
	m[3] = 0;
	assert_int_equal(call_raw(p.cl, m, n, 2, &rl), QL_RPC_E_BAD_MAGIC);
	n = build(m, ql_rpc_fnv1a("echo"), 4, 3);
	ql_rpc_put_u32(m + 8, 5);
	assert_int_equal(call_raw(p.cl, m, n, 3, &rl), QL_RPC_E_BAD_LENGTH);
	ql_rpc_put_u32(m + 8, 0xfffffff0u);
	assert_int_equal(call_raw(p.cl, m, n, 3, &rl), QL_RPC_E_BAD_LENGTH);
	n = build(m, 0x12345678u, 4, 4);
	assert_int_equal(call_raw(p.cl, m, n, 4, &rl), QL_RPC_E_UNKNOWN_FUNCTION);
	n = build(m, ql_rpc_fnv1a("qlink_parity"), 33, 5);
	assert_int_equal(call_raw(p.cl, m, n, 5, &rl), QL_RPC_E_ARGS_MISMATCH);
	n = build(m, ql_rpc_fnv1a("axpy"), 40, 6);
	ql_rpc_put_i32(m + QL_RPC_HEADER_SIZE + 36, -3);
	assert_int_equal(call_raw(p.cl, m, n, 6, &rl), 5);
	assert_int_equal(rl, 0);
	/* and a good one after all that */
	n = build(m, ql_rpc_fnv1a("echo"), 80, 7);
	assert_int_equal(call_raw(p.cl, m, n, 7, &rl), 0);
	assert_int_equal(rl, 80);
	stop_peer(&p, c, &err);
	assert_int_equal(c[0], 8);
	assert_int_equal(c[2], 1); /* ok */
	assert_int_equal(c[3], 1); /* handler status */
	assert_int_equal(c[4], 1); /* short */
	assert_int_equal(c[5], 1); /* bad magic */
	assert_int_equal(c[6], 2); /* bad length */
	assert_int_equal(c[7], 1); /* unknown */
	assert_int_equal(c[8], 1); /* args */
	assert_int_equal(c[1], 8); /* every one answered */
	assert_int_equal(err, 0);
	close_peer(&p);
}

/* ---- the host's control, in one process --------------------------------- */

static void echo_once(struct ql_ring_client *cl, uint32_t rid)
{
	uint8_t m[64];
	uint32_t rl, n = build(m, ql_rpc_fnv1a("echo"), 8, rid);

	assert_int_equal(call_raw(cl, m, n, rid, &rl), 0);
	assert_int_equal(rl, 8);
}

static void test_start_stop_restart(void **state)
{
	struct ql_gpu_config gc = { .mode = QL_GPU_MODE_EMULATE, .num_slots = 8, .cpu = -1 };
	struct ql_device *dev;
	struct ql_gpu_dispatcher *d;
	struct ql_ring_client *cl;
	struct ql_conn_params sp, cp;
	struct ql_gpu_stats st;
	char uri[64];

	(void)state;
	snprintf(uri, sizeof(uri), "soft+shm://gpu-one%d", (int)getpid());
	assert_int_equal(ql_device_open(uri, &dev), 0);
	assert_int_equal(ql_gpu_dispatcher_create(dev, &gc, &d), 0);
	assert_int_equal(ql_gpu_dispatcher_mode(d), QL_GPU_MODE_EMULATE);
	assert_int_equal(register_all(d), 0);
	assert_int_equal(ql_gpu_dispatcher_register(d, ql_gpu_builtin_function("echo")), -EEXIST);
	assert_int_equal(ql_gpu_dispatcher_start(d), -ENOTCONN);
	assert_false(ql_gpu_dispatcher_is_running(d));
	assert_int_equal(ql_gpu_dispatcher_local_params(d, &sp), 0);
	assert_int_equal(ql_ring_client_create(dev, &sp, NULL, &cl), 0);
	assert_int_equal(ql_ring_client_local_params(cl, &cp), 0);
	assert_int_equal(ql_ring_client_connect(cl, &sp, NULL), 0);
	assert_int_equal(ql_gpu_dispatcher_connect(d, &cp, NULL), 0);

	self_served = d;
	assert_int_equal(ql_gpu_dispatcher_start(d), 0);
	assert_true(ql_gpu_dispatcher_is_running(d));
	if (getenv("QLINK_PROGRESS") && !strcmp(getenv("QLINK_PROGRESS"), "caller"))
		assert_true(ql_gpu_dispatcher_caller(d));
	assert_int_equal(ql_gpu_dispatcher_start(d), -EBUSY);
	assert_int_equal(
		ql_gpu_dispatcher_register(
			d, &QL_GPU_RAW_FUNCTION("x", ql_gpu_builtin_function("echo")->fn, NULL)),
		-EBUSY);
	for (uint32_t i = 0; i < 20; i++)
		echo_once(cl, i); /* more than the ring's 8 slots: it wraps */
	/* the counters, read while it runs */
	assert_int_equal(ql_gpu_dispatcher_stats(d, &st), 0);
	assert_int_equal(st.requests, 20);
	assert_int_equal(st.ok, 20);
	assert_int_equal(ql_gpu_dispatcher_stop(d), 0);
	assert_false(ql_gpu_dispatcher_is_running(d));
	assert_int_equal(ql_gpu_dispatcher_stop(d), 0); /* stopped already: fine */

	/* a request made while stopped waits in its slot, answered after the
	 * restart; the ring's progress was kept */
	{
		uint8_t m[64];
		struct ql_ring_response r;
		uint32_t n = build(m, ql_rpc_fnv1a("echo"), 8, 99);

		assert_int_equal(ql_ring_client_send(cl, m, n), 0);
		usleep(20000);
		assert_int_equal(ql_ring_client_poll(cl, &r, 1), 0);
		assert_int_equal(ql_gpu_dispatcher_start(d), 0);
		for (uint64_t t0 = ql_clock_ns(); ql_ring_client_poll(cl, &r, 1) == 0;) {
			assert_true(ql_gpu_dispatcher_progress(d) >= 0);
			assert_true(ql_clock_ns() - t0 < 5000000000ull);
		}
		assert_int_equal(ql_rpc_get_u32(r.msg + 12), 99);
		assert_int_equal(ql_ring_client_release(cl, &r), 0);
	}
	echo_once(cl, 100);
	assert_int_equal(ql_gpu_dispatcher_stop(d), 0);
	assert_int_equal(ql_gpu_dispatcher_stats(d, &st), 0);
	assert_int_equal(st.requests, 22);
	assert_int_equal(st.completed, 22);
	assert_int_equal(ql_gpu_dispatcher_error(d), 0);
	self_served = NULL;
	ql_gpu_dispatcher_destroy(d); /* stops it if it ran */
	ql_ring_client_destroy(cl);
	assert_int_equal(ql_device_close(dev), 0);
}

/* progress = CALLER: no thread runs the body; a request waits in its slot
 * until the program calls ql_gpu_dispatcher_progress, which serves it (and
 * the soft NIC's engine, in the doorbell and the CQ poll) in the caller. */
static void test_caller_progress(void **state)
{
	struct ql_gpu_config gc = { .mode = QL_GPU_MODE_EMULATE,
				    .num_slots = 8,
				    .cpu = -1,
				    .progress = QL_GPU_PROGRESS_CALLER };
	struct ql_device *dev;
	struct ql_gpu_dispatcher *d;
	struct ql_ring_client *cl;
	struct ql_conn_params sp, cp;
	struct ql_ring_response r;
	struct ql_gpu_stats st;
	uint8_t m[64];
	uint32_t n = build(m, ql_rpc_fnv1a("echo"), 8, 7);
	int got = 0;

	(void)state;
	assert_int_equal(ql_device_open("soft://loop?progress=caller", &dev), 0);
	assert_int_equal(ql_gpu_dispatcher_create(dev, &gc, &d), 0);
	assert_int_equal(register_all(d), 0);
	assert_int_equal(ql_gpu_dispatcher_local_params(d, &sp), 0);
	assert_int_equal(ql_ring_client_create(dev, &sp, NULL, &cl), 0);
	assert_int_equal(ql_ring_client_local_params(cl, &cp), 0);
	assert_int_equal(ql_ring_client_connect(cl, &sp, NULL), 0);
	assert_int_equal(ql_gpu_dispatcher_connect(d, &cp, NULL), 0);
	assert_false(ql_gpu_dispatcher_caller(d)); /* not started */
	assert_int_equal(ql_gpu_dispatcher_start(d), 0);
	assert_true(ql_gpu_dispatcher_caller(d));
	assert_true(ql_gpu_dispatcher_is_running(d));
	assert_int_equal(ql_ring_client_send(cl, m, n), 0);
	usleep(20000);
	assert_int_equal(ql_ring_client_poll(cl, &r, 1), 0); /* nobody ran it */
	assert_int_equal(ql_gpu_dispatcher_stats(d, &st), 0);
	assert_int_equal(st.requests, 0);
	/* one turn takes the request, answers it and (the soft NIC's engine
	 * run by the doorbell) sends the response */
	assert_true(ql_gpu_dispatcher_progress(d) > 0);
	for (int i = 0; i < 1000 && !got; i++) {
		got = ql_ring_client_poll(cl, &r, 1);
		if (!got)
			assert_true(ql_gpu_dispatcher_progress(d) >= 0);
	}
	assert_int_equal(got, 1);
	assert_int_equal(ql_rpc_get_u32(r.msg + 12), 7);
	assert_int_equal(ql_ring_client_release(cl, &r), 0);
	assert_int_equal(ql_gpu_dispatcher_stop(d), 0);
	assert_false(ql_gpu_dispatcher_is_running(d));
	assert_false(ql_gpu_dispatcher_caller(d));
	assert_int_equal(ql_gpu_dispatcher_stats(d, &st), 0);
	assert_int_equal(st.requests, 1);
	assert_int_equal(st.completed, 1); /* stop took its completion */
	ql_gpu_dispatcher_destroy(d);
	ql_ring_client_destroy(cl);
	assert_int_equal(ql_device_close(dev), 0);
}

static void test_bad_config(void **state)
{
	struct ql_gpu_config gc = { .mode = QL_GPU_MODE_EMULATE, .num_slots = 3 };
	struct ql_gpu_dispatcher *d = NULL;
	struct ql_device *dev;
	enum ql_gpu_mode m;

	(void)state;
	assert_int_equal(ql_device_open("soft://loop", &dev), 0);
	assert_int_equal(ql_gpu_dispatcher_create(dev, &gc, &d), -EINVAL);
	gc.num_slots = 8;
	gc.max_functions = 5000;
	assert_int_equal(ql_gpu_dispatcher_create(dev, &gc, &d), -EINVAL);
	gc.max_functions = 0;
	gc.progress = (enum ql_gpu_progress)7;
	assert_int_equal(ql_gpu_dispatcher_create(dev, &gc, &d), -EINVAL);
	assert_null(d);
	assert_int_equal(ql_device_close(dev), 0);
	assert_int_equal(ql_gpu_mode_parse("emulate", &m), 0);
	assert_int_equal(m, QL_GPU_MODE_EMULATE);
	assert_int_equal(ql_gpu_mode_parse("gpu", &m), -EINVAL);
	assert_string_equal(ql_gpu_mode_str(QL_GPU_MODE_DEVICE), "device");
	assert_null(ql_gpu_builtin_function("nope"));
}

/* ---- the dispatcher process killed ------------------------------------------ */

static void test_server_killed(void **state)
{
	struct peer p;
	struct ql_vppu_call call;
	struct ql_vppu_report rep;
	struct ql_vppu_config cfg = { .window = 8,
				      .duration_ns = 3000000000ull,
				      .timeout_ns = 500000000ull };
	uint64_t seed = 9, t0;
	int st;

	(void)state;
	connect_peer(&p, QL_GPU_MODE_EMULATE);
	ql_demo_parity_call(&call, &seed);
	{
		struct ql_vppu_config warm = { .window = 8, .count = 1000 };

		assert_int_equal(ql_vppu_run(p.cl, &call, &warm, &rep), 0);
		assert_int_equal(rep.ok, 1000);
	}
	if (fork() == 0) {
		usleep(300000);
		kill(p.pid, SIGKILL);
		_exit(0);
	}
	t0 = ql_clock_ns();
	assert_int_equal(ql_vppu_run(p.cl, &call, &cfg, &rep), 0);
	assert_true(ql_clock_ns() - t0 < 10ull * 1000000000ull);
	assert_true(rep.transport_error != 0 || rep.lost > 0);
	assert_int_equal(rep.wrong, 0);
	assert_int_equal(waitpid(p.pid, &st, 0), p.pid);
	assert_true(WIFSIGNALED(st));
	while (wait(NULL) > 0)
		;
	close_peer(&p);
}

/* ---- the hot path ---------------------------------------------------------- */

/* One process, soft://loop, the engine polled by hand: request by the ring
 * client (its WRITEs execute inline), one body turn (checks, handler, the
 * SEND WQE, the doorbell), engine polls until the SEND ran, the response
 * polled and its buffer re-posted. 10 000 times, with no allocation, lock
 * or system call: the emulation's request path on the real mlx5 queues. */
struct hp {
	struct ql_device *dev;
	struct ql_gpu_dispatcher *d;
	struct ql_ring_client *cl;
	uint8_t msg[64];
	uint32_t len;
	int count; /* requests per hp_loop */
};

static int hp_loop(void *arg)
{
	struct hp *h = arg;

	for (int i = 0; i < h->count; i++) {
		struct ql_ring_response r;
		int n = 0, turns;

		if (ql_ring_client_send(h->cl, h->msg, h->len))
			return -1;
		for (turns = 0; turns < 1000000; turns++) {
			if (ql__gpu_dispatcher_step(h->d) < 0)
				return -1;
			ql__soft_mlx5_engine_poll(h->dev);
			n = ql_ring_client_poll(h->cl, &r, 1);
			if (n)
				break;
		}
		if (n != 1 || r.len != QL_RPC_RESPONSE_SIZE + QL_DEMO_PARITY_RESULT_LEN ||
		    ql_rpc_get_u32(r.msg + 4) != 0 || ql_ring_client_release(h->cl, &r))
			return -1;
	}
	return 0;
}

/* The dispatcher of gc on h->dev (soft://loop, its engine polled by
 * hand) and a ring client connected to it; h->msg a qlink_parity call. */
static void hp_open(struct hp *h, const struct ql_gpu_config *gc)
{
	struct ql_conn_params sp, cp;
	struct ql_rpc_out o;

	assert_int_equal(ql__soft_mlx5_engine_manual(h->dev), 0);
	assert_int_equal(ql_gpu_dispatcher_create(h->dev, gc, &h->d), 0);
	assert_int_equal(register_all(h->d), 0);
	assert_int_equal(ql_gpu_dispatcher_local_params(h->d, &sp), 0);
	assert_int_equal(ql_ring_client_create(h->dev, &sp, NULL, &h->cl), 0);
	assert_int_equal(ql_ring_client_local_params(h->cl, &cp), 0);
	assert_int_equal(ql_ring_client_connect(h->cl, &sp, NULL), 0);
	assert_int_equal(ql_gpu_dispatcher_connect(h->d, &cp, NULL), 0);
	ql_rpc_request_begin(&o, h->msg, sizeof(h->msg));
	ql_demo_parity_syndrome(3, 0, ql_rpc_out_reserve(&o, QL_DEMO_PARITY_ARG_LEN));
	h->len = (uint32_t)ql_rpc_request_finish(&o, ql_rpc_fnv1a("qlink_parity"), 1, 0);
}

static void test_hot_path(void **state)
{
	struct ql_gpu_config gc = { .mode = QL_GPU_MODE_EMULATE, .num_slots = 16, .cpu = -1 };
	struct ql_gpu_stats st;
	struct hp h;
	char why[256];

	(void)state;
	memset(&h, 0, sizeof(h));
	h.count = 10000;
	assert_int_equal(ql_device_open("soft://loop", &h.dev), 0);
	hp_open(&h, &gc);
	if (hp_check(hp_loop, &h, why, sizeof(why)))
		fail_msg("%s", why);
	assert_int_equal(ql_gpu_dispatcher_stats(h.d, &st), 0);
	/* the parent ran it too where the interposition works (not under
	 * ASan: then only the seccomp child did) */
	if (hp_available())
		assert_true(st.ok >= 10000);
	assert_int_equal(st.ok, st.requests);
	ql_ring_client_destroy(h.cl);
	ql_gpu_dispatcher_destroy(h.d);
	assert_int_equal(ql_device_close(h.dev), 0);
}

/* ---- the channel in GPU memory ------------------------------------------------- */

static void test_gpu_memory(void **state)
{
	struct ql_gpu_config gc = {
		.mode = QL_GPU_MODE_EMULATE, .num_slots = 16, .cpu = -1, .memory = QL_MEM_GPU
	};
	const struct ql__cuda_drv *drv;
	struct ql_gpu_stats st;
	struct hp h;

	(void)state;
	memset(&h, 0, sizeof(h));
	h.count = 200;
	assert_int_equal(ql_device_open("soft://loop", &h.dev), 0);
	/* no CUDA driver (this CI): refused with the reason, nothing left */
	if (ql__cuda_drv_get(&drv)) {
		assert_int_equal(ql_gpu_dispatcher_create(h.dev, &gc, &h.d), -ENODEV);
		expect_detail("QL_MEM_GPU: ");
		assert_null(h.d);
	}
	/* a stand-in driver: the ring and the response buffers are the soft
	 * NIC's memory mapped into the GPU, and the emulation serves them */
	cu_fake_install();
	hp_open(&h, &gc);
	assert_int_equal(cu.host_regs, 2); /* the ring, the response buffers */
	assert_int_equal(cu.allocs, 0);
	assert_int_equal(hp_loop(&h), 0);
	assert_int_equal(ql_gpu_dispatcher_stats(h.d, &st), 0);
	assert_int_equal(st.ok, 200);
	ql_ring_client_destroy(h.cl);
	ql_gpu_dispatcher_destroy(h.d);
	assert_int_equal(cu.host_regs, 0); /* unmapped before freed */
	assert_int_equal(ql_device_close(h.dev), 0);
	ql__cuda_drv_override(NULL);
}

/* ---- on a GPU ------------------------------------------------------------------ */

static void test_device(void **state)
{
	char why[256];
	struct peer p;
	uint64_t c[10], total;
	int err;

	(void)state;
	if (!ql_gpu_available(why, sizeof(why))) {
		printf("SKIP: no GPU run: %s\n", why);
		fflush(stdout);
		skip();
	}
	connect_peer(&p, QL_GPU_MODE_DEVICE);
	run_calls(&p, &total);
	stop_peer(&p, c, &err);
	assert_int_equal(c[0], total);
	assert_int_equal(c[1], total);
	assert_int_equal(c[2], total);
	assert_int_equal(err, 0);
	close_peer(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_config),
		cmocka_unit_test(test_start_stop_restart),
		cmocka_unit_test(test_caller_progress),
		cmocka_unit_test(test_calls_checked_and_counted),
		cmocka_unit_test(test_hostile_requests),
		cmocka_unit_test(test_server_killed),
		cmocka_unit_test(test_hot_path),
		cmocka_unit_test(test_gpu_memory),
		cmocka_unit_test(test_device),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
