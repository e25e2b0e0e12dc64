/* SPDX-License-Identifier: MIT */
/*
 * The ibv provider's mlx5 glue (src/providers/ibv/ibv_mlx5.c) against a stand-in
 * libibverbs and libmlx5, on a machine with no RDMA device: as in
 * test_ibv_fake.c, this program defines the entry points the provider calls
 * (the linker binds the provider to them), here with mlx5dv_is_supported,
 * mlx5dv_create_qp and mlx5dv_init_obj too, whose answers each test sets.
 * What it proves: the mapping of every mlx5dv_qp / mlx5dv_cq field into the
 * qlink/mlx5.h views (send and receive doorbell records not swapped: WQEs
 * posted through the view move the right record and ring the device's
 * register, a CQE the "device" writes is polled through the view),
 * scatter-to-CQE disabled at creation, mlx5 objects refused on a device
 * whose provider is not mlx5, the verbs hot path refused on mlx5 objects
 * (-EINVAL, nothing reaches libibverbs), CQ/QP flag mismatches refused, and
 * mlx5dv_init_obj failures and foreign geometries reported, not used.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <endian.h>
#include <infiniband/mlx5dv.h>

#include "expect_detail.h"

#include "qlink/error.h"
#include "qlink/mlx5.h"
#include "qlink/verbs.h"

/* ---- the fake device ------------------------------------------------------ */

static struct {
	bool mlx5[2];	    /* mlx5dv_is_supported per device */
	int init_obj_fails; /* errno mlx5dv_init_obj returns */
	uint32_t sq_stride; /* what mlx5dv_init_obj reports */
	uint32_t cqe_size;
	uint32_t dv_create_flags; /* what mlx5dv_create_qp was asked */
	uint64_t dv_comp_mask;
	int dv_creates, plain_creates;
	int post_send_calls, post_recv_calls, poll_calls;
	int live_pd, live_cq, live_qp, open_ctx;
} fk;

static struct ibv_device devs[2];
/* the "device memory" mlx5dv_init_obj hands out */
static _Alignas(4096) uint8_t sq_ring[8 * 64];
static _Alignas(4096) uint8_t rq_ring[4 * 32];
static _Alignas(4096) uint8_t cq_ring[8 * 64];
static _Alignas(64) __be32 qp_dbrec[2];
static _Alignas(64) __be32 cq_dbrec[2];
static _Alignas(4096) uint8_t uar[4096];

static int fake_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	(void)qp, (void)wr, (void)bad;
	fk.post_send_calls++;
	return 0;
}

static int fake_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	(void)qp, (void)wr, (void)bad;
	fk.post_recv_calls++;
	return 0;
}

static int fake_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	(void)cq, (void)n, (void)wc;
	fk.poll_calls++;
	return 0;
}

#undef ibv_get_device_list
#undef ibv_query_port

struct ibv_device **ibv_get_device_list(int *num);
struct ibv_device **ibv_get_device_list(int *num)
{
	struct ibv_device **l = calloc(3, sizeof(*l));

	l[0] = &devs[0];
	l[1] = &devs[1];
	*num = 2;
	return l;
}

void ibv_free_device_list(struct ibv_device **list)
{
	free(list);
}

const char *ibv_get_device_name(struct ibv_device *d)
{
	return d->name;
}

struct ibv_context *ibv_open_device(struct ibv_device *d)
{
	struct ibv_context *c = calloc(1, sizeof(*c));

	c->device = d;
	c->ops.post_send = fake_post_send;
	c->ops.post_recv = fake_post_recv;
	c->ops.poll_cq = fake_poll_cq;
	fk.open_ctx++;
	return c;
}

int ibv_close_device(struct ibv_context *c)
{
	free(c);
	fk.open_ctx--;
	return 0;
}

int ibv_query_port(struct ibv_context *c, uint8_t port, struct _compat_ibv_port_attr *pa);
int ibv_query_port(struct ibv_context *c, uint8_t port, struct _compat_ibv_port_attr *pa)
{
	struct ibv_port_attr *a = (struct ibv_port_attr *)(void *)pa;

	(void)c;
	if (port != 1)
		return EINVAL;
	a->state = IBV_PORT_ACTIVE;
	a->active_mtu = IBV_MTU_1024;
	a->gid_tbl_len = 1;
	a->link_layer = IBV_LINK_LAYER_ETHERNET;
	return 0;
}

