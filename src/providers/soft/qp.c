/* SPDX-License-Identifier: MIT */
/*
 * soft provider: queue pair lifecycle, the IB state machine, connecting to
 * a peer, and flushing. Setup path, except the flush helpers, which the
 * engine (exec.c) also calls when a QP enters an error state.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "providers/common/nic.h"
#include "providers/soft/soft.h"
#include "qlink/error.h"
#include "qlink/log.h"
#include "verbs/qp_fsm.h"

#define M(x) IBV_QP_##x

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void ql__soft_cq_list_add(struct soft_qp ***list, uint32_t *n, struct soft_qp *qp)
{
	(*list)[*n] = qp;
	atomic_thread_fence(memory_order_release);
	(*n)++;
}

void ql__soft_cq_list_del(struct soft_qp **list, uint32_t *n, struct soft_qp *qp)
{
	for (uint32_t i = 0; i < *n; i++) {
		if (list[i] == qp) {
			list[i] = list[*n - 1];
			(*n)--;
			return;
		}
	}
}

void ql__soft_qp_set_state(struct soft_qp *qp, enum ibv_qp_state s)
{
	qp->state = s;
	atomic_store_explicit(&qp->sh->state, (uint32_t)s, memory_order_release);
}

/* Wait until the peer requester has left any operation it started before
 * our last store (call after ql__soft_quiesce()). Bounded: a dead or stuck peer
 * does not hold us forever. */
static void wait_peer_epoch(struct soft_qp *qp)
{
	uint64_t e, deadline;

	if (!qp->peer_qp)
		return;
	e = atomic_load(&qp->peer_qp->op_epoch);
	if (!(e & 1))
		return;
	deadline = now_ns() + 1000000000ull;
	while (atomic_load(&qp->peer_qp->op_epoch) == e && soft_peer_alive(qp->peer_heap)) {
		if (now_ns() > deadline) {
			ql_log_warn("soft", "QP 0x%x: peer stayed inside an operation for 1 s",
				    qp->base.qp_num);
			return;
		}
		sched_yield();
	}
}

void ql__soft_dev_wait_peers(struct soft_device *dev)
{
	bool any = false;

	pthread_mutex_lock(&dev->lock);
	for (uint32_t i = 0; i < SOFT_MAX_QP && !any; i++)
		any = dev->qps[i] && dev->qps[i]->peer_qp;
	if (any) {
		ql__soft_quiesce();
		for (uint32_t i = 0; i < SOFT_MAX_QP; i++)
			if (dev->qps[i])
				wait_peer_epoch(dev->qps[i]);
	}
	pthread_mutex_unlock(&dev->lock);
}

static void release_peer(struct soft_qp *qp)
{
	if (!qp->peer_heap)
		return;
	ql__soft_quiesce();
	wait_peer_epoch(qp);
	ql__soft_peer_heap_put(qp->peer_heap);
	qp->peer_heap = NULL;
	qp->peer_dev = NULL;
	qp->peer_qp = NULL;
	qp->peer_mr = NULL;
	qp->peer_delta = 0;
	qp->peer_lo = 0;
	qp->peer_span = 0;
	qp->peer_self = false;
	qp->peer_rq = NULL;
	qp->peer_mx_db = NULL;
}

/*
 * Take (and check) the geometry of the peer QP's receive queue, once: the
 * requester never re-reads it from the peer's memory, so a peer that
 * rewrites its rq_off, rq_mask or rq_slot_size later changes nothing here.
 * The queue must be one the owner could have made (power-of-two slots up to
 * SOFT_MAX_QP_WR, slots sized for max_recv_sge) and lie inside the mapping;
 * otherwise it is unusable and requests needing it complete as a remote
 * operational error.
 */
