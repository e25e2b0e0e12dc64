/* SPDX-License-Identifier: MIT */
/*
 * qlink/mlx5.h against rdma-core's own <infiniband/mlx5dv.h>: every layout
 * (size and byte offset of each field) and constant qlink writes or reads
 * is the one mlx5dv.h defines. The comparison is at compile time
 * (_Static_assert: a mismatch does not build), then at run time the bytes
 * the builders write are read back through mlx5dv.h's structs and its
 * accessors (mlx5dv_set_ctrl_seg's fields, mlx5dv_get_cqe_owner/opcode).
 * Skipped (77) where mlx5dv.h is absent.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "qlink/mlx5.h"

#if defined(__has_include)
#if __has_include(<infiniband/mlx5dv.h>)
#define HAVE_MLX5DV 1
#endif
#endif

#ifdef HAVE_MLX5DV
#include <endian.h>
#include <infiniband/mlx5dv.h>

#define SAME_FIELD(ours, theirs, f)                                                      \
	_Static_assert(offsetof(struct ours, f) == offsetof(struct theirs, f),           \
		       #ours "." #f " offset");                                          \
	_Static_assert(sizeof(((struct ours *)0)->f) == sizeof(((struct theirs *)0)->f), \
		       #ours "." #f " size")

_Static_assert(sizeof(struct ql_mlx5_ctrl_seg) == sizeof(struct mlx5_wqe_ctrl_seg), "ctrl");
SAME_FIELD(ql_mlx5_ctrl_seg, mlx5_wqe_ctrl_seg, opmod_idx_opcode);
SAME_FIELD(ql_mlx5_ctrl_seg, mlx5_wqe_ctrl_seg, qpn_ds);
SAME_FIELD(ql_mlx5_ctrl_seg, mlx5_wqe_ctrl_seg, signature);
SAME_FIELD(ql_mlx5_ctrl_seg, mlx5_wqe_ctrl_seg, dci_stream_channel_id);
SAME_FIELD(ql_mlx5_ctrl_seg, mlx5_wqe_ctrl_seg, fm_ce_se);
SAME_FIELD(ql_mlx5_ctrl_seg, mlx5_wqe_ctrl_seg, imm);

_Static_assert(sizeof(struct ql_mlx5_raddr_seg) == sizeof(struct mlx5_wqe_raddr_seg), "raddr");
SAME_FIELD(ql_mlx5_raddr_seg, mlx5_wqe_raddr_seg, raddr);
SAME_FIELD(ql_mlx5_raddr_seg, mlx5_wqe_raddr_seg, rkey);
SAME_FIELD(ql_mlx5_raddr_seg, mlx5_wqe_raddr_seg, reserved);

_Static_assert(sizeof(struct ql_mlx5_data_seg) == sizeof(struct mlx5_wqe_data_seg), "data");
SAME_FIELD(ql_mlx5_data_seg, mlx5_wqe_data_seg, byte_count);
SAME_FIELD(ql_mlx5_data_seg, mlx5_wqe_data_seg, lkey);
SAME_FIELD(ql_mlx5_data_seg, mlx5_wqe_data_seg, addr);

_Static_assert(sizeof(struct ql_mlx5_inl_data_seg) == sizeof(struct mlx5_wqe_inl_data_seg),
	       "inline");
SAME_FIELD(ql_mlx5_inl_data_seg, mlx5_wqe_inl_data_seg, byte_count);

_Static_assert(sizeof(struct ql_mlx5_atomic_seg) == sizeof(struct mlx5_wqe_atomic_seg), "atomic");
SAME_FIELD(ql_mlx5_atomic_seg, mlx5_wqe_atomic_seg, swap_add);
SAME_FIELD(ql_mlx5_atomic_seg, mlx5_wqe_atomic_seg, compare);

_Static_assert(sizeof(struct ql_mlx5_cqe64) == sizeof(struct mlx5_cqe64), "cqe64");
SAME_FIELD(ql_mlx5_cqe64, mlx5_cqe64, wqe_id);
SAME_FIELD(ql_mlx5_cqe64, mlx5_cqe64, ml_path);
SAME_FIELD(ql_mlx5_cqe64, mlx5_cqe64, slid);
SAME_FIELD(ql_mlx5_cqe64, mlx5_cqe64, flags_rqpn);
SAME_FIELD(ql_mlx5_cqe64, mlx5_cqe64, hds_ip_ext);
SAME_FIELD(ql_mlx5_cqe64, mlx5_cqe64, l4_hdr_type_etc);
SAME_FIELD(ql_mlx5_cqe64, mlx5_cqe64, vlan_info);
SAME_FIELD(ql_mlx5_cqe64, mlx5_cqe64, srqn_uidx);
SAME_FIELD(ql_mlx5_cqe64, mlx5_cqe64, imm_inval_pkey);
SAME_FIELD(ql_mlx5_cqe64, mlx5_cqe64, app);
SAME_FIELD(ql_mlx5_cqe64, mlx5_cqe64, app_op);
SAME_FIELD(ql_mlx5_cqe64, mlx5_cqe64, app_info);
SAME_FIELD(ql_mlx5_cqe64, mlx5_cqe64, byte_cnt);
SAME_FIELD(ql_mlx5_cqe64, mlx5_cqe64, timestamp);
SAME_FIELD(ql_mlx5_cqe64, mlx5_cqe64, sop_drop_qpn);
SAME_FIELD(ql_mlx5_cqe64, mlx5_cqe64, wqe_counter);
SAME_FIELD(ql_mlx5_cqe64, mlx5_cqe64, signature);
SAME_FIELD(ql_mlx5_cqe64, mlx5_cqe64, op_own);

_Static_assert(sizeof(struct ql_mlx5_err_cqe) == sizeof(struct mlx5_err_cqe), "err_cqe");
SAME_FIELD(ql_mlx5_err_cqe, mlx5_err_cqe, srqn);
SAME_FIELD(ql_mlx5_err_cqe, mlx5_err_cqe, vendor_err_synd);
SAME_FIELD(ql_mlx5_err_cqe, mlx5_err_cqe, syndrome);
SAME_FIELD(ql_mlx5_err_cqe, mlx5_err_cqe, s_wqe_opcode_qpn);
SAME_FIELD(ql_mlx5_err_cqe, mlx5_err_cqe, wqe_counter);
SAME_FIELD(ql_mlx5_err_cqe, mlx5_err_cqe, signature);
SAME_FIELD(ql_mlx5_err_cqe, mlx5_err_cqe, op_own);

#define SAME(ours, theirs) _Static_assert((ours) == (theirs), #ours " == " #theirs)
SAME(QL_MLX5_SEND_WQE_BB, MLX5_SEND_WQE_BB);
SAME(QL_MLX5_SEND_WQE_SHIFT, MLX5_SEND_WQE_SHIFT);
SAME(QL_MLX5_INLINE_SEG, MLX5_INLINE_SEG);
SAME(QL_MLX5_INVALID_LKEY, MLX5_INVALID_LKEY);
SAME(QL_MLX5_WQE_CTRL_SOLICITED, MLX5_WQE_CTRL_SOLICITED);
SAME(QL_MLX5_WQE_CTRL_CQ_UPDATE, MLX5_WQE_CTRL_CQ_UPDATE);
SAME(QL_MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE, MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE);
SAME(QL_MLX5_WQE_CTRL_FENCE, MLX5_WQE_CTRL_FENCE);
SAME(QL_MLX5_OPCODE_NOP, MLX5_OPCODE_NOP);
SAME(QL_MLX5_OPCODE_SEND_INVAL, MLX5_OPCODE_SEND_INVAL);
SAME(QL_MLX5_OPCODE_RDMA_WRITE, MLX5_OPCODE_RDMA_WRITE);
SAME(QL_MLX5_OPCODE_RDMA_WRITE_IMM, MLX5_OPCODE_RDMA_WRITE_IMM);
SAME(QL_MLX5_OPCODE_SEND, MLX5_OPCODE_SEND);
SAME(QL_MLX5_OPCODE_SEND_IMM, MLX5_OPCODE_SEND_IMM);
SAME(QL_MLX5_OPCODE_RDMA_READ, MLX5_OPCODE_RDMA_READ);
SAME(QL_MLX5_OPCODE_ATOMIC_CS, MLX5_OPCODE_ATOMIC_CS);
SAME(QL_MLX5_OPCODE_ATOMIC_FA, MLX5_OPCODE_ATOMIC_FA);
SAME(QL_MLX5_CQE_REQ, MLX5_CQE_REQ);
SAME(QL_MLX5_CQE_RESP_WR_IMM, MLX5_CQE_RESP_WR_IMM);
SAME(QL_MLX5_CQE_RESP_SEND, MLX5_CQE_RESP_SEND);
SAME(QL_MLX5_CQE_RESP_SEND_IMM, MLX5_CQE_RESP_SEND_IMM);
SAME(QL_MLX5_CQE_RESP_SEND_INV, MLX5_CQE_RESP_SEND_INV);
SAME(QL_MLX5_CQE_RESIZE_CQ, MLX5_CQE_RESIZE_CQ);
SAME(QL_MLX5_CQE_SIG_ERR, MLX5_CQE_SIG_ERR);
SAME(QL_MLX5_CQE_REQ_ERR, MLX5_CQE_REQ_ERR);
SAME(QL_MLX5_CQE_RESP_ERR, MLX5_CQE_RESP_ERR);
SAME(QL_MLX5_CQE_INVALID, MLX5_CQE_INVALID);
SAME(QL_MLX5_CQE_OWNER_MASK, MLX5_CQE_OWNER_MASK);
SAME(QL_MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR, MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR);
SAME(QL_MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR, MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR);
SAME(QL_MLX5_CQE_SYNDROME_LOCAL_PROT_ERR, MLX5_CQE_SYNDROME_LOCAL_PROT_ERR);
SAME(QL_MLX5_CQE_SYNDROME_WR_FLUSH_ERR, MLX5_CQE_SYNDROME_WR_FLUSH_ERR);
SAME(QL_MLX5_CQE_SYNDROME_MW_BIND_ERR, MLX5_CQE_SYNDROME_MW_BIND_ERR);
SAME(QL_MLX5_CQE_SYNDROME_BAD_RESP_ERR, MLX5_CQE_SYNDROME_BAD_RESP_ERR);
SAME(QL_MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR, MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR);
SAME(QL_MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR, MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR);
SAME(QL_MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR, MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR);
SAME(QL_MLX5_CQE_SYNDROME_REMOTE_OP_ERR, MLX5_CQE_SYNDROME_REMOTE_OP_ERR);
SAME(QL_MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR, MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR);
SAME(QL_MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR, MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR);
SAME(QL_MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR, MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR);
SAME(QL_MLX5_RCV_DBR, MLX5_RCV_DBR);
SAME(QL_MLX5_SND_DBR, MLX5_SND_DBR);

/* Our builders' bytes, read with mlx5dv.h's structs. */
static void test_builders_read_by_mlx5dv(void **state)
{
	_Alignas(16) uint8_t seg[16];
	struct mlx5_wqe_ctrl_seg *c = (void *)seg;
	struct mlx5_wqe_raddr_seg *r = (void *)seg;
	struct mlx5_wqe_data_seg *d = (void *)seg;
	struct mlx5_wqe_atomic_seg *a = (void *)seg;

	(void)state;
	ql_mlx5_ctrl_seg(seg, 0x5a, MLX5_OPCODE_RDMA_WRITE_IMM, 0x1234, 0xabcdef, 5,
			 MLX5_WQE_CTRL_CQ_UPDATE | MLX5_WQE_CTRL_FENCE, 0xcafef00d);
	assert_int_equal(be32toh(c->opmod_idx_opcode), 0x5a123409);
	assert_int_equal(be32toh(c->qpn_ds), 0xabcdef05);
	assert_int_equal(c->signature, 0);
	assert_int_equal(c->dci_stream_channel_id, 0);
	assert_int_equal(c->fm_ce_se, MLX5_WQE_CTRL_CQ_UPDATE | MLX5_WQE_CTRL_FENCE);
	assert_true(be32toh(c->imm) == 0xcafef00du);

	ql_mlx5_raddr_seg(seg, 0x0102030405060708ull, 0xa1b2c3d4);
	assert_true(be64toh(r->raddr) == 0x0102030405060708ull);
	assert_true(be32toh(r->rkey) == 0xa1b2c3d4u);
	assert_int_equal(r->reserved, 0);

	ql_mlx5_data_seg(seg, 0x1122334455667788ull, 4096, 0x1234);
	assert_int_equal(be32toh(d->byte_count), 4096);
	assert_int_equal(be32toh(d->lkey), 0x1234);
	assert_true(be64toh(d->addr) == 0x1122334455667788ull);

	ql_mlx5_atomic_seg(seg, 11, 22);
	assert_int_equal(be64toh(a->swap_add), 11);
	assert_int_equal(be64toh(a->compare), 22);
}

