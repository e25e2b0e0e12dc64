/* SPDX-License-Identifier: MIT */
/*
 * The reference client of the qlink request ring (the side a QCS
 * implements), an implementation of ql_client. See include/qlink/ring.h,
 * include/qlink/client.h and docs/wire-protocol.md.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "qlink/clock.h"
#include "qlink/error.h"
#include "qlink/ring.h"
#include "transport/client_int.h"
#include "transport/endpoint.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
	       "the client stores little-endian words with plain stores");

/* UC: what the client knows of the request in a ring slot. */
enum { PEND_IDLE, PEND_WAIT, PEND_ARRIVED, PEND_LOST };

struct pend {
	uint64_t sent_ns; /* last (re)send */
	uint32_t request_id;
	uint32_t resends;
	uint32_t rbuf; /* PEND_ARRIVED: the receive buffer holding the response */
	uint32_t len;
	uint8_t state;
};

struct ql_ring_client {
	struct ql__client_head head; /* must stay first: a ql_client */
	struct ql_endpoint ep;	     /* PD, CQs, RC or UC QP */
	struct ql_qp *qp;	     /* = ep.qp */
	uint8_t *stage;		     /* per slot: seq u64 | len u32 | stamp u32 | message */
	struct ql_mr *stage_mr;
	uint8_t *rbuf; /* window receive buffers of slot_size bytes */
	struct ql_mr *rbuf_mr;
	uint64_t vaddr;
	uint32_t rkey;
	uint32_t num_slots;
	uint32_t slot_size;
	uint32_t window;
	uint32_t max_inline;
	uint32_t signal_every;
	uint64_t sent;
	uint64_t received;
	uint64_t wr_posted;
	uint64_t wr_retired;
	uint32_t sq_depth;
	int err;
	/* UC */
	bool uc;
	uint32_t nrbuf; /* receive buffers: window (RC), 2 * window (UC, room
			   for duplicate responses) */
	uint64_t resend_ns;
	uint32_t max_resends;
	struct pend *pend; /* [num_slots] */
	struct ql_ring_client_stats st;
};

#define CLIENT_SIGNAL_EVERY 16

static const struct ql__client_ops ring_client_ops;

static int post_recv_buf(struct ql_ring_client *cl, uint32_t i)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(cl->rbuf + (size_t)i * cl->slot_size),
		.length = cl->slot_size,
		.lkey = ql_mr_lkey(cl->rbuf_mr),
	};
	struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1 }, *bad;

	return ql_qp_post_recv(cl->qp, &wr, &bad);
}

int ql_ring_client_create(struct ql_device *dev, const struct ql_conn_params *srv,
			  const struct ql_ring_client_config *cfg, struct ql_ring_client **out)
{
	struct ql_ring_client *cl;
	enum ibv_qp_type qp_type;
	size_t stage_len, rbuf_len;
	void *mem;
	int ret;

	if (!dev || !srv || !out)
		return -EINVAL;
	ret = ql_ring_check_geometry(srv->num_slots, srv->slot_size);
	if (ret)
		return ret;
	if (srv->length < ql_ring_bytes(srv->num_slots, srv->slot_size))
		return ql_error_set(-EINVAL,
				    "ring client: the server's region (%llu bytes) is "
				    "smaller than its ring",
				    (unsigned long long)srv->length);
	cl = calloc(1, sizeof(*cl));
	if (!cl)
		return -ENOMEM;
	cl->head.ops = &ring_client_ops;
	cl->vaddr = srv->vaddr;
	cl->rkey = srv->rkey;
	cl->num_slots = srv->num_slots;
	cl->slot_size = srv->slot_size;
	cl->window = cfg && cfg->window ? cfg->window : srv->num_slots;
	if (cl->window > srv->num_slots)
		cl->window = srv->num_slots;
	cl->signal_every = CLIENT_SIGNAL_EVERY;
	cl->nrbuf = cl->window;
	/* the QP type: the configuration's, else the server's (the RTH names
	 * it in its parameters) */
	qp_type = cfg && cfg->qp_type ? cfg->qp_type : srv->qp_type;
	if (qp_type == IBV_QPT_UC) {
		cl->uc = true;
		cl->nrbuf = 2 * cl->window;
		cl->resend_ns = cfg && cfg->resend_ns ? cfg->resend_ns : 2000000;
		cl->max_resends = cfg && cfg->max_resends ? cfg->max_resends : 8;
		cl->pend = calloc(cl->num_slots, sizeof(*cl->pend));
		if (!cl->pend) {
			free(cl);
			return -ENOMEM;
		}
	}

	stage_len = (size_t)cl->num_slots * cl->slot_size;
	rbuf_len = (size_t)cl->nrbuf * cl->slot_size;
	ret = ql_endpoint_open_pd(dev, NULL, &cl->ep);
	if (ret)
		goto err;
	ret = ql_pd_mem_alloc(cl->ep.pd, stage_len, &mem);
	if (ret)
		goto err;
	cl->stage = mem;
	ret = ql_pd_mem_alloc(cl->ep.pd, rbuf_len, &mem);
	if (ret)
		goto err;
	cl->rbuf = mem;
	ret = ql_mr_reg(cl->ep.pd, cl->stage, stage_len, IBV_ACCESS_LOCAL_WRITE, &cl->stage_mr);
	if (ret)
		goto err;
	ret = ql_mr_reg(cl->ep.pd, cl->rbuf, rbuf_len, IBV_ACCESS_LOCAL_WRITE, &cl->rbuf_mr);
	if (ret)
		goto err;
	/* two WRITEs per request; unsignaled ones hold their slot until a
	 * later signaled completion is polled */
	ret = ql_endpoint_create_qp(&cl->ep, 2 * (cl->window + 2 * cl->signal_every), cl->nrbuf,
				    qp_type);
	if (ret)
		goto err;
	cl->qp = cl->ep.qp;
	cl->sq_depth = cl->ep.send_wr;
	cl->max_inline = cl->ep.max_inline;
	*out = cl;
	return 0;
err:
	ql_ring_client_destroy(cl);
	return ret;
}

