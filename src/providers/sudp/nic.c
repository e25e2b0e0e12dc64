/* SPDX-License-Identifier: MIT */
/*
 * soft+udp provider: the NIC thread. Receives datagrams (recvmmsg),
 * validates them (codec, ICRC, QP, source, PSN, keys), runs the RC and UC
 * transports of IBTA vol 1 ch. 9 as requester and responder, transmits
 * (sendmmsg, through fault injection when configured) and writes
 * completions into the CQ rings the application polls.
 *
 * Everything a datagram says is input from the network: lengths, keys,
 * addresses and PSNs are checked against our own tables before any byte is
 * placed, and nothing in a packet is trusted to size a copy.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "providers/common/soft_nic.h"
#include "providers/sudp/sudp.h"

#define AETH_ACK ROCE_AETH_ACK(ROCE_AETH_CREDITS_INVALID)

static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint32_t psn_add(uint32_t psn, uint32_t n)
{
	return (psn + n) & ROCE_PSN_MASK;
}

static inline bool is_rd_atomic(enum ibv_wr_opcode op)
{
	return op == IBV_WR_RDMA_READ || op == IBV_WR_ATOMIC_CMP_AND_SWP ||
	       op == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

static uint64_t timeout_ns(const struct sudp_qp *qp)
{
	/* local ACK timeout: 4.096 us * 2^timeout; 0 means infinite */
	return qp->attr.timeout ? 4096ull << qp->attr.timeout : 0;
}

static void qp_to_err(struct sudp_qp *qp)
{
	atomic_store(&qp->state, IBV_QPS_ERR);
	qp->flushed = false;
}

/* ---- completions -------------------------------------------------------- */

static bool cq_push(struct sudp_cq *cq, struct sudp_qp *qp, const struct ibv_wc *wc, uint64_t idx,
		    bool send)
{
	uint64_t t = atomic_load_explicit(&cq->tail, memory_order_relaxed);
	uint64_t h = atomic_load_explicit(&cq->head, memory_order_acquire);
	struct sudp_cqe *e;

	if (sudp_unlikely(t - h > cq->mask || atomic_load(&cq->err) ||
			  (send && atomic_load_explicit(&cq->send_out, memory_order_acquire) >=
					   (uint64_t)cq->depth))) {
		/* CQ overrun: a CQ error that takes the QP with it (IB
		 * spec); reported, never silent */
		atomic_store(&cq->err, -EOVERFLOW);
		return false;
	}
	e = &cq->ring[t & cq->mask];
	e->wc = *wc;
	e->qp = qp;
	e->idx = idx;
	e->send = send;
	if (send)
		atomic_fetch_add_explicit(&cq->send_out, 1, memory_order_relaxed);
	atomic_store_explicit(&cq->tail, t + 1, memory_order_release);
	return true;
}

static void complete_send(struct sudp_qp *qp, uint64_t idx, enum ibv_wc_status st,
			  uint32_t byte_len)
{
	const struct sudp_swqe *w = &qp->sq[idx & qp->sq_mask];
	struct ibv_wc wc;

	if (st == IBV_WC_SUCCESS && !qp->sq_sig_all && !(w->wr.send_flags & IBV_SEND_SIGNALED))
		return;
	memset(&wc, 0, sizeof(wc));
	wc.wr_id = w->wr.wr_id;
	wc.status = st;
	wc.opcode = ql__wc_opcode(w->wr.opcode);
	wc.byte_len = byte_len;
	wc.qp_num = qp->base.qp_num;
	wc.src_qp = qp->dest_qpn;
	if (!cq_push(qp->scq, qp, &wc, idx, true))
		qp_to_err(qp);
}

static void complete_recv(struct sudp_qp *qp, enum ibv_wc_status st, enum ibv_wc_opcode op,
			  uint32_t byte_len, bool imm, uint32_t imm_host)
{
	uint64_t idx = qp->rq_ci++;
	struct ibv_wc wc;

	memset(&wc, 0, sizeof(wc));
	wc.wr_id = qp->rq_wrid[idx & qp->rq_mask];
	wc.status = st;
	wc.opcode = op;
	wc.byte_len = byte_len;
	wc.qp_num = qp->base.qp_num;
	wc.src_qp = qp->dest_qpn;
	if (imm) {
		wc.wc_flags = IBV_WC_WITH_IMM;
		wc.imm_data = htonl(imm_host);
	}
	if (!cq_push(qp->rcq, qp, &wc, idx, false))
		qp_to_err(qp);
}

/* ERR: every WR left completes as flushed; SQE: the send queue only. */
static bool flush(struct sudp_qp *qp, bool rq)
{
	uint64_t pi = atomic_load_explicit(&qp->sq_pi, memory_order_acquire);
	bool did = false;

	while (qp->sq_ci < pi) {
		const struct sudp_swqe *w = &qp->sq[qp->sq_ci & qp->sq_mask];
		struct ibv_wc wc;

		memset(&wc, 0, sizeof(wc));
		wc.wr_id = w->wr.wr_id;
		wc.status = IBV_WC_WR_FLUSH_ERR;
		wc.opcode = ql__wc_opcode(w->wr.opcode);
		wc.qp_num = qp->base.qp_num;
		wc.src_qp = qp->dest_qpn;
		if (!cq_push(qp->scq, qp, &wc, qp->sq_ci, true))
			break; /* the CQ is in error: nothing more can be said */
		qp->sq_ci++;
		did = true;
	}
	qp->sq_tx = qp->hi_tx = qp->sq_ci;
	qp->tx_off = qp->hi_off = 0;
	qp->hi_psn = qp->npsn;
	qp->rd_out = 0;
	qp->deadline = 0;
	qp->rnr_until = 0;
	qp->una = qp->npsn;
	if (rq) {
		uint64_t rpi = atomic_load_explicit(&qp->rq_pi, memory_order_acquire);

		qp->in_send = qp->in_write = false;
		while (qp->rq_ci < rpi) {
			uint64_t t = atomic_load(&qp->rcq->tail), h = atomic_load(&qp->rcq->head);

			if (t - h > qp->rcq->mask)
				break;
			complete_recv(qp, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, 0, false, 0);
			did = true;
		}
	}
	return did;
}

void ql__sudp_qp_reset_transport(struct sudp_qp *qp)
{
	qp->sq_ci = qp->sq_tx = qp->hi_tx = 0;
	qp->tx_off = qp->hi_off = 0;
	qp->npsn = qp->una = qp->hi_psn = 0;
	qp->rd_out = 0;
	qp->since_req = 0;
	qp->deadline = 0;
	qp->rnr_until = 0;
	qp->resync_on = false;
	qp->probe = false;
	qp->epsn = 0;
	qp->msn = 0;
	qp->nak_sent = false;
	qp->ack_pending = false;
	qp->unacked = 0;
	qp->in_send = qp->in_write = qp->drop_msg = false;
	qp->recv_off = 0;
	qp->wr_ptr = NULL;
	qp->wr_rkey = 0;
	qp->wr_left = qp->wr_total = 0;
	memset(qp->atom, 0, sizeof(qp->atom));
	qp->atom_next = 0;
	memset(qp->rd, 0, sizeof(qp->rd));
	qp->rd_next = 0;
	qp->flushed = false;
}

/* ---- memory checks ----------------------------------------------------- */

/* A local SGE list (ours: the application posted it) against the MR
 * table. */
static enum ibv_wc_status check_local(const struct sudp_qp *qp, const struct ibv_sge *sg, int n,
				      bool need_write)
{
	for (int i = 0; i < n; i++) {
		const struct ibv_sge *s = &sg[i];
		const struct sudp_mr_entry *e;
		uint64_t off;

		if (!s->length)
			continue;
		e = &qp->dev->mr[s->lkey & (SUDP_MAX_MR - 1)];
		if (!s->lkey || e->lkey != s->lkey || e->pd_id != qp->pd_id)
			return IBV_WC_LOC_PROT_ERR;
		if (need_write && !(e->access & IBV_ACCESS_LOCAL_WRITE))
			return IBV_WC_LOC_PROT_ERR;
		off = s->addr - e->addr;
		if (off > e->length || s->length > e->length - off || e->iova != e->addr)
			return IBV_WC_LOC_PROT_ERR;
	}
	return IBV_WC_SUCCESS;
}

/* A remote request's rkey, address and length: where the bytes are, or
 * NULL (remote access error). len may be 0 (then any address passes). */
