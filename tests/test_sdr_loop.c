/* SPDX-License-Identifier: MIT */
/*
 * SDR over one process's pair of devices, once per URI (soft://loop,
 * soft+shm, soft+udp; ibv with QLINK_TEST_IBV_A): messages from 1 byte to
 * the largest slot arrive byte-identical, each packet exactly once (the
 * bitmaps full, no duplicate, no drop), under both reliabilities; a length
 * or reliability the receiver did not post fails the message on both sides;
 * the user bits travel; slots are reused round-robin; chunk callbacks fire
 * once per chunk. A datagram the kernel drops at a soft+udp device's full
 * socket buffer (a NIC starved on a loaded host) is the one loss loopback
 * has: the devices count it (rx_kernel_drops), and only a counted drop
 * excuses a partial REL_NONE message or SR's repair of it.
 */
#define _GNU_SOURCE
#include "sdr_pair.h"

#include <stdbool.h>
#include <stdlib.h>

#define BIG (64u << 20)

static size_t big_len(const struct vt_param *p)
{
	/* soft+udp moves ~100 MB/s at best on a loaded 2-core host */
	return p->udp || p->ibv ? (8u << 20) : BIG;
}

struct chunks_seen {
	uint32_t n;
	uint8_t seen[4096];
	int dup;
};

static void on_chunk(struct ql_sdr_recv *rx, uint32_t chunk, void *arg)
{
	struct chunks_seen *cs = arg;

	(void)rx;
	if (chunk < sizeof(cs->seen)) {
		if (cs->seen[chunk])
			cs->dup++;
		cs->seen[chunk] = 1;
	}
	cs->n++;
}

/* The datagrams the kernel dropped at a device's socket (soft+udp's
 * rx_kernel_drops, a full receive buffer; 0 on the other soft providers,
 * and on ibv, which has no such counter: -EOPNOTSUPP). */
static uint64_t kernel_drops(struct ql_device *dev)
{
	struct ql_device_counters c;
	int ret = ql_device_counters(dev, &c);

	if (ret == -EOPNOTSUPP)
		return 0;
	assert_int_equal(ret, 0);
	return c.rx_kernel_drops;
}

