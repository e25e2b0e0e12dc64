/* SPDX-License-Identifier: MIT */
/*
 * The SDR hot path (ql_sdr_progress: posting packets, polling the CQs,
 * setting bits, credits, NACKs and retransmissions) allocates nothing,
 * takes no lock and makes no system call (tests/hotpath.h): messages are
 * posted before the proof (posting a message takes the memory table's
 * lock: set-up, not hot path), then both ends' progress runs them to the
 * end (a) with the allocator and lock calls counted, (b) in a forked child
 * under a seccomp filter that kills it at any system call but read, write
 * and exit. A selective-repeat round (NACK, retransmission) is included by
 * taking packets out of a receiver's bitmap behind its back. On
 * soft://loop (soft+shm and soft+udp add the wire; their proofs are the
 * verbs layer's, test_verbs_hotpath).
 */
#define _GNU_SOURCE
#include "sdr_pair.h"

#include <pthread.h>
#include <stdlib.h>

#include "hotpath.h"
#include "sdr/sdr_int.h"

#define MSGS 4
#define LEN (1u << 20)

struct hp_env {
	struct sp_pair pp;
	uint8_t *src;
	struct ql_mr *mr;
	struct ql_sdr_recv *rx[MSGS];
	struct ql_sdr_send *tx[MSGS];
	int failed;
};

static int env_try_open(struct hp_env *e)
{
	static const struct vt_param loop = { .name = "loop", .uri = "soft://loop" };
	struct ql_sdr_config cfg;

	ql_sdr_config_default(&cfg);
	cfg.max_msg_size = LEN;
	cfg.slots = MSGS;
	cfg.recv_depth = 64; /* credit stalls and returns on the way */
	if (sp_pair_open(&loop, &cfg, &e->pp))
		return -1;
	return ql_sdr_buf_alloc(e->pp.s, LEN, (void **)&e->src, &e->mr);
}

static void env_open(struct hp_env *e)
{
	assert_int_equal(env_try_open(e), 0);
}

/* Post MSGS receives and sends (SR and NONE alternating). */
static int post(void *arg)
{
	struct hp_env *e = arg;

	for (int i = 0; i < MSGS; i++) {
		enum ql_sdr_rel rel = i % 2 ? QL_SDR_REL_NONE : QL_SDR_REL_SR;
		struct ql_sdr_recv_opts ro = { .rel = rel };
		struct ql_sdr_send_opts so = { .rel = rel };

		if (ql_sdr_recv_post(e->pp.r, LEN, &ro, &e->rx[i]) ||
		    ql_sdr_send_post(e->pp.s, e->src, LEN, e->mr, &so, &e->tx[i]))
			return -1;
	}
	return 0;
}

/* Both ends' progress until every message ended; 0 if all delivered. */
static int run(void *arg)
{
	struct hp_env *e = arg;

	for (long k = 0; k < 100000000L; k++) {
		int done = 0;

		if (ql_sdr_progress(e->pp.r) < 0 || ql_sdr_progress(e->pp.s) < 0)
			return -1;
		for (int i = 0; i < MSGS; i++) {
			int rs = 1, ss = 1;

			if (ql_sdr_recv_poll(e->rx[i], &rs) && ql_sdr_send_poll(e->tx[i], &ss)) {
				if (rs || ss)
					return -2;
				done++;
			}
		}
		if (done == MSGS)
			return 0;
	}
	return -3;
}

static void release(struct hp_env *e)
{
	for (int i = 0; i < MSGS; i++) {
		assert_int_equal(ql_sdr_recv_release(e->rx[i]), 0);
		assert_int_equal(ql_sdr_send_release(e->tx[i]), 0);
	}
}

/* A selective-repeat round inside the proof: once the first 8 packets of
 * the first message are in, the test takes them out of the receiver's
 * bitmap again (as if they had been lost), so the receiver NACKs (or the
 * sender's timer asks) and the sender retransmits, all in the loop. */
static int post_nacked(void *arg)
{
	struct hp_env *e = arg;
	struct ql_sdr_recv *rx;

	if (post(arg))
		return -1;
	rx = e->rx[0];
	while (rx->pkt_high <= 8) {
		ql_sdr_progress(e->pp.r);
		ql_sdr_progress(e->pp.s);
	}
	atomic_fetch_and(&rx->pkt_bits[0], ~0xffull);
	atomic_fetch_sub(&rx->pkts_done, 8);
	if (atomic_fetch_sub(&rx->chunk_count[0], 8) == e->pp.r->cfg.chunk_packets) {
		atomic_fetch_and(&rx->chunk_bits[0], ~1ull); /* chunk 0 was complete */
		atomic_fetch_sub(&rx->chunks_done, 1);
	}
	return 0;
}

static void test_no_alloc_no_lock(void **state)
{
	void *(*volatile my_malloc)(size_t) = malloc;
	void (*volatile my_free)(void *) = free;
	int (*volatile my_lock)(pthread_mutex_t *) = pthread_mutex_lock;
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	unsigned long n_alloc, n_lock;
	struct hp_env e = { 0 };
	struct ql_sdr_stats st;
	int rc;

	(void)state;
	if (!hp_available())
		skip(); /* ASan owns malloc */
	/* the counters see calls made while counting */
	hp_begin();
	my_free(my_malloc(32));
	my_lock(&m);
	hp_end(&n_alloc, &n_lock);
	pthread_mutex_unlock(&m);
	assert_int_equal(n_alloc, 2);
	assert_int_equal(n_lock, 1);

	env_open(&e);
	for (int round = 0; round < 3; round++) {
		/* the last round with a selective-repeat retransmission */
		assert_int_equal(round < 2 ? post(&e) : post_nacked(&e), 0);
		hp_begin();
		rc = run(&e);
		hp_end(&n_alloc, &n_lock);
		assert_int_equal(rc, 0);
		if (n_alloc || n_lock)
			fail_msg("progress: %lu allocator calls, %lu lock calls", n_alloc, n_lock);
		release(&e);
	}
	ql_sdr_conn_stats(e.pp.s, &st);
	assert_true(st.credit_stalls > 0);
	assert_int_equal(st.msgs_sent, 3 * MSGS);
	assert_true(st.nacks_received >= 1);
	assert_true(st.pkts_retransmitted >= 8);
	ql_sdr_buf_free(e.pp.s, e.src, e.mr);
	sp_pair_close(&e.pp);
}

/* The strict proof's set-up runs in the forked child: the connection is
 * made there (the soft NIC's state belongs to the process that made it). */
static int setup_plain(void *arg)
{
	return env_try_open(arg) || post(arg);
}

static int setup_nacked(void *arg)
{
	return env_try_open(arg) || post_nacked(arg);
}

static void test_strict(void **state)
{
	struct hp_env e = { 0 };
	char why[256];

	(void)state;
	if (hp_run_strict(setup_plain, run, &e, why, sizeof(why)))
		fail_msg("plain: %s", why);
	if (hp_run_strict(setup_nacked, run, &e, why, sizeof(why)))
		fail_msg("with a NACK round: %s", why);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_no_alloc_no_lock),
		cmocka_unit_test(test_strict),
	};

	return cmocka_run_group_tests_name("sdr hot path (soft://loop)", tests, NULL, NULL);
}
