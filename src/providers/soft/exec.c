/* SPDX-License-Identifier: MIT */
/*
 * soft provider: the hot path. ql_qp_post_send executes work requests at
 * once, in posting order, straight into the peer's (mapped) memory; a WR
 * that cannot run yet (receiver not ready, peer QP not ready, SQD) waits in
 * the send queue and is retried by later posts and by polls of the send CQ,
 * after the timers the IB spec gives (RNR timer, local ACK timeout).
 *
 * No allocation, lock, syscall or log here: every queue was sized at
 * creation, and the clock is read only while a WR is stalled.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <string.h>
#include <time.h>

#include "providers/common/devmem.h"
#include "providers/common/soft_nic.h"
#include "providers/soft/soft.h"

enum { EXEC_DONE = 0, EXEC_STALL = 1 };

static inline uint64_t stall_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- completions ------------------------------------------------------- */

static inline void cq_push(struct soft_qp *qp, uint64_t sq_idx, uint64_t wr_id,
			   enum ibv_wc_status st, enum ibv_wc_opcode op, uint32_t byte_len)
{
	struct soft_cq *cq = qp->send_cq;
	struct soft_cqe *e;

	if (soft_unlikely(cq->tail - cq->head >= (uint64_t)cq->depth || cq->err)) {
		/* CQ overrun: the IB spec makes it a CQ error that takes the
		 * QP down with it; the loss is reported, never silent. */
		cq->err = -EOVERFLOW;
		qp->need_err = true;
		return;
	}
	e = &cq->ring[cq->tail & cq->mask];
	memset(&e->wc, 0, sizeof(e->wc));
	e->wc.wr_id = wr_id;
	e->wc.status = st;
	e->wc.opcode = op;
	e->wc.byte_len = byte_len;
	e->wc.qp_num = qp->base.qp_num;
	e->wc.src_qp = qp->dest_qpn;
	e->qp = qp;
	e->sq_idx = sq_idx;
	cq->tail++;
}

static void sq_unlist(struct soft_qp *qp)
{
	if (qp->pending_listed) {
		ql__soft_cq_list_del(qp->send_cq->pending, &qp->send_cq->n_pending, qp);
		qp->pending_listed = false;
	}
}

void ql__soft_sq_flush(struct soft_qp *qp)
{
	for (uint64_t i = qp->sq_exec; i < qp->sq_pi; i++) {
		struct soft_swqe *w = &qp->sq[i & qp->sq_mask];

		cq_push(qp, w->idx, w->wr.wr_id, IBV_WC_WR_FLUSH_ERR, ql__wc_opcode(w->wr.opcode),
			0);
	}
	qp->sq_exec = qp->sq_pi;
	qp->stalled = false;
	sq_unlist(qp);
}

/* After a WR completed in error or a completion did not fit. */
static void after_error(struct soft_qp *qp)
{
	if (qp->need_err || qp->type == IBV_QPT_RC) {
		ql__soft_qp_enter_err(qp);
	} else {
		/* UC: a send-side error stops the send queue only (SQE). */
		ql__soft_qp_set_state(qp, IBV_QPS_SQE);
		ql__soft_sq_flush(qp);
	}
}

void ql__soft_sq_fail(struct soft_qp *qp, uint64_t wr_id, enum ibv_wc_status st,
		      enum ibv_wc_opcode op)
{
	const uint64_t idx = qp->sq_pi++;

	qp->sq_exec = qp->sq_pi;
	if (qp->state == IBV_QPS_ERR)
		st = IBV_WC_WR_FLUSH_ERR;
	cq_push(qp, idx, wr_id, st, op, 0);
	/* a malformed WQE is the QP's own fault, on UC as well: ERR */
	qp->need_err = true;
	if (qp->state != IBV_QPS_ERR)
		after_error(qp);
	else
		qp->need_err = false;
}

/* ---- memory checks ------------------------------------------------------ */

/* Requester: the local SGEs, against this device's private MR table (the
 * heap copy is the peers' to read, and theirs to scribble on). *dev: the
 * OR of their MRs' device-memory tags (0: all host memory). */
static inline enum ibv_wc_status check_local(const struct soft_qp *qp, const struct ibv_sge *sg,
					     int n, bool need_write, uint32_t *dev)
{
	const struct soft_mr_entry *tbl = qp->dev->mr_priv;

	for (int i = 0; i < n; i++) {
		const struct ibv_sge *s = &sg[i];
		const struct soft_mr_entry *e;
		uint64_t off;

		if (!s->length)
			continue;
		e = &tbl[s->lkey & (SOFT_MAX_MR - 1)];
		if (soft_unlikely(!s->lkey ||
				  atomic_load_explicit(&e->lkey, memory_order_relaxed) != s->lkey ||
				  e->pd_id != qp->pd_id))
			return IBV_WC_LOC_PROT_ERR;
		if (soft_unlikely(need_write && !(e->access & IBV_ACCESS_LOCAL_WRITE)))
			return IBV_WC_LOC_PROT_ERR;
		/* An address below the MR wraps off beyond any length a
		 * registration can have (2^46): one test covers both ends. */
		off = s->addr - e->addr;
		if (soft_unlikely(off > e->length || s->length > e->length - off))
			return IBV_WC_LOC_PROT_ERR;
		/* an MR registered at another iova is for remote access only
		 * here (docs/soft-provider.md) */
		if (soft_unlikely(e->iova != e->addr))
			return IBV_WC_LOC_PROT_ERR;
		*dev |= e->cuda;
	}
	return IBV_WC_SUCCESS;
}

/* [addr, addr + len) of the peer lies inside what we mapped of it (for a
 * peer in this process the MR tables are private and span is unbounded).
 * Every peer address is checked here after the MR check, because an MR
 * entry in another process's memory says whatever that process wants. */
static inline bool in_peer_map(const struct soft_qp *qp, uint64_t addr, uint64_t len)
{
	uint64_t off = addr - qp->peer_lo;

	return off < qp->peer_span && len <= qp->peer_span - off;
}

/* An MR entry against a request: each field of the entry read once. An
 * address below the MR wraps off beyond any real length (registrations are
 * at most 2^46 bytes); an entry whose length is bigger than that was forged
 * by a peer, and in_peer_map() bounds what it can reach. */
static inline bool mr_covers(const struct soft_mr_entry *e, uint64_t addr, uint64_t len,
			     uint64_t *where)
{
	uint64_t el = SOFT_PEEK(e->length), off = addr - SOFT_PEEK(e->iova);

	/* remote addresses are the MR's iova space (its address unless it was
	 * registered with ql_mr_reg_iova); *where is the peer's address of the
	 * bytes, which the caller bounds with in_peer_map() */
	*where = SOFT_PEEK(e->addr) + off;
	return off <= el && len <= el - off;
}

/* The device-memory tag of a peer's MR entry: only a device of this
 * process can hold device memory we reach (its entries are private). */
