/* SPDX-License-Identifier: MIT */
/*
 * The union-find decoder against the literature, with fixed seeds (so the
 * outcome is reproducible; the margins are several standard errors):
 * below threshold the logical error rate per shot falls with the distance,
 * and the curves of d = 3 and d = 9 cross where published union-find
 * thresholds put it (code capacity 9.9 %, phenomenological 2.6 %, on the
 * toric code; small rotated codes cross a little lower, docs/qec.md).
 * A few seconds in a -O2 build; labelled qec_slow so an ASan run may skip it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "qlink/qec.h"

static double rate(unsigned d, enum ql_qec_noise noise, double p, unsigned long shots,
		   uint64_t seed)
{
	unsigned rounds = noise == QL_QEC_CODE_CAPACITY ? 0 : d;
	struct ql_qec_params pa = { d, rounds, noise, p, p, seed };
	struct ql_qec_code *c;
	struct ql_qec_sim *sim;
	struct ql_qec_decoder *dec;
	uint8_t *fr;
	unsigned long wrong = 0;
	size_t fb;

	assert_int_equal(ql_qec_code_create(d, &c), 0);
	assert_int_equal(ql_qec_sim_create(c, &pa, &sim), 0);
	assert_int_equal(ql_qec_decoder_create(c, &pa, NULL, &dec), 0);
	fb = ql_qec_frame_bytes(c);
	fr = malloc((rounds + 1) * fb);
	assert_non_null(fr);
	for (unsigned long i = 0; i < shots; i++) {
		uint8_t o, f;

		assert_int_equal(ql_qec_sim_shot(sim, fr, &o), 0);
		ql_qec_decoder_reset(dec);
		for (unsigned t = 0; t < rounds; t++)
			assert_int_equal(ql_qec_decoder_push(dec, fr + t * fb), 0);
		assert_int_equal(ql_qec_decoder_finish(dec, fr + rounds * fb, &f), 0);
		wrong += f != o;
	}
	free(fr);
	ql_qec_decoder_destroy(dec);
	ql_qec_sim_destroy(sim);
	ql_qec_code_destroy(c);
	printf("%s d=%u p=%.3f: %lu/%lu = %.4f\n",
	       noise == QL_QEC_CODE_CAPACITY ? "code-capacity" : "phenomenological", d, p, wrong,
	       shots, (double)wrong / shots);
	return (double)wrong / shots;
}

static void test_code_capacity_below(void **state)
{
	double r3, r5, r7, r9;

	(void)state;
	r3 = rate(3, QL_QEC_CODE_CAPACITY, 0.05, 20000, 11);
	r5 = rate(5, QL_QEC_CODE_CAPACITY, 0.05, 20000, 12);
	r7 = rate(7, QL_QEC_CODE_CAPACITY, 0.05, 20000, 13);
	r9 = rate(9, QL_QEC_CODE_CAPACITY, 0.05, 20000, 14);
	assert_true(r3 > r5 && r5 > r7 && r7 > r9);
	assert_true(r9 < r3 / 2);
}

/* d = 9 beats d = 3 at 8 %, loses at 11 %: the crossing is in between. */
static void test_code_capacity_crossing(void **state)
{
	(void)state;
	assert_true(rate(9, QL_QEC_CODE_CAPACITY, 0.08, 20000, 21) <
		    rate(3, QL_QEC_CODE_CAPACITY, 0.08, 20000, 22) - 0.01);
	assert_true(rate(9, QL_QEC_CODE_CAPACITY, 0.11, 20000, 23) >
		    rate(3, QL_QEC_CODE_CAPACITY, 0.11, 20000, 24) + 0.01);
}

static void test_phenomenological_below(void **state)
{
	double r3, r5, r7;

	(void)state;
	r3 = rate(3, QL_QEC_PHENOMENOLOGICAL, 0.01, 10000, 31);
	r5 = rate(5, QL_QEC_PHENOMENOLOGICAL, 0.01, 10000, 32);
	r7 = rate(7, QL_QEC_PHENOMENOLOGICAL, 0.01, 10000, 33);
	assert_true(r3 > r5 && r5 > r7);
	assert_true(r7 < r3 / 2.5);
}

/* d = 9 beats d = 3 at 1.5 %, loses at 3 %. */
static void test_phenomenological_crossing(void **state)
{
	(void)state;
	assert_true(rate(9, QL_QEC_PHENOMENOLOGICAL, 0.015, 5000, 41) <
		    rate(3, QL_QEC_PHENOMENOLOGICAL, 0.015, 5000, 42) - 0.008);
	assert_true(rate(9, QL_QEC_PHENOMENOLOGICAL, 0.03, 5000, 43) >
		    rate(3, QL_QEC_PHENOMENOLOGICAL, 0.03, 5000, 44) + 0.03);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_code_capacity_below),
		cmocka_unit_test(test_code_capacity_crossing),
		cmocka_unit_test(test_phenomenological_below),
		cmocka_unit_test(test_phenomenological_crossing),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
