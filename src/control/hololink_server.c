/* SPDX-License-Identifier: MIT */
/*
 * Hololink register protocol, board side: the register file of the
 * data-plane blocks (HIF and one VP block per virtual port) behind a UDP
 * socket, answering as the FPGA does. Every datagram is hostile input:
 * lengths are checked before any field is read, and a block request is
 * applied to a copy of the register file that is committed only when every
 * register in it was accepted.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "qlink/error.h"
#include "qlink/hololink.h"

#include "hololink_wire.h"

#define VP_REGS (QL_HSB_VP_SIZE / 4)
#define HIF_REGS (QL_HSB_HIF_SIZE / 4)
#define POLL_BURST 64

struct regfile {
	uint32_t hif[HIF_REGS];
	uint32_t vp[QL_HSB_MAX_VPS][VP_REGS];
};

struct ql_hl_server {
	int fd;
	uint16_t port;
	uint32_t num_vps, vp_base, vp_stride, hif_base;
	uint32_t drop_reply, corrupt_addr, corrupt_xor;
	uint64_t replies;
	ql_hl_configured_fn fn;
	void *arg;
	struct regfile rf, scratch;
	struct ql_hsb_dataplane dp[QL_HSB_MAX_VPS]; /* valid while the VP is enabled */
};

/* The register at addr in rf, or NULL (no such register). *ro: read-only. */
static uint32_t *reg_at(const struct ql_hl_server *s, struct regfile *rf, uint32_t addr, bool *ro,
			uint32_t *vp_out, uint32_t *off_out)
{
	/* Identification: what the emulated board reports (read-only). */
	static const uint32_t id_regs[2] = { 0x2504, 0x20261123 };

	*ro = false;
	if (addr & 3)
		return NULL;
	if (addr == QL_HSB_REG_IP_VERSION || addr == QL_HSB_REG_FPGA_DATE) {
		*ro = true;
		return (uint32_t *)&id_regs[addr == QL_HSB_REG_FPGA_DATE];
	}
	if (addr >= s->hif_base && addr - s->hif_base < QL_HSB_HIF_SIZE) {
		*vp_out = UINT32_MAX;
		*off_out = addr - s->hif_base;
		return &rf->hif[(addr - s->hif_base) / 4];
	}
	if (addr >= s->vp_base) {
		uint32_t rel = addr - s->vp_base, vp = rel / s->vp_stride, off = rel % s->vp_stride;

		if (vp < s->num_vps && off < QL_HSB_VP_SIZE) {
			*vp_out = vp;
			*off_out = off;
			return &rf->vp[vp][off / 4];
		}
	}
	return NULL;
}

/* The parameters a VP's registers describe; false when they are not a
 * configuration the data plane can run. */
static bool vp_params(const struct ql_hl_server *s, const struct regfile *rf, uint32_t vp,
		      struct ql_hsb_dataplane *dp)
{
	const uint32_t *r = rf->vp[vp];
	uint32_t lsb = r[QL_HSB_DP_PAGE_LSB / 4], msb = r[QL_HSB_DP_PAGE_MSB / 4];
	uint32_t ip = r[QL_HSB_DP_HOST_IP / 4];
	uint64_t base = (uint64_t)msb << 32 | (uint64_t)lsb << 7;