/* One message of len bytes: delivered, identical, every packet once. */
static void one(struct sp_pair *pp, uint8_t *src, struct ql_mr *mr, size_t len, enum ql_sdr_rel rel,
		uint32_t seed)
{
	struct ql_sdr_recv_opts ro = { .rel = rel };
	struct ql_sdr_send_opts so = { .rel = rel, .user = seed & 15 };
	struct ql_sdr_stats r0, r1, s0, s1;
	struct ql_sdr_recv *rx;
	struct ql_sdr_send *tx;
	struct chunks_seen *cs = calloc(1, sizeof(*cs));
	uint32_t mtu = ql_sdr_conn_mtu(pp->r), npk = (uint32_t)((len + mtu - 1) / mtu);
	int rst = 1, sst = 1;
	uint64_t kd_r, kd_s;
	bool lost_r, lost_s;

	assert_non_null(cs);
	ro.on_chunk = on_chunk;
	ro.arg = cs;
	vt_fill(src, len, seed);
	ql_sdr_conn_stats(pp->r, &r0);
	ql_sdr_conn_stats(pp->s, &s0);
	assert_int_equal(ql_sdr_recv_post(pp->r, len, &ro, &rx), 0);
	assert_int_equal(ql_sdr_send_post(pp->s, src, len, mr, &so, &tx), 0);
	kd_r = kernel_drops(pp->dr);
	kd_s = kernel_drops(pp->ds);
	assert_int_equal(sp_run(pp, rx, tx, 60000, &rst, &sst), 0);
	/* Loopback loses nothing unless the kernel drops a datagram at a
	 * device's full socket buffer (a NIC thread starved on a loaded host),
	 * which the device counts: the receiver's drop is what makes a
	 * REL_NONE message partial, and only then; either end's drop (data,
	 * or an ACK) is what makes SR retransmit, and only then. */
	lost_r = kernel_drops(pp->dr) > kd_r;
	lost_s = kernel_drops(pp->ds) > kd_s;
	if (rel == QL_SDR_REL_NONE && rst == -ENODATA && lost_r) {
		print_message("len %zu rel none: partial after a kernel drop at the receiver\n",
			      len);
		assert_int_equal(ql_sdr_recv_release(rx), 0);
		assert_int_equal(ql_sdr_send_release(tx), 0);
		free(cs);
		return;
	}
	assert_int_equal(rst, 0);
	assert_int_equal(sst, 0);
	assert_int_equal(ql_sdr_recv_len(rx), len);
	assert_true(vt_check(ql_sdr_recv_data(rx), len, seed));
	assert_int_equal(ql_sdr_recv_packets(rx), npk);
	assert_int_equal(ql_sdr_recv_bitmap(rx, NULL, 0), npk);
	for (uint32_t c = 0; c < ql_sdr_recv_chunks(rx); c++)
		assert_true(ql_sdr_recv_chunk_done(rx, c));
	assert_int_equal(cs->n, ql_sdr_recv_chunks(rx));
	assert_int_equal(cs->dup, 0);
	assert_int_equal(ql_sdr_recv_user(rx), seed & 15);
	ql_sdr_conn_stats(pp->r, &r1);
	ql_sdr_conn_stats(pp->s, &s1);
	if (r1.drop_bad_id + r1.drop_bad_offset + r1.drop_bad_len)
		print_error("len %zu rel %d: drops id %lu off %lu len %lu\n", len, rel,
			    (unsigned long)r1.drop_bad_id, (unsigned long)r1.drop_bad_offset,
			    (unsigned long)r1.drop_bad_len);
	if (s1.pkts_retransmitted != s0.pkts_retransmitted || s1.pkts_sent - s0.pkts_sent != npk)
		print_error("len %zu rel %d: sent %lu (of %u) retransmitted %lu nacks %lu/%lu "
			    "timeouts %lu\n",
			    len, rel, (unsigned long)(s1.pkts_sent - s0.pkts_sent), npk,
			    (unsigned long)(s1.pkts_retransmitted - s0.pkts_retransmitted),
			    (unsigned long)r1.nacks_sent, (unsigned long)s1.nacks_received,
			    (unsigned long)s1.timeouts);
	/* exactly once: every packet sent once, accepted once, nothing else;
	 * SR repairs a kernel drop (retransmissions, duplicates, NACKs, ACKs
	 * again), accepting every packet once still */
	assert_int_equal(s1.pkts_sent - s0.pkts_sent, npk);
	assert_int_equal(r1.pkts_received - r0.pkts_received, npk);
	assert_int_equal(r1.drop_bad_id + r1.drop_bad_offset + r1.drop_bad_len, 0);
	assert_int_equal(r1.msgs_received - r0.msgs_received, 1);
	assert_int_equal(s1.msgs_sent - s0.msgs_sent, 1);
	if (rel == QL_SDR_REL_SR && (lost_r || lost_s)) {
		print_message("len %zu rel sr: kernel drops (receiver %d, sender %d): "
			      "retransmitted %lu duplicates %lu\n",
			      len, lost_r, lost_s,
			      (unsigned long)(s1.pkts_retransmitted - s0.pkts_retransmitted),
			      (unsigned long)(r1.pkts_duplicate - r0.pkts_duplicate));
		assert_true(s1.acks_received - s0.acks_received >= 1);
	} else {
		assert_int_equal(s1.pkts_retransmitted - s0.pkts_retransmitted, 0);
		assert_int_equal(r1.pkts_duplicate - r0.pkts_duplicate, 0);
		if (rel == QL_SDR_REL_SR) {
			assert_int_equal(s1.acks_received - s0.acks_received, 1);
			assert_int_equal(r1.nacks_sent - r0.nacks_sent, 0);
		}
	}
	assert_int_equal(ql_sdr_recv_release(rx), 0);
	assert_int_equal(ql_sdr_send_release(tx), 0);
	free(cs);
}

