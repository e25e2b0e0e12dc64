/* SPDX-License-Identifier: MIT */
/*
 * mlx5_side: what the tests that drive a QP through qlink/mlx5.h against an
 * ordinary verbs QP on one device share (test_mlx5_wire, test_rdmaxcel): a
 * "side" (CQ, RC QP, a registered buffer of BUF bytes), made in mlx5 mode
 * or not, and a monotonic clock for their time limits. Include after
 * <cmocka.h>.
 */
#ifndef QL_TEST_MLX5_SIDE_H
#define QL_TEST_MLX5_SIDE_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "qlink/verbs.h"

#define BUF 4096
#define ACCESS                                                                       \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | \
	 IBV_ACCESS_REMOTE_ATOMIC)

struct side {
	struct ql_cq *cq;
	struct ql_qp *qp;
	struct ql_mr *mr;
	uint8_t *buf;
};

static inline double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline void side_create(struct ql_device *dev, struct ql_pd *pd, struct side *s, bool mlx5)
{
	struct ql_qp_init_attr ia;
	void *mem;

	assert_int_equal(ql_cq_create_flags(dev, 64, mlx5 ? QL_CQ_INIT_MLX5 : 0, &s->cq), 0);
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = s->cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 32;
	ia.cap.max_recv_wr = 32;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	ia.cap.max_inline_data = 64;
	ia.flags = mlx5 ? QL_QP_INIT_MLX5 : 0;
	assert_int_equal(ql_qp_create(pd, &ia, &s->qp), 0);
	assert_int_equal(ql_pd_mem_alloc(pd, BUF, &mem), 0);
	s->buf = mem;
	memset(s->buf, 0, BUF);
	assert_int_equal(ql_mr_reg(pd, s->buf, BUF, ACCESS, &s->mr), 0);
}

static inline void side_destroy(struct ql_pd *pd, struct side *s)
{
	assert_int_equal(ql_qp_destroy(s->qp), 0);
	assert_int_equal(ql_cq_destroy(s->cq), 0);
	assert_int_equal(ql_mr_dereg(s->mr), 0);
	assert_int_equal(ql_pd_mem_free(pd, s->buf), 0);
}

#endif
