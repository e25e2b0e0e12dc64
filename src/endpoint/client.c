/* SPDX-License-Identifier: MIT */
/*
 * The endpoint client (docs/endpoint.md). One synchronous operation at a
 * time per connection. Descriptors of write/read endpoints are cached, so a
 * repeated write is WRITE + ACK and a repeated read READ + ACK (fenced),
 * posted together, with no round trip through the server's CPU.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "endpoint/ep_int.h"
#include "qlink/clock.h"
#include "qlink/error.h"
#include "verbs/provider.h"

#define C_RECVS 4
#define C_SENDS 2
#define C_MEM ((C_RECVS + C_SENDS + 1) * QL_EPW_SLOT) /* + the ack word */
#define C_ACK_SLOT (C_RECVS + C_SENDS)
#define C_UBUFS 16
#define SPIN_NS 1000000ull /* busy-poll this long, then yield between polls */

enum { W_CTL_RECV = 1, W_CTL_SEND, W_DATA_RECV, W_DATA_SEND, W_RDMA, W_ACK };
#define W_ID(kind, idx) (((uint64_t)(kind) << 32) | (uint32_t)(idx))

struct cache_ent {
	char path[QL_EP_PATH_MAX];
	enum ql_ep_type type;
	uint32_t ep_id, rkey;
	uint64_t addr, size;
	int needs_ready; /* read with a handler: wait for READY between reads */
	int ready;
};

struct ubuf {
	uint8_t *addr;
	size_t len;
	struct ql_mr *mr;
};

struct ql_ep_client {
	struct ql_device *dev;
	struct ql_pd *pd;
	struct ql_cq *cq;
	struct ql_qp *ctl, *data;
	uint8_t *mem;
	struct ql_mr *mr;
	int fd;
	int broken;
	/* the server's ack ring (ep_int.h) and our credit word in it */
	uint64_t ring_addr;
	uint32_t ring_rkey;
	uint32_t ring_slots;
	uint64_t ack_seq;	   /* the next ack's */
	volatile uint64_t *credit; /* acks the server took, written by it */
	struct ql_mr *credit_mr;
	int timeout_ms;
	uint32_t seq;
	unsigned send_next;
	/* what the completions said */
	int sends_out;
	int got_reply;
	struct ql_epw_msg reply;
	int got_data;
	uint32_t data_len;
	int32_t data_status;
	int ncache;
	struct cache_ent cache[QL_EP_MAX_ENDPOINTS];
	struct ubuf ubufs[C_UBUFS];
	struct ubuf bounce;
	struct ql_ep_client_stats st;
};

void ql_ep_client_set_timeout(struct ql_ep_client *c, int timeout_ms)
{
	if (c)
		c->timeout_ms = timeout_ms > 0 ? timeout_ms : 5000;
}

int ql_ep_client_stats(const struct ql_ep_client *c, struct ql_ep_client_stats *st)
{
	if (!c || !st)
		return -EINVAL;
	*st = c->st;
	return 0;
}

static int post_ctl_recv(struct ql_ep_client *c, unsigned slot)
{
	struct ibv_sge sge = { .addr = (uintptr_t)(c->mem + (size_t)slot * QL_EPW_SLOT),
			       .length = QL_EPW_SLOT,
			       .lkey = ql_mr_lkey(c->mr) };
	struct ibv_recv_wr wr = { .wr_id = W_ID(W_CTL_RECV, slot), .sg_list = &sge, .num_sge = 1 };
	struct ibv_recv_wr *bad;

	return ql_qp_post_recv(c->ctl, &wr, &bad);
}

static int broke(struct ql_ep_client *c, int err, const char *fmt, const char *what)
{
	c->broken = 1;
	return ql_error_set(err, fmt, what);
}

static void on_ready(struct ql_ep_client *c, const struct ql_epw_msg *m)
{
	for (int i = 0; i < c->ncache; i++)
		if (c->cache[i].type == QL_EP_READ && c->cache[i].ep_id == m->ep_id)
			c->cache[i].ready = 1;
}

