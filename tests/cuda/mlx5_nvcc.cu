// SPDX-License-Identifier: MIT
// qlink/mlx5.h under nvcc: the same builders, doorbell and poller compiled
// as device code (a kernel) and as host code (a host function), with every
// warning of nvcc and of its host compiler an error (tests/CMakeLists.txt:
// mlx5_nvcc_check). It is also a runnable probe on a GPU machine: main()
// posts a WRITE from the GPU into host-mapped queues and polls a CQE the
// CPU writes, and reports what it saw (exit 77 where no GPU is present).
#include <stdio.h>
#include <string.h>

#include <cuda_runtime.h>

#include "qlink/mlx5.h"

struct probe {
	int post_ret;
	int poll_ret;
	uint16_t wqe_counter;
	uint32_t qpn;
};

__global__ void post_and_poll(struct ql_mlx5_qp qp, struct ql_mlx5_cq cq, uint64_t laddr,
			      uint64_t raddr, volatile struct probe *out)
{
	struct ql_mlx5_cqe_info ci;
	void *ctrl = 0;
	uint8_t msg[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	int r;

	out->post_ret = ql_mlx5_sq_post_write_inline(&qp, msg, 8, raddr, 0x42,
						     QL_MLX5_WQE_CTRL_CQ_UPDATE, &ctrl);
	if (out->post_ret == 0)
		ql_mlx5_sq_doorbell(&qp, ctrl);
	(void)laddr;
	/* the CPU plays the NIC: it writes the CQE once it sees the doorbell */
	do {
		r = ql_mlx5_cq_poll(&cq, &ci);
	} while (r == 0);
	out->wqe_counter = ci.wqe_counter;
	out->qpn = ci.qpn;
	out->poll_ret = r;
}

// the same calls from the host
int host_post_and_poll(struct ql_mlx5_qp *qp, struct ql_mlx5_cq *cq);
int host_post_and_poll(struct ql_mlx5_qp *qp, struct ql_mlx5_cq *cq)
{
	struct ql_mlx5_cqe_info ci;
	struct ql_mlx5_sge sge = { 0x1000, 8, 1 };
	void *ctrl = 0;
	int r = ql_mlx5_sq_post_send(qp, 0x1000, 8, 1, QL_MLX5_WQE_CTRL_CQ_UPDATE, &ctrl);

	if (r)
		return r;
	ql_mlx5_sq_doorbell(qp, ctrl);
	r = ql_mlx5_rq_post(qp, &sge, 1);
	if (r)
		return r;
	return ql_mlx5_cq_poll(cq, &ci);
}

#define CK(x)                                                           \
	do {                                                            \
		cudaError_t e_ = (x);                                   \
		if (e_ != cudaSuccess) {                                \
			printf("%s: %s\n", #x, cudaGetErrorString(e_)); \
			return 1;                                       \
		}                                                       \
	} while (0)

int main(void)
{
	int ndev = 0;
	uint8_t *sq, *cqb, *uar;
	uint32_t *dbr;
	struct probe *pr;
	struct ql_mlx5_qp qp;
	struct ql_mlx5_cq cq;

	if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
		printf("SKIP: no CUDA device\n");
		return 77;
	}
	CK(cudaHostAlloc((void **)&sq, 4 * 64, cudaHostAllocMapped));
	CK(cudaHostAlloc((void **)&cqb, 4 * 64, cudaHostAllocMapped));
	CK(cudaHostAlloc((void **)&uar, 64, cudaHostAllocMapped));
	CK(cudaHostAlloc((void **)&dbr, 64, cudaHostAllocMapped));
	CK(cudaHostAlloc((void **)&pr, sizeof(*pr), cudaHostAllocMapped));
	memset(sq, 0, 4 * 64);
	memset(cqb, 0, 4 * 64);
	memset(uar, 0, 64);
	memset(dbr, 0, 64);
	memset(pr, 0, sizeof(*pr));
	for (int i = 0; i < 4; i++)
		cqb[i * 64 + 63] = 0xf0;
	memset(&qp, 0, sizeof(qp));
	memset(&cq, 0, sizeof(cq));
	qp.qpn = 0xabc;
	qp.sq.wqe_cnt = 4;
	qp.sq.stride = 64;
	cq.cqe_cnt = 4;
	cq.cqe_size = 64;
	CK(cudaHostGetDevicePointer((void **)&qp.sq.buf, sq, 0));
	CK(cudaHostGetDevicePointer((void **)&qp.sq.dbrec, dbr + 1, 0));
	CK(cudaHostGetDevicePointer((void **)&qp.bf_reg, uar, 0));
	CK(cudaHostGetDevicePointer((void **)&cq.buf, cqb, 0));
	CK(cudaHostGetDevicePointer((void **)&cq.dbrec, dbr + 8, 0));
	struct probe *dpr;
	CK(cudaHostGetDevicePointer((void **)&dpr, pr, 0));
	post_and_poll<<<1, 1>>>(qp, cq, 0, 0x6000, dpr);
	CK(cudaGetLastError());
	/* the "NIC": wait for the doorbell record, check the WQE, write a CQE */
	volatile uint32_t *vdbr = dbr;
	for (long spin = 0; vdbr[1] == 0; spin++)
		if (spin > 2000000000L) {
			printf("FAIL: no doorbell record from the GPU\n");
			return 1;
		}
	__sync_synchronize();
	int ok = sq[3] == QL_MLX5_OPCODE_RDMA_WRITE && sq[7] == 3 && sq[32] == 0x80 &&
		 sq[35] == 8 && sq[36] == 1 && sq[43] == 8 && uar[3] == QL_MLX5_OPCODE_RDMA_WRITE;
	cqb[56] = QL_MLX5_OPCODE_RDMA_WRITE;
	cqb[59] = 0xbc;
	cqb[58] = 0x0a;
	cqb[61] = 0;
	__sync_synchronize();
	((volatile uint8_t *)cqb)[63] = QL_MLX5_CQE_REQ << 4;
	CK(cudaDeviceSynchronize());
	printf("gpu: post %d, dbrec 0x%08x, wqe %s, poll %d, qpn 0x%x, cq dbrec 0x%08x\n",
	       pr->post_ret, vdbr[1], ok ? "as expected" : "WRONG", pr->poll_ret, pr->qpn, vdbr[8]);
	return pr->post_ret == 0 && ok && pr->poll_ret == 1 && pr->qpn == 0xabc &&
			       vdbr[8] == 0x01000000u ?
		       0 :
		       1;
}
