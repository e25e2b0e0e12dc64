/* SPDX-License-Identifier: MIT */
/*
 * qlink/rdmaxcel.h, RDMaxcel's single-operation surface (seed 003), on the
 * host: the WQE each operation writes (the same code a GPU kernel runs),
 * byte for byte against the ConnectX PRM's layouts (control segment:
 * opmod|wqe_index|opcode, qpn|ds, fm_ce_se, immediate, big-endian; remote
 * address segment: raddr, rkey; data segment: byte_count, lkey, addr), the
 * doorbell (record, then the control segment's first 8 bytes), a CQE read
 * back field by field; its argument checks; the operations driving a real
 * mlx5 QP of the soft NIC against a verbs QP (WRITE, SEND into a receive
 * WQE, the CQEs' fields); and the GPU side's checks where no GPU is:
 * registration through a stand-in CUDA driver (every range mapped, every
 * pointer translated, all unmapped after), -ENODEV with the reason
 * without one, launchers refusing unregistered queues.
 *
 * `test_rdmaxcel --gpu`: the same WRITE and SEND through the launchers,
 * run by a GPU; exits 77 (skipped) without one.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "cuda_fake.h"
#include "expect_detail.h"
#include "mlx5_side.h"
#include "qlink/error.h"
#include "qlink/gpu.h"
#include "qlink/rdmaxcel.h"
#include "qlink/verbs.h"

/* ---- an in-memory queue: the bytes the operations write ------------------ */

static _Alignas(64) uint8_t sqbuf[4 * 64];
static _Alignas(64) uint8_t rqbuf[4 * 16];
static _Alignas(64) uint8_t cqbuf[4 * 64];
static _Alignas(64) uint8_t bfreg[64];
static volatile uint32_t dbrec[2], cqdb[2];

static void mem_queue(struct ql_mlx5_qp *qp, struct ql_mlx5_cq *cq)
{
	memset(sqbuf, 0, sizeof(sqbuf));
	memset(rqbuf, 0, sizeof(rqbuf));
	memset(bfreg, 0, sizeof(bfreg));
	memset(cqbuf, 0, sizeof(cqbuf));
	for (int i = 0; i < 4; i++)
		cqbuf[i * 64 + 63] = 0xf0; /* invalid: nothing completed */
	dbrec[0] = dbrec[1] = cqdb[0] = cqdb[1] = 0;
	memset(qp, 0, sizeof(*qp));
	qp->qpn = 0x123456;
	qp->sq.buf = sqbuf;
	qp->sq.wqe_cnt = 4;
	qp->sq.stride = 64;
	qp->sq.dbrec = &dbrec[1];
	qp->rq.buf = rqbuf;
	qp->rq.wqe_cnt = 4;
	qp->rq.stride = 16;
	qp->rq.dbrec = &dbrec[0];
	qp->bf_reg = bfreg;
	memset(cq, 0, sizeof(*cq));
	cq->cqn = 7;
	cq->buf = cqbuf;
	cq->cqe_cnt = 4;
	cq->cqe_size = 64;
	cq->dbrec = cqdb;
}

