/* SPDX-License-Identifier: MIT */
/*
 * qlink/mlx5.h, the producer side, byte for byte: every segment kind and
 * every WQE the posting helpers write is compared with bytes written here by
 * hand from the ConnectX PRM / mlx5dv.h layouts (big-endian fields), not
 * with the output of another builder. Also: a WQE spanning the send ring's
 * end (it continues at the ring's start, on a basic-block boundary; inline
 * data is split exactly there), the 16-bit WQE index wrapping, a full send
 * queue (-ENOMEM, nothing written), completion freeing the right number of
 * basic blocks, the doorbell (record value, the 8-byte register write, the
 * BlueFlame copy and its alternating buffer half), receive WQEs with their
 * terminating invalid-lkey segment, receive-queue wrap and fullness, and the
 * argument checks.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "qlink/mlx5.h"

#define SQ_BBS 4
#define RQ_CNT 4
#define RQ_STRIDE 32
#define QPN 0xabcu
#define FILL 0xee /* untouched bytes */

static _Alignas(4096) uint8_t sq_buf[SQ_BBS * 64];
static _Alignas(4096) uint8_t rq_buf[RQ_CNT * RQ_STRIDE];
static _Alignas(64) uint32_t dbrec[2];
static _Alignas(64) uint8_t bf[512];
static struct ql_mlx5_qp qp;

static int setup(void **state)
{
	(void)state;
	memset(sq_buf, FILL, sizeof(sq_buf));
	memset(rq_buf, FILL, sizeof(rq_buf));
	memset(bf, FILL, sizeof(bf));
	dbrec[0] = dbrec[1] = 0xeeeeeeee;
	memset(&qp, 0, sizeof(qp));
	qp.qpn = QPN;
	qp.sq.buf = sq_buf;
	qp.sq.wqe_cnt = SQ_BBS;
	qp.sq.stride = 64;
	qp.sq.dbrec = &dbrec[QL_MLX5_SND_DBR];
	qp.rq.buf = rq_buf;
	qp.rq.wqe_cnt = RQ_CNT;
	qp.rq.stride = RQ_STRIDE;
	qp.rq.dbrec = &dbrec[QL_MLX5_RCV_DBR];
	qp.bf_reg = bf;
	return 0;
}

static void expect_bytes(const void *got, const uint8_t *want, size_t n)
{
	const uint8_t *g = got;

	for (size_t i = 0; i < n; i++) {
		if (g[i] != want[i])
			print_error("byte %zu: got 0x%02x, want 0x%02x\n", i, g[i], want[i]);
		assert_int_equal(g[i], want[i]);
	}
}

static void expect_fill(const void *p, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++)
		assert_int_equal(b[i], FILL);
}

/* ---- segments ------------------------------------------------------------ */

static void test_ctrl_seg(void **state)
{
	uint8_t seg[16];
	/* opmod 0x5a | wqe index 0x1234 | opcode SEND (0x0a); qpn 0xabcdef |
	 * ds 3; signature 0, dci 0, fm_ce_se CQ_UPDATE|SOLICITED; imm */
	static const uint8_t want[16] = { 0x5a, 0x12, 0x34, 0x0a, 0xab, 0xcd, 0xef, 0x03,
					  0x00, 0x00, 0x00, 0x0a, 0x11, 0x22, 0x33, 0x44 };
	static const uint8_t want_fence[16] = { 0x00, 0xff, 0xff, 0x11, 0x00, 0x00, 0x01, 0x3f,
						0x00, 0x00, 0x00, 0x88, 0x00, 0x00, 0x00, 0x00 };

	(void)state;
	memset(seg, FILL, sizeof(seg));
	ql_mlx5_ctrl_seg(seg, 0x5a, QL_MLX5_OPCODE_SEND, 0x1234, 0xabcdef, 3,
			 QL_MLX5_WQE_CTRL_CQ_UPDATE | QL_MLX5_WQE_CTRL_SOLICITED, 0x11223344);
	expect_bytes(seg, want, 16);
	/* the largest ds (6 bits), a fenced signaled CAS at index 0xffff; the
	 * QP number is 24 bits: its top byte is cut */
	ql_mlx5_ctrl_seg(seg, 0, QL_MLX5_OPCODE_ATOMIC_CS, 0xffff, 0xff000001, 63,
			 QL_MLX5_WQE_CTRL_FENCE | QL_MLX5_WQE_CTRL_CQ_UPDATE, 0);
	expect_bytes(seg, want_fence, 16);
}

