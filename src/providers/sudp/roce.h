/* SPDX-License-Identifier: MIT */
/*
 * roce.h: the RoCEv2 packet codec of the soft+udp provider.
 *
 * Builds and parses the UDP payload of a RoCEv2 packet exactly as the IBTA
 * spec (vol. 1, ch. 9: BTH, RETH, AETH, AtomicETH, AtomicAckETH, ImmDt,
 * IETH) and its RoCEv2 annex (A17: UDP destination port 4791, ICRC) define
 * it, so that Linux's rdma_rxe and Wireshark accept the packets. Pure
 * functions over caller buffers: no allocation, no syscalls (the NIC thread
 * calls them per packet). docs/soft-udp.md is the specification of the wire
 * as implemented, including how the ICRC is checked when the IPv4
 * Identification field of a received packet is unknown to a UDP socket.
 *
 * Integers in the structs are host order; the codec writes them big-endian
 * (the ICRC little-endian, as rdma_rxe and the annex's CRC32 do). The
 * immediate value `imm` is the 4 ImmDt bytes read big-endian: a verbs
 * caller passes ntohl(wr->imm_data) and hands back htonl(imm).
 */
#ifndef QL_UDP_ROCE_H
#define QL_UDP_ROCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define ROCE_UDP_PORT 4791

/* header sizes (bytes) */
#define ROCE_BTH_LEN 12
#define ROCE_RETH_LEN 16
#define ROCE_AETH_LEN 4
#define ROCE_ATOMICETH_LEN 28
#define ROCE_ATOMICACKETH_LEN 8
#define ROCE_IMMDT_LEN 4
#define ROCE_IETH_LEN 4
#define ROCE_ICRC_LEN 4
/* the longest UDP payload the codec takes: fits IPv4 and IPv6 lengths */
#define ROCE_PKT_MAX (65535 - 48)
/* the longest headers an opcode carries (BTH + AtomicETH) */
#define ROCE_HDR_MAX 40
/* pad bytes after a payload of n bytes (the packet stays 4-byte aligned) */
#define ROCE_PAD(n) ((uint32_t)(-(uint32_t)(n)) & 3u)

/* header presence bits */
enum {
	ROCE_HAS_RETH = 1,
	ROCE_HAS_AETH = 2,
	ROCE_HAS_ATOMICETH = 4,
	ROCE_HAS_ATOMICACKETH = 8,
	ROCE_HAS_IMMDT = 16,
	ROCE_HAS_IETH = 32,
	ROCE_HAS_PAYLOAD = 64, /* the opcode carries a payload (may be 0 bytes) */
};

/* opcode = transport (top 3 bits) | operation (low 5 bits) */
enum {
	ROCE_TR_RC = 0x00,
	ROCE_TR_UC = 0x20,
};
enum {
	ROCE_OP_SEND_FIRST = 0x00,
	ROCE_OP_SEND_MIDDLE = 0x01,
	ROCE_OP_SEND_LAST = 0x02,
	ROCE_OP_SEND_LAST_WITH_IMM = 0x03,
	ROCE_OP_SEND_ONLY = 0x04,
	ROCE_OP_SEND_ONLY_WITH_IMM = 0x05,
	ROCE_OP_RDMA_WRITE_FIRST = 0x06,
	ROCE_OP_RDMA_WRITE_MIDDLE = 0x07,
	ROCE_OP_RDMA_WRITE_LAST = 0x08,
	ROCE_OP_RDMA_WRITE_LAST_WITH_IMM = 0x09,
	ROCE_OP_RDMA_WRITE_ONLY = 0x0a,
	ROCE_OP_RDMA_WRITE_ONLY_WITH_IMM = 0x0b,
	ROCE_OP_RDMA_READ_REQUEST = 0x0c, /* RC only from here on */
	ROCE_OP_RDMA_READ_RESPONSE_FIRST = 0x0d,
	ROCE_OP_RDMA_READ_RESPONSE_MIDDLE = 0x0e,
	ROCE_OP_RDMA_READ_RESPONSE_LAST = 0x0f,
	ROCE_OP_RDMA_READ_RESPONSE_ONLY = 0x10,
	ROCE_OP_ACKNOWLEDGE = 0x11,
	ROCE_OP_ATOMIC_ACKNOWLEDGE = 0x12,
	ROCE_OP_COMPARE_SWAP = 0x13,
	ROCE_OP_FETCH_ADD = 0x14,
	ROCE_OP_SEND_LAST_WITH_INVALIDATE = 0x16,
	ROCE_OP_SEND_ONLY_WITH_INVALIDATE = 0x17,
};
#define ROCE_RC(op) ((uint8_t)(ROCE_TR_RC | (op)))
#define ROCE_UC(op) ((uint8_t)(ROCE_TR_UC | (op)))
#define ROCE_OPCODE_TR(opc) ((uint8_t)((opc)&0xe0))
#define ROCE_OPCODE_OP(opc) ((uint8_t)((opc)&0x1f))

