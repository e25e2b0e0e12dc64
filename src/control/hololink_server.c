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
#define FPGA_DATE 0x20261123
#define IP_VERSION 0x2504

/* Registers outside the data-plane blocks that upstream's host writes (or
 * may read back): stored, so that its start-up sequence is accepted. */
static const struct {
	uint32_t base, size;
	const char *name;
} extra_ranges[] = {
	{ 0x00000000, 0x100, "board control, GPIO" }, /* 0x80, 0x84: identification */
	{ 0x00000100, 0x90, "PTP" },		      /* 0x104..0x18C */
	{ 0x00000200, 0x30, "control events" },	      /* 0x200..0x22C */
	{ 0x00002000, 0x1000, "APB RAM" },
	{ 0x03000200, 0x200, "I2C" },
	{ 0x70000000, 0x100, "VSYNC" },
};
#define EXTRA_WORDS ((0x100 + 0x90 + 0x30 + 0x1000 + 0x200 + 0x100) / 4)

struct regfile {
	uint32_t hif[HIF_REGS];
	uint32_t vp[QL_HSB_MAX_VPS][VP_REGS];
	uint32_t ext_gid[QL_HSB_MAX_VPS][4]; /* qlink extension */
	uint32_t extra[EXTRA_WORDS];
};

struct ql_hl_server {
	int fd;
	uint16_t port;
	uint32_t bound; /* host order */
	uint32_t num_vps, vp_base, vp_stride, hif_base;
	enum ql_hsb_layout layout;
	uint32_t allow[QL_HL_ALLOW_MAX], allow_len[QL_HL_ALLOW_MAX], n_allow;
	uint32_t owner; /* n_allow 0: the first host answered (0: none yet) */
	struct sockaddr_in announce;
	uint32_t announce_ms;
	uint64_t next_announce_ms;
	uint32_t drop_reply, corrupt_addr, corrupt_xor;
	uint64_t replies;
	struct ql_hl_server_stats stats;
	ql_hl_configured_fn fn;
	void *arg;
	struct regfile rf, scratch;
	struct ql_hsb_dataplane dp[QL_HSB_MAX_VPS]; /* valid while the VP is enabled */
};

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The register at addr in rf, or NULL (no such register). *ro: read-only.
 * *vp_out: the VP of a VP-block register, UINT32_MAX for HIF, UINT32_MAX - 1
 * for any other. */
static uint32_t *reg_at(const struct ql_hl_server *s, struct regfile *rf, uint32_t addr, bool *ro,
			uint32_t *vp_out, uint32_t *off_out)
{
	/* Identification: what the emulated board reports (read-only). */
	static const uint32_t id_regs[2] = { IP_VERSION, FPGA_DATE };
	uint32_t word = 0;

	*ro = false;
	*vp_out = UINT32_MAX - 1;
	*off_out = 0;
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
	if (addr >= QL_HSB_EXT_GID && addr - QL_HSB_EXT_GID < s->num_vps * QL_HSB_EXT_GID_STRIDE) {
		uint32_t rel = addr - QL_HSB_EXT_GID;

		return &rf->ext_gid[rel / QL_HSB_EXT_GID_STRIDE][rel % QL_HSB_EXT_GID_STRIDE / 4];
	}
	for (size_t i = 0; i < sizeof(extra_ranges) / sizeof(extra_ranges[0]); i++) {
		if (addr >= extra_ranges[i].base &&
		    addr - extra_ranges[i].base < extra_ranges[i].size)
			return &rf->extra[word + (addr - extra_ranges[i].base) / 4];
		word += extra_ranges[i].size / 4;
	}
	return NULL;
}

/* The parameters a VP's registers describe; false when they are not a
 * configuration the data plane can run. */
static bool vp_params(const struct ql_hl_server *s, const struct regfile *rf, uint32_t vp,
		      struct ql_hsb_dataplane *dp)
{
	const uint32_t *r = rf->vp[vp], *g = rf->ext_gid[vp];
	uint32_t lsb = r[QL_HSB_DP_PAGE_LSB / 4], msb = r[QL_HSB_DP_PAGE_MSB / 4];
	uint32_t ip = r[QL_HSB_DP_HOST_IP / 4], inc = r[QL_HSB_DP_PAGE_INC / 4];
	uint32_t psize = rf->hif[QL_HSB_DP_PACKET_SIZE / 4];
	uint32_t port = r[QL_HSB_DP_HOST_UDP_PORT / 4], qpn = r[QL_HSB_DP_QP / 4];
	uint32_t src = rf->hif[QL_HSB_DP_PACKET_UDP_PORT / 4];
	uint64_t base, meta;

