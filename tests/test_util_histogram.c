/* SPDX-License-Identifier: MIT */
/* Latency histogram: exactness of small values, the relative-error bound,
 * extremes, merge and reset (qlink/histogram.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "qlink/histogram.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

/* xorshift64*: deterministic, so a failure reproduces. */
static uint64_t rng(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The definition the histogram approximates: smallest value with at least
 * ceil(p/100 * n) values at or below it. */
static uint64_t exact_percentile(const uint64_t *sorted, size_t n, double p)
{
	double r = p * (double)n / 100.0;
	size_t rank = (size_t)r;

	if ((double)rank < r)
		rank++;
	if (rank < 1)
		rank = 1;
	if (rank > n)
		rank = n;
	return sorted[rank - 1];
}

static void assert_within_bound(uint64_t got, uint64_t want)
{
	double err = got > want ? (double)(got - want) : (double)(want - got);

	if (want == 0) {
		assert_int_equal(got, 0);
		return;
	}
	if (err / (double)want > QL_HIST_REL_ERROR * (1 + 1e-9))
		fail_msg("got %llu, want %llu: relative error %g > %g", (unsigned long long)got,
			 (unsigned long long)want, err / (double)want, QL_HIST_REL_ERROR);
}

static struct ql_hist *hist_new(void)
{
	struct ql_hist *h = malloc(sizeof(*h));

	assert_non_null(h);
	assert_int_equal(ql_hist_init(h), 0);
	return h;
}

static void test_empty(void **state)
{
	struct ql_hist *h = hist_new();

	assert_int_equal(ql_hist_count(h), 0);
	assert_int_equal(ql_hist_min(h), 0);
	assert_int_equal(ql_hist_max(h), 0);
	assert_true(ql_hist_mean(h) == 0.0);
	assert_int_equal(ql_hist_percentile(h, 0), 0);
	assert_int_equal(ql_hist_percentile(h, 50), 0);
	assert_int_equal(ql_hist_percentile(h, 100), 0);
	free(h);
}

static void test_small_values_exact(void **state)
{
	struct ql_hist *h = hist_new();

	for (uint64_t v = 1; v <= 100; v++)
		ql_hist_record(h, v);
	assert_int_equal(ql_hist_count(h), 100);
	assert_int_equal(ql_hist_min(h), 1);
	assert_int_equal(ql_hist_max(h), 100);
	assert_true(ql_hist_mean(h) == 50.5);
	assert_int_equal(ql_hist_percentile(h, 0), 1);
	assert_int_equal(ql_hist_percentile(h, 1), 1);
	assert_int_equal(ql_hist_percentile(h, 50), 50);
	assert_int_equal(ql_hist_percentile(h, 50.5), 51);
	assert_int_equal(ql_hist_percentile(h, 99), 99);
	assert_int_equal(ql_hist_percentile(h, 99.9), 100);
	assert_int_equal(ql_hist_percentile(h, 100), 100);
	/* Out of range clamps. */
	assert_int_equal(ql_hist_percentile(h, -5), 1);
	assert_int_equal(ql_hist_percentile(h, 250), 100);

	/* Every value below 256 has a bucket of its own. */
	ql_hist_reset(h);
	ql_hist_record(h, 200);
	ql_hist_record(h, 201);
	ql_hist_record(h, 255);
	assert_int_equal(ql_hist_percentile(h, 34), 201);
	assert_int_equal(ql_hist_percentile(h, 33), 200);
	free(h);
}

/* One value at a time around every power of two: it lands in a bucket whose
 * reported value is within the bound, whatever the bucket width. */
static void test_single_values_all_octaves(void **state)
{
	struct ql_hist *h = hist_new();

	for (int k = 0; k < 64; k++) {
		uint64_t base = 1ull << k;
		uint64_t vals[] = { base - 1, base, base + 1, base + base / 3,
				    base + base / 2 + 7 };

		for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
			uint64_t v = vals[i];

			ql_hist_reset(h);
			ql_hist_record(h, v);
			/* Exact: min and max are the value itself. */
			assert_int_equal(ql_hist_percentile(h, 50), v);
			/* With a second, larger value the first's report is approximate. */
			ql_hist_record(h, UINT64_MAX);
			assert_within_bound(ql_hist_percentile(h, 50), v);
			assert_int_equal(ql_hist_percentile(h, 100), UINT64_MAX);
			assert_int_equal(ql_hist_percentile(h, 0), v);
		}
	}
	free(h);
}

/* Bucket indexes never decrease with the value and stay in the array. */
static void test_index_monotonic(void **state)
{
	unsigned int prev = 0;

	for (int k = 0; k < 64; k++) {
		uint64_t base = 1ull << k;

		/* Walk [2^k, 2^(k+1)) in about 300 steps. */
		for (uint64_t step = 0; step < 300; step++) {
			uint64_t v = base + step * (base / 300 + 1);
			unsigned int idx = ql__hist_index(v);

			if (v < base || (k < 63 && v >= 2 * base))
				break; /* past this power of two (or past UINT64_MAX) */
			assert_true(idx < QL_HIST_BUCKETS);
			assert_true(idx >= prev);
			prev = idx;
		}
	}
	assert_int_equal(ql__hist_index(UINT64_MAX), QL_HIST_BUCKETS - 1);
	assert_int_equal(ql__hist_index(0), 0);
}

