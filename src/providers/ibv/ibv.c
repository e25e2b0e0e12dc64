/* SPDX-License-Identifier: MIT */
/*
 * ibv provider: real RDMA devices (ConnectX, Linux Soft-RoCE) through
 * libibverbs. The verbs API already speaks libibverbs' structs, so every
 * call maps onto its libibverbs counterpart; the hot path hands work
 * requests and completions through untouched (no copies, one extra
 * indirect call). Setup calls translate only what differs: the QP's CQ
 * handles, and the address vector, where the device's chosen port and GID
 * index are filled in.
 *
 * URI: ibv://DEVICE[:PORT[:GID_INDEX]]. Without a GID index the provider
 * picks the port's first RoCE v2 GID that maps an IPv4 address (then any
 * RoCE v2 GID, then index 0), as perftest's -x does by hand.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "providers/ibv/ibv_mlx5.h"
#include "qlink/error.h"
#include "verbs/registry.h"

struct ibvp_device {
	struct ql_device base;
	struct ibv_context *ctx;
	char name[QL_DEVICE_NAME_MAX];
	uint8_t port;
	int gid_index;
	union ibv_gid gid;
	uint32_t max_inline;
};

struct ibvp_pd {
	struct ql_pd base;
	struct ibv_pd *pd;
};

struct ibvp_mr {
	struct ql_mr base;
	struct ibv_mr *mr;
};

struct ibvp_cq {
	struct ql_cq base;
	struct ibv_cq *cq;
};

struct ibvp_qp {
	struct ql_qp base;
	struct ibv_qp *qp;
	struct ibvp_cq *send_cq;
	struct ibvp_cq *recv_cq;
	int sq_sig_all;
	void *qp_context;
};

static const struct ql_device_ops ibvp_device_ops;
static const struct ql__qp_ops ibvp_qp_ops;
static const struct ql__cq_ops ibvp_cq_ops;

static struct ibvp_device *to_dev(struct ql_device *d)
{
	return (struct ibvp_device *)d;
}

/* libibverbs returns positive errno values (or -1 with errno). */
static int neg(int ret)
{
	if (ret > 0)
		return -ret;
	if (ret < 0)
		return errno ? -errno : -EIO;
	return 0;
}

static int pick_gid(struct ibvp_device *dev, int gid_tbl_len)
{
	int any_v2 = -1;

	for (int i = 0; i < gid_tbl_len; i++) {
		struct ibv_gid_entry e;

		if (ibv_query_gid_ex(dev->ctx, dev->port, (uint32_t)i, &e, 0))
			continue;
		if (e.gid_type != IBV_GID_TYPE_ROCE_V2)
			continue;
		if (any_v2 < 0)
			any_v2 = i;
		/* ::ffff:a.b.c.d */
		if (!memcmp(e.gid.raw, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12))
			return i;
	}
	return any_v2 >= 0 ? any_v2 : 0;
}

/* Whether the device creates an RC QP with this much inline data; what it
 * granted (at least the request) in *granted. */
static bool inline_ok(struct ibv_pd *pd, struct ibv_cq *cq, uint32_t n, uint32_t *granted)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq,
		.recv_cq = cq,
		.cap = { .max_send_wr = 4,
			 .max_recv_wr = 4,
			 .max_send_sge = 1,
			 .max_recv_sge = 1,
			 .max_inline_data = n },
		.qp_type = IBV_QPT_RC,
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);

	if (!qp)
		return false;
	*granted = ia.cap.max_inline_data > n ? ia.cap.max_inline_data : n;
	ibv_destroy_qp(qp);
	return true;
}

/* The inline limit is a QP property, not a device attribute: find the
 * largest a QP of this device is created with (bisection, up to 4 KiB), so
 * that max_inline_data is exact: one more byte is refused. */
static uint32_t probe_inline(struct ibv_context *ctx)
{
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = pd ? ibv_create_cq(ctx, 4, NULL, NULL, 0) : NULL;
	uint32_t lo = 0, hi = 4096, g = 0;

	if (!cq)
		goto out;
	if (inline_ok(pd, cq, hi, &g)) {
		lo = g;
	} else {
		/* invariant: lo is granted, hi is refused */
		while (hi - lo > 1) {
			uint32_t mid = lo + (hi - lo) / 2;

			if (inline_ok(pd, cq, mid, &g))
				lo = g < hi ? g : mid;
			else
				hi = mid;
		}
	}
out:
	if (cq)
		ibv_destroy_cq(cq);
	if (pd)
		ibv_dealloc_pd(pd);
	return lo;
}

