/* SPDX-License-Identifier: MIT */
/*
 * The message format byte by byte (qlink/rpc.h): both headers against
 * hand-written byte vectors, the CUDA-Q protocol document's worked examples,
 * FNV-1a function ids, LSB-first bit packing and the bounds-checked streams.
 * The expected bytes are written out by hand, never produced by the code
 * under test.
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

static void test_magic_bytes(void **state)
{
	uint8_t b[4];

	/* 'CUQR' / 'CUQS' as the document spells them: R/S is the high byte */
	ql_rpc_put_u32(b, QL_RPC_MAGIC_REQUEST);
	assert_memory_equal(b, "\x52\x51\x55\x43", 4);
	assert_memory_equal(b, "RQUC", 4);
	ql_rpc_put_u32(b, QL_RPC_MAGIC_RESPONSE);
	assert_memory_equal(b, "\x53\x51\x55\x43", 4);
	assert_int_equal(QL_RPC_HEADER_SIZE, 24);
	assert_int_equal(QL_RPC_RESPONSE_SIZE, 24);
}

static const uint8_t hdr_bytes[24] = {
	0x52, 0x51, 0x55, 0x43,				/* magic */
	0x7a, 0x4d, 0xe9, 0x9c,				/* function_id = fnv1a("process") */
	0x08, 0x00, 0x00, 0x00,				/* arg_len = 8 */
	0x04, 0x03, 0x02, 0x01,				/* request_id = 0x01020304 */
	0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, /* ptp */
};

static void test_header_encode(void **state)
{
	struct ql_rpc_header h = {
		.magic = QL_RPC_MAGIC_REQUEST,
		.function_id = 0x9ce94d7a,
		.arg_len = 8,
		.request_id = 0x01020304,
		.ptp_timestamp = 0x1122334455667788ull,
	};
	uint8_t buf[26];

	memset(buf, 0xee, sizeof(buf));
	ql_rpc_header_encode(buf + 1, &h); /* unaligned on purpose */
	assert_memory_equal(buf + 1, hdr_bytes, 24);
	assert_int_equal(buf[0], 0xee);
	assert_int_equal(buf[25], 0xee);
}

static void test_header_decode(void **state)
{
	struct ql_rpc_header h;
	uint8_t buf[27];

	memcpy(buf + 3, hdr_bytes, 24);
	ql_rpc_header_decode(buf + 3, &h);
	assert_int_equal(h.magic, 0x43555152);
	assert_int_equal(h.function_id, 0x9ce94d7a);
	assert_int_equal(h.arg_len, 8);
	assert_int_equal(h.request_id, 0x01020304);
	assert_true(h.ptp_timestamp == 0x1122334455667788ull);
}

static void test_response_encode_decode(void **state)
{
	static const uint8_t want[24] = {
		0x53, 0x51, 0x55, 0x43, /* magic */
		0xfb, 0xff, 0xff, 0xff, /* status = -5 */
		0x00, 0x01, 0x00, 0x00, /* result_len = 256 */
		0xef, 0xbe, 0xad, 0xde, /* request_id */
		0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80,
	};
	struct ql_rpc_response r = {
		.magic = QL_RPC_MAGIC_RESPONSE,
		.status = -5,
		.result_len = 256,
		.request_id = 0xdeadbeef,
		.ptp_timestamp = 0x8000000000000001ull,
	}, back;
	uint8_t buf[24];

	ql_rpc_response_encode(buf, &r);
	assert_memory_equal(buf, want, 24);
	ql_rpc_response_decode(want, &back);
	assert_int_equal(back.magic, QL_RPC_MAGIC_RESPONSE);
	assert_int_equal(back.status, -5);
	assert_int_equal(back.result_len, 256);
	assert_int_equal(back.request_id, 0xdeadbeef);
	assert_true(back.ptp_timestamp == 0x8000000000000001ull);
}

