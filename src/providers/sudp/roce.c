// SPDX-License-Identifier: MIT
/* The RoCEv2 packet codec (roce.h, docs/soft-udp.md). */
#include "providers/sudp/roce.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>

/* ---- opcode table ------------------------------------------------------ */

#define P ROCE_HAS_PAYLOAD
/* headers per operation (low 5 bits of the opcode), IBTA vol. 1 table 38;
 * bit 31 marks an operation that exists, bit 30 one that UC has too, bit 29
 * a FIRST/MIDDLE packet (full MTU: no pad, some payload) */
#define EXISTS (1u << 31)
#define UC_TOO (1u << 30)
#define NOT_LAST (1u << 29)
static const uint32_t op_headers[32] = {
	[ROCE_OP_SEND_FIRST] = EXISTS | UC_TOO | NOT_LAST | P,
	[ROCE_OP_SEND_MIDDLE] = EXISTS | UC_TOO | NOT_LAST | P,
	[ROCE_OP_SEND_LAST] = EXISTS | UC_TOO | P,
	[ROCE_OP_SEND_LAST_WITH_IMM] = EXISTS | UC_TOO | P | ROCE_HAS_IMMDT,
	[ROCE_OP_SEND_ONLY] = EXISTS | UC_TOO | P,
	[ROCE_OP_SEND_ONLY_WITH_IMM] = EXISTS | UC_TOO | P | ROCE_HAS_IMMDT,
	[ROCE_OP_RDMA_WRITE_FIRST] = EXISTS | UC_TOO | NOT_LAST | P | ROCE_HAS_RETH,
	[ROCE_OP_RDMA_WRITE_MIDDLE] = EXISTS | UC_TOO | NOT_LAST | P,
	[ROCE_OP_RDMA_WRITE_LAST] = EXISTS | UC_TOO | P,
	[ROCE_OP_RDMA_WRITE_LAST_WITH_IMM] = EXISTS | UC_TOO | P | ROCE_HAS_IMMDT,
	[ROCE_OP_RDMA_WRITE_ONLY] = EXISTS | UC_TOO | P | ROCE_HAS_RETH,
	[ROCE_OP_RDMA_WRITE_ONLY_WITH_IMM] = EXISTS | UC_TOO | P | ROCE_HAS_RETH | ROCE_HAS_IMMDT,
	[ROCE_OP_RDMA_READ_REQUEST] = EXISTS | ROCE_HAS_RETH,
	[ROCE_OP_RDMA_READ_RESPONSE_FIRST] = EXISTS | NOT_LAST | P | ROCE_HAS_AETH,
	[ROCE_OP_RDMA_READ_RESPONSE_MIDDLE] = EXISTS | NOT_LAST | P,
	[ROCE_OP_RDMA_READ_RESPONSE_LAST] = EXISTS | P | ROCE_HAS_AETH,
	[ROCE_OP_RDMA_READ_RESPONSE_ONLY] = EXISTS | P | ROCE_HAS_AETH,
	[ROCE_OP_ACKNOWLEDGE] = EXISTS | ROCE_HAS_AETH,
	[ROCE_OP_ATOMIC_ACKNOWLEDGE] = EXISTS | ROCE_HAS_AETH | ROCE_HAS_ATOMICACKETH,
	[ROCE_OP_COMPARE_SWAP] = EXISTS | ROCE_HAS_ATOMICETH,
	[ROCE_OP_FETCH_ADD] = EXISTS | ROCE_HAS_ATOMICETH,
	[ROCE_OP_SEND_LAST_WITH_INVALIDATE] = EXISTS | P | ROCE_HAS_IETH,
	[ROCE_OP_SEND_ONLY_WITH_INVALIDATE] = EXISTS | P | ROCE_HAS_IETH,
};
#undef P
#define FLAG_BITS (EXISTS | UC_TOO | NOT_LAST)

static uint32_t op_entry(uint8_t opcode)
{
	uint32_t e = op_headers[ROCE_OPCODE_OP(opcode)];
	switch (ROCE_OPCODE_TR(opcode)) {
	case ROCE_TR_RC:
		return e;
	case ROCE_TR_UC:
		return (e & UC_TOO) ? e : 0;
	default: /* RD, UD, CNP, XRC: not this NIC's */
		return 0;
	}
}

