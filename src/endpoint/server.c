/* SPDX-License-Identifier: MIT */
/*
 * The endpoint server (docs/endpoint.md). One thread drives it: it
 * busy-polls each connection's completion queues and looks at the sockets
 * (accepts, hellos, clients that went away) about every millisecond. All
 * memory a connection needs is allocated when its hello arrives and freed
 * when it ends, whatever the client did.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "endpoint/ep_int.h"
#include "qlink/clock.h"
#include "qlink/error.h"
#include "qlink/log.h"

#define CTL_RECVS 16 /* control receive slots per connection */
#define CTL_SENDS 32 /* replies (one request out) and credit writes */
#define CONN_MEM ((CTL_RECVS + CTL_SENDS + 1) * QL_EPW_SLOT) /* + the credit */
#define CREDIT_SLOT (CTL_RECVS + CTL_SENDS)
#define RING_BYTES 4096 /* one page: QL_EPA_SLOTS words, alone in its MR */
#define RING_EVERY 64	/* server passes between looks at a ring */
#define SOCK_CHECK_NS 1000000ull
#define DATA_SEND_WAIT_NS 2000000000ull
#define DATA_ORDER_WAIT_NS 100000000ull

enum { WR_CTL_RECV = 1, WR_CTL_SEND, WR_DATA_RECV, WR_DATA_SEND, WR_CREDIT };
#define WR_ID(kind, idx) (((uint64_t)(kind) << 32) | (uint32_t)(idx))

struct ep_endpoint {
	struct ql_ep_spec_entry e;
	void *buf;
	int access; /* what a connection's registration of buf allows */
	ql_ep_handler_fn fn;
	void *arg;
	uint64_t busy_conn; /* send: the connection whose data receive is posted */
};

enum conn_state { CONN_FREE = 0, CONN_HELLO, CONN_LIVE };

struct ep_conn {
	enum conn_state state;
	int fd;
	uint64_t id;
	uint64_t deadline_ns;
	uint8_t src[16]; /* TCP: the peer's address (IPv4 in the first 4); none: all 0 */
	int has_src;
	size_t hello_len;
	char hello[QL_EPC_HELLO_MAX + 1];
	struct ql_cq *cq;  /* control QP both ways, data QP receives */
	struct ql_cq *dcq; /* data QP sends: waited for alone */
	struct ql_qp *ctl, *data;
	/* Its own protection domain: its QPs, its ack ring and its own
	 * registrations of the endpoint buffers it described (epmr), so an
	 * rkey it learns of another connection's is refused by the NIC. */
	struct ql_pd *pd;
	struct ql_mr *epmr[QL_EP_MAX_ENDPOINTS];
	uint8_t *mem;
	struct ql_mr *mr;
	unsigned send_next;
	int pending_send; /* endpoint a data receive is posted for, -1: none */
	uint8_t described[QL_EP_MAX_ENDPOINTS];
	/* the ack ring (ep_int.h): ours, written by the client */
	volatile uint64_t *ring;
	struct ql_mr *ring_mr;
	uint32_t ack_seq; /* the next seq expected */
	uint64_t acks_taken;
	uint64_t credit_addr; /* the client's credit word */
	uint32_t credit_rkey;
	int closing; /* draining its ring before it goes: post nothing more */
	unsigned ring_tick;
	int ring_fast; /* a read with a handler was described: every pass */
};

struct ql_ep_server {
	struct ql_device *dev;
	struct ql_pd *pd;
	int nep;
	struct ep_endpoint *ep;
	int lfd;
	char addr[128];
	int max_conns;
	int max_per_source;
	int handshake_ms;
	int64_t idle_ns; /* < 0: never sleep */
	uint64_t last_event_ns;
	struct ep_conn *conns;
	struct pollfd *pfds;
	uint64_t next_id;
	uint64_t next_sock_check;
	struct ql_ep_server_stats st;
};

/* ---- endpoints ---------------------------------------------------------- */

static int find_ep(const struct ql_ep_server *s, const char *path, size_t len, int type,
		   int *other_type)
{
	*other_type = 0;
	for (int i = 0; i < s->nep; i++) {
		const struct ql_ep_spec_entry *e = &s->ep[i].e;

		if (strlen(e->path) != len || memcmp(e->path, path, len))
			continue;
		if ((int)e->type == type)
			return i;
		*other_type = 1;
	}
	return -1;
}

int ql_ep_server_handle(struct ql_ep_server *s, const char *path, enum ql_ep_type type,
			ql_ep_handler_fn fn, void *arg)
{
	int other, i;

	if (!s || !path)
		return ql_error_set(-EINVAL, "ql_ep_server_handle: NULL argument");
	i = find_ep(s, path, strlen(path), (int)type, &other);
	if (i < 0)
		return ql_error_set(-ENOENT, "no endpoint %s of type %s", path,
				    ql_ep_type_name(type) ? ql_ep_type_name(type) : "?");
	s->ep[i].fn = fn;
	s->ep[i].arg = arg;
	return 0;
}