/* Example 1: void process(int32_t count, float threshold), arg_len 8 */
static void test_doc_example_process(void **state)
{
	static const uint8_t want[32] = {
		0x52, 0x51, 0x55, 0x43, 0x7a, 0x4d, 0xe9, 0x9c, 0x08, 0x00,
		0x00, 0x00, 0x2a, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x00, 0xfd, 0xff, 0xff, 0xff, /* 24-27: count = -3, little-endian */
		0x00, 0x00, 0xa0, 0x3f,				/* 28-31: threshold = 1.25f */
	};
	struct ql_rpc_out out;
	struct ql_rpc_header h;
	struct ql_rpc_in in;
	uint8_t buf[64];

	ql_rpc_request_begin(&out, buf, sizeof(buf));
	ql_rpc_write_i32(&out, -3);
	ql_rpc_write_f32(&out, 1.25f);
	assert_int_equal(ql_rpc_request_finish(&out, ql_rpc_fnv1a("process"), 42, 16), 32);
	assert_memory_equal(buf, want, 32);

	ql_rpc_header_decode(want, &h);
	assert_int_equal(h.arg_len, 8);
	ql_rpc_in_init(&in, want + 24, h.arg_len);
	assert_int_equal(ql_rpc_read_i32(&in), -3);
	assert_true(ql_rpc_read_f32(&in) == 1.25f);
	assert_int_equal(in.err, 0);
	assert_int_equal(ql_rpc_in_left(&in), 0);
}

/* Example 2: decode(bits: 128 bits, num_bits: u32), arg_len 20 */
static void test_doc_example_decode(void **state)
{
	uint8_t buf[24 + 20], want_args[20];
	struct ql_rpc_out out;
	uint8_t *bits;

	memset(want_args, 0, sizeof(want_args));
	want_args[0] = 0x01;  /* bit 0 */
	want_args[15] = 0x80; /* bit 127 */
	want_args[16] = 0x80; /* 40-43: num_bits = 128 */

	ql_rpc_request_begin(&out, buf, sizeof(buf));
	bits = ql_rpc_out_reserve(&out, ql_rpc_bits_size(128));
	assert_non_null(bits);
	memset(bits, 0, 16);
	ql_rpc_bit_set(bits, 0, 1);
	ql_rpc_bit_set(bits, 127, 1);
	ql_rpc_write_u32(&out, 128);
	assert_int_equal(ql_rpc_request_finish(&out, ql_rpc_fnv1a("decode"), 1, 0), 44);
	assert_memory_equal(buf + 8, "\x14\x00\x00\x00", 4); /* arg_len = 20 */
	assert_memory_equal(buf + 24, want_args, 20);
	assert_int_equal(buf[39], 0x80);
	assert_memory_equal(buf + 40, "\x80\x00\x00\x00", 4);
}

/* Example 3: one uint8_t result 3 */
static void test_doc_example_response_u8(void **state)
{
	static const uint8_t want[25] = {
		0x53, 0x51, 0x55, 0x43, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x07,
		0x00, 0x00, 0x00, 0x99, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03,
	};
	struct ql_rpc_response r = { QL_RPC_MAGIC_RESPONSE, 0, 1, 7, 0x99 };
	struct ql_rpc_in res;
	uint8_t buf[25];

	ql_rpc_response_encode(buf, &r);
	buf[24] = 3;
	assert_memory_equal(buf, want, 25);
	assert_int_equal(ql_rpc_response_parse(want, sizeof(want), &r, &res), 0);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.result_len, 1);
	assert_int_equal(ql_rpc_read_u8(&res), 3);
}

/* Example 4: correction u8 + confidence f32, result_len 5 */
static void test_doc_example_response_two(void **state)
{
	static const uint8_t
		want[29] = {
			0x53, 0x51, 0x55, 0x43, 0x00, 0x00, 0x00, 0x00, 0x05,
			0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
			0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, /* 24: correction */
			0x00, 0x00, 0x00, 0x3f,			  /* 25-28: confidence = 0.5f */
		};
	struct ql_rpc_response r;
	struct ql_rpc_in res;

	assert_int_equal(ql_rpc_response_parse(want, sizeof(want), &r, &res), 0);
	assert_int_equal(r.result_len, 5);
	assert_int_equal(ql_rpc_read_u8(&res), 1);
	assert_true(ql_rpc_read_f32(&res) == 0.5f); /* at odd offset 25 */
	assert_int_equal(res.err, 0);
	/* parse rejects what does not add up */
	assert_int_equal(ql_rpc_response_parse(want, 28, &r, &res), -EBADMSG);
	assert_int_equal(ql_rpc_response_parse(want, 23, &r, &res), -EBADMSG);
	assert_int_equal(ql_rpc_response_parse(hdr_bytes, 24, &r, &res), -EBADMSG);
}

