/* SPDX-License-Identifier: MIT */
/*
 * Typed handlers (QL_RPC_FN) and schemas: every payload type marshalled
 * through a generated wrapper and ql_rpc_dispatch(), with the wire bytes
 * written out by hand; multi-argument and multi-result layouts; and schema
 * validation.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "qlink/rpc.h"

/* ---- handlers ---------------------------------------------------------- */

static int32_t not_u8(uint8_t a, uint8_t *r)
{
	*r = (uint8_t)~a;
	return 0;
}
QL_RPC_FN(not_u8, QL_ARG_U8, QL_RES_U8);

static int32_t neg_i32(int32_t a, int32_t *r)
{
	*r = -a;
	return 0;
}
QL_RPC_FN(neg_i32, QL_ARG_I32, QL_RES_I32);

static int32_t inc_u32(uint32_t a, uint32_t *r)
{
	*r = a + 1;
	return 0;
}
QL_RPC_FN(inc_u32, QL_ARG_U32, QL_RES_U32);

static int32_t dbl_i64(int64_t a, int64_t *r)
{
	*r = a * 2;
	return 0;
}
QL_RPC_FN(dbl_i64, QL_ARG_I64, QL_RES_I64);

static int32_t half_f32(float a, float *r)
{
	*r = a / 2;
	return 0;
}
QL_RPC_FN(half_f32, QL_ARG_F32, QL_RES_F32);

static int32_t add_f64(double a, double b, double *r)
{
	*r = a + b;
	return 0;
}
QL_RPC_FN(add_f64, QL_ARG_F64, QL_ARG_F64, QL_RES_F64);

static const uint8_t *rev_seen; /* where the argument pointed */

static int32_t rev_u8(const uint8_t *a, uint8_t *r)
{
	rev_seen = a;
	for (int i = 0; i < 5; i++)
		r[i] = a[4 - i];
	return 0;
}
QL_RPC_FN(rev_u8, QL_ARG_U8_ARRAY(5), QL_RES_U8_ARRAY(5));

static int32_t inc_i32s(const int32_t *a, int32_t *r)
{
	for (int i = 0; i < 4; i++)
		r[i] = a[i] + 1;
	return 0;
}
QL_RPC_FN(inc_i32s, QL_ARG_I32_ARRAY(4), QL_RES_I32_ARRAY(4));

/* the u8 first puts the float array at an odd offset */
static int32_t scale_f32s(uint8_t k, const float *v, float *r)
{
	for (int i = 0; i < 3; i++)
		r[i] = v[i] * k;
	return 0;
}
QL_RPC_FN(scale_f32s, QL_ARG_U8, QL_ARG_F32_ARRAY(3), QL_RES_F32_ARRAY(3));

static int32_t sum_f64s(const double *v, double *sum, uint8_t *n)
{
	*sum = v[0] + v[1];
	*n = 2;
	return 0;
}
QL_RPC_FN(sum_f64s, QL_ARG_F64_ARRAY(2), QL_RES_F64, QL_RES_U8);

static int32_t parity(const uint8_t *bits, uint8_t *out)
{
	uint8_t p = 0;

	for (int i = 0; i < 128; i++)
		p ^= (uint8_t)ql_rpc_bit_get(bits, i);
	*out = p;
	return 0;
}
QL_RPC_FN(parity, QL_ARG_BITS(128), QL_RES_U8);

/* sets every bit, including the 6 unused ones: the wrapper must clear those */
static int32_t invert10(const uint8_t *in, uint8_t *out)
{
	out[0] = (uint8_t)~in[0];
	out[1] = (uint8_t)~in[1];
	return 0;
}
QL_RPC_FN(invert10, QL_ARG_BITS(10), QL_RES_BITS(10));

/* the document's example 2 and example 4 together */
static int32_t decode(const uint8_t *bits, uint32_t num_bits, uint8_t *correction,
		      float *confidence)
{
	uint32_t ones = 0;

	for (uint32_t i = 0; i < num_bits && i < 128; i++)
		ones += (uint32_t)ql_rpc_bit_get(bits, i);
	*correction = (uint8_t)(ones & 1);
	*confidence = (float)ones / 128;
	return 0;
}
QL_RPC_FN(decode, QL_ARG_BITS(128), QL_ARG_U32, QL_RES_U8, QL_RES_F32);

/* example 1: no results */
static int32_t process_count;
static float process_threshold;

