/* SPDX-License-Identifier: MIT */
/*
 * rpc_stream: bounds-checked zero-copy input and output streams over a
 * message payload (read and write the wire types in place, arrays and bit
 * fields included), and the client side built on them: start a request,
 * finish its header, parse a response. All static inline: a handler plugin
 * or a QCS emulator needs no library symbol for them. Host and device
 * code (QL_HD): the GPU dispatcher's body and its handlers use these very
 * streams (gpu_rpc.h names them ql_gpu_*), so the CPU and the GPU read and
 * write arguments and results with one implementation.
 */
#ifndef QLINK_RPC_STREAM_H
#define QLINK_RPC_STREAM_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "qlink/rpc_wire.h"

#ifdef __cplusplus
extern "C" {
#endif

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

QL_HD static inline void ql_rpc_in_init(struct ql_rpc_in *in, const void *buf, size_t len)
{
	in->p = (const uint8_t *)buf;
	in->end = in->p + len;
	in->err = 0;
}

QL_HD static inline size_t ql_rpc_in_left(const struct ql_rpc_in *in)
{
	return (size_t)(in->end - in->p);
}

/* Pointer to the next n bytes, in place in the message (zero-copy), and
 * advance; NULL and a sticky -EBADMSG if fewer than n are left. */
QL_HD static inline const uint8_t *ql_rpc_in_view(struct ql_rpc_in *in, size_t n)
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
QL_HD static inline int ql_rpc_read_bytes(struct ql_rpc_in *in, void *dst, size_t n)
{
	const uint8_t *p = ql_rpc_in_view(in, n);

	if (!p)
		return in->err;
	memcpy(dst, p, n);
	return 0;
}

#define QL_RPC__READ(sfx, type)                                          \
	QL_HD static inline type ql_rpc_read_##sfx(struct ql_rpc_in *in) \
	{                                                                \
		const uint8_t *p = ql_rpc_in_view(in, sizeof(type));     \
                                                                         \
		return p ? ql_rpc_get_##sfx(p) : (type)0;                \
	}
QL_RPC__READ(u8, uint8_t)
QL_RPC__READ(i32, int32_t)
QL_RPC__READ(u32, uint32_t)
QL_RPC__READ(i64, int64_t)
QL_RPC__READ(u64, uint64_t)
QL_RPC__READ(f32, float)
QL_RPC__READ(f64, double)
#undef QL_RPC__READ

QL_HD static inline void ql_rpc_out_init(struct ql_rpc_out *out, void *buf, size_t cap)
{
	out->start = out->p = (uint8_t *)buf;
	out->end = out->start + cap;
	out->err = 0;
}

/* Bytes written (reserved) so far. */
QL_HD static inline size_t ql_rpc_out_len(const struct ql_rpc_out *out)
{
	return (size_t)(out->p - out->start);
}

QL_HD static inline size_t ql_rpc_out_left(const struct ql_rpc_out *out)
{
	return (size_t)(out->end - out->p);
}

/* Pointer to the next n bytes of the output to fill in place, and advance;
 * NULL and a sticky -ENOSPC if fewer than n are left. The bytes are not
 * cleared. */
QL_HD static inline uint8_t *ql_rpc_out_reserve(struct ql_rpc_out *out, size_t n)
{
	uint8_t *p = out->p;

	if (__builtin_expect(out->err || n > (size_t)(out->end - p), 0)) {
		out->err = -ENOSPC;
		return NULL;
	}
	out->p = p + n;
	return p;
}

QL_HD static inline int ql_rpc_write_bytes(struct ql_rpc_out *out, const void *src, size_t n)
{
	uint8_t *p = ql_rpc_out_reserve(out, n);

	if (!p)
		return out->err;
	memcpy(p, src, n);
	return 0;
}

#define QL_RPC__WRITE(sfx, type)                                                    \
	QL_HD static inline void ql_rpc_write_##sfx(struct ql_rpc_out *out, type v) \
	{                                                                           \
		uint8_t *p = ql_rpc_out_reserve(out, sizeof(type));                 \
                                                                                    \
		if (p)                                                              \
			ql_rpc_put_##sfx(p, v);                                     \
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
 *
 * "Aligned" is the type's alignment (__alignof__), the condition a `type *`
 * needs, on the host and on the device alike (CUDA gives these types their
 * host alignment). The GPU's former copy of these streams tested sizeof:
 * the same number for int32/float/double on every target, but a second
 * rule that could drift; there is one now.
 */
#define QL_RPC__ARRAY(sfx, type)                                                                  \
	QL_HD static inline const type *ql_rpc_read_##sfx##_array(struct ql_rpc_in *in, size_t n, \
								  type *tmp)                      \
	{                                                                                         \
		const uint8_t *p;                                                                 \
                                                                                                  \
		if (n > SIZE_MAX / sizeof(type)) {                                                \
			in->err = -EBADMSG;                                                       \
			return tmp;                                                               \
		}                                                                                 \
		p = ql_rpc_in_view(in, n * sizeof(type));                                         \
		if (!p)                                                                           \
			return tmp;                                                               \
		if (QL_RPC_HOST_LE && ((uintptr_t)p & (__alignof__(type) - 1)) == 0)              \
			return (const type *)(const void *)p;                                     \
		for (size_t i = 0; i < n; i++)                                                    \
			tmp[i] = ql_rpc_get_##sfx(p + i * sizeof(type));                          \
		return tmp;                                                                       \
	}                                                                                         \
	QL_HD static inline type *ql_rpc__res_##sfx##_begin(uint8_t *p, size_t n, type *tmp)      \
	{                                                                                         \
		if (QL_RPC_HOST_LE && ((uintptr_t)p & (__alignof__(type) - 1)) == 0) {            \
			memset(p, 0, n * sizeof(type));                                           \
			return (type *)(void *)p;                                                 \
		}                                                                                 \
		memset(tmp, 0, n * sizeof(type));                                                 \
		return tmp;                                                                       \
	}                                                                                         \
	QL_HD static inline void ql_rpc__res_##sfx##_end(uint8_t *p, size_t n, const type *v)     \
	{                                                                                         \
		if ((const void *)v == (const void *)p)                                           \
			return;                                                                   \
		for (size_t i = 0; i < n; i++)                                                    \
			ql_rpc_put_##sfx(p + i * sizeof(type), v[i]);                             \
	}
QL_RPC__ARRAY(i32, int32_t)
QL_RPC__ARRAY(f32, float)
QL_RPC__ARRAY(f64, double)
#undef QL_RPC__ARRAY

/* ---- client side: building requests, reading responses -------------------- */

/* Start a request in buf: reserve the header; then write the arguments with
 * ql_rpc_write_*() and finish with ql_rpc_request_finish(). */
QL_HD static inline void ql_rpc_request_begin(struct ql_rpc_out *out, void *buf, size_t cap)
{
	ql_rpc_out_init(out, buf, cap);
	ql_rpc_out_reserve(out, QL_RPC_HEADER_SIZE);
}

/* Fill in the header (arg_len from what was written). Returns the message
 * length, or the stream's negative error if anything did not fit. */
QL_HD static inline long ql_rpc_request_finish(struct ql_rpc_out *out, uint32_t function_id,
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
QL_HD static inline int ql_rpc_response_parse(const void *msg, size_t len,
					      struct ql_rpc_response *r, struct ql_rpc_in *results)
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

#ifdef __cplusplus
}
#endif
#endif
