/* SPDX-License-Identifier: MIT */
/*
 * The hsb channel: the host side of the Hololink-compatible data plane
 * (qlink/hsb.h, docs/wire-protocol.md "hsb transport").
 *
 * The pages are one region registered at iova 0. A board writes each
 * frame's bytes into a page with plain WRITEs (no completion here), then
 * its metadata with one WRITE WITH IMMEDIATE at page + round_up(frame_len,
 * 128), immediate = page | PSN << 12. Each receive WQE is a credit, not a
 * place: that write consumes the WQE at the head of the receive queue
 * whatever page it wrote, so the page is the immediate's low 12 bits,
 * checked against num_pages because it is the peer's word. The frame is
 * frame_len bytes (what the board was told to write), never the
 * completion's byte_len (the metadata's 128; a QCS that writes the frame
 * itself with the immediate, as CUDA-Q's emulator does, gives the frame's
 * length there, at most a page). A good frame is handed on as the page's
 * buffer; its WQE is given back when the buffer comes back (after the
 * request was answered or dropped). A refused frame's WQE is re-posted at
 * once, and the refusal counted by reason.
 *
 * Given-back WQEs are re-posted in batches of up to HCH_REPOST_BATCH, one
 * post_recv call for the lot: every re-post publishes the receive queue's
 * tail, a cache line the QCS's NIC reads for every frame (on soft+shm a
 * line the peer's core must fetch again each time it changes). So that a
 * QCS with all num_pages frames outstanding still finds a WQE, the queue
 * holds num_pages + batch - 1: at least one WQE per free page stays posted
 * whatever is held back (and the receive CQ as many completions).
 *
 * Responses leave by SEND from a pool whose buffers are exactly the QCS's
 * receive buffer size, so none can be larger.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "qlink/error.h"
#include "qlink/hsb.h"
#include "transport/hsb_int.h"
#include "transport/txq.h"

#define HCH_IDLE_CHECK 65536
#define HCH_REPOST_BATCH 16u
/* the dispatcher is the only writer; readers in other threads see whole values */
#define BUMP(x) __atomic_store_n(&(x), (x) + 1, __ATOMIC_RELAXED)

struct hch {
	struct ql__channel_head head;
	struct ql_device *dev;
	struct ql_pd *pd;
	struct ql_cq *scq, *rcq;
	struct ql_qp *qp;
	uint8_t *pages;
	size_t pages_len;
	struct ql_mr *pages_mr; /* at iova 0, REMOTE_WRITE */
	uint32_t num_pages, page_size, frame_len, resp_size;
	uint32_t rq_depth;			  /* num_pages + batch - 1 receive WQEs */
	uint32_t batch;				  /* re-post when this many are given back */
	uint32_t unposted;			  /* WQEs given back, not re-posted yet */
	struct ibv_recv_wr rwr[HCH_REPOST_BATCH]; /* a pre-linked chain */
	struct ql_buffer *bufs;			  /* one per page */
	bool *busy;				  /* page handed on, not yet back */
	uint32_t *imm;				  /* the immediate of a page's frame */
	uint8_t *txmem;
	size_t tx_len;
	struct ql_mr *tx_mr;
	struct ql_txq tx; /* the responses (txq.h) */
	uint32_t idle;
	struct ql_hsb_channel_stats st;
	struct ql_mr *extra[16];
	int nextra;
};

static const struct ql__channel_ops hch_ops;

/* Post the WQEs given back (a chain of n from the pre-linked array). */
static int repost_flush(struct hch *c)
{
	uint32_t n = c->unposted;
	struct ibv_recv_wr *bad;

	while (n) {
		uint32_t k = n < HCH_REPOST_BATCH ? n : HCH_REPOST_BATCH;
		struct ibv_recv_wr *last = &c->rwr[k - 1];

		last->next = NULL;
		if (ql_qp_post_recv(c->qp, &c->rwr[0], &bad) && !c->tx.err)
			c->tx.err = -EIO;
		last->next = k < HCH_REPOST_BATCH ? last + 1 : NULL;
		n -= k;
	}
	c->unposted = 0;
	return c->tx.err;
}

