/* SPDX-License-Identifier: MIT */
/*
 * test_udp_progress: soft+udp's progress modes (docs/progress.md).
 *
 *  - progress=auto follows the shared rule (ql__progress_rule, whose table
 *    test_progress_rule checks) on this process's CPUs, and a NIC thread
 *    counts as a spinning thread while it runs; progress=thread|caller and
 *    QLINK_PROGRESS are obeyed, an explicit progress= (auto included) wins
 *    over the variable; a bad option value is refused, a bad variable
 *    ignored;
 *  - caller mode has no NIC thread: nothing moves until the application
 *    polls, posts or calls ql_device_progress; the ACK of a request waits
 *    one round; a post on a streaming QP joins a transmit batch;
 *  - two threads pinned to the same CPU, each the only driver of its own
 *    device (one end of a SEND ping-pong and of a WRITE ping-pong), finish
 *    in bounded time;
 *  - several threads polling CQs of one caller-mode device at once (one
 *    progresses, the others go on) lose and duplicate nothing.
 */
#define _GNU_SOURCE
#include "verbs_fixture.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "providers/common/progress.h"
#include "providers/sudp/sudp.h"

#define PP_ROUNDS 300
#define PP_BOUND_NS (60ull * 1000000000ull) /* both ping-pongs on one CPU */

static const struct vt_param *udp(void)
{
	return &vt_params[2];
}

static bool is_caller(struct ql_device *dev)
{
	return ((struct sudp_device *)(void *)dev)->caller;
}

static int open_q(const char *query, struct ql_device **dev)
{
	char uri[QL_DEVICE_URI_MAX];
	size_t l;

	vt_dev_uri(udp(), uri, sizeof(uri));
	l = strlen(uri);
	if (query)
		snprintf(uri + l, sizeof(uri) - l, "?%s", query);
	return ql_device_open(uri, dev);
}

/* the current thread's CPUs, and back */
static cpu_set_t saved_set;

static void pin_process_to_one_cpu(void)
{
	cpu_set_t one;
	int cpu = -1;

	assert_int_equal(sched_getaffinity(0, sizeof(saved_set), &saved_set), 0);
	for (int c = 0; c < CPU_SETSIZE && cpu < 0; c++)
		if (CPU_ISSET(c, &saved_set))
			cpu = c;
	assert_true(cpu >= 0);
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	assert_int_equal(sched_setaffinity(0, sizeof(one), &one), 0);
}

static void unpin(void)
{
	assert_int_equal(sched_setaffinity(0, sizeof(saved_set), &saved_set), 0);
}

/* ---- the rule ------------------------------------------------------------ */

static void test_auto_follows_affinity(void **state)
{
	struct ql_device *d1, *d2, *d3;
	cpu_set_t set;
	unsigned n0;
	int ncpu;

	(void)state;
	unsetenv("QLINK_PROGRESS");
	/* one CPU: caller, whatever runs already */
	pin_process_to_one_cpu();
	assert_int_equal(open_q(NULL, &d1), 0);
	assert_true(is_caller(d1));
	assert_int_equal(open_q("progress=auto", &d2), 0);
	assert_true(is_caller(d2));
	/* asked for: a NIC thread even so */
	assert_int_equal(open_q("progress=thread", &d3), 0);
	assert_false(is_caller(d3));
	assert_int_equal(ql_device_close(d3), 0);
	assert_int_equal(ql_device_close(d2), 0);
	assert_int_equal(ql_device_close(d1), 0);
	unpin();

	/* this host's own CPUs: what the rule says for them (a 2-core CI
	 * host: caller; 3 or more: a thread for the first device, and the
	 * second one counts it) */
	assert_int_equal(sched_getaffinity(0, sizeof(set), &set), 0);
	ncpu = CPU_COUNT(&set);
	n0 = ql__progress_threads();
	assert_int_equal(open_q(NULL, &d1), 0);
	assert_int_equal(is_caller(d1), ql__progress_rule((unsigned)ncpu, n0, 1));
	/* its NIC thread, if any, is one spinning thread more */
	assert_int_equal(ql__progress_threads(), n0 + !is_caller(d1));
	assert_int_equal(open_q(NULL, &d2), 0);
	assert_int_equal(is_caller(d2), ql__progress_rule((unsigned)ncpu, n0 + !is_caller(d1), 1));
	assert_int_equal(ql_device_close(d2), 0);
	assert_int_equal(ql_device_close(d1), 0);
	assert_int_equal(ql__progress_threads(), n0);
	/* a device asked for a thread counts it, and uncounts it at close */
	assert_int_equal(open_q("progress=thread", &d1), 0);
	assert_int_equal(ql__progress_threads(), n0 + 1);
	assert_int_equal(ql_device_close(d1), 0);
	assert_int_equal(ql__progress_threads(), n0);
	print_message("[     NOTE ] %d CPUs here: auto runs the first device in %s mode\n", ncpu,
		      ql__progress_rule((unsigned)ncpu, n0, 1) ? "caller" : "thread");
}

