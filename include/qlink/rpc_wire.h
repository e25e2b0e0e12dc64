/* SPDX-License-Identifier: MIT */
/*
 * rpc_wire: the message bytes, the part of CUDA-Q Realtime's message
 * protocol a QCS author implements, readable on its own (docs/rpc.md and
 * docs/wire-protocol.md have it byte by byte). Every ring slot carries one
 * message, `header | payload`: a 24-byte request header (RPCHeader: magic
 * 'CUQR', FNV-1a function id, argument length, request id, PTP timestamp)
 * followed by the arguments, and a 24-byte response header (RPCResponse:
 * magic 'CUQS', status, result length, and the echoed request id and
 * timestamp) followed by the results. Here: the constants and statuses,
 * little-endian access at any alignment, header encode/decode without
 * relying on host struct layout, FNV-1a, the payload type ids and schemas,
 * and bit packing. Header-only except the few *_str/schema helpers.
 */
#ifndef QLINK_RPC_WIRE_H
#define QLINK_RPC_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Host and device: `__host__ __device__` under nvcc (the GPU dispatcher's
 * body and its handlers use these inline functions on the device), nothing
 * for a C or C++ host compiler. */
#ifndef QL_HD
#if defined(__CUDACC__)
#define QL_HD __host__ __device__
#else
#define QL_HD
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- constants ------------------------------------------------------ */

#define QL_RPC_MAGIC_REQUEST 0x43555152u  /* 'CUQR': bytes 52 51 55 43 */
#define QL_RPC_MAGIC_RESPONSE 0x43555153u /* 'CUQS': bytes 53 51 55 43 */
#define QL_RPC_HEADER_SIZE 24u		  /* RPCHeader */
#define QL_RPC_RESPONSE_SIZE 24u	  /* RPCResponse */
#define QL_RPC_MAX_ARGS 8
#define QL_RPC_MAX_RESULTS 4

#define QL_RPC_FNV1A_OFFSET 0x811c9dc5u
#define QL_RPC_FNV1A_PRIME 0x01000193u

/*
 * Response status: 0 success, > 0 an error the handler chose, < 0 an error
 * the protocol layer found. Ours are small negative numbers, stable on the
 * wire; peers should treat any other negative value as "protocol error".
 */
enum {
	QL_RPC_STATUS_OK = 0,
	QL_RPC_E_BAD_MAGIC = -1,	/* header magic is not 'CUQR' */
	QL_RPC_E_SHORT = -2,		/* message shorter than the 24-byte header */
	QL_RPC_E_BAD_LENGTH = -3,	/* arg_len runs past the end of the message/slot */
	QL_RPC_E_UNKNOWN_FUNCTION = -4, /* no handler registered for function_id */
	QL_RPC_E_ARGS_MISMATCH = -5,	/* arg_len differs from the schema (or a raw
					   handler read past the arguments) */
	QL_RPC_E_RESULT_OVERFLOW = -6,	/* results do not fit the response slot */
	QL_RPC_E_INTERNAL = -7,		/* handler returned < 0 or broke its schema */
};

/* Why a dispatch did not succeed; one per distinct path, for counters. */
enum ql_rpc_err_kind {
	QL_RPC_ERR_NONE = 0,
	QL_RPC_ERR_SHORT,
	QL_RPC_ERR_BAD_MAGIC,
	QL_RPC_ERR_BAD_LENGTH,
	QL_RPC_ERR_UNKNOWN_FUNCTION,
	QL_RPC_ERR_ARGS_MISMATCH,
	QL_RPC_ERR_HANDLER, /* handler returned a positive status */
	QL_RPC_ERR_RESULT_OVERFLOW,
	QL_RPC_ERR_INTERNAL,
	QL_RPC_ERR_KIND_COUNT,
};

/* "success", "handler error", or the name of a protocol status; never NULL. */
const char *ql_rpc_status_str(int32_t status);
/* "none", "short", "bad_magic", ...; never NULL. */
const char *ql_rpc_err_kind_str(enum ql_rpc_err_kind kind);

/* ---- little-endian access at any alignment ------------------------------ */

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define QL_RPC_HOST_LE 0
#else
#define QL_RPC_HOST_LE 1
#endif

/* memcpy of a constant size compiles to one (unaligned) load or store. */
QL_HD static inline uint8_t ql_rpc_get_u8(const void *p)
{
	return *(const uint8_t *)p;
}

QL_HD static inline uint32_t ql_rpc_get_u32(const void *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return QL_RPC_HOST_LE ? v : __builtin_bswap32(v);
}

QL_HD static inline uint64_t ql_rpc_get_u64(const void *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return QL_RPC_HOST_LE ? v : __builtin_bswap64(v);
}

QL_HD static inline int32_t ql_rpc_get_i32(const void *p)
{
	return (int32_t)ql_rpc_get_u32(p);
}

