/* SPDX-License-Identifier: MIT */
/*
 * qlink/mlx5.h, the completion side: CQEs written here byte by byte at the
 * offsets of the ConnectX PRM / mlx5dv.h (struct mlx5_cqe64 and
 * mlx5_err_cqe, big-endian fields) are read back by ql_mlx5_cq_poll. Every
 * kind qlink parses: requester completions (with the WQE's opcode),
 * SEND / SEND_IMM / WRITE_IMM responder completions (byte count, immediate),
 * requester and responder error CQEs (syndrome and vendor syndrome), the
 * owner bit across wrap-around (a CQE left from the previous pass is never
 * taken for a new one), the consumer index in the doorbell record (24 bits,
 * wrapping), 128-byte CQEs, the scatter-to-CQE formats, and what is refused
 * (INVALID opcode: none ready; compressed: -EPROTO, left in place).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "qlink/mlx5.h"

#define CQE_CNT 4

static _Alignas(4096) uint8_t cq_buf[CQE_CNT * 128];
static _Alignas(64) uint32_t cq_dbrec[2];
static struct ql_mlx5_cq cq;

static void cq_init(uint32_t cqe_size)
{
	memset(cq_buf, 0, sizeof(cq_buf));
	/* as rdma-core hands a CQ over: every CQE INVALID, owner 0 */
	for (uint32_t i = 0; i < CQE_CNT; i++)
		cq_buf[i * cqe_size + cqe_size - 1] = 0xf0;
	cq_dbrec[0] = cq_dbrec[1] = 0;
	memset(&cq, 0, sizeof(cq));
	cq.cqn = 0x77;
	cq.buf = cq_buf;
	cq.cqe_cnt = CQE_CNT;
	cq.cqe_size = cqe_size;
	cq.dbrec = cq_dbrec;
}

static int setup(void **state)
{
	(void)state;
	cq_init(64);
	return 0;
}