static void test_progress_option(void **state)
{
	struct ql_device *d;

	(void)state;
	assert_int_equal(open_q("progress=caller", &d), 0);
	assert_true(is_caller(d));
	assert_int_equal(ql_device_close(d), 0);
	assert_int_equal(open_q("progress=thread", &d), 0);
	assert_false(is_caller(d));
	/* a NIC thread needs no help: nothing to do in the caller */
	assert_int_equal(ql_device_progress(d), 0);
	assert_int_equal(ql_device_close(d), 0);
	assert_int_equal(open_q("progress=sometimes", &d), -EINVAL);
	assert_int_equal(open_q("progress=", &d), -EINVAL);

	/* the environment sets what auto means, never an explicit value */
	setenv("QLINK_PROGRESS", "thread", 1);
	assert_int_equal(open_q(NULL, &d), 0);
	assert_false(is_caller(d));
	assert_int_equal(ql_device_close(d), 0);
	assert_int_equal(open_q("progress=caller", &d), 0);
	assert_true(is_caller(d));
	assert_int_equal(ql_device_close(d), 0);
	setenv("QLINK_PROGRESS", "caller", 1);
	assert_int_equal(open_q(NULL, &d), 0);
	assert_true(is_caller(d));
	assert_int_equal(ql_device_close(d), 0);
	assert_int_equal(open_q("progress=thread", &d), 0);
	assert_false(is_caller(d));
	assert_int_equal(ql_device_close(d), 0);
	/* an explicit progress=auto is the rule's, not the variable's: on
	 * one CPU the rule says caller */
	setenv("QLINK_PROGRESS", "thread", 1);
	pin_process_to_one_cpu();
	assert_int_equal(open_q("progress=auto", &d), 0);
	assert_true(is_caller(d));
	assert_int_equal(ql_device_close(d), 0);
	/* a variable that names no mode is ignored: the rule (caller on one
	 * CPU), and the device opens */
	setenv("QLINK_PROGRESS", "sometimes", 1);
	assert_int_equal(open_q(NULL, &d), 0);
	assert_true(is_caller(d));
	assert_int_equal(ql_device_close(d), 0);
	unpin();
	unsetenv("QLINK_PROGRESS");
}

/* ---- caller mode: nothing moves unless the application calls ------------ */

/* an RC pair, both devices in caller mode */
static struct vt_pair *caller_pair(const struct vt_opts *o)
{
	struct vt_pair *pr = NULL;

	setenv("QLINK_PROGRESS", "caller", 1);
	assert_int_equal(vt_pair_create(udp(), o, &pr), 0);
	unsetenv("QLINK_PROGRESS");
	assert_true(is_caller(pr->a.dev) && is_caller(pr->b.dev));
	return pr;
}

/* a's next send completion, successful, within 5 s; `peer` (if any) runs
 * rounds meanwhile */
