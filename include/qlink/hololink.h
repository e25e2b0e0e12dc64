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
 * Client: a handle is a connected UDP socket to one board (replies from any
 * other source are dropped by the kernel). Each request carries a fresh
 * 16-bit sequence number and is retransmitted (with a new number) after
 * timeout_ms, up to `retries` times; a reply is accepted only when its
 * opcode and sequence number are those of an attempt of the current request
 * and its shape and address echo are right. Replies to earlier requests are
 * ignored and counted. A device-reported status is mapped to an errno with
 * its code and name in ql_error_detail(). ql_hsb_configure() writes a VP's
 * data-plane registers and reads them back.
 *
 * Server: a register file with the data-plane layout that answers as the
 * FPGA does (status codes, no reply where the FPGA gives none), validates
 * every value, and reports a VP's parameters once its enable bit is set.
 * It is single-threaded and driven by the caller (ql_hl_server_poll);
 * ql_hl_server_handle() is the socket-free core (tests, fuzzing).
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

/* Opcodes (byte 0). */
#define QL_HL_WR_DWORD 0x04
#define QL_HL_WR_BLOCK 0x09
#define QL_HL_RD_DWORD 0x14
#define QL_HL_RD_BLOCK 0x19
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

#define QL_HL_HEADER 6	    /* opcode, flags, sequence (2), reserved (2) */
#define QL_HL_BLOCK_MAX 128 /* (address, value) pairs per block request */
#define QL_HL_DGRAM_MAX (QL_HL_HEADER + 8 * QL_HL_BLOCK_MAX + 2)

/* Data-plane registers: offsets in a VP block and in the HIF block. */
#define QL_HSB_DP_QP 0x00
#define QL_HSB_DP_RKEY 0x04
#define QL_HSB_DP_PAGE_LSB 0x08
#define QL_HSB_DP_PAGE_MSB 0x0C
#define QL_HSB_DP_PAGE_INC 0x10
#define QL_HSB_DP_MAX_BUFF 0x14
#define QL_HSB_DP_BUFFER_LENGTH 0x18
#define QL_HSB_DP_BUFFER_MASK 0x1C
#define QL_HSB_DP_HOST_MAC_LOW 0x20
#define QL_HSB_DP_HOST_MAC_HIGH 0x24
#define QL_HSB_DP_HOST_IP 0x28
#define QL_HSB_DP_HOST_UDP_PORT 0x2C
/* qlink extension, emulated board only: the host's whole GID (bytes 0..15,
 * four big-endian words), written by qlinkd only when its GID is not
 * IPv4-mapped (the soft provider); a real board has no such registers. */
#define QL_HSB_DP_HOST_GID 0x30
#define QL_HSB_VP_SIZE 0x40	   /* bytes of registers per VP block */
#define QL_HSB_DP_PACKET_SIZE 0x04 /* HIF */
#define QL_HSB_DP_PACKET_UDP_PORT 0x08
#define QL_HSB_DP_VP_MASK 0x0C
#define QL_HSB_HIF_SIZE 0x10

/* Default block addresses: VP n at VP_BASE + n * VP_STRIDE, one HIF block. */
#define QL_HSB_VP_BASE 0x1000
#define QL_HSB_VP_STRIDE 0x40
#define QL_HSB_HIF_BASE 0x0800
#define QL_HSB_MAX_VPS 32 /* one enable bit each in DP_VP_MASK */
/* Read-only identification registers of the emulated board. */
#define QL_HSB_REG_IP_VERSION 0x80
#define QL_HSB_REG_FPGA_DATE 0x84

#define QL_HSB_PAGE 128 /* FPGA page: base and stride are multiples of it */
#define QL_HSB_ROCE_OVERHEAD 74
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
	uint64_t requests;    /* transactions started */
	uint64_t retransmits; /* attempts after the first */
	uint64_t stale;	      /* replies ignored: other sequence/opcode, runt */
	uint64_t timeouts;    /* transactions that got no reply at all */
};

/* A handle on the board at address (IPv4 or host name) and port (0:
 * QL_HL_PORT). Each attempt waits timeout_ms (0: 200), and a request is
 * sent at most 1 + retries times (retries <= 16). */
int ql_hl_open(const char *address, uint16_t port, uint32_t timeout_ms, uint32_t retries,
	       struct ql_hl **out);
/* NULL is a no-op. */
void ql_hl_close(struct ql_hl *h);
/* "ADDR:PORT" of the board, for messages. */
const char *ql_hl_peer(const struct ql_hl *h);
void ql_hl_stats(const struct ql_hl *h, struct ql_hl_stats *out);

