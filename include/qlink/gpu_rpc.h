/* SPDX-License-Identifier: MIT */
/*
 * gpu_rpc: handlers for the GPU dispatcher (gpu.h), written once as
 * host+device code. The persistent dispatch kernel runs them on the GPU;
 * the host emulation of that kernel (a thread standing in for the GPU) runs
 * the very same functions on the CPU. Same wire and statuses as the CPU
 * daemon (rpc_wire.h): a request is RPCHeader | arguments, a response
 * RPCResponse | results.
 *
 * Here: the device streams over the arguments and results, which are
 * rpc_stream.h's own (host and device code, QL_HD from rpc_wire.h:
 * `__host__ __device__` under nvcc, nothing for a C compiler) under ql_gpu_
 * names, the handler type, and QL_GPU_FN, the
 * counterpart of QL_RPC_FN (rpc_fn.h): it turns an ordinary QL_HD C
 * function into a typed handler whose argument and result sizes the
 * dispatcher checks before it runs, with the same item list:
 *
 *   QL_HD static int32_t parity(const uint8_t *bits, uint8_t *p, int32_t *w)
 *   { ... }
 *   QL_GPU_FN(parity, QL_ARG_BITS(256), QL_RES_U8, QL_RES_I32);
 *   ...
 *   ql_gpu_dispatcher_register(d, &QL_GPU_FUNCTION(parity));
 *
 * Compiled by nvcc (CUDA C++), QL_GPU_FN also defines a __device__ variable
 * holding the wrapper's device address and a resolver reading it
 * (cudaMemcpyFromSymbol, in the handler's own module), which
 * ql_gpu_dispatcher_register calls for the kernel's function table; compiled by
 * a C compiler the function runs in the host emulation only. A handler's
 * ctx must point at memory the dispatcher's processor can read: device
 * memory or mapped host memory on a GPU.
 */
#ifndef QLINK_GPU_RPC_H
#define QLINK_GPU_RPC_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "qlink/rpc_fn.h"
#include "qlink/rpc_stream.h"
#include "qlink/rpc_wire.h"

/* QL_HD: rpc_wire.h */