static int ibvp_open(const char *uri, const char *scheme, const char *rest, struct ql_device **out)
{
	char name[QL_DEVICE_NAME_MAX], found[512] = "";
	struct ibv_device **list;
	struct ibv_port_attr pattr;
	struct ibvp_device *dev;
	struct ibv_context *ctx = NULL;
	unsigned long port = 1;
	long gidx = -1;
	const char *colon = strchr(rest, ':');
	size_t nlen = colon ? (size_t)(colon - rest) : strlen(rest);
	int n = 0, ret;

	(void)scheme; /* the one scheme, "ibv" */
	if (!nlen || nlen >= sizeof(name))
		return ql_error_set(-EINVAL, "'%s': expected ibv://DEVICE[:PORT[:GID_INDEX]]", uri);
	memcpy(name, rest, nlen);
	name[nlen] = '\0';
	if (colon) {
		char *end;

		port = strtoul(colon + 1, &end, 10);
		if (end == colon + 1 || port < 1 || port > 255 || (*end && *end != ':'))
			return ql_error_set(-EINVAL, "'%s': bad port number", uri);
		if (*end == ':') {
			const char *g = end + 1;

			gidx = strtol(g, &end, 10);
			if (end == g || *end || gidx < 0 || gidx > 65535)
				return ql_error_set(-EINVAL, "'%s': bad GID index", uri);
		}
	}

	list = ibv_get_device_list(&n);
	if (!list) {
		/* ENOSYS: no RDMA subsystem in this kernel at all */
		snprintf(found, sizeof(found), "none: the kernel offers no RDMA devices (%s)",
			 strerror(errno));
		n = 0;
	}
	for (int i = 0; i < n; i++) {
		const char *dn = ibv_get_device_name(list[i]);

		if (!ctx && !strcmp(dn, name))
			ctx = ibv_open_device(list[i]);
		if (strlen(found) + strlen(dn) + 3 < sizeof(found)) {
			if (found[0])
				strcat(found, ", ");
			strcat(found, dn);
		}
	}
	if (list)
		ibv_free_device_list(list);
	if (!ctx)
		return ql_error_set(-ENODEV,
				    "'%s': no RDMA device named '%s' (found: %s); soft://loop and "
				    "soft+shm://NAME need no hardware",
				    uri, name,
				    found[0] ? found :
					       "none; is an RDMA driver such as rdma_rxe loaded?");
	if (ibv_query_port(ctx, (uint8_t)port, &pattr)) {
		ibv_close_device(ctx);
		return ql_error_set(-EINVAL, "'%s': device %s has no port %lu", uri, name, port);
	}
	dev = calloc(1, sizeof(*dev));
	if (!dev) {
		ibv_close_device(ctx);
		return -ENOMEM;
	}
	dev->base.ops = &ibvp_device_ops;
	snprintf(dev->name, sizeof(dev->name), "%s", name);
	dev->ctx = ctx;
	dev->port = (uint8_t)port;
	dev->gid_index = gidx >= 0 ? (int)gidx : pick_gid(dev, pattr.gid_tbl_len);
	ret = ibv_query_gid(ctx, dev->port, dev->gid_index, &dev->gid);
	if (ret) {
		ret = ql_error_set(-EINVAL, "'%s': cannot read GID %d of port %lu", uri,
				   dev->gid_index, port);
		goto err;
	}
	dev->max_inline = probe_inline(ctx);
	*out = &dev->base;
	return 0;
err:
	ibv_close_device(ctx);
	free(dev);
	return ret;
}

static int ibvp_close(struct ql_device *d)
{
	struct ibvp_device *dev = to_dev(d);

	/* the verbs layer has checked that no PD or CQ is left */
	ibv_close_device(dev->ctx);
	free(dev);
	return 0;
}

