/* SPDX-License-Identifier: MIT */
/*
 * soft+udp provider, the completer (rxe's comp): completions into the CQ
 * rings, flushes, and what the requester hears back from the responder
 * (ACK, NAK, RNR NAK, READ responses, atomic acknowledgements) and its
 * retransmission timer. Everything a packet says is checked against the
 * send queue before it completes anything.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "providers/common/devmem.h"
#include "providers/common/soft_nic.h"
#include "providers/sudp/nic_int.h"

void ql__sudp_qp_to_err(struct sudp_qp *qp)
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

void ql__sudp_complete_send(struct sudp_qp *qp, uint64_t idx, enum ibv_wc_status st,
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
		ql__sudp_qp_to_err(qp);
}

void ql__sudp_complete_recv(struct sudp_qp *qp, enum ibv_wc_status st, enum ibv_wc_opcode op,
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
		ql__sudp_qp_to_err(qp);
}

/* ERR: every WR left completes as flushed; SQE: the send queue only. */
bool ql__sudp_flush(struct sudp_qp *qp, bool rq)
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
			ql__sudp_complete_recv(qp, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, 0, false, 0);
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

/* Everything up to and including apsn is acknowledged: complete what that
 * finishes. A READ or atomic that it covers without its response in means
 * the response was lost: ask again (an implied NAK). */
