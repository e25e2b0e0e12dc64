/* SPDX-License-Identifier: MIT */
/*
 * The SDR core: set-up, the control path, credits, posting packets, the
 * backend (receive CQ -> bitmaps) and dispatch to the reliability schemes
 * (sdr_int.h). docs/sdr.md is the specification.
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

#define SDR_CTRL_MIN_DEPTH 64
#define SDR_TICK_NS 50000ull /* the schemes' timers run at most this often */

const struct ql_sdr_ops *ql_sdr_ops_table(enum ql_sdr_rel rel)
{
	switch (rel) {
	case QL_SDR_REL_NONE:
		return &ql_sdr_ops_none;
	case QL_SDR_REL_SR:
		return &ql_sdr_ops_sr;
	case QL_SDR_REL_EC:
		return &ql_sdr_ops_ec;
	default:
		return NULL;
	}
}

const char *ql_sdr_rel_name(enum ql_sdr_rel rel)
{
	static const char *const n[] = { "none", "sr", "ec" };

	return (unsigned)rel < QL_SDR_REL_COUNT ? n[rel] : "?";
}

int ql_sdr_rel_parse(const char *name, enum ql_sdr_rel *rel)
{
	for (int i = 0; i < QL_SDR_REL_COUNT; i++)
		if (name && strcmp(name, ql_sdr_rel_name((enum ql_sdr_rel)i)) == 0) {
			*rel = (enum ql_sdr_rel)i;
			return 0;
		}
	return ql_error_set(-EINVAL, "sdr: unknown reliability '%s' (none, sr, ec)",
			    name ? name : "(null)");
}

void ql_sdr_config_default(struct ql_sdr_config *c)
{
	memset(c, 0, sizeof(*c));
	c->max_msg_size = 1u << 20;
	c->slots = 16;
	c->chunk_packets = 64;
	c->recv_depth = 256;
	c->send_depth = 256;
	c->rto_ns = 20000000ull;
	c->nack_delay_ns = 2000000ull;
	c->max_retries = 16;
	c->credit_grace_ns = 5000000ull;
}

static uint64_t round_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

static uint32_t mtu_bytes(enum ibv_mtu m)
{
	return (m >= IBV_MTU_256 && m <= IBV_MTU_4096) ? 128u << m : 1024;
}

static bool pow2_mtu(uint32_t m)
{
	return m >= 64 && m <= 4096 && (m & (m - 1)) == 0;
}

/* ---- control messages ------------------------------------------------- */

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}
static void put32(uint8_t *p, uint32_t v)
{
	put16(p, (uint16_t)(v >> 16));
	put16(p + 2, (uint16_t)v);
}
static void put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)(v >> 32));
	put32(p + 4, (uint32_t)v);
}
static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}
static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)get16(p) << 16 | get16(p + 2);
}
static uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) << 32 | get32(p + 4);
}

size_t ql_sdr__ctrl_pack(const struct ql_sdr_ctrl *m, uint8_t *buf)
{
	uint32_t plen = m->plen > sizeof(m->payload) ? (uint32_t)sizeof(m->payload) : m->plen;

	buf[0] = m->type;
	buf[1] = m->rel;
	put16(buf + 2, m->msg_id);
	put32(buf + 4, m->gen);
	put64(buf + 8, m->credit);
	put32(buf + 16, m->a);
	put32(buf + 20, m->b);
	memcpy(buf + QL_SDR_CTRL_HDR, m->payload, plen);
	return QL_SDR_CTRL_HDR + plen;
}

int ql_sdr__ctrl_unpack(const uint8_t *buf, size_t len, struct ql_sdr_ctrl *m)
{
	if (len < QL_SDR_CTRL_HDR || len > QL_SDR_CTRL_MAX)
		return -EBADMSG;
	m->type = buf[0];
	m->rel = buf[1];
	m->msg_id = get16(buf + 2);
	m->gen = get32(buf + 4);
	m->credit = get64(buf + 8);
	m->a = get32(buf + 16);
	m->b = get32(buf + 20);
	m->plen = (uint32_t)(len - QL_SDR_CTRL_HDR);
	memcpy(m->payload, buf + QL_SDR_CTRL_HDR, m->plen);
	return 0;
}

static uint8_t *ctrl_rbuf(struct ql_sdr_conn *c, uint32_t i)
{
	return c->ctrl_buf + (size_t)i * QL_SDR_CTRL_MAX;
}
static uint8_t *ctrl_sbuf(struct ql_sdr_conn *c, uint32_t i)
{
	return c->ctrl_buf + (size_t)(c->ctrl_depth + i) * QL_SDR_CTRL_MAX;
}

