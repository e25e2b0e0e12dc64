/*
 * rpc: the message format, schemas, marshalling and the dispatch step.
 *
 * Every ring slot carries one message, `header | payload`, in the format of
 * CUDA-Q Realtime's message protocol (docs/rpc.md has it byte by byte): a
 * 24-byte request header (magic 'CUQR', FNV-1a function id, argument length,
 * request id, PTP timestamp) followed by the arguments, and a 24-byte response
 * header (magic 'CUQS', status, result length, and the echoed request id and
 * timestamp) followed by the results. This module encodes and decodes those
 * headers without relying on host struct layout, reads and writes payloads
 * through bounds-checked zero-copy streams, keeps a function table keyed by
 * function id, turns an ordinary C function into a typed handler at compile
 * time (QL_RPC_FN, the C counterpart of CUDA-Q's NVQLINK_RPC_HANDLE), and
 * provides ql_rpc_dispatch(): one message in, one response out, safe against
 * any input, with no allocation, lock, system call or logging, so that the
 * CPU dispatcher (and later the GPU one) can call it in its polling loop.
 */
#ifndef QLINK_RPC_H
#define QLINK_RPC_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

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
static inline uint8_t ql_rpc_get_u8(const void *p)
{
	return *(const uint8_t *)p;
}

static inline uint32_t ql_rpc_get_u32(const void *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return QL_RPC_HOST_LE ? v : __builtin_bswap32(v);
}

static inline uint64_t ql_rpc_get_u64(const void *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return QL_RPC_HOST_LE ? v : __builtin_bswap64(v);
}

static inline int32_t ql_rpc_get_i32(const void *p)
{
	return (int32_t)ql_rpc_get_u32(p);
}

static inline int64_t ql_rpc_get_i64(const void *p)
{
	return (int64_t)ql_rpc_get_u64(p);
}

static inline float ql_rpc_get_f32(const void *p)
{
	uint32_t u = ql_rpc_get_u32(p);
	float v;

	memcpy(&v, &u, sizeof(v));
	return v;
}

static inline double ql_rpc_get_f64(const void *p)
{
	uint64_t u = ql_rpc_get_u64(p);
	double v;

	memcpy(&v, &u, sizeof(v));
	return v;
}

static inline void ql_rpc_put_u8(void *p, uint8_t v)
{
	*(uint8_t *)p = v;
}

static inline void ql_rpc_put_u32(void *p, uint32_t v)
{
	v = QL_RPC_HOST_LE ? v : __builtin_bswap32(v);
	memcpy(p, &v, sizeof(v));
}

static inline void ql_rpc_put_u64(void *p, uint64_t v)
{
	v = QL_RPC_HOST_LE ? v : __builtin_bswap64(v);
	memcpy(p, &v, sizeof(v));
}

static inline void ql_rpc_put_i32(void *p, int32_t v)
{
	ql_rpc_put_u32(p, (uint32_t)v);
}

static inline void ql_rpc_put_i64(void *p, int64_t v)
{
	ql_rpc_put_u64(p, (uint64_t)v);
}

static inline void ql_rpc_put_f32(void *p, float v)
{
	uint32_t u;

	memcpy(&u, &v, sizeof(u));
	ql_rpc_put_u32(p, u);
}

static inline void ql_rpc_put_f64(void *p, double v)
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
static inline void ql_rpc_header_encode(void *buf, const struct ql_rpc_header *h)
{
	uint8_t *b = (uint8_t *)buf;

	ql_rpc_put_u32(b + 0, h->magic);
	ql_rpc_put_u32(b + 4, h->function_id);
	ql_rpc_put_u32(b + 8, h->arg_len);
	ql_rpc_put_u32(b + 12, h->request_id);
	ql_rpc_put_u64(b + 16, h->ptp_timestamp);
}

/* Read buf[0..24) into h. No validation: the caller checks magic and lengths. */
static inline void ql_rpc_header_decode(const void *buf, struct ql_rpc_header *h)
{
	const uint8_t *b = (const uint8_t *)buf;

	h->magic = ql_rpc_get_u32(b + 0);
	h->function_id = ql_rpc_get_u32(b + 4);
	h->arg_len = ql_rpc_get_u32(b + 8);
	h->request_id = ql_rpc_get_u32(b + 12);
	h->ptp_timestamp = ql_rpc_get_u64(b + 16);
}

static inline void ql_rpc_response_encode(void *buf, const struct ql_rpc_response *r)
{
	uint8_t *b = (uint8_t *)buf;

	ql_rpc_put_u32(b + 0, r->magic);
	ql_rpc_put_i32(b + 4, r->status);
	ql_rpc_put_u32(b + 8, r->result_len);
	ql_rpc_put_u32(b + 12, r->request_id);
	ql_rpc_put_u64(b + 16, r->ptp_timestamp);
}

static inline void ql_rpc_response_decode(const void *buf, struct ql_rpc_response *r)
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
static inline uint32_t ql_rpc_fnv1a_len(const void *data, size_t len)
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
static inline uint32_t ql_rpc_fnv1a(const char *name)
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

static inline size_t ql_rpc_bits_size(size_t nbits)
{
	return nbits / 8 + (nbits % 8 != 0);
}

/* Bit i: byte i / 8, bit i % 8 counted from the least significant. */
static inline int ql_rpc_bit_get(const uint8_t *bytes, size_t i)
{
	return (bytes[i >> 3] >> (i & 7)) & 1;
}

static inline void ql_rpc_bit_set(uint8_t *bytes, size_t i, int v)
{
	uint8_t m = (uint8_t)(1u << (i & 7));

	if (v)
		bytes[i >> 3] |= m;
	else
		bytes[i >> 3] &= (uint8_t)~m;
}

