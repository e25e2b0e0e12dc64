/* SPDX-License-Identifier: MIT */
/*
 * The verbs layer's rules for mlx5-driven QPs and CQs (docs/mlx5.md,
 * "Using it"), on the soft providers: unknown flags refused, QP and CQ
 * flags must match, ql_qp_mlx5/ql_cq_mlx5 refused on ordinary objects and
 * on soft+udp (no mlx5 queues), flags 0 the same as ql_cq_create. Where the
 * soft NIC has its mlx5 mode (soft://loop, soft+shm), the contract of the
 * views it hands out: page-aligned rings, power-of-two counts, 64-byte send
 * stride and CQEs, a 64-byte-aligned doorbell word with no BlueFlame,
 * counts at 0, every CQE not yet valid, the QP number, and the verbs hot
 * path refused; where it has not, those cases are skipped with the reason.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "expect_detail.h"

#include "qlink/error.h"
#include "qlink/mlx5.h"
#include "qlink/verbs.h"

static struct ql_qp_init_attr qp_attr(struct ql_cq *scq, struct ql_cq *rcq, unsigned int flags)
{
	struct ql_qp_init_attr ia;

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = scq;
	ia.recv_cq = rcq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 16;
	ia.cap.max_recv_wr = 16;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	ia.flags = flags;
	return ia;
}

/* The rules every provider gets from the verbs layer. */
static void rules_on(const char *uri)
{
	struct ql_device *dev;
	struct ql_pd *pd;
	struct ql_cq *cq, *cq0;
	struct ql_qp *qp = NULL;
	struct ql_qp_init_attr ia;
	struct ql_mlx5_qp q;
	struct ql_mlx5_cq c;

	if (ql_device_open(uri, &dev))
		fail_msg("ql_device_open(%s): %s", uri, ql_error_detail());
	assert_int_equal(ql_pd_alloc(dev, &pd), 0);
	assert_int_equal(ql_cq_create_flags(dev, 8, 0x80, &cq), -EINVAL);
	expect_detail("unknown flags");
	assert_int_equal(ql_cq_create_flags(dev, 0, QL_CQ_INIT_MLX5, &cq), -EINVAL);
	assert_int_equal(ql_cq_create_flags(NULL, 8, 0, &cq), -EINVAL);
	/* flags 0: an ordinary CQ */
	assert_int_equal(ql_cq_create_flags(dev, 8, 0, &cq0), 0);
	assert_int_equal(ql_cq_create(dev, 8, &cq), 0);
	assert_int_equal(ql_cq_mlx5(cq, &c), -EOPNOTSUPP);
	expect_detail("QL_CQ_INIT_MLX5");
	assert_int_equal(ql_cq_mlx5(NULL, &c), -EINVAL);
	ia = qp_attr(cq, cq0, QL_QP_INIT_MLX5);
	assert_int_equal(ql_qp_create(pd, &ia, &qp), -EINVAL);
	expect_detail("QL_CQ_INIT_MLX5");
	ia = qp_attr(cq, cq0, 0x10);
	assert_int_equal(ql_qp_create(pd, &ia, &qp), -EINVAL);
	assert_null(qp);
	ia = qp_attr(cq, cq0, 0);
	assert_int_equal(ql_qp_create(pd, &ia, &qp), 0);
	assert_int_equal(ql_qp_mlx5(qp, &q), -EOPNOTSUPP);
	expect_detail("QL_QP_INIT_MLX5");
	assert_int_equal(ql_qp_mlx5(qp, NULL), -EINVAL);
	assert_int_equal(ql_qp_destroy(qp), 0);
	assert_int_equal(ql_cq_destroy(cq), 0);
	assert_int_equal(ql_cq_destroy(cq0), 0);
	assert_int_equal(ql_pd_free(pd), 0);
	assert_int_equal(ql_device_close(dev), 0);
}

static void udp_uri(char *buf, size_t len)
{
	unsigned int pid = (unsigned int)getpid();

	snprintf(buf, len, "soft+udp://127.%u.%u.9:%u", (pid >> 8) & 0xff, pid & 0xff,
		 20000 + (pid >> 16) % 20000);
}

static void test_rules_loop(void **state)
{
	(void)state;
	rules_on("soft://loop");
}

static void test_rules_udp(void **state)
{
	char uri[64];
	struct ql_device *dev;
	struct ql_cq *cq = NULL;

	(void)state;
	udp_uri(uri, sizeof(uri));
	rules_on(uri);
	/* soft+udp has no mlx5 queues */
	assert_int_equal(ql_device_open(uri, &dev), 0);
	assert_int_equal(ql_cq_create_flags(dev, 8, QL_CQ_INIT_MLX5, &cq), -EOPNOTSUPP);
	assert_null(cq);
	assert_int_equal(ql_device_close(dev), 0);
}

