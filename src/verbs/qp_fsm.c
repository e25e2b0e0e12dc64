/* SPDX-License-Identifier: MIT */
/*
 * The QP state machine's rules (qp_fsm.h), one copy for the software
 * providers.
 */
#include <errno.h>

#include "qlink/error.h"
#include "verbs/qp_fsm.h"

#define M(x) IBV_QP_##x
#define RC_UC 3
#define UC_ONLY 2

struct qp_trans {
	uint8_t valid; /* bit 0: RC, bit 1: UC */
	int req[2];
	int opt[2];
};

/* IBTA vol 1 table 93 / rdma-core's ib_modify_qp_is_ok, for RC and UC. */
static const struct qp_trans qp_trans[IBV_QPS_ERR + 1][IBV_QPS_ERR + 1] = {
	[IBV_QPS_RESET] = {
		[IBV_QPS_RESET] = {.valid = RC_UC},
		[IBV_QPS_INIT] = {.valid = RC_UC,
				  .req = {M(PKEY_INDEX) | M(PORT) | M(ACCESS_FLAGS),
					  M(PKEY_INDEX) | M(PORT) | M(ACCESS_FLAGS)}},
		[IBV_QPS_ERR] = {.valid = RC_UC},
	},
	[IBV_QPS_INIT] = {
		[IBV_QPS_RESET] = {.valid = RC_UC},
		[IBV_QPS_ERR] = {.valid = RC_UC},
		[IBV_QPS_INIT] = {.valid = RC_UC,
				  .opt = {M(PKEY_INDEX) | M(PORT) | M(ACCESS_FLAGS),
					  M(PKEY_INDEX) | M(PORT) | M(ACCESS_FLAGS)}},
		[IBV_QPS_RTR] = {.valid = RC_UC,
				 .req = {M(AV) | M(PATH_MTU) | M(DEST_QPN) | M(RQ_PSN) |
						 M(MAX_DEST_RD_ATOMIC) | M(MIN_RNR_TIMER),
					 M(AV) | M(PATH_MTU) | M(DEST_QPN) | M(RQ_PSN)},
				 .opt = {M(ALT_PATH) | M(ACCESS_FLAGS) | M(PKEY_INDEX),
					 M(ALT_PATH) | M(ACCESS_FLAGS) | M(PKEY_INDEX)}},
	},
	[IBV_QPS_RTR] = {
		[IBV_QPS_RESET] = {.valid = RC_UC},
		[IBV_QPS_ERR] = {.valid = RC_UC},
		[IBV_QPS_RTS] = {.valid = RC_UC,
				 .req = {M(SQ_PSN) | M(TIMEOUT) | M(RETRY_CNT) | M(RNR_RETRY) |
						 M(MAX_QP_RD_ATOMIC),
					 M(SQ_PSN)},
				 .opt = {M(CUR_STATE) | M(ALT_PATH) | M(ACCESS_FLAGS) |
						 M(PATH_MIG_STATE) | M(MIN_RNR_TIMER),
					 M(CUR_STATE) | M(ALT_PATH) | M(ACCESS_FLAGS) |
						 M(PATH_MIG_STATE)}},
	},
	[IBV_QPS_RTS] = {
		[IBV_QPS_RESET] = {.valid = RC_UC},
		[IBV_QPS_ERR] = {.valid = RC_UC},
		[IBV_QPS_RTS] = {.valid = RC_UC,
				 .opt = {M(CUR_STATE) | M(ACCESS_FLAGS) | M(ALT_PATH) |
						 M(PATH_MIG_STATE) | M(MIN_RNR_TIMER),
					 M(CUR_STATE) | M(ACCESS_FLAGS) | M(ALT_PATH) |
						 M(PATH_MIG_STATE)}},
		[IBV_QPS_SQD] = {.valid = RC_UC,
				 .opt = {M(EN_SQD_ASYNC_NOTIFY), M(EN_SQD_ASYNC_NOTIFY)}},
	},
	[IBV_QPS_SQD] = {
		[IBV_QPS_RESET] = {.valid = RC_UC},
		[IBV_QPS_ERR] = {.valid = RC_UC},
		[IBV_QPS_RTS] = {.valid = RC_UC,
				 .opt = {M(CUR_STATE) | M(ACCESS_FLAGS) | M(ALT_PATH) |
						 M(PATH_MIG_STATE) | M(MIN_RNR_TIMER),
					 M(CUR_STATE) | M(ACCESS_FLAGS) | M(ALT_PATH) |
						 M(PATH_MIG_STATE)}},
		[IBV_QPS_SQD] = {.valid = RC_UC,
				 .opt = {M(AV) | M(ALT_PATH) | M(ACCESS_FLAGS) | M(PKEY_INDEX) |
						 M(PATH_MIG_STATE) | M(TIMEOUT) | M(RETRY_CNT) |
						 M(RNR_RETRY) | M(MAX_QP_RD_ATOMIC) |
						 M(MAX_DEST_RD_ATOMIC) | M(MIN_RNR_TIMER),
					 M(AV) | M(ALT_PATH) | M(ACCESS_FLAGS) | M(PKEY_INDEX) |
						 M(PATH_MIG_STATE)}},
	},
	[IBV_QPS_SQE] = {
		[IBV_QPS_RESET] = {.valid = RC_UC},
		[IBV_QPS_ERR] = {.valid = RC_UC},
		[IBV_QPS_RTS] = {.valid = UC_ONLY,
				 .opt = {0, M(CUR_STATE) | M(ACCESS_FLAGS)}},
	},
	[IBV_QPS_ERR] = {
		[IBV_QPS_RESET] = {.valid = RC_UC},
		[IBV_QPS_ERR] = {.valid = RC_UC},
	},
};

