/* SPDX-License-Identifier: MIT */
/*
 * sdr/ec: the erasure code (ISA-L Reed-Solomon over GF(2^8), Cauchy matrix)
 * and the stripe geometry. See ec.h.
 */
#include "sdr/ec.h"

#include <errno.h>
#include <isa-l/erasure_code.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "qlink/error.h"
#include "qlink/sdr_ec.h"
#include "sdr/sdr_int.h"

struct sdr_ec_codec {
	unsigned int k, m;
	size_t chunk;
	/* (k+m) x k generator: identity on top (systematic), Cauchy below */
	uint8_t gen[(SDR_EC_K_MAX + SDR_EC_M_MAX) * SDR_EC_K_MAX];
	uint8_t enc_tbls[32 * SDR_EC_K_MAX * SDR_EC_M_MAX];
	/* decode scratch: the k rows of what arrived, its inverse, the rows
	 * that give the missing data chunks, their tables */
	uint8_t sub[SDR_EC_K_MAX * SDR_EC_K_MAX];
	uint8_t inv[SDR_EC_K_MAX * SDR_EC_K_MAX];
	uint8_t rows[SDR_EC_M_MAX * SDR_EC_K_MAX];
	uint8_t dec_tbls[32 * SDR_EC_K_MAX * SDR_EC_M_MAX];
	uint8_t *srcs[SDR_EC_K_MAX];
	uint8_t *outs[SDR_EC_M_MAX];
	uint8_t *zero; /* chunk bytes of zeros */
	uint8_t *pad;  /* chunk bytes of scratch */
};

int ql__sdr_ec_codec_create(unsigned int k, unsigned int m, size_t chunk, struct sdr_ec_codec **out)
{
	struct sdr_ec_codec *c;

	if (!out)
		return ql_error_set(-EINVAL, "sdr ec: no output pointer");
	*out = NULL;
	if (k < 1 || k > SDR_EC_K_MAX || m < 1 || m > SDR_EC_M_MAX)
		return ql_error_set(-EINVAL, "sdr ec: k=%u m=%u out of range (k 1..%d, m 1..%d)", k,
				    m, SDR_EC_K_MAX, SDR_EC_M_MAX);
	if (chunk < 1 || chunk > (size_t)INT32_MAX)
		return ql_error_set(-EINVAL, "sdr ec: chunk size %zu out of range", chunk);
	c = calloc(1, sizeof(*c));
	if (!c)
		return ql_error_set(-ENOMEM, "sdr ec: out of memory");
	c->k = k;
	c->m = m;
	c->chunk = chunk;
	c->zero = calloc(1, chunk);
	c->pad = calloc(1, chunk);
	if (!c->zero || !c->pad) {
		ql__sdr_ec_codec_destroy(c);
		return ql_error_set(-ENOMEM, "sdr ec: out of memory for %zu-byte chunks", chunk);
	}
	/* Cauchy rather than ISA-L's Vandermonde-style gf_gen_rs_matrix: every
	 * square submatrix of a Cauchy matrix is invertible, so any k of the
	 * k+m chunks decode for every k and m (the RS one only for small m). */
	gf_gen_cauchy1_matrix(c->gen, (int)(k + m), (int)k);
	ec_init_tables((int)k, (int)m, &c->gen[k * k], c->enc_tbls);
	*out = c;
	return 0;
}

void ql__sdr_ec_codec_destroy(struct sdr_ec_codec *c)
{
	if (!c)
		return;
	free(c->zero);
	free(c->pad);
	free(c);
}

unsigned int ql__sdr_ec_codec_k(const struct sdr_ec_codec *c)
{
	return c->k;
}

unsigned int ql__sdr_ec_codec_m(const struct sdr_ec_codec *c)
{
	return c->m;
}

size_t ql__sdr_ec_codec_chunk(const struct sdr_ec_codec *c)
{
	return c->chunk;
}

const uint8_t *ql__sdr_ec_codec_zero(const struct sdr_ec_codec *c)
{
	return c->zero;
}

uint8_t *ql__sdr_ec_codec_pad(struct sdr_ec_codec *c)
{
	return c->pad;
}

void ql__sdr_ec_encode(struct sdr_ec_codec *c, const uint8_t *const *data, uint8_t *const *parity,
		       size_t len)
{
	unsigned int i;

	if (len == 0 || len > c->chunk)
		return;
	/* ISA-L takes non-const pointer arrays; it only reads the sources */
	for (i = 0; i < c->k; i++)
		c->srcs[i] = (uint8_t *)(uintptr_t)data[i];
	for (i = 0; i < c->m; i++)
		c->outs[i] = parity[i];
	ec_encode_data((int)len, (int)c->k, (int)c->m, c->enc_tbls, c->srcs, c->outs);
}