void ql_ring_client_destroy(struct ql_ring_client *cl)
{
	if (!cl)
		return;
	ql_endpoint_close_qp(&cl->ep);
	if (cl->stage_mr)
		ql_mr_dereg(cl->stage_mr);
	if (cl->rbuf_mr)
		ql_mr_dereg(cl->rbuf_mr);
	if (cl->stage)
		ql_pd_mem_free(cl->ep.pd, cl->stage);
	if (cl->rbuf)
		ql_pd_mem_free(cl->ep.pd, cl->rbuf);
	ql_endpoint_close_pd(&cl->ep);
	free(cl->pend);
	free(cl);
}

int ql_ring_client_local_params(struct ql_ring_client *cl, struct ql_conn_params *p)
{
	return ql_qp_local_params(cl->qp, p);
}

int ql_ring_client_connect(struct ql_ring_client *cl, const struct ql_conn_params *srv,
			   const struct ql_qp_connect_opts *opts)
{
	struct ql_qp_connect_opts uc_opts;
	int ret;

	/* UC has no READ or atomics: grant only what a UC QP can carry */
	if (!opts && cl->uc) {
		ql_qp_connect_opts_default(&uc_opts);
		uc_opts.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
		opts = &uc_opts;
	}
	ret = ql_qp_connect(cl->qp, srv, opts);

	for (uint32_t i = 0; !ret && i < cl->nrbuf; i++)
		ret = post_recv_buf(cl, i);
	if (!ret) {
		cl->sent = cl->received = 0;
		cl->wr_posted = cl->wr_retired = 0;
		cl->err = 0;
		if (cl->pend)
			memset(cl->pend, 0, cl->num_slots * sizeof(*cl->pend));
	}
	return ret;
}

/* Retire send-queue slots: poll the signaled WRITE completions. */
static int reap_sends(struct ql_ring_client *cl)
{
	struct ibv_wc wc[8];
	int n = ql_cq_poll(cl->ep.scq, 8, wc);

	if (n < 0)
		return cl->err = -EIO;
	for (int i = 0; i < n; i++) {
		if (wc[i].status != IBV_WC_SUCCESS)
			return cl->err = -EIO;
		cl->wr_retired = wc[i].wr_id + 1;
	}
	return 0;
}

static inline int post_write(struct ql_ring_client *cl, void *src, uint32_t len, uint64_t raddr,
			     bool signaled)
{
	struct ibv_sge sge = { .addr = (uintptr_t)src,
			       .length = len,
			       .lkey = ql_mr_lkey(cl->stage_mr) };
	struct ibv_send_wr wr = {
		.wr_id = cl->wr_posted,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE,
		.send_flags = (len <= cl->max_inline ? IBV_SEND_INLINE : 0) |
			      (signaled ? IBV_SEND_SIGNALED : 0),
		.wr.rdma = { .remote_addr = raddr, .rkey = cl->rkey },
	};
	struct ibv_send_wr *bad;
	int ret = ql_qp_post_send(cl->qp, &wr, &bad);

	if (!ret)
		cl->wr_posted++;
	return ret;
}