static int32_t process(int32_t count, float threshold)
{
	process_count = count;
	process_threshold = threshold;
	return 0;
}
QL_RPC_FN(process, QL_ARG_I32, QL_ARG_F32);

/* the maximum: 8 arguments, 4 results, every shape */
static int32_t everything(uint8_t a, int32_t b, int64_t c, float d, double e, const uint8_t *f,
			  const uint8_t *g, uint32_t h, int64_t *sum, double *fsum, uint8_t *gbits,
			  int32_t *echo)
{
	*sum = a + b + c + f[0] + f[1] + f[2] + (int64_t)h;
	*fsum = d + e;
	*gbits = 0;
	for (int i = 0; i < 9; i++)
		*gbits += (uint8_t)ql_rpc_bit_get(g, i);
	echo[0] = b;
	echo[1] = (int32_t)h;
	return 0;
}
QL_RPC_FN(everything, QL_ARG_U8, QL_ARG_I32, QL_ARG_I64, QL_ARG_F32, QL_ARG_F64, QL_ARG_U8_ARRAY(3),
	  QL_ARG_BITS(9), QL_ARG_U32, QL_RES_I64, QL_RES_F64, QL_RES_U8, QL_RES_I32_ARRAY(2));

static int32_t counted(void *ctx, int32_t x, int32_t *r)
{
	int *calls = ctx;

	(*calls)++;
	if (x < 0)
		return 7; /* a handler error: no results go back */
	*r = x * 10;
	return 0;
}
QL_RPC_FN_CTX(counted, QL_ARG_I32, QL_RES_I32);

/* ---- harness ---------------------------------------------------------- */

static struct ql_rpc_table *table;
static int counted_calls;

static int setup(void **state)
{
	struct ql_rpc_function fns[] = {
		QL_RPC_FUNCTION(not_u8),     QL_RPC_FUNCTION(neg_i32),
		QL_RPC_FUNCTION(inc_u32),    QL_RPC_FUNCTION(dbl_i64),
		QL_RPC_FUNCTION(half_f32),   QL_RPC_FUNCTION(add_f64),
		QL_RPC_FUNCTION(rev_u8),     QL_RPC_FUNCTION(inc_i32s),
		QL_RPC_FUNCTION(scale_f32s), QL_RPC_FUNCTION(sum_f64s),
		QL_RPC_FUNCTION(parity),     QL_RPC_FUNCTION(invert10),
		QL_RPC_FUNCTION(decode),     QL_RPC_FUNCTION(process),
		QL_RPC_FUNCTION(everything), QL_RPC_FUNCTION_CTX(counted, &counted_calls),
	};

	if (ql_rpc_table_create(32, &table))
		return -1;
	for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++)
		if (ql_rpc_table_add(table, &fns[i]) != (int)i)
			return -1;
	return 0;
}

static int teardown(void **state)
{
	ql_rpc_table_destroy(table);
	return 0;
}

struct call {
	int32_t status;
	uint32_t result_len;
	uint8_t resp[256];
	uint8_t *res; /* resp + 24 */
};

/* Send args (arg_len bytes) to name in a message of exactly 24 + arg_len
 * bytes (heap, so ASan sees any overrun) and check the response header. */
static void call(const char *name, const void *args, size_t arg_len, struct call *c)
{
	uint8_t *msg = malloc(24 + arg_len);
	struct ql_rpc_dispatch_info info;
	struct ql_rpc_header h = { QL_RPC_MAGIC_REQUEST, ql_rpc_fnv1a(name), (uint32_t)arg_len,
				   0xabcd0123, 0x0102030405060708ull };
	struct ql_rpc_response r;
	size_t len;
	int32_t st;

	assert_non_null(msg);
	ql_rpc_header_encode(msg, &h);
	if (arg_len)
		memcpy(msg + 24, args, arg_len);
	memset(c->resp, 0xcc, sizeof(c->resp));
	st = ql_rpc_dispatch(table, msg, 24 + arg_len, c->resp, sizeof(c->resp), &len, &info);
	free(msg);
	ql_rpc_response_decode(c->resp, &r);
	assert_int_equal(r.magic, QL_RPC_MAGIC_RESPONSE);
	assert_int_equal(r.status, st);
	assert_int_equal(info.status, st);
	assert_int_equal(r.request_id, 0xabcd0123);
	assert_true(r.ptp_timestamp == 0x0102030405060708ull);
	assert_int_equal(len, 24 + r.result_len);
	assert_int_equal(info.result_len, r.result_len);
	c->status = st;
	c->result_len = r.result_len;
	c->res = c->resp + 24;
}