void *ql_ep_server_buffer(struct ql_ep_server *s, const char *path, enum ql_ep_type type,
			  size_t *size)
{
	int other, i;

	if (!s || !path)
		return NULL;
	i = find_ep(s, path, strlen(path), (int)type, &other);
	if (i < 0)
		return NULL;
	if (size)
		*size = s->ep[i].e.size;
	return s->ep[i].buf;
}

int ql_ep_server_address(const struct ql_ep_server *s, char *buf, size_t len)
{
	return snprintf(buf, len, "%s", s->addr);
}

int ql_ep_server_stats(const struct ql_ep_server *s, struct ql_ep_server_stats *st)
{
	if (!s || !st)
		return -EINVAL;
	*st = s->st;
	return 0;
}

static int run_handler(struct ql_ep_server *s, struct ep_endpoint *ep, struct ep_conn *c,
		       size_t *len)
{
	struct ql_ep_call call = {
		.path = ep->e.path,
		.type = ep->e.type,
		.buf = ep->buf,
		.size = ep->e.size,
		.len = *len,
		.conn = c ? c->id : 0,
	};
	int ret;

	if (!ep->fn)
		return 0;
	ret = ep->fn(&call, ep->arg);
	if (ret) {
		s->st.handler_errors++;
		return ret < 0 ? ret : -EIO;
	}
	*len = call.len;
	return 0;
}

/* ---- connections -------------------------------------------------------- */

static int ring_poll(struct ql_ep_server *s, struct ep_conn *c);

static void conn_close(struct ql_ep_server *s, struct ep_conn *c, const char *why)
{
	if (c->state == CONN_LIVE && !c->closing) {
		/* what it acknowledged before it went is served (a dead
		 * client's connection fails on our next credit write) */
		c->closing = 1;
		ring_poll(s, c);
		if (c->state != CONN_LIVE)
			return; /* closed in there, by a violation */
	}
	if (c->pending_send >= 0 && c->pending_send < s->nep)
		s->ep[c->pending_send].busy_conn = 0;
	if (c->state == CONN_LIVE) {
		ql_log_debug("endpoint", "connection %llu closed: %s", (unsigned long long)c->id,
			     why);
		s->st.conns_closed++;
		s->st.conns_open--;
	}
	if (c->ctl)
		ql_qp_destroy(c->ctl);
	if (c->data)
		ql_qp_destroy(c->data);
	if (c->cq)
		ql_cq_destroy(c->cq);
	if (c->dcq)
		ql_cq_destroy(c->dcq);
	for (int i = 0; i < s->nep; i++)
		if (c->epmr[i])
			ql_mr_dereg(c->epmr[i]);
	if (c->mr)
		ql_mr_dereg(c->mr);
	if (c->mem)
		ql_pd_mem_free(c->pd, c->mem);
	if (c->ring_mr)
		ql_mr_dereg(c->ring_mr);
	if (c->ring)
		ql_pd_mem_free(c->pd, (void *)(uintptr_t)c->ring);
	if (c->pd)
		ql_pd_free(c->pd);
	if (c->fd >= 0)
		close(c->fd);
	memset(c, 0, sizeof(*c));
	c->fd = -1;
	c->pending_send = -1;
}

static void violation(struct ql_ep_server *s, struct ep_conn *c, const char *what)
{
	s->st.violations++;
	c->closing = 1; /* nothing more from it is taken */
	ql_log_warn("endpoint", "connection %llu: protocol violation (%s): closed",
		    (unsigned long long)c->id, what);
	conn_close(s, c, what);
}

static int post_ctl_recv(struct ep_conn *c, unsigned slot)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(c->mem + (size_t)slot * QL_EPW_SLOT),
		.length = QL_EPW_SLOT,
		.lkey = ql_mr_lkey(c->mr),
	};
	struct ibv_recv_wr wr = { .wr_id = WR_ID(WR_CTL_RECV, slot),
				  .sg_list = &sge,
				  .num_sge = 1 };
	struct ibv_recv_wr *bad;

	return ql_qp_post_recv(c->ctl, &wr, &bad);
}

