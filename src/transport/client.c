/* SPDX-License-Identifier: MIT */
/*
 * ql_client (qlink/client.h): open a client of a transport, and what every
 * client does the same way. The hot-path calls are the header's inline
 * dispatch; the implementations are ring.c, hsb_client.c and udp_client.c.
 */
#include <errno.h>

#include "qlink/client.h"
#include "qlink/clock.h"
#include "qlink/error.h"

static const struct ql__client_ops *ops_of(const struct ql_client *cl)
{
	return ((const struct ql__client_head *)(const void *)cl)->ops;
}

int ql_client_create(const struct ql_client_config *cfg, struct ql_client **out)
{
	struct ql_ring_client *rc = NULL;
	struct ql_hsb_client *hc = NULL;
	struct ql_udp_client *uc = NULL;
	int ret;

	if (!cfg || !out)
		return -EINVAL;
	switch (cfg->transport) {
	case QL_CLIENT_RING:
		if (!cfg->dev || !cfg->server)
			return ql_error_set(-EINVAL, "client: the ring needs a device and the "
						     "server's ring parameters");
		ret = ql_ring_client_create(cfg->dev, cfg->server, &cfg->ring, &rc);
		*out = ret ? NULL : ql_client_from_ring(rc);
		return ret;
	case QL_CLIENT_HSB:
		if (!cfg->dev)
			return ql_error_set(-EINVAL, "client: hsb needs a device");
		ret = ql_hsb_client_create(cfg->dev, &cfg->hsb, &hc);
		*out = ret ? NULL : ql_client_from_hsb(hc);
		return ret;
	case QL_CLIENT_UDP:
		ret = ql_udp_client_create(&cfg->udp, &uc);
		*out = ret ? NULL : ql_client_from_udp(uc);
		return ret;
	}
	return ql_error_set(-EINVAL, "client: unknown transport %d", (int)cfg->transport);
}

int ql_client_local_params(struct ql_client *cl, struct ql_conn_params *p)
{
	if (!cl || !p)
		return -EINVAL;
	return ops_of(cl)->local_params(cl, p);
}

int ql_client_connect(struct ql_client *cl, const struct ql_conn_params *server,
		      const struct ql_qp_connect_opts *opts)
{
	if (!cl)
		return -EINVAL;
	return ops_of(cl)->connect(cl, server, opts);
}

int ql_client_open(const struct ql_client_config *cfg, const struct ql_conn_params *server,
		   const struct ql_qp_connect_opts *opts, struct ql_client **out,
		   struct ql_conn_params *local)
{
	struct ql_client *cl;
	int ret;

	if (!out)
		return -EINVAL;
	*out = NULL;
	ret = ql_client_create(cfg, &cl);
	if (ret)
		return ret;
	ret = local ? ql_client_local_params(cl, local) : 0;
	if (!ret)
		ret = ql_client_connect(cl, server, opts);
	if (ret) {
		ql_client_destroy(cl);
		return ret;
	}
	*out = cl;
	return 0;
}

void ql_client_destroy(struct ql_client *cl)
{
	if (cl)
		ops_of(cl)->destroy(cl);
}

int ql_client_wait(struct ql_client *cl, struct ql_ring_response *out, uint64_t timeout_ns)
{
	uint64_t end;
	int n;

	if (!cl || !out)
		return -EINVAL;
	end = ql_clock_ns() + timeout_ns;
	for (;;) {
		n = ql_client_poll(cl, out, 1);
		if (n)
			return n;
		if (ql_clock_ns() >= end)
			return -ETIMEDOUT;
	}
}

/* Each transport's client begins with the ql__client_head its create set. */
struct ql_client *ql_client_from_ring(struct ql_ring_client *rc)
{
	return (struct ql_client *)(void *)rc;
}

struct ql_client *ql_client_from_hsb(struct ql_hsb_client *hc)
{
	return (struct ql_client *)(void *)hc;
}

struct ql_client *ql_client_from_udp(struct ql_udp_client *uc)
{
	return (struct ql_client *)(void *)uc;
}

struct ql_ring_client *ql_client_ring(struct ql_client *cl)
{
	return cl && ql_client_transport(cl) == QL_CLIENT_RING ?
		       (struct ql_ring_client *)(void *)cl :
		       NULL;
}

struct ql_hsb_client *ql_client_hsb(struct ql_client *cl)
{
	return cl && ql_client_transport(cl) == QL_CLIENT_HSB ? (struct ql_hsb_client *)(void *)cl :
								NULL;
}

struct ql_udp_client *ql_client_udp(struct ql_client *cl)
{
	return cl && ql_client_transport(cl) == QL_CLIENT_UDP ? (struct ql_udp_client *)(void *)cl :
								NULL;
}
