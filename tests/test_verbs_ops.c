/* SPDX-License-Identifier: MIT */
/*
 * Every operation, scatter/gather, inline, signaled/unsignaled, send-queue
 * accounting, completion fields and ordering, on RC and UC.
 */
#include "verbs_fixture.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LK(e) ql_mr_lkey((e)->mr)
#define RK(e) ql_mr_rkey((e)->mr)
#define RADDR(e, off) ((uint64_t)(uintptr_t)((e)->buf + (off)))

/* The source QP of a receive completion: the soft NIC reports it on RC and
 * UC too; libibverbs defines wc.src_qp for UD only, so on ibv it is not
 * checked. */
#define assert_src_qp(pr, wc, qpn)                            \
	do {                                                  \
		if (!(pr)->param->ibv)                        \
			assert_int_equal((wc).src_qp, (qpn)); \
	} while (0)

static bool all_bytes(const uint8_t *p, size_t len, uint8_t v)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != v)
			return false;
	return true;
}

static void test_write(void **state)
{
	struct vt_pair *pr = *state;
	struct ibv_wc wc;

	vt_fill(pr->a.buf, 4000, 1);
	assert_int_equal(vt_post_write(pr->a.qp, 0x1234567890ull, pr->a.buf, 4000, LK(&pr->a),
				       RADDR(&pr->b, 4096), RK(&pr->b), IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(pr->a.scq, &wc, 0x1234567890ull, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	assert_int_equal(wc.qp_num, ql_qp_num(pr->a.qp));
	assert_true(vt_check(pr->b.buf + 4096, 4000, 1));
	/* exactly the range, nothing around it */
	assert_true(all_bytes(pr->b.buf, 4096, 0));
	assert_true(all_bytes(pr->b.buf + 8096, 1024, 0));
	/* a WRITE consumes no receive and makes no completion at the target */
	vt_expect_none(pr->b.rcq, 5);
	vt_expect_none(pr->b.scq, 5);
}

static void test_write_large(void **state)
{
	struct vt_pair *pr = *state;
	struct ibv_wc wc;
	size_t len = VT_BUF_LEN - 8;

	vt_fill(pr->a.buf, len, 2);
	assert_int_equal(vt_post_write(pr->a.qp, 7, pr->a.buf, (uint32_t)len, LK(&pr->a),
				       RADDR(&pr->b, 8), RK(&pr->b), IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(pr->a.scq, &wc, 7, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	assert_true(vt_check(pr->b.buf + 8, len, 2));
	assert_true(all_bytes(pr->b.buf, 8, 0));
}

static void test_write_imm(void **state)
{
	struct vt_pair *pr = *state;
	struct ibv_wc wc;
	uint32_t imm = htonl(0x12345678);

	assert_int_equal(vt_post_recv(pr->b.qp, 55, pr->b.buf + 32768, 256, LK(&pr->b)), 0);
	vt_fill(pr->a.buf, 1000, 3);
	assert_int_equal(vt_post_write_imm(pr->a.qp, 9, pr->a.buf, 1000, LK(&pr->a),
					   RADDR(&pr->b, 100), RK(&pr->b), imm, IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(pr->a.scq, &wc, 9, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	assert_int_equal(wc.qp_num, ql_qp_num(pr->a.qp));

	vt_expect_wc(pr->b.rcq, &wc, 55, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM);
	assert_int_equal(wc.byte_len, 1000);
	assert_true(wc.wc_flags & IBV_WC_WITH_IMM);
	assert_int_equal(wc.imm_data, imm);
	assert_int_equal(wc.qp_num, ql_qp_num(pr->b.qp));
	assert_src_qp(pr, wc, ql_qp_num(pr->a.qp));
	assert_true(vt_check(pr->b.buf + 100, 1000, 3));
	/* the receive buffer itself is not written */
	assert_true(all_bytes(pr->b.buf + 32768, 256, 0));
}

static void do_send(struct vt_pair *pr, bool with_imm)
{
	struct ibv_wc wc;
	uint32_t imm = htonl(0xa1b2c3d4);

	assert_int_equal(vt_post_recv(pr->b.qp, 77, pr->b.buf + 8192, 256, LK(&pr->b)), 0);
	vt_fill(pr->a.buf, 100, 4);
	if (with_imm)
		assert_int_equal(vt_post_send_imm(pr->a.qp, 12, pr->a.buf, 100, LK(&pr->a), imm,
						  IBV_SEND_SIGNALED),
				 0);
	else
		assert_int_equal(vt_post_send(pr->a.qp, 12, pr->a.buf, 100, LK(&pr->a),
					      IBV_SEND_SIGNALED),
				 0);
	vt_expect_wc(pr->a.scq, &wc, 12, IBV_WC_SUCCESS, IBV_WC_SEND);
	assert_int_equal(wc.qp_num, ql_qp_num(pr->a.qp));

	vt_expect_wc(pr->b.rcq, &wc, 77, IBV_WC_SUCCESS, IBV_WC_RECV);
	assert_int_equal(wc.byte_len, 100);
	assert_int_equal(wc.qp_num, ql_qp_num(pr->b.qp));
	assert_src_qp(pr, wc, ql_qp_num(pr->a.qp));
	if (with_imm) {
		assert_true(wc.wc_flags & IBV_WC_WITH_IMM);
		assert_int_equal(wc.imm_data, imm);
	} else {
		assert_false(wc.wc_flags & IBV_WC_WITH_IMM);
	}
	assert_true(vt_check(pr->b.buf + 8192, 100, 4));
	assert_true(all_bytes(pr->b.buf + 8292, 156, 0));
	vt_expect_none(pr->b.rcq, 5);
}

static void test_send(void **state)
{
	do_send(*state, false);
}

static void test_send_imm(void **state)
{
	do_send(*state, true);
}

static void test_send_zero_length(void **state)
{
	struct vt_pair *pr = *state;
	struct ibv_wc wc;

	assert_int_equal(vt_post_recv(pr->b.qp, 1, pr->b.buf, 64, LK(&pr->b)), 0);
	assert_int_equal(vt_post_send(pr->a.qp, 2, NULL, 0, 0, IBV_SEND_SIGNALED), 0);
	vt_expect_wc(pr->a.scq, &wc, 2, IBV_WC_SUCCESS, IBV_WC_SEND);
	vt_expect_wc(pr->b.rcq, &wc, 1, IBV_WC_SUCCESS, IBV_WC_RECV);
	assert_int_equal(wc.byte_len, 0);
}

static void test_read(void **state)
{
	struct vt_pair *pr = *state;
	struct ibv_wc wc;

	vt_fill(pr->b.buf + 5000, 3000, 5);
	assert_int_equal(vt_post_read(pr->a.qp, 31, pr->a.buf + 16, 3000, LK(&pr->a),
				      RADDR(&pr->b, 5000), RK(&pr->b), IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(pr->a.scq, &wc, 31, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
	assert_int_equal(wc.byte_len, 3000);
	assert_int_equal(wc.qp_num, ql_qp_num(pr->a.qp));
	assert_true(vt_check(pr->a.buf + 16, 3000, 5));
	assert_true(all_bytes(pr->a.buf, 16, 0));
	assert_true(all_bytes(pr->a.buf + 3016, 100, 0));
	vt_expect_none(pr->b.rcq, 5);
}

static void test_cmp_swap(void **state)
{
	struct vt_pair *pr = *state;
	uint64_t *remote = (uint64_t *)(pr->b.buf + 64);
	uint64_t *local = (uint64_t *)(pr->a.buf + 128);
	struct ibv_wc wc;

	*remote = 0x0505050505050505ull;
	*local = 0xffff;
	assert_int_equal(vt_post_atomic(pr->a.qp, IBV_WR_ATOMIC_CMP_AND_SWP, 1, local, LK(&pr->a),
					RADDR(&pr->b, 64), RK(&pr->b), 0x0505050505050505ull,
					0x0909090909090909ull, IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(pr->a.scq, &wc, 1, IBV_WC_SUCCESS, IBV_WC_COMP_SWAP);
	assert_int_equal(wc.byte_len, 8);
	assert_int_equal(*local, 0x0505050505050505ull);
	assert_int_equal(*remote, 0x0909090909090909ull);

	/* compare fails: remote unchanged, original returned */
	assert_int_equal(vt_post_atomic(pr->a.qp, IBV_WR_ATOMIC_CMP_AND_SWP, 2, local, LK(&pr->a),
					RADDR(&pr->b, 64), RK(&pr->b), 0x0505050505050505ull, 11,
					IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(pr->a.scq, &wc, 2, IBV_WC_SUCCESS, IBV_WC_COMP_SWAP);
	assert_int_equal(*local, 0x0909090909090909ull);
	assert_int_equal(*remote, 0x0909090909090909ull);
}

static void test_fetch_add(void **state)
{
	struct vt_pair *pr = *state;
	uint64_t *remote = (uint64_t *)(pr->b.buf + 256);
	uint64_t *local = (uint64_t *)(pr->a.buf + 8);
	struct ibv_wc wc;

	*remote = 100;
	assert_int_equal(vt_post_atomic(pr->a.qp, IBV_WR_ATOMIC_FETCH_AND_ADD, 3, local, LK(&pr->a),
					RADDR(&pr->b, 256), RK(&pr->b), 23, 0, IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(pr->a.scq, &wc, 3, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD);
	assert_int_equal(wc.byte_len, 8);
	assert_int_equal(*local, 100);
	assert_int_equal(*remote, 123);

	/* 64-bit, wrapping */
	*remote = UINT64_MAX;
	assert_int_equal(vt_post_atomic(pr->a.qp, IBV_WR_ATOMIC_FETCH_AND_ADD, 4, local, LK(&pr->a),
					RADDR(&pr->b, 256), RK(&pr->b), 2, 0, IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(pr->a.scq, &wc, 4, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD);
	assert_int_equal(*local, UINT64_MAX);
	assert_int_equal(*remote, 1);
	/* neighbours untouched */
	assert_true(all_bytes(pr->b.buf + 248, 8, 0));
	assert_true(all_bytes(pr->b.buf + 264, 8, 0));
}

static void test_sg_send_recv(void **state)
{
	struct vt_pair *pr = *state;
	struct ibv_sge ss[3] = {
		{ (uintptr_t)pr->a.buf + 0, 10, LK(&pr->a) },
		{ (uintptr_t)pr->a.buf + 1000, 300, LK(&pr->a) },
		{ (uintptr_t)pr->a.buf + 5000, 5, LK(&pr->a) },
	};
	struct ibv_sge rs[3] = {
		{ (uintptr_t)pr->b.buf + 100, 100, LK(&pr->b) },
		{ (uintptr_t)pr->b.buf + 2000, 100, LK(&pr->b) },
		{ (uintptr_t)pr->b.buf + 9000, 200, LK(&pr->b) },
	};
	struct ibv_recv_wr rwr = { .wr_id = 8, .sg_list = rs, .num_sge = 3 }, *rbad;
	struct ibv_send_wr swr = { .wr_id = 9,
				   .sg_list = ss,
				   .num_sge = 3,
				   .opcode = IBV_WR_SEND,
				   .send_flags = IBV_SEND_SIGNALED },
			   *sbad;
	uint8_t expect[315];
	struct ibv_wc wc;

	vt_fill(pr->a.buf, VT_BUF_LEN, 6);
	memcpy(expect, pr->a.buf, 10);
	memcpy(expect + 10, pr->a.buf + 1000, 300);
	memcpy(expect + 310, pr->a.buf + 5000, 5);

	assert_int_equal(ql_qp_post_recv(pr->b.qp, &rwr, &rbad), 0);
	assert_int_equal(ql_qp_post_send(pr->a.qp, &swr, &sbad), 0);
	vt_expect_wc(pr->a.scq, &wc, 9, IBV_WC_SUCCESS, IBV_WC_SEND);
	vt_expect_wc(pr->b.rcq, &wc, 8, IBV_WC_SUCCESS, IBV_WC_RECV);
	assert_int_equal(wc.byte_len, 315);
	assert_memory_equal(pr->b.buf + 100, expect, 100);
	assert_memory_equal(pr->b.buf + 2000, expect + 100, 100);
	assert_memory_equal(pr->b.buf + 9000, expect + 200, 115);
	assert_true(all_bytes(pr->b.buf + 9115, 85, 0));
	assert_true(all_bytes(pr->b.buf + 200, 1800, 0));
}

static void test_sg_write_gather(void **state)
{
	struct vt_pair *pr = *state;
	struct ibv_sge ss[4] = {
		{ (uintptr_t)pr->a.buf + 7, 1, LK(&pr->a) },
		{ (uintptr_t)pr->a.buf + 4096, 4096, LK(&pr->a) },
		{ (uintptr_t)pr->a.buf + 100, 33, LK(&pr->a) },
		{ (uintptr_t)pr->a.buf + 20000, 8, LK(&pr->a) },
	};
	struct ibv_send_wr swr = {
		.wr_id = 10, .sg_list = ss, .num_sge = 4, .opcode = IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = RADDR(&pr->b, 300), .rkey = RK(&pr->b) },
	}, *bad;
	struct ibv_wc wc;

	vt_fill(pr->a.buf, VT_BUF_LEN, 7);
	assert_int_equal(ql_qp_post_send(pr->a.qp, &swr, &bad), 0);
	vt_expect_wc(pr->a.scq, &wc, 10, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	vt_settle(pr); /* UC over soft+udp: complete once sent */
	assert_memory_equal(pr->b.buf + 300, pr->a.buf + 7, 1);
	assert_memory_equal(pr->b.buf + 301, pr->a.buf + 4096, 4096);
	assert_memory_equal(pr->b.buf + 4397, pr->a.buf + 100, 33);
	assert_memory_equal(pr->b.buf + 4430, pr->a.buf + 20000, 8);
	assert_true(all_bytes(pr->b.buf + 4438, 64, 0));
}

static void test_sg_read_scatter(void **state)
{
	struct vt_pair *pr = *state;
	struct ibv_sge ss[2] = {
		{ (uintptr_t)pr->a.buf + 1, 123, LK(&pr->a) },
		{ (uintptr_t)pr->a.buf + 30000, 177, LK(&pr->a) },
	};
	struct ibv_send_wr swr = {
		.wr_id = 11, .sg_list = ss, .num_sge = 2, .opcode = IBV_WR_RDMA_READ,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = RADDR(&pr->b, 10000), .rkey = RK(&pr->b) },
	}, *bad;
	struct ibv_wc wc;

	vt_fill(pr->b.buf, VT_BUF_LEN, 8);
	assert_int_equal(ql_qp_post_send(pr->a.qp, &swr, &bad), 0);
	vt_expect_wc(pr->a.scq, &wc, 11, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
	assert_int_equal(wc.byte_len, 300);
	assert_memory_equal(pr->a.buf + 1, pr->b.buf + 10000, 123);
	assert_memory_equal(pr->a.buf + 30000, pr->b.buf + 10123, 177);
	assert_int_equal(pr->a.buf[0], 0);
	assert_int_equal(pr->a.buf[124], 0);
}

static void test_inline(void **state)
{
	struct vt_pair *pr = *state;
	uint8_t src[64]; /* not registered anywhere */
	struct ibv_sge sge = { (uintptr_t)src, sizeof(src), 0 };
	struct ibv_send_wr wr = {
		.wr_id = 40, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE,
		.wr.rdma = { .remote_addr = RADDR(&pr->b, 512), .rkey = RK(&pr->b) },
	}, *bad;
	struct ibv_wc wc;

	vt_fill(src, sizeof(src), 9);
	assert_int_equal(ql_qp_post_send(pr->a.qp, &wr, &bad), 0);
	/* copied at post time: what happens to src afterwards does not matter */
	memset(src, 0xee, sizeof(src));
	vt_expect_wc(pr->a.scq, &wc, 40, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	assert_true(vt_check(pr->b.buf + 512, 64, 9));

	/* inline SEND with immediate */
	assert_int_equal(vt_post_recv(pr->b.qp, 41, pr->b.buf + 4096, 128, LK(&pr->b)), 0);
	vt_fill(src, 48, 10);
	sge.length = 48;
	wr.wr_id = 42;
	wr.opcode = IBV_WR_SEND_WITH_IMM;
	wr.imm_data = htonl(77);
	assert_int_equal(ql_qp_post_send(pr->a.qp, &wr, &bad), 0);
	memset(src, 0xee, sizeof(src));
	vt_expect_wc(pr->a.scq, &wc, 42, IBV_WC_SUCCESS, IBV_WC_SEND);
	vt_expect_wc(pr->b.rcq, &wc, 41, IBV_WC_SUCCESS, IBV_WC_RECV);
	assert_int_equal(wc.byte_len, 48);
	assert_int_equal(wc.imm_data, htonl(77));
	assert_true(vt_check(pr->b.buf + 4096, 48, 10));
}

static void test_unsignaled(void **state)
{
	struct vt_pair *pr = *state;
	struct ibv_wc wc;

	for (int i = 0; i < 3; i++) {
		memset(pr->a.buf + i * 64, 0x40 + i, 64);
		assert_int_equal(vt_post_write(pr->a.qp, 100 + i, pr->a.buf + i * 64, 64,
					       LK(&pr->a), RADDR(&pr->b, i * 64), RK(&pr->b), 0),
				 0);
	}
	memset(pr->a.buf + 192, 0x43, 64);
	assert_int_equal(vt_post_write(pr->a.qp, 103, pr->a.buf + 192, 64, LK(&pr->a),
				       RADDR(&pr->b, 192), RK(&pr->b), IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(pr->a.scq, &wc, 103, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	vt_expect_none(pr->a.scq, 10);
	for (int i = 0; i < 4; i++)
		assert_true(all_bytes(pr->b.buf + i * 64, 64, (uint8_t)(0x40 + i)));
}

static void test_sq_sig_all(void **state)
{
	const struct vt_param *p = *state;
	struct vt_opts o = { .type = IBV_QPT_RC, .sq_sig_all = 1 };
	struct vt_pair *pr;
	struct ibv_wc wc;

	assert_int_equal(vt_pair_create(p, &o, &pr), 0);
	assert_int_equal(vt_post_write(pr->a.qp, 1, pr->a.buf, 8, LK(&pr->a), RADDR(&pr->b, 0),
				       RK(&pr->b), 0),
			 0);
	assert_int_equal(vt_post_write(pr->a.qp, 2, pr->a.buf, 8, LK(&pr->a), RADDR(&pr->b, 0),
				       RK(&pr->b), 0),
			 0);
	vt_expect_wc(pr->a.scq, &wc, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	vt_expect_wc(pr->a.scq, &wc, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	/* the peer was created the same way: its sends are signaled too */
	assert_int_equal(vt_post_write(pr->b.qp, 3, pr->b.buf, 8, LK(&pr->b), RADDR(&pr->a, 0),
				       RK(&pr->a), 0),
			 0);
	vt_expect_wc(pr->b.scq, &wc, 3, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	vt_pair_destroy(pr);
}

static struct vt_pair *small_sq_pair(const struct vt_param *p, uint32_t n)
{
	struct vt_opts o = { .type = IBV_QPT_RC, .max_send_wr = n };
	struct vt_pair *pr;

	assert_int_equal(vt_pair_create(p, &o, &pr), 0);
	return pr;
}

#define SQ_ACCOUNTING_WHY                                                                     \
	"a send-queue slot stays taken until its completion (or a later signaled one's) "     \
	"is polled; libibverbs devices may free it earlier (rxe: when its completer retires " \
	"the WQE), which the IB spec allows"

static void test_sq_accounting_unsignaled(void **state)
{
	struct vt_pair *pr;
	uint32_t n;
	struct ibv_wc wc;

	VT_SOFT_ONLY((const struct vt_param *)*state, SQ_ACCOUNTING_WHY);
	pr = small_sq_pair(*state, 8);
	n = pr->a.init.cap.max_send_wr;

	assert_true(n >= 8 && n <= 1024);
	/* n-1 unsignaled and one signaled fill the queue */
	for (uint32_t i = 0; i < n - 1; i++)
		assert_int_equal(vt_post_write(pr->a.qp, i, pr->a.buf, 8, LK(&pr->a),
					       RADDR(&pr->b, 0), RK(&pr->b), 0),
				 0);
	assert_int_equal(vt_post_write(pr->a.qp, 1000, pr->a.buf, 8, LK(&pr->a), RADDR(&pr->b, 0),
				       RK(&pr->b), IBV_SEND_SIGNALED),
			 0);
	/* full until the signaled completion has been polled */
	assert_int_equal(vt_post_write(pr->a.qp, 1001, pr->a.buf, 8, LK(&pr->a), RADDR(&pr->b, 0),
				       RK(&pr->b), 0),
			 -ENOMEM);
	vt_expect_wc(pr->a.scq, &wc, 1000, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	/* all n slots are free again */
	for (uint32_t i = 0; i < n; i++)
		assert_int_equal(vt_post_write(pr->a.qp, i, pr->a.buf, 8, LK(&pr->a),
					       RADDR(&pr->b, 0), RK(&pr->b), 0),
				 0);
	/* n unsignaled WRs hold all slots: the next is refused */
	assert_int_equal(vt_post_write(pr->a.qp, 1002, pr->a.buf, 8, LK(&pr->a), RADDR(&pr->b, 0),
				       RK(&pr->b), IBV_SEND_SIGNALED),
			 -ENOMEM);
	vt_expect_none(pr->a.scq, 10);
	vt_pair_destroy(pr);
}

static void test_sq_accounting_signaled(void **state)
{
	struct vt_pair *pr;
	uint32_t n;
	struct ibv_send_wr wr, *bad = NULL;
	struct ibv_sge sge;
	struct ibv_wc wc;

	VT_SOFT_ONLY((const struct vt_param *)*state, SQ_ACCOUNTING_WHY);
	pr = small_sq_pair(*state, 8);
	n = pr->a.init.cap.max_send_wr;
	sge.addr = (uintptr_t)pr->a.buf;
	sge.length = 8;
	sge.lkey = LK(&pr->a);

	assert_true(n >= 8 && n <= 256); /* the CQ holds 256 */
	for (uint32_t i = 0; i < n; i++)
		assert_int_equal(vt_post_write(pr->a.qp, i, pr->a.buf, 8, LK(&pr->a),
					       RADDR(&pr->b, 0), RK(&pr->b), IBV_SEND_SIGNALED),
				 0);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 999;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = RADDR(&pr->b, 0);
	wr.wr.rdma.rkey = RK(&pr->b);
	assert_int_equal(ql_qp_post_send(pr->a.qp, &wr, &bad), -ENOMEM);
	assert_ptr_equal(bad, &wr);
	/* one polled completion frees exactly one slot */
	vt_expect_wc(pr->a.scq, &wc, 0, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	assert_int_equal(ql_qp_post_send(pr->a.qp, &wr, &bad), 0);
	wr.wr_id = 998;
	assert_int_equal(ql_qp_post_send(pr->a.qp, &wr, &bad), -ENOMEM);
	for (uint32_t i = 1; i < n; i++)
		vt_expect_wc(pr->a.scq, &wc, i, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	vt_expect_wc(pr->a.scq, &wc, 999, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	vt_pair_destroy(pr);
}

static void test_chain(void **state)
{
	struct vt_pair *pr = *state;
	struct ibv_sge s0 = { (uintptr_t)pr->a.buf, 16, LK(&pr->a) };
	struct ibv_sge s1 = { (uintptr_t)pr->a.buf + 16, 16, LK(&pr->a) };
	struct ibv_sge s2 = { (uintptr_t)pr->a.buf + 32, 16, LK(&pr->a) };
	struct ibv_send_wr w2 = { .wr_id = 3,
				  .sg_list = &s2,
				  .num_sge = 1,
				  .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED };
	struct ibv_send_wr w1 = {
		.wr_id = 2,
		.next = &w2,
		.sg_list = &s1,
		.num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
		.send_flags = IBV_SEND_SIGNALED,
		.imm_data = htonl(5),
		.wr.rdma = { .remote_addr = RADDR(&pr->b, 1016), .rkey = RK(&pr->b) },
	};
	struct ibv_send_wr w0 = {
		.wr_id = 1,
		.next = &w1,
		.sg_list = &s0,
		.num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = RADDR(&pr->b, 1000), .rkey = RK(&pr->b) },
	};
	struct ibv_send_wr *bad = NULL;
	struct ibv_wc wc;

	vt_fill(pr->a.buf, 48, 11);
	assert_int_equal(vt_post_recv(pr->b.qp, 20, pr->b.buf + 2000, 64, LK(&pr->b)), 0);
	assert_int_equal(vt_post_recv(pr->b.qp, 21, pr->b.buf + 3000, 64, LK(&pr->b)), 0);
	assert_int_equal(ql_qp_post_send(pr->a.qp, &w0, &bad), 0);
	vt_expect_wc(pr->a.scq, &wc, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	vt_expect_wc(pr->a.scq, &wc, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	vt_expect_wc(pr->a.scq, &wc, 3, IBV_WC_SUCCESS, IBV_WC_SEND);
	vt_expect_wc(pr->b.rcq, &wc, 20, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM);
	assert_int_equal(wc.byte_len, 16);
	vt_expect_wc(pr->b.rcq, &wc, 21, IBV_WC_SUCCESS, IBV_WC_RECV);
	assert_int_equal(wc.byte_len, 16);
	assert_memory_equal(pr->b.buf + 1000, pr->a.buf, 32);
	assert_memory_equal(pr->b.buf + 3000, pr->a.buf + 32, 16);
}

static void test_order_sends(void **state)
{
	struct vt_pair *pr = *state;
	struct ibv_wc wc;
	const int n = 32;

	for (int i = 0; i < n; i++)
		assert_int_equal(
			vt_post_recv(pr->b.qp, 500 + i, pr->b.buf + i * 64, 64, LK(&pr->b)), 0);
	for (int i = 0; i < n; i++) {
		uint32_t v = 0xc0de0000u + i;

		memcpy(pr->a.buf + i * 8, &v, 4);
		assert_int_equal(vt_post_send(pr->a.qp, i, pr->a.buf + i * 8, 4, LK(&pr->a),
					      i == n - 1 ? IBV_SEND_SIGNALED : 0),
				 0);
	}
	vt_expect_wc(pr->a.scq, &wc, n - 1, IBV_WC_SUCCESS, IBV_WC_SEND);
	for (int i = 0; i < n; i++) {
		uint32_t v;

		vt_expect_wc(pr->b.rcq, &wc, 500 + i, IBV_WC_SUCCESS, IBV_WC_RECV);
		assert_int_equal(wc.byte_len, 4);
		memcpy(&v, pr->b.buf + i * 64, 4);
		assert_int_equal(v, 0xc0de0000u + i);
	}
}

static void test_order_write_then_send(void **state)
{
	struct vt_pair *pr = *state;
	struct ibv_wc wc;

	for (int round = 0; round < 20; round++) {
		vt_fill(pr->a.buf, 16384, 100 + round);
		assert_int_equal(vt_post_recv(pr->b.qp, round, pr->b.buf + 32768, 64, LK(&pr->b)),
				 0);
		assert_int_equal(vt_post_write(pr->a.qp, 1, pr->a.buf, 16384, LK(&pr->a),
					       RADDR(&pr->b, 0), RK(&pr->b), 0),
				 0);
		assert_int_equal(
			vt_post_send(pr->a.qp, 2, pr->a.buf, 8, LK(&pr->a), IBV_SEND_SIGNALED), 0);
		vt_expect_wc(pr->b.rcq, &wc, round, IBV_WC_SUCCESS, IBV_WC_RECV);
		/* the SEND arrived, so the WRITE before it is complete */
		assert_true(vt_check(pr->b.buf, 16384, 100 + round));
		vt_expect_wc(pr->a.scq, &wc, 2, IBV_WC_SUCCESS, IBV_WC_SEND);
	}
}

static void test_order_last_write_wins(void **state)
{
	struct vt_pair *pr = *state;
	struct ibv_wc wc;
	uint64_t v = 0;

	for (uint64_t i = 1; i <= 40; i++) {
		memcpy(pr->a.buf + i * 8, &i, 8);
		assert_int_equal(vt_post_write(pr->a.qp, i, pr->a.buf + i * 8, 8, LK(&pr->a),
					       RADDR(&pr->b, 0), RK(&pr->b),
					       i == 40 ? IBV_SEND_SIGNALED : 0),
				 0);
	}
	vt_expect_wc(pr->a.scq, &wc, 40, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	memcpy(&v, pr->b.buf, 8);
	assert_int_equal(v, 40);
}

static void test_completion_order_mixed(void **state)
{
	struct vt_pair *pr = *state;
	struct ibv_wc wc;
	uint64_t *ctr = (uint64_t *)(pr->b.buf + 4096);

	/* a FETCH_ADD after a WRITE to the same word sees the written value */
	memcpy(pr->a.buf, &(uint64_t){ 1000 }, 8);
	assert_int_equal(vt_post_write(pr->a.qp, 1, pr->a.buf, 8, LK(&pr->a), RADDR(&pr->b, 4096),
				       RK(&pr->b), IBV_SEND_SIGNALED),
			 0);
	assert_int_equal(vt_post_atomic(pr->a.qp, IBV_WR_ATOMIC_FETCH_AND_ADD, 2, pr->a.buf + 64,
					LK(&pr->a), RADDR(&pr->b, 4096), RK(&pr->b), 5, 0,
					IBV_SEND_SIGNALED),
			 0);
	assert_int_equal(vt_post_read(pr->a.qp, 3, pr->a.buf + 128, 8, LK(&pr->a),
				      RADDR(&pr->b, 4096), RK(&pr->b), IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(pr->a.scq, &wc, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	vt_expect_wc(pr->a.scq, &wc, 2, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD);
	vt_expect_wc(pr->a.scq, &wc, 3, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
	assert_int_equal(*(uint64_t *)(pr->a.buf + 64), 1000);
	assert_int_equal(*(uint64_t *)(pr->a.buf + 128), 1005);
	assert_int_equal(*ctr, 1005);
}

static void test_bidirectional(void **state)
{
	struct vt_pair *pr = *state;
	struct ibv_wc wc;

	assert_int_equal(vt_post_recv(pr->a.qp, 1, pr->a.buf + 8192, 64, LK(&pr->a)), 0);
	assert_int_equal(vt_post_recv(pr->b.qp, 2, pr->b.buf + 8192, 64, LK(&pr->b)), 0);
	memcpy(pr->a.buf, "from a", 7);
	memcpy(pr->b.buf, "from b", 7);
	assert_int_equal(vt_post_send(pr->a.qp, 3, pr->a.buf, 7, LK(&pr->a), IBV_SEND_SIGNALED), 0);
	assert_int_equal(vt_post_send(pr->b.qp, 4, pr->b.buf, 7, LK(&pr->b), IBV_SEND_SIGNALED), 0);
	vt_expect_wc(pr->a.scq, &wc, 3, IBV_WC_SUCCESS, IBV_WC_SEND);
	vt_expect_wc(pr->b.scq, &wc, 4, IBV_WC_SUCCESS, IBV_WC_SEND);
	vt_expect_wc(pr->a.rcq, &wc, 1, IBV_WC_SUCCESS, IBV_WC_RECV);
	assert_src_qp(pr, wc, ql_qp_num(pr->b.qp));
	vt_expect_wc(pr->b.rcq, &wc, 2, IBV_WC_SUCCESS, IBV_WC_RECV);
	assert_src_qp(pr, wc, ql_qp_num(pr->a.qp));
	assert_string_equal((char *)pr->a.buf + 8192, "from b");
	assert_string_equal((char *)pr->b.buf + 8192, "from a");
}

static void test_poll_batch(void **state)
{
	struct vt_pair *pr = *state;
	struct ibv_wc wc[16];
	int got = 0;
	uint64_t deadline = vt_now_ns() + VT_TIMEOUT_MS * 1000000ull;

	for (int i = 0; i < 10; i++)
		assert_int_equal(vt_post_write(pr->a.qp, 200 + i, pr->a.buf, 8, LK(&pr->a),
					       RADDR(&pr->b, 0), RK(&pr->b), IBV_SEND_SIGNALED),
				 0);
	while (got < 10 && vt_now_ns() < deadline) {
		int n = ql_cq_poll(pr->a.scq, 16 - got, wc + got);

		assert_true(n >= 0);
		got += n;
		vt_progress_all();
	}
	assert_int_equal(got, 10);
	for (int i = 0; i < 10; i++) {
		assert_int_equal(wc[i].wr_id, 200 + i);
		assert_int_equal(wc[i].status, IBV_WC_SUCCESS);
	}
	assert_int_equal(ql_cq_poll(pr->a.scq, 16, wc), 0);
}

#define RC(f) cmocka_unit_test_setup_teardown(f, vt_setup_rc, vt_teardown)
#define UC(f) cmocka_unit_test_setup_teardown(f, vt_setup_uc, vt_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		RC(test_write),
		UC(test_write),
		RC(test_write_large),
		UC(test_write_large),
		RC(test_write_imm),
		UC(test_write_imm),
		RC(test_send),
		UC(test_send),
		RC(test_send_imm),
		UC(test_send_imm),
		RC(test_send_zero_length),
		RC(test_read),
		RC(test_cmp_swap),
		RC(test_fetch_add),
		RC(test_sg_send_recv),
		UC(test_sg_send_recv),
		RC(test_sg_write_gather),
		UC(test_sg_write_gather),
		RC(test_sg_read_scatter),
		RC(test_inline),
		UC(test_inline),
		RC(test_unsignaled),
		UC(test_unsignaled),
		cmocka_unit_test(test_sq_sig_all),
		cmocka_unit_test(test_sq_accounting_unsignaled),
		cmocka_unit_test(test_sq_accounting_signaled),
		RC(test_chain),
		UC(test_chain),
		RC(test_order_sends),
		UC(test_order_sends),
		RC(test_order_write_then_send),
		UC(test_order_write_then_send),
		RC(test_order_last_write_wins),
		RC(test_completion_order_mixed),
		RC(test_bidirectional),
		UC(test_bidirectional),
		RC(test_poll_batch),
	};

	return VT_RUN_PER_URI(tests) ? 1 : 0;
}
