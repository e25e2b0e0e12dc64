/* SPDX-License-Identifier: MIT */
/*
 * The QEC decoder wire format (qlink/qec_wire.h): the function ids are
 * FNV-1a of CUDA-QX's names; enqueue_syndromes, get_corrections and
 * reset_decoder payloads byte by byte; every refusal of the decoders, in
 * CUDA-QX's order and with its status (short, negative, mapping id,
 * arg_len vs size, too large); and the plugin's configuration string,
 * good and bad, written back and read again.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "qlink/qec_wire.h"

static void test_ids(void **state)
{
	(void)state;
	assert_int_equal(ql_rpc_fnv1a("enqueue_syndromes"), QL_QEC_FN_ENQUEUE_SYNDROMES);
	assert_int_equal(ql_rpc_fnv1a("get_corrections"), QL_QEC_FN_GET_CORRECTIONS);
	assert_int_equal(ql_rpc_fnv1a("reset_decoder"), QL_QEC_FN_RESET_DECODER);
}

static void test_enqueue_bytes(void **state)
{
	/* decoder 2, counter 5, 12 bits 0xABC: 32 + 2 bytes -> 40 */
	static const uint8_t want[40] = {
		2, 0, 0, 0, 0,	0, 0, 0, 5, 0, 0, 0, 0,	   0,	 0, 0, 0, 0, 0, 0,
		0, 0, 0, 0, 12, 0, 0, 0, 0, 0, 0, 0, 0xbc, 0x0a, 0, 0, 0, 0, 0, 0,
	};
	const uint8_t bits[2] = { 0xbc, 0xfa }; /* high bits past 12 set: cleared */
	uint8_t args[64];
	struct ql_qec_enqueue e;

	(void)state;
	memset(args, 0xee, sizeof(args));
	assert_int_equal(ql_qec_enqueue_arg_len(0), 32);
	assert_int_equal(ql_qec_enqueue_arg_len(1), 40);
	assert_int_equal(ql_qec_enqueue_arg_len(64), 40);
	assert_int_equal(ql_qec_enqueue_arg_len(65), 48);
	assert_int_equal(ql_qec_enqueue_encode(args, sizeof(args), 2, 5, bits, 12), 40);
	assert_memory_equal(args, want, sizeof(want));
	assert_int_equal(ql_qec_enqueue_encode(args, 39, 2, 5, bits, 12), -EMSGSIZE);
	assert_int_equal(ql_qec_enqueue_decode(args, 40, &e), QL_QEC_OK);
	assert_int_equal(e.decoder_id, 2);
	assert_int_equal(e.counter, 5);
	assert_int_equal(e.num_syndromes, 12);
	assert_ptr_equal(e.bits, args + 32);
}

static void put64(uint8_t *p, int64_t v)
{
	ql_rpc_put_i64(p, v);
}

static void test_enqueue_refusals(void **state)
{
	uint8_t a[64] = { 0 };
	struct ql_qec_enqueue e;

	(void)state;
	/* shorter than the fixed part: -1, whatever it says */
	assert_int_equal(ql_qec_enqueue_decode(a, 0, &e), QL_QEC_E_ARG_LEN);
	assert_int_equal(ql_qec_enqueue_decode(a, 31, &e), QL_QEC_E_ARG_LEN);
	/* zero bits, exactly 32: fine */
	assert_int_equal(ql_qec_enqueue_decode(a, 32, &e), QL_QEC_OK);
	/* negative count, non-zero mapping id: -4 */
	put64(a + 24, -1);
	assert_int_equal(ql_qec_enqueue_decode(a, 32, &e), QL_QEC_E_INVALID);
	put64(a + 24, 8);
	put64(a + 16, 1);
	assert_int_equal(ql_qec_enqueue_decode(a, 40, &e), QL_QEC_E_INVALID);
	put64(a + 16, 0);
	/* arg_len not the one the count implies (8 bits: 40), both ways */
	assert_int_equal(ql_qec_enqueue_decode(a, 40, &e), QL_QEC_OK);
	assert_int_equal(ql_qec_enqueue_decode(a, 33, &e), QL_QEC_E_INVALID);
	assert_int_equal(ql_qec_enqueue_decode(a, 48, &e), QL_QEC_E_INVALID);
	/* huge counts: too large before any length arithmetic can wrap */
	put64(a + 24, (int64_t)QL_QEC_MAX_SYNDROME_BITS + 1);
	assert_int_equal(ql_qec_enqueue_decode(a, 40, &e), QL_QEC_E_TOO_LARGE);
	put64(a + 24, INT64_MAX);
	assert_int_equal(ql_qec_enqueue_decode(a, 40, &e), QL_QEC_E_TOO_LARGE);
	put64(a + 24, (int64_t)1 << 61); /* * 1/8 + 32 would wrap a 32-bit size */
	assert_int_equal(ql_qec_enqueue_decode(a, 40, &e), QL_QEC_E_TOO_LARGE);
	/* the cap itself is accepted when arg_len matches */
	put64(a + 24, QL_QEC_MAX_SYNDROME_BITS);
	assert_int_equal(ql_qec_enqueue_decode(a, 32 + QL_QEC_MAX_SYNDROME_BITS / 8, &e),
			 QL_QEC_OK);
}

