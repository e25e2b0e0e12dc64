/* SPDX-License-Identifier: MIT */
/* The rotated surface code and its memory experiment (qlink/qec.h): the
 * lattice is a valid code of distance d with the documented layout, the
 * PRNG is xoshiro256** seeded by splitmix64, faults give the detection
 * events the model says, and shots are deterministic from the seed. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "qec/qec_internal.h"
#include "qlink/qec.h"

static struct ql_qec_code *code_of(unsigned d)
{
	struct ql_qec_code *c = NULL;

	assert_int_equal(ql_qec_code_create(d, &c), 0);
	return c;
}

static void test_create_refusals(void **state)
{
	struct ql_qec_code *c = (struct ql_qec_code *)1;

	(void)state;
	assert_int_equal(ql_qec_code_create(1, &c), -EINVAL);
	assert_null(c);
	assert_int_equal(ql_qec_code_create(4, &c), -EINVAL);
	assert_int_equal(ql_qec_code_create(17, &c), -EINVAL);
	assert_int_equal(ql_qec_code_create(0, &c), -EINVAL);
	assert_int_equal(ql_qec_code_create(3, NULL), -EINVAL);
	ql_qec_code_destroy(NULL);
}

static void test_counts(void **state)
{
	(void)state;
	for (unsigned d = 3; d <= 15; d += 2) {
		struct ql_qec_code *c = code_of(d);

		assert_int_equal(ql_qec_code_distance(c), d);
		assert_int_equal(ql_qec_code_data_qubits(c), d * d);
		assert_int_equal(ql_qec_code_detectors(c), (d * d - 1) / 2);
		assert_int_equal(ql_qec_frame_bytes(c), ((d * d - 1) / 2 + 7) / 8);
		assert_int_equal(c->nx, (d * d - 1) / 2);
		ql_qec_code_destroy(c);
	}
}

/* Z and X checks commute (even overlap); the observable (data row 0)
 * commutes with every X check; every data qubit is in one Z check on the
 * top and bottom rows (boundary edges) and two elsewhere. */
static void test_stabilizers_commute(void **state)
{
	(void)state;
	for (unsigned d = 3; d <= 15; d += 2) {
		struct ql_qec_code *c = code_of(d);

		for (unsigned z = 0; z < c->nd; z++)
			for (unsigned x = 0; x < c->nx; x++) {
				unsigned n = 0;

				for (unsigned i = 0; i < c->nsup[z]; i++)
					for (unsigned j = 0; j < c->xnsup[x]; j++)
						n += c->sup[z][i] == c->xsup[x][j];
				assert_int_equal(n % 2, 0);
			}
		for (unsigned x = 0; x < c->nx; x++) {
			unsigned n = 0;

			for (unsigned j = 0; j < c->xnsup[x]; j++)
				n += c->obs[c->xsup[x][j]];
			assert_int_equal(n % 2, 0);
		}
		for (unsigned q = 0; q < c->nq; q++) {
			unsigned r = q / d, in = 0;

			for (unsigned s = 0; s < c->nd; s++)
				for (unsigned i = 0; i < c->nsup[s]; i++)
					in += c->sup[s][i] == q;
			assert_int_equal(in, (r == 0 || r == d - 1) ? 1 : 2);
			assert_int_equal(c->det[q][1] == QL_QEC_NONE, in == 1);
			assert_int_equal(c->obs[q], r == 0);
		}
		ql_qec_code_destroy(c);
	}
}

static void set_bit(uint64_t *w, unsigned i)
{
	w[i / 64] |= 1ull << (i % 64);
}

static int frames_zero(const uint8_t *f, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (f[i])
			return 0;
	return 1;
}