/* ---- marshalling ------------------------------------------------------- */

static void test_u8(void **state)
{
	struct call c;

	call("not_u8", "\x5a", 1, &c);
	assert_int_equal(c.status, 0);
	assert_int_equal(c.result_len, 1);
	assert_int_equal(c.res[0], 0xa5);
}

static void test_i32(void **state)
{
	struct call c;

	call("neg_i32", "\x05\x00\x00\x00", 4, &c);
	assert_int_equal(c.result_len, 4);
	assert_memory_equal(c.res, "\xfb\xff\xff\xff", 4);
	call("neg_i32", "\x01\x00\x00\x80", 4, &c); /* -(INT32_MIN + 1) */
	assert_memory_equal(c.res, "\xff\xff\xff\x7f", 4);
}

static void test_u32(void **state)
{
	struct call c;

	call("inc_u32", "\xfe\xff\xff\xff", 4, &c);
	assert_memory_equal(c.res, "\xff\xff\xff\xff", 4);
	call("inc_u32", "\xff\x00\x00\x00", 4, &c);
	assert_memory_equal(c.res, "\x00\x01\x00\x00", 4);
	/* u32 travels as TYPE_INT32 */
	assert_int_equal(QL_RPC_SCHEMA(inc_u32)->args[0].type_id, QL_RPC_TYPE_INT32);
}

static void test_i64(void **state)
{
	struct call c;

	call("dbl_i64", "\x01\x00\x00\x00\x00\x00\x00\xc0", 8, &c); /* -2^62 + 1 */
	assert_int_equal(c.result_len, 8);
	assert_memory_equal(c.res, "\x02\x00\x00\x00\x00\x00\x00\x80", 8);
}

static void test_f32(void **state)
{
	struct call c;

	call("half_f32", "\x00\x00\xa0\x3f", 4, &c);	   /* 1.25 */
	assert_memory_equal(c.res, "\x00\x00\x20\x3f", 4); /* 0.625 */
}

static void test_f64(void **state)
{
	struct call c;

	/* 1.5 + -2.5 = -1.0 */
	call("add_f64", "\x00\x00\x00\x00\x00\x00\xf8\x3f\x00\x00\x00\x00\x00\x00\x04\xc0", 16, &c);
	assert_int_equal(c.result_len, 8);
	assert_memory_equal(c.res, "\x00\x00\x00\x00\x00\x00\xf0\xbf", 8);
}

static void test_u8_array(void **state)
{
	uint8_t msg[29], resp[64];
	size_t len;

	/* zero-copy: the handler's pointer is into the message itself */
	ql_rpc_header_encode(msg, &(struct ql_rpc_header){ QL_RPC_MAGIC_REQUEST,
							   ql_rpc_fnv1a("rev_u8"), 5, 1, 2 });
	memcpy(msg + 24, "\x01\x02\x03\x04\x05", 5);
	assert_int_equal(ql_rpc_dispatch(table, msg, sizeof(msg), resp, sizeof(resp), &len, NULL),
			 0);
	assert_ptr_equal(rev_seen, msg + 24);
	assert_int_equal(len, 29);
	assert_memory_equal(resp + 24, "\x05\x04\x03\x02\x01", 5);
}

static void test_i32_array(void **state)
{
	static const uint8_t a[16] = { 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0,
				       0xff, 0xff, 0xff, 0x7e, 1, 2, 3, 4 };
	static const uint8_t want[16] = { 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0x7f, 2, 2, 3, 4 };
	struct call c;

	call("inc_i32s", a, 16, &c);
	assert_int_equal(c.result_len, 16);
	assert_memory_equal(c.res, want, 16);
}

static void test_f32_array_unaligned(void **state)
{
	/* k = 2, v = { 0.5, -1.25, 3 } from offset 25 (odd) */
	static const uint8_t a[13] = { 2,    0x00, 0x00, 0x00, 0x3f, 0x00, 0x00,
				       0xa0, 0xbf, 0x00, 0x00, 0x40, 0x40 };
	static const uint8_t want[12] = { 0x00, 0x00, 0x80, 0x3f, 0x00, 0x00,
					  0x20, 0xc0, 0x00, 0x00, 0xc0, 0x40 };
	struct call c;

	call("scale_f32s", a, 13, &c);
	assert_int_equal(c.status, 0);
	assert_int_equal(c.result_len, 12);
	assert_memory_equal(c.res, want, 12);
}

