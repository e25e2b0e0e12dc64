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
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "qlink/error.h"
#include "qlink/rpc_wire.h"
#include "qlink/udp.h"
#include "transport/udp_int.h"
#include "util/sock.h"

#define BUMP(x) __atomic_store_n(&(x), (x) + 1, __ATOMIC_RELAXED)
#define ADD(x, n) __atomic_store_n(&(x), (x) + (n), __ATOMIC_RELAXED)
#define READ(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

struct uaddr {
	uint64_t seq; /* the datagram whose source this is; 0: none */
	socklen_t len;
	uint32_t rlen;		      /* the datagram's length: the longest reply it may get */
	uint8_t klen;		      /* key bytes: 6 (IPv4, IPv4-mapped too) or 18 (IPv6) */
	uint8_t key[QL__UDP_KEY_MAX]; /* address then port, network order */
	struct sockaddr_storage ss;
};

/* One allowlist entry: key-form address (4 or 16 bytes) and prefix bits. */
struct allow_net {
	uint8_t alen;
	uint8_t bits;
	uint8_t addr[16];
};

/* Fairness applies to bursts of at least this many datagrams (a share of
 * at least 4 between two sources): a small ring's full bursts are its
 * normal pace, not a backlog. */
#define FAIR_MIN_BURST 8u

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
	struct allow_net *allow; /* nallow entries */
	uint32_t nallow;
	uint32_t fair_share; /* 0: even split; UINT32_MAX: off */
	uint32_t *srcof;     /* per burst position: its source's index */
	uint32_t sfirst[64]; /* per source of the burst: its first position */
	uint32_t scount[64]; /* per source of the burst: datagrams kept */
	struct ql_udp_channel_stats st;
};

/* Sources told apart in one burst; a burst with more treats the rest as
 * one (never capped): fairness is for a few callers and a flooder. */
#define FAIR_SOURCES 64u
_Static_assert(FAIR_SOURCES == 64, "sfirst, scount");

static const struct ql__channel_ops uch_ops;

/* The canonical key of a source: address (IPv4-mapped IPv6 as IPv4) then
 * port, network order. 0 for a family we do not serve. */
static uint8_t make_key(const struct sockaddr_storage *ss, socklen_t len, uint8_t *key)
{
	if (ss->ss_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)(const void *)ss;

		memcpy(key, &a->sin_addr, 4);
		memcpy(key + 4, &a->sin_port, 2);
		return 6;
	}
	if (ss->ss_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)(const void *)ss;

		if (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr)) {
			memcpy(key, a->sin6_addr.s6_addr + 12, 4);
			memcpy(key + 4, &a->sin6_port, 2);
			return 6;
		}
		memcpy(key, &a->sin6_addr, 16);
		memcpy(key + 16, &a->sin6_port, 2);
		return 18;
	}
	return 0;
}

static bool allowed(const struct uch *c, const struct uaddr *a)
{
	uint32_t alen = a->klen - 2u;

	if (!a->klen)
		return false;
	for (uint32_t i = 0; i < c->nallow; i++) {
		const struct allow_net *n = &c->allow[i];
		uint32_t whole = n->bits / 8u, rest = n->bits % 8u;

		if (n->alen != alen || memcmp(n->addr, a->key, whole))
			continue;
		if (rest && ((n->addr[whole] ^ a->key[whole]) & (uint8_t)(0xffu << (8 - rest))))
			continue;
		return true;
	}
	return false;
}

static uint32_t rd_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Per-source fairness over the n datagrams handed on in a burst that took
 * all it could (k): each source keeps at most its share, in arrival order;
 * the rest of its datagrams are shed (their slots freed). Returns the
 * number kept, compacted in out. */
