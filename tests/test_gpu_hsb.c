/* SPDX-License-Identifier: MIT */
/*
 * The GPU dispatcher on the hsb transport (docs/gpu.md "The hsb
 * transport"), its body run by the host emulation and its receive and
 * send queues driven through qlink/mlx5.h on the soft NIC's mlx5 engine:
 *
 * - across processes over soft+shm: a dispatcher process and the
 *   unmodified hsb client (the VPPU on ql_vppu_client_hsb), parameters
 *   exchanged as text: every answer checked, closed loop, the
 *   dispatcher's counters matching;
 * - the same requests (valid ones, each hostile kind, a result that does
 *   not fit resp_size, and random garbage) sent to the CPU hsb channel
 *   under the daemon and to the GPU dispatcher: the responses are equal
 *   byte for byte, and both drop the same frames unanswered (an immediate
 *   past the pages, a frame longer than a page) and count them; with
 *   bad_requests DROP both leave the same refused requests unanswered;
 * - start/stop/restart keeps the receive queue's progress;
 * - on a GPU (CUDA build and a device): the same calls through the
 *   persistent kernel, byte for byte; skipped, with the reason, elsewhere;
 * - the hot path: a frame's turn (receive CQE, checks, handler, SEND WQE,
 *   doorbell, receive WQE re-posted) neither allocates nor locks nor
 *   enters the kernel (tests/hotpath.h, both proofs).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
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
#include <qlink/daemon.h>
#include <qlink/error.h>
#include <qlink/gpu.h>
#include <qlink/hsb.h>
#include <qlink/rpc.h>
#include <qlink/vppu.h>

#include "hotpath.h"
#include "transport/rendezvous.h" /* libqlink.a: parameters over pipes, as qlink bench */

int ql__soft_mlx5_engine_manual(struct ql_device *d);
int ql__soft_mlx5_engine_poll(struct ql_device *d);
int ql__gpu_dispatcher_step(struct ql_gpu_dispatcher *d);

#define PAGES 16u
#define PAGE_SIZE 384u
#define FRAME (PAGE_SIZE - QL_HSB_METADATA_SIZE) /* the default frame_len */
#define RESP_SIZE 128u
#define TIMEOUT_NS 5000000000ull

static const struct ql_gpu_config gpu_cfg = {
	.mode = QL_GPU_MODE_EMULATE,
	.cpu = -1,
	.transport = QL_GPU_TRANSPORT_HSB,
	.hsb = { .num_pages = PAGES, .page_size = PAGE_SIZE, .resp_size = RESP_SIZE },
};

static int write_line(int fd, const char *s)
{
	return ql__write_all(fd, s, strlen(s)) || ql__write_all(fd, "\n", 1) ? -1 : 0;
}

static int register_gpu(struct ql_gpu_dispatcher *d)
{
	int ret = ql_gpu_dispatcher_register(d, ql_gpu_builtin_function("qlink_parity"));

	if (!ret)
		ret = ql_gpu_dispatcher_register(d, ql_gpu_builtin_function("echo"));
	return ret;
}

/* ---- across processes ------------------------------------------------------ */

static int server(int rfd, int wfd)
{
	struct ql_device *dev;
	struct ql_gpu_dispatcher *d;
	struct ql_conn_params sp, cp;
	struct ql_gpu_stats st;
	char uri[64], line[256];

	snprintf(uri, sizeof(uri), "soft+shm://gpuhsb-srv%d", (int)getpid());
	if (ql_device_open(uri, &dev))
		return 10;
	if (ql_gpu_dispatcher_create(dev, &gpu_cfg, &d)) {
		fprintf(stderr, "server: %s\n", ql_error_detail());
		return 11;
	}
	if (register_gpu(d) || ql_gpu_dispatcher_local_params(d, &sp))
		return 12;
	if (ql__send_params(wfd, &sp) || ql__recv_params(rfd, &cp))
		return 13;
	if (ql_gpu_dispatcher_connect(d, &cp, NULL) || ql_gpu_dispatcher_start(d))
		return 14;
	/* UC: a frame that comes before the QP is connected and its receive
	 * WQEs are with the NIC is lost, so the QCS starts when told; the
	 * pause lets the soft NIC's engine take the WQEs */
	usleep(20000);
	if (write_line(wfd, "ready"))
		return 17;
	/* (caller progress: the body runs in this wait) */
	if (ql_gpu_dispatcher_serve_until(d, rfd) != 1 ||
	    ql__read_line(rfd, line, sizeof(line)) < 0)
		return 15;
	if (ql_gpu_dispatcher_stop(d))
		return 16;
	ql_gpu_dispatcher_stats(d, &st);
	snprintf(line, sizeof(line), "%" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %d",
		 st.requests, st.ok, st.completed, st.hsb_bad_imm + st.hsb_bad_len,
		 ql_gpu_dispatcher_error(d));
	write_line(wfd, line);
	ql_gpu_dispatcher_destroy(d);
	ql_device_close(dev);
	return 0;
}