static int ctrl_post_recv(struct ql_sdr_conn *c, uint32_t i)
{
	struct ibv_sge sge = { (uintptr_t)ctrl_rbuf(c, i), QL_SDR_CTRL_MAX,
			       ql_mr_lkey(c->ctrl_mr) };
	struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1 }, *bad;

	return ql_qp_post_recv(c->ctrl_qp, &wr, &bad);
}

/* Post one packed message from the send ring slot of ctrl_send_head. */
static int ctrl_post_one(struct ql_sdr_conn *c, const uint8_t *msg, size_t len)
{
	uint32_t i = c->ctrl_send_head % c->ctrl_depth;
	struct ibv_sge sge = { (uintptr_t)ctrl_sbuf(c, i), (uint32_t)len, ql_mr_lkey(c->ctrl_mr) };
	struct ibv_send_wr wr = { .wr_id = c->ctrl_send_head,
				  .sg_list = &sge,
				  .num_sge = 1,
				  .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED },
			   *bad;
	int rc;

	memcpy(ctrl_sbuf(c, i), msg, len);
	rc = ql_qp_post_send(c->ctrl_qp, &wr, &bad);
	if (rc == 0)
		c->ctrl_send_head++;
	return rc;
}

/* Move backlogged control messages to the send queue while it has room. */
static void ctrl_flush(struct ql_sdr_conn *c)
{
	while (c->ctrl_backlog_count && c->ctrl_send_head - c->ctrl_send_done < c->ctrl_depth) {
		uint32_t i = c->ctrl_backlog_head;

		if (ctrl_post_one(c, c->ctrl_backlog + (size_t)i * QL_SDR_CTRL_MAX,
				  c->ctrl_backlog_len[i]))
			return;
		c->ctrl_backlog_head = (i + 1) % c->ctrl_depth;
		c->ctrl_backlog_count--;
	}
}

/* Send m (credit filled in); backlogged when the send queue is full,
 * -EAGAIN when the backlog is full too. */
static int ctrl_send(struct ql_sdr_conn *c, struct ql_sdr_ctrl *m)
{
	uint8_t buf[QL_SDR_CTRL_MAX];
	size_t len;

	m->credit = c->consumed;
	len = ql_sdr__ctrl_pack(m, buf);
	c->consumed_reported = c->consumed;
	ctrl_flush(c);
	if (!c->ctrl_backlog_count && c->ctrl_send_head - c->ctrl_send_done < c->ctrl_depth &&
	    ctrl_post_one(c, buf, len) == 0)
		return 0;
	if (c->ctrl_backlog_count == c->ctrl_depth)
		return -EAGAIN;
	{
		uint32_t i = (c->ctrl_backlog_head + c->ctrl_backlog_count) % c->ctrl_depth;

		memcpy(c->ctrl_backlog + (size_t)i * QL_SDR_CTRL_MAX, buf, len);
		c->ctrl_backlog_len[i] = (uint32_t)len;
		c->ctrl_backlog_count++;
	}
	return 0;
}

static int msg_ctrl(struct ql_sdr_conn *c, uint8_t type, enum ql_sdr_rel rel, uint32_t id,
		    uint32_t gen, uint32_t a, uint32_t b, const void *payload, uint32_t plen)
{
	struct ql_sdr_ctrl m = {
		.type = type, .rel = (uint8_t)rel, .msg_id = (uint16_t)id, .gen = gen, .a = a, .b = b
	};

	if (plen > sizeof(m.payload))
		return -EMSGSIZE;
	if (plen)
		memcpy(m.payload, payload, plen);
	m.plen = plen;
	return ctrl_send(c, &m);
}

int ql_sdr__tx_ctrl(struct ql_sdr_send *tx, uint8_t type, uint32_t a, uint32_t b,
		    const void *payload, uint32_t plen)
{
	return msg_ctrl(tx->conn, type, tx->rel, tx->msg_id, tx->gen, a, b, payload, plen);
}

int ql_sdr__rx_ctrl(struct ql_sdr_recv *rx, uint8_t type, uint32_t a, uint32_t b,
		    const void *payload, uint32_t plen)
{
	uint32_t rel = rx->rel;

	if (type >= QL_SDR_C_EXT_FIRST && type <= QL_SDR_C_EXT_LAST)
		rel |= QL_SDR_REL_TO_SENDER;
	return msg_ctrl(rx->conn, type, (enum ql_sdr_rel)rel, rx->msg_id, rx->gen, a, b, payload,
			plen);
}