static void await_send_completion(struct vt_pair *pr, struct ql_device *peer, uint64_t wr_id)
{
	uint64_t until = vt_now_ns() + 5000000000ull;
	struct ibv_wc wc;
	int n = 0;

	while (vt_now_ns() < until && (n = ql_cq_poll(pr->a.scq, 1, &wc)) == 0)
		if (peer)
			(void)ql_device_progress(peer);
	assert_int_equal(n, 1);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	assert_int_equal(wc.wr_id, wr_id);
}

static void test_caller_needs_caller(void **state)
{
	struct vt_pair *pr;
	struct vt_opts o = { .type = IBV_QPT_RC };
	struct ibv_wc wc;
	uint64_t until;

	(void)state;
	pr = caller_pair(&o);
	memset(pr->b.buf, 0, 8);
	memcpy(pr->a.buf, "caller!", 8);
	/* the post puts the packet on the wire; nobody runs b's NIC */
	assert_int_equal(vt_post_write(pr->a.qp, 1, pr->a.buf, 8, ql_mr_lkey(pr->a.mr),
				       (uintptr_t)pr->b.buf, ql_mr_rkey(pr->b.mr),
				       IBV_SEND_SIGNALED),
			 0);
	until = vt_now_ns() + 50000000ull;
	while (vt_now_ns() < until)
		assert_int_equal(ql_cq_poll(pr->a.scq, 1, &wc), 0);
	assert_int_equal(memcmp(pr->b.buf, "\0\0\0\0\0\0\0\0", 8), 0);
	/* b's progress places it and ACKs; a's poll completes it */
	await_send_completion(pr, pr->b.dev, 1);
	assert_memory_equal(pr->b.buf, "caller!", 8);
	vt_pair_destroy(pr);
}

static uint64_t tx_packets(struct ql_device *dev)
{
	struct ql_device_counters c;

	/* not vt_counters: that runs a round first */
	assert_int_equal(ql_device_counters(dev, &c), 0);
	return c.tx_packets;
}

/* b runs rounds until the 8 bytes a wrote arrive: the round that places
 * them has just returned */
static void progress_until(struct ql_device *dev, const uint8_t *buf, const char *want)
{
	uint64_t until = vt_now_ns() + 5000000000ull;

	while (memcmp(buf, want, 8) != 0) {
		assert_true(vt_now_ns() < until);
		(void)ql_device_progress(dev);
	}
}

/* a WRITEs the 8 bytes at its buf + 32 to b's buf (signaled, wr_id), and
 * b runs rounds until they are placed: the round that placed them has just
 * returned */
static void write_a_to_b(struct vt_pair *pr, uint64_t wr_id)
{
	char want[8];

	memcpy(want, pr->a.buf + 32, 8);
	assert_int_equal(vt_post_write(pr->a.qp, wr_id, pr->a.buf + 32, 8, ql_mr_lkey(pr->a.mr),
				       (uintptr_t)pr->b.buf, ql_mr_rkey(pr->b.mr),
				       IBV_SEND_SIGNALED),
			 0);
	progress_until(pr->b.dev, pr->b.buf, want);
}

/* Caller mode: the ACK of a request waits for the responder's next round
 * (docs/progress.md §4): none in the round that placed the data, the ACK
 * behind the reply when the application answers, alone on the next round
 * when it does not. */