/* A CQE written through mlx5dv.h's struct, polled by qlink/mlx5.h. */
static void test_cqe_written_by_mlx5dv(void **state)
{
	_Alignas(64) uint8_t buf[2 * 64];
	uint32_t dbrec[2] = { 0, 0 };
	struct mlx5_cqe64 *e = (void *)buf;
	struct mlx5_err_cqe *err = (void *)(buf + 64);
	struct ql_mlx5_cq cq = {
		.cqn = 1, .buf = buf, .cqe_cnt = 2, .cqe_size = 64, .dbrec = dbrec
	};
	struct ql_mlx5_cqe_info ci;

	(void)state;
	memset(buf, 0, sizeof(buf));
	e->imm_inval_pkey = htobe32(0x01020304);
	e->byte_cnt = htobe32(77);
	e->sop_drop_qpn = htobe32(0x00abcdef);
	e->wqe_counter = htobe16(0x4321);
	e->op_own = MLX5_CQE_RESP_SEND_IMM << 4;
	assert_int_equal(mlx5dv_get_cqe_opcode(e), MLX5_CQE_RESP_SEND_IMM);
	assert_int_equal(mlx5dv_get_cqe_owner(e), 0);
	err->syndrome = MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR;
	err->vendor_err_synd = 0x42;
	err->s_wqe_opcode_qpn = htobe32(0x0a00abcd);
	err->wqe_counter = htobe16(9);
	err->op_own = MLX5_CQE_REQ_ERR << 4;

	assert_int_equal(ql_mlx5_cq_poll(&cq, &ci), 1);
	assert_int_equal(ci.opcode, MLX5_CQE_RESP_SEND_IMM);
	assert_int_equal(ci.imm, 0x01020304);
	assert_int_equal(ci.byte_cnt, 77);
	assert_int_equal(ci.qpn, 0xabcdef);
	assert_int_equal(ci.wqe_counter, 0x4321);
	assert_int_equal(ql_mlx5_cq_poll(&cq, &ci), 1);
	assert_int_equal(ci.opcode, MLX5_CQE_REQ_ERR);
	assert_int_equal(ci.syndrome, MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR);
	assert_int_equal(ci.vendor_syndrome, 0x42);
	assert_int_equal(ci.send_opcode, MLX5_OPCODE_SEND);
	assert_int_equal(ci.qpn, 0xabcd);
	assert_int_equal(ci.wqe_counter, 9);
	assert_int_equal(be32toh(dbrec[0]), 2);
}

