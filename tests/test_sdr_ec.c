/* SPDX-License-Identifier: MIT */
/*
 * test_sdr_ec: SDR's erasure-coded reliability end to end (src/sdr/ec.c over
 * the sdr core): two connections in one process, driven alternately by one
 * thread, on soft://loop (no loss) and on two soft+udp devices with the
 * data QP's fault injection. Every message is checked byte for byte, its
 * completion callback must run exactly once, and the bitmaps and counters
 * must tell what happened:
 *   - 1 B .. 64 MiB without loss: nothing rebuilt, nothing NACKed;
 *   - every 10th packet lost (never more than m = 2 of a stripe's k+m = 10):
 *     every lost data packet rebuilt from parity, no NACK, no retransmission;
 *   - every 3rd packet lost (more than m in every stripe): the fallback to
 *     selective repeat NACKs and retransmits, and the message still arrives;
 *   - dup, reorder, corrupt (the ICRC drops it) and random loss;
 *   - a hostile sender's packets at offsets past the parity, or of the wrong
 *     length at a parity offset, are refused and counted;
 *   - ends configured with different codes refuse EC messages.
 * The multi-process runs are tests/sdr_pair.sh (qlink sdr --pair).
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "qlink/error.h"
#include "qlink/sdr.h"
#include "qlink/sdr_ec.h"
#include "qlink/verbs.h"
#include "sdr/sdr_int.h"

struct pair {
	struct ql_device *da, *db;
	struct ql_sdr_conn *a; /* sender */
	struct ql_sdr_conn *b; /* receiver */
	struct ql_conn_params a_data, a_ctrl, b_data, b_ctrl;
	int accept_rc;
};

static unsigned int seq;

static void udp_uri(char *buf, size_t len, unsigned int host)
{
	unsigned int pid = (unsigned int)getpid();

	snprintf(buf, len, "soft+udp://127.%u.%u.%u:%u", (pid >> 8) & 0xff, pid & 0xff, host,
		 21000 + (pid >> 16) % 20000 + seq);
}

static void *accept_main(void *arg)
{
	struct pair *p = arg;

	p->accept_rc = ql_sdr_accept(p->b, &p->a_data, &p->a_ctrl, 20000);
	return NULL;
}

static void cfg_for(struct ql_sdr_config *c, uint64_t max)
{
	ql_sdr_config_default(c);
	c->max_msg_size = max;
	c->slots = 4;
	c->parity_size = ql_sdr_ec_parity_size(max, 0, 0);
}

/* Open both ends (udp: two devices; else one soft://loop device) and
 * connect them. cb may change the receiver's config (cfg_b). */
static void pair_open(struct pair *p, bool udp, const struct ql_sdr_config *ca,
		      const struct ql_sdr_config *cb)
{
	char ua[128], ub[128], line[1024];
	pthread_t t;

	memset(p, 0, sizeof(*p));
	if (udp) {
		seq++;
		udp_uri(ua, sizeof(ua), 1);
		udp_uri(ub, sizeof(ub), 2);
		assert_int_equal(ql_device_open(ua, &p->da), 0);
		assert_int_equal(ql_device_open(ub, &p->db), 0);
	} else {
		assert_int_equal(ql_device_open("soft://loop", &p->da), 0);
		p->db = p->da;
	}
	assert_int_equal(ql_sdr_conn_create(p->da, ca, &p->a), 0);
	assert_int_equal(ql_sdr_conn_create(p->db, cb, &p->b), 0);
	assert_true(ql_sdr_conn_params_format(p->a, line, sizeof(line)) > 0);
	assert_int_equal(ql_sdr_conn_params_parse(line, &p->a_data, &p->a_ctrl), 0);
	assert_true(ql_sdr_conn_params_format(p->b, line, sizeof(line)) > 0);
	assert_int_equal(ql_sdr_conn_params_parse(line, &p->b_data, &p->b_ctrl), 0);
	assert_int_equal(pthread_create(&t, NULL, accept_main, p), 0);
	assert_int_equal(ql_sdr_connect(p->a, &p->b_data, &p->b_ctrl, 20000), 0);
	pthread_join(t, NULL);
	assert_int_equal(p->accept_rc, 0);
}