static void test_raddr_data_atomic_segs(void **state)
{
	uint8_t seg[16];
	static const uint8_t raddr[16] = { 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
					   0xa1, 0xb2, 0xc3, 0xd4, 0x00, 0x00, 0x00, 0x00 };
	static const uint8_t data[16] = { 0x00, 0x00, 0x01, 0x00, 0xde, 0xad, 0xbe, 0xef,
					  0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88 };
	static const uint8_t cas[16] = { 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef,
					 0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10 };
	static const uint8_t fa[16] = { 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0 };

	(void)state;
	memset(seg, FILL, sizeof(seg));
	ql_mlx5_raddr_seg(seg, 0x0102030405060708ull, 0xa1b2c3d4);
	expect_bytes(seg, raddr, 16);
	ql_mlx5_data_seg(seg, 0x1122334455667788ull, 0x100, 0xdeadbeef);
	expect_bytes(seg, data, 16);
	ql_mlx5_atomic_seg(seg, 0x0123456789abcdefull, 0xfedcba9876543210ull);
	expect_bytes(seg, cas, 16);
	ql_mlx5_atomic_seg(seg, 5, 0);
	expect_bytes(seg, fa, 16);
}

static void test_inline_seg(void **state)
{
	/* 5 bytes: header + data fit one unit, 7 bytes of zero padding */
	static const uint8_t want5[16] = { 0x80, 0x00, 0x00, 0x05, 'h', 'e', 'l', 'l',
					   'o',	 0,    0,    0,	   0,	0,   0,	  0 };
	/* 12 bytes: exactly one unit; 13: two, 15 bytes of padding */
	static const uint8_t want13[32] = { 0x80, 0x00, 0x00, 0x0d, 'a', 'b', 'c', 'd',
					    'e',  'f',	'g',  'h',  'i', 'j', 'k', 'l',
					    'm',  0,	0,    0,    0,	 0,   0,   0,
					    0,	  0,	0,    0,    0,	 0,   0,   0 };

	(void)state;
	assert_int_equal(ql_mlx5_inline_ds(0), 1);
	assert_int_equal(ql_mlx5_inline_ds(12), 1);
	assert_int_equal(ql_mlx5_inline_ds(13), 2);
	assert_int_equal(ql_mlx5_inline_ds(28), 2);
	assert_int_equal(ql_mlx5_inline_ds(29), 3);

	assert_int_equal(ql_mlx5_inline_seg(&qp.sq, 0, 1, "hello", 5), 1);
	expect_bytes(sq_buf + 16, want5, 16);
	expect_fill(sq_buf, 16);
	expect_fill(sq_buf + 32, 32);

	memset(sq_buf, FILL, sizeof(sq_buf));
	assert_int_equal(ql_mlx5_inline_seg(&qp.sq, 1, 0, "abcdefghijklm", 13), 2);
	expect_bytes(sq_buf + 64, want13, 32);
	expect_fill(sq_buf + 96, 32);
}

/* ---- whole WQEs ---------------------------------------------------------- */

