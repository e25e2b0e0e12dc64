/* SPDX-License-Identifier: MIT */
/*
 * The provider-neutral verbs layer: opens devices by URI through the
 * provider registry (registry.h) and dispatches setup calls to the
 * provider's ops table (provider.h), keeping the bookkeeping every provider
 * shares: object counts behind -EBUSY, base fields, argument checks, and the
 * memory each PD has handed out.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qlink/error.h"
#include "qlink/verbs.h"
#include "verbs/gpu_mem.h"
#include "verbs/provider.h"
#include "verbs/registry.h"

int ql_device_open(const char *uri, struct ql_device **dev)
{
	const struct ql_provider *p;
	char known[128], reserved[64], rsv[80];
	const char *sep, *scheme;
	size_t slen;
	int ret;

	ql_error_clear();
	if (!uri || !dev)
		return ql_error_set(-EINVAL, "ql_device_open: NULL argument");
	*dev = NULL;
	if (strlen(uri) >= QL_DEVICE_URI_MAX)
		return ql_error_set(-ENAMETOOLONG, "device URI longer than %d bytes",
				    QL_DEVICE_URI_MAX - 1);
	ql_registry_schemes(known, sizeof(known), 0);
	ql_registry_schemes(reserved, sizeof(reserved), 1);
	/* "; reserved: ..." only while some scheme is */
	snprintf(rsv, sizeof(rsv), "%s%s", reserved[0] ? "; reserved: " : "", reserved);
	sep = strstr(uri, "://");
	if (!sep)
		return ql_error_set(-EINVAL,
				    "'%s' is not a device URI SCHEME://... (schemes: %s%s)", uri,
				    known, rsv);
	slen = (size_t)(sep - uri);
	p = ql_registry_find(uri, slen, &scheme);
	if (!p)
		return ql_error_set(-EPROTONOSUPPORT,
				    "'%s': unknown device scheme '%.*s' (known: %s%s)", uri,
				    (int)slen, uri, known, rsv);
	if (p->reserved)
		return ql_error_set(-EPROTONOSUPPORT, "'%s': %s is not supported yet", uri,
				    p->reserved);
	ret = p->open(uri, scheme, sep + 3, dev);
	if (ret)
		return ret;
	(*dev)->provider = p;
	snprintf((*dev)->uri, sizeof((*dev)->uri), "%s", uri);
	atomic_init(&(*dev)->npd, 0);
	atomic_init(&(*dev)->ncq, 0);
	return 0;
}

struct list_ctx {
	char (*uris)[QL_DEVICE_URI_MAX];
	int max;
	int n;
};

static int list_one(void *ctx, const char *uri)
{
	struct list_ctx *l = ctx;

	if (l->n < l->max)
		snprintf(l->uris[l->n], QL_DEVICE_URI_MAX, "%s", uri);
	l->n++;
	return 0;
}

int ql_device_list(char (*uris)[QL_DEVICE_URI_MAX], int max)
{
	struct list_ctx l = { uris, max, 0 };
	const struct ql_provider *p;

	if (max < 0 || (max && !uris))
		return -EINVAL;
	for (size_t i = 0; (p = ql_registry_at(i)); i++)
		if (!p->reserved && p->list)
			p->list(list_one, &l);
	return l.n;
}

int ql_device_close(struct ql_device *dev)
{
	uint32_t npd, ncq;

	if (!dev)
		return -EINVAL;
	npd = atomic_load(&dev->npd);
	ncq = atomic_load(&dev->ncq);
	if (npd || ncq)
		return ql_error_set(-EBUSY, "%s: device %s still has %u PDs and %u CQs",
				    dev->provider->name, dev->uri, npd, ncq);
	return dev->ops->close(dev);
}

int ql_device_query(struct ql_device *dev, struct ql_device_attr *attr)
{
	int ret;

	if (!dev || !attr)
		return -EINVAL;
	ret = dev->ops->query(dev, attr);
	if (!ret) {
		snprintf(attr->uri, sizeof(attr->uri), "%s", dev->uri);
		snprintf(attr->provider, sizeof(attr->provider), "%s", dev->provider->name);
	}
	return ret;
}

int ql_device_counters(struct ql_device *dev, struct ql_device_counters *c)
{
	if (!dev || !c)
		return -EINVAL;
	memset(c, 0, sizeof(*c));
	return dev->ops->counters(dev, c);
}

