/* SPDX-License-Identifier: MIT */
/*
 * The GPU dispatch body (src/gpu/gpu_body.h) compiled as host code, with a
 * recording send side in place of the mlx5 queues, on a ring in memory:
 *
 * - same wire, same statuses as the CPU path: every request (valid ones,
 *   each hostile kind, and 20 000 random messages) gets a response equal
 *   byte for byte to ql_rpc_dispatch's for the same message and the same
 *   handlers (one C function registered both ways: QL_RPC_FN and
 *   QL_GPU_FN), and the counters add up;
 * - the rows that hostile table misses (typed results past the response,
 *   a typed handler short of its schema, arrays in place and copied, an
 *   overrun against the daemon's guarded dispatch): the checks are one
 *   dispatch core (rpc/dispatch_core.h) and this is what would show two;
 *   and the array streams keep one rule for in place or copied;
 * - the QCS is untrusted: a slot length past the slot is BAD_LENGTH, a
 *   handler that writes past its results is caught by the canary, a
 *   request rewritten in the slot after it was taken changes nothing;
 * - backpressure: with every response buffer in flight the request waits;
 * - the hot path: a step neither allocates nor locks nor enters the
 *   kernel (tests/hotpath.h, both proofs).
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* the send side: buffers that record what was posted */
#define QL_GPU_TX_CUSTOM
#include "qlink/gpu_rpc.h"
struct ql_gpu_tx {
	uint8_t *buf;
	uint32_t count, stride;
	uint64_t posted, done, failed;
	uint32_t last_len;
	int fail_post;
};

static inline uint8_t *ql_gpu_tx_next(const struct ql_gpu_tx *t)
{
	if (t->posted - t->done >= t->count)
		return NULL;
	return t->buf + (size_t)(t->posted & (t->count - 1)) * t->stride;
}

static inline int ql_gpu_tx_post(struct ql_gpu_tx *t, uint32_t len)
{
	if (t->fail_post)
		return -EIO;
	t->last_len = len;
	t->posted++;
	return 0;
}

/* completions arrive when the test says so (hold: none) */
static int tx_hold;
static inline int ql_gpu_tx_reap(struct ql_gpu_tx *t)
{
	int n = tx_hold ? 0 : (int)(t->posted - t->done);

	if (!tx_hold)
		t->done = t->posted;
	return n;
}

#include "gpu/gpu_body.h"
#include "gpu/gpu_builtin.h"
#include "hotpath.h"
#include "qlink/rpc.h"
#include "qlink/rpc_fn.h"
#include "rpc/dispatch_int.h"

#define SLOTS 8u
#define SLOT_SIZE 256u
#define CAP (SLOT_SIZE - QL_RING_SLOT_HDR)
#define TXN 4u

/* ---- handlers, each registered for the CPU and for the body ------------- */

QL_HD static int32_t scale(float a, const float *v, int32_t k, float *sum, int32_t *kk)
{
	float s = 0;

	for (int i = 0; i < 4; i++)
		s += a * v[i];
	*sum = s;
	*kk = (int32_t)((uint32_t)k * 3u); /* random input: no signed overflow */
	return k == 99 ? 42 : 0;	   /* a handler status on request */
}
QL_RPC_FN(scale, QL_ARG_F32, QL_ARG_F32_ARRAY(4), QL_ARG_I32, QL_RES_F32, QL_RES_I32);
QL_GPU_FN(scale, QL_ARG_F32, QL_ARG_F32_ARRAY(4), QL_ARG_I32, QL_RES_F32, QL_RES_I32);

/* the demo's parity, CPU flavour, for the differential */
static int32_t cpu_parity(const uint8_t *ev, uint8_t *p, int32_t *w)
{
	return qlink_parity(ev, p, w);
}
QL_RPC_FN(cpu_parity, QL_ARG_BITS(256), QL_RES_U8, QL_RES_I32);

static int32_t cpu_echo(struct ql_rpc_in *in, struct ql_rpc_out *out, void *ctx)
{
	size_t n = ql_rpc_in_left(in);

	(void)ctx;
	ql_rpc_write_bytes(out, ql_rpc_in_view(in, n), n);
	return 0;
}