static void pair_close(struct pair *p)
{
	assert_int_equal(ql_sdr_conn_destroy(p->a), 0);
	assert_int_equal(ql_sdr_conn_destroy(p->b), 0);
	assert_int_equal(ql_device_close(p->da), 0);
	if (p->db != p->da)
		assert_int_equal(ql_device_close(p->db), 0);
}

static void fill(uint8_t *b, size_t len, uint32_t salt)
{
	uint64_t x = 0x9e3779b97f4a7c15ull * (salt + 1);

	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		b[i] = (uint8_t)x;
	}
}

static int rx_calls, tx_calls;

static void on_rx(struct ql_sdr_recv *rx, int status, void *arg)
{
	(void)rx;
	(void)status;
	(void)arg;
	rx_calls++;
}

static void on_tx(struct ql_sdr_send *tx, int status, void *arg)
{
	(void)tx;
	(void)status;
	(void)arg;
	tx_calls++;
}

struct result {
	struct ql_sdr_stats sa, sb; /* deltas over the transfer */
	uint32_t ndata, npkts_bits;
};

static void stats_sub(struct ql_sdr_stats *d, const struct ql_sdr_stats *before)
{
	uint64_t *x = (uint64_t *)d;
	const uint64_t *y = (const uint64_t *)before;

	for (size_t i = 0; i < sizeof(*d) / sizeof(uint64_t); i++)
		x[i] -= y[i];
}

/* Send one message of len bytes a -> b with reliability rel; both must end
 * with status 0, the callbacks once each, the bytes identical and every bit
 * of the bitmap set. hostile: before the message, inject bad packets. */
static void transfer(struct pair *p, size_t len, enum ql_sdr_rel rel, struct result *res,
		     void (*hostile)(struct pair *, struct ql_sdr_recv *))
{
	struct ql_sdr_recv_opts ro = { .rel = rel, .on_complete = on_rx };
	struct ql_sdr_send_opts so = { .rel = rel, .on_complete = on_tx };
	struct ql_sdr_stats a0, b0;
	struct ql_sdr_recv *rx;
	struct ql_sdr_send *tx;
	struct ql_mr *mr;
	uint8_t *buf;
	int st_rx = 1, st_tx = 1, done_rx = 0, done_tx = 0;
	uint64_t spins = 0;

	ql_sdr_conn_stats(p->a, &a0);
	ql_sdr_conn_stats(p->b, &b0);
	rx_calls = tx_calls = 0;
	assert_int_equal(ql_sdr_buf_alloc(p->a, len, (void **)&buf, &mr), 0);
	fill(buf, len, (uint32_t)len);
	assert_int_equal(ql_sdr_recv_post(p->b, len, &ro, &rx), 0);
	if (hostile)
		hostile(p, rx);
	assert_int_equal(ql_sdr_send_post(p->a, buf, len, mr, &so, &tx), 0);
	while (!(done_rx && done_tx)) {
		assert_true(ql_sdr_progress(p->a) >= 0);
		assert_true(ql_sdr_progress(p->b) >= 0);
		done_rx = ql_sdr_recv_poll(rx, &st_rx);
		done_tx = ql_sdr_send_poll(tx, &st_tx);
		if ((++spins & 4095) == 0)
			usleep(1); /* the NIC threads need the cores too */
		if (spins > 50000000ull) {
			struct ql_sdr_stats x, y;
			ql_sdr_conn_stats(p->a, &x);
			ql_sdr_conn_stats(p->b, &y);
			fail_msg(
				"transfer of %zu bytes did not end (rx %d tx %d; sent %llu retx %llu "
				"stalls %llu reclaimed %llu timeouts %llu; received %llu "
				"recovered %llu nacks %llu bits %u/%u)",
				len, done_rx, done_tx, (unsigned long long)x.pkts_sent,
				(unsigned long long)x.pkts_retransmitted,
				(unsigned long long)x.credit_stalls,
				(unsigned long long)x.credits_reclaimed,
				(unsigned long long)x.timeouts, (unsigned long long)y.pkts_received,
				(unsigned long long)y.pkts_recovered,
				(unsigned long long)y.nacks_sent, ql_sdr_recv_bitmap(rx, NULL, 0),
				ql_sdr_recv_packets(rx));
		}
	}
	assert_int_equal(st_rx, 0);
	assert_int_equal(st_tx, 0);
	/* a few more rounds: nothing may complete twice */
	for (int i = 0; i < 2000; i++) {
		ql_sdr_progress(p->a);
		ql_sdr_progress(p->b);
	}
	assert_int_equal(rx_calls, 1);
	assert_int_equal(tx_calls, 1);
	assert_int_equal(ql_sdr_recv_len(rx), len);
	assert_memory_equal(ql_sdr_recv_data(rx), buf, len);
	res->ndata = ql_sdr_recv_packets(rx);
	res->npkts_bits = ql_sdr_recv_bitmap(rx, NULL, 0);
	assert_int_equal(res->npkts_bits, res->ndata); /* every data bit set */
	for (uint32_t c = 0; c < ql_sdr_recv_chunks(rx); c++)
		assert_true(ql_sdr_recv_chunk_done(rx, c));
	ql_sdr_conn_stats(p->a, &res->sa);
	ql_sdr_conn_stats(p->b, &res->sb);
	stats_sub(&res->sa, &a0);
	stats_sub(&res->sb, &b0);
	assert_int_equal(ql_sdr_send_release(tx), 0);
	assert_int_equal(ql_sdr_recv_release(rx), 0);
	ql_sdr_buf_free(p->a, buf, mr);
}