int ibv_query_gid(struct ibv_context *c, uint8_t port, int index, union ibv_gid *gid)
{
	(void)c, (void)port, (void)index;
	memset(gid, 0, sizeof(*gid));
	return 0;
}

int _ibv_query_gid_ex(struct ibv_context *c, uint32_t port, uint32_t index, struct ibv_gid_entry *e,
		      uint32_t flags, size_t size)
{
	(void)c, (void)flags, (void)size;
	memset(e, 0, sizeof(*e));
	e->gid_index = index;
	e->port_num = port;
	e->gid_type = IBV_GID_TYPE_ROCE_V2;
	return index ? EINVAL : 0;
}

struct ibv_pd *ibv_alloc_pd(struct ibv_context *c)
{
	struct ibv_pd *pd = calloc(1, sizeof(*pd));

	pd->context = c;
	fk.live_pd++;
	return pd;
}

int ibv_dealloc_pd(struct ibv_pd *pd)
{
	free(pd);
	fk.live_pd--;
	return 0;
}

struct ibv_cq *ibv_create_cq(struct ibv_context *c, int cqe, void *ctx, struct ibv_comp_channel *ch,
			     int vec)
{
	struct ibv_cq *cq = calloc(1, sizeof(*cq));

	(void)ctx, (void)ch, (void)vec;
	cq->context = c;
	cq->cqe = cqe;
	fk.live_cq++;
	return cq;
}

int ibv_destroy_cq(struct ibv_cq *cq)
{
	free(cq);
	fk.live_cq--;
	return 0;
}

static struct ibv_qp *new_qp(struct ibv_pd *pd, enum ibv_qp_type type)
{
	static uint32_t next_qpn = 0x5100;
	struct ibv_qp *qp = calloc(1, sizeof(*qp));

	qp->context = pd->context;
	qp->pd = pd;
	qp->qp_num = next_qpn++;
	qp->qp_type = type;
	qp->state = IBV_QPS_RESET;
	fk.live_qp++;
	return qp;
}

struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *ia)
{
	fk.plain_creates++;
	return new_qp(pd, ia->qp_type);
}

int ibv_destroy_qp(struct ibv_qp *qp)
{
	free(qp);
	fk.live_qp--;
	return 0;
}

int ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask,
		 struct ibv_qp_init_attr *init)
{
	(void)mask;
	memset(attr, 0, sizeof(*attr));
	memset(init, 0, sizeof(*init));
	attr->qp_state = qp->state;
	init->qp_type = qp->qp_type;
	return 0;
}

bool mlx5dv_is_supported(struct ibv_device *device)
{
	return device == &devs[0] ? fk.mlx5[0] : fk.mlx5[1];
}