	(void)s;
	memset(dp, 0, sizeof(*dp));
	dp->qpn = r[QL_HSB_DP_QP / 4];
	dp->rkey = r[QL_HSB_DP_RKEY / 4];
	dp->page_addr = base;
	dp->page_inc = r[QL_HSB_DP_PAGE_INC / 4] * QL_HSB_PAGE;
	dp->num_pages = r[QL_HSB_DP_MAX_BUFF / 4] + 1;
	dp->frame_len = r[QL_HSB_DP_BUFFER_LENGTH / 4];
	dp->gid[10] = dp->gid[11] = 0xff;
	hl_put32(dp->gid + 12, ip); /* first octet most significant, as inet_network */
	/* qlink extension: a whole GID written by the host overrides */
	if (r[QL_HSB_DP_HOST_GID / 4] | r[QL_HSB_DP_HOST_GID / 4 + 1] |
	    r[QL_HSB_DP_HOST_GID / 4 + 2] | r[QL_HSB_DP_HOST_GID / 4 + 3])
		for (uint32_t i = 0; i < 4; i++)
			hl_put32(dp->gid + 4 * i, r[QL_HSB_DP_HOST_GID / 4 + i]);
	hl_put32(dp->mac + 2, r[QL_HSB_DP_HOST_MAC_LOW / 4]);
	dp->mac[0] = (uint8_t)(r[QL_HSB_DP_HOST_MAC_HIGH / 4] >> 8);
	dp->mac[1] = (uint8_t)r[QL_HSB_DP_HOST_MAC_HIGH / 4];
	dp->udp_port = (uint16_t)r[QL_HSB_DP_HOST_UDP_PORT / 4];
	dp->mtu = rf->hif[QL_HSB_DP_PACKET_SIZE / 4] * QL_HSB_PAGE + QL_HSB_ROCE_OVERHEAD;
	dp->src_port = (uint16_t)rf->hif[QL_HSB_DP_PACKET_UDP_PORT / 4];
	/* LSB and MSB overlap in address bits 32..38: they must agree. */
	if ((lsb >> 25) != (msb & 0x7f) || !dp->page_inc || !dp->frame_len ||
	    dp->frame_len > dp->page_inc || !ip || !dp->udp_port ||
	    !rf->hif[QL_HSB_DP_PACKET_SIZE / 4])
		return false;
	return base + (uint64_t)dp->page_inc * dp->num_pages <= 1ull << 39;
}

/* Whether value may be written to the register at (vp, off): the FPGA's
 * answer, QL_HL_OK or QL_HL_ERR_GENERAL (out of range). */
static uint8_t check_value(const struct ql_hl_server *s, const struct regfile *rf, uint32_t vp,
			   uint32_t off, uint32_t value)
{
	if (vp == UINT32_MAX) {
		switch (off) {
		case QL_HSB_DP_PACKET_SIZE:
			return value <= (9216 - QL_HSB_ROCE_OVERHEAD) / QL_HSB_PAGE ?
				       QL_HL_OK :
				       QL_HL_ERR_GENERAL;
		case QL_HSB_DP_PACKET_UDP_PORT:
			return value <= 0xffff ? QL_HL_OK : QL_HL_ERR_GENERAL;
		case QL_HSB_DP_VP_MASK: {
			uint32_t newbits = value & ~rf->hif[QL_HSB_DP_VP_MASK / 4];
			struct ql_hsb_dataplane dp;

			if (s->num_vps < 32 && value >> s->num_vps)
				return QL_HL_ERR_GENERAL;
			/* Enabling needs a configuration the data plane can run. */
			for (uint32_t v = 0; v < s->num_vps; v++)
				if (newbits & (1u << v) && !vp_params(s, rf, v, &dp))
					return QL_HL_ERR_GENERAL;
			return QL_HL_OK;
		}
		default:
			return QL_HL_OK;
		}
	}
	switch (off) {
	case QL_HSB_DP_QP:
		return value >> 24 ? QL_HL_ERR_GENERAL : QL_HL_OK;
	case QL_HSB_DP_PAGE_MSB:
		return value > 0x7f ? QL_HL_ERR_GENERAL : QL_HL_OK; /* below 2^39 */
	case QL_HSB_DP_PAGE_INC:
		return value > 0xffff ? QL_HL_ERR_GENERAL : QL_HL_OK;
	case QL_HSB_DP_MAX_BUFF:
		return value >= QL_HSB_MAX_PAGES ? QL_HL_ERR_GENERAL : QL_HL_OK;
	case QL_HSB_DP_BUFFER_LENGTH:
		return value > 0xffff * QL_HSB_PAGE ? QL_HL_ERR_GENERAL : QL_HL_OK;
	case QL_HSB_DP_HOST_MAC_HIGH:
	case QL_HSB_DP_HOST_UDP_PORT:
		return value > 0xffff ? QL_HL_ERR_GENERAL : QL_HL_OK;
	default:
		return QL_HL_OK;
	}
}

