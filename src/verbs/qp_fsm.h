/* SPDX-License-Identifier: MIT */
/*
 * qp_fsm: the InfiniBand QP state machine's rules, shared by the software
 * providers (soft, soft+udp).
 *
 * One table of legal transitions with their required and optional
 * attribute masks (IBTA vol 1 table 93, as rdma-core's ib_modify_qp_is_ok)
 * and the range checks of the attribute values, so that every software
 * provider refuses exactly the same modify calls with the same detail.
 */
#ifndef QL_VERBS_QP_FSM_H
#define QL_VERBS_QP_FSM_H

#include <infiniband/verbs.h>
#include <stdint.h>

#include "verbs/registry.h"

/* The provider's limits the attribute values are checked against. */
struct ql_qp_fsm_limits {
	uint32_t max_rd_atomic; /* max_dest_rd_atomic and max_rd_atomic */
};

/* Check a modify of a QP of type `type` (RC or UC) in state `cur`: the
 * cur_qp_state if given, the transition, the attribute masks and values.
 * Sets *next. 0, or -EINVAL with a detail (ql_error_set). */
QL_PROVIDER_HIDDEN int ql_qp_fsm_check(enum ibv_qp_type type, enum ibv_qp_state cur,
				       const struct ibv_qp_attr *a, int mask,
				       const struct ql_qp_fsm_limits *lim, enum ibv_qp_state *next);

#endif