static void test_post_write_send_imm(void **state)
{
	void *ctrl = NULL;
	/* RDMA_WRITE at index 0, signaled: ctrl (ds 3), raddr, data */
	static const uint8_t write[48] = {
		0x00, 0x00, 0x00, 0x08, 0x00, 0x0a, 0xbc, 0x03, 0x00, 0x00, 0x00, 0x08,
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x7f, 0x00, 0x12, 0x34, 0x50, 0x00,
		0x00, 0x00, 0x42, 0x42, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x40,
		0x00, 0x00, 0x17, 0x17, 0x00, 0x00, 0x55, 0x55, 0x66, 0x66, 0x00, 0x00,
	};
	/* SEND_IMM at index 1, unsignaled, solicited: ctrl (ds 2), data */
	static const uint8_t send_imm[32] = {
		0x00, 0x00, 0x01, 0x0b, 0x00, 0x0a, 0xbc, 0x02, 0x00, 0x00, 0x00,
		0x02, 0xca, 0xfe, 0xf0, 0x0d, 0x00, 0x00, 0x00, 0x18, 0x00, 0x00,
		0x17, 0x17, 0x00, 0x00, 0x55, 0x55, 0x66, 0x66, 0x00, 0x80,
	};

	(void)state;
	assert_int_equal(ql_mlx5_sq_post_write(&qp, 0x555566660000ull, 64, 0x1717,
					       0x7f0012345000ull, 0x4242,
					       QL_MLX5_WQE_CTRL_CQ_UPDATE, &ctrl),
			 0);
	assert_ptr_equal(ctrl, sq_buf);
	expect_bytes(sq_buf, write, 48);
	expect_fill(sq_buf + 48, 16); /* the block's unused tail is not written */
	assert_int_equal(qp.sq.head, 1);

	assert_int_equal(ql_mlx5_sq_post_send_imm(&qp, 0x555566660080ull, 24, 0x1717, 0xcafef00d,
						  QL_MLX5_WQE_CTRL_SOLICITED, &ctrl),
			 0);
	assert_ptr_equal(ctrl, sq_buf + 64);
	expect_bytes(sq_buf + 64, send_imm, 32);
	assert_int_equal(qp.sq.head, 2);
	/* nothing reaches the device before the doorbell */
	assert_int_equal(dbrec[QL_MLX5_SND_DBR], 0xeeeeeeee);
}