/* A column of X errors is a logical: no detection event, observable 1. */
static void test_logical_column(void **state)
{
	(void)state;
	for (unsigned d = 3; d <= 15; d += 2) {
		struct ql_qec_code *c = code_of(d);
		struct ql_qec_params pa = { d, 0, QL_QEC_CODE_CAPACITY, 0.1, 0, 1 };
		uint64_t data[1][QL_QEC_WORDS] = { { 0 } };
		uint8_t fr[16], o;

		for (unsigned r = 0; r < d; r++)
			set_bit(data[0], r * d + d / 2);
		assert_int_equal(ql__qec_frames_from_faults(c, &pa, data, NULL, fr, &o), 0);
		assert_true(frames_zero(fr, c->frame_bytes));
		assert_int_equal(o, 1);
		ql_qec_code_destroy(c);
	}
}

static unsigned n_logical, n_undetected;

static void enumerate(const struct ql_qec_code *c, const struct ql_qec_params *pa,
		      uint64_t (*data)[QL_QEC_WORDS], unsigned start, unsigned left)
{
	if (!left) {
		uint8_t fr[16], o;

		assert_int_equal(ql__qec_frames_from_faults(c, pa, data, NULL, fr, &o), 0);
		if (frames_zero(fr, c->frame_bytes)) {
			n_undetected++;
			n_logical += o;
		}
		return;
	}
	for (unsigned q = start; q < c->nq; q++) {
		data[0][q / 64] ^= 1ull << (q % 64);
		enumerate(c, pa, data, q + 1, left - 1);
		data[0][q / 64] ^= 1ull << (q % 64);
	}
}

/* The distance is d: no undetected X error of weight below d flips the
 * observable (exhaustive for d = 3 and 5), and some of weight d does. */
static void test_distance(void **state)
{
	(void)state;
	for (unsigned d = 3; d <= 5; d += 2) {
		struct ql_qec_code *c = code_of(d);
		struct ql_qec_params pa = { d, 0, QL_QEC_CODE_CAPACITY, 0.1, 0, 1 };
		uint64_t data[1][QL_QEC_WORDS] = { { 0 } };

		for (unsigned w = 1; w <= d; w++) {
			n_logical = n_undetected = 0;
			enumerate(c, &pa, data, 0, w);
			if (w < d)
				assert_int_equal(n_logical, 0);
			else
				assert_true(n_logical > 0);
		}
		ql_qec_code_destroy(c);
	}
}

/* Values from an independent transcription of the published algorithms. */
static void test_prng(void **state)
{
	struct ql_qec_rng r;

	(void)state;
	ql__qec_rng_seed(&r, 12345);
	assert_true(ql__qec_rng_next(&r) == 0xbe6a36374160d49bull);
	assert_true(ql__qec_rng_next(&r) == 0x214aaa0637a688c6ull);
	assert_true(ql__qec_rng_next(&r) == 0xf69d16de9954d388ull);
	assert_true(ql__qec_threshold(0) == 0);
	assert_true(ql__qec_threshold(1) == UINT64_MAX);
	assert_true(ql__qec_threshold(0.5) == 1ull << 63);
	for (double x = 1e-6; x < 1e6; x *= 3.7) {
		/* ln via the identity ln(x) + ln(1/x) = 0 and ln(e) = 1 */
		assert_true(ql__qec_ln(x) + ql__qec_ln(1 / x) < 1e-12);
		assert_true(ql__qec_ln(x) + ql__qec_ln(1 / x) > -1e-12);
	}
	assert_true(ql__qec_ln(2.718281828459045) > 1 - 1e-12);
	assert_true(ql__qec_ln(2.718281828459045) < 1 + 1e-12);
	assert_true(ql__qec_ln(1024) > 10 * 0.6931471805599453 - 1e-12);
	assert_true(ql__qec_ln(1024) < 10 * 0.6931471805599453 + 1e-12);
}

/* A data flip in round t lights its checks in round t only; a wrong
 * outcome of check s in round t lights s in rounds t and t+1; the final
 * readout is perfect. */
