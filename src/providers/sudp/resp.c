/* SPDX-License-Identifier: MIT */
/*
 * soft+udp provider, the responder (rxe's resp): executes the requests a
 * peer sends (SEND into receive WQEs, WRITE, READ, atomics), checks every
 * key, address and length against our own MR table before a byte is
 * placed, detects duplicates and answers with ACK/NAK, READ responses and
 * atomic acknowledgements.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "providers/common/devmem.h"
#include "providers/common/soft_nic.h"
#include "providers/sudp/nic_int.h"

/* A remote request's rkey, address and length: where the bytes are (*tag:
 * their device-memory tag, devmem.h), or NULL (remote access error). len
 * may be 0 (then any address passes). */
static uint8_t *check_remote(const struct sudp_qp *qp, uint32_t rkey, uint64_t va, uint64_t len,
			     uint32_t need, uint32_t *tag)
{
	const struct sudp_mr_entry *e = &qp->dev->mr[rkey & (SUDP_MAX_MR - 1)];
	uint64_t off;

	if (!rkey || e->rkey != rkey || e->pd_id != qp->pd_id || !(e->access & need))
		return NULL;
	off = va - e->iova;
	if (off > e->length || len > e->length - off)
		return NULL;
	*tag = e->cuda;
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

/* ---- responder ---------------------------------------------------------- */

static void resp_nak(struct sudp_qp *qp, uint8_t code, uint32_t psn, int counter)
{
	ql__sudp_flush_ack(qp);
	ql__sudp_send_aeth(qp, ROCE_RC(ROCE_OP_ACKNOWLEDGE), ROCE_AETH_NAK(code), psn);
	sudp_cnt(qp->dev, counter);
}

/* A Class C error on RC (IBTA 9.9.3.1): NAK, and the responder QP goes to
 * the Error state (as rxe and ConnectX do). */
static void resp_fatal(struct sudp_qp *qp, uint8_t code, uint32_t psn, int counter)
{
	resp_nak(qp, code, psn, counter);
	ql__sudp_qp_to_err(qp);
}

static bool rq_has(struct sudp_qp *qp)
{
	return qp->rq_ci < atomic_load_explicit(&qp->rq_pi, memory_order_acquire);
}

static void send_read_resp(struct sudp_qp *qp, uint32_t psn, const uint8_t *src, uint32_t tag,
			   uint64_t len)
{
	uint32_t n = len ? (uint32_t)((len + qp->mtu - 1) / qp->mtu) : 1;

	ql__sudp_flush_ack(qp);
	for (uint32_t i = 0; i < n; i++) {
		struct roce_pkt p;
		uint64_t off = (uint64_t)i * qp->mtu;
		uint8_t op = n == 1	? ROCE_OP_RDMA_READ_RESPONSE_ONLY :
			     i == 0	? ROCE_OP_RDMA_READ_RESPONSE_FIRST :
			     i == n - 1 ? ROCE_OP_RDMA_READ_RESPONSE_LAST :
					  ROCE_OP_RDMA_READ_RESPONSE_MIDDLE;

		memset(&p, 0, sizeof(p));
		p.bth.opcode = ROCE_RC(op);
		p.bth.psn = sudp_psn_add(psn, i);
		p.aeth.syndrome = SUDP_AETH_ACK;
		p.aeth.msn = qp->msn & 0xffffff;
		p.payload_len = (uint32_t)(len - off < qp->mtu ? len - off : qp->mtu);
		if (src)
			ql__sudp_tx_pkt(qp, &p, NULL, 0, 0, src + off, tag);
		else
			ql__sudp_tx_pkt(qp, &p, NULL, 0, 0, NULL, 0);
	}
}

static void send_atomic_ack(struct sudp_qp *qp, uint32_t psn, uint64_t orig)
{
	struct roce_pkt p;

	ql__sudp_flush_ack(qp);
	memset(&p, 0, sizeof(p));
	p.bth.opcode = ROCE_RC(ROCE_OP_ATOMIC_ACKNOWLEDGE);
	p.bth.psn = psn;
	p.aeth.syndrome = SUDP_AETH_ACK;
	p.aeth.msn = qp->msn & 0xffffff;
	p.atomic_orig = orig;
	ql__sudp_tx_pkt(qp, &p, NULL, 0, 0, NULL, 0);
}

/* READ request (new or duplicate): checks, then the responses. Returns
 * false when refused. */
static bool do_read(struct sudp_qp *qp, const struct roce_pkt *p)
{
	const uint8_t *src = NULL;
	uint32_t tag = 0;

	if (!(qp->attr.qp_access_flags & IBV_ACCESS_REMOTE_READ)) {
		resp_fatal(qp, ROCE_NAK_INVALID_REQUEST, p->bth.psn, SC_NAK_INV_REQ);
		return false;
	}
	if (p->reth.dma_len) {
		src = check_remote(qp, p->reth.rkey, p->reth.va, p->reth.dma_len,
				   IBV_ACCESS_REMOTE_READ, &tag);
		if (!src) {
			resp_fatal(qp, ROCE_NAK_REMOTE_ACCESS, p->bth.psn, SC_NAK_ACCESS);
			return false;
		}
		atomic_thread_fence(memory_order_acquire);
	}
	send_read_resp(qp, p->bth.psn, src, tag, p->reth.dma_len);
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
			uint32_t tag = 0;

			if (!qp->rd[i].valid || sudp_psn_diff(p->bth.psn, qp->rd[i].psn) < 0 ||
			    k >= qp->rd[i].npkts || p->reth.rkey != qp->rd[i].rkey ||
			    p->reth.va != qp->rd[i].va + off ||
			    (uint64_t)p->reth.dma_len + off != qp->rd[i].len)
				continue;
			if (p->reth.dma_len) {
				/* the MR may be gone since: dropped then */
				src = check_remote(qp, p->reth.rkey, p->reth.va, p->reth.dma_len,
						   IBV_ACCESS_REMOTE_READ, &tag);
				if (!src)
					return;
				atomic_thread_fence(memory_order_acquire);
			}
			send_read_resp(qp, p->bth.psn, src, tag, p->reth.dma_len);
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
	ql__sudp_send_ack_now(qp);
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
		qp->epsn = sudp_psn_add(p->bth.psn, 1);
	}
}