	memset(dp, 0, sizeof(*dp));
	if (s->layout == QL_HSB_LAYOUT_2_5) {
		/* a page number; MSB repeats address bits 32..38 */
		base = (uint64_t)lsb << 7;
		if ((lsb >> 25) != msb)
			return false;
	} else {
		base = (uint64_t)msb << 32 | lsb;
	}
	dp->qpn = qpn & 0xffffff;
	dp->rkey = r[QL_HSB_DP_RKEY / 4];
	dp->page_addr = base;
	dp->page_inc = (inc & 0xffff) * QL_HSB_PAGE;
	dp->num_pages = (r[QL_HSB_DP_MAX_BUFF / 4] & 0xfff) + 1; /* 27..16: a start page */
	dp->frame_len = r[QL_HSB_DP_BUFFER_LENGTH / 4];
	dp->gid[10] = dp->gid[11] = 0xff;
	hl_put32(dp->gid + 12, ip); /* first octet most significant, as inet_network */
	/* qlink extension: a whole GID written by the host overrides */
	if (g[0] | g[1] | g[2] | g[3])
		for (uint32_t i = 0; i < 4; i++)
			hl_put32(dp->gid + 4 * i, g[i]);
	hl_put32(dp->mac + 2, r[QL_HSB_DP_HOST_MAC_LOW / 4]);
	dp->mac[0] = (uint8_t)(r[QL_HSB_DP_HOST_MAC_HIGH / 4] >> 8);
	dp->mac[1] = (uint8_t)r[QL_HSB_DP_HOST_MAC_HIGH / 4];
	dp->udp_port = (uint16_t)port;
	dp->packet_size = psize * QL_HSB_PAGE;
	dp->mtu = dp->packet_size + QL_HSB_ROCE_OVERHEAD;
	dp->src_port = (uint16_t)src;
	/* metadata (128 bytes) at round_up(frame, 128) must fit in the page */
	meta = ((uint64_t)dp->frame_len + QL_HSB_PAGE - 1) / QL_HSB_PAGE * QL_HSB_PAGE +
	       QL_HSB_PAGE;
	if (qpn >> 24 || inc >> 16 || base % QL_HSB_PAGE || !dp->page_inc || !dp->frame_len ||
	    meta > dp->page_inc || !ip || !port || port > 0xffff || src > 0xffff || !psize ||
	    dp->mtu > 9216)
		return false;
	return base + (uint64_t)dp->page_inc * dp->num_pages > base;
}

/* Whether value may be written to the register at (vp, off): QL_HL_OK, or
 * QL_HL_ERR_GENERAL for an enable bit of a VP that cannot run. Other
 * registers take any value, as the board's do: a configuration is checked
 * when its VP is enabled. */