uint32_t ql__roce_opcode_headers(uint8_t opcode)
{
	uint32_t e = op_entry(opcode);
	if (!e)
		errno = EINVAL;
	return e & ~FLAG_BITS;
}

static int hdr_len_of(uint32_t e)
{
	return ROCE_BTH_LEN + ((e & ROCE_HAS_RETH) ? ROCE_RETH_LEN : 0) +
	       ((e & ROCE_HAS_AETH) ? ROCE_AETH_LEN : 0) +
	       ((e & ROCE_HAS_ATOMICETH) ? ROCE_ATOMICETH_LEN : 0) +
	       ((e & ROCE_HAS_ATOMICACKETH) ? ROCE_ATOMICACKETH_LEN : 0) +
	       ((e & ROCE_HAS_IMMDT) ? ROCE_IMMDT_LEN : 0) +
	       ((e & ROCE_HAS_IETH) ? ROCE_IETH_LEN : 0);
}

int ql__roce_hdr_len(uint8_t opcode)
{
	uint32_t e = op_entry(opcode);
	return e ? hdr_len_of(e) : -EINVAL;
}

#define OPS(X)                       \
	X(SEND_FIRST)                \
	X(SEND_MIDDLE)               \
	X(SEND_LAST)                 \
	X(SEND_LAST_WITH_IMM)        \
	X(SEND_ONLY)                 \
	X(SEND_ONLY_WITH_IMM)        \
	X(RDMA_WRITE_FIRST)          \
	X(RDMA_WRITE_MIDDLE)         \
	X(RDMA_WRITE_LAST)           \
	X(RDMA_WRITE_LAST_WITH_IMM)  \
	X(RDMA_WRITE_ONLY)           \
	X(RDMA_WRITE_ONLY_WITH_IMM)  \
	X(RDMA_READ_REQUEST)         \
	X(RDMA_READ_RESPONSE_FIRST)  \
	X(RDMA_READ_RESPONSE_MIDDLE) \
	X(RDMA_READ_RESPONSE_LAST)   \
	X(RDMA_READ_RESPONSE_ONLY)   \
	X(ACKNOWLEDGE)               \
	X(ATOMIC_ACKNOWLEDGE)        \
	X(COMPARE_SWAP)              \
	X(FETCH_ADD)                 \
	X(SEND_LAST_WITH_INVALIDATE) \
	X(SEND_ONLY_WITH_INVALIDATE)

const char *ql__roce_opcode_name(uint8_t opcode)
{
#define RC_NAME(op) [ROCE_OP_##op] = "RC " #op,
#define UC_NAME(op) [ROCE_OP_##op] = "UC " #op,
	static const char *const rc[32] = { OPS(RC_NAME) };
	static const char *const uc[32] = { OPS(UC_NAME) };
#undef RC_NAME
#undef UC_NAME
	if (!op_entry(opcode))
		return "?";
	return (ROCE_OPCODE_TR(opcode) == ROCE_TR_UC ? uc : rc)[ROCE_OPCODE_OP(opcode)];
}

/* ---- big-endian fields --------------------------------------------------- */

static inline void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}
static inline void put24(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 16);
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)v;
}
static inline void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	put24(p + 1, v);
}
static inline void put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)(v >> 32));
	put32(p + 4, (uint32_t)v);
}
static inline uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}
static inline uint32_t get24(const uint8_t *p)
{
	return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}
static inline uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | get24(p + 1);
}
static inline uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) << 32 | get32(p + 4);
}

/* ---- build ----------------------------------------------------------------- */

const uint8_t ql__roce_zero_pad[4];

