/* SPDX-License-Identifier: MIT */
/*
 * The verbs channel: the server side of a qlink ring over any verbs
 * provider. Requests arrive by RDMA WRITE into the ring (no receive WQEs,
 * no completions: the sequence word is the doorbell); responses leave by
 * RDMA SEND from a registered pool, signaled one in `signal_every` and the
 * last of every burst, and the pool refills from those completions. The
 * completions also say what became of each SEND (ql_channel_send_stats):
 * a signaled success covers every SEND before it, an error (each errored
 * or flushed SEND has its own completion) is a SEND lost.
 *
 * A verbs context lets the channels of one device share one PD and one
 * registered region that holds every channel's response buffers (one MR
 * for all); each ring keeps a registration of its own, so the rkey a
 * client is given covers its ring and nothing else.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "qlink/error.h"
#include "transport/endpoint.h"
#include "transport/rx_ring.h"
#include "transport/txq.h"

#define VCH_MAX_EXTRA_MR 16
#define VCH_IDLE_CHECK 65536 /* idle polls between QP state checks */

struct ql_verbs_context {
	struct ql_device *dev;
	struct ql_pd *pd;
	uint8_t *mem; /* max_channels blocks of block bytes */
	size_t block;
	struct ql_mr *mr;
	uint32_t max_channels;
	pthread_mutex_t lock; /* channel create/destroy, never the hot path */
	uint32_t nused;
	bool *used;
};

/* UC: a response remembered for a resend of its request (key: the
 * request's seq, i.e. its slot and number, and its request_id). */
struct vch_dup {
	uint64_t seq; /* k + 1 of request k; 0: empty */
	uint32_t request_id;
	uint32_t len;
	uint8_t *bytes; /* slot_size bytes in vch.dup_mem */
};

struct vch {
	struct ql__channel_head head;
	struct ql_endpoint ep; /* PD (maybe the context's), CQs, RC QP */
	struct ql_qp *qp;      /* = ep.qp */
	struct ql_cq *scq;     /* = ep.scq */
	struct ql_verbs_context *ctx;
	uint32_t ctx_block;
	uint8_t *ring;
	size_t ring_len;
	struct ql_mr *ring_mr;
	struct ql_rx_ring rx;
	uint8_t *txmem;
	size_t tx_len;
	struct ql_mr *tx_mr; /* the context's when shared */
	struct ql_txq tx;    /* the responses (txq.h) */
	uint32_t idle;
	struct ql_mr *extra[VCH_MAX_EXTRA_MR];
	int nextra;
	/* UC duplicate answering (ndup == 0 on RC) */
	uint32_t ndup;
	uint64_t answered; /* responses sent to requests taken: request k's is
			      the k-th (one per request, in order) */
	struct vch_dup *dup;
	uint8_t *dup_mem;
	uint64_t dup_cursor; /* the next request whose slot dup_scan looks at */
	struct ql_verbs_channel_uc_stats uc;
};

/* request_id of the message in a ring slot (0 when too short for one). */
static inline uint32_t slot_request_id(const uint8_t *slot, uint32_t cap)
{
	uint32_t len, id = 0;

	__builtin_memcpy(&len, slot + 8, 4);
	if (len >= 16 && cap >= 16)
		__builtin_memcpy(&id, slot + QL_RING_SLOT_HDR + 12, 4);
	return id;
}

static const struct ql__channel_ops vch_ops;
static void dup_scan(struct vch *c);

static int vch_receive_burst(struct ql_channel *ch, struct ql_buffer **bufs, int max)
{
	struct vch *c = (struct vch *)ch;
	int n = ql_rx_ring_burst(&c->rx, bufs, max);

	if (n)
		return n;
	/* requests arrive as WRITEs, with no completion to poll: a software
	 * NIC in caller progress mode runs here (docs/progress.md) */
	if (ql_device_progress(c->ep.dev) > 0 && (n = ql_rx_ring_burst(&c->rx, bufs, max)))
		return n;
	/* Idle: return finished response buffers, and now and then look at
	 * the QP (a peer that died takes it to ERR). */
	if (c->tx.posted != c->tx.done)
		ql_txq_reap(&c->tx, c->scq);
	if (c->ndup && !c->tx.err)
		dup_scan(c);
	if (++c->idle >= VCH_IDLE_CHECK) {
		c->idle = 0;
		if (ql_qp_state(c->qp) == IBV_QPS_ERR && !c->tx.err)
			c->tx.err = -ECONNRESET;
	}
	return c->tx.err ? c->tx.err : 0;
}

