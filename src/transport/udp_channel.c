/* SPDX-License-Identifier: MIT */
/*
 * The CUDA-Q UDP channel (qlink/udp.h, docs/wire-protocol.md "CUDA-Q UDP
 * transport"): the server side of CUDA-Q Realtime's UDP transport as a
 * struct ql_channel.
 *
 * Receive: slots of one stride each, a LIFO stack of the free ones; a
 * burst takes up to `max` free slots, points one mmsghdr at each and makes
 * one recvmmsg. Each datagram received gets the next sequence number
 * (oversize ones too); its source address is written by the kernel straight
 * into an address ring entry indexed by that sequence, and the buffer's tag
 * is the sequence. Send: the daemon copies the request's tag into the
 * response buffer (channel.h), so each response is addressed to the source
 * of the request it answers, found in the address ring by the tag; one
 * sendmmsg sends the burst. The address ring holds num_slots + tx_buffers
 * entries: more than a daemon, which answers every request within the
 * burst that took it, ever has outstanding; an entry overwritten before its
 * response left is detected (sequence mismatch) and counted, never misused.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/sock_diag.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "qlink/error.h"
#include "qlink/udp.h"
#include "transport/udp_int.h"

#define BUMP(x) __atomic_store_n(&(x), (x) + 1, __ATOMIC_RELAXED)
#define ADD(x, n) __atomic_store_n(&(x), (x) + (n), __ATOMIC_RELAXED)
#define READ(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

struct uaddr {
	uint64_t seq; /* the datagram whose source this is; 0: none */
	socklen_t len;
	struct sockaddr_storage ss;
};

struct uch {
	struct ql__channel_head head;
	int fd;
	uint32_t nslots, stride, ntx, naddr;
	uint8_t *slots;		/* nslots x stride */
	struct ql_buffer *bufs; /* one per slot */
	bool *held;		/* slot handed out, not released */
	uint32_t *free;		/* free slots, a stack */
	uint32_t nfree;
	struct iovec *riov;   /* one per slot */
	struct mmsghdr *rmsg; /* one per burst position */
	uint32_t *bslot;      /* slot at burst position */
	struct uaddr *addrs;  /* naddr, indexed by seq % naddr */
	uint64_t seq;	      /* last sequence given */
	uint8_t *txmem;
	struct ql_pool *pool;
	struct iovec *tiov;	 /* ntx */
	struct mmsghdr *tmsg;	 /* ntx */
	struct ql_buffer **tbuf; /* ntx */
	struct sockaddr_storage local;
	socklen_t local_len;
	struct ql_udp_channel_stats st;
};

static const struct ql__channel_ops uch_ops;

static int uch_receive_burst(struct ql_channel *ch, struct ql_buffer **out, int max)
{
	struct uch *c = (struct uch *)ch;
	uint32_t k = max > 0 ? (uint32_t)max : 0, j;
	int r, n = 0;

	if (k > c->nfree)
		k = c->nfree;
	if (!k)
		return 0;
	for (j = 0; j < k; j++) {
		uint32_t s = c->free[--c->nfree];
		struct msghdr *h = &c->rmsg[j].msg_hdr;

		c->bslot[j] = s;
		h->msg_name = &c->addrs[(c->seq + 1 + j) % c->naddr].ss;
		h->msg_namelen = sizeof(struct sockaddr_storage);
		h->msg_iov = &c->riov[s];
		h->msg_iovlen = 1;
		h->msg_control = NULL;
		h->msg_controllen = 0;
		h->msg_flags = 0;
	}
	/* MSG_TRUNC: msg_len is the datagram's real length, even when longer
	 * than the slot */
	r = recvmmsg(c->fd, c->rmsg, k, MSG_DONTWAIT | MSG_TRUNC, NULL);
	if (r < 0) {
		int err = errno;

		r = 0;
		if (err == EBADF || err == ENOTSOCK || err == EFAULT || err == EINVAL) {
			c->nfree += k; /* the stack is as it was */
			return -err;
		}
		if (err != EAGAIN && err != EWOULDBLOCK && err != EINTR)
			BUMP(c->st.recv_errors); /* e.g. a pending ICMP error */
	}
	for (j = 0; j < (uint32_t)r; j++) {
		uint64_t seq = ++c->seq;
		struct uaddr *a = &c->addrs[seq % c->naddr];
		uint32_t s = c->bslot[j], len = c->rmsg[j].msg_len;
		struct ql_buffer *b = &c->bufs[s];

		a->seq = seq;
		a->len = c->rmsg[j].msg_hdr.msg_namelen;
		if (len > c->stride) {
			/* CUDA-Q drops these too (its one warning is the tool's) */
			BUMP(c->st.oversize);
			STORE(c->st.last_oversize, len);
			c->free[c->nfree++] = s;
			continue;
		}
		if (len < c->stride) {
			memset(b->base + len, 0, c->stride - len);
			BUMP(c->st.undersize);
		}
		b->offset = 0;
		b->len = c->stride; /* the frame is read from the whole slot */
		b->tag = seq;
		c->held[s] = true;
		out[n++] = b;
	}
	/* the slots nothing arrived in go back, in the order they were taken */
	for (j = k; j-- > (uint32_t)r;)
		c->free[c->nfree++] = c->bslot[j];
	if (r)
		ADD(c->st.datagrams, (uint64_t)r);
	return n;
}

