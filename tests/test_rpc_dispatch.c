/* SPDX-License-Identifier: MIT */
/*
 * ql_rpc_dispatch() against bad input: every malformed request gets the
 * right protocol status, the request id and timestamp echoed, a response
 * always, and no access outside the message or the response buffer; a
 * randomized run of garbage and near-valid messages with exactly sized heap
 * buffers (ASan sees any overrun; without ASan, guard bytes do); frame
 * handlers (the frame checked after the call, every broken frame replaced,
 * refused messages never reaching one, the canary of the guarded variant);
 * the function table; and the hot-path promise: no allocation or lock (counted
 * by interposing malloc and pthread locks here) and no system call (a child
 * in seccomp strict mode).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "qlink/rpc.h"
#include "rpc/dispatch_int.h"

#if defined(__SANITIZE_ADDRESS__)
#define RD_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RD_ASAN 1
#endif
#endif
#ifndef RD_ASAN
#define RD_ASAN 0
#endif

#define RID 0x11223344u
#define PTP 0xa1b2c3d4e5f60718ull

/* ---- handlers --------------------------------------------------------- */

static int handler_calls;

static int32_t add(int32_t a, int32_t b, int32_t *sum)
{
	handler_calls++;
	*sum = (int32_t)((uint32_t)a + (uint32_t)b);
	return 0;
}
QL_RPC_FN(add, QL_ARG_I32, QL_ARG_I32, QL_RES_I32);

/* returns a = 0: ok, > 0: that handler status, < 0: an internal failure */
static int32_t fail_with(int32_t a, uint8_t *r)
{
	handler_calls++;
	*r = 1;
	return a;
}
QL_RPC_FN(fail_with, QL_ARG_I32, QL_RES_U8);

static int32_t big_result(uint8_t x, uint8_t *r)
{
	handler_calls++;
	memset(r, x, 200);
	return 0;
}
QL_RPC_FN(big_result, QL_ARG_U8, QL_RES_U8_ARRAY(200));

/* raw: echo every argument byte */
static int32_t echo(struct ql_rpc_in *in, struct ql_rpc_out *out, void *ctx)
{
	size_t n = ql_rpc_in_left(in);

	handler_calls++;
	ql_rpc_write_bytes(out, ql_rpc_in_view(in, n), n);
	return 0;
}

/* raw: reads a u32 count, then that many bytes, and echoes their sum */
static int32_t counted_sum(struct ql_rpc_in *in, struct ql_rpc_out *out, void *ctx)
{
	uint32_t n = ql_rpc_read_u32(in), sum = 0;
	const uint8_t *p = ql_rpc_in_view(in, n);

	handler_calls++;
	for (uint32_t i = 0; p && i < n; i++)
		sum += p[i];
	ql_rpc_write_u32(out, sum);
	return 0;
}

/* raw: writes as many bytes as its u32 argument says, without checking */
static int32_t spew(struct ql_rpc_in *in, struct ql_rpc_out *out, void *ctx)
{
	uint32_t n = ql_rpc_read_u32(in);

	handler_calls++;
	for (uint32_t i = 0; i < n && !out->err; i++)
		ql_rpc_write_u8(out, (uint8_t)i);
	return 0;
}

/* raw with a schema, but writes fewer results than declared */
static int32_t short_writer(struct ql_rpc_in *in, struct ql_rpc_out *out, void *ctx)
{
	handler_calls++;
	ql_rpc_read_i32(in);
	ql_rpc_write_u8(out, 1);
	return 0;
}

static const struct ql_rpc_schema short_writer_schema = {
	.nargs = 1,
	.nresults = 1,
	.args = { { QL_RPC_TYPE_INT32, { 0 }, 4, 1 } },
	.results = { { QL_RPC_TYPE_INT32, { 0 }, 4, 1 } },
};

/*
 * frame: what it does is chosen by its first argument byte (mode; 0 when
 * there are no arguments). Every mode stays within resp[0..resp_cap).
 */
enum {
	FM_OK,	       /* status 0, results = the arguments (result_len = arg_len) */
	FM_MAGIC,      /* the request's magic in the response */
	FM_TOO_LONG,   /* result_len one more than fits */
	FM_ID,	       /* request_id not echoed */
	FM_TS,	       /* ptp_timestamp not echoed */
	FM_NOTHING,    /* writes nothing, returns 0 */
	FM_NEG_RET,    /* a good frame, but returns -1 */
	FM_POS_RET,    /* garbage in resp, returns 3 */
	FM_STATUS_RES, /* status 5 with results */
	FM_NEG_STATUS, /* status -4 (as CUDA-QX's decoders write), no results */
	FM_MODES,
};

static size_t frame_req_len, frame_resp_cap;

static int32_t frame(const uint8_t *req, size_t req_len, uint8_t *resp, size_t resp_cap, void *ctx)
{
	struct ql_rpc_header h;
	struct ql_rpc_response r;
	size_t n = req_len - 24, room = resp_cap - 24;
	int mode = n ? req[24] % FM_MODES : FM_OK;

	handler_calls++;
	frame_req_len = req_len;
	frame_resp_cap = resp_cap;
	ql_rpc_header_decode(req, &h);
	if (h.arg_len != n)
		return -100; /* not the frame the header describes */
	if (mode == FM_NOTHING)
		return 0;
	if (mode == FM_POS_RET) {
		memset(resp, 0xee, resp_cap);
		return 3;
	}
	memcpy(resp + 24, req + 24, n < room ? n : room);
	r = (struct ql_rpc_response){ QL_RPC_MAGIC_RESPONSE, 0, (uint32_t)n, h.request_id,
				      h.ptp_timestamp };
	switch (mode) {
	case FM_MAGIC:
		r.magic = QL_RPC_MAGIC_REQUEST;
		break;
	case FM_TOO_LONG:
		r.result_len = (uint32_t)room + 1;
		break;
	case FM_ID:
		r.request_id ^= 1;
		break;
	case FM_TS:
		r.ptp_timestamp ^= 1ull << 40;
		break;
	case FM_STATUS_RES:
		r.status = 5;
		break;
	case FM_NEG_STATUS:
		r.status = -4;
		r.result_len = 0;
		break;
	}
	if (mode != FM_TOO_LONG && r.result_len > room)
		r.result_len = (uint32_t)room; /* what it could write */
	ql_rpc_response_encode(resp, &r);
	return mode == FM_NEG_RET ? -1 : 0;
}

