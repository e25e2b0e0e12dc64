/* SPDX-License-Identifier: MIT */
/*
 * The soft NIC's mlx5 queue mode (docs/soft-provider.md, "mlx5 queue
 * mode"): a QP created with QL_QP_INIT_MLX5 is driven only through
 * qlink/mlx5.h, and the device's engine thread executes its WQEs on the
 * soft wire and writes mlx5 CQEs. Each test runs on soft://loop and
 * soft+shm; end a is the mlx5-mode QP, end b an ordinary soft QP.
 *
 *  - lifecycle: the engine thread exists exactly while an mlx5-mode QP
 *    does; the verbs hot path refuses mlx5 objects; the views are
 *    page-aligned rings with doorbell records;
 *  - every opcode posted through mlx5.h (SEND, SEND_IMM, inline SEND,
 *    WRITE, WRITE_IMM, inline WRITE, READ, CAS, FADD, NOP) reaches the
 *    ordinary peer with the right data, and its CQE carries the right
 *    opcode, WQE counter, byte count and QP number;
 *  - the ordinary peer's SEND, SEND_IMM and WRITE_IMM land in the mlx5
 *    receive queue with responder CQEs; a receive rung just before the
 *    peer's SEND is waited for, never RNR-NAKed; a responder whose record
 *    lies stalls the peer's requester once (50 ms), then never again;
 *  - a SEND before the peer's receive is RNR-NAKed and retried by the
 *    engine by itself; a WRITE rung after it waits its turn;
 *  - SQ, RQ and CQ wrap around over thousands of WQEs on small rings;
 *  - each kind of bad WQE gets an error CQE with its syndrome, the QP is in
 *    ERR after, and what follows is flushed; a receive WQE with a bad
 *    lkey gives a RESP_ERR CQE (local protection) and the peer REM_OP_ERR,
 *    a garbage one after it is flushed; garbage WQEs (random ds,
 *    opcodes, inline lengths up to 2^31) do not crash the engine;
 *  - across processes (fork, soft+shm), with the mlx5-mode QP in the parent
 *    and in the child, data flows both ways;
 *  - the engine's loop neither allocates nor locks (interposition, while
 *    its thread runs, or in the callers' doorbells and polls in caller
 *    progress mode) and makes no system call (driven by the test thread
 *    under a seccomp filter);
 *  - progress modes (docs/progress.md): ?progress=thread starts the engine
 *    thread, ?progress=caller none, and the doorbell itself carries the
 *    WQE to the peer; a bad mode is refused; an mlx5 side and a verbs side
 *    in two threads pinned to one CPU ping-pong in bounded time.
 *
 * The whole suite runs again with QLINK_PROGRESS=caller (ctest
 * test_soft_mlx5_caller): every device then progresses in its callers.
 */
#define _GNU_SOURCE
/* cmocka.h needs these first */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <arpa/inet.h>
#include <cmocka.h>
#include <endian.h>
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <pthread.h>

#include <qlink/error.h>
#include <qlink/mlx5.h>
#include <qlink/verbs.h>

#include "hotpath.h"

/* internal hooks of the soft provider (src/providers/soft/mlx5_engine.c) */
int ql__soft_mlx5_engine_manual(struct ql_device *d);
int ql__soft_mlx5_engine_poll(struct ql_device *d);
bool ql__soft_mlx5_engine_running(struct ql_device *d);
uint64_t ql__soft_mlx5_bf_hits(struct ql_qp *q);

#define BUF_LEN (64 * 1024)
#define ACCESS_ALL                                                                   \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | \
	 IBV_ACCESS_REMOTE_ATOMIC)
#define CE QL_MLX5_WQE_CTRL_CQ_UPDATE
#define TIMEOUT_NS 5000000000ull

static const char *const uris[] = { "soft://loop", "soft+shm://qlmx5" };