/* Log-uniform values from 1 ns to about a minute, against exact sorting. */
static void test_relative_error_random(void **state)
{
	enum { N = 200000 };
	static const double ps[] = { 0, 0.1, 1, 10, 25, 50, 75, 90, 99, 99.9, 99.99, 99.999, 100 };
	struct ql_hist *h = hist_new();
	uint64_t *vals = malloc(N * sizeof(*vals));
	long double sum = 0;

	assert_non_null(vals);
	for (size_t i = 0; i < N; i++) {
		int octave = (int)(rng() % 36); /* 2^35 ns is about 34 s */
		uint64_t v = (1ull << octave) + rng() % (1ull << octave);

		vals[i] = v;
		sum += v;
		ql_hist_record(h, v);
	}
	qsort(vals, N, sizeof(*vals), cmp_u64);
	assert_int_equal(ql_hist_count(h), N);
	assert_int_equal(ql_hist_min(h), vals[0]);
	assert_int_equal(ql_hist_max(h), vals[N - 1]);
	assert_true(ql_hist_mean(h) > (double)(sum / N) * (1 - 1e-9));
	assert_true(ql_hist_mean(h) < (double)(sum / N) * (1 + 1e-9));
	for (size_t i = 0; i < sizeof(ps) / sizeof(ps[0]); i++)
		assert_within_bound(ql_hist_percentile(h, ps[i]), exact_percentile(vals, N, ps[i]));
	for (double p = 0.5; p < 100; p += 0.5)
		assert_within_bound(ql_hist_percentile(h, p), exact_percentile(vals, N, p));
	assert_int_equal(ql_hist_percentile(h, 0), vals[0]);
	assert_int_equal(ql_hist_percentile(h, 100), vals[N - 1]);
	free(vals);
	free(h);
}

static void test_merge(void **state)
{
	struct ql_hist *a = hist_new(), *b = hist_new(), *all = hist_new();
	struct ql_hist *empty = hist_new(), *dst = hist_new();

	for (int i = 0; i < 10000; i++) {
		uint64_t v = rng() % 5000000;

		ql_hist_record(i % 3 ? a : b, v);
		ql_hist_record(all, v);
	}
	ql_hist_record(b, 3);
	ql_hist_record(all, 3);
	ql_hist_record(a, 123456789);
	ql_hist_record(all, 123456789);

	/* Into an empty histogram: the minimum must come from src, not stay at
	 * the empty marker. */
	ql_hist_merge(dst, a);
	ql_hist_merge(dst, b);
	assert_int_equal(ql_hist_count(dst), ql_hist_count(all));
	assert_int_equal(ql_hist_min(dst), 3);
	assert_int_equal(ql_hist_max(dst), 123456789);
	assert_true(ql_hist_mean(dst) == ql_hist_mean(all));
	assert_memory_equal(dst, all, sizeof(*all));

	/* Merging an empty one changes nothing. */
	ql_hist_merge(dst, empty);
	assert_memory_equal(dst, all, sizeof(*all));
	ql_hist_merge(empty, empty);
	assert_int_equal(ql_hist_count(empty), 0);
	assert_int_equal(ql_hist_min(empty), 0);

	free(a);
	free(b);
	free(all);
	free(empty);
	free(dst);
}

static void test_reset(void **state)
{
	struct ql_hist *h = hist_new(), *fresh = hist_new();

	for (uint64_t v = 0; v < 100000; v += 7)
		ql_hist_record(h, v * v);
	assert_true(ql_hist_count(h) > 0);
	ql_hist_reset(h);
	assert_memory_equal(h, fresh, sizeof(*h));
	assert_int_equal(ql_hist_count(h), 0);
	assert_int_equal(ql_hist_percentile(h, 50), 0);
	ql_hist_record(h, 42);
	assert_int_equal(ql_hist_min(h), 42);
	assert_int_equal(ql_hist_max(h), 42);
	free(h);
	free(fresh);
}

static void test_zero_and_size(void **state)
{
	struct ql_hist *h = hist_new();

	ql_hist_record(h, 0);
	ql_hist_record(h, 0);
	ql_hist_record(h, 1000);
	assert_int_equal(ql_hist_min(h), 0);
	assert_int_equal(ql_hist_percentile(h, 50), 0);
	assert_int_equal(ql_hist_percentile(h, 66), 0);
	assert_int_equal(ql_hist_percentile(h, 67), 1000);
	assert_true(sizeof(struct ql_hist) <= 64 * 1024);
	free(h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_small_values_exact),
		cmocka_unit_test(test_single_values_all_octaves),
		cmocka_unit_test(test_index_monotonic),
		cmocka_unit_test(test_relative_error_random),
		cmocka_unit_test(test_merge),
		cmocka_unit_test(test_reset),
		cmocka_unit_test(test_zero_and_size),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
