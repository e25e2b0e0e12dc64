/* SPDX-License-Identifier: MIT */
/*
 * The hsb client: what an FPGA with the Hololink IP does on the data plane
 * (qlink/hsb.h, docs/wire-protocol.md section 8). A UC QP; each frame is
 * copied to a staging buffer (zero-padded to the host's frame_len, the
 * DP_BUFFER_LENGTH a board always writes whole) and written into page =
 * frame count mod num_pages of the host region as a board writes it: one
 * RDMA WRITE per packet_size bytes (each a WRITE ONLY packet with its own
 * RETH), then 128 bytes of metadata by WRITE WITH IMMEDIATE at page +
 * round_up(frame_len, 128), immediate = page | PSN << 12 (network order).
 * Every WR here is one packet (none is longer than the path MTU), so the
 * PSN of WR n is n mod 2^24 from connect (the QP's send PSN is 0).
 * Responses arrive by SEND into receive buffers posted here, in the order
 * the host answered.
 *
 * Released receive buffers are re-posted in batches of up to
 * HSB_CLIENT_BATCH (one post_recv call publishes the receive queue's tail
 * once, where the host's NIC reads it for every response). So that the
 * configured recv_buffers stay posted for a full window whatever is held
 * back, at least batch - 1 more buffers exist than configured.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "qlink/error.h"
#include "qlink/hsb.h"
#include "transport/client_int.h"

#define HSB_CLIENT_BATCH 16u

struct ql_hsb_client {
	struct ql__client_head head; /* must stay first: a ql_client */
	struct ql_device *dev;
	struct ql_pd *pd;
	struct ql_cq *scq, *rcq;
	struct ql_qp *qp;
	uint32_t nrecv, recv_size;
	uint32_t nbuf;	   /* receive buffers: nrecv + batch - 1 */
	uint32_t batch;	   /* re-post when this many are released */
	uint32_t unposted; /* released, not re-posted yet: pend[] */
	bool *held;	   /* buffer polled out, not yet released */
	uint8_t *rmem;
	struct ql_mr *rmr;
	uint32_t max_inline;
	uint32_t cfg_window;
	uint32_t cfg_packet;
	/* after connect */
	struct ql_hsb_params host;
	uint32_t window;
	uint32_t nstage; /* staging buffers (one page each), a send queue's worth */
	uint32_t packet; /* frame bytes per WRITE: packet_size, at most the MTU */
	uint32_t wrs;	 /* WRs per frame: the packets and the metadata */
	uint32_t psn;	 /* the PSN of the next packet */
	uint32_t signal_every;
	uint8_t *smem;
	size_t slen;
	struct ql_mr *smr;
	uint64_t frames; /* frames sent (the page counter) */
	uint64_t posted; /* WRs posted */
	uint64_t done;	 /* WRs known complete */
	uint32_t flight; /* frames awaiting a response */
	int err;
	uint32_t pend[HSB_CLIENT_BATCH];
	struct ibv_sge rsge[HSB_CLIENT_BATCH];
	struct ibv_recv_wr rwr[HSB_CLIENT_BATCH]; /* a pre-linked chain */
};

static const struct ql__client_ops hsb_client_ops;

static void free_stage(struct ql_hsb_client *c)
{
	if (c->smr)
		ql_mr_dereg(c->smr);
	if (c->smem)
		ql_pd_mem_free(c->pd, c->smem);
	c->smr = NULL;
	c->smem = NULL;
}

void ql_hsb_client_destroy(struct ql_hsb_client *c)
{
	if (!c)
		return;
	if (c->qp)
		ql_qp_destroy(c->qp);
	if (c->scq)
		ql_cq_destroy(c->scq);
	if (c->rcq)
		ql_cq_destroy(c->rcq);
	free_stage(c);
	if (c->rmr)
		ql_mr_dereg(c->rmr);
	if (c->rmem)
		ql_pd_mem_free(c->pd, c->rmem);
	if (c->pd)
		ql_pd_free(c->pd);
	free(c->held);
	free(c);
}

#define HSB_CLIENT_SQ 256u