/* raw: returns -1 (internal) / reads past its arguments (args mismatch) /
 * writes more than fits (result overflow) */
QL_HD static int32_t g_neg(struct ql_gpu_in *in, struct ql_gpu_out *out, void *ctx)
{
	(void)in, (void)out, (void)ctx;
	return -1;
}
static int32_t c_neg(struct ql_rpc_in *in, struct ql_rpc_out *out, void *ctx)
{
	(void)in, (void)out, (void)ctx;
	return -1;
}
QL_HD static int32_t g_greedy(struct ql_gpu_in *in, struct ql_gpu_out *out, void *ctx)
{
	(void)ctx;
	(void)ql_gpu_read_u64(in);
	(void)ql_gpu_out_reserve(out, 100000);
	return 0;
}
static int32_t c_greedy(struct ql_rpc_in *in, struct ql_rpc_out *out, void *ctx)
{
	(void)ctx;
	(void)ql_rpc_read_u64(in);
	(void)ql_rpc_out_reserve(out, 100000);
	return 0;
}
/* writes past the end of its output (a broken handler) */
QL_HD static int32_t g_overrun(struct ql_gpu_in *in, struct ql_gpu_out *out, void *ctx)
{
	(void)in, (void)ctx;
	memset(out->end, 0xee, 8);
	return 0;
}

/* typed, declaring more results than a response holds (RESULT_OVERFLOW
 * before it runs) */
QL_HD static int32_t big(uint8_t x, uint8_t *r)
{
	r[0] = x;
	return 0;
}
QL_RPC_FN(big, QL_ARG_U8, QL_RES_U8_ARRAY(240));
QL_GPU_FN(big, QL_ARG_U8, QL_RES_U8_ARRAY(240));

/* f64 arrays after a u8 (misaligned: decoded into the stack copy) and
 * first (aligned: read in place); a result array likewise */
QL_HD static int32_t dsum(uint8_t k, const double *v, double *s, double *w)
{
	*s = (double)k;
	for (int i = 0; i < 3; i++) {
		*s += v[i];
		w[i] = v[i] * 2;
	}
	return 0;
}
QL_RPC_FN(dsum, QL_ARG_U8, QL_ARG_F64_ARRAY(3), QL_RES_F64, QL_RES_F64_ARRAY(3));
QL_GPU_FN(dsum, QL_ARG_U8, QL_ARG_F64_ARRAY(3), QL_RES_F64, QL_RES_F64_ARRAY(3));
QL_HD static int32_t dsum8(const double *v, uint8_t k, float *s, double *w)
{
	*s = (float)k;
	for (int i = 0; i < 3; i++) {
		*s += (float)v[i];
		w[i] = v[i] * 3;
	}
	return 0;
}
QL_RPC_FN(dsum8, QL_ARG_F64_ARRAY(3), QL_ARG_U8, QL_RES_F32, QL_RES_F64_ARRAY(3));
QL_GPU_FN(dsum8, QL_ARG_F64_ARRAY(3), QL_ARG_U8, QL_RES_F32, QL_RES_F64_ARRAY(3));

/* a schema (u8 -> i32, i32) whose handler writes one i32: a typed handler
 * breaking its schema (INTERNAL) */
QL_HD static int32_t shortres(uint8_t x, int32_t *a, int32_t *b)
{
	*a = *b = x;
	return 0;
}
QL_RPC_FN(shortres, QL_ARG_U8, QL_RES_I32, QL_RES_I32);
QL_GPU_FN(shortres, QL_ARG_U8, QL_RES_I32, QL_RES_I32);
QL_HD static int32_t g_short(struct ql_gpu_in *in, struct ql_gpu_out *out, void *ctx)
{
	(void)ctx;
	ql_gpu_write_i32(out, ql_gpu_read_u8(in));
	return 0;
}
static int32_t c_short(struct ql_rpc_in *in, struct ql_rpc_out *out, void *ctx)
{
	(void)ctx;
	ql_rpc_write_i32(out, ql_rpc_read_u8(in));
	return 0;
}
/* the CPU flavour of the overrun, for the daemon's guarded dispatch */
static int32_t c_overrun(struct ql_rpc_in *in, struct ql_rpc_out *out, void *ctx)
{
	(void)in, (void)ctx;
	memset(out->end, 0xee, 8);
	return 0;
}