/* UC: remember the response to request c->answered for its resends. */
static inline void dup_remember(struct vch *c, const struct ql_buffer *b)
{
	uint64_t k = c->answered;
	struct vch_dup *d = &c->dup[k % c->ndup];
	const uint8_t *slot = c->ring + ql_ring_slot_offset(c->rx.num_slots, c->rx.slot_size, k);

	d->seq = k + 1;
	d->request_id = slot_request_id(slot, c->rx.slot_size - QL_RING_SLOT_HDR);
	d->len = b->len <= c->rx.slot_size ? b->len : c->rx.slot_size;
	__builtin_memcpy(d->bytes, ql_buffer_data(b), d->len);
}

static int vch_send_burst(struct ql_channel *ch, struct ql_buffer **bufs, int n)
{
	struct vch *c = (struct vch *)ch;
	int i;

	if (c->tx.err)
		return c->tx.err;
	for (i = 0; i < n; i++) {
		if (c->ndup)
			dup_remember(c, bufs[i]);
		if (ql_txq_post(&c->tx, c->qp, bufs[i], i == n - 1))
			break;
		c->answered++;
	}
	ql_txq_after_burst(&c->tx, c->scq);
	return i ? i : c->tx.err;
}

/*
 * UC, when idle: a slot of a request already answered whose seq word is
 * back (the channel cleared it when it took the request) holds a resend:
 * the client did not get the response. Answer it from the cache, never by
 * running the handler again; a resend older than the cache is counted and
 * ignored. Every slot of the last num_slots requests answered can hold
 * one; a cursor looks at VCH_DUP_SCAN of them per idle poll, so that an
 * idle poll stays short whatever the ring's size.
 */
#define VCH_DUP_SCAN 32u

static void dup_scan(struct vch *c)
{
	const uint32_t cap = c->rx.slot_size - QL_RING_SLOT_HDR;
	const uint64_t lo = c->answered > c->rx.num_slots ? c->answered - c->rx.num_slots : 0;
	uint64_t todo = c->answered - lo;

	if (todo > VCH_DUP_SCAN)
		todo = VCH_DUP_SCAN;
	for (; todo; todo--) {
		uint64_t k;
		uint8_t *slot;
		_Atomic uint64_t *seqw;
		const struct vch_dup *d;
		struct ql_buffer *b;
		uint32_t stamp;

		if (c->dup_cursor < lo || c->dup_cursor >= c->answered)
			c->dup_cursor = lo;
		k = c->dup_cursor++;
		slot = c->ring + ql_ring_slot_offset(c->rx.num_slots, c->rx.slot_size, k);
		seqw = (_Atomic uint64_t *)(void *)slot;
		if (atomic_load_explicit(seqw, memory_order_acquire) != k + 1)
			continue;
		__builtin_memcpy(&stamp, slot + 12, 4);
		if (stamp != (uint32_t)(k + 1))
			continue; /* its message WRITE is not here (yet) */
		d = &c->dup[k % c->ndup];
		if (d->seq != k + 1 || d->request_id != slot_request_id(slot, cap)) {
			atomic_store_explicit(seqw, 0, memory_order_relaxed);
			c->uc.dup_missed++;
			continue;
		}
		b = ql_txq_acquire(&c->tx, c->scq);
		if (!b) {
			c->dup_cursor = k; /* no buffer now: on a later idle poll */
			return;
		}
		atomic_store_explicit(seqw, 0, memory_order_relaxed);
		ql_buffer_reset(b, 0);
		__builtin_memcpy(ql_buffer_append(b, d->len), d->bytes, d->len);
		if (ql_txq_post(&c->tx, c->qp, b, true)) {
			ql_pool_put(c->tx.pool, b);
			return;
		}
		c->uc.dup_answered++;
	}
}

static struct ql_buffer *vch_acquire(struct ql_channel *ch)
{
	struct vch *c = (struct vch *)ch;

	return ql_txq_acquire(&c->tx, c->scq);
}

static void vch_release(struct ql_channel *ch, struct ql_buffer *b)
{
	struct vch *c = (struct vch *)ch;

	/* receive buffers are ring slots: nothing to do, the client reuses a
	 * slot once its response arrived */
	if (b >= c->rx.bufs && b < c->rx.bufs + c->rx.num_slots)
		return;
	ql_pool_put(c->tx.pool, b);
}

static int vch_register(struct ql_channel *ch, void *addr, size_t len, uint32_t *lkey)
{
	struct vch *c = (struct vch *)ch;
	int ret;

	if (c->nextra == VCH_MAX_EXTRA_MR)
		return ql_error_set(-ENOSPC, "verbs channel: at most %d extra regions",
				    VCH_MAX_EXTRA_MR);
	ret = ql_mr_reg(c->ep.pd, addr, len, IBV_ACCESS_LOCAL_WRITE, &c->extra[c->nextra]);
	if (ret)
		return ret;
	*lkey = ql_mr_lkey(c->extra[c->nextra++]);
	return 0;
}

