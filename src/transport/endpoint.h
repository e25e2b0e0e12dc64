/* SPDX-License-Identifier: MIT */
/*
 * The verbs endpoint both sides of a ring are built on: a protection domain
 * (the endpoint's own, or one shared by several endpoints), a send and a
 * receive CQ and a connected QP sized for them (RC, or UC for the ring over
 * unreliable connections), with the device's inline limit (internal; used
 * by the verbs channel and the ring client).
 */
#ifndef QL_TRANSPORT_ENDPOINT_H
#define QL_TRANSPORT_ENDPOINT_H

#include <stdbool.h>
#include <stdint.h>

#include "qlink/verbs.h"

/* Inline data beyond this is not worth the copy into the WQE. */
#define QL_ENDPOINT_MAX_INLINE 256u

struct ql_endpoint {
	struct ql_device *dev;
	struct ql_pd *pd;
	bool own_pd; /* allocated here (freed on close), not shared */
	struct ql_cq *scq;
	struct ql_cq *rcq;
	struct ql_qp *qp;
	enum ibv_qp_type qp_type; /* IBV_QPT_RC or IBV_QPT_UC */
	uint32_t send_wr;	  /* as granted: the request, capped by the device */
	uint32_t recv_wr;
	uint32_t max_inline; /* as granted by the QP */
};

/*
 * Open the endpoint's PD (shared_pd, or a new one), before the caller
 * registers its memory with ep->pd. send_wr and recv_wr (>= 1) size the
 * queues and CQs; send_wr is capped at the device's max_qp_wr.
 */
int ql_endpoint_open_pd(struct ql_device *dev, struct ql_pd *shared_pd, struct ql_endpoint *ep);
/* Then the CQs and the QP: qp_type IBV_QPT_RC (or 0) or IBV_QPT_UC, else
 * -EINVAL. */
int ql_endpoint_create_qp(struct ql_endpoint *ep, uint32_t send_wr, uint32_t recv_wr,
			  enum ibv_qp_type qp_type);
/* Destroy what was made (QP, CQs, and the PD when it is the endpoint's own);
 * safe on a partly opened or zeroed endpoint. The caller deregisters its
 * MRs first. */
void ql_endpoint_close_qp(struct ql_endpoint *ep);
void ql_endpoint_close_pd(struct ql_endpoint *ep);

#endif