static struct ql_rpc_table *cpu;
static struct ql_gpu_entry fns[16];
static uint32_t nfns;

static void add_gpu(const struct ql_gpu_function *f)
{
	fns[nfns++] = (struct ql_gpu_entry){ f->id,	      f->typed, f->args_size,
					     f->results_size, f->fn,	f->ctx };
}

/* ---- the body on a ring in memory ---------------------------------------- */

static uint8_t *ring;
static struct ql_gpu_shared sh;
static struct ql_gpu_body body;
static uint8_t scratch[SLOT_SIZE] __attribute__((aligned(64)));
static uint8_t txmem[TXN][SLOT_SIZE + 64] __attribute__((aligned(64)));
static uint64_t sent; /* requests placed */

static int setup(void **state)
{
	(void)state;
	assert_int_equal(ql_rpc_table_create(16, &cpu), 0);
	nfns = 0;
	assert_true(ql_rpc_table_add(cpu, &QL_RPC_FUNCTION(scale)) >= 0);
	add_gpu(&QL_GPU_FUNCTION(scale));
	assert_true(ql_rpc_table_add(cpu, &QL_RPC_FUNCTION_AS(cpu_parity, "qlink_parity", NULL)) >=
		    0);
	add_gpu(ql_gpu_builtin_function("qlink_parity"));
	assert_true(ql_rpc_table_add(cpu, &QL_RPC_RAW_FUNCTION("echo", cpu_echo, NULL)) >= 0);
	add_gpu(ql_gpu_builtin_function("echo"));
	assert_true(ql_rpc_table_add(cpu, &QL_RPC_RAW_FUNCTION("neg", c_neg, NULL)) >= 0);
	add_gpu(&QL_GPU_RAW_FUNCTION("neg", g_neg, NULL));
	assert_true(ql_rpc_table_add(cpu, &QL_RPC_RAW_FUNCTION("greedy", c_greedy, NULL)) >= 0);
	add_gpu(&QL_GPU_RAW_FUNCTION("greedy", g_greedy, NULL));
	add_gpu(&QL_GPU_RAW_FUNCTION("overrun", g_overrun, NULL));
	assert_true(ql_rpc_table_add(cpu, &QL_RPC_RAW_FUNCTION("overrun", c_overrun, NULL)) >= 0);
	assert_true(ql_rpc_table_add(cpu, &QL_RPC_FUNCTION(big)) >= 0);
	add_gpu(&QL_GPU_FUNCTION(big));
	assert_true(ql_rpc_table_add(cpu, &QL_RPC_FUNCTION(dsum)) >= 0);
	add_gpu(&QL_GPU_FUNCTION(dsum));
	assert_true(ql_rpc_table_add(cpu, &QL_RPC_FUNCTION(dsum8)) >= 0);
	add_gpu(&QL_GPU_FUNCTION(dsum8));
	{
		/* shortres's schema, a handler that breaks it */
		struct ql_rpc_function f = QL_RPC_FUNCTION(shortres);
		struct ql_gpu_function g = QL_GPU_FUNCTION(shortres);

		f.fn = c_short;
		g.fn = g_short;
		assert_true(ql_rpc_table_add(cpu, &f) >= 0);
		add_gpu(&g);
	}

	ring = aligned_alloc(64, ql_ring_bytes(SLOTS, SLOT_SIZE));
	assert_non_null(ring);
	memset(ring, 0, ql_ring_bytes(SLOTS, SLOT_SIZE));
	ql_ring_format(ring, SLOTS, SLOT_SIZE);
	memset(&sh, 0, sizeof(sh));
	memset(&body, 0, sizeof(body));
	body.ring = ring;
	body.num_slots = SLOTS;
	body.slot_size = SLOT_SIZE;
	body.scratch = scratch;
	body.fns = fns;
	body.nfns = nfns;
	body.sh = &sh;
	body.tx.buf = &txmem[0][0];
	body.tx.count = TXN;
	body.tx.stride = SLOT_SIZE + 64;
	tx_hold = 0;
	sent = 0;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	ql_rpc_table_destroy(cpu);
	free(ring);
	return 0;
}

