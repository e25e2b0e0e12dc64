/*
 * The provider-neutral verbs layer: opens devices by URI and dispatches
 * setup calls to the provider's ops table (see provider.h).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "qlink/error.h"
#include "qlink/verbs.h"
#include "verbs/provider.h"

int ql_device_open(const char *uri, struct ql_device **dev)
{
	const char *sep;
	size_t slen;

	ql_error_clear();
	if (!uri || !dev)
		return ql_error_set(-EINVAL, "ql_device_open: NULL argument");
	*dev = NULL;
	if (strlen(uri) >= QL_DEVICE_URI_MAX)
		return ql_error_set(-ENAMETOOLONG, "device URI longer than %d bytes",
				    QL_DEVICE_URI_MAX - 1);
	sep = strstr(uri, "://");
	if (!sep)
		return ql_error_set(
			-EINVAL,
			"'%s' is not a device URI (expected soft://loop, soft+shm://NAME, "
			"soft+udp://..., or ibv://DEVICE)",
			uri);
	slen = (size_t)(sep - uri);
	if (slen == 4 && !strncmp(uri, "soft", 4))
		return ql_soft_open(uri, "loop", sep + 3, dev);
	if (slen == 8 && !strncmp(uri, "soft+shm", 8))
		return ql_soft_open(uri, "shm", sep + 3, dev);
	if (slen == 8 && !strncmp(uri, "soft+udp", 8))
		return ql_error_set(
			-EPROTONOSUPPORT,
			"'%s': the soft+udp wire (RoCEv2 over UDP) is not supported yet", uri);
	if (slen == 3 && !strncmp(uri, "ibv", 3))
		return ql_ibv_open(uri, sep + 3, dev);
	return ql_error_set(-EPROTONOSUPPORT,
			    "'%s': unknown device scheme '%.*s' (known: soft, soft+shm, ibv; "
			    "reserved: soft+udp)",
			    uri, (int)slen, uri);
}

int ql_device_list(char (*uris)[QL_DEVICE_URI_MAX], int max)
{
	struct ibv_device **list;
	int n = 0, nibv = 0;

	if (max < 0 || (max && !uris))
		return -EINVAL;
	if (n < max)
		snprintf(uris[n], QL_DEVICE_URI_MAX, "soft://loop");
	n++;
	if (n < max)
		snprintf(uris[n], QL_DEVICE_URI_MAX, "soft+shm://NAME");
	n++;
	list = ibv_get_device_list(&nibv);
	for (int i = 0; list && i < nibv; i++, n++)
		if (n < max)
			snprintf(uris[n], QL_DEVICE_URI_MAX, "ibv://%s",
				 ibv_get_device_name(list[i]));
	if (list)
		ibv_free_device_list(list);
	return n;
}

int ql_device_close(struct ql_device *dev)
{
	if (!dev)
		return -EINVAL;
	return dev->ops->close(dev);
}

int ql_device_query(struct ql_device *dev, struct ql_device_attr *attr)
{
	if (!dev || !attr)
		return -EINVAL;
	return dev->ops->query(dev, attr);
}

int ql_device_counters(struct ql_device *dev, struct ql_device_counters *c)
{
	if (!dev || !c)
		return -EINVAL;
	return dev->ops->counters(dev, c);
}

int ql_pd_alloc(struct ql_device *dev, struct ql_pd **pd)
{
	if (!dev || !pd)
		return -EINVAL;
	return dev->ops->pd_alloc(dev, pd);
}

int ql_pd_free(struct ql_pd *pd)
{
	if (!pd)
		return -EINVAL;
	return pd->dev->ops->pd_free(pd);
}

void *ql_mem_alloc(size_t length)
{
	return ql_soft_mem_alloc(length);
}

void ql_mem_free(void *addr)
{
	ql_soft_mem_free(addr);
}

int ql_mr_reg(struct ql_pd *pd, void *addr, size_t length, int access, struct ql_mr **mr)
{
	if (!pd || !mr)
		return -EINVAL;
	return pd->dev->ops->mr_reg(pd, addr, length, access, mr);
}

int ql_mr_dereg(struct ql_mr *mr)
{
	if (!mr)
		return -EINVAL;
	return mr->pd->dev->ops->mr_dereg(mr);
}

uint32_t ql_mr_lkey(const struct ql_mr *mr)
{
	return mr->lkey;
}

uint32_t ql_mr_rkey(const struct ql_mr *mr)
{
	return mr->rkey;
}

void *ql_mr_addr(const struct ql_mr *mr)
{
	return mr->addr;
}

size_t ql_mr_length(const struct ql_mr *mr)
{
	return mr->length;
}

int ql_cq_create(struct ql_device *dev, int cqe, struct ql_cq **cq)
{
	if (!dev || !cq)
		return -EINVAL;
	return dev->ops->cq_create(dev, cqe, cq);
}

int ql_cq_destroy(struct ql_cq *cq)
{
	if (!cq)
		return -EINVAL;
	return cq->dev->ops->cq_destroy(cq);
}

int ql_qp_create(struct ql_pd *pd, struct ql_qp_init_attr *attr, struct ql_qp **qp)
{
	if (!pd || !attr || !qp)
		return -EINVAL;
	return pd->dev->ops->qp_create(pd, attr, qp);
}

int ql_qp_destroy(struct ql_qp *qp)
{
	if (!qp)
		return -EINVAL;
	return qp->dev->ops->qp_destroy(qp);
}

int ql_qp_modify(struct ql_qp *qp, struct ibv_qp_attr *attr, int attr_mask)
{
	if (!qp || !attr)
		return -EINVAL;
	return qp->dev->ops->qp_modify(qp, attr, attr_mask);
}

int ql_qp_query(struct ql_qp *qp, struct ibv_qp_attr *attr, int attr_mask,
		struct ql_qp_init_attr *init_attr)
{
	if (!qp || !attr)
		return -EINVAL;
	return qp->dev->ops->qp_query(qp, attr, attr_mask, init_attr);
}

uint32_t ql_qp_num(const struct ql_qp *qp)
{
	return qp->qp_num;
}

enum ibv_qp_state ql_qp_state(const struct ql_qp *qp)
{
	struct ibv_qp_attr attr;

	memset(&attr, 0, sizeof(attr));
	if (qp->dev->ops->qp_query((struct ql_qp *)qp, &attr, IBV_QP_STATE, NULL))
		return IBV_QPS_UNKNOWN;
	return attr.qp_state;
}

uint64_t ql_rnr_timer_ns(uint8_t encoded)
{
	/* IBTA spec vol 1, table 45 (RNR NAK timer field), in units of 10 us. */
	static const uint32_t t10us[32] = {
		65536, 1,    2,	   3,	 4,    6,     8,     12,    16,	   24,	  32,
		48,    64,   96,   128,	 192,  256,   384,   512,   768,   1024,  1536,
		2048,  3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152,
	};
	return (uint64_t)t10us[encoded & 31] * 10000ull;
}