static void test_f64_array(void **state)
{
	static const uint8_t a[16] = { 0, 0, 0, 0, 0, 0, 0xf8, 0x3f, 0, 0, 0, 0, 0, 0, 0x04, 0x40 };
	struct call c;

	call("sum_f64s", a, 16, &c); /* 1.5 + 2.5 */
	assert_int_equal(c.result_len, 9);
	assert_memory_equal(c.res, "\x00\x00\x00\x00\x00\x00\x10\x40\x02", 9);
}

static void test_bits(void **state)
{
	uint8_t bits[16] = { 0 };
	struct call c;

	call("parity", bits, 16, &c);
	assert_int_equal(c.res[0], 0);
	ql_rpc_bit_set(bits, 127, 1);
	call("parity", bits, 16, &c);
	assert_int_equal(c.res[0], 1);
	ql_rpc_bit_set(bits, 64, 1);
	call("parity", bits, 16, &c);
	assert_int_equal(c.res[0], 0);
	assert_int_equal(QL_RPC_SCHEMA(parity)->args[0].type_id, QL_RPC_TYPE_BIT_PACKED);
	assert_int_equal(QL_RPC_SCHEMA(parity)->args[0].size_bytes, 16);
	assert_int_equal(QL_RPC_SCHEMA(parity)->args[0].num_elements, 128);
}

static void test_bits_result_tail(void **state)
{
	struct call c;

	/* 10 bits 1000000001 LSB first: 0x01 0x02 -> inverted 0xfe 0x01 */
	call("invert10", "\x01\x02", 2, &c);
	assert_int_equal(c.result_len, 2);
	assert_int_equal(c.res[0], 0xfe);
	assert_int_equal(c.res[1], 0x01); /* not 0xfd: unused bits cleared */
}

static void test_doc_decode_example(void **state)
{
	uint8_t a[20] = { 0 };
	struct call c;

	ql_rpc_bit_set(a, 3, 1);
	ql_rpc_bit_set(a, 100, 1);
	ql_rpc_bit_set(a, 101, 1);
	ql_rpc_put_u32(a + 16, 128);
	call("decode", a, 20, &c); /* arg_len 20: 16 + 4 */
	assert_int_equal(c.status, 0);
	assert_int_equal(c.result_len, 5);
	assert_int_equal(c.res[0], 1);			       /* 3 ones: odd */
	assert_memory_equal(c.res + 1, "\x00\x00\xc0\x3c", 4); /* 3/128 = 0.0234375 */
	assert_int_equal(QL_RPC_SCHEMA(decode)->nargs, 2);
	assert_int_equal(QL_RPC_SCHEMA(decode)->nresults, 2);
	assert_int_equal(ql_rpc_schema_args_size(QL_RPC_SCHEMA(decode)), 20);
	assert_int_equal(ql_rpc_schema_results_size(QL_RPC_SCHEMA(decode)), 5);
}

static void test_doc_process_example(void **state)
{
	struct call c;

	call("process", "\x07\x00\x00\x00\x00\x00\x00\x3f", 8, &c);
	assert_int_equal(c.status, 0);
	assert_int_equal(c.result_len, 0);
	assert_int_equal(process_count, 7);
	assert_true(process_threshold == 0.5f);
	assert_int_equal(QL_RPC_SCHEMA(process)->nresults, 0);
}

static void test_eight_args_four_results(void **state)
{
	uint8_t a[1 + 4 + 8 + 4 + 8 + 3 + 2 + 4], *p = a;
	const struct ql_rpc_schema *s = QL_RPC_SCHEMA(everything);
	struct call c;

	*p++ = 200;
	ql_rpc_put_i32(p, -1000), p += 4;
	ql_rpc_put_i64(p, 1ll << 40), p += 8;
	ql_rpc_put_f32(p, 0.5f), p += 4;
	ql_rpc_put_f64(p, 0.25), p += 8;
	*p++ = 1, *p++ = 2, *p++ = 3;
	*p++ = 0xff, *p++ = 0xff; /* 9 bits set (+7 junk high bits the handler ignores) */
	ql_rpc_put_u32(p, 0x80000000u), p += 4;
	assert_int_equal(p - a, sizeof(a));
	assert_int_equal(s->nargs, 8);
	assert_int_equal(s->nresults, 4);
	assert_int_equal(ql_rpc_schema_args_size(s), sizeof(a));
	assert_int_equal(ql_rpc_schema_check(s), 0);

	call("everything", a, sizeof(a), &c);
	assert_int_equal(c.status, 0);
	assert_int_equal(c.result_len, 8 + 8 + 1 + 8);
	assert_true(ql_rpc_get_i64(c.res) == 200 - 1000 + (1ll << 40) + 6 + 0x80000000ll);
	assert_true(ql_rpc_get_f64(c.res + 8) == 0.75);
	assert_int_equal(c.res[16], 9);
	assert_int_equal(ql_rpc_get_i32(c.res + 17), -1000); /* i32 array at odd offset 41 */
	assert_int_equal(ql_rpc_get_u32(c.res + 21), 0x80000000u);
}