static void test_post_each_opcode(void **state)
{
	uint8_t *w;
	/* SEND of 16 bytes at index 0 */
	static const uint8_t send[32] = {
		0x00, 0x00, 0x00, 0x0a, 0x00, 0x0a, 0xbc, 0x02, 0, 0, 0, 0x08, 0, 0, 0,	   0,
		0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x01, 0, 0, 0, 0,    0, 0, 0x10, 0x00,
	};
	/* WRITE_IMM at index 1: ctrl with imm, raddr, data */
	static const uint8_t write_imm[48] = {
		0x00, 0x00, 0x01, 0x09, 0x00, 0x0a, 0xbc, 0x03, 0,    0,    0,	  0x08,
		0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x20, 0x00,
		0x00, 0x00, 0x00, 0x09, 0,    0,    0,	  0,	0x00, 0x00, 0x00, 0x08,
		0x00, 0x00, 0x00, 0x01, 0,    0,    0,	  0,	0,    0,    0x10, 0x00,
	};
	/* READ at index 2: the imm field stays 0 even if one is given */
	static const uint8_t read[48] = {
		0x00, 0x00, 0x02, 0x10, 0x00, 0x0a, 0xbc, 0x03, 0, 0, 0, 0x08, 0, 0, 0,	   0,
		0,    0,    0,	  0,	0,    0,    0x30, 0x00, 0, 0, 0, 0x09, 0, 0, 0,	   0,
		0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0, 0, 0, 0,    0, 0, 0x10, 0x00,
	};
	/* CAS at index 3: ctrl (ds 4), raddr, atomic (swap, compare), data (8) */
	static const uint8_t cas[64] = {
		0x00, 0x00, 0x03, 0x11, 0x00, 0x0a, 0xbc, 0x04, 0, 0, 0, 0x08, 0, 0, 0,	   0,
		0,    0,    0,	  0,	0,    0,    0x40, 0x00, 0, 0, 0, 0x09, 0, 0, 0,	   0,
		0,    0,    0,	  0,	0,    0,    0,	  0x02, 0, 0, 0, 0,    0, 0, 0,	   0x01,
		0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x01, 0, 0, 0, 0,    0, 0, 0x18, 0x00,
	};
	/* FA at index 4 (ring slot 0): the compare half is 0 */
	static const uint8_t fa[64] = {
		0x00, 0x00, 0x04, 0x12, 0x00, 0x0a, 0xbc, 0x04, 0, 0, 0, 0x08, 0, 0, 0,	   0,
		0,    0,    0,	  0,	0,    0,    0x40, 0x00, 0, 0, 0, 0x09, 0, 0, 0,	   0,
		0,    0,    0,	  0,	0,    0,    0,	  0x03, 0, 0, 0, 0,    0, 0, 0,	   0,
		0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x01, 0, 0, 0, 0,    0, 0, 0x18, 0x00,
	};
	struct ql_mlx5_sge sge = { 0x1000, 16, 1 };
	struct ql_mlx5_wr wr;

	(void)state;
	assert_int_equal(ql_mlx5_sq_post_send(&qp, 0x1000, 16, 1, QL_MLX5_WQE_CTRL_CQ_UPDATE, NULL),
			 0);
	expect_bytes(sq_buf, send, 32);
	/* through the general entry with an imm on WRITE_IMM */
	memset(&wr, 0, sizeof(wr));
	wr.opcode = QL_MLX5_OPCODE_RDMA_WRITE_IMM;
	wr.fm_ce_se = QL_MLX5_WQE_CTRL_CQ_UPDATE;
	wr.imm = 7;
	wr.sge = &sge;
	wr.num_sge = 1;
	sge.length = 8;
	wr.raddr = 0x2000;
	wr.rkey = 9;
	assert_int_equal(ql_mlx5_sq_post(&qp, &wr, NULL), 0);
	expect_bytes(sq_buf + 64, write_imm, 48);
	wr.opcode = QL_MLX5_OPCODE_RDMA_READ;
	wr.imm = 0x77777777;
	wr.raddr = 0x3000;
	sge.length = 0x200;
	assert_int_equal(ql_mlx5_sq_post(&qp, &wr, NULL), 0);
	expect_bytes(sq_buf + 128, read, 48);
	assert_int_equal(ql_mlx5_sq_post_cas(&qp, 0x1800, 1, 0x4000, 9, 1, 2,
					     QL_MLX5_WQE_CTRL_CQ_UPDATE, NULL),
			 0);
	expect_bytes(sq_buf + 192, cas, 64);
	qp.sq.tail = 1; /* the first block completed */
	assert_int_equal(ql_mlx5_sq_post_fadd(&qp, 0x1800, 1, 0x4000, 9, 3,
					      QL_MLX5_WQE_CTRL_CQ_UPDATE, NULL),
			 0);
	expect_bytes(sq_buf, fa, 64);
	assert_int_equal(qp.sq.head, 5);
	w = ql_mlx5_sq_wqe(&qp.sq, 4);
	assert_ptr_equal(w, sq_buf);
}

static void test_post_inline(void **state)
{
	/* SEND inline of 4 bytes at index 0: ctrl (ds 2), inline (1 unit) */
	static const uint8_t send[32] = {
		0x00, 0x00, 0x00, 0x0a, 0x00, 0x0a, 0xbc, 0x02, 0, 0, 0, 0x08, 0, 0, 0, 0,
		0x80, 0x00, 0x00, 0x04, 0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 0,    0, 0, 0, 0,
	};
	/* WRITE inline of 8 bytes at index 1: ctrl (ds 3), raddr, inline */
	static const uint8_t write[48] = {
		0x00, 0x00, 0x01, 0x08, 0x00, 0x0a, 0xbc, 0x03, 0, 0, 0, 0,    0, 0, 0, 0,
		0,    0,    0,	  0,	0,    0,    0x50, 0x00, 0, 0, 0, 0x0b, 0, 0, 0, 0,
		0x80, 0x00, 0x00, 0x08, 1,    2,    3,	  4,	5, 6, 7, 8,    0, 0, 0, 0,
	};
	static const uint8_t four[4] = { 0xde, 0xad, 0xbe, 0xef };
	static const uint8_t eight[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };

	(void)state;
	assert_int_equal(
		ql_mlx5_sq_post_send_inline(&qp, four, 4, QL_MLX5_WQE_CTRL_CQ_UPDATE, NULL), 0);
	expect_bytes(sq_buf, send, 32);
	assert_int_equal(ql_mlx5_sq_post_write_inline(&qp, eight, 8, 0x5000, 0xb, 0, NULL), 0);
	expect_bytes(sq_buf + 64, write, 48);
	assert_int_equal(qp.sq.head, 2);
}