static uint8_t check_value(const struct ql_hl_server *s, const struct regfile *rf, uint32_t vp,
			   uint32_t off, uint32_t value)
{
	uint32_t newbits;
	struct ql_hsb_dataplane dp;

	if (vp != UINT32_MAX || off != QL_HSB_DP_VP_MASK)
		return QL_HL_OK;
	newbits = value & ~rf->hif[QL_HSB_DP_VP_MASK / 4];
	if (s->num_vps < 32 && value >> s->num_vps)
		return QL_HL_ERR_GENERAL;
	for (uint32_t v = 0; v < s->num_vps; v++)
		if (newbits & (1u << v) && !vp_params(s, rf, v, &dp))
			return QL_HL_ERR_GENERAL;
	return QL_HL_OK;
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
	if (vp < QL_HSB_MAX_VPS && rf->hif[QL_HSB_DP_VP_MASK / 4] & (1u << vp) && *r != value)
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

/* A reply as the board sends it: opcode | 0x80, the request's flags and
 * sequence, the status, a reserved byte, n pairs (filled by the caller) and
 * the 4-byte trailer (the latched sequence: zero, as on NVIDIA's emulator). */
static size_t reply_frame(const uint8_t *req, uint8_t code, size_t n, uint8_t *out)
{
	out[0] = req[0] | QL_HL_REPLY;
	out[1] = req[1];
	out[2] = req[2];
	out[3] = req[3];
	out[4] = code;
	out[5] = 0;
	memset(out + QL_HL_HEADER + 8 * n, 0, QL_HL_TRAILER);
	return QL_HL_HEADER + 8 * n + QL_HL_TRAILER;
}

static size_t handle(struct ql_hl_server *s, const uint8_t *req, size_t len, uint8_t *out)
{
	uint8_t op, flags;
	bool ack;
	size_t n = 0;
	uint8_t code = QL_HL_OK;

	if (len < QL_HL_HEADER)
		return 0; /* not even a header: no answer */
	op = req[0];
	flags = req[1];
	/* A board answers only when asked to, reads included. */
	ack = flags & QL_HL_FLAG_ACK_REQUEST;
	switch (op) {
	case QL_HL_WR_DWORD:
	case QL_HL_WR_BLOCK:
		if (flags & ~(QL_HL_FLAG_ACK_REQUEST | QL_HL_FLAG_SEQUENCE_CHECK))
			code = QL_HL_ERR_FLAGS;
		else if (op == QL_HL_WR_DWORD && len != QL_HL_HEADER + 8)
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
			/* the reply echoes the pairs written */
			memcpy(out + QL_HL_HEADER, req + QL_HL_HEADER, 8 * n);
		}
		return ack ? reply_frame(req, code, n, out) : 0;
	case QL_HL_RD_DWORD:
	case QL_HL_RD_BLOCK:
		if (!ack)
			return 0;
		if (flags & ~(QL_HL_FLAG_ACK_REQUEST | QL_HL_FLAG_SEQUENCE_CHECK))
			return reply_frame(req, QL_HL_ERR_FLAGS, 0, out);
		n = op == QL_HL_RD_DWORD ? (len == QL_HL_HEADER + 4) : hl_block_pairs(len);
		if (!n)
			return reply_frame(req, QL_HL_ERR_LENGTH, 0, out);
		for (size_t i = 0; i < n; i++) {
			uint32_t addr = hl_pair_addr(req, i), value;
			uint8_t c = read_reg(s, addr, &value);

			if (c && !code)
				code = c;
			hl_put_pair(out, i, addr, value);
		}
		return reply_frame(req, code, n, out);
	default:
		return ack ? reply_frame(req, QL_HL_ERR_COMMAND, 0, out) : 0;
	}
}

static bool allowed(struct ql_hl_server *s, uint32_t from)
{
	if (s->n_allow) {
		for (uint32_t i = 0; i < s->n_allow; i++) {
			uint32_t mask = s->allow_len[i] ? ~0u << (32 - s->allow_len[i]) : 0;

			if ((from & mask) == (s->allow[i] & mask))
				return true;
		}
		return false;
	}
	/* trust on first use: the first host that talks to the board owns it */
	if (!s->owner)
		s->owner = from;
	return from == s->owner;
}

size_t ql_hl_server_handle_from(struct ql_hl_server *s, uint32_t from, const uint8_t *req,
				size_t len, uint8_t *reply, size_t cap)
{
	size_t n;

	if (!s || !req || !reply || cap < QL_HL_DGRAM_MAX)
		return 0;
	s->stats.requests++;
	if (len < QL_HL_HEADER || !allowed(s, from)) {
		if (len >= QL_HL_HEADER)
			s->stats.refused++;
		return 0;
	}
	n = handle(s, req, len, reply);
	if (n && ++s->replies == s->drop_reply)
		return 0; /* fault injection: this reply is lost */
	return n;
}

size_t ql_hl_server_handle(struct ql_hl_server *s, const uint8_t *req, size_t len, uint8_t *reply,
			   size_t cap)
{
	return ql_hl_server_handle_from(s, 0x7f000001u, req, len, reply, cap);
}

