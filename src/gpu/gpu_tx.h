/* SPDX-License-Identifier: MIT */
/*
 * The dispatch body's send side (internal): a response buffer per send
 * queue entry, each response posted as one signaled SEND work request
 * straight onto the channel QP's mlx5 send queue (qlink/mlx5.h), the
 * doorbell rung, and the send CQ polled to give the buffers back. Host and
 * device code: the persistent kernel and the host emulation both run it.
 */
#ifndef QL_GPU_TX_H
#define QL_GPU_TX_H

#include <stdint.h>

#include "qlink/gpu_rpc.h"
#include "qlink/mlx5.h"

struct ql_gpu_tx {
	uint8_t *buf;	      /* response buffers as the body sees them */
	uint64_t iova;	      /* ... and as the NIC sees them (the MR's addresses) */
	uint32_t count;	      /* buffers, a power of two, <= send queue entries */
	uint32_t stride;      /* bytes from one buffer to the next */
	uint32_t lkey;	      /* of the buffers' MR */
	uint64_t posted;      /* SENDs posted */
	uint64_t done;	      /* SENDs completed (either way) */
	uint64_t failed;      /* completed with an error */
	struct ql_mlx5_qp qp; /* the channel QP's queues */
	struct ql_mlx5_cq cq; /* its send CQ */
};

/* The buffer for the next response, NULL while every one is in flight. */
QL_HD static inline uint8_t *ql_gpu_tx_next(const struct ql_gpu_tx *t)
{
	if (t->posted - t->done >= t->count)
		return (uint8_t *)0;
	return t->buf + (size_t)(t->posted & (t->count - 1)) * t->stride;
}

/* Post the next buffer's first len bytes as a signaled SEND and ring the
 * doorbell. 0, or -EIO (the send queue refused it: a bug, or a peer that
 * broke the queue). */
QL_HD static inline int ql_gpu_tx_post(struct ql_gpu_tx *t, uint32_t len)
{
	uint64_t off = (uint64_t)(t->posted & (t->count - 1)) * t->stride;
	void *ctrl = (void *)0;

	if (ql_mlx5_sq_post_send(&t->qp, t->iova + off, len, t->lkey, QL_MLX5_WQE_CTRL_CQ_UPDATE,
				 &ctrl))
		return -EIO;
	ql_mlx5_sq_doorbell(&t->qp, ctrl);
	t->posted++;
	return 0;
}

/* Take the send completions that arrived (every SEND is signaled, and
 * completions come in order): their buffers are free again. Returns how
 * many, or -EIO for a completion queue in a state it must not be in. */
QL_HD static inline int ql_gpu_tx_reap(struct ql_gpu_tx *t)
{
	struct ql_mlx5_cqe_info ci;
	int n = 0, r;

	while (t->done < t->posted && (r = ql_mlx5_cq_poll(&t->cq, &ci)) != 0) {
		if (r < 0)
			return -EIO;
		if (ci.opcode == QL_MLX5_CQE_REQ_ERR)
			t->failed++;
		else if (ci.opcode != QL_MLX5_CQE_REQ)
			return -EIO;
		ql_mlx5_sq_complete(&t->qp, ci.wqe_counter);
		t->done++;
		n++;
	}
	return n;
}

#endif