static void test_fault_events(void **state)
{
	const unsigned d = 5, R = 4;
	struct ql_qec_code *c = code_of(d);
	struct ql_qec_params pa = { d, R, QL_QEC_PHENOMENOLOGICAL, 0.01, 0.01, 1 };
	size_t fb = c->frame_bytes;
	uint8_t fr[(R + 1) * 2], o;

	(void)state;
	for (unsigned t = 0; t < R; t++)
		for (unsigned q = 0; q < c->nq; q++) {
			uint64_t data[R][QL_QEC_WORDS], meas[R][QL_QEC_WORDS];

			memset(data, 0, sizeof(data));
			memset(meas, 0, sizeof(meas));
			set_bit(data[t], q);
			assert_int_equal(ql__qec_frames_from_faults(c, &pa, data, meas, fr, &o), 0);
			for (unsigned u = 0; u <= R; u++)
				for (unsigned s = 0; s < c->nd; s++) {
					int want = u == t &&
						   (c->det[q][0] == s || c->det[q][1] == s);

					assert_int_equal(ql__qec_bit(fr + u * fb, s), want);
				}
			assert_int_equal(o, q < d);
		}
	for (unsigned t = 0; t < R; t++)
		for (unsigned s = 0; s < c->nd; s++) {
			uint64_t data[R][QL_QEC_WORDS], meas[R][QL_QEC_WORDS];

			memset(data, 0, sizeof(data));
			memset(meas, 0, sizeof(meas));
			set_bit(meas[t], s);
			assert_int_equal(ql__qec_frames_from_faults(c, &pa, data, meas, fr, &o), 0);
			for (unsigned u = 0; u <= R; u++)
				for (unsigned k = 0; k < c->nd; k++)
					assert_int_equal(ql__qec_bit(fr + u * fb, k),
							 k == s && (u == t || u == t + 1));
			assert_int_equal(o, 0);
		}
	ql_qec_code_destroy(c);
}

static void test_sim_refusals(void **state)
{
	struct ql_qec_code *c = code_of(5);
	struct ql_qec_sim *s = (struct ql_qec_sim *)1;
	struct ql_qec_params ok = { 5, 3, QL_QEC_PHENOMENOLOGICAL, 0.01, 0.01, 1 }, pa;

	(void)state;
	pa = ok;
	pa.distance = 3;
	assert_int_equal(ql_qec_sim_create(c, &pa, &s), -EINVAL);
	assert_null(s);
	pa = ok;
	pa.p = -0.1;
	assert_int_equal(ql_qec_sim_create(c, &pa, &s), -EINVAL);
	pa = ok;
	pa.q = 1.5;
	assert_int_equal(ql_qec_sim_create(c, &pa, &s), -EINVAL);
	pa = ok;
	pa.p = 0.0 / 0.0;
	assert_int_equal(ql_qec_sim_create(c, &pa, &s), -EINVAL);
	pa = ok;
	pa.rounds = 0;
	assert_int_equal(ql_qec_sim_create(c, &pa, &s), -EINVAL);
	pa = ok;
	pa.noise = QL_QEC_CODE_CAPACITY; /* with rounds = 3 */
	assert_int_equal(ql_qec_sim_create(c, &pa, &s), -EINVAL);
	pa.noise = (enum ql_qec_noise)7;
	assert_int_equal(ql_qec_sim_create(c, &pa, &s), -EINVAL);
	assert_int_equal(ql_qec_sim_create(NULL, &ok, &s), -EINVAL);
	assert_int_equal(ql_qec_sim_create(c, NULL, &s), -EINVAL);
	assert_int_equal(ql_qec_sim_create(c, &ok, &s), 0);
	assert_int_equal(ql_qec_sim_shot(s, NULL, (uint8_t *)&pa), -EINVAL);
	ql_qec_sim_destroy(s);
	ql_qec_sim_destroy(NULL);
	ql_qec_code_destroy(c);
}

