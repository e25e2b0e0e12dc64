/* SPDX-License-Identifier: MIT */
/*
 * rdmaxcel: qlink/rdmaxcel.h's registration (the CUDA driver, loaded at run
 * time: util/cuda_drv.h) and its launchers' checks; the kernels are in
 * rdmaxcel_cuda.cu, compiled when the build has CUDA.
 */
#include "qlink/rdmaxcel.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "gpu/rdmaxcel_int.h"
#include "qlink/error.h"
#include "util/cuda_drv.h"

#define CUDA_HOST_ALREADY_REGISTERED 712 /* CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED */
#define CUDA_HOSTREGISTER_IOMEMORY 0x04

/* Map [p, p + len) into the GPU (whole pages) and translate p. A range
 * already registered (by an earlier one here, or by the caller) is used
 * as it is and not unregistered later; the doorbell register, device
 * memory mapped by the NIC's driver, is registered as I/O memory when
 * plain registration fails. */
static int map_range(const struct ql__cuda_drv *drv, struct ql_rdmaxcel_queues *q, void **pp,
		     size_t len, const char *what)
{
	uintptr_t ps = (uintptr_t)sysconf(_SC_PAGESIZE), a = (uintptr_t)*pp;
	uintptr_t lo = a & ~(ps - 1), hi = (a + len + ps - 1) & ~(ps - 1);
	unsigned int fl = QL__CUDA_HOSTREGISTER_PORTABLE | QL__CUDA_HOSTREGISTER_DEVICEMAP;
	uint64_t dev;
	int r;

	if (!*pp)
		return 0;
	r = drv->host_register((void *)lo, hi - lo, fl);
	if (r && r != CUDA_HOST_ALREADY_REGISTERED)
		r = drv->host_register((void *)lo, hi - lo, fl | CUDA_HOSTREGISTER_IOMEMORY);
	if (!r) {
		if (q->nregs == sizeof(q->regs) / sizeof(q->regs[0]))
			return ql_error_set(-ENOSPC, "rdmaxcel: too many ranges");
		q->regs[q->nregs++] = (void *)lo;
	} else if (r != CUDA_HOST_ALREADY_REGISTERED) {
		return ql_error_set(-EIO, "rdmaxcel: registering the %s (%zu bytes) with CUDA: %s",
				    what, (size_t)(hi - lo), ql__cuda_err(drv, r));
	}
	r = drv->host_get_device_pointer(&dev, (void *)lo, 0);
	if (r)
		return ql_error_set(-EIO, "rdmaxcel: the device address of the %s: %s", what,
				    ql__cuda_err(drv, r));
	*pp = (void *)(uintptr_t)(dev + (a - lo));
	return 0;
}

static int map_cq(const struct ql__cuda_drv *drv, struct ql_rdmaxcel_queues *q,
		  struct ql_mlx5_cq *cq, const char *what)
{
	void *db = (void *)(uintptr_t)cq->dbrec;
	int ret = map_range(drv, q, &cq->buf, (size_t)cq->cqe_cnt * cq->cqe_size, what);

	if (!ret)
		ret = map_range(drv, q, &db, 8, "CQ doorbell record");
	cq->dbrec = (volatile uint32_t *)db;
	return ret;
}

static int register_all(const struct ql__cuda_drv *drv, struct ql_rdmaxcel_queues *q)
{
	struct ql_mlx5_qp *qp = &q->qp;
	void *sdb = (void *)(uintptr_t)qp->sq.dbrec, *rdb = (void *)(uintptr_t)qp->rq.dbrec;
	int ret;

	ret = map_range(drv, q, &qp->sq.buf, (size_t)qp->sq.wqe_cnt * qp->sq.stride, "send queue");
	if (!ret && qp->rq.wqe_cnt)
		ret = map_range(drv, q, &qp->rq.buf, (size_t)qp->rq.wqe_cnt * qp->rq.stride,
				"receive queue");
	if (!ret)
		ret = map_range(drv, q, &sdb, 8, "send doorbell record");
	if (!ret)
		ret = map_range(drv, q, &rdb, 8, "receive doorbell record");
	qp->sq.dbrec = (volatile uint32_t *)sdb;
	qp->rq.dbrec = (volatile uint32_t *)rdb;
	if (!ret)
		ret = map_range(drv, q, &qp->bf_reg, qp->bf_size ? 2 * (size_t)qp->bf_size : 8,
				"doorbell register");
	if (!ret)
		ret = map_cq(drv, q, &q->send_cq, "send CQ");
	if (!ret && q->recv_cq.buf)
		ret = map_cq(drv, q, &q->recv_cq, "receive CQ");
	return ret;
}