int ql_hsb_client_create(struct ql_device *dev, const struct ql_hsb_client_config *cfg,
			 struct ql_hsb_client **out)
{
	struct ql_device_attr attr;
	struct ql_qp_setup qs;
	struct ibv_qp_cap cap;
	struct ql_hsb_client *c;
	void *mem;
	int ret;

	if (!dev || !out)
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->head.ops = &hsb_client_ops;
	c->dev = dev;
	c->nrecv = cfg && cfg->recv_buffers ? cfg->recv_buffers : 64;
	c->recv_size = cfg && cfg->recv_size ? cfg->recv_size : QL_HSB_DEFAULT_RESP_SIZE;
	c->cfg_window = cfg ? cfg->window : 0;
	c->cfg_packet = cfg && cfg->packet_size ? cfg->packet_size : QL_HSB_DEFAULT_PACKET_SIZE;
	ret = ql_device_query(dev, &attr);
	if (ret)
		goto err;
	if (c->cfg_packet % QL_HSB_PAGE_UNIT || c->cfg_packet > 4096) {
		ret = ql_error_set(-EINVAL,
				   "hsb client: packet size %u is not a multiple of 128 "
				   "in 128..4096",
				   c->cfg_packet);
		goto err;
	}
	if (c->nrecv > (uint32_t)attr.dev.max_qp_wr || c->recv_size < QL_HSB_MIN_RESP) {
		ret = ql_error_set(-EINVAL, "hsb client: %u receive buffers of %u bytes", c->nrecv,
				   c->recv_size);
		goto err;
	}
	/* the batch's headroom, as far as the device allows (1: none) */
	c->batch = (uint32_t)attr.dev.max_qp_wr - c->nrecv + 1;
	if (c->batch > HSB_CLIENT_BATCH)
		c->batch = HSB_CLIENT_BATCH;
	c->nbuf = c->nrecv + c->batch - 1;
	/* a power of two where the device allows: a receive queue's slots
	 * usually are, and a buffer then goes back into the slot it came
	 * from (the soft provider stores nothing for such a re-post) */
	{
		uint32_t p2 = 1;

		while (p2 < c->nbuf)
			p2 <<= 1;
		if (p2 <= (uint32_t)attr.dev.max_qp_wr)
			c->nbuf = p2;
	}
	c->held = calloc(c->nbuf, sizeof(*c->held));
	if (!c->held) {
		ret = -ENOMEM;
		goto err;
	}
	ret = ql_pd_alloc(dev, &c->pd);
	if (ret)
		goto err;
	ret = ql_pd_mem_alloc(c->pd, (size_t)c->nbuf * c->recv_size, &mem);
	if (ret)
		goto err;
	c->rmem = mem;
	ret = ql_mr_reg(c->pd, c->rmem, (size_t)c->nbuf * c->recv_size, IBV_ACCESS_LOCAL_WRITE,
			&c->rmr);
	if (ret)
		goto err;
	qs = (struct ql_qp_setup){ .qp_type = IBV_QPT_UC,
				   .send_wr = HSB_CLIENT_SQ,
				   .recv_wr = c->nbuf,
				   .max_inline = 256 };
	ret = ql_qp_setup(c->pd, &qs, &c->scq, &c->rcq, &c->qp, &cap);
	if (ret)
		goto err;
	c->max_inline = cap.max_inline_data;
	for (uint32_t i = 0; i < HSB_CLIENT_BATCH; i++) {
		c->rsge[i].length = c->recv_size;
		c->rsge[i].lkey = ql_mr_lkey(c->rmr);
		c->rwr[i].sg_list = &c->rsge[i];
		c->rwr[i].num_sge = 1;
		c->rwr[i].next = i + 1 < HSB_CLIENT_BATCH ? &c->rwr[i + 1] : NULL;
	}
	*out = c;
	return 0;
err:
	ql_hsb_client_destroy(c);
	return ret;
}

int ql_hsb_client_local_params(struct ql_hsb_client *c, struct ql_conn_params *p)
{
	if (!c || !p)
		return -EINVAL;
	return ql_qp_local_params(c->qp, p);
}

