/* SPDX-License-Identifier: MIT */
/*
 * Hololink register protocol, client side, and the data-plane configuration
 * built on it. Replies are hostile input: a datagram is looked at only when
 * it comes from the board's address and carries the current request's
 * sequence number and reply opcode, and then its status and address echo
 * decide; anything else is ignored and counted by reason (docs/hololink.md
 * "Replies").
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "qlink/error.h"
#include "qlink/hololink.h"

#include "hololink_wire.h"

#define HL_RETRIES_MAX 16

struct ql_hl {
	int fd;
	struct sockaddr_in board;
	uint16_t seq; /* the next request's sequence number */
	bool first;   /* no request yet: send it without SEQUENCE_CHECK */
	uint32_t timeout_ms;
	uint32_t retries;
	char peer[80];
	struct ql_hl_stats stats;
};

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

const char *ql_hl_status_name(uint8_t code)
{
	switch (code) {
	case QL_HL_OK:
		return "success";
	case QL_HL_ERR_GENERAL:
		return "general error";
	case QL_HL_ERR_ADDRESS:
		return "invalid address";
	case QL_HL_ERR_COMMAND:
		return "invalid command";
	case QL_HL_ERR_LENGTH:
		return "bad packet length";
	case QL_HL_ERR_FLAGS:
		return "invalid flags";
	case QL_HL_ERR_BUFFER_FULL:
		return "buffer full";
	default:
		return "unknown status";
	}
}

int ql_hl_status_errno(uint8_t code)
{
	switch (code) {
	case QL_HL_OK:
		return 0;
	case QL_HL_ERR_GENERAL:
		return -EIO;
	case QL_HL_ERR_ADDRESS:
		return -EFAULT;
	case QL_HL_ERR_COMMAND:
		return -EOPNOTSUPP;
	case QL_HL_ERR_LENGTH:
		return -EMSGSIZE;
	case QL_HL_ERR_FLAGS:
		return -EINVAL;
	case QL_HL_ERR_BUFFER_FULL:
		return -ENOBUFS;
	default:
		return -EPROTO;
	}
}

static const char *op_name(uint8_t op)
{
	switch (op) {
	case QL_HL_WR_DWORD:
		return "WR_DWORD";
	case QL_HL_WR_BLOCK:
		return "WR_BLOCK";
	case QL_HL_RD_DWORD:
		return "RD_DWORD";
	case QL_HL_RD_BLOCK:
		return "RD_BLOCK";
	default:
		return "?";
	}
}

int ql_hl_open(const char *address, uint16_t port, uint32_t timeout_ms, uint32_t retries,
	       struct ql_hl **out)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_DGRAM }, *ai = NULL;
	char service[8];
	struct ql_hl *h;
	int ret;

	if (!address || !*address || !out)
		return ql_error_set(-EINVAL, "hololink: board address required");
	if (retries > HL_RETRIES_MAX)
		return ql_error_set(-EINVAL, "hololink: at most %d retries, not %u", HL_RETRIES_MAX,
				    retries);
	snprintf(service, sizeof(service), "%u", port ? port : QL_HL_PORT);
	ret = getaddrinfo(address, service, &hints, &ai);
	if (ret)
		return ql_error_set(-EHOSTUNREACH, "hololink: cannot resolve '%s': %s", address,
				    gai_strerror(ret));
	h = calloc(1, sizeof(*h));
	if (!h) {
		freeaddrinfo(ai);
		return ql_error_set(-ENOMEM, "hololink: out of memory");
	}
	h->timeout_ms = timeout_ms ? timeout_ms : 200;
	h->retries = retries;
	snprintf(h->peer, sizeof(h->peer), "%s:%s", address, service);
	/* A random first number: an off-path sender cannot predict the
	 * sequence numbers a reply must carry (upstream starts at 0x100). */
	if (getrandom(&h->seq, sizeof(h->seq), GRND_NONBLOCK) != sizeof(h->seq))
		h->seq = (uint16_t)(now_ms() ^ QL_HL_SEQ_FIRST);
	h->first = true;
	memcpy(&h->board, ai->ai_addr, sizeof(h->board));
	/* Not connected: a board on loopback bound to INADDR_ANY answers from
	 * 127.0.0.1 whatever address was asked, which a connected socket would
	 * drop; the source is checked here instead (reply_source_ok). */
	h->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (h->fd < 0) {
		ret = ql_error_set(-errno, "hololink: socket: %s", strerror(errno));
		goto fail;
	}
	freeaddrinfo(ai);
	*out = h;
	return 0;
