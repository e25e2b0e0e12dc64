/* SPDX-License-Identifier: MIT */
/*
 * The SDR receiver: the backend (data receive CQ -> bitmaps, receives
 * re-posted), the chunk and completion accounting, the scheme helpers of
 * the receive side and the receive API.
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

/* ---- the receive side --------------------------------------------------- */

int ql_sdr__post_data_recvs(struct ql_sdr_conn *c, uint32_t n)
{
	struct ibv_recv_wr *bad;

	while (n) {
		uint32_t k = n < QL_SDR_POST_BATCH ? n : QL_SDR_POST_BATCH;
		int rc;

		for (uint32_t i = 0; i < k; i++) {
			c->rwrs[i].wr_id = 0;
			c->rwrs[i].sg_list = NULL;
			c->rwrs[i].num_sge = 0;
			c->rwrs[i].next = i + 1 < k ? &c->rwrs[i + 1] : NULL;
		}
		rc = ql_qp_post_recv(c->data_qp, c->rwrs, &bad);
		if (rc)
			return rc;
		n -= k;
	}
	return 0;
}

void *ql_sdr__rx_pkt_addr(const struct ql_sdr_recv *rx, uint32_t pkt)
{
	return rx->addr + ql_sdr__pkt_offset(rx->conn, pkt);
}

void ql_sdr__rx_complete(struct ql_sdr_recv *rx, int status)
{
	struct ql_sdr_conn *c = rx->conn;

	if (atomic_load_explicit(&rx->state, memory_order_relaxed) != QL_SDR_S_ACTIVE)
		return;
	rx->status = status;
	atomic_store_explicit(&rx->state, QL_SDR_S_DONE, memory_order_release);
	c->st.msgs_received++;
	if (rx->cb)
		rx->cb(rx, status, rx->arg);
}

/* A new bit for packet pkt: the scheme's packet hook (for packets from the
 * wire, not for those the scheme rebuilt itself), then chunk and
 * completion accounting. */
static void rx_account(struct ql_sdr_recv *rx, uint32_t pkt, uint64_t now, bool wire)
{
	struct ql_sdr_conn *c = rx->conn;

	atomic_fetch_add_explicit(&rx->pkts_done, 1, memory_order_relaxed);
	if (wire && rx->ops->rx_on_packet)
		rx->ops->rx_on_packet(rx, pkt, now);
	if (atomic_load_explicit(&rx->state, memory_order_relaxed) != QL_SDR_S_ACTIVE)
		return; /* the hook ended the message */
	if (pkt < rx->ndata) {
		uint32_t ch = pkt / c->cfg.chunk_packets;
		uint32_t in = ch + 1 < rx->nchunks ? c->cfg.chunk_packets :
						     rx->ndata - ch * c->cfg.chunk_packets;

		if (atomic_fetch_add_explicit(&rx->chunk_count[ch], 1, memory_order_relaxed) + 1 ==
		    in) {
			atomic_fetch_or_explicit(&rx->chunk_bits[ch / 64], 1ull << (ch % 64),
						 memory_order_release);
			if (rx->ops->rx_on_chunk)
				rx->ops->rx_on_chunk(rx, ch, now);
			if (rx->chunk_cb)
				rx->chunk_cb(rx, ch, rx->arg);
			if (atomic_fetch_add_explicit(&rx->chunks_done, 1, memory_order_acq_rel) +
				    1 ==
			    rx->nchunks) {
				if (rx->ops->rx_on_complete)
					rx->ops->rx_on_complete(rx, now);
				ql_sdr__rx_complete(rx, 0);
			}
		}
	}
}

void ql_sdr__rx_mark(struct ql_sdr_recv *rx, uint32_t first, uint32_t count, uint64_t now)
{
	for (uint32_t p = first; p < rx->npkts && p - first < count; p++) {
		uint64_t bit = 1ull << (p % 64);

		if (atomic_fetch_or_explicit(&rx->pkt_bits[p / 64], bit, memory_order_acq_rel) &
		    bit)
			continue;
		rx->conn->st.pkts_recovered++;
		rx_account(rx, p, now, false);
	}
}

uint32_t ql_sdr__rx_missing(const struct ql_sdr_recv *rx, uint32_t from, uint32_t limit,
			    struct ql_sdr_range *r, uint32_t max)
{
	uint32_t n = 0, p = from;

	if (limit > rx->npkts)
		limit = rx->npkts;
	while (p < limit && n < max) {
		uint64_t w = ~atomic_load_explicit(&rx->pkt_bits[p / 64], memory_order_acquire);
		uint32_t q;

		w &= ~0ull << (p % 64);
		if (!w) {
			p = (p / 64 + 1) * 64;
			continue;
		}
		p = (p / 64) * 64 + (uint32_t)__builtin_ctzll(w);
		if (p >= limit)
			break;
		q = p + 1;
		while (q < limit && !ql_sdr__bit(rx->pkt_bits, q))
			q++;
		r[n].first = p;
		r[n].count = q - p;
		n++;
		p = q;
	}
	return n;
}