static inline uint32_t peer_tag(const struct soft_qp *qp, const struct soft_mr_entry *e)
{
	return qp->peer_self ? e->cuda : 0;
}

/* The responder's check of an rkey: returns where the bytes are in this
 * process (*tag: their device-memory tag), or NULL for a remote access
 * violation. */
static inline uint8_t *check_remote(const struct soft_qp *qp, uint32_t rkey, uint64_t addr,
				    uint64_t len, uint32_t need, uint32_t *tag)
{
	const struct soft_mr_entry *e = &qp->peer_mr[rkey & (SOFT_MAX_MR - 1)];
	const struct soft_qp_shared *p = qp->peer_qp;

	if (soft_unlikely(!rkey || atomic_load_explicit(&e->rkey, memory_order_acquire) != rkey))
		return NULL;
	if (soft_unlikely(SOFT_PEEK(e->pd_id) != SOFT_PEEK(p->pd_id) ||
			  !(SOFT_PEEK(e->access) & need) || !(SOFT_PEEK(p->access) & need)))
		return NULL;
	if (soft_unlikely(!mr_covers(e, addr, len, &addr) || !in_peer_map(qp, addr, len)))
		return NULL;
	*tag = peer_tag(qp, e);
	return (uint8_t *)(uintptr_t)(addr + (uint64_t)qp->peer_delta);
}

/* ---- copies ------------------------------------------------------------- */

/*
 * RDMA WRITE placement. The visibility contract (docs/soft-provider.md):
 * everything an earlier WR on this QP placed is visible before any byte of
 * this one, and the final 8 bytes of a WRITE of 8 bytes or more are stored
 * last, with release semantics (one atomic store when 8-byte aligned).
 */
static inline __attribute__((always_inline)) void
write_ordered(uint8_t *dst, const struct ibv_sge *sg, int n, uint64_t len)
{
	uint64_t last;

	atomic_thread_fence(memory_order_release);
	if (len < 8) {
		ql__sge_gather(dst, sg, n, 0, len);
		return;
	}
	if (len > 8)
		ql__sge_gather(dst, sg, n, 0, len - 8);
	if (soft_likely(n == 1)) /* constant-size copy: no call */
		memcpy(&last, (const uint8_t *)(uintptr_t)sg[0].addr + len - 8, 8);
	else
		ql__sge_gather((uint8_t *)&last, sg, n, len - 8, 8);
	if (soft_likely(((uintptr_t)(dst + len - 8) & 7) == 0)) {
		atomic_store_explicit((_Atomic uint64_t *)(void *)(dst + len - 8), last,
				      memory_order_release);
	} else {
		atomic_thread_fence(memory_order_release);
		memcpy(dst + len - 8, &last, 8);
	}
}

/* ---- execution ---------------------------------------------------------- */

static inline bool peer_ready(const struct soft_qp *qp)
{
	const struct soft_qp_shared *p = qp->peer_qp;
	uint64_t g0, g1, m0, m1;
	uint32_t s;

	if (soft_unlikely(!p))
		return false;
	if (soft_unlikely(atomic_load_explicit(&p->qpn, memory_order_relaxed) != qp->dest_qpn))
		return false;
	s = atomic_load_explicit(&p->state, memory_order_acquire);
	if (soft_unlikely(s != IBV_QPS_RTS && s != IBV_QPS_RTR && s != IBV_QPS_SQD &&
			  s != IBV_QPS_SQE))
		return false;
	/* The responder accepts traffic only from the QP it is connected to. */
	memcpy(&g0, p->dest_gid, 8);
	memcpy(&g1, p->dest_gid + 8, 8);
	memcpy(&m0, qp->my_gid, 8);
	memcpy(&m1, qp->my_gid + 8, 8);
	return p->dest_qpn == qp->base.qp_num && g0 == m0 && g1 == m1;
}

/* Arm or advance the stall of the WR at the head of the send queue.
 * Returns EXEC_STALL, or the error status once the retries are spent. */
static int stall(struct soft_qp *qp, bool rnr, enum ibv_wc_status *st)
{
	uint64_t wait;

	if (!qp->stalled) {
		qp->stalled = true;
		qp->retry_left = qp->attr.retry_cnt;
		qp->rnr_left = qp->attr.rnr_retry;
	}
	if (rnr) {
		if (qp->rnr_left != 7) { /* 7: retry forever */
			if (!qp->rnr_left) {
				*st = IBV_WC_RNR_RETRY_EXC_ERR;
				return EXEC_DONE;
			}
			qp->rnr_left--;
		}
		wait = ql_rnr_timer_ns((uint8_t)qp->peer_qp->min_rnr_timer);
	} else {
		if (!qp->retry_left) {
			*st = IBV_WC_RETRY_EXC_ERR;
			return EXEC_DONE;
		}
		qp->retry_left--;
		/* local ACK timeout: 4.096 us * 2^timeout; 0 means infinite */
		wait = qp->attr.timeout ? 4096ull << qp->attr.timeout : UINT64_MAX / 2;
	}
	qp->stall_until_ns = stall_now_ns() + wait;
	return EXEC_STALL;
}

/* How long a requester waits for a receive an mlx5-mode responder's
 * application has rung and its engine not yet taken, before it is an RNR.
 * The engine takes it within a microsecond while it spins and within its
 * idle sleep (50 us) otherwise, but on a loaded host its thread can be off
 * its core for milliseconds; an RNR instead would cost the responder's RNR
 * timer and, on the soft NIC, a later post or poll by the requester. */
#define SOFT_MX_RECV_WAIT_NS 50000000ull

/* The responder is in the mlx5 queue mode and found with no receive: if
 * its receive doorbell record counts receives beyond those its engine has
 * taken (the soft queue's tail), wait (bounded) for the engine to take
 * them, as a ConnectX would see them at once. True when one is there. */
static __attribute__((noinline)) bool mx_recv_wait(struct soft_qp *qp)
{
	const struct soft_qp_shared *p = qp->peer_qp;
	uint64_t deadline = 0;

	for (unsigned i = 1;; i++) {
		const uint32_t rung = be32toh(__atomic_load_n(qp->peer_mx_db, __ATOMIC_RELAXED)) &
				      0xffff;
		const uint64_t t = atomic_load_explicit(&p->rq_tail, memory_order_acquire);

		if (atomic_load_explicit(&p->rq_head, memory_order_relaxed) < t)
			return true;
		if (((rung - (uint32_t)t) & 0xffff) == 0)
			return false; /* nothing rung that the engine has not taken */
		if ((i & 255) == 0) {
			uint64_t now = stall_now_ns();
			uint32_t s;

			if (!deadline) {
				deadline = now + SOFT_MX_RECV_WAIT_NS;
			} else if (now > deadline) {
				/* once: a responder whose record promises what
				 * never comes is not waited for again on this
				 * connection (RNRs from now on) */
				qp->peer_mx_db = NULL;
				return false;
			}
			/* nobody left to take it */
			s = atomic_load_explicit(&p->state, memory_order_relaxed);
			if (!soft_peer_alive(qp->peer_heap) ||
			    (s != IBV_QPS_RTR && s != IBV_QPS_RTS && s != IBV_QPS_SQD &&
			     s != IBV_QPS_SQE))
				return false;
		}
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_pause();
#endif
	}
}