static uint8_t *check_remote(const struct sudp_qp *qp, uint32_t rkey, uint64_t va, uint64_t len,
			     uint32_t need)
{
	const struct sudp_mr_entry *e = &qp->dev->mr[rkey & (SUDP_MAX_MR - 1)];
	uint64_t off;

	if (!rkey || e->rkey != rkey || e->pd_id != qp->pd_id || !(e->access & need))
		return NULL;
	off = va - e->iova;
	if (off > e->length || len > e->length - off)
		return NULL;
	return (uint8_t *)(uintptr_t)(e->addr + off);
}

/* RDMA WRITE placement of the last packet of a message: its final 8 bytes
 * stored last, with release (the soft provider's visibility contract,
 * docs/soft-provider.md). */
static void place_last(uint8_t *dst, const uint8_t *src, uint64_t len)
{
	uint64_t last;

	if (len < 8) {
		atomic_thread_fence(memory_order_release);
		memcpy(dst, src, len);
		return;
	}
	memcpy(dst, src, len - 8);
	memcpy(&last, src + len - 8, 8);
	if (((uintptr_t)(dst + len - 8) & 7) == 0) {
		atomic_store_explicit((_Atomic uint64_t *)(void *)(dst + len - 8), last,
				      memory_order_release);
	} else {
		atomic_thread_fence(memory_order_release);
		memcpy(dst + len - 8, &last, 8);
	}
}

/* ---- transmit ----------------------------------------------------------- */

static void tx_flush(struct sudp_device *dev)
{
	uint32_t sent = 0;

	while (sent < dev->ntx) {
		int r = sendmmsg(dev->sock, dev->tx_msg + sent, dev->ntx - sent, MSG_DONTWAIT);

		if (r <= 0) {
			if (r < 0 && errno == EINTR)
				continue;
			/* a full socket buffer is a congested wire: the
			 * packets are lost, RC resends them */
			break;
		}
		sent += (uint32_t)r;
	}
	dev->ntx = 0;
}

/* Where the next packet is built. */
static uint8_t *tx_buf(struct sudp_device *dev)
{
	if (dev->ntx == SUDP_BATCH)
		tx_flush(dev);
	return dev->tx[dev->ntx].buf;
}

/* Build p with `plen` payload bytes gathered from sg at off into the next
 * slot, add the ICRC and queue it (through fault injection). */
static void tx_pkt(struct sudp_qp *qp, struct roce_pkt *p, const struct ibv_sge *sg, int nsge,
		   uint64_t off, const uint8_t *flat)
{
	struct sudp_device *dev = qp->dev;
	uint8_t *buf = tx_buf(dev);
	struct roce_fault *f = qp->fault ? qp->fault : dev->fault;
	uint32_t plen = p->payload_len, pad = ROCE_PAD(p->payload_len);
	struct iovec iov;
	struct msghdr *mh;
	int hl;

	p->bth.pkey = ROCE_DEFAULT_PKEY;
	p->bth.dqpn = qp->dest_qpn;
	p->bth.tver = 0;
	hl = ql__roce_build_hdr(buf, SUDP_PKT_MAX, p);
	if (hl < 0 || (size_t)hl + plen + pad + ROCE_ICRC_LEN > SUDP_PKT_MAX)
		return;
	if (plen) {
		if (flat)
			memcpy(buf + hl, flat, plen);
		else
			ql__sge_gather(buf + hl, sg, nsge, off, plen);
	}
	memset(buf + hl + plen, 0, pad);
	iov.iov_base = buf;
	iov.iov_len = (size_t)hl + plen + pad;
	ql__roce_put_icrc(buf + iov.iov_len, ql__roce_icrc_iov(&qp->txaddr, &iov, 1));
	iov.iov_len += ROCE_ICRC_LEN;
	if (f && ql__roce_fault_tx(f, dev->now, &iov, 1, &qp->peer, qp->peerlen) != ROCE_FAULT_SEND)
		return;		   /* dropped or held: the slot is free again */
	sudp_cnt(dev, SC_TX_PKTS); /* what goes on the wire */
	if (sudp_unlikely(dev->pcap)) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ql__roce_pcap_write(dev->pcap,
				    (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec,
				    &qp->txaddr, &iov, 1);
	}
	dev->tx_iov[dev->ntx] = iov;
	mh = &dev->tx_msg[dev->ntx].msg_hdr;
	memset(mh, 0, sizeof(*mh));
	memcpy(&dev->tx_peer[dev->ntx], &qp->peer, qp->peerlen);
	mh->msg_name = &dev->tx_peer[dev->ntx];
	mh->msg_namelen = qp->peerlen;
	mh->msg_iov = &dev->tx_iov[dev->ntx];
	mh->msg_iovlen = 1;
	dev->ntx++;
}

static bool fault_drain_one(struct sudp_device *dev, struct roce_fault *f)
{
	const struct roce_fault_pkt *q;
	bool did = false;

	while ((q = ql__roce_fault_next(f, dev->now))) {
		(void)!sendto(dev->sock, q->data, q->len, MSG_DONTWAIT,
			      (const struct sockaddr *)&q->peer, q->peerlen);
		sudp_cnt(dev, SC_TX_PKTS);
		ql__roce_fault_pop(f);
		did = true;
	}
	return did;
}

static void send_aeth(struct sudp_qp *qp, uint8_t opcode, uint8_t syndrome, uint32_t psn)
{
	struct roce_pkt p;

	memset(&p, 0, sizeof(p));
	p.bth.opcode = opcode;
	p.bth.psn = psn;
	p.aeth.syndrome = syndrome;
	p.aeth.msn = qp->msn & 0xffffff;
	tx_pkt(qp, &p, NULL, 0, 0, NULL);
}

/* The coalesced ACK: everything before epsn. */
static void send_ack_now(struct sudp_qp *qp)
{
	send_aeth(qp, ROCE_RC(ROCE_OP_ACKNOWLEDGE), AETH_ACK, psn_add(qp->epsn, ROCE_PSN_MASK));
	qp->ack_pending = false;
	qp->unacked = 0;
}

static void flush_ack(struct sudp_qp *qp)
{
	if (qp->ack_pending)
		send_ack_now(qp);
}

/* ---- requester ---------------------------------------------------------- */

static uint32_t wqe_npkts(const struct sudp_qp *qp, const struct sudp_swqe *w)
{
	if (w->wr.opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
	    w->wr.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD)
		return 1;
	return w->len ? (uint32_t)((w->len + qp->mtu - 1) / qp->mtu) : 1;
}

static void arm_timer(struct sudp_qp *qp)
{
	uint64_t t = timeout_ns(qp);

	qp->deadline = t ? qp->dev->now + t : 0;
}

/* Fail the WR at the head of the send queue with st: the QP goes to ERR
 * (RC) and everything after it is flushed. */
static void fail_head(struct sudp_qp *qp, enum ibv_wc_status st)
{
	complete_send(qp, qp->sq_ci, st, 0);
	qp->sq_ci++;
	if (qp->type == IBV_QPT_RC) {
		qp_to_err(qp);
	} else {
		atomic_store(&qp->state, IBV_QPS_SQE);
		qp->flushed = false;
	}
}

/* Move the transmitter forward to `psn` (acknowledged beyond where a
 * go-back-N rewound it): nothing before it needs sending again. */
static void seek_forward(struct sudp_qp *qp, uint32_t psn)
{
	if (psn == qp->hi_psn) {
		qp->sq_tx = qp->hi_tx;
		qp->tx_off = qp->hi_off;
		qp->npsn = qp->hi_psn;
		return;
	}
	for (uint64_t i = qp->sq_ci; i <= qp->hi_tx && i < atomic_load(&qp->sq_pi); i++) {
		struct sudp_swqe *w = &qp->sq[i & qp->sq_mask];
		int32_t d;

		if (!w->started)
			break;
		d = sudp_psn_diff(psn, w->first_psn);
		if (d >= 0 && (uint32_t)d < w->npkts) {
			qp->sq_tx = i;
			qp->tx_off = is_rd_atomic(w->wr.opcode) ? 0 : (uint64_t)d * qp->mtu;
			qp->npsn = is_rd_atomic(w->wr.opcode) ? w->first_psn : psn;
			return;
		}
	}
}

