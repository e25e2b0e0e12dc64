/* SPDX-License-Identifier: MIT */
/*
 * soft+shm across processes: fork()ed children open their own devices after
 * the fork, buffers come from ql_mem_alloc, and connection parameters travel
 * as text through pipes (ql_conn_params_format/parse). WRITE (with the
 * last-8-bytes visibility rule), READ, SEND/RECV with immediate,
 * WRITE_WITH_IMM, fetch-and-add from two processes, a compare-and-swap spin
 * lock, and a peer that dies mid-stream.
 *
 * With QLINK_TEST_IBV_A (and _B) set, the same tests run again over a real
 * device pair: the parent on A, the children on B (fewer iterations: rxe
 * under emulation is slow). QLINK_TEST_SOFT=0 leaves the soft+shm run out.
 */
#include "verbs_fixture.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MP_BUF_LEN (64 * 1024)

/* The device kind of the running group, and which side this process is. */
static const struct vt_param *mp_p;
static bool mp_in_child;

/* Iteration counts: the soft NIC's, or fewer on a real device. */
#define FAA_PER_CHILD (mp_p->ibv ? 2000 : 100000)
#define LOCK_PER_CHILD (mp_p->ibv ? 100 : 5000)
#define WRITE_ROUNDS (mp_p->ibv ? 200 : 500)
#define STREAM_WRITES (mp_p->ibv ? 2000u : 20000u)

/* ---- plumbing --------------------------------------------------------- */

/* Checks inside a child: report and leave with a non-zero status (cmocka's
 * asserts would unwind into the child's copy of the test runner). */