fail:
	freeaddrinfo(ai);
	free(h);
	return ret;
}

void ql_hl_close(struct ql_hl *h)
{
	if (!h)
		return;
	close(h->fd);
	free(h);
}

const char *ql_hl_peer(const struct ql_hl *h)
{
	return h->peer;
}

void ql_hl_stats(const struct ql_hl *h, struct ql_hl_stats *out)
{
	*out = h->stats;
}

void ql_hl_set_sequence(struct ql_hl *h, uint16_t next, bool first)
{
	h->seq = next;
	h->first = first;
}

/* One request/reply exchange. req has its opcode and body; the header's
 * flags and sequence are set here. */
struct xact {
	uint8_t op;
	uint8_t *req;
	size_t req_len;
	const struct ql_hl_reg *regs; /* for the address echo and the messages */
	size_t n;
	uint32_t *values; /* read results */
};

/* Why replies to the current request were ignored. */
struct ignored {
	uint32_t source, sequence, opcode, malformed;
	struct in_addr last_source;
};

/* The board's address; for a board on another loopback address also
 * 127.0.0.1, where a board bound to INADDR_ANY answers from. */
static bool reply_source_ok(const struct ql_hl *h, const struct sockaddr_in *from, socklen_t len)
{
	uint32_t want = ntohl(h->board.sin_addr.s_addr), got;

	if (len < sizeof(*from) || from->sin_family != AF_INET)
		return false;
	got = ntohl(from->sin_addr.s_addr);
	return got == want || (want >> 24 == 127 && got == 0x7f000001u);
}

/* A reply with the right source, sequence and opcode: 1 when it is
 * malformed (ignored), 0 accepted, <0 the board's error status. */
static int check_reply(struct ql_hl *h, const struct xact *x, const uint8_t *r, size_t len)
{
	uint8_t code = r[4];

	if (code != QL_HL_OK)
		return ql_error_set(ql_hl_status_errno(code),
				    "hololink %s: %s of 0x%08x%s answered status 0x%02x (%s)",
				    h->peer, op_name(x->op), x->regs[0].addr,
				    x->n > 1 ? " and following" : "", code,
				    ql_hl_status_name(code));
	/* Every reply echoes the request's pairs (writes too); the trailer and
	 * anything after it are not looked at. */
	if (len < QL_HL_HEADER + 8 * x->n)
		return 1;
	for (size_t i = 0; i < x->n; i++)
		if (hl_pair_addr(r, i) != x->regs[i].addr)
			return 1;
	if (x->values)
		for (size_t i = 0; i < x->n; i++)
			x->values[i] = hl_pair_value(r, i);
	return 0;
}

static void ignored_detail(const struct ignored *ig, char *buf, size_t cap)
{
	char src[INET_ADDRSTRLEN];
	int n = 0;

	buf[0] = 0;
	inet_ntop(AF_INET, &ig->last_source, src, sizeof(src));
	if (ig->source)
		n += snprintf(buf + n, cap - (size_t)n, "%s%u from another address (%s)",
			      n ? ", " : "", ig->source, src);
	if (ig->sequence && (size_t)n < cap)
		n += snprintf(buf + n, cap - (size_t)n, "%s%u with another sequence number",
			      n ? ", " : "", ig->sequence);
	if (ig->opcode && (size_t)n < cap)
		n += snprintf(buf + n, cap - (size_t)n, "%s%u with another opcode", n ? ", " : "",
			      ig->opcode);
	if (ig->malformed && (size_t)n < cap)
		snprintf(buf + n, cap - (size_t)n,
			 "%s%u malformed (short, or addresses not echoed)", n ? ", " : "",
			 ig->malformed);
}

