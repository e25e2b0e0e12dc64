/* SPDX-License-Identifier: MIT */
/*
 * The SDR control path: the control messages' encoding, the RC receive
 * ring and send ring with its backlog (docs/sdr.md "Control messages").
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

size_t ql_sdr__ctrl_pack(const struct ql_sdr_ctrl *m, uint8_t *buf)
{
	uint32_t plen = m->plen > sizeof(m->payload) ? (uint32_t)sizeof(m->payload) : m->plen;

	buf[0] = m->type;
	buf[1] = m->rel;
	ql_sdr__put16(buf + 2, m->msg_id);
	ql_sdr__put32(buf + 4, m->gen);
	ql_sdr__put64(buf + 8, m->credit);
	ql_sdr__put32(buf + 16, m->a);
	ql_sdr__put32(buf + 20, m->b);
	memcpy(buf + QL_SDR_CTRL_HDR, m->payload, plen);
	return QL_SDR_CTRL_HDR + plen;
}

int ql_sdr__ctrl_unpack(const uint8_t *buf, size_t len, struct ql_sdr_ctrl *m)
{
	if (len < QL_SDR_CTRL_HDR || len > QL_SDR_CTRL_MAX)
		return -EBADMSG;
	m->type = buf[0];
	m->rel = buf[1];
	m->msg_id = ql_sdr__get16(buf + 2);
	m->gen = ql_sdr__get32(buf + 4);
	m->credit = ql_sdr__get64(buf + 8);
	m->a = ql_sdr__get32(buf + 16);
	m->b = ql_sdr__get32(buf + 20);
	m->plen = (uint32_t)(len - QL_SDR_CTRL_HDR);
	memcpy(m->payload, buf + QL_SDR_CTRL_HDR, m->plen);
	return 0;
}

static uint8_t *ctrl_sbuf(struct ql_sdr_conn *c, uint32_t i)
{
	return c->ctrl_buf + (size_t)(c->ctrl_depth + i) * QL_SDR_CTRL_MAX;
}

int ql_sdr__ctrl_post_recv(struct ql_sdr_conn *c, uint32_t i)
{
	struct ibv_sge sge = { (uintptr_t)ql_sdr__ctrl_rbuf(c, i), QL_SDR_CTRL_MAX,
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
void ql_sdr__ctrl_flush(struct ql_sdr_conn *c)
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
	ql_sdr__ctrl_flush(c);
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

int ql_sdr__msg_ctrl(struct ql_sdr_conn *c, uint8_t type, enum ql_sdr_rel rel, uint32_t id,
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
	return ql_sdr__msg_ctrl(tx->conn, type, tx->rel, tx->msg_id, tx->gen, a, b, payload, plen);
}

int ql_sdr__rx_ctrl(struct ql_sdr_recv *rx, uint8_t type, uint32_t a, uint32_t b,
		    const void *payload, uint32_t plen)
{
	uint32_t rel = rx->rel;

	if (type >= QL_SDR_C_EXT_FIRST && type <= QL_SDR_C_EXT_LAST)
		rel |= QL_SDR_REL_TO_SENDER;
	return ql_sdr__msg_ctrl(rx->conn, type, (enum ql_sdr_rel)rel, rx->msg_id, rx->gen, a, b,
				payload, plen);
}
