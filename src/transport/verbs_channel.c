/*
 * The verbs channel: the server side of a qlink ring over any verbs
 * provider. Requests arrive by RDMA WRITE into the ring (no receive WQEs,
 * no completions: the sequence word is the doorbell); responses leave by
 * RDMA SEND from a registered pool, signaled one in `signal_every`, and
 * the pool refills from those completions.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "qlink/error.h"
#include "transport/rx_ring.h"

#define VCH_MAX_EXTRA_MR 16
#define VCH_IDLE_CHECK 65536 /* idle polls between QP state checks */

struct vch {
	struct ql__channel_head head;
	struct ql_device *dev;
	struct ql_pd *pd;
	struct ql_cq *scq;
	struct ql_cq *rcq;
	struct ql_qp *qp;
	uint8_t *ring;
	size_t ring_len;
	struct ql_mr *ring_mr;
	struct ql_rx_ring rx;
	uint8_t *txmem;
	size_t tx_len;
	struct ql_mr *tx_mr;
	struct ql_pool *pool;
	struct ql_buffer **inflight; /* posted buffers in posting order */
	uint32_t ntx;
	uint32_t max_inline;
	uint32_t signal_every;
	uint64_t posted;
	uint64_t done;
	uint32_t idle;
	int err;
	struct ql_mr *extra[VCH_MAX_EXTRA_MR];
	int nextra;
};

static const struct ql__channel_ops vch_ops;

static int reap(struct vch *c)
{
	struct ibv_wc wc[16];
	int n = ql_cq_poll(c->scq, 16, wc);

	if (n < 0)
		return c->err = n;
	for (int i = 0; i < n; i++) {
		if (wc[i].status != IBV_WC_SUCCESS) {
			c->err = -EIO;
			continue;
		}
		/* a signaled SEND completes every SEND posted before it */
		while (c->done <= wc[i].wr_id) {
			ql_pool_put(c->pool, c->inflight[c->done % c->ntx]);
			c->done++;
		}
	}
	return 0;
}

static int vch_receive_burst(struct ql_channel *ch, struct ql_buffer **bufs, int max)
{
	struct vch *c = (struct vch *)ch;
	int n = ql_rx_ring_burst(&c->rx, bufs, max);

	if (n)
		return n;
	/* Idle: return finished response buffers, and now and then look at
	 * the QP (a peer that died takes it to ERR). */
	if (c->posted != c->done)
		reap(c);
	if (++c->idle >= VCH_IDLE_CHECK) {
		c->idle = 0;
		if (ql_qp_state(c->qp) == IBV_QPS_ERR && !c->err)
			c->err = -ECONNRESET;
	}
	return c->err ? c->err : 0;
}

static int vch_send_burst(struct ql_channel *ch, struct ql_buffer **bufs, int n)
{
	struct vch *c = (struct vch *)ch;
	int i;

	if (c->err)
		return c->err;
	for (i = 0; i < n; i++) {
		struct ql_buffer *b = bufs[i];
		bool signal = c->posted % c->signal_every == c->signal_every - 1 ||
			      ql_pool_available(c->pool) < c->signal_every;
		struct ibv_sge sge = {
			.addr = (uintptr_t)ql_buffer_data(b),
			.length = b->len,
			.lkey = ql_mr_lkey(c->tx_mr),
		};
		struct ibv_send_wr wr = {
			.wr_id = c->posted,
			.sg_list = &sge,
			.num_sge = 1,
			.opcode = IBV_WR_SEND,
			/* signal one in signal_every, and every one while the
			 * pool runs low, so that buffers keep coming back */
			.send_flags = (b->len <= c->max_inline ? IBV_SEND_INLINE : 0) |
				      (signal ? IBV_SEND_SIGNALED : 0),
		};
		struct ibv_send_wr *bad;

		if (ql_qp_post_send(c->qp, &wr, &bad)) {
			c->err = -EIO;
			break;
		}
		c->inflight[c->posted % c->ntx] = b;
		c->posted++;
	}
	if (c->posted - c->done > c->ntx / 2)
		reap(c);
	return i ? i : c->err;
}

static struct ql_buffer *vch_acquire(struct ql_channel *ch)
{
	struct vch *c = (struct vch *)ch;
	struct ql_buffer *b = ql_pool_get(c->pool);

	if (!b && c->posted != c->done) {
		reap(c);
		b = ql_pool_get(c->pool);
	}
	return b;
}

static void vch_release(struct ql_channel *ch, struct ql_buffer *b)
{
	struct vch *c = (struct vch *)ch;

	/* receive buffers are ring slots: nothing to do, the client reuses a
	 * slot once its response arrived */
	if (b >= c->rx.bufs && b < c->rx.bufs + c->rx.num_slots)
		return;
	ql_pool_put(c->pool, b);
}

static int vch_register(struct ql_channel *ch, void *addr, size_t len, uint32_t *lkey)
{
	struct vch *c = (struct vch *)ch;
	int ret;

	if (c->nextra == VCH_MAX_EXTRA_MR)
		return ql_error_set(-ENOSPC, "verbs channel: at most %d extra regions",
				    VCH_MAX_EXTRA_MR);
	ret = ql_mr_reg(c->pd, addr, len, IBV_ACCESS_LOCAL_WRITE, &c->extra[c->nextra]);
	if (ret)
		return ret;
	*lkey = ql_mr_lkey(c->extra[c->nextra++]);
	return 0;
}