static int ibvp_query(struct ql_device *d, struct ql_device_attr *a)
{
	struct ibvp_device *dev = to_dev(d);
	int ret;

	memset(a, 0, sizeof(*a));
	snprintf(a->name, sizeof(a->name), "%s", dev->name);
	ret = ibv_query_device(dev->ctx, &a->dev);
	if (!ret)
		ret = ibv_query_port(dev->ctx, dev->port, &a->port);
	if (ret)
		return neg(ret);
	snprintf(a->wire, sizeof(a->wire), "%s",
		 a->port.link_layer == IBV_LINK_LAYER_ETHERNET ? "roce" : "ib");
	a->max_inline_data = dev->max_inline;
	a->gid = dev->gid;
	return 0;
}

static int ibvp_counters(struct ql_device *d, struct ql_device_counters *c)
{
	(void)c;
	return ql_error_set(
		-EOPNOTSUPP,
		"ibv: %s keeps its counters in /sys/class/infiniband/%s/ports/*/hw_counters",
		to_dev(d)->name, to_dev(d)->name);
}

static int ibvp_pd_alloc(struct ql_device *d, struct ql_pd **out)
{
	struct ibvp_device *dev = to_dev(d);
	struct ibvp_pd *pd = calloc(1, sizeof(*pd));

	if (!pd)
		return -ENOMEM;
	pd->pd = ibv_alloc_pd(dev->ctx);
	if (!pd->pd) {
		free(pd);
		return ql_error_set(errno ? -errno : -ENOMEM, "ibv_alloc_pd failed");
	}
	*out = &pd->base;
	return 0;
}

static int ibvp_pd_free(struct ql_pd *p)
{
	struct ibvp_pd *pd = (struct ibvp_pd *)p;
	int ret = ibv_dealloc_pd(pd->pd);

	if (ret)
		return ql_error_set(neg(ret), "ibv_dealloc_pd: %s (MRs or QPs still use it?)",
				    strerror(ret > 0 ? ret : errno));
	free(pd);
	return 0;
}

static int ibvp_mr_reg(struct ql_pd *p, void *addr, size_t length, int access, struct ql_mr **out)
{
	struct ibvp_pd *pd = (struct ibvp_pd *)p;
	struct ibvp_mr *mr;

	/* argument checks and the base fields: the verbs layer's */
	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return -ENOMEM;
	mr->mr = ibv_reg_mr(pd->pd, addr, length, access);
	if (!mr->mr) {
		int err = errno ? errno : ENOMEM;

		free(mr);
		return ql_error_set(-err, "ibv_reg_mr(%zu bytes): %s%s", length, strerror(err),
				    err == ENOMEM || err == EPERM ? " (check `ulimit -l`)" : "");
	}
	mr->base.lkey = mr->mr->lkey;
	mr->base.rkey = mr->mr->rkey;
	*out = &mr->base;
	return 0;
}

static int ibvp_mr_reg_iova(struct ql_pd *p, void *addr, size_t length, uint64_t iova, int access,
			    struct ql_mr **out)
{
#ifdef ibv_reg_mr_iova /* rdma-core >= 22 (Debian 12 has it) */
	struct ibvp_pd *pd = (struct ibvp_pd *)p;
	struct ibvp_mr *mr;

	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return -ENOMEM;
	mr->mr = ibv_reg_mr_iova2(pd->pd, addr, length, iova, (unsigned int)access);
	if (!mr->mr) {
		int err = errno ? errno : ENOMEM;

		free(mr);
		return ql_error_set(-err, "ibv_reg_mr_iova(%zu bytes at iova 0x%" PRIx64 "): %s%s",
				    length, iova, strerror(err),
				    err == ENOMEM || err == EPERM ? " (check `ulimit -l`)" : "");
	}
	mr->base.lkey = mr->mr->lkey;
	mr->base.rkey = mr->mr->rkey;
	*out = &mr->base;
	return 0;
#else
	(void)p, (void)addr, (void)length, (void)iova, (void)access, (void)out;
	return ql_error_set(-EOPNOTSUPP, "ibv: this libibverbs has no ibv_reg_mr_iova");
#endif
}