/* Write one register into rf after checking it; a VP's enabled
 * configuration may not change under it (the host clears the bit first). */
static uint8_t write_reg(struct ql_hl_server *s, struct regfile *rf, uint32_t addr, uint32_t value)
{
	uint32_t vp = 0, off = 0, *r;
	bool ro;
	uint8_t code;

	r = reg_at(s, rf, addr, &ro, &vp, &off);
	if (!r || ro)
		return QL_HL_ERR_ADDRESS;
	code = check_value(s, rf, vp, off, value);
	if (code)
		return code;
	if (vp != UINT32_MAX && rf->hif[QL_HSB_DP_VP_MASK / 4] & (1u << vp) && *r != value)
		return QL_HL_ERR_GENERAL;
	*r = value;
	return QL_HL_OK;
}

static uint8_t read_reg(const struct ql_hl_server *s, uint32_t addr, uint32_t *value)
{
	uint32_t vp = 0, off = 0, *r;
	bool ro;

	r = reg_at(s, (struct regfile *)&s->rf, addr, &ro, &vp, &off);
	if (!r) {
		*value = 0;
		return QL_HL_ERR_ADDRESS;
	}
	*value = *r;
	if (s->corrupt_xor && addr == s->corrupt_addr)
		*value ^= s->corrupt_xor;
	return QL_HL_OK;
}

/* Commit the scratch file, and report VPs whose enable bit came on. */
static void commit(struct ql_hl_server *s)
{
	uint32_t before = s->rf.hif[QL_HSB_DP_VP_MASK / 4];
	uint32_t after = s->scratch.hif[QL_HSB_DP_VP_MASK / 4];

	s->rf = s->scratch;
	for (uint32_t v = 0; v < s->num_vps; v++) {
		if (!(after & ~before & (1u << v)))
			continue;
		vp_params(s, &s->rf, v, &s->dp[v]);
		if (s->fn)
			s->fn(s->arg, v, &s->dp[v]);
	}
}

static size_t status_reply(const uint8_t *req, uint8_t code, uint8_t *out)
{
	memcpy(out, req, 4); /* opcode, flags, sequence */
	out[4] = code;
	return 5;
}

static size_t handle(struct ql_hl_server *s, const uint8_t *req, size_t len, uint8_t *out)
{
	uint8_t op, flags;
	bool ack;
	size_t n;
	uint8_t code = QL_HL_OK;

	if (len < QL_HL_HEADER)
		return 0; /* not even a header: no answer */
	op = req[0];
	flags = req[1];
	ack = flags & QL_HL_FLAG_ACK_REQUEST;
	switch (op) {
	case QL_HL_WR_DWORD:
	case QL_HL_WR_BLOCK:
		if (flags & ~(QL_HL_FLAG_ACK_REQUEST | QL_HL_FLAG_SEQUENCE_CHECK))
			code = QL_HL_ERR_FLAGS;
		else if (op == QL_HL_WR_DWORD && len != 14)
			code = QL_HL_ERR_LENGTH;
		else if (op == QL_HL_WR_BLOCK && !hl_block_pairs(len))
			code = QL_HL_ERR_LENGTH;
		if (!code) {
			n = op == QL_HL_WR_DWORD ? 1 : hl_block_pairs(len);
			s->scratch = s->rf;
			for (size_t i = 0; i < n && !code; i++)
				code = write_reg(s, &s->scratch, hl_pair_addr(req, i),
						 hl_pair_value(req, i));
			if (!code)
				commit(s);
		}
		return ack ? status_reply(req, code, out) : 0;
	case QL_HL_RD_DWORD:
	case QL_HL_RD_BLOCK:
		if (flags & ~(QL_HL_FLAG_ACK_REQUEST | QL_HL_FLAG_SEQUENCE_CHECK))
			return status_reply(req, QL_HL_ERR_FLAGS, out);
		n = op == QL_HL_RD_DWORD ? (len == 10) : hl_block_pairs(len);
		if (!n)
			return status_reply(req, QL_HL_ERR_LENGTH, out);
		memcpy(out, req, 4);
		out[5] = 0;
		for (size_t i = 0; i < n; i++) {
			uint32_t addr = hl_pair_addr(req, i), value;
			uint8_t c = read_reg(s, addr, &value);

			if (c && !code)
				code = c;
			hl_put_pair(out, i, addr, value);
		}
		out[4] = code;
		/* The latched sequence: this request's. */
		memcpy(out + QL_HL_HEADER + 8 * n, req + 2, 2);
		return QL_HL_HEADER + 8 * n + 2;
	default:
		return ack ? status_reply(req, QL_HL_ERR_COMMAND, out) : 0;
	}
}

