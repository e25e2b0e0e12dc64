/* SPDX-License-Identifier: MIT */
/*
 * A hostile SDR peer (docs/design.md "Trust"): raw work requests on the peer's
 * own QPs write packets whose immediate names an id that is not posted, an
 * offset beyond the posted message, a length that does not fit its offset,
 * and duplicates; and send control messages that are short, of unknown
 * type, for ids or generations not current, HELLO after set-up, CTSs out of
 * range, NACKs with too many or too wide ranges. Each is refused and
 * counted, what was posted is judged only against what the receiver itself
 * posted, nothing outside the message is touched, and the connection
 * still delivers a message afterwards. Once per URI.
 */
#define _GNU_SOURCE
#include "sdr_pair.h"

#include <stdlib.h>

#include "sdr/sdr_int.h"

struct hx {
	struct sp_pair pp;
	uint8_t *src;
	struct ql_mr *mr;
	uint64_t root;
	uint32_t rkey, mtu;
	uint64_t stride;
	bool udp;
	/* raw control messages: a buffer of their own on each side's PD (the
	 * NIC may read one after the post returns: soft+udp) */
	uint8_t *cbuf[2];
	struct ql_mr *cmr[2];
	uint32_t cnext;
	/* raw packets posted: each consumes one of r's receives (settle) */
	uint64_t raw_sent, raw_base;
};

static struct hx *hx_cur;

static void hx_open(const struct vt_param *p, struct hx *h)
{
	struct ql_sdr_config cfg;
	struct ql_mr *root;

	ql_sdr_config_default(&cfg);
	cfg.max_msg_size = 8 * 4096;
	cfg.slots = 4;
	cfg.mtu = 1024;
	assert_int_equal(sp_pair_open(p, &cfg, &h->pp), 0);
	assert_int_equal(ql_sdr_buf_alloc(h->pp.s, 65536, (void **)&h->src, &h->mr), 0);
	root = ql_sdr_mem_root_mr(ql_sdr_conn_mem(h->pp.r));
	h->root = (uintptr_t)ql_mr_addr(root);
	h->rkey = ql_mr_rkey(root);
	h->mtu = ql_sdr_conn_mtu(h->pp.r);
	h->stride = ql_sdr_mem_slot_stride(ql_sdr_conn_mem(h->pp.r));
	assert_int_equal(h->mtu, 1024);
	h->udp = p->udp;
	assert_int_equal(ql_sdr_buf_alloc(h->pp.r, 64 * QL_SDR_CTRL_MAX, (void **)&h->cbuf[0],
					  &h->cmr[0]),
			 0);
	assert_int_equal(ql_sdr_buf_alloc(h->pp.s, 64 * QL_SDR_CTRL_MAX, (void **)&h->cbuf[1],
					  &h->cmr[1]),
			 0);
	h->raw_sent = 0;
	h->raw_base = h->pp.r->consumed;
	hx_cur = h;
}

static void hx_close(struct hx *h)
{
	ql_sdr_buf_free(h->pp.r, h->cbuf[0], h->cmr[0]);
	ql_sdr_buf_free(h->pp.s, h->cbuf[1], h->cmr[1]);
	ql_sdr_buf_free(h->pp.s, h->src, h->mr);
	sp_pair_close(&h->pp);
}

/* A raw WRITE WITH IMM from the sender's data QP into the receiver's root
 * buffer at byte offset off, len bytes, with the given immediate. */
static void raw_packet(struct hx *h, uint64_t off, uint32_t len, uint32_t id, uint32_t pkt)
{
	struct ibv_sge sge = { (uintptr_t)h->src, len, ql_mr_lkey(h->mr) };
	struct ibv_send_wr wr = { .sg_list = &sge,
				  .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
				  .imm_data = ql_sdr_imm_encode(id, pkt, 0),
				  .wr.rdma = { h->root + off, h->rkey } },
			   *bad;

	assert_int_equal(ql_qp_post_send(ql_sdr_conn_data_qp(h->pp.s), &wr, &bad), 0);
	h->raw_sent++;
}