/* Each syndrome's completion status is libibverbs' own enum value, the one
 * rdma-core's mlx5 provider reports. */
static void test_wc_status(void **state)
{
	static const struct {
		uint8_t synd;
		enum ibv_wc_status st;
	} map[] = {
		{ MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR, IBV_WC_LOC_LEN_ERR },
		{ MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR, IBV_WC_LOC_QP_OP_ERR },
		{ MLX5_CQE_SYNDROME_LOCAL_PROT_ERR, IBV_WC_LOC_PROT_ERR },
		{ MLX5_CQE_SYNDROME_WR_FLUSH_ERR, IBV_WC_WR_FLUSH_ERR },
		{ MLX5_CQE_SYNDROME_MW_BIND_ERR, IBV_WC_MW_BIND_ERR },
		{ MLX5_CQE_SYNDROME_BAD_RESP_ERR, IBV_WC_BAD_RESP_ERR },
		{ MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR, IBV_WC_LOC_ACCESS_ERR },
		{ MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR, IBV_WC_REM_INV_REQ_ERR },
		{ MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR, IBV_WC_REM_ACCESS_ERR },
		{ MLX5_CQE_SYNDROME_REMOTE_OP_ERR, IBV_WC_REM_OP_ERR },
		{ MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR, IBV_WC_RETRY_EXC_ERR },
		{ MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR, IBV_WC_RNR_RETRY_EXC_ERR },
		{ MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR, IBV_WC_REM_ABORT_ERR },
		{ 0x00, IBV_WC_GENERAL_ERR },
		{ 0x99, IBV_WC_GENERAL_ERR },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		assert_int_equal(ql_mlx5_wc_status(map[i].synd), map[i].st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wc_status),
		cmocka_unit_test(test_builders_read_by_mlx5dv),
		cmocka_unit_test(test_cqe_written_by_mlx5dv),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

#else

int main(void)
{
	printf("SKIP: <infiniband/mlx5dv.h> is not installed (rdma-core's libibverbs-dev "
	       "has it)\n");
	return 77;
}

#endif
