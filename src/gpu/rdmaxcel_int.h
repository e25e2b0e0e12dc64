/* SPDX-License-Identifier: MIT */
/*
 * Between rdmaxcel.c (C) and rdmaxcel_cuda.cu (nvcc, when the build has
 * CUDA): one operation of qlink/rdmaxcel.h run by a one-thread kernel.
 */
#ifndef QL_GPU_RDMAXCEL_INT_H
#define QL_GPU_RDMAXCEL_INT_H

#include "qlink/rdmaxcel.h"

#ifdef __cplusplus
extern "C" {
#endif

enum ql__rdmaxcel_op {
	QL__RDMAXCEL_SEND,
	QL__RDMAXCEL_RECV,
	QL__RDMAXCEL_DB_RING,
	QL__RDMAXCEL_POLL_SEND,
	QL__RDMAXCEL_POLL_RECV,
};

/* Run op on q's device views in a <<<1, 1>>> kernel and wait for it; q's
 * counters (and last_ctrl) come back updated. The operation's result, or
 * -ENODEV (no usable GPU) / -EIO (launch or kernel failed) with a detail. */
int ql__rdmaxcel_cuda_launch(enum ql__rdmaxcel_op op, struct ql_rdmaxcel_queues *q,
			     const struct ql_rdmaxcel_wqe *p, struct ql_mlx5_cqe_info *out);

#ifdef __cplusplus
}
#endif
#endif