void ql__soft_qp_latch_peer_rq(struct soft_qp *qp)
{
	const struct soft_qp_shared *p = qp->peer_qp;
	uint64_t off, span, end;
	uint32_t mask, size, nsge;

	qp->peer_rq = NULL;
	qp->peer_rq_mask = 0;
	qp->peer_rq_slot_size = 0;
	qp->peer_rq_max_sge = 0;
	qp->peer_mx_db = NULL;
	if (!p || SOFT_PEEK(p->qpn) != qp->dest_qpn)
		return;
	/* an mlx5-mode peer's receive doorbell record: only a hint to wait
	 * for a receive its engine is about to take, but read from our map */
	off = SOFT_PEEK(p->mx_rq_db_off);
	if (off && off % 4 == 0 && off <= qp->peer_heap->size - 4)
		qp->peer_mx_db = (const uint32_t *)(const void *)(qp->peer_heap->map + off);
	off = SOFT_PEEK(p->rq_off);
	mask = SOFT_PEEK(p->rq_mask);
	size = SOFT_PEEK(p->rq_slot_size);
	nsge = SOFT_PEEK(p->max_recv_sge);
	if (mask >= SOFT_MAX_QP_WR || (mask & (mask + 1)) || nsge > SOFT_MAX_SGE ||
	    size != soft_rq_slot_bytes(nsge ? nsge : 1) || off % SOFT_CACHELINE)
		goto bad;
	span = (uint64_t)(mask + 1) * size; /* both bounded: no overflow */
	if (__builtin_add_overflow(off, span, &end) || end > qp->peer_heap->size)
		goto bad;
	qp->peer_rq = qp->peer_heap->map + off;
	qp->peer_rq_mask = mask;
	qp->peer_rq_slot_size = size;
	qp->peer_rq_max_sge = nsge;
	return;
bad:
	ql_log_debug("soft", "QP 0x%x: the peer's receive queue geometry is invalid",
		     qp->base.qp_num);
}

static int resolve_peer(struct soft_qp *qp, const struct ibv_ah_attr *ah, uint32_t dest_qpn)
{
	const uint8_t *g = ah->grh.dgid.raw;
	struct soft_peer_heap *ph;
	struct soft_dev_shared *pdev;
	const struct soft_mr_entry *pmr = NULL;
	uint32_t pid, fd, id;
	int ret;

	if (!ah->is_global)
		return ql_error_set(-EINVAL, "soft: the address vector must carry the peer GID "
					     "(ah_attr.is_global = 1)");
	if (ah->port_num && ah->port_num != 1)
		return ql_error_set(-EINVAL, "soft: port_num %u does not exist (one port, 1)",
				    ah->port_num);
	if (g[0] != SOFT_GID_PREFIX0 || g[1] != SOFT_GID_PREFIX1 || g[3] != SOFT_GID_VERSION)
		return ql_error_set(-EINVAL, "soft: the GID is not a soft device address");
	if (g[2] != qp->dev->wire)
		return ql_error_set(-EINVAL, "soft: the peer is on the %s wire, this device on %s",
				    g[2] == SOFT_WIRE_LOOP ? "loop" : "shm",
				    qp->dev->wire == SOFT_WIRE_LOOP ? "loop" : "shm");
	memcpy(&pid, g + 4, 4);
	memcpy(&fd, g + 8, 4);
	memcpy(&id, g + 12, 4);
	pid = ntohl(pid);
	fd = ntohl(fd);
	id = ntohl(id);
	if (qp->dev->wire == SOFT_WIRE_LOOP && pid != (uint32_t)getpid())
		return ql_error_set(-EINVAL,
				    "soft://loop: the peer (pid %u) must be in this process; "
				    "use soft+shm:// between processes",
				    pid);
	ret = ql__soft_peer_heap_get((pid_t)pid, (int)fd, &ph);
	if (ret)
		return ret;
	pdev = ql__soft_peer_find_dev(ph, id, &pmr);
	if (!pdev) {
		ql__soft_peer_heap_put(ph);
		/* the same text as every other refusal (heap.c): no oracle */
		ql_log_debug("soft", "peer pid %u: no open device with that id", pid);
		return ql_error_set(-EHOSTUNREACH,
				    "soft+shm: the peer named by the GID cannot be reached (it "
				    "must be a live qlink process of the same user)");
	}
	release_peer(qp);
	qp->peer_heap = ph;
	qp->peer_dev = pdev;
	qp->peer_qp = &pdev->qp[dest_qpn & (SOFT_MAX_QP - 1)];
	qp->peer_mr = pmr;
	qp->peer_delta = ph->delta;
	qp->peer_lo = ph->lo;
	qp->peer_span = ph->span;
	qp->peer_self = ph->self;
	qp->dest_qpn = dest_qpn;
	ql__soft_qp_latch_peer_rq(qp);
	memcpy(qp->peer_gid, g, 16);
	qp->sh->dest_qpn = dest_qpn;
	qp->sh->dest_tag = soft_conn_tag(id, pid, dest_qpn);
	memcpy(qp->sh->dest_gid, g, 16);
	return 0;
}