/* The two WRITEs of request n, from its staged slot (also a UC resend). */
static int post_request(struct ql_ring_client *cl, uint64_t n)
{
	uint64_t off = ql_ring_slot_offset(cl->num_slots, cl->slot_size, n);
	uint8_t *st = cl->stage + (off - QL_RING_HDR_SIZE);
	uint32_t len;
	int ret;

	while (cl->wr_posted + 2 - cl->wr_retired > cl->sq_depth) {
		ret = reap_sends(cl);
		if (ret)
			return ret;
	}
	memcpy(&len, st + 8, 4);
	/* | len | stamp | message |, then the sequence word, as two WRITEs
	 * on one QP: the second is visible only after the first. */
	if (post_write(cl, st + 8, 8 + len, cl->vaddr + off + 8, false))
		return cl->err = -EIO;
	if (post_write(cl, st, 8, cl->vaddr + off,
		       (cl->wr_posted / 2) % cl->signal_every == cl->signal_every - 1))
		return cl->err = -EIO;
	return 0;
}

int ql_ring_client_send(struct ql_ring_client *cl, const void *msg, uint32_t len)
{
	uint64_t n = cl->sent, seq = n + 1;
	uint32_t stamp = (uint32_t)seq;
	uint8_t *st;
	int ret;

	if (cl->err)
		return cl->err;
	if (len > cl->slot_size - QL_RING_SLOT_HDR)
		return -EMSGSIZE;
	if (n - cl->received >= cl->window)
		return -EAGAIN;
	st = cl->stage + (ql_ring_slot_offset(cl->num_slots, cl->slot_size, n) - QL_RING_HDR_SIZE);
	memcpy(st, &seq, 8);
	memcpy(st + 8, &len, 4); /* little-endian host (asserted above) */
	memcpy(st + 12, &stamp, 4);
	memcpy(st + 16, msg, len);
	ret = post_request(cl, n);
	if (ret)
		return ret;
	if (cl->uc) {
		struct pend *p = &cl->pend[n & (cl->num_slots - 1)];

		p->state = PEND_WAIT;
		p->resends = 0;
		p->request_id = 0;
		if (len >= 16)
			memcpy(&p->request_id, (const uint8_t *)msg + 12, 4);
		p->sent_ns = ql_clock_ns();
	}
	cl->sent = n + 1;
	return 0;
}

/* UC: match a response to the request in flight with its request_id (the
 * oldest first: responses come in order unless one was lost). */
static void uc_arrived(struct ql_ring_client *cl, uint32_t b, uint32_t len)
{
	const uint8_t *m = cl->rbuf + (size_t)b * cl->slot_size;
	uint32_t id = 0;

	if (len >= 16)
		memcpy(&id, m + 12, 4);
	for (uint64_t k = cl->received; k < cl->sent; k++) {
		struct pend *p = &cl->pend[k & (cl->num_slots - 1)];

		if (p->state == PEND_WAIT && (len < 16 || p->request_id == id)) {
			p->state = PEND_ARRIVED;
			p->rbuf = b;
			p->len = len;
			return;
		}
	}
	/* the answer to a resend whose original answer came too, or to a
	 * request given up: nobody waits for it */
	cl->st.dup_responses++;
	if (post_recv_buf(cl, b))
		cl->err = -EIO;
}

/* UC, idle: resend what is past its deadline, give up after max_resends. */
static void uc_resend(struct ql_ring_client *cl)
{
	uint64_t now;

	if (cl->received == cl->sent)
		return;
	now = ql_clock_ns();
	for (uint64_t k = cl->received; k < cl->sent && !cl->err; k++) {
		struct pend *p = &cl->pend[k & (cl->num_slots - 1)];

		/* the deadline doubles at each resend (at most 64 times the
		 * first): a slow server is not flooded with copies */
		if (p->state != PEND_WAIT ||
		    now - p->sent_ns < cl->resend_ns << (p->resends < 6 ? p->resends : 6))
			continue;
		if (p->resends >= cl->max_resends) {
			p->state = PEND_LOST;
			cl->st.lost++;
			continue;
		}
		if (post_request(cl, k))
			return;
		p->resends++;
		p->sent_ns = now;
		cl->st.resent++;
	}
}