static const size_t sizes[] = { 1, 100, 4095, 4096, 4097, 65536, 100000, 1u << 20 };

/* soft://loop, no loss: nothing rebuilt or NACKed, 1 B .. 64 MiB */
static void test_loop_sizes(void **state)
{
	struct ql_sdr_config c;
	struct pair p;
	struct result r;
	(void)state;

	cfg_for(&c, 64u << 20);
	pair_open(&p, false, &c, &c);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		transfer(&p, sizes[i], QL_SDR_REL_EC, &r, NULL);
		assert_int_equal(r.sb.pkts_recovered, 0);
		assert_int_equal(r.sb.nacks_sent, 0);
		assert_int_equal(r.sa.pkts_retransmitted, 0);
	}
	transfer(&p, 64u << 20, QL_SDR_REL_EC, &r, NULL);
	assert_int_equal(r.ndata, (64u << 20) / ql_sdr_conn_mtu(p.a));
	assert_int_equal(r.sb.pkts_recovered, 0);
	pair_close(&p);
}

static void set_fault(struct pair *p, const char *spec)
{
	assert_int_equal(ql_qp_fault(ql_sdr_conn_data_qp(p->a), spec), 0);
}

/* Every 10th packet the sender posts is lost: no stripe of k+m = 10 loses
 * more than m = 2, so the erasure code rebuilds every lost data packet and
 * nothing is NACKed or sent again (NACKs held off long enough for the
 * parity to come). */
static void test_within_m(void **state)
{
	static const size_t sz[] = { 40000, 1u << 20, 8u << 20, 64u << 20 };
	struct ql_sdr_config c;
	struct pair p;
	struct result r;
	(void)state;

	cfg_for(&c, 64u << 20);
	c.nack_delay_ns = 2000000000ull;
	c.rto_ns = 4000000000ull;
	pair_open(&p, true, &c, &c);
	for (size_t i = 0; i < sizeof(sz) / sizeof(sz[0]); i++) {
		struct ql_device_counters d0, d1, e0, e1;
		uint64_t refused;

		set_fault(&p, "drop_nth=10"); /* restarts the count: packet 10, 20, ... */
		ql_device_counters(p.da, &d0);
		ql_device_counters(p.db, &e0);
		transfer(&p, sz[i], QL_SDR_REL_EC, &r, NULL);
		ql_device_counters(p.da, &d1);
		ql_device_counters(p.db, &e1);
		/* packets the receiving NIC refused for want of a receive WQE (the
		 * core's credit reclaim overshooting, docs/sdr.md "Credits") are
		 * losses beyond the injected ones and may push a stripe past m */
		refused = e1.uc_drop_no_recv - e0.uc_drop_no_recv;
		if (refused == 0) {
			/* complete and exact with nothing sent twice: every lost data
			 * packet was rebuilt (about a tenth of them; the 10th packets
			 * include parity and the core's fences) */
			assert_int_equal(r.sb.nacks_sent, 0);
			assert_int_equal(r.sa.pkts_retransmitted, 0);
		} else {
			/* only stripes hit by a refused packet fall back */
			assert_true(r.sa.pkts_retransmitted <= 8 * refused);
		}
		assert_true(r.sb.pkts_recovered > 0);
		assert_true(r.sb.pkts_recovered <= d1.fault_drop - d0.fault_drop);
		assert_true(r.sb.pkts_recovered >= r.ndata / 10 - r.ndata / 40);
	}
	set_fault(&p, NULL);
	pair_close(&p);
}