/* ---- send queue wrap-around ---------------------------------------------- */

static void test_sq_wrap_inline(void **state)
{
	uint8_t data[40], want_tail[12];
	/* WRITE inline of 40 bytes at index 3, the ring's last block: ctrl,
	 * raddr, inline header and 28 bytes fill block 3; the other 12 bytes
	 * and 4 bytes of padding are the first 16 bytes of block 0 */
	static const uint8_t head[36] = {
		0x00, 0x00, 0x03, 0x08, 0x00, 0x0a, 0xbc, 0x05, 0,    0, 0,    0x08,
		0,    0,    0,	  0,	0,    0,    0,	  0,	0,    0, 0x60, 0x00,
		0,    0,    0,	  0x0c, 0,    0,    0,	  0,	0x80, 0, 0,    40,
	};

	(void)state;
	for (int i = 0; i < 40; i++)
		data[i] = (uint8_t)(0xa0 + i);
	qp.sq.head = qp.sq.tail = 3;
	assert_int_equal(ql_mlx5_sq_post_write_inline(&qp, data, 40, 0x6000, 0xc,
						      QL_MLX5_WQE_CTRL_CQ_UPDATE, NULL),
			 0);
	expect_bytes(sq_buf + 192, head, 36);
	expect_bytes(sq_buf + 228, data, 28);
	memcpy(want_tail, data + 28, 12);
	expect_bytes(sq_buf, want_tail, 12);
	static const uint8_t pad[4] = { 0, 0, 0, 0 };
	expect_bytes(sq_buf + 12, pad, 4);
	expect_fill(sq_buf + 16, 48); /* the rest of block 0: not the WQE's */
	expect_fill(sq_buf + 64, 128);
	assert_int_equal(qp.sq.head, 5); /* two basic blocks */
	assert_int_equal(ql_mlx5_wqe_nbb(sq_buf + 192), 2);
}

static void test_sq_wrap_segments(void **state)
{
	struct ql_mlx5_sge sge[5];
	struct ql_mlx5_wr wr;
	/* a SEND with 5 data segments at index 3: ctrl + 3 segments in block
	 * 3, segments 4 and 5 at the start of block 0 (ds 6, 2 blocks) */
	static const uint8_t ctrl[16] = { 0x00, 0x00, 0x03, 0x0a, 0x00, 0x0a, 0xbc, 0x06,
					  0,	0,    0,    0,	  0,	0,    0,    0 };
	static const uint8_t seg4[16] = { 0, 0, 0, 4, 0, 0, 0, 0x24, 0, 0, 0, 0, 0, 0, 0x40, 0x03 };
	static const uint8_t seg5[16] = { 0, 0, 0, 5, 0, 0, 0, 0x25, 0, 0, 0, 0, 0, 0, 0x40, 0x04 };

	(void)state;
	for (uint32_t i = 0; i < 5; i++) {
		sge[i].addr = 0x4000 + i;
		sge[i].length = i + 1;
		sge[i].lkey = 0x21 + i;
	}
	memset(&wr, 0, sizeof(wr));
	wr.opcode = QL_MLX5_OPCODE_SEND;
	wr.sge = sge;
	wr.num_sge = 5;
	qp.sq.head = qp.sq.tail = 3;
	assert_int_equal(ql_mlx5_sq_post(&qp, &wr, NULL), 0);
	expect_bytes(sq_buf + 192, ctrl, 16);
	expect_bytes(sq_buf + 0, seg4, 16);
	expect_bytes(sq_buf + 16, seg5, 16);
	expect_fill(sq_buf + 32, 32);
	assert_int_equal(qp.sq.head, 5);
}