/* Go back to `psn` (retransmission, IBTA 9.7.5.2: go-back-N). */
static void go_back(struct sudp_qp *qp, uint32_t psn)
{
	uint64_t i, found = UINT64_MAX;

	for (i = qp->sq_ci; i <= qp->hi_tx && i < atomic_load(&qp->sq_pi); i++) {
		struct sudp_swqe *w = &qp->sq[i & qp->sq_mask];
		int32_t d;

		if (!w->started)
			break;
		d = sudp_psn_diff(psn, w->first_psn);
		if (d >= 0 && (uint32_t)d < w->npkts) {
			found = i;
			break;
		}
	}
	if (found == UINT64_MAX)
		return;
	sudp_cnt(qp->dev, SC_RETRANSMIT);
	for (i = found; i <= qp->hi_tx && i < atomic_load(&qp->sq_pi); i++) {
		struct sudp_swqe *w = &qp->sq[i & qp->sq_mask];

		if (w->started && is_rd_atomic(w->wr.opcode)) {
			w->done = 0;
			w->rd_rcvd = 0;
			w->rd_base = 0;
		}
	}
	{
		struct sudp_swqe *w = &qp->sq[found & qp->sq_mask];
		uint32_t k = (uint32_t)sudp_psn_diff(psn, w->first_psn);

		qp->sq_tx = found;
		qp->tx_off = (uint64_t)k * qp->mtu;
		if (w->wr.opcode == IBV_WR_RDMA_READ) {
			/* the READ is asked again for what is missing, from
			 * packet k: its responses start over there */
			w->rd_rcvd = k;
			w->rd_base = k;
		} else if (is_rd_atomic(w->wr.opcode))
			qp->tx_off = 0;
	}
	qp->npsn = psn;
	qp->rd_out = 0;
	for (i = qp->sq_ci; i < qp->sq_tx; i++)
		if (is_rd_atomic(qp->sq[i & qp->sq_mask].wr.opcode) &&
		    !qp->sq[i & qp->sq_mask].done)
			qp->rd_out++;
	qp->since_req = 0;
	arm_timer(qp);
}

/* Everything up to and including apsn is acknowledged: complete what that
 * finishes. A READ or atomic that it covers without its response in means
 * the response was lost: ask again (an implied NAK). */
static void ack_upto(struct sudp_qp *qp, uint32_t apsn)
{
	bool progress = false;

	while (qp->sq_ci < qp->hi_tx) {
		struct sudp_swqe *w = &qp->sq[qp->sq_ci & qp->sq_mask];
		uint32_t last = psn_add(w->first_psn, w->npkts - 1);

		if (sudp_psn_diff(last, apsn) > 0)
			break;
		if (is_rd_atomic(w->wr.opcode) && !w->done) {
			/* acknowledged no further than the missing response */
			uint32_t at = psn_add(w->first_psn, w->rd_rcvd);

			if (sudp_psn_diff(at, qp->una) > 0)
				qp->una = at;
			go_back(qp, at);
			return;
		}
		complete_send(qp, qp->sq_ci, IBV_WC_SUCCESS,
			      w->wr.opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
					      w->wr.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD ?
				      8 :
				      (uint32_t)w->len);
		if (is_rd_atomic(w->wr.opcode) && qp->rd_out)
			qp->rd_out--;
		qp->sq_ci++;
		progress = true;
	}
	{
		/* never past a READ or atomic whose response is not all in: a
		 * response packet acknowledges the packets before it, and a
		 * later one arriving after a loss must not cover the gap (the
		 * READ asked again is answered from there) */
		uint32_t lim = psn_add(apsn, 1);

		if (qp->sq_ci < qp->hi_tx) {
			const struct sudp_swqe *w = &qp->sq[qp->sq_ci & qp->sq_mask];

			if (w->started && is_rd_atomic(w->wr.opcode) && !w->done) {
				uint32_t at = psn_add(w->first_psn, w->rd_rcvd);

				if (sudp_psn_diff(lim, at) > 0)
					lim = at;
			}
		}
		if (sudp_psn_diff(lim, qp->una) > 0 && sudp_psn_diff(lim, qp->hi_psn) <= 0) {
			qp->una = lim;
			progress = true;
		}
	}
	if (qp->sq_tx < qp->sq_ci || sudp_psn_diff(qp->una, qp->npsn) > 0)
		seek_forward(qp, qp->una);
	if (progress) {
		qp->probe = false;
		qp->retry_left = qp->attr.retry_cnt;
		qp->rnr_left = qp->attr.rnr_retry;
		if (qp->una == qp->npsn && qp->sq_ci == qp->sq_tx)
			qp->deadline = 0;
		else
			arm_timer(qp);
	}
}

/* Start, or go on with, the WR at sq_tx; false when nothing could be sent. */
static bool req_tx_one(struct sudp_qp *qp, uint64_t pi)
{
	struct sudp_swqe *w = &qp->sq[qp->sq_tx & qp->sq_mask];
	const bool rc = qp->type == IBV_QPT_RC;
	struct roce_pkt p;

	if (!w->started) {
		bool rd = is_rd_atomic(w->wr.opcode);
		enum ibv_wc_status st;

		if (atomic_load(&qp->state) != IBV_QPS_RTS)
			return false; /* SQD: finish what started, start nothing */
		if ((w->wr.send_flags & IBV_SEND_FENCE) && qp->rd_out)
			return false;
		if (rd && qp->rd_out >= (qp->attr.max_rd_atomic ? qp->attr.max_rd_atomic : 1u))
			return false;
		st = IBV_WC_SUCCESS;
		if (!(w->wr.send_flags & IBV_SEND_INLINE))
			st = check_local(qp, w->wr.sg_list, w->wr.num_sge,
					 rd); /* READ/atomic write locally */
		if (st == IBV_WC_SUCCESS &&
		    (w->len > SUDP_MAX_MSG ||
		     (rd && w->wr.opcode != IBV_WR_RDMA_READ && w->len != 8)))
			st = IBV_WC_LOC_LEN_ERR;
		if (st != IBV_WC_SUCCESS) {
			/* completes in order, once everything before it has */
			if (qp->sq_ci == qp->sq_tx) {
				fail_head(qp, st);
				qp->sq_tx = qp->sq_ci;
			}
			return false;
		}
		w->started = 1;
		w->done = 0;
		w->rd_rcvd = 0;
		w->rd_base = 0;
		w->first_psn = qp->npsn;
		w->npkts = wqe_npkts(qp, w);
		qp->tx_off = 0;
	}
	(void)pi;
	memset(&p, 0, sizeof(p));
	switch (w->wr.opcode) {
	case IBV_WR_RDMA_READ: {
		uint32_t k = (uint32_t)(qp->tx_off / qp->mtu);

		p.bth.opcode = ROCE_RC(ROCE_OP_RDMA_READ_REQUEST);
		p.bth.psn = psn_add(w->first_psn, k);
		p.bth.ackreq = 1;
		p.reth.va = w->wr.wr.rdma.remote_addr + qp->tx_off;
		p.reth.rkey = w->wr.wr.rdma.rkey;
		p.reth.dma_len = (uint32_t)(w->len - qp->tx_off);
		tx_pkt(qp, &p, NULL, 0, 0, NULL);
		qp->npsn = psn_add(w->first_psn, w->npkts);
		qp->sq_tx++;
		qp->tx_off = 0;
		qp->rd_out++;
		break;
	}
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		p.bth.opcode = ROCE_RC(w->wr.opcode == IBV_WR_ATOMIC_CMP_AND_SWP ?
					       ROCE_OP_COMPARE_SWAP :
					       ROCE_OP_FETCH_ADD);
		p.bth.psn = w->first_psn;
		p.bth.ackreq = 1;
		p.atomic.va = w->wr.wr.atomic.remote_addr;
		p.atomic.rkey = w->wr.wr.atomic.rkey;
		p.atomic.swap_add = w->wr.opcode == IBV_WR_ATOMIC_CMP_AND_SWP ?
					    w->wr.wr.atomic.swap :
					    w->wr.wr.atomic.compare_add;
		p.atomic.compare = w->wr.wr.atomic.compare_add;
		tx_pkt(qp, &p, NULL, 0, 0, NULL);
		qp->npsn = psn_add(w->first_psn, 1);
		qp->sq_tx++;
		qp->rd_out++;
		break;
	default: {
		const bool send = w->wr.opcode == IBV_WR_SEND ||
				  w->wr.opcode == IBV_WR_SEND_WITH_IMM;
		const bool imm = w->wr.opcode == IBV_WR_SEND_WITH_IMM ||
				 w->wr.opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
		uint64_t left = w->len - qp->tx_off;
		uint32_t seg = left < qp->mtu ? (uint32_t)left : qp->mtu;
		const bool first = qp->tx_off == 0, last = seg == left;
		uint8_t op;

		if (send)
			op = first && last ?
				     (imm ? ROCE_OP_SEND_ONLY_WITH_IMM : ROCE_OP_SEND_ONLY) :
			     first ? ROCE_OP_SEND_FIRST :
			     last  ? (imm ? ROCE_OP_SEND_LAST_WITH_IMM : ROCE_OP_SEND_LAST) :
				     ROCE_OP_SEND_MIDDLE;
		else
			op = first && last ? (imm ? ROCE_OP_RDMA_WRITE_ONLY_WITH_IMM :
						    ROCE_OP_RDMA_WRITE_ONLY) :
			     first	   ? ROCE_OP_RDMA_WRITE_FIRST :
			     last	   ? (imm ? ROCE_OP_RDMA_WRITE_LAST_WITH_IMM :
						    ROCE_OP_RDMA_WRITE_LAST) :
					     ROCE_OP_RDMA_WRITE_MIDDLE;
		p.bth.opcode = rc ? ROCE_RC(op) : ROCE_UC(op);
		p.bth.psn = qp->npsn;
		p.bth.se = last && imm && (w->wr.send_flags & IBV_SEND_SOLICITED) ? 1 : 0;
		if (rc && (last || qp->probe || ++qp->since_req >= SUDP_REQ_EVERY)) {
			p.bth.ackreq = 1;
			qp->since_req = 0;
		}
		if (!send && first) {
			p.reth.va = w->wr.wr.rdma.remote_addr;
			p.reth.rkey = w->wr.wr.rdma.rkey;
			p.reth.dma_len = (uint32_t)w->len;
		}
		if (last && imm)
			p.imm = ntohl(w->wr.imm_data);
		p.payload_len = seg;
		tx_pkt(qp, &p, w->wr.sg_list, w->wr.num_sge, qp->tx_off, NULL);
		qp->npsn = psn_add(qp->npsn, 1);
		qp->tx_off += seg;
		if (last) {
			qp->sq_tx++;
			qp->tx_off = 0;
			if (!rc) {
				/* UC: no acknowledgement; done once it is sent */
				complete_send(qp, qp->sq_ci, IBV_WC_SUCCESS, (uint32_t)w->len);
				qp->sq_ci++;
				qp->una = qp->npsn;
			}
		}
		break;
	}
	}
	if (sudp_psn_diff(qp->npsn, qp->hi_psn) > 0 ||
	    (qp->npsn == qp->hi_psn && qp->sq_tx > qp->hi_tx)) {
		qp->hi_tx = qp->sq_tx;
		qp->hi_off = qp->tx_off;
		qp->hi_psn = qp->npsn;
	}
	if (rc && !qp->deadline)
		arm_timer(qp);
	return true;
}