static int send_reply(struct ep_conn *c, const struct ql_epw_msg *m)
{
	unsigned slot = CTL_RECVS + (c->send_next++ % CTL_SENDS);
	uint8_t *p = c->mem + (size_t)slot * QL_EPW_SLOT;
	struct ibv_sge sge = { .addr = (uintptr_t)p, .lkey = ql_mr_lkey(c->mr) };
	struct ibv_send_wr wr = {
		.wr_id = WR_ID(WR_CTL_SEND, slot),
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED,
	};
	struct ibv_send_wr *bad;

	sge.length = (uint32_t)ql_epw_encode(m, p);
	return ql_qp_post_send(c->ctl, &wr, &bad);
}

/* Post the data of a receive endpoint (len bytes, maybe 0) on the data QP
 * and wait for it to leave: the endpoint's buffer is shared by every
 * connection and a handler may rewrite it as soon as we return. */
static int send_data(struct ep_conn *c, struct ep_endpoint *ep, struct ql_mr *mr, size_t len,
		     int status)
{
	struct ibv_sge sge = { .addr = (uintptr_t)ep->buf,
			       .length = (uint32_t)len,
			       .lkey = mr ? ql_mr_lkey(mr) : 0 };
	struct ibv_send_wr wr = {
		.wr_id = WR_ID(WR_DATA_SEND, 0),
		.sg_list = len ? &sge : NULL,
		.num_sge = len ? 1 : 0,
		.opcode = IBV_WR_SEND_WITH_IMM,
		.send_flags = IBV_SEND_SIGNALED,
		.imm_data = htobe32((uint32_t)status),
	};
	struct ibv_send_wr *bad;
	struct ibv_wc wc;
	uint64_t end = ql_clock_ns() + DATA_SEND_WAIT_NS;
	int n;

	if (ql_qp_post_send(c->data, &wr, &bad))
		return -EIO;
	/* no data receive is posted now (data_before_control): the CQ holds
	 * this send's completion alone */
	while ((n = ql_cq_poll(c->dcq, 1, &wc)) == 0)
		if (ql_clock_ns() > end)
			return -ETIMEDOUT;
	return n < 0 || wc.status != IBV_WC_SUCCESS || (wc.wr_id >> 32) != WR_DATA_SEND ? -EIO : 0;
}

/* The connection's own registration of endpoint i's buffer, made on its
 * first request for it (a setup step, once per connection and endpoint);
 * NULL if the device has no memory region left. */
static struct ql_mr *conn_ep_mr(struct ql_ep_server *s, struct ep_conn *c, int i)
{
	struct ep_endpoint *ep = &s->ep[i];

	if (!c->epmr[i] && ql_mr_reg(c->pd, ep->buf, ep->e.size, ep->access, &c->epmr[i]))
		c->epmr[i] = NULL;
	return c->epmr[i];
}

static void on_request(struct ql_ep_server *s, struct ep_conn *c, const struct ql_epw_msg *m)
{
	struct ql_epw_msg r = { .kind = QL_EPW_REPLY, .op = m->op, .seq = m->seq };
	struct ep_endpoint *ep = NULL;
	struct ql_mr *mr = NULL;
	int other, i, status = 0;
	size_t len = 0;

	if (ql__ep_path_problem(m->path, m->path_len)) {
		violation(s, c, "malformed path");
		return;
	}
	s->st.requests++;
	i = find_ep(s, m->path, m->path_len, m->op, &other);
	if (i < 0)
		status = other ? -EPROTOTYPE : -ENOENT;
	else
		ep = &s->ep[i];
	if (!status && m->op != QL_EP_RECEIVE && m->length > ep->e.size)
		status = -EMSGSIZE;
	if (!status && !(mr = conn_ep_mr(s, c, i)))
		status = -ENOMEM;
	if (!status) {
		switch (m->op) {
		case QL_EP_SEND: {
			struct ibv_sge sge = { .addr = (uintptr_t)ep->buf,
					       .length = (uint32_t)ep->e.size,
					       .lkey = ql_mr_lkey(mr) };
			struct ibv_recv_wr wr = { .wr_id = WR_ID(WR_DATA_RECV, i),
						  .sg_list = &sge,
						  .num_sge = 1 };
			struct ibv_recv_wr *bad;

			/* the buffer takes one sender at a time: the others are
			 * told to come back (the client retries) */
			if (ep->busy_conn) {
				status = -EBUSY;
				break;
			}
			if (ql_qp_post_recv(c->data, &wr, &bad)) {
				conn_close(s, c, "data receive refused");
				return;
			}
			c->pending_send = i;
			ep->busy_conn = c->id;
			break;
		}
		case QL_EP_RECEIVE:
			len = m->length < ep->e.size ? (size_t)m->length : ep->e.size;
			status = run_handler(s, ep, c, &len);
			if (!status && (len > ep->e.size || len > m->length))
				status = -EMSGSIZE;
			r.length = status ? 0 : len;
			break;
		case QL_EP_READ:
			len = ep->e.size;
			status = run_handler(s, ep, c, &len);
			/* fall through */
		case QL_EP_WRITE:
			if (status)
				break;
			c->described[i] = 1;
			r.flags = m->op == QL_EP_READ && ep->fn ? QL_EPW_F_READY : 0;
			if (r.flags)
				c->ring_fast = 1;
			r.ep_id = (uint32_t)i;
			r.rkey = ql_mr_rkey(mr);
			r.addr = (uintptr_t)ep->buf;
			r.length = ep->e.size;
			break;
		}
	}
	if (status == -EBUSY)
		s->st.requests_busy++;
	else if (status)
		s->st.requests_refused++;
	r.status = status;
	/* a receive request is answered on the data QP too, always: the
	 * client has a receive posted there for it */
	if (m->op == QL_EP_RECEIVE &&
	    send_data(c, ep ? ep : &s->ep[0], mr, status ? 0 : len, status)) {
		conn_close(s, c, "data send failed");
		return;
	}
	if (send_reply(c, &r))
		conn_close(s, c, "reply refused");
}