static int uc_poll(struct ql_ring_client *cl, struct ql_ring_response *out, int max)
{
	struct ibv_wc wc[16];
	int n, got = 0;

	if (cl->wr_posted - cl->wr_retired > cl->sq_depth / 2 && reap_sends(cl))
		return cl->err;
	n = ql_cq_poll(cl->ep.rcq, 16, wc);
	if (n < 0)
		return cl->err = -EIO;
	for (int i = 0; i < n; i++) {
		uint32_t b = (uint32_t)wc[i].wr_id;

		if (wc[i].status != IBV_WC_SUCCESS || b >= cl->nrbuf ||
		    wc[i].byte_len > cl->slot_size)
			return cl->err = -EIO;
		uc_arrived(cl, b, wc[i].byte_len);
	}
	if (!n) {
		if (cl->wr_posted != cl->wr_retired && reap_sends(cl))
			return cl->err;
		uc_resend(cl);
		if (cl->err)
			return cl->err;
	}
	/* in request order: a response waits for the ones before it */
	while (got < max && cl->received < cl->sent) {
		struct pend *p = &cl->pend[cl->received & (cl->num_slots - 1)];

		if (p->state == PEND_ARRIVED) {
			out[got].msg = cl->rbuf + (size_t)p->rbuf * cl->slot_size;
			out[got].len = p->len;
			out[got].slot = p->rbuf;
		} else if (p->state == PEND_LOST) {
			out[got].msg = NULL;
			out[got].len = 0;
			out[got].slot = UINT32_MAX;
		} else {
			break;
		}
		p->state = PEND_IDLE;
		got++;
		cl->received++;
	}
	return got;
}

int ql_ring_client_poll(struct ql_ring_client *cl, struct ql_ring_response *out, int max)
{
	struct ibv_wc wc[16];
	int n, got = 0;

	if (cl->uc)
		return uc_poll(cl, out, max);
	/* send completions only free send-queue slots: look when it fills */
	if (cl->wr_posted - cl->wr_retired > cl->sq_depth / 2 && reap_sends(cl))
		return cl->err;
	if (max > 16)
		max = 16;
	n = ql_cq_poll(cl->ep.rcq, max, wc);
	if (n < 0)
		return cl->err = -EIO;
	/* Idle: poll the send CQ too. Besides freeing send-queue slots, that
	 * is what retries a WRITE that waits (e.g. sent before the server's QP
	 * was ready: RC retries it after the local ACK timeout). */
	if (!n && cl->wr_posted != cl->wr_retired && reap_sends(cl))
		return cl->err;
	for (int i = 0; i < n; i++) {
		uint32_t b = (uint32_t)wc[i].wr_id;

		/* the completion is the peer's word: bound it by what we posted */
		if (wc[i].status != IBV_WC_SUCCESS || b >= cl->nrbuf ||
		    wc[i].byte_len > cl->slot_size)
			return cl->err = -EIO;
		out[got].msg = cl->rbuf + (size_t)b * cl->slot_size;
		out[got].len = wc[i].byte_len;
		out[got].slot = b;
		got++;
		cl->received++;
	}
	return got;
}

int ql_ring_client_release(struct ql_ring_client *cl, const struct ql_ring_response *r)
{
	if (cl->uc && !r->msg && r->slot == UINT32_MAX)
		return 0; /* a lost request: no buffer */
	if (r->slot >= cl->nrbuf)
		return -EINVAL;
	return post_recv_buf(cl, r->slot);
}

int ql_ring_client_stats(const struct ql_ring_client *cl, struct ql_ring_client_stats *st)
{
	if (!cl || !st)
		return -EINVAL;
	*st = cl->st;
	return 0;
}

uint32_t ql_ring_client_in_flight(const struct ql_ring_client *cl)
{
	return (uint32_t)(cl->sent - cl->received);
}

uint32_t ql_ring_client_max_msg(const struct ql_ring_client *cl)
{
	return cl->slot_size - QL_RING_SLOT_HDR;
}

/* ---- as a ql_client (client.h) ------------------------------------------ */

QL__CLIENT_FORWARD_OPS(ring)

static void ring_op_stats(const struct ql_client *c, struct ql_client_stats *st)
{
	const struct ql_ring_client *cl = (const struct ql_ring_client *)c;

	st->resent = cl->st.resent;
	st->lost = cl->st.lost;
	st->dup_responses = cl->st.dup_responses;
}

static int ring_op_local_params(struct ql_client *c, struct ql_conn_params *p)
{
	return ql_ring_client_local_params((struct ql_ring_client *)c, p);
}

static int ring_op_connect(struct ql_client *c, const struct ql_conn_params *server,
			   const struct ql_qp_connect_opts *opts)
{
	if (!server)
		return -EINVAL;
	return ql_ring_client_connect((struct ql_ring_client *)c, server, opts);
}

QL__CLIENT_OPS_STATS(ring, QL_CLIENT_RING, ring_op_stats);