static void test_ctx_and_handler_error(void **state)
{
	struct call c;

	counted_calls = 0;
	call("counted", "\x02\x00\x00\x00", 4, &c);
	assert_int_equal(c.status, 0);
	assert_int_equal(ql_rpc_get_i32(c.res), 20);
	call("counted", "\xff\xff\xff\xff", 4, &c);
	assert_int_equal(c.status, 7);
	assert_int_equal(c.result_len, 0);
	assert_int_equal(counted_calls, 2);
}

static void test_generated_schemas(void **state)
{
	const struct ql_rpc_schema *s = QL_RPC_SCHEMA(everything);
	struct ql_rpc_function f;
	static const struct ql_rpc_type want_args[8] = {
		{ 0x10, { 0 }, 1, 1 }, { 0x11, { 0 }, 4, 1 }, { 0x12, { 0 }, 8, 1 },
		{ 0x13, { 0 }, 4, 1 }, { 0x14, { 0 }, 8, 1 }, { 0x20, { 0 }, 3, 3 },
		{ 0x30, { 0 }, 2, 9 }, { 0x11, { 0 }, 4, 1 },
	};
	static const struct ql_rpc_type want_res[4] = {
		{ 0x12, { 0 }, 8, 1 },
		{ 0x14, { 0 }, 8, 1 },
		{ 0x10, { 0 }, 1, 1 },
		{ 0x21, { 0 }, 8, 2 },
	};

	assert_memory_equal(s->args, want_args, sizeof(want_args));
	assert_memory_equal(s->results, want_res, sizeof(want_res));
	s = QL_RPC_SCHEMA(scale_f32s);
	assert_int_equal(s->args[1].type_id, QL_RPC_TYPE_ARRAY_FLOAT32);
	assert_int_equal(s->args[1].size_bytes, 12);
	assert_int_equal(s->args[1].num_elements, 3);
	s = QL_RPC_SCHEMA(sum_f64s);
	assert_int_equal(s->args[0].type_id, QL_RPC_TYPE_ARRAY_FLOAT64);
	assert_int_equal(s->args[0].size_bytes, 16);
	/* QL_RPC_FUNCTION names the function after the C identifier */
	f = QL_RPC_FUNCTION(parity);
	assert_string_equal(f.name, "parity");
	assert_int_equal(f.id, 0xc8b74e54);
	assert_ptr_equal(f.schema, QL_RPC_SCHEMA(parity));
	assert_ptr_equal(f.fn, QL_RPC_HANDLER(parity));
	f = QL_RPC_FUNCTION_AS(parity, "qec_parity", NULL);
	assert_int_equal(f.id, ql_rpc_fnv1a("qec_parity"));
}

/* ---- validation ------------------------------------------------------- */

static struct ql_rpc_schema one_arg(uint8_t type_id, uint32_t size, uint32_t n)
{
	struct ql_rpc_schema s = { .nargs = 1 };

	s.args[0].type_id = type_id;
	s.args[0].size_bytes = size;
	s.args[0].num_elements = n;
	return s;
}

