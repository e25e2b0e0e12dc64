/* SPDX-License-Identifier: MIT */
/*
 * qlink/mlx5.h against a device that executes it: an mlx5-driven QP talks
 * to an ordinary verbs QP on the same device over RC (the two APIs on one
 * wire). Run on every device with mlx5 queues: a ConnectX (ibv:// whose
 * provider is mlx5) and the soft NIC's mlx5 mode (soft://loop, soft+shm). WRITE
 * inline and from a registered buffer, SEND from the verbs side received
 * through an mlx5 receive WQE, SEND_IMM from the mlx5 side received by the
 * verbs side (the immediate in network order, as ibv_wc has it), READ, and
 * a WRITE with a bad rkey completing as a requester error CQE with the
 * remote-access syndrome. Exits 77 (skipped) when no device has mlx5
 * queues, saying why for each.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "qlink/error.h"
#include "qlink/mlx5.h"
#include "qlink/verbs.h"

#include "mlx5_side.h"

static char uris[8][QL_DEVICE_URI_MAX];
static int nuris;

static void mlx5_wait(struct ql_mlx5_cq *c, struct ql_mlx5_cqe_info *ci)
{
	double end = now_s() + 5.0;
	int r;

	while ((r = ql_mlx5_cq_poll(c, ci)) == 0)
		if (now_s() > end)
			fail_msg("no CQE in 5 s");
	assert_int_equal(r, 1);
}

static void verbs_wait(struct ql_cq *cq, struct ibv_wc *wc)
{
	double end = now_s() + 5.0;
	int r;

	while ((r = ql_cq_poll(cq, 1, wc)) == 0)
		if (now_s() > end)
			fail_msg("no completion in 5 s");
	assert_int_equal(r, 1);
}

static void run_on(const char *uri)
{
	struct ql_device *dev;
	struct ql_pd *pd;
	struct side a, b; /* a: driven through qlink/mlx5.h; b: through the verbs API */
	struct ql_conn_params pa, pb;
	struct ql_mlx5_qp q;
	struct ql_mlx5_cq c;
	struct ql_mlx5_cqe_info ci;
	struct ibv_sge sge;
	struct ibv_send_wr swr, *sbad;
	struct ibv_recv_wr rwr, *rbad;
	struct ibv_wc wc;
	struct ql_mlx5_sge msge;
	uint64_t word = 0x1122334455667788ull;
	uint64_t braddr;
	void *ctrl = NULL;

	print_message("[     NOTE ] %s\n", uri);
	assert_int_equal(ql_device_open(uri, &dev), 0);
	assert_int_equal(ql_pd_alloc(dev, &pd), 0);
	side_create(dev, pd, &a, true);
	side_create(dev, pd, &b, false);
	braddr = (uintptr_t)ql_mr_addr(b.mr);
	assert_int_equal(ql_qp_local_params(a.qp, &pa), 0);
	assert_int_equal(ql_qp_local_params(b.qp, &pb), 0);
	assert_int_equal(ql_qp_connect(a.qp, &pb, NULL), 0);
	assert_int_equal(ql_qp_connect(b.qp, &pa, NULL), 0);
	assert_int_equal(ql_qp_mlx5(a.qp, &q), 0);
	assert_int_equal(ql_cq_mlx5(a.cq, &c), 0);

	/* WRITE inline */
	assert_int_equal(ql_mlx5_sq_post_write_inline(&q, &word, 8, braddr, ql_mr_rkey(b.mr),
						      QL_MLX5_WQE_CTRL_CQ_UPDATE, &ctrl),
			 0);
	ql_mlx5_sq_doorbell(&q, ctrl);
	mlx5_wait(&c, &ci);
	assert_int_equal(ci.opcode, QL_MLX5_CQE_REQ);
	assert_int_equal(ci.send_opcode, QL_MLX5_OPCODE_RDMA_WRITE);
	assert_int_equal(ci.qpn, ql_qp_num(a.qp));
	assert_int_equal(ci.wqe_counter, 0);
	ql_mlx5_sq_complete(&q, ci.wqe_counter);
	assert_memory_equal(b.buf, &word, 8);

	/* WRITE from a registered buffer */
	for (int i = 0; i < 64; i++)
		a.buf[i] = (uint8_t)(0x40 + i);
	assert_int_equal(ql_mlx5_sq_post_write(&q, (uintptr_t)a.buf, 64, ql_mr_lkey(a.mr),
					       braddr + 64, ql_mr_rkey(b.mr),
					       QL_MLX5_WQE_CTRL_CQ_UPDATE, &ctrl),
			 0);
	ql_mlx5_sq_doorbell(&q, ctrl);
	mlx5_wait(&c, &ci);
	assert_int_equal(ci.opcode, QL_MLX5_CQE_REQ);
	ql_mlx5_sq_complete(&q, ci.wqe_counter);
	assert_memory_equal(b.buf + 64, a.buf, 64);

	/* SEND from the verbs side into an mlx5 receive WQE */
	msge.addr = (uintptr_t)a.buf + 1024;
	msge.length = 256;
	msge.lkey = ql_mr_lkey(a.mr);
	assert_int_equal(ql_mlx5_rq_post(&q, &msge, 1), 0);
	memset(b.buf + 128, 0x5a, 32);
	sge.addr = (uintptr_t)b.buf + 128;
	sge.length = 32;
	sge.lkey = ql_mr_lkey(b.mr);
	memset(&swr, 0, sizeof(swr));
	swr.wr_id = 7;
	swr.sg_list = &sge;
	swr.num_sge = 1;
	swr.opcode = IBV_WR_SEND;
	swr.send_flags = IBV_SEND_SIGNALED;
	assert_int_equal(ql_qp_post_send(b.qp, &swr, &sbad), 0);
	/* the verbs side first: on the soft NIC its polls drive its progress
	 * (an RNR retry, if its SEND beat the engine to the receive WQE) */
	verbs_wait(b.cq, &wc);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	assert_int_equal(wc.wr_id, 7);
	mlx5_wait(&c, &ci);
	assert_int_equal(ci.opcode, QL_MLX5_CQE_RESP_SEND);
	assert_int_equal(ci.byte_cnt, 32);
	assert_int_equal(ci.qpn, ql_qp_num(a.qp));
	assert_int_equal(ci.wqe_counter, 0);
	ql_mlx5_rq_complete(&q);
	assert_memory_equal(a.buf + 1024, b.buf + 128, 32);

	/* SEND_IMM from the mlx5 side to the verbs side */
	sge.addr = (uintptr_t)b.buf + 2048;
	sge.length = 256;
	memset(&rwr, 0, sizeof(rwr));
	rwr.wr_id = 9;
	rwr.sg_list = &sge;
	rwr.num_sge = 1;
	assert_int_equal(ql_qp_post_recv(b.qp, &rwr, &rbad), 0);
	memset(a.buf + 256, 0xc3, 16);
	assert_int_equal(ql_mlx5_sq_post_send_imm(&q, (uintptr_t)a.buf + 256, 16, ql_mr_lkey(a.mr),
						  0x1234abcd, QL_MLX5_WQE_CTRL_CQ_UPDATE, &ctrl),
			 0);
	ql_mlx5_sq_doorbell(&q, ctrl);
	mlx5_wait(&c, &ci);
	assert_int_equal(ci.opcode, QL_MLX5_CQE_REQ);
	assert_int_equal(ci.send_opcode, QL_MLX5_OPCODE_SEND_IMM);
	ql_mlx5_sq_complete(&q, ci.wqe_counter);
	verbs_wait(b.cq, &wc);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	assert_int_equal(wc.opcode, IBV_WC_RECV);
	assert_int_equal(wc.wr_id, 9);
	assert_int_equal(wc.byte_len, 16);
	assert_true(wc.wc_flags & IBV_WC_WITH_IMM);
	assert_int_equal(wc.imm_data, htonl(0x1234abcd));
	assert_memory_equal(b.buf + 2048, a.buf + 256, 16);

	/* READ back what the first WRITE put there */
	assert_int_equal(ql_mlx5_sq_post_read(&q, (uintptr_t)a.buf + 3000, 8, ql_mr_lkey(a.mr),
					      braddr, ql_mr_rkey(b.mr), QL_MLX5_WQE_CTRL_CQ_UPDATE,
					      &ctrl),
			 0);
	ql_mlx5_sq_doorbell(&q, ctrl);
	mlx5_wait(&c, &ci);
	assert_int_equal(ci.opcode, QL_MLX5_CQE_REQ);
	assert_int_equal(ci.send_opcode, QL_MLX5_OPCODE_RDMA_READ);
	ql_mlx5_sq_complete(&q, ci.wqe_counter);
	assert_memory_equal(a.buf + 3000, &word, 8);

	/* a bad rkey: a requester error CQE, remote access */
	assert_int_equal(ql_mlx5_sq_post_write_inline(&q, &word, 8, braddr, ql_mr_rkey(b.mr) ^ 0x80,
						      QL_MLX5_WQE_CTRL_CQ_UPDATE, &ctrl),
			 0);
	ql_mlx5_sq_doorbell(&q, ctrl);
	mlx5_wait(&c, &ci);
	assert_int_equal(ci.opcode, QL_MLX5_CQE_REQ_ERR);
	assert_int_equal(ci.syndrome, QL_MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR);
	assert_int_equal(ci.qpn, ql_qp_num(a.qp));

	side_destroy(pd, &a);
	side_destroy(pd, &b);
	assert_int_equal(ql_pd_free(pd), 0);
	assert_int_equal(ql_device_close(dev), 0);
}