/* No receive WQE for a SEND or WRITE WITH IMMEDIATE: RC answers RNR NAK
 * (the requester retries after the timer), UC drops the message. */
static void no_recv(struct sudp_qp *qp, const struct roce_pkt *p)
{
	if (qp->type == IBV_QPT_RC) {
		ql__sudp_flush_ack(qp);
		ql__sudp_send_aeth(qp, ROCE_RC(ROCE_OP_ACKNOWLEDGE),
				   ROCE_AETH_RNR_NAK(qp->attr.min_rnr_timer), p->bth.psn);
		sudp_cnt(qp->dev, SC_NAK_RNR);
		qp->nak_sent = true; /* what follows is dropped until the retry */
	} else {
		sudp_cnt(qp->dev, SC_UC_DROP_NO_RECV);
		uc_abandon(qp);
		qp->epsn = sudp_psn_add(p->bth.psn, 1);
	}
}

/* The receive WQE being filled: its SGEs against our MR table. */
static enum ibv_wc_status recv_check(struct sudp_qp *qp)
{
	uint32_t s = (uint32_t)(qp->rq_ci & qp->rq_mask);

	qp->recv_dev = 0;
	return ql__sudp_check_local(qp, &qp->rq_sge[(size_t)s * qp->rq_nsge], (int)qp->rq_num[s],
				    true, &qp->recv_dev);
}