static bool req_tx(struct sudp_qp *qp)
{
	uint64_t pi = atomic_load_explicit(&qp->sq_pi, memory_order_acquire);
	bool did = false;

	if (qp->rnr_until) {
		if (qp->dev->now < qp->rnr_until)
			return false;
		qp->rnr_until = 0;
		arm_timer(qp);
	}
	while (qp->sq_tx < pi && atomic_load(&qp->state) >= IBV_QPS_RTS &&
	       atomic_load(&qp->state) <= IBV_QPS_SQD) {
		if (sudp_psn_diff(qp->npsn, qp->una) >= (qp->probe ? 1 : SUDP_WINDOW))
			break;
		if (!req_tx_one(qp, pi))
			break;
		did = true;
	}
	return did;
}

static void on_timeout(struct sudp_qp *qp)
{
	if (qp->una == qp->npsn && qp->sq_ci == qp->sq_tx) {
		qp->deadline = 0;
		return;
	}
	sudp_cnt(qp->dev, SC_TIMEOUT);
	if (!qp->retry_left) {
		fail_head(qp, IBV_WC_RETRY_EXC_ERR);
		return;
	}
	qp->retry_left--;
	go_back(qp, qp->una);
	/* resend the oldest packet alone until it is acknowledged: a loss
	 * that repeats with the same period as a go-back-N burst (drop_nth,
	 * a congested queue) cannot then hit the same PSN every time */
	qp->probe = true;
}

/* ACK, NAK and RNR NAK (AETH of an Acknowledge packet). */
static void rx_ack(struct sudp_qp *qp, const struct roce_pkt *p)
{
	const uint8_t syn = p->aeth.syndrome, kind = ROCE_AETH_KIND(syn);
	const uint32_t psn = p->bth.psn;

	if (kind == 0x00) {
		/* valid: una - 1 .. npsn - 1 */
		if (sudp_psn_diff(psn, qp->una) < -1 || sudp_psn_diff(psn, qp->hi_psn) >= 0)
			return;
		ack_upto(qp, psn);
		return;
	}
	/* a NAK names the PSN it refuses: una .. npsn - 1 */
	if (sudp_psn_diff(psn, qp->una) < 0 || sudp_psn_diff(psn, qp->hi_psn) >= 0)
		return;
	ack_upto(qp, psn_add(psn, ROCE_PSN_MASK));
	if (qp->sq_ci >= qp->hi_tx && qp->hi_off == 0)
		return;
	if (kind == 0x20) {
		sudp_cnt(qp->dev, SC_RNR_RCVD);
		if (qp->rnr_left != 7) {
			if (!qp->rnr_left) {
				fail_head(qp, IBV_WC_RNR_RETRY_EXC_ERR);
				return;
			}
			qp->rnr_left--;
		}
		go_back(qp, psn);
		qp->rnr_until = qp->dev->now + ql_rnr_timer_ns(ROCE_AETH_VALUE(syn));
		qp->deadline = 0;
		return;
	}
	if (kind != 0x60)
		return;
	sudp_cnt(qp->dev, SC_NAK_RCVD);
	switch (ROCE_AETH_VALUE(syn)) {
	case ROCE_NAK_PSN_SEQ_ERROR:
		go_back(qp, psn);
		break;
	case ROCE_NAK_INVALID_REQUEST:
		fail_head(qp, IBV_WC_REM_INV_REQ_ERR);
		break;
	case ROCE_NAK_REMOTE_ACCESS:
		fail_head(qp, IBV_WC_REM_ACCESS_ERR);
		break;
	case ROCE_NAK_REMOTE_OP:
		fail_head(qp, IBV_WC_REM_OP_ERR);
		break;
	default:
		fail_head(qp, IBV_WC_REM_INV_REQ_ERR);
		break;
	}
}

static void rx_read_resp(struct sudp_qp *qp, const struct roce_pkt *p)
{
	const uint8_t op = ROCE_OPCODE_OP(p->bth.opcode);
	struct sudp_swqe *w;
	uint32_t expect;
	uint64_t off;

	/* the response acknowledges every request before the READ */
	if (sudp_psn_diff(p->bth.psn, qp->una) < 0 || sudp_psn_diff(p->bth.psn, qp->hi_psn) >= 0)
		return;
	ack_upto(qp, psn_add(p->bth.psn, ROCE_PSN_MASK));
	if (qp->sq_ci >= qp->hi_tx)
		return;
	w = &qp->sq[qp->sq_ci & qp->sq_mask];
	if (w->wr.opcode != IBV_WR_RDMA_READ || w->done)
		return;
	expect = psn_add(w->first_psn, w->rd_rcvd);
	if (p->bth.psn != expect) {
		/* a response was lost: ask again from it, once per gap */
		if (sudp_psn_diff(p->bth.psn, expect) > 0 &&
		    (!qp->resync_on || qp->resync_psn != expect)) {
			qp->resync_on = true;
			qp->resync_psn = expect;
			go_back(qp, expect);
		}
		return;
	}
	/* the opcode must be one this position calls for, and the length
	 * exactly what is left of the message (never what the peer says).
	 * Where the READ was asked again (rd_base), the new response starts
	 * with FIRST/ONLY; a late packet of the earlier response continues
	 * with MIDDLE/LAST and carries the same bytes: either is taken. */
	off = (uint64_t)w->rd_rcvd * qp->mtu;
	{
		const bool last = w->rd_rcvd + 1 == w->npkts;
		const bool ok_new = w->rd_rcvd == w->rd_base &&
				    op == (last ? ROCE_OP_RDMA_READ_RESPONSE_ONLY :
						  ROCE_OP_RDMA_READ_RESPONSE_FIRST);
		const bool ok_cont = w->rd_rcvd > 0 &&
				     op == (last ? ROCE_OP_RDMA_READ_RESPONSE_LAST :
						   ROCE_OP_RDMA_READ_RESPONSE_MIDDLE);
		uint64_t seg = w->len - off < qp->mtu ? w->len - off : qp->mtu;

		if ((!ok_new && !ok_cont) || p->payload_len != seg) {
			sudp_cnt(qp->dev, SC_RX_BAD);
			return;
		}
	}
	ql__sge_scatter(w->wr.sg_list, w->wr.num_sge, off, p->payload, p->payload_len);
	w->rd_rcvd++;
	qp->resync_on = false;
	qp->una = psn_add(p->bth.psn, 1);
	if (w->rd_rcvd == w->npkts) {
		w->done = 1;
		ack_upto(qp, p->bth.psn);
	} else {
		arm_timer(qp);
	}
}

