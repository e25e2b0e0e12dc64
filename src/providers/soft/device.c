/* SPDX-License-Identifier: MIT */
/*
 * soft provider: devices, protection domains, memory regions and CQs.
 * Everything here is setup path: locks and allocation are fine.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <unistd.h>

#include "providers/common/devmem.h"
#include "providers/common/nic.h"
#include "providers/common/progress.h"
#include "providers/common/soft_nic.h"
#include "providers/soft/soft.h"
#include "qlink/error.h"
#include "qlink/log.h"
#include "verbs/registry.h"

#define DEV_MAGIC 0x3156454448534c51ull /* "QLSHDEV1" */

static const struct ql_device_ops soft_device_ops;
static int soft_cq_destroy(struct ql_cq *c);

const struct ql__nic_limits ql__soft_limits = {
	.fw_ver = "qlink-soft-1",
	.max_qp = SOFT_MAX_QP,
	.max_qp_wr = SOFT_MAX_QP_WR,
	.max_sge = SOFT_MAX_SGE,
	.max_cqe = SOFT_MAX_CQE,
	.max_mr = SOFT_MAX_MR,
	.max_rd_atomic = SOFT_MAX_RD_ATOMIC,
	.max_msg = SOFT_MAX_MSG,
	.max_inline = SOFT_MAX_INLINE,
};

static struct soft_device *to_dev(struct ql_device *d)
{
	return (struct soft_device *)d;
}

static bool valid_name(const char *s)
{
	size_t n = strlen(s);

	if (!n || n >= QL_DEVICE_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '-' || c == '.'))
			return false;
	}
	return true;
}

/* The URI's query, `key=value` joined by '&': loss injection, loss=P
 * (0 <= P <= 1), seed=N, drop_nth=N (N >= 1); and progress=thread|caller|
 * auto (docs/progress.md; QLINK_PROGRESS, else auto, when absent). */
struct soft_loss_opts {
	bool on;
	uint64_t drop_nth;
	uint64_t p64;
	uint64_t seed;
	enum ql__progress_mode progress;
};

static int parse_loss(const char *uri, const char *q, struct soft_loss_opts *o)
{
	char buf[256], *save = NULL, *kv;

	memset(o, 0, sizeof(*o));
	o->progress = ql__progress_default();
	if (strlen(q) >= sizeof(buf))
		return ql_error_set(-EINVAL, "'%s': the query is too long", uri);
	snprintf(buf, sizeof(buf), "%s", q);
	for (kv = strtok_r(buf, "&", &save); kv; kv = strtok_r(NULL, "&", &save)) {
		char *v = strchr(kv, '='), *end;

		if (!v)
			goto bad;
		*v++ = '\0';
		errno = 0;
		if (!strcmp(kv, "loss")) {
			double p = strtod(v, &end);

			if (errno || end == v || *end || !(p >= 0.0 && p <= 1.0))
				goto bad;
			/* 2^64 * p, saturated: p = 1 drops everything */
			o->p64 = p >= 1.0 ? UINT64_MAX : (uint64_t)(p * 18446744073709551616.0);
		} else if (!strcmp(kv, "seed") || !strcmp(kv, "drop_nth")) {
			unsigned long long n = strtoull(v, &end, 0);

			if (errno || end == v || *end || *v == '-' ||
			    (!strcmp(kv, "drop_nth") && !n))
				goto bad;
			if (kv[0] == 's')
				o->seed = n;
			else
				o->drop_nth = n;
		} else if (!strcmp(kv, "progress")) {
			if (ql__progress_parse(v, &o->progress))
				goto bad;
		} else {
			goto bad;
		}
	}
	o->on = o->p64 || o->drop_nth;
	return 0;
bad:
	return ql_error_set(-EINVAL,
			    "'%s': the query takes loss=P (0..1), seed=N, drop_nth=N (>= 1) and "
			    "progress=thread|caller|auto, joined by '&'",
			    uri);
}

static int soft_open(const char *uri, const char *scheme, const char *rest_q,
		     struct ql_device **out)
{
	struct soft_device *dev;
	struct soft_heap *heap;
	uint32_t w = !strcmp(scheme, "soft") ? SOFT_WIRE_LOOP : SOFT_WIRE_SHM;
	uint32_t pid, fd, id;
	struct soft_loss_opts loss = { 0 };
	char rest[QL_DEVICE_NAME_MAX];
	const char *q = strchr(rest_q, '?');
	size_t n;
	int ret;