static void test_send_wqe_bytes(void **state)
{
	struct ql_mlx5_qp qp;
	struct ql_mlx5_cq cq;
	struct ql_rdmaxcel_wqe w = {
		.laddr = 0x1122334455667788ull,
		.lkey = 0xaabbccdd,
		.length = 0x100,
		.op_type = QL_MLX5_OPCODE_RDMA_WRITE,
		.signaled = 1,
		.raddr = 0x0102030405060708ull,
		.rkey = 0x0badf00d,
	};
	/* ctrl: opmod 0, index 0, opcode 0x08; qpn 0x123456, ds 3 (ctrl,
	 * raddr, data); signature, reserved; fm_ce_se CE=2 (0x08); imm 0 */
	static const uint8_t write0[48] = {
		0x00, 0x00, 0x00, 0x08, 0x12, 0x34, 0x56, 0x03, 0,    0,    0,	  0x08,
		0,    0,    0,	  0,	0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
		0x0b, 0xad, 0xf0, 0x0d, 0,    0,    0,	  0,	0x00, 0x00, 0x01, 0x00,
		0xaa, 0xbb, 0xcc, 0xdd, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,
	};
	/* SEND_IMM at index 1, unsignaled: opcode 0x0b, ds 2 (ctrl, data),
	 * the immediate big-endian */
	static const uint8_t send1[32] = {
		0x00, 0x00, 0x01, 0x0b, 0x12, 0x34, 0x56, 0x02, 0,    0,    0,
		0x00, 0xde, 0xad, 0xbe, 0xef, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00,
		0x00, 0x05, 0,	  0,	0,    0,    0,	  0,	0x10, 0x00,
	};
	void *ctrl = NULL;

	(void)state;
	mem_queue(&qp, &cq);
	assert_int_equal(ql_rdmaxcel_send_wqe(&qp, &w, &ctrl), 0);
	assert_ptr_equal(ctrl, sqbuf);
	assert_memory_equal(sqbuf, write0, sizeof(write0));
	assert_int_equal(qp.sq.head, 1);
	/* nothing rung yet */
	assert_int_equal(dbrec[1], 0);

	w = (struct ql_rdmaxcel_wqe){ .laddr = 0x1000,
				      .lkey = 5,
				      .length = 16,
				      .op_type = QL_MLX5_OPCODE_SEND_IMM,
				      .imm = 0xdeadbeef };
	assert_int_equal(ql_rdmaxcel_send_wqe(&qp, &w, &ctrl), 1);
	assert_ptr_equal(ctrl, sqbuf + 64);
	assert_memory_equal(sqbuf + 64, send1, sizeof(send1));

	/* the doorbell: the record (producer count 2, big-endian), then the
	 * last WQE's first 8 bytes as one store to the register */
	ql_rdmaxcel_db_ring(&qp, ctrl);
	assert_int_equal(dbrec[1], ql_mlx5_htobe32(2));
	assert_memory_equal(bfreg, send1, 8);

	/* READ: opcode 0x10, ds 3 */
	w = (struct ql_rdmaxcel_wqe){ .laddr = 8,
				      .lkey = 1,
				      .length = 8,
				      .op_type = QL_MLX5_OPCODE_RDMA_READ,
				      .raddr = 64,
				      .rkey = 2 };
	assert_int_equal(ql_rdmaxcel_send_wqe(&qp, &w, &ctrl), 2);
	assert_int_equal(sqbuf[128 + 3], 0x10);
	assert_int_equal(sqbuf[128 + 7], 0x03);

	/* argument checks: nothing written, the count unchanged */
	{
		static const uint32_t bad_ops[] = { QL_MLX5_OPCODE_NOP,
						    QL_MLX5_OPCODE_ATOMIC_CS,
						    QL_MLX5_OPCODE_ATOMIC_FA,
						    QL_MLX5_OPCODE_SEND_INVAL,
						    0xff,
						    0x100 + 0x08 };

		for (size_t i = 0; i < sizeof(bad_ops) / sizeof(bad_ops[0]); i++) {
			w.op_type = bad_ops[i];
			assert_int_equal(ql_rdmaxcel_send_wqe(&qp, &w, &ctrl), -EINVAL);
		}
		w.op_type = QL_MLX5_OPCODE_SEND;
		assert_int_equal(ql_rdmaxcel_send_wqe(NULL, &w, &ctrl), -EINVAL);
		assert_int_equal(ql_rdmaxcel_send_wqe(&qp, NULL, &ctrl), -EINVAL);
		assert_int_equal(ql_rdmaxcel_send_wqe(&qp, &w, NULL), -EINVAL);
		assert_int_equal(qp.sq.head, 3);
		assert_int_equal(sqbuf[192 + 3], 0);
	}
	/* full: the fourth fits, the fifth waits for a completion */
	assert_int_equal(ql_rdmaxcel_send_wqe(&qp, &w, &ctrl), 3);
	assert_int_equal(ql_rdmaxcel_send_wqe(&qp, &w, &ctrl), -ENOMEM);
}

