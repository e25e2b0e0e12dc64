/* SPDX-License-Identifier: MIT */
/*
 * ql_sdr_progress: the completion queues polled, the control messages
 * validated and dispatched to the send and receive sides, credits
 * reported, the sender pumped and the schemes' timers run.
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

#define SDR_TICK_NS 50000ull /* the schemes' timers run at most this often */

/* ---- control dispatch ----------------------------------------------------- */

/* The receiver's count of receives consumed, from any of its messages: at
 * most what we sent (it is the peer's word). Consumption beyond S - L
 * means packets counted lost did arrive late: fewer were lost. */
static void peer_credit(struct ql_sdr_conn *c, uint64_t credit)
{
	if (credit > c->peer_consumed)
		c->peer_consumed = credit < c->pkts_posted ? credit : c->pkts_posted;
	if (c->peer_consumed + c->lost > c->pkts_posted)
		c->lost = c->pkts_posted - c->peer_consumed;
}

static void on_ctrl(struct ql_sdr_conn *c, const struct ql_sdr_ctrl *m, uint64_t now)
{
	if (m->type == QL_SDR_C_HELLO) {
		if (c->connected || c->hello_received || !c->handshaking) {
			c->st.drop_bad_ctrl++;
			return;
		}
		if (ql_sdr__hello_unpack(m->payload, m->plen, &c->hello))
			c->hello_bad = true;
		else
			c->hello_received = true;
		return;
	}
	if (!c->connected) {
		c->st.drop_bad_ctrl++;
		return;
	}
	switch (m->type) {
	/* to the send side (from the receiver) */
	case QL_SDR_C_CREDIT:
		peer_credit(c, m->credit);
		if (m->rel == 1 && c->credit_req_pending) {
			uint64_t s = (uint64_t)m->b << 32 | m->a;

			c->credit_req_pending = false;
			/* nothing sent since the request, and the count did not move
			 * since the previous answer (a grace period ago): whatever
			 * the peer has not consumed by now was lost on the wire */
			if (s != c->pkts_posted) {
				c->reclaim_c = UINT64_MAX;
			} else if (c->reclaim_c != c->peer_consumed) {
				c->reclaim_c = c->peer_consumed; /* ask once more */
			} else if (c->pkts_posted > c->peer_consumed + c->lost) {
				c->st.credits_reclaimed +=
					c->pkts_posted - c->peer_consumed - c->lost;
				c->lost = c->pkts_posted - c->peer_consumed;
				c->reclaim_c = UINT64_MAX;
			}
		}
		return;
	case QL_SDR_C_CTS:
		peer_credit(c, m->credit);
		{
			uint64_t len = (uint64_t)m->b << 32 | m->a;

			if (m->msg_id >= c->peer.slots || c->peer_id_busy[m->msg_id] ||
			    m->rel >= QL_SDR_REL_COUNT || len == 0 || len > c->peer.max_msg_size ||
			    c->cts_count == c->peer.slots) {
				c->st.drop_bad_ctrl++;
				return;
			}
			c->peer_id_busy[m->msg_id] = 1;
			c->cts_q[(c->cts_head + c->cts_count) % c->peer.slots] =
				(struct ql_sdr_cts){ m->msg_id, m->gen, len, m->rel };
			c->cts_count++;
			ql_sdr__tx_match(c);
		}
		return;
	case QL_SDR_C_ACK:
	case QL_SDR_C_NACK:
	case QL_SDR_C_FAIL:
		peer_credit(c, m->credit);
		{
			struct ql_sdr_send *tx =
				m->msg_id < c->peer.slots ? c->tx_by_id[m->msg_id] : NULL;

			if (!tx || tx->gen != m->gen || tx->state != QL_SDR_S_ACTIVE ||
			    tx->draining) {
				c->st.drop_bad_ctrl++;
				return;
			}
			if (m->type == QL_SDR_C_ACK)
				c->st.acks_received++;
			if (m->type == QL_SDR_C_NACK)
				c->st.nacks_received++;
			if (m->type == QL_SDR_C_FAIL) {
				ql_sdr__tx_complete(tx, -ECONNABORTED);
				return;
			}
			if (tx->ops->tx_on_ctrl)
				tx->ops->tx_on_ctrl(tx, m, now);
		}
		return;
	/* to the receive side (from the sender) */
	case QL_SDR_C_CREDIT_REQ:
		/* drained now, after the request arrived: the packets it counts
		 * were posted before it, so what has not arrived by now is
		 * still on the wire or lost (a drain earlier in this progress
		 * call may predate them: this thread can be preempted) */
		ql_sdr__rx_drain(c, now);
		ql_sdr__msg_ctrl(c, QL_SDR_C_CREDIT, 1, 0, 0, m->a, m->b, NULL, 0);
		return;
	case QL_SDR_C_ACK_REQ:
		ql_sdr__rx_drain(c, now); /* as for CREDIT_REQ: judge the bitmap as of now */
		break;
	case QL_SDR_C_FIN:
	case QL_SDR_C_ABORT:
		break;
	default:
		if (m->type < QL_SDR_C_EXT_FIRST || m->type > QL_SDR_C_EXT_LAST) {
			c->st.drop_bad_ctrl++;
			return;
		}
		break;
	}
	/* ACK_REQ, FIN, EXT: about one of our receives, or (EXT) one of our sends */
	if (m->type >= QL_SDR_C_EXT_FIRST && (m->rel & QL_SDR_REL_TO_SENDER)) {
		struct ql_sdr_send *tx = m->msg_id < c->peer.slots ? c->tx_by_id[m->msg_id] : NULL;

		if (!tx || tx->gen != m->gen || tx->state != QL_SDR_S_ACTIVE || tx->draining) {
			c->st.drop_bad_ctrl++;
			return;
		}
		if (tx->ops->tx_on_ctrl)
			tx->ops->tx_on_ctrl(tx, m, now);
		return;
	}
	{
		struct ql_sdr_recv *rx = m->msg_id < c->cfg.slots ? &c->rx[m->msg_id] : NULL;
		int st = rx ? atomic_load(&rx->state) : QL_SDR_S_FREE;

		if (!rx || rx->gen != m->gen || (st != QL_SDR_S_ACTIVE && st != QL_SDR_S_DONE)) {
			c->st.drop_bad_ctrl++;
			return;
		}
		if (st == QL_SDR_S_DONE) {
			/* ended here: answer a sender still asking */
			if (m->type == QL_SDR_C_ACK_REQ && rx->status == 0) {
				c->st.acks_sent++;
				ql_sdr__rx_ctrl(rx, QL_SDR_C_ACK, 0, 0, NULL, 0);
			}
			return;
		}
		if (m->type == QL_SDR_C_FIN)
			rx->fin = true;
		if (m->type == QL_SDR_C_ABORT) {
			ql_sdr__rx_complete(rx, m->a && m->a < 4096 ? -(int)m->a : -ECONNABORTED);
			return;
		}
		if (rx->ops->rx_on_ctrl)
			rx->ops->rx_on_ctrl(rx, m, now);
	}
}