int ql__sdr_ec_decode(struct sdr_ec_codec *c, uint64_t present, uint8_t *const *chunks, size_t len)
{
	unsigned int n = c->k + c->m, k = c->k, i, j, got = 0, nerr = 0;
	uint8_t missing[SDR_EC_M_MAX];

	if (len > c->chunk || (n < 64 && (present >> n) != 0))
		return -EINVAL;
	for (i = 0; i < k; i++)
		if (!(present & (1ull << i))) {
			if (nerr == c->m)
				return -EAGAIN; /* more than m data chunks lost */
			missing[nerr++] = (uint8_t)i;
		}
	if (nerr == 0)
		return 0;
	/* the first k chunks that arrived, and their generator rows */
	for (i = 0; i < n && got < k; i++) {
		if (!(present & (1ull << i)))
			continue;
		memcpy(&c->sub[got * k], &c->gen[i * k], k);
		c->srcs[got++] = chunks[i];
	}
	if (got < k)
		return -EAGAIN;
	if (len == 0)
		return (int)nerr;
	/* sub * data = received, so data = inv * received: the rows of inv of
	 * the missing data chunks rebuild them */
	if (gf_invert_matrix(c->sub, c->inv, (int)k) != 0)
		return -EIO; /* cannot happen for a Cauchy code */
	for (j = 0; j < nerr; j++) {
		memcpy(&c->rows[j * k], &c->inv[missing[j] * k], k);
		c->outs[j] = chunks[missing[j]];
	}
	ec_init_tables((int)k, (int)nerr, c->rows, c->dec_tbls);
	ec_encode_data((int)len, (int)k, (int)nerr, c->dec_tbls, c->srcs, c->outs);
	return (int)nerr;
}

/* ---- geometry -------------------------------------------------------- */

int ql__sdr_ec_geom_init(struct sdr_ec_geom *g, uint64_t len, uint32_t chunk, uint32_t k,
			 uint32_t m)
{
	uint64_t nchunks, nstripes;

	memset(g, 0, sizeof(*g));
	if (chunk == 0 || k == 0 || m == 0 || k > SDR_EC_K_MAX || m > SDR_EC_M_MAX)
		return -EINVAL;
	nchunks = len == 0 ? 1 : (len - 1) / chunk + 1;
	if (nchunks > UINT32_MAX)
		return -EINVAL;
	nstripes = (nchunks + k - 1) / k;
	/* nstripes * m * chunk: nstripes < 2^32, m <= 16, chunk < 2^32 */
	if (nstripes * m > UINT64_MAX / chunk)
		return -EINVAL;
	g->len = len;
	g->chunk = chunk;
	g->k = k;
	g->m = m;
	g->nchunks = (uint32_t)nchunks;
	g->nstripes = (uint32_t)nstripes;
	g->parity_len = nstripes * m * chunk;
	return 0;
}

uint64_t ql__sdr_ec_parity_room(uint64_t max_len, uint32_t chunk, uint32_t k, uint32_t m)
{
	struct sdr_ec_geom g;

	if (ql__sdr_ec_geom_init(&g, max_len, chunk, k, m) != 0)
		return 0;
	return g.parity_len;
}

int ql__sdr_ec_geom_parity_at(const struct sdr_ec_geom *g, uint64_t parity_off, uint32_t *stripe,
			      uint32_t *j)
{
	uint64_t c;

	if (g->chunk == 0 || parity_off >= g->parity_len)
		return -EINVAL;
	c = parity_off / g->chunk;
	*stripe = (uint32_t)(c / g->m);
	*j = (uint32_t)(c % g->m);
	return 0;
}

uint64_t ql_sdr_ec_parity_size(uint64_t max_msg_size, uint32_t k, uint32_t m)
{
	uint64_t worst = 0, p;

	if (k == 0)
		k = QL_SDR_EC_DATA_DEFAULT;
	if (m == 0)
		m = QL_SDR_EC_PARITY_DEFAULT;
	if (k > SDR_EC_K_MAX || m > SDR_EC_M_MAX)
		return 0;
	/* the rounding of the last stripe depends on the MTU: take the worst */
	for (uint32_t mtu = 64; mtu <= 4096; mtu *= 2) {
		p = ql__sdr_ec_parity_room(max_msg_size, mtu, k, m);
		if (p > worst)
			worst = p;
	}
	return (worst + 4095) & ~(uint64_t)4095;
}