static void rx_atomic_ack(struct sudp_qp *qp, const struct roce_pkt *p)
{
	struct sudp_swqe *w;

	if (sudp_psn_diff(p->bth.psn, qp->una) < 0 || sudp_psn_diff(p->bth.psn, qp->hi_psn) >= 0)
		return;
	ack_upto(qp, psn_add(p->bth.psn, ROCE_PSN_MASK));
	if (qp->sq_ci >= qp->hi_tx)
		return;
	w = &qp->sq[qp->sq_ci & qp->sq_mask];
	if ((w->wr.opcode != IBV_WR_ATOMIC_CMP_AND_SWP &&
	     w->wr.opcode != IBV_WR_ATOMIC_FETCH_AND_ADD) ||
	    w->done || w->first_psn != p->bth.psn)
		return;
	memcpy((void *)(uintptr_t)w->wr.sg_list[0].addr, &p->atomic_orig, 8);
	w->done = 1;
	ack_upto(qp, p->bth.psn);
}

/* ---- responder ---------------------------------------------------------- */

static void resp_nak(struct sudp_qp *qp, uint8_t code, uint32_t psn, int counter)
{
	flush_ack(qp);
	send_aeth(qp, ROCE_RC(ROCE_OP_ACKNOWLEDGE), ROCE_AETH_NAK(code), psn);
	sudp_cnt(qp->dev, counter);
}

/* A Class C error on RC (IBTA 9.9.3.1): NAK, and the responder QP goes to
 * the Error state (as rxe and ConnectX do). */
static void resp_fatal(struct sudp_qp *qp, uint8_t code, uint32_t psn, int counter)
{
	resp_nak(qp, code, psn, counter);
	qp_to_err(qp);
}

static bool rq_has(struct sudp_qp *qp)
{
	return qp->rq_ci < atomic_load_explicit(&qp->rq_pi, memory_order_acquire);
}

static void send_read_resp(struct sudp_qp *qp, uint32_t psn, const uint8_t *src, uint64_t len)
{
	uint32_t n = len ? (uint32_t)((len + qp->mtu - 1) / qp->mtu) : 1;

	flush_ack(qp);
	for (uint32_t i = 0; i < n; i++) {
		struct roce_pkt p;
		uint64_t off = (uint64_t)i * qp->mtu;
		uint8_t op = n == 1	? ROCE_OP_RDMA_READ_RESPONSE_ONLY :
			     i == 0	? ROCE_OP_RDMA_READ_RESPONSE_FIRST :
			     i == n - 1 ? ROCE_OP_RDMA_READ_RESPONSE_LAST :
					  ROCE_OP_RDMA_READ_RESPONSE_MIDDLE;

		memset(&p, 0, sizeof(p));
		p.bth.opcode = ROCE_RC(op);
		p.bth.psn = psn_add(psn, i);
		p.aeth.syndrome = AETH_ACK;
		p.aeth.msn = qp->msn & 0xffffff;
		p.payload_len = (uint32_t)(len - off < qp->mtu ? len - off : qp->mtu);
		if (src)
			tx_pkt(qp, &p, NULL, 0, 0, src + off);
		else
			tx_pkt(qp, &p, NULL, 0, 0, NULL);
	}
}

static void send_atomic_ack(struct sudp_qp *qp, uint32_t psn, uint64_t orig)
{
	struct roce_pkt p;

	flush_ack(qp);
	memset(&p, 0, sizeof(p));
	p.bth.opcode = ROCE_RC(ROCE_OP_ATOMIC_ACKNOWLEDGE);
	p.bth.psn = psn;
	p.aeth.syndrome = AETH_ACK;
	p.aeth.msn = qp->msn & 0xffffff;
	p.atomic_orig = orig;
	tx_pkt(qp, &p, NULL, 0, 0, NULL);
}

/* READ request (new or duplicate): checks, then the responses. Returns
 * false when refused. */
static bool do_read(struct sudp_qp *qp, const struct roce_pkt *p)
{
	const uint8_t *src = NULL;

	if (!(qp->attr.qp_access_flags & IBV_ACCESS_REMOTE_READ)) {
		resp_fatal(qp, ROCE_NAK_INVALID_REQUEST, p->bth.psn, SC_NAK_INV_REQ);
		return false;
	}
	if (p->reth.dma_len) {
		src = check_remote(qp, p->reth.rkey, p->reth.va, p->reth.dma_len,
				   IBV_ACCESS_REMOTE_READ);
		if (!src) {
			resp_fatal(qp, ROCE_NAK_REMOTE_ACCESS, p->bth.psn, SC_NAK_ACCESS);
			return false;
		}
		atomic_thread_fence(memory_order_acquire);
	}
	send_read_resp(qp, p->bth.psn, src, p->reth.dma_len);
	return true;
}

static void rx_dup(struct sudp_qp *qp, const struct roce_pkt *p)
{
	const uint8_t op = ROCE_OPCODE_OP(p->bth.opcode);

	sudp_cnt(qp->dev, SC_DUP);
	if (op == ROCE_OP_RDMA_READ_REQUEST) {
		/* re-executed (READ has no side effect), but only as a valid
		 * duplicate (IBTA 9.7.5.1.4, as rxe): the rest of a READ we
		 * executed, asked from one of its PSNs. Anything else is
		 * dropped silently, and never a reason for a NAK: a replayed
		 * or forged old READ cannot kill the QP. */
		for (uint32_t i = 0; i < SUDP_MAX_RD_ATOMIC; i++) {
			const uint32_t k = (uint32_t)sudp_psn_diff(p->bth.psn, qp->rd[i].psn);
			const uint64_t off = (uint64_t)k * qp->mtu;
			const uint8_t *src = NULL;

			if (!qp->rd[i].valid || sudp_psn_diff(p->bth.psn, qp->rd[i].psn) < 0 ||
			    k >= qp->rd[i].npkts || p->reth.rkey != qp->rd[i].rkey ||
			    p->reth.va != qp->rd[i].va + off ||
			    (uint64_t)p->reth.dma_len + off != qp->rd[i].len)
				continue;
			if (p->reth.dma_len) {
				/* the MR may be gone since: dropped then */
				src = check_remote(qp, p->reth.rkey, p->reth.va, p->reth.dma_len,
						   IBV_ACCESS_REMOTE_READ);
				if (!src)
					return;
				atomic_thread_fence(memory_order_acquire);
			}
			send_read_resp(qp, p->bth.psn, src, p->reth.dma_len);
			return;
		}
		return;
	}
	if (op == ROCE_OP_COMPARE_SWAP || op == ROCE_OP_FETCH_ADD) {
		/* never executed twice: the original value from the cache */
		for (uint32_t i = 0; i < SUDP_MAX_RD_ATOMIC; i++)
			if (qp->atom[i].valid && qp->atom[i].psn == p->bth.psn) {
				send_atomic_ack(qp, p->bth.psn, qp->atom[i].orig);
				return;
			}
		return;
	}
	/* SEND/WRITE already placed: acknowledge again */
	send_ack_now(qp);
}

static bool is_send_op(uint8_t op)
{
	return op <= ROCE_OP_SEND_ONLY_WITH_IMM;
}

static bool is_write_op(uint8_t op)
{
	return op >= ROCE_OP_RDMA_WRITE_FIRST && op <= ROCE_OP_RDMA_WRITE_ONLY_WITH_IMM;
}