static void tick(struct ql_sdr_conn *c, uint64_t now)
{
	uint64_t gone = c->peer_consumed + c->lost;

	/* out of credits for a while, nothing sent since: ask what arrived.
	 * Only once every packet posted has completed here (is on the wire):
	 * QPs are not ordered with each other, so a request overtaking
	 * packets still in our send queue would count them lost. */
	if (c->pkts_posted > gone && c->credit_stalled && !c->credit_req_pending &&
	    now - c->last_data_ns > c->cfg.credit_grace_ns &&
	    now - c->credit_req_ns > (c->reclaim_c == UINT64_MAX ? c->cfg.credit_grace_ns :
								   c->cfg.credit_grace_ns / 4)) {
		if (c->sq_done < c->sq_posted) {
			if (c->sq_signaled < c->sq_posted)
				c->need_fence = true;
		} else if (ql_sdr__msg_ctrl(c, QL_SDR_C_CREDIT_REQ, 0, 0, 0,
					    (uint32_t)c->pkts_posted,
					    (uint32_t)(c->pkts_posted >> 32), NULL, 0) == 0) {
			c->credit_req_pending = true;
			c->credit_req_ns = now;
			c->credit_reqs++;
		}
	}
	if (c->credit_req_pending && now - c->credit_req_ns > 100 * c->cfg.credit_grace_ns)
		c->credit_req_pending = false; /* answered stale; ask again */
	for (struct ql_sdr_send *tx = c->tx_active, *nx; tx; tx = nx) {
		nx = tx->next;
		if (tx->state == QL_SDR_S_ACTIVE && !tx->draining && tx->ops->tx_tick)
			tx->ops->tx_tick(tx, now);
	}
	for (uint32_t i = 0; i < c->cfg.slots; i++) {
		struct ql_sdr_recv *rx = &c->rx[i];

		if (atomic_load_explicit(&rx->state, memory_order_relaxed) == QL_SDR_S_ACTIVE &&
		    rx->ops->rx_tick)
			rx->ops->rx_tick(rx, now);
	}
}