/* Poll until *flag (or sends_out == 0 when flag is NULL). */
static int wait_for(struct ql_ep_client *c, const int *flag)
{
	uint64_t start = 0, now;
	struct ibv_wc wc[8];
	struct ql_epw_msg m;

	/* the clock is read only when a wait lasts (it costs a poll's time) */
	for (unsigned iter = 0;; iter++) {
		int n = ql_cq_poll(c->cq, 8, wc);

		if (n < 0)
			return broke(c, -EIO, "endpoint client: %s", "completion queue failed");
		for (int k = 0; k < n; k++) {
			unsigned kind = (unsigned)(wc[k].wr_id >> 32), idx = (uint32_t)wc[k].wr_id;

			if (wc[k].status != IBV_WC_SUCCESS)
				return broke(c, -EIO, "endpoint connection failed: %s",
					     ibv_wc_status_str(wc[k].status));
			switch (kind) {
			case W_CTL_RECV:
				if (ql_epw_decode(c->mem + (size_t)idx * QL_EPW_SLOT,
						  wc[k].byte_len, &m) ||
				    (m.kind != QL_EPW_REPLY && m.kind != QL_EPW_READY))
					return broke(c, -EPROTO, "endpoint server: %s",
						     "malformed reply");
				if (m.kind == QL_EPW_READY) {
					on_ready(c, &m);
				} else {
					c->reply = m;
					c->got_reply = 1;
				}
				if (post_ctl_recv(c, idx))
					return broke(c, -EIO, "endpoint client: %s",
						     "receive refused");
				break;
			case W_DATA_RECV:
				c->got_data = 1;
				c->data_len = wc[k].byte_len;
				c->data_status = (wc[k].wc_flags & IBV_WC_WITH_IMM) ?
							 (int32_t)be32toh(wc[k].imm_data) :
							 0;
				break;
			default:
				c->sends_out--;
				break;
			}
		}
		if (flag ? *flag : c->sends_out == 0)
			return 0;
		/* (the CQ's poll progresses a caller-progress device; this
		 * covers a provider whose poll does not, docs/progress.md) */
		if (!n)
			ql_device_progress(c->dev);
		if (iter % 64)
			continue;
		now = ql_clock_ns();
		if (!start)
			start = now;
		if (now - start > (uint64_t)c->timeout_ms * 1000000ull)
			return broke(c, -ETIMEDOUT, "endpoint server did not answer in %s",
				     "the client's timeout");
		if (now - start > SPIN_NS)
			sched_yield();
	}
}

static int post_ctl_send(struct ql_ep_client *c, const struct ql_epw_msg *m,
			 struct ibv_send_wr *first, int flags)
{
	unsigned slot = C_RECVS + (c->send_next++ % C_SENDS);
	uint8_t *p = c->mem + (size_t)slot * QL_EPW_SLOT;
	struct ibv_sge sge = { .addr = (uintptr_t)p, .lkey = ql_mr_lkey(c->mr) };
	struct ibv_send_wr wr = {
		.wr_id = W_ID(W_CTL_SEND, slot),
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED | flags,
	};
	struct ibv_send_wr *bad;

	sge.length = (uint32_t)ql_epw_encode(m, p);
	if (first)
		first->next = &wr;
	c->sends_out++;
	if (ql_qp_post_send(c->ctl, first ? first : &wr, &bad)) {
		c->sends_out--;
		return broke(c, -EIO, "endpoint client: %s", "send queue refused the request");
	}
	return 0;
}

static int status_error(int status, const char *path, enum ql_ep_type type, size_t len)
{
	switch (status) {
	case -ENOENT:
		return ql_error_set(status, "no endpoint %s on the server", path);
	case -EPROTOTYPE:
		return ql_error_set(status, "endpoint %s is not of type %s", path,
				    ql_ep_type_name(type));
	case -EMSGSIZE:
		return ql_error_set(status, "%zu bytes do not fit endpoint %s (%s)", len, path,
				    ql_ep_type_name(type));
	default:
		return ql_error_set(status < 0 ? status : -EIO,
				    "endpoint %s (%s): the server's handler failed: %s", path,
				    ql_ep_type_name(type), ql_strerror(status < 0 ? status : -EIO));
	}
}

/* One request/reply round trip. Returns the reply's status. */
static int request(struct ql_ep_client *c, enum ql_ep_type type, const char *path, size_t plen,
		   uint64_t length)
{
	struct ql_epw_msg m = { .kind = QL_EPW_REQUEST,
				.op = (uint8_t)type,
				.seq = ++c->seq,
				.length = length,
				.path = path,
				.path_len = (uint8_t)plen };
	int ret;

	c->got_reply = 0;
	ret = post_ctl_send(c, &m, NULL, 0);
	if (!ret)
		ret = wait_for(c, &c->got_reply);
	if (!ret)
		ret = wait_for(c, NULL);
	if (ret)
		return ret;
	if (c->reply.seq != m.seq || c->reply.op != type)
		return broke(c, -EPROTO, "endpoint server: %s", "reply to another request");
	c->st.requests++;
	return c->reply.status;
}