struct ibv_qp *mlx5dv_create_qp(struct ibv_context *context, struct ibv_qp_init_attr_ex *qp_attr,
				struct mlx5dv_qp_init_attr *mlx5_qp_attr)
{
	(void)context;
	fk.dv_creates++;
	fk.dv_comp_mask = mlx5_qp_attr->comp_mask;
	fk.dv_create_flags = mlx5_qp_attr->create_flags;
	if (!(qp_attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !qp_attr->pd) {
		errno = EINVAL;
		return NULL;
	}
	return new_qp(qp_attr->pd, qp_attr->qp_type);
}

int mlx5dv_init_obj(struct mlx5dv_obj *obj, uint64_t obj_type)
{
	if (fk.init_obj_fails)
		return fk.init_obj_fails;
	if (obj_type & MLX5DV_OBJ_QP) {
		struct mlx5dv_qp *q = obj->qp.out;

		q->dbrec = qp_dbrec;
		q->sq.buf = sq_ring;
		q->sq.wqe_cnt = 8;
		q->sq.stride = fk.sq_stride;
		q->rq.buf = rq_ring;
		q->rq.wqe_cnt = 4;
		q->rq.stride = 32;
		q->bf.reg = uar + 0x800;
		q->bf.size = 256;
	}
	if (obj_type & MLX5DV_OBJ_CQ) {
		struct mlx5dv_cq *c = obj->cq.out;

		c->buf = cq_ring;
		c->dbrec = cq_dbrec;
		c->cqe_cnt = 8;
		c->cqe_size = fk.cqe_size;
		c->cqn = 0x33;
	}
	return 0;
}

/* ---- helpers ------------------------------------------------------------------ */

static int setup(void **state)
{
	(void)state;
	memset(&fk, 0, sizeof(fk));
	fk.mlx5[0] = true; /* fake0: mlx5; fake1: another provider */
	fk.sq_stride = 64;
	fk.cqe_size = 64;
	for (int i = 0; i < 2; i++) {
		memset(&devs[i], 0, sizeof(devs[i]));
		snprintf(devs[i].name, sizeof(devs[i].name), "fake%d", i);
	}
	memset(sq_ring, 0, sizeof(sq_ring));
	memset(rq_ring, 0, sizeof(rq_ring));
	memset(cq_ring, 0, sizeof(cq_ring));
	for (int i = 0; i < 8; i++)
		cq_ring[i * 64 + 63] = 0xf0; /* INVALID, owner 0 */
	memset(qp_dbrec, 0, sizeof(qp_dbrec));
	memset(cq_dbrec, 0, sizeof(cq_dbrec));
	memset(uar, 0, sizeof(uar));
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	assert_int_equal(fk.live_pd, 0);
	assert_int_equal(fk.live_cq, 0);
	assert_int_equal(fk.live_qp, 0);
	assert_int_equal(fk.open_ctx, 0);
	return 0;
}

struct objs {
	struct ql_device *dev;
	struct ql_pd *pd;
	struct ql_cq *cq;
	struct ql_qp *qp;
};

static struct ql_qp_init_attr qp_attr(struct ql_cq *cq, unsigned int flags)
{
	struct ql_qp_init_attr ia;

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = cq;
	ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 8;
	ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 2;
	ia.flags = flags;
	return ia;
}

static void mlx5_objs(struct objs *o)
{
	struct ql_qp_init_attr ia;

	assert_int_equal(ql_device_open("ibv://fake0", &o->dev), 0);
	assert_int_equal(ql_pd_alloc(o->dev, &o->pd), 0);
	assert_int_equal(ql_cq_create_flags(o->dev, 8, QL_CQ_INIT_MLX5, &o->cq), 0);
	ia = qp_attr(o->cq, QL_QP_INIT_MLX5);
	assert_int_equal(ql_qp_create(o->pd, &ia, &o->qp), 0);
}

static void objs_destroy(struct objs *o)
{
	if (o->qp)
		assert_int_equal(ql_qp_destroy(o->qp), 0);
	if (o->cq)
		assert_int_equal(ql_cq_destroy(o->cq), 0);
	assert_int_equal(ql_pd_free(o->pd), 0);
	assert_int_equal(ql_device_close(o->dev), 0);
}

/* ---- tests -------------------------------------------------------------------- */

static void test_views_map_mlx5dv(void **state)
{
	struct objs o = { 0 };
	struct ql_mlx5_qp q;
	struct ql_mlx5_cq c;

	(void)state;
	mlx5_objs(&o);
	/* created through mlx5dv_create_qp, scatter-to-CQE off */
	assert_int_equal(fk.dv_creates, 1);
	assert_true(fk.dv_comp_mask & MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS);
	assert_true(fk.dv_create_flags & MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE);

	memset(&q, 0xab, sizeof(q));
	assert_int_equal(ql_qp_mlx5(o.qp, &q), 0);
	assert_int_equal(q.qpn, ql_qp_num(o.qp));
	assert_ptr_equal(q.sq.buf, sq_ring);
	assert_int_equal(q.sq.wqe_cnt, 8);
	assert_int_equal(q.sq.stride, 64);
	assert_ptr_equal(q.sq.dbrec, &qp_dbrec[MLX5_SND_DBR]);
	assert_int_equal(q.sq.head, 0);
	assert_int_equal(q.sq.tail, 0);
	assert_ptr_equal(q.rq.buf, rq_ring);
	assert_int_equal(q.rq.wqe_cnt, 4);
	assert_int_equal(q.rq.stride, 32);
	assert_ptr_equal(q.rq.dbrec, &qp_dbrec[MLX5_RCV_DBR]);
	assert_int_equal(q.rq.head, 0);
	assert_int_equal(q.rq.tail, 0);
	assert_ptr_equal(q.bf_reg, uar + 0x800);
	assert_int_equal(q.bf_size, 0); /* 8-byte doorbell: ibv_mlx5.c says why */
	assert_int_equal(q.bf_offset, 0);

	memset(&c, 0xab, sizeof(c));
	assert_int_equal(ql_cq_mlx5(o.cq, &c), 0);
	assert_int_equal(c.cqn, 0x33);
	assert_ptr_equal(c.buf, cq_ring);
	assert_int_equal(c.cqe_cnt, 8);
	assert_int_equal(c.cqe_size, 64);
	assert_ptr_equal(c.dbrec, cq_dbrec);
	assert_int_equal(c.cons_index, 0);
	objs_destroy(&o);
}

/* Work posted through the views reaches the places the device reads. */
static void test_views_drive_the_rings(void **state)
{
	struct objs o = { 0 };
	struct ql_mlx5_qp q;
	struct ql_mlx5_cq c;
	struct ql_mlx5_cqe_info ci = { 0 };
	struct ql_mlx5_sge sge = { 0x1000, 64, 7 };
	void *ctrl = NULL;

	(void)state;
	mlx5_objs(&o);
	assert_int_equal(ql_qp_mlx5(o.qp, &q), 0);
	assert_int_equal(ql_cq_mlx5(o.cq, &c), 0);
	assert_int_equal(ql_mlx5_sq_post_write(&q, 0x1000, 64, 7, 0x2000, 9,
					       QL_MLX5_WQE_CTRL_CQ_UPDATE, &ctrl),
			 0);
	assert_ptr_equal(ctrl, sq_ring);
	ql_mlx5_sq_doorbell(&q, ctrl);
	assert_int_equal(be32toh(qp_dbrec[MLX5_SND_DBR]), 1);
	assert_int_equal(qp_dbrec[MLX5_RCV_DBR], 0);
	assert_memory_equal(uar + 0x800, sq_ring, 8);
	assert_int_equal(be32toh(*(uint32_t *)(sq_ring + 4)), ql_qp_num(o.qp) << 8 | 3);

	assert_int_equal(ql_mlx5_rq_post(&q, &sge, 1), 0);
	assert_int_equal(be32toh(qp_dbrec[MLX5_RCV_DBR]), 1);
	assert_int_equal(be32toh(qp_dbrec[MLX5_SND_DBR]), 1);

	/* the device completes the WRITE */
	cq_ring[56] = QL_MLX5_OPCODE_RDMA_WRITE;
	cq_ring[57] = (uint8_t)(ql_qp_num(o.qp) >> 16);
	cq_ring[58] = (uint8_t)(ql_qp_num(o.qp) >> 8);
	cq_ring[59] = (uint8_t)ql_qp_num(o.qp);
	cq_ring[63] = QL_MLX5_CQE_REQ << 4;
	assert_int_equal(ql_mlx5_cq_poll(&c, &ci), 1);
	assert_int_equal(ci.qpn, ql_qp_num(o.qp));
	assert_int_equal(ci.send_opcode, QL_MLX5_OPCODE_RDMA_WRITE);
	assert_int_equal(be32toh(cq_dbrec[0]), 1);
	ql_mlx5_sq_complete(&q, ci.wqe_counter);
	assert_int_equal(q.sq.tail, 1);
	objs_destroy(&o);
}

static void test_verbs_path_refused(void **state)
{
	struct objs o = { 0 };
	struct ibv_send_wr swr, *sbad = NULL;
	struct ibv_recv_wr rwr, *rbad = NULL;
	struct ibv_wc wc;
	struct ibv_qp_attr attr;
	struct ql_qp_init_attr got;

	(void)state;
	mlx5_objs(&o);
	memset(&swr, 0, sizeof(swr));
	memset(&rwr, 0, sizeof(rwr));
	swr.opcode = IBV_WR_SEND;
	assert_int_equal(ql_qp_post_send(o.qp, &swr, &sbad), -EINVAL);
	assert_ptr_equal(sbad, &swr);
	assert_int_equal(ql_qp_post_recv(o.qp, &rwr, &rbad), -EINVAL);
	assert_ptr_equal(rbad, &rwr);
	assert_int_equal(ql_cq_poll(o.cq, 1, &wc), -EINVAL);
	assert_int_equal(fk.post_send_calls + fk.post_recv_calls + fk.poll_calls, 0);
	/* the flags are reported back */
	memset(&got, 0, sizeof(got));
	assert_int_equal(ql_qp_query(o.qp, &attr, IBV_QP_STATE, &got), 0);
	assert_int_equal(got.flags, QL_QP_INIT_MLX5);
	objs_destroy(&o);
}

static void test_mismatch_refused(void **state)
{
	struct ql_device *dev;
	struct ql_pd *pd;
	struct ql_cq *mcq, *cq;
	struct ql_qp *qp = NULL;
	struct ql_qp_init_attr ia;
	struct ql_mlx5_qp q;
	struct ql_mlx5_cq c;
	int plain;

	(void)state;
	assert_int_equal(ql_device_open("ibv://fake0", &dev), 0);
	assert_int_equal(ql_pd_alloc(dev, &pd), 0);
	assert_int_equal(ql_cq_create_flags(dev, 8, QL_CQ_INIT_MLX5, &mcq), 0);
	assert_int_equal(ql_cq_create(dev, 8, &cq), 0);
	assert_int_equal(ql_cq_create_flags(dev, 8, 0x2, &cq), -EINVAL);
	expect_detail("unknown flags");
	/* mlx5 QP, ordinary CQs (either one) */
	ia = qp_attr(cq, QL_QP_INIT_MLX5);
	assert_int_equal(ql_qp_create(pd, &ia, &qp), -EINVAL);
	expect_detail("QL_CQ_INIT_MLX5");
	ia.send_cq = mcq;
	assert_int_equal(ql_qp_create(pd, &ia, &qp), -EINVAL);
	/* ordinary QP on an mlx5 CQ */
	ia = qp_attr(mcq, 0);
	assert_int_equal(ql_qp_create(pd, &ia, &qp), -EINVAL);
	ia = qp_attr(cq, 0x4);
	assert_int_equal(ql_qp_create(pd, &ia, &qp), -EINVAL);
	expect_detail("unknown flags");
	assert_int_equal(fk.live_qp, 0);
	/* an ordinary QP and CQ have no views */
	ia = qp_attr(cq, 0);
	plain = fk.plain_creates; /* the device's inline probe made some */
	assert_int_equal(ql_qp_create(pd, &ia, &qp), 0);
	assert_int_equal(fk.plain_creates, plain + 1);
	assert_int_equal(fk.dv_creates, 0);
	assert_int_equal(ql_qp_mlx5(qp, &q), -EOPNOTSUPP);
	assert_int_equal(ql_cq_mlx5(cq, &c), -EOPNOTSUPP);
	expect_detail("QL_CQ_INIT_MLX5");
	assert_int_equal(ql_qp_destroy(qp), 0);
	assert_int_equal(ql_cq_destroy(cq), 0);
	assert_int_equal(ql_cq_destroy(mcq), 0);
	assert_int_equal(ql_pd_free(pd), 0);
	assert_int_equal(ql_device_close(dev), 0);
}

static void test_not_mlx5_device(void **state)
{
	struct ql_device *dev;
	struct ql_cq *cq = NULL;

	(void)state;
	assert_int_equal(ql_device_open("ibv://fake1", &dev), 0);
	assert_int_equal(ql_cq_create_flags(dev, 8, QL_CQ_INIT_MLX5, &cq), -EOPNOTSUPP);
	expect_detail("not an mlx5 device");
	assert_null(cq);
	assert_int_equal(fk.live_cq, 0);
	assert_int_equal(ql_device_close(dev), 0);
}

static void test_init_obj_failures(void **state)
{
	struct objs o = { 0 };
	struct ql_mlx5_qp q;
	struct ql_mlx5_cq c;

	(void)state;
	mlx5_objs(&o);
	fk.init_obj_fails = EOPNOTSUPP;
	assert_int_equal(ql_qp_mlx5(o.qp, &q), -EOPNOTSUPP);
	expect_detail("mlx5dv_init_obj");
	assert_int_equal(ql_cq_mlx5(o.cq, &c), -EOPNOTSUPP);
	fk.init_obj_fails = 0;
	/* a geometry the header does not speak is reported, not handed out */
	fk.sq_stride = 128;
	assert_int_equal(ql_qp_mlx5(o.qp, &q), -EPROTO);
	expect_detail("geometry");
	fk.cqe_size = 32;
	assert_int_equal(ql_cq_mlx5(o.cq, &c), -EPROTO);
	/* 128-byte CQEs are spoken */
	fk.cqe_size = 128;
	assert_int_equal(ql_cq_mlx5(o.cq, &c), 0);
	assert_int_equal(c.cqe_size, 128);
	objs_destroy(&o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_views_map_mlx5dv, setup, teardown),
		cmocka_unit_test_setup_teardown(test_views_drive_the_rings, setup, teardown),
		cmocka_unit_test_setup_teardown(test_verbs_path_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mismatch_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_not_mlx5_device, setup, teardown),
		cmocka_unit_test_setup_teardown(test_init_obj_failures, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