static int aligned(const volatile void *p, uintptr_t a)
{
	return ((uintptr_t)p & (a - 1)) == 0;
}

static int pow2(uint32_t v)
{
	return v && !(v & (v - 1));
}

/* The views of the soft NIC's mlx5 mode (engineer mlx5nic's src/providers/soft/). */
static void contract_on(const char *uri)
{
	struct ql_device *dev;
	struct ql_pd *pd;
	struct ql_cq *cq = NULL;
	struct ql_qp *qp = NULL;
	struct ql_qp_init_attr ia;
	struct ql_mlx5_qp q;
	struct ql_mlx5_cq c;
	struct ql_mlx5_cqe_info ci;
	struct ibv_send_wr swr, *sbad = NULL;
	struct ibv_recv_wr rwr, *rbad = NULL;
	struct ibv_wc wc;
	int ret;

	if (ql_device_open(uri, &dev))
		fail_msg("ql_device_open(%s): %s", uri, ql_error_detail());
	assert_int_equal(ql_pd_alloc(dev, &pd), 0);
	ret = ql_cq_create_flags(dev, 8, QL_CQ_INIT_MLX5, &cq);
	if (ret == -EOPNOTSUPP) {
		print_message("[     SKIP ] %s: no mlx5 mode in this soft provider yet: %s\n", uri,
			      ql_error_detail());
		assert_int_equal(ql_pd_free(pd), 0);
		assert_int_equal(ql_device_close(dev), 0);
		skip();
	}
	assert_int_equal(ret, 0);
	ia = qp_attr(cq, cq, QL_QP_INIT_MLX5);
	assert_int_equal(ql_qp_create(pd, &ia, &qp), 0);

	memset(&c, 0xab, sizeof(c));
	assert_int_equal(ql_cq_mlx5(cq, &c), 0);
	assert_true(aligned(c.buf, 4096));
	assert_true(pow2(c.cqe_cnt));
	assert_true(c.cqe_cnt >= 8);
	assert_int_equal(c.cqe_size, 64);
	assert_non_null(c.dbrec);
	assert_int_equal(c.cons_index, 0);
	for (uint32_t i = 0; i < c.cqe_cnt; i++)
		assert_int_equal(ql_mlx5_cq_poll(&c, &ci), 0);

	memset(&q, 0xab, sizeof(q));
	assert_int_equal(ql_qp_mlx5(qp, &q), 0);
	assert_int_equal(q.qpn, ql_qp_num(qp));
	assert_true(aligned(q.sq.buf, 4096));
	assert_true(aligned(q.rq.buf, 4096));
	assert_int_equal(q.sq.stride, QL_MLX5_SEND_WQE_BB);
	assert_true(pow2(q.sq.wqe_cnt));
	assert_true(q.sq.wqe_cnt >= 16); /* at least max_send_wr single-BB WQEs */
	assert_true(pow2(q.rq.wqe_cnt));
	assert_true(q.rq.wqe_cnt >= 16);
	assert_true(q.rq.stride >= 16 && pow2(q.rq.stride));
	assert_non_null(q.sq.dbrec);
	assert_non_null(q.rq.dbrec);
	assert_true(q.sq.dbrec != q.rq.dbrec);
	assert_int_equal(q.sq.head, 0);
	assert_int_equal(q.sq.tail, 0);
	assert_int_equal(q.rq.head, 0);
	assert_int_equal(q.rq.tail, 0);
	assert_non_null(q.bf_reg);
	assert_true(aligned(q.bf_reg, 64));
	/* the soft NIC offers BlueFlame (64) unless the QP asks for none */
	assert_int_equal(q.bf_size, 64);
	assert_int_equal(q.bf_offset, 0);

	memset(&swr, 0, sizeof(swr));
	memset(&rwr, 0, sizeof(rwr));
	assert_int_equal(ql_qp_post_send(qp, &swr, &sbad), -EINVAL);
	assert_ptr_equal(sbad, &swr);
	assert_int_equal(ql_qp_post_recv(qp, &rwr, &rbad), -EINVAL);
	assert_ptr_equal(rbad, &rwr);
	assert_int_equal(ql_cq_poll(cq, 1, &wc), -EINVAL);

	assert_int_equal(ql_qp_destroy(qp), 0);
	assert_int_equal(ql_cq_destroy(cq), 0);
	assert_int_equal(ql_pd_free(pd), 0);
	assert_int_equal(ql_device_close(dev), 0);
}

static void test_contract_loop(void **state)
{
	(void)state;
	contract_on("soft://loop");
}

static void test_contract_shm(void **state)
{
	char uri[64];

	(void)state;
	snprintf(uri, sizeof(uri), "soft+shm://mlx5-%d", (int)getpid());
	contract_on(uri);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rules_loop),
		cmocka_unit_test(test_rules_udp),
		cmocka_unit_test(test_contract_loop),
		cmocka_unit_test(test_contract_shm),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