/* Every 3rd packet lost: 2 or 3 of each stripe's 8 data packets and some of
 * its parity, more than m: the receiver NACKs what it cannot rebuild and
 * selective repeat brings it. */
static void test_beyond_m(void **state)
{
	struct ql_sdr_config c;
	struct pair p;
	struct result r;
	(void)state;

	cfg_for(&c, 1u << 20);
	c.nack_delay_ns = 1000000;
	pair_open(&p, true, &c, &c);
	set_fault(&p, "drop_nth=3");
	transfer(&p, 1u << 20, QL_SDR_REL_EC, &r, NULL);
	assert_true(r.sb.nacks_sent > 0);
	assert_true(r.sa.pkts_retransmitted > 0);
	assert_int_equal(r.sa.nacks_received, r.sb.nacks_sent);
	set_fault(&p, NULL);
	pair_close(&p);
}

/* Each fault of soft+udp on the data QP, EC and SR: exactly once and exact. */
static void test_faults(void **state)
{
	static const char *const specs[] = {
		"drop=0.05&seed=3",
		"dup=0.1&seed=4",
		"reorder=0.1&seed=5",
		"corrupt=0.05&seed=6",
		"drop=0.02&dup=0.02&reorder=0.02&seed=7",
	};
	struct ql_sdr_config c;
	struct ql_device_counters dc0, dc1;
	struct pair p;
	struct result r;
	(void)state;

	cfg_for(&c, 1u << 20);
	c.nack_delay_ns = 1000000;
	pair_open(&p, true, &c, &c);
	for (size_t i = 0; i < sizeof(specs) / sizeof(specs[0]); i++) {
		for (int rel = QL_SDR_REL_SR; rel <= QL_SDR_REL_EC; rel++) {
			set_fault(&p, specs[i]);
			ql_device_counters(p.db, &dc0);
			transfer(&p, 300000, (enum ql_sdr_rel)rel, &r, NULL);
			transfer(&p, 1u << 20, (enum ql_sdr_rel)rel, &r, NULL);
			ql_device_counters(p.db, &dc1);
			if (i == 1) /* duplicates arrive and are counted, not delivered */
				assert_true(r.sb.pkts_duplicate > 0 || rel == QL_SDR_REL_EC);
			if (i == 3) /* the receiver's ICRC check dropped them */
				assert_true(dc1.rx_icrc_errors > dc0.rx_icrc_errors);
		}
	}
	set_fault(&p, NULL);
	pair_close(&p);
}

/* A hostile sender: packets of the posted message at offsets past its
 * parity, and a parity offset with a short length. */