void ql__sudp_ack_upto(struct sudp_qp *qp, uint32_t apsn)
{
	bool progress = false;

	while (qp->sq_ci < qp->hi_tx) {
		struct sudp_swqe *w = &qp->sq[qp->sq_ci & qp->sq_mask];
		uint32_t last = sudp_psn_add(w->first_psn, w->npkts - 1);

		if (sudp_psn_diff(last, apsn) > 0)
			break;
		if (sudp_is_rd_atomic(w->wr.opcode) && !w->done) {
			/* acknowledged no further than the missing response */
			uint32_t at = sudp_psn_add(w->first_psn, w->rd_rcvd);

			if (sudp_psn_diff(at, qp->una) > 0)
				qp->una = at;
			ql__sudp_go_back(qp, at);
			return;
		}
		ql__sudp_complete_send(qp, qp->sq_ci, IBV_WC_SUCCESS,
				       w->wr.opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
						       w->wr.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD ?
					       8 :
					       (uint32_t)w->len);
		if (sudp_is_rd_atomic(w->wr.opcode) && qp->rd_out)
			qp->rd_out--;
		qp->sq_ci++;
		progress = true;
	}
	{
		/* never past a READ or atomic whose response is not all in: a
		 * response packet acknowledges the packets before it, and a
		 * later one arriving after a loss must not cover the gap (the
		 * READ asked again is answered from there) */
		uint32_t lim = sudp_psn_add(apsn, 1);

		if (qp->sq_ci < qp->hi_tx) {
			const struct sudp_swqe *w = &qp->sq[qp->sq_ci & qp->sq_mask];

			if (w->started && sudp_is_rd_atomic(w->wr.opcode) && !w->done) {
				uint32_t at = sudp_psn_add(w->first_psn, w->rd_rcvd);

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
		ql__sudp_seek_forward(qp, qp->una);
	if (progress) {
		qp->probe = false;
		qp->retry_left = qp->attr.retry_cnt;
		qp->rnr_left = qp->attr.rnr_retry;
		if (qp->una == qp->npsn && qp->sq_ci == qp->sq_tx)
			qp->deadline = 0;
		else
			ql__sudp_arm_timer(qp);
	}
}

void ql__sudp_on_timeout(struct sudp_qp *qp)
{
	if (qp->una == qp->npsn && qp->sq_ci == qp->sq_tx) {
		qp->deadline = 0;
		return;
	}
	sudp_cnt(qp->dev, SC_TIMEOUT);
	if (!qp->retry_left) {
		ql__sudp_fail_head(qp, IBV_WC_RETRY_EXC_ERR);
		return;
	}
	qp->retry_left--;
	ql__sudp_go_back(qp, qp->una);
	/* resend the oldest packet alone until it is acknowledged: a loss
	 * that repeats with the same period as a go-back-N burst (drop_nth,
	 * a congested queue) cannot then hit the same PSN every time */
	qp->probe = true;
}

/* ACK, NAK and RNR NAK (AETH of an Acknowledge packet). */
void ql__sudp_rx_ack(struct sudp_qp *qp, const struct roce_pkt *p)
{
	const uint8_t syn = p->aeth.syndrome, kind = ROCE_AETH_KIND(syn);
	const uint32_t psn = p->bth.psn;

	if (kind == 0x00) {
		/* valid: una - 1 .. npsn - 1 */
		if (sudp_psn_diff(psn, qp->una) < -1 || sudp_psn_diff(psn, qp->hi_psn) >= 0)
			return;
		ql__sudp_ack_upto(qp, psn);
		return;
	}
	/* a NAK names the PSN it refuses: una .. npsn - 1 */
	if (sudp_psn_diff(psn, qp->una) < 0 || sudp_psn_diff(psn, qp->hi_psn) >= 0)
		return;
	ql__sudp_ack_upto(qp, sudp_psn_add(psn, ROCE_PSN_MASK));
	if (qp->sq_ci >= qp->hi_tx && qp->hi_off == 0)
		return;
	if (kind == 0x20) {
		sudp_cnt(qp->dev, SC_RNR_RCVD);
		if (qp->rnr_left != 7) {
			if (!qp->rnr_left) {
				ql__sudp_fail_head(qp, IBV_WC_RNR_RETRY_EXC_ERR);
				return;
			}
			qp->rnr_left--;
		}
		ql__sudp_go_back(qp, psn);
		qp->rnr_until = qp->dev->now + ql_rnr_timer_ns(ROCE_AETH_VALUE(syn));
		qp->deadline = 0;
		return;
	}
	if (kind != 0x60)
		return;
	sudp_cnt(qp->dev, SC_NAK_RCVD);
	switch (ROCE_AETH_VALUE(syn)) {
	case ROCE_NAK_PSN_SEQ_ERROR:
		ql__sudp_go_back(qp, psn);
		break;
	case ROCE_NAK_INVALID_REQUEST:
		ql__sudp_fail_head(qp, IBV_WC_REM_INV_REQ_ERR);
		break;
	case ROCE_NAK_REMOTE_ACCESS:
		ql__sudp_fail_head(qp, IBV_WC_REM_ACCESS_ERR);
		break;
	case ROCE_NAK_REMOTE_OP:
		ql__sudp_fail_head(qp, IBV_WC_REM_OP_ERR);
		break;
	default:
		ql__sudp_fail_head(qp, IBV_WC_REM_INV_REQ_ERR);
		break;
	}
}

void ql__sudp_rx_read_resp(struct sudp_qp *qp, const struct roce_pkt *p)
{
	const uint8_t op = ROCE_OPCODE_OP(p->bth.opcode);
	struct sudp_swqe *w;
	uint32_t expect;
	uint64_t off;

	/* the response acknowledges every request before the READ */
	if (sudp_psn_diff(p->bth.psn, qp->una) < 0 || sudp_psn_diff(p->bth.psn, qp->hi_psn) >= 0)
		return;
	ql__sudp_ack_upto(qp, sudp_psn_add(p->bth.psn, ROCE_PSN_MASK));
	if (qp->sq_ci >= qp->hi_tx)
		return;
	w = &qp->sq[qp->sq_ci & qp->sq_mask];
	if (w->wr.opcode != IBV_WR_RDMA_READ || w->done)
		return;
	expect = sudp_psn_add(w->first_psn, w->rd_rcvd);
	if (p->bth.psn != expect) {
		/* a response was lost: ask again from it, once per gap */
		if (sudp_psn_diff(p->bth.psn, expect) > 0 &&
		    (!qp->resync_on || qp->resync_psn != expect)) {
			qp->resync_on = true;
			qp->resync_psn = expect;
			ql__sudp_go_back(qp, expect);
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
	if (sudp_likely(!w->ldev)) {
		ql__sge_scatter(w->wr.sg_list, w->wr.num_sge, off, p->payload, p->payload_len);
	} else {
		struct ibv_sge t[SUDP_MAX_SGE];

		ql__sudp_tagged(qp, w->wr.sg_list, w->wr.num_sge, t);
		if (ql__nic_sg_copy(t, w->wr.num_sge, off,
				    &(struct ibv_sge){ (uint64_t)(uintptr_t)p->payload,
						       p->payload_len, 0 },
				    1, 0, p->payload_len)) {
			ql__sudp_fail_head(qp, IBV_WC_LOC_QP_OP_ERR);
			return;
		}
	}
	w->rd_rcvd++;
	qp->resync_on = false;
	qp->una = sudp_psn_add(p->bth.psn, 1);
	if (w->rd_rcvd == w->npkts) {
		w->done = 1;
		ql__sudp_ack_upto(qp, p->bth.psn);
	} else {
		ql__sudp_arm_timer(qp);
	}
}

void ql__sudp_rx_atomic_ack(struct sudp_qp *qp, const struct roce_pkt *p)
{
	struct sudp_swqe *w;

	if (sudp_psn_diff(p->bth.psn, qp->una) < 0 || sudp_psn_diff(p->bth.psn, qp->hi_psn) >= 0)
		return;
	ql__sudp_ack_upto(qp, sudp_psn_add(p->bth.psn, ROCE_PSN_MASK));
	if (qp->sq_ci >= qp->hi_tx)
		return;
	w = &qp->sq[qp->sq_ci & qp->sq_mask];
	if ((w->wr.opcode != IBV_WR_ATOMIC_CMP_AND_SWP &&
	     w->wr.opcode != IBV_WR_ATOMIC_FETCH_AND_ADD) ||
	    w->done || w->first_psn != p->bth.psn)
		return;
	if (sudp_likely(!w->ldev)) {
		memcpy((void *)(uintptr_t)w->wr.sg_list[0].addr, &p->atomic_orig, 8);
	} else if (ql__nic_copy((void *)(uintptr_t)w->wr.sg_list[0].addr,
				qp->dev->mr[w->wr.sg_list[0].lkey & (SUDP_MAX_MR - 1)].cuda,
				&p->atomic_orig, 0, 8)) {
		ql__sudp_fail_head(qp, IBV_WC_LOC_QP_OP_ERR);
		return;
	}
	w->done = 1;
	ql__sudp_ack_upto(qp, p->bth.psn);
}