/* Post the buffers in pend[] as one chain. */
static int repost_flush(struct ql_hsb_client *c)
{
	uint32_t n = c->unposted;
	struct ibv_recv_wr *bad;
	int ret;

	if (!n)
		return 0;
	for (uint32_t i = 0; i < n; i++) {
		c->rwr[i].wr_id = c->pend[i];
		c->rsge[i].addr = (uintptr_t)(c->rmem + (size_t)c->pend[i] * c->recv_size);
	}
	c->rwr[n - 1].next = NULL;
	ret = ql_qp_post_recv(c->qp, &c->rwr[0], &bad);
	c->rwr[n - 1].next = n < HSB_CLIENT_BATCH ? &c->rwr[n] : NULL;
	c->unposted = 0;
	return ret ? -EIO : 0;
}

int ql_hsb_client_connect(struct ql_hsb_client *c, const struct ql_hsb_params *host,
			  const struct ql_qp_connect_opts *opts)
{
	struct ql_qp_connect_opts o;
	struct ql_conn_params peer = { 0 };
	void *mem;
	int ret;

	if (!c || !host)
		return -EINVAL;
	ret = ql_hsb_params_check(host);
	if (ret)
		return ret;
	if (host->resp_size > c->recv_size)
		return ql_error_set(-EINVAL,
				    "hsb client: the host sends responses of up to %u bytes, the "
				    "receive buffers hold %u",
				    host->resp_size, c->recv_size);
	free_stage(c);
	c->host = *host;
	c->window = c->cfg_window && c->cfg_window < host->num_pages ? c->cfg_window :
								       host->num_pages;
	if (c->window > c->nrecv)
		c->window = c->nrecv; /* every response needs a posted buffer */
	c->nstage = HSB_CLIENT_SQ;
	c->signal_every = 16;
	{
		uint32_t mtu = host->mtu >= IBV_MTU_256 && host->mtu <= IBV_MTU_4096 ?
				       128u << host->mtu :
				       4096u;

		c->packet = c->cfg_packet < mtu ? c->cfg_packet : mtu;
		c->wrs = (host->frame_len + c->packet - 1) / c->packet + 1;
		if (c->wrs > HSB_CLIENT_SQ / 2)
			return ql_error_set(-EINVAL,
					    "hsb client: a frame of %u bytes is %u packets of %u, "
					    "more than the send queue takes",
					    host->frame_len, c->wrs - 1, c->packet);
	}
	c->slen = (size_t)(c->nstage + 2) * host->page_size; /* + two for raw frames */
	ret = ql_pd_mem_alloc(c->pd, c->slen, &mem);
	if (ret)
		return ret;
	c->smem = mem;
	ret = ql_mr_reg(c->pd, c->smem, c->slen, IBV_ACCESS_LOCAL_WRITE, &c->smr);
	if (ret)
		return ret;
	if (opts)
		o = *opts;
	else
		ql_qp_connect_opts_default(&o);
	o.access = 0;	 /* the host only SENDs to us */
	o.local_psn = 0; /* a board's PSNs count from 0 (the immediate carries them) */
	peer.qpn = host->qpn;
	peer.gid = host->gid;
	peer.mtu = host->mtu;
	ret = ql_qp_connect(c->qp, &peer, &o);
	if (ret)
		return ret;
	c->unposted = 0;
	for (uint32_t i = 0; i < c->nbuf; i++) {
		c->held[i] = false;
		c->pend[c->unposted++] = i;
		if (c->unposted == HSB_CLIENT_BATCH || i + 1 == c->nbuf) {
			ret = repost_flush(c);
			if (ret)
				return ql_error_set(ret, "hsb client: posting receive %u failed",
						    i);
		}
	}
	c->frames = c->posted = c->done = 0;
	c->psn = 0;
	c->flight = 0;
	c->err = 0;
	return 0;
}

static void reap_send(struct ql_hsb_client *c)
{
	struct ibv_wc wc[16];
	int n = ql_cq_poll(c->scq, 16, wc);

	if (n < 0) {
		c->err = n;
		return;
	}
	for (int i = 0; i < n; i++) {
		if (wc[i].status != IBV_WC_SUCCESS)
			c->err = -EIO;
		else if (wc[i].wr_id + 1 > c->done)
			c->done = wc[i].wr_id + 1; /* completes every WR before it */
	}
}