/* Tell the client how many acks we took, so it may reuse their slots. */
static int post_credit(struct ep_conn *c)
{
	uint8_t *p = c->mem + (size_t)CREDIT_SLOT * QL_EPW_SLOT;
	struct ibv_sge sge = { .addr = (uintptr_t)p, .length = 8, .lkey = ql_mr_lkey(c->mr) };
	struct ibv_send_wr wr = {
		.wr_id = WR_ID(WR_CREDIT, 0),
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED,
	};
	struct ibv_send_wr *bad;

	ql_epw_put64(p, c->acks_taken);
	wr.wr.rdma.remote_addr = c->credit_addr;
	wr.wr.rdma.rkey = c->credit_rkey;
	return ql_qp_post_send(c->ctl, &wr, &bad);
}

/* One ack from the ring. */
static void on_ack(struct ql_ep_server *s, struct ep_conn *c, uint64_t w)
{
	uint32_t id = (uint32_t)(w >> 29) & 0xff;
	int op = (w >> 37) & 1 ? QL_EP_READ : QL_EP_WRITE;
	size_t len = (size_t)(w & 0x1fffffffu);
	struct ep_endpoint *ep;

	if (id >= (uint32_t)s->nep || !c->described[id]) {
		violation(s, c, "acknowledgement for an endpoint never described");
		return;
	}
	ep = &s->ep[id];
	if ((int)ep->e.type != op) {
		violation(s, c, "acknowledgement of the wrong type");
		return;
	}
	if (len > ep->e.size) {
		violation(s, c, "acknowledged length over the endpoint's size");
		return;
	}
	s->st.acks++;
	/* write: the data landed; read: it left, prepare the next read */
	if (op == QL_EP_READ)
		len = ep->e.size;
	run_handler(s, ep, c, &len);
	if (op == QL_EP_READ && ep->fn && !c->closing) {
		struct ql_epw_msg r = {
			.kind = QL_EPW_READY, .op = QL_EP_READ, .seq = c->ack_seq - 1, .ep_id = id
		};

		if (send_reply(c, &r))
			conn_close(s, c, "ready refused");
	}
}

/* Take the acks the ring holds, in order, at most one lap (our credit
 * writes complete on the CQ, which the caller reaps between laps).
 * Returns how many. */
static int ring_poll(struct ql_ep_server *s, struct ep_conn *c)
{
	int n = 0;

	while (c->state == CONN_LIVE && (c->closing || n < (int)QL_EPA_SLOTS)) {
		uint64_t w = __atomic_load_n(&c->ring[(c->ack_seq - 1) % QL_EPA_SLOTS],
					     __ATOMIC_ACQUIRE);

		if ((uint32_t)(w >> 38) != (c->ack_seq & QL_EPA_SEQ_MASK))
			break;
		c->ack_seq++;
		c->acks_taken++;
		n++;
		on_ack(s, c, w);
		if (c->state == CONN_LIVE && !c->closing && c->acks_taken % QL_EPA_CREDIT == 0 &&
		    post_credit(c))
			conn_close(s, c, "credit refused");
	}
	return n;
}

/* The data QP's completions (its own CQ): a send's data landed, or one of
 * our receive answers left. Returns events handled. */
