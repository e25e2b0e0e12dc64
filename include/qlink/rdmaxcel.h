/* SPDX-License-Identifier: MIT */
/*
 * rdmaxcel: RDMaxcel's single-operation surface (seed 003) on qlink/mlx5.h:
 * post one send or receive work request, ring the doorbell, poll one
 * completion, from the CPU or from a GPU, with one piece of code.
 *
 * The four operations are static inline and QL_HD (`__host__ __device__`
 * under nvcc), RDMaxcel's send_wqe, recv_wqe, db_ring and cqe_poll: the
 * host calls them directly on the views ql_qp_mlx5/ql_cq_mlx5 give
 * (qlink/verbs.h), a CUDA kernel of the user's calls the very same
 * functions on views whose pointers the GPU can follow. For a GPU, the
 * queues' memory is registered with CUDA first
 * (ql_rdmaxcel_register_cuda_memory, RDMaxcel's register_cuda_memory),
 * and the launchers (ql_rdmaxcel_launch_*, RDMaxcel's launch_*) run one
 * operation in a one-thread kernel and bring its result back: the same
 * code, run by the GPU. docs/mlx5.md ("RDMaxcel") has the mapping.
 *
 * A work request names its queue through the view (RDMaxcel's buf, dbrec,
 * wqe_cnt and qp_num are struct ql_mlx5_qp's); mlx5 WQEs carry no wr_id:
 * a completion's wqe_counter names the WQE (the index the post used).
 * Threading: one thread (or GPU thread) drives one queue at a time.
 */
#ifndef QLINK_RDMAXCEL_H
#define QLINK_RDMAXCEL_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "qlink/mlx5.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One work request (RDMaxcel's wqe_params_t, less the queue's fields). */
struct ql_rdmaxcel_wqe {
	uint64_t laddr; /* the local buffer, as its MR names it */
	uint32_t lkey;
	uint32_t length;   /* bytes */
	uint32_t op_type;  /* QL_MLX5_OPCODE_SEND, _SEND_IMM, _RDMA_WRITE,
			      _RDMA_WRITE_IMM or _RDMA_READ (recv: unused) */
	uint32_t signaled; /* nonzero: the WQE completes with a CQE */
	uint64_t raddr;	   /* WRITE, READ: the remote address */
	uint32_t rkey;
	uint32_t imm; /* _IMM opcodes: the immediate, host order */
};

/* ---- the operations, host and device ------------------------------------ */

/* Write one send WQE at the send queue's producer count (no doorbell);
 * *ctrl gets its control segment for ql_rdmaxcel_db_ring. Returns the
 * WQE's index (>= 0, what its CQE's wqe_counter will say), -EINVAL for a
 * NULL argument or an op_type outside the five above, -ENOMEM when the
 * queue is full (a send completion frees entries). */
static inline QL_HD int ql_rdmaxcel_send_wqe(struct ql_mlx5_qp *qp, const struct ql_rdmaxcel_wqe *p,
					     void **ctrl)
{
	struct ql_mlx5_sge sge;
	struct ql_mlx5_wr wr;
	uint32_t idx;
	int ret;

	if (!qp || !p || !ctrl)
		return -EINVAL;
	switch (p->op_type) {
	case QL_MLX5_OPCODE_SEND:
	case QL_MLX5_OPCODE_SEND_IMM:
	case QL_MLX5_OPCODE_RDMA_WRITE:
	case QL_MLX5_OPCODE_RDMA_WRITE_IMM:
	case QL_MLX5_OPCODE_RDMA_READ:
		break;
	default:
		return -EINVAL;
	}
	sge.addr = p->laddr;
	sge.length = p->length;
	sge.lkey = p->lkey;
	wr.opcode = (uint8_t)p->op_type;
	wr.fm_ce_se = p->signaled ? QL_MLX5_WQE_CTRL_CQ_UPDATE : 0;
	wr.imm = p->imm;
	wr.sge = &sge;
	wr.num_sge = 1;
	wr.inline_data = NULL;
	wr.inline_len = 0;
	wr.raddr = p->raddr;
	wr.rkey = p->rkey;
	wr.swap_add = 0;
	wr.compare = 0;
	idx = qp->sq.head & 0xffff;
	ret = ql_mlx5_sq_post(qp, &wr, ctrl);
	return ret ? ret : (int)idx;
}

/* Post one receive WQE for [laddr, laddr + length) under lkey and update
 * the receive doorbell record. Returns the WQE's index (>= 0), -EINVAL
 * (NULL) or -ENOMEM (full). */