static void test_sizes(void **state)
{
	const struct vt_param *p = *state;
	struct ql_sdr_config cfg;
	struct sp_pair pp;
	size_t big = big_len(p);
	const size_t sizes[] = { 1,    2,    63,    64,	    1023,     1024, 4095,
				 4096, 4097, 65536, 100000, 1u << 20, big };
	void *src;
	struct ql_mr *mr;
	uint32_t seed = 1;

	ql_sdr_config_default(&cfg);
	cfg.max_msg_size = big;
	cfg.slots = 2;
	/* nothing is lost here: a timer firing would only mean a host too
	 * loaded to run the receiver for 20 ms, and these tests count every
	 * packet; the loss tests use the short timers */
	cfg.rto_ns = 500000000ull;
	assert_int_equal(sp_pair_open(p, &cfg, &pp), 0);
	assert_int_equal(ql_sdr_buf_alloc(pp.s, big, &src, &mr), 0);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		one(&pp, src, mr, sizes[i], QL_SDR_REL_SR, seed++);
		one(&pp, src, mr, sizes[i], QL_SDR_REL_NONE, seed++);
	}
	ql_sdr_buf_free(pp.s, src, mr);
	sp_pair_close(&pp);
}

/* Many small messages, several in flight, slots reused round-robin. */
static void test_many(void **state)
{
	const struct vt_param *p = *state;
	struct ql_sdr_config cfg;
	struct sp_pair pp;
	struct ql_sdr_recv *rx[8];
	struct ql_sdr_send *tx[8];
	uint8_t *src;
	struct ql_mr *mr;
	uint32_t last_id = UINT32_MAX;
	uint64_t kd;

	ql_sdr_config_default(&cfg);
	cfg.max_msg_size = 16384;
	cfg.slots = 8;
	cfg.recv_depth = 4; /* less than the packets in flight: the credits must flow */
	cfg.rto_ns = 500000000ull;
	assert_int_equal(sp_pair_open(p, &cfg, &pp), 0);
	assert_int_equal(ql_sdr_buf_alloc(pp.s, 8 * 16384, (void **)&src, &mr), 0);
	kd = kernel_drops(pp.dr) + kernel_drops(pp.ds);
	for (int round = 0; round < (p->udp ? 4 : 20); round++) {
		for (int i = 0; i < 8; i++) {
			struct ql_sdr_recv_opts ro = { .rel = QL_SDR_REL_SR };
			struct ql_sdr_send_opts so = { .rel = QL_SDR_REL_SR };
			size_t len = 1000 + 1500 * (size_t)i;

			vt_fill(src + i * 16384, len, (uint32_t)(round * 8 + i));
			assert_int_equal(ql_sdr_recv_post(pp.r, len, &ro, &rx[i]), 0);
			/* ids come least recently used first */
			if (last_id != UINT32_MAX)
				assert_int_equal(ql_sdr_recv_msg_id(rx[i]), (last_id + 1) % 8);
			last_id = ql_sdr_recv_msg_id(rx[i]);
			assert_int_equal(
				ql_sdr_send_post(pp.s, src + i * 16384, len, mr, &so, &tx[i]), 0);
		}
		for (int i = 0; i < 8; i++) {
			int rst = 1, sst = 1;

			assert_int_equal(sp_run(&pp, rx[i], tx[i], 30000, &rst, &sst), 0);
			assert_int_equal(rst, 0);
			assert_int_equal(sst, 0);
			assert_true(vt_check(ql_sdr_recv_data(rx[i]), ql_sdr_recv_len(rx[i]),
					     (uint32_t)(round * 8 + i)));
		}
		for (int i = 0; i < 8; i++) {
			assert_int_equal(ql_sdr_recv_release(rx[i]), 0);
			assert_int_equal(ql_sdr_send_release(tx[i]), 0);
		}
	}
	{
		struct ql_sdr_stats s;
		/* a kernel drop (counted) is repaired by SR: only then again */
		bool lost = kernel_drops(pp.dr) + kernel_drops(pp.ds) > kd;

		ql_sdr_conn_stats(pp.r, &s);
		assert_int_equal(s.drop_bad_id + s.drop_bad_offset, 0);
		if (!lost)
			assert_int_equal(s.pkts_duplicate, 0);
		ql_sdr_conn_stats(pp.s, &s);
		assert_true(s.credit_stalls > 0); /* 4 credits for 8 x 1..3 packets */
		if (!lost)
			assert_int_equal(s.pkts_retransmitted, 0);
	}
	ql_sdr_buf_free(pp.s, src, mr);
	sp_pair_close(&pp);
}