static int conn_poll_data(struct ql_ep_server *s, struct ep_conn *c)
{
	struct ibv_wc wc;
	int n = ql_cq_poll(c->dcq, 1, &wc);

	if (n <= 0) {
		if (n < 0)
			conn_close(s, c, "completion queue failed");
		return n < 0;
	}
	if (wc.status != IBV_WC_SUCCESS) {
		if (wc.status == IBV_WC_LOC_LEN_ERR)
			violation(s, c, "send data over the endpoint's size");
		else
			conn_close(s, c, ibv_wc_status_str(wc.status));
		return 1;
	}
	if ((unsigned)(wc.wr_id >> 32) == WR_DATA_RECV) {
		unsigned idx = (uint32_t)wc.wr_id;
		size_t len = wc.byte_len;

		if ((int)idx != c->pending_send) {
			violation(s, c, "unexpected data");
			return 1;
		}
		c->pending_send = -1;
		s->ep[idx].busy_conn = 0;
		s->st.data++;
		run_handler(s, &s->ep[idx], c, &len);
	}
	return 1;
}

/* A client speaks again only after its send's data was delivered, but the
 * data QP's completion may not have been polled yet: take it first, so
 * that the send handler runs before whatever the client asks next. */
static int data_before_control(struct ql_ep_server *s, struct ep_conn *c)
{
	uint64_t end = ql_clock_ns() + DATA_ORDER_WAIT_NS;

	while (c->state == CONN_LIVE && c->pending_send >= 0) {
		conn_poll_data(s, c);
		if (c->pending_send >= 0 && ql_clock_ns() > end) {
			violation(s, c, "a message before the send's data");
			return -EPROTO;
		}
	}
	return c->state == CONN_LIVE ? 0 : -ENOTCONN;
}

/* Handle what one connection's CQs hold; returns events handled. */
static int conn_poll(struct ql_ep_server *s, struct ep_conn *c)
{
	struct ibv_wc wc[16];
	int n, events = conn_poll_data(s, c);

	if (c->state != CONN_LIVE)
		return events;
	/* The ring is read once every RING_EVERY passes: each read pulls the
	 * slot's cache line away from the client, whose next ack store must
	 * then fetch it back (on soft+shm that doubled a small write). Acks
	 * wait a few microseconds; nothing else does: the ring is drained
	 * before every control message, and at every pass once a read with a
	 * handler (whose READY the client waits for) was described. */
	if (c->ring_fast || ++c->ring_tick % RING_EVERY == 0)
		events += ring_poll(s, c);
	if (c->state != CONN_LIVE)
		return events;
	n = ql_cq_poll(c->cq, 16, wc);
	if (n < 0) {
		conn_close(s, c, "completion queue failed");
		return 1;
	}
	for (int k = 0; k < n && c->state == CONN_LIVE; k++) {
		unsigned kind = (unsigned)(wc[k].wr_id >> 32), idx = (uint32_t)wc[k].wr_id;
		struct ql_epw_msg m;

		events++;
		if (wc[k].status != IBV_WC_SUCCESS) {
			conn_close(s, c, ibv_wc_status_str(wc[k].status));
			break;
		}
		if (kind != WR_CTL_RECV) /* our replies */
			continue;
		/* acks written before this message are taken before it */
		ring_poll(s, c);
		if (c->state != CONN_LIVE || data_before_control(s, c))
			break;
		if (ql_epw_decode(c->mem + (size_t)idx * QL_EPW_SLOT, wc[k].byte_len, &m)) {
			violation(s, c, "malformed message");
			break;
		}
		if (m.kind == QL_EPW_REQUEST)
			on_request(s, c, &m);
		else
			violation(s, c, "a reply from a client");
		if (c->state == CONN_LIVE && post_ctl_recv(c, idx))
			conn_close(s, c, "control receive refused");
	}
	return events;
}