static void test_fnv1a(void **state)
{
	assert_int_equal(ql_rpc_fnv1a(""), 0x811c9dc5);
	assert_int_equal(ql_rpc_fnv1a("a"), 0xe40c292c);
	assert_int_equal(ql_rpc_fnv1a("foobar"), 0xbf9cf968);
	assert_int_equal(ql_rpc_fnv1a("parity"), 0xc8b74e54);
	assert_int_equal(ql_rpc_fnv1a("process"), 0x9ce94d7a);
	assert_int_equal(ql_rpc_fnv1a("decode"), 0xb345874f);
	assert_int_equal(ql_rpc_fnv1a("mock_decode"), 0x6c45a6d6);
	assert_int_equal(ql_rpc_fnv1a("qec_decode"), 0xc4b0e4bf);
	assert_int_equal(ql_rpc_fnv1a_len("foobar", 6), 0xbf9cf968);
	assert_int_equal(ql_rpc_fnv1a_len("foobarXYZ", 6), 0xbf9cf968);
	assert_int_equal(ql_rpc_fnv1a_len(NULL, 0), 0x811c9dc5);
	/* bytes >= 0x80 hash as unsigned */
	assert_int_equal(ql_rpc_fnv1a("\xff"), ql_rpc_fnv1a_len("\xff", 1));
	assert_int_equal(ql_rpc_fnv1a_len("\xff", 1), (0x811c9dc5u ^ 0xffu) * 0x01000193u);
}

/* The document's 10-bit example: byte 0 = b0..b7 LSB first, byte 1 = b8 b9 0... */
static void test_bits_lsb_first(void **state)
{
	static const int b[10] = { 1, 0, 1, 1, 0, 0, 0, 1, 1, 1 };
	uint8_t bytes[2] = { 0, 0 }, full[2] = { 0xff, 0xff };

	assert_int_equal(ql_rpc_bits_size(10), 2);
	assert_int_equal(ql_rpc_bits_size(0), 0);
	assert_int_equal(ql_rpc_bits_size(8), 1);
	assert_int_equal(ql_rpc_bits_size(9), 2);
	assert_int_equal(ql_rpc_bits_size(128), 16);
	for (int i = 0; i < 10; i++)
		ql_rpc_bit_set(bytes, i, b[i]);
	assert_int_equal(bytes[0], 0x8d); /* 1000 1101: b0 is the LSB */
	assert_int_equal(bytes[1], 0x03); /* b8 b9, unused high bits zero */
	for (int i = 0; i < 10; i++)
		assert_int_equal(ql_rpc_bit_get(bytes, i), b[i]);
	ql_rpc_bit_set(bytes, 0, 0);
	assert_int_equal(bytes[0], 0x8c);
	ql_rpc_bits_clear_tail(full, 10);
	assert_int_equal(full[0], 0xff);
	assert_int_equal(full[1], 0x03);
	ql_rpc_bits_clear_tail(full, 16); /* whole bytes: nothing to clear */
	assert_int_equal(full[1], 0x03);
}

static void test_scalars_le(void **state)
{
	static const uint8_t v[] = {
		0xab,						/* u8 */
		0xfe, 0xff, 0xff, 0xff,				/* i32 -2 */
		0x78, 0x56, 0x34, 0x12,				/* u32 */
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, /* i64 max */
		0x00, 0x00, 0x00, 0x3f,				/* f32 0.5 */
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0xc0, /* f64 -2.5 */
	};
	uint8_t out_buf[sizeof(v)];
	struct ql_rpc_out out;
	struct ql_rpc_in in;

	ql_rpc_in_init(&in, v, sizeof(v));
	assert_int_equal(ql_rpc_read_u8(&in), 0xab);
	assert_int_equal(ql_rpc_read_i32(&in), -2);
	assert_int_equal(ql_rpc_read_u32(&in), 0x12345678);
	assert_true(ql_rpc_read_i64(&in) == INT64_MAX);
	assert_true(ql_rpc_read_f32(&in) == 0.5f);
	assert_true(ql_rpc_read_f64(&in) == -2.5);
	assert_int_equal(in.err, 0);
	assert_int_equal(ql_rpc_in_left(&in), 0);

	ql_rpc_out_init(&out, out_buf, sizeof(out_buf));
	ql_rpc_write_u8(&out, 0xab);
	ql_rpc_write_i32(&out, -2);
	ql_rpc_write_u32(&out, 0x12345678);
	ql_rpc_write_i64(&out, INT64_MAX);
	ql_rpc_write_f32(&out, 0.5f);
	ql_rpc_write_f64(&out, -2.5);
	assert_int_equal(out.err, 0);
	assert_int_equal(ql_rpc_out_len(&out), sizeof(v));
	assert_memory_equal(out_buf, v, sizeof(v));
}