static int uch_send_burst(struct ql_channel *ch, struct ql_buffer **bufs, int n)
{
	struct uch *c = (struct uch *)ch;
	uint32_t k = 0, done = 0, errs = 0, unaddr = 0;

	for (int i = 0; i < n; i++) {
		struct ql_buffer *b = bufs[i];
		struct uaddr *a = &c->addrs[b->tag % c->naddr];
		struct msghdr *h;

		if (!b->tag || a->seq != b->tag || k >= c->ntx) {
			unaddr++;
			ql_pool_put(c->pool, b);
			continue;
		}
		c->tiov[k].iov_base = ql_buffer_data(b);
		c->tiov[k].iov_len = b->len <= c->stride ? b->len : c->stride;
		h = &c->tmsg[k].msg_hdr;
		h->msg_name = &a->ss;
		h->msg_namelen = a->len;
		h->msg_iov = &c->tiov[k];
		h->msg_iovlen = 1;
		h->msg_control = NULL;
		h->msg_controllen = 0;
		h->msg_flags = 0;
		c->tbuf[k++] = b;
	}
	/* One call for the burst; a datagram the kernel refuses (rare on UDP:
	 * no route, no buffer) is lost and counted, the rest still go. */
	while (done < k) {
		int r = sendmmsg(c->fd, c->tmsg + done, k - done, MSG_DONTWAIT);

		if (r > 0) {
			done += (uint32_t)r;
			continue;
		}
		if (r < 0 && errno == EINTR)
			continue;
		STORE(c->st.last_send_error, r < 0 ? errno : EIO);
		errs++;
		done++;
	}
	for (uint32_t i = 0; i < k; i++)
		ql_pool_put(c->pool, c->tbuf[i]);
	if (k - errs)
		ADD(c->st.sent, (uint64_t)(k - errs));
	if (errs)
		ADD(c->st.send_errors, (uint64_t)errs);
	if (unaddr)
		ADD(c->st.unaddressed, (uint64_t)unaddr);
	return n;
}

static struct ql_buffer *uch_acquire(struct ql_channel *ch)
{
	return ql_pool_get(((struct uch *)ch)->pool);
}

static void uch_release(struct ql_channel *ch, struct ql_buffer *b)
{
	struct uch *c = (struct uch *)ch;

	if (b >= c->bufs && b < c->bufs + c->nslots) {
		uint32_t s = (uint32_t)(b - c->bufs);

		if (c->held[s]) {
			c->held[s] = false;
			c->free[c->nfree++] = s;
		}
		return;
	}
	ql_pool_put(c->pool, b);
}

static int uch_register(struct ql_channel *ch, void *addr, size_t len, uint32_t *lkey)
{
	(void)ch;
	(void)addr;
	(void)len;
	if (lkey)
		*lkey = 0;
	return -EOPNOTSUPP; /* no NIC memory: datagrams are copied by the kernel */
}

static int uch_poll_errors(struct ql_channel *ch)
{
	(void)ch;
	return 0; /* a datagram socket has no peer to lose */
}

static void uch_send_stats(const struct ql_channel *ch, struct ql_channel_send_stats *s)
{
	const struct uch *c = (const struct uch *)ch;
	uint64_t sent = READ(c->st.sent), errs = READ(c->st.send_errors),
		 unaddr = READ(c->st.unaddressed);

	/* accepted by the kernel counts as delivered (UDP says no more) */
	s->posted = sent + errs + unaddr;
	s->completed = sent;
	s->dropped_rnr = 0;
	s->dropped_peer = errs + unaddr;
}