size_t ql_hl_server_handle(struct ql_hl_server *s, const uint8_t *req, size_t len, uint8_t *reply,
			   size_t cap)
{
	size_t n;

	if (!s || !req || !reply || cap < QL_HL_DGRAM_MAX)
		return 0;
	n = handle(s, req, len, reply);
	if (n && ++s->replies == s->drop_reply)
		return 0; /* fault injection: this reply is lost */
	return n;
}

int ql_hl_server_create(const struct ql_hl_server_config *cfg, ql_hl_configured_fn fn, void *arg,
			struct ql_hl_server **out)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t alen = sizeof(a);
	const char *addr = cfg && cfg->address ? cfg->address : "127.0.0.1";
	struct ql_hl_server *s;
	int ret;

	if (!out)
		return ql_error_set(-EINVAL, "hololink server: no output handle");
	if (cfg && cfg->num_vps > QL_HSB_MAX_VPS)
		return ql_error_set(-EINVAL, "hololink server: at most %d VPs, not %u",
				    QL_HSB_MAX_VPS, cfg->num_vps);
	if (inet_pton(AF_INET, addr, &a.sin_addr) != 1)
		return ql_error_set(-EINVAL, "hololink server: '%s' is not an IPv4 address", addr);
	s = calloc(1, sizeof(*s));
	if (!s)
		return ql_error_set(-ENOMEM, "hololink server: out of memory");
	s->num_vps = cfg && cfg->num_vps ? cfg->num_vps : 1;
	s->vp_base = cfg && cfg->vp_base ? cfg->vp_base : QL_HSB_VP_BASE;
	s->vp_stride = cfg && cfg->vp_stride ? cfg->vp_stride : QL_HSB_VP_STRIDE;
	s->hif_base = cfg && cfg->hif_base ? cfg->hif_base : QL_HSB_HIF_BASE;
	if (cfg) {
		s->drop_reply = cfg->drop_reply;
		s->corrupt_addr = cfg->corrupt_addr;
		s->corrupt_xor = cfg->corrupt_xor;
	}
	if (s->vp_stride < QL_HSB_VP_SIZE || s->vp_stride % 4 || s->vp_base % 4 ||
	    s->hif_base % 4 ||
	    (uint64_t)s->vp_base + (uint64_t)s->vp_stride * s->num_vps > UINT32_MAX ||
	    (s->hif_base + QL_HSB_HIF_SIZE > s->vp_base &&
	     s->hif_base < s->vp_base + s->vp_stride * s->num_vps)) {
		ret = ql_error_set(-EINVAL,
				   "hololink server: register blocks overlap or misaligned");
		goto fail;
	}
	s->fn = fn;
	s->arg = arg;
	a.sin_port = htons(cfg ? cfg->port : 0);
	s->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s->fd < 0) {
		ret = ql_error_set(-errno, "hololink server: socket: %s", strerror(errno));
		goto fail;
	}
	if (bind(s->fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		ret = ql_error_set(-errno, "hololink server: cannot bind %s:%u: %s", addr,
				   cfg ? cfg->port : 0, strerror(errno));
		goto fail_fd;
	}
	if (getsockname(s->fd, (struct sockaddr *)&a, &alen) < 0) {
		ret = ql_error_set(-errno, "hololink server: getsockname: %s", strerror(errno));
		goto fail_fd;
	}
	s->port = ntohs(a.sin_port);
	*out = s;
	return 0;
fail_fd:
	close(s->fd);
fail:
	free(s);
	return ret;
}