#define CK(cond)                                                                              \
	do {                                                                                  \
		if (!(cond)) {                                                                \
			fprintf(stderr, "child %d: %s:%d: check failed: %s\n", (int)getpid(), \
				__FILE__, __LINE__, #cond);                                   \
			return 1;                                                             \
		}                                                                             \
	} while (0)

struct mp_child {
	pid_t pid;
	int rfd; /* parent reads what the child writes */
	int wfd; /* parent writes what the child reads */
};

static int mp_node_open(struct vt_node *n, size_t len)
{
	struct ql_device *dev;
	int ret;

	memset(n, 0, sizeof(*n));
	/* parent: device A (a fresh soft+shm device); children: device B */
	ret = mp_in_child ? vt_dev_open_b(mp_p, &dev) : vt_dev_open(mp_p, &dev);
	return ret ? ret : vt_node_open(n, dev, len);
}

static int mp_qp_create(struct vt_node *n, struct vt_node_qp *q)
{
	return vt_node_qp_create(n, q, 256, 128, 64);
}

static int write_all(int fd, const char *s, size_t len)
{
	while (len) {
		ssize_t n = write(fd, s, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -EIO;
		s += n;
		len -= (size_t)n;
	}
	return 0;
}

static int mp_put(int fd, const char *line)
{
	int ret = write_all(fd, line, strlen(line));

	return ret ? ret : write_all(fd, "\n", 1);
}

/* One line, without its newline; -ETIMEDOUT or -EIO. */
static int mp_get(int fd, char *buf, size_t len, int timeout_ms)
{
	uint64_t deadline = vt_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	size_t n = 0;

	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int64_t left = (int64_t)(deadline - vt_now_ns()) / 1000000;
		char c;
		ssize_t r;

		if ((int64_t)(deadline - vt_now_ns()) <= 0)
			return -ETIMEDOUT;
		if (poll(&pfd, 1, (int)(left > 0 ? left : 1)) <= 0)
			continue;
		r = read(fd, &c, 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -EIO;
		if (c == '\n') {
			buf[n] = '\0';
			return 0;
		}
		if (n + 1 < len)
			buf[n++] = c;
	}
}

/* Send our parameters, read the peer's, connect. */
static int mp_exchange(struct vt_node_qp *q, int rfd, int wfd, const struct ql_qp_connect_opts *o)
{
	char line[512];
	int ret;

	ret = ql_conn_params_format(&q->local, line, sizeof(line));
	if (ret < 0 || (size_t)ret >= sizeof(line))
		return -EINVAL;
	ret = mp_put(wfd, line);
	if (ret)
		return ret;
	ret = mp_get(rfd, line, sizeof(line), 10000);
	if (ret)
		return ret;
	ret = ql_conn_params_parse(line, &q->remote);
	if (ret)
		return ret;
	ret = ql_qp_connect(q->qp, &q->remote, o);
	if (ret)
		fprintf(stderr, "%d: connect: %s (%s)\n", (int)getpid(), ql_strerror(ret),
			ql_error_detail());
	return ret;
}

static void on_alarm(int sig)
{
	static const char msg[] = "test_verbs_shm_mp: deadline passed (hang)\n";

	(void)sig;
	(void)!write(2, msg, sizeof(msg) - 1);
	_exit(3);
}

typedef int (*mp_child_fn)(int rfd, int wfd, void *arg);

/* Children still running; a failed test leaves some, the teardown ends them. */
static pid_t live[8];

static void mp_track(pid_t pid, bool add)
{
	for (int i = 0; i < 8; i++) {
		if (add ? live[i] == 0 : live[i] == pid) {
			live[i] = add ? pid : 0;
			return;
		}
	}
}

static int mp_teardown(void **state)
{
	for (int i = 0; i < 8; i++) {
		if (live[i] > 0) {
			kill(live[i], SIGKILL);
			waitpid(live[i], NULL, 0);
		}
		live[i] = 0;
	}
	return 0;
}

static void mp_spawn(struct mp_child *c, mp_child_fn fn, void *arg)
{
	int to_child[2], to_parent[2];
	pid_t pid;

	assert_int_equal(pipe(to_child), 0);
	assert_int_equal(pipe(to_parent), 0);
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int ret;

		mp_in_child = true;
		signal(SIGALRM, on_alarm);
		alarm(mp_p->ibv ? 90 : 30); /* rxe under emulation: ms per operation */
		close(to_child[1]);
		close(to_parent[0]);
		ret = fn(to_child[0], to_parent[1], arg);
		_exit(ret);
	}
	close(to_child[0]);
	close(to_parent[1]);
	mp_track(pid, true);
	c->pid = pid;
	c->rfd = to_parent[0];
	c->wfd = to_child[1];
}

/* The common start of a test: a child running fn, our node and QP, and the
 * two QPs connected through the pipes. */
static void mp_start(struct mp_child *c, mp_child_fn fn, struct vt_node *n, struct vt_node_qp *q)
{
	mp_spawn(c, fn, NULL);
	assert_int_equal(mp_node_open(n, MP_BUF_LEN), 0);
	assert_int_equal(mp_qp_create(n, q), 0);
	assert_int_equal(mp_exchange(q, c->rfd, c->wfd, NULL), 0);
}

/* Wait for a child: its exit status, or -1 (killed after the timeout). */
static int mp_wait(struct mp_child *c, int timeout_ms)
{
	uint64_t deadline = vt_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	int st = 0;

	for (;;) {
		pid_t r = waitpid(c->pid, &st, WNOHANG);

		if (r == c->pid)
			break;
		if (vt_now_ns() > deadline) {
			kill(c->pid, SIGKILL);
			waitpid(c->pid, &st, 0);
			fprintf(stderr, "child %d timed out\n", (int)c->pid);
			st = -1;
			goto out;
		}
		usleep(1000);
	}
	if (WIFSIGNALED(st)) {
		fprintf(stderr, "child %d killed by signal %d\n", (int)c->pid, WTERMSIG(st));
		st = -1;
	} else {
		st = WEXITSTATUS(st);
	}
out:
	mp_track(c->pid, false);
	close(c->rfd);
	close(c->wfd);
	return st;
}

/* Poll until one completion arrives (child side). */
static int ck_poll(struct ql_cq *cq, struct ibv_wc *wc)
{
	return vt_poll_one(cq, wc, 10000);
}

/* ---- WRITE, with the last-8-bytes visibility rule --------------------- */

#define WRITE_LEN 8192

/* Target: wait for the round number in the last 8 bytes, then the whole
 * payload must be there; acknowledge by an RDMA WRITE back. */
static int child_write_target(int rfd, int wfd, void *arg)
{
	struct vt_node n;
	struct vt_node_qp q;
	struct ibv_wc wc;
	char line[64];

	CK(mp_node_open(&n, MP_BUF_LEN) == 0);
	CK(mp_qp_create(&n, &q) == 0);
	CK(mp_exchange(&q, rfd, wfd, NULL) == 0);
	CK(mp_put(wfd, "ready") == 0);
	for (uint64_t r = 1; r <= WRITE_ROUNDS; r++) {
		uint64_t *last = (uint64_t *)(n.buf + WRITE_LEN - 8);
		uint64_t t0 = vt_now_ns();

		while (__atomic_load_n(last, __ATOMIC_ACQUIRE) != r)
			CK(vt_now_ns() - t0 < 10000000000ull);
		if (!vt_check(n.buf, WRITE_LEN - 8, (uint32_t)r)) {
			fprintf(stderr, "round %llu: payload incomplete behind the last 8 bytes\n",
				(unsigned long long)r);
			return 2;
		}
		/* ack: r into the parent's word at 32768 */
		memcpy(n.buf + 40000, &r, 8);
		CK(vt_post_write(q.qp, r, n.buf + 40000, 8, ql_mr_lkey(n.mr),
				 q.remote.vaddr + 32768, q.remote.rkey, IBV_SEND_SIGNALED) == 0);
		CK(ck_poll(q.scq, &wc) == 1);
		CK(wc.status == IBV_WC_SUCCESS);
	}
	CK(mp_get(rfd, line, sizeof(line), 10000) == 0);
	vt_node_qp_destroy(&q);
	vt_node_close(&n);
	return 0;
}

static void test_mp_write(void **state)
{
	struct mp_child c;
	struct vt_node n;
	struct vt_node_qp q;
	struct ibv_wc wc;
	char line[64];

	mp_start(&c, child_write_target, &n, &q);
	assert_int_equal(mp_get(c.rfd, line, sizeof(line), 10000), 0);
	assert_string_equal(line, "ready");
	assert_int_equal(q.remote.length, MP_BUF_LEN);

	for (uint64_t r = 1; r <= WRITE_ROUNDS; r++) {
		uint64_t *ack = (uint64_t *)(n.buf + 32768);
		uint64_t t0;

		vt_fill(n.buf, WRITE_LEN - 8, (uint32_t)r);
		memcpy(n.buf + WRITE_LEN - 8, &r, 8);
		assert_int_equal(vt_post_write(q.qp, r, n.buf, WRITE_LEN, ql_mr_lkey(n.mr),
					       q.remote.vaddr, q.remote.rkey, IBV_SEND_SIGNALED),
				 0);
		vt_expect_wc(q.scq, &wc, r, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
		t0 = vt_now_ns();
		while (__atomic_load_n(ack, __ATOMIC_ACQUIRE) != r) {
			if (vt_now_ns() - t0 > 10000000000ull)
				fail_msg("no ack for round %llu", (unsigned long long)r);
		}
	}
	assert_int_equal(mp_put(c.wfd, "done"), 0);
	assert_int_equal(mp_wait(&c, 10000), 0);
	vt_node_qp_destroy(&q);
	vt_node_close(&n);
}

/* ---- READ ------------------------------------------------------------- */

static int child_read_target(int rfd, int wfd, void *arg)
{
	struct vt_node n;
	struct vt_node_qp q;
	char line[64];

	CK(mp_node_open(&n, MP_BUF_LEN) == 0);
	vt_fill(n.buf, MP_BUF_LEN, 4242);
	CK(mp_qp_create(&n, &q) == 0);
	CK(mp_exchange(&q, rfd, wfd, NULL) == 0);
	CK(mp_put(wfd, "ready") == 0);
	CK(mp_get(rfd, line, sizeof(line), 10000) == 0);
	/* the reader's verdict; the region must be unchanged by READs */
	CK(strcmp(line, "done") == 0);
	CK(vt_check(n.buf, MP_BUF_LEN, 4242));
	vt_node_qp_destroy(&q);
	vt_node_close(&n);
	return 0;
}

static void test_mp_read(void **state)
{
	struct mp_child c;
	struct vt_node n;
	struct vt_node_qp q;
	struct ibv_wc wc;
	char line[64];

	mp_start(&c, child_read_target, &n, &q);
	assert_int_equal(mp_get(c.rfd, line, sizeof(line), 10000), 0);
	assert_string_equal(line, "ready");

	assert_int_equal(vt_post_read(q.qp, 1, n.buf, MP_BUF_LEN, ql_mr_lkey(n.mr), q.remote.vaddr,
				      q.remote.rkey, IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(q.scq, &wc, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
	assert_int_equal(wc.byte_len, MP_BUF_LEN);
	assert_true(vt_check(n.buf, MP_BUF_LEN, 4242));
	/* a small READ from the middle */
	memset(n.buf, 0, 256);
	assert_int_equal(vt_post_read(q.qp, 2, n.buf, 100, ql_mr_lkey(n.mr), q.remote.vaddr + 1000,
				      q.remote.rkey, IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(q.scq, &wc, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
	assert_int_equal(n.buf[100], 0);
	{
		uint8_t ref[1100];

		vt_fill(ref, sizeof(ref), 4242);
		assert_memory_equal(n.buf, ref + 1000, 100);
	}
	assert_int_equal(mp_put(c.wfd, "done"), 0);
	assert_int_equal(mp_wait(&c, 10000), 0);
	vt_node_qp_destroy(&q);
	vt_node_close(&n);
}

/* ---- SEND/RECV with immediate, and WRITE_WITH_IMM --------------------- */

static int child_echo(int rfd, int wfd, void *arg)
{
	struct vt_node n;
	struct vt_node_qp q;
	struct ibv_wc wc;
	char line[64];

	CK(mp_node_open(&n, MP_BUF_LEN) == 0);
	CK(mp_qp_create(&n, &q) == 0);
	CK(mp_exchange(&q, rfd, wfd, NULL) == 0);
	/* receives need the QP out of RESET; the peer waits for "ready" */
	CK(vt_post_recv(q.qp, 1, n.buf, 1024, ql_mr_lkey(n.mr)) == 0);
	CK(vt_post_recv(q.qp, 2, n.buf + 1024, 16, ql_mr_lkey(n.mr)) == 0);
	CK(mp_put(wfd, "ready") == 0);

	/* 1: a SEND_WITH_IMM of 300 bytes */
	CK(ck_poll(q.rcq, &wc) == 1);
	CK(wc.status == IBV_WC_SUCCESS);
	CK(wc.wr_id == 1);
	CK(wc.opcode == IBV_WC_RECV);
	CK(wc.byte_len == 300);
	CK(wc.wc_flags & IBV_WC_WITH_IMM);
	CK(wc.imm_data == htonl(0xfeed0001));
	CK(mp_p->ibv || wc.src_qp == q.remote.qpn); /* src_qp: UD only in libibverbs */
	CK(wc.qp_num == ql_qp_num(q.qp));
	CK(vt_check(n.buf, 300, 77));

	/* 2: a WRITE_WITH_IMM into 8192.. */
	CK(ck_poll(q.rcq, &wc) == 1);
	CK(wc.status == IBV_WC_SUCCESS);
	CK(wc.wr_id == 2);
	CK(wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM);
	CK(wc.byte_len == 5000);
	CK(wc.imm_data == htonl(0xfeed0002));
	CK(mp_p->ibv || wc.src_qp == q.remote.qpn); /* src_qp: UD only in libibverbs */
	CK(vt_check(n.buf + 8192, 5000, 78));

	/* reply: what we got, plus 1 in the immediate */
	CK(vt_post_send_imm(q.qp, 3, n.buf, 300, ql_mr_lkey(n.mr), htonl(0xfeed0003),
			    IBV_SEND_SIGNALED) == 0);
	CK(ck_poll(q.scq, &wc) == 1);
	CK(wc.status == IBV_WC_SUCCESS);
	CK(wc.opcode == IBV_WC_SEND);
	CK(mp_get(rfd, line, sizeof(line), 10000) == 0);
	vt_node_qp_destroy(&q);
	vt_node_close(&n);
	return 0;
}

static void test_mp_send_recv_imm(void **state)
{
	struct mp_child c;
	struct vt_node n;
	struct vt_node_qp q;
	struct ibv_wc wc;
	char line[64];

	mp_start(&c, child_echo, &n, &q);
	assert_int_equal(vt_post_recv(q.qp, 50, n.buf + 16384, 4096, ql_mr_lkey(n.mr)), 0);
	assert_int_equal(mp_get(c.rfd, line, sizeof(line), 10000), 0);
	assert_string_equal(line, "ready");

	vt_fill(n.buf, 300, 77);
	assert_int_equal(vt_post_send_imm(q.qp, 10, n.buf, 300, ql_mr_lkey(n.mr), htonl(0xfeed0001),
					  IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(q.scq, &wc, 10, IBV_WC_SUCCESS, IBV_WC_SEND);

	vt_fill(n.buf + 4096, 5000, 78);
	assert_int_equal(vt_post_write_imm(q.qp, 11, n.buf + 4096, 5000, ql_mr_lkey(n.mr),
					   q.remote.vaddr + 8192, q.remote.rkey, htonl(0xfeed0002),
					   IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(q.scq, &wc, 11, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);

	vt_expect_wc(q.rcq, &wc, 50, IBV_WC_SUCCESS, IBV_WC_RECV);
	assert_int_equal(wc.byte_len, 300);
	assert_true(wc.wc_flags & IBV_WC_WITH_IMM);
	assert_int_equal(wc.imm_data, htonl(0xfeed0003));
	if (!mp_p->ibv) /* libibverbs defines src_qp for UD only */
		assert_int_equal(wc.src_qp, q.remote.qpn);
	assert_true(vt_check(n.buf + 16384, 300, 77));

	assert_int_equal(mp_put(c.wfd, "done"), 0);
	assert_int_equal(mp_wait(&c, 10000), 0);
	vt_node_qp_destroy(&q);
	vt_node_close(&n);
}

/* ---- fetch-and-add from two processes --------------------------------- */

static int child_faa(int rfd, int wfd, void *arg)
{
	struct vt_node n;
	struct vt_node_qp q;
	struct ibv_wc wc[16];
	char line[64];
	int posted = 0, done = 0, inflight = 0;
	const int window = 16;

	CK(mp_node_open(&n, 4096) == 0);
	CK(mp_qp_create(&n, &q) == 0);
	CK(mp_exchange(&q, rfd, wfd, NULL) == 0);
	CK(mp_get(rfd, line, sizeof(line), 10000) == 0); /* "go" */
	while (done < FAA_PER_CHILD) {
		while (posted < FAA_PER_CHILD && inflight < window) {
			int slot = posted % window;

			CK(vt_post_atomic(q.qp, IBV_WR_ATOMIC_FETCH_AND_ADD, (uint64_t)slot,
					  n.buf + slot * 8, ql_mr_lkey(n.mr), q.remote.vaddr,
					  q.remote.rkey, 1, 0, IBV_SEND_SIGNALED) == 0);
			posted++;
			inflight++;
		}
		int got = ql_cq_poll(q.scq, 16, wc);

		CK(got >= 0);
		for (int i = 0; i < got; i++) {
			uint64_t orig;

			CK(wc[i].status == IBV_WC_SUCCESS);
			CK(wc[i].opcode == IBV_WC_FETCH_ADD);
			memcpy(&orig, n.buf + wc[i].wr_id * 8, 8);
			CK(orig < 2 * FAA_PER_CHILD);
		}
		done += got;
		inflight -= got;
	}
	vt_node_qp_destroy(&q);
	vt_node_close(&n);
	return 0;
}

static void test_mp_fetch_add_two_children(void **state)
{
	struct mp_child c[2];
	struct vt_node n;
	struct vt_node_qp q[2];
	uint64_t counter;

	mp_spawn(&c[0], child_faa, NULL);
	mp_spawn(&c[1], child_faa, NULL);
	assert_int_equal(mp_node_open(&n, 4096), 0);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(mp_qp_create(&n, &q[i]), 0);
		assert_int_equal(mp_exchange(&q[i], c[i].rfd, c[i].wfd, NULL), 0);
	}
	for (int i = 0; i < 2; i++)
		assert_int_equal(mp_put(c[i].wfd, "go"), 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(mp_wait(&c[i], 60000), 0);
	counter = __atomic_load_n((uint64_t *)n.buf, __ATOMIC_ACQUIRE);
	assert_int_equal(counter, 2 * FAA_PER_CHILD);
	for (int i = 0; i < 2; i++)
		vt_node_qp_destroy(&q[i]);
	vt_node_close(&n);
}

/* ---- a compare-and-swap spin lock ------------------------------------- */

/* Parent memory: lock word at 0, a plain (non-atomic) counter at 64. The
 * critical section is an RDMA READ, a local increment and an RDMA WRITE.
 * The lock is taken and released with atomics only: IBTA makes atomics
 * atomic against each other, not against an RDMA WRITE to the same word.
 * Kernel rxe (Linux 6.1) shows why: its CAS writes the word back even when
 * the compare fails, so a release by RDMA WRITE of 0 that lands between a
 * failed CAS's read and its write-back is undone, the lock word keeps the
 * releaser's id and both children spin forever: the shape of the one hang
 * of the rxe stage (every CAS completing, none getting 0, until the alarm
 * at 90 s). A CAS that returns our own id fails the child at once. */
static int child_lock(int rfd, int wfd, void *arg)
{
	uint64_t me = (uint64_t)(uintptr_t)arg;
	struct vt_node n;
	struct vt_node_qp q;
	struct ibv_wc wc;
	char line[64];
	uint64_t *old, *val;
	uint32_t lk;

	CK(mp_node_open(&n, 4096) == 0);
	CK(mp_qp_create(&n, &q) == 0);
	CK(mp_exchange(&q, rfd, wfd, NULL) == 0);
	CK(mp_get(rfd, line, sizeof(line), 10000) == 0); /* "go" */
	old = (uint64_t *)n.buf;
	val = (uint64_t *)(n.buf + 64);
	lk = ql_mr_lkey(n.mr);

	for (int i = 0; i < LOCK_PER_CHILD; i++) {
		/* acquire */
		for (;;) {
			CK(vt_post_atomic(q.qp, IBV_WR_ATOMIC_CMP_AND_SWP, 1, old, lk,
					  q.remote.vaddr, q.remote.rkey, 0, me,
					  IBV_SEND_SIGNALED) == 0);
			CK(ck_poll(q.scq, &wc) == 1);
			CK(wc.status == IBV_WC_SUCCESS);
			if (*old == 0)
				break;
			/* the other's; ours only if the lock broke */
			CK(*old == 3 - me);
		}
		/* read-modify-write of the plain counter */
		CK(vt_post_read(q.qp, 2, val, 8, lk, q.remote.vaddr + 64, q.remote.rkey,
				IBV_SEND_SIGNALED) == 0);
		CK(ck_poll(q.scq, &wc) == 1);
		CK(wc.status == IBV_WC_SUCCESS);
		*val += 1;
		/* write it back, then release (CAS me -> 0): same QP, so in
		 * this order */
		CK(vt_post_write(q.qp, 3, val, 8, lk, q.remote.vaddr + 64, q.remote.rkey, 0) == 0);
		CK(vt_post_atomic(q.qp, IBV_WR_ATOMIC_CMP_AND_SWP, 4, old, lk, q.remote.vaddr,
				  q.remote.rkey, me, 0, IBV_SEND_SIGNALED) == 0);
		CK(ck_poll(q.scq, &wc) == 1);
		CK(wc.status == IBV_WC_SUCCESS);
		CK(wc.wr_id == 4);
		CK(*old == me); /* it was ours until now */
	}
	vt_node_qp_destroy(&q);
	vt_node_close(&n);
	return 0;
}

static void test_mp_cas_spin_lock(void **state)
{
	struct mp_child c[2];
	struct vt_node n;
	struct vt_node_qp q[2];

	mp_spawn(&c[0], child_lock, (void *)(uintptr_t)1);
	mp_spawn(&c[1], child_lock, (void *)(uintptr_t)2);
	assert_int_equal(mp_node_open(&n, 4096), 0);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(mp_qp_create(&n, &q[i]), 0);
		assert_int_equal(mp_exchange(&q[i], c[i].rfd, c[i].wfd, NULL), 0);
	}
	for (int i = 0; i < 2; i++)
		assert_int_equal(mp_put(c[i].wfd, "go"), 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(mp_wait(&c[i], 100000), 0);
	assert_int_equal(*(volatile uint64_t *)n.buf, 0); /* released */
	assert_int_equal(*(volatile uint64_t *)(n.buf + 64), 2 * LOCK_PER_CHILD);
	for (int i = 0; i < 2; i++)
		vt_node_qp_destroy(&q[i]);
	vt_node_close(&n);
}

/* ---- a peer that dies ------------------------------------------------- */

/* Streams WRITEs of an increasing counter into the parent until killed. */
static int child_streamer(int rfd, int wfd, void *arg)
{
	struct vt_node n;
	struct vt_node_qp q;
	struct ibv_wc wc;
	uint64_t i = 0;

	CK(mp_node_open(&n, 4096) == 0);
	CK(mp_qp_create(&n, &q) == 0);
	CK(mp_exchange(&q, rfd, wfd, NULL) == 0);
	CK(mp_put(wfd, "ready") == 0);
	for (;;) {
		i++;
		memcpy(n.buf + (i & 7) * 8, &i, 8);
		CK(vt_post_write(q.qp, i, n.buf + (i & 7) * 8, 8, ql_mr_lkey(n.mr), q.remote.vaddr,
				 q.remote.rkey, (i & 7) == 7 ? IBV_SEND_SIGNALED : 0) == 0);
		if ((i & 7) == 7) {
			CK(ck_poll(q.scq, &wc) == 1);
			CK(wc.status == IBV_WC_SUCCESS);
		}
	}
	return 0;
}

/* Connects, says so, and exits without tearing anything down. */
static int child_quitter(int rfd, int wfd, void *arg)
{
	struct vt_node n;
	struct vt_node_qp q;
	char line[64];

	CK(mp_node_open(&n, 4096) == 0);
	CK(mp_qp_create(&n, &q) == 0);
	CK(mp_exchange(&q, rfd, wfd, NULL) == 0);
	CK(mp_put(wfd, "ready") == 0);
	CK(mp_get(rfd, line, sizeof(line), 10000) == 0);
	return 0;
}

static void survivor_setup(struct mp_child *c, struct vt_node *n, struct vt_node_qp *q,
			   mp_child_fn fn)
{
	struct ql_qp_connect_opts o;
	char line[64];

	ql_qp_connect_opts_default(&o);
	o.timeout = 8; /* ~1 ms */
	o.retry_cnt = 3;
	mp_spawn(c, fn, NULL);
	assert_int_equal(mp_node_open(n, 4096), 0);
	assert_int_equal(mp_qp_create(n, q), 0);
	assert_int_equal(mp_exchange(q, c->rfd, c->wfd, &o), 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(vt_post_recv(q->qp, 100 + i, n->buf + 1024 + i * 64, 64,
					      ql_mr_lkey(n->mr)),
				 0);
	assert_int_equal(mp_get(c->rfd, line, sizeof(line), 10000), 0);
	assert_string_equal(line, "ready");
}

/* Poll both CQs until the 4 receives (and the send, if any) are back. */
static void expect_survivor_completions(struct vt_node_qp *q, bool with_send)
{
	uint64_t deadline = vt_now_ns() + 10000000000ull;
	int recvs = 0, sends = 0;
	struct ibv_wc wc;

	while ((recvs < 4 || (with_send && sends < 1)) && vt_now_ns() < deadline) {
		int r = ql_cq_poll(q->rcq, 1, &wc);

		assert_true(r >= 0);
		if (r == 1) {
			assert_int_equal(wc.wr_id, 100 + recvs);
			assert_int_equal(wc.status, IBV_WC_WR_FLUSH_ERR);
			recvs++;
		}
		r = ql_cq_poll(q->scq, 1, &wc);
		assert_true(r >= 0);
		if (r == 1) {
			assert_int_equal(wc.wr_id, 999);
			if (wc.status != IBV_WC_RETRY_EXC_ERR)
				fail_msg("send to the dead peer: %s, expected RETRY_EXC_ERR",
					 ibv_wc_status_str(wc.status));
			sends++;
		}
	}
	assert_int_equal(recvs, 4);
	if (with_send)
		assert_int_equal(sends, 1);
	assert_int_equal(ql_qp_state(q->qp), IBV_QPS_ERR);
}

static void test_mp_peer_killed(void **state)
{
	struct mp_child c;
	struct vt_node n;
	struct vt_node_qp q;
	volatile uint64_t *seen;
	uint64_t t0;
	int st;

	survivor_setup(&c, &n, &q, child_streamer);
	seen = (volatile uint64_t *)n.buf;
	t0 = vt_now_ns();
	while (*seen < STREAM_WRITES) {
		if (vt_now_ns() - t0 > 10000000000ull)
			fail_msg("the streamer made no progress (%llu)", (unsigned long long)*seen);
		sched_yield();
	}
	kill(c.pid, SIGKILL);
	assert_int_equal(waitpid(c.pid, &st, 0), c.pid);
	mp_track(c.pid, false);
	assert_true(WIFSIGNALED(st));
	close(c.rfd);
	close(c.wfd);

	/* a send to the dead peer, posted before anything noticed */
	assert_int_equal(vt_post_send(q.qp, 999, n.buf, 8, ql_mr_lkey(n.mr), IBV_SEND_SIGNALED), 0);
	expect_survivor_completions(&q, true);
	vt_node_qp_destroy(&q);
	vt_node_close(&n);
}

static void test_mp_peer_exited(void **state)
{
	struct mp_child c;
	struct vt_node n;
	struct vt_node_qp q;

	VT_SOFT_ONLY(mp_p, "a peer that exits is noticed with nothing posted to it (IB has no "
			   "keepalive: an idle RC QP cannot tell)");

	survivor_setup(&c, &n, &q, child_quitter);
	assert_int_equal(mp_put(c.wfd, "bye"), 0);
	assert_int_equal(mp_wait(&c, 10000), 0);
	/* nothing posted to it: polling alone must notice */
	expect_survivor_completions(&q, false);
	vt_node_qp_destroy(&q);
	vt_node_close(&n);
}

/* ---- setup done by a thread that is gone ------------------------------ */

/* "Setup calls are thread-safe": a process may well do its setup on a
 * helper thread that then exits. The process is alive and must stay
 * reachable. */
struct setup_arg {
	struct vt_node n;
	struct vt_node_qp q;
	int ret;
};

static void *setup_thread(void *p)
{
	struct setup_arg *a = p;

	a->ret = mp_node_open(&a->n, MP_BUF_LEN);
	if (!a->ret)
		a->ret = mp_qp_create(&a->n, &a->q);
	return NULL;
}

static int child_thread_setup(int rfd, int wfd, void *arg)
{
	struct setup_arg a;
	struct ibv_wc wc;
	pthread_t th;
	char line[64];

	memset(&a, 0, sizeof(a));
	CK(pthread_create(&th, NULL, setup_thread, &a) == 0);
	CK(pthread_join(th, NULL) == 0);
	CK(a.ret == 0);
	CK(mp_exchange(&a.q, rfd, wfd, NULL) == 0);
	CK(vt_post_recv(a.q.qp, 1, a.n.buf + 4096, 64, ql_mr_lkey(a.n.mr)) == 0);
	CK(mp_put(wfd, "ready") == 0);
	CK(ck_poll(a.q.rcq, &wc) == 1);
	CK(wc.status == IBV_WC_SUCCESS);
	CK(wc.byte_len == 5);
	CK(memcmp(a.n.buf + 4096, "ping", 5) == 0);
	CK(mp_get(rfd, line, sizeof(line), 10000) == 0);
	CK(a.n.buf[0] == 0x5a);
	vt_node_qp_destroy(&a.q);
	vt_node_close(&a.n);
	return 0;
}

static void test_mp_setup_thread_exited(void **state)
{
	struct mp_child c;
	struct vt_node n;
	struct vt_node_qp q;
	struct ibv_wc wc;
	char line[64];

	mp_spawn(&c, child_thread_setup, NULL);
	assert_int_equal(mp_node_open(&n, 4096), 0);
	assert_int_equal(mp_qp_create(&n, &q), 0);
	assert_int_equal(mp_exchange(&q, c.rfd, c.wfd, NULL), 0);
	assert_int_equal(mp_get(c.rfd, line, sizeof(line), 10000), 0);
	assert_string_equal(line, "ready");

	memset(n.buf, 0x5a, 64);
	assert_int_equal(vt_post_write(q.qp, 1, n.buf, 64, ql_mr_lkey(n.mr), q.remote.vaddr,
				       q.remote.rkey, IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(q.scq, &wc, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	memcpy(n.buf + 128, "ping", 5);
	assert_int_equal(vt_post_send(q.qp, 2, n.buf + 128, 5, ql_mr_lkey(n.mr), IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(q.scq, &wc, 2, IBV_WC_SUCCESS, IBV_WC_SEND);
	assert_int_equal(ql_qp_state(q.qp), IBV_QPS_RTS);
	assert_int_equal(mp_put(c.wfd, "done"), 0);
	assert_int_equal(mp_wait(&c, 10000), 0);
	vt_node_qp_destroy(&q);
	vt_node_close(&n);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_mp_write, mp_teardown),
		cmocka_unit_test_teardown(test_mp_read, mp_teardown),
		cmocka_unit_test_teardown(test_mp_send_recv_imm, mp_teardown),
		cmocka_unit_test_teardown(test_mp_fetch_add_two_children, mp_teardown),
		cmocka_unit_test_teardown(test_mp_cas_spin_lock, mp_teardown),
		cmocka_unit_test_teardown(test_mp_peer_killed, mp_teardown),
		cmocka_unit_test_teardown(test_mp_peer_exited, mp_teardown),
		cmocka_unit_test_teardown(test_mp_setup_thread_exited, mp_teardown),
	};

	const struct vt_param *ibv = vt_ibv_param();
	char name[2 * QL_DEVICE_URI_MAX + 32];
	int failed = 0;

	signal(SIGALRM, on_alarm);
	signal(SIGPIPE, SIG_IGN);
	if (vt_soft_enabled()) {
		mp_p = &vt_params[1];
		alarm(100);
		failed += cmocka_run_group_tests_name("soft+shm multi-process", tests, NULL, NULL);
	}
	if (ibv) {
		mp_p = ibv;
		alarm(300);
		snprintf(name, sizeof(name), "%s (parent) <-> %s (children)", ibv->uri, ibv->uri_b);
		failed += _cmocka_run_group_tests(name, tests, sizeof(tests) / sizeof(tests[0]),
						  NULL, NULL);
	}
	alarm(0);
	return failed ? 1 : 0;
}