static int transact(struct ql_hl *h, const struct xact *x)
{
	uint8_t r[QL_HL_DGRAM_MAX + 64];
	struct ignored ig = { 0 };
	/* One sequence number per request, repeated on retransmission. */
	uint16_t seq = h->seq++;
	uint32_t total;
	char why[256];

	h->stats.requests++;
	x->req[0] = x->op;
	x->req[2] = (uint8_t)(seq >> 8);
	x->req[3] = (uint8_t)seq;
	x->req[4] = x->req[5] = 0;
	for (uint32_t attempt = 0; attempt <= h->retries; attempt++) {
		uint64_t deadline = now_ms() + h->timeout_ms;

		if (attempt)
			h->stats.retransmits++;
		/* The board checks the sequence from the second request on; a
		 * retransmission may find the first try latched: no check. */
		x->req[1] = QL_HL_FLAG_ACK_REQUEST |
			    (h->first || attempt ? 0 : QL_HL_FLAG_SEQUENCE_CHECK);
		if (sendto(h->fd, x->req, x->req_len, 0, (struct sockaddr *)&h->board,
			   sizeof(h->board)) < 0 &&
		    errno != ECONNREFUSED)
			return ql_error_set(-errno, "hololink %s: send: %s", h->peer,
					    strerror(errno));
		for (;;) {
			uint64_t now = now_ms();
			struct pollfd pfd = { .fd = h->fd, .events = POLLIN };
			struct sockaddr_in from;
			socklen_t flen = sizeof(from);
			ssize_t len;
			int ret;

			if (now >= deadline)
				break;
			if (poll(&pfd, 1, (int)(deadline - now)) <= 0)
				continue;
			len = recvfrom(h->fd, r, sizeof(r), MSG_DONTWAIT, (struct sockaddr *)&from,
				       &flen);
			if (len < 0)
				continue;
			if (!reply_source_ok(h, &from, flen)) {
				ig.source++;
				ig.last_source = from.sin_addr;
				h->stats.wrong_source++;
				continue;
			}
			if (len < 5) {
				ig.malformed++;
				h->stats.malformed++;
				continue;
			}
			if ((uint16_t)(r[2] << 8 | r[3]) != seq) {
				ig.sequence++;
				h->stats.wrong_sequence++;
				continue;
			}
			/* Upstream's host ignores the opcode; checking it keeps a
			 * reflected request (opcode without 0x80) from acking itself. */
			if (r[0] != (x->op | QL_HL_REPLY)) {
				ig.opcode++;
				h->stats.wrong_opcode++;
				continue;
			}
			ret = check_reply(h, x, r, (size_t)len);
			if (ret == 1) {
				ig.malformed++;
				h->stats.malformed++;
				continue;
			}
			h->first = false;
			h->stats.ignored = h->stats.wrong_source + h->stats.wrong_sequence +
					   h->stats.wrong_opcode + h->stats.malformed;
			return ret;
		}
	}
	h->stats.timeouts++;
	h->stats.ignored = h->stats.wrong_source + h->stats.wrong_sequence + h->stats.wrong_opcode +
			   h->stats.malformed;
	total = ig.source + ig.sequence + ig.opcode + ig.malformed;
	if (!total)
		return ql_error_set(-ETIMEDOUT,
				    "hololink %s: no reply to %s of 0x%08x after %u tries", h->peer,
				    op_name(x->op), x->regs[0].addr, h->retries + 1);
	ignored_detail(&ig, why, sizeof(why));
	return ql_error_set(-ETIMEDOUT,
			    "hololink %s: no valid reply to %s of 0x%08x after %u tries: "
			    "%u replies ignored: %s",
			    h->peer, op_name(x->op), x->regs[0].addr, h->retries + 1, total, why);
}