int ql__roce_build_hdr(uint8_t *hdr, size_t cap, const struct roce_pkt *p)
{
	const struct roce_bth *b = &p->bth;
	uint32_t e = op_entry(b->opcode);
	if (!e || b->tver || b->dqpn > ROCE_QPN_MASK || b->psn > ROCE_PSN_MASK ||
	    ((e & ROCE_HAS_AETH) && p->aeth.msn > 0xffffff))
		return -EINVAL;
	if (!(e & ROCE_HAS_PAYLOAD) && p->payload_len)
		return -EINVAL;
	/* FIRST/MIDDLE packets are full path-MTU packets: never padded, never empty */
	if ((e & NOT_LAST) && (!p->payload_len || ROCE_PAD(p->payload_len)))
		return -EINVAL;
	int len = hdr_len_of(e);
	if (cap < (size_t)len)
		return -EMSGSIZE;
	uint32_t pad = ROCE_PAD(p->payload_len);
	hdr[0] = b->opcode;
	hdr[1] = (uint8_t)((b->se ? 0x80 : 0) | (b->mig ? 0x40 : 0) | pad << 4);
	put16(hdr + 2, b->pkey);
	hdr[4] = (uint8_t)((b->fecn ? 0x80 : 0) | (b->becn ? 0x40 : 0));
	put24(hdr + 5, b->dqpn);
	hdr[8] = b->ackreq ? 0x80 : 0;
	put24(hdr + 9, b->psn);
	uint8_t *q = hdr + ROCE_BTH_LEN;
	/* extension headers in the order of IBTA table 38 */
	if (e & ROCE_HAS_RETH) {
		put64(q, p->reth.va);
		put32(q + 8, p->reth.rkey);
		put32(q + 12, p->reth.dma_len);
		q += ROCE_RETH_LEN;
	}
	if (e & ROCE_HAS_ATOMICETH) {
		put64(q, p->atomic.va);
		put32(q + 8, p->atomic.rkey);
		put64(q + 12, p->atomic.swap_add);
		put64(q + 20, p->atomic.compare);
		q += ROCE_ATOMICETH_LEN;
	}
	if (e & ROCE_HAS_AETH) {
		q[0] = p->aeth.syndrome;
		put24(q + 1, p->aeth.msn);
		q += ROCE_AETH_LEN;
	}
	if (e & ROCE_HAS_ATOMICACKETH) {
		put64(q, p->atomic_orig);
		q += ROCE_ATOMICACKETH_LEN;
	}
	if (e & ROCE_HAS_IMMDT) {
		put32(q, p->imm);
		q += ROCE_IMMDT_LEN;
	}
	if (e & ROCE_HAS_IETH) {
		put32(q, p->inv_rkey);
		q += ROCE_IETH_LEN;
	}
	return (int)(q - hdr);
}

void ql__roce_put_icrc(uint8_t *dst, uint32_t icrc)
{
	/* little-endian: the CRC register's low byte first, as rdma_rxe stores it */
	dst[0] = (uint8_t)icrc;
	dst[1] = (uint8_t)(icrc >> 8);
	dst[2] = (uint8_t)(icrc >> 16);
	dst[3] = (uint8_t)(icrc >> 24);
}