/* Each returns 0, -ETIMEDOUT (no reply after every try; the register
 * address and board in the detail), the errno of a device-reported status
 * (ql_hl_status_errno; code and name in the detail), -EPROTO for a reply
 * with the right sequence number but the wrong shape or address echo,
 * -EINVAL for a misaligned address or a bad count. Writes ask for an ack. */
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

/* What the host tells a VP (filled by the hsb channel). */
struct ql_hsb_dataplane {
	uint32_t qpn;	    /* host QP number (24 bits) */
	uint32_t rkey;	    /* rkey of the host receive region */
	uint64_t page_addr; /* ring base (iova), multiple of 128, ring below 2^39 */
	uint32_t page_inc;  /* slot stride in bytes, multiple of 128 */
	uint32_t num_pages; /* slots, 1 .. QL_HSB_MAX_PAGES */
	uint32_t frame_len; /* bytes per frame, 1 .. page_inc */
	uint8_t gid[16];    /* host GID, IPv4-mapped (::ffff:a.b.c.d) on RoCE */
	uint8_t mac[6];	    /* host MAC */
	uint16_t udp_port;  /* host RoCEv2 port; 0: 4791 */
	uint32_t mtu;	    /* path MTU; 0: 4096 */
	uint16_t src_port;  /* the board's source UDP port; 0: 12288 */
};

/* Which VP of a board, and where its blocks are (0: the defaults). */
struct ql_hsb_target {
	uint32_t vp;	      /* 0 .. QL_HSB_MAX_VPS - 1 */
	uint32_t vp_address;  /* 0: QL_HSB_VP_BASE + vp * QL_HSB_VP_STRIDE */
	uint32_t hif_address; /* 0: QL_HSB_HIF_BASE */
};

/* The registers ql_hsb_configure() writes, in its order (VP mask excluded):
 * fills regs (QL_HSB_CONFIG_REGS; QL_HSB_CONFIG_REGS_MAX when the GID is not
 * IPv4-mapped: then DP_HOST_IP is 127.0.0.1 and the GID goes in the
 * DP_HOST_GID extension) and returns their count, or -EINVAL for parameters
 * a board cannot take or too small a cap (the detail says which). */
#define QL_HSB_CONFIG_REGS 13
#define QL_HSB_CONFIG_REGS_MAX 17 /* + DP_HOST_GID (a GID that is not IPv4-mapped) */
int ql_hsb_dataplane_regs(const struct ql_hsb_target *t, const struct ql_hsb_dataplane *dp,
			  struct ql_hl_reg *regs, size_t cap);

/* Configure one VP: clear its enable bit (read-modify-write of DP_VP_MASK),
 * write the data-plane registers in one WR_BLOCK, read them back with
 * RD_BLOCK, then set the enable bit and read it back. A register that
 * reads back differently is -EIO, naming it with the expected and read
 * values; transport errors as ql_hl_write_dword(). */
int ql_hsb_configure(struct ql_hl *h, const struct ql_hsb_target *t,
		     const struct ql_hsb_dataplane *dp);

/* The whole job for a daemon: open the board at address:port (0:
 * QL_HL_PORT), ql_hsb_configure(), close. timeout_ms/retries as ql_hl_open
 * (0, 0: 200 ms, 3 retries). The detail names the board, VP and cause. */
int ql_hsb_configure_board(const char *address, uint16_t port, const struct ql_hsb_target *t,
			   const struct ql_hsb_dataplane *dp, uint32_t timeout_ms,
			   uint32_t retries);

/* ------------------------------------------------------ server (emulation) */

struct ql_hl_server;

struct ql_hl_server_config {
	const char *address;		       /* bind address; NULL: 127.0.0.1 */
	uint16_t port;			       /* 0: an ephemeral port (ql_hl_server_port) */
	uint32_t num_vps;		       /* 1 .. QL_HSB_MAX_VPS; 0: 1 */
	uint32_t vp_base, vp_stride, hif_base; /* 0: the defaults */
	/* Fault injection for tests: drop the drop_reply-th reply (1-based,
	 * once; 0: never); reads of corrupt_addr return value ^ corrupt_xor. */
	uint32_t drop_reply;
	uint32_t corrupt_addr, corrupt_xor;
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
/* Serve datagrams for up to timeout_ms (0: only what is queued): the number
 * handled, or a negative errno. */
int ql_hl_server_poll(struct ql_hl_server *s, int timeout_ms);
/* The core: answer one request. Returns the reply's length (<= cap, cap >=
 * QL_HL_DGRAM_MAX) or 0 when the board sends none. */
size_t ql_hl_server_handle(struct ql_hl_server *s, const uint8_t *req, size_t len, uint8_t *reply,
			   size_t cap);
/* The VP's parameters once enabled (0), -EAGAIN before, -EINVAL bad vp.
 * mtu is DP_PACKET_SIZE * 128 + 74 (the largest MTU the register allows). */
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