/* Claim the next receive WQE of the peer, in the receive queue geometry we
 * validated at connect time (ql__soft_qp_latch_peer_rq): head and tail are the
 * peer's numbers, but any value of them selects a slot inside that queue. */
enum { CLAIM_OK, CLAIM_RNR, CLAIM_BUSY, CLAIM_BAD };

static inline int claim_recv(struct soft_qp *qp, struct soft_rq_slot **slot, uint64_t *idx)
{
	struct soft_qp_shared *p = qp->peer_qp;
	uint64_t h = atomic_load_explicit(&p->rq_head, memory_order_relaxed);
	uint64_t t = atomic_load_explicit(&p->rq_tail, memory_order_acquire);
	const uint32_t sz = qp->peer_rq_slot_size, mask = qp->peer_rq_mask;
	uint8_t *rq = qp->peer_rq;

	if (soft_unlikely(!rq))
		return CLAIM_BAD;
	if (h >= t) {
		if (soft_likely(!qp->peer_mx_db) || !mx_recv_wait(qp))
			return CLAIM_RNR;
		h = atomic_load_explicit(&p->rq_head, memory_order_relaxed);
		t = atomic_load_explicit(&p->rq_tail, memory_order_acquire);
		if (h >= t)
			return CLAIM_RNR;
	}
	if (soft_unlikely(!atomic_compare_exchange_strong_explicit(
		    &p->rq_head, &h, h + 1, memory_order_acquire, memory_order_relaxed)))
		return CLAIM_BUSY;
	*idx = h;
	/* We read this slot's scatter list and then write its completion
	 * while the receiver polls it: ask for the line exclusive at once,
	 * and for the next slots' too. */
	__builtin_prefetch(soft_rq_slot(rq, sz, mask, h + 1), 1);
	__builtin_prefetch(soft_rq_slot(rq, sz, mask, h + 2), 1);
	__builtin_prefetch(soft_rq_slot(rq, sz, mask, h + 3), 1);
	*slot = soft_rq_slot(rq, sz, mask, h);
	return CLAIM_OK;
}

static inline void complete_recv(struct soft_qp *qp, struct soft_rq_slot *s, uint64_t idx,
				 enum ibv_wc_status st, enum ibv_wc_opcode op, uint32_t len,
				 const struct ibv_send_wr *wr, bool imm)
{
	s->status = st;
	s->opcode = op;
	s->byte_len = len;
	s->imm = imm ? wr->imm_data : 0;
	s->wc_flags = imm ? IBV_WC_WITH_IMM : 0;
	s->src_qp = qp->base.qp_num;
	atomic_store_explicit(&s->done, idx + 1, memory_order_release);
}

/* Validate the receive WQE's scatter list (the peer's memory: each SGE read
 * once) against the responder's MR table and our mapping; on success out[]
 * holds the local address of each SGE and its device-memory tag (a tagged
 * list, devmem.h), *dev their OR. */
static inline enum ibv_wc_status check_recv_sges(const struct soft_qp *qp,
						 const struct soft_rq_slot *s, uint64_t len,
						 struct ibv_sge *out, int *nout, uint32_t *dev)
{
	const struct soft_mr_entry *tbl = qp->peer_mr;
	const uint32_t pd = SOFT_PEEK(qp->peer_qp->pd_id);
	uint32_t n = SOFT_PEEK(s->num_sge);
	uint64_t cap = 0;
	int k = 0;

	if (soft_unlikely(n > qp->peer_rq_max_sge))
		return IBV_WC_LOC_PROT_ERR;
	for (uint32_t i = 0; i < n && cap < len; i++) {
		const uint64_t addr = SOFT_PEEK(s->sge[i].addr);
		const uint32_t glen = SOFT_PEEK(s->sge[i].length);
		const uint32_t lkey = SOFT_PEEK(s->sge[i].lkey);
		const struct soft_mr_entry *e;
		uint64_t where;

		if (!glen)
			continue;
		e = &tbl[lkey & (SOFT_MAX_MR - 1)];
		if (soft_unlikely(
			    !lkey || atomic_load_explicit(&e->lkey, memory_order_acquire) != lkey ||
			    SOFT_PEEK(e->pd_id) != pd ||
			    !(SOFT_PEEK(e->access) & IBV_ACCESS_LOCAL_WRITE) ||
			    !mr_covers(e, addr, glen, &where) || !in_peer_map(qp, where, glen)))
			return IBV_WC_LOC_PROT_ERR;
		out[k].addr = where + (uint64_t)qp->peer_delta;
		out[k].length = glen;
		out[k].lkey = peer_tag(qp, e);
		*dev |= out[k].lkey;
		k++;
		cap += glen;
	}
	if (cap < len)
		return IBV_WC_LOC_LEN_ERR;
	*nout = k;
	return IBV_WC_SUCCESS;
}

static void sg_to_sg(const struct ibv_sge *dst, int nd, const struct ibv_sge *src, int ns,
		     uint64_t len)
{
	uint64_t off = 0;

	for (int i = 0; i < nd && len; i++) {
		uint64_t c = dst[i].length < len ? dst[i].length : len;

		ql__sge_gather((uint8_t *)(uintptr_t)dst[i].addr, src, ns, off, c);
		off += c;
		len -= c;
	}
}

#define CNT(field) atomic_fetch_add_explicit(&qp->peer_dev->counters.field, 1, memory_order_relaxed)

/* A Class C responder error on RC (the request NAK'd as a remote access
 * error or an invalid request): the responder's QP goes to ERR as well (IB
 * spec 9.9.3.1: affiliated "local access violation" / "invalid request"
 * work queue errors; Linux rxe and ConnectX do the same). We run in the
 * requester's process: mark the responder's shared state, and its owner
 * flushes it at its next call (soft_qp_sync_err). */
static void resp_to_err(struct soft_qp *qp)
{
	_Atomic uint32_t *st = &qp->peer_qp->state;
	uint32_t s = atomic_load_explicit(st, memory_order_relaxed);

	while (s == IBV_QPS_RTR || s == IBV_QPS_RTS || s == IBV_QPS_SQD || s == IBV_QPS_SQE)
		if (atomic_compare_exchange_weak_explicit(st, &s, IBV_QPS_ERR, memory_order_release,
							  memory_order_relaxed))
			break;
}

/* The outcome of one work request, as the responder logic decides it. */
struct exec_res {
	enum ibv_wc_status st;
	uint32_t byte_len;
	uint32_t ldev; /* the local SGEs' device-memory tags, OR'd (req_check) */
};