static void test_vppu_across_processes(void **state)
{
	struct ql_hsb_client_config ccfg = { .recv_buffers = 32, .recv_size = RESP_SIZE };
	struct ql_vppu_config vcfg = { .window = 8, .count = 20000, .timeout_ns = TIMEOUT_NS };
	struct ql_conn_params sp, cp;
	struct ql_hsb_params hp;
	struct ql_hsb_client *cl;
	struct ql_vppu_client vc;
	struct ql_vppu_call call;
	struct ql_vppu_report rep;
	struct ql_device *dev;
	uint64_t req, ok, done, dropped, seed = 11;
	int a[2], b[2], err, st;
	char uri[64], line[256];
	pid_t pid;

	(void)state;
	assert_int_equal(pipe(a), 0);
	assert_int_equal(pipe(b), 0);
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(a[1]);
		close(b[0]);
		alarm(60);
		_exit(server(a[0], b[1]));
	}
	close(a[0]);
	close(b[1]);
	assert_int_equal(ql__recv_params(b[0], &sp), 0);
	assert_int_equal(ql_hsb_params_from_conn(&sp, &hp), 0);
	assert_int_equal(hp.num_pages, PAGES);
	assert_int_equal(hp.page_size, PAGE_SIZE);
	assert_int_equal(hp.resp_size, RESP_SIZE);
	assert_true(hp.page_addr == 0);
	snprintf(uri, sizeof(uri), "soft+shm://gpuhsb-cli%d", (int)getpid());
	assert_int_equal(ql_device_open(uri, &dev), 0);
	assert_int_equal(ql_hsb_client_create(dev, &ccfg, &cl), 0);
	assert_int_equal(ql_hsb_client_local_params(cl, &cp), 0);
	assert_int_equal(ql_hsb_client_connect(cl, &hp, NULL), 0);
	assert_int_equal(ql__send_params(a[1], &cp), 0);
	assert_true(ql__read_line(b[0], line, sizeof(line)) > 0);
	assert_string_equal(line, "ready");

	ql_vppu_client_hsb(&vc, cl);
	ql_demo_parity_call(&call, &seed);
	assert_int_equal(ql_vppu_run_client(&vc, &call, &vcfg, &rep), 0);
	if (rep.ok != 20000)
		fprintf(stderr,
			"vppu: sent %" PRIu64 " ok %" PRIu64 " wrong %" PRIu64 " lost %" PRIu64
			" unexpected %" PRIu64 " proto %" PRIu64 " terr %d\n",
			rep.sent, rep.ok, rep.wrong, rep.lost, rep.unexpected, rep.protocol_errors,
			rep.transport_error);
	assert_int_equal(rep.transport_error, 0);
	assert_int_equal(rep.ok, 20000);
	assert_int_equal(rep.wrong + rep.unexpected + rep.lost + rep.protocol_errors, 0);
	/* the whole window of pages in flight */
	vcfg.window = PAGES;
	vcfg.count = 5000;
	assert_int_equal(ql_vppu_run_client(&vc, &call, &vcfg, &rep), 0);
	assert_int_equal(rep.ok, 5000);
	assert_int_equal(rep.wrong + rep.lost + rep.protocol_errors, 0);

	assert_int_equal(write_line(a[1], "stop"), 0);
	assert_true(ql__read_line(b[0], line, sizeof(line)) > 0);
	assert_int_equal(sscanf(line, "%" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %d", &req,
				&ok, &done, &dropped, &err),
			 5);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	assert_int_equal(req, 25000);
	assert_int_equal(ok, 25000);
	assert_int_equal(done, 25000);
	assert_int_equal(dropped, 0);
	assert_int_equal(err, 0);
	ql_hsb_client_destroy(cl);
	assert_int_equal(ql_device_close(dev), 0);
	close(a[1]);
	close(b[0]);
}