/* GPU memory by its dmabuf (ibv_reg_dmabuf_mr, rdma-core 34+): the verbs
 * layer's gpu_mem.c got the fd from CUDA and closes it after. */
static int ibvp_mr_reg_dmabuf(struct ql_pd *p, uint64_t offset, size_t length, uint64_t iova,
			      int fd, int access, struct ql_mr **out)
{
	struct ibvp_pd *pd = (struct ibvp_pd *)p;
	struct ibvp_mr *mr;

	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return -ENOMEM;
	mr->mr = ibv_reg_dmabuf_mr(pd->pd, offset, length, iova, fd, access);
	if (!mr->mr) {
		int err = errno ? errno : EOPNOTSUPP;

		free(mr);
		return ql_error_set(-err, "ibv_reg_dmabuf_mr(%zu bytes at offset %" PRIu64 "): %s",
				    length, offset, strerror(err));
	}
	mr->base.lkey = mr->mr->lkey;
	mr->base.rkey = mr->mr->rkey;
	*out = &mr->base;
	return 0;
}

static int ibvp_mr_dereg(struct ql_mr *m)
{
	struct ibvp_mr *mr = (struct ibvp_mr *)m;
	int ret = ibv_dereg_mr(mr->mr);

	if (ret)
		return ql_error_set(neg(ret), "ibv_dereg_mr: %s", strerror(ret > 0 ? ret : errno));
	free(mr);
	return 0;
}

static int ibvp_cq_create(struct ql_device *d, int cqe, struct ql_cq **out)
{
	struct ibvp_device *dev = to_dev(d);
	struct ibvp_cq *cq;

	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return -ENOMEM;
	cq->cq = ibv_create_cq(dev->ctx, cqe, NULL, NULL, 0);
	if (!cq->cq) {
		int err = errno ? errno : ENOMEM;

		free(cq);
		return ql_error_set(-err, "ibv_create_cq(%d): %s", cqe, strerror(err));
	}
	cq->base.head.ops = &ibvp_cq_ops;
	cq->base.cqe = cq->cq->cqe;
	*out = &cq->base;
	return 0;
}

/* QL_CQ_INIT_MLX5: an ordinary CQ, driven by qlink/mlx5.h (ibv_mlx5.c) */
static int ibvp_cq_create_flags(struct ql_device *d, int cqe, unsigned int flags,
				struct ql_cq **out)
{
	(void)flags; /* QL_CQ_INIT_MLX5, the only one the verbs layer lets by */
	if (!ql__ibvp_mlx5_supported(to_dev(d)->ctx))
		return ql_error_set(-EOPNOTSUPP, "ibv: %s is not an mlx5 device: no mlx5 CQs",
				    to_dev(d)->name);
	return ibvp_cq_create(d, cqe, out);
}

static int ibvp_cq_mlx5(struct ql_cq *c, struct ql_mlx5_cq *out)
{
	return ql__ibvp_mlx5_cq_view(((struct ibvp_cq *)c)->cq, out);
}

static int ibvp_qp_mlx5(struct ql_qp *q, struct ql_mlx5_qp *out)
{
	return ql__ibvp_mlx5_qp_view(((struct ibvp_qp *)q)->qp, out);
}

static int ibvp_cq_destroy(struct ql_cq *c)
{
	struct ibvp_cq *cq = (struct ibvp_cq *)c;
	int ret = ibv_destroy_cq(cq->cq);

	if (ret)
		return ql_error_set(neg(ret), "ibv_destroy_cq: %s (a QP still uses it?)",
				    strerror(ret > 0 ? ret : errno));
	free(cq);
	return 0;
}