/* Zero the unused high bits of the last byte, as the format requires. */
static inline void ql_rpc_bits_clear_tail(uint8_t *bytes, size_t nbits)
{
	if (nbits & 7)
		bytes[nbits >> 3] &= (uint8_t)((1u << (nbits & 7)) - 1);
}

/* ---- streams ----------------------------------------------------------- */

/*
 * Bounds-checked cursors over a payload. Nothing outside [p, end) is ever
 * touched; a read or write that does not fit sets err (-EBADMSG for input,
 * -ENOSPC for output), which then sticks: every later call fails too, returns
 * 0 or NULL and leaves the cursor where it was, so a handler may do all its
 * reads and check err once.
 */
struct ql_rpc_in {
	const uint8_t *p, *end;
	int err;
};

struct ql_rpc_out {
	uint8_t *p, *start, *end;
	int err;
};

static inline void ql_rpc_in_init(struct ql_rpc_in *in, const void *buf, size_t len)
{
	in->p = (const uint8_t *)buf;
	in->end = in->p + len;
	in->err = 0;
}

static inline size_t ql_rpc_in_left(const struct ql_rpc_in *in)
{
	return (size_t)(in->end - in->p);
}

/* Pointer to the next n bytes, in place in the message (zero-copy), and
 * advance; NULL and a sticky -EBADMSG if fewer than n are left. */
static inline const uint8_t *ql_rpc_in_view(struct ql_rpc_in *in, size_t n)
{
	const uint8_t *p = in->p;

	if (__builtin_expect(in->err || n > (size_t)(in->end - p), 0)) {
		in->err = -EBADMSG;
		return NULL;
	}
	in->p = p + n;
	return p;
}

/* Copy the next n bytes out; on failure dst is left untouched. */
static inline int ql_rpc_read_bytes(struct ql_rpc_in *in, void *dst, size_t n)
{
	const uint8_t *p = ql_rpc_in_view(in, n);

	if (!p)
		return in->err;
	memcpy(dst, p, n);
	return 0;
}

#define QL_RPC__READ(sfx, type)                                      \
	static inline type ql_rpc_read_##sfx(struct ql_rpc_in *in)   \
	{                                                            \
		const uint8_t *p = ql_rpc_in_view(in, sizeof(type)); \
                                                                     \
		return p ? ql_rpc_get_##sfx(p) : (type)0;            \
	}
QL_RPC__READ(u8, uint8_t)
QL_RPC__READ(i32, int32_t)
QL_RPC__READ(u32, uint32_t)
QL_RPC__READ(i64, int64_t)
QL_RPC__READ(u64, uint64_t)
QL_RPC__READ(f32, float)
QL_RPC__READ(f64, double)
#undef QL_RPC__READ

static inline void ql_rpc_out_init(struct ql_rpc_out *out, void *buf, size_t cap)
{
	out->start = out->p = (uint8_t *)buf;
	out->end = out->start + cap;
	out->err = 0;
}

/* Bytes written (reserved) so far. */
static inline size_t ql_rpc_out_len(const struct ql_rpc_out *out)
{
	return (size_t)(out->p - out->start);
}

static inline size_t ql_rpc_out_left(const struct ql_rpc_out *out)
{
	return (size_t)(out->end - out->p);
}

/* Pointer to the next n bytes of the output to fill in place, and advance;
 * NULL and a sticky -ENOSPC if fewer than n are left. The bytes are not
 * cleared. */
static inline uint8_t *ql_rpc_out_reserve(struct ql_rpc_out *out, size_t n)
{
	uint8_t *p = out->p;

	if (__builtin_expect(out->err || n > (size_t)(out->end - p), 0)) {
		out->err = -ENOSPC;
		return NULL;
	}
	out->p = p + n;
	return p;
}

static inline int ql_rpc_write_bytes(struct ql_rpc_out *out, const void *src, size_t n)
{
	uint8_t *p = ql_rpc_out_reserve(out, n);

	if (!p)
		return out->err;
	memcpy(p, src, n);
	return 0;
}

#define QL_RPC__WRITE(sfx, type)                                              \
	static inline void ql_rpc_write_##sfx(struct ql_rpc_out *out, type v) \
	{                                                                     \
		uint8_t *p = ql_rpc_out_reserve(out, sizeof(type));           \
                                                                              \
		if (p)                                                        \
			ql_rpc_put_##sfx(p, v);                               \
	}
QL_RPC__WRITE(u8, uint8_t)
QL_RPC__WRITE(i32, int32_t)
QL_RPC__WRITE(u32, uint32_t)
QL_RPC__WRITE(i64, int64_t)
QL_RPC__WRITE(u64, uint64_t)
QL_RPC__WRITE(f32, float)
QL_RPC__WRITE(f64, double)
#undef QL_RPC__WRITE

/*
 * Arrays of int32/float/double. Message bytes carry no alignment guarantee
 * (an f32 array after a u8 argument starts at an odd offset) and are
 * little-endian, so a `const float *` straight into the message is only
 * valid when it happens to be aligned on a little-endian host. These
 * helpers give the handler a properly typed pointer either way: into the
 * message when it can (zero-copy, the common case, since headers are 24
 * bytes and slots are aligned), else into tmp (n elements, caller-owned,
 * usually on the stack) after decoding. The input variant returns tmp,
 * untouched, when the stream fails; check in->err.
 *
 * For results, _begin gives the handler a zeroed array to fill (in place in
 * the response when aligned, else tmp) and _end encodes tmp into the
 * response if that was used. p is the reserved response region.
 */