static void test_sq_index_wrap_16bit(void **state)
{
	static const uint8_t at_ffff[4] = { 0x00, 0xff, 0xff, 0x0a };
	static const uint8_t at_0000[4] = { 0x00, 0x00, 0x00, 0x0a };
	void *c1, *c2;

	(void)state;
	qp.sq.head = qp.sq.tail = 0xffff;
	assert_int_equal(ql_mlx5_sq_post_send(&qp, 0, 0, 1, 0, &c1), 0);
	assert_int_equal(ql_mlx5_sq_post_send(&qp, 0, 0, 1, 0, &c2), 0);
	expect_bytes(c1, at_ffff, 4);
	expect_bytes(c2, at_0000, 4);
	assert_ptr_equal(c1, sq_buf + 192); /* 0xffff & 3 */
	assert_ptr_equal(c2, sq_buf);
	ql_mlx5_sq_doorbell(&qp, c2);
	/* the record carries the low 16 bits of the producer count 0x10001 */
	static const uint8_t rec[4] = { 0x00, 0x00, 0x00, 0x01 };
	expect_bytes((const void *)&dbrec[QL_MLX5_SND_DBR], rec, 4);
	/* a CQE's 16-bit counter 0x0000 completes up to the 32-bit 0x10000 */
	ql_mlx5_sq_complete(&qp, 0x0000);
	assert_int_equal(qp.sq.tail, 0x10001);
}

static void test_sq_full(void **state)
{
	uint8_t data[40] = { 0 };
	uint8_t before[sizeof(sq_buf)];

	(void)state;
	for (int i = 0; i < 3; i++)
		assert_int_equal(ql_mlx5_sq_post_send(&qp, 0, 0, 1, 0, NULL), 0);
	memcpy(before, sq_buf, sizeof(sq_buf));
	/* two blocks needed, one free */
	assert_int_equal(ql_mlx5_sq_room(&qp.sq), 1);
	assert_int_equal(ql_mlx5_sq_post_write_inline(&qp, data, 40, 0, 0, 0, NULL), -ENOMEM);
	assert_int_equal(qp.sq.head, 3);
	assert_memory_equal(before, sq_buf, sizeof(sq_buf));
	assert_int_equal(ql_mlx5_sq_post_send(&qp, 0, 0, 1, 0, NULL), 0);
	assert_int_equal(ql_mlx5_sq_post_send(&qp, 0, 0, 1, 0, NULL), -ENOMEM);
	/* a CQE for WQE 1 (signaled) frees WQEs 0 and 1 (unsignaled before it) */
	ql_mlx5_sq_complete(&qp, 1);
	assert_int_equal(qp.sq.tail, 2);
	assert_int_equal(ql_mlx5_sq_room(&qp.sq), 2);
	assert_int_equal(ql_mlx5_sq_post_write_inline(&qp, data, 40, 0, 0, 0, NULL), 0);
	assert_int_equal(qp.sq.head, 6);
	/* completing that 2-block WQE (index 4) frees both its blocks */
	ql_mlx5_sq_complete(&qp, 4);
	assert_int_equal(qp.sq.tail, 6);
}

static void test_sq_bad_requests(void **state)
{
	struct ql_mlx5_sge sge[64];
	struct ql_mlx5_wr wr;
	uint8_t big[1024] = { 0 };

	(void)state;
	memset(sge, 0, sizeof(sge));
	memset(&wr, 0, sizeof(wr));
	wr.sge = sge;
	wr.num_sge = 1;
	wr.opcode = 0x0e; /* TSO: not a QP opcode this header builds */
	assert_int_equal(ql_mlx5_sq_post(&qp, &wr, NULL), -EINVAL);
	wr.opcode = QL_MLX5_OPCODE_ATOMIC_CS;
	sge[0].length = 4; /* atomics are 8 bytes */
	assert_int_equal(ql_mlx5_sq_post(&qp, &wr, NULL), -EINVAL);
	sge[0].length = 8;
	wr.num_sge = 2;
	assert_int_equal(ql_mlx5_sq_post(&qp, &wr, NULL), -EINVAL);
	wr.num_sge = 1;
	wr.inline_data = big;
	wr.inline_len = 8;
	assert_int_equal(ql_mlx5_sq_post(&qp, &wr, NULL), -EINVAL);
	wr.opcode = QL_MLX5_OPCODE_RDMA_READ;
	assert_int_equal(ql_mlx5_sq_post(&qp, &wr, NULL), -EINVAL);
	/* more than 63 units */
	wr.opcode = QL_MLX5_OPCODE_SEND;
	wr.inline_data = NULL;
	wr.num_sge = 63;
	assert_int_equal(ql_mlx5_sq_post(&qp, &wr, NULL), -EINVAL);
	wr.inline_data = big;
	wr.inline_len = 62 * 16 - 4 + 1;
	assert_int_equal(ql_mlx5_sq_post(&qp, &wr, NULL), -EINVAL);
	wr.num_sge = 1;
	wr.sge = NULL;
	wr.inline_data = NULL;
	assert_int_equal(ql_mlx5_sq_post(&qp, &wr, NULL), -EINVAL);
	assert_int_equal(qp.sq.head, 0);
	expect_fill(sq_buf, sizeof(sq_buf));
}

