/* SPDX-License-Identifier: MIT */
/*
 * qlink-bench-verbs: latency and message rate of the verbs API between two
 * processes, by default over the software NIC's shared-memory wire
 * (soft+shm://NAME). See docs/benchmarks.md and `qlink-bench-verbs --help`.
 *
 * Each test forks a server process. Both ends open their own device after
 * the fork, register memory from ql_mem_alloc(), exchange connection
 * parameters as text (ql_conn_params_format/parse) through pipes, connect an
 * RC QP pair and run one of:
 *
 *   write-lat  RDMA WRITE ping-pong, completion detected by polling memory
 *              (the last 8 bytes of every message carry the iteration
 *              number; the soft NIC stores them last, with release
 *              semantics), like UCX ucp_put_lat;
 *   send-lat   SEND/RECV ping-pong, completion detected by polling the CQ,
 *              like UCX tag_lat;
 *   write-bw   windowed RDMA WRITEs, counted by the receiver polling the
 *              counter word;
 *   send-bw    windowed SENDs under a credit scheme (the receiver grants
 *              credits by RDMA WRITE as it re-posts receives, so the sender
 *              never meets receiver-not-ready), counted at the receiver.
 *
 * Round-trip times are rdtsc intervals (ql_tsc) recorded per iteration in a
 * ql_hist, in ticks, and converted with ql_tsc_ghz() for the report. Every
 * wait has a deadline (--timeout) and watches the other process, so the
 * benchmark reports a clear error and exits non-zero instead of hanging.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "qlink/clock.h"
#include "qlink/error.h"
#include "qlink/histogram.h"
#include "qlink/verbs.h"

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

#define DEFAULT_URI "soft+shm://qlbench"
#define PAGE_SIZE 4096u
#define MAX_SIZE (1u << 20)
#define LAT_SQ_DEPTH 256
#define LAT_RQ_DEPTH 64
#define LINE_MAX_LEN 512

/* ---- tests and their targets (docs/benchmarks.md) ------------------- */

enum test_id { T_WRITE_LAT, T_SEND_LAT, T_WRITE_BW, T_SEND_BW, T_COUNT };

struct test_desc {
	const char *name;
	bool bw;	      /* message rate test */
	uint64_t iters;	      /* default iterations (messages for bw) */
	uint64_t warmup;      /* default warm-up iterations */
	double target;	      /* lat: p50 RTT ns at most; bw: msg/s at least */
	const char *target_s; /* the target in words */
};

static const struct test_desc tests[T_COUNT] = {
	[T_WRITE_LAT] = { "write-lat", false, 200000, 20000, 690.0,
			  "p50 <= 0.69 us (1.2x UCX ucp_put_lat 0.57)" },
	[T_SEND_LAT] = { "send-lat", false, 200000, 20000, 1100.0, "p50 <= 1.10 us (UCX tag_lat)" },
	[T_WRITE_BW] = { "write-bw", true, 2000000, 200000, 5.0e6, ">= 5.0 M msg/s (UCX tag_bw)" },
	[T_SEND_BW] = { "send-bw", true, 1000000, 100000, 5.0e6, ">= 5.0 M msg/s (UCX tag_bw)" },
};

/* ---- options and process-wide state ---------------------------------- */

struct options {
	int test; /* -1: all */
	uint32_t size;
	uint64_t iters;		/* 0: the test's default */
	int64_t warmup;		/* -1: the test's default */
	const char *uri;	/* the client opens this URI (the server too by default) */
	const char *server_uri; /* the server's URI when it differs (NULL: uri) */
	int client_cpu;
	int server_cpu;
	bool json;
	double timeout_s;
	uint32_t signal_every;
	uint32_t sq_depth; /* bw tests */
	uint32_t rq_depth; /* send-bw receiver */
};

static struct options opt = {
	.test = -1,
	.size = 8,
	.warmup = -1,
	.uri = DEFAULT_URI,
	.client_cpu = 0,
	.server_cpu = 1,
	.timeout_s = 5.0,
	.signal_every = 64,
	.sq_depth = 1024,
	.rq_depth = 1024,
};

static double tsc_ghz;
static uint64_t timeout_ticks;
static bool is_server;
static pid_t child_pid = -1; /* client: the server process */
static pid_t parent_pid;     /* server: the client process */
static const char *cur_test = "setup";

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "qlink-bench-verbs: %s %s: ", cur_test, is_server ? "server" : "client");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fflush(stderr);
	if (is_server)
		_exit(1);
	if (child_pid > 0) {
		kill(child_pid, SIGKILL);
		waitpid(child_pid, NULL, 0);
	}
	exit(1);
}

/* Die with the library's error text for a negative errno. */
static void die_ql(const char *what, int ret)
{
	const char *detail = ql_error_detail();

	die("%s failed: %s%s%s", what, ql_strerror(ret), detail && *detail ? " - " : "",
	    detail ? detail : "");
}

/* ---- waiting with a deadline ------------------------------------------ */

/* The other process: gone? (client: waitpid; server: reparented) */
static void check_peer_process(void)
{
	if (is_server) {
		if (getppid() != parent_pid)
			die("the client process exited");
		return;
	}
	if (child_pid > 0) {
		int st;
		pid_t p = waitpid(child_pid, &st, WNOHANG);

		if (p == child_pid) {
			child_pid = -1;
			if (WIFEXITED(st))
				die("the server process exited with status %d", WEXITSTATUS(st));
			die("the server process was killed by signal %d",
			    WIFSIGNALED(st) ? WTERMSIG(st) : 0);
		}
	}
}

/* This process's device: a soft+udp device in caller progress mode
 * (docs/progress.md) moves only when we run it, and write-lat waits on
 * memory, not on a CQ. NULL before it opens. */
static struct ql_device *progress_dev;

struct waiter {
	uint64_t deadline; /* ticks */
	uint32_t spins;
	const char *what;
};

/* Start a wait that may last --timeout from `now` (ticks). */
static inline void wait_begin(struct waiter *w, uint64_t now, const char *what)
{
	w->deadline = now + timeout_ticks;
	w->spins = 0;
	w->what = what;
}

static void wait_slow(struct waiter *w)
{
	uint64_t now = ql_tsc();

	/* about every million spins (milliseconds): is the peer alive? */
	if ((w->spins & 0xfffff) == 0)
		check_peer_process();
	if ((int64_t)(now - w->deadline) > 0) {
		check_peer_process();
		die("timed out after %.1f s waiting for %s", opt.timeout_s, w->what);
	}
}