/* A raw control message from conn `from`'s control QP (unsignaled). */
static void raw_ctrl(struct ql_sdr_conn *from, const void *bytes, uint32_t len)
{
	struct ibv_sge sge = { 0, len, 0 };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND }, *bad;
	int side = from == hx_cur->pp.s;
	uint8_t *buf = hx_cur->cbuf[side] + (size_t)(hx_cur->cnext++ % 64) * QL_SDR_CTRL_MAX;

	memcpy(buf, bytes, len);
	sge.addr = (uintptr_t)buf;
	sge.lkey = ql_mr_lkey(hx_cur->cmr[side]);
	assert_int_equal(ql_qp_post_send(from->ctrl_qp, &wr, &bad), 0);
}

static void raw_ctrl_msg(struct ql_sdr_conn *from, struct ql_sdr_ctrl *m)
{
	uint8_t buf[QL_SDR_CTRL_MAX];

	raw_ctrl(from, buf, (uint32_t)ql_sdr__ctrl_pack(m, buf));
}

/* Until every raw packet posted has consumed a receive at r (the NIC
 * threads of a loaded host can take a while), then a little more for
 * anything that should not come. */
static void settle(struct hx *h)
{
	uint64_t end = ql_clock_ns() + 20000000000ull;

	while (h->pp.r->consumed < h->raw_base + h->raw_sent && ql_clock_ns() < end)
		sp_idle(&h->pp, 1);
	sp_idle(&h->pp, h->udp ? 50 : 10);
}

static void test_hostile_packets(void **state)
{
	const struct vt_param *p = *state;
	struct ql_sdr_recv_opts ro = { .rel = QL_SDR_REL_NONE };
	struct ql_sdr_stats st;
	struct ql_sdr_recv *rx;
	struct hx h;
	uint32_t id, other;
	uint64_t base;
	const size_t len = 3 * 1024 + 100; /* packets 0..3, the last 100 bytes */
	uint8_t *slot;

	hx_open(p, &h);
	assert_int_equal(ql_sdr_recv_post(h.pp.r, len, &ro, &rx), 0);
	sp_idle(&h.pp, 10); /* the CTS reaches the sender (which posts nothing) */
	id = ql_sdr_recv_msg_id(rx);
	other = (id + 1) % 4;
	base = (uint64_t)id * h.stride;
	slot = ql_sdr_recv_data(rx);
	memset(h.src, 0xab, 4096);

	/* an id that is not posted (in range, and beyond the slots) */
	raw_packet(&h, (uint64_t)other * h.stride, 1024, other, 0);
	raw_packet(&h, base, 1024, 1023, 0);
	/* offsets beyond the message: the packet after the last, the largest */
	raw_packet(&h, base + 4 * 1024, 1024, id, 4);
	raw_packet(&h, base, 1024, id, (1u << 18) - 1);
	/* lengths that do not fit the offset: short middle, long last */
	raw_packet(&h, base, 100, id, 0);
	raw_packet(&h, base + 3 * 1024, 1024, id, 3);
	settle(&h);
	ql_sdr_conn_stats(h.pp.r, &st);
	assert_int_equal(st.drop_bad_id, 2);
	assert_int_equal(st.drop_bad_offset, 2);
	assert_int_equal(st.drop_bad_len, 2);
	assert_int_equal(st.pkts_received, 0);
	assert_int_equal(ql_sdr_recv_bitmap(rx, NULL, 0), 0);
	assert_int_equal(ql_sdr_recv_poll(rx, NULL), 0);

	/* duplicates: packet 1 three times, accepted once */
	memset(h.src, 0x11, 1024);
	raw_packet(&h, base + 1024, 1024, id, 1);
	raw_packet(&h, base + 1024, 1024, id, 1);
	raw_packet(&h, base + 1024, 1024, id, 1);
	settle(&h);
	ql_sdr_conn_stats(h.pp.r, &st);
	assert_int_equal(st.pkts_received, 1);
	assert_int_equal(st.pkts_duplicate, 2);
	assert_true(ql_sdr_recv_packet_done(rx, 1));
	assert_false(ql_sdr_recv_packet_done(rx, 0));
	/* the bitmap is not fooled by a packet whose bytes went elsewhere:
	 * what counts is the immediate checked against the posted message */
	raw_packet(&h, base + 0, 1024, id, 0);
	raw_packet(&h, base + 2 * 1024, 1024, id, 2);
	raw_packet(&h, base + 3 * 1024, 100, id, 3);
	settle(&h);
	{
		int stt = 1;

		assert_int_equal(ql_sdr_recv_poll(rx, &stt), 1);
		assert_int_equal(stt, 0);
	}
	assert_int_equal(ql_sdr_recv_bitmap(rx, NULL, 0), 4);
	assert_int_equal(slot[1024], 0x11);
	ql_sdr_conn_stats(h.pp.r, &st);
	assert_int_equal(st.pkts_received, 4);
	/* after the end: the id is no longer current */
	raw_packet(&h, base, 1024, id, 0);
	settle(&h);
	ql_sdr_conn_stats(h.pp.r, &st);
	assert_int_equal(st.drop_bad_id, 3);
	assert_int_equal(ql_sdr_recv_release(rx), 0);
	hx_close(&h);
}