/* ---- the CPU hsb channel and the GPU dispatcher, side by side ------------ */

static int32_t cpu_echo(struct ql_rpc_in *in, struct ql_rpc_out *out, void *ctx)
{
	size_t n = ql_rpc_in_left(in);

	(void)ctx;
	ql_rpc_write_bytes(out, ql_rpc_in_view(in, n), n);
	return 0;
}

struct pair {
	struct ql_device *dev;
	/* the CPU side: channel, daemon (polled here), its client */
	struct ql_channel *ch;
	struct ql_daemon *dm;
	struct ql_hsb_client *ccl;
	/* the GPU side: dispatcher (its emulation thread), its client */
	struct ql_gpu_dispatcher *g;
	struct ql_hsb_client *gcl;
};

static void connect_client(struct ql_device *dev, const struct ql_hsb_params *hp,
			   struct ql_hsb_client **cl, struct ql_conn_params *cp)
{
	struct ql_hsb_client_config cc = { .recv_buffers = 32, .recv_size = RESP_SIZE };

	assert_int_equal(ql_hsb_client_create(dev, &cc, cl), 0);
	assert_int_equal(ql_hsb_client_local_params(*cl, cp), 0);
	assert_int_equal(ql_hsb_client_connect(*cl, hp, NULL), 0);
}

static void pair_open_mode(struct pair *p, int drop, enum ql_gpu_mode mode)
{
	struct ql_hsb_channel_config cc = { .num_pages = PAGES,
					    .page_size = PAGE_SIZE,
					    .resp_size = RESP_SIZE };
	struct ql_daemon_config dc = { .cpu = -1,
				       .bad_requests = drop ? QL_BAD_REQUEST_DROP :
							      QL_BAD_REQUEST_ANSWER };
	struct ql_gpu_config gc = gpu_cfg;
	struct ql_rpc_function echo = QL_RPC_RAW_FUNCTION("echo", cpu_echo, NULL);
	struct ql_hsb_params hp;
	struct ql_conn_params cp;

	memset(p, 0, sizeof(*p));
	assert_int_equal(ql_device_open("soft://loop", &p->dev), 0);
	assert_int_equal(ql_hsb_channel_create(p->dev, &cc, &p->ch), 0);
	assert_int_equal(ql_daemon_create(&dc, p->ch, &p->dm), 0);
	assert_int_equal(ql_daemon_register(p->dm, ql_demo_parity_function()), 0);
	assert_int_equal(ql_daemon_register(p->dm, &echo), 0);
	assert_int_equal(ql_hsb_channel_local_params(p->ch, &hp), 0);
	connect_client(p->dev, &hp, &p->ccl, &cp);
	assert_int_equal(ql_hsb_channel_connect(p->ch, &cp, NULL), 0);

	gc.bad_requests = drop ? QL_BAD_REQUEST_DROP : QL_BAD_REQUEST_ANSWER;
	gc.mode = mode;
	assert_int_equal(ql_gpu_dispatcher_create(p->dev, &gc, &p->g), 0);
	assert_int_equal(register_gpu(p->g), 0);
	assert_int_equal(ql_gpu_dispatcher_hsb_params(p->g, &hp), 0);
	assert_int_equal(hp.num_pages, PAGES);
	assert_int_equal(hp.resp_size, RESP_SIZE);
	connect_client(p->dev, &hp, &p->gcl, &cp);
	assert_int_equal(ql_gpu_dispatcher_connect(p->g, &cp, NULL), 0);
	assert_int_equal(ql_gpu_dispatcher_start(p->g), 0);
	assert_true(ql_gpu_dispatcher_is_running(p->g));
}