static void rq_complete_flush(struct soft_qp *qp, uint64_t i)
{
	struct soft_rq_slot *s = soft_rq_slot(qp->rq, qp->rq_slot_size, qp->rq_mask, i);

	s->status = IBV_WC_WR_FLUSH_ERR;
	s->opcode = IBV_WC_RECV;
	s->byte_len = 0;
	s->wc_flags = 0;
	s->src_qp = qp->dest_qpn;
	atomic_store_explicit(&s->done, i + 1, memory_order_release);
}

void ql__soft_rq_flush(struct soft_qp *qp, bool peer_dead)
{
	struct soft_qp_shared *sh = qp->sh;
	const uint64_t t = qp->rq_pi;
	uint64_t h;

	/* The head is the peer's to advance, so it is input: only a value in
	 * [rq_ci, our own tail] means anything. */
	for (int tries = 0;; tries++) {
		uint64_t cur = atomic_load(&sh->rq_head);

		h = cur < qp->rq_ci || cur > t ? qp->rq_ci : cur;
		if (atomic_compare_exchange_strong(&sh->rq_head, &cur, t))
			break;
		if (tries == 64) {
			/* a peer that keeps moving the head cannot keep us
			 * here: take every slot not yet reported */
			atomic_store(&sh->rq_head, t);
			h = qp->rq_ci;
			break;
		}
	}
	for (uint64_t i = h; i < t; i++)
		rq_complete_flush(qp, i);
	if (peer_dead) {
		/* Slots the dead peer claimed but never completed. */
		for (uint64_t i = qp->rq_ci; i < h; i++) {
			struct soft_rq_slot *s =
				soft_rq_slot(qp->rq, qp->rq_slot_size, qp->rq_mask, i);

			if (atomic_load_explicit(&s->done, memory_order_acquire) != i + 1)
				rq_complete_flush(qp, i);
		}
	}
}

static void reset_queues(struct soft_qp *qp)
{
	struct soft_qp_shared *sh = qp->sh;

	if (qp->pending_listed) {
		ql__soft_cq_list_del(qp->send_cq->pending, &qp->send_cq->n_pending, qp);
		qp->pending_listed = false;
	}
	qp->sq_pi = qp->sq_exec = qp->sq_retired = 0;
	qp->stalled = false;
	qp->need_err = false;
	memset(qp->rq, 0, (size_t)qp->rq_slots * qp->rq_slot_size);
	atomic_store(&sh->rq_head, 0);
	atomic_store(&sh->rq_tail, 0);
	qp->rq_ci = 0;
	qp->rq_pi = 0;
}

void ql__soft_qp_enter_err(struct soft_qp *qp)
{
	ql__soft_qp_set_state(qp, IBV_QPS_ERR);
	qp->need_err = false;
	ql__soft_sq_flush(qp);
	ql__soft_rq_flush(qp, qp->peer_heap && !soft_peer_alive(qp->peer_heap));
	qp->need_err = false;
}

bool ql__soft_mr_referenced(struct soft_device *dev, uint32_t lkey)
{
	for (uint32_t q = 0; q < SOFT_MAX_QP; q++) {
		struct soft_qp *qp = dev->qps[q];

		if (!qp)
			continue;
		for (uint64_t i = qp->rq_ci; i < qp->rq_pi; i++) {
			struct soft_rq_slot *s =
				soft_rq_slot(qp->rq, qp->rq_slot_size, qp->rq_mask, i);
			uint32_t n = SOFT_PEEK(s->num_sge);

			if (atomic_load(&s->done) == i + 1)
				continue;
			/* the slot is peer-writable: at most what it can hold */
			if (n > qp->cap.max_recv_sge)
				n = qp->cap.max_recv_sge;
			if (ql__nic_sge_names_lkey(s->sge, n, lkey))
				return true;
		}
		for (uint64_t i = qp->sq_exec; i < qp->sq_pi; i++)
			if (ql__nic_swr_names_lkey(&qp->sq[i & qp->sq_mask].wr, lkey))
				return true;
	}
	return false;
}