static void vch_send_stats(const struct ql_channel *ch, struct ql_channel_send_stats *s)
{
	ql_txq_stats(&((const struct vch *)ch)->tx, s);
}

static void vch_reap_sends(struct ql_channel *ch)
{
	struct vch *c = (struct vch *)ch;

	if (c->tx.posted != c->tx.done)
		ql_txq_reap(&c->tx, c->scq);
}

static int vch_poll_errors(struct ql_channel *ch)
{
	return ((struct vch *)ch)->tx.err;
}

/* Response memory: a block of the context's region, or the channel's own. */
static int tx_mem_get(struct vch *c)
{
	struct ql_verbs_context *x = c->ctx;
	uint32_t i;

	if (!x) {
		void *mem;
		int ret = ql_pd_mem_alloc(c->ep.pd, c->tx_len, &mem);

		if (ret)
			return ret;
		c->txmem = mem;
		return 0;
	}
	if (c->tx_len > x->block)
		return ql_error_set(-EMSGSIZE,
				    "verbs channel: %zu bytes of response buffers, the context "
				    "gives a channel %zu",
				    c->tx_len, x->block);
	pthread_mutex_lock(&x->lock);
	for (i = 0; i < x->max_channels && x->used[i]; i++)
		;
	if (i == x->max_channels) {
		pthread_mutex_unlock(&x->lock);
		return ql_error_set(-ENOSPC, "verbs channel: the context's %u channels are in use",
				    x->max_channels);
	}
	x->used[i] = true;
	x->nused++;
	pthread_mutex_unlock(&x->lock);
	c->ctx_block = i;
	c->txmem = x->mem + (size_t)i * x->block;
	c->tx_mr = x->mr;
	return 0;
}

static void tx_mem_put(struct vch *c)
{
	struct ql_verbs_context *x = c->ctx;

	if (!c->txmem)
		return;
	if (!x) {
		if (c->tx_mr)
			ql_mr_dereg(c->tx_mr);
		ql_pd_mem_free(c->ep.pd, c->txmem);
		return;
	}
	pthread_mutex_lock(&x->lock);
	x->used[c->ctx_block] = false;
	x->nused--;
	pthread_mutex_unlock(&x->lock);
}

static void vch_destroy(struct ql_channel *ch)
{
	struct vch *c = (struct vch *)ch;

	ql_endpoint_close_qp(&c->ep);
	if (c->ring_mr)
		ql_mr_dereg(c->ring_mr);
	for (int i = 0; i < c->nextra; i++)
		ql_mr_dereg(c->extra[i]);
	tx_mem_put(c);
	ql_rx_ring_fini(&c->rx);
	ql_pool_destroy(c->tx.pool);
	free(c->tx.inflight);
	free(c->dup);
	free(c->dup_mem);
	if (c->ring)
		ql_pd_mem_free(c->ep.pd, c->ring);
	/* after the memory: a PD with memory outstanding is busy */
	ql_endpoint_close_pd(&c->ep);
	free(c);
}

int ql_verbs_channel_create(struct ql_device *dev, const struct ql_verbs_channel_config *cfg,
			    struct ql_channel **out)
{
	struct vch *c;
	void *mem;
	int ret;

	if (!dev || !cfg || !out)
		return -EINVAL;
	if (cfg->ctx && cfg->ctx->dev != dev)
		return ql_error_set(-EINVAL, "verbs channel: the context is another device's");
	ret = ql_ring_check_geometry(cfg->num_slots, cfg->slot_size);
	if (ret)
		return ret;
	if (cfg->qp_type && cfg->qp_type != IBV_QPT_RC && cfg->qp_type != IBV_QPT_UC)
		return ql_error_set(-EINVAL, "verbs channel: QP type %d is neither RC nor UC",
				    (int)cfg->qp_type);
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->head.ops = &vch_ops;
	c->ctx = cfg->ctx;
	c->tx.ntx = cfg->tx_buffers ? cfg->tx_buffers : cfg->num_slots;
	c->tx.signal_every = cfg->signal_every ? cfg->signal_every : 16;
	if (c->tx.signal_every > c->tx.ntx)
		c->tx.signal_every = c->tx.ntx;