static void pair_open(struct pair *p, int drop)
{
	pair_open_mode(p, drop, QL_GPU_MODE_EMULATE);
}

static void pair_close(struct pair *p)
{
	assert_int_equal(ql_gpu_dispatcher_stop(p->g), 0);
	assert_int_equal(ql_gpu_dispatcher_error(p->g), 0);
	ql_gpu_dispatcher_destroy(p->g);
	ql_hsb_client_destroy(p->gcl);
	ql_daemon_destroy(p->dm);
	ql_channel_destroy(p->ch);
	ql_hsb_client_destroy(p->ccl);
	assert_int_equal(ql_device_close(p->dev), 0);
}

/* One response on cl (the daemon polled meanwhile when dm, the GPU
 * dispatcher progressed when g: caller progress runs its body here): its
 * length copied into out, or -ETIMEDOUT after ms. */
static int wait_one(struct ql_hsb_client *cl, struct ql_daemon *dm, struct ql_gpu_dispatcher *g,
		    uint8_t *out, uint64_t ms)
{
	uint64_t end = ql_clock_ns() + ms * 1000000ull;
	struct ql_ring_response r;

	do {
		int n;

		if (dm)
			assert_true(ql_daemon_poll(dm) >= 0);
		if (g)
			assert_true(ql_gpu_dispatcher_progress(g) >= 0);
		n = ql_hsb_client_poll(cl, &r, 1);
		assert_true(n >= 0);
		if (n == 1) {
			assert_true(r.len <= RESP_SIZE);
			memcpy(out, r.msg, r.len);
			assert_int_equal(ql_hsb_client_release(cl, &r), 0);
			return (int)r.len;
		}
	} while (ql_clock_ns() < end);
	return -ETIMEDOUT;
}

/* msg to both: the responses must be equal byte for byte (or both
 * missing: the frame was dropped). Returns the length (-ETIMEDOUT). */
static int both_wait(struct pair *p, const uint8_t *msg, uint32_t len, uint64_t ms)
{
	uint8_t rc[RESP_SIZE], rg[RESP_SIZE];
	int nc, ng;

	assert_int_equal(ql_hsb_client_send(p->ccl, msg, len), 0);
	assert_int_equal(ql_hsb_client_send(p->gcl, msg, len), 0);
	nc = wait_one(p->ccl, p->dm, NULL, rc, ms);
	ng = wait_one(p->gcl, NULL, p->g, rg, ms);
	assert_int_equal(nc, ng);
	if (nc > 0)
		assert_memory_equal(rc, rg, (size_t)nc);
	if (nc < 0) {
		/* a frame sent and never answered */
		ql_hsb_client_forget(p->ccl, 1);
		ql_hsb_client_forget(p->gcl, 1);
	}
	return nc;
}

static int both(struct pair *p, const uint8_t *msg, uint32_t len)
{
	return both_wait(p, msg, len, 2000);
}

static uint32_t build(uint8_t *m, uint32_t magic, uint32_t fid, uint32_t arg_len, uint32_t id,
		      const uint8_t *args, uint32_t n)
{
	ql_rpc_put_u32(m, magic);
	ql_rpc_put_u32(m + 4, fid);
	ql_rpc_put_u32(m + 8, arg_len);
	ql_rpc_put_u32(m + 12, id);
	ql_rpc_put_u64(m + 16, 0x1122334455667788ull ^ id);
	if (n)
		memcpy(m + QL_RPC_HEADER_SIZE, args, n);
	return QL_RPC_HEADER_SIZE + n;
}

static int32_t status_of(const uint8_t *r)
{
	return ql_rpc_get_i32(r + 4);
}