static int check_regs(const struct ql_hl_reg *regs, size_t n)
{
	if (!regs || n < 1 || n > QL_HL_BLOCK_MAX)
		return ql_error_set(-EINVAL, "hololink: 1 to %d registers per block, not %zu",
				    QL_HL_BLOCK_MAX, n);
	for (size_t i = 0; i < n; i++)
		if (regs[i].addr & 3)
			return ql_error_set(-EINVAL,
					    "hololink: register address 0x%08x is not a "
					    "multiple of 4",
					    regs[i].addr);
	return 0;
}

int ql_hl_write_dword(struct ql_hl *h, uint32_t addr, uint32_t value)
{
	struct ql_hl_reg reg = { addr, value };
	uint8_t req[14];
	struct xact x = { QL_HL_WR_DWORD, req, sizeof(req), &reg, 1, NULL };
	int ret = check_regs(&reg, 1);

	if (ret)
		return ret;
	hl_put_pair(req, 0, addr, value);
	return transact(h, &x);
}

int ql_hl_read_dword(struct ql_hl *h, uint32_t addr, uint32_t *value)
{
	struct ql_hl_reg reg = { addr, 0 };
	uint8_t req[10];
	struct xact x = { QL_HL_RD_DWORD, req, sizeof(req), &reg, 1, value };
	int ret = check_regs(&reg, 1);

	if (ret)
		return ret;
	hl_put32(req + QL_HL_HEADER, addr); /* the address alone */
	return transact(h, &x);
}

/* A block request of n registers: WR_BLOCK of their values, or (values
 * given) RD_BLOCK, whose results go to values. */
static int block(struct ql_hl *h, const struct ql_hl_reg *regs, size_t n, uint32_t *values)
{
	uint8_t req[QL_HL_DGRAM_MAX];
	struct xact x = {
		values ? QL_HL_RD_BLOCK : QL_HL_WR_BLOCK, req, QL_HL_HEADER + 8 * n, regs, n, values
	};
	int ret = check_regs(regs, n);

	if (ret)
		return ret;
	for (size_t i = 0; i < n; i++)
		hl_put_pair(req, i, regs[i].addr, values ? 0 : regs[i].value);
	return transact(h, &x);
}

int ql_hl_write_block(struct ql_hl *h, const struct ql_hl_reg *regs, size_t n)
{
	return block(h, regs, n, NULL);
}

int ql_hl_read_block(struct ql_hl *h, struct ql_hl_reg *regs, size_t n)
{
	uint32_t values[QL_HL_BLOCK_MAX];
	int ret = block(h, regs, n, values);

	if (ret)
		return ret;
	for (size_t i = 0; i < n; i++)
		regs[i].value = values[i];
	return 0;
}

/* ------------------------------------------------------ data-plane configure */

int ql_hsb_layout_parse(const char *s, enum ql_hsb_layout *out)
{
	if (!s || !out)
		return -EINVAL;
	if (!strcmp(s, "2.6") || !strcmp(s, "2.6.0") || !strcmp(s, "2.6.x")) {
		*out = QL_HSB_LAYOUT_2_6;
		return 0;
	}
	if (!strcmp(s, "2.5") || !strcmp(s, "2.5.0") || !strcmp(s, "2.5.x")) {
		*out = QL_HSB_LAYOUT_2_5;
		return 0;
	}
	return -EINVAL;
}

const char *ql_hsb_layout_name(enum ql_hsb_layout l)
{
	return l == QL_HSB_LAYOUT_2_5 ? "2.5" : "2.6";
}