int ql_hl_allow_parse(const char *str, uint32_t *addr, uint32_t *len)
{
	char buf[INET_ADDRSTRLEN];
	const char *slash = str ? strchr(str, '/') : NULL;
	size_t alen = slash ? (size_t)(slash - str) : (str ? strlen(str) : 0);
	struct in_addr a;
	char *end;
	long l = 32;

	if (!str || !alen || alen >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, str, alen);
	buf[alen] = 0;
	if (inet_pton(AF_INET, buf, &a) != 1)
		return -EINVAL;
	if (slash) {
		errno = 0;
		l = strtol(slash + 1, &end, 10);
		if (errno || end == slash + 1 || *end || l < 0 || l > 32)
			return -EINVAL;
	}
	*addr = ntohl(a.s_addr);
	*len = (uint32_t)l;
	return 0;
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
		s->layout = cfg->layout;
		if (cfg->n_allow > QL_HL_ALLOW_MAX) {
			ret = ql_error_set(-EINVAL, "hololink server: at most %d allowed hosts",
					   QL_HL_ALLOW_MAX);
			goto fail;
		}
		s->n_allow = cfg->n_allow;
		for (uint32_t i = 0; i < cfg->n_allow; i++) {
			if (cfg->allow_len[i] > 32) {
				ret = ql_error_set(-EINVAL, "hololink server: prefix /%u",
						   cfg->allow_len[i]);
				goto fail;
			}
			s->allow[i] = cfg->allow[i];
			s->allow_len[i] = cfg->allow_len[i];
		}
		if (cfg->announce_addr) {
			s->announce.sin_family = AF_INET;
			s->announce.sin_port =
				htons(cfg->announce_port ? cfg->announce_port : QL_HL_ENUM_PORT);
			if (inet_pton(AF_INET, cfg->announce_addr, &s->announce.sin_addr) != 1) {
				ret = ql_error_set(-EINVAL,
						   "hololink server: announce address '%s' is not "
						   "IPv4",
						   cfg->announce_addr);
				goto fail;
			}
			s->announce_ms = cfg->announce_ms ? cfg->announce_ms : 1000;
		}
	}
	if (s->layout != QL_HSB_LAYOUT_2_6 && s->layout != QL_HSB_LAYOUT_2_5) {
		ret = ql_error_set(-EINVAL, "hololink server: unknown layout %d", (int)s->layout);
		goto fail;
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
	s->bound = ntohl(a.sin_addr.s_addr);
	if (s->announce_ms) {
		int on = 1;

		/* a broadcast announcement needs the socket's permission */
		setsockopt(s->fd, SOL_SOCKET, SO_BROADCAST, &on, sizeof(on));
	}
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

void ql_hl_server_stats(const struct ql_hl_server *s, struct ql_hl_server_stats *out)
{
	*out = s->stats;
	out->owner = s->owner;
}

int ql_hl_server_announce(struct ql_hl_server *s)
{
	uint8_t pkt[QL_HL_ENUM_LEN];
	struct ql_hl_enum e = {
		.ip = s->bound,
		.mac = { 0x02, 0x71, 0x6c, 0x00, (uint8_t)(s->port >> 8), (uint8_t)s->port },
		.xid = (uint32_t)s->stats.announcements,
		.data_plane = 0,
		.enum_version = 2,
		/* a qlink-specific FPGA UUID: "qlink-emulated-hsb" in spirit */
		.uuid = { 0x71, 0x6c, 0x69, 0x6e, 0x6b, 0x2d, 0x48, 0x53, 0x82, 0x42, 0x65, 0x6d,
			  0x75, 0x6c, 0x00, 0x01 },
		.serial = { 'q', 'l', 'i', 'n', 'k', (uint8_t)(s->port >> 8), (uint8_t)s->port },
		.ip_version = IP_VERSION,
	};

	if (!s->announce_ms)
		return -EINVAL;
	ql_hl_enum_build(&e, pkt, sizeof(pkt));
	if (sendto(s->fd, pkt, sizeof(pkt), 0, (struct sockaddr *)&s->announce,
		   sizeof(s->announce)) < 0)
		return -errno;
	s->stats.announcements++;
	return 0;
}

int ql_hl_server_poll(struct ql_hl_server *s, int timeout_ms)
{
	struct pollfd pfd = { .fd = s->fd, .events = POLLIN };
	int handled = 0;

	if (s->announce_ms) {
		uint64_t now = mono_ms();

		if (now >= s->next_announce_ms) {
			ql_hl_server_announce(s);
			s->next_announce_ms = now + s->announce_ms;
		}
		if (timeout_ms > (int)(s->next_announce_ms - now))
			timeout_ms = (int)(s->next_announce_ms - now);
	}
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
		if (flen != sizeof(from) || from.sin_family != AF_INET || !from.sin_port)
			continue;
		/* A truncated datagram is longer than any request: bad length. */
		n = ql_hl_server_handle_from(s, ntohl(from.sin_addr.s_addr), req,
					     (size_t)len > sizeof(req) ? sizeof(req) : (size_t)len,
					     reply, sizeof(reply));
		if (n)
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

/* ------------------------------------------------------------ enumeration */

/* Offsets in the BOOTP request a board announces itself with. */
#define EN_XID 4
#define EN_SECS 8
#define EN_CIADDR 12
#define EN_CHADDR 28
#define EN_VENDOR 236 /* after sname (64) and file (128) */
#define EN_V2_END 277 /* the end of the version 2 vendor data */

int ql_hl_enum_build(const struct ql_hl_enum *e, uint8_t *buf, size_t cap)
{
	uint8_t *v = buf + EN_VENDOR;

	if (!e || !buf || cap < QL_HL_ENUM_LEN)
		return ql_error_set(-EINVAL, "hololink: enumeration packet needs %d bytes",
				    QL_HL_ENUM_LEN);
	memset(buf, 0, QL_HL_ENUM_LEN);
	buf[0] = 1; /* BOOTREQUEST */
	buf[1] = 1; /* Ethernet */
	buf[2] = 6; /* MAC length */
	hl_put32(buf + EN_XID, e->xid);
	buf[EN_SECS] = (uint8_t)(e->secs >> 8);
	buf[EN_SECS + 1] = (uint8_t)e->secs;
	hl_put32(buf + EN_CIADDR, e->ip);
	memcpy(buf + EN_CHADDR, e->mac, 6);
	v[0] = 0xE0;			  /* vendor tag */
	v[1] = EN_V2_END - EN_VENDOR - 2; /* its length */
	memcpy(v + 2, "NVDA", 4);
	v[6] = e->data_plane;
	v[7] = 2; /* enumeration version */
	/* v + 8: 2 reserved bytes */
	memcpy(v + 10, e->uuid, 16);
	/* v + 26: 4 reserved bytes */
	memcpy(v + 30, e->serial, 7);
	v[37] = (uint8_t)e->ip_version; /* little-endian, these two */
	v[38] = (uint8_t)(e->ip_version >> 8);
	v[39] = (uint8_t)e->fpga_crc;
	v[40] = (uint8_t)(e->fpga_crc >> 8);
	return QL_HL_ENUM_LEN;
}

int ql_hl_enum_parse(const uint8_t *buf, size_t len, struct ql_hl_enum *out)
{
	const uint8_t *v = buf + EN_VENDOR;

	if (!buf || !out || len < EN_VENDOR + 8 || buf[0] != 1 || buf[2] > 16 || v[0] != 0xE0 ||
	    memcmp(v + 2, "NVDA", 4))
		return -EPROTO;
	memset(out, 0, sizeof(*out));
	out->xid = hl_get32(buf + EN_XID);
	out->secs = (uint16_t)(buf[EN_SECS] << 8 | buf[EN_SECS + 1]);
	out->ip = hl_get32(buf + EN_CIADDR);
	memcpy(out->mac, buf + EN_CHADDR, 6);
	out->data_plane = v[6];
	out->enum_version = v[7];
	if (out->enum_version != 1 && out->enum_version != 2)
		return 0; /* nothing more that we know */
	if (len < EN_V2_END)
		return -EPROTO;
	/* Version 1 has a board id and version string where 2 has the UUID;
	 * the serial number and what follows are at the same place. */
	if (out->enum_version == 2)
		memcpy(out->uuid, v + 10, 16);
	memcpy(out->serial, v + 30, 7);
	out->ip_version = (uint16_t)(v[37] | v[38] << 8);
	out->fpga_crc = (uint16_t)(v[39] | v[40] << 8);
	return 0;
}