static int check_values(const struct ibv_qp_attr *a, int mask, const struct ql_qp_fsm_limits *lim)
{
	const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

	if ((mask & M(PORT)) && a->port_num != 1)
		return ql_error_set(-EINVAL,
				    "ql_qp_modify: port_num %u does not exist (one port, 1)",
				    a->port_num);
	if ((mask & M(PKEY_INDEX)) && a->pkey_index != 0)
		return ql_error_set(-EINVAL,
				    "ql_qp_modify: pkey_index %u beyond the P_Key table (1)",
				    a->pkey_index);
	if ((mask & M(ACCESS_FLAGS)) && (a->qp_access_flags & ~(unsigned int)access))
		return ql_error_set(-EINVAL, "ql_qp_modify: qp_access_flags 0x%x not supported",
				    a->qp_access_flags);
	if ((mask & M(PATH_MTU)) && (a->path_mtu < IBV_MTU_256 || a->path_mtu > IBV_MTU_4096))
		return ql_error_set(-EINVAL, "ql_qp_modify: path_mtu %d invalid", a->path_mtu);
	if ((mask & M(DEST_QPN)) && a->dest_qp_num > 0xffffff)
		return ql_error_set(-EINVAL, "ql_qp_modify: dest_qp_num beyond 24 bits");
	if ((mask & M(MAX_DEST_RD_ATOMIC)) && a->max_dest_rd_atomic > lim->max_rd_atomic)
		return ql_error_set(-EINVAL, "ql_qp_modify: max_dest_rd_atomic above %u",
				    lim->max_rd_atomic);
	if ((mask & M(MAX_QP_RD_ATOMIC)) && a->max_rd_atomic > lim->max_rd_atomic)
		return ql_error_set(-EINVAL, "ql_qp_modify: max_rd_atomic above %u",
				    lim->max_rd_atomic);
	if ((mask & M(MIN_RNR_TIMER)) && a->min_rnr_timer > 31)
		return ql_error_set(-EINVAL, "ql_qp_modify: min_rnr_timer above 31");
	if ((mask & M(TIMEOUT)) && a->timeout > 31)
		return ql_error_set(-EINVAL, "ql_qp_modify: timeout above 31");
	if ((mask & M(RETRY_CNT)) && a->retry_cnt > 7)
		return ql_error_set(-EINVAL, "ql_qp_modify: retry_cnt above 7");
	if ((mask & M(RNR_RETRY)) && a->rnr_retry > 7)
		return ql_error_set(-EINVAL, "ql_qp_modify: rnr_retry above 7");
	return 0;
}

int ql_qp_fsm_check(enum ibv_qp_type type, enum ibv_qp_state cur, const struct ibv_qp_attr *a,
		    int mask, const struct ql_qp_fsm_limits *lim, enum ibv_qp_state *next)
{
	int t = type == IBV_QPT_RC ? 0 : 1;
	const struct qp_trans *tr;
	enum ibv_qp_state n;
	int allowed;

	if ((mask & M(CUR_STATE)) && a->cur_qp_state != cur)
		return ql_error_set(-EINVAL, "ql_qp_modify: cur_qp_state %d but the QP is in %d",
				    a->cur_qp_state, cur);
	n = (mask & M(STATE)) ? a->qp_state : cur;
	if ((unsigned int)n > IBV_QPS_ERR)
		return ql_error_set(-EINVAL, "ql_qp_modify: unknown QP state %d", n);
	tr = &qp_trans[cur][n];
	if (!(tr->valid & (1 << t)))
		return ql_error_set(-EINVAL, "ql_qp_modify: no transition from state %d to %d", cur,
				    n);
	allowed = tr->req[t] | tr->opt[t] | M(STATE);
	if ((mask & tr->req[t]) != tr->req[t] || (mask & ~allowed))
		return ql_error_set(
			-EINVAL,
			"ql_qp_modify: state %d -> %d needs attributes 0x%x and allows 0x%x; "
			"got 0x%x",
			cur, n, tr->req[t], allowed, mask);
	*next = n;
	return check_values(a, mask, lim);
}