static const char *const vp_reg_names[QL_HSB_VP_SIZE / 4] = {
	"DP_QP",	   "DP_RKEY",	       "DP_PAGE_LSB",	   "DP_PAGE_MSB",
	"DP_PAGE_INC",	   "DP_MAX_BUFF",      "DP_BUFFER_LENGTH", "VP+0x1c",
	"DP_HOST_MAC_LOW", "DP_HOST_MAC_HIGH", "DP_HOST_IP",	   "DP_HOST_UDP_PORT",
	"VP+0x30",	   "DP_VLAN",	       "VP+0x38",	   "VP+0x3c",
};

static void target_addrs(const struct ql_hsb_target *t, uint32_t *vp, uint32_t *hif)
{
	*vp = t->vp_address ? t->vp_address : QL_HSB_VP_BASE + t->vp * QL_HSB_VP_STRIDE;
	*hif = t->hif_address ? t->hif_address :
				QL_HSB_HIF_BASE + t->data_plane * QL_HSB_HIF_STRIDE;
}

static const char *reg_name(const struct ql_hsb_target *t, uint32_t addr)
{
	uint32_t vp, hif, ext = QL_HSB_EXT_GID + t->vp * QL_HSB_EXT_GID_STRIDE;

	target_addrs(t, &vp, &hif);
	if (addr >= vp && addr - vp < QL_HSB_VP_SIZE)
		return vp_reg_names[(addr - vp) / 4];
	if (addr == hif + QL_HSB_DP_PACKET_SIZE)
		return "DP_PACKET_SIZE";
	if (addr == hif + QL_HSB_DP_PACKET_UDP_PORT)
		return "DP_PACKET_UDP_PORT";
	if (addr == hif + QL_HSB_DP_VP_MASK)
		return "DP_VP_MASK";
	if (addr >= ext && addr - ext < QL_HSB_EXT_GID_STRIDE)
		return "qlink host GID extension";
	return "register";
}

int ql_hsb_dataplane_regs(const struct ql_hsb_target *t, const struct ql_hsb_dataplane *dp,
			  struct ql_hl_reg *regs, size_t cap)
{
	static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	uint32_t vp, hif, mtu = dp && dp->mtu ? dp->mtu : QL_HSB_ETH_MTU;
	uint64_t end;
	size_t n = 0;
	bool mapped = dp && !memcmp(dp->gid, v4mapped, sizeof(v4mapped));
	size_t need = mapped ? QL_HSB_CONFIG_REGS : QL_HSB_CONFIG_REGS_MAX;