/* The suite's run in caller progress mode (QLINK_PROGRESS=caller). */
static bool env_caller(void)
{
	const char *e = getenv("QLINK_PROGRESS");

	return e && !strcmp(e, "caller");
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- one end --------------------------------------------------------- */

struct end {
	struct ql_device *dev;
	struct ql_pd *pd;
	struct ql_cq *scq, *rcq;
	struct ql_qp *qp;
	uint8_t *buf;
	struct ql_mr *mr;
	struct ql_conn_params params;
	bool mlx5;
	struct ql_mlx5_qp mq;
	struct ql_mlx5_cq mcq; /* send and receive CQ (one) */
};

struct opts {
	enum ibv_qp_type type;
	uint32_t send_wr, recv_wr, cqe, inline_max, sge;
	bool manual; /* no engine thread: the test polls the engine */
	bool no_bf;  /* QL_QP_INIT_MLX5_NO_BF: bf_size 0 */
};

static const struct opts opts_default = { IBV_QPT_RC, 64, 64, 256, 64, 2, false, false };

static int end_open(struct end *e, const char *uri, bool mlx5, const struct opts *o)
{
	struct ql_qp_init_attr ia;
	int ret;

	memset(e, 0, sizeof(*e));
	e->mlx5 = mlx5;
	ret = ql_device_open(uri, &e->dev);
	if (ret)
		return ret;
	if (mlx5 && o->manual && (ret = ql__soft_mlx5_engine_manual(e->dev)))
		return ret;
	if ((ret = ql_pd_alloc(e->dev, &e->pd)))
		return ret;
	if (mlx5) {
		ret = ql_cq_create_flags(e->dev, (int)o->cqe, QL_CQ_INIT_MLX5, &e->scq);
		e->rcq = e->scq;
	} else {
		ret = ql_cq_create(e->dev, (int)o->cqe, &e->scq);
		if (!ret)
			ret = ql_cq_create(e->dev, (int)o->cqe, &e->rcq);
	}
	if (ret)
		return ret;
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = e->scq;
	ia.recv_cq = e->rcq;
	ia.qp_type = o->type;
	ia.cap.max_send_wr = o->send_wr;
	ia.cap.max_recv_wr = o->recv_wr;
	ia.cap.max_send_sge = o->sge;
	ia.cap.max_recv_sge = o->sge;
	ia.cap.max_inline_data = o->inline_max;
	ia.flags = mlx5 ? QL_QP_INIT_MLX5 | (o->no_bf ? QL_QP_INIT_MLX5_NO_BF : 0) : 0;
	if ((ret = ql_qp_create(e->pd, &ia, &e->qp)))
		return ret;
	e->buf = ql_mem_alloc(BUF_LEN);
	if (!e->buf)
		return -ENOMEM;
	if ((ret = ql_mr_reg(e->pd, e->buf, BUF_LEN, ACCESS_ALL, &e->mr)))
		return ret;
	if ((ret = ql_qp_local_params(e->qp, &e->params)))
		return ret;
	e->params.vaddr = (uintptr_t)e->buf;
	e->params.rkey = ql_mr_rkey(e->mr);
	e->params.length = BUF_LEN;
	if (mlx5) {
		if ((ret = ql_qp_mlx5(e->qp, &e->mq)) || (ret = ql_cq_mlx5(e->scq, &e->mcq)))
			return ret;
	}
	return 0;
}

static void end_close(struct end *e)
{
	if (e->mr)
		assert_int_equal(ql_mr_dereg(e->mr), 0);
	if (e->buf)
		ql_mem_free(e->buf);
	if (e->qp)
		assert_int_equal(ql_qp_destroy(e->qp), 0);
	if (e->rcq && e->rcq != e->scq)
		assert_int_equal(ql_cq_destroy(e->rcq), 0);
	if (e->scq)
		assert_int_equal(ql_cq_destroy(e->scq), 0);
	if (e->pd)
		assert_int_equal(ql_pd_free(e->pd), 0);
	if (e->dev)
		assert_int_equal(ql_device_close(e->dev), 0);
	memset(e, 0, sizeof(*e));
}

static int end_connect(struct end *x, const struct end *y)
{
	/* default options (min_rnr_timer 0.64 ms): a receive rung in the
	 * mlx5 RQ just before the peer's SEND is waited for, not RNR-NAKed
	 * (test_receive checks it) */
	int ret = ql_qp_connect(x->qp, &y->params, NULL);

	/* a reset mlx5 QP starts its queues at 0 again: a fresh view */
	if (!ret && x->mlx5)
		ret = ql_qp_mlx5(x->qp, &x->mq);
	return ret;
}

struct pair {
	const char *uri;
	struct end a; /* mlx5 mode */
	struct end b; /* ordinary */
	bool manual;
};

static void pair_open(struct pair *p, const char *uri, const struct opts *o)
{
	memset(p, 0, sizeof(*p));
	p->uri = uri;
	p->manual = o->manual;
	assert_int_equal(end_open(&p->a, uri, true, o), 0);
	assert_int_equal(end_open(&p->b, uri, false, o), 0);
	assert_int_equal(end_connect(&p->a, &p->b), 0);
	assert_int_equal(end_connect(&p->b, &p->a), 0);
}

static void pair_close(struct pair *p)
{
	end_close(&p->a);
	end_close(&p->b);
}

/* ---- driving it --------------------------------------------------------- */

/* Post one WR through mlx5.h and ring the doorbell. */
static int mx_post(struct end *e, const struct ql_mlx5_wr *wr)
{
	void *ctrl;
	int ret = ql_mlx5_sq_post(&e->mq, wr, &ctrl);

	if (!ret)
		ql_mlx5_sq_doorbell(&e->mq, ctrl);
	return ret;
}

/* One CQE of end a within the timeout (the engine is polled by hand in
 * manual mode; the ordinary peer's send CQ is polled meanwhile so that its
 * retries progress). 1, or 0 on timeout. */
static int mx_wait(struct pair *p, struct ql_mlx5_cqe_info *ci)
{
	const uint64_t end = now_ns() + TIMEOUT_NS;
	struct ibv_wc wc;

	for (unsigned i = 0;; i++) {
		int r = ql_mlx5_cq_poll(&p->a.mcq, ci);

		if (r)
			return r;
		if (p->manual)
			ql__soft_mlx5_engine_poll(p->a.dev);
		if ((i & 1023) == 1023) {
			if (now_ns() > end)
				return 0;
			sched_yield();
		}
		(void)wc;
	}
}

/* A completion of the ordinary end's CQ (send or recv). */
static int vb_wait(struct pair *p, struct ql_cq *cq, struct ibv_wc *wc)
{
	const uint64_t end = now_ns() + TIMEOUT_NS;

	for (unsigned i = 0;; i++) {
		int r = ql_cq_poll(cq, 1, wc);

		if (r)
			return r;
		if (p->manual)
			ql__soft_mlx5_engine_poll(p->a.dev);
		if ((i & 1023) == 1023) {
			if (now_ns() > end)
				return 0;
			sched_yield();
		}
	}
}

static void expect_req(struct pair *p, uint8_t sop, uint32_t byte_cnt, bool check_bytes)
{
	struct ql_mlx5_cqe_info ci;
	const uint16_t want = (uint16_t)p->a.mq.sq.tail;

	assert_int_equal(mx_wait(p, &ci), 1);
	if (ci.opcode != QL_MLX5_CQE_REQ)
		fail_msg("CQE opcode %u syndrome 0x%x (send opcode 0x%x)", ci.opcode, ci.syndrome,
			 ci.send_opcode);
	assert_int_equal(ci.send_opcode, sop);
	assert_int_equal(ci.qpn, ql_qp_num(p->a.qp));
	assert_int_equal(ci.wqe_counter, want);
	if (check_bytes)
		assert_int_equal(ci.byte_cnt, byte_cnt);
	ql_mlx5_sq_complete(&p->a.mq, ci.wqe_counter);
}

static void b_post_recv(struct pair *p, uint32_t off, uint32_t len)
{
	struct ibv_sge sge = { (uintptr_t)p->b.buf + off, len, ql_mr_lkey(p->b.mr) };
	struct ibv_recv_wr wr = { .wr_id = 77, .sg_list = &sge, .num_sge = 1 }, *bad;

	assert_int_equal(ql_qp_post_recv(p->b.qp, &wr, &bad), 0);
}

static void b_expect_recv(struct pair *p, enum ibv_wc_opcode op, uint32_t len, bool imm,
			  uint32_t imm_val)
{
	struct ibv_wc wc;

	assert_int_equal(vb_wait(p, p->b.rcq, &wc), 1);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	assert_int_equal(wc.opcode, op);
	assert_int_equal(wc.byte_len, len);
	assert_int_equal(!!(wc.wc_flags & IBV_WC_WITH_IMM), imm);
	if (imm)
		assert_int_equal(ntohl(wc.imm_data), imm_val);
	assert_int_equal(wc.src_qp, ql_qp_num(p->a.qp));
}

/* ---- tests ---------------------------------------------------------------- */

static void test_lifecycle(void **state)
{
	const char *uri = *state;
	struct pair p;
	struct ibv_send_wr swr = { .opcode = IBV_WR_SEND }, *sbad;
	struct ibv_recv_wr rwr = { 0 }, *rbad;
	struct ibv_wc wc;
	struct ql_mlx5_qp v;

	pair_open(&p, uri, &opts_default);
	/* a thread, or (caller progress) views that carry the engine's pass */
	if (env_caller())
		assert_non_null(p.a.mq.progress);
	assert_int_equal(ql__soft_mlx5_engine_running(p.a.dev), p.a.mq.progress == NULL);
	assert_true((p.a.mq.progress == NULL) == (p.a.mcq.progress == NULL));
	assert_false(ql__soft_mlx5_engine_running(p.b.dev));
	/* the verbs hot path refuses mlx5 objects */
	assert_int_equal(ql_qp_post_send(p.a.qp, &swr, &sbad), -EINVAL);
	assert_int_equal(ql_qp_post_recv(p.a.qp, &rwr, &rbad), -EINVAL);
	assert_int_equal(ql_cq_poll(p.a.scq, 1, &wc), -EINVAL);
	/* ordinary objects have no mlx5 view */
	assert_int_equal(ql_qp_mlx5(p.b.qp, &v), -EOPNOTSUPP);
	/* the views: page-aligned rings, doorbell records, an 8-byte
	 * doorbell register, no BlueFlame */
	assert_int_equal((uintptr_t)p.a.mq.sq.buf % 4096, 0);
	assert_int_equal((uintptr_t)p.a.mq.rq.buf % 4096, 0);
	assert_int_equal((uintptr_t)p.a.mcq.buf % 4096, 0);
	assert_int_equal(p.a.mq.sq.stride, 64);
	assert_int_equal(p.a.mq.sq.wqe_cnt & (p.a.mq.sq.wqe_cnt - 1), 0);
	assert_true(p.a.mq.sq.wqe_cnt >= 64);
	assert_int_equal(p.a.mq.rq.wqe_cnt, 64);
	assert_int_equal(p.a.mq.rq.stride, 32); /* 2 SGEs */
	assert_int_equal(p.a.mcq.cqe_size, 64);
	assert_int_equal(p.a.mcq.cqe_cnt, 256);
	assert_non_null(p.a.mq.sq.dbrec);
	assert_non_null(p.a.mq.rq.dbrec);
	assert_non_null(p.a.mcq.dbrec);
	assert_int_equal((uintptr_t)p.a.mq.bf_reg % 64, 0);
	assert_int_equal(p.a.mq.bf_size, 64); /* BlueFlame, the default */
	assert_int_equal(p.a.mq.bf_offset, 0);
	assert_int_equal(p.a.mq.qpn, ql_qp_num(p.a.qp));
	assert_int_equal(p.a.mq.sq.head, 0);
	/* a CQ that is not empty-looking would be a bug: nothing to poll */
	{
		struct ql_mlx5_cqe_info ci;

		assert_int_equal(ql_mlx5_cq_poll(&p.a.mcq, &ci), 0);
	}
	/* mixing kinds is refused */
	{
		struct ql_qp_init_attr ia = { .send_cq = p.a.scq,
					      .recv_cq = p.a.rcq,
					      .cap = { 4, 4, 1, 1, 0 },
					      .qp_type = IBV_QPT_RC };
		struct ql_qp *q;

		assert_int_equal(ql_qp_create(p.a.pd, &ia, &q), -EINVAL);
		ia.flags = QL_QP_INIT_MLX5;
		ia.send_cq = p.b.scq;
		ia.recv_cq = p.b.rcq;
		assert_int_equal(ql_qp_create(p.b.pd, &ia, &q), -EINVAL);
	}
	pair_close(&p);

	/* the engine goes with the last mlx5 QP */
	{
		struct end e;

		assert_int_equal(end_open(&e, uri, true, &opts_default), 0);
		assert_int_equal(ql__soft_mlx5_engine_running(e.dev), e.mq.progress == NULL);
		assert_int_equal(ql_qp_destroy(e.qp), 0);
		e.qp = NULL;
		assert_false(ql__soft_mlx5_engine_running(e.dev));
		end_close(&e);
	}
}

/* Every opcode posted through mlx5.h, to an ordinary soft QP. */
static void test_opcodes(void **state)
{
	struct pair p;
	struct ql_mlx5_sge sge;
	struct ql_mlx5_wr wr;

	pair_open(&p, *state, &opts_default);
	for (int i = 0; i < 256; i++)
		p.a.buf[i] = (uint8_t)(i * 7 + 1);
	{
		const uint32_t lkey = ql_mr_lkey(p.a.mr), rkey = ql_mr_rkey(p.b.mr);
		const uint64_t la0 = (uintptr_t)p.a.buf, rb = (uintptr_t)p.b.buf;

		/* WRITE */
		sge = (struct ql_mlx5_sge){ la0, 100, lkey };
		wr = (struct ql_mlx5_wr){ .opcode = QL_MLX5_OPCODE_RDMA_WRITE,
					  .fm_ce_se = CE,
					  .sge = &sge,
					  .num_sge = 1,
					  .raddr = rb + 1000,
					  .rkey = rkey };
		assert_int_equal(mx_post(&p.a, &wr), 0);
		expect_req(&p, QL_MLX5_OPCODE_RDMA_WRITE, 0, false);
		assert_memory_equal(p.b.buf + 1000, p.a.buf, 100);

		/* inline WRITE (8 bytes) */
		{
			uint64_t v = 0x1122334455667788ull;

			wr = (struct ql_mlx5_wr){ .opcode = QL_MLX5_OPCODE_RDMA_WRITE,
						  .fm_ce_se = CE,
						  .inline_data = &v,
						  .inline_len = 8,
						  .raddr = rb + 2000,
						  .rkey = rkey };
			assert_int_equal(mx_post(&p.a, &wr), 0);
			expect_req(&p, QL_MLX5_OPCODE_RDMA_WRITE, 0, false);
			assert_memory_equal(p.b.buf + 2000, &v, 8);
		}

		/* WRITE_IMM: data, and a receive completion with the imm */
		b_post_recv(&p, 0, 64);
		sge = (struct ql_mlx5_sge){ la0 + 10, 50, lkey };
		wr = (struct ql_mlx5_wr){ .opcode = QL_MLX5_OPCODE_RDMA_WRITE_IMM,
					  .fm_ce_se = CE,
					  .imm = 0xabcd1234,
					  .sge = &sge,
					  .num_sge = 1,
					  .raddr = rb + 3000,
					  .rkey = rkey };
		assert_int_equal(mx_post(&p.a, &wr), 0);
		expect_req(&p, QL_MLX5_OPCODE_RDMA_WRITE_IMM, 0, false);
		b_expect_recv(&p, IBV_WC_RECV_RDMA_WITH_IMM, 50, true, 0xabcd1234);
		assert_memory_equal(p.b.buf + 3000, p.a.buf + 10, 50);

		/* SEND (two data segments) */
		{
			struct ql_mlx5_sge two[2] = { { la0, 30, lkey }, { la0 + 100, 20, lkey } };

			b_post_recv(&p, 4096, 256);
			wr = (struct ql_mlx5_wr){ .opcode = QL_MLX5_OPCODE_SEND,
						  .fm_ce_se = CE,
						  .sge = two,
						  .num_sge = 2 };
			assert_int_equal(mx_post(&p.a, &wr), 0);
			expect_req(&p, QL_MLX5_OPCODE_SEND, 0, false);
			b_expect_recv(&p, IBV_WC_RECV, 50, false, 0);
			assert_memory_equal(p.b.buf + 4096, p.a.buf, 30);
			assert_memory_equal(p.b.buf + 4096 + 30, p.a.buf + 100, 20);
		}

		/* SEND_IMM */
		b_post_recv(&p, 8192, 256);
		sge = (struct ql_mlx5_sge){ la0 + 5, 64, lkey };
		wr = (struct ql_mlx5_wr){ .opcode = QL_MLX5_OPCODE_SEND_IMM,
					  .fm_ce_se = CE,
					  .imm = 42,
					  .sge = &sge,
					  .num_sge = 1 };
		assert_int_equal(mx_post(&p.a, &wr), 0);
		expect_req(&p, QL_MLX5_OPCODE_SEND_IMM, 0, false);
		b_expect_recv(&p, IBV_WC_RECV, 64, true, 42);
		assert_memory_equal(p.b.buf + 8192, p.a.buf + 5, 64);

		/* inline SEND of 200 bytes (4 basic blocks) */
		b_post_recv(&p, 12288, 256);
		wr = (struct ql_mlx5_wr){ .opcode = QL_MLX5_OPCODE_SEND,
					  .fm_ce_se = CE,
					  .inline_data = p.a.buf,
					  .inline_len = 200 };
		assert_int_equal(mx_post(&p.a, &wr), 0);
		expect_req(&p, QL_MLX5_OPCODE_SEND, 0, false);
		b_expect_recv(&p, IBV_WC_RECV, 200, false, 0);
		assert_memory_equal(p.b.buf + 12288, p.a.buf, 200);

		/* READ */
		for (int i = 0; i < 128; i++)
			p.b.buf[20000 + i] = (uint8_t)(0xa0 ^ i);
		sge = (struct ql_mlx5_sge){ la0 + 30000, 128, lkey };
		wr = (struct ql_mlx5_wr){ .opcode = QL_MLX5_OPCODE_RDMA_READ,
					  .fm_ce_se = CE,
					  .sge = &sge,
					  .num_sge = 1,
					  .raddr = rb + 20000,
					  .rkey = rkey };
		assert_int_equal(mx_post(&p.a, &wr), 0);
		expect_req(&p, QL_MLX5_OPCODE_RDMA_READ, 128, true);
		assert_memory_equal(p.a.buf + 30000, p.b.buf + 20000, 128);

		/* CAS (hit, then miss) and FADD: the target in host order, the
		 * old value back big-endian (as on a ConnectX) */
		{
			uint64_t *t = (uint64_t *)(void *)(p.b.buf + 40000);
			uint64_t *res = (uint64_t *)(void *)(p.a.buf + 40000);

			*t = 5;
			assert_int_equal(ql_mlx5_sq_post_cas(&p.a.mq, (uintptr_t)res, lkey,
							     (uintptr_t)t, rkey, 5, 9, CE, NULL),
					 0);
			ql_mlx5_sq_doorbell(&p.a.mq,
					    ql_mlx5_sq_wqe(&p.a.mq.sq, p.a.mq.sq.head - 1));
			expect_req(&p, QL_MLX5_OPCODE_ATOMIC_CS, 8, true);
			assert_int_equal(be64toh(*res), 5);
			assert_int_equal(*t, 9);
			assert_int_equal(ql_mlx5_sq_post_cas(&p.a.mq, (uintptr_t)res, lkey,
							     (uintptr_t)t, rkey, 5, 1, CE, NULL),
					 0);
			ql_mlx5_sq_doorbell(&p.a.mq,
					    ql_mlx5_sq_wqe(&p.a.mq.sq, p.a.mq.sq.head - 1));
			expect_req(&p, QL_MLX5_OPCODE_ATOMIC_CS, 8, true);
			assert_int_equal(be64toh(*res), 9);
			assert_int_equal(*t, 9);
			assert_int_equal(ql_mlx5_sq_post_fadd(&p.a.mq, (uintptr_t)res, lkey,
							      (uintptr_t)t, rkey, 0x100000001ull,
							      CE, NULL),
					 0);
			ql_mlx5_sq_doorbell(&p.a.mq,
					    ql_mlx5_sq_wqe(&p.a.mq.sq, p.a.mq.sq.head - 1));
			expect_req(&p, QL_MLX5_OPCODE_ATOMIC_FA, 8, true);
			assert_int_equal(be64toh(*res), 9);
			assert_int_equal(*t, 0x10000000aull);
		}

		/* NOP: hand-built (one DS), completes as a NOP */
		{
			void *c = ql_mlx5_sq_wqe(&p.a.mq.sq, p.a.mq.sq.head);

			ql_mlx5_ctrl_seg(c, 0, QL_MLX5_OPCODE_NOP, (uint16_t)p.a.mq.sq.head,
					 p.a.mq.qpn, 1, CE, 0);
			p.a.mq.sq.head++;
			ql_mlx5_sq_doorbell(&p.a.mq, c);
			expect_req(&p, QL_MLX5_OPCODE_NOP, 0, false);
		}

		/* unsignaled WQEs write no CQE; the next signaled one stands
		 * for them */
		{
			uint64_t v;
			struct ql_mlx5_cqe_info ci;

			for (int i = 0; i < 5; i++) {
				v = 100 + (uint64_t)i;
				wr = (struct ql_mlx5_wr){ .opcode = QL_MLX5_OPCODE_RDMA_WRITE,
							  .fm_ce_se = i == 4 ? CE : 0,
							  .inline_data = &v,
							  .inline_len = 8,
							  .raddr = rb + 50000 + 8 * (uint64_t)i,
							  .rkey = rkey };
				assert_int_equal(mx_post(&p.a, &wr), 0);
			}
			assert_int_equal(mx_wait(&p, &ci), 1);
			assert_int_equal(ci.opcode, QL_MLX5_CQE_REQ);
			assert_int_equal(ci.wqe_counter, (uint16_t)(p.a.mq.sq.head - 1));
			ql_mlx5_sq_complete(&p.a.mq, ci.wqe_counter);
			assert_int_equal(p.a.mq.sq.tail, p.a.mq.sq.head);
			for (int i = 0; i < 5; i++)
				assert_int_equal(*(uint64_t *)(void *)(p.b.buf + 50000 + 8 * i),
						 100 + i);
			assert_int_equal(ql_mlx5_cq_poll(&p.a.mcq, &ci), 0);
		}
	}
	assert_int_equal(ql_qp_state(p.a.qp), IBV_QPS_RTS);
	pair_close(&p);
}

/* The ordinary peer's SEND, SEND_IMM and WRITE_IMM into the mlx5 RQ. */
static void a_rq_post(struct pair *p, uint32_t off, uint32_t len)
{
	struct ql_mlx5_sge sge = { (uintptr_t)p->a.buf + off, len, ql_mr_lkey(p->a.mr) };

	assert_int_equal(ql_mlx5_rq_post(&p->a.mq, &sge, 1), 0);
}

static void b_send(struct pair *p, enum ibv_wr_opcode op, uint32_t off, uint32_t len, uint32_t imm,
		   uint64_t raddr)
{
	struct ibv_sge sge = { (uintptr_t)p->b.buf + off, len, ql_mr_lkey(p->b.mr) };
	struct ibv_send_wr wr = { .wr_id = 9,
				  .sg_list = &sge,
				  .num_sge = 1,
				  .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED,
				  .imm_data = htonl(imm) },
			   *bad;
	struct ibv_wc wc;

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = ql_mr_rkey(p->a.mr);
	assert_int_equal(ql_qp_post_send(p->b.qp, &wr, &bad), 0);
	assert_int_equal(vb_wait(p, p->b.scq, &wc), 1);
	if (wc.status != IBV_WC_SUCCESS)
		fail_msg("peer's send completed %s", ibv_wc_status_str(wc.status));
}

static void expect_resp(struct pair *p, uint8_t op, uint32_t len, uint32_t imm)
{
	struct ql_mlx5_cqe_info ci;

	assert_int_equal(mx_wait(p, &ci), 1);
	if (ci.opcode != op)
		fail_msg("CQE opcode %u (want %u), syndrome 0x%x", ci.opcode, op, ci.syndrome);
	assert_int_equal(ci.byte_cnt, len);
	assert_int_equal(ci.qpn, ql_qp_num(p->a.qp));
	assert_int_equal(ci.wqe_counter, (uint16_t)p->a.mq.rq.tail);
	if (op != QL_MLX5_CQE_RESP_SEND)
		assert_int_equal(ci.imm, imm);
	ql_mlx5_rq_complete(&p->a.mq);
}

static void test_receive(void **state)
{
	struct pair p;

	pair_open(&p, *state, &opts_default);
	for (int i = 0; i < 512; i++)
		p.b.buf[i] = (uint8_t)(i ^ 0x5a);
	a_rq_post(&p, 0, 256);
	a_rq_post(&p, 1024, 256);
	a_rq_post(&p, 2048, 16);
	b_send(&p, IBV_WR_SEND, 0, 200, 0, 0);
	expect_resp(&p, QL_MLX5_CQE_RESP_SEND, 200, 0);
	assert_memory_equal(p.a.buf, p.b.buf, 200);
	b_send(&p, IBV_WR_SEND_WITH_IMM, 100, 256, 0x77665544, 0);
	expect_resp(&p, QL_MLX5_CQE_RESP_SEND_IMM, 256, 0x77665544);
	assert_memory_equal(p.a.buf + 1024, p.b.buf + 100, 256);
	b_send(&p, IBV_WR_RDMA_WRITE_WITH_IMM, 300, 64, 7, (uintptr_t)p.a.buf + 9000);
	expect_resp(&p, QL_MLX5_CQE_RESP_WR_IMM, 64, 7);
	assert_memory_equal(p.a.buf + 9000, p.b.buf + 300, 64);

	/* A receive rung just before the peer's SEND: on a ConnectX it is
	 * there at once; here the engine must take it first, and the peer's
	 * requester waits for that instead of an RNR (which the peer, not
	 * polling its send CQ here, would never retry). 200 times, no RNR. */
	for (int i = 0; i < 200; i++) {
		struct ibv_sge sge = { (uintptr_t)p.b.buf + 16, 32, ql_mr_lkey(p.b.mr) };
		struct ibv_send_wr wr = { .sg_list = &sge,
					  .num_sge = 1,
					  .opcode = IBV_WR_SEND,
					  .send_flags = IBV_SEND_SIGNALED },
				   *bad;
		struct ql_device_counters c;
		struct ibv_wc wc;

		a_rq_post(&p, 4096, 64);
		assert_int_equal(ql_qp_post_send(p.b.qp, &wr, &bad), 0);
		expect_resp(&p, QL_MLX5_CQE_RESP_SEND, 32, 0);
		/* (only now: polling it would retry an RNR'd SEND) */
		assert_int_equal(vb_wait(&p, p.b.scq, &wc), 1);
		assert_int_equal(wc.status, IBV_WC_SUCCESS);
		assert_int_equal(ql_device_counters(p.a.dev, &c), 0);
		assert_int_equal(c.rc_nak_rnr, 0);
	}
	pair_close(&p);
}

/* A SEND from the mlx5 side before the peer posted its receive: RNR, and
 * the engine retries it by itself (the application only polls its CQ, as
 * with a NIC) until the receive is there; a WRITE rung after it waits its
 * turn (in order). */
static void test_rnr(void **state)
{
	struct pair p;
	struct ql_mlx5_cqe_info ci;
	struct ql_mlx5_sge sge;
	struct ql_mlx5_wr wr;
	struct ql_device_counters c;
	uint64_t v = 0xabcdef;

	pair_open(&p, *state, &opts_default);
	memset(p.a.buf, 0x3c, 64);
	sge = (struct ql_mlx5_sge){ (uintptr_t)p.a.buf, 64, ql_mr_lkey(p.a.mr) };
	wr = (struct ql_mlx5_wr){
		.opcode = QL_MLX5_OPCODE_SEND, .fm_ce_se = CE, .sge = &sge, .num_sge = 1
	};
	assert_int_equal(mx_post(&p.a, &wr), 0);
	wr = (struct ql_mlx5_wr){ .opcode = QL_MLX5_OPCODE_RDMA_WRITE,
				  .fm_ce_se = CE,
				  .inline_data = &v,
				  .inline_len = 8,
				  .raddr = (uintptr_t)p.b.buf + 512,
				  .rkey = ql_mr_rkey(p.b.mr) };
	assert_int_equal(mx_post(&p.a, &wr), 0);
	/* the responder NAKs (counted on its device) while nothing is posted */
	for (int i = 0; i < 50000; i++) { /* 5 s at least */
		assert_int_equal(ql_device_counters(p.b.dev, &c), 0);
		if (c.rc_nak_rnr)
			break;
		usleep(100);
	}
	assert_true(c.rc_nak_rnr > 0);
	assert_int_equal(ql_mlx5_cq_poll(&p.a.mcq, &ci), 0);
	assert_int_equal(*(uint64_t *)(void *)(p.b.buf + 512), 0);
	b_post_recv(&p, 1024, 256);
	expect_req(&p, QL_MLX5_OPCODE_SEND, 0, false);
	expect_req(&p, QL_MLX5_OPCODE_RDMA_WRITE, 0, false);
	b_expect_recv(&p, IBV_WC_RECV, 64, false, 0);
	assert_memory_equal(p.b.buf + 1024, p.a.buf, 64);
	assert_int_equal(*(uint64_t *)(void *)(p.b.buf + 512), v);
	pair_close(&p);
}

/* The attack on that wait: an mlx5-mode responder whose receive doorbell
 * record promises receives that never come (here: no engine pass takes
 * them). The peer's requester waits once, 50 ms, then never again on this
 * connection: the next SEND is dropped (UC) at once. */
static void test_lying_doorbell(void **state)
{
	struct opts o = opts_default;
	struct pair p;
	struct ql_device_counters c;
	struct ibv_sge sge;
	struct ibv_send_wr wr = { .num_sge = 1, .opcode = IBV_WR_SEND }, *bad;
	uint64_t t0, t1, t2;

	o.type = IBV_QPT_UC;
	o.manual = true; /* nobody takes what the record says */
	pair_open(&p, *state, &o);
	sge = (struct ibv_sge){ (uintptr_t)p.b.buf, 8, ql_mr_lkey(p.b.mr) };
	wr.sg_list = &sge;
	*p.a.mq.rq.dbrec = htobe32(5);
	t0 = now_ns();
	assert_int_equal(ql_qp_post_send(p.b.qp, &wr, &bad), 0);
	t1 = now_ns();
	/* no second wait: the quickest of five posts is well under 50 ms
	 * (one could be preempted that long on a loaded host, not five) */
	t2 = UINT64_MAX;
	for (int i = 0; i < 5; i++) {
		uint64_t a = now_ns(), d;

		assert_int_equal(ql_qp_post_send(p.b.qp, &wr, &bad), 0);
		d = now_ns() - a;
		t2 = d < t2 ? d : t2;
	}
	assert_int_equal(ql_device_counters(p.a.dev, &c), 0);
	assert_int_equal(c.uc_drop_no_recv, 6);
	assert_true(t1 - t0 >= 45000000ull);
	assert_true(t2 < 25000000ull);
	pair_close(&p);
}

/* Small rings, thousands of WQEs both ways: SQ, RQ and CQ wrap. */
static void wrap_run(const char *uri, bool no_bf)
{
	/* WQEs of one and two basic blocks (inline 8 and 60 bytes) in a ring
	 * of 8: two-block WQEs straddle the ring's end now and then; with
	 * BlueFlame the one-block WQEs come from its buffers, the others from
	 * the ring */
	const struct opts o = { IBV_QPT_RC, 4, 4, 4, 64, 1, false, no_bf };
	struct pair p;
	const long n = 3000;
	long straddled = 0;

	pair_open(&p, uri, &o);
	assert_int_equal(p.a.mq.bf_size, no_bf ? 0 : 64);
	assert_true(p.a.mq.sq.wqe_cnt <= 8);
	assert_int_equal(p.a.mcq.cqe_cnt, 4);
	for (long i = 0; i < n; i++) {
		uint64_t v = 0x1000 + (uint64_t)i;
		struct ql_mlx5_wr wr = { .opcode = QL_MLX5_OPCODE_RDMA_WRITE,
					 .fm_ce_se = CE,
					 .inline_data = &v,
					 .inline_len = 8,
					 .raddr = (uintptr_t)p.b.buf + 8 * (uint64_t)(i & 63),
					 .rkey = ql_mr_rkey(p.b.mr) };
		struct ql_mlx5_sge sge = { (uintptr_t)p.a.buf + 64 * (uint64_t)(i & 31), 8,
					   ql_mr_lkey(p.a.mr) };
		struct ql_mlx5_cqe_info ci;
		uint64_t got;
		uint8_t big[60];
		const bool two = i % 5 == 1; /* 6 blocks per 5 WQEs: all odd starts */

		if (two) {
			for (int k = 0; k < 60; k++)
				big[k] = (uint8_t)(i + k);
			wr.inline_data = big;
			wr.inline_len = 60;
			wr.raddr = (uintptr_t)p.b.buf + 8192;
		}
		/* a WRITE through the SQ */
		assert_int_equal(mx_post(&p.a, &wr), 0);
		expect_req(&p, QL_MLX5_OPCODE_RDMA_WRITE, 0, false);
		if (two) {
			assert_memory_equal(p.b.buf + 8192, big, 60);
			straddled += (p.a.mq.sq.head - 2) % p.a.mq.sq.wqe_cnt ==
				     p.a.mq.sq.wqe_cnt - 1;
		} else {
			memcpy(&got, p.b.buf + 8 * (i & 63), 8);
			assert_int_equal(got, v);
		}
		/* a SEND from the peer into the RQ */
		assert_int_equal(ql_mlx5_rq_post(&p.a.mq, &sge, 1), 0);
		memcpy(p.b.buf + 4096, &v, 8);
		b_send(&p, IBV_WR_SEND, 4096, 8, 0, 0);
		assert_int_equal(mx_wait(&p, &ci), 1);
		assert_int_equal(ci.opcode, QL_MLX5_CQE_RESP_SEND);
		assert_int_equal(ci.wqe_counter, (uint16_t)p.a.mq.rq.tail);
		ql_mlx5_rq_complete(&p.a.mq);
		memcpy(&got, p.a.buf + 64 * (i & 31), 8);
		assert_int_equal(got, v);
	}
	assert_true(p.a.mq.sq.head > 16 * p.a.mq.sq.wqe_cnt);
	assert_true(straddled > 100);
	assert_true(p.a.mcq.cons_index > 16 * p.a.mcq.cqe_cnt);
	assert_int_equal(ql_qp_state(p.a.qp), IBV_QPS_RTS);
	/* BlueFlame: every one-block WQE (4 in 5) could come from a buffer;
	 * without it none does */
	if (no_bf)
		assert_int_equal(ql__soft_mlx5_bf_hits(p.a.qp), 0);
	else
		assert_true(ql__soft_mlx5_bf_hits(p.a.qp) > (uint64_t)n / 2);
	pair_close(&p);
}

static void test_wrap(void **state)
{
	wrap_run(*state, false);
	wrap_run(*state, true);
}

/* ---- BlueFlame ------------------------------------------------------------ */

/* Post wr (one basic block) and ring with BlueFlame, then turn the ring's
 * copy to garbage, so that only the BlueFlame buffer holds the WQE, and
 * run one pass of the (manual) engine; the ring's copy is put back after
 * (ql_mlx5_sq_complete reads its control segment). Returns the WQEs the
 * engine took from a BlueFlame buffer meanwhile. */
static uint64_t bf_only(struct pair *p, const struct ql_mlx5_wr *wr)
{
	const uint64_t h0 = ql__soft_mlx5_bf_hits(p->a.qp);
	uint8_t save[64];
	void *ctrl;

	assert_int_equal(ql_mlx5_sq_post(&p->a.mq, wr, &ctrl), 0);
	assert_int_equal(ql_mlx5_wqe_nbb(ctrl), 1);
	ql_mlx5_sq_doorbell(&p->a.mq, ctrl);
	memcpy(save, ctrl, 64);
	memset(ctrl, 0xee, 64);
	assert_true(ql__soft_mlx5_engine_poll(p->a.dev) > 0);
	memcpy(ctrl, save, 64);
	return ql__soft_mlx5_bf_hits(p->a.qp) - h0;
}

/* The BlueFlame buffer the last doorbell wrote. */
static uint8_t *bf_last(struct end *e)
{
	return (uint8_t *)e->mq.bf_reg + (e->mq.bf_offset ^ e->mq.bf_size);
}

static struct ql_mlx5_wr inl_write(const void *v, uint32_t len, uint64_t raddr, uint32_t rkey)
{
	return (struct ql_mlx5_wr){ .opcode = QL_MLX5_OPCODE_RDMA_WRITE,
				    .fm_ce_se = CE,
				    .inline_data = v,
				    .inline_len = len,
				    .raddr = raddr,
				    .rkey = rkey };
}

/* Every opcode whose WQE fits in 64 bytes, executed from the BlueFlame
 * buffer alone; then the lines the engine must not take from there. */
static void test_blueflame(void **state)
{
	struct opts o = opts_default;
	struct pair p;
	struct ql_mlx5_sge sge;
	struct ql_mlx5_wr wr;
	struct ql_mlx5_cqe_info ci;

	o.manual = true;
	pair_open(&p, *state, &o);
	assert_int_equal(p.a.mq.bf_size, 64);
	for (int i = 0; i < 256; i++)
		p.a.buf[i] = (uint8_t)(i * 5 + 3);
	{
		const uint32_t lkey = ql_mr_lkey(p.a.mr), rkey = ql_mr_rkey(p.b.mr);
		const uint64_t la0 = (uintptr_t)p.a.buf, rb = (uintptr_t)p.b.buf;
		uint8_t in28[28];
		uint64_t w64, old;

		for (int i = 0; i < 28; i++)
			in28[i] = (uint8_t)(0x40 + i);
		/* WRITE, one data segment (ds 3) */
		sge = (struct ql_mlx5_sge){ la0, 100, lkey };
		wr = (struct ql_mlx5_wr){ .opcode = QL_MLX5_OPCODE_RDMA_WRITE,
					  .fm_ce_se = CE,
					  .sge = &sge,
					  .num_sge = 1,
					  .raddr = rb + 1000,
					  .rkey = rkey };
		assert_int_equal(bf_only(&p, &wr), 1);
		expect_req(&p, QL_MLX5_OPCODE_RDMA_WRITE, 0, false);
		assert_memory_equal(p.b.buf + 1000, p.a.buf, 100);
		/* WRITE, 28 bytes inline: the largest that fits (ds 4) */
		wr = inl_write(in28, 28, rb + 1200, rkey);
		assert_int_equal(bf_only(&p, &wr), 1);
		expect_req(&p, QL_MLX5_OPCODE_RDMA_WRITE, 0, false);
		assert_memory_equal(p.b.buf + 1200, in28, 28);
		/* WRITE_IMM */
		b_post_recv(&p, 0, 64);
		sge = (struct ql_mlx5_sge){ la0 + 10, 50, lkey };
		wr = (struct ql_mlx5_wr){ .opcode = QL_MLX5_OPCODE_RDMA_WRITE_IMM,
					  .fm_ce_se = CE,
					  .imm = 0x5eed0001,
					  .sge = &sge,
					  .num_sge = 1,
					  .raddr = rb + 3000,
					  .rkey = rkey };
		assert_int_equal(bf_only(&p, &wr), 1);
		expect_req(&p, QL_MLX5_OPCODE_RDMA_WRITE_IMM, 0, false);
		b_expect_recv(&p, IBV_WC_RECV_RDMA_WITH_IMM, 50, true, 0x5eed0001);
		assert_memory_equal(p.b.buf + 3000, p.a.buf + 10, 50);
		/* SEND, one data segment (ds 2) */
		b_post_recv(&p, 4000, 64);
		sge = (struct ql_mlx5_sge){ la0 + 20, 40, lkey };
		wr = (struct ql_mlx5_wr){
			.opcode = QL_MLX5_OPCODE_SEND, .fm_ce_se = CE, .sge = &sge, .num_sge = 1
		};
		assert_int_equal(bf_only(&p, &wr), 1);
		expect_req(&p, QL_MLX5_OPCODE_SEND, 0, false);
		b_expect_recv(&p, IBV_WC_RECV, 40, false, 0);
		assert_memory_equal(p.b.buf + 4000, p.a.buf + 20, 40);
		/* SEND_IMM, 28 bytes inline (ds 3) */
		b_post_recv(&p, 4100, 64);
		wr = (struct ql_mlx5_wr){ .opcode = QL_MLX5_OPCODE_SEND_IMM,
					  .fm_ce_se = CE,
					  .imm = 0x5eed0002,
					  .inline_data = in28,
					  .inline_len = 28 };
		assert_int_equal(bf_only(&p, &wr), 1);
		expect_req(&p, QL_MLX5_OPCODE_SEND_IMM, 0, false);
		b_expect_recv(&p, IBV_WC_RECV, 28, true, 0x5eed0002);
		assert_memory_equal(p.b.buf + 4100, in28, 28);
		/* READ (ds 3) */
		memset(p.a.buf + 512, 0, 64);
		sge = (struct ql_mlx5_sge){ la0 + 512, 64, lkey };
		wr = (struct ql_mlx5_wr){ .opcode = QL_MLX5_OPCODE_RDMA_READ,
					  .fm_ce_se = CE,
					  .sge = &sge,
					  .num_sge = 1,
					  .raddr = rb + 1000,
					  .rkey = rkey };
		assert_int_equal(bf_only(&p, &wr), 1);
		expect_req(&p, QL_MLX5_OPCODE_RDMA_READ, 64, true);
		assert_memory_equal(p.a.buf + 512, p.b.buf + 1000, 64);
		/* CAS and FA (ds 4: control, address, atomic, data) */
		w64 = 100;
		memcpy(p.b.buf + 2048, &w64, 8);
		sge = (struct ql_mlx5_sge){ la0 + 600, 8, lkey };
		wr = (struct ql_mlx5_wr){ .opcode = QL_MLX5_OPCODE_ATOMIC_CS,
					  .fm_ce_se = CE,
					  .sge = &sge,
					  .num_sge = 1,
					  .raddr = rb + 2048,
					  .rkey = rkey,
					  .swap_add = 7,
					  .compare = 100 };
		assert_int_equal(bf_only(&p, &wr), 1);
		expect_req(&p, QL_MLX5_OPCODE_ATOMIC_CS, 8, true);
		memcpy(&old, p.a.buf + 600, 8);
		assert_int_equal(be64toh(old), 100);
		memcpy(&w64, p.b.buf + 2048, 8);
		assert_int_equal(w64, 7);
		wr.opcode = QL_MLX5_OPCODE_ATOMIC_FA;
		wr.swap_add = 5;
		assert_int_equal(bf_only(&p, &wr), 1);
		expect_req(&p, QL_MLX5_OPCODE_ATOMIC_FA, 8, true);
		memcpy(&old, p.a.buf + 600, 8);
		assert_int_equal(be64toh(old), 7);
		memcpy(&w64, p.b.buf + 2048, 8);
		assert_int_equal(w64, 12);

		/* The lines the engine reads from the ring instead (the
		 * BlueFlame buffer's payload is changed: the value written
		 * says where the WQE came from). */
		for (int k = 0; k < 4; k++) {
			const uint64_t h0 = ql__soft_mlx5_bf_hits(p.a.qp);
			uint64_t v = 0xa000 + (uint64_t)k, got;
			uint8_t *bf;
			void *ctrl;

			wr = inl_write(&v, 8, rb + 5000, rkey);
			assert_int_equal(ql_mlx5_sq_post(&p.a.mq, &wr, &ctrl), 0);
			ql_mlx5_sq_doorbell(&p.a.mq, ctrl);
			bf = bf_last(&p.a);
			bf[32 + 4] ^= 0xff; /* the inline payload's first byte */
			if (k == 0)
				bf[1] ^= 0x80; /* a WQE index that is not the next */
			else if (k == 1)
				bf[7] = (bf[7] & 0xc0) | 5; /* ds 5: a longer WQE's doorbell */
			else if (k == 2)
				bf[7] &= 0xc0; /* ds 0 */
			if (k == 3) {
				/* the record moved on by two more WQEs after it:
				 * its buffer may be rewritten, the ring is read */
				uint64_t v2 = 0xb000;

				wr = inl_write(&v2, 8, rb + 5008, rkey);
				assert_int_equal(ql_mlx5_sq_post(&p.a.mq, &wr, NULL), 0);
				assert_int_equal(ql_mlx5_sq_post(&p.a.mq, &wr, &ctrl), 0);
				ql_mlx5_sq_doorbell(&p.a.mq, ctrl);
			}
			expect_req(&p, QL_MLX5_OPCODE_RDMA_WRITE, 0, false);
			memcpy(&got, p.b.buf + 5000, 8);
			assert_int_equal(got, v); /* the ring's, not the buffer's */
			if (k == 3) {
				/* three found rung at once: a batch, all of it
				 * from the ring */
				expect_req(&p, QL_MLX5_OPCODE_RDMA_WRITE, 0, false);
				expect_req(&p, QL_MLX5_OPCODE_RDMA_WRITE, 0, false);
			}
			assert_int_equal(ql__soft_mlx5_bf_hits(p.a.qp), h0);
		}
		/* a line that names the next WQE is the device's to execute,
		 * as a ConnectX would: with a different payload, that payload
		 * lands */
		{
			uint64_t v = 0xc000, got;
			void *ctrl;

			wr = inl_write(&v, 8, rb + 5000, rkey);
			assert_int_equal(ql_mlx5_sq_post(&p.a.mq, &wr, &ctrl), 0);
			ql_mlx5_sq_doorbell(&p.a.mq, ctrl);
			bf_last(&p.a)[32 + 4] ^= 0xff;
			expect_req(&p, QL_MLX5_OPCODE_RDMA_WRITE, 0, false);
			memcpy(&got, p.b.buf + 5000, 8);
			assert_int_equal(got, v ^ 0xff);
		}
		/* garbage in a matching line: checked as any WQE, an error
		 * like a NIC's (an inline length beyond the 64 bytes; an
		 * unknown opcode), the QP in ERR */
		for (int k = 0; k < 2; k++) {
			uint64_t v = 1;
			void *ctrl;

			wr = inl_write(&v, 8, rb + 5000, rkey);
			assert_int_equal(ql_mlx5_sq_post(&p.a.mq, &wr, &ctrl), 0);
			ql_mlx5_sq_doorbell(&p.a.mq, ctrl);
			if (k == 0)
				ql_mlx5_st32(bf_last(&p.a) + 32, 200 | QL_MLX5_INLINE_SEG);
			else
				bf_last(&p.a)[3] = 0x3f; /* opcode */
			assert_int_equal(mx_wait(&p, &ci), 1);
			assert_int_equal(ci.opcode, QL_MLX5_CQE_REQ_ERR);
			assert_int_equal(ci.syndrome, k == 0 ? 0x01 : 0x02);
			assert_int_equal(ci.wqe_counter, (uint16_t)p.a.mq.sq.tail);
			assert_int_equal(ql_qp_state(p.a.qp), IBV_QPS_ERR);
			{
				struct ibv_qp_attr a = { .qp_state = IBV_QPS_RESET };

				assert_int_equal(ql_qp_modify(p.a.qp, &a, IBV_QP_STATE), 0);
				assert_int_equal(ql_qp_modify(p.b.qp, &a, IBV_QP_STATE), 0);
				assert_int_equal(end_connect(&p.a, &p.b), 0);
				assert_int_equal(end_connect(&p.b, &p.a), 0);
				while (ql_mlx5_cq_poll(&p.a.mcq, &ci) == 1)
					;
			}
			/* after the reset, the buffers name no WQE: index 0
			 * is taken from where the next doorbell puts it */
			assert_int_equal(p.a.mq.bf_offset, 0);
			wr = inl_write(in28, 8, rb + 5100, rkey);
			assert_int_equal(bf_only(&p, &wr), 1);
			expect_req(&p, QL_MLX5_OPCODE_RDMA_WRITE, 0, false);
			assert_memory_equal(p.b.buf + 5100, in28, 8);
		}
	}
	pair_close(&p);
}

/* QL_QP_INIT_MLX5_NO_BF: bf_size 0, the 8-byte doorbell, WQEs from the
 * ring only. */
static void test_no_blueflame(void **state)
{
	struct opts o = opts_default;
	struct pair p;
	uint64_t v = 0x600d, got;
	struct ql_mlx5_wr wr;

	o.no_bf = true;
	pair_open(&p, *state, &o);
	assert_int_equal(p.a.mq.bf_size, 0);
	assert_int_equal(p.a.mq.bf_offset, 0);
	assert_int_equal((uintptr_t)p.a.mq.bf_reg % 64, 0);
	wr = inl_write(&v, 8, (uintptr_t)p.b.buf + 64, ql_mr_rkey(p.b.mr));
	for (int i = 0; i < 100; i++) {
		v++;
		assert_int_equal(mx_post(&p.a, &wr), 0);
		expect_req(&p, QL_MLX5_OPCODE_RDMA_WRITE, 0, false);
		memcpy(&got, p.b.buf + 64, 8);
		assert_int_equal(got, v);
	}
	assert_int_equal(ql__soft_mlx5_bf_hits(p.a.qp), 0);
	pair_close(&p);
	/* NO_BF alone (without QL_QP_INIT_MLX5) is refused */
	{
		struct end e;
		struct opts bad = opts_default;

		bad.no_bf = true;
		memset(&e, 0, sizeof(e));
		assert_int_equal(ql_device_open(*state, &e.dev), 0);
		assert_int_equal(ql_pd_alloc(e.dev, &e.pd), 0);
		assert_int_equal(ql_cq_create(e.dev, 8, &e.scq), 0);
		{
			struct ql_qp_init_attr ia = { .send_cq = e.scq,
						      .recv_cq = e.scq,
						      .qp_type = IBV_QPT_RC,
						      .cap = { 4, 4, 1, 1, 0 },
						      .flags = QL_QP_INIT_MLX5_NO_BF };

			assert_int_equal(ql_qp_create(e.pd, &ia, &e.qp), -EINVAL);
			e.qp = NULL;
		}
		(void)bad;
		end_close(&e);
	}
}

/* ---- bad WQEs ------------------------------------------------------------- */

enum bad_kind {
	BAD_LKEY,
	BAD_RKEY,
	BAD_OPCODE,
	BAD_DS_ZERO,
	BAD_DS_BEYOND,
	BAD_INLINE_OVERFLOW,
	BAD_INLINE_TOO_LONG,
	BAD_ATOMIC_SGES,
	BAD_DOORBELL,
	BAD_READ_ON_UC,
	BAD_KINDS
};

static const struct {
	const char *name;
	uint8_t syndrome;
} bad_info[BAD_KINDS] = {
	[BAD_LKEY] = { "lkey", QL_MLX5_CQE_SYNDROME_LOCAL_PROT_ERR },
	[BAD_RKEY] = { "rkey", QL_MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR },
	[BAD_OPCODE] = { "opcode", QL_MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR },
	[BAD_DS_ZERO] = { "ds 0", QL_MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR },
	[BAD_DS_BEYOND] = { "ds beyond the doorbell", QL_MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR },
	[BAD_INLINE_OVERFLOW] = { "inline length beyond the WQE",
				  QL_MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR },
	[BAD_INLINE_TOO_LONG] = { "inline above 256", QL_MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR },
	[BAD_ATOMIC_SGES] = { "atomic with two data segments",
			      QL_MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR },
	[BAD_DOORBELL] = { "doorbell beyond the ring", QL_MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR },
	[BAD_READ_ON_UC] = { "READ on UC", QL_MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR },
};

/* Write a bad WQE of `kind` at the SQ head and ring. */
static void post_bad(struct pair *p, enum bad_kind kind)
{
	struct ql_mlx5_qp *q = &p->a.mq;
	const uint32_t idx = q->sq.head;
	uint8_t *w = ql_mlx5_sq_wqe(&q->sq, idx);
	const uint32_t lkey = ql_mr_lkey(p->a.mr), rkey = ql_mr_rkey(p->b.mr);
	const uint64_t la = (uintptr_t)p->a.buf, rb = (uintptr_t)p->b.buf;
	struct ql_mlx5_sge sge = { la, 8, lkey };
	struct ql_mlx5_wr wr = { .opcode = QL_MLX5_OPCODE_RDMA_WRITE,
				 .fm_ce_se = CE,
				 .sge = &sge,
				 .num_sge = 1,
				 .raddr = rb,
				 .rkey = rkey };
	void *ctrl;

	switch (kind) {
	case BAD_LKEY:
		sge.lkey = lkey ^ 0x5000;
		break;
	case BAD_RKEY:
		wr.rkey = rkey ^ 0x5000;
		break;
	case BAD_READ_ON_UC:
		wr.opcode = QL_MLX5_OPCODE_RDMA_READ;
		break;
	case BAD_ATOMIC_SGES:
		/* CTRL | RADDR | ATOMIC | DATA | DATA */
		ql_mlx5_raddr_seg(w + 16, rb, rkey);
		ql_mlx5_atomic_seg(w + 32, 1, 0);
		ql_mlx5_data_seg(w + 48, la, 8, lkey);
		ql_mlx5_data_seg(ql_mlx5_sq_seg(&q->sq, idx, 4), la + 8, 8, lkey);
		ql_mlx5_ctrl_seg(w, 0, QL_MLX5_OPCODE_ATOMIC_FA, (uint16_t)idx, q->qpn, 5, CE, 0);
		q->sq.head += 2;
		ql_mlx5_sq_doorbell(q, w);
		return;
	default:
		break;
	}
	if (kind == BAD_LKEY || kind == BAD_RKEY || kind == BAD_READ_ON_UC) {
		assert_int_equal(mx_post(&p->a, &wr), 0);
		return;
	}
	ql_mlx5_data_seg(w + 32, la, 8, lkey);
	ql_mlx5_raddr_seg(w + 16, rb, rkey);
	switch (kind) {
	case BAD_OPCODE:
		ql_mlx5_ctrl_seg(w, 0, 0x1f, (uint16_t)idx, q->qpn, 3, CE, 0);
		q->sq.head++;
		break;
	case BAD_DS_ZERO:
		ql_mlx5_ctrl_seg(w, 0, QL_MLX5_OPCODE_RDMA_WRITE, (uint16_t)idx, q->qpn, 0, CE, 0);
		q->sq.head++;
		break;
	case BAD_DS_BEYOND:
		/* 40 DS (3 basic blocks) with one block rung */
		ql_mlx5_ctrl_seg(w, 0, QL_MLX5_OPCODE_RDMA_WRITE, (uint16_t)idx, q->qpn, 40, CE, 0);
		q->sq.head++;
		break;
	case BAD_INLINE_OVERFLOW:
		/* 3 DS, but the inline segment claims 2^31 - 1 bytes */
		ql_mlx5_st32(w + 32, 0x7fffffffu | QL_MLX5_INLINE_SEG);
		ql_mlx5_ctrl_seg(w, 0, QL_MLX5_OPCODE_RDMA_WRITE, (uint16_t)idx, q->qpn, 3, CE, 0);
		q->sq.head++;
		break;
	case BAD_INLINE_TOO_LONG: {
		static uint8_t data[600];
		struct ql_mlx5_wr iw = { .opcode = QL_MLX5_OPCODE_RDMA_WRITE,
					 .fm_ce_se = CE,
					 .inline_data = data,
					 .inline_len = 600,
					 .raddr = rb,
					 .rkey = rkey };

		assert_int_equal(ql_mlx5_sq_post(q, &iw, &ctrl), 0);
		ql_mlx5_sq_doorbell(q, ctrl);
		return;
	}
	case BAD_DOORBELL:
		ql_mlx5_ctrl_seg(w, 0, QL_MLX5_OPCODE_RDMA_WRITE, (uint16_t)idx, q->qpn, 3, CE, 0);
		/* the record claims far more than the ring holds */
		q->sq.head += q->sq.wqe_cnt + 5;
		break;
	default:
		fail();
	}
	ql_mlx5_sq_doorbell(q, w);
}

static void test_bad_wqes(void **state)
{
	for (int k = 0; k < BAD_KINDS; k++) {
		struct opts o = opts_default;
		struct ql_mlx5_cqe_info ci;
		struct pair p;
		uint64_t v = 1;
		struct ql_mlx5_wr wr;

		o.type = k == BAD_READ_ON_UC ? IBV_QPT_UC : IBV_QPT_RC;
		pair_open(&p, *state, &o);
		/* a good WRITE first: the QP works */
		wr = (struct ql_mlx5_wr){ .opcode = QL_MLX5_OPCODE_RDMA_WRITE,
					  .fm_ce_se = CE,
					  .inline_data = &v,
					  .inline_len = 8,
					  .raddr = (uintptr_t)p.b.buf,
					  .rkey = ql_mr_rkey(p.b.mr) };
		assert_int_equal(mx_post(&p.a, &wr), 0);
		expect_req(&p, QL_MLX5_OPCODE_RDMA_WRITE, 0, false);

		post_bad(&p, (enum bad_kind)k);
		if (mx_wait(&p, &ci) != 1)
			fail_msg("%s: no CQE", bad_info[k].name);
		if (ci.opcode != QL_MLX5_CQE_REQ_ERR || ci.syndrome != bad_info[k].syndrome)
			fail_msg("%s: CQE opcode %u syndrome 0x%x (want REQ_ERR, 0x%x)",
				 bad_info[k].name, ci.opcode, ci.syndrome, bad_info[k].syndrome);
		assert_int_equal(ci.qpn, ql_qp_num(p.a.qp));
		assert_int_equal(ci.wqe_counter, (uint16_t)p.a.mq.sq.tail);
		/* the QP is in error now (the engine may still be on its way:
		 * the CQE is written after the state) */
		if (ql_qp_state(p.a.qp) != IBV_QPS_ERR)
			fail_msg("%s: QP in state %d after the error CQE", bad_info[k].name,
				 ql_qp_state(p.a.qp));
		/* what follows is flushed */
		p.a.mq.sq.tail = p.a.mq.sq.head;
		assert_int_equal(mx_post(&p.a, &wr), 0);
		assert_int_equal(mx_wait(&p, &ci), 1);
		assert_int_equal(ci.opcode, QL_MLX5_CQE_REQ_ERR);
		assert_int_equal(ci.syndrome, QL_MLX5_CQE_SYNDROME_WR_FLUSH_ERR);
		pair_close(&p);
	}
}

/* A receive WQE with a bad lkey, then one whose list is garbage: the
 * peer's SEND completes REM_OP_ERR, the receive a RESP_ERR CQE with the
 * local protection syndrome, the QP goes to ERR and the next receive is
 * flushed. */
static void test_bad_recv(void **state)
{
	struct pair p;
	struct ql_mlx5_sge bad = { 0, 64, 0 };
	struct ql_mlx5_cqe_info ci;
	struct ibv_sge sge;
	struct ibv_send_wr wr = { .num_sge = 1,
				  .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED },
			   *wbad;
	struct ibv_wc wc;

	pair_open(&p, *state, &opts_default);
	bad.addr = (uintptr_t)p.a.buf;
	bad.lkey = ql_mr_lkey(p.a.mr) ^ 0x7000;
	assert_int_equal(ql_mlx5_rq_post(&p.a.mq, &bad, 1), 0);
	/* garbage, for the flush: the list is read from the ring once */
	memset((uint8_t *)p.a.mq.rq.buf + p.a.mq.rq.stride, 0xa5, p.a.mq.rq.stride);
	p.a.mq.rq.head++;
	*p.a.mq.rq.dbrec = htobe32(p.a.mq.rq.head);
	sge = (struct ibv_sge){ (uintptr_t)p.b.buf, 32, ql_mr_lkey(p.b.mr) };
	wr.sg_list = &sge;
	assert_int_equal(ql_qp_post_send(p.b.qp, &wr, &wbad), 0);
	assert_int_equal(vb_wait(&p, p.b.scq, &wc), 1);
	assert_int_equal(wc.status, IBV_WC_REM_OP_ERR);
	assert_int_equal(mx_wait(&p, &ci), 1);
	assert_int_equal(ci.opcode, QL_MLX5_CQE_RESP_ERR);
	assert_int_equal(ci.syndrome, QL_MLX5_CQE_SYNDROME_LOCAL_PROT_ERR);
	assert_int_equal(ci.wqe_counter, 0);
	assert_int_equal(ci.qpn, ql_qp_num(p.a.qp));
	assert_int_equal(mx_wait(&p, &ci), 1);
	assert_int_equal(ci.opcode, QL_MLX5_CQE_RESP_ERR);
	assert_int_equal(ci.syndrome, QL_MLX5_CQE_SYNDROME_WR_FLUSH_ERR);
	assert_int_equal(ci.wqe_counter, 1);
	assert_int_equal(ql_qp_state(p.a.qp), IBV_QPS_ERR);
	pair_close(&p);
}

/* Garbage in the ring: random control segments (opcode, ds), random
 * segment words, inline lengths up to 2^31, rung over random spans. The
 * engine must neither crash nor read beyond the ring, and every WQE it
 * takes ends with a CQE or a reset. */
static void test_hostile(void **state)
{
	struct opts o = opts_default;
	struct pair p;
	uint64_t x = 0x9e3779b97f4a7c15ull;
	uint32_t first;

	o.send_wr = 2; /* a small ring: wrap-around in every WQE */
	o.inline_max = 0;
	o.sge = 1;
	pair_open(&p, *state, &o);
	for (int it = 0; it < 300; it++) {
		struct ql_mlx5_qp *q = &p.a.mq;
		uint8_t *ring = q->sq.buf;
		const uint32_t bytes = q->sq.wqe_cnt * 64;
		uint32_t nbb;
		struct ql_mlx5_cqe_info ci;
		const uint64_t end = now_ns() + TIMEOUT_NS;

		for (uint32_t i = 0; i < bytes; i += 8) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			memcpy(ring + i, &x, 8);
		}
		/* now and then, an inline header that claims the world */
		if (it % 3 == 0)
			ql_mlx5_st32(ring + ((x >> 8) % (bytes / 16)) * 16,
				     0x7fffffffu | QL_MLX5_INLINE_SEG);
		/* and keys that are real, so that some WQEs get far */
		if (it % 4 == 0) {
			ql_mlx5_ctrl_seg(ring + (q->sq.head % q->sq.wqe_cnt) * 64, 0,
					 (uint8_t)(x % 0x14), (uint16_t)q->sq.head, q->qpn,
					 (uint8_t)(x >> 20) % 5, CE, 0);
		}
		nbb = 1 + (uint32_t)(x >> 40) % q->sq.wqe_cnt;
		first = q->sq.head;
		q->sq.head += nbb;
		ql_mlx5_sq_doorbell(q, ring);
		/* every other round, the BlueFlame buffer just written turns
		 * to garbage that names the next WQE (any ds), while the
		 * engine may be reading it */
		if (q->bf_size && it % 2) {
			uint8_t *bfl = (uint8_t *)q->bf_reg + (q->bf_offset ^ q->bf_size);

			for (uint32_t i = 0; i < 64; i += 8) {
				x ^= x << 13;
				x ^= x >> 7;
				x ^= x << 17;
				memcpy(bfl + i, &x, 8);
			}
			bfl[1] = (uint8_t)(first >> 8);
			bfl[2] = (uint8_t)first;
		}
		/* drain whatever comes for a moment: the engine takes the
		 * span, errors put the QP in ERR and the rest is flushed (a
		 * WQE that waits, RNR, is left to the reset below) */
		while (now_ns() < end - TIMEOUT_NS + 3000000ull) {
			if (ql_mlx5_cq_poll(&p.a.mcq, &ci) != 1)
				sched_yield();
		}
		/* back to a fresh connected QP: RESET starts the queues at 0 */
		{
			struct ibv_qp_attr a = { .qp_state = IBV_QPS_RESET };

			assert_int_equal(ql_qp_modify(p.a.qp, &a, IBV_QP_STATE), 0);
			assert_int_equal(ql_qp_modify(p.b.qp, &a, IBV_QP_STATE), 0);
			assert_int_equal(end_connect(&p.a, &p.b), 0);
			assert_int_equal(end_connect(&p.b, &p.a), 0);
			assert_int_equal(p.a.mq.sq.head, 0);
			/* the CQ ring carries on; drop what the reset left */
			while (ql_mlx5_cq_poll(&p.a.mcq, &ci) == 1)
				;
		}
	}
	/* and the QP still works */
	{
		uint64_t v = 0xfeedull;
		struct ql_mlx5_wr wr = { .opcode = QL_MLX5_OPCODE_RDMA_WRITE,
					 .fm_ce_se = CE,
					 .inline_data = &v,
					 .inline_len = 8,
					 .raddr = (uintptr_t)p.b.buf + 512,
					 .rkey = ql_mr_rkey(p.b.mr) };

		assert_int_equal(mx_post(&p.a, &wr), 0);
		expect_req(&p, QL_MLX5_OPCODE_RDMA_WRITE, 0, false);
		assert_memory_equal(p.b.buf + 512, &v, 8);
	}
	pair_close(&p);
}