static void test_same_as_cpu(void **state)
{
	const uint32_t req = QL_RPC_MAGIC_REQUEST, par = ql_rpc_fnv1a("qlink_parity"),
		       echo = ql_rpc_fnv1a("echo");
	uint8_t m[2 * PAGE_SIZE], a[PAGE_SIZE], r[RESP_SIZE]; /* m: a frame past a page too */
	struct ql_hsb_channel_stats cs;
	struct ql_gpu_stats gs;
	uint64_t x = 0x9e3779b97f4a7c15ull, end;
	struct pair p;
	uint32_t n;

	(void)state;
	pair_open(&p, 0);
	for (uint32_t i = 0; i < sizeof(a); i++)
		a[i] = (uint8_t)(i * 13 + 1);
	/* valid calls */
	n = build(m, req, par, 32, 1, a, 32);
	assert_int_equal(both(&p, m, n), QL_RPC_RESPONSE_SIZE + QL_DEMO_PARITY_RESULT_LEN);
	for (uint32_t k = 0; k <= RESP_SIZE - QL_RPC_RESPONSE_SIZE; k += 8) {
		n = build(m, req, echo, k, 2 + k, a, k);
		assert_int_equal(both(&p, m, n), (int)(QL_RPC_RESPONSE_SIZE + k));
	}
	/* a result past resp_size: RESULT_OVERFLOW, never a longer SEND */
	n = build(m, req, echo, RESP_SIZE, 200, a, RESP_SIZE);
	assert_int_equal(both(&p, m, n), QL_RPC_RESPONSE_SIZE);
	/* the hostile kinds, answered */
	{
		uint8_t rr[RESP_SIZE];

		n = build(m, 0xdeadbeefu, par, 32, 300, a, 32); /* bad magic */
		assert_int_equal(both(&p, m, n), QL_RPC_RESPONSE_SIZE);
		n = build(m, req, par, 200, 301, a, 32); /* arg_len past the frame */
		assert_int_equal(both(&p, m, n), QL_RPC_RESPONSE_SIZE);
		n = build(m, req, 0x12345678u, 0, 302, a, 0); /* unknown */
		assert_int_equal(both(&p, m, n), QL_RPC_RESPONSE_SIZE);
		n = build(m, req, par, 31, 303, a, 31); /* wrong size */
		assert_int_equal(both(&p, m, n), QL_RPC_RESPONSE_SIZE);
		/* 10 bytes: the frame is frame_len whatever was sent (the
		 * client pads it with zeros): arg_len 32 of zeros, served */
		n = build(m, req, par, 32, 304, a, 32);
		assert_int_equal(both(&p, m, 10), QL_RPC_RESPONSE_SIZE + QL_DEMO_PARITY_RESULT_LEN);
		/* arg_len one past the frame: BAD_LENGTH from both */
		n = build(m, req, par, FRAME - QL_RPC_HEADER_SIZE + 1, 305, a, 32);
		assert_int_equal(ql_hsb_client_send(p.gcl, m, n), 0);
		assert_int_equal(wait_one(p.gcl, NULL, p.g, rr, 2000), QL_RPC_RESPONSE_SIZE);
		assert_int_equal(status_of(rr), QL_RPC_E_BAD_LENGTH);
		assert_int_equal(both(&p, m, n), QL_RPC_RESPONSE_SIZE);
	}
	/* garbage: random lengths, random bytes, sometimes a valid header */
	for (int i = 0; i < 400; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		n = 1 + (uint32_t)(x % FRAME);
		for (uint32_t k = 0; k < n; k++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			m[k] = (uint8_t)x;
		}
		if (i % 3 == 0 && n >= QL_RPC_HEADER_SIZE) {
			ql_rpc_put_u32(m, req);
			ql_rpc_put_u32(m + 4, i % 2 ? par : echo);
			ql_rpc_put_u32(m + 8, (uint32_t)(x >> 40) % (n - QL_RPC_HEADER_SIZE + 2));
		}
		assert_true(both(&p, m, n) >= (int)QL_RPC_RESPONSE_SIZE);
	}
	/* dropped unanswered by both: an immediate past the pages (or all
	 * ones), a frame longer than a page */
	n = build(m, req, par, 32, 400, a, 32);
	assert_int_equal(ql_hsb_client_send_raw(p.ccl, 0, PAGES, m, n), 0);
	assert_int_equal(ql_hsb_client_send_raw(p.gcl, 0, PAGES, m, n), 0);
	assert_int_equal(ql_hsb_client_send_raw(p.ccl, 0, 0xffffffffu, m, n), 0);
	assert_int_equal(ql_hsb_client_send_raw(p.gcl, 0, 0xffffffffu, m, n), 0);
	assert_int_equal(ql_hsb_client_send_raw(p.ccl, 0, 0, m, PAGE_SIZE + 128), 0);
	assert_int_equal(ql_hsb_client_send_raw(p.gcl, 0, 0, m, PAGE_SIZE + 128), 0);
	assert_int_equal(wait_one(p.ccl, p.dm, NULL, r, 100), -ETIMEDOUT);
	assert_int_equal(wait_one(p.gcl, NULL, p.g, r, 100), -ETIMEDOUT);
	assert_int_equal(ql_hsb_channel_stats(p.ch, &cs), 0);
	end = ql_clock_ns() + TIMEOUT_NS;
	do {
		assert_true(ql_gpu_dispatcher_progress(p.g) >= 0);
		assert_int_equal(ql_gpu_dispatcher_stats(p.g, &gs), 0);
	} while (gs.hsb_bad_imm + gs.hsb_bad_len < 3 && ql_clock_ns() < end);
	assert_int_equal(cs.bad_imm, 2);
	assert_int_equal(cs.bad_len, 1);
	assert_int_equal(gs.hsb_bad_imm, cs.bad_imm);
	assert_int_equal(gs.hsb_bad_len, cs.bad_len);
	assert_int_equal(gs.hsb_recv_errors, 0);
	/* and both still serve, many laps of the pages after the drops */
	for (uint32_t i = 0; i < 3 * PAGES; i++) {
		n = build(m, req, echo, 16, 500 + i, a + i, 16);
		assert_int_equal(both(&p, m, n), QL_RPC_RESPONSE_SIZE + 16);
	}
	/* stop and start again: the receive queue's progress is kept */
	assert_int_equal(ql_gpu_dispatcher_stop(p.g), 0);
	assert_false(ql_gpu_dispatcher_is_running(p.g));
	assert_int_equal(ql_gpu_dispatcher_start(p.g), 0);
	for (uint32_t i = 0; i < 2 * PAGES; i++) {
		n = build(m, req, par, 32, 700 + i, a + i, 32);
		assert_int_equal(both(&p, m, n), QL_RPC_RESPONSE_SIZE + QL_DEMO_PARITY_RESULT_LEN);
	}
	assert_int_equal(ql_gpu_dispatcher_stats(p.g, &gs), 0);
	assert_int_equal(gs.requests, gs.ok + gs.handler_error + gs.err_short + gs.err_bad_magic +
					      gs.err_bad_length + gs.err_unknown_function +
					      gs.err_args + gs.err_result_overflow +
					      gs.err_internal + gs.err_result_overrun);
	/* a frame is frame_len bytes, never short */
	assert_int_equal(gs.err_short, 0);
	assert_true(gs.err_bad_length >= 2);
	assert_true(gs.err_bad_magic >= 1);
	assert_true(gs.err_result_overflow >= 1);
	pair_close(&p);
}