int ql__soft_qp_create(struct ql_pd *p, struct ql_qp_init_attr *ia, struct ql_qp **out)
{
	struct ql__nic_pd *pd = (struct ql__nic_pd *)p;
	struct soft_device *dev = (struct soft_device *)p->dev;
	struct soft_cq *scq = (struct soft_cq *)ia->send_cq, *rcq = (struct soft_cq *)ia->recv_cq;
	struct ibv_qp_cap *cap = &ia->cap;
	struct soft_heap *heap;
	struct soft_qp_shared *sh;
	struct soft_qp *qp;
	uint32_t idx, sq_size, slot_size, nsge, mx_sq = 0, mx_rq = 0;
	const bool mlx5 = ia->flags & QL_QP_INIT_MLX5;
	int ret;

	ret = ql__nic_qp_create_check(ia, scq && rcq && scq->dev == dev && rcq->dev == dev,
				      &ql__soft_limits, "soft");
	if (ret)
		return ret;
	if (mlx5 != !!scq->mx || mlx5 != !!rcq->mx)
		return ql_error_set(-EINVAL, "ql_qp_create: an mlx5-mode QP needs mlx5-mode CQs, "
					     "and only it");
	if (mlx5) {
		/* the soft queues behind the mlx5 rings (mlx5_engine.c) */
		ret = ql__soft_mlx5_qp_caps(cap, &mx_sq, &mx_rq);
		if (ret)
			return ret;
	}
	ret = ql__soft_heap_get(&heap);
	if (ret)
		return ret;

	qp = calloc(1, sizeof(*qp));
	if (!qp)
		return -ENOMEM;
	sq_size = ql__nic_pow2_at_least(cap->max_send_wr);
	nsge = cap->max_send_sge ? cap->max_send_sge : 1;
	qp->sq = calloc(sq_size, sizeof(*qp->sq));
	qp->sq_sge = calloc((size_t)sq_size * nsge, sizeof(*qp->sq_sge));
	if (cap->max_inline_data)
		qp->sq_inline = calloc(sq_size, cap->max_inline_data);
	if (!qp->sq || !qp->sq_sge || (cap->max_inline_data && !qp->sq_inline)) {
		ret = -ENOMEM;
		goto err_sq;
	}
	for (uint32_t i = 0; i < sq_size; i++)
		qp->sq[i].wr.sg_list = &qp->sq_sge[(size_t)i * nsge];
	qp->sq_mask = sq_size - 1;

	qp->rq_slots = ql__nic_pow2_at_least(cap->max_recv_wr);
	qp->rq_mask = qp->rq_slots - 1;
	nsge = cap->max_recv_sge ? cap->max_recv_sge : 1;
	slot_size = soft_rq_slot_bytes(nsge);
	qp->rq_slot_size = slot_size;
	qp->rq_priv = calloc(qp->rq_slots, sizeof(*qp->rq_priv));
	if (!qp->rq_priv) {
		ret = -ENOMEM;
		goto err_sq;
	}
	qp->rq = ql__soft_heap_alloc((size_t)qp->rq_slots * slot_size, SOFT_CACHELINE);
	if (!qp->rq) {
		ret = ql_error_set(-ENOMEM, "soft: shared heap exhausted (QLINK_SOFT_HEAP_SIZE)");
		goto err_sq;
	}

	pthread_mutex_lock(&dev->lock);
	for (idx = 2; idx < SOFT_MAX_QP && dev->qps[idx]; idx++)
		;
	if (idx == SOFT_MAX_QP) {
		pthread_mutex_unlock(&dev->lock);
		ret = ql_error_set(-ENOMEM, "soft: all %u QPs of the device in use",
				   SOFT_MAX_QP - 2);
		goto err_rq;
	}
	qp->idx = idx;
	qp->base.qp_num = (((++dev->qp_gen[idx]) & 0x3fff) << SOFT_QP_IDX_BITS) | idx;
	sh = &dev->sh->qp[idx];
	qp->sh = sh;
	sh->type = ia->qp_type;
	sh->pd_id = pd->id;
	sh->dest_qpn = 0;
	sh->dest_tag = 0;
	sh->access = 0;
	sh->min_rnr_timer = 0;
	sh->rq_mask = qp->rq_mask;
	sh->rq_slot_size = slot_size;
	sh->max_recv_sge = cap->max_recv_sge;
	sh->rq_off = (uint64_t)((uint8_t *)qp->rq - heap->base);
	sh->mx_rq_db_off = 0;
	memset(sh->dest_gid, 0, sizeof(sh->dest_gid));
	atomic_store(&sh->rq_head, 0);
	atomic_store(&sh->rq_tail, 0);
	atomic_store(&sh->state, IBV_QPS_RESET);
	atomic_store_explicit(&sh->qpn, qp->base.qp_num, memory_order_release);

	ql__nic_qp_base_init(&qp->base, &ql__soft_qp_ops, p, ia->qp_type);
	qp->dev = dev;
	qp->send_cq = scq;
	qp->recv_cq = rcq;
	qp->pd_id = pd->id;
	qp->type = ia->qp_type;
	qp->sq_sig_all = ia->sq_sig_all;
	qp->qp_context = ia->qp_context;
	qp->cap = *cap;
	qp->state = IBV_QPS_RESET;
	memcpy(qp->my_gid, dev->gid.raw, 16);
	qp->my_tag = soft_conn_tag(dev->sh->id, (uint32_t)heap->pid, qp->base.qp_num);
	dev->qps[idx] = qp;
	pd->nqp++;
	scq->nrefs++;
	rcq->nrefs++;
	ql__soft_cq_list_add(&rcq->rq_qps, &rcq->n_rq_qps, qp);
	pthread_mutex_unlock(&dev->lock);
	if (mlx5) {
		ret = ql__soft_mlx5_qp_attach(qp, mx_sq, mx_rq,
					      !(ia->flags & QL_QP_INIT_MLX5_NO_BF));
		if (ret) {
			ql__soft_qp_destroy(&qp->base);
			return ret;
		}
	}
	*out = &qp->base;
	return 0;
err_rq:
	ql__soft_heap_free(qp->rq);
err_sq:
	free(qp->rq_priv);
	free(qp->sq);
	free(qp->sq_sge);
	free(qp->sq_inline);
	free(qp);
	return ret;
}