static void test_recv_wqe_bytes(void **state)
{
	struct ql_mlx5_qp qp;
	struct ql_mlx5_cq cq;
	struct ql_rdmaxcel_wqe w = { .laddr = 0x0a0b0c0d0e0f1011ull, .lkey = 0x42, .length = 256 };
	/* one data segment: byte_count, lkey, addr (the stride holds one) */
	static const uint8_t rwqe[16] = { 0,	0,    0x01, 0,	  0,	0,    0,    0x42,
					  0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11 };

	(void)state;
	mem_queue(&qp, &cq);
	assert_int_equal(ql_rdmaxcel_recv_wqe(&qp, &w), 0);
	assert_memory_equal(rqbuf, rwqe, sizeof(rwqe));
	assert_int_equal(dbrec[0], ql_mlx5_htobe32(1)); /* the receive record */
	assert_int_equal(ql_rdmaxcel_recv_wqe(&qp, &w), 1);
	assert_int_equal(dbrec[0], ql_mlx5_htobe32(2));
	assert_int_equal(ql_rdmaxcel_recv_wqe(NULL, &w), -EINVAL);
	assert_int_equal(ql_rdmaxcel_recv_wqe(&qp, NULL), -EINVAL);
	assert_int_equal(ql_rdmaxcel_recv_wqe(&qp, &w), 2);
	assert_int_equal(ql_rdmaxcel_recv_wqe(&qp, &w), 3);
	assert_int_equal(ql_rdmaxcel_recv_wqe(&qp, &w), -ENOMEM);
}

/* A requester CQE as the PRM lays it out: byte_cnt at 44, send opcode and
 * QP number at 56, wqe_counter at 60, opcode and owner at 63. */
static void test_cqe_poll_fields(void **state)
{
	struct ql_mlx5_qp qp;
	struct ql_mlx5_cq cq;
	struct ql_mlx5_cqe_info ci;
	struct ql_rdmaxcel_wqe w = { .op_type = QL_MLX5_OPCODE_RDMA_WRITE, .signaled = 1 };
	void *ctrl;

	(void)state;
	mem_queue(&qp, &cq);
	assert_int_equal(ql_rdmaxcel_send_wqe(&qp, &w, &ctrl), 0);
	assert_int_equal(ql_rdmaxcel_send_wqe(&qp, &w, &ctrl), 1);
	assert_int_equal(ql_rdmaxcel_cqe_poll(&cq, &qp, &ci), 0); /* none yet */
	cqbuf[44 + 3] = 0x40;					  /* byte_cnt 64 */
	cqbuf[56] = QL_MLX5_OPCODE_RDMA_WRITE;
	cqbuf[57] = 0x12, cqbuf[58] = 0x34, cqbuf[59] = 0x56;
	cqbuf[60] = 0, cqbuf[61] = 1; /* the second WQE (and the first with it) */
	cqbuf[63] = (QL_MLX5_CQE_REQ << 4) | 0;
	assert_int_equal(ql_rdmaxcel_cqe_poll(&cq, &qp, &ci), 1);
	assert_int_equal(ci.opcode, QL_MLX5_CQE_REQ);
	assert_int_equal(ci.send_opcode, QL_MLX5_OPCODE_RDMA_WRITE);
	assert_int_equal(ci.qpn, 0x123456);
	assert_int_equal(ci.wqe_counter, 1);
	assert_int_equal(ci.byte_cnt, 64);
	assert_int_equal(cqdb[0], ql_mlx5_htobe32(1)); /* consumer index out */
	assert_int_equal(qp.sq.tail, 2);	       /* both WQEs freed */
	assert_int_equal(ql_rdmaxcel_cqe_poll(&cq, &qp, &ci), 0);
}

/* ---- on the soft NIC's mlx5 queues ------------------------------------------ */

struct pair {
	struct ql_device *dev;
	struct ql_pd *pd;
	struct side a, b; /* a: mlx5 (rdmaxcel), b: verbs */
	struct ql_mlx5_qp q;
	struct ql_mlx5_cq c;
};

