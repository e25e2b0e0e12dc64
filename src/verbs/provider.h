/* SPDX-License-Identifier: MIT */
/*
 * provider: how a verbs provider plugs into the verbs layer.
 *
 * As in rdma-core, each provider fills an ops table and embeds the base
 * objects below as the first member of its own. The verbs layer dispatches
 * setup calls through the table; the hot path (post, poll) goes through the
 * per-object ql__qp_ops/ql__cq_ops of the public header with no extra hop.
 * How a provider is found (by URI scheme) is the registry's: registry.h.
 *
 * What every provider would otherwise repeat lives in the verbs layer: the
 * base fields of devices, PDs, MRs and CQs (dev, pd, addr, length, access,
 * uri, provider), the PD/CQ counts behind -EBUSY on close, the argument
 * checks of ql_mr_reg, and the bookkeeping of PD-scoped memory. A provider
 * fills only what is its own (keys, QP numbers, its handles).
 */
#ifndef QL_VERBS_PROVIDER_H
#define QL_VERBS_PROVIDER_H

#include <stdatomic.h>
#include <stdbool.h>

#include "qlink/verbs.h"

struct ql_provider;

struct ql_device_ops {
	int (*close)(struct ql_device *dev);
	int (*query)(struct ql_device *dev, struct ql_device_attr *attr);
	int (*counters)(struct ql_device *dev, struct ql_device_counters *c);
	int (*pd_alloc)(struct ql_device *dev, struct ql_pd **pd);
	int (*pd_free)(struct ql_pd *pd);
	int (*mr_reg)(struct ql_pd *pd, void *addr, size_t length, int access, struct ql_mr **mr);
	int (*mr_dereg)(struct ql_mr *mr);
	int (*cq_create)(struct ql_device *dev, int cqe, struct ql_cq **cq);
	int (*cq_destroy)(struct ql_cq *cq);
	int (*qp_create)(struct ql_pd *pd, struct ql_qp_init_attr *attr, struct ql_qp **qp);
	int (*qp_destroy)(struct ql_qp *qp);
	int (*qp_modify)(struct ql_qp *qp, struct ibv_qp_attr *attr, int attr_mask);
	int (*qp_query)(struct ql_qp *qp, struct ibv_qp_attr *attr, int attr_mask,
			struct ql_qp_init_attr *init_attr);
	/* optional (NULL: -EOPNOTSUPP): remote addresses relative to iova */
	int (*mr_reg_iova)(struct ql_pd *pd, void *addr, size_t length, uint64_t iova, int access,
			   struct ql_mr **mr);
	/* optional (NULL: -EOPNOTSUPP): ql_qp_fault */
	int (*qp_fault)(struct ql_qp *qp, const char *spec);
	/* optional (NULL: -EOPNOTSUPP): mlx5 queues (qlink/mlx5.h,
	 * docs/mlx5.md). cq_create_flags is called for flags != 0 only (the
	 * verbs layer has checked them: QL_CQ_INIT_MLX5); qp_create sees
	 * attr->flags (QL_QP_INIT_MLX5 only, its CQs checked to be mlx5 CQs)
	 * and fails with -EOPNOTSUPP where it cannot make mlx5 queues.
	 * qp_mlx5/cq_mlx5 are called for objects created with the flag only.
	 * The verbs layer makes the ops of such QPs/CQs fail with -EINVAL. */
	int (*cq_create_flags)(struct ql_device *dev, int cqe, unsigned int flags,
			       struct ql_cq **cq);
	int (*qp_mlx5)(struct ql_qp *qp, struct ql_mlx5_qp *out);
	/* optional (NULL: GPU device memory is registered through mr_reg,
	 * peer memory): register `length` bytes at `offset` into the dmabuf
	 * `fd` (the caller closes it after), remote addresses from iova
	 * (ibv_reg_dmabuf_mr). */
	int (*mr_reg_dmabuf)(struct ql_pd *pd, uint64_t offset, size_t length, uint64_t iova,
			     int fd, int access, struct ql_mr **mr);
	int (*cq_mlx5)(struct ql_cq *cq, struct ql_mlx5_cq *out);
	/* optional (NULL: ql_device_progress returns 0): run the device's
	 * software-NIC work (receive, transmit, timers) in the caller, bounded
	 * per call; >0 when something moved, 0 when nothing did. Hot path: no
	 * allocation, lock or syscall beyond one recvmmsg/sendmmsg. */
	int (*progress)(struct ql_device *dev);
	/* optional (NULL: false): whether the device's transport — its ACKs,
	 * retransmissions, the peer's requests — moves only inside the
	 * application's calls (soft+udp's progress=caller, docs/progress.md
	 * §3, §4), so that a peer's message arriving while the application
	 * makes no call waits unacknowledged */
	bool (*caller)(const struct ql_device *dev);
};

/* Set by the verbs layer after the provider's open/alloc returns; the
 * provider may read them (uri also while it opens: it is given). */
struct ql_device {
	const struct ql_device_ops *ops; /* the provider's; set by its open */
	const struct ql_provider *provider;
	char uri[QL_DEVICE_URI_MAX];
	_Atomic uint32_t npd; /* close is -EBUSY while PDs or CQs exist */
	_Atomic uint32_t ncq;
};

/* ql_device_ops.caller, false where the provider has none */
static inline bool ql__device_caller(const struct ql_device *dev)
{
	return dev->ops->caller && dev->ops->caller(dev);
}

struct ql_pd_mem; /* one ql_pd_mem_alloc allocation (verbs.c) */

struct ql_pd {
	struct ql_device *dev;
	struct ql_pd_mem *mem; /* outstanding ql_pd_mem_alloc memory */
};

struct ql_mr {
	struct ql_pd *pd;
	void *addr;
	size_t length;
	uint32_t lkey;
	uint32_t rkey;
	int access;
	enum ql_mr_gpu_reg gpu_reg; /* verbs layer: how GPU memory was registered */
	struct ql_mr *live_next;    /* verbs layer: every live MR (ql_pd_mem_free) */
};

struct ql_cq {
	struct ql__cq_head head; /* must stay first: the inline poll reads it */
	struct ql_device *dev;
	int cqe;
	unsigned int flags; /* QL_CQ_INIT_*: set by the verbs layer */
};

struct ql_qp {
	struct ql__qp_head head; /* must stay first: the inline posts read it */
	struct ql_device *dev;
	struct ql_pd *pd;
	uint32_t qp_num;
	uint32_t init_psn; /* the first PSN it sends: ql_qp_local_params gives
			      it, ql_qp_connect uses it (the provider may
			      choose it at create, e.g. at random; 0 else) */
	enum ibv_qp_type qp_type;
	unsigned int flags; /* QL_QP_INIT_*: set by the verbs layer */
};

#endif