	c->ring_len = ql_ring_bytes(cfg->num_slots, cfg->slot_size);
	c->tx_len = ql_pool_region_size(c->tx.ntx, cfg->slot_size);
	c->tx.inflight = calloc(c->tx.ntx, sizeof(*c->tx.inflight));
	if (!c->tx.inflight) {
		ret = -ENOMEM;
		goto err;
	}
	/* the PD first: the ring and buffers are its memory (the device's
	 * kind: soft+shm's shared heap, pages for ibv_reg_mr) */
	ret = ql_endpoint_open_pd(dev, c->ctx ? c->ctx->pd : NULL, &c->ep);
	if (ret)
		goto err;
	ret = ql_pd_mem_alloc(c->ep.pd, c->ring_len, &mem);
	if (ret)
		goto err;
	c->ring = mem;
	ret = tx_mem_get(c);
	if (ret)
		goto err;
	ret = ql_rx_ring_init(&c->rx, c->ring, cfg->num_slots, cfg->slot_size);
	if (ret)
		goto err;
	if (cfg->qp_type == IBV_QPT_UC) {
		c->rx.uc = true;
		/* by default every request a client can have outstanding (the
		 * ring), up to 16 MiB of copies */
		c->ndup = cfg->dup_cache ? cfg->dup_cache : cfg->num_slots;
		if (!cfg->dup_cache && (uint64_t)c->ndup * cfg->slot_size > (16u << 20))
			c->ndup = (16u << 20) / cfg->slot_size;
		if (c->ndup > cfg->num_slots)
			c->ndup = cfg->num_slots;
		c->dup = calloc(c->ndup, sizeof(*c->dup));
		c->dup_mem = calloc(c->ndup, cfg->slot_size);
		if (!c->dup || !c->dup_mem) {
			ret = -ENOMEM;
			goto err;
		}
		for (uint32_t i = 0; i < c->ndup; i++)
			c->dup[i].bytes = c->dup_mem + (size_t)i * cfg->slot_size;
	}
	ret = ql_pool_create(c->txmem, c->tx_len, c->tx.ntx, cfg->slot_size, 0, &c->tx.pool);
	if (ret)
		goto err;
	ret = ql_mr_reg(c->ep.pd, c->ring, c->ring_len,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, &c->ring_mr);
	if (ret)
		goto err;
	if (!c->ctx) {
		ret = ql_mr_reg(c->ep.pd, c->txmem, c->tx_len, IBV_ACCESS_LOCAL_WRITE, &c->tx_mr);
		if (ret)
			goto err;
	}
	c->tx.lkey = ql_mr_lkey(c->tx_mr);
	/* requests need no receive WQE (they are WRITEs): one, unused */
	ret = ql_endpoint_create_qp(&c->ep, c->tx.ntx, 1, cfg->qp_type);
	if (ret)
		goto err;
	c->qp = c->ep.qp;
	c->scq = c->ep.scq;
	c->tx.max_inline = c->ep.max_inline;
	*out = (struct ql_channel *)c;
	return 0;
err:
	vch_destroy((struct ql_channel *)c);
	return ret;
}

int ql_verbs_channel_info(struct ql_channel *ch, struct ql_verbs_channel_info *info)
{
	struct vch *c = (struct vch *)ch;

	if (!ch || !info || ((const struct ql__channel_head *)(const void *)ch)->ops != &vch_ops)
		return -EINVAL;
	info->pd = c->ep.pd;
	info->ctx = c->ctx;
	info->ring = c->ring;
	info->ring_len = c->ring_len;
	info->ring_rkey = ql_mr_rkey(c->ring_mr);
	info->tx_mem = c->txmem;
	info->tx_len = c->tx_len;
	info->tx_lkey = c->tx.lkey;
	return 0;
}

/* ---- the shared verbs context ------------------------------------------------ */

int ql_verbs_context_create(struct ql_device *dev, const struct ql_verbs_context_config *cfg,
			    struct ql_verbs_context **out)
{
	struct ql_verbs_context *x;
	size_t len;
	void *mem;
	int ret;