/* ---- harness ---------------------------------------------------------- */

enum { F_ADD, F_FAIL, F_BIG, F_ECHO, F_SUM, F_SPEW, F_SHORT, F_FRAME, F_COUNT };

static struct ql_rpc_table *table;
static uint32_t ids[F_COUNT];

static int setup(void **state)
{
	struct ql_rpc_function fns[F_COUNT] = {
		[F_ADD] = QL_RPC_FUNCTION(add),
		[F_FAIL] = QL_RPC_FUNCTION(fail_with),
		[F_BIG] = QL_RPC_FUNCTION(big_result),
		[F_ECHO] = QL_RPC_RAW_FUNCTION("echo", echo, NULL),
		[F_SUM] = QL_RPC_RAW_FUNCTION("counted_sum", counted_sum, NULL),
		[F_SPEW] = QL_RPC_RAW_FUNCTION("spew", spew, NULL),
		[F_SHORT] = { .name = "short_writer",
			      .id = ql_rpc_fnv1a("short_writer"),
			      .fn = short_writer,
			      .schema = &short_writer_schema },
		[F_FRAME] = QL_RPC_FRAME_FUNCTION("frame", frame, NULL),
	};

	if (ql_rpc_table_create(F_COUNT, &table))
		return -1;
	for (int i = 0; i < F_COUNT; i++) {
		if (ql_rpc_table_add(table, &fns[i]) != i)
			return -1;
		ids[i] = fns[i].id;
	}
	return 0;
}

static int teardown(void **state)
{
	ql_rpc_table_destroy(table);
	return 0;
}

/* An exactly sized heap message: header (magic, id, arg_len) + args,
 * total length len (args beyond len are cut, missing ones zero). */
static uint8_t *make_msg(uint32_t magic, uint32_t id, uint32_t arg_len, const void *args,
			 size_t nargs, size_t len)
{
	uint8_t *m = malloc(len ? len : 1), full[512] = { 0 };
	struct ql_rpc_header h = { magic, id, arg_len, RID, PTP };

	assert_non_null(m);
	assert_true(24 + nargs <= sizeof(full));
	ql_rpc_header_encode(full, &h);
	if (nargs)
		memcpy(full + 24, args, nargs);
	memcpy(m, full, len);
	return m;
}

struct result {
	int32_t ret;
	size_t len;
	struct ql_rpc_response r;
	struct ql_rpc_dispatch_info info;
	uint8_t resp[256];
};

/* Guard bytes after the response buffer catch overruns without ASan; with
 * ASan the buffer is exactly sized and ASan catches them. */
#define GUARD (RD_ASAN ? 0 : 32)

/* Dispatch into a response buffer of exactly resp_cap bytes, check the
 * invariants every response has, and copy it out. */
static void run(const uint8_t *msg, size_t msg_len, size_t resp_cap, struct result *res)
{
	uint8_t *resp = malloc(resp_cap + GUARD);

	assert_non_null(resp);
	assert_true(resp_cap <= sizeof(res->resp));
	memset(resp, 0xcc, resp_cap + GUARD);
	memset(&res->info, 0x5a, sizeof(res->info));
	res->len = 12345;
	res->ret = ql_rpc_dispatch(table, msg, msg_len, resp, resp_cap, &res->len, &res->info);
	for (int i = 0; i < GUARD; i++)
		assert_int_equal(resp[resp_cap + i], 0xcc);
	assert_true(res->len >= 24 && res->len <= resp_cap);
	ql_rpc_response_decode(resp, &res->r);
	assert_int_equal(res->r.magic, QL_RPC_MAGIC_RESPONSE);
	assert_int_equal(res->r.status, res->ret);
	assert_int_equal(res->info.status, res->ret);
	assert_int_equal(res->r.result_len, res->len - 24);
	assert_int_equal(res->info.result_len, res->r.result_len);
	if (res->ret != 0)
		assert_int_equal(res->r.result_len, 0);
	assert_int_equal(res->info.kind == QL_RPC_ERR_NONE, res->ret == 0);
	memcpy(res->resp, resp, resp_cap);
	free(resp);
}

static void expect(const struct result *res, int32_t status, enum ql_rpc_err_kind kind, bool echoed)
{
	assert_int_equal(res->ret, status);
	assert_int_equal(res->info.kind, kind);
	if (echoed) {
		assert_int_equal(res->r.request_id, RID);
		assert_true(res->r.ptp_timestamp == PTP);
		assert_int_equal(res->info.request_id, RID);
	} else {
		assert_int_equal(res->r.request_id, 0);
		assert_true(res->r.ptp_timestamp == 0);
	}
}

/* ---- the cases -------------------------------------------------------- */

static void test_success_and_echo(void **state)
{
	uint8_t args[8];
	struct result res;
	uint8_t *m;

	ql_rpc_put_i32(args, 40);
	ql_rpc_put_i32(args + 4, 2);
	m = make_msg(QL_RPC_MAGIC_REQUEST, ids[F_ADD], 8, args, 8, 32);
	run(m, 32, 64, &res);
	expect(&res, 0, QL_RPC_ERR_NONE, true);
	assert_int_equal(res.len, 28);
	assert_int_equal(ql_rpc_get_i32(res.resp + 24), 42);
	assert_int_equal(res.info.index, F_ADD);
	assert_int_equal(res.info.function_id, ids[F_ADD]);
	assert_int_equal(res.info.arg_len, 8);
	/* the response bytes exactly, as a peer sees them */
	assert_memory_equal(res.resp,
			    "\x53\x51\x55\x43\x00\x00\x00\x00\x04\x00\x00\x00\x44\x33\x22\x11"
			    "\x18\x07\xf6\xe5\xd4\xc3\xb2\xa1\x2a\x00\x00\x00",
			    28);
	/* exactly enough response room */
	run(m, 32, 28, &res);
	expect(&res, 0, QL_RPC_ERR_NONE, true);
	free(m);
	/* a message in a bigger slot: msg_len is the slot, arg_len says what counts */
	m = make_msg(QL_RPC_MAGIC_REQUEST, ids[F_ADD], 8, args, 8, 200);
	run(m, 200, 64, &res);
	expect(&res, 0, QL_RPC_ERR_NONE, true);
	free(m);
}