static int check(struct ql_ep_client *c, const char *path, size_t *plen)
{
	const char *why;

	if (!c || !path)
		return ql_error_set(-EINVAL, "endpoint call: NULL argument");
	if (c->broken)
		return ql_error_set(-ENOTCONN, "the endpoint connection broke earlier: reconnect");
	*plen = strnlen(path, QL_EP_PATH_MAX);
	/* a path in the cache was checked when it went in */
	for (int i = 0; *plen < QL_EP_PATH_MAX && i < c->ncache; i++)
		if (!memcmp(c->cache[i].path, path, *plen + 1))
			return 0;
	if ((why = ql__ep_path_problem(path, *plen)))
		return ql_error_set(-EINVAL, "endpoint path '%.40s': %s", path, why);
	return 0;
}

/* check(), and a buffer for the len bytes of a data call. */
static int check_buf(struct ql_ep_client *c, const char *path, size_t *plen, const void *buf,
		     size_t len)
{
	int ret = check(c, path, plen);

	if (ret)
		return ret;
	if (!buf && len)
		return ql_error_set(-EINVAL, "endpoint call: NULL buffer");
	return 0;
}

/* Where len bytes at buf go on the wire: a registered buffer of ours, or
 * the bounce buffer (grown as needed). */
static int local_sge(struct ql_ep_client *c, const void *buf, size_t len, struct ibv_sge *sge,
		     int *bounced)
{
	const uint8_t *b = buf;

	*bounced = 0;
	for (int i = 0; i < C_UBUFS; i++) {
		struct ubuf *u = &c->ubufs[i];

		if (u->addr && b >= u->addr && len <= u->len &&
		    (size_t)(b - u->addr) <= u->len - len) {
			sge->addr = (uintptr_t)b;
			sge->length = (uint32_t)len;
			sge->lkey = ql_mr_lkey(u->mr);
			return 0;
		}
	}
	if (c->bounce.len < len) {
		size_t want = len < 4096 ? 4096 : len;
		int ret;

		if (c->bounce.mr)
			ql_mr_dereg(c->bounce.mr);
		if (c->bounce.addr)
			ql_pd_mem_free(c->pd, c->bounce.addr);
		memset(&c->bounce, 0, sizeof(c->bounce));
		ret = ql_pd_mem_alloc(c->pd, want, (void **)&c->bounce.addr);
		if (!ret)
			ret = ql_mr_reg(c->pd, c->bounce.addr, want, IBV_ACCESS_LOCAL_WRITE,
					&c->bounce.mr);
		if (ret) {
			if (c->bounce.addr)
				ql_pd_mem_free(c->pd, c->bounce.addr);
			memset(&c->bounce, 0, sizeof(c->bounce));
			return ret;
		}
		c->bounce.len = want;
	}
	*bounced = 1;
	c->st.bounced++;
	sge->addr = (uintptr_t)c->bounce.addr;
	sge->length = (uint32_t)len;
	sge->lkey = ql_mr_lkey(c->bounce.mr);
	return 0;
}

static struct cache_ent *lookup(struct ql_ep_client *c, const char *path, size_t plen,
				enum ql_ep_type type, size_t len, int *err)
{
	struct cache_ent *e;
	int ret;

	*err = 0;
	for (int i = 0; i < c->ncache; i++) {
		e = &c->cache[i];
		if (e->type == type && !memcmp(e->path, path, plen + 1)) {
			c->st.cached++;
			return e;
		}
	}
	ret = request(c, type, path, plen, len);
	if (ret) {
		*err = c->broken ? ret : status_error(ret, path, type, len);
		return NULL;
	}
	if (c->ncache == QL_EP_MAX_ENDPOINTS) /* the server's table is no bigger */
		c->ncache = 0;
	e = &c->cache[c->ncache++];
	memcpy(e->path, path, plen + 1);
	e->type = type;
	e->ep_id = c->reply.ep_id;
	e->rkey = c->reply.rkey;
	e->addr = c->reply.addr;
	e->size = c->reply.length;
	e->needs_ready = !!(c->reply.flags & QL_EPW_F_READY);
	e->ready = 1; /* the handler ran before the reply */
	return e;
}