/* A consumed WQE comes back: re-post it with the batch. */
static inline void give_back(struct hch *c)
{
	if (++c->unposted >= c->batch)
		repost_flush(c);
}

/* A refused frame: its WQE (and any held back) at once. */
static inline void repost_now(struct hch *c)
{
	c->unposted++;
	repost_flush(c);
}

static int hch_receive_burst(struct ql_channel *ch, struct ql_buffer **bufs, int max)
{
	struct hch *c = (struct hch *)ch;
	struct ibv_wc wc[32];
	int n, k = 0;

	if (max > 32)
		max = 32;
	n = ql_cq_poll(c->rcq, max, wc);
	if (n < 0)
		return c->tx.err = n;
	for (int i = 0; i < n; i++) {
		const struct ibv_wc *w = &wc[i];
		uint32_t page, imm;

		if (w->status != IBV_WC_SUCCESS) {
			/* flushed: the QP failed (peer gone); anything else is
			 * the peer's doing and costs it this frame */
			BUMP(c->st.recv_errors);
			if (w->status == IBV_WC_WR_FLUSH_ERR) {
				if (!c->tx.err)
					c->tx.err = -ECONNRESET;
			} else {
				repost_now(c);
			}
			continue;
		}
		if (w->opcode != IBV_WC_RECV_RDMA_WITH_IMM || !(w->wc_flags & IBV_WC_WITH_IMM)) {
			BUMP(c->st.not_imm);
			repost_now(c);
			continue;
		}
		imm = ntohl(w->imm_data);
		page = imm & QL_HSB_IMM_PAGE_MASK;
		if (page >= c->num_pages) {
			BUMP(c->st.bad_imm);
			repost_now(c);
			continue;
		}
		if (w->byte_len > c->page_size) {
			BUMP(c->st.bad_len);
			repost_now(c);
			continue;
		}
		if (c->busy[page]) {
			BUMP(c->st.page_busy);
			repost_now(c);
			continue;
		}
		c->busy[page] = true;
		c->imm[page] = imm;
		c->bufs[page].len = c->frame_len;
		bufs[k++] = &c->bufs[page];
	}
	if (k)
		__atomic_store_n(&c->st.frames, c->st.frames + (uint64_t)k, __ATOMIC_RELAXED);
	if (k)
		return k;
	if (c->tx.posted != c->tx.done)
		ql_txq_reap(&c->tx, c->scq);
	if (++c->idle >= HCH_IDLE_CHECK) {
		c->idle = 0;
		if (ql_qp_state(c->qp) == IBV_QPS_ERR && !c->tx.err)
			c->tx.err = -ECONNRESET;
	}
	return c->tx.err;
}

static int hch_send_burst(struct ql_channel *ch, struct ql_buffer **bufs, int n)
{
	struct hch *c = (struct hch *)ch;
	int i;

	if (c->tx.err)
		return c->tx.err;
	for (i = 0; i < n; i++) {
		/* the pool's buffers are resp_size: a longer one is not ours */
		if (bufs[i]->len > c->resp_size) {
			BUMP(c->st.resp_too_big);
			break;
		}
		if (ql_txq_post(&c->tx, c->qp, bufs[i], i == n - 1))
			break;
	}
	ql_txq_after_burst(&c->tx, c->scq);
	return i ? i : c->tx.err;
}

static struct ql_buffer *hch_acquire(struct ql_channel *ch)
{
	struct hch *c = (struct hch *)ch;

	return ql_txq_acquire(&c->tx, c->scq);
}

static void hch_release(struct ql_channel *ch, struct ql_buffer *b)
{
	struct hch *c = (struct hch *)ch;

	if (b >= c->bufs && b < c->bufs + c->num_pages) {
		/* the page is free again: give its receive WQE back */
		if (c->busy[b->index]) {
			c->busy[b->index] = false;
			give_back(c);
		}
		return;
	}
	ql_pool_put(c->tx.pool, b);
}