static int ibvp_qp_create(struct ql_pd *p, struct ql_qp_init_attr *ia, struct ql_qp **out)
{
	struct ibvp_pd *pd = (struct ibvp_pd *)p;
	struct ibvp_cq *scq = (struct ibvp_cq *)ia->send_cq, *rcq = (struct ibvp_cq *)ia->recv_cq;
	struct ibv_qp_init_attr a;
	struct ibvp_qp *qp;

	if (ia->qp_type != IBV_QPT_RC && ia->qp_type != IBV_QPT_UC)
		return ql_error_set(-EOPNOTSUPP, "ibv: QP type %d not supported (RC and UC are)",
				    ia->qp_type);
	if (!scq || !rcq || scq->base.dev != p->dev || rcq->base.dev != p->dev)
		return ql_error_set(-EINVAL, "ql_qp_create: send_cq and recv_cq must be CQs of the "
					     "QP's device");
	qp = calloc(1, sizeof(*qp));
	if (!qp)
		return -ENOMEM;
	memset(&a, 0, sizeof(a));
	a.qp_context = ia->qp_context;
	a.send_cq = scq->cq;
	a.recv_cq = rcq->cq;
	a.cap = ia->cap;
	a.qp_type = ia->qp_type;
	a.sq_sig_all = ia->sq_sig_all;
	if (ia->flags & QL_QP_INIT_MLX5)
		qp->qp = ql__ibvp_mlx5_create_qp(to_dev(p->dev)->ctx, pd->pd, &a);
	else
		qp->qp = ibv_create_qp(pd->pd, &a);
	if (!qp->qp) {
		int err = errno ? errno : ENOMEM;

		free(qp);
		return ql_error_set(-err, "ibv_create_qp: %s", strerror(err));
	}
	ia->cap = a.cap;
	qp->base.head.ops = &ibvp_qp_ops;
	qp->base.dev = p->dev;
	qp->base.pd = p;
	qp->base.qp_num = qp->qp->qp_num;
	qp->base.qp_type = ia->qp_type;
	qp->send_cq = scq;
	qp->recv_cq = rcq;
	qp->sq_sig_all = ia->sq_sig_all;
	qp->qp_context = ia->qp_context;
	*out = &qp->base;
	return 0;
}

static int ibvp_qp_destroy(struct ql_qp *q)
{
	struct ibvp_qp *qp = (struct ibvp_qp *)q;
	int ret = ibv_destroy_qp(qp->qp);

	if (ret)
		return ql_error_set(neg(ret), "ibv_destroy_qp: %s",
				    strerror(ret > 0 ? ret : errno));
	free(qp);
	return 0;
}

static int ibvp_qp_modify(struct ql_qp *q, struct ibv_qp_attr *attr, int mask)
{
	struct ibvp_qp *qp = (struct ibvp_qp *)q;
	struct ibvp_device *dev = to_dev(q->dev);
	struct ibv_qp_attr a = *attr;
	int ret;

	if (mask & IBV_QP_AV) {
		/* The API's address vector names the peer; the local side
		 * (port, source GID) is the device's choice from its URI. */
		a.ah_attr.port_num = dev->port;
		if (a.ah_attr.is_global) {
			a.ah_attr.grh.sgid_index = (uint8_t)dev->gid_index;
			if (!a.ah_attr.grh.hop_limit)
				a.ah_attr.grh.hop_limit = 64;
		}
	}
	if ((mask & IBV_QP_PORT) && a.port_num == 1)
		a.port_num = dev->port;
	ret = ibv_modify_qp(qp->qp, &a, mask);
	if (ret)
		return ql_error_set(neg(ret), "ibv_modify_qp(mask 0x%x): %s", mask,
				    strerror(ret > 0 ? ret : errno));
	return 0;
}

static int ibvp_qp_query(struct ql_qp *q, struct ibv_qp_attr *attr, int mask,
			 struct ql_qp_init_attr *ia)
{
	struct ibvp_qp *qp = (struct ibvp_qp *)q;
	struct ibv_qp_init_attr init;
	int ret = ibv_query_qp(qp->qp, attr, mask | IBV_QP_STATE, &init);

	if (ret)
		return neg(ret);
	if (ia) {
		memset(ia, 0, sizeof(*ia));
		ia->send_cq = &qp->send_cq->base;
		ia->recv_cq = &qp->recv_cq->base;
		ia->cap = init.cap;
		ia->qp_type = init.qp_type;
		ia->sq_sig_all = qp->sq_sig_all;
		ia->qp_context = qp->qp_context;
	}
	return 0;
}