/* The sender's message does not match the receive: both ends fail it. */
static void test_mismatch(void **state)
{
	const struct vt_param *p = *state;
	struct ql_sdr_config cfg;
	struct sp_pair pp;
	struct ql_sdr_recv *rx;
	struct ql_sdr_send *tx;
	uint8_t *src;
	struct ql_mr *mr;
	int rst = 1, sst = 1;
	struct ql_sdr_recv_opts ro = { .rel = QL_SDR_REL_SR };
	struct ql_sdr_send_opts so = { .rel = QL_SDR_REL_SR };

	ql_sdr_config_default(&cfg);
	cfg.max_msg_size = 65536;
	cfg.slots = 4;
	assert_int_equal(sp_pair_open(p, &cfg, &pp), 0);
	assert_int_equal(ql_sdr_buf_alloc(pp.s, 65536, (void **)&src, &mr), 0);
	/* length */
	assert_int_equal(ql_sdr_recv_post(pp.r, 5000, &ro, &rx), 0);
	assert_int_equal(ql_sdr_send_post(pp.s, src, 6000, mr, &so, &tx), 0);
	assert_int_equal(sp_run(&pp, rx, tx, 10000, &rst, &sst), 0);
	assert_int_equal(sst, -EMSGSIZE);
	assert_int_equal(rst, -EMSGSIZE);
	ql_sdr_recv_release(rx);
	ql_sdr_send_release(tx);
	/* reliability */
	so.rel = QL_SDR_REL_NONE;
	assert_int_equal(ql_sdr_recv_post(pp.r, 5000, &ro, &rx), 0);
	assert_int_equal(ql_sdr_send_post(pp.s, src, 5000, mr, &so, &tx), 0);
	assert_int_equal(sp_run(&pp, rx, tx, 10000, &rst, &sst), 0);
	assert_int_equal(sst, -EPROTO);
	assert_int_equal(rst, -EPROTO);
	ql_sdr_recv_release(rx);
	ql_sdr_send_release(tx);
	/* the receiver abandons: the sender's message fails */
	so.rel = QL_SDR_REL_SR;
	assert_int_equal(ql_sdr_recv_post(pp.r, 5000, &ro, &rx), 0);
	sp_idle(&pp, 20);
	assert_int_equal(ql_sdr_recv_release(rx), 0);
	assert_int_equal(ql_sdr_send_post(pp.s, src, 5000, mr, &so, &tx), 0);
	assert_int_equal(sp_run(&pp, NULL, tx, 10000, &rst, &sst), 0);
	assert_int_equal(sst, -ECONNABORTED);
	ql_sdr_send_release(tx);
	/* the connection still works */
	assert_int_equal(ql_sdr_recv_post(pp.r, 5000, &ro, &rx), 0);
	assert_int_equal(ql_sdr_send_post(pp.s, src, 5000, mr, &so, &tx), 0);
	assert_int_equal(sp_run(&pp, rx, tx, 10000, &rst, &sst), 0);
	assert_int_equal(rst, 0);
	assert_int_equal(sst, 0);
	ql_sdr_recv_release(rx);
	ql_sdr_send_release(tx);
	/* refused at post */
	assert_int_equal(ql_sdr_recv_post(pp.r, 0, &ro, &rx), -EMSGSIZE);
	assert_int_equal(ql_sdr_recv_post(pp.r, 65537, &ro, &rx), -EMSGSIZE);
	assert_int_equal(ql_sdr_send_post(pp.s, src, 65537, mr, &so, &tx), -EINVAL);
	so.user = 16;
	assert_int_equal(ql_sdr_send_post(pp.s, src, 100, mr, &so, &tx), -EINVAL);
	ql_sdr_buf_free(pp.s, src, mr);
	sp_pair_close(&pp);
}