/* Call once per spin of a busy-wait loop: a few instructions (and a round
 * of the device in caller progress mode), with the clock read every 4096
 * spins. */
static inline void wait_spin(struct waiter *w)
{
	if (progress_dev)
		(void)ql_device_progress(progress_dev);
	if (unlikely((++w->spins & 0xfff) == 0))
		wait_slow(w);
}

/* ---- pipes between the two processes ---------------------------------- */

static void pipe_write_line(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void pipe_write_line(int fd, const char *fmt, ...)
{
	char buf[LINE_MAX_LEN];
	va_list ap;
	size_t off = 0, len;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(buf) - 1)
		die("internal: control line too long");
	buf[n] = '\n';
	len = (size_t)n + 1;
	while (off < len) {
		ssize_t w = write(fd, buf + off, len - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			die("cannot write to the %s process: %s", is_server ? "client" : "server",
			    strerror(errno));
		off += (size_t)w;
	}
}

/* Before a wait that does not progress (the pipe to the other process): one
 * more round, so the ACK a caller-mode round holds for the next one
 * (docs/progress.md §4) reaches the peer, whose send completion waits on it. */
static void last_round(void)
{
	if (progress_dev)
		(void)ql_device_progress(progress_dev);
}

/* Read one line (without its newline) within the timeout. */
static void pipe_read_line(int fd, char *buf, size_t len, const char *what)
{
	uint64_t deadline = ql_clock_ns() + (uint64_t)(opt.timeout_s * 1e9);
	size_t n = 0;

	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int r = poll(&p, 1, 100);
		ssize_t got;
		char c;

		if (r < 0 && errno != EINTR)
			die("poll: %s", strerror(errno));
		if (r <= 0) {
			check_peer_process();
			if (ql_clock_ns() > deadline)
				die("timed out after %.1f s waiting for %s", opt.timeout_s, what);
			continue;
		}
		got = read(fd, &c, 1);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0) {
			/* EOF: the other side is gone; say how, if we can */
			if (!is_server && child_pid > 0) {
				for (int i = 0; i < 100; i++) {
					check_peer_process();
					usleep(10000);
				}
			}
			die("the %s process closed its pipe while we waited for %s",
			    is_server ? "client" : "server", what);
		}
		if (c == '\n') {
			buf[n] = '\0';
			return;
		}
		if (n + 1 >= len)
			die("control line too long while reading %s", what);
		buf[n++] = c;
	}
}

/* ---- one end of a connection ----------------------------------------- */

struct endpoint {
	struct ql_device *dev;
	struct ql_device_attr attr;
	struct ql_pd *pd;
	struct ql_cq *scq;
	struct ql_cq *rcq;
	struct ql_qp *qp;
	struct ql_mr *mr;
	uint8_t *mem; /* one ql_mem_alloc region: rx | tx | receive buffers */
	size_t mem_len;
	uint8_t *rx;	/* the peer WRITEs here (connection params vaddr) */
	uint8_t *tx;	/* source of non-inline sends and writes */
	uint8_t *rbufs; /* receive buffers, one per receive WQE */
	size_t rstride; /* bytes between receive buffers */
	uint32_t nrecv; /* receive WQEs kept posted */
	uint32_t sq_depth;
	uint32_t inline_max; /* granted max_inline_data */
	uint32_t lkey;
	struct ql_conn_params peer;
};

static size_t round_up(size_t v, size_t a)
{
	return (v + a - 1) / a * a;
}

/* Bytes before a message in rx so that it ends 8-byte aligned: the
 * receiver polls its last 8 bytes with one aligned load. */
static uint32_t msg_pad(void)
{
	return (8 - opt.size % 8) % 8;
}

static void ep_open(struct endpoint *e, enum test_id t)
{
	struct ql_qp_init_attr ia;
	size_t rx_len, tx_len, rb_len;
	int ret;

	memset(e, 0, sizeof(*e));
	ret = ql_device_open(is_server && opt.server_uri ? opt.server_uri : opt.uri, &e->dev);
	if (ret)
		die_ql("ql_device_open", ret);
	progress_dev = e->dev;
	ret = ql_device_query(e->dev, &e->attr);
	if (ret)
		die_ql("ql_device_query", ret);
	ret = ql_pd_alloc(e->dev, &e->pd);
	if (ret)
		die_ql("ql_pd_alloc", ret);

	e->sq_depth = tests[t].bw ? opt.sq_depth : LAT_SQ_DEPTH;
	if (t == T_SEND_LAT)
		e->nrecv = LAT_RQ_DEPTH;
	else if (t == T_SEND_BW && is_server)
		e->nrecv = opt.rq_depth;
	else
		e->nrecv = 0;

	/* a CQ large enough for every WR to complete in error at once */
	ret = ql_cq_create(e->dev, (int)e->sq_depth + 64, &e->scq);
	if (ret)
		die_ql("ql_cq_create", ret);
	ret = ql_cq_create(e->dev, (int)(e->nrecv ? e->nrecv : 1) + 64, &e->rcq);
	if (ret)
		die_ql("ql_cq_create", ret);

	rx_len = round_up(opt.size + 8, PAGE_SIZE);
	tx_len = round_up(opt.size, PAGE_SIZE);
	e->rstride = round_up(opt.size, 64);
	rb_len = round_up(e->rstride * e->nrecv, PAGE_SIZE);
	e->mem_len = rx_len + tx_len + rb_len;
	e->mem = ql_mem_alloc(e->mem_len);
	if (!e->mem)
		die("ql_mem_alloc(%zu): %s", e->mem_len, strerror(errno));
	e->rx = e->mem;
	e->tx = e->mem + rx_len;
	e->rbufs = e->nrecv ? e->tx + tx_len : NULL;
	ret = ql_mr_reg(e->pd, e->mem, e->mem_len,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
			&e->mr);
	if (ret)
		die_ql("ql_mr_reg", ret);
	e->lkey = ql_mr_lkey(e->mr);

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = e->scq;
	ia.recv_cq = e->rcq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = e->sq_depth;
	ia.cap.max_recv_wr = e->nrecv ? e->nrecv : 1;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	ia.cap.max_inline_data = e->attr.max_inline_data;
	ret = ql_qp_create(e->pd, &ia, &e->qp);
	if (ret)
		die_ql("ql_qp_create", ret);
	e->inline_max = ia.cap.max_inline_data;
}