static void test_wire(void **state)
{
	(void)state;
	for (int i = 0; i < nuris; i++)
		run_on(uris[i]);
}

/* Whether `uri` has mlx5 queues (a QL_CQ_INIT_MLX5 CQ can be made). */
static bool has_mlx5(const char *uri)
{
	struct ql_device *dev;
	struct ql_cq *cq;
	int ret;

	if (ql_device_open(uri, &dev)) {
		printf("%s: not opened: %s\n", uri, ql_error_detail());
		return false;
	}
	ret = ql_cq_create_flags(dev, 4, QL_CQ_INIT_MLX5, &cq);
	if (ret)
		printf("%s: no mlx5 queues: %s\n", uri, ql_error_detail());
	else
		ql_cq_destroy(cq);
	ql_device_close(dev);
	return ret == 0;
}

int main(void)
{
	char all[16][QL_DEVICE_URI_MAX];
	int n = ql_device_list(all, 16);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wire),
	};

	char shm[64];

	snprintf(shm, sizeof(shm), "soft+shm://mlx5wire-%d", (int)getpid());
	if (has_mlx5("soft://loop"))
		snprintf(uris[nuris++], QL_DEVICE_URI_MAX, "soft://loop");
	if (has_mlx5(shm))
		snprintf(uris[nuris++], QL_DEVICE_URI_MAX, "%s", shm);
	for (int i = 0; i < n && i < 16 && nuris < 8; i++)
		if (!strncmp(all[i], "ibv://", 6) && has_mlx5(all[i]))
			memcpy(uris[nuris++], all[i], QL_DEVICE_URI_MAX);
	if (!nuris) {
		printf("SKIP: no device with mlx5 queues (no mlx5 ConnectX; soft://loop without "
		       "its mlx5 mode)\n");
		return 77;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