uint32_t ql_sdr__rx_missing_count(const struct ql_sdr_recv *rx, uint32_t limit)
{
	uint32_t have = 0;

	if (limit > rx->npkts)
		limit = rx->npkts;
	for (uint32_t w = 0; w < limit / 64; w++)
		have += (uint32_t)__builtin_popcountll(
			atomic_load_explicit(&rx->pkt_bits[w], memory_order_acquire));
	for (uint32_t p = limit / 64 * 64; p < limit; p++)
		have += ql_sdr__bit(rx->pkt_bits, p);
	return limit - have;
}

/* One receive completion of the data QP: validated against what this side
 * posted, never against what the packet claims (docs/design.md "Trust"). */
static void rx_packet(struct ql_sdr_conn *c, const struct ibv_wc *wc, uint64_t now)
{
	uint32_t id, pkt, user;
	struct ql_sdr_recv *rx;
	uint64_t bit;

	if (wc->status != IBV_WC_SUCCESS) {
		c->st.recv_errors++;
		if (wc->status == IBV_WC_WR_FLUSH_ERR)
			c->broken = -ECONNRESET;
		return;
	}
	if (wc->opcode != IBV_WC_RECV_RDMA_WITH_IMM || !(wc->wc_flags & IBV_WC_WITH_IMM)) {
		c->st.drop_bad_len++;
		return;
	}
	ql_sdr_imm_decode(wc->imm_data, &id, &pkt, &user);
	if (id >= c->cfg.slots) {
		c->st.drop_bad_id++;
		return;
	}
	rx = &c->rx[id];
	if (atomic_load_explicit(&rx->state, memory_order_acquire) != QL_SDR_S_ACTIVE) {
		c->st.drop_bad_id++;
		return;
	}
	if (pkt >= rx->npkts) {
		c->st.drop_bad_offset++;
		return;
	}
	if (wc->byte_len != ql_sdr__pkt_len(c, rx->len, rx->ndata, pkt)) {
		c->st.drop_bad_len++;
		return;
	}
	bit = 1ull << (pkt % 64);
	if (atomic_fetch_or_explicit(&rx->pkt_bits[pkt / 64], bit, memory_order_acq_rel) & bit) {
		c->st.pkts_duplicate++;
		return;
	}
	c->st.pkts_received++;
	rx->last_pkt_ns = now;
	if (pkt >= rx->pkt_high)
		rx->pkt_high = pkt + 1;
	atomic_store_explicit(&rx->user, user, memory_order_relaxed);
	rx_account(rx, pkt, now, true);
}

int ql_sdr_recv_post(struct ql_sdr_conn *c, size_t len, const struct ql_sdr_recv_opts *opts,
		     struct ql_sdr_recv **out)
{
	struct ql_sdr_recv_opts o = { .rel = QL_SDR_REL_SR };
	const struct ql_sdr_ops *ops;
	struct ql_sdr_slot s;
	struct ql_sdr_recv *rx;
	uint32_t ndata, npar;
	uint64_t stride;
	int rc;

	if (!c || !out)
		return -EINVAL;
	if (!c->connected)
		return ql_error_set(-ENOTCONN, "sdr: not connected");
	if (opts)
		o = *opts;
	ops = ql_sdr_ops_table(o.rel);
	if (!ops)
		return ql_error_set(-EOPNOTSUPP, "sdr: reliability %s not built in",
				    ql_sdr_rel_name(o.rel));
	if (len == 0 || len > c->cfg.max_msg_size)
		return ql_error_set(-EMSGSIZE, "sdr: receive of %zu bytes (1..%llu)", len,
				    (unsigned long long)c->cfg.max_msg_size);
	ndata = (uint32_t)((len + c->mtu - 1) / c->mtu);
	npar = ops->parity_packets ? ops->parity_packets(c, ndata) : 0;
	stride = ql_sdr_mem_slot_stride(c->mem);
	if ((uint64_t)ndata + npar > c->rx_max_pkts || ((uint64_t)ndata + npar) * c->mtu > stride)
		return ql_error_set(-EMSGSIZE, "sdr: %u data + %u parity packets do not fit a slot",
				    ndata, npar);
	if (c->ctrl_backlog_count == c->ctrl_depth)
		return -EAGAIN;
	rc = ql_sdr_mem_alloc_any(c->mem, len, &s);
	if (rc)
		return rc == -ENOSPC ? ql_error_set(rc, "sdr: every slot is in use") : rc;
	rx = &c->rx[s.msg_id];
	rx->ops = ops;
	rx->rel = o.rel;
	rx->gen = ++c->gen_next;
	rx->addr = s.addr;
	rx->len = len;
	rx->ndata = ndata;
	rx->nparity = npar;
	rx->npkts = ndata + npar;
	rx->nchunks = (ndata + c->cfg.chunk_packets - 1) / c->cfg.chunk_packets;
	memset((void *)rx->pkt_bits, 0, (rx->npkts + 63) / 64 * sizeof(uint64_t));
	memset((void *)rx->chunk_bits, 0, (rx->nchunks + 63) / 64 * sizeof(uint64_t));
	memset((void *)rx->chunk_count, 0, rx->nchunks * sizeof(uint32_t));
	atomic_store(&rx->pkts_done, 0);
	atomic_store(&rx->chunks_done, 0);
	atomic_store(&rx->user, 0);
	rx->status = 0;
	rx->cts_ns = ql_clock_ns();
	rx->last_pkt_ns = 0;
	rx->last_nack_ns = 0;
	rx->pkt_high = 0;
	rx->retries = 0;
	rx->pkts_at_nack = 0;
	rx->fin = false;
	rx->cb = o.on_complete;
	rx->chunk_cb = o.on_chunk;
	rx->arg = o.arg;
	if (rx->priv)
		memset(rx->priv, 0, c->rx_priv_max);
	if (ops->rx_start && (rc = ops->rx_start(rx))) {
		ql_sdr_mem_free(c->mem, s.msg_id);
		return rc;
	}
	atomic_store_explicit(&rx->state, QL_SDR_S_ACTIVE, memory_order_release);
	rc = ql_sdr__rx_ctrl(rx, QL_SDR_C_CTS, (uint32_t)len, (uint32_t)((uint64_t)len >> 32), NULL,
			     0);
	if (rc) {
		atomic_store(&rx->state, QL_SDR_S_FREE);
		ql_sdr_mem_free(c->mem, s.msg_id);
		return rc;
	}
	*out = rx;
	return 0;
}