static void test_short(void **state)
{
	uint8_t args[8] = { 0 };
	struct result res;

	for (size_t len = 0; len < 24; len++) {
		uint8_t *m = make_msg(QL_RPC_MAGIC_REQUEST, ids[F_ADD], 8, args, 8, len);

		run(m, len, 64, &res);
		expect(&res, QL_RPC_E_SHORT, QL_RPC_ERR_SHORT, false);
		assert_int_equal(res.info.index, -1);
		assert_int_equal(res.len, 24);
		free(m);
	}
	run(NULL, 0, 24, &res);
	expect(&res, QL_RPC_E_SHORT, QL_RPC_ERR_SHORT, false);
	run(NULL, 100, 24, &res);
	expect(&res, QL_RPC_E_SHORT, QL_RPC_ERR_SHORT, false);
}

static void test_bad_magic(void **state)
{
	static const uint32_t bad[] = { 0, QL_RPC_MAGIC_RESPONSE, 0x52515543, 0x43555150,
					0xffffffff };
	uint8_t args[8] = { 0 };
	struct result res;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint8_t *m = make_msg(bad[i], ids[F_ADD], 8, args, 8, 32);

		handler_calls = 0;
		run(m, 32, 64, &res);
		expect(&res, QL_RPC_E_BAD_MAGIC, QL_RPC_ERR_BAD_MAGIC, true);
		assert_int_equal(handler_calls, 0);
		free(m);
	}
}

static void test_bad_length(void **state)
{
	static const uint32_t lens[] = { 9, 100, 0x7fffffff, 0xffffffe8, 0xffffffff };
	uint8_t args[8] = { 0 };
	struct result res;

	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		uint8_t *m = make_msg(QL_RPC_MAGIC_REQUEST, ids[F_ECHO], lens[i], args, 8, 32);

		handler_calls = 0;
		run(m, 32, 64, &res);
		expect(&res, QL_RPC_E_BAD_LENGTH, QL_RPC_ERR_BAD_LENGTH, true);
		assert_int_equal(handler_calls, 0);
		free(m);
	}
	/* header only, arg_len 1 */
	uint8_t *m = make_msg(QL_RPC_MAGIC_REQUEST, ids[F_ECHO], 1, NULL, 0, 24);
	run(m, 24, 64, &res);
	expect(&res, QL_RPC_E_BAD_LENGTH, QL_RPC_ERR_BAD_LENGTH, true);
	free(m);
}

static void test_unknown_function(void **state)
{
	uint8_t args[8] = { 0 };
	struct result res;
	uint8_t *m;

	m = make_msg(QL_RPC_MAGIC_REQUEST, ql_rpc_fnv1a("nope"), 8, args, 8, 32);
	run(m, 32, 64, &res);
	expect(&res, QL_RPC_E_UNKNOWN_FUNCTION, QL_RPC_ERR_UNKNOWN_FUNCTION, true);
	assert_int_equal(res.info.index, -1);
	assert_int_equal(res.info.function_id, ql_rpc_fnv1a("nope"));
	/* no table at all */
	assert_int_equal(ql_rpc_dispatch(NULL, m, 32, res.resp, 64, &res.len, NULL),
			 QL_RPC_E_UNKNOWN_FUNCTION);
	free(m);
}

static void test_args_mismatch(void **state)
{
	uint8_t args[16] = { 0 };
	struct result res;

	for (uint32_t n = 0; n <= 16; n++) {
		uint8_t *m;

		if (n == 8)
			continue;
		m = make_msg(QL_RPC_MAGIC_REQUEST, ids[F_ADD], n, args, n, 24 + n);
		handler_calls = 0;
		run(m, 24 + n, 64, &res);
		expect(&res, QL_RPC_E_ARGS_MISMATCH, QL_RPC_ERR_ARGS_MISMATCH, true);
		assert_int_equal(res.info.index, F_ADD);
		assert_int_equal(handler_calls, 0); /* rejected before the handler */
		free(m);
	}
}

/* a raw handler that reads past its arguments */
static void test_raw_reads_past_args(void **state)
{
	uint8_t args[8] = { 10, 0, 0, 0, 1, 2, 3, 4 };
	struct result res;
	uint8_t *m;

	m = make_msg(QL_RPC_MAGIC_REQUEST, ids[F_SUM], 8, args, 8, 32);
	run(m, 32, 64, &res);
	expect(&res, QL_RPC_E_ARGS_MISMATCH, QL_RPC_ERR_ARGS_MISMATCH, true);
	free(m);
	/* bytes beyond arg_len in the slot are not the handler's to read */
	args[0] = 4;
	m = make_msg(QL_RPC_MAGIC_REQUEST, ids[F_SUM], 7, args, 8, 32);
	run(m, 32, 64, &res);
	expect(&res, QL_RPC_E_ARGS_MISMATCH, QL_RPC_ERR_ARGS_MISMATCH, true);
	free(m);
	m = make_msg(QL_RPC_MAGIC_REQUEST, ids[F_SUM], 8, args, 8, 32);
	run(m, 32, 64, &res);
	expect(&res, 0, QL_RPC_ERR_NONE, true);
	assert_int_equal(ql_rpc_get_u32(res.resp + 24), 10);
	free(m);
}