/* ---- the EC scheme (struct ql_sdr_ops) ------------------------------------
 *
 * The erasure symbol is one packet (the connection's MTU): stripe s holds
 * data packets s*k .. s*k+k-1 and parity packets ndata + s*m .. ndata + s*m
 * + m-1, which the core places in the slot right after the data's last
 * (padded) packet. Data packets past ndata in the last stripe are zeros
 * that are never sent, and so are the bytes of the last data packet past
 * the message's end (the receiver zeroes them in its slot before the
 * clear-to-send).
 *
 * Sender: encode every stripe's parity at the clear-to-send, queue the data
 * then the parity, and from then on behave as selective repeat (its hooks:
 * timeouts ask for a NACK, a NACK queues what it lists, an ACK ends).
 * Receiver: on each packet, if its stripe lacks data packets but k of its
 * k+m packets are present, rebuild the missing ones in place and mark them
 * (counted as recovered); after quiet for nack_delay, NACK the data packets
 * still missing (those of stripes with fewer than k packets) and nothing
 * else, as selective repeat does.
 */

struct ec_state {
	struct sdr_ec_codec *codec;
	uint32_t k, m, mtu;
	int bad; /* negative errno: EC unusable on this connection (say why at use) */
	bool marking;
	const uint8_t *data[SDR_EC_K_MAX];
	uint8_t *parity[SDR_EC_M_MAX];
	uint8_t *chunks[SDR_EC_K_MAX + SDR_EC_M_MAX];
};

/* the sender's private state is selective repeat's, whose hooks it runs */
#define EC_TX_PRIV 64

struct ec_rx {
	uint32_t nack_from;
	/* data packets [0, sent) are known to have been posted once: a data
	 * packet at or past it arrived, or any parity (queued after all the
	 * data), or the sender's FIN. Only gaps below it are NACKed: the rest
	 * may simply not have been sent yet (credits). */
	uint32_t sent;
};

static struct ec_state *ec_of(const struct ql_sdr_conn *c)
{
	return c->ops_state[QL_SDR_REL_EC];
}

uint16_t ql_sdr__ec_code(const struct ql_sdr_config *cfg)
{
	uint32_t k = cfg->ec_data ? cfg->ec_data : QL_SDR_EC_DATA_DEFAULT;
	uint32_t m = cfg->ec_parity ? cfg->ec_parity : QL_SDR_EC_PARITY_DEFAULT;

	return (uint16_t)((k & 0xff) << 8 | (m & 0xff));
}

static int ec_conn_init(struct ql_sdr_conn *c)
{
	struct ec_state *e = calloc(1, sizeof(*e));
	int rc;

	if (!e)
		return -ENOMEM;
	if (ql_sdr_ops_sr.tx_priv_size > EC_TX_PRIV) {
		free(e);
		return ql_error_set(-EINVAL, "sdr ec: selective repeat's state outgrew EC's");
	}
	e->k = c->cfg.ec_data ? c->cfg.ec_data : QL_SDR_EC_DATA_DEFAULT;
	e->m = c->cfg.ec_parity ? c->cfg.ec_parity : QL_SDR_EC_PARITY_DEFAULT;
	e->mtu = c->mtu;
	rc = ql__sdr_ec_codec_create(e->k, e->m, c->mtu, &e->codec);
	if (rc == -ENOMEM) {
		free(e);
		return rc;
	}
	/* a bad code only makes EC messages fail: the other schemes still work */
	e->bad = rc;
	if (!rc && c->peer.ec_code != ql_sdr__ec_code(&c->cfg))
		e->bad = -EPROTO; /* the peer would read our parity with another code */
	c->ops_state[QL_SDR_REL_EC] = e;
	return 0;
}

static void ec_conn_fini(struct ql_sdr_conn *c)
{
	struct ec_state *e = ec_of(c);

	if (!e)
		return;
	ql__sdr_ec_codec_destroy(e->codec);
	free(e);
	c->ops_state[QL_SDR_REL_EC] = NULL;
}

static uint32_t ec_parity_packets(const struct ql_sdr_conn *c, uint32_t ndata)
{
	const struct ec_state *e = ec_of(c);

	if (!e || e->bad)
		return 0;
	return (ndata + e->k - 1) / e->k * e->m;
}