void ql_hl_server_destroy(struct ql_hl_server *s)
{
	if (!s)
		return;
	close(s->fd);
	free(s);
}

int ql_hl_server_fd(const struct ql_hl_server *s)
{
	return s->fd;
}

uint16_t ql_hl_server_port(const struct ql_hl_server *s)
{
	return s->port;
}

int ql_hl_server_poll(struct ql_hl_server *s, int timeout_ms)
{
	struct pollfd pfd = { .fd = s->fd, .events = POLLIN };
	int handled = 0;

	if (poll(&pfd, 1, timeout_ms < 0 ? 0 : timeout_ms) < 0 && errno != EINTR)
		return -errno;
	while (handled < POLL_BURST) {
		uint8_t req[QL_HL_DGRAM_MAX + 64], reply[QL_HL_DGRAM_MAX];
		struct sockaddr_in from;
		socklen_t flen = sizeof(from);
		ssize_t len = recvfrom(s->fd, req, sizeof(req), MSG_DONTWAIT | MSG_TRUNC,
				       (struct sockaddr *)&from, &flen);
		size_t n;

		if (len < 0)
			break;
		handled++;
		/* A truncated datagram is longer than any request: bad length. */
		n = ql_hl_server_handle(s, req,
					(size_t)len > sizeof(req) ? sizeof(req) : (size_t)len,
					reply, sizeof(reply));
		if (n && flen == sizeof(from) && from.sin_port)
			sendto(s->fd, reply, n, 0, (struct sockaddr *)&from, flen);
	}
	return handled;
}

int ql_hl_server_dataplane(const struct ql_hl_server *s, uint32_t vp, struct ql_hsb_dataplane *out)
{
	if (!s || vp >= s->num_vps || !out)
		return -EINVAL;
	if (!(s->rf.hif[QL_HSB_DP_VP_MASK / 4] & (1u << vp)))
		return -EAGAIN;
	*out = s->dp[vp];
	return 0;
}

int ql_hl_server_wait(struct ql_hl_server *s, uint32_t vp, int timeout_ms,
		      struct ql_hsb_dataplane *out)
{
	struct timespec t0, t;
	int ret;

	if (!s || vp >= s->num_vps)
		return ql_error_set(-EINVAL, "hololink server: no VP %u", vp);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int64_t left;

		if (ql_hl_server_dataplane(s, vp, out) == 0)
			return 0;
		clock_gettime(CLOCK_MONOTONIC, &t);
		left = timeout_ms - ((int64_t)(t.tv_sec - t0.tv_sec) * 1000 +
				     (t.tv_nsec - t0.tv_nsec) / 1000000);
		if (left <= 0)
			return ql_error_set(-ETIMEDOUT,
					    "hololink server: VP %u not configured within %d ms",
					    vp, timeout_ms);
		ret = ql_hl_server_poll(s, left > 100 ? 100 : (int)left);
		if (ret < 0)
			return ql_error_set(ret, "hololink server: poll: %s", strerror(-ret));
	}
}

int ql_hl_server_peek(const struct ql_hl_server *s, uint32_t addr, uint32_t *value)
{
	uint32_t vp, off, *r;
	bool ro;

	r = reg_at(s, (struct regfile *)&s->rf, addr, &ro, &vp, &off);
	if (!r)
		return -EFAULT;
	*value = *r;
	return 0;
}