static void test_handler_errors(void **state)
{
	uint8_t args[4];
	struct result res;
	uint8_t *m;

	ql_rpc_put_i32(args, 0);
	m = make_msg(QL_RPC_MAGIC_REQUEST, ids[F_FAIL], 4, args, 4, 28);
	run(m, 28, 64, &res);
	expect(&res, 0, QL_RPC_ERR_NONE, true);
	assert_int_equal(res.len, 25);
	free(m);

	ql_rpc_put_i32(args, 42);
	m = make_msg(QL_RPC_MAGIC_REQUEST, ids[F_FAIL], 4, args, 4, 28);
	run(m, 28, 64, &res);
	expect(&res, 42, QL_RPC_ERR_HANDLER, true);
	assert_int_equal(res.len, 24);
	assert_int_equal(res.info.index, F_FAIL);
	free(m);

	ql_rpc_put_i32(args, INT32_MAX);
	m = make_msg(QL_RPC_MAGIC_REQUEST, ids[F_FAIL], 4, args, 4, 28);
	run(m, 28, 64, &res);
	expect(&res, INT32_MAX, QL_RPC_ERR_HANDLER, true);
	free(m);

	/* negative returns never leak onto the wire as protocol codes */
	for (int32_t v = -1; v >= -8; v--) {
		ql_rpc_put_i32(args, v);
		m = make_msg(QL_RPC_MAGIC_REQUEST, ids[F_FAIL], 4, args, 4, 28);
		run(m, 28, 64, &res);
		expect(&res, QL_RPC_E_INTERNAL, QL_RPC_ERR_INTERNAL, true);
		free(m);
	}
	ql_rpc_put_i32(args, INT32_MIN);
	m = make_msg(QL_RPC_MAGIC_REQUEST, ids[F_FAIL], 4, args, 4, 28);
	run(m, 28, 64, &res);
	expect(&res, QL_RPC_E_INTERNAL, QL_RPC_ERR_INTERNAL, true);
	free(m);
}

static void test_result_overflow(void **state)
{
	uint8_t args[4] = { 0x77 };
	struct result res;
	uint8_t *m;

	/* typed: 200 result bytes never fit 24 + 100; the handler is not run */
	m = make_msg(QL_RPC_MAGIC_REQUEST, ids[F_BIG], 1, args, 1, 25);
	handler_calls = 0;
	run(m, 25, 124, &res);
	expect(&res, QL_RPC_E_RESULT_OVERFLOW, QL_RPC_ERR_RESULT_OVERFLOW, true);
	assert_int_equal(handler_calls, 0);
	run(m, 25, 223, &res);
	expect(&res, QL_RPC_E_RESULT_OVERFLOW, QL_RPC_ERR_RESULT_OVERFLOW, true);
	run(m, 25, 224, &res); /* exactly enough */
	expect(&res, 0, QL_RPC_ERR_NONE, true);
	assert_int_equal(res.resp[223], 0x77);
	free(m);

	/* raw: writes 100 into room for 50 (the guard bytes stay intact) */
	ql_rpc_put_u32(args, 100);
	m = make_msg(QL_RPC_MAGIC_REQUEST, ids[F_SPEW], 4, args, 4, 28);
	run(m, 28, 74, &res);
	expect(&res, QL_RPC_E_RESULT_OVERFLOW, QL_RPC_ERR_RESULT_OVERFLOW, true);
	run(m, 28, 124, &res);
	expect(&res, 0, QL_RPC_ERR_NONE, true);
	assert_int_equal(res.len, 124);
	run(m, 28, 24, &res); /* header only: even one byte overflows */
	expect(&res, QL_RPC_E_RESULT_OVERFLOW, QL_RPC_ERR_RESULT_OVERFLOW, true);
	free(m);
}

static void test_schema_broken_by_handler(void **state)
{
	uint8_t args[4] = { 0 };
	struct result res;
	uint8_t *m;

	m = make_msg(QL_RPC_MAGIC_REQUEST, ids[F_SHORT], 4, args, 4, 28);
	run(m, 28, 64, &res);
	expect(&res, QL_RPC_E_INTERNAL, QL_RPC_ERR_INTERNAL, true);
	assert_int_equal(res.info.index, F_SHORT);
	free(m);
}

static void test_resp_too_small(void **state)
{
	uint8_t args[8] = { 0 }, resp[24 + 32];
	struct ql_rpc_dispatch_info info;
	uint8_t *m = make_msg(QL_RPC_MAGIC_REQUEST, ids[F_ADD], 8, args, 8, 32);
	size_t len = 99;

	memset(resp, 0xcc, sizeof(resp));
	assert_int_equal(ql_rpc_dispatch(table, m, 32, resp, 23, &len, &info), QL_RPC_E_INTERNAL);
	assert_int_equal(len, 0);
	assert_int_equal(info.kind, QL_RPC_ERR_INTERNAL);
	for (size_t i = 0; i < sizeof(resp); i++)
		assert_int_equal(resp[i], 0xcc);
	assert_int_equal(ql_rpc_dispatch(table, m, 32, NULL, 64, &len, NULL), QL_RPC_E_INTERNAL);
	/* info and resp_len are optional */
	assert_int_equal(ql_rpc_dispatch(table, m, 32, resp, 28, NULL, NULL), 0);
	free(m);
}

static void test_raw_echo_any_length(void **state)
{
	uint8_t args[200];
	struct result res;

	for (size_t i = 0; i < sizeof(args); i++)
		args[i] = (uint8_t)(i * 7);
	for (uint32_t n = 0; n <= 200; n += 25) {
		uint8_t *m = make_msg(QL_RPC_MAGIC_REQUEST, ids[F_ECHO], n, args, n, 24 + n);

		run(m, 24 + n, 24 + 200, &res);
		expect(&res, 0, QL_RPC_ERR_NONE, true);
		assert_int_equal(res.len, 24 + n);
		assert_memory_equal(res.resp + 24, args, n);
		free(m);
	}
}

/* ---- frame handlers ----------------------------------------------------- */

/* A request for the frame function: mode, then n - 1 more argument bytes. */
static uint8_t *frame_msg(int mode, uint32_t n, size_t len)
{
	uint8_t args[256];

	for (uint32_t i = 0; i < sizeof(args); i++)
		args[i] = (uint8_t)(i * 13 + 1);
	args[0] = (uint8_t)mode;
	return make_msg(QL_RPC_MAGIC_REQUEST, ids[F_FRAME], n, args, n, len);
}