/*
 * Posting hands the caller's WR chain to libibverbs as it is. One check
 * first, on the QP state libibverbs keeps (ibv_modify_qp updates it; the
 * states below RTS are entered only that way): the API promises -EINVAL with
 * *bad_wr at the first WR for a send in RESET, INIT or RTR and a receive in
 * RESET, as the IB spec has it, and not every provider does so. Linux rxe's,
 * for one, queues the WRs, fails only the doorbell, leaves *bad_wr NULL, and
 * would run those WRs once the QP reached RTS.
 */
static int ibvp_post_send(struct ql_qp *q, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct ibv_qp *qp = ((struct ibvp_qp *)q)->qp;

	if (__builtin_expect(qp->state < IBV_QPS_RTS, 0)) {
		*bad = wr;
		return -EINVAL;
	}
	return -ibv_post_send(qp, wr, bad);
}

static int ibvp_post_recv(struct ql_qp *q, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct ibv_qp *qp = ((struct ibvp_qp *)q)->qp;

	if (__builtin_expect(qp->state == IBV_QPS_RESET, 0)) {
		*bad = wr;
		return -EINVAL;
	}
	return -ibv_post_recv(qp, wr, bad);
}

static int ibvp_poll(struct ql_cq *c, int n, struct ibv_wc *wc)
{
	int r = ibv_poll_cq(((struct ibvp_cq *)c)->cq, n, wc);

	return r >= 0 ? r : -EIO;
}

static const struct ql__qp_ops ibvp_qp_ops = {
	.post_send = ibvp_post_send,
	.post_recv = ibvp_post_recv,
};

static const struct ql__cq_ops ibvp_cq_ops = {
	.poll = ibvp_poll,
};

static const struct ql_device_ops ibvp_device_ops = {
	.close = ibvp_close,
	.query = ibvp_query,
	.counters = ibvp_counters,
	.pd_alloc = ibvp_pd_alloc,
	.pd_free = ibvp_pd_free,
	.mr_reg = ibvp_mr_reg,
	.mr_reg_iova = ibvp_mr_reg_iova,
	.mr_reg_dmabuf = ibvp_mr_reg_dmabuf,
	.mr_dereg = ibvp_mr_dereg,
	.cq_create = ibvp_cq_create,
	.cq_destroy = ibvp_cq_destroy,
	.qp_create = ibvp_qp_create,
	.qp_destroy = ibvp_qp_destroy,
	.qp_modify = ibvp_qp_modify,
	.qp_query = ibvp_qp_query,
	.cq_create_flags = ibvp_cq_create_flags,
	.qp_mlx5 = ibvp_qp_mlx5,
	.cq_mlx5 = ibvp_cq_mlx5,
};

/* ---- the provider: scheme, listing, memory ------------------------------ */

static int ibvp_list(ql_provider_list_cb cb, void *ctx)
{
	char uri[QL_DEVICE_URI_MAX];
	struct ibv_device **list;
	int n = 0, ret = 0;

	list = ibv_get_device_list(&n);
	if (!list)
		return 0; /* no RDMA subsystem: nothing to list */
	for (int i = 0; i < n && !ret; i++) {
		snprintf(uri, sizeof(uri), "ibv://%s", ibv_get_device_name(list[i]));
		ret = cb(ctx, uri);
	}
	ibv_free_device_list(list);
	return ret;
}

/* Page-aligned anonymous memory: what ibv_reg_mr pins best (whole pages, no
 * neighbour sharing them, so libibverbs' fork protection, which marks the
 * registered pages MADV_DONTFORK, touches nothing else). */
static int ibvp_mem_alloc(struct ql_pd *pd, size_t length, void **addr)
{
	void *p = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	(void)pd;
	if (p == MAP_FAILED)
		return ql_error_set(-errno, "ibv: mmap of %zu bytes: %s", length, strerror(errno));
	*addr = p;
	return 0;
}

static void ibvp_mem_free(struct ql_pd *pd, void *addr, size_t length)
{
	(void)pd;
	munmap(addr, length);
}

const struct ql_provider ql_provider_ibv = {
	.name = "ibv",
	.schemes = (const char *const[]){ "ibv", NULL },
	.open = ibvp_open,
	.list = ibvp_list,
	.mem_alloc = ibvp_mem_alloc,
	.mem_free = ibvp_mem_free,
	.gpu_mem = QL_MEM_PATH_DEVICE, /* registered by dmabuf or peer memory */
};
