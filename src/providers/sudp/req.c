/* SPDX-License-Identifier: MIT */
/*
 * soft+udp provider, the requester (rxe's req): takes work requests off
 * the send queue, checks their local SGEs, segments them into packets by
 * path MTU, and rewinds (go-back-N) when the completer says so.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "providers/common/devmem.h"
#include "providers/common/soft_nic.h"
#include "providers/sudp/nic_int.h"

/* ---- memory checks ----------------------------------------------------- */

/* A local SGE list (ours: the application posted it) against the MR
 * table. */
enum ibv_wc_status ql__sudp_check_local(const struct sudp_qp *qp, const struct ibv_sge *sg, int n,
					bool need_write, uint32_t *dev)
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
		*dev |= e->cuda;
	}
	return IBV_WC_SUCCESS;
}

void ql__sudp_tagged(const struct sudp_qp *qp, const struct ibv_sge *sg, int n, struct ibv_sge *out)
{
	for (int i = 0; i < n; i++) {
		out[i] = sg[i];
		out[i].lkey = sg[i].length ? qp->dev->mr[sg[i].lkey & (SUDP_MAX_MR - 1)].cuda : 0;
	}
}

/* ---- requester ---------------------------------------------------------- */

static uint32_t wqe_npkts(const struct sudp_qp *qp, const struct sudp_swqe *w)
{
	if (w->wr.opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
	    w->wr.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD)
		return 1;
	return w->len ? (uint32_t)((w->len + qp->mtu - 1) / qp->mtu) : 1;
}

void ql__sudp_arm_timer(struct sudp_qp *qp)
{
	uint64_t t = sudp_timeout_ns(qp);

	qp->deadline = t ? qp->dev->now + t : 0;
}

/* Fail the WR at the head of the send queue with st: the QP goes to ERR
 * (RC) and everything after it is flushed. */
void ql__sudp_fail_head(struct sudp_qp *qp, enum ibv_wc_status st)
{
	ql__sudp_complete_send(qp, qp->sq_ci, st, 0);
	qp->sq_ci++;
	if (qp->type == IBV_QPT_RC) {
		ql__sudp_qp_to_err(qp);
	} else {
		atomic_store(&qp->state, IBV_QPS_SQE);
		qp->flushed = false;
	}
}

/* The started send WQE whose packets hold `psn`, or UINT64_MAX. */
static uint64_t wqe_of_psn(struct sudp_qp *qp, uint32_t psn)
{
	for (uint64_t i = qp->sq_ci; i <= qp->hi_tx && i < atomic_load(&qp->sq_pi); i++) {
		struct sudp_swqe *w = &qp->sq[i & qp->sq_mask];
		int32_t d;

		if (!w->started)
			break;
		d = sudp_psn_diff(psn, w->first_psn);
		if (d >= 0 && (uint32_t)d < w->npkts)
			return i;
	}
	return UINT64_MAX;
}

/* Move the transmitter forward to `psn` (acknowledged beyond where a
 * go-back-N rewound it): nothing before it needs sending again. */
void ql__sudp_seek_forward(struct sudp_qp *qp, uint32_t psn)
{
	struct sudp_swqe *w;
	uint64_t i;

	if (psn == qp->hi_psn) {
		qp->sq_tx = qp->hi_tx;
		qp->tx_off = qp->hi_off;
		qp->npsn = qp->hi_psn;
		return;
	}
	i = wqe_of_psn(qp, psn);
	if (i == UINT64_MAX)
		return;
	w = &qp->sq[i & qp->sq_mask];
	qp->sq_tx = i;
	qp->tx_off = sudp_is_rd_atomic(w->wr.opcode) ?
			     0 :
			     (uint64_t)sudp_psn_diff(psn, w->first_psn) * qp->mtu;
	qp->npsn = sudp_is_rd_atomic(w->wr.opcode) ? w->first_psn : psn;
}

/* Go back to `psn` (retransmission, IBTA 9.7.5.2: go-back-N). */
void ql__sudp_go_back(struct sudp_qp *qp, uint32_t psn)
{
	uint64_t i, found = wqe_of_psn(qp, psn);

	if (found == UINT64_MAX)
		return;
	sudp_cnt(qp->dev, SC_RETRANSMIT);
	for (i = found; i <= qp->hi_tx && i < atomic_load(&qp->sq_pi); i++) {
		struct sudp_swqe *w = &qp->sq[i & qp->sq_mask];

		if (w->started && sudp_is_rd_atomic(w->wr.opcode)) {
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
		} else if (sudp_is_rd_atomic(w->wr.opcode))
			qp->tx_off = 0;
	}
	qp->npsn = psn;
	qp->rd_out = 0;
	for (i = qp->sq_ci; i < qp->sq_tx; i++)
		if (sudp_is_rd_atomic(qp->sq[i & qp->sq_mask].wr.opcode) &&
		    !qp->sq[i & qp->sq_mask].done)
			qp->rd_out++;
	qp->since_req = 0;
	ql__sudp_arm_timer(qp);
}