static void test_hostile_control(void **state)
{
	const struct vt_param *p = *state;
	struct ql_sdr_recv_opts ro = { .rel = QL_SDR_REL_SR };
	struct ql_sdr_send_opts so = { .rel = QL_SDR_REL_SR };
	struct ql_sdr_stats st0, st;
	struct ql_sdr_recv *rx;
	struct ql_sdr_send *tx;
	struct hx h;
	uint8_t junk[8] = { 1, 2, 3 };
	int rst = 1, sst = 1;
	uint32_t gen;

	hx_open(p, &h);
	assert_int_equal(ql_sdr_recv_post(h.pp.r, 5000, &ro, &rx), 0);
	gen = rx->gen;
	ql_sdr_conn_stats(h.pp.r, &st0);
	/* to the receiver r, from the sender's control QP */
	raw_ctrl(h.pp.s, junk, sizeof(junk)); /* short */
	{
		struct ql_sdr_ctrl m = { .type = 0x20 }; /* unknown type */

		raw_ctrl_msg(h.pp.s, &m);
		m = (struct ql_sdr_ctrl){ .type = QL_SDR_C_HELLO }; /* after set-up */
		raw_ctrl_msg(h.pp.s, &m);
		m = (struct ql_sdr_ctrl){ .type = QL_SDR_C_ACK_REQ, .msg_id = 1000 }; /* no slot */
		raw_ctrl_msg(h.pp.s, &m);
		m = (struct ql_sdr_ctrl){ .type = QL_SDR_C_FIN,
					  .msg_id = (uint16_t)rx->msg_id,
					  .gen = gen + 1 }; /* stale generation */
		raw_ctrl_msg(h.pp.s, &m);
		m = (struct ql_sdr_ctrl){ .type = QL_SDR_C_ABORT,
					  .msg_id = (uint16_t)((rx->msg_id + 1) % 4),
					  .gen = gen }; /* not posted */
		raw_ctrl_msg(h.pp.s, &m);
		/* to r's send side: CTS for an id r's peer does not have, of
		 * length 0, of an unknown reliability; NACK/ACK for no send */
		m = (struct ql_sdr_ctrl){ .type = QL_SDR_C_CTS, .msg_id = 4, .a = 100 };
		raw_ctrl_msg(h.pp.s, &m);
		m = (struct ql_sdr_ctrl){ .type = QL_SDR_C_CTS, .msg_id = 0, .a = 0 };
		raw_ctrl_msg(h.pp.s, &m);
		m = (struct ql_sdr_ctrl){ .type = QL_SDR_C_CTS, .msg_id = 0, .rel = 9, .a = 10 };
		raw_ctrl_msg(h.pp.s, &m);
		m = (struct ql_sdr_ctrl){
			.type = QL_SDR_C_CTS, .msg_id = 0, .a = 0xffffffff, .b = 0xffffffff
		};
		raw_ctrl_msg(h.pp.s, &m);
		m = (struct ql_sdr_ctrl){ .type = QL_SDR_C_NACK, .msg_id = 0, .b = 1 };
		raw_ctrl_msg(h.pp.s, &m);
		m = (struct ql_sdr_ctrl){ .type = QL_SDR_C_ACK, .msg_id = 3000 };
		raw_ctrl_msg(h.pp.s, &m);
		m = (struct ql_sdr_ctrl){ .type = 0x41, .rel = QL_SDR_REL_TO_SENDER, .msg_id = 1 };
		raw_ctrl_msg(h.pp.s, &m);
		/* a credit far beyond anything r sent: taken as at most that */
		m = (struct ql_sdr_ctrl){ .type = QL_SDR_C_CREDIT, .credit = ~0ull };
		raw_ctrl_msg(h.pp.s, &m);
	}
	{
		uint64_t end = ql_clock_ns() + 20000000000ull;

		do {
			sp_idle(&h.pp, 1);
			ql_sdr_conn_stats(h.pp.r, &st);
		} while (st.drop_bad_ctrl - st0.drop_bad_ctrl < 13 && ql_clock_ns() < end);
	}
	settle(&h);
	ql_sdr_conn_stats(h.pp.r, &st);
	assert_int_equal(st.drop_bad_ctrl - st0.drop_bad_ctrl, 13);
	assert_int_equal(h.pp.r->peer_consumed, h.pp.r->pkts_posted);
	assert_int_equal(ql_sdr_recv_poll(rx, NULL), 0); /* untouched */

	/* to the sender s, from r's control QP, while a send is under way:
	 * a NACK with more ranges than fit, then one asking for everything
	 * (clipped to the message: at most its packets go again) */
	assert_int_equal(ql_sdr_send_post(h.pp.s, h.src, 5000, h.mr, &so, &tx), 0);
	while (tx->state != QL_SDR_S_ACTIVE)
		ql_sdr_progress(h.pp.s);
	ql_sdr_conn_stats(h.pp.s, &st0);
	{
		struct ql_sdr_ctrl m = { .type = QL_SDR_C_NACK,
					 .msg_id = (uint16_t)tx->msg_id,
					 .gen = tx->gen,
					 .b = QL_SDR_NACK_RANGES + 1,
					 .plen = sizeof(m.payload) };

		raw_ctrl_msg(h.pp.r, &m);
		m.b = 2; /* claims more ranges than its payload has */
		m.plen = 8;
		raw_ctrl_msg(h.pp.r, &m);
		m.b = 1;
		memset(m.payload, 0, 8);
		m.payload[4] = m.payload[5] = m.payload[6] = m.payload[7] = 0xff;
		raw_ctrl_msg(h.pp.r, &m);
	}
	assert_int_equal(sp_run(&h.pp, rx, tx, 20000, &rst, &sst), 0);
	assert_int_equal(rst, 0);
	assert_int_equal(sst, 0);
	ql_sdr_conn_stats(h.pp.s, &st);
	/* the two malformed NACKs; on a loaded host also what the sender's
	 * timer brought back after the end (an ACK or NACK per ACK_REQ, now
	 * stale: counted and dropped the same way) */
	assert_true(st.drop_bad_ctrl - st0.drop_bad_ctrl >= 2);
	assert_true(st.drop_bad_ctrl - st0.drop_bad_ctrl <= 2 + st.timeouts - st0.timeouts);
	assert_true(st.pkts_retransmitted - st0.pkts_retransmitted <= 5);
	ql_sdr_recv_release(rx);
	ql_sdr_send_release(tx);

	/* still a working connection */
	assert_int_equal(ql_sdr_recv_post(h.pp.r, 20000, &ro, &rx), 0);
	vt_fill(h.src, 20000, 77);
	assert_int_equal(ql_sdr_send_post(h.pp.s, h.src, 20000, h.mr, &so, &tx), 0);
	assert_int_equal(sp_run(&h.pp, rx, tx, 20000, &rst, &sst), 0);
	assert_int_equal(rst, 0);
	assert_true(vt_check(ql_sdr_recv_data(rx), 20000, 77));
	ql_sdr_recv_release(rx);
	ql_sdr_send_release(tx);
	hx_close(&h);
}