#define QL_RPC__ARRAY(sfx, type)                                                            \
	static inline const type *ql_rpc_read_##sfx##_array(struct ql_rpc_in *in, size_t n, \
							    type *tmp)                      \
	{                                                                                   \
		const uint8_t *p;                                                           \
                                                                                            \
		if (n > SIZE_MAX / sizeof(type)) {                                          \
			in->err = -EBADMSG;                                                 \
			return tmp;                                                         \
		}                                                                           \
		p = ql_rpc_in_view(in, n * sizeof(type));                                   \
		if (!p)                                                                     \
			return tmp;                                                         \
		if (QL_RPC_HOST_LE && ((uintptr_t)p & (__alignof__(type) - 1)) == 0)        \
			return (const type *)(const void *)p;                               \
		for (size_t i = 0; i < n; i++)                                              \
			tmp[i] = ql_rpc_get_##sfx(p + i * sizeof(type));                    \
		return tmp;                                                                 \
	}                                                                                   \
	static inline type *ql_rpc__res_##sfx##_begin(uint8_t *p, size_t n, type *tmp)      \
	{                                                                                   \
		if (QL_RPC_HOST_LE && ((uintptr_t)p & (__alignof__(type) - 1)) == 0) {      \
			memset(p, 0, n * sizeof(type));                                     \
			return (type *)(void *)p;                                           \
		}                                                                           \
		memset(tmp, 0, n * sizeof(type));                                           \
		return tmp;                                                                 \
	}                                                                                   \
	static inline void ql_rpc__res_##sfx##_end(uint8_t *p, size_t n, const type *v)     \
	{                                                                                   \
		if ((const void *)v == (const void *)p)                                     \
			return;                                                             \
		for (size_t i = 0; i < n; i++)                                              \
			ql_rpc_put_##sfx(p + i * sizeof(type), v[i]);                       \
	}
QL_RPC__ARRAY(i32, int32_t)
QL_RPC__ARRAY(f32, float)
QL_RPC__ARRAY(f64, double)
#undef QL_RPC__ARRAY

/* ---- client side: building requests, reading responses -------------------- */

/* Start a request in buf: reserve the header; then write the arguments with
 * ql_rpc_write_*() and finish with ql_rpc_request_finish(). */
static inline void ql_rpc_request_begin(struct ql_rpc_out *out, void *buf, size_t cap)
{
	ql_rpc_out_init(out, buf, cap);
	ql_rpc_out_reserve(out, QL_RPC_HEADER_SIZE);
}

/* Fill in the header (arg_len from what was written). Returns the message
 * length, or the stream's negative error if anything did not fit. */
static inline long ql_rpc_request_finish(struct ql_rpc_out *out, uint32_t function_id,
					 uint32_t request_id, uint64_t ptp_timestamp)
{
	struct ql_rpc_header h;
	size_t len = ql_rpc_out_len(out);

	if (out->err)
		return out->err;
	if (len - QL_RPC_HEADER_SIZE > UINT32_MAX)
		return -EMSGSIZE;
	h.magic = QL_RPC_MAGIC_REQUEST;
	h.function_id = function_id;
	h.arg_len = (uint32_t)(len - QL_RPC_HEADER_SIZE);
	h.request_id = request_id;
	h.ptp_timestamp = ptp_timestamp;
	ql_rpc_header_encode(out->start, &h);
	return (long)len;
}

/* Parse a response of len bytes: decode the header into r and point results
 * at its result_len bytes. -EBADMSG if it is shorter than a header, has the
 * wrong magic, or result_len runs past len. */
static inline int ql_rpc_response_parse(const void *msg, size_t len, struct ql_rpc_response *r,
					struct ql_rpc_in *results)
{
	if (len < QL_RPC_RESPONSE_SIZE)
		return -EBADMSG;
	ql_rpc_response_decode(msg, r);
	if (r->magic != QL_RPC_MAGIC_RESPONSE || r->result_len > len - QL_RPC_RESPONSE_SIZE)
		return -EBADMSG;
	if (results)
		ql_rpc_in_init(results, (const uint8_t *)msg + QL_RPC_RESPONSE_SIZE, r->result_len);
	return 0;
}

/* ---- function table -------------------------------------------------------- */

/*
 * A handler reads its arguments from in (exactly arg_len bytes) and writes
 * its results to out; it returns 0, or a positive status of its own choosing
 * (sent back with no results). A negative return is an internal error.
 */
typedef int32_t (*ql_rpc_handler_fn)(struct ql_rpc_in *in, struct ql_rpc_out *out, void *ctx);

struct ql_rpc_function {
	const char *name; /* for people and for duplicate detection */
	uint32_t id;	  /* function_id on the wire, normally ql_rpc_fnv1a(name) */
	ql_rpc_handler_fn fn;
	void *ctx;			    /* passed to fn */
	const struct ql_rpc_schema *schema; /* NULL = raw: any arg_len, any results */
};

/*
 * The table is public so that lookup inlines into the dispatch loop, as
 * liburing exposes struct io_uring; treat every field as read-only.
 */
struct ql_rpc_table_entry {
	struct ql_rpc_function f; /* name and schema point at the table's own copies */
	struct ql_rpc_schema schema;
	uint32_t args_size, results_size; /* of the schema, when f.schema != NULL */
};

struct ql_rpc_table_slot {
	uint32_t id;
	int32_t index; /* into entries, or -1 for an empty slot */
};

struct ql_rpc_table {
	struct ql_rpc_table_slot *slots; /* open addressing, linear probing */
	uint32_t mask;			 /* nslots - 1; nslots >= 2 * capacity */
	uint32_t capacity;
	uint32_t count;
	struct ql_rpc_table_entry *entries; /* by index, 0..count-1 */
};