int ql_rdmaxcel_register_cuda_memory(const struct ql_mlx5_qp *qp, const struct ql_mlx5_cq *send_cq,
				     const struct ql_mlx5_cq *recv_cq, int cuda_device,
				     struct ql_rdmaxcel_queues *q)
{
	const struct ql__cuda_drv *drv;
	int ret;

	if (!qp || !send_cq || !q)
		return ql_error_set(-EINVAL, "rdmaxcel: NULL queue view");
	if (!qp->sq.buf || !qp->sq.dbrec || !qp->bf_reg || !send_cq->buf || !send_cq->dbrec)
		return ql_error_set(-EINVAL, "rdmaxcel: an empty queue view (ql_qp_mlx5, "
					     "ql_cq_mlx5 fill them)");
	memset(q, 0, sizeof(*q));
	q->qp = *qp;
	q->send_cq = *send_cq;
	if (recv_cq)
		q->recv_cq = *recv_cq;
	q->cuda_device = cuda_device;
	ret = ql__cuda_enter("rdmaxcel", cuda_device, &drv);
	if (ret)
		return ret;
	ret = register_all(drv, q);
	ql__cuda_ctx_leave(drv);
	if (ret) {
		ql_rdmaxcel_unregister_cuda_memory(q);
		memset(q, 0, sizeof(*q));
	}
	return ret;
}

void ql_rdmaxcel_unregister_cuda_memory(struct ql_rdmaxcel_queues *q)
{
	const struct ql__cuda_drv *drv;

	if (!q || !q->nregs)
		return;
	if (!ql__cuda_enter("rdmaxcel", q->cuda_device, &drv)) {
		for (uint32_t i = 0; i < q->nregs; i++)
			drv->host_unregister(q->regs[i]);
		ql__cuda_ctx_leave(drv);
	}
	q->nregs = 0;
}

static int launch(enum ql__rdmaxcel_op op, struct ql_rdmaxcel_queues *q,
		  const struct ql_rdmaxcel_wqe *p, struct ql_mlx5_cqe_info *out)
{
	if (!q || !q->qp.sq.buf)
		return ql_error_set(-EINVAL, "rdmaxcel: queues not registered "
					     "(ql_rdmaxcel_register_cuda_memory)");
	if ((op == QL__RDMAXCEL_SEND || op == QL__RDMAXCEL_RECV) && !p)
		return ql_error_set(-EINVAL, "rdmaxcel: NULL work request");
	if (op == QL__RDMAXCEL_DB_RING && !q->last_ctrl)
		return ql_error_set(-EINVAL, "rdmaxcel: no send WQE launched to ring for");
	if ((op == QL__RDMAXCEL_POLL_SEND || op == QL__RDMAXCEL_POLL_RECV) && !out)
		return ql_error_set(-EINVAL, "rdmaxcel: NULL completion");
	if (op == QL__RDMAXCEL_POLL_RECV && !q->recv_cq.buf)
		return ql_error_set(-EINVAL, "rdmaxcel: no receive CQ registered");
#ifdef QLINK_HAVE_CUDA
	return ql__rdmaxcel_cuda_launch(op, q, p, out);
#else
	(void)out;
	return ql_error_set(-ENODEV, "rdmaxcel: built without CUDA (no nvcc when qlink was "
				     "configured): the kernels are not in this libqlink");
#endif
}

int ql_rdmaxcel_launch_send_wqe(struct ql_rdmaxcel_queues *q, const struct ql_rdmaxcel_wqe *p)
{
	return launch(QL__RDMAXCEL_SEND, q, p, NULL);
}

int ql_rdmaxcel_launch_recv_wqe(struct ql_rdmaxcel_queues *q, const struct ql_rdmaxcel_wqe *p)
{
	return launch(QL__RDMAXCEL_RECV, q, p, NULL);
}

int ql_rdmaxcel_launch_db_ring(struct ql_rdmaxcel_queues *q)
{
	return launch(QL__RDMAXCEL_DB_RING, q, NULL, NULL);
}

int ql_rdmaxcel_launch_cqe_poll(struct ql_rdmaxcel_queues *q, int send,
				struct ql_mlx5_cqe_info *out)
{
	return launch(send ? QL__RDMAXCEL_POLL_SEND : QL__RDMAXCEL_POLL_RECV, q, NULL, out);
}