/* Drop completions of a QP that is going away from its send CQ. */
static void cq_clean(struct soft_cq *cq, struct soft_qp *qp)
{
	uint64_t w = cq->head;

	for (uint64_t r = cq->head; r < cq->tail; r++) {
		struct soft_cqe *e = &cq->ring[r & cq->mask];

		if (e->qp == qp)
			continue;
		if (w != r)
			cq->ring[w & cq->mask] = *e;
		w++;
	}
	cq->tail = w;
}

int ql__soft_qp_destroy(struct ql_qp *q)
{
	struct soft_qp *qp = (struct soft_qp *)q;
	struct soft_device *dev = qp->dev;

	/* first out of the engine's hands (its thread stops with the last) */
	ql__soft_mlx5_qp_detach(qp);
	pthread_mutex_lock(&dev->lock);
	atomic_store(&qp->sh->qpn, 0);
	ql__soft_qp_set_state(qp, IBV_QPS_RESET);
	pthread_mutex_unlock(&dev->lock);
	release_peer(qp);
	/* A peer connected to us may still be inside an operation on our
	 * receive queue even if we never connected back: quiesce regardless. */
	ql__soft_quiesce();

	pthread_mutex_lock(&dev->lock);
	if (qp->pending_listed)
		ql__soft_cq_list_del(qp->send_cq->pending, &qp->send_cq->n_pending, qp);
	ql__soft_cq_list_del(qp->recv_cq->rq_qps, &qp->recv_cq->n_rq_qps, qp);
	cq_clean(qp->send_cq, qp);
	qp->send_cq->nrefs--;
	qp->recv_cq->nrefs--;
	((struct ql__nic_pd *)q->pd)->nqp--;
	dev->qps[qp->idx] = NULL;
	pthread_mutex_unlock(&dev->lock);
	ql__soft_heap_free(qp->rq);
	free(qp->rq_priv);
	free(qp->sq);
	free(qp->sq_sge);
	free(qp->sq_inline);
	free(qp);
	return 0;
}