static void test_schema_check(void **state)
{
	struct ql_rpc_schema s;

	memset(&s, 0, sizeof(s));
	assert_int_equal(ql_rpc_schema_check(&s), 0); /* no args, no results */
	assert_int_equal(ql_rpc_schema_check(NULL), -EINVAL);

	/* good ones */
	s = one_arg(QL_RPC_TYPE_UINT8, 1, 1);
	assert_int_equal(ql_rpc_schema_check(&s), 0);
	s = one_arg(QL_RPC_TYPE_FLOAT64, 8, 1);
	assert_int_equal(ql_rpc_schema_check(&s), 0);
	s = one_arg(QL_RPC_TYPE_ARRAY_INT32, 40, 10);
	assert_int_equal(ql_rpc_schema_check(&s), 0);
	s = one_arg(QL_RPC_TYPE_BIT_PACKED, 2, 9);
	assert_int_equal(ql_rpc_schema_check(&s), 0);
	s = one_arg(QL_RPC_TYPE_BIT_PACKED, 1, 8);
	assert_int_equal(ql_rpc_schema_check(&s), 0);

	/* counts */
	s = one_arg(QL_RPC_TYPE_UINT8, 1, 1);
	s.nargs = 9;
	assert_int_equal(ql_rpc_schema_check(&s), -EINVAL);
	s = one_arg(QL_RPC_TYPE_UINT8, 1, 1);
	s.nresults = 5;
	assert_int_equal(ql_rpc_schema_check(&s), -EINVAL);
	/* unknown type ids, including CUDA-Q's undeclared TYPE_UINT32 guesses */
	s = one_arg(0x15, 4, 1);
	assert_int_equal(ql_rpc_schema_check(&s), -EINVAL);
	s = one_arg(0x00, 0, 1);
	assert_int_equal(ql_rpc_schema_check(&s), -EINVAL);
	s = one_arg(0x24, 4, 1);
	assert_int_equal(ql_rpc_schema_check(&s), -EINVAL);
	/* scalars: exact size, one element */
	s = one_arg(QL_RPC_TYPE_INT32, 8, 1);
	assert_int_equal(ql_rpc_schema_check(&s), -EINVAL);
	s = one_arg(QL_RPC_TYPE_INT64, 8, 2);
	assert_int_equal(ql_rpc_schema_check(&s), -EINVAL);
	s = one_arg(QL_RPC_TYPE_FLOAT32, 4, 0);
	assert_int_equal(ql_rpc_schema_check(&s), -EINVAL);
	/* arrays: n * element size, n >= 1 */
	s = one_arg(QL_RPC_TYPE_ARRAY_FLOAT32, 12, 4);
	assert_int_equal(ql_rpc_schema_check(&s), -EINVAL);
	s = one_arg(QL_RPC_TYPE_ARRAY_FLOAT64, 0, 0);
	assert_int_equal(ql_rpc_schema_check(&s), -EINVAL);
	s = one_arg(QL_RPC_TYPE_ARRAY_UINT8, 5, 4);
	assert_int_equal(ql_rpc_schema_check(&s), -EINVAL);
	/* bits: ceil(n / 8) */
	s = one_arg(QL_RPC_TYPE_BIT_PACKED, 1, 9);
	assert_int_equal(ql_rpc_schema_check(&s), -EINVAL);
	s = one_arg(QL_RPC_TYPE_BIT_PACKED, 16, 128 * 8);
	assert_int_equal(ql_rpc_schema_check(&s), -EINVAL);
	s = one_arg(QL_RPC_TYPE_BIT_PACKED, 3, 9);
	assert_int_equal(ql_rpc_schema_check(&s), -EINVAL);
	/* reserved bytes */
	s = one_arg(QL_RPC_TYPE_UINT8, 1, 1);
	s.args[0].reserved[1] = 1;
	assert_int_equal(ql_rpc_schema_check(&s), -EINVAL);
	/* a bad result, beyond nargs args are ignored */
	memset(&s, 0, sizeof(s));
	s.nresults = 1;
	s.results[0].type_id = QL_RPC_TYPE_ARRAY_INT32;
	s.results[0].size_bytes = 3;
	s.results[0].num_elements = 1;
	assert_int_equal(ql_rpc_schema_check(&s), -EINVAL);
	/* sizes overflowing 32 bits when summed */
	memset(&s, 0, sizeof(s));
	s.nargs = 2;
	for (int i = 0; i < 2; i++)
		assert_int_equal(ql_rpc_type_init(&s.args[i], QL_RPC_TYPE_ARRAY_UINT8, 0xffff0000u),
				 0);
	assert_int_equal(ql_rpc_schema_check(&s), -EINVAL);
}