static uint32_t get_icrc(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int ql__roce_build(uint8_t *buf, size_t cap, const struct roce_pkt *p, const struct roce_addr *a)
{
	int h = ql__roce_build_hdr(buf, cap, p);
	if (h < 0)
		return h;
	uint32_t pad = ROCE_PAD(p->payload_len);
	size_t total = (size_t)h + p->payload_len + pad + ROCE_ICRC_LEN;
	if (total > cap || total > ROCE_PKT_MAX)
		return -EMSGSIZE;
	if (p->payload_len)
		memmove(buf + h, p->payload, p->payload_len);
	memset(buf + h + p->payload_len, 0, pad);
	struct iovec iov = { buf, total - ROCE_ICRC_LEN };
	ql__roce_put_icrc(buf + total - ROCE_ICRC_LEN, ql__roce_icrc_iov(a, &iov, 1));
	return (int)total;
}

/* ---- parse ----------------------------------------------------------------- */

int ql__roce_parse(const uint8_t *buf, size_t len, struct roce_pkt *p)
{
	if (len < ROCE_BTH_LEN + ROCE_ICRC_LEN || len > ROCE_PKT_MAX || (len & 3))
		return -EBADMSG;
	struct roce_bth *b = &p->bth;
	uint32_t e = op_entry(buf[0]);
	if (!e)
		return -EBADMSG;
	b->opcode = buf[0];
	b->se = buf[1] >> 7;
	b->mig = (buf[1] >> 6) & 1;
	b->pad = (buf[1] >> 4) & 3;
	b->tver = buf[1] & 0xf;
	if (b->tver)
		return -EBADMSG;
	b->pkey = get16(buf + 2);
	b->fecn = buf[4] >> 7;
	b->becn = (buf[4] >> 6) & 1;
	b->dqpn = get24(buf + 5);
	b->ackreq = buf[8] >> 7;
	b->psn = get24(buf + 9);
	size_t h = (size_t)hdr_len_of(e);
	if (len < h + ROCE_ICRC_LEN)
		return -EBADMSG;
	size_t rest = len - h - ROCE_ICRC_LEN; /* payload + pad */
	if (!(e & ROCE_HAS_PAYLOAD) && (rest || b->pad))
		return -EBADMSG;
	if (b->pad > rest)
		return -EBADMSG;
	if ((e & NOT_LAST) && (b->pad || !rest))
		return -EBADMSG;
	p->has = e & ~FLAG_BITS;
	const uint8_t *q = buf + ROCE_BTH_LEN;
	if (e & ROCE_HAS_RETH) {
		p->reth.va = get64(q);
		p->reth.rkey = get32(q + 8);
		p->reth.dma_len = get32(q + 12);
		q += ROCE_RETH_LEN;
	}
	if (e & ROCE_HAS_ATOMICETH) {
		p->atomic.va = get64(q);
		p->atomic.rkey = get32(q + 8);
		p->atomic.swap_add = get64(q + 12);
		p->atomic.compare = get64(q + 20);
		q += ROCE_ATOMICETH_LEN;
	}
	if (e & ROCE_HAS_AETH) {
		p->aeth.syndrome = q[0];
		p->aeth.msn = get24(q + 1);
		q += ROCE_AETH_LEN;
	}
	if (e & ROCE_HAS_ATOMICACKETH) {
		p->atomic_orig = get64(q);
		q += ROCE_ATOMICACKETH_LEN;
	}
	if (e & ROCE_HAS_IMMDT) {
		p->imm = get32(q);
		q += ROCE_IMMDT_LEN;
	}
	if (e & ROCE_HAS_IETH) {
		p->inv_rkey = get32(q);
		q += ROCE_IETH_LEN;
	}
	p->payload = buf + h;
	p->payload_len = (uint32_t)(rest - b->pad);
	return 0;
}

/* ---- ICRC -------------------------------------------------------------------
 * CRC-32 (IEEE 802.3, reflected polynomial 0xedb88320), slicing by 8. Our
 * own table rather than zlib's so that libqlink keeps libibverbs as its only
 * dependency. The ICRC is ~CRC(0xff x 8, masked IP header, masked UDP
 * header, BTH with resv8a set to ones, the rest of the packet but the ICRC)
 * starting from 0xffffffff: the eight 0xff bytes stand for the LRH that
 * RoCEv2 does not carry (IBTA annex A17.4.4). */

#define CRC_POLY 0xedb88320u
static uint32_t crc_tab[8][256];
/* the raw CRC register of the two bytes (b >> 8, b & 0xff) from a zero
 * register, for each bit b of a 16-bit field: the columns of the ID solver */
static uint32_t id_col[16];
/* x^(2^k) mod P, for shifting a register across runs of zero bytes */
static uint32_t x2n[32];

#if defined(__x86_64__)
#include <immintrin.h>
static bool have_clmul;

/*
 * Folding with carry-less multiplication (Intel, "Fast CRC Computation for
 * Generic Polynomials Using PCLMULQDQ", 2009), for the reflected CRC-32
 * polynomial: four 128-bit lanes fold 64 bytes a step, then fold into one
 * lane, reduce to 64 and 32 bits, Barrett-reduce. The constants are
 * x^k mod P (bit-reflected, shifted one) for the fold distances: 4*128+32
 * and 4*128-32 bits (k1, k2), 128+32 and 128-32 (k3, k4), 64 (k5); P' and
 * mu for the Barrett step. n: a multiple of 16, at least 64. c: the raw
 * register, as crc_update's.
 */
__attribute__((target("pclmul,sse4.1"))) static uint32_t crc_clmul(uint32_t c, const uint8_t *p,
								   size_t n)
{
	const __m128i k1k2 = _mm_set_epi64x(0x1c6e41596, 0x154442bd4);
	const __m128i k3k4 = _mm_set_epi64x(0x0ccaa009e, 0x1751997d0);
	const __m128i k5 = _mm_set_epi64x(0, 0x163cd6124);
	const __m128i pmu = _mm_set_epi64x(0x1f7011641, 0x1db710641);
	const __m128i mask32 = _mm_set_epi32(0, 0, 0, -1);
	__m128i x1 = _mm_loadu_si128((const __m128i *)p);
	__m128i x2 = _mm_loadu_si128((const __m128i *)(p + 16));
	__m128i x3 = _mm_loadu_si128((const __m128i *)(p + 32));
	__m128i x4 = _mm_loadu_si128((const __m128i *)(p + 48));
	x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128((int)c));
	p += 64;
	n -= 64;
#define FOLD(x, k, next)                                                   \
	x = _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00),  \
					_mm_clmulepi64_si128(x, k, 0x11)), \
			  next)
	while (n >= 64) {
		FOLD(x1, k1k2, _mm_loadu_si128((const __m128i *)p));
		FOLD(x2, k1k2, _mm_loadu_si128((const __m128i *)(p + 16)));
		FOLD(x3, k1k2, _mm_loadu_si128((const __m128i *)(p + 32)));
		FOLD(x4, k1k2, _mm_loadu_si128((const __m128i *)(p + 48)));
		p += 64;
		n -= 64;
	}
	FOLD(x1, k3k4, x2);
	FOLD(x1, k3k4, x3);
	FOLD(x1, k3k4, x4);
	while (n >= 16) {
		FOLD(x1, k3k4, _mm_loadu_si128((const __m128i *)p));
		p += 16;
		n -= 16;
	}
