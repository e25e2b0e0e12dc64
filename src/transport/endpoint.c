/* SPDX-License-Identifier: MIT */
/* The verbs endpoint of the channel and the ring client (endpoint.h). */
#include "transport/endpoint.h"

#include <errno.h>
#include <string.h>

#include "qlink/error.h"

int ql_endpoint_open_pd(struct ql_device *dev, struct ql_pd *shared_pd, struct ql_endpoint *ep)
{
	memset(ep, 0, sizeof(*ep));
	ep->dev = dev;
	if (shared_pd) {
		ep->pd = shared_pd;
		return 0;
	}
	ep->own_pd = true;
	return ql_pd_alloc(dev, &ep->pd);
}

int ql_endpoint_create_qp(struct ql_endpoint *ep, uint32_t send_wr, uint32_t recv_wr,
			  enum ibv_qp_type qp_type)
{
	struct ql_device_attr attr;
	struct ql_qp_setup s;
	struct ibv_qp_cap cap;
	int ret;

	if (!qp_type)
		qp_type = IBV_QPT_RC;
	if (qp_type != IBV_QPT_RC && qp_type != IBV_QPT_UC)
		return ql_error_set(-EINVAL, "endpoint: QP type %d is neither RC nor UC",
				    (int)qp_type);
	ep->qp_type = qp_type;
	ret = ql_device_query(ep->dev, &attr);
	if (ret)
		return ret;
	if (send_wr > (uint32_t)attr.dev.max_qp_wr)
		send_wr = (uint32_t)attr.dev.max_qp_wr;
	ep->send_wr = send_wr ? send_wr : 1;
	ep->recv_wr = recv_wr ? recv_wr : 1;
	s = (struct ql_qp_setup){ .qp_type = qp_type,
				  .send_wr = ep->send_wr,
				  .recv_wr = ep->recv_wr,
				  .max_inline = QL_ENDPOINT_MAX_INLINE };
	ret = ql_qp_setup(ep->pd, &s, &ep->scq, &ep->rcq, &ep->qp, &cap);
	if (ret)
		return ret;
	ep->max_inline = cap.max_inline_data;
	return 0;
}

void ql_endpoint_close_qp(struct ql_endpoint *ep)
{
	if (ep->qp)
		ql_qp_destroy(ep->qp);
	if (ep->scq)
		ql_cq_destroy(ep->scq);
	if (ep->rcq)
		ql_cq_destroy(ep->rcq);
	ep->qp = NULL;
	ep->scq = ep->rcq = NULL;
}

void ql_endpoint_close_pd(struct ql_endpoint *ep)
{
	if (ep->pd && ep->own_pd)
		ql_pd_free(ep->pd);
	ep->pd = NULL;
}