/* ---- create / destroy ------------------------------------------------- */

static int make_cq(struct ql_sdr_conn *c, int n, struct ql_cq **cq)
{
	return ql_cq_create(c->dev, n, cq);
}

int ql_sdr_conn_create(struct ql_device *dev, const struct ql_sdr_config *cfg,
		       struct ql_sdr_conn **out)
{
	struct ql_sdr_config d;
	struct ql_sdr_conn *c;
	struct ql_conn_params lp;
	uint64_t stride;
	int rc;

	if (!dev || !out)
		return ql_error_set(-EINVAL, "sdr: NULL argument");
	ql_sdr_config_default(&d);
	if (cfg) {
		struct ql_sdr_config u = *cfg;

#define DEF(f)    \
	if (!u.f) \
		u.f = d.f;
		DEF(max_msg_size)
		DEF(slots)
		DEF(chunk_packets)
		DEF(recv_depth)
		DEF(send_depth)
		DEF(rto_ns)
		DEF(nack_delay_ns)
		DEF(max_retries)
		DEF(credit_grace_ns)
#undef DEF
		d = u;
	}
	if (d.slots > QL_SDR_MAX_MSG_IDS)
		return ql_error_set(-EINVAL, "sdr: %u slots (at most %u message ids)", d.slots,
				    QL_SDR_MAX_MSG_IDS);
	if (d.mtu && !pow2_mtu(d.mtu))
		return ql_error_set(-EINVAL, "sdr: mtu %u (a power of two, 64..4096)", d.mtu);
	if (d.max_msg_size > (1ull << 40) || d.parity_size > (1ull << 40))
		return ql_error_set(-EINVAL, "sdr: max_msg_size/parity_size too large");
	stride = round_up(d.max_msg_size, 4096) + round_up(d.parity_size, 4096);
	if (stride / 64 > QL_SDR_MAX_PACKETS &&
	    (d.mtu ? stride / d.mtu : stride / 64) > QL_SDR_MAX_PACKETS) {
		/* checked precisely per message; only refuse what can never fit */
		if (stride / 4096 > QL_SDR_MAX_PACKETS)
			return ql_error_set(-EINVAL,
					    "sdr: a %llu-byte slot needs more than 2^18 packets",
					    (unsigned long long)stride);
	}
	if (d.recv_depth > 65536 || d.send_depth > 65536)
		return ql_error_set(-EINVAL, "sdr: queue depths above 65536");

	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->cfg = d;
	c->dev = dev;
	c->ctrl_depth = 2 * d.slots + SDR_CTRL_MIN_DEPTH;
	c->reclaim_c = UINT64_MAX;
	rc = ql_pd_alloc(dev, &c->pd);
	if (rc)
		goto fail;
	rc = make_cq(c, (int)d.send_depth, &c->data_scq);
	if (!rc)
		rc = make_cq(c, (int)d.recv_depth, &c->data_rcq);
	if (!rc)
		rc = make_cq(c, (int)c->ctrl_depth, &c->ctrl_scq);
	if (!rc)
		rc = make_cq(c, (int)c->ctrl_depth, &c->ctrl_rcq);
	if (rc)
		goto fail;
	{
		struct ql_qp_init_attr a = { .send_cq = c->data_scq,
					     .recv_cq = c->data_rcq,
					     .cap = { .max_send_wr = d.send_depth,
						      .max_recv_wr = d.recv_depth,
						      .max_send_sge = 1,
						      .max_recv_sge = 1 },
					     .qp_type = IBV_QPT_UC };

		rc = ql_qp_create(c->pd, &a, &c->data_qp);
		if (rc)
			goto fail;
		c->sq_depth = a.cap.max_send_wr < d.send_depth ? a.cap.max_send_wr : d.send_depth;
		c->recv_depth = d.recv_depth;
	}
	{
		struct ql_qp_init_attr a = { .send_cq = c->ctrl_scq,
					     .recv_cq = c->ctrl_rcq,
					     .cap = { .max_send_wr = c->ctrl_depth,
						      .max_recv_wr = c->ctrl_depth,
						      .max_send_sge = 1,
						      .max_recv_sge = 1 },
					     .qp_type = IBV_QPT_RC };

		rc = ql_qp_create(c->pd, &a, &c->ctrl_qp);
		if (rc)
			goto fail;
	}
	c->sig_every = c->sq_depth / 4 ? c->sq_depth / 4 : 1;
	rc = ql_qp_local_params(c->data_qp, &lp);
	if (rc)
		goto fail;
	c->local_mtu = d.mtu ? d.mtu : mtu_bytes(lp.mtu);
	rc = ql_sdr_mem_create(c->pd, stride, d.slots,
			       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, &c->mem);
	if (rc)
		goto fail;
	rc = ql_pd_mem_alloc(c->pd, (size_t)2 * c->ctrl_depth * QL_SDR_CTRL_MAX,
			     (void **)&c->ctrl_buf);
	if (rc) {
		c->ctrl_buf = NULL;
		goto fail;
	}
	rc = ql_mr_reg(c->pd, c->ctrl_buf, (size_t)2 * c->ctrl_depth * QL_SDR_CTRL_MAX,
		       IBV_ACCESS_LOCAL_WRITE, &c->ctrl_mr);
	if (rc)
		goto fail;
	c->ctrl_backlog = calloc(c->ctrl_depth, QL_SDR_CTRL_MAX);
	c->ctrl_backlog_len = calloc(c->ctrl_depth, sizeof(*c->ctrl_backlog_len));
	c->rx = calloc(d.slots, sizeof(*c->rx));
	if (!c->ctrl_backlog || !c->ctrl_backlog_len || !c->rx) {
		rc = -ENOMEM;
		goto fail;
	}
	*out = c;
	return 0;
fail:
	ql_sdr_conn_destroy(c);
	return rc;
}