#undef FOLD
	/* 128 -> 64 bits: the low half times k4, into the high half */
	x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), _mm_clmulepi64_si128(k3k4, x1, 0x01));
	/* 64 -> 32 bits */
	x1 = _mm_xor_si128(_mm_srli_si128(x1, 4),
			   _mm_clmulepi64_si128(_mm_and_si128(x1, mask32), k5, 0x00));
	/* Barrett reduction */
	__m128i t = _mm_clmulepi64_si128(_mm_and_si128(x1, mask32), pmu, 0x10);
	t = _mm_clmulepi64_si128(_mm_and_si128(t, mask32), pmu, 0x00);
	return (uint32_t)_mm_extract_epi32(_mm_xor_si128(x1, t), 1);
}
#endif

static uint32_t crc_update(uint32_t c, const uint8_t *p, size_t n)
{
#if defined(__x86_64__)
	if (n >= 64 && have_clmul) {
		size_t m = n & ~(size_t)15;
		c = crc_clmul(c, p, m);
		p += m;
		n -= m;
	}
#endif
	while (n && ((uintptr_t)p & 7)) {
		c = crc_tab[0][(c ^ *p++) & 0xff] ^ (c >> 8);
		n--;
	}
	while (n >= 8) {
		uint32_t lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
				   (uint32_t)p[3] << 24);
		uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 |
			      (uint32_t)p[7] << 24;
		c = crc_tab[7][lo & 0xff] ^ crc_tab[6][(lo >> 8) & 0xff] ^
		    crc_tab[5][(lo >> 16) & 0xff] ^ crc_tab[4][lo >> 24] ^ crc_tab[3][hi & 0xff] ^
		    crc_tab[2][(hi >> 8) & 0xff] ^ crc_tab[1][(hi >> 16) & 0xff] ^
		    crc_tab[0][hi >> 24];
		p += 8;
		n -= 8;
	}
	while (n--)
		c = crc_tab[0][(c ^ *p++) & 0xff] ^ (c >> 8);
	return c;
}