int ql_device_progress(struct ql_device *dev)
{
	if (!dev)
		return -EINVAL;
	return dev->ops->progress ? dev->ops->progress(dev) : 0;
}

int ql_pd_alloc(struct ql_device *dev, struct ql_pd **pd)
{
	int ret;

	if (!dev || !pd)
		return -EINVAL;
	ret = dev->ops->pd_alloc(dev, pd);
	if (ret)
		return ret;
	(*pd)->dev = dev;
	(*pd)->mem = NULL;
	atomic_fetch_add(&dev->npd, 1);
	return 0;
}

/* PD-scoped memory. One lock for every PD's list and the list of live MRs
 * (memory still registered is not freed): setup path only. */
struct ql_pd_mem {
	struct ql_pd_mem *next;
	void *addr;
	size_t length;
	enum ql_mem_kind kind;
	struct ql__gpu_mem gpu; /* QL_MEM_GPU */
};

static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ql_mr *live_mrs;

int ql_pd_free(struct ql_pd *pd)
{
	struct ql_device *dev;
	int ret;

	if (!pd)
		return -EINVAL;
	dev = pd->dev;
	pthread_mutex_lock(&mem_lock);
	ret = pd->mem ? -EBUSY : 0;
	pthread_mutex_unlock(&mem_lock);
	if (ret)
		return ql_error_set(ret, "ql_pd_free: memory from ql_pd_mem_alloc() on this PD "
					 "is still allocated");
	ret = dev->ops->pd_free(pd);
	if (!ret)
		atomic_fetch_sub(&dev->npd, 1);
	return ret;
}

static size_t page_size(void)
{
	long ps = sysconf(_SC_PAGESIZE);

	return ps > 0 ? (size_t)ps : 4096;
}

int ql_pd_mem_alloc(struct ql_pd *pd, size_t length, void **addr)
{
	return ql_pd_mem_alloc_attr(pd, length, NULL, addr);
}

int ql_pd_mem_alloc_attr(struct ql_pd *pd, size_t length, const struct ql_mem_attr *attr,
			 void **addr)
{
	const struct ql_provider *p;
	struct ql_pd_mem *m;
	size_t ps = page_size();
	int ret;

	if (!pd || !addr)
		return ql_error_set(-EINVAL, "ql_pd_mem_alloc: NULL argument");
	*addr = NULL;
	if (!length || length > SIZE_MAX - (ps - 1))
		return ql_error_set(-EINVAL, "ql_pd_mem_alloc: length %zu is 0 or too large",
				    length);
	if (attr && attr->kind != QL_MEM_HOST && attr->kind != QL_MEM_GPU)
		return ql_error_set(-EINVAL, "ql_pd_mem_alloc_attr: unknown memory kind %d",
				    (int)attr->kind);
	p = pd->dev->provider;
	if (!p->mem_alloc)
		return ql_error_set(-EOPNOTSUPP, "%s: no PD-scoped memory", p->name);
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->length = (length + ps - 1) & ~(ps - 1);
	m->kind = attr ? attr->kind : QL_MEM_HOST;
	ret = m->kind == QL_MEM_GPU ?
		      ql__gpu_mem_alloc(pd, m->length, attr->cuda_device, &m->addr, &m->gpu) :
		      p->mem_alloc(pd, m->length, &m->addr);
	if (ret) {
		free(m);
		return ret;
	}
	pthread_mutex_lock(&mem_lock);
	m->next = pd->mem;
	pd->mem = m;
	pthread_mutex_unlock(&mem_lock);
	*addr = m->addr;
	return 0;
}