static void pair_open(struct pair *p)
{
	struct ql_conn_params pa, pb;

	memset(p, 0, sizeof(*p));
	assert_int_equal(ql_device_open("soft://loop", &p->dev), 0);
	assert_int_equal(ql_pd_alloc(p->dev, &p->pd), 0);
	side_create(p->dev, p->pd, &p->a, true);
	side_create(p->dev, p->pd, &p->b, false);
	assert_int_equal(ql_qp_local_params(p->a.qp, &pa), 0);
	assert_int_equal(ql_qp_local_params(p->b.qp, &pb), 0);
	assert_int_equal(ql_qp_connect(p->a.qp, &pb, NULL), 0);
	assert_int_equal(ql_qp_connect(p->b.qp, &pa, NULL), 0);
	assert_int_equal(ql_qp_mlx5(p->a.qp, &p->q), 0);
	assert_int_equal(ql_cq_mlx5(p->a.cq, &p->c), 0);
}

static void pair_close(struct pair *p)
{
	side_destroy(p->pd, &p->a);
	side_destroy(p->pd, &p->b);
	assert_int_equal(ql_pd_free(p->pd), 0);
	assert_int_equal(ql_device_close(p->dev), 0);
}

/* The operations (host or launched), so one scenario runs both ways. */
struct ops {
	int (*send)(struct pair *p, struct ql_rdmaxcel_wqe *w);
	int (*recv)(struct pair *p, struct ql_rdmaxcel_wqe *w);
	int (*poll)(struct pair *p, struct ql_mlx5_cqe_info *ci);
};

static void *last_ctrl;

static int host_send(struct pair *p, struct ql_rdmaxcel_wqe *w)
{
	int idx = ql_rdmaxcel_send_wqe(&p->q, w, &last_ctrl);

	if (idx >= 0)
		ql_rdmaxcel_db_ring(&p->q, last_ctrl);
	return idx;
}

static int host_recv(struct pair *p, struct ql_rdmaxcel_wqe *w)
{
	return ql_rdmaxcel_recv_wqe(&p->q, w);
}

static int host_poll(struct pair *p, struct ql_mlx5_cqe_info *ci)
{
	return ql_rdmaxcel_cqe_poll(&p->c, &p->q, ci);
}

static void wait_cqe(const struct ops *o, struct pair *p, struct ql_mlx5_cqe_info *ci)
{
	double end = now_s() + 5.0;
	int r;

	while ((r = o->poll(p, ci)) == 0)
		if (now_s() > end)
			fail_msg("no CQE in 5 s");
	assert_int_equal(r, 1);
}

/* WRITE to b's buffer, then a SEND from b into a's receive WQE: the data
 * lands, and the CQEs say what they are. */
static void scenario(const struct ops *o)
{
	struct pair p;
	struct ql_mlx5_cqe_info ci;
	struct ql_rdmaxcel_wqe w;
	struct ibv_sge sge;
	struct ibv_send_wr swr, *sbad;
	struct ibv_wc wc;
	double end;

	pair_open(&p);
	memcpy(p.a.buf, "hello, b", 8);
	w = (struct ql_rdmaxcel_wqe){ .laddr = (uintptr_t)p.a.buf,
				      .lkey = ql_mr_lkey(p.a.mr),
				      .length = 8,
				      .op_type = QL_MLX5_OPCODE_RDMA_WRITE,
				      .signaled = 1,
				      .raddr = (uintptr_t)p.b.buf + 16,
				      .rkey = ql_mr_rkey(p.b.mr) };
	assert_int_equal(o->send(&p, &w), 0);
	wait_cqe(o, &p, &ci);
	assert_int_equal(ci.opcode, QL_MLX5_CQE_REQ);
	assert_int_equal(ci.send_opcode, QL_MLX5_OPCODE_RDMA_WRITE);
	assert_int_equal(ci.qpn, ql_qp_num(p.a.qp));
	assert_int_equal(ci.wqe_counter, 0);
	assert_memory_equal(p.b.buf + 16, "hello, b", 8);

	w = (struct ql_rdmaxcel_wqe){ .laddr = (uintptr_t)p.a.buf + 1024,
				      .lkey = ql_mr_lkey(p.a.mr),
				      .length = 256 };
	assert_int_equal(o->recv(&p, &w), 0);
	memcpy(p.b.buf + 512, "from b, 24 bytes long..", 24);
	sge.addr = (uintptr_t)p.b.buf + 512;
	sge.length = 24;
	sge.lkey = ql_mr_lkey(p.b.mr);
	memset(&swr, 0, sizeof(swr));
	swr.sg_list = &sge;
	swr.num_sge = 1;
	swr.opcode = IBV_WR_SEND;
	swr.send_flags = IBV_SEND_SIGNALED;
	assert_int_equal(ql_qp_post_send(p.b.qp, &swr, &sbad), 0);
	end = now_s() + 5.0;
	while (ql_cq_poll(p.b.cq, 1, &wc) == 0)
		if (now_s() > end)
			fail_msg("the SEND did not complete");
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	wait_cqe(o, &p, &ci);
	assert_int_equal(ci.opcode, QL_MLX5_CQE_RESP_SEND);
	assert_int_equal(ci.byte_cnt, 24);
	assert_int_equal(ci.qpn, ql_qp_num(p.a.qp));
	assert_int_equal(ci.wqe_counter, 0);
	assert_memory_equal(p.a.buf + 1024, "from b, 24 bytes long..", 24);
	pair_close(&p);
}