static void test_frame_ok(void **state)
{
	struct result res;
	uint8_t *m = frame_msg(FM_OK, 50, 24 + 50 + 30); /* a slot longer than the frame */
	int calls = handler_calls;

	run(m, 24 + 50 + 30, 200, &res);
	expect(&res, 0, QL_RPC_ERR_NONE, true);
	assert_int_equal(handler_calls, calls + 1);
	assert_int_equal(res.info.index, F_FRAME);
	/* the handler saw the frame (header + arg_len), not the slot, and the
	 * whole response capacity */
	assert_int_equal(frame_req_len, 24 + 50);
	assert_int_equal(frame_resp_cap, 200);
	assert_int_equal(res.len, 24 + 50);
	assert_int_equal(res.r.result_len, 50);
	assert_memory_equal(res.resp + 24, m + 24, 50);
	free(m);

	/* no arguments: an empty result */
	m = frame_msg(FM_OK, 0, 24);
	run(m, 24, 24, &res);
	expect(&res, 0, QL_RPC_ERR_NONE, true);
	assert_int_equal(res.len, 24);
	free(m);

	/* results filling the capacity exactly */
	m = frame_msg(FM_OK, 100, 24 + 100);
	run(m, 24 + 100, 24 + 100, &res);
	expect(&res, 0, QL_RPC_ERR_NONE, true);
	assert_int_equal(res.len, 24 + 100);
	free(m);
}

/* Each broken frame is replaced by an internal-error response. */
static void test_frame_post_checks(void **state)
{
	const int modes[] = { FM_MAGIC, FM_TOO_LONG, FM_ID, FM_TS, FM_NOTHING, FM_NEG_RET };

	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		uint8_t *m = frame_msg(modes[i], 40, 24 + 40);
		struct result res;
		int calls = handler_calls;

		run(m, 24 + 40, 128, &res);
		if (res.ret != QL_RPC_E_INTERNAL)
			fail_msg("mode %d: status %d", modes[i], res.ret);
		expect(&res, QL_RPC_E_INTERNAL, QL_RPC_ERR_INTERNAL, true);
		assert_int_equal(handler_calls, calls + 1);
		assert_int_equal(res.len, 24);
		free(m);
	}
}

/* A handler that writes no header must not send the buffer's previous
 * response (the dispatcher clears the header first). */
static void test_frame_stale_header(void **state)
{
	uint8_t *ok = frame_msg(FM_OK, 8, 32), *nothing = frame_msg(FM_NOTHING, 8, 32);
	uint8_t resp[64];
	size_t len;

	assert_int_equal(ql_rpc_dispatch(table, ok, 32, resp, sizeof(resp), &len, NULL), 0);
	assert_int_equal(len, 32);
	/* same request_id and timestamp: the old header would pass every check */
	assert_int_equal(ql_rpc_dispatch(table, nothing, 32, resp, sizeof(resp), &len, NULL),
			 QL_RPC_E_INTERNAL);
	assert_int_equal(len, 24);
	free(ok);
	free(nothing);
}

/* A frame's own status: a positive return, or any status written in the
 * frame, negative included; never with results. */
static void test_frame_status(void **state)
{
	struct result res;
	uint8_t *m = frame_msg(FM_POS_RET, 16, 24 + 16);

	run(m, 24 + 16, 128, &res);
	expect(&res, 3, QL_RPC_ERR_HANDLER, true);
	assert_int_equal(res.len, 24);
	free(m);

	m = frame_msg(FM_STATUS_RES, 16, 24 + 16);
	run(m, 24 + 16, 128, &res);
	expect(&res, 5, QL_RPC_ERR_HANDLER, true);
	assert_int_equal(res.len, 24); /* run() checked result_len 0 in the header */
	free(m);

	m = frame_msg(FM_NEG_STATUS, 16, 24 + 16);
	run(m, 24 + 16, 128, &res);
	expect(&res, -4, QL_RPC_ERR_HANDLER, true);
	assert_int_equal(res.len, 24);
	free(m);
}

/* Messages that fail a header check never reach the frame handler. */
static void test_frame_pre_checks(void **state)
{
	uint8_t args[16] = { FM_OK };
	struct result res;
	int calls = handler_calls;
	uint8_t *m;

	m = make_msg(0xdeadbeef, ids[F_FRAME], 16, args, 16, 24 + 16);
	run(m, 24 + 16, 128, &res);
	expect(&res, QL_RPC_E_BAD_MAGIC, QL_RPC_ERR_BAD_MAGIC, true);
	free(m);
	m = make_msg(QL_RPC_MAGIC_REQUEST, ids[F_FRAME], 17, args, 16, 24 + 16);
	run(m, 24 + 16, 128, &res);
	expect(&res, QL_RPC_E_BAD_LENGTH, QL_RPC_ERR_BAD_LENGTH, true);
	free(m);
	m = make_msg(QL_RPC_MAGIC_REQUEST, ids[F_FRAME] ^ 1, 16, args, 16, 24 + 16);
	run(m, 24 + 16, 128, &res);
	expect(&res, QL_RPC_E_UNKNOWN_FUNCTION, QL_RPC_ERR_UNKNOWN_FUNCTION, true);
	free(m);
	m = make_msg(QL_RPC_MAGIC_REQUEST, ids[F_FRAME], 0, args, 0, 20);
	run(m, 20, 128, &res);
	expect(&res, QL_RPC_E_SHORT, QL_RPC_ERR_SHORT, false);
	free(m);
	assert_int_equal(handler_calls, calls);
}

/* frame_overrun: a good header, and one byte written at resp[resp_cap - 1]
 * (ctx NULL: allowed) or at resp[resp_cap] (ctx non-NULL: past the end). */
static int32_t frame_overrun(const uint8_t *req, size_t req_len, uint8_t *resp, size_t resp_cap,
			     void *ctx)
{
	(void)req_len;
	ql_rpc_frame_respond(req, resp, 0, 0);
	resp[ctx ? resp_cap : resp_cap - 1] = 0x42;
	return 0;
}