bool ql__roce_crc_use_clmul(bool on)
{
#if defined(__x86_64__)
	have_clmul = on && __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
	return have_clmul;
#else
	(void)on;
	return false;
#endif
}

/* a * b mod P, reflected (bit 31 is x^0) */
static uint32_t mulmod(uint32_t a, uint32_t b)
{
	uint32_t prod = 0;
	for (uint32_t m = 1u << 31; m; m >>= 1) {
		if (a & m) {
			prod ^= b;
			if (!(a & (m - 1)))
				break;
		}
		b = (b & 1) ? (b >> 1) ^ CRC_POLY : b >> 1;
	}
	return prod;
}

/* x^(8n) mod P: the operator that moves a register across n zero bytes */
static uint32_t zeros_op(size_t n)
{
	uint32_t p = 1u << 31;
	for (int k = 3; n; n >>= 1, k++)
		if (n & 1)
			p = mulmod(x2n[k & 31], p);
	return p;
}

__attribute__((constructor)) static void crc_init(void)
{
#if defined(__x86_64__)
	__builtin_cpu_init();
	ql__roce_crc_use_clmul(true);
#endif
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ CRC_POLY : c >> 1;
		crc_tab[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			crc_tab[t][i] = crc_tab[0][crc_tab[t - 1][i] & 0xff] ^
					(crc_tab[t - 1][i] >> 8);
	uint32_t p = 1u << 30; /* x^1 */
	x2n[0] = p;
	for (int k = 1; k < 32; k++)
		x2n[k] = p = mulmod(p, p);
	for (int b = 0; b < 16; b++) {
		uint8_t two[2] = { (uint8_t)((1u << b) >> 8), (uint8_t)(1u << b) };
		id_col[b] = crc_update(0, two, 2);
	}
}

/* the register after 0xff x 8 from 0xffffffff, then the masked IP and UDP
 * headers of a packet whose UDP payload is udp_len bytes (ICRC included) */
static uint32_t pseudo_crc(const struct roce_addr *a, size_t udp_len, uint16_t ip_id)
{
	static const uint8_t lrh[8] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	uint8_t h[48];
	size_t n;
	uint32_t ulen = (uint32_t)(udp_len + 8);
	if (a->family == AF_INET6) {
		h[0] = 0x6f; /* version 6; traffic class and flow label masked */
		h[1] = h[2] = h[3] = 0xff;
		put16(h + 4, (uint16_t)ulen);
		h[6] = 17;   /* UDP */
		h[7] = 0xff; /* hop limit masked */
		memcpy(h + 8, a->src, 16);
		memcpy(h + 24, a->dst, 16);
		n = 40;
	} else {
		h[0] = 0x45;
		h[1] = 0xff; /* TOS masked */
		put16(h + 2, (uint16_t)(20 + ulen));
		put16(h + 4, ip_id);
		h[6] = 0x40; /* DF, fragment offset 0 */
		h[7] = 0;
		h[8] = 0xff; /* TTL masked */
		h[9] = 17;
		h[10] = h[11] = 0xff; /* header checksum masked */
		memcpy(h + 12, a->src, 4);
		memcpy(h + 16, a->dst, 4);
		n = 20;
	}
	put16(h + n, a->sport);
	put16(h + n + 2, a->dport);
	put16(h + n + 4, (uint16_t)ulen);
	h[n + 6] = h[n + 7] = 0xff; /* UDP checksum masked */
	n += 8;
	uint32_t c = crc_update(0xffffffffu, lrh, sizeof(lrh));
	return crc_update(c, h, n);
}

/* the register over the UDP payload segments, byte 4 (BTH resv8a: FECN, BECN
 * and six reserved bits) replaced by ones */
static uint32_t body_crc(uint32_t c, const struct iovec *iov, int n)
{
	static const uint8_t ones = 0xff;
	size_t pos = 0;
	for (int i = 0; i < n; i++) {
		const uint8_t *b = iov[i].iov_base;
		size_t l = iov[i].iov_len;
		if (pos <= 4 && 4 < pos + l) {
			size_t k = 4 - pos;
			c = crc_update(c, b, k);
			c = crc_update(c, &ones, 1);
			c = crc_update(c, b + k + 1, l - k - 1);
		} else {
			c = crc_update(c, b, l);
		}
		pos += l;
	}
	return c;
}

uint32_t ql__roce_icrc_iov(const struct roce_addr *a, const struct iovec *iov, int n)
{
	size_t len = 0;
	for (int i = 0; i < n; i++)
		len += iov[i].iov_len;
	uint32_t c = pseudo_crc(a, len + ROCE_ICRC_LEN, a->ip_id);
	return ~body_crc(c, iov, n);
}

/*
 * IPv4: the Identification field is covered by the ICRC, but a UDP socket
 * never sees it. CRC-32 is linear over GF(2): with the ICRC computed for
 * ID 0, flipping ID bit b changes the ICRC by id_col[b] moved across the
 * bytes that follow the field (ICRC XOR is independent of the rest). So
 * ICRC(id) = ICRC(0) ^ sum_b id_b * S(id_col[b]); we solve the 32 equations
 * in 16 unknowns by elimination. The columns are independent (multiplying by
 * x^k is invertible mod P), so a solution, when one exists, is unique; a
 * random corruption passes with probability 2^-16 instead of 2^-32.
 */
/* The eliminated columns of the ID solver for one packet length: bit k of
 * v[k] is its pivot, t[k] the ID bits it combines. A few lengths are cached
 * per thread (a peer's packets come in few sizes); a miss costs about 30
 * multiplications mod P. */
struct id_basis {
	size_t len;
	uint32_t v[32], t[32];
};
#define ID_CACHE 4
static __thread struct id_basis id_cache[ID_CACHE];
static __thread unsigned id_cache_next;

static const struct id_basis *id_basis_for(size_t len)
{
	for (int i = 0; i < ID_CACHE; i++)
		if (id_cache[i].len == len)
			return &id_cache[i];
	struct id_basis *b = &id_cache[id_cache_next++ % ID_CACHE];
	memset(b, 0, sizeof(*b));
	/* bytes after the ID field: 14 of the IP header, 8 UDP, the payload
	 * without its ICRC */
	uint32_t op = zeros_op(14 + 8 + len - ROCE_ICRC_LEN);
	for (int bit = 0; bit < 16; bit++) {
		uint32_t v = mulmod(op, id_col[bit]), t = 1u << bit;
		for (int k = 31; k >= 0 && v; k--) {
			if (!(v >> k & 1))
				continue;
			if (!b->v[k]) {
				b->v[k] = v;
				b->t[k] = t;
				break;
			}
			v ^= b->v[k];
			t ^= b->t[k];
		}
	}
	b->len = len;
	return b;
}

int ql__roce_icrc_solve_id(const uint8_t *buf, size_t len, const struct roce_addr *a, uint16_t *id)
{
	if (len < ROCE_BTH_LEN + ROCE_ICRC_LEN || len > ROCE_PKT_MAX)
		return -EBADMSG;
	struct iovec iov = { (void *)buf, len - ROCE_ICRC_LEN };
	uint32_t c = pseudo_crc(a, len, 0);
	uint32_t diff = ~body_crc(c, &iov, 1) ^ get_icrc(buf + len - ROCE_ICRC_LEN);
	if (!diff) {
		*id = 0;
		return 0;
	}
	if (a->family == AF_INET6)
		return -EBADMSG;
	const struct id_basis *b = id_basis_for(len);
	const uint32_t *bv = b->v, *bt = b->t;
	uint32_t x = 0;
	for (int k = 31; k >= 0; k--) {
		if (!(diff >> k & 1))
			continue;
		if (!bv[k])
			return -EBADMSG;
		diff ^= bv[k];
		x ^= bt[k];
	}
	*id = (uint16_t)x;
	return 0;
}

int ql__roce_icrc_check(const uint8_t *buf, size_t len, const struct roce_addr *a)
{
	uint16_t id;
	return ql__roce_icrc_solve_id(buf, len, a, &id);
}
