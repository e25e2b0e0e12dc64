/* SPDX-License-Identifier: MIT */
/*
 * rpc_fn: typed handlers. QL_RPC_FN turns an ordinary C function into a
 * handler at compile time (the C counterpart of CUDA-Q's
 * NVQLINK_RPC_HANDLE): a static schema plus a wrapper that unmarshals the
 * arguments from the streams, calls the function and marshals the results.
 */
#ifndef QLINK_RPC_FN_H
#define QLINK_RPC_FN_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "qlink/rpc_stream.h"
#include "qlink/rpc_table.h"
#include "qlink/rpc_wire.h"

#ifdef __cplusplus
extern "C" {
#endif

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

/* A frame handler (ql_rpc_frame_fn: the whole request frame in, the whole
 * response frame out; no schema). */
#define QL_RPC_FRAME_FUNCTION(wire_name, frame_, ctx_)            \
	((struct ql_rpc_function){ .name = (wire_name),           \
				   .id = ql_rpc_fnv1a(wire_name), \
				   .frame = (frame_),             \
				   .ctx = (ctx_) })

/*
 * For a frame handler: write the response header into resp for the request
 * frame req (magic, status, result_len, request_id and ptp_timestamp
 * copied), the results being already at resp + 24.
 */
static inline void ql_rpc_frame_respond(const uint8_t *req, uint8_t *resp, int32_t status,
					uint32_t result_len)
{
	struct ql_rpc_header h;
	struct ql_rpc_response r;

	ql_rpc_header_decode(req, &h);
	r.magic = QL_RPC_MAGIC_RESPONSE;
	r.status = status;
	r.result_len = result_len;
	r.request_id = h.request_id;
	r.ptp_timestamp = h.ptp_timestamp;
	ql_rpc_response_encode(resp, &r);
}

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
