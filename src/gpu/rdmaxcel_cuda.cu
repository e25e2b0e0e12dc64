/* SPDX-License-Identifier: MIT */
/*
 * rdmaxcel's kernels (rdmaxcel_int.h): RDMaxcel's cu_send_wqe, cu_recv_wqe,
 * cu_db_ring and cu_cqe_poll as one one-thread kernel running the same
 * static inline functions the host calls (qlink/rdmaxcel.h), on the views
 * ql_rdmaxcel_register_cuda_memory translated. Compiled when the build has
 * CUDA; the launch waits for the kernel (not a hot path).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <cuda_runtime.h>

#include "gpu/gpu_int.h"
#include "gpu/rdmaxcel_int.h"
#include "qlink/error.h"

struct rdmaxcel_args {
	int op;
	struct ql_mlx5_qp qp;
	struct ql_mlx5_cq cq;
	struct ql_rdmaxcel_wqe w;
	void *ctrl;
};

struct rdmaxcel_result {
	int ret;
	struct ql_mlx5_qp qp;
	struct ql_mlx5_cq cq;
	struct ql_mlx5_cqe_info info;
	void *ctrl;
};

static __device__ struct rdmaxcel_result rdmaxcel_res;
static pthread_mutex_t launch_lock = PTHREAD_MUTEX_INITIALIZER;

static __global__ void ql_rdmaxcel_kernel(struct rdmaxcel_args a)
{
	struct rdmaxcel_result r;

	r.ret = 0;
	r.ctrl = a.ctrl;
	switch (a.op) {
	case QL__RDMAXCEL_SEND:
		r.ret = ql_rdmaxcel_send_wqe(&a.qp, &a.w, &r.ctrl);
		break;
	case QL__RDMAXCEL_RECV:
		r.ret = ql_rdmaxcel_recv_wqe(&a.qp, &a.w);
		break;
	case QL__RDMAXCEL_DB_RING:
		ql_rdmaxcel_db_ring(&a.qp, a.ctrl);
		break;
	default:
		r.ret = ql_rdmaxcel_cqe_poll(&a.cq, &a.qp, &r.info);
		break;
	}
	r.qp = a.qp;
	r.cq = a.cq;
	rdmaxcel_res = r;
}

extern "C" int ql__rdmaxcel_cuda_launch(enum ql__rdmaxcel_op op, struct ql_rdmaxcel_queues *q,
					const struct ql_rdmaxcel_wqe *p,
					struct ql_mlx5_cqe_info *out)
{
	struct rdmaxcel_args a;
	struct rdmaxcel_result r;
	struct ql_mlx5_cq *cq = op == QL__RDMAXCEL_POLL_RECV ? &q->recv_cq : &q->send_cq;
	char why[160];
	cudaError_t e;

	if (!ql__gpu_cuda_probe(q->cuda_device, why, sizeof(why)))
		return ql_error_set(-ENODEV, "rdmaxcel: no GPU to launch on: %s", why);
	a.op = (int)op;
	a.qp = q->qp;
	a.cq = *cq;
	if (p)
		a.w = *p;
	else
		memset(&a.w, 0, sizeof(a.w));
	a.ctrl = q->last_ctrl;
	pthread_mutex_lock(&launch_lock);
	e = cudaSetDevice(q->cuda_device);
	if (e == cudaSuccess) {
		ql_rdmaxcel_kernel<<<1, 1>>>(a);
		e = cudaGetLastError();
	}
	if (e == cudaSuccess)
		e = cudaDeviceSynchronize();
	if (e == cudaSuccess)
		e = cudaMemcpyFromSymbol(&r, rdmaxcel_res, sizeof(r));
	pthread_mutex_unlock(&launch_lock);
	if (e != cudaSuccess)
		return ql_error_set(-EIO, "rdmaxcel: kernel: %s", cudaGetErrorString(e));
	q->qp = r.qp;
	*cq = r.cq;
	if (op == QL__RDMAXCEL_SEND && r.ret >= 0)
		q->last_ctrl = r.ctrl;
	if (out && (op == QL__RDMAXCEL_POLL_SEND || op == QL__RDMAXCEL_POLL_RECV))
		*out = r.info;
	return r.ret;
}