int ql_ep_client_size(struct ql_ep_client *c, const char *path, enum ql_ep_type type, size_t *size)
{
	struct cache_ent *e;
	size_t plen;
	int ret = check(c, path, &plen);

	if (ret)
		return ret;
	if (type != QL_EP_WRITE && type != QL_EP_READ)
		return ql_error_set(-EINVAL, "only write and read endpoints have a descriptor");
	e = lookup(c, path, plen, type, 0, &ret);
	if (!e)
		return ret;
	*size = e->size;
	return 0;
}

/* Wait until the server took `want` acks (its credit word says so). */
static int wait_credit(struct ql_ep_client *c, uint64_t want)
{
	uint64_t start = ql_clock_ns();

	while (le64toh(__atomic_load_n(c->credit, __ATOMIC_ACQUIRE)) < want) {
		uint64_t now;

		/* the credit word is written by the server's RDMA: a device in
		 * caller progress (docs/progress.md) receives it only here */
		ql_device_progress(c->dev);
		now = ql_clock_ns();

		if (now - start > (uint64_t)c->timeout_ms * 1000000ull)
			return broke(c, -ETIMEDOUT, "endpoint server took no acks in %s",
				     "the client's timeout");
		if (now - start > SPIN_NS)
			sched_yield();
	}
	return 0;
}

/* The end of a WRITE or READ on a device in caller progress
 * (docs/progress.md §10): what the server sends after the acknowledgement
 * — a read handler's READY, its credit write after every QL_EPA_CREDIT
 * acks — has arrived, and one more round of the device sends the ACK that
 * the device holds for the last request it received (§4). The application
 * may leave the client idle after the call returns: a server message left
 * unacknowledged would exhaust its retries (about half a second) and the
 * server would close the connection. A device that progresses on its own
 * acknowledges them when they come; nothing is waited for. */
static int rdma_settle(struct ql_ep_client *c, struct cache_ent *e, enum ql_ep_type type)
{
	uint64_t acks = c->ack_seq - 1;
	int ret = 0;

	if (!ql__device_caller(c->dev))
		return 0;
	if (type == QL_EP_READ && e->needs_ready)
		ret = wait_for(c, &e->ready);
	if (!ret && acks % QL_EPA_CREDIT == 0)
		ret = wait_credit(c, acks);
	ql_device_progress(c->dev);
	return ret;
}

/* WRITE or READ through a cached descriptor, then the acknowledgement. */
static int rdma(struct ql_ep_client *c, enum ql_ep_type type, const char *path, void *buf,
		size_t len)
{
	struct ibv_send_wr wr = { 0 };
	struct ibv_sge sge;
	struct cache_ent *e;
	struct ibv_sge ack_sge;
	struct ibv_send_wr ack = { 0 }, *bad;
	size_t plen;
	int bounced, ret = check_buf(c, path, &plen, buf, len);

	if (ret)
		return ret;
	e = lookup(c, path, plen, type, len, &ret);
	if (!e)
		return ret;
	if (len > e->size)
		return ql_error_set(-EMSGSIZE, "%zu bytes do not fit endpoint %s (%s, %llu bytes)",
				    len, path, ql_ep_type_name(type), (unsigned long long)e->size);
	ret = local_sge(c, buf, len, &sge, &bounced);
	if (ret)
		return ret;
	/* the read handler of the previous read has run (READY) */
	if (e->needs_ready && !e->ready && (ret = wait_for(c, &e->ready)))
		return ret;
	e->ready = 0;
	if (bounced && type == QL_EP_WRITE)
		memcpy(c->bounce.addr, buf, len);
	wr.wr_id = W_ID(W_RDMA, 0);
	wr.sg_list = len ? &sge : NULL;
	wr.num_sge = len ? 1 : 0;
	wr.opcode = type == QL_EP_WRITE ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
	wr.wr.rdma.remote_addr = e->addr;
	wr.wr.rdma.rkey = e->rkey;
	/* a free slot in the server's ack ring: it took all but ring_slots - 1 */
	if (c->ack_seq - 1 - le64toh(*c->credit) >= c->ring_slots &&
	    (ret = wait_credit(c, c->ack_seq - c->ring_slots)))
		return ret;
	ack_sge.addr = (uintptr_t)(c->mem + (size_t)C_ACK_SLOT * QL_EPW_SLOT);
	ack_sge.length = 8;
	ack_sge.lkey = ql_mr_lkey(c->mr);
	*(uint64_t *)(uintptr_t)ack_sge.addr =
		htole64(ql_epa_word(c->ack_seq, e->ep_id, type == QL_EP_READ, len));
	ack.wr_id = W_ID(W_ACK, 0);
	ack.sg_list = &ack_sge;
	ack.num_sge = 1;
	ack.opcode = IBV_WR_RDMA_WRITE;
	/* the fence: a READ's data is home before the server sees the ack */
	ack.send_flags = IBV_SEND_SIGNALED | (type == QL_EP_READ ? IBV_SEND_FENCE : 0);
	ack.wr.rdma.remote_addr = c->ring_addr + ((c->ack_seq - 1) % c->ring_slots) * 8;
	ack.wr.rdma.rkey = c->ring_rkey;
	wr.next = &ack;
	c->sends_out++;
	if (ql_qp_post_send(c->ctl, &wr, &bad)) {
		c->sends_out--;
		return broke(c, -EIO, "endpoint client: %s", "send queue refused the write");
	}
	c->ack_seq++;
	ret = wait_for(c, NULL);
	if (!ret)
		ret = rdma_settle(c, e, type);
	if (ret)
		return ret;
	if (bounced && type == QL_EP_READ)
		memcpy(buf, c->bounce.addr, len);
	return 0;
}

