/* SPDX-License-Identifier: MIT */
/*
 * hololink: the Hololink Sensor Bridge (HSB) register protocol over UDP, as
 * a client (configure a board) and as the board (the VPPU's emulated FPGA).
 *
 * A QCS built on NVIDIA's Hololink IP is configured by its host through
 * 32-bit registers read and written with small big-endian UDP datagrams
 * (WR_DWORD, RD_DWORD, WR_BLOCK, RD_BLOCK; docs/hololink.md is the
 * normative description). The data plane of such a QCS (UC QP, one RDMA
 * WRITE WITH IMMEDIATE per frame into page-aligned host slots) starts once
 * the host has written its QP number, rkey, ring geometry and address into
 * the registers of one virtual port (VP) and set that VP's enable bit.
 *
 * Client: a handle is an unconnected UDP socket to one board. Replies are
 * matched as NVIDIA's host library matches them, by sequence number, and
 * accepted only from the board's address (any loopback address for a board
 * on loopback: an emulator bound to INADDR_ANY answers from 127.0.0.1),
 * with opcode = request | 0x80 and the request's addresses echoed; the
 * reserved byte, the echoed values of a write and any trailing bytes are
 * not looked at. Everything else is ignored and counted by reason, and a
 * request that gets no valid reply fails naming how many were ignored and
 * why. A device-reported status is mapped to an errno with its code and
 * name in ql_error_detail(). ql_hsb_configure() writes a VP's data-plane
 * registers in the layout of the board's HSB IP version and reads them back.
 *
 * Server: a register file with upstream's layout that answers as NVIDIA's
 * emulator does (reply opcode | 0x80, echoed pairs, 4-byte trailer, no
 * reply without ACK_REQUEST), stores the registers upstream's host writes at
 * start, validates the data-plane configuration a VP is enabled with,
 * answers only the hosts it allows, sends BOOTP-style enumeration
 * announcements when asked, and reports a VP's parameters once its enable
 * bit is set. It is single-threaded and driven by the caller
 * (ql_hl_server_poll); ql_hl_server_handle() is the socket-free core.
 * Register traffic is unauthenticated (docs/security.md).
 */
#ifndef QLINK_HOLOLINK_H
#define QLINK_HOLOLINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qlink/hsb.h" /* QL_HSB_MAX_PAGES: the data plane's limit */