/* Same seed, same shots; another seed, other shots; p = q = 0, nothing. */
static void test_sim_deterministic(void **state)
{
	const unsigned d = 7, R = 7, shots = 50;
	struct ql_qec_code *c = code_of(d);
	struct ql_qec_params pa = { d, R, QL_QEC_PHENOMENOLOGICAL, 0.02, 0.02, 99 };
	size_t n = (R + 1) * c->frame_bytes;
	uint8_t *a = calloc(shots, n), *b = calloc(shots, n), oa[50], ob[50];
	struct ql_qec_sim *s1, *s2;

	(void)state;
	assert_int_equal(ql_qec_sim_create(c, &pa, &s1), 0);
	assert_int_equal(ql_qec_sim_create(c, &pa, &s2), 0);
	for (unsigned i = 0; i < shots; i++) {
		assert_int_equal(ql_qec_sim_shot(s1, a + i * n, &oa[i]), 0);
		assert_int_equal(ql_qec_sim_shot(s2, b + i * n, &ob[i]), 0);
	}
	assert_memory_equal(a, b, shots * n);
	assert_memory_equal(oa, ob, shots);
	ql_qec_sim_destroy(s2);
	pa.seed = 100;
	assert_int_equal(ql_qec_sim_create(c, &pa, &s2), 0);
	for (unsigned i = 0; i < shots; i++)
		assert_int_equal(ql_qec_sim_shot(s2, b + i * n, &ob[i]), 0);
	assert_memory_not_equal(a, b, shots * n);
	ql_qec_sim_destroy(s2);
	pa.p = pa.q = 0;
	assert_int_equal(ql_qec_sim_create(c, &pa, &s2), 0);
	for (unsigned i = 0; i < shots; i++) {
		assert_int_equal(ql_qec_sim_shot(s2, b, &ob[0]), 0);
		assert_true(frames_zero(b, n));
		assert_int_equal(ob[0], 0);
	}
	ql_qec_sim_destroy(s2);
	ql_qec_sim_destroy(s1);
	free(a);
	free(b);
	ql_qec_code_destroy(c);
}

/* The event rate matches the model: with measurement errors only (p = 0),
 * each check has an event in round t with probability 2q(1-q) (rounds
 * 1..R-1), within 5 standard deviations; the unused high bits stay 0. */
static void test_sim_rates(void **state)
{
	const unsigned d = 5, R = 10, shots = 2000;
	struct ql_qec_code *c = code_of(d);
	struct ql_qec_params pa = { d, R, QL_QEC_PHENOMENOLOGICAL, 0, 0.05, 3 };
	size_t fb = c->frame_bytes;
	uint8_t fr[(R + 1) * 2], o;
	struct ql_qec_sim *s;
	double n = 0, hits = 0, pe = 2 * 0.05 * 0.95, mean, sd;

	(void)state;
	assert_int_equal(ql_qec_sim_create(c, &pa, &s), 0);
	for (unsigned i = 0; i < shots; i++) {
		assert_int_equal(ql_qec_sim_shot(s, fr, &o), 0);
		assert_int_equal(o, 0);
		for (unsigned t = 1; t < R; t++) {
			for (unsigned k = 0; k < c->nd; k++) {
				hits += ql__qec_bit(fr + t * fb, k);
				n++;
			}
			assert_int_equal(fr[t * fb + fb - 1] >> (c->nd % 8), 0);
		}
	}
	mean = n * pe;
	sd = __builtin_sqrt(n * pe * (1 - pe));
	assert_true(hits > mean - 5 * sd && hits < mean + 5 * sd);
	ql_qec_sim_destroy(s);
	ql_qec_code_destroy(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_create_refusals),
		cmocka_unit_test(test_counts),
		cmocka_unit_test(test_stabilizers_commute),
		cmocka_unit_test(test_logical_column),
		cmocka_unit_test(test_distance),
		cmocka_unit_test(test_prng),
		cmocka_unit_test(test_fault_events),
		cmocka_unit_test(test_sim_refusals),
		cmocka_unit_test(test_sim_deterministic),
		cmocka_unit_test(test_sim_rates),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