static void test_ack_waits_one_round(void **state)
{
	struct vt_opts o = { .type = IBV_QPT_RC };
	struct vt_pair *pr;
	uint64_t tx;

	(void)state;
	pr = caller_pair(&o);
	memset(pr->a.buf, 0, 64);
	memset(pr->b.buf, 0, 64);
	memcpy(pr->a.buf + 32, "ping!!!", 8);
	memcpy(pr->b.buf + 32, "pong!!!", 8);

	/* ping-pong: the reply carries the ACK in the same sendmmsg */
	tx = tx_packets(pr->b.dev);
	write_a_to_b(pr, 1);
	assert_int_equal(tx_packets(pr->b.dev), tx); /* held */
	assert_int_equal(vt_post_write(pr->b.qp, 2, pr->b.buf + 32, 8, ql_mr_lkey(pr->b.mr),
				       (uintptr_t)pr->a.buf, ql_mr_rkey(pr->a.mr), 0),
			 0);
	assert_int_equal(tx_packets(pr->b.dev), tx + 2); /* the reply and the ACK */
	progress_until(pr->a.dev, pr->a.buf, "pong!!!");
	await_send_completion(pr, NULL, 1);

	/* one way: the next round sends the ACK alone */
	memcpy(pr->a.buf + 32, "again!!", 8);
	tx = tx_packets(pr->b.dev);
	write_a_to_b(pr, 3);
	assert_int_equal(tx_packets(pr->b.dev), tx);
	assert_true(ql_device_progress(pr->b.dev) > 0);
	assert_int_equal(tx_packets(pr->b.dev), tx + 1);
	await_send_completion(pr, NULL, 3);
	vt_pair_destroy(pr);
}

/* Caller mode's transmit batching (docs/progress.md §3): while SUDP_TX_STREAM
 * of a QP's WRs are in flight (sent, not acknowledged: b does not run), a
 * post joins the batch instead of sending; the post that fills the batch to
 * SUDP_BATCH WRs sends it whole, and the next round sends what is left.
 * Every WRITE lands, once, and the last one's completion comes. */
static void test_post_batches_when_streaming(void **state)
{
	struct vt_opts o = { .type = IBV_QPT_RC, .max_send_wr = 128 };
	const uint32_t total = SUDP_TX_STREAM + SUDP_BATCH + 1;
	struct vt_pair *pr;
	uint64_t tx0;

	(void)state;
	pr = caller_pair(&o);
	memset(pr->b.buf, 0, total * 8);
	tx0 = tx_packets(pr->a.dev);
	for (uint32_t i = 1; i <= total; i++) {
		uint64_t word = 0x5157000000000000ull | i, sent;

		memcpy(pr->a.buf + i * 8, &word, 8);
		assert_int_equal(vt_post_write(pr->a.qp, i, pr->a.buf + i * 8, 8,
					       ql_mr_lkey(pr->a.mr), (uintptr_t)pr->b.buf + i * 8,
					       ql_mr_rkey(pr->b.mr),
					       i == total ? IBV_SEND_SIGNALED : 0),
				 0);
		sent = tx_packets(pr->a.dev) - tx0;
		if (i <= SUDP_TX_STREAM)
			assert_int_equal(sent, i); /* not streaming yet: out at once */
		else if (i < SUDP_TX_STREAM + SUDP_BATCH)
			assert_int_equal(sent, SUDP_TX_STREAM); /* joins the batch */
		else if (i == SUDP_TX_STREAM + SUDP_BATCH)
			assert_int_equal(sent, i); /* the full batch, in one round */
		else
			assert_int_equal(sent, i - 1); /* a new batch */
	}
	/* the next round sends the rest */
	(void)ql_device_progress(pr->a.dev);
	assert_int_equal(tx_packets(pr->a.dev) - tx0, total);
	await_send_completion(pr, pr->b.dev, total);
	for (uint32_t i = 1; i <= total; i++) {
		uint64_t word;

		memcpy(&word, pr->b.buf + i * 8, 8);
		assert_int_equal(word, 0x5157000000000000ull | i);
	}
	vt_pair_destroy(pr);
}

/* ---- two threads, one CPU ------------------------------------------------ */

struct pp_end {
	struct vt_end *me;
	const struct vt_end *peer;
	bool server;
	bool write; /* WRITE ping-pong (the seq word), else SEND/RECV */
	int rounds;
	int done;
	uint64_t until;
	struct pp_end *other;
	atomic_bool finished;
};

/* Two threads on one CPU: an empty poll now and then gives the CPU to the
 * other (the library never yields in a poll; an application sharing a core
 * does, docs/progress.md) */