static int fair(struct uch *c, struct ql_buffer **out, int n, uint32_t k)
{
	uint32_t nsrc = 0, share, m = 0;

	for (int i = 0; i < n; i++) {
		const struct uaddr *a = &c->addrs[out[i]->tag % c->naddr];
		uint32_t j;

		for (j = 0; j < nsrc; j++) {
			const struct uaddr *b = &c->addrs[out[c->sfirst[j]]->tag % c->naddr];

			if (b->klen == a->klen && !memcmp(b->key, a->key, a->klen))
				break;
		}
		if (j == nsrc && nsrc < FAIR_SOURCES) {
			c->sfirst[nsrc] = (uint32_t)i; /* the source's first datagram */
			c->scount[nsrc++] = 0;
		}
		/* j == FAIR_SOURCES: the overflow "source", never capped */
		c->srcof[i] = j;
	}
	if (nsrc < 2 && !c->fair_share)
		return n; /* one caller: nothing to share */
	share = c->fair_share ? c->fair_share : k / nsrc;
	if (!share)
		share = 1;
	for (int i = 0; i < n; i++) {
		uint32_t j = c->srcof[i];

		if (j < FAIR_SOURCES && c->scount[j]++ >= share) {
			uint32_t s = out[i]->index;

			c->held[s] = false;
			c->free[c->nfree++] = s;
			c->addrs[out[i]->tag % c->naddr].seq = 0;
			BUMP(c->st.shed);
			continue;
		}
		out[m++] = out[i];
	}
	return (int)m;
}

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
		a->rlen = len;
		a->klen = make_key(&a->ss, a->len, a->key);
		if (!allowed(c, a)) {
			/* not ours to answer: no reply, no dispatch */
			BUMP(c->st.not_allowed);
			a->seq = 0;
			c->free[c->nfree++] = s;
			continue;
		}
		if (len > c->stride) {
			/* CUDA-Q drops these too (its one warning is the tool's) */
			BUMP(c->st.oversize);
			STORE(c->st.last_oversize, len);
			c->free[c->nfree++] = s;
			continue;
		}
		/* A datagram shorter than its own header says is refused, never
		 * zero-filled: what it lacks would otherwise be answered (a short
		 * spoofed request amplified into a long reply). */
		if (len < QL_RPC_HEADER_SIZE || rd_le32(b->base + 8) > len - QL_RPC_HEADER_SIZE) {
			BUMP(c->st.truncated);
			a->seq = 0;
			c->free[c->nfree++] = s;
			continue;
		}
		if (len < c->stride)
			BUMP(c->st.undersize);
		b->offset = 0;
		b->len = len; /* the frame and whatever followed it in the datagram */
		b->tag = seq;
		b->reply_max = len; /* a reply never exceeds its request */
		c->held[s] = true;
		out[n++] = b;
	}
	/* the slots nothing arrived in go back, in the order they were taken */
	for (j = k; j-- > (uint32_t)r;)
		c->free[c->nfree++] = c->bslot[j];
	if (r)
		ADD(c->st.datagrams, (uint64_t)r);
	/* a full burst: more may wait in the socket, so share it out */
	if ((uint32_t)r == k && k >= FAIR_MIN_BURST && n > 1 && c->fair_share != UINT32_MAX)
		n = fair(c, out, n, k);
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
		if (__builtin_expect(b->len > a->rlen, 0)) {
			/* never more bytes out than the request brought in (an
			 * amplifier otherwise): a 24-byte error response fits,
			 * as every request handed on is 24 bytes or more */
			uint8_t *p = ql_buffer_data(b);
			uint32_t st = (uint32_t)QL_RPC_E_RESULT_OVERFLOW;

			for (int x = 0; x < 4; x++) {
				p[4 + x] = (uint8_t)(st >> (8 * x)); /* status, LE */
				p[8 + x] = 0;			     /* result_len */
			}
			b->len = QL_RPC_RESPONSE_SIZE;
			BUMP(c->st.reply_clamped);
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
	free(c->allow);
	free(c->srcof);
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

/* "ADDR" or "ADDR/BITS", IPv4 or IPv6 (an IPv4-mapped one as IPv4). */
static int parse_net(const char *text, struct allow_net *n)
{
	char addr[INET6_ADDRSTRLEN + 1], *slash, *end;
	unsigned char buf[16];
	long bits, max;

	if (!text || strlen(text) >= sizeof(addr))
		return -EINVAL;
	strcpy(addr, text);
	slash = strchr(addr, '/');
	if (slash)
		*slash = '\0';
	memset(n, 0, sizeof(*n));
	if (inet_pton(AF_INET, addr, buf) == 1) {
		n->alen = 4;
		max = 32;
	} else if (inet_pton(AF_INET6, addr, buf) == 1) {
		n->alen = 16;
		max = 128;
	} else {
		return -EINVAL;
	}
	bits = max;
	if (slash) {
		errno = 0;
		bits = strtol(slash + 1, &end, 10);
		if (!slash[1] || *end || errno || bits < 0 || bits > max)
			return -EINVAL;
	}
	if (n->alen == 16 && bits >= 96 && IN6_IS_ADDR_V4MAPPED((struct in6_addr *)buf)) {
		memmove(buf, buf + 12, 4);
		n->alen = 4;
		bits -= 96;
	}
	memcpy(n->addr, buf, n->alen);
	n->bits = (uint8_t)bits;
	return 0;
}

static int set_allow(struct uch *c, const struct ql_udp_channel_config *k)
{
	static const char *const loopback[] = { "127.0.0.0/8", "::1" };
	const char *const *list = k->allow && k->allow_count ? k->allow : loopback;
	uint32_t n = k->allow && k->allow_count ? k->allow_count : 2;

	c->allow = calloc(n, sizeof(*c->allow));
	if (!c->allow)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++)
		if (parse_net(list[i], &c->allow[i]))
			return ql_error_set(
				-EINVAL,
				"udp channel: allowlist entry '%s' is not an address or "
				"CIDR block (e.g. 10.0.0.0/8, fd00::/8)",
				list[i] ? list[i] : "(null)");
	c->nallow = n;
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
	c->srcof = calloc(c->nslots, sizeof(*c->srcof));
	c->fair_share = k.fair_share;
	txlen = ql_pool_region_size(c->ntx, c->stride);
	c->txmem = calloc(1, txlen);
	if (!c->slots || !c->bufs || !c->held || !c->free || !c->riov || !c->rmsg || !c->bslot ||
	    !c->addrs || !c->tiov || !c->tmsg || !c->tbuf || !c->txmem || !c->srcof) {
		ret = -ENOMEM;
		goto err;
	}
	ret = set_allow(c, &k);
	if (ret)
		goto err;
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
	uint32_t drops = 0;

	if (!c || !st)
		return -EINVAL;
	st->datagrams = READ(c->st.datagrams);
	st->oversize = READ(c->st.oversize);
	st->undersize = READ(c->st.undersize);
	st->truncated = READ(c->st.truncated);
	st->not_allowed = READ(c->st.not_allowed);
	st->shed = READ(c->st.shed);
	st->reply_clamped = READ(c->st.reply_clamped);
	st->send_errors = READ(c->st.send_errors);
	st->sent = READ(c->st.sent);
	st->unaddressed = READ(c->st.unaddressed);
	st->recv_errors = READ(c->st.recv_errors);
	st->last_oversize = READ(c->st.last_oversize);
	st->last_send_error = READ(c->st.last_send_error);
	st->busy_poll = c->st.busy_poll;
	ql__sock_drops(c->fd, &drops);
	st->kernel_drops = drops;
	return 0;
}

static size_t uch_source(const struct ql_channel *ch, const struct ql_buffer *rx, uint8_t *key,
			 size_t cap)
{
	const struct uch *c = (const struct uch *)ch;
	const struct uaddr *a = &c->addrs[rx->tag % c->naddr];

	if (!rx->tag || a->seq != rx->tag || a->klen > cap)
		return 0;
	memcpy(key, a->key, a->klen);
	return a->klen;
}

static const struct ql__channel_ops uch_ops = {
	.source = uch_source,
	.receive_burst = uch_receive_burst,
	.send_burst = uch_send_burst,
	.acquire_buffer = uch_acquire,
	.release_buffer = uch_release,
	.register_memory = uch_register,
	.poll_errors = uch_poll_errors,
	.destroy = uch_destroy,
	.send_stats = uch_send_stats,
};