static int hch_register(struct ql_channel *ch, void *addr, size_t len, uint32_t *lkey)
{
	struct hch *c = (struct hch *)ch;
	int ret;

	if (c->nextra == 16)
		return ql_error_set(-ENOSPC, "hsb channel: at most 16 extra regions");
	ret = ql_mr_reg(c->pd, addr, len, IBV_ACCESS_LOCAL_WRITE, &c->extra[c->nextra]);
	if (ret)
		return ret;
	*lkey = ql_mr_lkey(c->extra[c->nextra++]);
	return 0;
}

static int hch_poll_errors(struct ql_channel *ch)
{
	return ((struct hch *)ch)->tx.err;
}

static void hch_destroy(struct ql_channel *ch)
{
	struct hch *c = (struct hch *)ch;

	if (c->qp)
		ql_qp_destroy(c->qp);
	if (c->scq)
		ql_cq_destroy(c->scq);
	if (c->rcq)
		ql_cq_destroy(c->rcq);
	if (c->pages_mr)
		ql_mr_dereg(c->pages_mr);
	if (c->tx_mr)
		ql_mr_dereg(c->tx_mr);
	for (int i = 0; i < c->nextra; i++)
		ql_mr_dereg(c->extra[i]);
	ql_pool_destroy(c->tx.pool);
	if (c->pages)
		ql_pd_mem_free(c->pd, c->pages);
	if (c->txmem)
		ql_pd_mem_free(c->pd, c->txmem);
	if (c->pd)
		ql_pd_free(c->pd);
	free(c->bufs);
	free(c->busy);
	free(c->imm);
	free(c->tx.inflight);
	free(c);
}

static int create_qp(struct hch *c)
{
	struct ql_device_attr attr;
	struct ql_qp_setup qs;
	struct ibv_qp_cap cap;
	int ret = ql_device_query(c->dev, &attr);

	if (ret)
		return ret;
	if (c->tx.ntx > (uint32_t)attr.dev.max_qp_wr || c->num_pages > (uint32_t)attr.dev.max_qp_wr)
		return ql_error_set(-EINVAL,
				    "hsb channel: %u pages or %u responses exceed the "
				    "device's %d work requests",
				    c->num_pages, c->tx.ntx, attr.dev.max_qp_wr);
	/* the batch's headroom, as far as the device allows (1: none) */
	c->batch = (uint32_t)attr.dev.max_qp_wr - c->num_pages + 1;
	if (c->batch > HCH_REPOST_BATCH)
		c->batch = HCH_REPOST_BATCH;
	c->rq_depth = c->num_pages + c->batch - 1;
	qs = (struct ql_qp_setup){ .qp_type = IBV_QPT_UC,
				   .send_wr = c->tx.ntx,
				   .recv_wr = c->rq_depth,
				   .max_inline = 256 };
	ret = ql_qp_setup(c->pd, &qs, &c->scq, &c->rcq, &c->qp, &cap);
	if (ret)
		return ret;
	c->tx.max_inline = cap.max_inline_data;
	/* the re-post chain: WQEs without SGEs (WRITE WITH IMMEDIATE places
	 * nothing); wr_id means nothing, the page is the immediate's */
	for (uint32_t i = 0; i < HCH_REPOST_BATCH; i++) {
		c->rwr[i].wr_id = 0;
		c->rwr[i].num_sge = 0;
		c->rwr[i].next = i + 1 < HCH_REPOST_BATCH ? &c->rwr[i + 1] : NULL;
	}
	return 0;
}

int ql_hsb_channel_create(struct ql_device *dev, const struct ql_hsb_channel_config *cfg,
			  struct ql_channel **out)
{
	struct ql_hsb_params geo = { 0 };
	struct hch *c;
	void *mem;
	int ret;