/* bad_requests DROP, as qlinkd serves hsb: the refused kinds are left
 * unanswered by both, a handler's own error and a valid call answered
 * alike, and the channel keeps serving after many drops. */
static void test_drop_same_as_cpu(void **state)
{
	const uint32_t req = QL_RPC_MAGIC_REQUEST, par = ql_rpc_fnv1a("qlink_parity"),
		       echo = ql_rpc_fnv1a("echo");
	uint8_t m[PAGE_SIZE], a[PAGE_SIZE];
	struct ql_daemon_stats ds;
	struct ql_gpu_stats gs;
	struct pair p;
	uint32_t n;

	(void)state;
	pair_open(&p, 1);
	memset(a, 0x5a, sizeof(a));
	n = build(m, 0xdeadbeefu, par, 32, 1, a, 32); /* bad magic */
	assert_int_equal(both_wait(&p, m, n, 50), -ETIMEDOUT);
	n = build(m, req, par, 200, 2, a, 32); /* arg_len past the frame */
	assert_int_equal(both_wait(&p, m, n, 50), -ETIMEDOUT);
	n = build(m, req, 0x12345678u, 0, 3, a, 0); /* unknown */
	assert_int_equal(both_wait(&p, m, n, 50), -ETIMEDOUT);
	n = build(m, req, par, 31, 4, a, 31); /* wrong size */
	assert_int_equal(both_wait(&p, m, n, 50), -ETIMEDOUT);
	assert_int_equal(both_wait(&p, m, 10, 50), -ETIMEDOUT); /* short */
	/* a result past resp_size is the handler's: answered */
	n = build(m, req, echo, RESP_SIZE, 5, a, RESP_SIZE);
	assert_int_equal(both(&p, m, n), QL_RPC_RESPONSE_SIZE);
	for (uint32_t i = 0; i < 2 * PAGES; i++) {
		n = build(m, req, i % 2 ? 0x1u : par, 32, 10 + i, a, 32);
		assert_int_equal(both_wait(&p, m, n, i % 2 ? 50 : 2000),
				 i % 2 ? -ETIMEDOUT :
					 (int)(QL_RPC_RESPONSE_SIZE + QL_DEMO_PARITY_RESULT_LEN));
	}
	assert_int_equal(ql_gpu_dispatcher_stats(p.g, &gs), 0);
	ql_daemon_stats(p.dm, &ds);
	assert_int_equal(gs.dropped, 5 + PAGES);
	assert_int_equal(gs.dropped, ds.dropped);
	assert_int_equal(gs.ok, PAGES);
	pair_close(&p);
}