	loss.progress = ql__progress_default();
	if (q) {
		ret = parse_loss(uri, q + 1, &loss);
		if (ret)
			return ret;
	}
	n = q ? (size_t)(q - rest_q) : strlen(rest_q);
	/* too long: an empty name, refused below with the usual message */
	if (n >= sizeof(rest))
		n = 0;
	memcpy(rest, rest_q, n);
	rest[n] = '\0';

	if (w == SOFT_WIRE_LOOP && strcmp(rest, "loop"))
		return ql_error_set(
			-EINVAL,
			"'%s': the only soft:// device is soft://loop (use soft+shm://NAME "
			"for peers in other processes)",
			uri);
	if (w == SOFT_WIRE_SHM && !valid_name(rest))
		return ql_error_set(
			-EINVAL,
			"'%s': soft+shm device names are 1-%d characters of [A-Za-z0-9_.-]", uri,
			QL_DEVICE_NAME_MAX - 1);
	ret = ql__soft_heap_get(&heap);
	if (ret)
		return ret;
	dev = calloc(1, sizeof(*dev));
	if (!dev)
		return -ENOMEM;
	dev->sh = ql__soft_heap_alloc(sizeof(*dev->sh), SOFT_CACHELINE);
	if (!dev->sh) {
		ret = ql_error_set(-ENOMEM, "soft: shared heap exhausted (QLINK_SOFT_HEAP_SIZE)");
		goto err_dev;
	}
	do
		id = ql__nic_random_u32();
	while (!id);
	dev->sh->magic = DEV_MAGIC;
	dev->sh->id = id;
	dev->sh->wire = w;
	snprintf(dev->sh->name, sizeof(dev->sh->name), "%s", rest);
	atomic_store(&dev->sh->open, 1);
	ret = ql__soft_heap_register_dev(dev->sh, &dev->mr_priv);
	if (ret)
		goto err_sh;

	dev->base.ops = &soft_device_ops;
	snprintf(dev->name, sizeof(dev->name), "%s", rest);
	pthread_mutex_init(&dev->lock, NULL);
	dev->wire = w;
	dev->next_pd_id = 1;
	dev->loss_on = loss.on;
	dev->drop_nth = loss.drop_nth;
	dev->loss_p64 = loss.p64;
	dev->loss_seed = loss.seed;
	dev->progress = (int)loss.progress;
	/* Unpredictable key secrets and starting epochs: one getrandom call. */
	ql__nic_random(dev->key_secret, sizeof(dev->key_secret));
	ql__nic_random(dev->mr_epoch, sizeof(dev->mr_epoch));
	ql__nic_random(dev->qp_gen, sizeof(dev->qp_gen));

	pid = htonl((uint32_t)heap->pid);
	fd = htonl((uint32_t)heap->fd);
	id = htonl(id);
	dev->gid.raw[0] = SOFT_GID_PREFIX0;
	dev->gid.raw[1] = SOFT_GID_PREFIX1;
	dev->gid.raw[2] = (uint8_t)w;
	dev->gid.raw[3] = SOFT_GID_VERSION;
	memcpy(&dev->gid.raw[4], &pid, 4);
	memcpy(&dev->gid.raw[8], &fd, 4);
	memcpy(&dev->gid.raw[12], &id, 4);
	*out = &dev->base;
	return 0;
err_sh:
	ql__soft_heap_free(dev->sh);
err_dev:
	free(dev);
	return ret;
}

static int soft_close(struct ql_device *d)
{
	struct soft_device *dev = to_dev(d);

	/* the verbs layer has checked that no PD or CQ is left */
	atomic_store(&dev->sh->open, 0);
	ql__soft_engine_free(dev);
	ql__soft_heap_unregister_dev(dev->sh);
	ql__soft_heap_free(dev->sh);
	pthread_mutex_destroy(&dev->lock);
	free(dev);
	return 0;
}

static int soft_query(struct ql_device *d, struct ql_device_attr *a)
{
	struct soft_device *dev = to_dev(d);

	ql__nic_query(a, &ql__soft_limits);
	snprintf(a->name, sizeof(a->name), "%s", dev->name);
	snprintf(a->wire, sizeof(a->wire), "%s", dev->wire == SOFT_WIRE_LOOP ? "loop" : "shm");
	a->gid = dev->gid;
	return 0;
}