/* Place msg as the next request, with `len` in the slot's length word. */
static void place(const void *msg, uint32_t len, uint32_t bytes)
{
	uint8_t *slot = ring + ql_ring_slot_offset(SLOTS, SLOT_SIZE, sent);
	uint64_t seq = sent + 1;
	uint32_t stamp = (uint32_t)seq;

	memcpy(slot + 8, &len, 4);
	memcpy(slot + 12, &stamp, 4);
	memcpy(slot + 16, msg, bytes);
	__atomic_store_n((uint64_t *)(void *)slot, seq, __ATOMIC_RELEASE);
	sent++;
}

/* The response to the last request served. */
static const uint8_t *last_resp(uint32_t *len)
{
	*len = body.tx.last_len;
	return txmem[(body.tx.posted - 1) & (TXN - 1)];
}

/* Serve msg (len bytes) and compare with the CPU's answer for the same
 * bytes (the ring's BAD_LENGTH rule applied first, as rx_ring does). */
static int32_t serve_and_compare(const uint8_t *msg, uint32_t len)
{
	uint8_t cpu_resp[SLOT_SIZE], copy[SLOT_SIZE];
	size_t cpu_len;
	uint32_t glen, mlen = len;
	const uint8_t *g;
	int32_t st;

	place(msg, len, len <= CAP ? len : CAP);
	assert_int_equal(ql_gpu_body_step(&body), 1);
	g = last_resp(&glen);
	memcpy(copy, msg, len <= CAP ? len : CAP);
	if (len > CAP) {
		if (CAP >= 12)
			memset(copy + 8, 0xff, 4);
		mlen = CAP;
	}
	st = ql_rpc_dispatch(cpu, copy, mlen, cpu_resp, SLOT_SIZE, &cpu_len, NULL);
	assert_int_equal(glen, (uint32_t)cpu_len);
	assert_memory_equal(g, cpu_resp, cpu_len);
	return st;
}

/* As serve_and_compare, against the daemon's guarded dispatch (the canary
 * the body always sets); the CPU's overrun flag must match the body's. */
static int32_t serve_and_compare_guarded(const uint8_t *msg, uint32_t len)
{
	uint8_t cpu_resp[SLOT_SIZE + QL__RPC_CANARY_SIZE];
	const char *cur = NULL;
	bool overrun = false;
	size_t cpu_len;
	uint32_t glen;
	const uint8_t *g;
	int32_t st;

	place(msg, len, len);
	assert_int_equal(ql_gpu_body_step(&body), 1);
	g = last_resp(&glen);
	st = ql__rpc_dispatch_guarded(cpu, msg, len, cpu_resp, SLOT_SIZE, &cpu_len, NULL, &cur,
				      &overrun);
	assert_int_equal(glen, (uint32_t)cpu_len);
	assert_memory_equal(g, cpu_resp, cpu_len);
	assert_int_equal(overrun, sh.st.err_result_overrun > 0);
	return st;
}

static uint32_t build(uint8_t *buf, uint32_t id, const void *args, uint32_t arg_len, uint32_t rid)
{
	struct ql_rpc_header h = { QL_RPC_MAGIC_REQUEST, id, arg_len, rid, 0x1122334455667788ull };

	ql_rpc_header_encode(buf, &h);
	if (arg_len)
		memcpy(buf + QL_RPC_HEADER_SIZE, args, arg_len);
	return QL_RPC_HEADER_SIZE + arg_len;
}