static void free_tables(struct ql_sdr_conn *c)
{
	for (int r = 0; r < QL_SDR_REL_COUNT; r++) {
		const struct ql_sdr_ops *o = ql_sdr_ops_table((enum ql_sdr_rel)r);

		if (c->ops_inited[r] && o && o->conn_fini)
			o->conn_fini(c);
		c->ops_inited[r] = false;
	}
	if (c->rx)
		for (uint32_t i = 0; i < c->cfg.slots; i++) {
			free(c->rx[i].pkt_bits);
			free(c->rx[i].chunk_bits);
			free(c->rx[i].chunk_count);
			free(c->rx[i].priv);
		}
	if (c->tx)
		for (uint32_t i = 0; i < c->ntx; i++) {
			free(c->tx[i].want);
			free(c->tx[i].sent_once);
			free(c->tx[i].priv);
		}
	free(c->tx);
	c->tx = NULL;
	free(c->tx_wait);
	free(c->cts_q);
	free(c->tx_by_id);
	free(c->peer_id_busy);
	if (c->parity_mr)
		ql_mr_dereg(c->parity_mr);
	if (c->parity_buf)
		ql_pd_mem_free(c->pd, c->parity_buf);
}

int ql_sdr_conn_destroy(struct ql_sdr_conn *c)
{
	if (!c)
		return 0;
	free_tables(c);
	if (c->rx && c->mem)
		for (uint32_t i = 0; i < c->cfg.slots; i++)
			if (atomic_load(&c->rx[i].state) != QL_SDR_S_FREE)
				ql_sdr_mem_free(c->mem, i);
	free(c->rx);
	if (c->data_qp)
		ql_qp_destroy(c->data_qp);
	if (c->ctrl_qp)
		ql_qp_destroy(c->ctrl_qp);
	if (c->ctrl_mr)
		ql_mr_dereg(c->ctrl_mr);
	if (c->ctrl_buf)
		ql_pd_mem_free(c->pd, c->ctrl_buf);
	if (c->mem)
		ql_sdr_mem_destroy(c->mem);
	if (c->data_scq)
		ql_cq_destroy(c->data_scq);
	if (c->data_rcq)
		ql_cq_destroy(c->data_rcq);
	if (c->ctrl_scq)
		ql_cq_destroy(c->ctrl_scq);
	if (c->ctrl_rcq)
		ql_cq_destroy(c->ctrl_rcq);
	free(c->ctrl_backlog);
	free(c->ctrl_backlog_len);
	if (c->pd)
		ql_pd_free(c->pd);
	free(c);
	return 0;
}

/* ---- addressing ------------------------------------------------------- */

int ql_sdr_conn_local_params(struct ql_sdr_conn *c, struct ql_conn_params *data,
			     struct ql_conn_params *ctrl)
{
	int rc;