static void ep_close(struct endpoint *e)
{
	int ret;

	if (e->qp && (ret = ql_qp_destroy(e->qp)))
		die_ql("ql_qp_destroy", ret);
	if (e->mr && (ret = ql_mr_dereg(e->mr)))
		die_ql("ql_mr_dereg", ret);
	if (e->scq && (ret = ql_cq_destroy(e->scq)))
		die_ql("ql_cq_destroy", ret);
	if (e->rcq && (ret = ql_cq_destroy(e->rcq)))
		die_ql("ql_cq_destroy", ret);
	if (e->pd && (ret = ql_pd_free(e->pd)))
		die_ql("ql_pd_free", ret);
	progress_dev = NULL;
	if (e->dev && (ret = ql_device_close(e->dev)))
		die_ql("ql_device_close", ret);
	if (e->mem)
		ql_mem_free(e->mem);
	memset(e, 0, sizeof(*e));
}

/* Send our parameters, read the peer's, connect. */
static void ep_connect(struct endpoint *e, int rfd, int wfd)
{
	struct ql_conn_params mine;
	char text[LINE_MAX_LEN];
	int ret;

	ret = ql_qp_local_params(e->qp, &mine);
	if (ret)
		die_ql("ql_qp_local_params", ret);
	mine.vaddr = (uint64_t)(uintptr_t)e->rx;
	mine.rkey = ql_mr_rkey(e->mr);
	mine.length = round_up(opt.size + 8, PAGE_SIZE);
	ret = ql_conn_params_format(&mine, text, sizeof(text));
	if (ret < 0)
		die_ql("ql_conn_params_format", ret);
	if ((size_t)ret >= sizeof(text))
		die("connection parameters do not fit %zu bytes", sizeof(text));
	pipe_write_line(wfd, "%s", text);
	pipe_read_line(rfd, text, sizeof(text), "the peer's connection parameters");
	ret = ql_conn_params_parse(text, &e->peer);
	if (ret)
		die("cannot parse the peer's connection parameters '%s': %s", text,
		    ql_strerror(ret));
	ret = ql_qp_connect(e->qp, &e->peer, NULL);
	if (ret)
		die_ql("ql_qp_connect", ret);
}

/* ---- completions ------------------------------------------------------- */

static void check_wc(const struct ibv_wc *wc, const char *what)
{
	if (unlikely(wc->status != IBV_WC_SUCCESS)) {
		/* a flush after the peer died: report the death itself */
		usleep(10000);
		check_peer_process();
		die("%s completion wr_id %" PRIu64 " failed: %s (%d), opcode %d, vendor_err %u",
		    what, (uint64_t)wc->wr_id, ibv_wc_status_str(wc->status), (int)wc->status,
		    (int)wc->opcode, wc->vendor_err);
	}
}

static int poll_cq(struct ql_cq *cq, int n, struct ibv_wc *wc, const char *what)
{
	int got = ql_cq_poll(cq, n, wc);

	if (unlikely(got < 0))
		die("ql_cq_poll (%s CQ): %s", what, ql_strerror(got));
	for (int i = 0; i < got; i++)
		check_wc(&wc[i], what);
	return got;
}

/* Wait for n send completions (signaled WRs), checking each. Returns the
 * wr_id of the last one. */
static uint64_t reap_send(struct endpoint *e, int n)
{
	struct ibv_wc wc[16];
	struct waiter w;
	uint64_t last = 0;

	wait_begin(&w, ql_tsc(), "a send completion");
	while (n > 0) {
		int got = poll_cq(e->scq, n < 16 ? n : 16, wc, "send");

		if (got) {
			last = wc[got - 1].wr_id;
			n -= got;
		} else {
			wait_spin(&w);
		}
	}
	return last;
}

static void post_send(struct endpoint *e, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;
	int ret = ql_qp_post_send(e->qp, wr, &bad);

	if (unlikely(ret))
		die("ql_qp_post_send (wr_id %" PRIu64 "): %s", (uint64_t)wr->wr_id,
		    ql_strerror(ret));
}

static void post_recv_one(struct endpoint *e, uint32_t slot)
{
	struct ibv_sge sge = {
		.addr = (uint64_t)(uintptr_t)(e->rbufs + (size_t)slot * e->rstride),
		.length = opt.size,
		.lkey = e->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = slot, .sg_list = &sge, .num_sge = 1 };
	struct ibv_recv_wr *bad;
	int ret = ql_qp_post_recv(e->qp, &wr, &bad);

	if (unlikely(ret))
		die("ql_qp_post_recv (slot %u): %s", slot, ql_strerror(ret));
}

/* Post receives for slots[0..n) as one chain. */
static void post_recv_batch(struct endpoint *e, const uint32_t *slots, uint32_t n)
{
	struct ibv_sge sge[64];
	struct ibv_recv_wr wr[64], *bad;

	while (n) {
		uint32_t k = n < 64 ? n : 64;
		int ret;

		for (uint32_t i = 0; i < k; i++) {
			sge[i].addr =
				(uint64_t)(uintptr_t)(e->rbufs + (size_t)slots[i] * e->rstride);
			sge[i].length = opt.size;
			sge[i].lkey = e->lkey;
			wr[i].wr_id = slots[i];
			wr[i].sg_list = &sge[i];
			wr[i].num_sge = 1;
			wr[i].next = i + 1 < k ? &wr[i + 1] : NULL;
		}
		ret = ql_qp_post_recv(e->qp, wr, &bad);
		if (unlikely(ret))
			die("ql_qp_post_recv (batch of %u): %s", k, ql_strerror(ret));
		slots += k;
		n -= k;
	}
}

static void prepost_recvs(struct endpoint *e)
{
	for (uint32_t i = 0; i < e->nrecv; i++)
		post_recv_one(e, i);
}

/* Poll the receive CQ for one completion of a SEND of opt.size bytes. */
static void wait_recv(struct endpoint *e, struct ibv_wc *wc, uint64_t now, const char *what)
{
	struct waiter w;

	wait_begin(&w, now, what);
	while (poll_cq(e->rcq, 1, wc, "receive") == 0)
		wait_spin(&w);
	if (unlikely(wc->opcode != IBV_WC_RECV || wc->byte_len != opt.size))
		die("receive completion: opcode %d, %u bytes (expected RECV of %u)",
		    (int)wc->opcode, wc->byte_len, opt.size);
}