static void test_type_init(void **state)
{
	struct ql_rpc_type t;

	assert_int_equal(ql_rpc_type_init(&t, QL_RPC_TYPE_ARRAY_FLOAT64, 3), 0);
	assert_int_equal(t.size_bytes, 24);
	assert_int_equal(t.num_elements, 3);
	assert_int_equal(ql_rpc_type_init(&t, QL_RPC_TYPE_BIT_PACKED, 10), 0);
	assert_int_equal(t.size_bytes, 2);
	assert_int_equal(ql_rpc_type_init(&t, QL_RPC_TYPE_INT64, 1), 0);
	assert_int_equal(t.size_bytes, 8);
	assert_int_equal(ql_rpc_type_check(&t), 0);
	assert_int_equal(ql_rpc_type_init(&t, QL_RPC_TYPE_INT64, 2), -EINVAL);
	assert_int_equal(ql_rpc_type_init(&t, QL_RPC_TYPE_ARRAY_UINT8, 0), -EINVAL);
	assert_int_equal(ql_rpc_type_init(&t, 0x99, 1), -EINVAL);
	assert_int_equal(ql_rpc_type_init(&t, QL_RPC_TYPE_ARRAY_FLOAT64, 0x20000000u), -EINVAL);
	assert_int_equal(ql_rpc_type_elem_size(QL_RPC_TYPE_ARRAY_INT32), 4);
	assert_int_equal(ql_rpc_type_elem_size(QL_RPC_TYPE_BIT_PACKED), 0);
	assert_int_equal(ql_rpc_type_elem_size(0x31), -EINVAL);
}

static int32_t dummy(struct ql_rpc_in *in, struct ql_rpc_out *out, void *ctx)
{
	return 0;
}

static void test_table_rejects_bad_schema(void **state)
{
	struct ql_rpc_schema s = one_arg(QL_RPC_TYPE_INT32, 3, 1);
	struct ql_rpc_function f = {
		.name = "bad", .id = ql_rpc_fnv1a("bad"), .fn = dummy, .schema = &s
	};
	uint32_t before = ql_rpc_table_count(table);

	assert_int_equal(ql_rpc_table_add(table, &f), -EINVAL);
	assert_int_equal(ql_rpc_table_count(table), before);
	assert_int_equal(ql_rpc_table_find(table, f.id), -1);
	s.nargs = 9;
	s.args[0].size_bytes = 4;
	assert_int_equal(ql_rpc_table_add(table, &f), -EINVAL);
}

/* the table keeps its own copy of the schema */
static void test_table_copies_schema(void **state)
{
	struct ql_rpc_schema s = one_arg(QL_RPC_TYPE_INT32, 4, 1);
	struct ql_rpc_function f = {
		.name = "copied", .id = ql_rpc_fnv1a("copied"), .fn = dummy, .schema = &s
	};
	const struct ql_rpc_function *got;
	uint8_t msg[28] = { 0 }, resp[32];
	int idx;

	idx = ql_rpc_table_add(table, &f);
	assert_true(idx >= 0);
	s.args[0].type_id = QL_RPC_TYPE_INT64;
	s.args[0].size_bytes = 8;
	got = ql_rpc_table_get(table, idx);
	assert_non_null(got);
	assert_ptr_not_equal(got->schema, &s);
	assert_int_equal(got->schema->args[0].size_bytes, 4);
	ql_rpc_header_encode(msg, &(struct ql_rpc_header){ QL_RPC_MAGIC_REQUEST, f.id, 4, 0, 0 });
	assert_int_equal(ql_rpc_dispatch(table, msg, 28, resp, sizeof(resp), NULL, NULL), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_u8),
		cmocka_unit_test(test_i32),
		cmocka_unit_test(test_u32),
		cmocka_unit_test(test_i64),
		cmocka_unit_test(test_f32),
		cmocka_unit_test(test_f64),
		cmocka_unit_test(test_u8_array),
		cmocka_unit_test(test_i32_array),
		cmocka_unit_test(test_f32_array_unaligned),
		cmocka_unit_test(test_f64_array),
		cmocka_unit_test(test_bits),
		cmocka_unit_test(test_bits_result_tail),
		cmocka_unit_test(test_doc_decode_example),
		cmocka_unit_test(test_doc_process_example),
		cmocka_unit_test(test_eight_args_four_results),
		cmocka_unit_test(test_ctx_and_handler_error),
		cmocka_unit_test(test_generated_schemas),
		cmocka_unit_test(test_schema_check),
		cmocka_unit_test(test_type_init),
		cmocka_unit_test(test_table_rejects_bad_schema),
		cmocka_unit_test(test_table_copies_schema),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