	if (!c || !data || !ctrl)
		return -EINVAL;
	rc = ql_qp_local_params(c->data_qp, data);
	if (!rc)
		rc = ql_qp_local_params(c->ctrl_qp, ctrl);
	data->qp_type = IBV_QPT_UC;
	ctrl->qp_type = IBV_QPT_RC;
	return rc;
}

int ql_sdr_conn_params_format(struct ql_sdr_conn *c, char *buf, size_t len)
{
	struct ql_conn_params d, r;
	char a[512], b[512];
	int rc = ql_sdr_conn_local_params(c, &d, &r);

	if (rc)
		return rc;
	if (ql_conn_params_format(&d, a, sizeof(a)) < 0 ||
	    ql_conn_params_format(&r, b, sizeof(b)) < 0)
		return -EINVAL;
	return snprintf(buf, len, "data %s ; ctrl %s", a, b);
}

int ql_sdr_conn_params_parse(const char *text, struct ql_conn_params *data,
			     struct ql_conn_params *ctrl)
{
	char tmp[1024];
	char *sep, *d, *r;
	int rc;

	if (!text || !data || !ctrl || strlen(text) >= sizeof(tmp))
		return ql_error_set(-EINVAL, "sdr params: missing or too long");
	strcpy(tmp, text);
	sep = strstr(tmp, " ; ctrl ");
	d = strstr(tmp, "data ");
	if (!sep || d != tmp)
		return ql_error_set(-EINVAL,
				    "sdr params: expected 'data <params> ; ctrl <params>'");
	*sep = 0;
	d = tmp + 5;
	r = sep + 8;
	r[strcspn(r, "\r\n")] = 0;
	rc = ql_conn_params_parse(d, data);
	if (!rc)
		rc = ql_conn_params_parse(r, ctrl);
	if (rc)
		return rc;
	if (data->qp_type != IBV_QPT_UC)
		return ql_error_set(-EINVAL, "sdr params: the data QP must be UC (qp=uc)");
	return 0;
}

/* ---- set-up after the handshake ---------------------------------------- */

#define HELLO_LEN 60

static void hello_pack(const struct ql_sdr_conn *c, uint8_t *p)
{
	struct ql_mr *mr = ql_sdr_mem_root_mr(c->mem);

	put32(p, QL_SDR_HELLO_MAGIC);
	put16(p + 4, QL_SDR_VERSION);
	put16(p + 6, ql_sdr__ec_code(&c->cfg)); /* sdrec: both ends' EC code must agree */
	put64(p + 8, (uintptr_t)ql_mr_addr(mr));
	put32(p + 16, ql_mr_rkey(mr));
	put32(p + 20, c->cfg.slots);
	put64(p + 24, ql_sdr_mem_slot_stride(c->mem));
	put64(p + 32, c->cfg.max_msg_size);
	put64(p + 40, c->cfg.parity_size);
	put32(p + 48, c->local_mtu);
	put32(p + 52, c->recv_depth);
	put32(p + 56, c->cfg.chunk_packets);
}

/* The peer's HELLO, validated: nothing of it is trusted beyond these bounds. */
static int hello_unpack(const uint8_t *p, uint32_t len, struct ql_sdr_peer *h)
{
	if (len < HELLO_LEN || get32(p) != QL_SDR_HELLO_MAGIC || get16(p + 4) != QL_SDR_VERSION)
		return -EPROTO;
	h->ec_code = get16(p + 6);
	h->root_addr = get64(p + 8);
	h->rkey = get32(p + 16);
	h->slots = get32(p + 20);
	h->slot_stride = get64(p + 24);
	h->max_msg_size = get64(p + 32);
	h->parity_size = get64(p + 40);
	h->mtu = get32(p + 48);
	h->recv_depth = get32(p + 52);
	h->chunk_packets = get32(p + 56);
	if (h->slots == 0 || h->slots > QL_SDR_MAX_MSG_IDS || !pow2_mtu(h->mtu) ||
	    h->recv_depth == 0 || h->recv_depth > 65536 || h->chunk_packets == 0 ||
	    h->max_msg_size == 0 || h->max_msg_size > h->slot_stride ||
	    h->slot_stride > (1ull << 42) ||
	    h->root_addr + (uint64_t)h->slots * h->slot_stride < h->root_addr)
		return -EPROTO;
	return 0;
}