static void test_valid_calls_match_cpu(void **state)
{
	uint8_t m[SLOT_SIZE], a[64];
	uint32_t n;

	(void)state;
	/* scale: f32, f32[4], i32 */
	ql_rpc_put_f32(a, 1.5f);
	for (int i = 0; i < 4; i++)
		ql_rpc_put_f32(a + 4 + 4 * i, (float)i + 0.25f);
	ql_rpc_put_i32(a + 20, 7);
	n = build(m, ql_rpc_fnv1a("scale"), a, 24, 1);
	assert_int_equal(serve_and_compare(m, n), 0);
	ql_rpc_put_i32(a + 20, 99);
	n = build(m, ql_rpc_fnv1a("scale"), a, 24, 2);
	assert_int_equal(serve_and_compare(m, n), 42);
	/* parity */
	for (int i = 0; i < 32; i++)
		a[i] = (uint8_t)(i * 37 + 11);
	n = build(m, ql_rpc_fnv1a("qlink_parity"), a, 32, 3);
	assert_int_equal(serve_and_compare(m, n), 0);
	/* echo, empty and full */
	n = build(m, ql_rpc_fnv1a("echo"), a, 0, 4);
	assert_int_equal(serve_and_compare(m, n), 0);
	memset(a, 0x5a, sizeof(a));
	n = build(m, ql_rpc_fnv1a("echo"), a, 64, 5);
	assert_int_equal(serve_and_compare(m, n), 0);
	assert_int_equal(sh.st.requests, 5);
	assert_int_equal(sh.st.ok, 4);
	assert_int_equal(sh.st.handler_error, 1);
	assert_int_equal(sh.st.handled, 5);
	assert_int_equal(sh.st.posted, 5);
}

static void test_hostile_requests_match_cpu(void **state)
{
	uint8_t m[SLOT_SIZE], a[64] = { 0 };
	uint32_t n;

	(void)state;
	/* short */
	n = build(m, ql_rpc_fnv1a("echo"), a, 0, 1);
	assert_int_equal(serve_and_compare(m, 10), QL_RPC_E_SHORT);
	assert_int_equal(serve_and_compare(m, 0), QL_RPC_E_SHORT);
	/* bad magic */
	n = build(m, ql_rpc_fnv1a("echo"), a, 8, 2);
	m[0] ^= 1;
	assert_int_equal(serve_and_compare(m, n), QL_RPC_E_BAD_MAGIC);
	/* arg_len past the message */
	n = build(m, ql_rpc_fnv1a("echo"), a, 8, 3);
	ql_rpc_put_u32(m + 8, 9);
	assert_int_equal(serve_and_compare(m, n), QL_RPC_E_BAD_LENGTH);
	ql_rpc_put_u32(m + 8, 0xffffffffu);
	assert_int_equal(serve_and_compare(m, n), QL_RPC_E_BAD_LENGTH);
	/* the slot's length word past the slot */
	n = build(m, ql_rpc_fnv1a("echo"), a, 8, 4);
	assert_int_equal(serve_and_compare(m, 0x7fffffffu), QL_RPC_E_BAD_LENGTH);
	assert_int_equal(serve_and_compare(m, CAP + 1), QL_RPC_E_BAD_LENGTH);
	/* unknown function */
	n = build(m, 0xdeadbeefu, a, 8, 5);
	assert_int_equal(serve_and_compare(m, n), QL_RPC_E_UNKNOWN_FUNCTION);
	/* typed, wrong argument size */
	n = build(m, ql_rpc_fnv1a("qlink_parity"), a, 31, 6);
	assert_int_equal(serve_and_compare(m, n), QL_RPC_E_ARGS_MISMATCH);
	n = build(m, ql_rpc_fnv1a("scale"), a, 0, 7);
	assert_int_equal(serve_and_compare(m, n), QL_RPC_E_ARGS_MISMATCH);
	/* handler: negative return, reading past its arguments, writing
	 * more than fits */
	n = build(m, ql_rpc_fnv1a("neg"), a, 4, 8);
	assert_int_equal(serve_and_compare(m, n), QL_RPC_E_INTERNAL);
	n = build(m, ql_rpc_fnv1a("greedy"), a, 4, 9);
	assert_int_equal(serve_and_compare(m, n), QL_RPC_E_ARGS_MISMATCH);
	n = build(m, ql_rpc_fnv1a("greedy"), a, 8, 10);
	assert_int_equal(serve_and_compare(m, n), QL_RPC_E_RESULT_OVERFLOW);
	assert_int_equal(sh.st.requests, 13);
	assert_int_equal(sh.st.err_short, 2);
	assert_int_equal(sh.st.err_bad_magic, 1);
	assert_int_equal(sh.st.err_bad_length, 4);
	assert_int_equal(sh.st.err_unknown_function, 1);
	assert_int_equal(sh.st.err_args, 3);
	assert_int_equal(sh.st.err_internal, 1);
	assert_int_equal(sh.st.err_result_overflow, 1);
	assert_int_equal(sh.st.ok, 0);
}

