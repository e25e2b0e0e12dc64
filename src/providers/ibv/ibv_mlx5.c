/* SPDX-License-Identifier: MIT */
/*
 * ibv_mlx5: mlx5 direct-verbs glue of the ibv provider (ibv_mlx5.h).
 *
 * mlx5dv_init_obj tells where the provider put a QP's and a CQ's rings;
 * this file copies that into the plain-data views of qlink/mlx5.h, field
 * for field (docs/mlx5.md, "ConnectX"). Two choices are made here:
 *   - the QP is created with scatter-to-CQE disabled, so a small received
 *     payload is never left in the CQE instead of the receive buffer;
 *   - bf_size is 0: the doorbell is the 8-byte write, not a BlueFlame copy.
 *     mlx5 shares a BlueFlame register between QPs beyond the first few,
 *     and its buffer-half toggle lives in the provider's private state,
 *     which the view cannot share; the 8-byte doorbell is correct with
 *     either half.
 */
#include <errno.h>
#include <string.h>

#include "providers/ibv/ibv_mlx5.h"
#include "qlink/error.h"

#ifdef QL_HAVE_MLX5DV
#include <infiniband/mlx5dv.h>

bool ql__ibvp_mlx5_supported(struct ibv_context *ctx)
{
	return ctx && ctx->device && mlx5dv_is_supported(ctx->device);
}

struct ibv_qp *ql__ibvp_mlx5_create_qp(struct ibv_context *ctx, struct ibv_pd *pd,
				       struct ibv_qp_init_attr *attr)
{
	struct ibv_qp_init_attr_ex ax;
	struct mlx5dv_qp_init_attr dv;
	struct ibv_qp *qp;

	memset(&ax, 0, sizeof(ax));
	ax.qp_context = attr->qp_context;
	ax.send_cq = attr->send_cq;
	ax.recv_cq = attr->recv_cq;
	ax.srq = attr->srq;
	ax.cap = attr->cap;
	ax.qp_type = attr->qp_type;
	ax.sq_sig_all = attr->sq_sig_all;
	ax.comp_mask = IBV_QP_INIT_ATTR_PD;
	ax.pd = pd;
	memset(&dv, 0, sizeof(dv));
	dv.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS;
	dv.create_flags = MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE;
	qp = mlx5dv_create_qp(ctx, &ax, &dv);
	if (qp)
		attr->cap = ax.cap;
	return qp;
}

int ql__ibvp_mlx5_qp_view(struct ibv_qp *qp, struct ql_mlx5_qp *out)
{
	struct mlx5dv_qp dq;
	struct mlx5dv_obj obj;
	int ret;

	memset(&dq, 0, sizeof(dq));
	memset(&obj, 0, sizeof(obj));
	obj.qp.in = qp;
	obj.qp.out = &dq;
	ret = mlx5dv_init_obj(&obj, MLX5DV_OBJ_QP);
	if (ret)
		return ql_error_set(ret > 0 ? -ret : -EIO, "mlx5dv_init_obj(QP 0x%x): %s",
				    qp->qp_num, strerror(ret > 0 ? ret : EIO));
	if (dq.sq.stride != QL_MLX5_SEND_WQE_BB || !dq.sq.wqe_cnt ||
	    (dq.sq.wqe_cnt & (dq.sq.wqe_cnt - 1)) || (dq.rq.wqe_cnt & (dq.rq.wqe_cnt - 1)))
		return ql_error_set(-EPROTO,
				    "mlx5dv_init_obj(QP 0x%x): send queue of %u entries of %u "
				    "bytes, receive queue of %u: not the mlx5 geometry",
				    qp->qp_num, dq.sq.wqe_cnt, dq.sq.stride, dq.rq.wqe_cnt);
	memset(out, 0, sizeof(*out));
	out->qpn = qp->qp_num;
	out->sq.buf = dq.sq.buf;
	out->sq.wqe_cnt = dq.sq.wqe_cnt;
	out->sq.stride = dq.sq.stride;
	out->sq.dbrec = (volatile uint32_t *)&dq.dbrec[MLX5_SND_DBR];
	out->rq.buf = dq.rq.buf;
	out->rq.wqe_cnt = dq.rq.wqe_cnt;
	out->rq.stride = dq.rq.stride;
	out->rq.dbrec = (volatile uint32_t *)&dq.dbrec[MLX5_RCV_DBR];
	out->bf_reg = dq.bf.reg;
	out->bf_size = 0; /* see the top of this file */
	out->bf_offset = 0;
	return 0;
}

int ql__ibvp_mlx5_cq_view(struct ibv_cq *cq, struct ql_mlx5_cq *out)
{
	struct mlx5dv_cq dc;
	struct mlx5dv_obj obj;
	int ret;

	memset(&dc, 0, sizeof(dc));
	memset(&obj, 0, sizeof(obj));
	obj.cq.in = cq;
	obj.cq.out = &dc;
	ret = mlx5dv_init_obj(&obj, MLX5DV_OBJ_CQ);
	if (ret)
		return ql_error_set(ret > 0 ? -ret : -EIO, "mlx5dv_init_obj(CQ): %s",
				    strerror(ret > 0 ? ret : EIO));
	if ((dc.cqe_size != 64 && dc.cqe_size != 128) || !dc.cqe_cnt ||
	    (dc.cqe_cnt & (dc.cqe_cnt - 1)))
		return ql_error_set(-EPROTO,
				    "mlx5dv_init_obj(CQ 0x%x): %u CQEs of %u bytes: not the mlx5 "
				    "geometry",
				    dc.cqn, dc.cqe_cnt, dc.cqe_size);
	memset(out, 0, sizeof(*out));
	out->cqn = dc.cqn;
	out->buf = dc.buf;
	out->cqe_cnt = dc.cqe_cnt;
	out->cqe_size = dc.cqe_size;
	out->dbrec = (volatile uint32_t *)dc.dbrec;
	out->cons_index = 0;
	return 0;
}

#else /* no <infiniband/mlx5dv.h> at build time */

bool ql__ibvp_mlx5_supported(struct ibv_context *ctx)
{
	(void)ctx;
	return false;
}

struct ibv_qp *ql__ibvp_mlx5_create_qp(struct ibv_context *ctx, struct ibv_pd *pd,
				       struct ibv_qp_init_attr *attr)
{
	(void)ctx, (void)pd, (void)attr;
	errno = EOPNOTSUPP;
	return NULL;
}

int ql__ibvp_mlx5_qp_view(struct ibv_qp *qp, struct ql_mlx5_qp *out)
{
	(void)qp, (void)out;
	return ql_error_set(-EOPNOTSUPP, "ibv: built without <infiniband/mlx5dv.h>");
}

int ql__ibvp_mlx5_cq_view(struct ibv_cq *cq, struct ql_mlx5_cq *out)
{
	(void)cq, (void)out;
	return ql_error_set(-EOPNOTSUPP, "ibv: built without <infiniband/mlx5dv.h>");
}

#endif