	if (!dev || !cfg || !out)
		return -EINVAL;
	geo.num_pages = cfg->num_pages ? cfg->num_pages : QL_HSB_DEFAULT_PAGES;
	geo.page_size = cfg->page_size ? cfg->page_size : QL_HSB_DEFAULT_PAGE_SIZE;
	/* the largest frame that leaves its metadata room in the page */
	geo.frame_len = cfg->frame_len ? cfg->frame_len :
			geo.page_size > QL_HSB_METADATA_SIZE ?
					 geo.page_size - QL_HSB_METADATA_SIZE :
					 geo.page_size;
	geo.resp_size = cfg->resp_size ? cfg->resp_size : QL_HSB_DEFAULT_RESP_SIZE;
	ret = ql_hsb_params_check(&geo);
	if (ret)
		return ret;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->head.ops = &hch_ops;
	c->dev = dev;
	c->num_pages = geo.num_pages;
	c->page_size = geo.page_size;
	c->frame_len = geo.frame_len;
	c->resp_size = geo.resp_size;
	c->tx.ntx = cfg->tx_buffers ? cfg->tx_buffers : c->num_pages;
	c->tx.signal_every = cfg->signal_every ? cfg->signal_every : 16;
	if (c->tx.signal_every > c->tx.ntx)
		c->tx.signal_every = c->tx.ntx;
	c->pages_len = (size_t)c->num_pages * c->page_size;
	c->tx_len = ql_pool_region_size(c->tx.ntx, c->resp_size);
	c->bufs = calloc(c->num_pages, sizeof(*c->bufs));
	c->busy = calloc(c->num_pages, sizeof(*c->busy));
	c->imm = calloc(c->num_pages, sizeof(*c->imm));
	c->tx.inflight = calloc(c->tx.ntx, sizeof(*c->tx.inflight));
	if (!c->bufs || !c->busy || !c->imm || !c->tx.inflight) {
		ret = -ENOMEM;
		goto err;
	}
	ret = ql_pd_alloc(dev, &c->pd);
	if (ret)
		goto err;
	ret = ql_pd_mem_alloc(c->pd, c->pages_len, &mem);
	if (ret)
		goto err;
	c->pages = mem;
	ret = ql_pd_mem_alloc(c->pd, c->tx_len, &mem);
	if (ret)
		goto err;
	c->txmem = mem;
	/* iova 0: the QCS addresses page k as k x page_size (below 2^39) */
	ret = ql_mr_reg_iova(c->pd, c->pages, c->pages_len, 0,
			     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, &c->pages_mr);
	if (ret)
		goto err;
	ret = ql_mr_reg(c->pd, c->txmem, c->tx_len, IBV_ACCESS_LOCAL_WRITE, &c->tx_mr);
	if (ret)
		goto err;
	c->tx.lkey = ql_mr_lkey(c->tx_mr);
	ret = ql_pool_create(c->txmem, c->tx_len, c->tx.ntx, c->resp_size, 0, &c->tx.pool);
	if (ret)
		goto err;
	for (uint32_t i = 0; i < c->num_pages; i++) {
		c->bufs[i].base = c->pages + (size_t)i * c->page_size;
		c->bufs[i].capacity = c->page_size;
		c->bufs[i].index = i;
	}
	ret = create_qp(c);
	if (ret)
		goto err;
	*out = (struct ql_channel *)c;
	return 0;
err:
	hch_destroy((struct ql_channel *)c);
	return ret;
}

static struct hch *to_hch(struct ql_channel *ch)
{
	if (!ch || ((const struct ql__channel_head *)(const void *)ch)->ops != &hch_ops)
		return NULL;
	return (struct hch *)ch;
}

int ql_hsb_channel_local_params(struct ql_channel *ch, struct ql_hsb_params *p)
{
	struct hch *c = to_hch(ch);
	struct ql_conn_params q;
	int ret;

	if (!c || !p)
		return -EINVAL;
	ret = ql_qp_local_params(c->qp, &q);
	if (ret)
		return ret;
	memset(p, 0, sizeof(*p));
	p->qpn = q.qpn;
	p->gid = q.gid;
	p->mtu = q.mtu;
	p->rkey = ql_mr_rkey(c->pages_mr);
	p->page_addr = 0;
	p->page_size = c->page_size;
	p->num_pages = c->num_pages;
	p->frame_len = c->frame_len;
	p->resp_size = c->resp_size;
	return 0;
}