int ql_sdr_recv_poll(const struct ql_sdr_recv *rx, int *status)
{
	if (atomic_load_explicit(&rx->state, memory_order_acquire) != QL_SDR_S_DONE)
		return 0;
	if (status)
		*status = rx->status;
	return 1;
}

int ql_sdr_recv_release(struct ql_sdr_recv *rx)
{
	struct ql_sdr_conn *c;
	int st;

	if (!rx)
		return -EINVAL;
	c = rx->conn;
	st = atomic_load(&rx->state);
	if (st == QL_SDR_S_FREE)
		return -EINVAL;
	if (st == QL_SDR_S_ACTIVE)
		ql_sdr__rx_ctrl(rx, QL_SDR_C_FAIL, ECONNABORTED, 0, NULL, 0);
	atomic_store_explicit(&rx->state, QL_SDR_S_FREE, memory_order_release);
	return ql_sdr_mem_free(c->mem, rx->msg_id);
}

void *ql_sdr_recv_data(const struct ql_sdr_recv *rx)
{
	return rx->addr;
}
size_t ql_sdr_recv_len(const struct ql_sdr_recv *rx)
{
	return (size_t)rx->len;
}
uint32_t ql_sdr_recv_msg_id(const struct ql_sdr_recv *rx)
{
	return rx->msg_id;
}
uint32_t ql_sdr_recv_packets(const struct ql_sdr_recv *rx)
{
	return rx->ndata;
}
uint32_t ql_sdr_recv_chunks(const struct ql_sdr_recv *rx)
{
	return rx->nchunks;
}
bool ql_sdr_recv_packet_done(const struct ql_sdr_recv *rx, uint32_t pkt)
{
	return pkt < rx->npkts && ql_sdr__bit(rx->pkt_bits, pkt);
}
bool ql_sdr_recv_chunk_done(const struct ql_sdr_recv *rx, uint32_t ch)
{
	return ch < rx->nchunks && ql_sdr__bit(rx->chunk_bits, ch);
}
uint32_t ql_sdr_recv_user(const struct ql_sdr_recv *rx)
{
	return atomic_load_explicit(&rx->user, memory_order_relaxed);
}

uint32_t ql_sdr_recv_bitmap(const struct ql_sdr_recv *rx, uint64_t *words, size_t nwords)
{
	uint32_t n = 0, nw = (rx->ndata + 63) / 64;

	for (uint32_t i = 0; i < nw; i++) {
		uint64_t w = atomic_load_explicit(&rx->pkt_bits[i], memory_order_acquire);

		if (i + 1 == nw && rx->ndata % 64)
			w &= (1ull << (rx->ndata % 64)) - 1;
		n += (uint32_t)__builtin_popcountll(w);
		if (words && i < nwords)
			words[i] = w;
	}
	return n;
}

/* The backend: packets -> bitmaps, receives re-posted at once; drained, so
 * that a credit report right after counts everything that has arrived.
 * Returns the completions handled or a negative errno. */
int ql_sdr__rx_drain(struct ql_sdr_conn *c, uint64_t now)
{
	struct ibv_wc *wc = c->dwcs;
	int events = 0;

	for (uint32_t k = 0; k <= c->recv_depth / QL_SDR_POST_BATCH; k++) {
		int rc, n = ql_cq_poll(c->data_rcq, QL_SDR_POST_BATCH, wc);

		if (n < 0)
			return c->broken = n;
		if (n == 0)
			break;
		for (int i = 0; i < n; i++)
			rx_packet(c, &wc[i], now);
		c->consumed += (uint64_t)n;
		rc = ql_sdr__post_data_recvs(c, (uint32_t)n);
		if (rc && !c->broken)
			c->broken = rc;
		events += n;
	}
	return events;
}