/* Room for n more WRs on the send queue (reaping if need be). */
static int sq_room(struct ql_hsb_client *c, uint32_t n)
{
	if (c->err)
		return c->err;
	if (!c->smem)
		return ql_error_set(-ENOTCONN, "hsb client: not connected");
	if (c->posted + n - c->done > c->nstage - 1) {
		reap_send(c);
		if (c->posted + n - c->done > c->nstage - 1)
			return c->err ? c->err : -EAGAIN;
	}
	return 0;
}

/* Post one WRITE (with immediate when with_imm) of len staged bytes at
 * `offset` of the host region: one packet, whose PSN is c->psn. */
static int post_one(struct ql_hsb_client *c, const uint8_t *stage, uint64_t offset, uint32_t len,
		    bool with_imm, uint32_t imm, bool force_signal)
{
	bool signal = force_signal || c->posted % c->signal_every == c->signal_every - 1 ||
		      c->posted - c->done >= c->nstage / 2;
	struct ibv_sge sge = {
		.addr = (uintptr_t)stage,
		.length = len,
		.lkey = ql_mr_lkey(c->smr),
	};
	struct ibv_send_wr wr = {
		.wr_id = c->posted,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = with_imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE,
		.send_flags = (len <= c->max_inline ? IBV_SEND_INLINE : 0) |
			      (signal ? IBV_SEND_SIGNALED : 0),
		.imm_data = htonl(imm),
	};
	struct ibv_send_wr *bad;
	uint32_t mtu = c->host.mtu >= IBV_MTU_256 && c->host.mtu <= IBV_MTU_4096 ?
			       128u << c->host.mtu :
			       4096u;

	wr.wr.rdma.remote_addr = c->host.page_addr + offset;
	wr.wr.rdma.rkey = c->host.rkey;
	if (ql_qp_post_send(c->qp, &wr, &bad))
		return c->err = -EIO;
	c->posted++;
	/* a raw write longer than the MTU leaves as several packets */
	c->psn = (c->psn + (len > mtu ? (len + mtu - 1) / mtu : 1)) & 0xffffffu;
	return 0;
}

/* A raw WRITE (with or without immediate) outside the window, from the two
 * stages past the frames' (no frame uses them; it waits for completion). */
static int post_raw(struct ql_hsb_client *c, uint64_t offset, bool with_imm, uint32_t imm,
		    const void *msg, uint32_t len)
{
	uint8_t *stage;
	int ret = sq_room(c, 1);

	if (ret)
		return ret;
	if (len > 2 * c->host.page_size)
		return -EMSGSIZE;
	stage = c->smem + (size_t)c->nstage * c->host.page_size;
	if (len)
		memcpy(stage, msg, len);
	ret = post_one(c, stage, offset, len, with_imm, imm, true);
	if (ret)
		return ret;
	while (c->done < c->posted && !c->err)
		reap_send(c);
	return c->err;
}

int ql_hsb_client_send(struct ql_hsb_client *c, const void *msg, uint32_t len)
{
	struct ql_hsb_metadata md = { 0 };
	struct timespec ts;
	uint32_t page, moff, frame;
	uint64_t base;
	uint8_t *stage;
	int ret;

	if (!c || !msg)
		return -EINVAL;
	if (c->flight >= c->window)
		return -EAGAIN;
	ret = sq_room(c, c->wrs);
	if (ret)
		return ret;
	frame = c->host.frame_len;
	if (len > frame)
		return -EMSGSIZE;
	page = (uint32_t)(c->frames % c->host.num_pages);
	base = (uint64_t)page * c->host.page_size;
	moff = ql_hsb_metadata_offset(frame);
	/* the stage of frame f is free: frame f - nstage's WRs are done (each
	 * frame takes at least one WR, and at most nstage - 1 are out) */
	stage = c->smem + (size_t)(c->frames % c->nstage) * c->host.page_size;
	clock_gettime(CLOCK_REALTIME, &ts);
	memcpy(stage, msg, len);
	memset(stage + len, 0, frame - len);
	for (uint32_t off = 0; off < frame; off += c->packet) {
		uint32_t n = frame - off < c->packet ? frame - off : c->packet;

		ret = post_one(c, stage + off, base + off, n, false, 0, false);
		if (ret)
			return ret;
	}
	/* the metadata: what a board says of the frame; its PSN is the
	 * metadata packet's, as the immediate's */
	md.psn = c->psn;
	md.timestamp_s = (uint64_t)ts.tv_sec;
	md.timestamp_ns = (uint32_t)ts.tv_nsec;
	md.bytes_written = frame;
	md.frame_number = (uint16_t)c->frames;
	clock_gettime(CLOCK_REALTIME, &ts);
	md.metadata_s = (uint64_t)ts.tv_sec;
	md.metadata_ns = (uint32_t)ts.tv_nsec;
	ql_hsb_metadata_encode(stage + moff, &md);
	ret = post_one(c, stage + moff, base + moff, QL_HSB_METADATA_SIZE, true,
		       ql_hsb_imm(page, c->psn), false);
	if (ret)
		return ret;
	c->frames++;
	c->flight++;
	return 0;
}