QL_HD static inline int64_t ql_rpc_get_i64(const void *p)
{
	return (int64_t)ql_rpc_get_u64(p);
}

QL_HD static inline float ql_rpc_get_f32(const void *p)
{
	uint32_t u = ql_rpc_get_u32(p);
	float v;

	memcpy(&v, &u, sizeof(v));
	return v;
}

QL_HD static inline double ql_rpc_get_f64(const void *p)
{
	uint64_t u = ql_rpc_get_u64(p);
	double v;

	memcpy(&v, &u, sizeof(v));
	return v;
}

QL_HD static inline void ql_rpc_put_u8(void *p, uint8_t v)
{
	*(uint8_t *)p = v;
}

QL_HD static inline void ql_rpc_put_u32(void *p, uint32_t v)
{
	v = QL_RPC_HOST_LE ? v : __builtin_bswap32(v);
	memcpy(p, &v, sizeof(v));
}

QL_HD static inline void ql_rpc_put_u64(void *p, uint64_t v)
{
	v = QL_RPC_HOST_LE ? v : __builtin_bswap64(v);
	memcpy(p, &v, sizeof(v));
}

QL_HD static inline void ql_rpc_put_i32(void *p, int32_t v)
{
	ql_rpc_put_u32(p, (uint32_t)v);
}

QL_HD static inline void ql_rpc_put_i64(void *p, int64_t v)
{
	ql_rpc_put_u64(p, (uint64_t)v);
}

QL_HD static inline void ql_rpc_put_f32(void *p, float v)
{
	uint32_t u;

	memcpy(&u, &v, sizeof(u));
	ql_rpc_put_u32(p, u);
}

QL_HD static inline void ql_rpc_put_f64(void *p, double v)
{
	uint64_t u;

	memcpy(&u, &v, sizeof(u));
	ql_rpc_put_u64(p, u);
}

/* ---- headers ------------------------------------------------------------ */

/* Host-order views of the two headers; the wire form is only ever produced
 * and parsed by the encode/decode calls below (bytes 0-3 magic, 4-7
 * function_id or status, 8-11 arg_len or result_len, 12-15 request_id,
 * 16-23 ptp_timestamp, all little-endian). */
struct ql_rpc_header {
	uint32_t magic;
	uint32_t function_id;
	uint32_t arg_len;
	uint32_t request_id;
	uint64_t ptp_timestamp;
};

struct ql_rpc_response {
	uint32_t magic;
	int32_t status;
	uint32_t result_len;
	uint32_t request_id;
	uint64_t ptp_timestamp;
};

/* Write h into buf[0..24). */
QL_HD static inline void ql_rpc_header_encode(void *buf, const struct ql_rpc_header *h)
{
	uint8_t *b = (uint8_t *)buf;

	ql_rpc_put_u32(b + 0, h->magic);
	ql_rpc_put_u32(b + 4, h->function_id);
	ql_rpc_put_u32(b + 8, h->arg_len);
	ql_rpc_put_u32(b + 12, h->request_id);
	ql_rpc_put_u64(b + 16, h->ptp_timestamp);
}

/* Read buf[0..24) into h. No validation: the caller checks magic and lengths. */
QL_HD static inline void ql_rpc_header_decode(const void *buf, struct ql_rpc_header *h)
{
	const uint8_t *b = (const uint8_t *)buf;

	h->magic = ql_rpc_get_u32(b + 0);
	h->function_id = ql_rpc_get_u32(b + 4);
	h->arg_len = ql_rpc_get_u32(b + 8);
	h->request_id = ql_rpc_get_u32(b + 12);
	h->ptp_timestamp = ql_rpc_get_u64(b + 16);
}

QL_HD static inline void ql_rpc_response_encode(void *buf, const struct ql_rpc_response *r)
{
	uint8_t *b = (uint8_t *)buf;

	ql_rpc_put_u32(b + 0, r->magic);
	ql_rpc_put_i32(b + 4, r->status);
	ql_rpc_put_u32(b + 8, r->result_len);
	ql_rpc_put_u32(b + 12, r->request_id);
	ql_rpc_put_u64(b + 16, r->ptp_timestamp);
}

QL_HD static inline void ql_rpc_response_decode(const void *buf, struct ql_rpc_response *r)
{
	const uint8_t *b = (const uint8_t *)buf;

	r->magic = ql_rpc_get_u32(b + 0);
	r->status = ql_rpc_get_i32(b + 4);
	r->result_len = ql_rpc_get_u32(b + 8);
	r->request_id = ql_rpc_get_u32(b + 12);
	r->ptp_timestamp = ql_rpc_get_u64(b + 16);
}

/* ---- function ids --------------------------------------------------------- */

