/* SPDX-License-Identifier: MIT */
/*
 * ibv_mlx5: the ibv provider's glue to rdma-core's mlx5 direct verbs, so
 * that a QL_QP_INIT_MLX5 QP / QL_CQ_INIT_MLX5 CQ on a ConnectX is driven by
 * qlink/mlx5.h on the device's own rings (mlx5dv_init_obj). Built against
 * <infiniband/mlx5dv.h> and libmlx5 where they are found (QL_HAVE_MLX5DV);
 * elsewhere every call reports -EOPNOTSUPP. Internal to the ibv provider.
 */
#ifndef QL_IBV_MLX5_H
#define QL_IBV_MLX5_H

#include <stdbool.h>

#include <infiniband/verbs.h>

#include "qlink/mlx5.h"

#define IBVP_HIDDEN __attribute__((visibility("hidden")))

/* Whether the device's libibverbs provider is mlx5. */
IBVP_HIDDEN bool ql__ibvp_mlx5_supported(struct ibv_context *ctx);
/* ibv_create_qp for a QP driven through qlink/mlx5.h: scatter-to-CQE off
 * (received payloads always land in the receive buffer). NULL with errno. */
IBVP_HIDDEN struct ibv_qp *ql__ibvp_mlx5_create_qp(struct ibv_context *ctx, struct ibv_pd *pd,
						   struct ibv_qp_init_attr *attr);
/* The queues of a fresh QP/CQ as qlink/mlx5.h views (counts 0). */
IBVP_HIDDEN int ql__ibvp_mlx5_qp_view(struct ibv_qp *qp, struct ql_mlx5_qp *out);
IBVP_HIDDEN int ql__ibvp_mlx5_cq_view(struct ibv_cq *cq, struct ql_mlx5_cq *out);

#endif