static int conn_setup(struct ql_ep_server *s, struct ep_conn *c)
{
	struct ql_conn_params pc, pd, mem = { 0 };
	struct ql_qp_setup a;
	struct ql_qp_connect_opts o;
	char out[QL_EPC_HELLO_MAX];
	void *ring;
	int ret, n;

	c->hello[c->hello_len] = '\0';
	ret = ql__ep_hello_parse(c->hello, &pc, &pd);
	if (ret)
		return ql_error_set(ret, "malformed hello");
	if ((ret = ql_cq_create(s->dev, 2 * (CTL_RECVS + CTL_SENDS) + 8, &c->cq)) ||
	    (ret = ql_cq_create(s->dev, 8, &c->dcq)))
		return ret;
	ret = ql_pd_alloc(s->dev, &c->pd);
	if (ret)
		return ret;
	ret = ql_pd_mem_alloc(c->pd, CONN_MEM, (void **)&c->mem);
	if (ret)
		return ret;
	ret = ql_mr_reg(c->pd, c->mem, CONN_MEM, IBV_ACCESS_LOCAL_WRITE, &c->mr);
	if (ret)
		return ret;
	if (pc.length < 8 || !pc.rkey)
		return ql_error_set(-EPROTO, "the hello names no credit word");
	c->credit_addr = pc.vaddr;
	c->credit_rkey = pc.rkey;
	ret = ql_pd_mem_alloc(c->pd, RING_BYTES, &ring);
	if (ret)
		return ret;
	c->ring = ring;
	c->ack_seq = 1;
	ret = ql_mr_reg(c->pd, ring, RING_BYTES, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
			&c->ring_mr);
	if (ret)
		return ret;
	mem.vaddr = (uintptr_t)ring;
	mem.rkey = ql_mr_rkey(c->ring_mr);
	mem.length = QL_EPA_SLOTS * 8;
	mem.num_slots = QL_EPA_SLOTS;
	mem.slot_size = 8;
	a = (struct ql_qp_setup){ .qp_type = IBV_QPT_RC,
				  .send_wr = CTL_SENDS,
				  .recv_wr = CTL_RECVS };
	ret = ql_qp_setup(c->pd, &a, &c->cq, &c->cq, &c->ctl, NULL);
	if (ret)
		return ret;
	a.send_wr = 2;
	a.recv_wr = 2;
	ret = ql_qp_setup(c->pd, &a, &c->dcq, &c->dcq, &c->data, NULL);
	if (ret)
		return ret;
	ql_qp_connect_opts_default(&o);
	o.min_rnr_timer = 1; /* a client's ack that beats our re-post retries soon */
	if ((ret = ql_qp_connect(c->ctl, &pc, &o)) || (ret = ql_qp_connect(c->data, &pd, &o)))
		return ret;
	for (unsigned i = 0; i < CTL_RECVS; i++)
		if ((ret = post_ctl_recv(c, i)))
			return ret;
	n = ql__ep_hello_format(c->ctl, c->data, &mem, out, sizeof(out));
	if (n < 0)
		return n;
	if (send(c->fd, out, (size_t)n, MSG_NOSIGNAL) != n)
		return ql_error_set(-EIO, "hello reply not sent");
	return 0;
}