/* A table for up to capacity functions (1..65536). 0 or -EINVAL/-ENOMEM. */
int ql_rpc_table_create(uint32_t capacity, struct ql_rpc_table **out);
void ql_rpc_table_destroy(struct ql_rpc_table *t);

/*
 * Register f (copied, name and schema included; ctx is not owned). Returns
 * its index, which stays the same for the life of the table and numbers the
 * functions 0, 1, 2, ... in registration order, so per-function counters can
 * live in a plain array. -EINVAL for a NULL name or fn or a schema that fails
 * ql_rpc_schema_check, -EEXIST if the id or the name is already there,
 * -ENOSPC if the table is full, -ENOMEM.
 */
int ql_rpc_table_add(struct ql_rpc_table *t, const struct ql_rpc_function *f);

static inline uint32_t ql_rpc_table_count(const struct ql_rpc_table *t)
{
	return t->count;
}

/* Index of the function with this id, or -1. O(1): the slot array is at most
 * half full, so a probe sequence always ends at an empty slot. */
static inline int ql_rpc_table_find(const struct ql_rpc_table *t, uint32_t id)
{
	uint32_t i = (id ^ (id >> 16)) & t->mask;

	for (;;) {
		const struct ql_rpc_table_slot *s = &t->slots[i];

		if (s->index < 0)
			return -1;
		if (s->id == id)
			return s->index;
		i = (i + 1) & t->mask;
	}
}

/* The function at index, or NULL if out of range. */
static inline const struct ql_rpc_function *ql_rpc_table_get(const struct ql_rpc_table *t,
							     int index)
{
	if (index < 0 || (uint32_t)index >= t->count)
		return NULL;
	return &t->entries[index].f;
}

static inline const struct ql_rpc_function *ql_rpc_table_lookup(const struct ql_rpc_table *t,
								uint32_t id)
{
	return ql_rpc_table_get(t, ql_rpc_table_find(t, id));
}

/* ---- dispatch ------------------------------------------------------------- */

struct ql_rpc_dispatch_info {
	int32_t status;		   /* as written in the response */
	enum ql_rpc_err_kind kind; /* QL_RPC_ERR_NONE on success */
	int32_t index;		   /* function index, -1 if none was found */
	uint32_t function_id;	   /* 0 when the header could not be read */
	uint32_t request_id;	   /* ditto */
	uint32_t arg_len;	   /* ditto */
	uint32_t result_len;	   /* as written in the response */
};

/*
 * Handle one request message msg[0..msg_len) and write the response into
 * resp[0..resp_cap). msg_len is what the message may occupy (the received
 * length, or the slot's capacity). Returns the status written.
 *
 * Guarantees, for any bytes in msg: exactly one response is written (magic
 * 'CUQS', status, result_len, then request_id and ptp_timestamp echoed, or
 * zeros when the message is shorter than a header) and *resp_len set to
 * 24 + result_len; result_len is 0 unless status is 0; nothing outside
 * msg[0..msg_len) is read and nothing outside resp[0..resp_cap) written; a
 * handler sees exactly arg_len bytes of input (for a typed function exactly
 * its schema's argument size) and at most resp_cap - 24 bytes of output.
 * No allocation, lock, system call or logging. msg and resp must not
 * overlap. resp_cap must be at least 24; if it is not (or resp is NULL)
 * nothing is written, *resp_len is 0 and QL_RPC_E_INTERNAL is returned.
 * info (may be NULL) says what happened, for counters.
 */
int32_t ql_rpc_dispatch(const struct ql_rpc_table *t, const uint8_t *msg, size_t msg_len,
			uint8_t *resp, size_t resp_cap, size_t *resp_len,
			struct ql_rpc_dispatch_info *info);

/* ---- typed handlers -------------------------------------------------------- */

/*
 * QL_RPC_FN(fn, items...) turns an ordinary C function into a handler: it
 * defines, at file scope, a static schema and a static wrapper that reads
 * the arguments, calls fn and writes the results. The items list fn's
 * parameters in order, each an argument (QL_ARG_*) or a result (QL_RES_*);
 * 0-8 arguments and 0-4 results, at least one item. fn returns int32_t: 0,
 * or a positive handler status (then no results are sent).
 *
 *   item                   parameter          wire type
 *   QL_ARG_U8              uint8_t            TYPE_UINT8
 *   QL_ARG_I32             int32_t            TYPE_INT32
 *   QL_ARG_U32             uint32_t           TYPE_INT32 (same 4 bytes; see docs)
 *   QL_ARG_I64             int64_t            TYPE_INT64
 *   QL_ARG_F32             float              TYPE_FLOAT32
 *   QL_ARG_F64             double             TYPE_FLOAT64
 *   QL_ARG_U8_ARRAY(n)     const uint8_t *    TYPE_ARRAY_UINT8, n elements
 *   QL_ARG_I32_ARRAY(n)    const int32_t *    TYPE_ARRAY_INT32
 *   QL_ARG_F32_ARRAY(n)    const float *      TYPE_ARRAY_FLOAT32
 *   QL_ARG_F64_ARRAY(n)    const double *     TYPE_ARRAY_FLOAT64
 *   QL_ARG_BITS(n)         const uint8_t *    TYPE_BIT_PACKED, n bits
 *   QL_RES_<same>          T * (pointer to fill; arrays and bits arrive zeroed)
 *
 * Byte arrays and bits point into the message (zero-copy). Arrays of
 * int32/float/double point into the message when aligned, else at a decoded
 * copy on the wrapper's stack (see ql_rpc_read_f32_array), so each such
 * array is limited to QL_RPC_STACK_ARRAY_MAX bytes. Result bits beyond n are
 * cleared after fn returns.
 *
 * The function's type is checked at compile time against the items
 * (_Generic): a wrong parameter type or count is a compile error.
 *
 *   static int32_t parity(const uint8_t *bits, uint8_t *out) { ... }
 *   QL_RPC_FN(parity, QL_ARG_BITS(128), QL_RES_U8);
 *   ...
 *   ql_rpc_table_add(t, &QL_RPC_FUNCTION(parity));
 *
 * QL_RPC_FN_CTX is the same for a function taking `void *ctx` first.
 */