/* On a GPU (CUDA build and a device): the persistent kernel serves the
 * pages, answering as the CPU hsb channel; skipped, with the reason,
 * where there is none. */
static void test_device(void **state)
{
	uint8_t m[PAGE_SIZE], a[32] = { 1, 2, 3 };
	char why[256];
	struct pair p;
	uint32_t n;

	(void)state;
	if (!ql_gpu_available(why, sizeof(why))) {
		fprintf(stderr, "test_device: skipped: %s\n", why);
		skip();
	}
	pair_open_mode(&p, 0, QL_GPU_MODE_DEVICE);
	assert_int_equal(ql_gpu_dispatcher_mode(p.g), QL_GPU_MODE_DEVICE);
	for (uint32_t i = 0; i < 4 * PAGES; i++) {
		n = build(m, QL_RPC_MAGIC_REQUEST, ql_rpc_fnv1a("qlink_parity"), 32, i, a, 32);
		a[i % 32] ^= (uint8_t)i;
		assert_int_equal(both(&p, m, n),
				 (int)(QL_RPC_RESPONSE_SIZE + QL_DEMO_PARITY_RESULT_LEN));
	}
	n = build(m, 0xdeadbeefu, 1, 0, 99, a, 0);
	assert_int_equal(both(&p, m, n), QL_RPC_RESPONSE_SIZE);
	pair_close(&p);
}

static void test_bad_config(void **state)
{
	struct ql_gpu_config c = gpu_cfg;
	struct ql_gpu_dispatcher *d;
	struct ql_hsb_params hp;
	struct ql_device *dev;

	(void)state;
	assert_int_equal(ql_device_open("soft://loop", &dev), 0);
	c.hsb.page_size = 200; /* not a multiple of 128 */
	assert_int_equal(ql_gpu_dispatcher_create(dev, &c, &d), -EINVAL);
	c = gpu_cfg;
	c.hsb.resp_size = 8;
	assert_int_equal(ql_gpu_dispatcher_create(dev, &c, &d), -EINVAL);
	/* no room for the board's metadata at page + round_up(frame, 128) */
	c = gpu_cfg;
	c.hsb.frame_len = PAGE_SIZE;
	assert_int_equal(ql_gpu_dispatcher_create(dev, &c, &d), -EINVAL);
	assert_non_null(strstr(ql_error_detail(), "round_up(frame, 128) + 128"));
	c = gpu_cfg;
	c.transport = (enum ql_gpu_transport)7;
	assert_int_equal(ql_gpu_dispatcher_create(dev, &c, &d), -EINVAL);
	c = gpu_cfg;
	c.bad_requests = 2;
	assert_int_equal(ql_gpu_dispatcher_create(dev, &c, &d), -EINVAL);
	/* a ring dispatcher has no hsb parameters */
	c = gpu_cfg;
	c.transport = QL_GPU_TRANSPORT_RING;
	assert_int_equal(ql_gpu_dispatcher_create(dev, &c, &d), 0);
	assert_int_equal(ql_gpu_dispatcher_hsb_params(d, &hp), -EINVAL);
	ql_gpu_dispatcher_destroy(d);
	assert_int_equal(ql_device_close(dev), 0);
}