int ql_hsb_client_send_raw(struct ql_hsb_client *c, uint64_t offset, uint32_t imm, const void *msg,
			   uint32_t len)
{
	if (!c || (!msg && len))
		return -EINVAL;
	return post_raw(c, offset, true, imm, msg, len);
}

int ql_hsb_client_write_raw(struct ql_hsb_client *c, uint64_t offset, const void *msg, uint32_t len)
{
	if (!c || (!msg && len))
		return -EINVAL;
	return post_raw(c, offset, false, 0, msg, len);
}

uint32_t ql_hsb_client_next_psn(const struct ql_hsb_client *c)
{
	return c->psn;
}

int ql_hsb_client_poll(struct ql_hsb_client *c, struct ql_ring_response *out, int max)
{
	struct ibv_wc wc[16];
	int n, k = 0;

	if (max > 16)
		max = 16;
	if (c->posted != c->done && c->posted - c->done >= c->nstage / 2)
		reap_send(c);
	n = ql_cq_poll(c->rcq, max, wc);
	if (n < 0)
		return c->err = n;
	for (int i = 0; i < n; i++) {
		uint32_t idx = (uint32_t)wc[i].wr_id;

		if (wc[i].status != IBV_WC_SUCCESS || idx >= c->nbuf) {
			c->err = -EIO;
			continue;
		}
		c->held[idx] = true;
		out[k].msg = c->rmem + (size_t)idx * c->recv_size;
		out[k].len = wc[i].byte_len;
		out[k].slot = idx;
		k++;
		if (c->flight)
			c->flight--;
	}
	return k ? k : c->err;
}

int ql_hsb_client_release(struct ql_hsb_client *c, const struct ql_ring_response *r)
{
	if (!c || !r || r->slot >= c->nbuf || !c->held[r->slot])
		return -EINVAL; /* not a buffer polled out, or released twice */
	c->held[r->slot] = false;
	c->pend[c->unposted++] = r->slot;
	if (c->unposted >= c->batch)
		return repost_flush(c);
	return 0;
}

uint32_t ql_hsb_client_in_flight(const struct ql_hsb_client *c)
{
	return c->flight;
}

void ql_hsb_client_forget(struct ql_hsb_client *c, uint32_t n)
{
	c->flight = n < c->flight ? c->flight - n : 0;
}

uint32_t ql_hsb_client_max_msg(const struct ql_hsb_client *c)
{
	return c->host.frame_len;
}

/* ---- as a ql_client (client.h) ------------------------------------------ */

QL__CLIENT_FORWARD_OPS(hsb)

static int hsb_op_local_params(struct ql_client *c, struct ql_conn_params *p)
{
	return ql_hsb_client_local_params((struct ql_hsb_client *)c, p);
}

static int hsb_op_connect(struct ql_client *c, const struct ql_conn_params *server,
			  const struct ql_qp_connect_opts *opts)
{
	struct ql_hsb_params host;
	int ret;

	if (!server)
		return -EINVAL;
	ret = ql_hsb_params_from_conn(server, &host);
	if (ret)
		return ret;
	return ql_hsb_client_connect((struct ql_hsb_client *)c, &host, opts);
}

/* no stats: UC without resends: a frame the host dropped is never answered */
QL__CLIENT_OPS(hsb, QL_CLIENT_HSB);
