/* SPDX-License-Identifier: MIT */
/*
 * The CUDA-Q UDP client (qlink/udp.h): what CUDA-Q Realtime's caller does.
 * A socket connect()ed to the server, so the kernel discards datagrams from
 * any other source; each request is copied into a stride-long staging
 * buffer whose tail stays zero and sent whole (CUDA-Q's caller zeroes its
 * slot and sends slot_size bytes). Responses are received with one
 * recvmmsg per poll into a set of receive buffers (twice the window, so
 * that stray responses cannot starve the expected ones), handed out in
 * arrival order and given back by release.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "qlink/error.h"
#include "qlink/udp.h"
#include "transport/client_int.h"
#include "transport/udp_int.h"

#define QL_UDP_DEFAULT_WINDOW 8u
#define QL_UDP_MAX_WINDOW 65536u
#define POLL_BATCH 32u

struct ql_udp_client {
	struct ql__client_head head; /* must stay first: a ql_client */
	int fd;
	uint32_t stride, window, nbuf;
	bool full;
	uint8_t *stage; /* one stride; bytes past dirty are zero */
	uint32_t dirty; /* bytes of stage written by the last send */
	uint8_t *rmem;	/* nbuf x stride */
	bool *held;	/* buffer polled out, not yet released */
	uint32_t *free; /* free buffers, a stack */
	uint32_t nfree;
	struct iovec *iov; /* one per buffer */
	struct mmsghdr msg[POLL_BATCH];
	uint32_t bslot[POLL_BATCH];
	uint32_t flight;
	struct ql_udp_client_stats st;
};

static const struct ql__client_ops udp_client_ops;

void ql_udp_client_destroy(struct ql_udp_client *c)
{
	if (!c)
		return;
	if (c->fd >= 0)
		close(c->fd);
	free(c->stage);
	free(c->rmem);
	free(c->held);
	free(c->free);
	free(c->iov);
	free(c);
}

int ql_udp_client_create(const struct ql_udp_client_config *cfg, struct ql_udp_client **out)
{
	struct sockaddr_storage ss;
	struct ql_udp_client *c;
	socklen_t sslen;
	int ret;

	if (!cfg || !out)
		return ql_error_set(-EINVAL, "udp client: no config");
	if (!cfg->host)
		return ql_error_set(-EINVAL, "udp client: no server address");
	if (!cfg->port)
		return ql_error_set(-EINVAL, "udp client: no server port");
	if (cfg->window > QL_UDP_MAX_WINDOW)
		return ql_error_set(-EINVAL, "udp client: window %u above %u", cfg->window,
				    QL_UDP_MAX_WINDOW);
	ret = ql__udp_check_stride(cfg->slot_size ? cfg->slot_size : QL_UDP_DEFAULT_SLOT_SIZE);
	if (ret)
		return ret;
	ret = ql__udp_parse_addr(cfg->host, cfg->port, false, &ss, &sslen);
	if (ret)
		return ret;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->head.ops = &udp_client_ops;
	c->fd = -1;
	c->stride = cfg->slot_size ? cfg->slot_size : QL_UDP_DEFAULT_SLOT_SIZE;
	c->window = cfg->window ? cfg->window : QL_UDP_DEFAULT_WINDOW;
	c->full = cfg->full_stride >= 0;
	c->nbuf = 2 * c->window;
	if (c->nbuf < POLL_BATCH)
		c->nbuf = POLL_BATCH;
	c->stage = calloc(1, c->stride);
	c->rmem = calloc(c->nbuf, c->stride);
	c->held = calloc(c->nbuf, sizeof(*c->held));
	c->free = calloc(c->nbuf, sizeof(*c->free));
	c->iov = calloc(c->nbuf, sizeof(*c->iov));
	if (!c->stage || !c->rmem || !c->held || !c->free || !c->iov) {
		ret = -ENOMEM;
		goto err;
	}
	for (uint32_t i = 0; i < c->nbuf; i++) {
		c->iov[i] = (struct iovec){ .iov_base = c->rmem + (size_t)i * c->stride,
					    .iov_len = c->stride };
		c->free[i] = c->nbuf - 1 - i;
	}
	c->nfree = c->nbuf;
	c->fd = socket(ss.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_UDP);
	if (c->fd < 0) {
		ret = ql_error_set(-errno, "udp client: socket: %s", strerror(errno));
		goto err;
	}
	{
		/* room for a window of full-stride responses and strays */
		int v = (int)((uint64_t)c->nbuf * c->stride * 4 < (1u << 30) ?
				      (uint64_t)c->nbuf * c->stride * 4 :
				      (1u << 30));

		if (v < 256 * 1024)
			v = 256 * 1024;
		(void)setsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v));
	}
	if (connect(c->fd, (struct sockaddr *)&ss, sslen)) {
		ret = ql_error_set(-errno, "udp client: connect %s port %u: %s", cfg->host,
				   (unsigned)cfg->port, strerror(errno));
		goto err;
	}
	*out = c;
	return 0;