static void test_soft_nic(void **state)
{
	static const struct ops host = { host_send, host_recv, host_poll };

	(void)state;
	scenario(&host);
}

/* ---- the GPU side where there is no GPU ---------------------------------- */

static void test_gpu_checks(void **state)
{
	const struct ql__cuda_drv *drv;
	struct ql_rdmaxcel_queues q;
	struct ql_mlx5_cqe_info ci;
	struct ql_rdmaxcel_wqe w = { .op_type = QL_MLX5_OPCODE_SEND };
	struct pair p;
	char why[256];

	(void)state;
	memset(&q, 0, sizeof(q));
	/* launchers: not registered, NULL */
	assert_int_equal(ql_rdmaxcel_launch_send_wqe(&q, &w), -EINVAL);
	expect_detail("queues not registered");
	assert_int_equal(ql_rdmaxcel_launch_send_wqe(NULL, &w), -EINVAL);
	assert_int_equal(ql_rdmaxcel_launch_recv_wqe(&q, &w), -EINVAL);
	assert_int_equal(ql_rdmaxcel_launch_db_ring(&q), -EINVAL);
	assert_int_equal(ql_rdmaxcel_launch_cqe_poll(&q, 1, &ci), -EINVAL);
	/* registration: NULL, empty views */
	pair_open(&p);
	assert_int_equal(ql_rdmaxcel_register_cuda_memory(NULL, &p.c, NULL, 0, &q), -EINVAL);
	assert_int_equal(ql_rdmaxcel_register_cuda_memory(&p.q, NULL, NULL, 0, &q), -EINVAL);
	{
		struct ql_mlx5_qp empty = { 0 };

		assert_int_equal(ql_rdmaxcel_register_cuda_memory(&empty, &p.c, NULL, 0, &q),
				 -EINVAL);
		expect_detail("an empty queue view");
	}
	/* the real driver, where there is none: -ENODEV and why */
	ql__cuda_drv_override(NULL);
	if (ql__cuda_drv_get(&drv)) {
		assert_int_equal(ql_rdmaxcel_register_cuda_memory(&p.q, &p.c, &p.c, 0, &q),
				 -ENODEV);
		expect_detail("rdmaxcel: ");
		assert_int_equal(q.nregs, 0);
	}

	/* a stand-in driver: every range the kernel touches mapped, every
	 * pointer translated (device = host + 0x1000000), the counters kept */
	cu_fake_install();
	p.q.sq.head = 5;
	assert_int_equal(ql_rdmaxcel_register_cuda_memory(&p.q, &p.c, NULL, 0, &q), 0);
	assert_int_equal(q.nregs, 7); /* SQ, RQ, 2 records, doorbell, CQ, its record */
	assert_int_equal(cu.host_regs, 7);
	assert_int_equal(cu.host_reg_flags,
			 QL__CUDA_HOSTREGISTER_PORTABLE | QL__CUDA_HOSTREGISTER_DEVICEMAP);
	assert_int_equal(cu.pushed, 0);
#define MOVED(dev, host) assert_true((uintptr_t)(dev) == (uintptr_t)(host) + 0x1000000)
	MOVED(q.qp.sq.buf, p.q.sq.buf);
	MOVED(q.qp.rq.buf, p.q.rq.buf);
	MOVED(q.qp.sq.dbrec, p.q.sq.dbrec);
	MOVED(q.qp.rq.dbrec, p.q.rq.dbrec);
	MOVED(q.qp.bf_reg, p.q.bf_reg);
	MOVED(q.send_cq.buf, p.c.buf);
	MOVED(q.send_cq.dbrec, p.c.dbrec);
#undef MOVED
	assert_null(q.recv_cq.buf);
	assert_int_equal(q.qp.sq.head, 5);
	assert_int_equal(q.qp.qpn, p.q.qpn);
	/* launched where nothing can run them: -ENODEV and why (never on
	 * the stand-in's made-up addresses where a GPU is) */
	if (!ql_gpu_available(why, sizeof(why))) {
		assert_int_equal(ql_rdmaxcel_launch_send_wqe(&q, &w), -ENODEV);
		expect_detail("rdmaxcel: ");
		assert_int_equal(q.qp.sq.head, 5);
	}
	assert_int_equal(ql_rdmaxcel_launch_cqe_poll(&q, 0, &ci), -EINVAL);
	expect_detail("no receive CQ registered");
	assert_int_equal(ql_rdmaxcel_launch_cqe_poll(&q, 1, NULL), -EINVAL);
	ql_rdmaxcel_unregister_cuda_memory(&q);
	assert_int_equal(cu.host_regs, 0);
	assert_int_equal(q.nregs, 0);
	ql__cuda_drv_override(NULL);
	p.q.sq.head = 0;
	pair_close(&p);
}