/* Caller progress (docs/progress.md §4): a blocking SDR call that ends an
 * exchange — the handshake, ql_sdr_send_wait, ql_sdr_recv_wait — leaves no
 * ACK held for the peer's last control message. Its application may then
 * work elsewhere for longer than the peer's retry budget (7 retries of the
 * 67 ms local ACK timeout) while the peer keeps progressing (waiting for
 * the next message): the peer's control QP must not fail. */
struct sw_arg {
	struct ql_sdr_conn *c;
	struct ql_sdr_send *tx;
	int rc;
};

static void *send_wait_main(void *arg)
{
	struct sw_arg *a = arg;

	a->rc = ql_sdr_send_wait(a->c, a->tx, 10000);
	return NULL;
}

/* Only `busy` progresses for ms; neither connection breaks. */
static void one_side_for(struct sp_pair *pp, struct ql_sdr_conn *busy, int ms)
{
	uint64_t end = ql_clock_ns() + (uint64_t)ms * 1000000ull;

	while (ql_clock_ns() < end)
		assert_true(ql_sdr_progress(busy) >= 0);
	assert_true(ql_sdr_progress(pp->r) >= 0);
	assert_true(ql_sdr_progress(pp->s) >= 0);
}

static void test_idle_after_wait(void **state)
{
	const struct vt_param *p = *state;
	struct ql_sdr_recv_opts ro = { .rel = QL_SDR_REL_SR };
	struct ql_sdr_send_opts so = { .rel = QL_SDR_REL_SR };
	struct ql_sdr_config cfg;
	struct sp_pair pp;
	struct ql_mr *mr;
	void *src;

	if (!p->udp) {
		print_message("(soft+udp only: the held ACK)\n");
		return;
	}
	ql_sdr_config_default(&cfg);
	cfg.slots = 2;
	assert_int_equal(sp_pair_open(p, &cfg, &pp), 0);
	assert_int_equal(ql_sdr_buf_alloc(pp.s, 4096, &src, &mr), 0);
	/* after the handshake the receiver waits, the sender is elsewhere */
	one_side_for(&pp, pp.r, 1200);
	for (int i = 0; i < 2; i++) {
		struct sw_arg a = { .c = pp.s };
		struct ql_sdr_recv *rx;
		pthread_t t;

		vt_fill(src, 4096, (uint32_t)i);
		assert_int_equal(ql_sdr_recv_post(pp.r, 4096, &ro, &rx), 0);
		assert_int_equal(ql_sdr_send_post(pp.s, src, 4096, mr, &so, &a.tx), 0);
		assert_int_equal(pthread_create(&t, NULL, send_wait_main, &a), 0);
		assert_int_equal(ql_sdr_recv_wait(pp.r, rx, 10000), 0);
		pthread_join(t, NULL);
		assert_int_equal(a.rc, 0);
		assert_true(vt_check(ql_sdr_recv_data(rx), 4096, (uint32_t)i));
		assert_int_equal(ql_sdr_recv_release(rx), 0);
		assert_int_equal(ql_sdr_send_release(a.tx), 0);
		/* one end waits for the next message, the other is elsewhere */
		one_side_for(&pp, i ? pp.s : pp.r, 1200);
	}
	ql_sdr_buf_free(pp.s, src, mr);
	sp_pair_close(&pp);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sizes),
		cmocka_unit_test(test_many),
		cmocka_unit_test(test_mismatch),
		cmocka_unit_test(test_idle_after_wait),
	};

	return VT_RUN_PER_URI(tests);
}