static int finish_setup(struct ql_sdr_conn *c)
{
	uint32_t mtu = c->local_mtu < c->hello.mtu ? c->local_mtu : c->hello.mtu;
	uint64_t lstride = ql_sdr_mem_slot_stride(c->mem);
	uint32_t rx_pkts, tx_pkts;
	size_t par;

	c->peer = c->hello;
	c->mtu = mtu;
	rx_pkts =
		(uint32_t)(lstride / mtu < QL_SDR_MAX_PACKETS ? lstride / mtu : QL_SDR_MAX_PACKETS);
	tx_pkts = (uint32_t)(c->peer.slot_stride / mtu < QL_SDR_MAX_PACKETS ?
				     c->peer.slot_stride / mtu :
				     QL_SDR_MAX_PACKETS);
	c->rx_max_pkts = rx_pkts;
	c->tx_max_pkts = tx_pkts;
	for (uint32_t i = 0; i < c->cfg.slots; i++) {
		struct ql_sdr_recv *rx = &c->rx[i];
		uint32_t nch = (rx_pkts + c->cfg.chunk_packets - 1) / c->cfg.chunk_packets;

		rx->conn = c;
		rx->msg_id = i;
		rx->pkt_bits = calloc((rx_pkts + 63) / 64, sizeof(uint64_t));
		rx->chunk_bits = calloc((nch + 63) / 64, sizeof(uint64_t));
		rx->chunk_count = calloc(nch, sizeof(uint32_t));
		if (!rx->pkt_bits || !rx->chunk_bits || !rx->chunk_count)
			return -ENOMEM;
	}
	c->ntx = c->cfg.slots;
	c->tx = calloc(c->ntx, sizeof(*c->tx));
	c->tx_wait = calloc(c->ntx, sizeof(*c->tx_wait));
	c->cts_q = calloc(c->peer.slots, sizeof(*c->cts_q));
	c->tx_by_id = calloc(c->peer.slots, sizeof(*c->tx_by_id));
	c->peer_id_busy = calloc(c->peer.slots, 1);
	if (!c->tx || !c->tx_wait || !c->cts_q || !c->tx_by_id || !c->peer_id_busy)
		return -ENOMEM;
	par = (size_t)round_up(c->cfg.parity_size > c->peer.parity_size ? c->cfg.parity_size :
									  c->peer.parity_size,
			       mtu);
	c->parity_stride = par;
	if (par) {
		int rc = ql_pd_mem_alloc(c->pd, par * c->ntx, (void **)&c->parity_buf);

		if (rc) {
			c->parity_buf = NULL;
			return rc;
		}
		rc = ql_mr_reg(c->pd, c->parity_buf, par * c->ntx, IBV_ACCESS_LOCAL_WRITE,
			       &c->parity_mr);
		if (rc)
			return rc;
	}
	for (uint32_t i = 0; i < c->ntx; i++) {
		struct ql_sdr_send *tx = &c->tx[i];

		tx->conn = c;
		tx->index = i;
		tx->want = calloc((tx_pkts + 63) / 64, sizeof(uint64_t));
		tx->sent_once = calloc((tx_pkts + 63) / 64, sizeof(uint64_t));
		if (!tx->want || !tx->sent_once)
			return -ENOMEM;
		if (par) {
			tx->parity = c->parity_buf + par * i;
			tx->parity_lkey = ql_mr_lkey(c->parity_mr);
		}
	}
	for (int r = 0; r < QL_SDR_REL_COUNT; r++) {
		const struct ql_sdr_ops *o = ql_sdr_ops_table((enum ql_sdr_rel)r);

		if (!o)
			continue;
		for (uint32_t i = 0; i < c->ntx; i++)
			if (o->tx_priv_size > c->tx_priv_max)
				c->tx_priv_max = o->tx_priv_size;
		if (o->rx_priv_size > c->rx_priv_max)
			c->rx_priv_max = o->rx_priv_size;
	}
	for (uint32_t i = 0; i < c->ntx; i++)
		if (c->tx_priv_max && !(c->tx[i].priv = calloc(1, c->tx_priv_max)))
			return -ENOMEM;
	for (uint32_t i = 0; i < c->cfg.slots; i++)
		if (c->rx_priv_max && !(c->rx[i].priv = calloc(1, c->rx_priv_max)))
			return -ENOMEM;
	for (int r = 0; r < QL_SDR_REL_COUNT; r++) {
		const struct ql_sdr_ops *o = ql_sdr_ops_table((enum ql_sdr_rel)r);

		if (o && o->conn_init) {
			int rc = o->conn_init(c);

			if (rc)
				return rc;
		}
		c->ops_inited[r] = o != NULL;
	}
	c->connected = true;
	return 0;
}