err:
	ql_udp_client_destroy(c);
	return ret;
}

int ql_udp_client_send(struct ql_udp_client *c, const void *msg, uint32_t len)
{
	const void *p = msg;
	size_t n = len;
	ssize_t r;

	if (!c || (len && !msg))
		return -EINVAL;
	if (len > c->stride)
		return -EMSGSIZE;
	if (c->flight >= c->window)
		return -EAGAIN;
	if (c->full) {
		memcpy(c->stage, msg, len);
		/* zero only what the last frame left past this one */
		if (c->dirty > len)
			memset(c->stage + len, 0, c->dirty - len);
		c->dirty = len;
		p = c->stage;
		n = c->stride;
	}
	r = send(c->fd, p, n, MSG_DONTWAIT);
	if (r < 0) {
		int err = errno;

		return err == EWOULDBLOCK ? -EAGAIN : -err;
	}
	c->flight++;
	c->st.sent++;
	return 0;
}

int ql_udp_client_send_raw(struct ql_udp_client *c, const void *msg, uint32_t len)
{
	if (!c || (len && !msg))
		return -EINVAL;
	if (send(c->fd, msg, len, MSG_DONTWAIT) < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	return 0;
}

int ql_udp_client_poll(struct ql_udp_client *c, struct ql_ring_response *out, int max)
{
	uint32_t k, j;
	int r, n = 0;

	if (!c || max < 0 || (max && !out))
		return -EINVAL;
	k = (uint32_t)max;
	if (k > c->nfree)
		k = c->nfree;
	if (k > POLL_BATCH)
		k = POLL_BATCH;
	if (!k)
		return 0;
	for (j = 0; j < k; j++) {
		uint32_t b = c->free[--c->nfree];
		struct msghdr *h = &c->msg[j].msg_hdr;

		c->bslot[j] = b;
		memset(h, 0, sizeof(*h));
		h->msg_iov = &c->iov[b];
		h->msg_iovlen = 1;
	}
	r = recvmmsg(c->fd, c->msg, k, MSG_DONTWAIT | MSG_TRUNC, NULL);
	if (r < 0) {
		int err = errno;

		c->nfree += k; /* the stack is as it was */
		if (err == EAGAIN || err == EWOULDBLOCK || err == EINTR)
			return 0;
		c->st.recv_errors++;
		c->st.last_recv_error = err;
		return -err;
	}
	for (j = 0; j < (uint32_t)r; j++) {
		uint32_t b = c->bslot[j], len = c->msg[j].msg_len;

		if (len > c->stride) {
			c->st.oversize++;
			c->free[c->nfree++] = b;
			continue;
		}
		c->held[b] = true;
		out[n].msg = c->rmem + (size_t)b * c->stride;
		out[n].len = len;
		out[n].slot = b;
		n++;
		if (c->flight)
			c->flight--;
	}
	for (j = k; j-- > (uint32_t)r;)
		c->free[c->nfree++] = c->bslot[j];
	c->st.received += (uint64_t)n;
	return n;
}

int ql_udp_client_release(struct ql_udp_client *c, const struct ql_ring_response *r)
{
	if (!c || !r || r->slot >= c->nbuf || !c->held[r->slot])
		return -EINVAL;
	c->held[r->slot] = false;
	c->free[c->nfree++] = r->slot;
	return 0;
}

uint32_t ql_udp_client_max_msg(const struct ql_udp_client *c)
{
	return c ? c->stride : 0;
}

uint32_t ql_udp_client_in_flight(const struct ql_udp_client *c)
{
	return c ? c->flight : 0;
}

void ql_udp_client_forget(struct ql_udp_client *c, uint32_t n)
{
	if (c)
		c->flight = n < c->flight ? c->flight - n : 0;
}

int ql_udp_client_fd(const struct ql_udp_client *c)
{
	return c ? c->fd : -EINVAL;
}

int ql_udp_client_stats(const struct ql_udp_client *c, struct ql_udp_client_stats *st)
{
	if (!c || !st)
		return -EINVAL;
	*st = c->st;
	return 0;
}

/* ---- as a ql_client (client.h) ------------------------------------------ */

QL__CLIENT_FORWARD_OPS(udp)

static int udp_op_local_params(struct ql_client *c, struct ql_conn_params *p)
{
	(void)c;
	(void)p;
	return ql_error_set(-EOPNOTSUPP, "udp client: no QP, no connection parameters");
}

static int udp_op_connect(struct ql_client *c, const struct ql_conn_params *server,
			  const struct ql_qp_connect_opts *opts)
{
	(void)c;
	(void)server;
	(void)opts;
	return 0; /* the socket was connect()ed at create */
}

/* no stats: no resends: a request the server dropped is never answered */
QL__CLIENT_OPS(udp, QL_CLIENT_UDP);