static inline uint64_t load_u64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

static inline void store_u64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, 8);
}

/* ---- results ------------------------------------------------------------ */

struct result {
	struct ql_hist hist; /* ticks: per round trip (lat) or per message (bw) */
	uint64_t iters;
	uint64_t ticks;		    /* duration of the measured part (client) */
	double rate;		    /* msg/s: lat: round trips/s; bw: counted at receiver */
	double sender_rate;	    /* bw: msg/s counted at the sender */
	uint64_t rnr_naks;	    /* RNR NAKs the server's device sent */
	uint64_t credit_wait_ticks; /* send-bw: measured time the sender waited for credit */
};

static struct result res;

/* ---- write-lat ------------------------------------------------------------ */

static void write_lat(struct endpoint *e, uint64_t warmup, uint64_t iters)
{
	const uint32_t size = opt.size, pad = msg_pad(), sig = opt.signal_every;
	const _Atomic uint64_t *rx_word =
		(const _Atomic uint64_t *)(const void *)(e->rx + pad + size - 8);
	struct ibv_sge sge = { .addr = (uint64_t)(uintptr_t)e->tx,
			       .length = size,
			       .lkey = e->lkey };
	struct ibv_send_wr wr = {
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE,
		.wr.rdma = { .remote_addr = e->peer.vaddr + pad, .rkey = e->peer.rkey },
	};
	const unsigned int base_flags = size <= e->inline_max ? IBV_SEND_INLINE : 0;
	const uint64_t total = warmup + iters;
	uint64_t prev = ql_tsc(), t_start = prev;
	struct waiter w;

	for (uint64_t i = 1; i <= total; i++) {
		const bool signaled = i % sig == 0;

		if (!is_server) {
			/* client: WRITE i, wait for the server's WRITE of i */
			store_u64(e->tx + size - 8, i);
			wr.wr_id = i;
			wr.send_flags = base_flags | (signaled ? IBV_SEND_SIGNALED : 0);
			post_send(e, &wr);
			wait_begin(&w, prev, "the server's reply WRITE");
			while (atomic_load_explicit(rx_word, memory_order_acquire) != i)
				wait_spin(&w);
			if (signaled)
				reap_send(e, 1);
			uint64_t now = ql_tsc();

			if (i > warmup)
				ql_hist_record(&res.hist, now - prev);
			else
				t_start = now;
			prev = now;
		} else {
			/* server: wait for i, answer with i */
			wait_begin(&w, ql_tsc(), "the client's WRITE");
			while (atomic_load_explicit(rx_word, memory_order_acquire) != i)
				wait_spin(&w);
			store_u64(e->tx + size - 8, i);
			wr.wr_id = i;
			wr.send_flags = base_flags | (signaled ? IBV_SEND_SIGNALED : 0);
			post_send(e, &wr);
			if (signaled)
				reap_send(e, 1);
		}
	}
	res.ticks = prev - t_start;
}

/* ---- send-lat ------------------------------------------------------------- */

static void send_lat(struct endpoint *e, uint64_t warmup, uint64_t iters)
{
	const uint32_t size = opt.size, sig = opt.signal_every;
	struct ibv_sge sge = { .addr = (uint64_t)(uintptr_t)e->tx,
			       .length = size,
			       .lkey = e->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND };
	const unsigned int base_flags = size <= e->inline_max ? IBV_SEND_INLINE : 0;
	const uint64_t total = warmup + iters;
	uint64_t prev = ql_tsc(), t_start = prev;
	int64_t repost = -1; /* receive slot to re-post after the next send */
	struct ibv_wc wc;

	for (uint64_t i = 1; i <= total; i++) {
		const bool signaled = i % sig == 0;

		if (is_server) {
			wait_recv(e, &wc, ql_tsc(), "the client's SEND");
			if (load_u64(e->rbufs + wc.wr_id * e->rstride) != i)
				die("message %" PRIu64 " carries sequence number %" PRIu64, i,
				    load_u64(e->rbufs + wc.wr_id * e->rstride));
			repost = (int64_t)wc.wr_id;
		}
		store_u64(e->tx, i);
		wr.wr_id = i;
		wr.send_flags = base_flags | (signaled ? IBV_SEND_SIGNALED : 0);
		post_send(e, &wr);
		/* re-post the previous receive off the critical path */
		if (repost >= 0)
			post_recv_one(e, (uint32_t)repost);
		repost = -1;
		if (!is_server) {
			wait_recv(e, &wc, prev, "the server's reply SEND");
			if (load_u64(e->rbufs + wc.wr_id * e->rstride) != i)
				die("reply %" PRIu64 " carries sequence number %" PRIu64, i,
				    load_u64(e->rbufs + wc.wr_id * e->rstride));
			repost = (int64_t)wc.wr_id;
		}
		if (signaled)
			reap_send(e, 1);
		if (!is_server) {
			uint64_t now = ql_tsc();

			if (i > warmup)
				ql_hist_record(&res.hist, now - prev);
			else
				t_start = now;
			prev = now;
		}
	}
	res.ticks = prev - t_start;
}

/* ---- message rate: sender side ------------------------------------------- */

/*
 * Post `total` WRs through a window of the send queue's depth, signaling
 * every opt.signal_every-th; a signaled completion retires it and the
 * unsignaled WRs before it. For send-bw, message i (from 0) goes only when
 * the receiver has granted credit beyond i (credit_word: receives it has
 * posted in all). Records per-message time over each signal interval.
 */
