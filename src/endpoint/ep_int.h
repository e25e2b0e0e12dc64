/* SPDX-License-Identifier: MIT */
/*
 * Internal to the endpoint service: the control message layout (specified
 * byte by byte in docs/endpoint.md), the spec's storage and the connection
 * manager's socket helpers shared by the server and the client.
 */
#ifndef QL_ENDPOINT_INT_H
#define QL_ENDPOINT_INT_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "qlink/endpoint.h"
#include "qlink/verbs.h"

/* ---- control messages (SEND on the control QP) ------------------------- */

#define QL_EPW_MAGIC 0x50454c51u /* "QLEP" little-endian */
#define QL_EPW_VERSION 1
#define QL_EPW_HDR 40				     /* fixed part */
#define QL_EPW_MSG_MAX (QL_EPW_HDR + QL_EP_PATH_MAX) /* largest message */
#define QL_EPW_SLOT 256				     /* control receive slot (>= MSG_MAX) */

/* kind 3 is retired (acknowledgements go through the ack ring) */
enum ql_epw_kind { QL_EPW_REQUEST = 1, QL_EPW_REPLY = 2, QL_EPW_READY = 4 };

/* byte 7 of a REPLY (byte 7 of a REQUEST is the path's length; of an ACK
 * and a READY, 0): the read endpoint has a handler, so the server sends a
 * READY after running it for each acknowledged read, and the client reads
 * again only after that READY (the handler runs before the data leaves). */
#define QL_EPW_F_READY 0x01

struct ql_epw_msg {
	uint8_t kind, op, path_len, flags;
	uint32_t seq;
	int32_t status;
	uint64_t length;
	uint32_t ep_id;
	uint32_t rkey;
	uint64_t addr;
	const char *path; /* decode: points into the buffer */
};

static inline void ql_epw_put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static inline void ql_epw_put64(uint8_t *p, uint64_t v)
{
	ql_epw_put32(p, (uint32_t)v);
	ql_epw_put32(p + 4, (uint32_t)(v >> 32));
}

static inline uint32_t ql_epw_get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t ql_epw_get64(const uint8_t *p)
{
	return (uint64_t)ql_epw_get32(p) | (uint64_t)ql_epw_get32(p + 4) << 32;
}

/* Encode m into buf (at least QL_EPW_MSG_MAX bytes); returns the length. */
static inline size_t ql_epw_encode(const struct ql_epw_msg *m, uint8_t *buf)
{
	ql_epw_put32(buf, QL_EPW_MAGIC);
	buf[4] = QL_EPW_VERSION;
	buf[5] = m->kind;
	buf[6] = m->op;
	buf[7] = m->kind == QL_EPW_REQUEST ? m->path_len : m->kind == QL_EPW_REPLY ? m->flags : 0;
	ql_epw_put32(buf + 8, m->seq);
	ql_epw_put32(buf + 12, (uint32_t)m->status);
	ql_epw_put64(buf + 16, m->length);
	ql_epw_put32(buf + 24, m->ep_id);
	ql_epw_put32(buf + 28, m->rkey);
	ql_epw_put64(buf + 32, m->addr);
	if (m->kind == QL_EPW_REQUEST) {
		memcpy(buf + QL_EPW_HDR, m->path, m->path_len);
		return QL_EPW_HDR + m->path_len;
	}
	return QL_EPW_HDR;
}

/* Decode len bytes; 0 or -EBADMSG (short, bad magic/version/kind/op, a
 * path length that disagrees with the message's length, a path on a
 * message that has none). */