/* The daemon's guarded dispatch: the canary right past resp_cap catches a
 * frame handler writing past its capacity. */
static void test_frame_guarded(void **state)
{
	struct ql_rpc_table *t;
	const char *name = NULL;
	uint8_t args[4] = { FM_OK, 1, 2, 3 }, resp[64 + QL__RPC_CANARY_SIZE];
	struct ql_rpc_dispatch_info info;
	bool overrun = true;
	size_t len;
	uint8_t *m;

	assert_int_equal(ql_rpc_table_create(4, &t), 0);
	assert_int_equal(ql_rpc_table_add(t, &QL_RPC_FRAME_FUNCTION("fits", frame_overrun, NULL)),
			 0);
	assert_int_equal(
		ql_rpc_table_add(t, &QL_RPC_FRAME_FUNCTION("overruns", frame_overrun, (void *)1)),
		1);
	assert_int_equal(ql_rpc_table_add(t, &QL_RPC_FRAME_FUNCTION("frame", frame, NULL)), 2);

	m = make_msg(QL_RPC_MAGIC_REQUEST, ql_rpc_fnv1a("fits"), 4, args, 4, 28);
	assert_int_equal(ql__rpc_dispatch_guarded(t, m, 28, resp, 64, &len, &info, &name, &overrun),
			 0);
	assert_false(overrun);
	assert_string_equal(name, "fits");
	free(m);

	m = make_msg(QL_RPC_MAGIC_REQUEST, ql_rpc_fnv1a("overruns"), 4, args, 4, 28);
	assert_int_equal(ql__rpc_dispatch_guarded(t, m, 28, resp, 64, &len, &info, &name, &overrun),
			 QL_RPC_E_INTERNAL);
	assert_true(overrun);
	assert_string_equal(name, "overruns");
	assert_int_equal(info.kind, QL_RPC_ERR_INTERNAL);
	assert_int_equal(len, 24);
	assert_int_equal(ql_rpc_get_u32(resp + 12), RID);
	free(m);

	/* a well-behaved frame through the guarded path, and a refused one */
	m = make_msg(QL_RPC_MAGIC_REQUEST, ql_rpc_fnv1a("frame"), 4, args, 4, 28);
	assert_int_equal(ql__rpc_dispatch_guarded(t, m, 28, resp, 64, &len, &info, &name, &overrun),
			 0);
	assert_false(overrun);
	assert_int_equal(len, 28);
	assert_memory_equal(resp + 24, args, 4);
	free(m);
	name = NULL;
	m = make_msg(0, ql_rpc_fnv1a("overruns"), 4, args, 4, 28);
	assert_int_equal(ql__rpc_dispatch_guarded(t, m, 28, resp, 64, &len, &info, &name, &overrun),
			 QL_RPC_E_BAD_MAGIC);
	assert_false(overrun);
	assert_null(name); /* no handler was entered */
	free(m);
	ql_rpc_table_destroy(t);
}

/* ---- the table -------------------------------------------------------- */

static int32_t nop(struct ql_rpc_in *in, struct ql_rpc_out *out, void *ctx)
{
	return 0;
}

static void test_table(void **state)
{
	struct ql_rpc_table *t;
	struct ql_rpc_function f = { .fn = nop };
	char name[32];

	/* exactly one of fn and frame; a frame function takes no schema */
	assert_int_equal(ql_rpc_table_add(table, &(struct ql_rpc_function){ .name = "neither" }),
			 -EINVAL);
	assert_int_equal(ql_rpc_table_add(table, &(struct ql_rpc_function){ .name = "both",
									    .fn = nop,
									    .frame = frame }),
			 -EINVAL);
	assert_int_equal(
		ql_rpc_table_add(table,
				 &(struct ql_rpc_function){ .name = "frame_schema",
							    .frame = frame,
							    .schema = &short_writer_schema }),
		-EINVAL);

	assert_int_equal(ql_rpc_table_create(0, &t), -EINVAL);
	assert_null(t);
	assert_int_equal(ql_rpc_table_create(65537, &t), -EINVAL);
	assert_int_equal(ql_rpc_table_create(1000, &t), 0);
	for (int i = 0; i < 1000; i++) {
		snprintf(name, sizeof(name), "fn_%d", i);
		f.name = name;
		f.id = ql_rpc_fnv1a(name);
		assert_int_equal(ql_rpc_table_add(t, &f), i); /* stable dense index */
	}
	assert_int_equal(ql_rpc_table_count(t), 1000);
	f.name = "one_more";
	f.id = ql_rpc_fnv1a("one_more");
	assert_int_equal(ql_rpc_table_add(t, &f), -ENOSPC);
	assert_int_equal(ql_rpc_table_find(t, f.id), -1);
	for (int i = 0; i < 1000; i++) {
		snprintf(name, sizeof(name), "fn_%d", i);
		assert_int_equal(ql_rpc_table_find(t, ql_rpc_fnv1a(name)), i);
		assert_string_equal(ql_rpc_table_get(t, i)->name, name); /* copied */
		assert_ptr_equal(ql_rpc_table_lookup(t, ql_rpc_fnv1a(name)),
				 ql_rpc_table_get(t, i));
	}
	/* misses terminate in a full table */
	for (uint32_t id = 0; id < 100000; id++)
		if (ql_rpc_table_find(t, id) >= 0)
			assert_int_equal(ql_rpc_table_get(t, ql_rpc_table_find(t, id))->id, id);
	assert_null(ql_rpc_table_get(t, 1000));
	assert_null(ql_rpc_table_get(t, -1));
	ql_rpc_table_destroy(t);

	assert_int_equal(ql_rpc_table_create(4, &t), 0);
	f.name = "a";
	f.id = 1;
	assert_int_equal(ql_rpc_table_add(t, &f), 0);
	f.name = "b"; /* same id, other name */
	assert_int_equal(ql_rpc_table_add(t, &f), -EEXIST);
	f.name = "a"; /* same name, other id */
	f.id = 2;
	assert_int_equal(ql_rpc_table_add(t, &f), -EEXIST);
	f.name = NULL;
	f.id = 3;
	assert_int_equal(ql_rpc_table_add(t, &f), -EINVAL);
	f.name = "c";
	f.fn = NULL;
	assert_int_equal(ql_rpc_table_add(t, &f), -EINVAL);
	f.fn = nop;
	assert_int_equal(ql_rpc_table_add(t, &f), 1);
	/* ids colliding in the slot array still resolve */
	f.name = "d";
	f.id = 1 + 8 * 16;
	assert_int_equal(ql_rpc_table_add(t, &f), 2);
	assert_int_equal(ql_rpc_table_find(t, 1), 0);
	assert_int_equal(ql_rpc_table_find(t, 3), 1);
	assert_int_equal(ql_rpc_table_find(t, 1 + 8 * 16), 2);
	assert_int_equal(ql_rpc_table_count(t), 3);
	ql_rpc_table_destroy(t);
	ql_rpc_table_destroy(NULL);
}