static void pp_idle(unsigned int *spins)
{
	if ((++*spins & 15) == 0)
		sched_yield();
}

/* One completion from cq, polled by this thread only. */
static bool pp_wait(struct ql_cq *cq, struct ibv_wc *wc, uint64_t until)
{
	unsigned int spins = 0;
	int n;

	while ((n = ql_cq_poll(cq, 1, wc)) == 0) {
		if (vt_now_ns() > until)
			return false;
		pp_idle(&spins);
	}
	return n == 1 && wc->status == IBV_WC_SUCCESS;
}

/* WRITE ping-pong: each side writes the round number into the other's
 * buffer and spins on its own until the peer's arrives, driving its own
 * device with ql_device_progress while it spins (a WRITE has no receive
 * completion). */
static void *pp_write(struct pp_end *e)
{
	volatile uint64_t *in = (volatile uint64_t *)(void *)e->me->buf;
	uint64_t *out = (uint64_t *)(void *)(e->me->buf + 64);
	struct ibv_wc wc;
	unsigned int spins = 0;

	for (int i = 1; i <= e->rounds; i++) {
		if (e->server)
			while (*in != (uint64_t)i) {
				(void)ql_device_progress(e->me->dev);
				if (vt_now_ns() > e->until)
					return NULL;
				pp_idle(&spins);
			}
		*out = (uint64_t)i;
		if (vt_post_write(e->me->qp, (uint64_t)i, out, 8, ql_mr_lkey(e->me->mr),
				  (uintptr_t)e->peer->buf, ql_mr_rkey(e->peer->mr),
				  IBV_SEND_SIGNALED) ||
		    !pp_wait(e->me->scq, &wc, e->until))
			return NULL;
		if (!e->server)
			while (*in != (uint64_t)i) {
				(void)ql_device_progress(e->me->dev);
				if (vt_now_ns() > e->until)
					return NULL;
				pp_idle(&spins);
			}
		e->done = i;
	}
	return NULL;
}

static void *pp_send(struct pp_end *e)
{
	uint8_t *rx = e->me->buf + 4096;
	uint32_t lkey = ql_mr_lkey(e->me->mr);
	struct ibv_wc wc;

	/* the receive for the next message is always posted before the
	 * message that provokes it is sent (no RNR wait) */
	if (vt_post_recv(e->me->qp, 1, rx, 64, lkey))
		return NULL;
	for (int i = 1; i <= e->rounds; i++) {
		if (e->server) {
			if (!pp_wait(e->me->rcq, &wc, e->until) || wc.wr_id != (uint64_t)i ||
			    *(uint32_t *)(void *)rx != (uint32_t)i ||
			    vt_post_recv(e->me->qp, (uint64_t)i + 1, rx, 64, lkey))
				return NULL;
		}
		*(uint32_t *)(void *)e->me->buf = (uint32_t)i;
		if (vt_post_send(e->me->qp, (uint64_t)i, e->me->buf, 8, lkey, IBV_SEND_SIGNALED) ||
		    !pp_wait(e->me->scq, &wc, e->until))
			return NULL;
		if (!e->server) {
			if (!pp_wait(e->me->rcq, &wc, e->until) || wc.wr_id != (uint64_t)i ||
			    *(uint32_t *)(void *)rx != (uint32_t)i ||
			    vt_post_recv(e->me->qp, (uint64_t)i + 1, rx, 64, lkey))
				return NULL;
		}
		e->done = i;
	}
	return NULL;
}

static void *pp_main(void *arg)
{
	struct pp_end *e = arg;
	unsigned int spins = 0;
	void *r = e->write ? pp_write(e) : pp_send(e);

	/* Caller mode: the ACK of the last message received goes out on
	 * this side's next call (docs/progress.md §4), and the peer's last
	 * send completion waits for it: keep calling until the peer is
	 * done, as an application on a caller-mode device does. */
	atomic_store(&e->finished, true);
	while (!atomic_load(&e->other->finished) && vt_now_ns() <= e->until) {
		(void)ql_device_progress(e->me->dev);
		pp_idle(&spins);
	}
	return r;
}

