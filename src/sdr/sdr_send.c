/* SPDX-License-Identifier: MIT */
/*
 * The SDR sender: clear-to-send matching, credits and the pump that posts
 * the packets, the scheme helpers of the send side and the send API.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qlink/clock.h"
#include "qlink/error.h"
#include "qlink/sdr.h"
#include "sdr/sdr_int.h"

/* ---- the send side ------------------------------------------------------- */

void *ql_sdr__tx_pkt_addr(const struct ql_sdr_send *tx, uint32_t pkt)
{
	if (pkt < tx->ndata)
		return (void *)(uintptr_t)(tx->addr + (uint64_t)pkt * tx->conn->mtu);
	return tx->parity + (uint64_t)(pkt - tx->ndata) * tx->conn->mtu;
}

void ql_sdr__tx_queue(struct ql_sdr_send *tx, uint32_t first, uint32_t count)
{
	if (tx->state != QL_SDR_S_ACTIVE || tx->draining)
		return;
	for (uint32_t p = first; p < tx->npkts && p - first < count; p++) {
		uint64_t bit = 1ull << (p % 64);

		if (!(tx->want[p / 64] & bit)) {
			tx->want[p / 64] |= bit;
			tx->want_count++;
		}
	}
}

static void tx_unlink(struct ql_sdr_send *tx)
{
	struct ql_sdr_send **pp = &tx->conn->tx_active;

	while (*pp && *pp != tx)
		pp = &(*pp)->next;
	if (*pp)
		*pp = tx->next;
	tx->next = NULL;
}

/* The user-visible end, once the packets it posted are complete (its
 * buffer may be reused then). */
void ql_sdr__tx_finish(struct ql_sdr_send *tx)
{
	struct ql_sdr_conn *c = tx->conn;

	tx->draining = false;
	tx_unlink(tx);
	if (tx->msg_id < c->peer.slots && c->tx_by_id[tx->msg_id] == tx) {
		c->tx_by_id[tx->msg_id] = NULL;
		c->peer_id_busy[tx->msg_id] = 0;
	}
	tx->state = QL_SDR_S_DONE;
	c->st.msgs_sent++;
	if (tx->status)
		c->st.msgs_failed++;
	if (tx->cb)
		tx->cb(tx, tx->status, tx->arg);
}

void ql_sdr__tx_complete(struct ql_sdr_send *tx, int status)
{
	struct ql_sdr_conn *c = tx->conn;

	if (tx->state != QL_SDR_S_ACTIVE || tx->draining)
		return;
	tx->status = status;
	/* nothing more goes out for it */
	memset(tx->want, 0, (tx->npkts + 63) / 64 * sizeof(uint64_t));
	tx->want_count = 0;
	if (tx->last_wr <= c->sq_done) {
		ql_sdr__tx_finish(tx);
		return;
	}
	tx->draining = true;
	/* its last post may be unsignaled with nothing behind it: a signaled
	 * zero-length WRITE behind it will complete it (progress posts it) */
	if (tx->last_wr > c->sq_signaled)
		c->need_fence = true;
}

/* Start sends whose clear-to-send has come, in order. */
void ql_sdr__tx_match(struct ql_sdr_conn *c)
{
	while (c->tx_wait_count && c->cts_count) {
		struct ql_sdr_send *tx = c->tx_wait[c->tx_wait_head];
		struct ql_sdr_cts cts = c->cts_q[c->cts_head];
		int rc = 0;

		c->tx_wait_head = (c->tx_wait_head + 1) % c->ntx;
		c->tx_wait_count--;
		c->cts_head = (c->cts_head + 1) % c->peer.slots;
		c->cts_count--;
		tx->msg_id = cts.msg_id;
		tx->gen = cts.gen;
		tx->raddr = c->peer.root_addr + (uint64_t)cts.msg_id * c->peer.slot_stride;
		tx->rkey = c->peer.rkey;
		tx->ndata = (uint32_t)((tx->len + c->mtu - 1) / c->mtu);
		tx->nparity = tx->ops->parity_packets ? tx->ops->parity_packets(c, tx->ndata) : 0;
		tx->npkts = tx->ndata + tx->nparity;
		tx->state = QL_SDR_S_ACTIVE;
		tx->next = c->tx_active;
		c->tx_active = tx;
		c->tx_by_id[cts.msg_id] = tx;
		if (cts.rel != (uint32_t)tx->rel)
			rc = -EPROTO;
		else if (cts.len != tx->len)
			rc = -EMSGSIZE;
		else if (tx->npkts > c->tx_max_pkts ||
			 (uint64_t)tx->npkts * c->mtu > c->peer.slot_stride ||
			 (uint64_t)tx->nparity * c->mtu > c->parity_stride)
			rc = -EMSGSIZE;
		else if (tx->ops->tx_start)
			rc = tx->ops->tx_start(tx);
		if (rc) {
			ql_sdr__msg_ctrl(c, QL_SDR_C_ABORT, tx->rel, cts.msg_id, cts.gen,
					 (uint32_t)-rc, 0, NULL, 0);
			ql_sdr__tx_complete(tx, rc);
		}
	}
}