int ql_pd_mem_free(struct ql_pd *pd, void *addr)
{
	struct ql_pd_mem **pp, *m = NULL;
	const struct ql_mr *mr = NULL;

	if (!pd || !addr)
		return ql_error_set(-EINVAL, "ql_pd_mem_free: NULL argument");
	pthread_mutex_lock(&mem_lock);
	for (pp = &pd->mem; *pp && (*pp)->addr != addr; pp = &(*pp)->next)
		;
	if (*pp) {
		/* A peer holding an rkey over it could otherwise write into
		 * whatever reuses the memory (on soft+shm: QP and MR tables). */
		const uint8_t *a = addr;

		for (mr = live_mrs; mr; mr = mr->live_next)
			if ((const uint8_t *)mr->addr < a + (*pp)->length &&
			    a < (const uint8_t *)mr->addr + mr->length)
				break;
		if (!mr) {
			m = *pp;
			*pp = m->next;
		}
	}
	pthread_mutex_unlock(&mem_lock);
	if (mr)
		return ql_error_set(-EBUSY, "ql_pd_mem_free(%p): still registered (MR lkey 0x%x)",
				    addr, mr->lkey);
	if (!m)
		return ql_error_set(
			-EINVAL, "ql_pd_mem_free(%p): not memory from ql_pd_mem_alloc() on this PD",
			addr);
	if (m->kind == QL_MEM_GPU)
		ql__gpu_mem_free(pd, m->addr, m->length, &m->gpu);
	else
		pd->dev->provider->mem_free(pd, m->addr, m->length);
	free(m);
	return 0;
}

/* The allocation of pd holding addr, under mem_lock; NULL if none. */
static const struct ql_pd_mem *pd_mem_find(const struct ql_pd *pd, const void *addr)
{
	const struct ql_pd_mem *m;

	for (m = pd->mem; m; m = m->next)
		if ((const uint8_t *)addr >= (const uint8_t *)m->addr &&
		    (const uint8_t *)addr < (const uint8_t *)m->addr + m->length)
			return m;
	return NULL;
}

static int pd_mem_copy(struct ql_pd *pd, void *addr, void *host, size_t len, int to_mem)
{
	const struct ql_pd_mem *m;
	struct ql__gpu_mem gpu;
	bool device = false, ok = false;

	if (!pd || !addr || (!host && len))
		return ql_error_set(-EINVAL, "ql_pd_mem_read/write: NULL argument");
	pthread_mutex_lock(&mem_lock);
	m = pd_mem_find(pd, addr);
	if (m && len <= (size_t)((const uint8_t *)m->addr + m->length - (const uint8_t *)addr)) {
		ok = true;
		device = m->kind == QL_MEM_GPU && m->gpu.path == QL_MEM_PATH_DEVICE;
		gpu = m->gpu;
	}
	pthread_mutex_unlock(&mem_lock);
	if (!ok)
		return ql_error_set(-EINVAL,
				    "ql_pd_mem_read/write(%p, %zu bytes): not inside memory from "
				    "ql_pd_mem_alloc() on this PD",
				    addr, len);
	if (!len)
		return 0;
	if (device)
		return ql__gpu_mem_copy(&gpu, addr, host, len, to_mem);
	if (to_mem)
		memcpy(addr, host, len);
	else
		memcpy(host, addr, len);
	return 0;
}

int ql_pd_mem_write(struct ql_pd *pd, void *addr, const void *src, size_t len)
{
	return pd_mem_copy(pd, addr, (void *)(uintptr_t)src, len, 1);
}

int ql_pd_mem_read(struct ql_pd *pd, void *dst, const void *addr, size_t len)
{
	return pd_mem_copy(pd, (void *)(uintptr_t)addr, dst, len, 0);
}

int ql_pd_mem_query(struct ql_pd *pd, const void *addr, struct ql_mem_info *info)
{
	const struct ql_pd_mem *m;

	if (!pd || !addr || !info)
		return ql_error_set(-EINVAL, "ql_pd_mem_query: NULL argument");
	pthread_mutex_lock(&mem_lock);
	m = pd_mem_find(pd, addr);
	if (m) {
		memset(info, 0, sizeof(*info));
		info->kind = m->kind;
		info->addr = m->addr;
		info->length = m->length;
		if (m->kind == QL_MEM_GPU) {
			info->path = m->gpu.path;
			info->cuda_device = m->gpu.cuda_device;
			info->device_addr = m->gpu.device_addr;
		}
	}
	pthread_mutex_unlock(&mem_lock);
	if (!m)
		return ql_error_set(-ENOENT,
				    "ql_pd_mem_query(%p): not memory from ql_pd_mem_alloc() on "
				    "this PD",
				    addr);
	return 0;
}

void *ql_mem_alloc(size_t length)
{
	const struct ql_provider *p = ql_registry_default_mem();
	size_t ps = page_size();
	void *addr = NULL;
	int ret;

	if (!length || length > SIZE_MAX - (ps - 1)) {
		errno = EINVAL;
		return NULL;
	}
	ret = p->mem_alloc(NULL, (length + ps - 1) & ~(ps - 1), &addr);
	if (ret) {
		errno = -ret;
		return NULL;
	}
	return addr;
}