int ql_hsb_channel_connect(struct ql_channel *ch, const struct ql_conn_params *qcs,
			   const struct ql_qp_connect_opts *opts)
{
	struct hch *c = to_hch(ch);
	struct ql_qp_connect_opts o;
	struct ql_conn_params peer;
	int ret;

	if (!c || !qcs)
		return -EINVAL;
	if (opts)
		o = *opts;
	else
		ql_qp_connect_opts_default(&o);
	/* UC: WRITE is all a peer may do (no READ, no atomics on UC) */
	o.access = IBV_ACCESS_REMOTE_WRITE;
	o.local_psn = 0; /* HSB starts both directions at PSN 0 */
	peer = *qcs;
	peer.psn = 0;
	ret = ql_qp_connect(c->qp, &peer, &o);
	if (ret)
		return ret;
	/* one receive WQE per page and the batch's headroom */
	for (uint32_t i = 0; i < c->num_pages; i++)
		c->busy[i] = false;
	c->tx.err = 0;
	c->unposted = c->rq_depth;
	ret = repost_flush(c);
	if (ret)
		return ql_error_set(ret, "hsb channel: posting %u receives failed", c->rq_depth);
	return 0;
}

int ql__hsb_channel_pages(struct ql_channel *ch, uint8_t **base, size_t *len)
{
	struct hch *c = to_hch(ch);

	if (!c || !base || !len)
		return -EINVAL;
	*base = c->pages;
	*len = c->pages_len;
	return 0;
}

int ql_hsb_channel_stats(struct ql_channel *ch, struct ql_hsb_channel_stats *s)
{
	struct hch *c = to_hch(ch);

	if (!c || !s)
		return -EINVAL;
	s->frames = __atomic_load_n(&c->st.frames, __ATOMIC_RELAXED);
	s->bad_imm = __atomic_load_n(&c->st.bad_imm, __ATOMIC_RELAXED);
	s->bad_len = __atomic_load_n(&c->st.bad_len, __ATOMIC_RELAXED);
	s->page_busy = __atomic_load_n(&c->st.page_busy, __ATOMIC_RELAXED);
	s->recv_errors = __atomic_load_n(&c->st.recv_errors, __ATOMIC_RELAXED);
	s->resp_too_big = __atomic_load_n(&c->st.resp_too_big, __ATOMIC_RELAXED);
	s->not_imm = __atomic_load_n(&c->st.not_imm, __ATOMIC_RELAXED);
	return 0;
}

int ql_hsb_channel_frame_info(struct ql_channel *ch, const struct ql_buffer *buf,
			      struct ql_hsb_frame_info *fi)
{
	struct hch *c = to_hch(ch);
	uint32_t page;

	if (!c || !buf || !fi || buf < c->bufs || buf >= c->bufs + c->num_pages)
		return -EINVAL;
	page = buf->index;
	if (!c->busy[page])
		return -EINVAL; /* not handed on, or given back already */
	fi->page = page;
	fi->psn = c->imm[page] >> QL_HSB_IMM_PSN_SHIFT;
	ql_hsb_metadata_decode(c->pages + (size_t)page * c->page_size +
				       ql_hsb_metadata_offset(c->frame_len),
			       &fi->md);
	return 0;
}

static void hch_reap_sends(struct ql_channel *ch)
{
	struct hch *c = (struct hch *)ch;

	if (c->tx.posted != c->tx.done)
		ql_txq_reap(&c->tx, c->scq);
}

static void hch_send_stats(const struct ql_channel *ch, struct ql_channel_send_stats *s)
{
	ql_txq_stats(&((const struct hch *)ch)->tx, s);
}

static struct ql_device *hch_device(const struct ql_channel *ch)
{
	return ((const struct hch *)ch)->dev;
}

static const struct ql__channel_ops hch_ops = {
	.receive_burst = hch_receive_burst,
	.send_burst = hch_send_burst,
	.acquire_buffer = hch_acquire,
	.release_buffer = hch_release,
	.register_memory = hch_register,
	.poll_errors = hch_poll_errors,
	.destroy = hch_destroy,
	.send_stats = hch_send_stats,
	.reap_sends = hch_reap_sends,
	.device = hch_device,
};