/* ---- randomized ------------------------------------------------------- */

static uint64_t rng_state;

static uint64_t rnd(void)
{
	/* xorshift64*: reproducible from the printed seed */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

#define FUZZ_N 100000

static void test_random_messages(void **state)
{
	unsigned long per_kind[QL_RPC_ERR_KIND_COUNT] = { 0 };
	const char *env = getenv("QL_RPC_FUZZ_SEED");
	uint64_t seed = env ? strtoull(env, NULL, 0) : 0x9e3779b97f4a7c15ull;

	rng_state = seed ? seed : 1;
	for (long i = 0; i < FUZZ_N; i++) {
		size_t msg_len = rnd() % 300, resp_cap = 24 + rnd() % 232;
		uint8_t *msg = malloc(msg_len ? msg_len : 1), *resp = malloc(resp_cap + GUARD);
		struct ql_rpc_dispatch_info info;
		struct ql_rpc_response r;
		uint64_t mode = rnd() % 8;
		size_t len;
		int32_t st;

		assert_true(msg && resp);
		for (size_t j = 0; j < msg_len; j++)
			msg[j] = (uint8_t)rnd();
		/* mostly near-valid: right magic, a known id, plausible lengths */
		if (msg_len >= 24 && mode != 0) {
			struct ql_rpc_header h;

			ql_rpc_header_decode(msg, &h);
			h.magic = QL_RPC_MAGIC_REQUEST;
			if (mode != 1)
				h.function_id = ids[rnd() % F_COUNT];
			switch (mode) {
			case 2:
				h.arg_len = (uint32_t)(msg_len - 24);
				break;
			case 1: /* a random id */
			case 3:
			case 4:
				h.arg_len = (uint32_t)(rnd() % (msg_len - 23));
				break;
			case 5:
				h.arg_len = (uint32_t)(msg_len - 24 + rnd() % 4);
				break;
			case 6: /* the schema's own sizes */
				h.arg_len = (uint32_t)(rnd() % 2 ? 8 : 4);
				if (h.arg_len > msg_len - 24)
					h.arg_len = (uint32_t)(msg_len - 24);
				break;
			}
			ql_rpc_header_encode(msg, &h);
		}
		memset(resp, 0xcc, resp_cap + GUARD);
		st = ql_rpc_dispatch(table, msg, msg_len, resp, resp_cap, &len, &info);

		for (int g = 0; g < GUARD; g++)
			if (resp[resp_cap + g] != 0xcc)
				fail_msg("seed 0x%llx message %ld: wrote past resp_cap",
					 (unsigned long long)seed, i);
		if (len < 24 || len > resp_cap)
			fail_msg("seed 0x%llx message %ld: resp_len %zu", (unsigned long long)seed,
				 i, len);
		ql_rpc_response_decode(resp, &r);
		if (r.magic != QL_RPC_MAGIC_RESPONSE || r.status != st ||
		    r.result_len != len - 24 || (st != 0 && r.result_len != 0) ||
		    info.status != st || (unsigned int)info.kind >= QL_RPC_ERR_KIND_COUNT)
			fail_msg("seed 0x%llx message %ld: inconsistent response (status %d)",
				 (unsigned long long)seed, i, st);
		if (msg_len >= 24 && (r.request_id != ql_rpc_get_u32(msg + 12) ||
				      r.ptp_timestamp != ql_rpc_get_u64(msg + 16)))
			fail_msg("seed 0x%llx message %ld: ids not echoed",
				 (unsigned long long)seed, i);
		if (msg_len < 24 && (r.request_id || r.ptp_timestamp || st != QL_RPC_E_SHORT))
			fail_msg("seed 0x%llx message %ld: short message", (unsigned long long)seed,
				 i);
		per_kind[info.kind]++;
		free(msg);
		free(resp);
	}
	/* the generator reached every path that random input can reach */
	for (int k = 0; k < QL_RPC_ERR_KIND_COUNT; k++)
		if (k != QL_RPC_ERR_HANDLER && k != QL_RPC_ERR_INTERNAL && !per_kind[k])
			fail_msg("seed 0x%llx: no message ended as %s", (unsigned long long)seed,
				 ql_rpc_err_kind_str(k));
}

/* ---- no allocation, no lock, no system call ---------------------------- */

static volatile int counting;
static unsigned long n_alloc, n_lock;

#if !RD_ASAN
/* glibc's own entry points: forwarding needs no dlsym bootstrap */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);

void *malloc(size_t n)
{
	if (counting)
		__atomic_add_fetch(&n_alloc, 1, __ATOMIC_RELAXED);
	return __libc_malloc(n);
}

void *calloc(size_t a, size_t b)
{
	if (counting)
		__atomic_add_fetch(&n_alloc, 1, __ATOMIC_RELAXED);
	return __libc_calloc(a, b);
}

void *realloc(void *p, size_t n)
{
	if (counting)
		__atomic_add_fetch(&n_alloc, 1, __ATOMIC_RELAXED);
	return __libc_realloc(p, n);
}