static void one_cpu_pingpong(bool write)
{
	struct vt_opts o = { .type = IBV_QPT_RC, .max_recv_wr = 64 };
	struct pp_end a, b;
	struct vt_pair *pr;
	pthread_t ta, tb;
	uint64_t t0, dt;

	unsetenv("QLINK_PROGRESS");
	pin_process_to_one_cpu(); /* the threads below inherit it */
	assert_int_equal(vt_pair_create(udp(), &o, &pr), 0);
	/* the default on one CPU */
	assert_true(is_caller(pr->a.dev) && is_caller(pr->b.dev));
	memset(pr->a.buf, 0, 8);
	memset(pr->b.buf, 0, 8);
	t0 = vt_now_ns();
	a = (struct pp_end){ .me = &pr->a,
			     .peer = &pr->b,
			     .write = write,
			     .rounds = PP_ROUNDS,
			     .until = t0 + PP_BOUND_NS };
	b = a;
	b.me = &pr->b;
	b.peer = &pr->a;
	b.server = true;
	a.other = &b;
	b.other = &a;
	assert_int_equal(pthread_create(&tb, NULL, pp_main, &b), 0);
	assert_int_equal(pthread_create(&ta, NULL, pp_main, &a), 0);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	dt = vt_now_ns() - t0;
	unpin();
	print_message("[     NOTE ] %s ping-pong, both ends on one CPU: %d/%d rounds, %.1f us "
		      "each\n",
		      write ? "WRITE" : "SEND", a.done, PP_ROUNDS,
		      (double)dt / 1000.0 / (a.done ? a.done : 1));
	assert_int_equal(a.done, PP_ROUNDS);
	assert_int_equal(b.done, PP_ROUNDS);
	assert_true(dt < PP_BOUND_NS);
	vt_pair_destroy(pr);
}

static void test_one_cpu_send_pingpong(void **state)
{
	(void)state;
	one_cpu_pingpong(false);
}

static void test_one_cpu_write_pingpong(void **state)
{
	(void)state;
	one_cpu_pingpong(true);
}

/* ---- several pollers of one device ---------------------------------------- */

#define MT_QPS 3
#define MT_MSGS 400

struct mt_arg {
	struct vt_node_qp *q;
	uint8_t *buf;
	uint32_t lkey;
	bool sender;
	int got;
	uint64_t until;
	struct mt_arg *other; /* the thread at the QP's other end */
	atomic_bool finished;
};

static void *mt_main(void *arg)
{
	struct mt_arg *m = arg;
	struct ibv_wc wc;
	int n;

	for (int i = 0; i < MT_MSGS; i++) {
		if (m->sender) {
			if (vt_post_send(m->q->qp, (uint64_t)i, m->buf, 16, m->lkey,
					 IBV_SEND_SIGNALED))
				return NULL;
			while ((n = ql_cq_poll(m->q->scq, 1, &wc)) == 0)
				if (vt_now_ns() > m->until)
					return NULL;
		} else {
			while ((n = ql_cq_poll(m->q->rcq, 1, &wc)) == 0)
				if (vt_now_ns() > m->until)
					return NULL;
			if (n == 1 && wc.wr_id != (uint64_t)i)
				return NULL; /* lost or duplicated */
			if (n == 1 && wc.status == IBV_WC_SUCCESS &&
			    vt_post_recv(m->q->qp, (uint64_t)(i + MT_MSGS), m->buf, 64, m->lkey))
				return NULL;
		}
		if (n != 1 || wc.status != IBV_WC_SUCCESS)
			break;
		m->got++;
	}
	/* the sender's last completion needs the receiver's next call
	 * (docs/progress.md §4): the receiver polls until the sender is done */
	atomic_store(&m->finished, true);
	while (!m->sender && !atomic_load(&m->other->finished) && vt_now_ns() <= m->until)
		(void)ql_cq_poll(m->q->rcq, 1, &wc);
	return NULL;
}