static void bw_sender(struct endpoint *e, enum ibv_wr_opcode op, uint64_t total, uint64_t warmup,
		      const _Atomic uint64_t *credit_word, uint64_t credit)
{
	const uint32_t size = opt.size, sig = opt.signal_every, depth = e->sq_depth;
	const uint32_t pad = op == IBV_WR_RDMA_WRITE ? msg_pad() : 0;
	struct ibv_sge sge = { .addr = (uint64_t)(uintptr_t)e->tx,
			       .length = size,
			       .lkey = e->lkey };
	struct ibv_send_wr wr = {
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = op,
		.wr.rdma = { .remote_addr = e->peer.vaddr + pad, .rkey = e->peer.rkey },
	};
	const unsigned int base_flags = size <= e->inline_max ? IBV_SEND_INLINE : 0;
	/* the counter word: last 8 bytes for WRITE (polled), first for SEND */
	uint8_t *seq = op == IBV_WR_RDMA_WRITE ? e->tx + size - 8 : e->tx;
	uint64_t retired = 0; /* WRs known complete */
	uint64_t prev = ql_tsc(), t_start = prev, prev_i = 0, i_start = 0;
	struct ibv_wc wc[16];
	struct waiter w;

	for (uint64_t i = 1; i <= total; i++) {
		const bool signaled = i % sig == 0 || i == total;

		if (unlikely(i - 1 - retired >= depth)) {
			wait_begin(&w, ql_tsc(), "send completions (send queue full)");
			while (i - 1 - retired >= depth) {
				int got = poll_cq(e->scq, 16, wc, "send");

				if (got)
					retired = wc[got - 1].wr_id;
				else
					wait_spin(&w);
			}
		}
		if (credit_word && unlikely(i > credit)) {
			uint64_t t = ql_tsc();

			wait_begin(&w, t, "receive credit from the server");
			while (i >
			       (credit = atomic_load_explicit(credit_word, memory_order_acquire)))
				wait_spin(&w);
			if (i > warmup)
				res.credit_wait_ticks += ql_tsc() - t;
		}
		store_u64(seq, i);
		wr.wr_id = i;
		wr.send_flags = base_flags | (signaled ? IBV_SEND_SIGNALED : 0);
		post_send(e, &wr);
		if (signaled) {
			/* reap whatever has completed, without waiting */
			int got = poll_cq(e->scq, 16, wc, "send");
			uint64_t now;

			if (got)
				retired = wc[got - 1].wr_id;
			now = ql_tsc();
			if (i > warmup) {
				ql_hist_record(&res.hist, (now - prev) / (i - prev_i));
			} else {
				t_start = now;
				i_start = i;
			}
			prev = now;
			prev_i = i;
		}
	}
	res.ticks = prev - t_start;
	res.sender_rate =
		res.ticks ? (double)(total - i_start) / ((double)res.ticks / tsc_ghz) * 1e9 : 0;
}

/* ---- message rate: receiver side ----------------------------------------- */

static inline void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	for (int k = 0; k < 8; k++)
		__builtin_ia32_pause();
#endif
}

/* write-bw receiver: watch the counter word, time from the first value past
 * the warm-up to the last, then acknowledge with a WRITE of the last. */
static void write_bw_receiver(struct endpoint *e, uint64_t total, uint64_t warmup)
{
	const uint32_t size = opt.size, pad = msg_pad();
	const _Atomic uint64_t *rx_word =
		(const _Atomic uint64_t *)(const void *)(e->rx + pad + size - 8);
	struct ibv_sge sge = { .addr = (uint64_t)(uintptr_t)e->tx,
			       .length = size,
			       .lkey = e->lkey };
	struct ibv_send_wr wr = {
		.wr_id = total,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED | (size <= e->inline_max ? IBV_SEND_INLINE : 0),
		.wr.rdma = { .remote_addr = e->peer.vaddr + pad, .rkey = e->peer.rkey },
	};
	uint64_t c0, t0, t1, v;
	struct waiter w;

	wait_begin(&w, ql_tsc(), "the client's WRITEs (warm-up)");
	/* the connection and warm-up may take a while on a stalled host */
	w.deadline += timeout_ticks;
	while ((v = atomic_load_explicit(rx_word, memory_order_acquire)) < warmup + 1 ||
	       v > total) {
		relax();
		wait_spin(&w);
	}
	c0 = v;
	t0 = ql_tsc();
	wait_begin(&w, t0, "the client's last WRITE");
	while ((v = atomic_load_explicit(rx_word, memory_order_acquire)) != total) {
		if (unlikely(v > total))
			die("counter word reads %" PRIu64 ", beyond the %" PRIu64 " messages", v,
			    total);
		relax();
		wait_spin(&w);
	}
	t1 = ql_tsc();
	res.rate = t1 > t0 ? (double)(total - c0) / ((double)(t1 - t0) / tsc_ghz) * 1e9 : 0;
	store_u64(e->tx + size - 8, total);
	post_send(e, &wr);
	reap_send(e, 1);
}

/* send-bw receiver: keep the receive queue full, re-posting in batches and
 * granting credit for each batch with an 8-byte WRITE of the number of
 * receives posted so far into the client's rx word. */
static void send_bw_receiver(struct endpoint *e, uint64_t total, uint64_t warmup)
{
	const uint32_t batch = e->nrecv >= 128 ? 32 : (e->nrecv / 4 ? e->nrecv / 4 : 1);
	uint64_t posted = e->nrecv, count = 0, c0 = 0, t0 = 0, t1, credit_val;
	uint64_t credit_writes = 0;
	uint32_t pending[64], npending = 0;
	struct ibv_sge csge = { .addr = (uint64_t)(uintptr_t)&credit_val,
				.length = 8,
				.lkey = e->lkey };
	struct ibv_send_wr cwr = {
		.sg_list = &csge,
		.num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE,
		.wr.rdma = { .remote_addr = e->peer.vaddr, .rkey = e->peer.rkey },
	};
	struct ibv_wc wc[32];
	struct waiter w;
	bool waiting = true;

	if (e->inline_max < 8)
		die("send-bw needs max_inline_data >= 8 for its credit WRITEs");
	/* the connection and warm-up may take a while on a stalled host */
	wait_begin(&w, ql_tsc(), "the client's SENDs");
	w.deadline += timeout_ticks;
	while (count < total) {
		int got = poll_cq(e->rcq, 32, wc, "receive");

		if (!got) {
			if (!waiting) {
				wait_begin(&w, ql_tsc(), "the client's SENDs");
				waiting = true;
			}
			wait_spin(&w);
			continue;
		}
		waiting = false;
		for (int k = 0; k < got; k++) {
			const uint8_t *buf = e->rbufs + wc[k].wr_id * e->rstride;

			count++;
			if (unlikely(wc[k].opcode != IBV_WC_RECV || wc[k].byte_len != opt.size))
				die("receive completion: opcode %d, %u bytes (expected RECV of %u)",
				    (int)wc[k].opcode, wc[k].byte_len, opt.size);
			if (unlikely(load_u64(buf) != count))
				die("message %" PRIu64 " carries sequence number %" PRIu64, count,
				    load_u64(buf));
			pending[npending++] = (uint32_t)wc[k].wr_id;
			if (npending == batch) {
				post_recv_batch(e, pending, npending);
				posted += npending;
				npending = 0;
				credit_val = posted;
				cwr.wr_id = ++credit_writes;
				cwr.send_flags = IBV_SEND_INLINE |
						 (credit_writes % opt.signal_every == 0 ?
							  IBV_SEND_SIGNALED :
							  0);
				post_send(e, &cwr);
				if (cwr.send_flags & IBV_SEND_SIGNALED)
					reap_send(e, 1);
			}
		}
		if (unlikely(!t0 && count >= warmup)) {
			t0 = ql_tsc();
			c0 = count;
		}
	}
	t1 = ql_tsc();
	res.rate = t1 > t0 ? (double)(total - c0) / ((double)(t1 - t0) / tsc_ghz) * 1e9 : 0;
}