/* Progress all four connections of the two pairs for ms milliseconds. */
static void idle4(struct sp_pair *a, struct sp_pair *b, int ms)
{
	uint64_t end = ql_clock_ns() + (uint64_t)ms * 1000000ull;

	while (ql_clock_ns() < end) {
		ql_sdr_progress(a->r);
		ql_sdr_progress(a->s);
		ql_sdr_progress(b->r);
		ql_sdr_progress(b->s);
	}
}

/* What a hostile peer can and cannot do with its rkey (docs/sdr.md
 * "Trust"). Pair 1 (r, s: s hostile) and pair 2 (r2, s2: honest) share
 * both devices. The packet's remote address and its immediate are
 * independent, so s can set the bit of its message A while its bytes land
 * in message B of the same connection: A's bitmap believes it, B's data is
 * spoiled (B's bitmap is not). But every connection has its own PD and
 * root MR: s writing into r2's root buffer with r2's rkey (known here; a
 * peer could guess it) is refused by the NIC (the MR is not of the QP's
 * PD), so r2's bytes, bitmaps and counters are untouched and pair 2 still
 * delivers. */
static void test_hostile_confined(void **state)
{
	const struct vt_param *p = *state;
	struct ql_sdr_recv_opts ro = { .rel = QL_SDR_REL_NONE };
	struct ql_sdr_send_opts so = { 0 };
	struct ql_sdr_config cfg;
	struct ql_sdr_recv *ra, *rb, *rc2;
	struct ql_sdr_send *tx;
	struct ql_sdr_stats st2, st2b, st;
	struct sp_pair p2 = { 0 };
	struct ql_mr *root2;
	struct hx h;
	uint64_t root2_addr;
	uint32_t rkey2;
	uint8_t *slot2;
	int rst = 1, sst = 1;
	const size_t len = 4 * 1024;

	hx_open(p, &h);
	ql_sdr_config_default(&cfg);
	cfg.max_msg_size = 8 * 4096;
	cfg.slots = 4;
	cfg.mtu = 1024;
	assert_int_equal(ql_sdr_conn_create(h.pp.dr, &cfg, &p2.r), 0);
	assert_int_equal(ql_sdr_conn_create(h.pp.ds, &cfg, &p2.s), 0);
	assert_int_equal(sp_connect(p2.r, p2.s), 0);
	root2 = ql_sdr_mem_root_mr(ql_sdr_conn_mem(p2.r));
	root2_addr = (uintptr_t)ql_mr_addr(root2);
	rkey2 = ql_mr_rkey(root2);
	/* separate buffers and keys: nothing of r's is r2's */
	assert_true(root2_addr != h.root);
	assert_true(rkey2 != h.rkey);

	assert_int_equal(ql_sdr_recv_post(h.pp.r, len, &ro, &ra), 0);
	assert_int_equal(ql_sdr_recv_post(h.pp.r, len, &ro, &rb), 0);
	assert_int_equal(ql_sdr_recv_post(p2.r, len, &ro, &rc2), 0);
	idle4(&h.pp, &p2, 10);
	slot2 = ql_sdr_recv_data(rc2);
	memset(slot2, 0, len);
	ql_sdr_conn_stats(p2.r, &st2);

	/* into r2's root with r2's rkey, naming r2's posted message: refused */
	{
		struct ibv_sge sge = { (uintptr_t)h.src, 1024, ql_mr_lkey(h.mr) };
		struct ibv_send_wr
			wr = { .sg_list = &sge,
			       .num_sge = 1,
			       .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
			       .imm_data = ql_sdr_imm_encode(ql_sdr_recv_msg_id(rc2), 0, 0),
			       .wr.rdma = { root2_addr + (uint64_t)ql_sdr_recv_msg_id(rc2) *
								 ql_sdr_mem_slot_stride(
									 ql_sdr_conn_mem(p2.r)),
					    rkey2 } },
			*bad;

		assert_int_equal(ql_qp_post_send(ql_sdr_conn_data_qp(h.pp.s), &wr, &bad), 0);
	}
	/* then A's packet 0 claimed, B's packet 0 written: one QP, in order, so
	 * once this one is seen the refused one was judged */
	memset(h.src, 0x5a, 1024);
	raw_packet(&h, (uint64_t)ql_sdr_recv_msg_id(rb) * h.stride, 1024, ql_sdr_recv_msg_id(ra),
		   0);
	{
		uint64_t end = ql_clock_ns() + 20000000000ull;

		do {
			idle4(&h.pp, &p2, 1);
			ql_sdr_conn_stats(h.pp.r, &st);
		} while (st.pkts_received == 0 && ql_clock_ns() < end);
	}
	idle4(&h.pp, &p2, h.udp ? 50 : 10);

	/* within the hostile's own connection: A believes, B is spoiled */
	assert_true(ql_sdr_recv_packet_done(ra, 0));
	assert_int_equal(((uint8_t *)ql_sdr_recv_data(ra))[0], 0);
	assert_int_equal(((uint8_t *)ql_sdr_recv_data(rb))[0], 0x5a);
	assert_int_equal(ql_sdr_recv_bitmap(rb, NULL, 0), 0);
	ql_sdr_conn_stats(h.pp.r, &st);
	assert_int_equal(st.pkts_received, 1);
	/* the other connection: not a byte, not a bit, not a count */
	for (size_t i = 0; i < len; i++)
		assert_int_equal(slot2[i], 0);
	assert_int_equal(ql_sdr_recv_bitmap(rc2, NULL, 0), 0);
	ql_sdr_conn_stats(p2.r, &st2b);
	assert_int_equal(st2b.pkts_received, st2.pkts_received);
	assert_int_equal(st2b.drop_bad_id + st2b.drop_bad_offset + st2b.drop_bad_len,
			 st2.drop_bad_id + st2.drop_bad_offset + st2.drop_bad_len);
	assert_int_equal(st2b.recv_errors, 0);
	assert_int_equal(ql_sdr_recv_release(ra), 0);
	assert_int_equal(ql_sdr_recv_release(rb), 0);

	/* pair 2's message arrives exact, each packet once */
	ql_sdr_buf_free(h.pp.s, h.src, h.mr);
	assert_int_equal(ql_sdr_buf_alloc(p2.s, 65536, (void **)&h.src, &h.mr), 0);
	vt_fill(h.src, len, 91);
	so.rel = QL_SDR_REL_NONE;
	assert_int_equal(ql_sdr_send_post(p2.s, h.src, len, h.mr, &so, &tx), 0);
	assert_int_equal(sp_run(&p2, rc2, tx, 20000, &rst, &sst), 0);
	assert_int_equal(rst, 0);
	assert_int_equal(sst, 0);
	assert_true(vt_check(ql_sdr_recv_data(rc2), len, 91));
	ql_sdr_conn_stats(p2.r, &st);
	assert_int_equal(st.pkts_received - st2.pkts_received, len / 1024);
	assert_int_equal(st.pkts_duplicate, st2.pkts_duplicate);
	ql_sdr_recv_release(rc2);
	ql_sdr_send_release(tx);
	ql_sdr_buf_free(p2.s, h.src, h.mr);
	h.src = NULL;
	ql_sdr_conn_destroy(p2.s);
	ql_sdr_conn_destroy(p2.r);
	ql_sdr_buf_free(h.pp.r, h.cbuf[0], h.cmr[0]);
	ql_sdr_buf_free(h.pp.s, h.cbuf[1], h.cmr[1]);
	sp_pair_close(&h.pp);
}