static bool is_first_or_only(uint8_t op)
{
	return op == ROCE_OP_SEND_FIRST || op == ROCE_OP_SEND_ONLY ||
	       op == ROCE_OP_SEND_ONLY_WITH_IMM || op == ROCE_OP_RDMA_WRITE_FIRST ||
	       op == ROCE_OP_RDMA_WRITE_ONLY || op == ROCE_OP_RDMA_WRITE_ONLY_WITH_IMM ||
	       op == ROCE_OP_RDMA_READ_REQUEST || op == ROCE_OP_COMPARE_SWAP ||
	       op == ROCE_OP_FETCH_ADD;
}

static bool is_last_or_only(uint8_t op)
{
	return op == ROCE_OP_SEND_LAST || op == ROCE_OP_SEND_LAST_WITH_IMM ||
	       op == ROCE_OP_SEND_ONLY || op == ROCE_OP_SEND_ONLY_WITH_IMM ||
	       op == ROCE_OP_RDMA_WRITE_LAST || op == ROCE_OP_RDMA_WRITE_LAST_WITH_IMM ||
	       op == ROCE_OP_RDMA_WRITE_ONLY || op == ROCE_OP_RDMA_WRITE_ONLY_WITH_IMM;
}

/* UC: a message is abandoned (a packet of it was lost or refused). */
static void uc_abandon(struct sudp_qp *qp)
{
	if (qp->in_send || qp->in_write)
		sudp_cnt(qp->dev, SC_UC_MSG_DROPPED);
	qp->in_send = qp->in_write = false;
	qp->recv_off = 0;
	qp->drop_msg = true;
}

/* The responder's verdict on a refused request: RC NAKs (and for Class C
 * errors goes to ERR), UC drops the message. */
static void refuse(struct sudp_qp *qp, const struct roce_pkt *p, uint8_t nak, int rc_counter,
		   int uc_counter)
{
	if (qp->type == IBV_QPT_RC) {
		resp_fatal(qp, nak, p->bth.psn, rc_counter);
	} else {
		if (uc_counter >= 0)
			sudp_cnt(qp->dev, uc_counter);
		uc_abandon(qp);
		qp->epsn = psn_add(p->bth.psn, 1);
	}
}

/* No receive WQE for a SEND or WRITE WITH IMMEDIATE: RC answers RNR NAK
 * (the requester retries after the timer), UC drops the message. */
static void no_recv(struct sudp_qp *qp, const struct roce_pkt *p)
{
	if (qp->type == IBV_QPT_RC) {
		flush_ack(qp);
		send_aeth(qp, ROCE_RC(ROCE_OP_ACKNOWLEDGE),
			  ROCE_AETH_RNR_NAK(qp->attr.min_rnr_timer), p->bth.psn);
		sudp_cnt(qp->dev, SC_NAK_RNR);
		qp->nak_sent = true; /* what follows is dropped until the retry */
	} else {
		sudp_cnt(qp->dev, SC_UC_DROP_NO_RECV);
		uc_abandon(qp);
		qp->epsn = psn_add(p->bth.psn, 1);
	}
}

/* The receive WQE being filled: its SGEs against our MR table. */
static enum ibv_wc_status recv_check(struct sudp_qp *qp)
{
	uint32_t s = (uint32_t)(qp->rq_ci & qp->rq_mask);

	return check_local(qp, &qp->rq_sge[(size_t)s * qp->rq_nsge], (int)qp->rq_num[s], true);
}

static void rx_send(struct sudp_qp *qp, const struct roce_pkt *p, uint8_t op)
{
	const bool rc = qp->type == IBV_QPT_RC;
	uint32_t s;

	if (op == ROCE_OP_SEND_FIRST || op == ROCE_OP_SEND_ONLY ||
	    op == ROCE_OP_SEND_ONLY_WITH_IMM) {
		enum ibv_wc_status st;

		if (!rq_has(qp)) {
			no_recv(qp, p);
			return;
		}
		st = recv_check(qp);
		if (st != IBV_WC_SUCCESS) {
			complete_recv(qp, st, IBV_WC_RECV, 0, false, 0);
			if (rc)
				resp_nak(qp, ROCE_NAK_REMOTE_OP, p->bth.psn, SC_NAK_OP_ERR);
			qp_to_err(qp);
			return;
		}
		qp->in_send = true;
		qp->recv_off = 0;
	}
	s = (uint32_t)(qp->rq_ci & qp->rq_mask);
	if (qp->recv_off + p->payload_len > qp->rq_len[s]) {
		/* longer than the receive buffers: a length error here, an
		 * invalid request for the requester */
		complete_recv(qp, IBV_WC_LOC_LEN_ERR, IBV_WC_RECV, 0, false, 0);
		qp->in_send = false;
		if (rc)
			resp_nak(qp, ROCE_NAK_INVALID_REQUEST, p->bth.psn, SC_NAK_INV_REQ);
		qp_to_err(qp);
		return;
	}
	atomic_thread_fence(memory_order_release);
	ql__sge_scatter(&qp->rq_sge[(size_t)s * qp->rq_nsge], (int)qp->rq_num[s], qp->recv_off,
			p->payload, p->payload_len);
	qp->recv_off += p->payload_len;
	qp->epsn = psn_add(p->bth.psn, 1);
	if (is_last_or_only(op)) {
		const bool imm = op == ROCE_OP_SEND_ONLY_WITH_IMM ||
				 op == ROCE_OP_SEND_LAST_WITH_IMM;

		complete_recv(qp, IBV_WC_SUCCESS, IBV_WC_RECV, (uint32_t)qp->recv_off, imm, p->imm);
		qp->in_send = false;
		qp->msn++;
	}
}

static void rx_write(struct sudp_qp *qp, const struct roce_pkt *p, uint8_t op)
{
	const bool imm = op == ROCE_OP_RDMA_WRITE_ONLY_WITH_IMM ||
			 op == ROCE_OP_RDMA_WRITE_LAST_WITH_IMM;
	const bool last = is_last_or_only(op);

	if (op == ROCE_OP_RDMA_WRITE_FIRST || op == ROCE_OP_RDMA_WRITE_ONLY ||
	    op == ROCE_OP_RDMA_WRITE_ONLY_WITH_IMM) {
		uint8_t *dst = NULL;

		if (!(qp->attr.qp_access_flags & IBV_ACCESS_REMOTE_WRITE)) {
			refuse(qp, p, ROCE_NAK_INVALID_REQUEST, SC_NAK_INV_REQ, SC_UC_DROP_ACCESS);
			return;
		}
		if (imm && !rq_has(qp)) {
			no_recv(qp, p);
			return;
		}
		if (p->reth.dma_len) {
			dst = check_remote(qp, p->reth.rkey, p->reth.va, p->reth.dma_len,
					   IBV_ACCESS_REMOTE_WRITE);
			if (!dst) {
				refuse(qp, p, ROCE_NAK_REMOTE_ACCESS, SC_NAK_ACCESS,
				       SC_UC_DROP_ACCESS);
				return;
			}
		}
		qp->in_write = true;
		qp->wr_ptr = dst;
		qp->wr_rkey = p->reth.rkey;
		qp->wr_left = p->reth.dma_len;
		qp->wr_total = p->reth.dma_len;
	}
	/* the payload must fit what the RETH announced (checked against the
	 * MR then), never beyond */
	if (p->payload_len > qp->wr_left || (last && p->payload_len != qp->wr_left)) {
		qp->in_write = false;
		refuse(qp, p, ROCE_NAK_INVALID_REQUEST, SC_NAK_INV_REQ, -1);
		return;
	}
	if (last && imm && !rq_has(qp)) {
		no_recv(qp, p);
		return;
	}
	/* the MR may have been deregistered (and unmapped) since the FIRST
	 * packet: ql_mr_dereg serialises with this thread and clears the
	 * entry, so a MIDDLE or LAST packet places bytes only while the MR
	 * the RETH named is still registered (a new MR in its slot has
	 * another rkey). One load and compare per packet, no lock. */
	if (p->payload_len &&
	    sudp_unlikely(qp->dev->mr[qp->wr_rkey & (SUDP_MAX_MR - 1)].rkey != qp->wr_rkey)) {
		qp->in_write = false;
		refuse(qp, p, ROCE_NAK_REMOTE_ACCESS, SC_NAK_ACCESS, SC_UC_DROP_ACCESS);
		return;
	}
	if (p->payload_len) {
		if (last)
			place_last(qp->wr_ptr, p->payload, p->payload_len);
		else
			memcpy(qp->wr_ptr, p->payload, p->payload_len);
		qp->wr_ptr += p->payload_len;
		qp->wr_left -= p->payload_len;
	}
	qp->epsn = psn_add(p->bth.psn, 1);
	if (last) {
		qp->in_write = false;
		qp->msn++;
		if (imm)
			complete_recv(qp, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM,
				      (uint32_t)qp->wr_total, true, p->imm);
	}
}