/* The rows the hostile table above does not reach: a typed function whose
 * results cannot fit, a typed handler writing fewer results than its
 * schema, arrays in place and copied, a handler writing past its capacity
 * (against the daemon's guarded dispatch). Each row is one check of the
 * dispatch core (rpc/dispatch_core.h): a CPU or GPU path that checked it
 * its own way would answer differently here. */
static void test_schema_rows_match_cpu(void **state)
{
	uint8_t m[SLOT_SIZE], a[64] = { 0 };
	uint32_t n;

	(void)state;
	a[0] = 7;
	n = build(m, ql_rpc_fnv1a("big"), a, 1, 1);
	assert_int_equal(serve_and_compare(m, n), QL_RPC_E_RESULT_OVERFLOW);
	n = build(m, ql_rpc_fnv1a("big"), a, 2, 2); /* and the argument size first */
	assert_int_equal(serve_and_compare(m, n), QL_RPC_E_ARGS_MISMATCH);
	n = build(m, ql_rpc_fnv1a("shortres"), a, 1, 3);
	assert_int_equal(serve_and_compare(m, n), QL_RPC_E_INTERNAL);
	for (int i = 0; i < 3; i++) {
		ql_rpc_put_f64(a + 1 + 8 * i, 1.25 * (i + 1));
		ql_rpc_put_f64(a + 32 + 8 * i, -0.5 * (i + 1));
	}
	n = build(m, ql_rpc_fnv1a("dsum"), a, 25, 4);
	assert_int_equal(serve_and_compare(m, n), 0);
	a[56] = 3;
	n = build(m, ql_rpc_fnv1a("dsum8"), a + 32, 25, 5);
	assert_int_equal(serve_and_compare(m, n), 0);
	n = build(m, ql_rpc_fnv1a("dsum8"), a + 32, 24, 6);
	assert_int_equal(serve_and_compare(m, n), QL_RPC_E_ARGS_MISMATCH);
	n = build(m, ql_rpc_fnv1a("echo"), a, 16, 7);
	assert_int_equal(serve_and_compare_guarded(m, n), 0);
	n = build(m, ql_rpc_fnv1a("overrun"), a, 16, 8);
	assert_int_equal(serve_and_compare_guarded(m, n), QL_RPC_E_INTERNAL);
	assert_int_equal(sh.st.requests, 8);
	assert_int_equal(sh.st.err_result_overflow, 1);
	assert_int_equal(sh.st.err_args, 2);
	assert_int_equal(sh.st.err_internal, 1);
	assert_int_equal(sh.st.err_result_overrun, 1);
	assert_int_equal(sh.st.ok, 3);
}

/* The streams the GPU handlers use are rpc_stream.h's: one rule for when an
 * array is read in place (its address meets the type's alignment) on either
 * side. Every offset, each array type, both names. */