int ql_sdr_progress(struct ql_sdr_conn *c)
{
	struct ibv_wc *wc = c->wcs;
	uint64_t now = ql_clock_ns();
	int n, events = 0;

	if (c->broken)
		return c->broken;
	/* a software NIC in caller progress mode runs here (docs/progress.md):
	 * its receive, transmit and timers, before the CQs are looked at */
	n = ql_device_progress(c->dev);
	if (n > 0)
		events += n;
	if (c->connected) {
		n = ql_sdr__rx_drain(c, now);
		if (n < 0)
			return n;
		events += n;
		/* the UC send queue */
		n = ql_cq_poll(c->data_scq, QL_SDR_POST_BATCH, wc);
		if (n < 0)
			return c->broken = n;
		for (int i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS) {
				c->broken = -ECONNRESET;
				continue;
			}
			if (wc[i].wr_id > c->sq_done)
				c->sq_done = wc[i].wr_id;
		}
		if (n > 0)
			for (struct ql_sdr_send *tx = c->tx_active, *nx; tx; tx = nx) {
				nx = tx->next;
				if (tx->draining && tx->last_wr <= c->sq_done)
					ql_sdr__tx_finish(tx);
			}
		events += n > 0 ? n : 0;
	}
	/* the control path */
	n = ql_cq_poll(c->ctrl_scq, QL_SDR_POST_BATCH, wc);
	if (n < 0)
		return c->broken = n;
	for (int i = 0; i < n; i++) {
		if (wc[i].status != IBV_WC_SUCCESS)
			c->broken = -ECONNRESET;
		c->ctrl_send_done++;
	}
	/* one at a time until connected: a HELLO must be taken in before what
	 * follows it */
	n = ql_cq_poll(c->ctrl_rcq, c->connected ? QL_SDR_POST_BATCH : 1, wc);
	if (n < 0)
		return c->broken = n;
	for (int i = 0; i < n; i++) {
		struct ql_sdr_ctrl m;
		uint32_t idx = (uint32_t)wc[i].wr_id;

		if (wc[i].status != IBV_WC_SUCCESS) {
			c->broken = -ECONNRESET;
			continue;
		}
		if (idx >= c->ctrl_depth)
			continue;
		if (wc[i].opcode == IBV_WC_RECV &&
		    ql_sdr__ctrl_unpack(ql_sdr__ctrl_rbuf(c, idx), wc[i].byte_len, &m) == 0)
			on_ctrl(c, &m, now);
		else
			c->st.drop_bad_ctrl++;
		if (ql_sdr__ctrl_post_recv(c, idx) && !c->broken)
			c->broken = -ECONNRESET;
	}
	events += n;
	if (c->broken)
		return c->broken;
	ql_sdr__ctrl_flush(c);
	if (!c->connected)
		return events;
	/* credits back to the peer once a quarter of its window was used */
	if (c->consumed - c->consumed_reported >= (c->recv_depth + 3) / 4)
		ql_sdr__msg_ctrl(c, QL_SDR_C_CREDIT, 0, 0, 0, 0, 0, NULL, 0);
	c->credit_stalled = false; /* ql_sdr__tx_pump says whether it still is */
	events += ql_sdr__tx_pump(c, now);
	if (c->need_fence && c->sq_posted - c->sq_done < c->sq_depth) {
		struct ibv_send_wr wr = { .wr_id = c->sq_posted + 1,
					  .opcode = IBV_WR_RDMA_WRITE,
					  .send_flags = IBV_SEND_SIGNALED,
					  .wr.rdma = { c->peer.root_addr, c->peer.rkey } },
				   *bad;

		if (ql_qp_post_send(c->data_qp, &wr, &bad) == 0) {
			c->sq_posted++;
			c->sq_signaled = c->sq_posted;
			c->need_fence = false;
			c->st.fences++;
		}
	}
	if (c->credit_stalled)
		c->st.credit_stalls++;
	if (now - c->last_tick_ns >= SDR_TICK_NS) {
		c->last_tick_ns = now;
		tick(c, now);
	}
	return c->broken ? c->broken : events;
}