/* AETH syndrome: bits 7..5 the kind, 4..0 credit count / RNR timer / NAK code */
#define ROCE_AETH_ACK(credits) ((uint8_t)(0x00 | ((credits)&0x1f)))
#define ROCE_AETH_RNR_NAK(timer) ((uint8_t)(0x20 | ((timer)&0x1f)))
#define ROCE_AETH_NAK(code) ((uint8_t)(0x60 | ((code)&0x1f)))
#define ROCE_AETH_KIND(syn) ((uint8_t)((syn)&0xe0)) /* 0x00 ACK, 0x20 RNR, 0x60 NAK */
#define ROCE_AETH_VALUE(syn) ((uint8_t)((syn)&0x1f))
#define ROCE_AETH_CREDITS_INVALID 0x1f /* "no credit count", what rxe sends */
enum {
	ROCE_NAK_PSN_SEQ_ERROR = 0,
	ROCE_NAK_INVALID_REQUEST = 1,
	ROCE_NAK_REMOTE_ACCESS = 2,
	ROCE_NAK_REMOTE_OP = 3,
	ROCE_NAK_INVALID_RD_REQUEST = 4,
};

#define ROCE_PSN_MASK 0xffffffu
#define ROCE_QPN_MASK 0xffffffu
#define ROCE_DEFAULT_PKEY 0xffff

struct roce_bth {
	uint8_t opcode;
	uint8_t se, mig, pad, tver;
	uint16_t pkey;
	uint8_t fecn, becn;
	uint32_t dqpn;
	uint8_t ackreq;
	uint32_t psn;
};
struct roce_reth {
	uint64_t va;
	uint32_t rkey;
	uint32_t dma_len;
};
struct roce_aeth {
	uint8_t syndrome;
	uint32_t msn;
};
struct roce_atomiceth {
	uint64_t va;
	uint32_t rkey;
	uint64_t swap_add;
	uint64_t compare;
};
/* One packet. ql__roce_build: `has` and bth.pad are ignored (derived from the
 * opcode and payload_len), so are the fields of headers the opcode does not
 * carry. ql__roce_parse: fills the BTH, `has`, the headers `has` names and the
 * payload (pointing into the parsed buffer); leaves the others as they were. */
struct roce_pkt {
	struct roce_bth bth;
	uint32_t has;
	struct roce_reth reth;
	struct roce_aeth aeth;
	struct roce_atomiceth atomic;
	uint64_t atomic_orig; /* AtomicAckETH */
	uint32_t imm;	      /* ImmDt */
	const uint8_t *payload;
	uint32_t payload_len;
	uint32_t inv_rkey; /* IETH */
};

/* the IP/UDP facts the ICRC covers (what a UDP socket knows: addresses,
 * ports, lengths). Ports host order. ip_id: the IPv4 Identification the
 * sender used; ql__roce_build and ql__roce_icrc_iov use it as is (0: what Linux puts
 * in a DF packet from an unconnected UDP socket, docs/soft-udp.md);
 * ql__roce_icrc_check ignores it (it solves for it). */
struct roce_addr {
	int family;		  /* AF_INET/AF_INET6 */
	uint8_t src[16], dst[16]; /* v4 in the first 4 bytes */
	uint16_t sport, dport;
	uint16_t ip_id;
};

/* ROCE_HAS_* bits an opcode carries; 0 for an unknown opcode (errno EINVAL) */
uint32_t ql__roce_opcode_headers(uint8_t opcode);
/* BTH + extension headers, -EINVAL unknown */
int ql__roce_hdr_len(uint8_t opcode);
/* headers + payload + pad + ICRC into buf; returns the UDP payload length,
 * -EINVAL (bad opcode/field), -EMSGSIZE (cap) */
int ql__roce_build(uint8_t *buf, size_t cap, const struct roce_pkt *p, const struct roce_addr *a);
/* headers per opcode, pad, lengths; -EBADMSG; does NOT check the ICRC */
int ql__roce_parse(const uint8_t *buf, size_t len, struct roce_pkt *p);
/* 0 or -EBADMSG. IPv4: any Identification is accepted whose ICRC matches
 * (solved for, docs/soft-udp.md), DF assumed set. */
int ql__roce_icrc_check(const uint8_t *buf, size_t len, const struct roce_addr *a);
/* as ql__roce_icrc_check, and the IPv4 Identification that makes it valid */
int ql__roce_icrc_solve_id(const uint8_t *buf, size_t len, const struct roce_addr *a, uint16_t *id);

/* scatter form for zero-copy transmit: headers written to hdr (bth.pad set
 * from payload_len), returns their length (-EINVAL, -EMSGSIZE); the caller
 * sends hdr, the payload, ROCE_PAD(payload_len) zero bytes and the ICRC,
 * which ql__roce_icrc_iov computes over all of them but the ICRC (iov = the
 * UDP payload without its last 4 bytes); ql__roce_put_icrc stores it. */
int ql__roce_build_hdr(uint8_t *hdr, size_t cap, const struct roce_pkt *p);
uint32_t ql__roce_icrc_iov(const struct roce_addr *a, const struct iovec *iov, int n);
void ql__roce_put_icrc(uint8_t *dst, uint32_t icrc);
extern const uint8_t ql__roce_zero_pad[4];

/* CRC-32 with carry-less multiplication (x86-64 PCLMULQDQ, chosen at load
 * time when the CPU has it) or by table: tests switch; returns whether the
 * fast path is now on */
bool ql__roce_crc_use_clmul(bool on);

/* the name of an opcode ("RC SEND_ONLY"), "?" if unknown */
const char *ql__roce_opcode_name(uint8_t opcode);

#endif