/* The 64 bytes of CQE slot `slot` (the second half of a 128-byte one). */
static uint8_t *slot_bytes(uint32_t slot)
{
	return cq_buf + slot * cq.cqe_size + (cq.cqe_size == 128 ? 64 : 0);
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* What the device writes: the fields first, op_own (byte 63) last. */
static void dev_cqe(uint32_t slot, uint8_t opcode, uint8_t owner, uint16_t wqe_counter,
		    uint32_t sop_qpn, uint32_t byte_cnt, uint32_t imm)
{
	uint8_t *e = slot_bytes(slot);

	memset(e, 0, 63);
	put32(e + 36, imm);
	put32(e + 44, byte_cnt);
	put32(e + 56, sop_qpn);
	put16(e + 60, wqe_counter);
	e[63] = (uint8_t)(opcode << 4 | owner);
}

static uint32_t dbrec_value(void)
{
	const uint8_t *b = (const uint8_t *)&cq_dbrec[0];

	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

static void test_empty(void **state)
{
	struct ql_mlx5_cqe_info ci;

	(void)state;
	assert_int_equal(ql_mlx5_cq_poll(&cq, &ci), 0);
	assert_int_equal(cq.cons_index, 0);
	assert_int_equal(cq_dbrec[0], 0);
	/* an INVALID opcode with the expected owner is not a completion */
	slot_bytes(0)[63] = 0xf0;
	assert_int_equal(ql_mlx5_cq_poll(&cq, &ci), 0);
}

static void test_req(void **state)
{
	struct ql_mlx5_cqe_info ci;
	uint8_t *e;

	(void)state;
	/* SEND (0x0a) WQE 0x0102 of QP 0xabc completed */
	dev_cqe(0, 0, 0, 0x0102, 0x0a000abc, 0, 0);
	e = slot_bytes(0);
	e[48] = 0x01; /* timestamp 0x0100000000000002 */
	e[55] = 0x02;
	memset(&ci, 0xff, sizeof(ci));
	assert_int_equal(ql_mlx5_cq_poll(&cq, &ci), 1);
	assert_int_equal(ci.opcode, QL_MLX5_CQE_REQ);
	assert_int_equal(ci.send_opcode, QL_MLX5_OPCODE_SEND);
	assert_int_equal(ci.wqe_counter, 0x0102);
	assert_int_equal(ci.qpn, 0xabc);
	assert_int_equal(ci.byte_cnt, 0);
	assert_int_equal(ci.imm, 0);
	assert_int_equal(ci.syndrome, 0);
	assert_int_equal(ci.vendor_syndrome, 0);
	assert_int_equal(ci.format, QL_MLX5_CQE_FORMAT_NORMAL);
	assert_int_equal(ci.owner, 0);
	assert_true(ci.timestamp == 0x0100000000000002ull);
	assert_null(ci.inline_data);
	assert_int_equal(cq.cons_index, 1);
	assert_int_equal(dbrec_value(), 1);
	/* the next slot is still INVALID */
	assert_int_equal(ql_mlx5_cq_poll(&cq, &ci), 0);

	/* an RDMA READ's completion carries the bytes read */
	dev_cqe(1, 0, 0, 0x0103, 0x10000abc, 512, 0);
	assert_int_equal(ql_mlx5_cq_poll(&cq, &ci), 1);
	assert_int_equal(ci.send_opcode, QL_MLX5_OPCODE_RDMA_READ);
	assert_int_equal(ci.byte_cnt, 512);
}

static void test_resp(void **state)
{
	struct ql_mlx5_cqe_info ci;

	(void)state;
	/* SEND of 100 bytes into receive WQE 5 */
	dev_cqe(0, 2, 0, 5, 0x00000abc, 100, 0);
	/* SEND_IMM: the immediate 0xcafef00d as on the wire */
	dev_cqe(1, 3, 0, 6, 0x00000abc, 24, 0xcafef00d);
	/* WRITE_IMM: 4096 bytes written, immediate 7 (it used WQE 7) */
	dev_cqe(2, 1, 0, 7, 0x00000abc, 4096, 7);
	/* the sop byte of a responder CQE is not a send opcode */
	dev_cqe(3, 2, 0, 8, 0x0a000abc, 1, 0x11111111);

	assert_int_equal(ql_mlx5_cq_poll(&cq, &ci), 1);
	assert_int_equal(ci.opcode, QL_MLX5_CQE_RESP_SEND);
	assert_int_equal(ci.byte_cnt, 100);
	assert_int_equal(ci.wqe_counter, 5);
	assert_int_equal(ci.qpn, 0xabc);
	assert_int_equal(ci.imm, 0);
	assert_int_equal(ci.send_opcode, 0);

	assert_int_equal(ql_mlx5_cq_poll(&cq, &ci), 1);
	assert_int_equal(ci.opcode, QL_MLX5_CQE_RESP_SEND_IMM);
	assert_int_equal(ci.byte_cnt, 24);
	assert_true(ci.imm == 0xcafef00du);

	assert_int_equal(ql_mlx5_cq_poll(&cq, &ci), 1);
	assert_int_equal(ci.opcode, QL_MLX5_CQE_RESP_WR_IMM);
	assert_int_equal(ci.byte_cnt, 4096);
	assert_int_equal(ci.imm, 7);
	assert_int_equal(ci.wqe_counter, 7);

	assert_int_equal(ql_mlx5_cq_poll(&cq, &ci), 1);
	assert_int_equal(ci.send_opcode, 0);
	assert_int_equal(ci.imm, 0); /* RESP_SEND has no immediate */
	assert_int_equal(dbrec_value(), 4);
}

static void test_errors(void **state)
{
	struct ql_mlx5_cqe_info ci;
	uint8_t *e;

	(void)state;
	/* requester error: RDMA_WRITE WQE 0x0107 of QP 0xabc, remote access
	 * error (0x13), vendor syndrome 0x88 */
	dev_cqe(0, 13, 0, 0x0107, 0x08000abc, 0, 0);
	e = slot_bytes(0);
	e[54] = 0x88;
	e[55] = 0x13;
	/* responder error: flush (0x05), vendor 0xf9, receive WQE 3; byte_cnt
	 * bytes in an error CQE are not a count */
	dev_cqe(1, 14, 0, 3, 0x00000abc, 0x12345678, 0);
	e = slot_bytes(1);
	e[54] = 0xf9;
	e[55] = 0x05;

	assert_int_equal(ql_mlx5_cq_poll(&cq, &ci), 1);
	assert_int_equal(ci.opcode, QL_MLX5_CQE_REQ_ERR);
	assert_int_equal(ci.syndrome, QL_MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR);
	assert_int_equal(ci.vendor_syndrome, 0x88);
	assert_int_equal(ci.send_opcode, QL_MLX5_OPCODE_RDMA_WRITE);
	assert_int_equal(ci.wqe_counter, 0x0107);
	assert_int_equal(ci.qpn, 0xabc);

	assert_int_equal(ql_mlx5_cq_poll(&cq, &ci), 1);
	assert_int_equal(ci.opcode, QL_MLX5_CQE_RESP_ERR);
	assert_int_equal(ci.syndrome, QL_MLX5_CQE_SYNDROME_WR_FLUSH_ERR);
	assert_int_equal(ci.vendor_syndrome, 0xf9);
	assert_int_equal(ci.wqe_counter, 3);
	assert_int_equal(ci.byte_cnt, 0);
	assert_int_equal(ci.send_opcode, 0);
}

/* Three passes over a 4-entry ring: the device's owner bit is the pass's
 * parity; before each slot is rewritten it still holds the previous pass's
 * CQE, which must read as "none". */
static void test_owner_wrap(void **state)
{
	struct ql_mlx5_cqe_info ci;

	(void)state;
	for (uint32_t n = 0; n < 3 * CQE_CNT; n++) {
		uint8_t owner = (uint8_t)((n / CQE_CNT) & 1);

		if (n >= CQE_CNT) /* the slot holds pass n/4-1's CQE */
			assert_int_equal(ql_mlx5_cq_poll(&cq, &ci), 0);
		assert_int_equal(ql_mlx5_cqe_sw_owner(&cq, n), owner);
		dev_cqe(n % CQE_CNT, 0, owner, (uint16_t)n, 0x0a000abc, 0, 0);
		assert_int_equal(ql_mlx5_cq_poll(&cq, &ci), 1);
		assert_int_equal(ci.wqe_counter, n);
		assert_int_equal(ci.owner, owner);
		assert_int_equal(dbrec_value(), n + 1);
	}
	/* a CQE written with the previous pass's owner (0; pass 3 is odd) */
	dev_cqe(0, 0, 0, 99, 0x0a000abc, 0, 0);
	assert_int_equal(ql_mlx5_cq_poll(&cq, &ci), 0);
	assert_int_equal(cq.cons_index, 12);
}

static void test_dbrec_24bit(void **state)
{
	struct ql_mlx5_cqe_info ci;

	(void)state;
	/* consumer count 0xffffff: slot 3, pass parity 1; after it, the record
	 * wraps to 0 (24 bits) while the count goes on */
	cq.cons_index = 0xffffff;
	dev_cqe(3, 0, 1, 1, 0x0a000abc, 0, 0);
	assert_int_equal(ql_mlx5_cq_poll(&cq, &ci), 1);
	assert_int_equal(cq.cons_index, 0x1000000);
	assert_int_equal(dbrec_value(), 0);
	/* 0x1000000: slot 0, parity 0 */
	dev_cqe(0, 0, 0, 2, 0x0a000abc, 0, 0);
	assert_int_equal(ql_mlx5_cq_poll(&cq, &ci), 1);
	assert_int_equal(dbrec_value(), 1);
}

static void test_compressed_refused(void **state)
{
	struct ql_mlx5_cqe_info ci;

	(void)state;
	dev_cqe(0, 0, 0, 1, 0x0a000abc, 0, 0);
	slot_bytes(0)[63] |= QL_MLX5_CQE_FORMAT_COMPRESSED << 2;
	assert_int_equal(ql_mlx5_cq_poll(&cq, &ci), -EPROTO);
	assert_int_equal(cq.cons_index, 0);
	assert_int_equal(cq_dbrec[0], 0);
	assert_int_equal(ql_mlx5_cq_poll(&cq, &ci), -EPROTO); /* still there */
}

static void test_cqe128_and_inline(void **state)
{
	struct ql_mlx5_cqe_info ci;

	(void)state;
	cq_init(128);
	/* a 128-byte CQE: the 64-byte CQE is its second half */
	dev_cqe(0, 2, 0, 1, 0x00000abc, 16, 0);
	assert_ptr_equal(ql_mlx5_cqe(&cq, 0), cq_buf + 64);
	assert_ptr_equal(ql_mlx5_cqe(&cq, 5), cq_buf + 128 + 64);
	assert_int_equal(ql_mlx5_cq_poll(&cq, &ci), 1);
	assert_int_equal(ci.byte_cnt, 16);
	assert_null(ci.inline_data);
	/* scatter to CQE, 64 bytes: the data is the entry's first half */
	dev_cqe(1, 2, 0, 2, 0x00000abc, 40, 0);
	slot_bytes(1)[63] |= QL_MLX5_CQE_FORMAT_INLINE_64 << 2;
	assert_int_equal(ql_mlx5_cq_poll(&cq, &ci), 1);
	assert_int_equal(ci.format, QL_MLX5_CQE_FORMAT_INLINE_64);
	assert_ptr_equal(ci.inline_data, cq_buf + 128);
	/* 32 bytes: the CQE's own first 32 bytes */
	cq_init(64);
	dev_cqe(0, 2, 0, 1, 0x00000abc, 20, 0);
	slot_bytes(0)[63] |= QL_MLX5_CQE_FORMAT_INLINE_32 << 2;
	assert_int_equal(ql_mlx5_cq_poll(&cq, &ci), 1);
	assert_int_equal(ci.format, QL_MLX5_CQE_FORMAT_INLINE_32);
	assert_ptr_equal(ci.inline_data, cq_buf);
	assert_int_equal(ci.opcode, QL_MLX5_CQE_RESP_SEND);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_empty, setup),
		cmocka_unit_test_setup(test_req, setup),
		cmocka_unit_test_setup(test_resp, setup),
		cmocka_unit_test_setup(test_errors, setup),
		cmocka_unit_test_setup(test_owner_wrap, setup),
		cmocka_unit_test_setup(test_dbrec_24bit, setup),
		cmocka_unit_test_setup(test_compressed_refused, setup),
		cmocka_unit_test_setup(test_cqe128_and_inline, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
