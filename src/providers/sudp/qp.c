/* SPDX-License-Identifier: MIT */
/*
 * soft+udp provider: queue pairs (create, the state machine, connecting)
 * and the application's side of the hot path: post_send, post_recv and
 * poll, which only fill and drain rings shared with the NIC thread (nic.c).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "providers/common/nic.h"
#include "providers/common/soft_nic.h"
#include "providers/sudp/nic_int.h"
#include "qlink/error.h"
#include "verbs/qp_fsm.h"

#define M(x) IBV_QP_##x

static void qp_free(struct sudp_qp *qp)
{
	free(qp->sq);
	free(qp->sq_sge);
	free(qp->sq_inline);
	free(qp->rq_wrid);
	free(qp->rq_len);
	free(qp->rq_num);
	free(qp->rq_sge);
	if (qp->fault) {
		ql__roce_fault_fini(qp->fault);
		free(qp->fault);
	}
	free(qp);
}

int ql__sudp_qp_create(struct ql_pd *p, struct ql_qp_init_attr *ia, struct ql_qp **out)
{
	struct ql__nic_pd *pd = (struct ql__nic_pd *)p;
	struct sudp_device *dev = (struct sudp_device *)p->dev;
	struct sudp_cq *scq = (struct sudp_cq *)ia->send_cq, *rcq = (struct sudp_cq *)ia->recv_cq;
	struct ibv_qp_cap *cap = &ia->cap;
	struct sudp_qp *qp;
	uint32_t idx, sq_size, rq_size, rnd[3];
	int ret;

	ret = ql__nic_qp_create_check(ia, scq && rcq && scq->dev == dev && rcq->dev == dev,
				      &ql__sudp_limits, "soft+udp");
	if (ret)
		return ret;
	qp = calloc(1, sizeof(*qp));
	if (!qp)
		return -ENOMEM;
	sq_size = ql__nic_pow2_at_least(cap->max_send_wr);
	qp->sq_nsge = cap->max_send_sge ? cap->max_send_sge : 1;
	qp->sq = calloc(sq_size, sizeof(*qp->sq));
	qp->sq_sge = calloc((size_t)sq_size * qp->sq_nsge, sizeof(*qp->sq_sge));
	if (cap->max_inline_data)
		qp->sq_inline = calloc(sq_size, cap->max_inline_data);
	rq_size = ql__nic_pow2_at_least(cap->max_recv_wr);
	qp->rq_nsge = cap->max_recv_sge ? cap->max_recv_sge : 1;
	qp->rq_wrid = calloc(rq_size, sizeof(*qp->rq_wrid));
	qp->rq_len = calloc(rq_size, sizeof(*qp->rq_len));
	qp->rq_num = calloc(rq_size, sizeof(*qp->rq_num));
	qp->rq_sge = calloc((size_t)rq_size * qp->rq_nsge, sizeof(*qp->rq_sge));
	if (!qp->sq || !qp->sq_sge || (cap->max_inline_data && !qp->sq_inline) || !qp->rq_wrid ||
	    !qp->rq_len || !qp->rq_num || !qp->rq_sge) {
		qp_free(qp);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < sq_size; i++)
		qp->sq[i].wr.sg_list = &qp->sq_sge[(size_t)i * qp->sq_nsge];
	qp->sq_mask = sq_size - 1;
	qp->rq_mask = rq_size - 1;

	ql__nic_qp_base_init(&qp->base, &ql__sudp_qp_ops, p, ia->qp_type);
	qp->dev = dev;
	qp->scq = scq;
	qp->rcq = rcq;
	qp->pd_id = pd->id;
	qp->type = ia->qp_type;
	qp->sq_sig_all = ia->sq_sig_all;
	qp->qp_context = ia->qp_context;
	qp->cap = *cap;
	atomic_init(&qp->state, IBV_QPS_RESET);

	/* QP number and initial PSN unpredictable to a third party (a forged
	 * packet must guess both, docs/soft-udp.md 11): a free slot from a
	 * random start, its generation moved on by a random step, the
	 * initial send PSN random (24 bits each, read at setup only) */
	ql__nic_random(rnd, sizeof(rnd));
	pthread_mutex_lock(&dev->setup);
	idx = SUDP_MAX_QP;
	for (uint32_t i = 0; i < SUDP_MAX_QP - 2; i++) {
		uint32_t k = 2 + (rnd[0] + i) % (SUDP_MAX_QP - 2);

		if (!dev->qps[k]) {
			idx = k;
			break;
		}
	}
	if (idx == SUDP_MAX_QP) {
		pthread_mutex_unlock(&dev->setup);
		qp_free(qp);
		return ql_error_set(-ENOMEM, "soft+udp: all %u QPs of the device in use",
				    SUDP_MAX_QP - 2);
	}
	qp->idx = idx;
	do {
		/* a step of 1 .. 2^13: a new QP in a slot never repeats the
		 * number of the one before it */
		dev->qp_gen[idx] += 1 + (rnd[1] & 0x1fff);
		rnd[1] = rnd[1] * 1664525u + 1013904223u;
		qp->base.qp_num = ((dev->qp_gen[idx] & 0x3fff) << SUDP_QP_IDX_BITS) | idx;
	} while (qp->base.qp_num == ROCE_QPN_MASK); /* 0xffffff: IB's multicast QPN */
	qp->base.init_psn = rnd[2] & ROCE_PSN_MASK;
	pd->nqp++;
	scq->nrefs++;
	rcq->nrefs++;
	sudp_dev_lock(dev);
	dev->qps[idx] = qp;
	dev->live[dev->nlive++] = qp;
	sudp_dev_unlock(dev);
	pthread_mutex_unlock(&dev->setup);
	*out = &qp->base;
	return 0;
}