static void test_many_pollers_one_device(void **state)
{
	struct vt_node na, nb;
	struct vt_node_qp qa[MT_QPS], qb[MT_QPS];
	struct mt_arg ma[MT_QPS], mb[MT_QPS];
	pthread_t ta[MT_QPS], tb[MT_QPS];
	struct ql_device *da, *db;
	struct ql_qp_connect_opts co;
	uint64_t until = vt_now_ns() + 60000000000ull;

	(void)state;
	ql_qp_connect_opts_default(&co);
	assert_int_equal(open_q("progress=caller", &da), 0);
	assert_int_equal(open_q("progress=caller", &db), 0);
	memset(&na, 0, sizeof(na));
	memset(&nb, 0, sizeof(nb));
	assert_int_equal(vt_node_open(&na, da, 1 << 16), 0);
	assert_int_equal(vt_node_open(&nb, db, 1 << 16), 0);
	for (int i = 0; i < MT_QPS; i++) {
		assert_int_equal(vt_node_qp_create(&na, &qa[i], 2 * MT_MSGS, MT_MSGS, 64), 0);
		assert_int_equal(vt_node_qp_create(&nb, &qb[i], 2 * MT_MSGS, 2 * MT_MSGS, 64), 0);
		assert_int_equal(ql_qp_connect(qa[i].qp, &qb[i].local, &co), 0);
		assert_int_equal(ql_qp_connect(qb[i].qp, &qa[i].local, &co), 0);
		/* every receive the sender's messages need, posted up front */
		for (int k = 0; k < MT_MSGS; k++)
			assert_int_equal(vt_post_recv(qb[i].qp, (uint64_t)k,
						      nb.buf + 1024 * (size_t)i, 64,
						      ql_mr_lkey(nb.mr)),
					 0);
		ma[i] = (struct mt_arg){ .q = &qa[i],
					 .buf = na.buf + 1024 * (size_t)i,
					 .lkey = ql_mr_lkey(na.mr),
					 .sender = true,
					 .until = until };
		mb[i] = (struct mt_arg){ .q = &qb[i],
					 .buf = nb.buf + 1024 * (size_t)i,
					 .lkey = ql_mr_lkey(nb.mr),
					 .until = until };
		ma[i].other = &mb[i];
		mb[i].other = &ma[i];
	}
	/* 2 x MT_QPS threads, each polling its own CQs: on each device
	 * MT_QPS of them try to run its NIC at once */
	for (int i = 0; i < MT_QPS; i++) {
		assert_int_equal(pthread_create(&tb[i], NULL, mt_main, &mb[i]), 0);
		assert_int_equal(pthread_create(&ta[i], NULL, mt_main, &ma[i]), 0);
	}
	for (int i = 0; i < MT_QPS; i++) {
		pthread_join(ta[i], NULL);
		pthread_join(tb[i], NULL);
	}
	for (int i = 0; i < MT_QPS; i++) {
		assert_int_equal(ma[i].got, MT_MSGS);
		assert_int_equal(mb[i].got, MT_MSGS);
	}
	for (int i = 0; i < MT_QPS; i++) {
		vt_node_qp_destroy(&qa[i]);
		vt_node_qp_destroy(&qb[i]);
	}
	vt_node_close(&na);
	vt_node_close(&nb);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_auto_follows_affinity),
		cmocka_unit_test(test_progress_option),
		cmocka_unit_test(test_caller_needs_caller),
		cmocka_unit_test(test_ack_waits_one_round),
		cmocka_unit_test(test_post_batches_when_streaming),
		cmocka_unit_test(test_one_cpu_send_pingpong),
		cmocka_unit_test(test_one_cpu_write_pingpong),
		cmocka_unit_test(test_many_pollers_one_device),
	};

	if (!vt_udp_enabled()) {
		print_message("QLINK_TEST_UDP=0: nothing to run\n");
		return 0;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