/* ---- doorbell ------------------------------------------------------------ */

static void test_doorbell(void **state)
{
	void *ctrl;
	static const uint8_t rec1[4] = { 0, 0, 0, 1 };
	static const uint8_t rec3[4] = { 0, 0, 0, 3 };
	/* the 8-byte doorbell: the last WQE's ctrl words (index 2, CAS, ds 4) */
	static const uint8_t db[8] = { 0x00, 0x00, 0x02, 0x11, 0x00, 0x0a, 0xbc, 0x04 };

	(void)state;
	assert_int_equal(ql_mlx5_sq_post_send(&qp, 0, 0, 1, 0, &ctrl), 0);
	ql_mlx5_sq_doorbell(&qp, ctrl);
	expect_bytes((const void *)&dbrec[QL_MLX5_SND_DBR], rec1, 4);
	expect_bytes(bf, ctrl, 8);
	expect_fill(bf + 8, sizeof(bf) - 8);
	assert_int_equal(qp.bf_offset, 0);
	assert_int_equal(dbrec[QL_MLX5_RCV_DBR], 0xeeeeeeee);

	/* two WQEs, one doorbell for both: the record counts both */
	assert_int_equal(ql_mlx5_sq_post_send(&qp, 0, 0, 1, 0, NULL), 0);
	assert_int_equal(ql_mlx5_sq_post_cas(&qp, 0, 1, 0, 1, 0, 0, 0, &ctrl), 0);
	ql_mlx5_sq_doorbell(&qp, ctrl);
	expect_bytes((const void *)&dbrec[QL_MLX5_SND_DBR], rec3, 4);
	expect_bytes(bf, db, 8);
}

static void test_doorbell_blueflame(void **state)
{
	uint8_t data[40];
	void *ctrl;

	(void)state;
	for (int i = 0; i < 40; i++)
		data[i] = (uint8_t)i;
	qp.bf_size = 256;
	/* a one-block WQE: the whole block goes to the first buffer half */
	assert_int_equal(ql_mlx5_sq_post_send(&qp, 0x10, 16, 1, 0, &ctrl), 0);
	ql_mlx5_sq_doorbell(&qp, ctrl);
	expect_bytes(bf, sq_buf, 64);
	expect_fill(bf + 64, 192);
	assert_int_equal(qp.bf_offset, 256);
	/* a two-block WQE wrapping the ring (index 3 then 0): both blocks, in
	 * WQE order, to the second half */
	qp.sq.head = qp.sq.tail = 3;
	assert_int_equal(ql_mlx5_sq_post_write_inline(&qp, data, 40, 0x6000, 0xc, 0, &ctrl), 0);
	ql_mlx5_sq_doorbell(&qp, ctrl);
	expect_bytes(bf + 256, sq_buf + 192, 64);
	expect_bytes(bf + 320, sq_buf, 64);
	expect_fill(bf + 384, 128);
	assert_int_equal(qp.bf_offset, 0);
	/* a WQE larger than the BlueFlame buffer: the 8-byte doorbell only */
	memset(bf, FILL, sizeof(bf));
	qp.bf_size = 64;
	qp.sq.head = qp.sq.tail = 0;
	assert_int_equal(ql_mlx5_sq_post_write_inline(&qp, data, 40, 0x6000, 0xc, 0, &ctrl), 0);
	ql_mlx5_sq_doorbell(&qp, ctrl);
	expect_bytes(bf, ctrl, 8);
	expect_fill(bf + 8, sizeof(bf) - 8);
	assert_int_equal(qp.bf_offset, 64);
}