#ifdef __cplusplus
extern "C" {
#endif

/* ---- streams and little-endian access: rpc_stream.h's ------------------- */

/*
 * One implementation for host and device: the device streams are
 * rpc_stream.h's (its functions and rpc_wire.h's accessors are QL_HD), under
 * the ql_gpu_ names handlers use. struct ql_gpu_in / ql_gpu_out are struct
 * ql_rpc_in / ql_rpc_out: nothing outside [p, end) is touched, an access
 * that does not fit sets a sticky err (-EBADMSG for input, -ENOSPC for
 * output) and returns 0 / NULL, so a handler may do all its reads and check
 * err once; arrays come back in place when aligned, else decoded into tmp
 * (ql_rpc_read_f32_array).
 */
#define ql_gpu_in ql_rpc_in
#define ql_gpu_out ql_rpc_out
#define ql_gpu_get_u8 ql_rpc_get_u8
#define ql_gpu_put_u8 ql_rpc_put_u8
#define ql_gpu_get_i32 ql_rpc_get_i32
#define ql_gpu_put_i32 ql_rpc_put_i32
#define ql_gpu_get_u32 ql_rpc_get_u32
#define ql_gpu_put_u32 ql_rpc_put_u32
#define ql_gpu_get_i64 ql_rpc_get_i64
#define ql_gpu_put_i64 ql_rpc_put_i64
#define ql_gpu_get_u64 ql_rpc_get_u64
#define ql_gpu_put_u64 ql_rpc_put_u64
#define ql_gpu_get_f32 ql_rpc_get_f32
#define ql_gpu_put_f32 ql_rpc_put_f32
#define ql_gpu_get_f64 ql_rpc_get_f64
#define ql_gpu_put_f64 ql_rpc_put_f64
#define ql_gpu_in_init ql_rpc_in_init
#define ql_gpu_in_left ql_rpc_in_left
#define ql_gpu_in_view ql_rpc_in_view
#define ql_gpu_read_bytes ql_rpc_read_bytes
#define ql_gpu_out_init ql_rpc_out_init
#define ql_gpu_out_len ql_rpc_out_len
#define ql_gpu_out_left ql_rpc_out_left
#define ql_gpu_out_reserve ql_rpc_out_reserve
#define ql_gpu_write_bytes ql_rpc_write_bytes
#define ql_gpu_read_u8 ql_rpc_read_u8
#define ql_gpu_write_u8 ql_rpc_write_u8
#define ql_gpu_read_i32 ql_rpc_read_i32
#define ql_gpu_write_i32 ql_rpc_write_i32
#define ql_gpu_read_u32 ql_rpc_read_u32
#define ql_gpu_write_u32 ql_rpc_write_u32
#define ql_gpu_read_i64 ql_rpc_read_i64
#define ql_gpu_write_i64 ql_rpc_write_i64
#define ql_gpu_read_u64 ql_rpc_read_u64
#define ql_gpu_write_u64 ql_rpc_write_u64
#define ql_gpu_read_f32 ql_rpc_read_f32
#define ql_gpu_write_f32 ql_rpc_write_f32
#define ql_gpu_read_f64 ql_rpc_read_f64
#define ql_gpu_write_f64 ql_rpc_write_f64
#define ql_gpu_read_i32_array ql_rpc_read_i32_array
#define ql_gpu_read_f32_array ql_rpc_read_f32_array
#define ql_gpu_read_f64_array ql_rpc_read_f64_array

/* ---- handlers and the function table --------------------------------------- */

/*
 * A handler reads its arguments from in (exactly arg_len bytes; for a typed
 * one exactly its argument size) and writes its results to out; it returns
 * 0, or a positive status of its own (sent back with no results). A
 * negative return is an internal error. The dispatcher's checks and the
 * statuses are those of ql_rpc_dispatch (rpc_table.h).
 */
typedef int32_t (*ql_gpu_handler_fn)(struct ql_gpu_in *in, struct ql_gpu_out *out, void *ctx);

/* Gives the handler's device address (0, or a negative errno). */
typedef int (*ql_gpu_resolve_fn)(ql_gpu_handler_fn *dev_fn);

/* What ql_gpu_dispatcher_register takes (copied). */
struct ql_gpu_function {
	const char *name;     /* for people and duplicate detection */
	uint32_t id;	      /* function_id on the wire: ql_rpc_fnv1a(name) */
	ql_gpu_handler_fn fn; /* the host address (the emulation calls it) */
	/* CUDA: reads the device address in the handler's own module
	 * (QL_GPU_FN makes it); NULL when not compiled for the device */
	ql_gpu_resolve_fn dev_resolve;
	void *ctx;	       /* passed to fn */
	uint32_t typed;	       /* 1: args_size and results_size are a schema */
	uint32_t args_size;    /* typed: arg_len must be exactly this */
	uint32_t results_size; /* typed: the results, exactly */
};

/* A raw handler (any arg_len, any results up to the slot). */
#define QL_GPU_RAW_FUNCTION(wire_name, fn_, ctx_) \
	QL_GPU__FUNCTION_LIT(wire_name, ql_rpc_fnv1a(wire_name), fn_, NULL, ctx_, 0, 0, 0)

/* The struct ql_gpu_function of a QL_GPU_FN handler (an lvalue compound
 * literal in C, a temporary in C++: take its address in the call). */
#define QL_GPU_FUNCTION(f_) QL_GPU_FUNCTION_AS(f_, #f_, NULL)
#define QL_GPU_FUNCTION_CTX(f_, ctx_) QL_GPU_FUNCTION_AS(f_, #f_, ctx_)
#define QL_GPU_FUNCTION_AS(f_, wire_name, ctx_)                                     \
	QL_GPU__FUNCTION_LIT(wire_name, ql_rpc_fnv1a(wire_name), ql_gpu__wrap_##f_, \
			     QL_GPU__DSYM(f_), ctx_, 1, ql_gpu__args_size_##f_,     \
			     ql_gpu__results_size_##f_)

#ifdef __cplusplus
#define QL_GPU__FUNCTION_LIT(nm, id_, fn_, sym_, ctx_, ty_, as_, rs_) \
	(ql_gpu_function{ (nm), (id_), (fn_), (sym_), (ctx_), (ty_), (as_), (rs_) })
#define QL_GPU__SASSERT(c, msg) static_assert(c, msg)
#else
#define QL_GPU__FUNCTION_LIT(nm, id_, fn_, sym_, ctx_, ty_, as_, rs_) \
	((struct ql_gpu_function){ .name = (nm),                      \
				   .id = (id_),                       \
				   .fn = (fn_),                       \
				   .dev_resolve = (sym_),             \
				   .ctx = (ctx_),                     \
				   .typed = (ty_),                    \
				   .args_size = (as_),                \
				   .results_size = (rs_) })
#define QL_GPU__SASSERT(c, msg) _Static_assert(c, msg)
#endif

/* Under nvcc: a __device__ variable holding the wrapper's device address,
 * and a host function reading it (cudaMemcpyFromSymbol) in this module, so
 * that the lookup uses the runtime the handler was compiled with. */
#if defined(__CUDACC__)
#define QL_GPU__DSYM(f_) (ql_gpu__resolve_##f_)
#define QL_GPU__DPTR(f_)                                                                          \
	static __device__ ql_gpu_handler_fn ql_gpu__dptr_##f_ = ql_gpu__wrap_##f_;                \
	static inline int ql_gpu__resolve_##f_(ql_gpu_handler_fn *dev_fn)                         \
	{                                                                                         \
		cudaError_t e = cudaMemcpyFromSymbol(dev_fn, ql_gpu__dptr_##f_, sizeof(*dev_fn)); \
		return e == cudaSuccess ? 0 : -EIO;                                               \
	}
#else
#define QL_GPU__DSYM(f_) ((ql_gpu_resolve_fn)0)
#define QL_GPU__DPTR(f_)
#endif

/* A raw handler compiled for the device too: QL_GPU_RAW(fn) after a QL_HD
 * function of type ql_gpu_handler_fn, then QL_GPU_RAW_FUNCTION_DEV. */
#define QL_GPU_RAW(fn)                                                                           \
	QL_HD static inline int32_t ql_gpu__wrap_##fn(struct ql_gpu_in *i, struct ql_gpu_out *o, \
						      void *c)                                   \
	{                                                                                        \
		return fn(i, o, c);                                                              \
	}                                                                                        \
	QL_GPU__DPTR(fn)                                                                         \
	QL_GPU__SASSERT(1, "")
#define QL_GPU_RAW_FUNCTION_DEV(fn, wire_name, ctx_)                                \
	QL_GPU__FUNCTION_LIT(wire_name, ql_rpc_fnv1a(wire_name), ql_gpu__wrap_##fn, \
			     QL_GPU__DSYM(fn), ctx_, 0, 0, 0)

/* -- QL_GPU_FN: the items of rpc_fn.h, phases of our own ------------------- */

#define QL__GRDFN(k) QL__CAT(QL__GRDFN_, k)
#define QL__GRDFN_ql__u8 ql_gpu_read_u8
#define QL__GRDFN_ql__i32 ql_gpu_read_i32
#define QL__GRDFN_ql__u32 ql_gpu_read_u32
#define QL__GRDFN_ql__i64 ql_gpu_read_i64
#define QL__GRDFN_ql__f32 ql_gpu_read_f32
#define QL__GRDFN_ql__f64 ql_gpu_read_f64
#define QL__GRDFN_ql__ai32 ql_gpu_read_i32_array
#define QL__GRDFN_ql__af32 ql_gpu_read_f32_array
#define QL__GRDFN_ql__af64 ql_gpu_read_f64_array

#define QL__GPUTFN(k) QL__CAT(QL__GPUTFN_, k)
#define QL__GPUTFN_ql__u8 ql_gpu_put_u8
#define QL__GPUTFN_ql__i32 ql_gpu_put_i32
#define QL__GPUTFN_ql__u32 ql_gpu_put_u32
#define QL__GPUTFN_ql__i64 ql_gpu_put_i64
#define QL__GPUTFN_ql__f32 ql_gpu_put_f32
#define QL__GPUTFN_ql__f64 ql_gpu_put_f64

#define QL__GBEGFN(k) QL__CAT(QL__GBEGFN_, k)
#define QL__GBEGFN_ql__ai32 ql_rpc__res_i32_begin
#define QL__GBEGFN_ql__af32 ql_rpc__res_f32_begin
#define QL__GBEGFN_ql__af64 ql_rpc__res_f64_begin
#define QL__GENDFN(k) QL__CAT(QL__GENDFN_, k)
#define QL__GENDFN_ql__ai32 ql_rpc__res_i32_end
#define QL__GENDFN_ql__af32 ql_rpc__res_f32_end
#define QL__GENDFN_ql__af64 ql_rpc__res_f64_end

/* sizes, by direction */
#define QL__GAS_ql__arg(i, k, n) +QL__SZ(k, n)
#define QL__GAS_ql__res(i, k, n)
#define QL__GRS_ql__arg(i, k, n)
#define QL__GRS_ql__res(i, k, n) +QL__SZ(k, n)

#define QL__GCHECK(i, k, n)                                                      \
	QL__GPU__SASSERT_N((n) > 0, "QL_GPU_FN: array length must be positive"); \
	QL__GPU__SASSERT_N(QL__SZ(k, n) <= QL_RPC_STACK_ARRAY_MAX,               \
			   "QL_GPU_FN: array larger than QL_RPC_STACK_ARRAY_MAX");
#define QL__GPU__SASSERT_N(c, m) QL_GPU__SASSERT(c, m)

/* DECL: before the call, in item order */
#define QL__GDECL_ql__arg_ql__scalar(i, k, n) QL__CT(k) ql__a##i = QL__GRDFN(k)(ql__in);
#define QL__GDECL_ql__arg_ql__bytes(i, k, n) \
	const uint8_t *ql__a##i = ql_gpu_in_view(ql__in, QL__SZ(k, n));
#define QL__GDECL_ql__arg_ql__bits QL__GDECL_ql__arg_ql__bytes
#define QL__GDECL_ql__arg_ql__wide(i, k, n) \
	QL__CT(k) ql__b##i[n];              \
	const QL__CT(k) *ql__a##i = QL__GRDFN(k)(ql__in, n, ql__b##i);
#define QL__GDECL_ql__res_ql__scalar(i, k, n)                          \
	uint8_t *ql__p##i = ql_gpu_out_reserve(ql__out, QL__SZ(k, n)); \
	QL__CT(k) ql__r##i = 0;
#define QL__GDECL_ql__res_ql__bytes(i, k, n)                           \
	uint8_t *ql__r##i = ql_gpu_out_reserve(ql__out, QL__SZ(k, n)); \
	if (ql__r##i)                                                  \
		memset(ql__r##i, 0, QL__SZ(k, n));
#define QL__GDECL_ql__res_ql__bits QL__GDECL_ql__res_ql__bytes
#define QL__GDECL_ql__res_ql__wide(i, k, n)                            \
	QL__CT(k) ql__b##i[n];                                         \
	uint8_t *ql__p##i = ql_gpu_out_reserve(ql__out, QL__SZ(k, n)); \
	QL__CT(k) *ql__r##i = ql__p##i ? QL__GBEGFN(k)(ql__p##i, n, ql__b##i) : ql__b##i;

/* POST: after a successful call */
#define QL__GPOST_ql__arg_ql__scalar(i, k, n)
#define QL__GPOST_ql__arg_ql__bytes(i, k, n)
#define QL__GPOST_ql__arg_ql__bits(i, k, n)
#define QL__GPOST_ql__arg_ql__wide(i, k, n)
#define QL__GPOST_ql__res_ql__scalar(i, k, n) QL__GPUTFN(k)(ql__p##i, ql__r##i);
#define QL__GPOST_ql__res_ql__bytes(i, k, n)
#define QL__GPOST_ql__res_ql__bits(i, k, n) ql_rpc_bits_clear_tail(ql__r##i, n);
#define QL__GPOST_ql__res_ql__wide(i, k, n) QL__GENDFN(k)(ql__p##i, n, ql__r##i);

/* static checks per item (array lengths) */
#define QL__GSA_ql__arg_ql__scalar(i, k, n)
#define QL__GSA_ql__res_ql__scalar(i, k, n)
#define QL__GSA_ql__arg_ql__bytes(i, k, n) QL__GCHECK(i, k, n)
#define QL__GSA_ql__res_ql__bytes(i, k, n) QL__GCHECK(i, k, n)
#define QL__GSA_ql__arg_ql__bits(i, k, n) QL__GCHECK(i, k, n)
#define QL__GSA_ql__res_ql__bits(i, k, n) QL__GCHECK(i, k, n)
#define QL__GSA_ql__arg_ql__wide(i, k, n) QL__GCHECK(i, k, n)
#define QL__GSA_ql__res_ql__wide(i, k, n) QL__GCHECK(i, k, n)

/* The function's type against the items: _Generic in C; in C++ (nvcc) a
 * direct initialisation of a pointer of the expected type, which fails to
 * compile on a mismatch. */
#ifdef __cplusplus
#define QL__GTYPECHECK(fn, ...)                                                                   \
	static int32_t (*const ql_gpu__typecheck_##fn)(QL__MAPC(QL__PH, QL__PTYPE_, __VA_ARGS__)) \
		__attribute__((unused)) = fn
#else
#define QL__GTYPECHECK(fn, ...)                                                                 \
	_Static_assert(_Generic(&fn, int32_t(*)(QL__MAPC(QL__PH, QL__PTYPE_, __VA_ARGS__)) : 1, \
				default : 0),                                                   \
		       "QL_GPU_FN(" #fn "): parameter types do not match the items")
#endif

#define QL_GPU_FN(fn, ...)                                                                       \
	QL__MAP(QL__PH, QL__GSA_, __VA_ARGS__)                                                   \
	QL_GPU__SASSERT((0 QL__MAP(QL__PD, QL__NA_, __VA_ARGS__)) <= QL_RPC_MAX_ARGS,            \
			"QL_GPU_FN(" #fn "): more than 8 arguments");                            \
	QL_GPU__SASSERT((0 QL__MAP(QL__PD, QL__NR_, __VA_ARGS__)) <= QL_RPC_MAX_RESULTS,         \
			"QL_GPU_FN(" #fn "): more than 4 results");                              \
	QL__GTYPECHECK(fn, __VA_ARGS__);                                                         \
	enum {                                                                                   \
		ql_gpu__args_size_##fn = 0 QL__MAP(QL__PD, QL__GAS_, __VA_ARGS__),               \
		ql_gpu__results_size_##fn = 0 QL__MAP(QL__PD, QL__GRS_, __VA_ARGS__)             \
	};                                                                                       \
	QL_HD static inline int32_t ql_gpu__wrap_##fn(struct ql_gpu_in *ql__in,                  \
						      struct ql_gpu_out *ql__out, void *ql__ctx) \
	{                                                                                        \
		int32_t ql__ret;                                                                 \
		(void)ql__ctx;                                                                   \
		QL__MAP(QL__PH, QL__GDECL_, __VA_ARGS__)                                         \
		if (ql__in->err || ql__out->err)                                                 \
			return -EBADMSG;                                                         \
		ql__ret = fn(QL__MAPC(QL__PH, QL__CALL_, __VA_ARGS__));                          \
		if (ql__ret)                                                                     \
			return ql__ret;                                                          \
		QL__MAP(QL__PH, QL__GPOST_, __VA_ARGS__)                                         \
		return 0;                                                                        \
	}                                                                                        \
	QL_GPU__DPTR(fn)                                                                         \
	QL_GPU__SASSERT(1, "")

#ifdef __cplusplus
}
#endif
#endif