void free(void *p)
{
	if (counting)
		__atomic_add_fetch(&n_alloc, 1, __ATOMIC_RELAXED);
	__libc_free(p);
}

int pthread_mutex_lock(pthread_mutex_t *m)
{
	static int (*real)(pthread_mutex_t *);

	if (counting)
		__atomic_add_fetch(&n_lock, 1, __ATOMIC_RELAXED);
	if (!real)
		real = (int (*)(pthread_mutex_t *))dlsym(RTLD_NEXT, "pthread_mutex_lock");
	return real(m);
}

int pthread_spin_lock(pthread_spinlock_t *s)
{
	static int (*real)(pthread_spinlock_t *);

	if (counting)
		__atomic_add_fetch(&n_lock, 1, __ATOMIC_RELAXED);
	if (!real)
		real = (int (*)(pthread_spinlock_t *))dlsym(RTLD_NEXT, "pthread_spin_lock");
	return real(s);
}
#endif

/* A fixed mix of good and bad messages, dispatched n times over; returns
 * the number of successful dispatches. Uses only stack memory. */
static long dispatch_mix(long n)
{
	uint8_t msgs[7][64], resp[64];
	size_t lens[7] = { 32, 28, 32, 32, 10, 64, 34 };
	struct ql_rpc_dispatch_info info;
	long ok = 0;

	memset(msgs, 0, sizeof(msgs));
	ql_rpc_header_encode(msgs[0],
			     &(struct ql_rpc_header){ QL_RPC_MAGIC_REQUEST, ids[F_ADD], 8, 1, 2 });
	ql_rpc_header_encode(msgs[1],
			     &(struct ql_rpc_header){ QL_RPC_MAGIC_REQUEST, ids[F_FAIL], 4, 1, 2 });
	msgs[1][24] = 5; /* handler error 5 */
	ql_rpc_header_encode(msgs[2], &(struct ql_rpc_header){ 0, ids[F_ADD], 8, 1, 2 });
	ql_rpc_header_encode(msgs[3],
			     &(struct ql_rpc_header){ QL_RPC_MAGIC_REQUEST, 12345, 8, 1, 2 });
	ql_rpc_header_encode(msgs[5], &(struct ql_rpc_header){ QL_RPC_MAGIC_REQUEST, ids[F_ECHO],
							       40, 1, 2 });
	/* a frame handler answering its 10 arguments (mode byte 0: FM_OK) */
	ql_rpc_header_encode(msgs[6], &(struct ql_rpc_header){ QL_RPC_MAGIC_REQUEST, ids[F_FRAME],
							       10, 1, 2 });
	for (long i = 0; i < n; i++) {
		int k = (int)(i % 7);

		ql_rpc_put_i32(msgs[0] + 24, (int32_t)i);
		if (ql_rpc_dispatch(table, msgs[k], lens[k], resp, sizeof(resp), NULL, &info) == 0)
			ok++;
	}
	return ok;
}

/* messages 0 (ADD), 5 (ECHO) and 6 (FRAME) of every seven succeed */
static long mix_expected_ok(long n)
{
	return n / 7 * 3 + (n % 7 > 0) + (n % 7 > 5);
}

static void test_no_alloc_no_lock(void **state)
{
	void *(*volatile my_malloc)(size_t) = malloc;
	void (*volatile my_free)(void *) = free;
	long ok;

	if (RD_ASAN)
		skip(); /* ASan owns malloc */
	/* the counters see calls made while counting, and only then */
	n_alloc = n_lock = 0;
	counting = 1;
	my_free(my_malloc(16));
	counting = 0;
	my_free(my_malloc(16));
	assert_int_equal(n_alloc, 2);

	n_alloc = n_lock = 0;
	counting = 1;
	ok = dispatch_mix(1000000);
	counting = 0;
	assert_int_equal(ok, mix_expected_ok(1000000));
	if (n_alloc || n_lock)
		fail_msg("dispatch: %lu allocator calls, %lu lock calls", n_alloc, n_lock);
}

static void test_no_syscalls(void **state)
{
	int fds[2], st = 0;
	char res = 0;
	pid_t pid;

	assert_int_equal(pipe(fds), 0);
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		alarm(60);
		if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT, 0, 0, 0))
			_exit(11);
		/* from here on: read, write, exit, sigreturn */
		res = dispatch_mix(200000) == mix_expected_ok(200000) ? 'K' : 'F';
		if (write(fds[1], &res, 1) != 1)
			syscall(SYS_exit, 12);
		syscall(SYS_exit, 0);
	}
	close(fds[1]);
	if (read(fds[0], &res, 1) != 1)
		res = 0;
	close(fds[0]);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	if (WIFSIGNALED(st))
		fail_msg("child killed by signal %d (%s): a system call in dispatch", WTERMSIG(st),
			 WTERMSIG(st) == SIGKILL ? "seccomp" : "other");
	assert_true(WIFEXITED(st));
	if (WEXITSTATUS(st))
		fail_msg("child exit status %d (11: prctl, 12: write)", WEXITSTATUS(st));
	assert_int_equal(res, 'K');
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_success_and_echo),
		cmocka_unit_test(test_short),
		cmocka_unit_test(test_bad_magic),
		cmocka_unit_test(test_bad_length),
		cmocka_unit_test(test_unknown_function),
		cmocka_unit_test(test_args_mismatch),
		cmocka_unit_test(test_raw_reads_past_args),
		cmocka_unit_test(test_handler_errors),
		cmocka_unit_test(test_result_overflow),
		cmocka_unit_test(test_schema_broken_by_handler),
		cmocka_unit_test(test_resp_too_small),
		cmocka_unit_test(test_raw_echo_any_length),
		cmocka_unit_test(test_frame_ok),
		cmocka_unit_test(test_frame_post_checks),
		cmocka_unit_test(test_frame_stale_header),
		cmocka_unit_test(test_frame_status),
		cmocka_unit_test(test_frame_pre_checks),
		cmocka_unit_test(test_frame_guarded),
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_random_messages),
		cmocka_unit_test(test_no_alloc_no_lock),
		cmocka_unit_test(test_no_syscalls),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