/* ---- across processes ------------------------------------------------- */

/* One side of the two-process test. Exchanges connection parameters over
 * the pipes, then: the mlx5 side WRITEs a pattern and SENDs it; the
 * ordinary side checks both and SENDs an answer into the mlx5 RQ, and the
 * mlx5 side checks that. Returns 0 or a line number. */
static int mp_side(bool mlx5, int rfd, int wfd)
{
	const struct opts o = opts_default;
	struct pair p;
	struct end *me, *peer;
	struct ql_conn_params remote;

	memset(&p, 0, sizeof(p));
	p.uri = "soft+shm://qlmx5mp";
	me = mlx5 ? &p.a : &p.b;
	peer = mlx5 ? &p.b : &p.a;
	if (end_open(me, p.uri, mlx5, &o))
		return __LINE__;
	if (write(wfd, &me->params, sizeof(me->params)) != sizeof(me->params) ||
	    read(rfd, &remote, sizeof(remote)) != sizeof(remote))
		return __LINE__;
	peer->params = remote;
	if (end_connect(me, peer))
		return __LINE__;
	/* both connected before anything is sent */
	{
		char c = 'c';

		if (write(wfd, &c, 1) != 1 || read(rfd, &c, 1) != 1)
			return __LINE__;
	}
	if (mlx5) {
		struct ql_mlx5_sge sge = { (uintptr_t)me->buf, 256, ql_mr_lkey(me->mr) };
		struct ql_mlx5_sge rsge = { (uintptr_t)me->buf + 8192, 256, ql_mr_lkey(me->mr) };
		struct ql_mlx5_cqe_info ci;
		struct ql_mlx5_wr wr = { .opcode = QL_MLX5_OPCODE_RDMA_WRITE,
					 .fm_ce_se = CE,
					 .sge = &sge,
					 .num_sge = 1,
					 .raddr = remote.vaddr + 1000,
					 .rkey = remote.rkey };
		char c;

		for (int i = 0; i < 256; i++)
			me->buf[i] = (uint8_t)(i + 3);
		if (ql_mlx5_rq_post(&me->mq, &rsge, 1))
			return __LINE__;
		if (mx_post(me, &wr) || mx_wait(&p, &ci) != 1 || ci.opcode != QL_MLX5_CQE_REQ)
			return __LINE__;
		ql_mlx5_sq_complete(&me->mq, ci.wqe_counter);
		/* the peer has posted its receive before it says so */
		if (read(rfd, &c, 1) != 1)
			return __LINE__;
		wr.opcode = QL_MLX5_OPCODE_SEND_IMM;
		wr.imm = 0x1234;
		if (mx_post(me, &wr) || mx_wait(&p, &ci) != 1 || ci.opcode != QL_MLX5_CQE_REQ)
			return __LINE__;
		/* the answer lands in the mlx5 receive queue */
		if (mx_wait(&p, &ci) != 1 || ci.opcode != QL_MLX5_CQE_RESP_SEND ||
		    ci.byte_cnt != 128 || ci.wqe_counter != 0)
			return __LINE__;
		for (int i = 0; i < 128; i++)
			if (me->buf[8192 + i] != (uint8_t)(255 - i))
				return __LINE__;
	} else {
		struct ibv_sge rs = { (uintptr_t)me->buf + 4096, 256, ql_mr_lkey(me->mr) };
		struct ibv_recv_wr rwr = { .wr_id = 1, .sg_list = &rs, .num_sge = 1 }, *rbad;
		struct ibv_sge ss = { (uintptr_t)me->buf + 16384, 128, ql_mr_lkey(me->mr) };
		struct ibv_send_wr swr = { .wr_id = 2,
					   .sg_list = &ss,
					   .num_sge = 1,
					   .opcode = IBV_WR_SEND,
					   .send_flags = IBV_SEND_SIGNALED },
				   *sbad;
		struct ibv_wc wc;
		char c = 'r';

		if (ql_qp_post_recv(me->qp, &rwr, &rbad) || write(wfd, &c, 1) != 1)
			return __LINE__;
		if (vb_wait(&p, me->rcq, &wc) != 1 || wc.status != IBV_WC_SUCCESS ||
		    wc.byte_len != 256 || !(wc.wc_flags & IBV_WC_WITH_IMM) ||
		    ntohl(wc.imm_data) != 0x1234)
			return __LINE__;
		for (int i = 0; i < 256; i++)
			if (me->buf[1000 + i] != (uint8_t)(i + 3) ||
			    me->buf[4096 + i] != (uint8_t)(i + 3))
				return __LINE__;
		for (int i = 0; i < 128; i++)
			me->buf[16384 + i] = (uint8_t)(255 - i);
		if (ql_qp_post_send(me->qp, &swr, &sbad) || vb_wait(&p, me->scq, &wc) != 1 ||
		    wc.status != IBV_WC_SUCCESS)
			return __LINE__;
	}
	/* neither side tears down while the other may still use it */
	{
		char c = 'd';

		if (write(wfd, &c, 1) != 1 || read(rfd, &c, 1) != 1)
			return __LINE__;
	}
	end_close(me);
	return 0;
}