#ifdef __cplusplus
extern "C" {
#endif

#define QL_HL_PORT 8192		 /* a real HSB board's control port */
#define QL_HL_PORT_EMULATOR 8193 /* CUDA-Q's emulator and the qlink VPPU */
#define QL_HL_ENUM_PORT 12267	 /* where hosts listen for enumeration */

/* Opcodes (byte 0). A reply's is the request's | QL_HL_REPLY. */
#define QL_HL_WR_DWORD 0x04
#define QL_HL_WR_BLOCK 0x09
#define QL_HL_RD_DWORD 0x14
#define QL_HL_RD_BLOCK 0x19
#define QL_HL_REPLY 0x80
/* Flags (byte 1). */
#define QL_HL_FLAG_ACK_REQUEST 0x01
#define QL_HL_FLAG_SEQUENCE_CHECK 0x02
/* Response codes (byte 4 of a reply). */
#define QL_HL_OK 0x00
#define QL_HL_ERR_GENERAL 0x02
#define QL_HL_ERR_ADDRESS 0x03
#define QL_HL_ERR_COMMAND 0x04
#define QL_HL_ERR_LENGTH 0x05
#define QL_HL_ERR_FLAGS 0x06
#define QL_HL_ERR_BUFFER_FULL 0x07

#define QL_HL_HEADER 6	    /* opcode, flags, sequence (2), status/reserved (2) */
#define QL_HL_TRAILER 4	    /* after a reply's pairs: the latched sequence */
#define QL_HL_BLOCK_MAX 128 /* (address, value) pairs per block request */
#define QL_HL_DGRAM_MAX (QL_HL_HEADER + 8 * QL_HL_BLOCK_MAX + QL_HL_TRAILER)
#define QL_HL_SEQ_FIRST 0x100 /* upstream's host's first sequence number */

/* Data-plane registers: offsets in a VP block and in the HIF block. */
#define QL_HSB_DP_QP 0x00
#define QL_HSB_DP_RKEY 0x04
#define QL_HSB_DP_PAGE_LSB 0x08	     /* 2.6: base & 0xffffffff; 2.5: base >> 7 */
#define QL_HSB_DP_PAGE_MSB 0x0C	     /* base >> 32 */
#define QL_HSB_DP_PAGE_INC 0x10	     /* page size / 128 */
#define QL_HSB_DP_MAX_BUFF 0x14	     /* pages - 1 (bits 11..0) */
#define QL_HSB_DP_BUFFER_LENGTH 0x18 /* frame bytes */
#define QL_HSB_DP_HOST_MAC_LOW 0x20
#define QL_HSB_DP_HOST_MAC_HIGH 0x24
#define QL_HSB_DP_HOST_IP 0x28
#define QL_HSB_DP_HOST_UDP_PORT 0x2C
#define QL_HSB_DP_VLAN 0x34	   /* per-VP VLAN on real boards; qlink writes none */
#define QL_HSB_VP_SIZE 0x40	   /* bytes of registers per VP block */
#define QL_HSB_DP_PACKET_SIZE 0x04 /* HIF: payload bytes per packet / 128 */
#define QL_HSB_DP_PACKET_UDP_PORT 0x08
#define QL_HSB_DP_VP_MASK 0x0C
#define QL_HSB_HIF_SIZE 0x10

/* Default block addresses (upstream's): VP n at VP_BASE + n * VP_STRIDE,
 * the HIF block of data plane d at HIF_BASE + d * HIF_STRIDE. */
#define QL_HSB_VP_BASE 0x1000
#define QL_HSB_VP_STRIDE 0x40
#define QL_HSB_HIF_BASE 0x02000300
#define QL_HSB_HIF_STRIDE 0x10000
#define QL_HSB_MAX_VPS 32 /* one enable bit each in DP_VP_MASK */
#define QL_HSB_MAX_DATA_PLANES 16
/* Read-only identification registers. */
#define QL_HSB_REG_IP_VERSION 0x80
#define QL_HSB_REG_FPGA_DATE 0x84
/* qlink extension (emulated boards only; an address range upstream does
 * not use): the host's whole GID for VP n, four big-endian words at
 * QL_HSB_EXT_GID + n * 0x10, written by qlinkd only when the host GID is
 * not IPv4-mapped (the soft provider, which no real board can reach). */
#define QL_HSB_EXT_GID 0x7F000000
#define QL_HSB_EXT_GID_STRIDE 0x10

/* Register layouts (`hsb_version`): where they changed between releases. */
enum ql_hsb_layout {
	QL_HSB_LAYOUT_2_6 = 0, /* 2.6.0 and later: DP_PAGE_LSB = low 32 bits of base */
	QL_HSB_LAYOUT_2_5 = 1, /* before 2.6.0 (IP 0x2501..): DP_PAGE_LSB = base >> 7 */
};
/* "2.6" / "2.5" (also "2.6.0" etc.): 0 and *out, or -EINVAL. */
int ql_hsb_layout_parse(const char *s, enum ql_hsb_layout *out);
const char *ql_hsb_layout_name(enum ql_hsb_layout l);

#define QL_HSB_PAGE 128		/* FPGA page: base and stride are multiples of it */
#define QL_HSB_ROCE_OVERHEAD 74 /* Ethernet+IP+UDP+BTH+RETH+ICRC */
#define QL_HSB_ETH_MTU 1500	/* upstream's default Ethernet MTU */
#define QL_HSB_ROCE_PORT 4791
#define QL_HSB_SRC_PORT 12288

/* One register of a block request. */
struct ql_hl_reg {
	uint32_t addr;
	uint32_t value;
};

/* ------------------------------------------------------------------ client */

struct ql_hl;

struct ql_hl_stats {
	uint64_t requests;	 /* transactions started */
	uint64_t retransmits;	 /* attempts after the first */
	uint64_t timeouts;	 /* transactions that got no valid reply */
	uint64_t ignored;	 /* replies ignored, the sum of: */
	uint64_t wrong_source;	 /* from an address other than the board's */
	uint64_t wrong_sequence; /* another sequence number (stale, or forged) */
	uint64_t wrong_opcode;	 /* not the request's opcode | 0x80 */
	uint64_t malformed;	 /* too short, or the addresses not echoed */
};

/* A handle on the board at address (IPv4 or host name) and port (0:
 * QL_HL_PORT). Each attempt waits timeout_ms (0: 200), and a request is
 * sent at most 1 + retries times (retries <= 16). The first request goes
 * without SEQUENCE_CHECK (it sets the board's sequence), later ones with it;
 * a retransmission repeats the sequence number without SEQUENCE_CHECK, as
 * upstream's host does. The first sequence number is random. */
int ql_hl_open(const char *address, uint16_t port, uint32_t timeout_ms, uint32_t retries,
	       struct ql_hl **out);
/* NULL is a no-op. */
void ql_hl_close(struct ql_hl *h);
/* "ADDR:PORT" of the board, for messages. */
const char *ql_hl_peer(const struct ql_hl *h);
void ql_hl_stats(const struct ql_hl *h, struct ql_hl_stats *out);
/* Tests: the next request's sequence number and whether it is the first
 * (sent without SEQUENCE_CHECK). */
void ql_hl_set_sequence(struct ql_hl *h, uint16_t next, bool first);

/* Each returns 0, -ETIMEDOUT (no valid reply after every try: the detail
 * names the register, the board and "N replies ignored: why" when some
 * came), the errno of a device-reported status (ql_hl_status_errno; code
 * and name in the detail), -EINVAL for a misaligned address or a bad count.
 * Writes ask for an ack. */
int ql_hl_write_dword(struct ql_hl *h, uint32_t addr, uint32_t value);
int ql_hl_read_dword(struct ql_hl *h, uint32_t addr, uint32_t *value);
/* n = 1 .. QL_HL_BLOCK_MAX registers in one datagram, written in order. */
int ql_hl_write_block(struct ql_hl *h, const struct ql_hl_reg *regs, size_t n);
/* Reads regs[i].addr into regs[i].value. */
int ql_hl_read_block(struct ql_hl *h, struct ql_hl_reg *regs, size_t n);

/* The response code's name ("invalid address") and errno (0 for QL_HL_OK:
 * -EIO general, -EFAULT address, -EOPNOTSUPP command, -EMSGSIZE length,
 * -EINVAL flags, -ENOBUFS buffer full, -EPROTO unknown). */
const char *ql_hl_status_name(uint8_t code);
int ql_hl_status_errno(uint8_t code);

/* ---------------------------------------------------- data-plane configure */

/*
 * The data-plane target: what the host tells a VP and what a board sends to
 * (ql_hsb_configure writes it, ql_hl_server_dataplane reads it back from an
 * emulated board's registers). Values, not register encodings: page_addr is
 * the whole base address whatever the layout.
 */
struct ql_hsb_dataplane {
	uint32_t qpn;	      /* host QP number (24 bits) */
	uint32_t rkey;	      /* rkey of the host receive region */
	uint64_t page_addr;   /* ring base (iova), multiple of 128 */
	uint32_t page_inc;    /* page size (slot stride) in bytes, multiple of 128 */
	uint32_t num_pages;   /* pages, 1 .. QL_HSB_MAX_PAGES */
	uint32_t frame_len;   /* DP_BUFFER_LENGTH: bytes per frame; metadata follows
			     * at round_up(frame_len, 128) */
	uint8_t gid[16];      /* host GID, IPv4-mapped (::ffff:a.b.c.d) on RoCE */
	uint8_t mac[6];	      /* host MAC */
	uint16_t udp_port;    /* host RoCEv2 port; 0: 4791 */
	uint32_t mtu;	      /* Ethernet MTU of the path; 0: 1500. Sets DP_PACKET_SIZE
			     * = (mtu - 74) / 128 */
	uint16_t src_port;    /* the board's source UDP port; 0: 12288 */
	uint32_t packet_size; /* server side: DP_PACKET_SIZE * 128, the frame bytes
			       * per packet (ignored by ql_hsb_configure) */
};

/* Which VP of a board, where its blocks are and its layout. */
struct ql_hsb_target {
	uint32_t vp;	      /* 0 .. QL_HSB_MAX_VPS - 1 */
	uint32_t data_plane;  /* 0 .. QL_HSB_MAX_DATA_PLANES - 1 (for the HIF default) */
	uint32_t vp_address;  /* 0: QL_HSB_VP_BASE + vp * QL_HSB_VP_STRIDE */
	uint32_t hif_address; /* 0: QL_HSB_HIF_BASE + data_plane * QL_HSB_HIF_STRIDE */
	enum ql_hsb_layout layout;
};

/* The registers ql_hsb_configure() writes, in its order (VP mask excluded):
 * fills regs (QL_HSB_CONFIG_REGS; QL_HSB_CONFIG_REGS_MAX when the GID is not
 * IPv4-mapped: then DP_HOST_IP is 127.0.0.1 and the GID goes in the
 * QL_HSB_EXT_GID extension) and returns their count, or -EINVAL for
 * parameters a board cannot take or too small a cap (the detail says which). */
#define QL_HSB_CONFIG_REGS 13
#define QL_HSB_CONFIG_REGS_MAX 17 /* + the GID extension */
int ql_hsb_dataplane_regs(const struct ql_hsb_target *t, const struct ql_hsb_dataplane *dp,
			  struct ql_hl_reg *regs, size_t cap);

/* Configure one VP: read HSB_IP_VERSION (the handle's first request, which
 * sets the board's sequence), clear the VP's enable bit (read-modify-write
 * of DP_VP_MASK), write the data-plane registers in one WR_BLOCK, read them
 * back with RD_BLOCK, then set the enable bit and read it back. A register
 * that reads back differently is -EIO, naming it with the expected and read
 * values; transport errors as ql_hl_write_dword(). ip_version (may be NULL)
 * gets the board's HSB_IP_VERSION. */
int ql_hsb_configure(struct ql_hl *h, const struct ql_hsb_target *t,
		     const struct ql_hsb_dataplane *dp, uint32_t *ip_version);

/* The whole job for a daemon: open the board at address:port (0:
 * QL_HL_PORT), ql_hsb_configure(), close. timeout_ms/retries as ql_hl_open
 * (0, 0: 200 ms, 3 retries). The detail names the board, VP and cause. */
int ql_hsb_configure_board(const char *address, uint16_t port, const struct ql_hsb_target *t,
			   const struct ql_hsb_dataplane *dp, uint32_t timeout_ms, uint32_t retries,
			   uint32_t *ip_version);

/* ------------------------------------------------------------ enumeration */

/* What a board announces in its BOOTP-style enumeration packet (the
 * version 2 vendor data; docs/hololink.md "Enumeration"). */
struct ql_hl_enum {
	uint32_t ip;	      /* the board's IPv4 address, host order (ciaddr) */
	uint8_t mac[6];	      /* its MAC (chaddr) */
	uint32_t xid;	      /* transaction id */
	uint16_t secs;	      /* seconds since boot */
	uint8_t data_plane;   /* the data plane this packet describes */
	uint8_t enum_version; /* 2 (1 is parsed: its fields differ) */
	uint8_t uuid[16];     /* FPGA UUID (v2) */
	uint8_t serial[7];    /* serial number */
	uint16_t ip_version;  /* HSB IP version */
	uint16_t fpga_crc;
};
#define QL_HL_ENUM_LEN 300 /* a BOOTP request: 236 + the vendor area */
/* Build the packet: its length (QL_HL_ENUM_LEN) or -EINVAL (cap too small). */
int ql_hl_enum_build(const struct ql_hl_enum *e, uint8_t *buf, size_t cap);
/* Parse one: 0, or -EPROTO for anything that is not a BOOTP request with
 * NVIDIA's vendor data (tag 0xE0, id "NVDA"), or truncated. */
int ql_hl_enum_parse(const uint8_t *buf, size_t len, struct ql_hl_enum *out);

/* ------------------------------------------------------ server (emulation) */

struct ql_hl_server;

#define QL_HL_ALLOW_MAX 8

struct ql_hl_server_config {
	const char *address;		       /* bind address; NULL: 127.0.0.1 */
	uint16_t port;			       /* 0: an ephemeral port (ql_hl_server_port) */
	uint32_t num_vps;		       /* 1 .. QL_HSB_MAX_VPS; 0: 1 */
	uint32_t vp_base, vp_stride, hif_base; /* 0: the defaults */
	enum ql_hsb_layout layout;	       /* how DP_PAGE_LSB is read */
	/* Hosts whose requests are answered: IPv4 prefixes (host order).
	 * n_allow 0: the first host that sends a valid request, and only it
	 * (trust on first use); requests from others are dropped and counted. */
	uint32_t allow[QL_HL_ALLOW_MAX], allow_len[QL_HL_ALLOW_MAX];
	uint32_t n_allow;
	/* Enumeration: announce to announce_addr:announce_port (0: 12267)
	 * every announce_ms (0: 1000) when announce_addr is set. */
	const char *announce_addr;
	uint16_t announce_port;
	uint32_t announce_ms;
	/* Fault injection for tests: drop the drop_reply-th reply (1-based,
	 * once; 0: never); reads of corrupt_addr return value ^ corrupt_xor. */
	uint32_t drop_reply;
	uint32_t corrupt_addr, corrupt_xor;
};

/* "ADDR[/LEN]" into an allow entry: 0 or -EINVAL. */
int ql_hl_allow_parse(const char *s, uint32_t *addr, uint32_t *len);

struct ql_hl_server_stats {
	uint64_t requests; /* datagrams handled */
	uint64_t refused;  /* dropped: from a host not allowed */
	uint64_t announcements;
	uint32_t owner; /* host order; the allowed host when n_allow was 0 */
};

/* Called from ql_hl_server_poll/handle when a VP's enable bit is set with a
 * consistent configuration. */
typedef void (*ql_hl_configured_fn)(void *arg, uint32_t vp, const struct ql_hsb_dataplane *dp);

/* cfg NULL: the defaults. fn may be NULL. */
int ql_hl_server_create(const struct ql_hl_server_config *cfg, ql_hl_configured_fn fn, void *arg,
			struct ql_hl_server **out);
void ql_hl_server_destroy(struct ql_hl_server *s);
int ql_hl_server_fd(const struct ql_hl_server *s);
uint16_t ql_hl_server_port(const struct ql_hl_server *s);
void ql_hl_server_stats(const struct ql_hl_server *s, struct ql_hl_server_stats *out);
/* Serve datagrams for up to timeout_ms (0: only what is queued), and
 * announce when due: the number handled, or a negative errno. */
int ql_hl_server_poll(struct ql_hl_server *s, int timeout_ms);
/* Send one enumeration announcement now (0 or a negative errno). */
int ql_hl_server_announce(struct ql_hl_server *s);
/* The core: answer one request from host `from` (IPv4, host order; the
 * allowlist applies). Returns the reply's length (<= cap, cap >=
 * QL_HL_DGRAM_MAX) or 0 when the board sends none. */
size_t ql_hl_server_handle_from(struct ql_hl_server *s, uint32_t from, const uint8_t *req,
				size_t len, uint8_t *reply, size_t cap);
/* ql_hl_server_handle_from() from 127.0.0.1. */
size_t ql_hl_server_handle(struct ql_hl_server *s, const uint8_t *req, size_t len, uint8_t *reply,
			   size_t cap);
/*
 * The data-plane target of an enabled VP: 0 and *out (base address, page
 * size, pages, frame length, QPN, rkey, host GID/MAC/port, packet size),
 * -EAGAIN before the VP is enabled, -EINVAL bad vp. This is what the
 * emulated board's data plane sends to. mtu is DP_PACKET_SIZE * 128 + 74.
 */
int ql_hl_server_dataplane(const struct ql_hl_server *s, uint32_t vp, struct ql_hsb_dataplane *out);
/* Poll until vp is enabled (0) or timeout_ms passes (-ETIMEDOUT). */
int ql_hl_server_wait(struct ql_hl_server *s, uint32_t vp, int timeout_ms,
		      struct ql_hsb_dataplane *out);
/* Direct register access (no protocol): 0, or -EFAULT for no register. */
int ql_hl_server_peek(const struct ql_hl_server *s, uint32_t addr, uint32_t *value);

#ifdef __cplusplus
}
#endif
#endif