	if (!t || !dp || !regs || cap < need)
		return ql_error_set(-EINVAL, "hsb: target, parameters and %zu registers required%s",
				    need, mapped ? "" : " (the host GID is not IPv4-mapped)");
	if (t->vp >= QL_HSB_MAX_VPS)
		return ql_error_set(-EINVAL, "hsb: VP %u out of range (0..%d)", t->vp,
				    QL_HSB_MAX_VPS - 1);
	if (t->data_plane >= QL_HSB_MAX_DATA_PLANES)
		return ql_error_set(-EINVAL, "hsb: data plane %u out of range (0..%d)",
				    t->data_plane, QL_HSB_MAX_DATA_PLANES - 1);
	if (t->layout != QL_HSB_LAYOUT_2_6 && t->layout != QL_HSB_LAYOUT_2_5)
		return ql_error_set(-EINVAL, "hsb: unknown register layout %d", (int)t->layout);
	if (dp->page_addr % QL_HSB_PAGE || !dp->page_inc || dp->page_inc % QL_HSB_PAGE)
		return ql_error_set(
			-EINVAL, "hsb: ring base 0x%llx and page size %u must be multiples of %d",
			(unsigned long long)dp->page_addr, dp->page_inc, QL_HSB_PAGE);
	if (dp->page_inc / QL_HSB_PAGE > 0xffff)
		return ql_error_set(-EINVAL, "hsb: page size %u too large (DP_PAGE_INC is 16 bits)",
				    dp->page_inc);
	if (!dp->num_pages || dp->num_pages > QL_HSB_MAX_PAGES)
		return ql_error_set(-EINVAL, "hsb: %u pages, not 1..%u", dp->num_pages,
				    (unsigned)QL_HSB_MAX_PAGES);
	if (!dp->frame_len || dp->frame_len > dp->page_inc)
		return ql_error_set(-EINVAL, "hsb: frame length %u must be 1..page size (%u)",
				    dp->frame_len, dp->page_inc);
	end = dp->page_addr + (uint64_t)dp->page_inc * dp->num_pages;
	if (end < dp->page_addr)
		return ql_error_set(-EINVAL, "hsb: ring 0x%llx wraps",
				    (unsigned long long)dp->page_addr);
	/* Before 2.6 DP_PAGE_LSB holds a page number: the ring below 2^39. */
	if (t->layout == QL_HSB_LAYOUT_2_5 && (end - 1) >> 39)
		return ql_error_set(-EINVAL,
				    "hsb: ring 0x%llx..0x%llx does not lie below 2^39, which "
				    "hsb_version 2.5 boards address (register it at iova 0)",
				    (unsigned long long)dp->page_addr, (unsigned long long)end);
	if (dp->qpn >> 24)
		return ql_error_set(-EINVAL, "hsb: QP number 0x%x is wider than 24 bits", dp->qpn);
	if (mtu < QL_HSB_ROCE_OVERHEAD + QL_HSB_PAGE || mtu > 9216)
		return ql_error_set(-EINVAL, "hsb: Ethernet MTU %u out of range (%d..9216)", mtu,
				    QL_HSB_ROCE_OVERHEAD + QL_HSB_PAGE);
	target_addrs(t, &vp, &hif);
	/* Upstream's host's order: HIF, then the VP's addressing registers. */
	regs[n++] = (struct ql_hl_reg){ hif + QL_HSB_DP_PACKET_SIZE,
					(mtu - QL_HSB_ROCE_OVERHEAD) / QL_HSB_PAGE };
	regs[n++] = (struct ql_hl_reg){ hif + QL_HSB_DP_PACKET_UDP_PORT,
					dp->src_port ? dp->src_port : QL_HSB_SRC_PORT };
	regs[n++] = (struct ql_hl_reg){ vp + QL_HSB_DP_BUFFER_LENGTH, dp->frame_len };
	regs[n++] = (struct ql_hl_reg){ vp + QL_HSB_DP_HOST_MAC_LOW,
					(uint32_t)dp->mac[2] << 24 | (uint32_t)dp->mac[3] << 16 |
						(uint32_t)dp->mac[4] << 8 | dp->mac[5] };
	regs[n++] = (struct ql_hl_reg){ vp + QL_HSB_DP_HOST_MAC_HIGH,
					(uint32_t)dp->mac[0] << 8 | dp->mac[1] };
	/* not IPv4-mapped (soft provider): a loopback IP, the GID in the
	 * emulated board's extension registers, outside the VP block */
	regs[n++] = (struct ql_hl_reg){ vp + QL_HSB_DP_HOST_IP,
					mapped ? hl_get32(dp->gid + 12) : 0x7f000001u };
	for (uint32_t i = 0; !mapped && i < 4; i++)
		regs[n++] =
			(struct ql_hl_reg){ QL_HSB_EXT_GID + t->vp * QL_HSB_EXT_GID_STRIDE + 4 * i,
					    hl_get32(dp->gid + 4 * i) };
	regs[n++] = (struct ql_hl_reg){ vp + QL_HSB_DP_HOST_UDP_PORT,
					dp->udp_port ? dp->udp_port : QL_HSB_ROCE_PORT };
	regs[n++] = (struct ql_hl_reg){ vp + QL_HSB_DP_QP, dp->qpn };
	regs[n++] = (struct ql_hl_reg){ vp + QL_HSB_DP_RKEY, dp->rkey };
	regs[n++] = (struct ql_hl_reg){ vp + QL_HSB_DP_PAGE_LSB,
					t->layout == QL_HSB_LAYOUT_2_5 ?
						(uint32_t)(dp->page_addr >> 7) :
						(uint32_t)dp->page_addr };
	regs[n++] = (struct ql_hl_reg){ vp + QL_HSB_DP_PAGE_MSB, (uint32_t)(dp->page_addr >> 32) };
	regs[n++] = (struct ql_hl_reg){ vp + QL_HSB_DP_PAGE_INC, dp->page_inc / QL_HSB_PAGE };
	regs[n++] = (struct ql_hl_reg){ vp + QL_HSB_DP_MAX_BUFF, dp->num_pages - 1 };
	return (int)n;
}