static void uch_destroy(struct ql_channel *ch)
{
	struct uch *c = (struct uch *)ch;

	if (!c)
		return;
	if (c->fd >= 0)
		close(c->fd);
	if (c->pool)
		ql_pool_destroy(c->pool);
	free(c->txmem);
	free(c->slots);
	free(c->bufs);
	free(c->held);
	free(c->free);
	free(c->riov);
	free(c->rmsg);
	free(c->bslot);
	free(c->addrs);
	free(c->tiov);
	free(c->tmsg);
	free(c->tbuf);
	free(c);
}

int ql__udp_parse_addr(const char *host, uint16_t port, bool passive, struct sockaddr_storage *ss,
		       socklen_t *len)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC,
				  .ai_socktype = SOCK_DGRAM,
				  .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV |
					      (passive ? AI_PASSIVE : 0) };
	struct addrinfo *res = NULL;
	char serv[8];
	int ret;

	if (!host || !*host)
		return ql_error_set(-EINVAL, "udp: no address");
	snprintf(serv, sizeof(serv), "%u", (unsigned)port);
	ret = getaddrinfo(host, serv, &hints, &res);
	if (ret || !res)
		return ql_error_set(-EINVAL, "udp: '%s' is not an IPv4 or IPv6 address literal",
				    host);
	if (res->ai_addrlen > sizeof(*ss)) {
		freeaddrinfo(res);
		return ql_error_set(-EINVAL, "udp: address '%s' too long", host);
	}
	memset(ss, 0, sizeof(*ss));
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*len = (socklen_t)res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

int ql__udp_check_stride(uint32_t stride)
{
	if (stride < QL_UDP_MIN_SLOT_SIZE || stride > QL_UDP_MAX_SLOT_SIZE)
		return ql_error_set(-EINVAL, "udp: slot size %u outside %u..%u", stride,
				    QL_UDP_MIN_SLOT_SIZE, QL_UDP_MAX_SLOT_SIZE);
	return 0;
}

int ql_udp_channel_create(const struct ql_udp_channel_config *cfg, struct ql_channel **out)
{
	struct ql_udp_channel_config k;
	struct sockaddr_storage ss;
	socklen_t sslen;
	struct uch *c;
	int ret;
	size_t txlen;

	if (!cfg || !out)
		return ql_error_set(-EINVAL, "udp channel: no config");
	k = *cfg;
	if (!k.address)
		k.address = "127.0.0.1";
	if (!k.num_slots)
		k.num_slots = QL_UDP_DEFAULT_SLOTS;
	if (!k.slot_size)
		k.slot_size = QL_UDP_DEFAULT_SLOT_SIZE;
	if (!k.tx_buffers)
		k.tx_buffers = k.num_slots;
	if (k.num_slots > QL_UDP_MAX_SLOTS)
		return ql_error_set(-EINVAL, "udp channel: %u slots above %u", k.num_slots,
				    QL_UDP_MAX_SLOTS);
	if (k.tx_buffers > QL_UDP_MAX_SLOTS)
		return ql_error_set(-EINVAL, "udp channel: %u response buffers above %u",
				    k.tx_buffers, QL_UDP_MAX_SLOTS);
	ret = ql__udp_check_stride(k.slot_size);
	if (ret)
		return ret;
	ret = ql__udp_parse_addr(k.address, k.port, true, &ss, &sslen);
	if (ret)
		return ret;

	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->head.ops = &uch_ops;
	c->fd = -1;
	c->nslots = k.num_slots;
	c->stride = k.slot_size;
	c->ntx = k.tx_buffers;
	c->naddr = k.num_slots + k.tx_buffers;
	c->slots = calloc(c->nslots, c->stride);
	c->bufs = calloc(c->nslots, sizeof(*c->bufs));
	c->held = calloc(c->nslots, sizeof(*c->held));
	c->free = calloc(c->nslots, sizeof(*c->free));
	c->riov = calloc(c->nslots, sizeof(*c->riov));
	c->rmsg = calloc(c->nslots, sizeof(*c->rmsg));
	c->bslot = calloc(c->nslots, sizeof(*c->bslot));
	c->addrs = calloc(c->naddr, sizeof(*c->addrs));
	c->tiov = calloc(c->ntx, sizeof(*c->tiov));
	c->tmsg = calloc(c->ntx, sizeof(*c->tmsg));
	c->tbuf = calloc(c->ntx, sizeof(*c->tbuf));
	txlen = ql_pool_region_size(c->ntx, c->stride);
	c->txmem = calloc(1, txlen);
	if (!c->slots || !c->bufs || !c->held || !c->free || !c->riov || !c->rmsg || !c->bslot ||
	    !c->addrs || !c->tiov || !c->tmsg || !c->tbuf || !c->txmem) {
		ret = -ENOMEM;
		goto err;
	}
	for (uint32_t s = 0; s < c->nslots; s++) {
		uint8_t *p = c->slots + (size_t)s * c->stride;

		c->bufs[s] = (struct ql_buffer){ .base = p, .capacity = c->stride, .index = s };
		c->riov[s] = (struct iovec){ .iov_base = p, .iov_len = c->stride };
		/* slot 0 on top: the first burst fills 0, 1, 2, ... */
		c->free[s] = c->nslots - 1 - s;
	}
	c->nfree = c->nslots;
	ret = ql_pool_create(c->txmem, txlen, c->ntx, c->stride, 0, &c->pool);
	if (ret)
		goto err;

	c->fd = socket(ss.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_UDP);
	if (c->fd < 0) {
		ret = ql_error_set(-errno, "udp channel: socket: %s", strerror(errno));
		goto err;
	}
	{
		/* the backlog the kernel keeps while the dispatcher is busy */
		uint64_t want = k.rcvbuf ? k.rcvbuf : (uint64_t)c->nslots * c->stride * 4;
		int v;

		if (!k.rcvbuf && want < 256 * 1024)
			want = 256 * 1024;
		v = want > INT32_MAX / 2 ? INT32_MAX / 2 : (int)want;
		(void)setsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v));
	}
	if (k.busy_poll_us) {
		int v = (int)k.busy_poll_us;

		c->st.busy_poll =
			setsockopt(c->fd, SOL_SOCKET, SO_BUSY_POLL, &v, sizeof(v)) ? -errno : 1;
	}
	if (bind(c->fd, (struct sockaddr *)&ss, sslen)) {
		ret = -errno;
		ql_error_set(ret, "udp channel: bind %s port %u: %s", k.address, (unsigned)k.port,
			     strerror(errno));
		goto err;
	}
	c->local_len = sizeof(c->local);
	if (getsockname(c->fd, (struct sockaddr *)&c->local, &c->local_len)) {
		ret = ql_error_set(-errno, "udp channel: getsockname: %s", strerror(errno));
		goto err;
	}
	*out = (struct ql_channel *)c;
	return 0;