static inline int ql_epw_decode(const uint8_t *buf, size_t len, struct ql_epw_msg *m)
{
	if (len < QL_EPW_HDR || ql_epw_get32(buf) != QL_EPW_MAGIC || buf[4] != QL_EPW_VERSION)
		return -EBADMSG;
	m->kind = buf[5];
	m->op = buf[6];
	m->path_len = m->kind == QL_EPW_REQUEST ? buf[7] : 0;
	m->flags = m->kind == QL_EPW_REPLY ? buf[7] : 0;
	if (m->kind < QL_EPW_REQUEST || m->kind > QL_EPW_READY || m->kind == 3 ||
	    m->op < QL_EP_SEND || m->op > QL_EP_READ)
		return -EBADMSG;
	if (m->kind == QL_EPW_REQUEST ?
		    len != (size_t)QL_EPW_HDR + buf[7] :
		    (len != QL_EPW_HDR ||
		     (buf[7] & ~(m->kind == QL_EPW_REPLY ? QL_EPW_F_READY : 0))))
		return -EBADMSG;
	m->seq = ql_epw_get32(buf + 8);
	m->status = (int32_t)ql_epw_get32(buf + 12);
	m->length = ql_epw_get64(buf + 16);
	m->ep_id = ql_epw_get32(buf + 24);
	m->rkey = ql_epw_get32(buf + 28);
	m->addr = ql_epw_get64(buf + 32);
	m->path = (const char *)buf + QL_EPW_HDR;
	return 0;
}

/* ---- the ack ring --------------------------------------------------------
 * Per connection, server memory the client RDMA-WRITEs its write/read
 * acknowledgements into: QL_EPA_SLOTS aligned 8-byte words, the word of ack
 * number seq (1, 2, ...) at slot (seq - 1) % QL_EPA_SLOTS. One word is one
 * aligned 8-byte store on every NIC, so it is seen whole or not at all:
 *   bits  0..28  length (bytes written or read)
 *   bits 29..36  endpoint id (from the REPLY)
 *   bit  37      0: write, 1: read
 *   bits 38..63  seq mod 2^26
 * The server takes the slot of the seq it expects when its seq bits match,
 * and every QL_EPA_CREDIT acks it RDMA-WRITEs the count it has taken (u64)
 * into the client's credit word; the client never runs QL_EPA_SLOTS ahead. */
#define QL_EPA_SLOTS 64u
#define QL_EPA_CREDIT 16u
#define QL_EPA_SEQ_MASK 0x3ffffffu

static inline uint64_t ql_epa_word(uint32_t seq, uint32_t ep_id, int read, uint64_t len)
{
	return (uint64_t)(seq & QL_EPA_SEQ_MASK) << 38 | (uint64_t)(read != 0) << 37 |
	       (uint64_t)(ep_id & 0xff) << 29 | (len & 0x1fffffffu);
}

/* ---- the spec --------------------------------------------------------- */

struct ql_ep_spec_entry {
	char path[QL_EP_PATH_MAX];
	enum ql_ep_type type;
	size_t size;
};

struct ql_ep_spec {
	int count;
	struct ql_ep_spec_entry e[QL_EP_MAX_ENDPOINTS];
};

/* 0 if path is a valid endpoint path (ql_ep_spec_add's rule), else a static
 * sentence saying why not. */
const char *ql__ep_path_problem(const char *path, size_t len);

/* ---- connection manager ---------------------------------------------- */

/* The hello: "QLEP/1\nctl <params>\ndata <params>\n" from the client, the
 * same with the server's QPs back, or "QLEP/1 ERR <errno> <text>\n". */
#define QL_EPC_HELLO_MAX 1024
#define QL_EPC_MAGIC "QLEP/1"

/* Parse "HOST:PORT" / "unix:PATH" and listen (non-blocking); -errno. */
int ql__ep_listen(const char *address, int *fd, char *bound, size_t bound_len);
/* Connect (blocking, timeout_ms); -errno. */
int ql__ep_connect(const char *address, int timeout_ms, int *fd);
/* Format the two QPs' params as a hello, the ctl line with the memory
 * region `mem` describes (vaddr, rkey, length, slots, slot_size; NULL:
 * none); returns length or -errno. */
int ql__ep_hello_format(struct ql_qp *ctl, struct ql_qp *data, const struct ql_conn_params *mem,
			char *buf, size_t len);
/* Parse a complete hello; -EPROTO if malformed. */
int ql__ep_hello_parse(const char *text, struct ql_conn_params *ctl, struct ql_conn_params *data);

#endif
