/* SPDX-License-Identifier: MIT */
/*
 * The two reliability schemes of the core (docs/sdr.md "Reliability"):
 * NONE, UC semantics with the bitmap, and SELECTIVE REPEAT, where the
 * receiver NACKs the gaps of its bitmap and the sender retransmits only
 * those. Both are tables of hooks over the helpers of sdr_int.h.
 */
#include <errno.h>
#include <string.h>

#include "sdr/sdr_int.h"

/* ---- NONE ---------------------------------------------------------------- */

static int none_tx_start(struct ql_sdr_send *tx)
{
	ql_sdr__tx_queue(tx, 0, tx->npkts);
	return 0;
}

/* Every packet posted once: say so (the receiver's end of the message),
 * and end here (the core waits for the posts to complete). */
static void none_tx_on_sent(struct ql_sdr_send *tx, uint64_t now)
{
	(void)now;
	ql_sdr__tx_ctrl(tx, QL_SDR_C_FIN, 0, 0, NULL, 0);
	ql_sdr__tx_complete(tx, 0);
}

/* The sender is done and nothing arrived for nack_delay: what is in the
 * bitmap is the message (-ENODATA: partial). */
static void none_rx_tick(struct ql_sdr_recv *rx, uint64_t now)
{
	uint64_t last = rx->last_pkt_ns > rx->fin_ns ? rx->last_pkt_ns : rx->fin_ns;

	if (rx->fin && now - last > rx->conn->cfg.nack_delay_ns)
		ql_sdr__rx_complete(rx, -ENODATA);
}

static void none_rx_on_ctrl(struct ql_sdr_recv *rx, const struct ql_sdr_ctrl *m, uint64_t now)
{
	if (m->type == QL_SDR_C_FIN)
		rx->fin_ns = now;
}

const struct ql_sdr_ops ql_sdr_ops_none = {
	.rel = QL_SDR_REL_NONE,
	.name = "none",
	.tx_start = none_tx_start,
	.tx_on_sent = none_tx_on_sent,
	.rx_on_ctrl = none_rx_on_ctrl,
	.rx_tick = none_rx_tick,
};

/* ---- SELECTIVE REPEAT ------------------------------------------------------ */

struct sr_tx {
	uint32_t last_missing; /* the fewest missing any NACK reported (progress) */
};

struct sr_rx {
	uint32_t nack_from; /* where the next NACK round resumes (ranges beyond one message) */
};

static int sr_tx_start(struct ql_sdr_send *tx)
{
	struct sr_tx *s = tx->priv;

	s->last_missing = tx->npkts;
	ql_sdr__tx_queue(tx, 0, tx->npkts);
	tx->deadline_ns = 0;
	return 0;
}

static void sr_tx_on_sent(struct ql_sdr_send *tx, uint64_t now)
{
	tx->deadline_ns = now + tx->conn->cfg.rto_ns;
}

/* A timeout without progress since the last: count it, and give up after
 * max_retries (the receiver is told). */
static bool sr_tx_round(struct ql_sdr_send *tx)
{
	if (++tx->retries <= tx->conn->cfg.max_retries)
		return true;
	ql_sdr__tx_ctrl(tx, QL_SDR_C_ABORT, ETIMEDOUT, 0, NULL, 0);
	ql_sdr__tx_complete(tx, -ETIMEDOUT);
	return false;
}

static void sr_tx_on_ctrl(struct ql_sdr_send *tx, const struct ql_sdr_ctrl *m, uint64_t now)
{
	struct sr_tx *s = tx->priv;
	uint32_t n;

	if (m->type == QL_SDR_C_ACK) {
		ql_sdr__tx_complete(tx, 0);
		return;
	}
	if (m->type != QL_SDR_C_NACK)
		return;
	/* a = packets missing in all, b = ranges in this NACK */
	n = m->b;
	if (n > QL_SDR_NACK_RANGES || (uint64_t)n * 8 > m->plen) {
		tx->conn->st.drop_bad_ctrl++;
		return;
	}
	if (m->a < s->last_missing) { /* progress: the timeouts count again from 0 */
		s->last_missing = m->a;
		tx->retries = 0;
	}
	for (uint32_t i = 0; i < n; i++) {
		const uint8_t *p = m->payload + 8 * i;
		uint32_t first = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
				 p[3];
		uint32_t count = (uint32_t)p[4] << 24 | (uint32_t)p[5] << 16 | (uint32_t)p[6] << 8 |
				 p[7];

		/* clipped to the message by the core: a peer cannot make us send
		 * outside it */
		if (first < tx->npkts)
			ql_sdr__tx_queue(tx, first, count);
	}
	if (tx->want_count)
		tx->deadline_ns = 0; /* re-armed when the retransmissions are out */
	else
		tx->deadline_ns = now + tx->conn->cfg.rto_ns;
}

/* No ACK rto after the last packet: the tail (or every packet) may be
 * lost; ask the receiver, which NACKs what it lacks. */