/* ---- one test: fork, connect, run, collect ----------------------------- */

static void run_server(enum test_id t, int rfd, int wfd, uint64_t warmup, uint64_t iters)
{
	struct ql_device_counters cnt;
	struct endpoint e;
	char line[LINE_MAX_LEN];
	int ret;

	if (opt.server_cpu >= 0 && (ret = ql_cpu_pin(opt.server_cpu)))
		die("cannot pin to cpu %d (--server-cpu): %s", opt.server_cpu, ql_error_detail());
	ep_open(&e, t);
	ep_connect(&e, rfd, wfd);
	prepost_recvs(&e);
	pipe_write_line(wfd, "READY");
	switch (t) {
	case T_WRITE_LAT:
		write_lat(&e, warmup, iters);
		break;
	case T_SEND_LAT:
		send_lat(&e, warmup, iters);
		break;
	case T_WRITE_BW:
		write_bw_receiver(&e, warmup + iters, warmup);
		break;
	case T_SEND_BW:
		send_bw_receiver(&e, warmup + iters, warmup);
		break;
	default:
		break;
	}
	/* only the soft NIC counts NAKs; a real device keeps its counters in sysfs */
	ret = ql_device_counters(e.dev, &cnt);
	if (ret == -EOPNOTSUPP)
		memset(&cnt, 0, sizeof(cnt));
	else if (ret)
		die_ql("ql_device_counters", ret);
	last_round();
	pipe_write_line(wfd, "DONE %.1f %" PRIu64, res.rate, cnt.rc_nak_rnr);
	pipe_read_line(rfd, line, sizeof(line), "the client's BYE");
	ep_close(&e);
}

static void run_client(enum test_id t, int rfd, int wfd, uint64_t warmup, uint64_t iters)
{
	struct endpoint e;
	char line[LINE_MAX_LEN];
	int ret;

	if (opt.client_cpu >= 0 && (ret = ql_cpu_pin(opt.client_cpu)))
		die("cannot pin to cpu %d (--client-cpu): %s", opt.client_cpu, ql_error_detail());
	ep_open(&e, t);
	ep_connect(&e, rfd, wfd);
	prepost_recvs(&e);
	pipe_read_line(rfd, line, sizeof(line), "the server to get ready");
	if (strcmp(line, "READY"))
		die("unexpected line from the server: '%s'", line);
	switch (t) {
	case T_WRITE_LAT:
		write_lat(&e, warmup, iters);
		break;
	case T_SEND_LAT:
		send_lat(&e, warmup, iters);
		break;
	case T_WRITE_BW: {
		const _Atomic uint64_t *ack =
			(const _Atomic uint64_t *)(const void *)(e.rx + msg_pad() + opt.size - 8);
		struct waiter w;

		bw_sender(&e, IBV_WR_RDMA_WRITE, warmup + iters, warmup, NULL, 0);
		wait_begin(&w, ql_tsc(), "the server's acknowledgement WRITE");
		while (atomic_load_explicit(ack, memory_order_acquire) != warmup + iters)
			wait_spin(&w);
		break;
	}
	case T_SEND_BW:
		bw_sender(&e, IBV_WR_SEND, warmup + iters, warmup,
			  (const _Atomic uint64_t *)(const void *)e.rx, opt.rq_depth);
		break;
	default:
		break;
	}
	last_round();
	pipe_read_line(rfd, line, sizeof(line), "the server's result");
	if (sscanf(line, "DONE %lf %" SCNu64, &res.rate, &res.rnr_naks) != 2)
		die("unexpected line from the server: '%s'", line);
	ep_close(&e);
	pipe_write_line(wfd, "BYE");
	res.iters = iters;
	if (!tests[t].bw)
		res.rate = res.ticks ? (double)iters / ((double)res.ticks / tsc_ghz) * 1e9 : 0;
}

static void run_test(enum test_id t)
{
	uint64_t iters = opt.iters ? opt.iters : tests[t].iters;
	uint64_t warmup = opt.warmup >= 0 ? (uint64_t)opt.warmup : tests[t].warmup;
	int c2s[2], s2c[2];
	pid_t pid;

	cur_test = tests[t].name;
	memset(&res, 0, sizeof(res));
	ql_hist_init(&res.hist);
	if (pipe(c2s) || pipe(s2c))
		die("pipe: %s", strerror(errno));
	fflush(stdout);
	fflush(stderr);
	parent_pid = getpid();
	pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (pid == 0) {
		is_server = true;
		/* go when the client goes, whatever kills it */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent_pid)
			_exit(1);
		close(c2s[1]);
		close(s2c[0]);
		run_server(t, c2s[0], s2c[1], warmup, iters);
		fflush(stdout);
		_exit(0);
	}
	child_pid = pid;
	close(c2s[0]);
	close(s2c[1]);
	run_client(t, s2c[0], c2s[1], warmup, iters);
	close(s2c[0]);
	close(c2s[1]);

	/* the server exits once it has our BYE */
	for (uint64_t deadline = ql_clock_ns() + (uint64_t)(opt.timeout_s * 1e9);;) {
		int st;
		pid_t p = waitpid(pid, &st, WNOHANG);

		if (p == pid) {
			child_pid = -1;
			if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
				die("the server process failed (%s %d)",
				    WIFEXITED(st) ? "exit status" : "signal",
				    WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
			break;
		}
		if (ql_clock_ns() > deadline)
			die("the server process did not exit within %.1f s", opt.timeout_s);
		usleep(1000);
	}
	if (res.rnr_naks)
		fprintf(stderr,
			"qlink-bench-verbs: %s: note: the server's device sent %" PRIu64
			" RNR NAKs\n",
			tests[t].name, res.rnr_naks);
}