static void test_streams_one_rule(void **state)
{
	_Alignas(16) uint8_t buf[64];
	double td[4], tg[4];
	float tf[4], tfg[4];
	int32_t ti[4], tig[4];

	(void)state;
	for (int i = 0; i < 64; i++)
		buf[i] = (uint8_t)(i * 7 + 1);
	for (size_t off = 0; off < 16; off++) {
		const uint8_t *p = buf + off;
		struct ql_rpc_in r;
		struct ql_gpu_in g;
		const double *pd, *gd;
		const float *pf, *gf;
		const int32_t *pi, *gi;

		ql_rpc_in_init(&r, p, 32);
		ql_gpu_in_init(&g, p, 32);
		pd = ql_rpc_read_f64_array(&r, 4, td);
		gd = ql_gpu_read_f64_array(&g, 4, tg);
		assert_true((pd == td) == ((uintptr_t)p % __alignof__(double) != 0));
		assert_true((gd == tg) == (pd == td));
		ql_rpc_in_init(&r, p, 16);
		ql_gpu_in_init(&g, p, 16);
		pf = ql_rpc_read_f32_array(&r, 4, tf);
		gf = ql_gpu_read_f32_array(&g, 4, tfg);
		assert_true((pf == tf) == ((uintptr_t)p % __alignof__(float) != 0));
		assert_true((gf == tfg) == (pf == tf));
		ql_rpc_in_init(&r, p, 16);
		ql_gpu_in_init(&g, p, 16);
		pi = ql_rpc_read_i32_array(&r, 4, ti);
		gi = ql_gpu_read_i32_array(&g, 4, tig);
		assert_true((pi == ti) == ((uintptr_t)p % __alignof__(int32_t) != 0));
		assert_true((gi == tig) == (pi == ti));
		for (int i = 0; i < 4; i++) {
			assert_true(pd[i] == ql_rpc_get_f64(p + 8 * i) && gd[i] == pd[i]);
			assert_true(pf[i] == ql_rpc_get_f32(p + 4 * i) && gf[i] == pf[i]);
			assert_int_equal(pi[i], ql_rpc_get_i32(p + 4 * i));
			assert_int_equal(gi[i], pi[i]);
		}
	}
}

static void test_overrun_caught(void **state)
{
	uint8_t m[SLOT_SIZE];
	struct ql_rpc_response r;
	uint32_t n, glen;

	(void)state;
	n = build(m, ql_rpc_fnv1a("overrun"), NULL, 0, 77);
	place(m, n, n);
	assert_int_equal(ql_gpu_body_step(&body), 1);
	ql_rpc_response_decode(last_resp(&glen), &r);
	assert_int_equal(glen, QL_RPC_RESPONSE_SIZE);
	assert_int_equal(r.status, QL_RPC_E_INTERNAL);
	assert_int_equal(r.request_id, 77);
	assert_int_equal(sh.st.err_result_overrun, 1);
	assert_int_equal(sh.st.err_internal, 0);
}

static void test_random_messages_match_cpu(void **state)
{
	static const char *names[] = { "scale", "qlink_parity", "echo", "neg", "greedy" };
	uint8_t m[SLOT_SIZE];
	uint64_t x = 0x9e3779b97f4a7c15ull;
	uint64_t kinds = 0;

	(void)state;
	for (int i = 0; i < 20000; i++) {
		uint32_t len;
		int32_t st;

		for (uint32_t j = 0; j < SLOT_SIZE; j++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			m[j] = (uint8_t)x;
		}
		/* mostly plausible headers, so the deeper checks are reached */
		if (x % 8 != 0)
			ql_rpc_put_u32(m, QL_RPC_MAGIC_REQUEST);
		if (x % 4 != 1)
			ql_rpc_put_u32(m + 4, ql_rpc_fnv1a(names[(x >> 8) % 5]));
		len = (uint32_t)((x >> 20) % (CAP + 8));
		if (x % 3 == 0)
			ql_rpc_put_u32(m + 8, len >= 24 ? (uint32_t)((x >> 40) % (len - 23)) : 0);
		if ((x >> 12) % 16 == 0)
			len = (uint32_t)(x >> 32); /* a wild slot length */
		st = serve_and_compare(m, len);
		kinds |= 1ull << (st + 16 < 64 && st + 16 >= 0 ? st + 16 : 63);
	}
	/* every protocol status was reached, and success */
	for (int s = QL_RPC_E_INTERNAL; s <= 0; s++)
		assert_true(kinds & (1ull << (s + 16)));
	assert_int_equal(sh.st.requests, 20000);
}