/* A SEND's payload into a receive WQE that names GPU device memory. */
static __attribute__((noinline)) int recv_scatter_dev(struct sudp_qp *qp, uint32_t s,
						      const struct roce_pkt *p)
{
	struct ibv_sge t[SUDP_MAX_SGE];

	ql__sudp_tagged(qp, &qp->rq_sge[(size_t)s * qp->rq_nsge], (int)qp->rq_num[s], t);
	return ql__nic_sg_copy(t, (int)qp->rq_num[s], qp->recv_off,
			       &(struct ibv_sge){ (uint64_t)(uintptr_t)p->payload, p->payload_len,
						  0 },
			       1, 0, p->payload_len);
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
			ql__sudp_complete_recv(qp, st, IBV_WC_RECV, 0, false, 0);
			if (rc)
				resp_nak(qp, ROCE_NAK_REMOTE_OP, p->bth.psn, SC_NAK_OP_ERR);
			ql__sudp_qp_to_err(qp);
			return;
		}
		qp->in_send = true;
		qp->recv_off = 0;
	}
	s = (uint32_t)(qp->rq_ci & qp->rq_mask);
	if (qp->recv_off + p->payload_len > qp->rq_len[s]) {
		/* longer than the receive buffers: a length error here, an
		 * invalid request for the requester */
		ql__sudp_complete_recv(qp, IBV_WC_LOC_LEN_ERR, IBV_WC_RECV, 0, false, 0);
		qp->in_send = false;
		if (rc)
			resp_nak(qp, ROCE_NAK_INVALID_REQUEST, p->bth.psn, SC_NAK_INV_REQ);
		ql__sudp_qp_to_err(qp);
		return;
	}
	atomic_thread_fence(memory_order_release);
	if (sudp_likely(!qp->recv_dev)) {
		ql__sge_scatter(&qp->rq_sge[(size_t)s * qp->rq_nsge], (int)qp->rq_num[s],
				qp->recv_off, p->payload, p->payload_len);
	} else if (recv_scatter_dev(qp, s, p)) {
		/* the driver failed the copy: the responder's operational error */
		ql__sudp_complete_recv(qp, IBV_WC_LOC_QP_OP_ERR, IBV_WC_RECV, 0, false, 0);
		qp->in_send = false;
		if (rc)
			resp_nak(qp, ROCE_NAK_REMOTE_OP, p->bth.psn, SC_NAK_OP_ERR);
		ql__sudp_qp_to_err(qp);
		return;
	}
	qp->recv_off += p->payload_len;
	qp->epsn = sudp_psn_add(p->bth.psn, 1);
	if (is_last_or_only(op)) {
		const bool imm = op == ROCE_OP_SEND_ONLY_WITH_IMM ||
				 op == ROCE_OP_SEND_LAST_WITH_IMM;

		ql__sudp_complete_recv(qp, IBV_WC_SUCCESS, IBV_WC_RECV, (uint32_t)qp->recv_off, imm,
				       p->imm);
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
		uint32_t tag = 0;

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
					   IBV_ACCESS_REMOTE_WRITE, &tag);
			if (!dst) {
				refuse(qp, p, ROCE_NAK_REMOTE_ACCESS, SC_NAK_ACCESS,
				       SC_UC_DROP_ACCESS);
				return;
			}
		}
		qp->in_write = true;
		qp->wr_ptr = dst;
		qp->wr_tag = tag;
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
	if (p->payload_len && sudp_unlikely(qp->wr_tag)) {
		/* GPU device memory: a LAST packet's final 8 bytes in a
		 * second copy, as place_last orders them */
		const struct ibv_sge src = { (uint64_t)(uintptr_t)p->payload, p->payload_len, 0 };

		if (last ? ql__nic_write_tagged(qp->wr_ptr, qp->wr_tag, &src, 1, p->payload_len) :
			   ql__nic_copy(qp->wr_ptr, qp->wr_tag, p->payload, 0, p->payload_len)) {
			qp->in_write = false;
			if (qp->type == IBV_QPT_RC)
				resp_fatal(qp, ROCE_NAK_REMOTE_OP, p->bth.psn, SC_NAK_OP_ERR);
			else
				ql__sudp_qp_to_err(qp);
			return;
		}
		qp->wr_ptr += p->payload_len;
		qp->wr_left -= p->payload_len;
	} else if (p->payload_len) {
		if (last)
			place_last(qp->wr_ptr, p->payload, p->payload_len);
		else
			memcpy(qp->wr_ptr, p->payload, p->payload_len);
		qp->wr_ptr += p->payload_len;
		qp->wr_left -= p->payload_len;
	}
	qp->epsn = sudp_psn_add(p->bth.psn, 1);
	if (last) {
		qp->in_write = false;
		qp->msn++;
		if (imm)
			ql__sudp_complete_recv(qp, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM,
					       (uint32_t)qp->wr_total, true, p->imm);
	}
}

static void rx_atomic(struct sudp_qp *qp, const struct roce_pkt *p, uint8_t op)
{
	uint64_t *dst, orig;
	uint32_t tag = 0;

	/* the ACK owed for what came before, before the PSN moves on */
	ql__sudp_flush_ack(qp);
	if (!(qp->attr.qp_access_flags & IBV_ACCESS_REMOTE_ATOMIC)) {
		resp_fatal(qp, ROCE_NAK_INVALID_REQUEST, p->bth.psn, SC_NAK_INV_REQ);
		return;
	}
	if (p->atomic.va & 7) {
		resp_fatal(qp, ROCE_NAK_INVALID_REQUEST, p->bth.psn, SC_NAK_INV_REQ);
		return;
	}
	dst = (uint64_t *)(void *)check_remote(qp, p->atomic.rkey, p->atomic.va, 8,
					       IBV_ACCESS_REMOTE_ATOMIC, &tag);
	/* GPU device memory: no atomic through the copy engine (docs/gpu.md) */
	if (!dst || tag) {
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
	qp->epsn = sudp_psn_add(p->bth.psn, 1);
	send_atomic_ack(qp, p->bth.psn, orig);
}

void ql__sudp_rx_request(struct sudp_qp *qp, const struct roce_pkt *p, uint8_t op)
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
				qp->epsn = sudp_psn_add(p->bth.psn, 1);
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

		ql__sudp_flush_ack(qp);
		qp->msn++;
		if (do_read(qp, p)) {
			qp->rd[qp->rd_next].psn = p->bth.psn;
			qp->rd[qp->rd_next].npkts = n;
			qp->rd[qp->rd_next].va = p->reth.va;
			qp->rd[qp->rd_next].rkey = p->reth.rkey;
			qp->rd[qp->rd_next].len = p->reth.dma_len;
			qp->rd[qp->rd_next].valid = true;
			qp->rd_next = (qp->rd_next + 1) % SUDP_MAX_RD_ATOMIC;
			qp->epsn = sudp_psn_add(p->bth.psn, n);
		}
		return;
	} else {
		rx_atomic(qp, p, op);
		return;
	}
	if (rc && atomic_load(&qp->state) != IBV_QPS_ERR && !qp->nak_sent) {
		qp->unacked++;
		if ((p->bth.ackreq || qp->unacked >= SUDP_ACK_EVERY) && !qp->ack_pending) {
			qp->ack_pending = true;
			qp->ack_round = qp->dev->round;
		}
	}
}