/* ---- reporting ------------------------------------------------------------ */

struct summary {
	double min, p50, p90, p99, p999, max, mean; /* ns */
};

static void summarize(struct summary *s)
{
	const struct ql_hist *h = &res.hist;
	const double k = 1.0 / tsc_ghz;

	s->min = (double)ql_hist_min(h) * k;
	s->p50 = (double)ql_hist_percentile(h, 50) * k;
	s->p90 = (double)ql_hist_percentile(h, 90) * k;
	s->p99 = (double)ql_hist_percentile(h, 99) * k;
	s->p999 = (double)ql_hist_percentile(h, 99.9) * k;
	s->max = (double)ql_hist_max(h) * k;
	s->mean = ql_hist_mean(h) * k;
}

static bool meets_target(enum test_id t, const struct summary *s)
{
	return tests[t].bw ? res.rate >= tests[t].target : s->p50 <= tests[t].target;
}

static void report_json(enum test_id t)
{
	struct summary s;

	summarize(&s);
	printf("{\"test\":\"%s\",\"size\":%u,\"iters\":%" PRIu64 ",\"rtt_ns\":{\"p50\":%.1f,"
	       "\"p90\":%.1f,\"p99\":%.1f,\"p999\":%.1f,\"max\":%.1f,\"min\":%.1f,\"mean\":%.1f},"
	       "\"msg_per_s\":%.0f}\n",
	       tests[t].name, opt.size, res.iters, s.p50, s.p90, s.p99, s.p999, s.max, s.min,
	       s.mean, res.rate);
	fflush(stdout);
}

static void report_header(void)
{
	if (opt.server_uri)
		printf("qlink-bench-verbs: client %s, server %s, client cpu %d, server cpu %d, "
		       "TSC %.3f GHz\n",
		       opt.uri, opt.server_uri, opt.client_cpu, opt.server_cpu, tsc_ghz);
	else
		printf("qlink-bench-verbs: %s, client cpu %d, server cpu %d, TSC %.3f GHz\n",
		       opt.uri, opt.client_cpu, opt.server_cpu, tsc_ghz);
	printf("latency tests: round-trip time per iteration; rate tests (*): time per message "
	       "over each batch of %u\n",
	       opt.signal_every);
	printf("%-10s %5s %8s  %8s %8s %8s %8s %8s %8s %8s  %9s  %-44s %s\n", "test", "size",
	       "iters", "min", "p50", "p90", "p99", "p99.9", "max", "mean", "rate", "target",
	       "verdict");
	printf("%-10s %5s %8s  %8s %8s %8s %8s %8s %8s %8s  %9s\n", "", "bytes", "", "us", "us",
	       "us", "us", "us", "us", "us", "M msg/s");
	fflush(stdout);
}

static void report_row(enum test_id t)
{
	struct summary s;
	const double u = 1e-3;

	summarize(&s);
	printf("%-10s %5u %8" PRIu64
	       "  %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f  %9.2f  %-44s %s\n",
	       tests[t].bw ? (t == T_WRITE_BW ? "write-bw*" : "send-bw*") : tests[t].name, opt.size,
	       res.iters, s.min * u, s.p50 * u, s.p90 * u, s.p99 * u, s.p999 * u, s.max * u,
	       s.mean * u, res.rate * 1e-6, tests[t].target_s,
	       meets_target(t, &s) ? "met" : "MISSED");
	if (tests[t].bw)
		printf("%-10s %5s %8s  (p50 %.0f ns/msg; sender counted %.2f M msg/s, receiver "
		       "%.2f M msg/s",
		       "", "", "", s.p50, res.sender_rate * 1e-6, res.rate * 1e-6);
	if (t == T_SEND_BW)
		printf("; the sender waited for credit %.0f%% of the time",
		       res.ticks ? 100.0 * (double)res.credit_wait_ticks / (double)res.ticks : 0.0);
	if (tests[t].bw)
		printf(")\n");
	else
		printf("%-10s %5s %8s  (ns: min %.0f p50 %.0f p90 %.0f p99 %.0f p99.9 %.0f max "
		       "%.0f mean %.1f)\n",
		       "", "", "", s.min, s.p50, s.p90, s.p99, s.p999, s.max, s.mean);
	fflush(stdout);
}