static void test_in_bounds(void **state)
{
	/* exactly sized heap buffer: ASan reports any read past it */
	uint8_t *buf = malloc(6);
	struct ql_rpc_in in;
	const uint8_t *p;
	uint8_t dst[8];

	memcpy(buf, "\x01\x02\x03\x04\x05\x06", 6);
	ql_rpc_in_init(&in, buf, 6);
	p = ql_rpc_in_view(&in, 2);
	assert_ptr_equal(p, buf); /* zero-copy */
	assert_int_equal(ql_rpc_read_u32(&in), 0x06050403);
	assert_int_equal(ql_rpc_in_left(&in), 0);
	assert_ptr_equal(ql_rpc_in_view(&in, 0), buf + 6); /* empty view at the end */
	assert_int_equal(ql_rpc_read_u8(&in), 0);
	assert_int_equal(in.err, -EBADMSG);

	/* a failed read does not advance, and the error sticks */
	ql_rpc_in_init(&in, buf, 6);
	ql_rpc_read_u8(&in);
	assert_int_equal(ql_rpc_read_i64(&in), 0);
	assert_int_equal(in.err, -EBADMSG);
	assert_ptr_equal(in.p, buf + 1);
	assert_int_equal(ql_rpc_read_u8(&in), 0); /* would fit, but sticky */
	assert_null(ql_rpc_in_view(&in, 1));
	assert_ptr_equal(in.p, buf + 1);

	/* huge n does not wrap the pointer arithmetic */
	ql_rpc_in_init(&in, buf, 6);
	assert_null(ql_rpc_in_view(&in, SIZE_MAX));
	ql_rpc_in_init(&in, buf, 6);
	memset(dst, 0x55, sizeof(dst));
	assert_int_equal(ql_rpc_read_bytes(&in, dst, 7), -EBADMSG);
	assert_int_equal(dst[0], 0x55);
	ql_rpc_in_init(&in, buf, 6);
	assert_int_equal(ql_rpc_read_bytes(&in, dst, 6), 0);
	assert_memory_equal(dst, buf, 6);
	free(buf);
}

static void test_out_bounds(void **state)
{
	uint8_t guard[16];
	struct ql_rpc_out out;
	uint8_t *p;

	memset(guard, 0xee, sizeof(guard));
	ql_rpc_out_init(&out, guard, 5); /* bytes 5.. must stay untouched */
	ql_rpc_write_u32(&out, 0x04030201);
	assert_int_equal(out.err, 0);
	ql_rpc_write_u32(&out, 0xffffffff);
	assert_int_equal(out.err, -ENOSPC);
	assert_int_equal(ql_rpc_out_len(&out), 4);
	ql_rpc_write_u8(&out, 9); /* fits, but sticky */
	assert_int_equal(ql_rpc_out_len(&out), 4);
	assert_null(ql_rpc_out_reserve(&out, 0));
	assert_memory_equal(guard, "\x01\x02\x03\x04\xee\xee\xee\xee", 8);

	ql_rpc_out_init(&out, guard, 5);
	assert_null(ql_rpc_out_reserve(&out, SIZE_MAX));
	ql_rpc_out_init(&out, guard, 5);
	p = ql_rpc_out_reserve(&out, 5);
	assert_ptr_equal(p, guard);
	assert_int_equal(ql_rpc_out_left(&out), 0);
	assert_int_equal(ql_rpc_write_bytes(&out, "x", 1), -ENOSPC);
	assert_int_equal(guard[5], 0xee);

	/* a request that does not fit reports the error instead of a length */
	ql_rpc_request_begin(&out, guard, 16);
	assert_int_equal(out.err, -ENOSPC);
	assert_true(ql_rpc_request_finish(&out, 1, 2, 3) == -ENOSPC);
}