err:
	uch_destroy((struct ql_channel *)c);
	return ret;
}

static const struct uch *to_uch(const struct ql_channel *ch)
{
	if (!ch || ((const struct ql__channel_head *)(const void *)ch)->ops != &uch_ops)
		return NULL;
	return (const struct uch *)ch;
}

int ql_udp_channel_local_addr(struct ql_channel *ch, struct sockaddr_storage *ss, socklen_t *len)
{
	const struct uch *c = to_uch(ch);

	if (!c || !ss || !len)
		return -EINVAL;
	*ss = c->local;
	*len = c->local_len;
	return 0;
}

int ql_udp_channel_fd(struct ql_channel *ch)
{
	const struct uch *c = to_uch(ch);

	return c ? c->fd : -EINVAL;
}

int ql_udp_channel_stats(const struct ql_channel *ch, struct ql_udp_channel_stats *st)
{
	const struct uch *c = to_uch(ch);
	uint32_t mem[SK_MEMINFO_VARS];
	socklen_t ml = sizeof(mem);

	if (!c || !st)
		return -EINVAL;
	st->datagrams = READ(c->st.datagrams);
	st->oversize = READ(c->st.oversize);
	st->undersize = READ(c->st.undersize);
	st->send_errors = READ(c->st.send_errors);
	st->sent = READ(c->st.sent);
	st->unaddressed = READ(c->st.unaddressed);
	st->recv_errors = READ(c->st.recv_errors);
	st->last_oversize = READ(c->st.last_oversize);
	st->last_send_error = READ(c->st.last_send_error);
	st->busy_poll = c->st.busy_poll;
	st->kernel_drops = 0;
	if (!getsockopt(c->fd, SOL_SOCKET, SO_MEMINFO, mem, &ml) &&
	    ml > SK_MEMINFO_DROPS * sizeof(uint32_t))
		st->kernel_drops = mem[SK_MEMINFO_DROPS];
	return 0;
}

static const struct ql__channel_ops uch_ops = {
	.receive_burst = uch_receive_burst,
	.send_burst = uch_send_burst,
	.acquire_buffer = uch_acquire,
	.release_buffer = uch_release,
	.register_memory = uch_register,
	.poll_errors = uch_poll_errors,
	.destroy = uch_destroy,
	.send_stats = uch_send_stats,
};