static void refuse(struct ql_ep_server *s, int fd, int err, const char *why)
{
	char line[256];
	int n = snprintf(line, sizeof(line), QL_EPC_MAGIC " ERR %d %s\n", -err, why);

	if (send(fd, line, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		ql_log_debug("endpoint", "refusal not sent");
	s->st.conns_refused++;
}

/* The oldest connection still in its hello, of this source (src) or any
 * (NULL); NULL if none. */
static struct ep_conn *oldest_hello(struct ql_ep_server *s, const uint8_t *src)
{
	struct ep_conn *o = NULL;

	for (int i = 0; i < s->max_conns; i++) {
		struct ep_conn *c = &s->conns[i];

		if (c->state != CONN_HELLO || (src && (!c->has_src || memcmp(c->src, src, 16))))
			continue;
		if (!o || c->id < o->id)
			o = c;
	}
	return o;
}

/* A connection still in its hello has proven nothing: when its source or
 * the table is full it gives way to a new one, so a flood of idle
 * connections cannot keep a client that says its hello out (issue 22). */
static void give_way(struct ql_ep_server *s, struct ep_conn *c)
{
	refuse(s, c->fd, -EUSERS, "a newer connection took this one's place before its hello");
	conn_close(s, c, "gave way before its hello");
}

static int accept_all(struct ql_ep_server *s)
{
	int events = 0, fd;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	while ((fd = accept4(s->lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC)) >=
	       0) {
		struct ep_conn *c = NULL;
		uint8_t src[16] = { 0 };
		int has_src = 0, n = 0;

		events++;
		if (ss.ss_family == AF_INET) {
			memcpy(src, &((struct sockaddr_in *)&ss)->sin_addr, 4);
			has_src = 1;
		} else if (ss.ss_family == AF_INET6) {
			const struct in6_addr *a6 = &((struct sockaddr_in6 *)&ss)->sin6_addr;

			/* an IPv4-mapped source counts as the IPv4 address it is */
			if (IN6_IS_ADDR_V4MAPPED(a6))
				memcpy(src, &a6->s6_addr[12], 4);
			else
				memcpy(src, a6, 16);
			has_src = 1;
		}
		sl = sizeof(ss);
		if (has_src) {
			for (int i = 0; i < s->max_conns; i++)
				n += s->conns[i].state != CONN_FREE && s->conns[i].has_src &&
				     !memcmp(s->conns[i].src, src, 16);
			if (n >= s->max_per_source) {
				struct ep_conn *o = oldest_hello(s, src);

				if (!o) {
					refuse(s, fd, -EUSERS,
					       "too many connections from this address");
					close(fd);
					continue;
				}
				give_way(s, o);
			}
		}
		for (int i = 0; i < s->max_conns && !c; i++)
			if (s->conns[i].state == CONN_FREE)
				c = &s->conns[i];
		if (!c && (c = oldest_hello(s, NULL)) != NULL)
			give_way(s, c);
		if (!c) {
			refuse(s, fd, -EUSERS, "too many connections");
			close(fd);
			continue;
		}
		memset(c, 0, sizeof(*c));
		memcpy(c->src, src, 16);
		c->has_src = has_src;
		c->state = CONN_HELLO;
		c->fd = fd;
		c->pending_send = -1;
		c->id = ++s->next_id;
		c->deadline_ns = ql_clock_ns() + (uint64_t)s->handshake_ms * 1000000ull;
	}
	return events;
}

static int conn_socket(struct ql_ep_server *s, struct ep_conn *c)
{
	if (c->state == CONN_HELLO) {
		ssize_t r = recv(c->fd, c->hello + c->hello_len, QL_EPC_HELLO_MAX - c->hello_len,
				 MSG_DONTWAIT);
		int lines = 0, ret;

		if (r == 0 || (r < 0 && errno != EAGAIN)) {
			conn_close(s, c, "hung up in its hello");
			s->st.conns_refused++;
			return 1;
		}
		if (r < 0)
			return 0;
		c->hello_len += (size_t)r;
		for (size_t i = 0; i < c->hello_len; i++)
			lines += c->hello[i] == '\n';
		if (lines < 3) {
			if (c->hello_len >= QL_EPC_HELLO_MAX) {
				refuse(s, c->fd, -EPROTO, "hello too long");
				conn_close(s, c, "hello too long");
			}
			return 1;
		}
		ret = conn_setup(s, c);
		if (ret) {
			refuse(s, c->fd, ret, ql_error_detail());
			ql_log_warn("endpoint", "connection refused: %s", ql_error_detail());
			conn_close(s, c, "setup failed");
			return 1;
		}
		c->state = CONN_LIVE;
		s->st.conns_accepted++;
		s->st.conns_open++;
		return 1;
	}
	/* live: nothing more is said on the socket; its end is the client's */
	char b[64];
	ssize_t r = recv(c->fd, b, sizeof(b), MSG_DONTWAIT);

	if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
		/* what it sent before it went (an ack, send data) is served */
		while (c->state == CONN_LIVE && conn_poll(s, c) > 0)
			;
		if (c->state == CONN_LIVE)
			conn_close(s, c, "client went away");
		return 1;
	}
	if (r > 0) {
		violation(s, c, "bytes on the socket after the hello");
		return 1;
	}
	return 0;
}

/* Look at the sockets; sleep up to timeout_ms for one of them. */
static int check_sockets(struct ql_ep_server *s, int timeout_ms)
{
	int n = 0, events = 0;
	uint64_t now = ql_clock_ns();

	s->pfds[n].fd = s->lfd;
	s->pfds[n].events = POLLIN;
	n++;
	for (int i = 0; i < s->max_conns; i++) {
		struct ep_conn *c = &s->conns[i];

		if (c->state == CONN_HELLO && now > c->deadline_ns) {
			/* a hello that came while we were busy still counts */
			events += conn_socket(s, c);
			if (c->state == CONN_HELLO) {
				refuse(s, c->fd, -ETIMEDOUT, "hello not finished in time");
				conn_close(s, c, "hello timeout");
				events++;
			}
		}
		s->pfds[i + 1].fd = c->state == CONN_FREE ? -1 : c->fd;
		s->pfds[i + 1].events = POLLIN;
		s->pfds[i + 1].revents = 0;
	}
	if (poll(s->pfds, (nfds_t)s->max_conns + 1, timeout_ms) <= 0)
		return events;
	if (s->pfds[0].revents)
		events += accept_all(s);
	for (int i = 0; i < s->max_conns; i++)
		if (s->pfds[i + 1].fd >= 0 && s->pfds[i + 1].revents &&
		    s->conns[i].state != CONN_FREE)
			events += conn_socket(s, &s->conns[i]);
	return events;
}

int ql_ep_server_poll(struct ql_ep_server *s, int timeout_ms)
{
	uint64_t start = ql_clock_ns(), now;
	int events = 0;

	if (!s)
		return -EINVAL;
	for (;;) {
		for (int i = 0; i < s->max_conns; i++)
			if (s->conns[i].state == CONN_LIVE)
				events += conn_poll(s, &s->conns[i]);
		now = ql_clock_ns();
		if (now >= s->next_sock_check) {
			/* no nap in a pass that did something (a long handler or
			 * a large send is not idleness) */
			int nap = s->idle_ns >= 0 && !events && timeout_ms != 0 &&
				  now - s->last_event_ns > (uint64_t)s->idle_ns;

			events += check_sockets(s, nap ? 1 : 0);
			now = ql_clock_ns();
			s->next_sock_check = now + SOCK_CHECK_NS;
		}
		if (events) {
			s->last_event_ns = now;
			return events;
		}
		if (timeout_ms == 0)
			return 0;
		if (timeout_ms > 0 && now - start >= (uint64_t)timeout_ms * 1000000ull)
			return 0;
	}
}

int ql_ep_server_run(struct ql_ep_server *s, const volatile int *stop)
{
	while (!*stop) {
		int ret = ql_ep_server_poll(s, 100);

		if (ret < 0)
			return ret;
	}
	return 0;
}

/* ---- create / destroy --------------------------------------------------- */

int ql_ep_server_create(const struct ql_ep_spec *spec, const struct ql_ep_server_opts *opts,
			struct ql_ep_server **out)
{
	struct ql_ep_server_opts d = { 0 };
	struct ql_ep_server *s;
	int ret;

	if (!spec || !out)
		return ql_error_set(-EINVAL, "ql_ep_server_create: NULL argument");
	if (spec->count == 0)
		return ql_error_set(-EINVAL, "the specification has no endpoints");
	if (opts)
		d = *opts;
	if (!d.device)
		d.device = "soft+shm://qlink-ep";
	if (!d.listen)
		d.listen = "127.0.0.1:7471";
	if (d.max_conns <= 0)
		d.max_conns = QL_EP_DEFAULT_MAX_CONNS;
	if (d.max_conns > 4096)
		return ql_error_set(-EINVAL, "max_conns %d: at most 4096", d.max_conns);
	if (d.handshake_ms <= 0)
		d.handshake_ms = 1000;
	if (d.max_per_source <= 0)
		d.max_per_source = QL_EP_DEFAULT_MAX_PER_SOURCE;
	if (d.idle_us == 0)
		d.idle_us = 1000;
	s = calloc(1, sizeof(*s));
	if (!s)
		return ql_error_set(-ENOMEM, "out of memory");
	s->lfd = -1;
	s->max_conns = d.max_conns;
	s->max_per_source = d.max_per_source;
	s->handshake_ms = d.handshake_ms;
	s->idle_ns = d.idle_us < 0 ? -1 : (int64_t)d.idle_us * 1000;
	s->ep = calloc((size_t)spec->count, sizeof(*s->ep));
	s->conns = calloc((size_t)s->max_conns, sizeof(*s->conns));
	s->pfds = calloc((size_t)s->max_conns + 1, sizeof(*s->pfds));
	if (!s->ep || !s->conns || !s->pfds) {
		ret = ql_error_set(-ENOMEM, "out of memory");
		goto fail;
	}
	for (int i = 0; i < s->max_conns; i++) {
		s->conns[i].fd = -1;
		s->conns[i].pending_send = -1;
	}
	if ((ret = ql_device_open(d.device, &s->dev)) || (ret = ql_pd_alloc(s->dev, &s->pd)))
		goto fail;
	for (int i = 0; i < spec->count; i++) {
		struct ep_endpoint *ep = &s->ep[i];
		int access = IBV_ACCESS_LOCAL_WRITE;

		ep->e = spec->e[i];
		if (ep->e.type == QL_EP_WRITE)
			access |= IBV_ACCESS_REMOTE_WRITE;
		else if (ep->e.type == QL_EP_READ)
			access |= IBV_ACCESS_REMOTE_READ;
		ep->access = access;
		ret = ql_pd_mem_alloc(s->pd, ep->e.size, &ep->buf);
		if (ret)
			goto fail;
		s->nep = i + 1;
	}
	ret = ql__ep_listen(d.listen, &s->lfd, s->addr, sizeof(s->addr));
	if (ret)
		goto fail;
	*out = s;
	return 0;
fail:
	ql_ep_server_destroy(s);
	return ret;
}

void ql_ep_server_destroy(struct ql_ep_server *s)
{
	if (!s)
		return;
	for (int i = 0; s->conns && i < s->max_conns; i++)
		if (s->conns[i].state != CONN_FREE)
			conn_close(s, &s->conns[i], "server destroyed");
	for (int i = 0; i < s->nep; i++) {
		if (s->ep[i].buf)
			ql_pd_mem_free(s->pd, s->ep[i].buf);
	}
	if (s->lfd >= 0) {
		close(s->lfd);
		if (!strncmp(s->addr, "unix:", 5))
			unlink(s->addr + 5);
	}
	if (s->pd)
		ql_pd_free(s->pd);
	if (s->dev)
		ql_device_close(s->dev);
	free(s->pfds);
	free(s->conns);
	free(s->ep);
	free(s);
}