static void run_mp(bool mlx5_in_child)
{
	int to_child[2], to_parent[2], st;
	pid_t pid;
	int line;

	assert_int_equal(pipe(to_child), 0);
	assert_int_equal(pipe(to_parent), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(to_child[1]);
		close(to_parent[0]);
		line = mp_side(mlx5_in_child, to_child[0], to_parent[1]);
		if (line)
			fprintf(stderr, "child failed at line %d (%s)\n", line, ql_error_detail());
		_exit(line ? 1 : 0);
	}
	close(to_child[0]);
	close(to_parent[1]);
	line = mp_side(!mlx5_in_child, to_parent[0], to_child[1]);
	if (line)
		kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	close(to_child[1]);
	close(to_parent[0]);
	if (line)
		fail_msg("parent failed at line %d (%s)", line, ql_error_detail());
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

static void test_processes(void **state)
{
	(void)state;
	run_mp(false);
	run_mp(true);
}

/* ---- hot path ------------------------------------------------------------ */

#define HP_OPS 5000

struct hp_arg {
	const char *uri;
	bool manual;
	struct pair p;
};

/* n inline WRITEs through the engine, each signaled and polled, and n
 * SENDs from the peer into the mlx5 RQ. */
static int hp_loop(void *arg)
{
	struct hp_arg *h = arg;
	struct pair *p = &h->p;

	for (long i = 0; i < HP_OPS; i++) {
		uint64_t v = (uint64_t)i;
		struct ql_mlx5_wr wr = { .opcode = QL_MLX5_OPCODE_RDMA_WRITE,
					 .fm_ce_se = CE,
					 .inline_data = &v,
					 .inline_len = 8,
					 .raddr = (uintptr_t)p->b.buf,
					 .rkey = ql_mr_rkey(p->b.mr) };
		struct ql_mlx5_sge sge = { (uintptr_t)p->a.buf, 64, ql_mr_lkey(p->a.mr) };
		struct ibv_sge bs = { (uintptr_t)p->b.buf + 64, 64, ql_mr_lkey(p->b.mr) };
		struct ibv_send_wr swr = { .sg_list = &bs,
					   .num_sge = 1,
					   .opcode = IBV_WR_SEND,
					   .send_flags = IBV_SEND_SIGNALED },
				   *bad;
		struct ql_mlx5_cqe_info ci;
		struct ibv_wc wc;

		if (mx_post(&p->a, &wr) || mx_wait(p, &ci) != 1 || ci.opcode != QL_MLX5_CQE_REQ)
			return -1;
		ql_mlx5_sq_complete(&p->a.mq, ci.wqe_counter);
		if (ql_mlx5_rq_post(&p->a.mq, &sge, 1))
			return -1;
		/* the engine takes the receive before the peer sends */
		while (h->manual && !ql__soft_mlx5_engine_poll(p->a.dev))
			;
		if (ql_qp_post_send(p->b.qp, &swr, &bad) || vb_wait(p, p->b.scq, &wc) != 1 ||
		    wc.status != IBV_WC_SUCCESS)
			return -1;
		if (mx_wait(p, &ci) != 1 || ci.opcode != QL_MLX5_CQE_RESP_SEND)
			return -1;
		ql_mlx5_rq_complete(&p->a.mq);
	}
	return 0;
}

static int hp_setup(void *arg)
{
	struct hp_arg *h = arg;
	struct opts o = opts_default;

	o.manual = h->manual;
	pair_open(&h->p, h->uri, &o);
	return 0;
}

static void test_hotpath(void **state)
{
	struct hp_arg h = { .uri = *state };
	char why[200];

	/* (a) no allocation or lock in any thread, the engine's included */
	if (hp_available()) {
		unsigned long allocs, locks;

		h.manual = false;
		hp_setup(&h);
		hp_begin();
		assert_int_equal(hp_loop(&h), 0);
		hp_end(&allocs, &locks);
		/* the WRITEs went the BlueFlame way */
		assert_true(ql__soft_mlx5_bf_hits(h.p.a.qp) > HP_OPS / 2);
		pair_close(&h.p);
		assert_int_equal(allocs, 0);
		assert_int_equal(locks, 0);
	}
	/* (b) no system call: the engine's loop run by the test thread
	 * under the filter (no engine thread in manual mode) */
	h.manual = true;
	if (hp_run_strict(hp_setup, hp_loop, &h, why, sizeof(why)))
		fail_msg("%s", why);
}

/* ---- progress modes ------------------------------------------------------ */

/* A URI with ?progress=MODE (uri has no query of its own). */
static const char *with_progress(char *buf, size_t len, const char *uri, const char *mode)
{
	snprintf(buf, len, "%s?progress=%s", uri, mode);
	return buf;
}

static void test_progress_modes(void **state)
{
	const char *uri = *state;
	struct ql_mlx5_cqe_info ci;
	struct ql_device *dev;
	char u[128];
	struct pair p;
	uint64_t v = 0x1122334455667788ull;
	struct ql_mlx5_wr wr = { .opcode = QL_MLX5_OPCODE_RDMA_WRITE,
				 .fm_ce_se = CE,
				 .inline_data = &v,
				 .inline_len = 8 };

	/* thread: the engine thread runs, the views carry no progress */
	pair_open(&p, with_progress(u, sizeof(u), uri, "thread"), &opts_default);
	assert_true(ql__soft_mlx5_engine_running(p.a.dev));
	assert_null(p.a.mq.progress);
	assert_null(p.a.mcq.progress);
	assert_int_equal(ql_device_progress(p.a.dev), 0); /* its thread's work */
	pair_close(&p);

	/* caller: no thread; the doorbell itself takes the WQE to the peer,
	 * so the bytes are there when it returns, before any poll */
	pair_open(&p, with_progress(u, sizeof(u), uri, "caller"), &opts_default);
	assert_false(ql__soft_mlx5_engine_running(p.a.dev));
	assert_non_null(p.a.mq.progress);
	assert_non_null(p.a.mcq.progress);
	wr.raddr = (uintptr_t)p.b.buf + 512;
	wr.rkey = ql_mr_rkey(p.b.mr);
	memset(p.b.buf + 512, 0, 8);
	assert_int_equal(mx_post(&p.a, &wr), 0);
	assert_memory_equal(p.b.buf + 512, &v, 8);
	/* and its CQE is there at the first poll */
	assert_int_equal(ql_mlx5_cq_poll(&p.a.mcq, &ci), 1);
	assert_int_equal(ci.opcode, QL_MLX5_CQE_REQ);
	ql_mlx5_sq_complete(&p.a.mq, ci.wqe_counter);
	/* nothing pending: ql_device_progress has nothing to do (once the
	 * engine has seen the last doorbell register write: a hint of
	 * activity it takes as work once) */
	assert_true(ql_device_progress(p.a.dev) >= 0);
	assert_int_equal(ql_device_progress(p.a.dev), 0);
	pair_close(&p);

	/* refused: an unknown mode, an empty one */
	assert_int_equal(ql_device_open(with_progress(u, sizeof(u), uri, "bogus"), &dev), -EINVAL);
	assert_non_null(strstr(ql_error_detail(), "progress=thread|caller|auto"));
	assert_int_equal(ql_device_open(with_progress(u, sizeof(u), uri, ""), &dev), -EINVAL);
}

/* Two threads pinned to one CPU, the mlx5 side and the verbs side, in
 * caller progress mode: SEND, answer, SEND, ... ONE_CORE_ROUNDS times.
 * Nothing spins beside them, so each round trip is two context switches
 * at most; it must finish well inside the bound (a progress thread of its
 * own on that CPU would compete with both). */
#define ONE_CORE_ROUNDS 2000
#define ONE_CORE_BOUND_NS 20000000000ull

struct one_core {
	struct pair *p;
	int cpu;
	int err;
};

static bool pin_to(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return !pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

/* Wait without spinning past our turn: on one CPU the peer runs only when
 * we give it the CPU. */
static int mx_wait_yield(struct pair *p, struct ql_mlx5_cqe_info *ci, uint64_t end)
{
	for (;;) {
		int r = ql_mlx5_cq_poll(&p->a.mcq, ci);

		if (r)
			return r;
		if (now_ns() > end)
			return 0;
		sched_yield();
	}
}

static void *one_core_mlx5(void *arg)
{
	struct one_core *o = arg;
	struct pair *p = o->p;
	const uint64_t end = now_ns() + ONE_CORE_BOUND_NS;
	struct ql_mlx5_sge sge = { (uintptr_t)p->a.buf, 8, ql_mr_lkey(p->a.mr) };
	struct ql_mlx5_sge rsge = { (uintptr_t)p->a.buf + 4096, 64, ql_mr_lkey(p->a.mr) };
	struct ql_mlx5_cqe_info ci;

	if (!pin_to(o->cpu)) {
		o->err = __LINE__;
		return NULL;
	}
	for (int i = 0; i < ONE_CORE_ROUNDS; i++) {
		struct ql_mlx5_wr wr = {
			.opcode = QL_MLX5_OPCODE_SEND, .fm_ce_se = CE, .sge = &sge, .num_sge = 1
		};
		bool sent = false, answered = false;

		memcpy(p->a.buf, &i, sizeof(i));
		if (ql_mlx5_rq_post(&p->a.mq, &rsge, 1) || mx_post(&p->a, &wr)) {
			o->err = __LINE__;
			return NULL;
		}
		while (!sent || !answered) {
			if (mx_wait_yield(p, &ci, end) != 1) {
				o->err = __LINE__;
				return NULL;
			}
			if (ci.opcode == QL_MLX5_CQE_REQ) {
				ql_mlx5_sq_complete(&p->a.mq, ci.wqe_counter);
				sent = true;
			} else if (ci.opcode == QL_MLX5_CQE_RESP_SEND) {
				int got;

				memcpy(&got, p->a.buf + 4096, sizeof(got));
				ql_mlx5_rq_complete(&p->a.mq);
				if (got != i + 1) {
					o->err = __LINE__;
					return NULL;
				}
				answered = true;
			} else {
				o->err = __LINE__;
				return NULL;
			}
		}
	}
	return NULL;
}

static void *one_core_verbs(void *arg)
{
	struct one_core *o = arg;
	struct pair *p = o->p;
	const uint64_t end = now_ns() + ONE_CORE_BOUND_NS;

	if (!pin_to(o->cpu)) {
		o->err = __LINE__;
		return NULL;
	}
	for (int i = 0; i < ONE_CORE_ROUNDS; i++) {
		struct ibv_sge rs = { (uintptr_t)p->b.buf, 64, ql_mr_lkey(p->b.mr) };
		struct ibv_recv_wr rwr = { .wr_id = 1, .sg_list = &rs, .num_sge = 1 }, *rbad;
		struct ibv_sge ss = { (uintptr_t)p->b.buf + 1024, 8, ql_mr_lkey(p->b.mr) };
		struct ibv_send_wr swr = { .wr_id = 2,
					   .sg_list = &ss,
					   .num_sge = 1,
					   .opcode = IBV_WR_SEND,
					   .send_flags = IBV_SEND_SIGNALED },
				   *sbad;
		struct ibv_wc wc;
		int got, r;

		/* (the first receive was posted before the threads started: the
		 * next is always there before the answer goes out) */
		while ((r = ql_cq_poll(p->b.rcq, 1, &wc)) == 0 && now_ns() < end)
			sched_yield();
		if (r != 1 || wc.status != IBV_WC_SUCCESS) {
			o->err = __LINE__;
			return NULL;
		}
		memcpy(&got, p->b.buf, sizeof(got));
		if (i + 1 < ONE_CORE_ROUNDS && ql_qp_post_recv(p->b.qp, &rwr, &rbad)) {
			o->err = __LINE__;
			return NULL;
		}
		got++;
		memcpy(p->b.buf + 1024, &got, sizeof(got));
		if (ql_qp_post_send(p->b.qp, &swr, &sbad)) {
			o->err = __LINE__;
			return NULL;
		}
		while ((r = ql_cq_poll(p->b.scq, 1, &wc)) == 0 && now_ns() < end)
			sched_yield();
		if (r != 1 || wc.status != IBV_WC_SUCCESS) {
			o->err = __LINE__;
			return NULL;
		}
	}
	return NULL;
}

static void test_one_core(void **state)
{
	struct one_core m = { 0 }, v = { 0 };
	pthread_t tm, tv;
	cpu_set_t set;
	uint64_t t0, dt;
	char u[128];
	struct pair p;

	assert_int_equal(sched_getaffinity(0, sizeof(set), &set), 0);
	for (m.cpu = 0; !CPU_ISSET(m.cpu, &set); m.cpu++)
		;
	v.cpu = m.cpu;
	pair_open(&p, with_progress(u, sizeof(u), *state, "caller"), &opts_default);
	m.p = v.p = &p;
	{
		struct ibv_sge rs = { (uintptr_t)p.b.buf, 64, ql_mr_lkey(p.b.mr) };
		struct ibv_recv_wr rwr = { .wr_id = 1, .sg_list = &rs, .num_sge = 1 }, *rbad;

		assert_int_equal(ql_qp_post_recv(p.b.qp, &rwr, &rbad), 0);
	}
	t0 = now_ns();
	assert_int_equal(pthread_create(&tv, NULL, one_core_verbs, &v), 0);
	assert_int_equal(pthread_create(&tm, NULL, one_core_mlx5, &m), 0);
	pthread_join(tm, NULL);
	pthread_join(tv, NULL);
	dt = now_ns() - t0;
	print_message("%d round trips, two threads on cpu %d: %.1f us each\n", ONE_CORE_ROUNDS,
		      m.cpu, (double)dt / ONE_CORE_ROUNDS / 1e3);
	if (m.err || v.err)
		fail_msg("mlx5 side line %d, verbs side line %d", m.err, v.err);
	assert_true(dt < ONE_CORE_BOUND_NS);
	pair_close(&p);
}

/* ---- main ------------------------------------------------------------------ */

int main(void)
{
	int fails = 0;

	for (size_t u = 0; u < sizeof(uris) / sizeof(uris[0]); u++) {
		const struct CMUnitTest tests[] = {
			cmocka_unit_test_prestate(test_lifecycle, (void *)uris[u]),
			cmocka_unit_test_prestate(test_opcodes, (void *)uris[u]),
			cmocka_unit_test_prestate(test_receive, (void *)uris[u]),
			cmocka_unit_test_prestate(test_lying_doorbell, (void *)uris[u]),
			cmocka_unit_test_prestate(test_rnr, (void *)uris[u]),
			cmocka_unit_test_prestate(test_wrap, (void *)uris[u]),
			cmocka_unit_test_prestate(test_blueflame, (void *)uris[u]),
			cmocka_unit_test_prestate(test_no_blueflame, (void *)uris[u]),
			cmocka_unit_test_prestate(test_bad_wqes, (void *)uris[u]),
			cmocka_unit_test_prestate(test_bad_recv, (void *)uris[u]),
			cmocka_unit_test_prestate(test_hostile, (void *)uris[u]),
			cmocka_unit_test_prestate(test_hotpath, (void *)uris[u]),
			cmocka_unit_test_prestate(test_progress_modes, (void *)uris[u]),
			cmocka_unit_test_prestate(test_one_core, (void *)uris[u]),
		};
		char name[64];

		snprintf(name, sizeof(name), "soft_mlx5 %s", uris[u]);
		fails += _cmocka_run_group_tests(name, tests, sizeof(tests) / sizeof(tests[0]),
						 NULL, NULL);
	}
	{
		const struct CMUnitTest mp[] = { cmocka_unit_test(test_processes) };

		fails += cmocka_run_group_tests_name("soft_mlx5 processes", mp, NULL, NULL);
	}
	return fails ? 1 : 0;
}