/* Drop the completions of a QP going away (the NIC is locked out, and the
 * caller is the CQ's only consumer by the threading rules). */
static void cq_clean(struct sudp_cq *cq, struct sudp_qp *qp)
{
	uint64_t h = atomic_load(&cq->head), t = atomic_load(&cq->tail), w = h;

	for (uint64_t r = h; r < t; r++) {
		struct sudp_cqe *e = &cq->ring[r & cq->mask];

		if (e->qp == qp) {
			if (e->send)
				atomic_fetch_sub(&cq->send_out, 1);
			continue;
		}
		if (w != r)
			cq->ring[w & cq->mask] = *e;
		w++;
	}
	atomic_store(&cq->tail, w);
}

int ql__sudp_qp_destroy(struct ql_qp *q)
{
	struct sudp_qp *qp = (struct sudp_qp *)q;
	struct sudp_device *dev = qp->dev;

	pthread_mutex_lock(&dev->setup);
	sudp_dev_lock(dev);
	/* caller mode: the ACK a round held for the next one (nic.c) goes
	 * now, there is no next round for this QP */
	if (qp->ack_pending && atomic_load(&qp->state) != IBV_QPS_ERR) {
		ql__sudp_send_ack_now(qp);
		ql__sudp_tx_flush(dev);
	}
	dev->qps[qp->idx] = NULL;
	for (uint32_t i = 0; i < dev->nlive; i++) {
		if (dev->live[i] == qp) {
			dev->live[i] = dev->live[--dev->nlive];
			break;
		}
	}
	if (qp->fault)
		atomic_fetch_add(&dev->cnt.v[SC_NCOUNTERS], qp->fault->count[ROCE_FAULT_DROP]);
	cq_clean(qp->scq, qp);
	if (qp->rcq != qp->scq)
		cq_clean(qp->rcq, qp);
	sudp_dev_unlock(dev);
	qp->scq->nrefs--;
	qp->rcq->nrefs--;
	((struct ql__nic_pd *)q->pd)->nqp--;
	pthread_mutex_unlock(&dev->setup);
	qp_free(qp);
	return 0;
}