void ql_mem_free(void *addr)
{
	if (addr)
		ql_registry_default_mem()->mem_free(NULL, addr, 0);
}

static int mr_reg(struct ql_pd *pd, void *addr, size_t length, const uint64_t *iova, int access,
		  struct ql_mr **mr)
{
	const struct ql_pd_mem *m;
	struct ql__gpu_mem gpu;
	bool end_ok;
	int ret;

	if (!pd || !mr)
		return -EINVAL;
	if (!addr || !length)
		return ql_error_set(-EINVAL, "ql_mr_reg: NULL address or zero length");
	if ((uintptr_t)addr + length < (uintptr_t)addr)
		return ql_error_set(-EINVAL, "ql_mr_reg: range wraps around the address space");
	if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & IBV_ACCESS_LOCAL_WRITE))
		return ql_error_set(
			-EINVAL, "ql_mr_reg: REMOTE_WRITE and REMOTE_ATOMIC require LOCAL_WRITE");
	if (iova && *iova + length < *iova)
		return ql_error_set(-EINVAL, "ql_mr_reg_iova: iova range wraps around");
	/* GPU device memory: dmabuf, then peer memory (gpu_mem.c) */
	pthread_mutex_lock(&mem_lock);
	m = pd_mem_find(pd, addr);
	if (m && m->kind == QL_MEM_GPU && m->gpu.path == QL_MEM_PATH_DEVICE)
		gpu = m->gpu;
	else
		m = NULL;
	end_ok = !m || (const uint8_t *)addr + length <= (const uint8_t *)m->addr + m->length;
	pthread_mutex_unlock(&mem_lock);
	if (!end_ok)
		return ql_error_set(-EINVAL, "ql_mr_reg: the range runs past the end of its GPU "
					     "memory");
	if (m) {
		ret = ql__gpu_mr_reg(pd, addr, length, iova, access, &gpu, mr);
	} else if (iova) {
		if (!pd->dev->ops->mr_reg_iova)
			return ql_error_set(-EOPNOTSUPP, "%s: no memory registration at an iova",
					    pd->dev->provider->name);
		ret = pd->dev->ops->mr_reg_iova(pd, addr, length, *iova, access, mr);
	} else {
		ret = pd->dev->ops->mr_reg(pd, addr, length, access, mr);
	}
	if (ret)
		return ret;
	if (!m)
		(*mr)->gpu_reg = QL_MR_GPU_NONE;
	(*mr)->pd = pd;
	(*mr)->addr = addr;
	(*mr)->length = length;
	(*mr)->access = access;
	pthread_mutex_lock(&mem_lock);
	(*mr)->live_next = live_mrs;
	live_mrs = *mr;
	pthread_mutex_unlock(&mem_lock);
	return 0;
}

int ql_mr_reg(struct ql_pd *pd, void *addr, size_t length, int access, struct ql_mr **mr)
{
	return mr_reg(pd, addr, length, NULL, access, mr);
}

int ql_mr_reg_iova(struct ql_pd *pd, void *addr, size_t length, uint64_t iova, int access,
		   struct ql_mr **mr)
{
	return mr_reg(pd, addr, length, &iova, access, mr);
}