/* Encode every stripe of tx into its parity packets. */
static int ec_tx_start(struct ql_sdr_send *tx)
{
	struct ql_sdr_conn *c = tx->conn;
	struct ec_state *e = ec_of(c);
	uint32_t s, i, nstripes;

	if (!e || e->bad)
		return e ? e->bad : -EINVAL;
	if (tx->nparity != ec_parity_packets(c, tx->ndata) || !tx->parity)
		return -EMSGSIZE;
	nstripes = tx->nparity / e->m;
	for (s = 0; s < nstripes; s++) {
		for (i = 0; i < e->k; i++) {
			uint32_t p = s * e->k + i;
			uint32_t len;

			if (p >= tx->ndata) {
				e->data[i] = ql__sdr_ec_codec_zero(e->codec);
				continue;
			}
			len = ql_sdr__pkt_len(c, tx->len, tx->ndata, p);
			if (len < e->mtu) { /* the tail, zero-padded */
				uint8_t *pad = ql__sdr_ec_codec_pad(e->codec);

				memcpy(pad, ql_sdr__tx_pkt_addr(tx, p), len);
				memset(pad + len, 0, e->mtu - len);
				e->data[i] = pad;
			} else {
				e->data[i] = ql_sdr__tx_pkt_addr(tx, p);
			}
		}
		for (i = 0; i < e->m; i++)
			e->parity[i] = ql_sdr__tx_pkt_addr(tx, tx->ndata + s * e->m + i);
		ql__sdr_ec_encode(e->codec, e->data, e->parity, e->mtu);
	}
	/* data first, then parity: selective repeat's start queues all */
	if (ql_sdr_ops_sr.tx_start)
		return ql_sdr_ops_sr.tx_start(tx);
	ql_sdr__tx_queue(tx, 0, tx->npkts);
	return 0;
}

static int ec_rx_start(struct ql_sdr_recv *rx)
{
	struct ql_sdr_conn *c = rx->conn;
	struct ec_state *e = ec_of(c);
	struct ec_rx *r = rx->priv;
	uint64_t end = (uint64_t)rx->ndata * c->mtu;

	if (!e || e->bad)
		return e ? e->bad : -EINVAL;
	if (rx->nparity != ec_parity_packets(c, rx->ndata))
		return -EMSGSIZE;
	r->nack_from = 0;
	/* the encoder took the last packet's bytes past the end as zeros */
	if (end > rx->len)
		memset(rx->addr + rx->len, 0, end - rx->len);
	return 0;
}

/* Rebuild stripe s of rx if it lacks data and k of its packets are here. */
static void ec_try_stripe(struct ql_sdr_recv *rx, struct ec_state *e, uint32_t s, uint64_t now)
{
	uint32_t i, present = 0, missing = 0, first = s * e->k;
	uint64_t mask = 0;
	int rc;

	for (i = 0; i < e->k; i++) {
		uint32_t p = first + i;

		if (p >= rx->ndata || ql_sdr__bit(rx->pkt_bits, p)) {
			mask |= 1ull << i;
			present++;
		} else {
			missing++;
		}
		e->chunks[i] = p >= rx->ndata ?
				       (uint8_t *)(uintptr_t)ql__sdr_ec_codec_zero(e->codec) :
				       ql_sdr__rx_pkt_addr(rx, p);
	}
	if (!missing)
		return;
	for (i = 0; i < e->m; i++) {
		uint32_t p = rx->ndata + s * e->m + i;

		if (ql_sdr__bit(rx->pkt_bits, p)) {
			mask |= 1ull << (e->k + i);
			present++;
		}
		e->chunks[e->k + i] = ql_sdr__rx_pkt_addr(rx, p);
	}
	if (present < e->k)
		return;
	rc = ql__sdr_ec_decode(e->codec, mask, e->chunks, e->mtu);
	if (rc <= 0)
		return;
	/* the rebuilt packets count as arrived: bits, chunks, completion */
	e->marking = true;
	for (i = 0; i < e->k; i++)
		if (!(mask & (1ull << i)))
			ql_sdr__rx_mark(rx, first + i, 1, now);
	e->marking = false;
}