static int vch_poll_errors(struct ql_channel *ch)
{
	return ((struct vch *)ch)->err;
}

static void vch_destroy(struct ql_channel *ch)
{
	struct vch *c = (struct vch *)ch;

	if (c->qp)
		ql_qp_destroy(c->qp);
	if (c->scq)
		ql_cq_destroy(c->scq);
	if (c->rcq)
		ql_cq_destroy(c->rcq);
	if (c->ring_mr)
		ql_mr_dereg(c->ring_mr);
	if (c->tx_mr)
		ql_mr_dereg(c->tx_mr);
	for (int i = 0; i < c->nextra; i++)
		ql_mr_dereg(c->extra[i]);
	ql_rx_ring_fini(&c->rx);
	ql_pool_destroy(c->pool);
	free(c->inflight);
	if (c->ring)
		ql_pd_mem_free(c->pd, c->ring);
	if (c->txmem)
		ql_pd_mem_free(c->pd, c->txmem);
	if (c->pd)
		ql_pd_free(c->pd);
	free(c);
}

int ql_verbs_channel_create(struct ql_device *dev, const struct ql_verbs_channel_config *cfg,
			    struct ql_channel **out)
{
	struct ql_device_attr attr;
	struct ql_qp_init_attr ia;
	struct vch *c;
	void *mem;
	int ret;

	if (!dev || !cfg || !out)
		return -EINVAL;
	ret = ql_ring_check_geometry(cfg->num_slots, cfg->slot_size);
	if (ret)
		return ret;
	ret = ql_device_query(dev, &attr);
	if (ret)
		return ret;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->head.ops = &vch_ops;
	c->dev = dev;
	c->ntx = cfg->tx_buffers ? cfg->tx_buffers : cfg->num_slots;
	c->signal_every = cfg->signal_every ? cfg->signal_every : 16;
	if (c->signal_every > c->ntx)
		c->signal_every = c->ntx;
	c->max_inline = attr.max_inline_data < 256 ? attr.max_inline_data : 256;

	/* the PD first: the ring and buffers are its memory (the device's
	 * kind: soft+shm's shared heap, pages for ibv_reg_mr) */
	ret = ql_pd_alloc(dev, &c->pd);
	if (ret)
		goto err;
	c->ring_len = ql_ring_bytes(cfg->num_slots, cfg->slot_size);
	ret = ql_pd_mem_alloc(c->pd, c->ring_len, &mem);
	if (ret)
		goto err;
	c->ring = mem;
	c->tx_len = (size_t)c->ntx * cfg->slot_size;
	ret = ql_pd_mem_alloc(c->pd, c->tx_len, &mem);
	if (ret)
		goto err;
	c->txmem = mem;
	c->inflight = calloc(c->ntx, sizeof(*c->inflight));
	if (!c->inflight) {
		ret = -ENOMEM;
		goto err;
	}
	ret = ql_rx_ring_init(&c->rx, c->ring, cfg->num_slots, cfg->slot_size);
	if (ret)
		goto err;
	ret = ql_pool_create(c->txmem, c->tx_len, c->ntx, cfg->slot_size, 0, &c->pool);
	if (ret)
		goto err;
	ret = ql_mr_reg(c->pd, c->ring, c->ring_len,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, &c->ring_mr);
	if (ret)
		goto err;
	ret = ql_mr_reg(c->pd, c->txmem, c->tx_len, IBV_ACCESS_LOCAL_WRITE, &c->tx_mr);
	if (ret)
		goto err;
	ret = ql_cq_create(dev, (int)c->ntx, &c->scq);
	if (ret)
		goto err;
	ret = ql_cq_create(dev, 1, &c->rcq);
	if (ret)
		goto err;
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = c->scq;
	ia.recv_cq = c->rcq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = c->ntx;
	ia.cap.max_recv_wr = 1;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	ia.cap.max_inline_data = c->max_inline;
	ret = ql_qp_create(c->pd, &ia, &c->qp);
	if (ret)
		goto err;
	c->max_inline = ia.cap.max_inline_data;
	*out = (struct ql_channel *)c;
	return 0;
err:
	vch_destroy((struct ql_channel *)c);
	return ret;
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
	int ret;

	if (!ch || !client || ((const struct ql__channel_head *)(const void *)ch)->ops != &vch_ops)
		return -EINVAL;
	ret = ql_qp_connect(c->qp, client, opts);
	if (!ret)
		c->err = 0;
	return ret;
}

int ql_verbs_channel_reset_ring(struct ql_channel *ch)
{
	struct vch *c = (struct vch *)ch;

	if (!ch || ((const struct ql__channel_head *)(const void *)ch)->ops != &vch_ops)
		return -EINVAL;
	ql_rx_ring_reset(&c->rx);
	return 0;
}

static const struct ql__channel_ops vch_ops = {
	.receive_burst = vch_receive_burst,
	.send_burst = vch_send_burst,
	.acquire_buffer = vch_acquire,
	.release_buffer = vch_release,
	.register_memory = vch_register,
	.poll_errors = vch_poll_errors,
	.destroy = vch_destroy,
};