static int post_data_recvs(struct ql_sdr_conn *c, uint32_t n)
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

static int handshake(struct ql_sdr_conn *c, const struct ql_conn_params *data,
		     const struct ql_conn_params *ctrl, int timeout_ms, bool connector)
{
	struct ql_qp_connect_opts o;
	uint8_t hello[HELLO_LEN];
	uint64_t end;
	int rc;

	if (!c || !data || !ctrl)
		return ql_error_set(-EINVAL, "sdr: NULL argument");
	if (c->connected || c->handshaking)
		return ql_error_set(-EISCONN, "sdr: already connected");
	/* the access each QP needs, no more: the peer WRITEs (with
	 * immediate) on the data QP, and only SENDs on the control QP (with
	 * the defaults, REMOTE_WRITE/READ/ATOMIC, it could RDMA over it) */
	ql_qp_connect_opts_default(&o);
	o.access = IBV_ACCESS_REMOTE_WRITE;
	rc = ql_qp_connect(c->data_qp, data, &o);
	if (rc)
		return rc;
	o.access = 0;
	rc = ql_qp_connect(c->ctrl_qp, ctrl, &o);
	if (rc)
		return rc;
	for (uint32_t i = 0; i < c->ctrl_depth; i++)
		if ((rc = ctrl_post_recv(c, i)))
			return ql_error_set(rc, "sdr: cannot post control receives");
	rc = post_data_recvs(c, c->recv_depth);
	if (rc)
		return ql_error_set(rc, "sdr: cannot post %u data receives", c->recv_depth);
	c->handshaking = true;
	hello_pack(c, hello);
	if (connector && (rc = msg_ctrl(c, QL_SDR_C_HELLO, 0, 0, 0, 0, 0, hello, HELLO_LEN)))
		return rc;
	end = ql_clock_ns() + (uint64_t)timeout_ms * 1000000ull;
	while (!c->hello_received) {
		rc = ql_sdr_progress(c);
		if (rc < 0)
			return ql_error_set(rc, "sdr: control path failed during the handshake");
		if (c->hello_bad)
			return ql_error_set(-EPROTO, "sdr: the peer's HELLO does not fit");
		if (ql_clock_ns() > end)
			return ql_error_set(-ETIMEDOUT, "sdr: no HELLO from the peer in %d ms",
					    timeout_ms);
	}
	if (!connector && (rc = msg_ctrl(c, QL_SDR_C_HELLO, 0, 0, 0, 0, 0, hello, HELLO_LEN)))
		return rc;
	c->handshaking = false;
	rc = finish_setup(c);
	if (rc)
		return ql_error_set(rc, "sdr: cannot allocate the message tables");
	return 0;
}

int ql_sdr_accept(struct ql_sdr_conn *c, const struct ql_conn_params *data,
		  const struct ql_conn_params *ctrl, int timeout_ms)
{
	return handshake(c, data, ctrl, timeout_ms, false);
}

int ql_sdr_connect(struct ql_sdr_conn *c, const struct ql_conn_params *data,
		   const struct ql_conn_params *ctrl, int timeout_ms)
{
	return handshake(c, data, ctrl, timeout_ms, true);
}

/* ---- the receive side --------------------------------------------------- */

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
static void tx_finish(struct ql_sdr_send *tx)
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
		tx_finish(tx);
		return;
	}
	tx->draining = true;
	/* its last post may be unsignaled with nothing behind it: a signaled
	 * zero-length WRITE behind it will complete it (progress posts it) */
	if (tx->last_wr > c->sq_signaled)
		c->need_fence = true;
}

/* Start sends whose clear-to-send has come, in order. */
static void tx_match(struct ql_sdr_conn *c)
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
			msg_ctrl(c, QL_SDR_C_ABORT, tx->rel, cts.msg_id, cts.gen, (uint32_t)-rc, 0,
				 NULL, 0);
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
	tx_match(c);
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
static int tx_pump(struct ql_sdr_conn *c, uint64_t now)
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

/* ---- control dispatch ----------------------------------------------------- */

static int drain_data(struct ql_sdr_conn *c, uint64_t now);

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
		if (hello_unpack(m->payload, m->plen, &c->hello))
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
			tx_match(c);
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
		drain_data(c, now);
		msg_ctrl(c, QL_SDR_C_CREDIT, 1, 0, 0, m->a, m->b, NULL, 0);
		return;
	case QL_SDR_C_ACK_REQ:
		drain_data(c, now); /* as for CREDIT_REQ: judge the bitmap as of now */
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