static int resolve_peer(struct sudp_qp *qp, const struct ibv_ah_attr *ah)
{
	static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	struct sudp_device *dev = qp->dev;
	const uint8_t *g = ah->grh.dgid.raw;

	if (!ah->is_global)
		return ql_error_set(-EINVAL, "soft+udp: the address vector must carry the peer "
					     "GID (ah_attr.is_global = 1)");
	if (ah->port_num && ah->port_num != 1)
		return ql_error_set(-EINVAL, "soft+udp: port_num %u does not exist (one port, 1)",
				    ah->port_num);
	memset(&qp->peer, 0, sizeof(qp->peer));
	memset(qp->peer_ip, 0, sizeof(qp->peer_ip));
	memset(&qp->txaddr, 0, sizeof(qp->txaddr));
	if (!memcmp(g, v4mapped, 12)) {
		struct sockaddr_in *a = (struct sockaddr_in *)&qp->peer;

		if (dev->family != AF_INET)
			return ql_error_set(-EINVAL, "soft+udp: an IPv4 peer for an IPv6 device");
		a->sin_family = AF_INET;
		a->sin_port = htons(dev->port);
		memcpy(&a->sin_addr, g + 12, 4);
		qp->peerlen = sizeof(*a);
		memcpy(qp->peer_ip, g + 12, 4);
		memcpy(qp->txaddr.src, dev->my_ip, 4);
		memcpy(qp->txaddr.dst, g + 12, 4);
	} else {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&qp->peer;

		if (dev->family != AF_INET6)
			return ql_error_set(-EINVAL,
					    "soft+udp: the GID is not an IPv4-mapped address (an "
					    "IPv6 peer needs an IPv6 device)");
		a->sin6_family = AF_INET6;
		a->sin6_port = htons(dev->port);
		memcpy(&a->sin6_addr, g, 16);
		qp->peerlen = sizeof(*a);
		memcpy(qp->peer_ip, g, 16);
		memcpy(qp->txaddr.src, dev->my_ip, 16);
		memcpy(qp->txaddr.dst, g, 16);
	}
	qp->txaddr.family = dev->family;
	qp->txaddr.sport = dev->port;
	qp->txaddr.dport = dev->port;
	qp->txaddr.ip_id = 0;
	return 0;
}

int ql__sudp_qp_modify(struct ql_qp *q, struct ibv_qp_attr *a, int mask)
{
	const struct ql_qp_fsm_limits lim = { .max_rd_atomic = SUDP_MAX_RD_ATOMIC };
	struct sudp_qp *qp = (struct sudp_qp *)q;
	struct sudp_device *dev = qp->dev;
	enum ibv_qp_state cur, next;
	int ret;

	pthread_mutex_lock(&dev->setup);
	sudp_dev_lock(dev);
	cur = (enum ibv_qp_state)atomic_load(&qp->state);
	ret = ql_qp_fsm_check(qp->type, cur, a, mask, &lim, &next);
	if (ret)
		goto out;
	if (mask & M(AV)) {
		ret = resolve_peer(qp, &a->ah_attr);
		if (ret)
			goto out;
		qp->attr.ah_attr = a->ah_attr;
		qp->connected = true;
	}
	if (mask & M(DEST_QPN)) {
		qp->dest_qpn = a->dest_qp_num;
		qp->attr.dest_qp_num = a->dest_qp_num;
		ql__sudp_peer_sport(qp, qp->peer_sport);
	}
	if (mask & M(ACCESS_FLAGS))
		qp->attr.qp_access_flags = a->qp_access_flags;
	if (mask & M(MIN_RNR_TIMER))
		qp->attr.min_rnr_timer = a->min_rnr_timer;
	ql__nic_qp_attr_keep(&qp->attr, a, mask);
	if (mask & M(PATH_MTU))
		qp->mtu = 128u << a->path_mtu;
	if (mask & M(RQ_PSN))
		qp->epsn = qp->attr.rq_psn;
	if (mask & M(SQ_PSN))
		qp->npsn = qp->una = qp->hi_psn = qp->attr.sq_psn;
	if (next != cur) {
		if (next == IBV_QPS_RESET) {
			/* the queues start empty again; the application owns
			 * them (one thread per QP) and the NIC is locked out */
			atomic_store(&qp->sq_pi, 0);
			qp->sq_retired = 0;
			atomic_store(&qp->rq_pi, 0);
			qp->rq_retired = 0;
			qp->rq_ci = 0;
			ql__sudp_qp_reset_transport(qp);
			memset(&qp->attr, 0, sizeof(qp->attr));
			qp->dest_qpn = 0;
			qp->connected = false;
			cq_clean(qp->scq, qp);
			if (qp->rcq != qp->scq)
				cq_clean(qp->rcq, qp);
		}
		if (next == IBV_QPS_RTS && (cur == IBV_QPS_RTR)) {
			qp->retry_left = qp->attr.retry_cnt;
			qp->rnr_left = qp->attr.rnr_retry;
		}
		if (next == IBV_QPS_ERR || next == IBV_QPS_SQE)
			qp->flushed = false;
		atomic_store(&qp->state, next);
	}
	ret = 0;
out:
	sudp_dev_unlock(dev);
	pthread_mutex_unlock(&dev->setup);
	if (!ret)
		ql__sudp_kick_always(dev);
	return ret;
}