/* ---- command line ----------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: qlink-bench-verbs [OPTIONS]\n"
		"\n"
		"Latency and message rate of qlink's verbs API between two processes (a\n"
		"forked server and this client), each with its own device, over the soft\n"
		"NIC's shared-memory wire by default. RC QPs, memory from ql_mem_alloc,\n"
		"connection parameters exchanged as text through pipes.\n"
		"\n"
		"Tests (--test NAME, or all, the default):\n"
		"  write-lat  RDMA WRITE ping-pong, memory polling (like UCX ucp_put_lat)\n"
		"             target: p50 RTT <= 0.69 us (1.2 x UCX 0.57 us on this machine)\n"
		"  send-lat   SEND/RECV ping-pong, CQ polling (like UCX tag_lat)\n"
		"             target: p50 RTT <= 1.10 us (UCX tag_lat)\n"
		"  write-bw   windowed RDMA WRITE message rate, counted at the receiver\n"
		"  send-bw    windowed SEND message rate under receiver credits (no RNR),\n"
		"             counted at the receiver\n"
		"             target for both: >= 5.0 M msg/s (UCX tag_bw 5.1-5.5 M/s)\n"
		"\n"
		"Options:\n"
		"  --test NAME        write-lat, send-lat, write-bw, send-bw or all\n"
		"  --size N           message bytes, %u..%u (default 8)\n"
		"  --iters N          measured iterations (default: 200000 for latency,\n"
		"                     2000000 write-bw, 1000000 send-bw: ~0.1-0.3 s each)\n"
		"  --warmup N         unmeasured iterations first (default: iters / 10)\n"
		"  --uri URI          device URI both processes open (default %s)\n"
		"  --server-uri URI   the server process opens URI instead (e.g. --uri\n"
		"                     ibv://rxe1 --server-uri ibv://rxe0: two devices)\n"
		"  --client-cpu N     pin the client to cpu N (default 0; -1: no pinning)\n"
		"  --server-cpu N     pin the server to cpu N (default 1; -1: no pinning)\n"
		"  --signal-every N   signal every N-th send WR (default 64)\n"
		"  --sq-depth N       send queue depth of the rate tests (default 1024)\n"
		"  --rq-depth N       receives the send-bw receiver keeps posted (default 1024)\n"
		"  --timeout SEC      give up on any wait after SEC seconds (default 5)\n"
		"  --json             one JSON object per test: test, size, iters,\n"
		"                     rtt_ns {p50,p90,p99,p999,max,min,mean}, msg_per_s\n"
		"  --help             this text\n"
		"\n"
		"Latency is the round trip per iteration, timed with rdtsc; for the rate\n"
		"tests rtt_ns is the time per message over each batch of --signal-every\n"
		"messages at the sender, and msg_per_s counts at the receiver. Writes are\n"
		"inline up to the device's max_inline_data. Exit status: 0 when every test\n"
		"ran (whether or not it met its target), 1 on any error or timeout.\n"
		"Keep runs short on shared or virtual machines: see docs/benchmarks.md.\n",
		8u, MAX_SIZE, DEFAULT_URI);
}

static uint64_t parse_u64(const char *name, const char *s, uint64_t min, uint64_t max)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s || *end || *s == '-' || v < min || v > max) {
		fprintf(stderr,
			"qlink-bench-verbs: --%s '%s': expected an integer from %" PRIu64
			" to %" PRIu64 "\n",
			name, s, min, max);
		exit(2);
	}
	return v;
}

static int parse_cpu(const char *name, const char *s)
{
	if (!strcmp(s, "-1"))
		return -1;
	return (int)parse_u64(name, s, 0, 4095);
}

static void parse_args(int argc, char **argv)
{
	enum {
		O_TEST = 1,
		O_SIZE,
		O_ITERS,
		O_WARMUP,
		O_URI,
		O_SURI,
		O_CCPU,
		O_SCPU,
		O_JSON,
		O_TIMEOUT,
		O_SIGNAL,
		O_SQ,
		O_RQ,
		O_HELP
	};
	static const struct option lo[] = {
		{ "test", required_argument, NULL, O_TEST },
		{ "size", required_argument, NULL, O_SIZE },
		{ "iters", required_argument, NULL, O_ITERS },
		{ "warmup", required_argument, NULL, O_WARMUP },
		{ "uri", required_argument, NULL, O_URI },
		{ "server-uri", required_argument, NULL, O_SURI },
		{ "client-cpu", required_argument, NULL, O_CCPU },
		{ "server-cpu", required_argument, NULL, O_SCPU },
		{ "json", no_argument, NULL, O_JSON },
		{ "timeout", required_argument, NULL, O_TIMEOUT },
		{ "signal-every", required_argument, NULL, O_SIGNAL },
		{ "sq-depth", required_argument, NULL, O_SQ },
		{ "rq-depth", required_argument, NULL, O_RQ },
		{ "help", no_argument, NULL, O_HELP },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case O_TEST:
			if (!strcmp(optarg, "all")) {
				opt.test = -1;
				break;
			}
			opt.test = -2;
			for (int i = 0; i < T_COUNT; i++)
				if (!strcmp(optarg, tests[i].name))
					opt.test = i;
			if (opt.test == -2) {
				fprintf(stderr,
					"qlink-bench-verbs: unknown test '%s' (write-lat, "
					"send-lat, write-bw, send-bw, all)\n",
					optarg);
				exit(2);
			}
			break;
		case O_SIZE:
			opt.size = (uint32_t)parse_u64("size", optarg, 8, MAX_SIZE);
			break;
		case O_ITERS:
			opt.iters = parse_u64("iters", optarg, 1, UINT64_C(1) << 40);
			break;
		case O_WARMUP:
			opt.warmup = (int64_t)parse_u64("warmup", optarg, 0, UINT64_C(1) << 40);
			break;
		case O_URI:
			opt.uri = optarg;
			break;
		case O_SURI:
			opt.server_uri = optarg;
			break;
		case O_CCPU:
			opt.client_cpu = parse_cpu("client-cpu", optarg);
			break;
		case O_SCPU:
			opt.server_cpu = parse_cpu("server-cpu", optarg);
			break;
		case O_JSON:
			opt.json = true;
			break;
		case O_TIMEOUT:
			opt.timeout_s = (double)parse_u64("timeout", optarg, 1, 3600);
			break;
		case O_SIGNAL:
			opt.signal_every = (uint32_t)parse_u64("signal-every", optarg, 1, 1024);
			break;
		case O_SQ:
			opt.sq_depth = (uint32_t)parse_u64("sq-depth", optarg, 1, 16384);
			break;
		case O_RQ:
			opt.rq_depth = (uint32_t)parse_u64("rq-depth", optarg, 1, 16384);
			break;
		case O_HELP:
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			exit(2);
		}
	}
	if (optind < argc) {
		fprintf(stderr, "qlink-bench-verbs: unexpected argument '%s' (try --help)\n",
			argv[optind]);
		exit(2);
	}
	if (opt.signal_every > opt.sq_depth) {
		fprintf(stderr, "qlink-bench-verbs: --signal-every %u exceeds --sq-depth %u\n",
			opt.signal_every, opt.sq_depth);
		exit(2);
	}
	if (opt.signal_every > LAT_SQ_DEPTH / 2) {
		fprintf(stderr, "qlink-bench-verbs: --signal-every at most %d\n", LAT_SQ_DEPTH / 2);
		exit(2);
	}
}

int main(int argc, char **argv)
{
	parse_args(argc, argv);
	signal(SIGPIPE, SIG_IGN);
	tsc_ghz = ql_tsc_ghz();
	if (!(tsc_ghz > 0))
		die("cannot calibrate the time-stamp counter");
	timeout_ticks = (uint64_t)(opt.timeout_s * 1e9 * tsc_ghz);

	if (!opt.json)
		report_header();
	for (int t = 0; t < T_COUNT; t++) {
		if (opt.test >= 0 && opt.test != t)
			continue;
		run_test((enum test_id)t);
		if (opt.json)
			report_json((enum test_id)t);
		else
			report_row((enum test_id)t);
	}
	return 0;
}