/* The control QP carries SENDs only: a peer's RDMA WRITE over it (into the
 * root buffer, whose rkey it holds) is refused by the NIC, not placed
 * (the QPs are connected with the access they need: the control QP none,
 * the data QP REMOTE_WRITE; docs/sdr.md "Trust"). The peer breaks its own
 * connection doing so, nothing else. */
static void test_hostile_ctrl_qp_rdma(void **state)
{
	const struct vt_param *p = *state;
	struct hx h;
	const uint8_t *root;
	bool landed = false;

	hx_open(p, &h);
	root = (const uint8_t *)(uintptr_t)h.root;
	memset(h.src, 0xee, 64);
	{
		struct ibv_sge sge = { (uintptr_t)h.src, 64, ql_mr_lkey(h.mr) };
		struct ibv_send_wr wr = { .sg_list = &sge,
					  .num_sge = 1,
					  .opcode = IBV_WR_RDMA_WRITE,
					  .wr.rdma = { h.root + 128, h.rkey } },
				   *bad;

		assert_int_equal(ql_qp_post_send(h.pp.s->ctrl_qp, &wr, &bad), 0);
	}
	{
		uint64_t end = ql_clock_ns() + 300000000ull;

		while (ql_clock_ns() < end && !landed) {
			ql_sdr_progress(h.pp.r);
			ql_sdr_progress(h.pp.s);
			landed = root[128] == 0xee && root[191] == 0xee;
		}
	}
	assert_false(landed);
	ql_sdr_buf_free(h.pp.r, h.cbuf[0], h.cmr[0]);
	ql_sdr_buf_free(h.pp.s, h.cbuf[1], h.cmr[1]);
	ql_sdr_buf_free(h.pp.s, h.src, h.mr);
	sp_pair_close(&h.pp);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hostile_packets),
		cmocka_unit_test(test_hostile_control),
		cmocka_unit_test(test_hostile_confined),
		cmocka_unit_test(test_hostile_ctrl_qp_rdma),
	};

	return VT_RUN_PER_URI(tests);
}