int ql__sudp_qp_query(struct ql_qp *q, struct ibv_qp_attr *a, int mask, struct ql_qp_init_attr *ia)
{
	struct sudp_qp *qp = (struct sudp_qp *)q;

	(void)mask;
	ql__nic_qp_query(
		&(struct ql__nic_qp_view){ .attr = &qp->attr,
					   .state = (enum ibv_qp_state)atomic_load(&qp->state),
					   .cap = qp->cap,
					   .send_cq = &qp->scq->base,
					   .recv_cq = &qp->rcq->base,
					   .type = qp->type,
					   .sq_sig_all = qp->sq_sig_all,
					   .qp_context = qp->qp_context },
		a, ia);
	return 0;
}

void ql__sudp_peer_sport(const struct sudp_qp *qp, uint16_t port[2])
{
	const struct sudp_device *dev = qp->dev;

	switch (dev->peer_port) {
	case SUDP_PEER_PORT_SAME:
		port[0] = port[1] = dev->port;
		break;
	case SUDP_PEER_PORT_RXE:
		/* either kernel generation's rule */
		port[0] = sudp_rxe_sport(qp->dest_qpn, qp->base.qp_num);
		port[1] = sudp_rxe_sport_old(qp->dest_qpn);
		break;
	case SUDP_PEER_PORT_FIXED:
		port[0] = port[1] = dev->peer_port_n;
		break;
	default:
		port[0] = port[1] = 0;
		break;
	}
}

/* Caller holds the device lock. */
bool ql__sudp_mr_referenced(struct sudp_device *dev, uint32_t lkey)
{
	for (uint32_t q = 0; q < dev->nlive; q++) {
		struct sudp_qp *qp = dev->live[q];
		uint64_t pi = atomic_load(&qp->sq_pi), rpi = atomic_load(&qp->rq_pi);

		for (uint64_t i = qp->sq_ci; i < pi; i++)
			if (ql__nic_swr_names_lkey(&qp->sq[i & qp->sq_mask].wr, lkey))
				return true;
		for (uint64_t i = qp->rq_ci; i < rpi; i++)
			if (ql__nic_sge_names_lkey(&qp->rq_sge[(i & qp->rq_mask) * qp->rq_nsge],
						   qp->rq_num[i & qp->rq_mask], lkey))
				return true;
	}
	return false;
}

/* ---- the hot path ------------------------------------------------------ */

static int sudp_post_send(struct ql_qp *q, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr)
{
	struct sudp_qp *qp = (struct sudp_qp *)q;
	uint64_t pi = atomic_load_explicit(&qp->sq_pi, memory_order_relaxed);
	int ret = 0;

	for (; wr; wr = wr->next) {
		struct sudp_swqe *w;
		struct ibv_sge *sg;
		uint64_t len = 0;

		ret = ql__send_wr_check(
			(enum ibv_qp_state)atomic_load_explicit(&qp->state, memory_order_relaxed),
			qp->type, &qp->cap, pi - qp->sq_retired, wr);
		if (sudp_unlikely(ret)) {
			*bad_wr = wr;
			break;
		}
		w = &qp->sq[pi & qp->sq_mask];
		sg = w->wr.sg_list;
		w->wr = *wr;
		w->wr.next = NULL;
		w->wr.sg_list = sg;
		if (wr->send_flags & IBV_SEND_INLINE) {
			len = ql__inline_take(qp->sq_inline + (size_t)(pi & qp->sq_mask) *
								      qp->cap.max_inline_data,
					      wr, sg, &w->wr.num_sge);
		} else {
			for (int i = 0; i < wr->num_sge; i++) {
				sg[i] = wr->sg_list[i];
				len += wr->sg_list[i].length;
			}
		}
		w->len = len;
		w->started = 0;
		w->done = 0;
		w->local_ok = 0;
		w->status = IBV_WC_SUCCESS;
		w->rd_rcvd = 0;
		w->rd_base = 0;
		pi++;
	}
	atomic_store_explicit(&qp->sq_pi, pi, memory_order_release);
	ql__sudp_kick(qp->dev);
	/* caller mode: out now, unless it joins a streaming QP's batch */
	if (qp->dev->caller && !sudp_tx_batches(qp, pi))
		(void)ql__sudp_progress(qp->dev, false);
	return ret;
}