/* ---- receive queue ------------------------------------------------------- */

static void test_rq_post(void **state)
{
	struct ql_mlx5_sge sge[3] = { { 0x1000, 0x40, 0x11 }, { 0x2000, 0x80, 0x22 }, { 0, 0, 0 } };
	/* one entry: its data segment, then the invalid-lkey terminator */
	static const uint8_t one[32] = {
		0, 0, 0, 0x40, 0, 0, 0, 0x11, 0, 0, 0, 0, 0, 0, 0x10, 0x00,
		0, 0, 0, 0,    0, 0, 1, 0,    0, 0, 0, 0, 0, 0, 0,    0,
	};
	/* two entries fill the stride: no terminator */
	static const uint8_t two[32] = {
		0, 0, 0, 0x40, 0, 0, 0, 0x11, 0, 0, 0, 0, 0, 0, 0x10, 0x00,
		0, 0, 0, 0x80, 0, 0, 0, 0x22, 0, 0, 0, 0, 0, 0, 0x20, 0x00,
	};
	static const uint8_t rec1[4] = { 0, 0, 0, 1 };
	static const uint8_t rec2[4] = { 0, 0, 0, 2 };
	static const uint8_t rec5[4] = { 0, 0, 0, 5 };

	(void)state;
	assert_int_equal(ql_mlx5_rq_post(&qp, sge, 1), 0);
	expect_bytes(rq_buf, one, 32);
	expect_bytes((const void *)&dbrec[QL_MLX5_RCV_DBR], rec1, 4);
	assert_int_equal(dbrec[QL_MLX5_SND_DBR], 0xeeeeeeee);
	assert_int_equal(ql_mlx5_rq_post(&qp, sge, 2), 0);
	expect_bytes(rq_buf + 32, two, 32);
	expect_bytes((const void *)&dbrec[QL_MLX5_RCV_DBR], rec2, 4);
	assert_int_equal(ql_mlx5_rq_post(&qp, sge, 3), -EINVAL); /* 48 bytes > stride */
	assert_int_equal(ql_mlx5_rq_post(&qp, sge, 1), 0);
	assert_int_equal(ql_mlx5_rq_post(&qp, sge, 1), 0);
	/* full: 4 posted, none consumed */
	memset(rq_buf, FILL, 32);
	assert_int_equal(ql_mlx5_rq_post(&qp, sge, 1), -ENOMEM);
	expect_fill(rq_buf, 32);
	/* one consumed: the next entry wraps to slot 0 */
	ql_mlx5_rq_complete(&qp);
	assert_int_equal(ql_mlx5_rq_post(&qp, sge, 1), 0);
	expect_bytes(rq_buf, one, 32);
	expect_bytes((const void *)&dbrec[QL_MLX5_RCV_DBR], rec5, 4);
	assert_int_equal(qp.rq.head, 5);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_ctrl_seg, setup),
		cmocka_unit_test_setup(test_raddr_data_atomic_segs, setup),
		cmocka_unit_test_setup(test_inline_seg, setup),
		cmocka_unit_test_setup(test_post_write_send_imm, setup),
		cmocka_unit_test_setup(test_post_each_opcode, setup),
		cmocka_unit_test_setup(test_post_inline, setup),
		cmocka_unit_test_setup(test_sq_wrap_inline, setup),
		cmocka_unit_test_setup(test_sq_wrap_segments, setup),
		cmocka_unit_test_setup(test_sq_index_wrap_16bit, setup),
		cmocka_unit_test_setup(test_sq_full, setup),
		cmocka_unit_test_setup(test_sq_bad_requests, setup),
		cmocka_unit_test_setup(test_doorbell, setup),
		cmocka_unit_test_setup(test_doorbell_blueflame, setup),
		cmocka_unit_test_setup(test_rq_post, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