static void test_rewritten_slot_changes_nothing(void **state)
{
	uint8_t m[SLOT_SIZE], a[32] = { 0 };
	struct ql_rpc_response r;
	uint32_t n, glen;
	uint8_t *slot;

	(void)state;
	/* The request is copied out of the slot before it is checked: the
	 * body never reads the slot again, so bytes a QCS writes after the
	 * sequence word went up are not what it answers. Shown by serving,
	 * then rewriting: the response stays the first message's. */
	n = build(m, ql_rpc_fnv1a("echo"), a, 32, 5);
	place(m, n, n);
	slot = ring + ql_ring_slot_offset(SLOTS, SLOT_SIZE, sent - 1);
	assert_int_equal(ql_gpu_body_step(&body), 1);
	memset(slot + 16, 0xcc, 56);
	ql_rpc_response_decode(last_resp(&glen), &r);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.result_len, 32);
	assert_int_equal(body.scratch[QL_RPC_HEADER_SIZE], 0);
	/* and the same sequence word seen again is not a new request */
	assert_int_equal(ql_gpu_body_step(&body), 0);
}

static void test_backpressure(void **state)
{
	uint8_t m[SLOT_SIZE];
	uint32_t n;

	(void)state;
	tx_hold = 1;
	n = build(m, ql_rpc_fnv1a("echo"), NULL, 0, 1);
	for (uint32_t i = 0; i < TXN + 2; i++)
		place(m, n, n);
	for (uint32_t i = 0; i < TXN; i++)
		assert_int_equal(ql_gpu_body_step(&body), 1);
	/* every buffer in flight: the next request waits in its slot */
	assert_int_equal(ql_gpu_body_step(&body), 0);
	assert_int_equal(ql_gpu_body_step(&body), 0);
	assert_int_equal(sh.st.requests, TXN);
	tx_hold = 0;
	assert_int_equal(ql_gpu_body_step(&body), 1); /* reaps, then serves */
	assert_int_equal(ql_gpu_body_step(&body), 1);
	assert_int_equal(ql_gpu_body_step(&body), 0);
	assert_int_equal(sh.st.requests, TXN + 2);
	assert_int_equal(sh.st.completed, TXN + 2);
}

static void test_post_failure_stops(void **state)
{
	uint8_t m[SLOT_SIZE];
	uint32_t n;

	(void)state;
	n = build(m, ql_rpc_fnv1a("echo"), NULL, 0, 1);
	place(m, n, n);
	body.tx.fail_post = 1;
	assert_int_equal(ql_gpu_body_step(&body), -EIO);
	/* the run loop stops on it and says why */
	sh.running = 1;
	ql_gpu_body_run(&body);
	assert_int_equal(sh.running, 0);
	assert_int_equal(sh.error, -EIO);
	/* and a healthy one returns on the stop word */
	body.tx.fail_post = 0;
	assert_int_equal(ql_gpu_body_step(&body), 1);
	sh.stop = 1;
	sh.running = 1;
	ql_gpu_body_run(&body);
	assert_int_equal(sh.running, 0);
	assert_int_equal(sh.error, 0);
	assert_true(sh.st.polls >= QL_GPU_STOP_EVERY);
}

/* the hot path: 10 000 requests placed and served */
static int hp_loop(void *arg)
{
	uint8_t m[64], a[32] = { 1, 2, 3 };
	uint32_t n = build(m, ql_rpc_fnv1a("qlink_parity"), a, 32, 1);

	(void)arg;
	for (int i = 0; i < 10000; i++) {
		place(m, n, n);
		if (ql_gpu_body_step(&body) != 1)
			return -1;
	}
	return sh.st.ok >= 10000 ? 0 : -1;
}

static void test_hot_path(void **state)
{
	char why[256];

	(void)state;
	if (hp_check(hp_loop, NULL, why, sizeof(why)))
		fail_msg("%s", why);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_valid_calls_match_cpu, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hostile_requests_match_cpu, setup, teardown),
		cmocka_unit_test_setup_teardown(test_schema_rows_match_cpu, setup, teardown),
		cmocka_unit_test_setup_teardown(test_streams_one_rule, setup, teardown),
		cmocka_unit_test_setup_teardown(test_overrun_caught, setup, teardown),
		cmocka_unit_test_setup_teardown(test_random_messages_match_cpu, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rewritten_slot_changes_nothing, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_backpressure, setup, teardown),
		cmocka_unit_test_setup_teardown(test_post_failure_stops, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hot_path, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