/* ---- progress ------------------------------------------------------------ */

/* The backend: packets -> bitmaps, receives re-posted at once; drained, so
 * that a credit report right after counts everything that has arrived.
 * Returns the completions handled or a negative errno. */
static int drain_data(struct ql_sdr_conn *c, uint64_t now)
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
		rc = post_data_recvs(c, (uint32_t)n);
		if (rc && !c->broken)
			c->broken = rc;
		events += n;
	}
	return events;
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
		} else if (msg_ctrl(c, QL_SDR_C_CREDIT_REQ, 0, 0, 0, (uint32_t)c->pkts_posted,
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
	if (c->connected) {
		n = drain_data(c, now);
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
					tx_finish(tx);
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
		    ql_sdr__ctrl_unpack(ctrl_rbuf(c, idx), wc[i].byte_len, &m) == 0)
			on_ctrl(c, &m, now);
		else
			c->st.drop_bad_ctrl++;
		if (ctrl_post_recv(c, idx) && !c->broken)
			c->broken = -ECONNRESET;
	}
	events += n;
	if (c->broken)
		return c->broken;
	ctrl_flush(c);
	if (!c->connected)
		return events;
	/* credits back to the peer once a quarter of its window was used */
	if (c->consumed - c->consumed_reported >= (c->recv_depth + 3) / 4)
		msg_ctrl(c, QL_SDR_C_CREDIT, 0, 0, 0, 0, 0, NULL, 0);
	c->credit_stalled = false; /* tx_pump says whether it still is */
	events += tx_pump(c, now);
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

/* ---- accessors and blocking helpers ---------------------------------------- */

void ql_sdr_conn_stats(const struct ql_sdr_conn *c, struct ql_sdr_stats *st)
{
	*st = c->st;
}
uint32_t ql_sdr_conn_mtu(const struct ql_sdr_conn *c)
{
	return c->connected ? c->mtu : c->local_mtu;
}
struct ql_sdr_mem *ql_sdr_conn_mem(struct ql_sdr_conn *c)
{
	return c->mem;
}
struct ql_pd *ql_sdr_conn_pd(struct ql_sdr_conn *c)
{
	return c->pd;
}
struct ql_qp *ql_sdr_conn_data_qp(struct ql_sdr_conn *c)
{
	return c->data_qp;
}
struct ql_qp *ql_sdr_conn_ctrl_qp(struct ql_sdr_conn *c)
{
	return c->ctrl_qp;
}

int ql_sdr_buf_alloc(struct ql_sdr_conn *c, size_t len, void **addr, struct ql_mr **mr)
{
	int rc;

	if (!c || !addr || !mr || !len)
		return -EINVAL;
	rc = ql_pd_mem_alloc(c->pd, len, addr);
	if (rc)
		return rc;
	rc = ql_mr_reg(c->pd, *addr, len, IBV_ACCESS_LOCAL_WRITE, mr);
	if (rc) {
		ql_pd_mem_free(c->pd, *addr);
		*addr = NULL;
	}
	return rc;
}

void ql_sdr_buf_free(struct ql_sdr_conn *c, void *addr, struct ql_mr *mr)
{
	if (mr)
		ql_mr_dereg(mr);
	if (addr)
		ql_pd_mem_free(c->pd, addr);
}

int ql_sdr_send_wait(struct ql_sdr_conn *c, struct ql_sdr_send *tx, int timeout_ms)
{
	uint64_t end = ql_clock_ns() + (uint64_t)timeout_ms * 1000000ull;
	int st = 0;

	while (!ql_sdr_send_poll(tx, &st)) {
		int rc = ql_sdr_progress(c);

		if (rc < 0)
			return rc;
		if (ql_clock_ns() > end)
			return -ETIMEDOUT;
	}
	return st;
}

int ql_sdr_recv_wait(struct ql_sdr_conn *c, struct ql_sdr_recv *rx, int timeout_ms)
{
	uint64_t end = ql_clock_ns() + (uint64_t)timeout_ms * 1000000ull;
	int st = 0;

	while (!ql_sdr_recv_poll(rx, &st)) {
		int rc = ql_sdr_progress(c);

		if (rc < 0)
			return rc;
		if (ql_clock_ns() > end)
			return -ETIMEDOUT;
	}
	return st;
}