int ql_sdr_send_post(struct ql_sdr_conn *c, const void *addr, size_t len, struct ql_mr *mr,
		     const struct ql_sdr_send_opts *opts, struct ql_sdr_send **out)
{
	struct ql_sdr_send_opts o = { .rel = QL_SDR_REL_SR };
	const struct ql_sdr_ops *ops;
	struct ql_sdr_send *tx = NULL;
	uintptr_t a = (uintptr_t)addr, b;

	if (!c || !addr || !mr || !out)
		return -EINVAL;
	if (!c->connected)
		return ql_error_set(-ENOTCONN, "sdr: not connected");
	if (opts)
		o = *opts;
	ops = ql_sdr_ops_table(o.rel);
	if (!ops)
		return ql_error_set(-EOPNOTSUPP, "sdr: reliability %s not built in",
				    ql_sdr_rel_name(o.rel));
	b = (uintptr_t)ql_mr_addr(mr);
	if (len == 0 || len > c->peer.max_msg_size || a < b || a - b > ql_mr_length(mr) ||
	    len > ql_mr_length(mr) - (a - b))
		return ql_error_set(-EINVAL, "sdr: send of %zu bytes outside its MR or above %llu",
				    len, (unsigned long long)c->peer.max_msg_size);
	if (o.user > QL_SDR_MAX_USER)
		return ql_error_set(-EINVAL, "sdr: user bits %u (0..15)", o.user);
	for (uint32_t i = 0; i < c->ntx; i++)
		if (c->tx[i].state == QL_SDR_S_FREE) {
			tx = &c->tx[i];
			break;
		}
	if (!tx)
		return -EAGAIN;
	tx->ops = ops;
	tx->rel = o.rel;
	tx->user = o.user;
	tx->addr = addr;
	tx->len = len;
	tx->lkey = ql_mr_lkey(mr);
	tx->status = 0;
	tx->msg_id = UINT32_MAX;
	tx->want_count = 0;
	tx->cursor = 0;
	tx->last_send_ns = 0;
	tx->last_wr = 0;
	tx->draining = false;
	tx->deadline_ns = 0;
	tx->retries = 0;
	tx->cb = o.on_complete;
	tx->arg = o.arg;
	memset(tx->want, 0, (c->tx_max_pkts + 63) / 64 * sizeof(uint64_t));
	memset(tx->sent_once, 0, (c->tx_max_pkts + 63) / 64 * sizeof(uint64_t));
	if (tx->priv)
		memset(tx->priv, 0, c->tx_priv_max);
	tx->state = QL_SDR_S_WAIT_CTS;
	c->tx_wait[(c->tx_wait_head + c->tx_wait_count) % c->ntx] = tx;
	c->tx_wait_count++;
	ql_sdr__tx_match(c);
	*out = tx;
	return 0;
}

int ql_sdr_send_poll(const struct ql_sdr_send *tx, int *status)
{
	if (tx->state != QL_SDR_S_DONE)
		return 0;
	if (status)
		*status = tx->status;
	return 1;
}

int ql_sdr_send_release(struct ql_sdr_send *tx)
{
	if (!tx)
		return -EINVAL;
	if (tx->state != QL_SDR_S_DONE)
		return -EBUSY;
	tx->state = QL_SDR_S_FREE;
	return 0;
}

/* Credits: receive WQEs the peer has that no packet of ours is headed for
 * (docs/sdr.md "Credits"). */
static uint64_t credits(struct ql_sdr_conn *c)
{
	uint64_t gone = c->peer_consumed + c->lost;
	uint64_t out = c->pkts_posted > gone ? c->pkts_posted - gone : 0;

	return out >= c->peer.recv_depth ? 0 : c->peer.recv_depth - out;
}

/* A write-off is being confirmed (docs/sdr.md "Credits"): the first answer
 * for S came back short and a second must agree with it. Nothing is posted
 * until it does: packets posted in between (with the few credits the first
 * answer itself returned) would move C and S again, the answers would never
 * agree, and the window would stay short of the lost packets for good. */
static bool reclaim_hold(const struct ql_sdr_conn *c)
{
	return c->reclaim_c != UINT64_MAX && c->pkts_posted > c->peer_consumed + c->lost;
}