static int soft_counters(struct ql_device *d, struct ql_device_counters *c)
{
	struct soft_dev_counters *s = &to_dev(d)->sh->counters;

	c->uc_drop_access = atomic_load(&s->uc_drop_access);
	c->uc_drop_no_recv = atomic_load(&s->uc_drop_no_recv);
	c->uc_drop_not_ready = atomic_load(&s->uc_drop_not_ready);
	c->rc_nak_access = atomic_load(&s->rc_nak_access);
	c->rc_nak_rnr = atomic_load(&s->rc_nak_rnr);
	c->rc_nak_inv_req = atomic_load(&s->rc_nak_inv_req);
	c->rc_nak_op_err = atomic_load(&s->rc_nak_op_err);
	c->uc_drop_injected = atomic_load(&to_dev(d)->loss_dropped);
	return 0;
}

static int soft_pd_alloc(struct ql_device *d, struct ql_pd **out)
{
	return ql__nic_pd_alloc(d, &to_dev(d)->lock, &to_dev(d)->next_pd_id, out);
}

static int soft_pd_free(struct ql_pd *p)
{
	return ql__nic_pd_free(p, &to_dev(p->dev)->lock, "soft");
}

static void pin_warn_once(size_t length, int err)
{
	static int warned;
	struct rlimit rl;

	if (__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
		return;
	getrlimit(RLIMIT_MEMLOCK, &rl);
	ql_log_warn("soft",
		    "cannot pin %zu bytes of registered memory (%s; RLIMIT_MEMLOCK is %llu bytes): "
		    "the memory stays registered but unpinned; raise `ulimit -l` to pin it",
		    length, strerror(err), (unsigned long long)rl.rlim_cur);
}

static int soft_mr_reg_iova(struct ql_pd *p, void *addr, size_t length, uint64_t iova, int access,
			    struct ql_mr **out)
{
	const int remote = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			   IBV_ACCESS_REMOTE_ATOMIC;
	struct ql__nic_pd *pd = (struct ql__nic_pd *)p;
	struct soft_device *dev = to_dev(p->dev);
	struct soft_mr_entry *e;
	struct soft_mr *mr;
	uint32_t idx, lkey, rkey, cuda;
	uintptr_t pa;
	bool in_heap;
	int ret;

	/* NULL, zero length, wrap-around, REMOTE_* without LOCAL_WRITE: the
	 * verbs layer has refused them */
	ret = ql__nic_mr_check(length, access, "soft");
	if (!ret) /* GPU device memory: moved by the copy engine (devmem.h) */
		ret = ql__nic_mem_tag(addr, length, "soft", &cuda);
	if (ret)
		return ret;
	in_heap = ql__soft_heap_contains(addr, length);
	if (dev->wire == SOFT_WIRE_SHM && (access & remote) && cuda)
		return ql_error_set(-EINVAL,
				    "soft+shm: GPU device memory cannot be reached by peers in "
				    "other processes: register it without remote access (as a "
				    "local buffer), or use soft://loop or soft+udp://");
	if (dev->wire == SOFT_WIRE_SHM && (access & remote) && !in_heap)
		return ql_error_set(-EINVAL,
				    "soft+shm: memory for remote access must come from "
				    "ql_pd_mem_alloc() on a soft+shm PD or ql_mem_alloc() (other "
				    "processes cannot map ordinary memory)");
	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return -ENOMEM;

	pthread_mutex_lock(&dev->lock);
	ret = ql__nic_mr_claim((void **)dev->mrs, SOFT_MAX_MR, dev->mr_epoch, dev->key_secret,
			       SOFT_MR_IDX_BITS, mr, &mr->base, p, addr, length, access, "soft",
			       &idx);
	pthread_mutex_unlock(&dev->lock);
	if (ret) {
		free(mr);
		return ret;
	}
	lkey = mr->base.lkey;
	rkey = mr->base.rkey;

	pa = (uintptr_t)addr & ~(uintptr_t)4095;
	if (cuda) /* device memory: no host pages to pin */
		;
	else if (mlock((void *)pa, (uintptr_t)addr + length - pa) == 0)
		mr->pinned = true;
	else
		pin_warn_once(length, errno);

	mr->idx = idx;
	/* The private entry is the one this process checks; the heap copy is
	 * for peers in other processes (who can write it: it is never read
	 * back here). */
	for (int copy = 0; copy < 2; copy++) {
		e = copy ? &dev->sh->mr[idx] : &dev->mr_priv[idx];
		e->access = (uint32_t)access;
		e->pd_id = pd->id;
		e->addr = (uint64_t)(uintptr_t)addr;
		e->length = length;
		e->iova = iova;
		e->in_heap = in_heap;
		e->cuda = cuda;
		atomic_store_explicit(&e->lkey, lkey, memory_order_relaxed);
		/* rkey last: a peer that sees it sees the rest of the entry */
		atomic_store_explicit(&e->rkey, rkey, memory_order_release);
	}
	*out = &mr->base;
	return 0;
}

static int soft_mr_reg(struct ql_pd *p, void *addr, size_t length, int access, struct ql_mr **out)
{
	return soft_mr_reg_iova(p, addr, length, (uint64_t)(uintptr_t)addr, access, out);
}

static int soft_mr_dereg(struct ql_mr *m)
{
	struct soft_mr *mr = (struct soft_mr *)m;
	struct soft_device *dev = to_dev(m->pd->dev);
	struct soft_mr_entry *e = &dev->sh->mr[mr->idx];
	bool overlap = false;

	/* the engine's queues are read below: not while it drives them */
	ql__soft_engine_park(dev);
	pthread_mutex_lock(&dev->lock);
	if (ql__soft_mr_referenced(dev, m->lkey)) {
		pthread_mutex_unlock(&dev->lock);
		ql__soft_engine_unpark(dev);
		return ql_error_set(-EBUSY, "soft: MR lkey 0x%x is named by a posted work request",
				    m->lkey);
	}
	atomic_store_explicit(&dev->mr_priv[mr->idx].rkey, 0, memory_order_release);
	atomic_store_explicit(&dev->mr_priv[mr->idx].lkey, 0, memory_order_release);
	atomic_store_explicit(&e->rkey, 0, memory_order_release);
	atomic_store_explicit(&e->lkey, 0, memory_order_release);
	dev->mrs[mr->idx] = NULL;
	((struct ql__nic_pd *)m->pd)->nmr--;
	for (uint32_t i = 1; i < SOFT_MAX_MR && !overlap; i++) {
		struct soft_mr *o = dev->mrs[i];

		overlap = o && (uint8_t *)o->base.addr < (uint8_t *)m->addr + m->length &&
			  (uint8_t *)m->addr < (uint8_t *)o->base.addr + o->base.length;
	}
	pthread_mutex_unlock(&dev->lock);
	ql__soft_engine_unpark(dev);
	/* Like a NIC's dereg: once this returns no peer still writes here. */
	ql__soft_dev_wait_peers(dev);
	if (mr->pinned && !overlap) {
		uintptr_t pa = (uintptr_t)m->addr & ~(uintptr_t)4095;

		munlock((void *)pa, (uintptr_t)m->addr + m->length - pa);
	}
	free(mr);
	return 0;
}

static int soft_cq_create(struct ql_device *d, int cqe, struct ql_cq **out)
{
	struct soft_device *dev = to_dev(d);
	struct soft_cq *cq;
	uint32_t size;
	int ret = ql__nic_cq_check(cqe, SOFT_MAX_CQE);

	if (ret)
		return ret;
	size = ql__nic_pow2_at_least((uint32_t)cqe);
	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return -ENOMEM;
	cq->ring = calloc(size, sizeof(*cq->ring));
	cq->rq_qps = calloc(SOFT_MAX_QP, sizeof(*cq->rq_qps));
	cq->pending = calloc(SOFT_MAX_QP, sizeof(*cq->pending));
	if (!cq->ring || !cq->rq_qps || !cq->pending) {
		free(cq->ring);
		free(cq->rq_qps);
		free(cq->pending);
		free(cq);
		return -ENOMEM;
	}
	/* a device whose mlx5 engine may run in its callers: every poll of
	 * its CQs runs it (docs/progress.md) */
	cq->base.head.ops = dev->progress == QL__PROGRESS_THREAD ? &ql__soft_cq_ops :
								   &ql__soft_cq_ops_progress;
	cq->base.dev = d;
	cq->base.cqe = cqe;
	cq->dev = dev;
	cq->depth = cqe;
	cq->mask = size - 1;
	cq->cap_qps = SOFT_MAX_QP;
	*out = &cq->base;
	return 0;
}

/* QL_CQ_INIT_MLX5: a soft CQ (what the engine polls) with an mlx5 CQE ring
 * of the next power of two of cqe entries (mlx5_engine.c). */
static int soft_cq_create_flags(struct ql_device *d, int cqe, unsigned int flags,
				struct ql_cq **out)
{
	uint32_t cnt = 1;
	int ret;

	if (flags != QL_CQ_INIT_MLX5)
		return ql_error_set(-EINVAL, "ql_cq_create_flags: flags 0x%x", flags);
	ret = soft_cq_create(d, cqe, out);
	if (ret)
		return ret;
	while (cnt < (uint32_t)cqe)
		cnt <<= 1;
	ret = ql__soft_mlx5_cq_attach((struct soft_cq *)*out, cnt);
	if (ret) {
		soft_cq_destroy(*out);
		return ret;
	}
	return 0;
}

static int soft_cq_destroy(struct ql_cq *c)
{
	struct soft_cq *cq = (struct soft_cq *)c;
	struct soft_device *dev = cq->dev;

	pthread_mutex_lock(&dev->lock);
	if (cq->nrefs) {
		pthread_mutex_unlock(&dev->lock);
		return ql_error_set(-EBUSY, "soft: CQ still used by %u QPs", cq->nrefs);
	}
	pthread_mutex_unlock(&dev->lock);
	ql__soft_mlx5_cq_detach(cq);
	free(cq->ring);
	free(cq->rq_qps);
	free(cq->pending);
	free(cq);
	return 0;
}

static int soft_progress(struct ql_device *d)
{
	return ql__soft_mlx5_progress(to_dev(d));
}

static const struct ql_device_ops soft_device_ops = {
	.close = soft_close,
	.query = soft_query,
	.counters = soft_counters,
	.pd_alloc = soft_pd_alloc,
	.pd_free = soft_pd_free,
	.mr_reg = soft_mr_reg,
	.mr_reg_iova = soft_mr_reg_iova,
	.mr_dereg = soft_mr_dereg,
	.cq_create = soft_cq_create,
	.cq_destroy = soft_cq_destroy,
	.qp_create = ql__soft_qp_create,
	.qp_destroy = ql__soft_qp_destroy,
	.qp_modify = ql__soft_qp_modify,
	.qp_query = ql__soft_qp_query,
	.cq_create_flags = soft_cq_create_flags,
	.qp_mlx5 = ql__soft_mlx5_qp_view,
	.cq_mlx5 = ql__soft_mlx5_cq_view,
	.progress = soft_progress,
};

/* ---- the provider: schemes, listing, memory ----------------------------- */

static int soft_list(ql_provider_list_cb cb, void *ctx)
{
	int ret = cb(ctx, "soft://loop");

	/* any NAME opens: the template stands for them all */
	return ret ? ret : cb(ctx, "soft+shm://NAME");
}

/* soft+shm (and ql_mem_alloc, pd NULL): the shared heap, which peers in
 * other processes map; soft://loop: ordinary anonymous memory, since its
 * peers are in this process and need not spend heap space. */
static bool soft_mem_in_heap(const struct ql_pd *pd)
{
	return !pd || to_dev(pd->dev)->wire == SOFT_WIRE_SHM;
}

static int soft_mem_alloc(struct ql_pd *pd, size_t length, void **addr)
{
	void *p;

	if (soft_mem_in_heap(pd)) {
		p = ql__soft_heap_alloc(length, 4096);
		if (!p)
			return ql_error_set(-ENOMEM,
					    "soft: %zu bytes not available in the shared heap "
					    "(QLINK_SOFT_HEAP_SIZE)",
					    length);
		*addr = p;
		return 0;
	}
	return ql__nic_mem_map(length, "soft", addr);
}

static void soft_mem_free(struct ql_pd *pd, void *addr, size_t length)
{
	if (soft_mem_in_heap(pd))
		ql__soft_heap_free(addr);
	else
		munmap(addr, length);
}

const struct ql_provider ql_provider_soft = {
	.name = "soft",
	.schemes = (const char *const[]){ "soft", "soft+shm", NULL },
	.open = soft_open,
	.list = soft_list,
	.mem_alloc = soft_mem_alloc,
	.mem_free = soft_mem_free,
	/* the NIC copies with the CPU: host memory the GPU maps (docs/verbs.md) */
	.gpu_mem = QL_MEM_PATH_HOST_MAPPED,
};