/* 32-bit FNV-1a of len bytes: the function_id of a handler name. Inline so
 * that an id computed from a string literal folds to a constant. */
QL_HD static inline uint32_t ql_rpc_fnv1a_len(const void *data, size_t len)
{
	const uint8_t *p = (const uint8_t *)data;
	uint32_t h = QL_RPC_FNV1A_OFFSET;

	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= QL_RPC_FNV1A_PRIME;
	}
	return h;
}

/* FNV-1a of a NUL-terminated name (the NUL is not hashed). */
QL_HD static inline uint32_t ql_rpc_fnv1a(const char *name)
{
	uint32_t h = QL_RPC_FNV1A_OFFSET;

	for (; *name; name++) {
		h ^= (uint8_t)*name;
		h *= QL_RPC_FNV1A_PRIME;
	}
	return h;
}

/* ---- types and schemas ---------------------------------------------------- */

enum ql_rpc_type_id {
	QL_RPC_TYPE_UINT8 = 0x10,
	QL_RPC_TYPE_INT32 = 0x11,
	QL_RPC_TYPE_INT64 = 0x12,
	QL_RPC_TYPE_FLOAT32 = 0x13,
	QL_RPC_TYPE_FLOAT64 = 0x14,
	QL_RPC_TYPE_ARRAY_UINT8 = 0x20,
	QL_RPC_TYPE_ARRAY_INT32 = 0x21,
	QL_RPC_TYPE_ARRAY_FLOAT32 = 0x22,
	QL_RPC_TYPE_ARRAY_FLOAT64 = 0x23,
	QL_RPC_TYPE_BIT_PACKED = 0x30, /* LSB-first within each byte */
};

/*
 * One argument or result, laid out as CUDA-Q's type descriptor. num_elements
 * is 1 for scalars, the element count for arrays and the bit count for
 * BIT_PACKED; size_bytes is what it occupies in the payload.
 */
struct ql_rpc_type {
	uint8_t type_id; /* enum ql_rpc_type_id */
	uint8_t reserved[3];
	uint32_t size_bytes;
	uint32_t num_elements;
};

struct ql_rpc_schema {
	uint8_t nargs, nresults;
	struct ql_rpc_type args[QL_RPC_MAX_ARGS];
	struct ql_rpc_type results[QL_RPC_MAX_RESULTS];
};

/* Bytes per element of type_id (for BIT_PACKED: 0, it is sized in bits);
 * -EINVAL for an unknown type id. */
int ql_rpc_type_elem_size(uint8_t type_id);

/* Fill t for type_id with n elements (scalars: n must be 1; BIT_PACKED: n
 * bits), computing size_bytes. 0, or -EINVAL for an unknown type, n == 0 or a
 * size over 4 GiB. */
int ql_rpc_type_init(struct ql_rpc_type *t, uint8_t type_id, uint32_t n);

/* 0 if t is well formed: known type, reserved bytes zero, num_elements 1 for
 * scalars and >= 1 otherwise, size_bytes exactly the scalar size, n * element
 * size, or ceil(n / 8). -EINVAL otherwise. */
int ql_rpc_type_check(const struct ql_rpc_type *t);

/* 0 if every used descriptor passes ql_rpc_type_check, nargs <= 8,
 * nresults <= 4, and each side's total fits in 32 bits; -EINVAL otherwise. */
int ql_rpc_schema_check(const struct ql_rpc_schema *s);

/* Sum of size_bytes over the used arguments / results (counts clamped to the
 * array sizes, so these are safe on an unchecked schema). */
size_t ql_rpc_schema_args_size(const struct ql_rpc_schema *s);
size_t ql_rpc_schema_results_size(const struct ql_rpc_schema *s);

/* ---- bit-packed data ------------------------------------------------------- */

QL_HD static inline size_t ql_rpc_bits_size(size_t nbits)
{
	return nbits / 8 + (nbits % 8 != 0);
}

/* Bit i: byte i / 8, bit i % 8 counted from the least significant. */
QL_HD static inline int ql_rpc_bit_get(const uint8_t *bytes, size_t i)
{
	return (bytes[i >> 3] >> (i & 7)) & 1;
}

QL_HD static inline void ql_rpc_bit_set(uint8_t *bytes, size_t i, int v)
{
	uint8_t m = (uint8_t)(1u << (i & 7));

	if (v)
		bytes[i >> 3] |= m;
	else
		bytes[i >> 3] &= (uint8_t)~m;
}

/* Zero the unused high bits of the last byte, as the format requires. */
QL_HD static inline void ql_rpc_bits_clear_tail(uint8_t *bytes, size_t nbits)
{
	if (nbits & 7)
		bytes[nbits >> 3] &= (uint8_t)((1u << (nbits & 7)) - 1);
}

#ifdef __cplusplus
}
#endif
#endif