	if (!dev || !out)
		return -EINVAL;
	x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	x->dev = dev;
	x->max_channels = cfg && cfg->max_channels ? cfg->max_channels : 16;
	x->block = cfg && cfg->tx_bytes ? cfg->tx_bytes : 65536;
	/* blocks on cache lines: no false sharing between channels' buffers */
	x->block = (x->block + 63) & ~(size_t)63;
	if (x->max_channels > 4096 || x->block > (1u << 30) / x->max_channels) {
		ret = ql_error_set(-EINVAL,
				   "verbs context: %u channels of %zu bytes is more than "
				   "1 GiB (or 4096 channels)",
				   x->max_channels, x->block);
		free(x);
		return ret;
	}
	len = x->block * x->max_channels;
	pthread_mutex_init(&x->lock, NULL);
	x->used = calloc(x->max_channels, sizeof(*x->used));
	if (!x->used) {
		ret = -ENOMEM;
		goto err;
	}
	ret = ql_pd_alloc(dev, &x->pd);
	if (ret)
		goto err;
	ret = ql_pd_mem_alloc(x->pd, len, &mem);
	if (ret)
		goto err;
	x->mem = mem;
	ret = ql_mr_reg(x->pd, x->mem, len, IBV_ACCESS_LOCAL_WRITE, &x->mr);
	if (ret)
		goto err;
	*out = x;
	return 0;
err:
	x->nused = 0;
	ql_verbs_context_destroy(x);
	return ret;
}

int ql_verbs_context_destroy(struct ql_verbs_context *x)
{
	if (!x)
		return 0;
	if (x->nused)
		return ql_error_set(-EBUSY, "verbs context: %u channels still use it", x->nused);
	if (x->mr)
		ql_mr_dereg(x->mr);
	if (x->mem)
		ql_pd_mem_free(x->pd, x->mem);
	if (x->pd)
		ql_pd_free(x->pd);
	free(x->used);
	pthread_mutex_destroy(&x->lock);
	free(x);
	return 0;
}

struct ql_pd *ql_verbs_context_pd(const struct ql_verbs_context *x)
{
	return x ? x->pd : NULL;
}

uint32_t ql_verbs_context_channels(struct ql_verbs_context *x)
{
	uint32_t n;

	if (!x)
		return 0;
	pthread_mutex_lock(&x->lock);
	n = x->nused;
	pthread_mutex_unlock(&x->lock);
	return n;
}

int ql_verbs_channel_local_params(struct ql_channel *ch, struct ql_conn_params *p)
{
	struct vch *c = (struct vch *)ch;
	int ret;

	if (!ch || !p || ((const struct ql__channel_head *)(const void *)ch)->ops != &vch_ops)
		return -EINVAL;
	ret = ql_qp_local_params(c->qp, p);
	if (ret)
		return ret;
	p->vaddr = (uint64_t)(uintptr_t)c->ring;
	p->rkey = ql_mr_rkey(c->ring_mr);
	p->length = c->ring_len;
	p->num_slots = c->rx.num_slots;
	p->slot_size = c->rx.slot_size;
	return 0;
}

int ql_verbs_channel_connect(struct ql_channel *ch, const struct ql_conn_params *client,
			     const struct ql_qp_connect_opts *opts)
{
	struct vch *c = (struct vch *)ch;
	struct ql_qp_connect_opts uc_opts;
	int ret;

	if (!ch || !client || ((const struct ql__channel_head *)(const void *)ch)->ops != &vch_ops)
		return -EINVAL;
	/* UC has no READ or atomics: grant only what a UC QP can carry */
	if (!opts && c->ep.qp_type == IBV_QPT_UC) {
		ql_qp_connect_opts_default(&uc_opts);
		uc_opts.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
		opts = &uc_opts;
	}
	ret = ql_qp_connect(c->qp, client, opts);
	if (!ret)
		c->tx.err = 0;
	return ret;
}

int ql_verbs_channel_reset_ring(struct ql_channel *ch)
{
	struct vch *c = (struct vch *)ch;

	if (!ch || ((const struct ql__channel_head *)(const void *)ch)->ops != &vch_ops)
		return -EINVAL;
	ql_rx_ring_reset(&c->rx);
	c->answered = 0;
	c->dup_cursor = 0;
	for (uint32_t i = 0; i < c->ndup; i++)
		c->dup[i].seq = 0;
	return 0;
}

int ql_verbs_channel_uc_stats(struct ql_channel *ch, struct ql_verbs_channel_uc_stats *st)
{
	struct vch *c = (struct vch *)ch;

	if (!ch || !st || ((const struct ql__channel_head *)(const void *)ch)->ops != &vch_ops)
		return -EINVAL;
	*st = c->uc;
	return 0;
}

static struct ql_device *vch_device(const struct ql_channel *ch)
{
	return ((const struct vch *)ch)->ep.dev;
}

static const struct ql__channel_ops vch_ops = {
	.receive_burst = vch_receive_burst,
	.send_burst = vch_send_burst,
	.acquire_buffer = vch_acquire,
	.release_buffer = vch_release,
	.register_memory = vch_register,
	.poll_errors = vch_poll_errors,
	.destroy = vch_destroy,
	.send_stats = vch_send_stats,
	.reap_sends = vch_reap_sends,
	.device = vch_device,
};