/* ---- GPU device memory (providers/common/devmem.h) ---------------------- */

/* The WR's local SGEs as a tagged list (checked by req_check; an inline
 * WR's data is the QP's own host memory). */
static void local_tagged(const struct soft_qp *qp, const struct ibv_send_wr *wr,
			 struct ibv_sge *out)
{
	for (int i = 0; i < wr->num_sge; i++) {
		out[i] = wr->sg_list[i];
		out[i].lkey =
			(wr->send_flags & IBV_SEND_INLINE) || !wr->sg_list[i].length ?
				0 :
				qp->dev->mr_priv[wr->sg_list[i].lkey & (SOFT_MAX_MR - 1)].cuda;
	}
}

/* Copies that touch device memory: the WR's local SGEs to the tagged list
 * dst (SEND), to dst with WRITE placement (WRITE), or the tagged list src
 * into the local SGEs (READ). A failed copy completes the WR with
 * IBV_WC_LOC_QP_OP_ERR (docs/gpu.md). */
enum { DEV_SEND, DEV_WRITE, DEV_READ };

static __attribute__((noinline)) int dev_copy(const struct soft_qp *qp,
					      const struct ibv_send_wr *wr, int how,
					      const struct ibv_sge *rsg, int nr, uint64_t len)
{
	struct ibv_sge l[SOFT_MAX_SGE];

	local_tagged(qp, wr, l);
	if (how == DEV_SEND)
		return ql__nic_sg_copy(rsg, nr, 0, l, wr->num_sge, 0, len);
	if (how == DEV_WRITE)
		return ql__nic_write_tagged((uint8_t *)(uintptr_t)rsg->addr, rsg->lkey, l,
					    wr->num_sge, len);
	return ql__nic_sg_copy(l, wr->num_sge, 0, rsg, nr, 0, len);
}

/* The NAKs and drops, one place each (RC: the requester gets the status and
 * the responder QP goes to ERR; UC: counted and dropped). */
static void nak_access(struct soft_qp *qp, struct exec_res *r)
{
	if (qp->type == IBV_QPT_RC) {
		CNT(rc_nak_access);
		r->st = IBV_WC_REM_ACCESS_ERR;
		resp_to_err(qp);
	} else {
		CNT(uc_drop_access);
	}
}

static void nak_inv_req(struct soft_qp *qp, struct exec_res *r)
{
	CNT(rc_nak_inv_req);
	r->st = IBV_WC_REM_INV_REQ_ERR;
	resp_to_err(qp);
}

/* The responder QP's own permission for a remote operation (its
 * qp_access_flags). Missing, the request is invalid for this QP: RC NAKs it
 * as an invalid request (not a remote access error, which is about the MR
 * and rkey), UC drops it. Returns false when refused. */
static inline bool resp_allows(struct soft_qp *qp, uint32_t need, struct exec_res *r)
{
	if (soft_likely(SOFT_PEEK(qp->peer_qp->access) & need))
		return true;
	if (qp->type == IBV_QPT_RC)
		nak_inv_req(qp, r);
	else
		CNT(uc_drop_access);
	return false;
}

/* No receive WQE to consume (CLAIM_RNR), or the peer's queue is being
 * flushed (CLAIM_BUSY): RC waits (RNR NAK / retry), UC drops. A receive
 * queue that failed validation (CLAIM_BAD) is the responder's operational
 * error. */
static int resp_no_recv(struct soft_qp *qp, int claim, struct exec_res *r)
{
	const bool rc = qp->type == IBV_QPT_RC;

	if (claim == CLAIM_BAD) {
		if (rc) {
			CNT(rc_nak_op_err);
			r->st = IBV_WC_REM_OP_ERR;
			resp_to_err(qp);
		} else {
			CNT(uc_drop_not_ready);
		}
		return EXEC_DONE;
	}
	if (!rc) {
		if (claim == CLAIM_RNR)
			CNT(uc_drop_no_recv);
		else
			CNT(uc_drop_not_ready);
		return EXEC_DONE;
	}
	if (claim == CLAIM_RNR)
		CNT(rc_nak_rnr);
	return stall(qp, claim == CLAIM_RNR, &r->st);
}

/* ---- responder, per opcode (as rxe's execute()) ------------------------ */

/* (Split for reading, as rxe splits requester and responder; execute_send
 * is forced inline, where the compiler would otherwise add a call to the
 * SEND hot path.) */

static inline __attribute__((always_inline)) int
execute_send(struct soft_qp *qp, const struct ibv_send_wr *wr, uint64_t len, struct exec_res *r)
{
	const bool rc = qp->type == IBV_QPT_RC;
	struct ibv_sge rsg[SOFT_MAX_SGE];
	struct soft_rq_slot *slot = NULL;
	enum ibv_wc_status st;
	uint64_t ridx = 0;
	uint32_t rdev = 0;
	int claim, nr = 0;

	claim = claim_recv(qp, &slot, &ridx);
	if (soft_unlikely(claim != CLAIM_OK))
		return resp_no_recv(qp, claim, r);
	st = check_recv_sges(qp, slot, len, rsg, &nr, &rdev);
	if (soft_unlikely(st != IBV_WC_SUCCESS)) {
		complete_recv(qp, slot, ridx, st, IBV_WC_RECV, 0, wr, false);
		if (st == IBV_WC_LOC_LEN_ERR) {
			if (rc)
				CNT(rc_nak_inv_req);
			r->st = rc ? IBV_WC_REM_INV_REQ_ERR : IBV_WC_SUCCESS;
		} else {
			if (rc)
				CNT(rc_nak_op_err);
			r->st = rc ? IBV_WC_REM_OP_ERR : IBV_WC_SUCCESS;
		}
		return EXEC_DONE;
	}
	atomic_thread_fence(memory_order_release);
	if (soft_likely(!(rdev | r->ldev))) {
		sg_to_sg(rsg, nr, wr->sg_list, wr->num_sge, len);
	} else if (dev_copy(qp, wr, DEV_SEND, rsg, nr, len)) {
		complete_recv(qp, slot, ridx, IBV_WC_LOC_QP_OP_ERR, IBV_WC_RECV, 0, wr, false);
		r->st = IBV_WC_LOC_QP_OP_ERR;
		return EXEC_DONE;
	}
	complete_recv(qp, slot, ridx, IBV_WC_SUCCESS, IBV_WC_RECV, (uint32_t)len, wr,
		      wr->opcode == IBV_WR_SEND_WITH_IMM);
	r->byte_len = (uint32_t)len;
	return EXEC_DONE;
}

static int execute_write(struct soft_qp *qp, const struct ibv_send_wr *wr, uint64_t len,
			 struct exec_res *r)
{
	const bool imm = wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
	struct soft_rq_slot *slot = NULL;
	uint64_t ridx = 0;
	uint8_t *p = NULL;
	uint32_t rtag = 0;
	int claim;