/* ---- on a GPU: the launchers -------------------------------------------------- */

static struct ql_rdmaxcel_queues gq;

static int gpu_send(struct pair *p, struct ql_rdmaxcel_wqe *w)
{
	int idx;

	if (!gq.qp.sq.buf)
		assert_int_equal(ql_rdmaxcel_register_cuda_memory(&p->q, &p->c, NULL, 0, &gq), 0);
	idx = ql_rdmaxcel_launch_send_wqe(&gq, w);
	if (idx >= 0)
		assert_int_equal(ql_rdmaxcel_launch_db_ring(&gq), 0);
	return idx;
}

static int gpu_recv(struct pair *p, struct ql_rdmaxcel_wqe *w)
{
	(void)p;
	return ql_rdmaxcel_launch_recv_wqe(&gq, w);
}

static int gpu_poll(struct pair *p, struct ql_mlx5_cqe_info *ci)
{
	(void)p;
	return ql_rdmaxcel_launch_cqe_poll(&gq, 1, ci);
}

static void test_gpu_launchers(void **state)
{
	static const struct ops gpu = { gpu_send, gpu_recv, gpu_poll };

	(void)state;
	memset(&gq, 0, sizeof(gq));
	scenario(&gpu);
	ql_rdmaxcel_unregister_cuda_memory(&gq);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest host[] = {
		cmocka_unit_test(test_send_wqe_bytes),	cmocka_unit_test(test_recv_wqe_bytes),
		cmocka_unit_test(test_cqe_poll_fields), cmocka_unit_test(test_soft_nic),
		cmocka_unit_test(test_gpu_checks),
	};
	const struct CMUnitTest dev[] = {
		cmocka_unit_test(test_gpu_launchers),
	};
	char why[256];

	if (argc > 1 && !strcmp(argv[1], "--gpu")) {
		if (!ql_gpu_available(why, sizeof(why))) {
			printf("SKIP: no GPU: %s\n", why);
			return 77;
		}
		return cmocka_run_group_tests(dev, NULL, NULL);
	}
	return cmocka_run_group_tests(host, NULL, NULL);
}