#ifndef QL_RPC_STACK_ARRAY_MAX
#define QL_RPC_STACK_ARRAY_MAX 16384
#endif

#define QL_ARG_U8 (ql__arg, ql__u8, 1)
#define QL_ARG_I32 (ql__arg, ql__i32, 1)
#define QL_ARG_U32 (ql__arg, ql__u32, 1)
#define QL_ARG_I64 (ql__arg, ql__i64, 1)
#define QL_ARG_F32 (ql__arg, ql__f32, 1)
#define QL_ARG_F64 (ql__arg, ql__f64, 1)
#define QL_ARG_U8_ARRAY(n) (ql__arg, ql__au8, n)
#define QL_ARG_I32_ARRAY(n) (ql__arg, ql__ai32, n)
#define QL_ARG_F32_ARRAY(n) (ql__arg, ql__af32, n)
#define QL_ARG_F64_ARRAY(n) (ql__arg, ql__af64, n)
#define QL_ARG_BITS(n) (ql__arg, ql__bits, n)

#define QL_RES_U8 (ql__res, ql__u8, 1)
#define QL_RES_I32 (ql__res, ql__i32, 1)
#define QL_RES_U32 (ql__res, ql__u32, 1)
#define QL_RES_I64 (ql__res, ql__i64, 1)
#define QL_RES_F32 (ql__res, ql__f32, 1)
#define QL_RES_F64 (ql__res, ql__f64, 1)
#define QL_RES_U8_ARRAY(n) (ql__res, ql__au8, n)
#define QL_RES_I32_ARRAY(n) (ql__res, ql__ai32, n)
#define QL_RES_F32_ARRAY(n) (ql__res, ql__af32, n)
#define QL_RES_F64_ARRAY(n) (ql__res, ql__af64, n)
#define QL_RES_BITS(n) (ql__res, ql__bits, n)

#define QL_RPC_FN(fn, ...) QL__RPC_DEFINE(fn, 0, __VA_ARGS__)
#define QL_RPC_FN_CTX(fn, ...) QL__RPC_DEFINE(fn, 1, __VA_ARGS__)

/* The generated schema (const struct ql_rpc_schema *) and wrapper. */
#define QL_RPC_SCHEMA(fn) (&ql_rpc__schema_##fn)
#define QL_RPC_HANDLER(fn) (ql_rpc__wrap_##fn)

/* A struct ql_rpc_function for a QL_RPC_FN handler (an lvalue compound
 * literal: take its address for ql_rpc_table_add), named after the C
 * function, with ctx; _AS gives the wire name explicitly. */