static inline QL_HD int ql_rdmaxcel_recv_wqe(struct ql_mlx5_qp *qp, const struct ql_rdmaxcel_wqe *p)
{
	struct ql_mlx5_sge sge;
	uint32_t idx;
	int ret;

	if (!qp || !p)
		return -EINVAL;
	sge.addr = p->laddr;
	sge.length = p->length;
	sge.lkey = p->lkey;
	idx = qp->rq.head & 0xffff;
	ret = ql_mlx5_rq_post(qp, &sge, 1);
	return ret ? ret : (int)idx;
}

/* Ring the send queue's doorbell for everything posted so far; ctrl: the
 * last WQE's control segment (ql_mlx5_sq_doorbell: record, then the
 * 8-byte doorbell or the BlueFlame copy). */
static inline QL_HD void ql_rdmaxcel_db_ring(struct ql_mlx5_qp *qp, const void *ctrl)
{
	ql_mlx5_sq_doorbell(qp, ctrl);
}

/* Poll one CQE into *out (its fields in host order): 1, 0 (none) or
 * -EPROTO (ql_mlx5_cq_poll). A send completion frees its WQEs
 * (ql_mlx5_sq_complete) when qp is not NULL; a receive completion, its
 * receive WQE. */
static inline QL_HD int ql_rdmaxcel_cqe_poll(struct ql_mlx5_cq *cq, struct ql_mlx5_qp *qp,
					     struct ql_mlx5_cqe_info *out)
{
	int n = ql_mlx5_cq_poll(cq, out);

	if (n == 1 && qp) {
		if (out->opcode == QL_MLX5_CQE_REQ || out->opcode == QL_MLX5_CQE_REQ_ERR)
			ql_mlx5_sq_complete(qp, out->wqe_counter);
		else
			ql_mlx5_rq_complete(qp);
	}
	return n;
}

/* ---- on a GPU: registration and launchers ------------------------------- */

/* The queues as a GPU reaches them: the views with every pointer (WQE
 * buffers, doorbell records, the doorbell register, CQE buffers) a device
 * address. Fill with ql_rdmaxcel_register_cuda_memory; the launchers keep
 * the producer/consumer counts in it. */
struct ql_rdmaxcel_queues {
	struct ql_mlx5_qp qp;
	struct ql_mlx5_cq send_cq;
	struct ql_mlx5_cq recv_cq;
	int cuda_device;
	void *last_ctrl; /* the last send WQE launched (device address) */
	/* internal: the page ranges registered here, to unregister */
	uint32_t nregs;
	void *regs[12];
};

/* Register with CUDA the memory a kernel touches to drive qp and its CQs
 * (recv_cq may be NULL or the same as send_cq): the send and receive WQE
 * buffers, both doorbell records, the doorbell register (as I/O memory
 * where it is a device's, cuMemHostRegister IOMEMORY) and the CQE buffers
 * and their records, mapped into cuda_device (cuMemHostRegister, DEVICEMAP;
 * the CUDA driver is loaded at run time). Fills *q with device views (the
 * counters as the host views have them). -EINVAL for NULL or an empty view,
 * -ENODEV without a CUDA driver or device, -EIO when CUDA refuses a range;
 * the detail says which. RDMaxcel's register_cuda_memory. */
int ql_rdmaxcel_register_cuda_memory(const struct ql_mlx5_qp *qp, const struct ql_mlx5_cq *send_cq,
				     const struct ql_mlx5_cq *recv_cq, int cuda_device,
				     struct ql_rdmaxcel_queues *q);
void ql_rdmaxcel_unregister_cuda_memory(struct ql_rdmaxcel_queues *q);

/* One operation run by the GPU (a one-thread kernel on q's views, waited
 * for), RDMaxcel's launch_send_wqe, launch_recv_wqe, launch_db_ring and
 * launch_cqe_poll. Results as the host functions' (the WQE index, or the
 * poll's 1/0 with *out); the send launch keeps its control segment in q
 * for the doorbell launch. -EINVAL for NULL or queues not registered
 * (ql_rdmaxcel_launch_db_ring: nothing posted), -ENODEV (with the reason)
 * in a build without CUDA (nvcc) or without a usable GPU, -EIO when the
 * kernel fails. Not for a hot path: each is a launch and a wait. */
int ql_rdmaxcel_launch_send_wqe(struct ql_rdmaxcel_queues *q, const struct ql_rdmaxcel_wqe *p);
int ql_rdmaxcel_launch_recv_wqe(struct ql_rdmaxcel_queues *q, const struct ql_rdmaxcel_wqe *p);
int ql_rdmaxcel_launch_db_ring(struct ql_rdmaxcel_queues *q);
/* send: nonzero polls q's send CQ (and frees its WQEs), else its receive
 * CQ. */
int ql_rdmaxcel_launch_cqe_poll(struct ql_rdmaxcel_queues *q, int send,
				struct ql_mlx5_cqe_info *out);

#ifdef __cplusplus
}
#endif
#endif