int ql_mr_dereg(struct ql_mr *mr)
{
	struct ql_mr **pp;
	int ret;

	if (!mr)
		return -EINVAL;
	/* Unlinked before the provider frees it, relinked if it refuses; under
	 * the lock throughout, so ql_pd_mem_free never sees it half gone. */
	pthread_mutex_lock(&mem_lock);
	for (pp = &live_mrs; *pp && *pp != mr; pp = &(*pp)->live_next)
		;
	if (*pp)
		*pp = mr->live_next;
	ret = mr->pd->dev->ops->mr_dereg(mr);
	if (ret) {
		mr->live_next = live_mrs;
		live_mrs = mr;
	}
	pthread_mutex_unlock(&mem_lock);
	return ret;
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

enum ql_mr_gpu_reg ql_mr_gpu_reg(const struct ql_mr *mr)
{
	return mr->gpu_reg;
}

/* QPs and CQs driven through qlink/mlx5.h refuse the verbs hot path: a
 * post or poll through it would consume what the mlx5 queues' owner
 * counts on (on ConnectX, the same rings). */
static int mlx5_post_send_refused(struct ql_qp *qp, struct ibv_send_wr *wr,
				  struct ibv_send_wr **bad_wr)
{
	(void)qp;
	*bad_wr = wr;
	return -EINVAL;
}

static int mlx5_post_recv_refused(struct ql_qp *qp, struct ibv_recv_wr *wr,
				  struct ibv_recv_wr **bad_wr)
{
	(void)qp;
	*bad_wr = wr;
	return -EINVAL;
}

static int mlx5_poll_refused(struct ql_cq *cq, int num_entries, struct ibv_wc *wc)
{
	(void)cq;
	(void)num_entries;
	(void)wc;
	return -EINVAL;
}

static const struct ql__qp_ops mlx5_qp_refused_ops = {
	.post_send = mlx5_post_send_refused,
	.post_recv = mlx5_post_recv_refused,
};

static const struct ql__cq_ops mlx5_cq_refused_ops = {
	.poll = mlx5_poll_refused,
};

int ql_cq_create_flags(struct ql_device *dev, int cqe, unsigned int flags, struct ql_cq **cq)
{
	int ret;

	if (!dev || !cq)
		return -EINVAL;
	if (cqe < 1)
		return ql_error_set(-EINVAL, "ql_cq_create: cqe %d below 1", cqe);
	if (flags & ~QL_CQ_INIT_MLX5)
		return ql_error_set(-EINVAL, "ql_cq_create_flags: unknown flags 0x%x",
				    flags & ~QL_CQ_INIT_MLX5);
	if (flags && !dev->ops->cq_create_flags)
		return ql_error_set(-EOPNOTSUPP,
				    "ql_cq_create_flags: the %s provider has no mlx5 CQs",
				    dev->provider->name);
	ret = flags ? dev->ops->cq_create_flags(dev, cqe, flags, cq) :
		      dev->ops->cq_create(dev, cqe, cq);
	if (ret)
		return ret;
	(*cq)->dev = dev;
	(*cq)->flags = flags;
	if (flags & QL_CQ_INIT_MLX5)
		(*cq)->head.ops = &mlx5_cq_refused_ops;
	atomic_fetch_add(&dev->ncq, 1);
	return 0;
}

int ql_cq_create(struct ql_device *dev, int cqe, struct ql_cq **cq)
{
	return ql_cq_create_flags(dev, cqe, 0, cq);
}

int ql_cq_mlx5(struct ql_cq *cq, struct ql_mlx5_cq *out)
{
	if (!cq || !out)
		return -EINVAL;
	if (!(cq->flags & QL_CQ_INIT_MLX5))
		return ql_error_set(-EOPNOTSUPP, "ql_cq_mlx5: the CQ was not created with "
						 "QL_CQ_INIT_MLX5");
	if (!cq->dev->ops->cq_mlx5)
		return ql_error_set(-EOPNOTSUPP, "ql_cq_mlx5: the %s provider has no mlx5 CQs",
				    cq->dev->provider->name);
	return cq->dev->ops->cq_mlx5(cq, out);
}

int ql_cq_destroy(struct ql_cq *cq)
{
	struct ql_device *dev;
	int ret;

	if (!cq)
		return -EINVAL;
	dev = cq->dev;
	ret = dev->ops->cq_destroy(cq);
	if (!ret)
		atomic_fetch_sub(&dev->ncq, 1);
	return ret;
}

static unsigned int cq_flags(const struct ql_cq *cq)
{
	return cq ? cq->flags : 0;
}

int ql_qp_create(struct ql_pd *pd, struct ql_qp_init_attr *attr, struct ql_qp **qp)
{
	unsigned int want;
	int ret;

	if (!pd || !attr || !qp)
		return -EINVAL;
	if (attr->flags & ~(QL_QP_INIT_MLX5 | QL_QP_INIT_MLX5_NO_BF) ||
	    (attr->flags & QL_QP_INIT_MLX5_NO_BF && !(attr->flags & QL_QP_INIT_MLX5)))
		return ql_error_set(-EINVAL, "ql_qp_create: unknown flags 0x%x",
				    attr->flags & ~QL_QP_INIT_MLX5);
	/* an mlx5 QP's completions are mlx5 CQEs, an mlx5 CQ holds nothing
	 * else: both CQs match the QP */
	want = (attr->flags & QL_QP_INIT_MLX5) ? QL_CQ_INIT_MLX5 : 0;
	if ((cq_flags(attr->send_cq) & QL_CQ_INIT_MLX5) != want ||
	    (cq_flags(attr->recv_cq) & QL_CQ_INIT_MLX5) != want)
		return ql_error_set(-EINVAL, want ? "ql_qp_create: a QL_QP_INIT_MLX5 QP needs "
						    "QL_CQ_INIT_MLX5 send and receive CQs" :
						    "ql_qp_create: a QL_CQ_INIT_MLX5 CQ serves "
						    "QL_QP_INIT_MLX5 QPs only");
	if (want && !pd->dev->ops->qp_mlx5)
		return ql_error_set(-EOPNOTSUPP, "ql_qp_create: the %s provider has no mlx5 QPs",
				    pd->dev->provider->name);
	ret = pd->dev->ops->qp_create(pd, attr, qp);
	if (ret)
		return ret;
	(*qp)->flags = attr->flags;
	if (attr->flags & QL_QP_INIT_MLX5)
		(*qp)->head.ops = &mlx5_qp_refused_ops;
	return 0;
}

int ql_qp_setup(struct ql_pd *pd, const struct ql_qp_setup *s, struct ql_cq **scq,
		struct ql_cq **rcq, struct ql_qp **qp, struct ibv_qp_cap *granted)
{
	unsigned int cq_flags = s && (s->flags & QL_QP_INIT_MLX5) ? QL_CQ_INIT_MLX5 : 0;
	struct ql_device_attr attr;
	struct ql_qp_init_attr ia;
	int ret;

	if (!pd || !s || !scq || !rcq || !qp)
		return -EINVAL;
	memset(&ia, 0, sizeof(ia));
	ia.qp_type = s->qp_type ? s->qp_type : IBV_QPT_RC;
	ia.cap.max_send_wr = s->send_wr ? s->send_wr : 1;
	ia.cap.max_recv_wr = s->recv_wr ? s->recv_wr : 1;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	ia.flags = s->flags;
	if (s->max_inline) {
		ret = ql_device_query(pd->dev, &attr);
		if (ret)
			return ret;
		ia.cap.max_inline_data =
			s->max_inline < attr.max_inline_data ? s->max_inline : attr.max_inline_data;
	}
	if (!*scq) {
		ret = ql_cq_create_flags(pd->dev,
					 s->send_cqe ? s->send_cqe : (int)ia.cap.max_send_wr,
					 cq_flags, scq);
		if (ret)
			return ret;
	}
	if (!*rcq) {
		ret = ql_cq_create_flags(pd->dev,
					 s->recv_cqe ? s->recv_cqe : (int)ia.cap.max_recv_wr,
					 cq_flags, rcq);
		if (ret)
			return ret;
	}
	ia.send_cq = *scq;
	ia.recv_cq = *rcq;
	ret = ql_qp_create(pd, &ia, qp);
	if (ret)
		return ret;
	if (granted)
		*granted = ia.cap;
	return 0;
}

int ql_qp_mlx5(struct ql_qp *qp, struct ql_mlx5_qp *out)
{
	if (!qp || !out)
		return -EINVAL;
	if (!(qp->flags & QL_QP_INIT_MLX5))
		return ql_error_set(-EOPNOTSUPP, "ql_qp_mlx5: the QP was not created with "
						 "QL_QP_INIT_MLX5");
	if (!qp->dev->ops->qp_mlx5)
		return ql_error_set(-EOPNOTSUPP, "ql_qp_mlx5: the %s provider has no mlx5 QPs",
				    qp->dev->provider->name);
	return qp->dev->ops->qp_mlx5(qp, out);
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
	int ret;

	if (!qp || !attr)
		return -EINVAL;
	ret = qp->dev->ops->qp_query(qp, attr, attr_mask, init_attr);
	if (!ret && init_attr)
		init_attr->flags = qp->flags;
	return ret;
}

int ql_qp_fault(struct ql_qp *qp, const char *spec)
{
	if (!qp)
		return -EINVAL;
	if (!qp->dev->ops->qp_fault)
		return ql_error_set(-EOPNOTSUPP,
				    "ql_qp_fault: the %s provider has no fault "
				    "injection (soft+udp has)",
				    qp->dev->provider->name);
	return qp->dev->ops->qp_fault(qp, spec);
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