int ql_ep_write(struct ql_ep_client *c, const char *path, const void *buf, size_t len)
{
	return rdma(c, QL_EP_WRITE, path, (void *)(uintptr_t)buf, len);
}

int ql_ep_read(struct ql_ep_client *c, const char *path, void *buf, size_t len)
{
	return rdma(c, QL_EP_READ, path, buf, len);
}

int ql_ep_send(struct ql_ep_client *c, const char *path, const void *buf, size_t len)
{
	struct ibv_sge sge;
	struct ibv_send_wr wr = { 0 }, *bad;
	size_t plen;
	int bounced, ret = check_buf(c, path, &plen, buf, len);

	if (ret)
		return ret;
	if (len > QL_EP_SIZE_MAX)
		return status_error(-EMSGSIZE, path, QL_EP_SEND, len);
	/* -EBUSY: another client's data is due in the buffer; ask again */
	for (uint64_t end = ql_clock_ns() + (uint64_t)c->timeout_ms * 1000000ull;;) {
		ret = request(c, QL_EP_SEND, path, plen, len);
		if (ret != -EBUSY || c->broken)
			break;
		if (ql_clock_ns() > end)
			return ql_error_set(-ETIMEDOUT,
					    "endpoint %s stayed busy with other senders", path);
		ql_device_progress(c->dev);
		sched_yield();
	}
	if (ret)
		return c->broken ? ret : status_error(ret, path, QL_EP_SEND, len);
	/* the server has posted its receive: from here the data must go */
	ret = local_sge(c, buf, len, &sge, &bounced);
	if (ret) {
		c->broken = 1;
		return ret;
	}
	if (bounced)
		memcpy(c->bounce.addr, buf, len);
	wr.wr_id = W_ID(W_DATA_SEND, 0);
	wr.sg_list = len ? &sge : NULL;
	wr.num_sge = len ? 1 : 0;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	c->sends_out++;
	if (ql_qp_post_send(c->data, &wr, &bad)) {
		c->sends_out--;
		return broke(c, -EIO, "endpoint client: %s", "data send refused");
	}
	return wait_for(c, NULL);
}

long ql_ep_recv(struct ql_ep_client *c, const char *path, void *buf, size_t cap)
{
	struct ibv_sge sge;
	struct ibv_recv_wr wr = { 0 }, *bad;
	size_t plen;
	int bounced, ret = check_buf(c, path, &plen, buf, cap), status;

	if (ret)
		return ret;
	if (cap > QL_EP_SIZE_MAX)
		cap = QL_EP_SIZE_MAX;
	ret = local_sge(c, buf, cap, &sge, &bounced);
	if (ret)
		return ret;
	/* posted before asking: the server answers on the data QP at once */
	wr.wr_id = W_ID(W_DATA_RECV, 0);
	wr.sg_list = cap ? &sge : NULL;
	wr.num_sge = cap ? 1 : 0;
	c->got_data = 0;
	if (ql_qp_post_recv(c->data, &wr, &bad))
		return broke(c, -EIO, "endpoint client: %s", "receive refused");
	status = request(c, QL_EP_RECEIVE, path, plen, cap);
	if (c->broken)
		return status;
	ret = wait_for(c, &c->got_data);
	if (ret)
		return ret;
	if (status)
		return status_error(status, path, QL_EP_RECEIVE, cap);
	if (c->data_status)
		return status_error(c->data_status, path, QL_EP_RECEIVE, cap);
	if (bounced)
		memcpy(buf, c->bounce.addr, c->data_len);
	return (long)c->data_len;
}