static void rx_atomic(struct sudp_qp *qp, const struct roce_pkt *p, uint8_t op)
{
	uint64_t *dst, orig;

	/* the ACK owed for what came before, before the PSN moves on */
	flush_ack(qp);
	if (!(qp->attr.qp_access_flags & IBV_ACCESS_REMOTE_ATOMIC)) {
		resp_fatal(qp, ROCE_NAK_INVALID_REQUEST, p->bth.psn, SC_NAK_INV_REQ);
		return;
	}
	if (p->atomic.va & 7) {
		resp_fatal(qp, ROCE_NAK_INVALID_REQUEST, p->bth.psn, SC_NAK_INV_REQ);
		return;
	}
	dst = (uint64_t *)(void *)check_remote(qp, p->atomic.rkey, p->atomic.va, 8,
					       IBV_ACCESS_REMOTE_ATOMIC);
	if (!dst) {
		resp_fatal(qp, ROCE_NAK_REMOTE_ACCESS, p->bth.psn, SC_NAK_ACCESS);
		return;
	}
	if (op == ROCE_OP_FETCH_ADD) {
		orig = __atomic_fetch_add(dst, p->atomic.swap_add, __ATOMIC_SEQ_CST);
	} else {
		orig = p->atomic.compare;
		__atomic_compare_exchange_n(dst, &orig, p->atomic.swap_add, false, __ATOMIC_SEQ_CST,
					    __ATOMIC_SEQ_CST);
	}
	qp->atom[qp->atom_next].psn = p->bth.psn;
	qp->atom[qp->atom_next].orig = orig;
	qp->atom[qp->atom_next].valid = true;
	qp->atom_next = (qp->atom_next + 1) % SUDP_MAX_RD_ATOMIC;
	qp->msn++;
	qp->epsn = psn_add(p->bth.psn, 1);
	send_atomic_ack(qp, p->bth.psn, orig);
}

static void rx_request(struct sudp_qp *qp, const struct roce_pkt *p, uint8_t op)
{
	const bool rc = qp->type == IBV_QPT_RC;
	int32_t d = sudp_psn_diff(p->bth.psn, qp->epsn);

	if (rc) {
		if (d > 0) {
			/* a gap: one NAK per episode, the rest dropped */
			if (!qp->nak_sent) {
				resp_nak(qp, ROCE_NAK_PSN_SEQ_ERROR, qp->epsn, SC_NAK_SEQ);
				qp->nak_sent = true;
			}
			return;
		}
		if (d < 0) {
			rx_dup(qp, p);
			return;
		}
	} else {
		if (d != 0) {
			/* UC: a lost packet loses the message it was part of */
			if (qp->in_send || qp->in_write)
				uc_abandon(qp);
			qp->epsn = p->bth.psn;
		}
		if (qp->drop_msg) {
			if (!is_first_or_only(op)) {
				qp->epsn = psn_add(p->bth.psn, 1);
				return;
			}
			qp->drop_msg = false;
		}
	}
	/* the opcode sequence: a message goes on only with its own middle or
	 * last packets, and a new one starts only after the last */
	if ((qp->in_send && !(op == ROCE_OP_SEND_MIDDLE || op == ROCE_OP_SEND_LAST ||
			      op == ROCE_OP_SEND_LAST_WITH_IMM)) ||
	    (qp->in_write && !(op == ROCE_OP_RDMA_WRITE_MIDDLE || op == ROCE_OP_RDMA_WRITE_LAST ||
			       op == ROCE_OP_RDMA_WRITE_LAST_WITH_IMM)) ||
	    (!qp->in_send && !qp->in_write && !is_first_or_only(op)) ||
	    /* FIRST and MIDDLE packets are exactly one MTU, the others at most */
	    ((op == ROCE_OP_SEND_FIRST || op == ROCE_OP_SEND_MIDDLE ||
	      op == ROCE_OP_RDMA_WRITE_FIRST || op == ROCE_OP_RDMA_WRITE_MIDDLE) &&
	     p->payload_len != qp->mtu) ||
	    p->payload_len > qp->mtu) {
		qp->in_send = qp->in_write = false;
		refuse(qp, p, ROCE_NAK_INVALID_REQUEST, SC_NAK_INV_REQ, SC_RX_BAD);
		return;
	}
	qp->nak_sent = false;
	if (is_send_op(op)) {
		rx_send(qp, p, op);
	} else if (is_write_op(op)) {
		rx_write(qp, p, op);
	} else if (op == ROCE_OP_RDMA_READ_REQUEST) {
		uint32_t n =
			p->reth.dma_len ?
				(uint32_t)(((uint64_t)p->reth.dma_len + qp->mtu - 1) / qp->mtu) :
				1;

		flush_ack(qp);
		qp->msn++;
		if (do_read(qp, p)) {
			qp->rd[qp->rd_next].psn = p->bth.psn;
			qp->rd[qp->rd_next].npkts = n;
			qp->rd[qp->rd_next].va = p->reth.va;
			qp->rd[qp->rd_next].rkey = p->reth.rkey;
			qp->rd[qp->rd_next].len = p->reth.dma_len;
			qp->rd[qp->rd_next].valid = true;
			qp->rd_next = (qp->rd_next + 1) % SUDP_MAX_RD_ATOMIC;
			qp->epsn = psn_add(p->bth.psn, n);
		}
		return;
	} else {
		rx_atomic(qp, p, op);
		return;
	}
	if (rc && atomic_load(&qp->state) != IBV_QPS_ERR && !qp->nak_sent) {
		qp->unacked++;
		if (p->bth.ackreq || qp->unacked >= SUDP_ACK_EVERY)
			qp->ack_pending = true;
	}
}

/* ---- receive ------------------------------------------------------------ */

static void rx_datagram(struct sudp_device *dev, const uint8_t *buf, size_t len,
			const struct sockaddr_storage *from)
{
	struct roce_addr a;
	struct roce_pkt p;
	struct sudp_qp *qp;
	enum ibv_qp_state st;
	uint8_t tr, op;

	memset(&a, 0, sizeof(a));
	a.family = dev->family;
	if (from->ss_family == AF_INET && dev->family == AF_INET) {
		const struct sockaddr_in *s = (const struct sockaddr_in *)from;

		memcpy(a.src, &s->sin_addr, 4);
		memcpy(a.dst, dev->my_ip, 4);
		a.sport = ntohs(s->sin_port);
	} else if (from->ss_family == AF_INET6 && dev->family == AF_INET6) {
		const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)from;

		memcpy(a.src, &s->sin6_addr, 16);
		memcpy(a.dst, dev->my_ip, 16);
		a.sport = ntohs(s->sin6_port);
	} else {
		sudp_cnt(dev, SC_RX_BAD);
		return;
	}
	a.dport = dev->port;
	if (ql__roce_parse(buf, len, &p)) {
		sudp_cnt(dev, SC_RX_BAD);
		return;
	}
	/* The cheap checks first (QP, state, source), then the ICRC: a flood
	 * of garbage costs a table lookup each, not a CRC (nor, for IPv4, the
	 * solving of the Identification field, docs/soft-udp.md 5) */
	qp = dev->qps[p.bth.dqpn & (SUDP_MAX_QP - 1)];
	if (!qp || qp->base.qp_num != p.bth.dqpn || p.bth.pkey != ROCE_DEFAULT_PKEY) {
		sudp_cnt(dev, SC_RX_NO_QP);
		return;
	}
	st = (enum ibv_qp_state)atomic_load(&qp->state);
	if (st != IBV_QPS_RTR && st != IBV_QPS_RTS && st != IBV_QPS_SQD && st != IBV_QPS_SQE) {
		if (qp->type == IBV_QPT_UC)
			sudp_cnt(dev, SC_UC_DROP_NOT_READY);
		else
			sudp_cnt(dev, SC_RX_NO_QP);
		return;
	}
	tr = ROCE_OPCODE_TR(p.bth.opcode);
	op = ROCE_OPCODE_OP(p.bth.opcode);
	/* only from the address the QP is connected to, of its own type */
	if (!qp->connected || memcmp(a.src, qp->peer_ip, dev->family == AF_INET ? 4 : 16) != 0 ||
	    (qp->peer_sport[0] && a.sport != qp->peer_sport[0] && a.sport != qp->peer_sport[1]) ||
	    (tr == ROCE_TR_RC) != (qp->type == IBV_QPT_RC) ||
	    (tr != ROCE_TR_RC && tr != ROCE_TR_UC)) {
		sudp_cnt(dev, SC_RX_BAD);
		return;
	}
	if (sudp_unlikely(dev->pcap)) {
		struct iovec iov = { (void *)(uintptr_t)buf, len };
		struct timespec ts;

		if (ql__roce_icrc_solve_id(buf, len, &a, &a.ip_id)) {
			sudp_cnt(dev, SC_RX_ICRC);
			return;
		}
		clock_gettime(CLOCK_REALTIME, &ts);
		ql__roce_pcap_write(dev->pcap,
				    (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec, &a,
				    &iov, 1);
	} else if (ql__roce_icrc_check(buf, len, &a)) {
		sudp_cnt(dev, SC_RX_ICRC);
		return;
	}
	if (op >= ROCE_OP_RDMA_READ_RESPONSE_FIRST && op <= ROCE_OP_ATOMIC_ACKNOWLEDGE) {
		if (qp->type != IBV_QPT_RC || st == IBV_QPS_RTR) {
			sudp_cnt(dev, SC_RX_BAD);
			return;
		}
		if (op == ROCE_OP_ACKNOWLEDGE)
			rx_ack(qp, &p);
		else if (op == ROCE_OP_ATOMIC_ACKNOWLEDGE)
			rx_atomic_ack(qp, &p);
		else
			rx_read_resp(qp, &p);
		return;
	}
	if (op > ROCE_OP_FETCH_ADD ||
	    (qp->type == IBV_QPT_UC && op > ROCE_OP_RDMA_WRITE_ONLY_WITH_IMM)) {
		sudp_cnt(dev, SC_RX_BAD);
		return;
	}
	rx_request(qp, &p, op);
}