static void test_get_corrections_and_reset(void **state)
{
	static const uint8_t want[17] = { 7, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1 };
	uint8_t a[24];
	struct ql_qec_get_corrections g;
	int64_t id;

	(void)state;
	ql_qec_get_corrections_encode(a, 7, 1, 1);
	assert_memory_equal(a, want, 17);
	assert_int_equal(ql_qec_get_corrections_decode(a, 17, &g), QL_QEC_OK);
	assert_int_equal(g.decoder_id, 7);
	assert_int_equal(g.return_size, 1);
	assert_int_equal(g.reset, 1);
	assert_int_equal(ql_qec_get_corrections_decode(a, 16, &g), QL_QEC_E_ARG_LEN);
	assert_int_equal(ql_qec_get_corrections_decode(a, 18, &g), QL_QEC_E_ARG_LEN);
	assert_int_equal(ql_qec_get_corrections_decode(a, 24, &g), QL_QEC_E_ARG_LEN);
	ql_rpc_put_i64(a + 8, -3);
	assert_int_equal(ql_qec_get_corrections_decode(a, 17, &g), QL_QEC_E_INVALID);
	assert_int_equal(ql_qec_corrections_len(0), 0);
	assert_int_equal(ql_qec_corrections_len(1), 8);
	assert_int_equal(ql_qec_corrections_len(65), 16);

	ql_qec_reset_encode(a, 3);
	assert_int_equal(ql_qec_reset_decode(a, 8, &id), QL_QEC_OK);
	assert_int_equal(id, 3);
	assert_int_equal(ql_qec_reset_decode(a, 7, &id), QL_QEC_E_ARG_LEN);
	assert_int_equal(ql_qec_reset_decode(a, 9, &id), QL_QEC_E_ARG_LEN);
}

static void test_config(void **state)
{
	struct ql_qec_wire_decoder d[4], back[4];
	unsigned n, m;
	char buf[512];

	(void)state;
	assert_int_equal(ql_qec_wire_parse("id=0 distance=5 p=0.01", d, 4, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(d[0].params.distance, 5);
	assert_int_equal(d[0].params.rounds, 5); /* defaults to d */
	assert_int_equal(d[0].params.noise, QL_QEC_PHENOMENOLOGICAL);
	assert_true(d[0].params.q == 0.01); /* defaults to p */
	assert_int_equal(d[0].input, QL_QEC_INPUT_MEASUREMENTS);

	assert_int_equal(ql_qec_wire_parse("id=3,d=7,rounds=20,p=0.002,q=0.003,window=8,"
					   "commit=3,input=detectors;\n"
					   "id=1 d=3 noise=code_capacity p=0.05\n",
					   d, 4, &n),
			 0);
	assert_int_equal(n, 2);
	assert_int_equal(d[0].id, 3);
	assert_int_equal(d[0].params.rounds, 20);
	assert_int_equal(d[0].opts.window, 8);
	assert_int_equal(d[0].opts.commit, 3);
	assert_int_equal(d[0].input, QL_QEC_INPUT_DETECTORS);
	assert_int_equal(d[1].params.noise, QL_QEC_CODE_CAPACITY);
	assert_int_equal(d[1].params.rounds, 0);
	/* written back, read again: the same decoders */
	for (unsigned i = 0; i < n; i++) {
		assert_true(ql_qec_wire_format(&d[i], buf, sizeof(buf)) < (int)sizeof(buf));
		assert_int_equal(ql_qec_wire_parse(buf, &back[i], 1, &m), 0);
		assert_int_equal(m, 1);
		assert_memory_equal(&back[i], &d[i], sizeof(d[i]));
	}

	/* refusals */
	const char *bad[] = {
		NULL,
		"",
		" ; \n",
		"distance=5 p=0.01",				/* no id */
		"id=0 p=0.01",					/* no distance */
		"id=0 d=4 p=0.01",				/* even */
		"id=0 d=17 p=0.01",				/* too large */
		"id=32 d=3",					/* id past 31 */
		"id=-1 d=3",					/* negative */
		"id=0 d=3 p=1.5",				/* not a probability */
		"id=0 d=3 p=nan",				/* not a number */
		"id=0 d=3 noise=circuit",			/* unknown model */
		"id=0 d=3 noise=cc rounds=3",			/* code capacity has no rounds */
		"id=0 d=3 rounds=0",				/* phenomenological needs one */
		"id=0 d=3 colour=blue",				/* unknown key */
		"id=0 d=3 p",					/* no value */
		"id=0 d=3; id=0 d=5",				/* id twice */
		"id=0 d=3;id=1 d=3;id=2 d=3;id=3 d=3;id=4 d=3", /* more than max */
		"id=0 d=3 input=raw",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		n = 99;
		if (ql_qec_wire_parse(bad[i], d, 4, &n) != -EINVAL)
			fail_msg("accepted: \"%s\"", bad[i] ? bad[i] : "(null)");
		assert_int_equal(n, 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ids),
		cmocka_unit_test(test_enqueue_bytes),
		cmocka_unit_test(test_enqueue_refusals),
		cmocka_unit_test(test_get_corrections_and_reset),
		cmocka_unit_test(test_config),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