/* ---- memory ------------------------------------------------------------ */

void *ql_ep_client_alloc(struct ql_ep_client *c, size_t len)
{
	struct ubuf *u = NULL;
	int ret;

	if (!c || !len) {
		errno = EINVAL;
		return NULL;
	}
	for (int i = 0; i < C_UBUFS && !u; i++)
		if (!c->ubufs[i].addr)
			u = &c->ubufs[i];
	if (!u) {
		ql_error_set(-ENOSPC, "at most %d endpoint client buffers", C_UBUFS);
		errno = ENOSPC;
		return NULL;
	}
	ret = ql_pd_mem_alloc(c->pd, len, (void **)&u->addr);
	if (!ret)
		ret = ql_mr_reg(c->pd, u->addr, len, IBV_ACCESS_LOCAL_WRITE, &u->mr);
	if (ret) {
		if (u->addr)
			ql_pd_mem_free(c->pd, u->addr);
		memset(u, 0, sizeof(*u));
		errno = -ret;
		return NULL;
	}
	u->len = len;
	return u->addr;
}

int ql_ep_client_free(struct ql_ep_client *c, void *buf)
{
	if (!c || !buf)
		return -EINVAL;
	for (int i = 0; i < C_UBUFS; i++) {
		struct ubuf *u = &c->ubufs[i];

		if (u->addr == buf) {
			ql_mr_dereg(u->mr);
			ql_pd_mem_free(c->pd, u->addr);
			memset(u, 0, sizeof(*u));
			return 0;
		}
	}
	return ql_error_set(-EINVAL, "not a buffer of this endpoint client");
}

/* ---- connect / close ----------------------------------------------------- */

static int read_hello(struct ql_ep_client *c, char *buf, size_t cap)
{
	uint64_t end = ql_clock_ns() + (uint64_t)c->timeout_ms * 1000000ull;
	size_t n = 0;

	for (;;) {
		struct pollfd p = { .fd = c->fd, .events = POLLIN };
		int lines = 0, left = (int)((end - ql_clock_ns()) / 1000000ull);
		ssize_t r;

		if (ql_clock_ns() >= end || poll(&p, 1, left > 0 ? left : 1) == 0)
			return ql_error_set(-ETIMEDOUT,
					    "the endpoint server did not answer the hello");
		r = recv(c->fd, buf + n, cap - 1 - n, MSG_DONTWAIT);
		if (r == 0)
			return ql_error_set(-ECONNRESET, "the endpoint server hung up");
		if (r < 0) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			return ql_error_set(-errno, "hello: %s", strerror(errno));
		}
		n += (size_t)r;
		buf[n] = '\0';
		if (!strncmp(buf, QL_EPC_MAGIC " ERR ", 11) && strchr(buf, '\n')) {
			int err = atoi(buf + 11);

			*strchr(buf, '\n') = '\0';
			return ql_error_set(err > 0 ? -err : -EPROTO,
					    "the endpoint server refused: %s", buf + 11);
		}
		for (size_t i = 0; i < n; i++)
			lines += buf[i] == '\n';
		if (lines >= 3)
			return 0;
		if (n >= cap - 1)
			return ql_error_set(-EPROTO, "not an endpoint server (hello too long)");
	}
}