/* Start, or go on with, the WR at sq_tx; false when nothing could be sent. */
static bool req_tx_one(struct sudp_qp *qp, uint64_t pi)
{
	struct sudp_swqe *w = &qp->sq[qp->sq_tx & qp->sq_mask];
	const bool rc = qp->type == IBV_QPT_RC;
	struct roce_pkt p;

	if (!w->started) {
		bool rd = sudp_is_rd_atomic(w->wr.opcode);
		enum ibv_wc_status st;

		if (atomic_load(&qp->state) != IBV_QPS_RTS)
			return false; /* SQD: finish what started, start nothing */
		if ((w->wr.send_flags & IBV_SEND_FENCE) && qp->rd_out)
			return false;
		if (rd && qp->rd_out >= (qp->attr.max_rd_atomic ? qp->attr.max_rd_atomic : 1u))
			return false;
		st = IBV_WC_SUCCESS;
		w->ldev = 0;
		if (!(w->wr.send_flags & IBV_SEND_INLINE)) {
			uint32_t dev = 0;

			st = ql__sudp_check_local(qp, w->wr.sg_list, w->wr.num_sge,
						  rd, /* READ/atomic write locally */
						  &dev);
			w->ldev = dev != 0;
		}
		if (st == IBV_WC_SUCCESS &&
		    (w->len > SUDP_MAX_MSG ||
		     (rd && w->wr.opcode != IBV_WR_RDMA_READ && w->len != 8)))
			st = IBV_WC_LOC_LEN_ERR;
		if (st != IBV_WC_SUCCESS) {
			/* completes in order, once everything before it has */
			if (qp->sq_ci == qp->sq_tx) {
				ql__sudp_fail_head(qp, st);
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
		p.bth.psn = sudp_psn_add(w->first_psn, k);
		p.bth.ackreq = 1;
		p.reth.va = w->wr.wr.rdma.remote_addr + qp->tx_off;
		p.reth.rkey = w->wr.wr.rdma.rkey;
		p.reth.dma_len = (uint32_t)(w->len - qp->tx_off);
		ql__sudp_tx_pkt(qp, &p, NULL, 0, 0, NULL, 0);
		qp->npsn = sudp_psn_add(w->first_psn, w->npkts);
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
		ql__sudp_tx_pkt(qp, &p, NULL, 0, 0, NULL, 0);
		qp->npsn = sudp_psn_add(w->first_psn, 1);
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
		ql__sudp_tx_pkt(qp, &p, w->wr.sg_list, w->wr.num_sge, qp->tx_off, NULL, w->ldev);
		qp->npsn = sudp_psn_add(qp->npsn, 1);
		qp->tx_off += seg;
		if (last) {
			qp->sq_tx++;
			qp->tx_off = 0;
			if (!rc) {
				/* UC: no acknowledgement; done once it is sent */
				ql__sudp_complete_send(qp, qp->sq_ci, IBV_WC_SUCCESS,
						       (uint32_t)w->len);
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
		ql__sudp_arm_timer(qp);
	return true;
}

bool ql__sudp_req_tx(struct sudp_qp *qp)
{
	uint64_t pi = atomic_load_explicit(&qp->sq_pi, memory_order_acquire);
	bool did = false;

	if (qp->rnr_until) {
		if (qp->dev->now < qp->rnr_until)
			return false;
		qp->rnr_until = 0;
		ql__sudp_arm_timer(qp);
	}
	while (qp->sq_tx < pi && atomic_load(&qp->state) >= IBV_QPS_RTS &&
	       atomic_load(&qp->state) <= IBV_QPS_SQD) {
		if (sudp_psn_diff(qp->npsn, qp->una) >= (qp->probe ? 1 : SUDP_WINDOW))
			break;
		/* caller mode: one sendmmsg per round; the rest on the next */
		if (qp->dev->caller && qp->dev->ntx == SUDP_BATCH)
			break;
		if (!req_tx_one(qp, pi))
			break;
		did = true;
	}
	return did;
}