static void sr_tx_tick(struct ql_sdr_send *tx, uint64_t now)
{
	if (!tx->deadline_ns || now < tx->deadline_ns || tx->want_count)
		return;
	tx->conn->st.timeouts++;
	if (!sr_tx_round(tx))
		return;
	ql_sdr__tx_ctrl(tx, QL_SDR_C_ACK_REQ, 0, 0, NULL, 0);
	tx->deadline_ns = now + tx->conn->cfg.rto_ns;
}

/* NACK the missing packets below limit, in as many control messages as it
 * takes (at most 32 per round; the next round resumes). a = missing in
 * all, which the sender watches for progress. */
/* NACK the packets below `limit` still missing, as ranges, from `from` on
 * and wrapping to 0 once (at most 32 messages of QL_SDR_NACK_RANGES
 * ranges); `missing` is what the message lacks in all. Returns where the
 * next NACK starts. Shared by the schemes that repair by retransmission
 * (selective repeat, and erasure coding's fallback). */
uint32_t ql_sdr__rx_nack(struct ql_sdr_recv *rx, uint32_t from, uint32_t limit, uint32_t missing,
			 uint64_t now)
{
	struct ql_sdr_range r[QL_SDR_NACK_RANGES];
	uint8_t pl[QL_SDR_NACK_RANGES * 8];

	for (int k = 0; k < 32; k++) {
		uint32_t n = ql_sdr__rx_missing(rx, from, limit, r, QL_SDR_NACK_RANGES);

		if (!n) {
			if (from == 0)
				break;
			from = 0;
			continue;
		}
		for (uint32_t i = 0; i < n; i++) {
			uint8_t *p = pl + 8 * i;

			p[0] = (uint8_t)(r[i].first >> 24);
			p[1] = (uint8_t)(r[i].first >> 16);
			p[2] = (uint8_t)(r[i].first >> 8);
			p[3] = (uint8_t)r[i].first;
			p[4] = (uint8_t)(r[i].count >> 24);
			p[5] = (uint8_t)(r[i].count >> 16);
			p[6] = (uint8_t)(r[i].count >> 8);
			p[7] = (uint8_t)r[i].count;
		}
		if (ql_sdr__rx_ctrl(rx, QL_SDR_C_NACK, missing, n, pl, n * 8))
			break;
		rx->conn->st.nacks_sent++;
		from = r[n - 1].first + r[n - 1].count;
		if (n < QL_SDR_NACK_RANGES) {
			from = 0;
			break;
		}
	}
	rx->last_nack_ns = now;
	return from;
}

static void sr_nack(struct ql_sdr_recv *rx, uint32_t limit, uint64_t now)
{
	struct sr_rx *s = rx->priv;
	uint32_t missing = ql_sdr__rx_missing_count(rx, rx->npkts);
	uint32_t from = s->nack_from < limit ? s->nack_from : 0;

	if (!missing || !limit)
		return;
	s->nack_from = ql_sdr__rx_nack(rx, from, limit, missing, now);
}

static void sr_rx_on_complete(struct ql_sdr_recv *rx, uint64_t now)
{
	(void)now;
	rx->conn->st.acks_sent++;
	ql_sdr__rx_ctrl(rx, QL_SDR_C_ACK, 0, 0, NULL, 0);
}

static void sr_rx_on_ctrl(struct ql_sdr_recv *rx, const struct ql_sdr_ctrl *m, uint64_t now)
{
	if (m->type == QL_SDR_C_ACK_REQ) {
		/* the sender has posted everything: the tail counts too */
		((struct sr_rx *)rx->priv)->nack_from = 0;
		sr_nack(rx, rx->npkts, now);
	}
}

/* Gaps below the highest packet that arrived, and quiet for nack_delay
 * since the last packet or NACK: NACK them. What lies beyond may not have
 * been sent yet (credits): a lost tail is the sender's timer's business
 * (ACK_REQ), as is a sender that went silent. */
static void sr_rx_tick(struct ql_sdr_recv *rx, uint64_t now)
{
	uint64_t last = rx->last_pkt_ns > rx->last_nack_ns ? rx->last_pkt_ns : rx->last_nack_ns;
	uint32_t done = atomic_load_explicit(&rx->pkts_done, memory_order_relaxed);

	if (!rx->last_pkt_ns || now - last < rx->conn->cfg.nack_delay_ns)
		return;
	if (done == rx->pkts_at_nack) {
		if (rx->retries >= rx->conn->cfg.max_retries)
			return; /* leave it to the sender's timer */
		rx->retries++;
	} else {
		rx->retries = 0;
	}
	rx->pkts_at_nack = done;
	if (ql_sdr__rx_missing_count(rx, rx->pkt_high))
		sr_nack(rx, rx->pkt_high, now);
}

const struct ql_sdr_ops ql_sdr_ops_sr = {
	.rel = QL_SDR_REL_SR,
	.name = "sr",
	.tx_priv_size = sizeof(struct sr_tx),
	.rx_priv_size = sizeof(struct sr_rx),
	.tx_start = sr_tx_start,
	.tx_on_sent = sr_tx_on_sent,
	.tx_on_ctrl = sr_tx_on_ctrl,
	.tx_tick = sr_tx_tick,
	.rx_on_complete = sr_rx_on_complete,
	.rx_on_ctrl = sr_rx_on_ctrl,
	.rx_tick = sr_rx_tick,
};
