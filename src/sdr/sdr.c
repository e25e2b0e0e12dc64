/* SPDX-License-Identifier: MIT */
/*
 * The SDR connection: set-up and tear-down, the addressing text, the HELLO
 * handshake and the tables it sizes, accessors and the blocking helpers.
 * The rest of the core by role: sdr_ctrl.c (the control path), sdr_send.c
 * (the sender), sdr_recv.c (the receiver and its backend), sdr_poll.c
 * (ql_sdr_progress and the control dispatch); rel.c and ec.c are the
 * reliability schemes (sdr_int.h). docs/sdr.md is the specification.
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

/* ---- create / destroy ------------------------------------------------- */

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
	{
		struct ql_qp_setup s = { .qp_type = IBV_QPT_UC,
					 .send_wr = d.send_depth,
					 .recv_wr = d.recv_depth };
		struct ibv_qp_cap cap;

		rc = ql_qp_setup(c->pd, &s, &c->data_scq, &c->data_rcq, &c->data_qp, &cap);
		if (rc)
			goto fail;
		c->sq_depth = cap.max_send_wr < d.send_depth ? cap.max_send_wr : d.send_depth;
		c->recv_depth = d.recv_depth;
	}
	{
		struct ql_qp_setup s = { .qp_type = IBV_QPT_RC,
					 .send_wr = c->ctrl_depth,
					 .recv_wr = c->ctrl_depth };

		rc = ql_qp_setup(c->pd, &s, &c->ctrl_scq, &c->ctrl_rcq, &c->ctrl_qp, NULL);
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

	ql_sdr__put32(p, QL_SDR_HELLO_MAGIC);
	ql_sdr__put16(p + 4, QL_SDR_VERSION);
	ql_sdr__put16(p + 6, ql_sdr__ec_code(&c->cfg)); /* sdrec: both ends' EC code must agree */
	ql_sdr__put64(p + 8, (uintptr_t)ql_mr_addr(mr));
	ql_sdr__put32(p + 16, ql_mr_rkey(mr));
	ql_sdr__put32(p + 20, c->cfg.slots);
	ql_sdr__put64(p + 24, ql_sdr_mem_slot_stride(c->mem));
	ql_sdr__put64(p + 32, c->cfg.max_msg_size);
	ql_sdr__put64(p + 40, c->cfg.parity_size);
	ql_sdr__put32(p + 48, c->local_mtu);
	ql_sdr__put32(p + 52, c->recv_depth);
	ql_sdr__put32(p + 56, c->cfg.chunk_packets);
}

/* The peer's HELLO, validated: nothing of it is trusted beyond these bounds. */
int ql_sdr__hello_unpack(const uint8_t *p, uint32_t len, struct ql_sdr_peer *h)
{
	if (len < HELLO_LEN || ql_sdr__get32(p) != QL_SDR_HELLO_MAGIC ||
	    ql_sdr__get16(p + 4) != QL_SDR_VERSION)
		return -EPROTO;
	h->ec_code = ql_sdr__get16(p + 6);
	h->root_addr = ql_sdr__get64(p + 8);
	h->rkey = ql_sdr__get32(p + 16);
	h->slots = ql_sdr__get32(p + 20);
	h->slot_stride = ql_sdr__get64(p + 24);
	h->max_msg_size = ql_sdr__get64(p + 32);
	h->parity_size = ql_sdr__get64(p + 40);
	h->mtu = ql_sdr__get32(p + 48);
	h->recv_depth = ql_sdr__get32(p + 52);
	h->chunk_packets = ql_sdr__get32(p + 56);
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

/* The end of a blocking call that ended an exchange (the handshake,
 * ql_sdr_send_wait, ql_sdr_recv_wait): one more run of the device. On a
 * device in caller progress the ACK for the peer's last control message
 * waits for the next call on the device, and a control message may wait
 * in the transmit batch (docs/progress.md §3, §4); the application may
 * make no call for longer than the peer's retries last (about half a
 * second by default), which would fail the peer's control QP. */
static int wait_end(struct ql_sdr_conn *c, int rc)
{
	(void)ql_device_progress(c->dev);
	return rc;
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
		if ((rc = ql_sdr__ctrl_post_recv(c, i)))
			return ql_error_set(rc, "sdr: cannot post control receives");
	rc = ql_sdr__post_data_recvs(c, c->recv_depth);
	if (rc)
		return ql_error_set(rc, "sdr: cannot post %u data receives", c->recv_depth);
	c->handshaking = true;
	hello_pack(c, hello);
	if (connector &&
	    (rc = ql_sdr__msg_ctrl(c, QL_SDR_C_HELLO, 0, 0, 0, 0, 0, hello, HELLO_LEN)))
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
	if (!connector &&
	    (rc = ql_sdr__msg_ctrl(c, QL_SDR_C_HELLO, 0, 0, 0, 0, 0, hello, HELLO_LEN)))
		return rc;
	c->handshaking = false;
	rc = finish_setup(c);
	if (rc)
		return ql_error_set(rc, "sdr: cannot allocate the message tables");
	return wait_end(c, 0);
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
	return wait_end(c, st);
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
	return wait_end(c, st);
}