static int verify(struct ql_hl *h, const struct ql_hsb_target *t, const struct ql_hl_reg *want,
		  size_t n)
{
	struct ql_hl_reg got[QL_HL_BLOCK_MAX];
	int ret;

	memcpy(got, want, n * sizeof(*want));
	ret = ql_hl_read_block(h, got, n);
	if (ret)
		return ret;
	for (size_t i = 0; i < n; i++)
		if (got[i].value != want[i].value)
			return ql_error_set(-EIO,
					    "hsb %s VP %u: %s (0x%08x) reads back 0x%08x, "
					    "wrote 0x%08x",
					    h->peer, t->vp, reg_name(t, want[i].addr), want[i].addr,
					    got[i].value, want[i].value);
	return 0;
}

int ql_hsb_configure(struct ql_hl *h, const struct ql_hsb_target *t,
		     const struct ql_hsb_dataplane *dp, uint32_t *ip_version)
{
	struct ql_hl_reg regs[QL_HSB_CONFIG_REGS_MAX], mask;
	uint32_t vp, hif, version;
	int n, ret;

	if (!h)
		return ql_error_set(-EINVAL, "hsb: no board handle");
	n = ql_hsb_dataplane_regs(t, dp, regs, QL_HSB_CONFIG_REGS_MAX);
	if (n < 0)
		return n;
	target_addrs(t, &vp, &hif);
	/* As upstream's host starts: the version, without SEQUENCE_CHECK. */
	ret = ql_hl_read_dword(h, QL_HSB_REG_IP_VERSION, &version);
	if (ret)
		return ret;
	if (ip_version)
		*ip_version = version;
	mask.addr = hif + QL_HSB_DP_VP_MASK;
	/* Stop the VP while its addressing changes. */
	ret = ql_hl_read_dword(h, mask.addr, &mask.value);
	if (ret)
		return ret;
	mask.value &= ~(1u << t->vp);
	ret = ql_hl_write_dword(h, mask.addr, mask.value);
	if (ret)
		return ret;
	ret = ql_hl_write_block(h, regs, (size_t)n);
	if (ret)
		return ret;
	ret = verify(h, t, regs, (size_t)n);
	if (ret)
		return ret;
	ret = ql_hl_read_dword(h, mask.addr, &mask.value);
	if (ret)
		return ret;
	mask.value |= 1u << t->vp;
	ret = ql_hl_write_dword(h, mask.addr, mask.value);
	if (ret)
		return ret;
	return verify(h, t, &mask, 1);
}

int ql_hsb_configure_board(const char *address, uint16_t port, const struct ql_hsb_target *t,
			   const struct ql_hsb_dataplane *dp, uint32_t timeout_ms, uint32_t retries,
			   uint32_t *ip_version)
{
	struct ql_hl *h;
	int ret;

	ret = ql_hl_open(address, port, timeout_ms, timeout_ms || retries ? retries : 3, &h);
	if (ret)
		return ret;
	ret = ql_hsb_configure(h, t, dp, ip_version);
	ql_hl_close(h);
	return ret;
}
