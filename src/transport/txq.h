/* SPDX-License-Identifier: MIT */
/*
 * The response side both RDMA channels share (internal): SENDs posted from a
 * registered buffer pool, signaled one in signal_every, every one while the
 * pool runs low and the last of each burst (so every SEND's outcome is known
 * from a completion even when no more traffic comes); completions return the
 * buffers and say what became of each SEND (ql_channel_send_stats). Static
 * inline: it is the channels' hot path (no allocation, lock or syscall).
 */
#ifndef QL_TRANSPORT_TXQ_H
#define QL_TRANSPORT_TXQ_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "qlink/channel.h"
#include "qlink/verbs.h"

struct ql_txq {
	struct ql_pool *pool;
	struct ql_buffer **inflight; /* posted buffers in posting order */
	uint32_t ntx;		     /* pool buffers = send queue entries */
	uint32_t max_inline;
	uint32_t signal_every;
	uint32_t lkey;
	uint64_t posted;
	uint64_t done;
	struct ql_channel_send_stats ss; /* relaxed stores, this thread only */
	int err;			 /* 0, or the channel's negative errno */
};

#define QL_TXQ_ADD(x, n) __atomic_store_n(&(x), (x) + (n), __ATOMIC_RELAXED)

/* Take the send completions that arrived; 0 or the CQ's negative errno. */
static inline int ql_txq_reap(struct ql_txq *t, struct ql_cq *scq)
{
	struct ibv_wc wc[16];
	int n = ql_cq_poll(scq, 16, wc);

	if (n < 0)
		return t->err = n;
	for (int i = 0; i < n; i++) {
		uint64_t id = wc[i].wr_id;

		/* wr_id is our own posting number; bound it all the same */
		if (id < t->done || id >= t->posted)
			continue;
		if (wc[i].status == IBV_WC_SUCCESS) {
			/* a signaled SEND completes every SEND posted before it */
			QL_TXQ_ADD(t->ss.completed, id + 1 - t->done);
		} else {
			/* completions come in order: the unsignaled SENDs
			 * before this one were delivered; this one was not */
			QL_TXQ_ADD(t->ss.completed, id - t->done);
			if (wc[i].status == IBV_WC_RNR_RETRY_EXC_ERR)
				QL_TXQ_ADD(t->ss.dropped_rnr, 1);
			else
				QL_TXQ_ADD(t->ss.dropped_peer, 1);
			t->err = -EIO;
		}
		while (t->done <= id) {
			ql_pool_put(t->pool, t->inflight[t->done % t->ntx]);
			t->done++;
		}
	}
	return 0;
}

/* Post one buffer as a SEND; it returns to the pool when done. `last`: the
 * last of a burst (signaled). 0 or -EIO (t->err set). */
static inline int ql_txq_post(struct ql_txq *t, struct ql_qp *qp, struct ql_buffer *b, bool last)
{
	bool signal = t->posted % t->signal_every == t->signal_every - 1 ||
		      ql_pool_available(t->pool) < t->signal_every || last;
	struct ibv_sge sge = {
		.addr = (uintptr_t)ql_buffer_data(b),
		.length = b->len,
		.lkey = t->lkey,
	};
	struct ibv_send_wr wr = {
		.wr_id = t->posted,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_SEND,
		.send_flags = (b->len <= t->max_inline ? IBV_SEND_INLINE : 0) |
			      (signal ? IBV_SEND_SIGNALED : 0),
	};
	struct ibv_send_wr *bad;

	if (ql_qp_post_send(qp, &wr, &bad))
		return t->err = -EIO;
	t->inflight[t->posted % t->ntx] = b;
	t->posted++;
	QL_TXQ_ADD(t->ss.posted, 1);
	return 0;
}

/* A response buffer: the pool's, or one a completion gives back. */
static inline struct ql_buffer *ql_txq_acquire(struct ql_txq *t, struct ql_cq *scq)
{
	struct ql_buffer *b = ql_pool_get(t->pool);

	if (!b && t->posted != t->done) {
		ql_txq_reap(t, scq);
		b = ql_pool_get(t->pool);
	}
	return b;
}

/* A reader's snapshot of the send outcomes (any thread). */
static inline void ql_txq_stats(const struct ql_txq *t, struct ql_channel_send_stats *s)
{
	s->posted = __atomic_load_n(&t->ss.posted, __ATOMIC_RELAXED);
	s->completed = __atomic_load_n(&t->ss.completed, __ATOMIC_RELAXED);
	s->dropped_rnr = __atomic_load_n(&t->ss.dropped_rnr, __ATOMIC_RELAXED);
	s->dropped_peer = __atomic_load_n(&t->ss.dropped_peer, __ATOMIC_RELAXED);
}

/* After a burst: reap once half the send queue is in flight. */
static inline void ql_txq_after_burst(struct ql_txq *t, struct ql_cq *scq)
{
	if (t->posted - t->done > t->ntx / 2)
		ql_txq_reap(t, scq);
}

#endif