#define QL_RPC_FUNCTION(f_) QL_RPC_FUNCTION_AS(f_, #f_, NULL)
#define QL_RPC_FUNCTION_CTX(f_, ctx_) QL_RPC_FUNCTION_AS(f_, #f_, ctx_)
#define QL_RPC_FUNCTION_AS(f_, wire_name, ctx_)                   \
	((struct ql_rpc_function){ .name = (wire_name),           \
				   .id = ql_rpc_fnv1a(wire_name), \
				   .fn = ql_rpc__wrap_##f_,       \
				   .ctx = (ctx_),                 \
				   .schema = &ql_rpc__schema_##f_ })

/* A raw handler (streams, no schema). */
#define QL_RPC_RAW_FUNCTION(wire_name, fn_, ctx_) \
	((struct ql_rpc_function){                \
		.name = (wire_name), .id = ql_rpc_fnv1a(wire_name), .fn = (fn_), .ctx = (ctx_) })

/* -- machinery below: items are (direction, kind, n) tuples ----------------- */

#define QL__CAT(a, b) QL__CAT_(a, b)
#define QL__CAT_(a, b) a##b
#define QL__T0(d, k, n) d
#define QL__T1(d, k, n) k
#define QL__T2(d, k, n) n

/* Apply phase ph to item t (number i), choosing by direction and shape... */
#define QL__PH(ph, i, t) QL__PH_(ph, QL__T0 t, QL__SHAPE(QL__T1 t), i, QL__T1 t, QL__T2 t)
#define QL__PH_(ph, d, s, i, k, n) QL__PH__(ph, d, s)(i, k, n)
#define QL__PH__(ph, d, s) ph##d##_##s
/* ...or by direction only. */
#define QL__PD(ph, i, t) QL__PD_(ph, QL__T0 t, i, QL__T1 t, QL__T2 t)
#define QL__PD_(ph, d, i, k, n) QL__CAT(ph, d)(i, k, n)

#define QL__NARG(...) QL__NARG_(__VA_ARGS__, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define QL__NARG_(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, N, ...) N

/* f(ph, i, item) for each item: juxtaposed (MAP) or comma-separated (MAPC). */
#define QL__MAP(f, ph, ...) QL__CAT(QL__MAP_, QL__NARG(__VA_ARGS__))(f, ph, __VA_ARGS__)
#define QL__MAP_1(f, ph, a) f(ph, 0, a)
#define QL__MAP_2(f, ph, a, b) QL__MAP_1(f, ph, a) f(ph, 1, b)
#define QL__MAP_3(f, ph, a, b, c) QL__MAP_2(f, ph, a, b) f(ph, 2, c)
#define QL__MAP_4(f, ph, a, b, c, d) QL__MAP_3(f, ph, a, b, c) f(ph, 3, d)
#define QL__MAP_5(f, ph, a, b, c, d, e) QL__MAP_4(f, ph, a, b, c, d) f(ph, 4, e)
#define QL__MAP_6(f, ph, a, b, c, d, e, g) QL__MAP_5(f, ph, a, b, c, d, e) f(ph, 5, g)
#define QL__MAP_7(f, ph, a, b, c, d, e, g, h) QL__MAP_6(f, ph, a, b, c, d, e, g) f(ph, 6, h)
#define QL__MAP_8(f, ph, a, b, c, d, e, g, h, j) QL__MAP_7(f, ph, a, b, c, d, e, g, h) f(ph, 7, j)
#define QL__MAP_9(f, ph, a, b, c, d, e, g, h, j, k) \
	QL__MAP_8(f, ph, a, b, c, d, e, g, h, j) f(ph, 8, k)
#define QL__MAP_10(f, ph, a, b, c, d, e, g, h, j, k, l) \
	QL__MAP_9(f, ph, a, b, c, d, e, g, h, j, k) f(ph, 9, l)
#define QL__MAP_11(f, ph, a, b, c, d, e, g, h, j, k, l, m) \
	QL__MAP_10(f, ph, a, b, c, d, e, g, h, j, k, l) f(ph, 10, m)
#define QL__MAP_12(f, ph, a, b, c, d, e, g, h, j, k, l, m, o) \
	QL__MAP_11(f, ph, a, b, c, d, e, g, h, j, k, l, m) f(ph, 11, o)

#define QL__MAPC(f, ph, ...) QL__CAT(QL__MAPC_, QL__NARG(__VA_ARGS__))(f, ph, __VA_ARGS__)
#define QL__MAPC_1(f, ph, a) f(ph, 0, a)
#define QL__MAPC_2(f, ph, a, b) QL__MAPC_1(f, ph, a), f(ph, 1, b)
#define QL__MAPC_3(f, ph, a, b, c) QL__MAPC_2(f, ph, a, b), f(ph, 2, c)
#define QL__MAPC_4(f, ph, a, b, c, d) QL__MAPC_3(f, ph, a, b, c), f(ph, 3, d)
#define QL__MAPC_5(f, ph, a, b, c, d, e) QL__MAPC_4(f, ph, a, b, c, d), f(ph, 4, e)
#define QL__MAPC_6(f, ph, a, b, c, d, e, g) QL__MAPC_5(f, ph, a, b, c, d, e), f(ph, 5, g)
#define QL__MAPC_7(f, ph, a, b, c, d, e, g, h) QL__MAPC_6(f, ph, a, b, c, d, e, g), f(ph, 6, h)
#define QL__MAPC_8(f, ph, a, b, c, d, e, g, h, j) \
	QL__MAPC_7(f, ph, a, b, c, d, e, g, h), f(ph, 7, j)
#define QL__MAPC_9(f, ph, a, b, c, d, e, g, h, j, k) \
	QL__MAPC_8(f, ph, a, b, c, d, e, g, h, j), f(ph, 8, k)
#define QL__MAPC_10(f, ph, a, b, c, d, e, g, h, j, k, l) \
	QL__MAPC_9(f, ph, a, b, c, d, e, g, h, j, k), f(ph, 9, l)
#define QL__MAPC_11(f, ph, a, b, c, d, e, g, h, j, k, l, m) \
	QL__MAPC_10(f, ph, a, b, c, d, e, g, h, j, k, l), f(ph, 10, m)
#define QL__MAPC_12(f, ph, a, b, c, d, e, g, h, j, k, l, m, o) \
	QL__MAPC_11(f, ph, a, b, c, d, e, g, h, j, k, l, m), f(ph, 11, o)

/* Kind traits: wire type id, C element type, stream suffix, shape, size. */
#define QL__TID(k) QL__CAT(QL__TID_, k)
#define QL__TID_ql__u8 QL_RPC_TYPE_UINT8
#define QL__TID_ql__i32 QL_RPC_TYPE_INT32
#define QL__TID_ql__u32 QL_RPC_TYPE_INT32
#define QL__TID_ql__i64 QL_RPC_TYPE_INT64
#define QL__TID_ql__f32 QL_RPC_TYPE_FLOAT32
#define QL__TID_ql__f64 QL_RPC_TYPE_FLOAT64
#define QL__TID_ql__au8 QL_RPC_TYPE_ARRAY_UINT8
#define QL__TID_ql__ai32 QL_RPC_TYPE_ARRAY_INT32
#define QL__TID_ql__af32 QL_RPC_TYPE_ARRAY_FLOAT32
#define QL__TID_ql__af64 QL_RPC_TYPE_ARRAY_FLOAT64
#define QL__TID_ql__bits QL_RPC_TYPE_BIT_PACKED

#define QL__CT(k) QL__CAT(QL__CT_, k)
#define QL__CT_ql__u8 uint8_t
#define QL__CT_ql__i32 int32_t
#define QL__CT_ql__u32 uint32_t
#define QL__CT_ql__i64 int64_t
#define QL__CT_ql__f32 float
#define QL__CT_ql__f64 double
#define QL__CT_ql__au8 uint8_t
#define QL__CT_ql__ai32 int32_t
#define QL__CT_ql__af32 float
#define QL__CT_ql__af64 double
#define QL__CT_ql__bits uint8_t

/* Stream functions per kind, spelled out whole so that no user macro named
 * u8, i32, ... can interfere with token pasting. */
#define QL__RDFN(k) QL__CAT(QL__RDFN_, k)
#define QL__RDFN_ql__u8 ql_rpc_read_u8
#define QL__RDFN_ql__i32 ql_rpc_read_i32
#define QL__RDFN_ql__u32 ql_rpc_read_u32
#define QL__RDFN_ql__i64 ql_rpc_read_i64
#define QL__RDFN_ql__f32 ql_rpc_read_f32
#define QL__RDFN_ql__f64 ql_rpc_read_f64
#define QL__RDFN_ql__ai32 ql_rpc_read_i32_array
#define QL__RDFN_ql__af32 ql_rpc_read_f32_array
#define QL__RDFN_ql__af64 ql_rpc_read_f64_array

#define QL__PUTFN(k) QL__CAT(QL__PUTFN_, k)
#define QL__PUTFN_ql__u8 ql_rpc_put_u8
#define QL__PUTFN_ql__i32 ql_rpc_put_i32
#define QL__PUTFN_ql__u32 ql_rpc_put_u32
#define QL__PUTFN_ql__i64 ql_rpc_put_i64
#define QL__PUTFN_ql__f32 ql_rpc_put_f32
#define QL__PUTFN_ql__f64 ql_rpc_put_f64

#define QL__BEGFN(k) QL__CAT(QL__BEGFN_, k)
#define QL__BEGFN_ql__ai32 ql_rpc__res_i32_begin
#define QL__BEGFN_ql__af32 ql_rpc__res_f32_begin
#define QL__BEGFN_ql__af64 ql_rpc__res_f64_begin
#define QL__ENDFN(k) QL__CAT(QL__ENDFN_, k)
#define QL__ENDFN_ql__ai32 ql_rpc__res_i32_end
#define QL__ENDFN_ql__af32 ql_rpc__res_f32_end
#define QL__ENDFN_ql__af64 ql_rpc__res_f64_end

/* scalar; bytes (u8 arrays); bits; wide (arrays needing alignment) */
#define QL__SHAPE(k) QL__CAT(QL__SHAPE_, k)
#define QL__SHAPE_ql__u8 ql__scalar
#define QL__SHAPE_ql__i32 ql__scalar
#define QL__SHAPE_ql__u32 ql__scalar
#define QL__SHAPE_ql__i64 ql__scalar
#define QL__SHAPE_ql__f32 ql__scalar
#define QL__SHAPE_ql__f64 ql__scalar
#define QL__SHAPE_ql__au8 ql__bytes
#define QL__SHAPE_ql__ai32 ql__wide
#define QL__SHAPE_ql__af32 ql__wide
#define QL__SHAPE_ql__af64 ql__wide
#define QL__SHAPE_ql__bits ql__bits

/* Payload bytes of one item; n is 1 for scalars. */
#define QL__SZ(k, n) QL__CAT(QL__SZ_, k)(n)
#define QL__SZ_ql__u8(n) 1u
#define QL__SZ_ql__i32(n) 4u
#define QL__SZ_ql__u32(n) 4u
#define QL__SZ_ql__i64(n) 8u
#define QL__SZ_ql__f32(n) 4u
#define QL__SZ_ql__f64(n) 8u
#define QL__SZ_ql__au8(n) ((uint32_t)(n))
#define QL__SZ_ql__ai32(n) ((uint32_t)(n)*4u)
#define QL__SZ_ql__af32(n) ((uint32_t)(n)*4u)
#define QL__SZ_ql__af64(n) ((uint32_t)(n)*8u)
#define QL__SZ_ql__bits(n) (((uint32_t)(n) + 7u) / 8u)

#define QL__DESC(k, n) { QL__TID(k), { 0, 0, 0 }, QL__SZ(k, n), (uint32_t)(n) },

/* schema phases, by direction */
#define QL__NA_ql__arg(i, k, n) +1
#define QL__NA_ql__res(i, k, n)
#define QL__NR_ql__arg(i, k, n)
#define QL__NR_ql__res(i, k, n) +1
#define QL__AD_ql__arg(i, k, n) QL__DESC(k, n)
#define QL__AD_ql__res(i, k, n)
#define QL__RD_ql__arg(i, k, n)
#define QL__RD_ql__res(i, k, n) QL__DESC(k, n)

#define QL__POSITIVE(n) _Static_assert((n) > 0, "QL_RPC_FN: array length must be positive");
#define QL__STACK_OK(k, n)                                     \
	_Static_assert(QL__SZ(k, n) <= QL_RPC_STACK_ARRAY_MAX, \
		       "QL_RPC_FN: array larger than QL_RPC_STACK_ARRAY_MAX");

/* DECL: before the call, in item order (reads arguments, reserves results) */
#define QL__DECL_ql__arg_ql__scalar(i, k, n) QL__CT(k) ql__a##i = QL__RDFN(k)(ql__in);
#define QL__DECL_ql__arg_ql__bytes(i, k, n) \
	QL__POSITIVE(n) const uint8_t *ql__a##i = ql_rpc_in_view(ql__in, QL__SZ(k, n));
#define QL__DECL_ql__arg_ql__bits QL__DECL_ql__arg_ql__bytes
#define QL__DECL_ql__arg_ql__wide(i, k, n)                        \
	QL__POSITIVE(n) QL__STACK_OK(k, n) QL__CT(k) ql__b##i[n]; \
	const QL__CT(k) *ql__a##i = QL__RDFN(k)(ql__in, n, ql__b##i);
#define QL__DECL_ql__res_ql__scalar(i, k, n)                           \
	uint8_t *ql__p##i = ql_rpc_out_reserve(ql__out, QL__SZ(k, n)); \
	QL__CT(k) ql__r##i = 0;
#define QL__DECL_ql__res_ql__bytes(i, k, n)                                            \
	QL__POSITIVE(n) uint8_t *ql__r##i = ql_rpc_out_reserve(ql__out, QL__SZ(k, n)); \
	if (ql__r##i)                                                                  \
		memset(ql__r##i, 0, QL__SZ(k, n));
#define QL__DECL_ql__res_ql__bits QL__DECL_ql__res_ql__bytes
#define QL__DECL_ql__res_ql__wide(i, k, n)                             \
	QL__POSITIVE(n) QL__STACK_OK(k, n) QL__CT(k) ql__b##i[n];      \
	uint8_t *ql__p##i = ql_rpc_out_reserve(ql__out, QL__SZ(k, n)); \
	QL__CT(k) *ql__r##i = ql__p##i ? QL__BEGFN(k)(ql__p##i, n, ql__b##i) : ql__b##i;

/* CALL: the expression passed for the item */
#define QL__CALL_ql__arg_ql__scalar(i, k, n) ql__a##i
#define QL__CALL_ql__arg_ql__bytes(i, k, n) ql__a##i
#define QL__CALL_ql__arg_ql__bits(i, k, n) ql__a##i
#define QL__CALL_ql__arg_ql__wide(i, k, n) ql__a##i
#define QL__CALL_ql__res_ql__scalar(i, k, n) &ql__r##i
#define QL__CALL_ql__res_ql__bytes(i, k, n) ql__r##i
#define QL__CALL_ql__res_ql__bits(i, k, n) ql__r##i
#define QL__CALL_ql__res_ql__wide(i, k, n) ql__r##i

/* POST: after a successful call (all reservations are known to have succeeded) */
#define QL__POST_ql__arg_ql__scalar(i, k, n)
#define QL__POST_ql__arg_ql__bytes(i, k, n)
#define QL__POST_ql__arg_ql__bits(i, k, n)
#define QL__POST_ql__arg_ql__wide(i, k, n)
#define QL__POST_ql__res_ql__scalar(i, k, n) QL__PUTFN(k)(ql__p##i, ql__r##i);
#define QL__POST_ql__res_ql__bytes(i, k, n)
#define QL__POST_ql__res_ql__bits(i, k, n) ql_rpc_bits_clear_tail(ql__r##i, n);
#define QL__POST_ql__res_ql__wide(i, k, n) QL__ENDFN(k)(ql__p##i, n, ql__r##i);

/* PTYPE: the parameter type fn must have for the item */
#define QL__PTYPE_ql__arg_ql__scalar(i, k, n) QL__CT(k)
#define QL__PTYPE_ql__arg_ql__bytes(i, k, n) const uint8_t *
#define QL__PTYPE_ql__arg_ql__bits(i, k, n) const uint8_t *
#define QL__PTYPE_ql__arg_ql__wide(i, k, n) const QL__CT(k) *
#define QL__PTYPE_ql__res_ql__scalar(i, k, n) QL__CT(k) *
#define QL__PTYPE_ql__res_ql__bytes(i, k, n) uint8_t *
#define QL__PTYPE_ql__res_ql__bits(i, k, n) uint8_t *
#define QL__PTYPE_ql__res_ql__wide(i, k, n) QL__CT(k) *

#define QL__CTXT_0
#define QL__CTXT_1 void *,
#define QL__CTXA_0
#define QL__CTXA_1 ql__ctx,

#define QL__RPC_DEFINE(fn, c, ...)                                                               \
	static const struct ql_rpc_schema ql_rpc__schema_##fn __attribute__((unused)) = {        \
		.nargs = 0 QL__MAP(QL__PD, QL__NA_, __VA_ARGS__),                                \
		.nresults = 0 QL__MAP(QL__PD, QL__NR_, __VA_ARGS__),                             \
		.args = { QL__MAP(QL__PD, QL__AD_, __VA_ARGS__) },                               \
		.results = { QL__MAP(QL__PD, QL__RD_, __VA_ARGS__) },                            \
	};                                                                                       \
	_Static_assert((0 QL__MAP(QL__PD, QL__NA_, __VA_ARGS__)) <= QL_RPC_MAX_ARGS,             \
		       "QL_RPC_FN(" #fn "): more than 8 arguments");                             \
	_Static_assert((0 QL__MAP(QL__PD, QL__NR_, __VA_ARGS__)) <= QL_RPC_MAX_RESULTS,          \
		       "QL_RPC_FN(" #fn "): more than 4 results");                               \
	_Static_assert(                                                                          \
		_Generic(&fn,                                                                    \
			 int32_t(*)(QL__CTXT_##c QL__MAPC(QL__PH, QL__PTYPE_, __VA_ARGS__)) : 1, \
			 default : 0),                                                           \
		"QL_RPC_FN(" #fn "): parameter types do not match the items");                   \
	__attribute__((unused)) static int32_t ql_rpc__wrap_##fn(                                \
		struct ql_rpc_in *ql__in, struct ql_rpc_out *ql__out, void *ql__ctx)             \
	{                                                                                        \
		int32_t ql__ret;                                                                 \
		(void)ql__in;                                                                    \
		(void)ql__ctx;                                                                   \
		QL__MAP(QL__PH, QL__DECL_, __VA_ARGS__)                                          \
		if (ql__in->err || ql__out->err)                                                 \
			return -EBADMSG;                                                         \
		ql__ret = fn(QL__CTXA_##c QL__MAPC(QL__PH, QL__CALL_, __VA_ARGS__));             \
		if (ql__ret)                                                                     \
			return ql__ret;                                                          \
		QL__MAP(QL__PH, QL__POST_, __VA_ARGS__)                                          \
		return 0;                                                                        \
	}                                                                                        \
	_Static_assert(1, "")

#ifdef __cplusplus
}
#endif
#endif