	if (!resp_allows(qp, IBV_ACCESS_REMOTE_WRITE, r))
		return EXEC_DONE;
	if (imm) {
		const struct soft_qp_shared *pq = qp->peer_qp;

		/* the responder needs a receive WQE before anything */
		if (atomic_load_explicit(&pq->rq_head, memory_order_relaxed) >=
			    atomic_load_explicit(&pq->rq_tail, memory_order_acquire) &&
		    (!qp->peer_mx_db || !mx_recv_wait(qp)))
			return resp_no_recv(qp, CLAIM_RNR, r);
	}
	if (len) {
		p = check_remote(qp, wr->wr.rdma.rkey, wr->wr.rdma.remote_addr, len,
				 IBV_ACCESS_REMOTE_WRITE, &rtag);
		if (soft_unlikely(!p)) {
			nak_access(qp, r);
			return EXEC_DONE;
		}
	}
	if (imm) {
		claim = claim_recv(qp, &slot, &ridx);
		if (soft_unlikely(claim != CLAIM_OK)) {
			if (claim == CLAIM_BAD)
				return resp_no_recv(qp, claim, r);
			/* lost the race for the WQE since the check above */
			if (qp->type != IBV_QPT_RC) {
				CNT(uc_drop_not_ready);
				return EXEC_DONE;
			}
			return stall(qp, claim == CLAIM_RNR, &r->st);
		}
	}
	if (len && soft_likely(!(rtag | r->ldev))) {
		write_ordered(p, wr->sg_list, wr->num_sge, len);
	} else if (len) {
		const struct ibv_sge d = { (uint64_t)(uintptr_t)p, (uint32_t)len, rtag };

		if (dev_copy(qp, wr, DEV_WRITE, &d, 1, len)) {
			if (slot)
				complete_recv(qp, slot, ridx, IBV_WC_LOC_QP_OP_ERR,
					      IBV_WC_RECV_RDMA_WITH_IMM, 0, wr, false);
			r->st = IBV_WC_LOC_QP_OP_ERR;
			return EXEC_DONE;
		}
	}
	if (slot)
		complete_recv(qp, slot, ridx, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM,
			      (uint32_t)len, wr, true);
	r->byte_len = (uint32_t)len;
	return EXEC_DONE;
}

static int execute_read(struct soft_qp *qp, const struct ibv_send_wr *wr, uint64_t len,
			struct exec_res *r)
{
	uint32_t rtag = 0;
	uint8_t *p;

	if (!resp_allows(qp, IBV_ACCESS_REMOTE_READ, r))
		return EXEC_DONE;
	if (len) {
		p = check_remote(qp, wr->wr.rdma.rkey, wr->wr.rdma.remote_addr, len,
				 IBV_ACCESS_REMOTE_READ, &rtag);
		if (soft_unlikely(!p)) {
			nak_access(qp, r);
			return EXEC_DONE;
		}
		atomic_thread_fence(memory_order_acquire);
		if (soft_likely(!(rtag | r->ldev))) {
			ql__sge_scatter(wr->sg_list, wr->num_sge, 0, p, len);
		} else {
			const struct ibv_sge s = { (uint64_t)(uintptr_t)p, (uint32_t)len, rtag };

			if (dev_copy(qp, wr, DEV_READ, &s, 1, len)) {
				r->st = IBV_WC_LOC_QP_OP_ERR;
				return EXEC_DONE;
			}
		}
	}
	r->byte_len = (uint32_t)len;
	return EXEC_DONE;
}