int ql__soft_qp_modify(struct ql_qp *q, struct ibv_qp_attr *a, int mask)
{
	struct soft_qp *qp = (struct soft_qp *)q;
	struct soft_device *dev = qp->dev;
	const struct ql_qp_fsm_limits lim = { .max_rd_atomic = SOFT_MAX_RD_ATOMIC };
	enum ibv_qp_state cur, next;
	int ret;

	/* an mlx5-mode QP is the engine's to drive: stop it meanwhile */
	if (qp->mx)
		ql__soft_engine_park(dev);
	pthread_mutex_lock(&dev->lock);
	soft_qp_sync_err(qp); /* put in ERR by its peer? then that is the state */
	cur = qp->state;
	ret = ql_qp_fsm_check(qp->type, cur, a, mask, &lim, &next);
	if (ret)
		goto out;
	if (mask & M(AV)) {
		ret = resolve_peer(qp, &a->ah_attr,
				   (mask & M(DEST_QPN)) ? a->dest_qp_num : qp->dest_qpn);
		if (ret)
			goto out;
		qp->attr.ah_attr = a->ah_attr;
	}
	if (mask & M(DEST_QPN)) {
		qp->dest_qpn = a->dest_qp_num;
		qp->attr.dest_qp_num = a->dest_qp_num;
		qp->sh->dest_qpn = a->dest_qp_num;
		qp->sh->dest_tag = (qp->sh->dest_tag & ~0xffffffull) | (a->dest_qp_num & 0xffffff);
		if (qp->peer_dev) {
			qp->peer_qp = &qp->peer_dev->qp[a->dest_qp_num & (SOFT_MAX_QP - 1)];
			ql__soft_qp_latch_peer_rq(qp);
		}
	}
	if (mask & M(ACCESS_FLAGS)) {
		qp->attr.qp_access_flags = a->qp_access_flags;
		qp->sh->access = a->qp_access_flags;
	}
	if (mask & M(MIN_RNR_TIMER)) {
		qp->attr.min_rnr_timer = a->min_rnr_timer;
		qp->sh->min_rnr_timer = a->min_rnr_timer;
	}
	ql__nic_qp_attr_keep(&qp->attr, a, mask);

	if (next == cur) {
		ret = 0;
		goto out;
	}
	switch (next) {
	case IBV_QPS_RESET:
		ql__soft_qp_set_state(qp, IBV_QPS_RESET);
		pthread_mutex_unlock(&dev->lock);
		release_peer(qp);
		ql__soft_quiesce();
		pthread_mutex_lock(&dev->lock);
		reset_queues(qp);
		if (qp->mx) {
			/* as rdma-core's mlx5 does on RESET: nothing of the
			 * old queues is reported after (CQEs already written
			 * to the ring stay the consumer's) */
			cq_clean(qp->send_cq, qp);
			ql__soft_mlx5_qp_reset(qp);
		}
		memset(&qp->attr, 0, sizeof(qp->attr));
		qp->dest_qpn = 0;
		qp->sh->dest_qpn = 0;
		qp->sh->dest_tag = 0;
		qp->sh->access = 0;
		memset(qp->sh->dest_gid, 0, sizeof(qp->sh->dest_gid));
		break;
	case IBV_QPS_ERR:
		ql__soft_qp_enter_err(qp);
		break;
	case IBV_QPS_SQE:
		ql__soft_qp_set_state(qp, next);
		ql__soft_sq_flush(qp);
		break;
	case IBV_QPS_RTS:
		ql__soft_qp_set_state(qp, next);
		qp->stalled = false;
		ql__soft_sq_progress(qp);
		break;
	default:
		ql__soft_qp_set_state(qp, next);
		break;
	}
	ret = 0;
out:
	pthread_mutex_unlock(&dev->lock);
	if (qp->mx)
		ql__soft_engine_unpark(dev);
	return ret;
}

int ql__soft_qp_query(struct ql_qp *q, struct ibv_qp_attr *a, int mask, struct ql_qp_init_attr *ia)
{
	struct soft_qp *qp = (struct soft_qp *)q;

	(void)mask;
	if (!qp->mx) /* (an mlx5-mode QP's engine does this itself) */
		soft_qp_sync_err(qp);
	ql__nic_qp_query(&(struct ql__nic_qp_view){ .attr = &qp->attr,
						    .state = qp->state,
						    .cap = qp->cap,
						    .send_cq = &qp->send_cq->base,
						    .recv_cq = &qp->recv_cq->base,
						    .type = qp->type,
						    .sq_sig_all = qp->sq_sig_all,
						    .qp_context = qp->qp_context },
			 a, ia);
	return 0;
}