/* Wide arrays: in place when aligned, a decoded copy when not. */
static void test_arrays_alignment(void **state)
{
	_Alignas(8) uint8_t buf[1 + 3 * 8];
	static const double want[3] = { 1.5, -2.0, 1e300 };
	double tmp[3];
	float ftmp[2];
	int32_t itmp[2];
	struct ql_rpc_in in;
	const double *d;
	const float *f;
	const int32_t *v;

	for (int i = 0; i < 3; i++)
		ql_rpc_put_f64(buf + i * 8, want[i]);
	ql_rpc_in_init(&in, buf, 24);
	d = ql_rpc_read_f64_array(&in, 3, tmp);
	assert_int_equal(in.err, 0);
	if (QL_RPC_HOST_LE)
		assert_ptr_equal(d, (const void *)buf);
	for (int i = 0; i < 3; i++)
		assert_true(d[i] == want[i]);

	/* shift by one byte: must not hand out a misaligned double * */
	memmove(buf + 1, buf, 24);
	ql_rpc_in_init(&in, buf + 1, 24);
	d = ql_rpc_read_f64_array(&in, 3, tmp);
	assert_ptr_equal(d, tmp);
	for (int i = 0; i < 3; i++)
		assert_true(tmp[i] == want[i]);

	ql_rpc_put_f32(buf + 1, 0.25f);
	ql_rpc_put_f32(buf + 5, -8.0f);
	ql_rpc_in_init(&in, buf + 1, 8);
	f = ql_rpc_read_f32_array(&in, 2, ftmp);
	assert_ptr_equal(f, ftmp);
	assert_true(f[0] == 0.25f && f[1] == -8.0f);

	ql_rpc_put_i32(buf + 1, -7);
	ql_rpc_in_init(&in, buf + 1, 7); /* one byte short */
	v = ql_rpc_read_i32_array(&in, 2, itmp);
	assert_ptr_equal(v, itmp);
	assert_int_equal(in.err, -EBADMSG);
	ql_rpc_in_init(&in, buf + 1, 8);
	assert_ptr_equal(ql_rpc_read_i32_array(&in, SIZE_MAX / 2, itmp), itmp);
	assert_int_equal(in.err, -EBADMSG);
}

static void test_status_names(void **state)
{
	assert_string_equal(ql_rpc_status_str(0), "success");
	assert_string_equal(ql_rpc_status_str(12), "handler error");
	assert_string_equal(ql_rpc_status_str(QL_RPC_E_BAD_MAGIC), "bad magic");
	assert_string_equal(ql_rpc_status_str(-1000), "protocol error");
	assert_string_equal(ql_rpc_err_kind_str(QL_RPC_ERR_ARGS_MISMATCH), "args_mismatch");
	assert_string_equal(ql_rpc_err_kind_str(QL_RPC_ERR_KIND_COUNT), "unknown");
	for (int s = QL_RPC_E_INTERNAL; s <= 0; s++)
		assert_non_null(ql_rpc_status_str(s));
	/* the wire values are fixed: peers depend on them */
	assert_int_equal(QL_RPC_E_BAD_MAGIC, -1);
	assert_int_equal(QL_RPC_E_SHORT, -2);
	assert_int_equal(QL_RPC_E_BAD_LENGTH, -3);
	assert_int_equal(QL_RPC_E_UNKNOWN_FUNCTION, -4);
	assert_int_equal(QL_RPC_E_ARGS_MISMATCH, -5);
	assert_int_equal(QL_RPC_E_RESULT_OVERFLOW, -6);
	assert_int_equal(QL_RPC_E_INTERNAL, -7);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_magic_bytes),
		cmocka_unit_test(test_header_encode),
		cmocka_unit_test(test_header_decode),
		cmocka_unit_test(test_response_encode_decode),
		cmocka_unit_test(test_doc_example_process),
		cmocka_unit_test(test_doc_example_decode),
		cmocka_unit_test(test_doc_example_response_u8),
		cmocka_unit_test(test_doc_example_response_two),
		cmocka_unit_test(test_fnv1a),
		cmocka_unit_test(test_bits_lsb_first),
		cmocka_unit_test(test_scalars_le),
		cmocka_unit_test(test_in_bounds),
		cmocka_unit_test(test_out_bounds),
		cmocka_unit_test(test_arrays_alignment),
		cmocka_unit_test(test_status_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
