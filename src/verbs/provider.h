/*
 * provider: how a verbs provider plugs into the verbs layer.
 *
 * As in rdma-core, each provider fills an ops table and embeds the base
 * objects below as the first member of its own. The verbs layer dispatches
 * setup calls through the table; the hot path (post, poll) goes through the
 * per-object ql__qp_ops/ql__cq_ops of the public header with no extra hop.
 */
#ifndef QL_VERBS_PROVIDER_H
#define QL_VERBS_PROVIDER_H

#include "qlink/verbs.h"

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
};

struct ql_device {
	const struct ql_device_ops *ops;
	char uri[QL_DEVICE_URI_MAX];
};

struct ql_pd {
	struct ql_device *dev;
};

struct ql_mr {
	struct ql_pd *pd;
	void *addr;
	size_t length;
	uint32_t lkey;
	uint32_t rkey;
	int access;
};

struct ql_cq {
	struct ql__cq_head head; /* must stay first: the inline poll reads it */
	struct ql_device *dev;
	int cqe;
};

struct ql_qp {
	struct ql__qp_head head; /* must stay first: the inline posts read it */
	struct ql_device *dev;
	struct ql_pd *pd;
	uint32_t qp_num;
	enum ibv_qp_type qp_type;
};

/* Provider entry points, by URI scheme. `rest` is the URI after "://". */
int ql_soft_open(const char *uri, const char *wire, const char *rest, struct ql_device **dev);
int ql_ibv_open(const char *uri, const char *rest, struct ql_device **dev);
void *ql_soft_mem_alloc(size_t length);
void ql_soft_mem_free(void *addr);

#endif