static void ec_rx_on_packet(struct ql_sdr_recv *rx, uint32_t pkt, uint64_t now)
{
	struct ec_state *e = ec_of(rx->conn);
	struct ec_rx *r;
	uint32_t s;

	if (!e || e->bad || e->marking || pkt >= rx->npkts)
		return;
	r = rx->priv;
	if (pkt >= rx->ndata)
		r->sent = rx->ndata;
	else if (pkt + 1 > r->sent)
		r->sent = pkt + 1;
	s = pkt < rx->ndata ? pkt / e->k : (pkt - rx->ndata) / e->m;
	ec_try_stripe(rx, e, s, now);
}

/* NACK the missing data packets (the parity is not worth asking for: what
 * is still missing lies in stripes that need their own data back). */
static void ec_nack(struct ql_sdr_recv *rx, uint64_t now)
{
	struct ec_rx *r = rx->priv;
	uint32_t limit = r->sent < rx->ndata ? r->sent : rx->ndata;
	uint32_t missing = ql_sdr__rx_missing_count(rx, limit);
	uint32_t from = r->nack_from < limit ? r->nack_from : 0;

	if (!missing)
		return;
	r->nack_from = ql_sdr__rx_nack(rx, from, limit, missing, now);
}

static void ec_rx_on_ctrl(struct ql_sdr_recv *rx, const struct ql_sdr_ctrl *m, uint64_t now)
{
	struct ec_rx *r = rx->priv;

	if (m->type == QL_SDR_C_FIN) {
		r->sent = rx->ndata;
	} else if (m->type == QL_SDR_C_ACK_REQ) {
		/* the sender timed out: everything was posted once */
		r->sent = rx->ndata;
		r->nack_from = 0;
		ec_nack(rx, now);
	}
}

/* As selective repeat: gaps and quiet for nack_delay since the last packet
 * or NACK, then NACK (parity that did not come is not waited for). */
static void ec_rx_tick(struct ql_sdr_recv *rx, uint64_t now)
{
	uint64_t last = rx->last_pkt_ns > rx->last_nack_ns ? rx->last_pkt_ns : rx->last_nack_ns;
	uint32_t done = atomic_load_explicit(&rx->pkts_done, memory_order_relaxed);

	if (!rx->last_pkt_ns || now - last < rx->conn->cfg.nack_delay_ns)
		return;
	if (done == rx->pkts_at_nack) {
		if (rx->retries >= rx->conn->cfg.max_retries)
			return; /* the sender's timer's business */
		rx->retries++;
	} else {
		rx->retries = 0;
	}
	rx->pkts_at_nack = done;
	ec_nack(rx, now);
}

static void ec_rx_on_complete(struct ql_sdr_recv *rx, uint64_t now)
{
	if (ql_sdr_ops_sr.rx_on_complete) /* the ACK */
		ql_sdr_ops_sr.rx_on_complete(rx, now);
}

/* Every queued packet posted: tell the receiver (FIN: it may NACK any gap
 * now), then selective repeat's timer. */
static void ec_tx_on_sent(struct ql_sdr_send *tx, uint64_t now)
{
	ql_sdr__tx_ctrl(tx, QL_SDR_C_FIN, 0, 0, NULL, 0);
	if (ql_sdr_ops_sr.tx_on_sent)
		ql_sdr_ops_sr.tx_on_sent(tx, now);
}

static void ec_tx_on_ctrl(struct ql_sdr_send *tx, const struct ql_sdr_ctrl *m, uint64_t now)
{
	if (ql_sdr_ops_sr.tx_on_ctrl)
		ql_sdr_ops_sr.tx_on_ctrl(tx, m, now);
}

static void ec_tx_tick(struct ql_sdr_send *tx, uint64_t now)
{
	if (ql_sdr_ops_sr.tx_tick)
		ql_sdr_ops_sr.tx_tick(tx, now);
}

const struct ql_sdr_ops ql_sdr_ops_ec = {
	.rel = QL_SDR_REL_EC,
	.name = "ec",
	.tx_priv_size = EC_TX_PRIV,
	.rx_priv_size = sizeof(struct ec_rx),
	.conn_init = ec_conn_init,
	.conn_fini = ec_conn_fini,
	.parity_packets = ec_parity_packets,
	.tx_start = ec_tx_start,
	.tx_on_sent = ec_tx_on_sent,
	.tx_on_ctrl = ec_tx_on_ctrl,
	.tx_tick = ec_tx_tick,
	.rx_start = ec_rx_start,
	.rx_on_packet = ec_rx_on_packet,
	.rx_on_complete = ec_rx_on_complete,
	.rx_on_ctrl = ec_rx_on_ctrl,
	.rx_tick = ec_rx_tick,
};