static void hostile_parity(struct pair *p, struct ql_sdr_recv *rx)
{
	struct ql_sdr_conn *a = p->a;
	uint32_t mtu = a->mtu, bad[3] = { rx->npkts, rx->npkts + 7, rx->ndata };
	uint32_t lens[3] = { mtu, mtu, mtu / 2 };
	struct ql_mr *mr;
	uint8_t *junk;
	uint64_t spins = 0;

	assert_int_equal(ql_sdr_buf_alloc(a, mtu, (void **)&junk, &mr), 0);
	memset(junk, 0xa5, mtu);
	/* the clear-to-send tells where the slot is */
	while (a->cts_count == 0 && spins++ < 100000000ull) {
		ql_sdr_progress(a);
		ql_sdr_progress(p->b);
	}
	assert_true(a->cts_count > 0);
	for (int i = 0; i < 3; i++) {
		struct ibv_sge sge = { .addr = (uintptr_t)junk,
				       .length = lens[i],
				       .lkey = ql_mr_lkey(mr) };
		struct ibv_send_wr wr = { 0 }, *badwr;

		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
		wr.imm_data = ql_sdr_imm_encode(rx->msg_id, bad[i], 0);
		/* inside the peer's root MR: only the SDR check can refuse it */
		wr.wr.rdma.remote_addr = a->peer.root_addr +
					 (uint64_t)rx->msg_id * a->peer.slot_stride +
					 (uint64_t)bad[i] * mtu % (a->peer.slot_stride - mtu);
		wr.wr.rdma.rkey = a->peer.rkey;
		assert_int_equal(ql_qp_post_send(ql_sdr_conn_data_qp(a), &wr, &badwr), 0);
		a->pkts_posted++; /* they use the peer's receives: keep the credits true */
	}
	for (int i = 0; i < 20000; i++) {
		ql_sdr_progress(a);
		ql_sdr_progress(p->b);
		if (i % 1000 == 0)
			usleep(100);
	}
	ql_sdr_buf_free(a, junk, mr);
}

static void test_hostile_parity(void **state)
{
	struct ql_sdr_config c;
	struct pair p;
	struct result r;
	struct ql_sdr_stats sb;
	(void)state;

	cfg_for(&c, 1u << 20);
	pair_open(&p, true, &c, &c);
	transfer(&p, 200000, QL_SDR_REL_EC, &r, hostile_parity);
	ql_sdr_conn_stats(p.b, &sb);
	assert_int_equal(r.sb.drop_bad_offset, 2);
	assert_int_equal(r.sb.drop_bad_len, 1);
	assert_int_equal(r.sb.pkts_recovered, 0);
	pair_close(&p);
}

/* Ends with different codes: EC messages are refused (the receive fails at
 * post), the other schemes still work. */
static void test_code_mismatch(void **state)
{
	struct ql_sdr_config ca, cb;
	struct ql_sdr_recv_opts ro = { .rel = QL_SDR_REL_EC };
	struct ql_sdr_recv *rx;
	struct pair p;
	struct result r;
	(void)state;

	cfg_for(&ca, 1u << 20);
	cfg_for(&cb, 1u << 20);
	cb.ec_data = 4;
	cb.parity_size = ql_sdr_ec_parity_size(1u << 20, 4, 0);
	pair_open(&p, false, &ca, &cb);
	assert_int_equal(ql_sdr_recv_post(p.b, 1000, &ro, &rx), -EPROTO);
	transfer(&p, 5000, QL_SDR_REL_SR, &r, NULL);
	pair_close(&p);
}

static void test_parity_size(void **state)
{
	(void)state;
	/* 1 MiB, 8+2 at MTU 4096: 32 stripes x 2 x 4096 = 256 KiB */
	assert_true(ql_sdr_ec_parity_size(1u << 20, 8, 2) >= 256u << 10);
	assert_int_equal(ql_sdr_ec_parity_size(1u << 20, 8, 2) % 4096, 0);
	/* a short message still has one stripe's parity, at the largest MTU */
	assert_int_equal(ql_sdr_ec_parity_size(1, 8, 2), 2 * 4096);
	assert_int_equal(ql_sdr_ec_parity_size(1, 0, 0), ql_sdr_ec_parity_size(1, 8, 2));
	assert_int_equal(ql_sdr_ec_parity_size(1, 33, 2), 0);
	assert_int_equal(ql_sdr_ec_parity_size(1, 8, 17), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parity_size),    cmocka_unit_test(test_loop_sizes),
		cmocka_unit_test(test_code_mismatch),  cmocka_unit_test(test_within_m),
		cmocka_unit_test(test_beyond_m),       cmocka_unit_test(test_faults),
		cmocka_unit_test(test_hostile_parity),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