static int sudp_post_recv(struct ql_qp *q, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr)
{
	struct sudp_qp *qp = (struct sudp_qp *)q;
	uint64_t t = atomic_load_explicit(&qp->rq_pi, memory_order_relaxed);
	int ret = 0;

	for (; wr; wr = wr->next) {
		const int n = wr->num_sge;
		uint64_t len = 0;
		uint32_t s;

		if (sudp_unlikely(atomic_load_explicit(&qp->state, memory_order_relaxed) ==
					  IBV_QPS_RESET ||
				  n < 0 || (uint32_t)n > qp->cap.max_recv_sge)) {
			ret = -EINVAL;
			break;
		}
		if (sudp_unlikely(t - qp->rq_retired >= qp->cap.max_recv_wr)) {
			ret = -ENOMEM;
			break;
		}
		s = (uint32_t)(t & qp->rq_mask);
		for (int i = 0; i < n; i++) {
			qp->rq_sge[(size_t)s * qp->rq_nsge + (size_t)i] = wr->sg_list[i];
			len += wr->sg_list[i].length;
		}
		qp->rq_num[s] = (uint32_t)n;
		qp->rq_len[s] = len;
		qp->rq_wrid[s] = wr->wr_id;
		t++;
	}
	if (sudp_unlikely(ret))
		*bad_wr = wr;
	atomic_store_explicit(&qp->rq_pi, t, memory_order_release);
	if (sudp_unlikely(atomic_load_explicit(&qp->state, memory_order_relaxed) == IBV_QPS_ERR))
		ql__sudp_kick(qp->dev);
	return ret;
}

static int sudp_poll(struct ql_cq *c, int n, struct ibv_wc *wc)
{
	struct sudp_cq *cq = (struct sudp_cq *)c;
	uint64_t h = atomic_load_explicit(&cq->head, memory_order_relaxed);
	uint64_t t = atomic_load_explicit(&cq->tail, memory_order_acquire);
	uint64_t nsend = 0;
	int got = 0;

	if (h == t && cq->dev->caller) {
		/* caller mode: an empty CQ runs the NIC once (docs/progress.md) */
		(void)ql__sudp_progress(cq->dev, true);
		t = atomic_load_explicit(&cq->tail, memory_order_acquire);
	}
	while (got < n && h != t) {
		const struct sudp_cqe *e = &cq->ring[h & cq->mask];

		wc[got++] = e->wc;
		if (e->send) {
			e->qp->sq_retired = e->idx + 1;
			nsend++;
		} else {
			e->qp->rq_retired = e->idx + 1;
		}
		h++;
	}
	if (got) {
		atomic_store_explicit(&cq->head, h, memory_order_release);
		if (nsend)
			atomic_fetch_sub_explicit(&cq->send_out, nsend, memory_order_release);
		return got;
	}
	if (sudp_unlikely(atomic_load_explicit(&cq->err, memory_order_relaxed)))
		return atomic_load(&cq->err);
	return 0;
}

const struct ql__qp_ops ql__sudp_qp_ops = {
	.post_send = sudp_post_send,
	.post_recv = sudp_post_recv,
};

const struct ql__cq_ops ql__sudp_cq_ops = {
	.poll = sudp_poll,
};