/* ---- the hot path ---------------------------------------------------------- */

struct hp {
	struct ql_device *dev;
	struct ql_gpu_dispatcher *d;
	struct ql_hsb_client *cl;
	uint8_t msg[64];
	uint32_t len;
};

static int hp_loop(void *arg)
{
	struct hp *h = arg;

	for (int i = 0; i < 10000; i++) {
		struct ql_ring_response r;
		int n = 0, turns;

		if (ql_hsb_client_send(h->cl, h->msg, h->len))
			return -1;
		for (turns = 0; turns < 1000000; turns++) {
			if (ql__gpu_dispatcher_step(h->d) < 0)
				return -1;
			ql__soft_mlx5_engine_poll(h->dev);
			n = ql_hsb_client_poll(h->cl, &r, 1);
			if (n)
				break;
		}
		if (n != 1 || r.len != QL_RPC_RESPONSE_SIZE + QL_DEMO_PARITY_RESULT_LEN ||
		    ql_rpc_get_u32(r.msg + 4) != 0 || ql_hsb_client_release(h->cl, &r))
			return -1;
	}
	return 0;
}

static void test_hot_path(void **state)
{
	struct ql_hsb_client_config cc = { .recv_buffers = 32, .recv_size = RESP_SIZE };
	struct ql_conn_params cp;
	struct ql_hsb_params hp;
	struct ql_gpu_stats st;
	struct ql_rpc_out o;
	struct hp h;
	char why[256];

	(void)state;
	memset(&h, 0, sizeof(h));
	assert_int_equal(ql_device_open("soft://loop", &h.dev), 0);
	assert_int_equal(ql__soft_mlx5_engine_manual(h.dev), 0);
	assert_int_equal(ql_gpu_dispatcher_create(h.dev, &gpu_cfg, &h.d), 0);
	assert_int_equal(register_gpu(h.d), 0);
	assert_int_equal(ql_gpu_dispatcher_hsb_params(h.d, &hp), 0);
	assert_int_equal(ql_hsb_client_create(h.dev, &cc, &h.cl), 0);
	assert_int_equal(ql_hsb_client_local_params(h.cl, &cp), 0);
	assert_int_equal(ql_hsb_client_connect(h.cl, &hp, NULL), 0);
	assert_int_equal(ql_gpu_dispatcher_connect(h.d, &cp, NULL), 0);
	/* the engine takes the receive WQEs posted at connect */
	for (int i = 0; i < 16; i++)
		ql__soft_mlx5_engine_poll(h.dev);
	ql_rpc_request_begin(&o, h.msg, sizeof(h.msg));
	ql_demo_parity_syndrome(3, 0, ql_rpc_out_reserve(&o, QL_DEMO_PARITY_ARG_LEN));
	h.len = (uint32_t)ql_rpc_request_finish(&o, ql_rpc_fnv1a("qlink_parity"), 1, 0);
	if (hp_check(hp_loop, &h, why, sizeof(why)))
		fail_msg("%s", why);
	assert_int_equal(ql_gpu_dispatcher_stats(h.d, &st), 0);
	if (hp_available())
		assert_true(st.ok >= 10000);
	assert_int_equal(st.ok, st.requests);
	ql_hsb_client_destroy(h.cl);
	ql_gpu_dispatcher_destroy(h.d);
	assert_int_equal(ql_device_close(h.dev), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_config),
		cmocka_unit_test(test_same_as_cpu),
		cmocka_unit_test(test_drop_same_as_cpu),
		cmocka_unit_test(test_vppu_across_processes),
		cmocka_unit_test(test_hot_path),
		cmocka_unit_test(test_device),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