static int execute_atomic(struct soft_qp *qp, const struct ibv_send_wr *wr, struct exec_res *r)
{
	uint32_t rtag = 0;
	uint64_t orig;
	uint8_t *p;

	if (!resp_allows(qp, IBV_ACCESS_REMOTE_ATOMIC, r))
		return EXEC_DONE;
	if (soft_unlikely(wr->wr.atomic.remote_addr & 7)) {
		nak_inv_req(qp, r);
		return EXEC_DONE;
	}
	p = check_remote(qp, wr->wr.atomic.rkey, wr->wr.atomic.remote_addr, 8,
			 IBV_ACCESS_REMOTE_ATOMIC, &rtag);
	/* GPU device memory: the copy engine cannot make a read-modify-write
	 * atomic against the GPU's own accesses, so the target is refused as
	 * a remote access error (IB spec 9.7.5.2.8, the NAK of an rkey that
	 * does not allow the access; docs/gpu.md) */
	if (soft_unlikely(!p || rtag)) {
		nak_access(qp, r);
		return EXEC_DONE;
	}
	if (wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		orig = __atomic_fetch_add((uint64_t *)(void *)p, wr->wr.atomic.compare_add,
					  __ATOMIC_SEQ_CST);
	} else {
		orig = wr->wr.atomic.compare_add;
		__atomic_compare_exchange_n((uint64_t *)(void *)p, &orig, wr->wr.atomic.swap, false,
					    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
	}
	/* mlx5 queue mode: the old value lands big-endian, as a ConnectX
	 * returns it (the target stays in host order, the soft NIC's rule) */
	if (qp->atomic_be)
		orig = htobe64(orig);
	if (soft_likely(!r->ldev)) {
		memcpy((void *)(uintptr_t)wr->sg_list[0].addr, &orig, 8);
	} else if (ql__nic_copy((void *)(uintptr_t)wr->sg_list[0].addr, r->ldev, &orig, 0, 8)) {
		r->st = IBV_WC_LOC_QP_OP_ERR;
		return EXEC_DONE;
	}
	r->byte_len = 8;
	return EXEC_DONE;
}

/* ---- requester ------------------------------------------------------------ */

/* The local side of a WR: its SGEs and its length. */
static inline enum ibv_wc_status req_check(const struct soft_qp *qp, const struct ibv_send_wr *wr,
					   uint64_t *len, uint32_t *ldev)
{
	const enum ibv_wr_opcode op = wr->opcode;
	const bool atomic = op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD;
	enum ibv_wc_status st;
	uint64_t l = 0;

	for (int i = 0; i < wr->num_sge; i++)
		l += wr->sg_list[i].length;
	*len = l;
	if (!(wr->send_flags & IBV_SEND_INLINE)) {
		st = check_local(qp, wr->sg_list, wr->num_sge, atomic || op == IBV_WR_RDMA_READ,
				 ldev);
		if (soft_unlikely(st != IBV_WC_SUCCESS))
			return st;
	}
	if (soft_unlikely(l > SOFT_MAX_MSG || (atomic && l != 8)))
		return IBV_WC_LOC_LEN_ERR;
	return IBV_WC_SUCCESS;
}

/* Enter the peer: publish an odd epoch before reading its state (the peer
 * pairs this with membarrier() before freeing memory). */
static inline uint64_t req_enter(struct soft_qp *qp)
{
	uint64_t epoch = atomic_load_explicit(&qp->sh->op_epoch, memory_order_relaxed) + 1;

	atomic_store_explicit(&qp->sh->op_epoch, epoch, memory_order_relaxed);
	atomic_signal_fence(memory_order_seq_cst);
	return epoch;
}

static inline void req_leave(struct soft_qp *qp, uint64_t epoch)
{
	atomic_store_explicit(&qp->sh->op_epoch, epoch + 1, memory_order_release);
}

/* Whether the responder can take a request now; if not, what happens: a
 * dead peer never answers (RC: what the retries would report), a peer not
 * ready is retried (RC) or dropped (UC). Returns -1 to go on executing. */
static int req_reach(struct soft_qp *qp, struct exec_res *r)
{
	const bool rc = qp->type == IBV_QPT_RC;

	if (soft_unlikely(!soft_peer_alive(qp->peer_heap))) {
		if (rc)
			r->st = IBV_WC_RETRY_EXC_ERR;
		return EXEC_DONE;
	}
	if (soft_unlikely(!peer_ready(qp))) {
		if (!rc) {
			CNT(uc_drop_not_ready);
			return EXEC_DONE;
		}
		return stall(qp, false, &r->st);
	}
	return -1;
}

/* The completion of a WR that left the send queue. */
static inline __attribute__((always_inline)) int req_complete(struct soft_qp *qp,
							      const struct ibv_send_wr *wr,
							      uint64_t idx,
							      const struct exec_res *r)
{
	qp->stalled = false;
	if (r->st != IBV_WC_SUCCESS || qp->sq_sig_all || (wr->send_flags & IBV_SEND_SIGNALED))
		cq_push(qp, idx, wr->wr_id, r->st, ql__wc_opcode(wr->opcode), r->byte_len);
	if (soft_unlikely(r->st != IBV_WC_SUCCESS)) {
		qp->need_err |= qp->type == IBV_QPT_RC;
		return -1;
	}
	return EXEC_DONE;
}

/* ---- loss injection (test only, docs/soft-provider.md) --------------- */

static inline uint64_t splitmix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Stateless but for one counter, so QPs of one device in several threads
 * draw without a lock: message m is dropped when it is a multiple of
 * drop_nth, or when splitmix64(seed + m) < loss_p64. */
bool ql__soft_loss_drop(struct soft_device *dev)
{
	uint64_t m = atomic_fetch_add_explicit(&dev->loss_msgs, 1, memory_order_relaxed) + 1;
	bool drop = (dev->drop_nth && m % dev->drop_nth == 0) ||
		    (dev->loss_p64 && splitmix64(dev->loss_seed + m) < dev->loss_p64);

	if (drop)
		atomic_fetch_add_explicit(&dev->loss_dropped, 1, memory_order_relaxed);
	return drop;
}

/* A UC message lost on the wire: the requester completes it successfully
 * (UC has no acknowledgement) and the responder never sees it. RC is never
 * injected: its transport would retransmit, so a loss is invisible there. */
static inline bool inject_loss(struct soft_qp *qp)
{
	return soft_unlikely(qp->dev->loss_on) && qp->type == IBV_QPT_UC &&
	       ql__soft_loss_drop(qp->dev);
}

/* One work request: requester checks, then the responder's execution of
 * its opcode, then the completion. EXEC_STALL leaves it at the head of the
 * send queue; -1 means it completed in error. */
static int exec_wr(struct soft_qp *qp, struct ibv_send_wr *wr, uint64_t idx)
{
	struct exec_res r = { IBV_WC_SUCCESS, 0, 0 };
	uint64_t len, epoch;
	int ret;

	r.st = req_check(qp, wr, &len, &r.ldev);
	if (soft_unlikely(r.st != IBV_WC_SUCCESS))
		return req_complete(qp, wr, idx, &r);
	if (inject_loss(qp)) {
		r.byte_len = (uint32_t)len;
		return req_complete(qp, wr, idx, &r);
	}
	epoch = req_enter(qp);
	ret = req_reach(qp, &r);
	if (ret < 0) {
		switch (wr->opcode) {
		case IBV_WR_SEND:
		case IBV_WR_SEND_WITH_IMM:
			ret = execute_send(qp, wr, len, &r);
			break;
		case IBV_WR_RDMA_WRITE:
		case IBV_WR_RDMA_WRITE_WITH_IMM:
			ret = execute_write(qp, wr, len, &r);
			break;
		case IBV_WR_RDMA_READ:
			ret = execute_read(qp, wr, len, &r);
			break;
		case IBV_WR_ATOMIC_CMP_AND_SWP:
		case IBV_WR_ATOMIC_FETCH_AND_ADD:
			ret = execute_atomic(qp, wr, &r);
			break;
		default:
			r.st = IBV_WC_LOC_QP_OP_ERR;
			ret = EXEC_DONE;
			break;
		}
	}
	req_leave(qp, epoch);
	if (ret == EXEC_STALL)
		return EXEC_STALL;
	return req_complete(qp, wr, idx, &r);
}

/*
 * The fast path for the commonest work request: a single-SGE RDMA WRITE on
 * a connected QP whose peer is in RTS. Anything unusual (an error, a peer
 * not ready) returns EXEC_SLOW before any side effect, and exec_wr handles
 * it with the full rules. Returns EXEC_DONE when the WRITE completed.
 */
enum { EXEC_SLOW = 2 };

static inline __attribute__((always_inline)) int
exec_write1(struct soft_qp *qp, const struct ibv_send_wr *wr, uint64_t idx)
{
	const struct ibv_sge *sg = wr->sg_list;
	const struct soft_qp_shared *p = qp->peer_qp;
	const uint64_t len = sg->length;
	const struct soft_mr_entry *e;
	uint64_t epoch, addr = wr->wr.rdma.remote_addr;
	uint32_t rkey = wr->wr.rdma.rkey, dev = 0;
	uint8_t *dst;

	if (soft_unlikely(!p || !len || qp->dev->loss_on))
		return EXEC_SLOW; /* loss injection is decided once, in exec_wr */
	/* device memory on either side: exec_wr's copies through the driver */
	if (!(wr->send_flags & IBV_SEND_INLINE) &&
	    soft_unlikely(check_local(qp, sg, 1, false, &dev) != IBV_WC_SUCCESS || dev))
		return EXEC_SLOW;
	epoch = req_enter(qp);
	e = &qp->peer_mr[rkey & (SOFT_MAX_MR - 1)];
	if (soft_unlikely(
		    !soft_peer_alive(qp->peer_heap) ||
		    atomic_load_explicit(&p->qpn, memory_order_relaxed) != qp->dest_qpn ||
		    atomic_load_explicit(&p->state, memory_order_acquire) != IBV_QPS_RTS ||
		    SOFT_PEEK(p->dest_tag) != qp->my_tag || !rkey ||
		    atomic_load_explicit(&e->rkey, memory_order_acquire) != rkey ||
		    SOFT_PEEK(e->pd_id) != SOFT_PEEK(p->pd_id) ||
		    !(SOFT_PEEK(e->access) & SOFT_PEEK(p->access) & IBV_ACCESS_REMOTE_WRITE) ||
		    peer_tag(qp, e) || !mr_covers(e, addr, len, &addr) ||
		    !in_peer_map(qp, addr, len))) {
		req_leave(qp, epoch);
		return EXEC_SLOW;
	}
	dst = (uint8_t *)(uintptr_t)(addr + (uint64_t)qp->peer_delta);
	write_ordered(dst, sg, 1, len);
	req_leave(qp, epoch);
	qp->stalled = false;
	if (qp->sq_sig_all || (wr->send_flags & IBV_SEND_SIGNALED))
		cq_push(qp, idx, wr->wr_id, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, (uint32_t)len);
	return EXEC_DONE;
}

/* ---- post_send ---------------------------------------------------------- */

static void save_wqe(struct soft_qp *qp, const struct ibv_send_wr *wr, uint64_t idx)
{
	struct soft_swqe *w = &qp->sq[idx & qp->sq_mask];
	struct ibv_sge *sg = w->wr.sg_list;

	w->wr = *wr;
	w->wr.next = NULL;
	w->wr.sg_list = sg;
	w->idx = idx;
	if (wr->send_flags & IBV_SEND_INLINE) {
		ql__inline_take(qp->sq_inline +
					(size_t)(idx & qp->sq_mask) * qp->cap.max_inline_data,
				wr, sg, &w->wr.num_sge);
	} else {
		memcpy(sg, wr->sg_list, (size_t)wr->num_sge * sizeof(*sg));
	}
	if (!qp->pending_listed) {
		ql__soft_cq_list_add(&qp->send_cq->pending, &qp->send_cq->n_pending, qp);
		qp->pending_listed = true;
	}
}

void ql__soft_sq_progress(struct soft_qp *qp)
{
	while (qp->sq_exec != qp->sq_pi) {
		struct soft_swqe *w;
		int r;

		if (qp->state == IBV_QPS_ERR || qp->state == IBV_QPS_SQE) {
			ql__soft_sq_flush(qp);
			return;
		}
		if (qp->state != IBV_QPS_RTS)
			return;
		if (qp->stalled && stall_now_ns() < qp->stall_until_ns)
			return;
		w = &qp->sq[qp->sq_exec & qp->sq_mask];
		r = exec_wr(qp, &w->wr, w->idx);
		if (r == EXEC_STALL)
			return;
		qp->sq_exec++;
		if (r < 0 || qp->need_err)
			after_error(qp);
	}
	sq_unlist(qp);
}

static int post_send_slow(struct soft_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr)
{
	for (; wr; wr = wr->next) {
		uint64_t idx;
		int ret = ql__send_wr_check(qp->state, qp->type, &qp->cap,
					    qp->sq_pi - qp->sq_retired, wr);

		if (soft_unlikely(ret)) {
			*bad_wr = wr;
			return ret;
		}
		idx = qp->sq_pi++;
		if (soft_likely(qp->sq_exec == idx && qp->state == IBV_QPS_RTS)) {
			int r = exec_wr(qp, wr, idx);

			if (soft_likely(r == EXEC_DONE && !qp->need_err)) {
				qp->sq_exec++;
				continue;
			}
			if (r == EXEC_STALL) {
				save_wqe(qp, wr, idx);
				continue;
			}
			qp->sq_exec++;
			after_error(qp);
			continue;
		}
		save_wqe(qp, wr, idx);
		ql__soft_sq_progress(qp);
	}
	return 0;
}

static int soft_post_send(struct ql_qp *q, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr)
{
	struct soft_qp *qp = (struct soft_qp *)q;

	soft_qp_sync_err(qp);

	/* One RDMA WRITE on an idle send queue in RTS: the case that carries
	 * ring-buffer traffic gets the short path (validation included). */
	if (soft_likely(!wr->next && wr->opcode == IBV_WR_RDMA_WRITE && wr->num_sge == 1 &&
			qp->state == IBV_QPS_RTS && qp->sq_exec == qp->sq_pi &&
			qp->sq_pi - qp->sq_retired < qp->cap.max_send_wr &&
			qp->cap.max_send_sge >= 1 &&
			(!(wr->send_flags & IBV_SEND_INLINE) ||
			 wr->sg_list[0].length <= qp->cap.max_inline_data)) &&
	    exec_write1(qp, wr, qp->sq_pi) == EXEC_DONE) {
		qp->sq_pi++;
		qp->sq_exec++;
		if (soft_unlikely(qp->need_err))
			after_error(qp);
		return 0;
	}
	return post_send_slow(qp, wr, bad_wr);
}

/* ---- post_recv ---------------------------------------------------------- */

static int soft_post_recv(struct ql_qp *q, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr)
{
	struct soft_qp *qp = (struct soft_qp *)q;
	const uint32_t mask = qp->rq_mask, slot_size = qp->rq_slot_size;
	uint8_t *const rq = qp->rq;
	struct soft_rq_priv *const priv = qp->rq_priv;
	uint64_t t = qp->rq_pi; /* ours: the heap's rq_tail is only published */
	int ret = 0;

	soft_qp_sync_err(qp);
	for (; wr; wr = wr->next) {
		const int n = wr->num_sge;
		struct soft_rq_slot *s;
		uint64_t len;

		if (soft_unlikely(qp->state == IBV_QPS_RESET || n < 0 ||
				  (uint32_t)n > qp->cap.max_recv_sge)) {
			ret = -EINVAL;
			break;
		}
		if (soft_unlikely(t - qp->rq_ci >= qp->cap.max_recv_wr)) {
			ret = -ENOMEM;
			break;
		}
		/* The slot carries what the requester needs (the scatter
		 * list); wr_id and the bytes posted stay here. */
		s = soft_rq_slot(rq, slot_size, mask, t);
		/* Store only what differs: the slot's line was last written
		 * by the peer (the completion), and a store takes it back
		 * from the peer's core, which wants it for its next
		 * completion there. A re-post of the same buffer (or of no
		 * buffer) into the same slot then stores nothing. Whatever
		 * the peer wrote, the slot holds what was posted after. */
		if (SOFT_PEEK(s->num_sge) != (uint32_t)n)
			s->num_sge = (uint32_t)n;
		if (soft_likely(n == 1)) {
			const struct ibv_sge *g = &wr->sg_list[0];

			if (SOFT_PEEK(s->sge[0].addr) != g->addr ||
			    SOFT_PEEK(s->sge[0].length) != g->length ||
			    SOFT_PEEK(s->sge[0].lkey) != g->lkey)
				s->sge[0] = *g;
			len = wr->sg_list[0].length;
		} else {
			len = 0;
			if (n) /* a receive without SGEs (WRITE WITH IMMEDIATE) may
				  have no sg_list at all */
				memcpy(s->sge, wr->sg_list, (size_t)n * sizeof(*s->sge));
			for (int i = 0; i < n; i++)
				len += wr->sg_list[i].length;
		}
		priv[t & mask].wr_id = wr->wr_id;
		priv[t & mask].len = len;
		t++;
	}
	if (soft_unlikely(ret))
		*bad_wr = wr;
	qp->rq_pi = t;
	atomic_store_explicit(&qp->sh->rq_tail, t, memory_order_release);
	if (soft_unlikely(qp->state == IBV_QPS_ERR))
		ql__soft_rq_flush(qp, false);
	return ret;
}

/* ---- poll --------------------------------------------------------------- */

/* A receive completion is written by the peer: accept only what a
 * requester may write (a status and opcode of a receive, a SEND's length
 * within what was posted, no flag but WITH_IMM). Anything else is a
 * protocol violation by the peer: the receive completes as LOC_QP_OP_ERR
 * and the QP goes to ERR. wr_id and src_qp never come from the slot.
 * (The common cases, a successful SEND without immediate and a
 * successful WRITE WITH IMMEDIATE, are tested inline in drain_rq; this is
 * the rest.) */
static __attribute__((noinline)) bool recv_wc_slow(struct ibv_wc *w, uint32_t st, uint32_t op,
						   uint32_t len, uint32_t flags, uint64_t posted)
{
	if ((st == IBV_WC_SUCCESS || st == IBV_WC_LOC_LEN_ERR || st == IBV_WC_LOC_PROT_ERR ||
	     st == IBV_WC_WR_FLUSH_ERR) &&
	    /* a SEND fills the posted buffers; a WRITE_WITH_IMM reports the
	     * WRITE's length, which the buffers need not hold */
	    ((op == IBV_WC_RECV && len <= posted) ||
	     (op == IBV_WC_RECV_RDMA_WITH_IMM && len <= SOFT_MAX_MSG)) &&
	    !(flags & ~(uint32_t)IBV_WC_WITH_IMM)) {
		w->status = (enum ibv_wc_status)st;
		w->opcode = (enum ibv_wc_opcode)op;
		w->byte_len = len;
		w->wc_flags = flags;
		return st != IBV_WC_SUCCESS && st != IBV_WC_WR_FLUSH_ERR;
	}
	w->status = IBV_WC_LOC_QP_OP_ERR;
	w->opcode = IBV_WC_RECV;
	w->byte_len = 0;
	w->wc_flags = 0;
	return true;
}

static inline int drain_rq(struct soft_qp *qp, struct ibv_wc *wc, int n)
{
	const uint32_t mask = qp->rq_mask;
	const uint64_t pi = qp->rq_pi;
	uint64_t ci = qp->rq_ci;
	bool failed = false;
	int got = 0;

	/* Only slots we posted: a "done" word the peer wrote on any other
	 * slot means nothing. */
	while (got < n && ci != pi) {
		struct soft_rq_slot *s = soft_rq_slot(qp->rq, qp->rq_slot_size, mask, ci);
		const struct soft_rq_priv *pv = &qp->rq_priv[ci & mask];
		struct ibv_wc *w = &wc[got];
		uint32_t status, opcode, len, flags;

		if (atomic_load_explicit(&s->done, memory_order_acquire) != ci + 1)
			break;
		status = SOFT_PEEK(s->status);
		opcode = SOFT_PEEK(s->opcode);
		len = SOFT_PEEK(s->byte_len);
		flags = SOFT_PEEK(s->wc_flags);
		if (soft_likely(status == IBV_WC_SUCCESS && opcode == IBV_WC_RECV && !flags &&
				len <= pv->len)) {
			w->status = IBV_WC_SUCCESS;
			w->opcode = IBV_WC_RECV;
			w->byte_len = len;
			w->wc_flags = 0;
		} else if (soft_likely(status == IBV_WC_SUCCESS &&
				       opcode == IBV_WC_RECV_RDMA_WITH_IMM &&
				       flags == IBV_WC_WITH_IMM && len <= SOFT_MAX_MSG)) {
			/* a WRITE WITH IMMEDIATE (the hsb transport's every
			 * frame): what recv_wc_slow accepts, without the call */
			w->status = IBV_WC_SUCCESS;
			w->opcode = IBV_WC_RECV_RDMA_WITH_IMM;
			w->byte_len = len;
			w->wc_flags = IBV_WC_WITH_IMM;
		} else {
			failed |= recv_wc_slow(w, status, opcode, len, flags, pv->len);
		}
		w->wr_id = pv->wr_id;
		w->vendor_err = 0;
		w->imm_data = SOFT_PEEK(s->imm);
		w->qp_num = qp->base.qp_num;
		w->src_qp = qp->dest_qpn;
		w->pkey_index = 0;
		w->slid = 0;
		w->sl = 0;
		w->dlid_path_bits = 0;
		ci++;
		got++;
	}
	qp->rq_ci = ci;
	/* A responder error (length, protection) takes the receiver down. */
	if (soft_unlikely(failed) && qp->state != IBV_QPS_ERR)
		ql__soft_qp_enter_err(qp);
	return got;
}

static int soft_poll(struct ql_cq *c, int n, struct ibv_wc *wc)
{
	struct soft_cq *cq = (struct soft_cq *)c;
	int got = 0;

	if (soft_unlikely(cq->n_pending)) {
		for (uint32_t i = cq->n_pending; i-- > 0;)
			ql__soft_sq_progress(cq->pending[i]);
	}
	while (got < n && cq->head != cq->tail) {
		struct soft_cqe *e = &cq->ring[cq->head & cq->mask];

		wc[got++] = e->wc;
		e->qp->sq_retired = e->sq_idx + 1;
		cq->head++;
	}
	for (uint32_t i = 0; i < cq->n_rq_qps && got < n; i++)
		got += drain_rq(cq->rq_qps[i], wc + got, n - got);
	if (got)
		return got;
	if (soft_unlikely(cq->err))
		return cq->err;
	if (cq->n_rq_qps) {
		/* Idle: check one peer's liveness (one load, no syscall). */
		struct soft_qp *qp;

		if (++cq->live_rr >= cq->n_rq_qps)
			cq->live_rr = 0;
		qp = cq->rq_qps[cq->live_rr];
		if (soft_unlikely(qp->peer_heap && !soft_peer_alive(qp->peer_heap) &&
				  qp->state != IBV_QPS_ERR && qp->state != IBV_QPS_RESET))
			ql__soft_qp_enter_err(qp);
		else
			soft_qp_sync_err(qp); /* put in ERR by its peer? */
	}
	return 0;
}

const struct ql__qp_ops ql__soft_qp_ops = {
	.post_send = soft_post_send,
	.post_recv = soft_post_recv,
};

const struct ql__cq_ops ql__soft_cq_ops = {
	.poll = soft_poll,
};