/* The next wanted packet at or after the cursor, wrapping (want_count > 0). */
static uint32_t next_want(const struct ql_sdr_send *tx)
{
	uint32_t nw = (tx->npkts + 63) / 64;
	uint32_t p = tx->cursor < tx->npkts ? tx->cursor : 0;
	uint32_t wi = p / 64;
	uint64_t w = tx->want[wi] & (~0ull << (p % 64));

	for (uint32_t k = 0; k <= nw; k++) {
		if (w)
			return wi * 64 + (uint32_t)__builtin_ctzll(w);
		wi = (wi + 1) % nw;
		w = tx->want[wi];
	}
	return 0;
}

/* Post packets of the active sends as credits and the send queue allow. */
int ql_sdr__tx_pump(struct ql_sdr_conn *c, uint64_t now)
{
	struct ql_sdr_send *txs[QL_SDR_POST_BATCH];
	uint32_t pkts[QL_SDR_POST_BATCH];
	int events = 0;

	for (;;) {
		uint64_t cr = reclaim_hold(c) ? 0 : credits(c);
		uint64_t sq = c->sq_depth - (c->sq_posted - c->sq_done);
		uint32_t n = 0, lim = QL_SDR_POST_BATCH;
		struct ibv_send_wr *bad = NULL;
		bool wanted = false;
		int rc;

		if (cr < lim)
			lim = (uint32_t)cr;
		if (sq < lim)
			lim = (uint32_t)sq;
		for (struct ql_sdr_send *tx = c->tx_active; tx; tx = tx->next) {
			if (!tx->want_count)
				continue;
			wanted = true;
			while (n < lim && tx->want_count) {
				uint32_t p = next_want(tx);

				tx->want[p / 64] &= ~(1ull << (p % 64));
				tx->want_count--;
				tx->cursor = p + 1 < tx->npkts ? p + 1 : 0;
				txs[n] = tx;
				pkts[n] = p;
				n++;
			}
			if (n == lim)
				break;
		}
		if (wanted && n == 0 && cr == 0)
			c->credit_stalled = true;
		if (!n)
			return events;
		for (uint32_t i = 0; i < n; i++) {
			struct ql_sdr_send *tx = txs[i];
			uint32_t p = pkts[i];
			struct ibv_send_wr *wr = &c->wrs[i];
			uint64_t seq = c->sq_posted + i + 1;
			bool last = tx->want_count == 0 && (i + 1 == n || txs[i + 1] != tx);

			c->sges[i].addr = (uintptr_t)ql_sdr__tx_pkt_addr(tx, p);
			c->sges[i].length = ql_sdr__pkt_len(c, tx->len, tx->ndata, p);
			c->sges[i].lkey = p < tx->ndata ? tx->lkey : tx->parity_lkey;
			wr->wr_id = seq;
			wr->next = i + 1 < n ? &c->wrs[i + 1] : NULL;
			wr->sg_list = &c->sges[i];
			wr->num_sge = 1;
			wr->opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
			wr->send_flags = (seq % c->sig_every == 0 || last) ? IBV_SEND_SIGNALED : 0;
			wr->imm_data = ql_sdr_imm_encode(tx->msg_id, p, tx->user);
			wr->wr.rdma.remote_addr = tx->raddr + ql_sdr__pkt_offset(c, p);
			wr->wr.rdma.rkey = tx->rkey;
		}
		rc = ql_qp_post_send(c->data_qp, c->wrs, &bad);
		{
			uint32_t ok = rc ? (uint32_t)(bad - c->wrs) : n;

			for (uint32_t i = 0; i < n; i++) {
				struct ql_sdr_send *tx = txs[i];
				uint32_t p = pkts[i];
				uint64_t bit = 1ull << (p % 64);

				if (i >= ok) { /* not posted: want it again */
					if (!(tx->want[p / 64] & bit)) {
						tx->want[p / 64] |= bit;
						tx->want_count++;
					}
					continue;
				}
				if (tx->sent_once[p / 64] & bit) {
					c->st.pkts_retransmitted++;
				} else {
					tx->sent_once[p / 64] |= bit;
					c->st.pkts_sent++;
				}
				tx->last_send_ns = now;
				tx->last_wr = c->sq_posted + i + 1;
				if (c->wrs[i].send_flags & IBV_SEND_SIGNALED)
					c->sq_signaled = c->sq_posted + i + 1;
			}
			c->pkts_posted += ok;
			c->sq_posted += ok;
			if (ok)
				c->last_data_ns = now;
			events += (int)ok;
			for (uint32_t i = 0; i < ok; i++) {
				struct ql_sdr_send *tx = txs[i];

				if ((i + 1 == ok || txs[i + 1] != tx) && tx->want_count == 0 &&
				    tx->state == QL_SDR_S_ACTIVE && !tx->draining &&
				    tx->ops->tx_on_sent)
					tx->ops->tx_on_sent(tx, now);
			}
			if (rc)
				return events;
		}
	}
}