int ql_ep_client_connect(const char *device, const char *address, struct ql_ep_client **out)
{
	struct ql_ep_client *c;
	struct ql_qp_setup a;
	struct ql_conn_params pc, pd, mem = { 0 };
	char hello[QL_EPC_HELLO_MAX + 1];
	void *credit;
	int ret, n;

	if (!device || !address || !out)
		return ql_error_set(-EINVAL, "ql_ep_client_connect: NULL argument");
	c = calloc(1, sizeof(*c));
	if (!c)
		return ql_error_set(-ENOMEM, "out of memory");
	c->fd = -1;
	c->timeout_ms = 5000;
	if ((ret = ql_device_open(device, &c->dev)) || (ret = ql_pd_alloc(c->dev, &c->pd)) ||
	    (ret = ql_cq_create(c->dev, 32, &c->cq)))
		goto fail;
	ret = ql_pd_mem_alloc(c->pd, C_MEM, (void **)&c->mem);
	if (ret)
		goto fail;
	ret = ql_mr_reg(c->pd, c->mem, C_MEM, IBV_ACCESS_LOCAL_WRITE, &c->mr);
	if (ret)
		goto fail;
	/* the credit word alone in its page and MR: all the server may write */
	ret = ql_pd_mem_alloc(c->pd, 4096, &credit);
	if (ret)
		goto fail;
	c->credit = credit;
	ret = ql_mr_reg(c->pd, credit, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
			&c->credit_mr);
	if (ret)
		goto fail;
	mem.vaddr = (uintptr_t)credit;
	mem.rkey = ql_mr_rkey(c->credit_mr);
	mem.length = 8;
	a = (struct ql_qp_setup){ .qp_type = IBV_QPT_RC, .send_wr = 4, .recv_wr = C_RECVS };
	if ((ret = ql_qp_setup(c->pd, &a, &c->cq, &c->cq, &c->ctl, NULL)))
		goto fail;
	a.send_wr = 2;
	a.recv_wr = 2;
	if ((ret = ql_qp_setup(c->pd, &a, &c->cq, &c->cq, &c->data, NULL)))
		goto fail;
	if ((ret = ql__ep_connect(address, c->timeout_ms, &c->fd)))
		goto fail;
	n = ql__ep_hello_format(c->ctl, c->data, &mem, hello, sizeof(hello));
	if (n < 0) {
		ret = n;
		goto fail;
	}
	if (send(c->fd, hello, (size_t)n, MSG_NOSIGNAL) != n) {
		ret = ql_error_set(-ECONNRESET, "hello not sent to %s", address);
		goto fail;
	}
	if ((ret = read_hello(c, hello, sizeof(hello))))
		goto fail;
	if (ql__ep_hello_parse(hello, &pc, &pd) || pc.slot_size != 8 || pc.num_slots == 0 ||
	    pc.num_slots > 65536 || pc.length < (uint64_t)pc.num_slots * 8) {
		ret = ql_error_set(-EPROTO, "%s is not an endpoint server (bad hello)", address);
		goto fail;
	}
	c->ring_addr = pc.vaddr;
	c->ring_rkey = pc.rkey;
	c->ring_slots = pc.num_slots;
	c->ack_seq = 1;
	if ((ret = ql_qp_connect(c->ctl, &pc, NULL)) || (ret = ql_qp_connect(c->data, &pd, NULL)))
		goto fail;
	/* the server speaks only when spoken to: posting now is in time */
	for (unsigned i = 0; i < C_RECVS; i++)
		if ((ret = post_ctl_recv(c, i)))
			goto fail;
	*out = c;
	return 0;
fail:
	ql_ep_client_close(c);
	return ret;
}

void ql_ep_client_close(struct ql_ep_client *c)
{
	if (!c)
		return;
	if (c->fd >= 0)
		close(c->fd);
	if (c->ctl)
		ql_qp_destroy(c->ctl);
	if (c->data)
		ql_qp_destroy(c->data);
	for (int i = 0; i < C_UBUFS; i++)
		if (c->ubufs[i].addr) {
			ql_mr_dereg(c->ubufs[i].mr);
			ql_pd_mem_free(c->pd, c->ubufs[i].addr);
		}
	if (c->bounce.mr)
		ql_mr_dereg(c->bounce.mr);
	if (c->bounce.addr)
		ql_pd_mem_free(c->pd, c->bounce.addr);
	if (c->mr)
		ql_mr_dereg(c->mr);
	if (c->mem)
		ql_pd_mem_free(c->pd, c->mem);
	if (c->credit_mr)
		ql_mr_dereg(c->credit_mr);
	if (c->credit)
		ql_pd_mem_free(c->pd, (void *)(uintptr_t)c->credit);
	if (c->cq)
		ql_cq_destroy(c->cq);
	if (c->pd)
		ql_pd_free(c->pd);
	if (c->dev)
		ql_device_close(c->dev);
	free(c);
}