/* ---- the loop ----------------------------------------------------------- */

static bool service_qp(struct sudp_device *dev, struct sudp_qp *qp)
{
	enum ibv_qp_state st = (enum ibv_qp_state)atomic_load(&qp->state);
	bool did = false;

	if (st == IBV_QPS_ERR)
		return flush(qp, true);
	if (st == IBV_QPS_SQE)
		did = flush(qp, false);
	if (st < IBV_QPS_RTR)
		return did;
	if (qp->ack_pending) {
		send_ack_now(qp);
		did = true;
	}
	if (st == IBV_QPS_RTS || st == IBV_QPS_SQD) {
		if (qp->deadline && dev->now >= qp->deadline) {
			on_timeout(qp);
			did = true;
		}
		did |= req_tx(qp);
	}
	if (qp->fault)
		did |= fault_drain_one(dev, qp->fault);
	return did;
}

/* Anything for the NIC to do without a packet arriving? */
static bool has_work(struct sudp_device *dev)
{
	for (uint32_t i = 0; i < dev->nlive; i++) {
		struct sudp_qp *qp = dev->live[i];
		int st = atomic_load(&qp->state);
		uint64_t pi = atomic_load(&qp->sq_pi);

		if (st == IBV_QPS_ERR && (pi != qp->sq_ci || atomic_load(&qp->rq_pi) != qp->rq_ci))
			return true;
		if (st == IBV_QPS_RTS && qp->sq_tx < pi && !qp->rnr_until)
			return true;
		if (qp->ack_pending)
			return true;
	}
	return false;
}

/* The earliest timer (retransmission, RNR wait, held fault copies). */
static uint64_t next_due(struct sudp_device *dev)
{
	uint64_t due = UINT64_MAX;

	for (uint32_t i = 0; i < dev->nlive; i++) {
		struct sudp_qp *qp = dev->live[i];

		if (qp->deadline && qp->deadline < due)
			due = qp->deadline;
		if (qp->rnr_until && qp->rnr_until < due)
			due = qp->rnr_until;
		if (qp->fault) {
			uint64_t f = ql__roce_fault_next_due(qp->fault);

			if (f < due)
				due = f;
		}
	}
	if (dev->fault) {
		uint64_t f = ql__roce_fault_next_due(dev->fault);

		if (f < due)
			due = f;
	}
	return due;
}

static void nic_sleep(struct sudp_device *dev)
{
	struct pollfd pfd[2] = { { .fd = dev->sock, .events = POLLIN },
				 { .fd = dev->efd, .events = POLLIN } };
	struct timespec ts, *tsp = NULL;
	uint64_t due, now, v;

	sudp_dev_lock(dev);
	atomic_store(&dev->need_wakeup, 1);
	atomic_thread_fence(memory_order_seq_cst);
	if (has_work(dev) || atomic_load(&dev->stop)) {
		atomic_store(&dev->need_wakeup, 0);
		sudp_dev_unlock(dev);
		return;
	}
	due = next_due(dev);
	sudp_dev_unlock(dev);
	now = now_ns();
	if (due != UINT64_MAX) {
		uint64_t d = due > now ? due - now : 0;

		ts.tv_sec = (time_t)(d / 1000000000ull);
		ts.tv_nsec = (long)(d % 1000000000ull);
		tsp = &ts;
	}
	ppoll(pfd, 2, tsp, NULL);
	if (pfd[1].revents & POLLIN)
		(void)!read(dev->efd, &v, sizeof(v));
	atomic_store(&dev->need_wakeup, 0);
}

void *ql__sudp_nic_main(void *arg)
{
	struct sudp_device *dev = arg;
	uint64_t idle_since = now_ns();
	cpu_set_t set;

	/* The application may have pinned itself to one CPU before opening
	 * the device; the NIC must not inherit that and compete with the
	 * thread that polls it. Any CPU, or the URI's cpu=N. */
	CPU_ZERO(&set);
	if (dev->cpu >= 0) {
		CPU_SET(dev->cpu, &set);
	} else {
		long n = sysconf(_SC_NPROCESSORS_CONF);

		for (long c = 0; c < n && c < CPU_SETSIZE; c++)
			CPU_SET((int)c, &set);
	}
	(void)!pthread_setaffinity_np(pthread_self(), sizeof(set), &set);

	for (int i = 0; i < SUDP_BATCH; i++) {
		dev->rx_iov[i].iov_base = dev->rx[i].buf;
		dev->rx_iov[i].iov_len = sizeof(dev->rx[i].buf);
	}
	while (!atomic_load_explicit(&dev->stop, memory_order_relaxed)) {
		bool did = false;
		int n;

		sudp_dev_lock(dev);
		dev->now = now_ns();
		for (int i = 0; i < SUDP_BATCH; i++) {
			struct msghdr *mh = &dev->rx_msg[i].msg_hdr;

			memset(mh, 0, sizeof(*mh));
			mh->msg_name = &dev->rx_peer[i];
			mh->msg_namelen = sizeof(dev->rx_peer[i]);
			mh->msg_iov = &dev->rx_iov[i];
			mh->msg_iovlen = 1;
		}
		n = recvmmsg(dev->sock, dev->rx_msg, SUDP_BATCH, MSG_DONTWAIT, NULL);
		for (int i = 0; i < n; i++) {
			/* a truncated datagram is not a packet of ours */
			if (dev->rx_msg[i].msg_hdr.msg_flags & MSG_TRUNC)
				sudp_cnt(dev, SC_RX_BAD);
			else
				rx_datagram(dev, dev->rx[i].buf, dev->rx_msg[i].msg_len,
					    &dev->rx_peer[i]);
			did = true;
		}
		if (n > 0) /* processed, whatever the verdict */
			atomic_fetch_add_explicit(&dev->cnt.v[SC_RX_PKTS], (uint64_t)n,
						  memory_order_release);
		for (uint32_t i = 0; i < dev->nlive; i++)
			did |= service_qp(dev, dev->live[i]);
		if (dev->fault)
			did |= fault_drain_one(dev, dev->fault);
		tx_flush(dev);
		sudp_dev_unlock(dev);

		if (did) {
			idle_since = dev->now;
			continue;
		}
		if (atomic_load_explicit(&dev->want_lock, memory_order_relaxed))
			sched_yield();
		if (dev->poll_mode == SUDP_POLL_BUSY)
			continue;
		if (now_ns() - idle_since < (uint64_t)dev->idle_us * 1000ull) {
			sched_yield(); /* two cores shared with the application */
			continue;
		}
		nic_sleep(dev);
		idle_since = now_ns();
	}
	return NULL;
}
