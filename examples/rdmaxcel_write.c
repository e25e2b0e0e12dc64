/* SPDX-License-Identifier: MIT */
/*
 * rdmaxcel_write: RDMaxcel's single operations (qlink/rdmaxcel.h) posting
 * one RDMA WRITE through a QP's mlx5 queues: the WQE written, the doorbell
 * rung and the CQE polled by the CPU, then, where a GPU is, the very same
 * three operations run by the GPU (the launchers, after the queues' memory
 * is registered with CUDA). On the soft NIC's mlx5 mode (default
 * soft://loop) or a ConnectX (ibv://mlx5_0).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <qlink/gpu.h>
#include <qlink/rdmaxcel.h>
#include <qlink/verbs.h>

#include "example_util.h"

static int wait_cqe(struct ql_mlx5_cq *cq, struct ql_mlx5_qp *qp, struct ql_mlx5_cqe_info *ci)
{
	int n;

	while ((n = ql_rdmaxcel_cqe_poll(cq, qp, ci)) == 0)
		; /* the NIC (the soft NIC's engine thread, or a ConnectX) completes it */
	return n == 1 && ci->opcode == QL_MLX5_CQE_REQ ? 0 : -EIO;
}

int main(int argc, char **argv)
{
	const char *uri = argc > 1 ? argv[1] : "soft://loop";
	struct ql_device *dev;
	struct ql_pd *pd;
	struct ql_mr *mr;
	struct ql_cq *cq;
	struct ql_qp *a, *b;
	struct ql_conn_params pa, pb;
	struct ql_mlx5_qp q;
	struct ql_mlx5_cq c;
	struct ql_mlx5_cqe_info ci;
	struct ql_rdmaxcel_queues gq;
	char why[256], *buf;
	void *ctrl;

	CHECK(ql_device_open(uri, &dev));
	CHECK(ql_pd_alloc(dev, &pd));
	CHECK(ql_pd_mem_alloc(pd, 4096, (void **)&buf));
	CHECK(ql_mr_reg(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, &mr));
	CHECK(ql_cq_create_flags(dev, 16, QL_CQ_INIT_MLX5, &cq)); /* a's CQ: mlx5 CQEs */
	struct ql_qp_init_attr qa = {
		.send_cq = cq,
		.recv_cq = cq,
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16,
			 .max_recv_wr = 16,
			 .max_send_sge = 1,
			 .max_recv_sge = 1 },
		.flags = QL_QP_INIT_MLX5,
	};
	CHECK(ql_qp_create(pd, &qa, &a));
	struct ql_cq *bcq;
	CHECK(ql_cq_create(dev, 16, &bcq));
	qa.send_cq = qa.recv_cq = bcq;
	qa.flags = 0;
	CHECK(ql_qp_create(pd, &qa, &b)); /* b: an ordinary verbs QP, the target */
	CHECK(ql_qp_local_params(a, &pa));
	CHECK(ql_qp_local_params(b, &pb));
	CHECK(ql_qp_connect(a, &pb, NULL));
	CHECK(ql_qp_connect(b, &pa, NULL));
	CHECK(ql_qp_mlx5(a, &q)); /* the views: buffers, doorbell record and register */
	CHECK(ql_cq_mlx5(cq, &c));

	/* on the CPU: buf[0..6) to buf + 2048 */
	strcpy(buf, "hello");
	struct ql_rdmaxcel_wqe w = {
		.laddr = (uintptr_t)buf,
		.lkey = ql_mr_lkey(mr),
		.length = 6,
		.op_type = QL_MLX5_OPCODE_RDMA_WRITE,
		.signaled = 1,
		.raddr = (uintptr_t)buf + 2048,
		.rkey = ql_mr_rkey(mr),
	};
	CHECK(ql_rdmaxcel_send_wqe(&q, &w, &ctrl));
	ql_rdmaxcel_db_ring(&q, ctrl);
	CHECK(wait_cqe(&c, &q, &ci));
	printf("%s: cpu wrote \"%s\" (CQE: qpn 0x%x, wqe %u)\n", uri, buf + 2048, ci.qpn,
	       ci.wqe_counter);

	/* on the GPU: the same operations, launched */
	if (!ql_gpu_available(why, sizeof(why))) {
		printf("gpu: skipped (%s)\n", why);
		return 0;
	}
	strcpy(buf, "world");
	w.raddr = (uintptr_t)buf + 3072;
	CHECK(ql_rdmaxcel_register_cuda_memory(&q, &c, NULL, 0, &gq));
	CHECK(ql_rdmaxcel_launch_send_wqe(&gq, &w));
	CHECK(ql_rdmaxcel_launch_db_ring(&gq));
	while (ql_rdmaxcel_launch_cqe_poll(&gq, 1, &ci) == 0)
		;
	printf("%s: gpu wrote \"%s\" (CQE: opcode %u, wqe %u)\n", uri, buf + 3072, ci.opcode,
	       ci.wqe_counter);
	ql_rdmaxcel_unregister_cuda_memory(&gq);
	return 0;
}
