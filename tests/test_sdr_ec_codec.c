/* SPDX-License-Identifier: MIT */
/*
 * test_sdr_ec_codec: the erasure code of SDR's EC reliability (src/sdr/ec.h)
 * on its own: every loss pattern of up to m chunks per stripe is rebuilt
 * byte for byte, more than m is refused with nothing written, short chunks,
 * the stripe geometry and its parity-offset check, and the decoder's hot
 * path (no allocation, lock or system call).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hotpath.h"
#include "sdr/ec.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next(void)
{
	uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

struct stripe {
	unsigned int k, m;
	size_t len;
	uint8_t *orig[SDR_EC_K_MAX + SDR_EC_M_MAX];
	uint8_t *work[SDR_EC_K_MAX + SDR_EC_M_MAX];
};

static void stripe_make(struct stripe *s, struct sdr_ec_codec *c, size_t len)
{
	unsigned int i;

	s->k = ql__sdr_ec_codec_k(c);
	s->m = ql__sdr_ec_codec_m(c);
	s->len = len;
	for (i = 0; i < s->k + s->m; i++) {
		s->orig[i] = malloc(len);
		s->work[i] = malloc(len);
		assert_non_null(s->orig[i]);
		assert_non_null(s->work[i]);
	}
	for (i = 0; i < s->k; i++)
		for (size_t b = 0; b < len; b++)
			s->orig[i][b] = (uint8_t)next();
	ql__sdr_ec_encode(c, (const uint8_t *const *)s->orig, &s->orig[s->k], len);
}

static void stripe_free(struct stripe *s)
{
	for (unsigned int i = 0; i < s->k + s->m; i++) {
		free(s->orig[i]);
		free(s->work[i]);
	}
}

/* Lose the chunks whose bit is clear in `present` (filled with 0xee), decode,
 * and compare the data chunks with the originals. */
static int try_pattern(struct sdr_ec_codec *c, struct stripe *s, uint64_t present)
{
	unsigned int i, lost = 0;
	int rc;

	for (i = 0; i < s->k + s->m; i++) {
		if (present & (1ull << i))
			memcpy(s->work[i], s->orig[i], s->len);
		else
			memset(s->work[i], 0xee, s->len);
	}
	for (i = 0; i < s->k; i++)
		lost += !(present & (1ull << i));
	rc = ql__sdr_ec_decode(c, present, s->work, s->len);
	if (rc >= 0) {
		assert_int_equal(rc, (int)lost);
		for (i = 0; i < s->k; i++)
			assert_memory_equal(s->work[i], s->orig[i], s->len);
	} else {
		/* refused: nothing was written */
		for (i = 0; i < s->k; i++)
			if (!(present & (1ull << i)))
				for (size_t b = 0; b < s->len; b++)
					assert_int_equal(s->work[i][b], 0xee);
	}
	return rc;
}

/* Every subset of the k+m chunks for small codes: decodes iff at most m
 * are lost. */
static void test_every_pattern(void **state)
{
	static const unsigned int codes[][2] = { { 1, 1 }, { 2, 1 }, { 4, 2 },
						 { 6, 3 }, { 8, 2 }, { 10, 4 } };
	(void)state;
	for (size_t t = 0; t < sizeof(codes) / sizeof(codes[0]); t++) {
		unsigned int k = codes[t][0], m = codes[t][1], n = k + m;
		struct sdr_ec_codec *c;
		struct stripe s;
		unsigned int ok = 0, refused = 0;

		assert_int_equal(ql__sdr_ec_codec_create(k, m, 256, &c), 0);
		stripe_make(&s, c, 256);
		for (uint64_t p = 0; p < (1ull << n); p++) {
			int lost = (int)n - __builtin_popcountll(p);
			int rc = try_pattern(c, &s, p);
			if (lost <= (int)m) {
				assert_true(rc >= 0);
				ok++;
			} else {
				/* may still succeed when only parity beyond m was lost? no:
				 * fewer than k present can never decode */
				assert_int_equal(rc, -EAGAIN);
				refused++;
			}
		}
		assert_true(ok > 0);
		assert_true(refused > 0 || n == 2);
		stripe_free(&s);
		ql__sdr_ec_codec_destroy(c);
	}
}

/* Bigger codes with random patterns of exactly m losses (the worst case the
 * code promises), m + 1 (must be refused unless only parity was lost... which
 * still leaves fewer than k), and the full-size chunk of a 4096-byte MTU. */
static void test_random_patterns(void **state)
{
	static const unsigned int codes[][2] = { { 16, 4 }, { 32, 8 }, { 32, 16 }, { 12, 1 } };
	(void)state;
	for (size_t t = 0; t < sizeof(codes) / sizeof(codes[0]); t++) {
		unsigned int k = codes[t][0], m = codes[t][1], n = k + m;
		struct sdr_ec_codec *c;
		struct stripe s;

		assert_int_equal(ql__sdr_ec_codec_create(k, m, 4096, &c), 0);
		stripe_make(&s, c, 4096);
		for (int it = 0; it < 40; it++) {
			for (unsigned int lose = 1; lose <= m + 1; lose++) {
				uint64_t present = (n == 64) ? ~0ull : ((1ull << n) - 1);
				unsigned int done = 0;
				while (done < lose) {
					unsigned int b = (unsigned int)(next() % n);
					if (present & (1ull << b)) {
						present &= ~(1ull << b);
						done++;
					}
				}
				int rc = try_pattern(c, &s, present);
				if (lose <= m)
					assert_true(rc >= 0);
				else
					assert_int_equal(rc, -EAGAIN);
			}
		}
		stripe_free(&s);
		ql__sdr_ec_codec_destroy(c);
	}
}

/* A short chunk (the tail of a message) encodes and decodes on its prefix;
 * a stripe whose missing data chunks are "virtual" zeros decodes too. */
static void test_short_and_zero(void **state)
{
	struct sdr_ec_codec *c;
	struct stripe s;
	(void)state;

	assert_int_equal(ql__sdr_ec_codec_create(4, 2, 4096, &c), 0);
	stripe_make(&s, c, 37);
	assert_true(try_pattern(c, &s, 0x3c) >= 0); /* data 0, 1 lost */
	assert_true(try_pattern(c, &s, 0x35) >= 0); /* 1, 3 lost */
	assert_int_equal(try_pattern(c, &s, 0x31), -EAGAIN);
	for (size_t i = 0; i < 4096; i++)
		assert_int_equal(ql__sdr_ec_codec_zero(c)[i], 0);
	assert_non_null(ql__sdr_ec_codec_pad(c));
	assert_int_equal(ql__sdr_ec_codec_chunk(c), 4096);
	/* bits beyond k+m and a len over the chunk are refused */
	assert_int_equal(ql__sdr_ec_decode(c, 1ull << 6 | 0x3f, s.work, 37), -EINVAL);
	assert_int_equal(ql__sdr_ec_decode(c, 0x3f, s.work, 4097), -EINVAL);
	assert_int_equal(ql__sdr_ec_decode(c, 0x3f, s.work, 37), 0);
	stripe_free(&s);
	ql__sdr_ec_codec_destroy(c);
}

static void test_bad_args(void **state)
{
	struct sdr_ec_codec *c = (void *)1;
	(void)state;
	assert_int_equal(ql__sdr_ec_codec_create(0, 1, 64, &c), -EINVAL);
	assert_null(c);
	assert_int_equal(ql__sdr_ec_codec_create(1, 0, 64, &c), -EINVAL);
	assert_int_equal(ql__sdr_ec_codec_create(SDR_EC_K_MAX + 1, 1, 64, &c), -EINVAL);
	assert_int_equal(ql__sdr_ec_codec_create(1, SDR_EC_M_MAX + 1, 64, &c), -EINVAL);
	assert_int_equal(ql__sdr_ec_codec_create(4, 2, 0, &c), -EINVAL);
	assert_int_equal(ql__sdr_ec_codec_create(4, 2, 64, NULL), -EINVAL);
	ql__sdr_ec_codec_destroy(NULL);
}

static void test_geometry(void **state)
{
	struct sdr_ec_geom g;
	uint32_t st, j;
	(void)state;

	/* 1 byte: one chunk, one stripe */
	assert_int_equal(ql__sdr_ec_geom_init(&g, 1, 4096, 8, 2), 0);
	assert_int_equal(g.nchunks, 1);
	assert_int_equal(g.nstripes, 1);
	assert_int_equal(g.parity_len, 2 * 4096);
	assert_int_equal(sdr_ec_geom_chunk_len(&g, 0), 1);
	assert_int_equal(sdr_ec_geom_chunk_len(&g, 1), 0);
	/* 64 MiB + 1: 16385 chunks, 2049 stripes of 8 */
	assert_int_equal(ql__sdr_ec_geom_init(&g, (64u << 20) + 1, 4096, 8, 2), 0);
	assert_int_equal(g.nchunks, 16385);
	assert_int_equal(g.nstripes, 2049);
	assert_int_equal(g.parity_len, 2049ull * 2 * 4096);
	assert_int_equal(sdr_ec_geom_chunk_len(&g, 16383), 4096);
	assert_int_equal(sdr_ec_geom_chunk_len(&g, 16384), 1);
	assert_int_equal(ql__sdr_ec_parity_room((64u << 20) + 1, 4096, 8, 2), g.parity_len);
	/* parity offsets: first, inside, last byte, one past */
	assert_int_equal(ql__sdr_ec_geom_parity_at(&g, 0, &st, &j), 0);
	assert_int_equal(st, 0);
	assert_int_equal(j, 0);
	assert_int_equal(ql__sdr_ec_geom_parity_at(&g, 4096 * 3 + 100, &st, &j), 0);
	assert_int_equal(st, 1);
	assert_int_equal(j, 1);
	assert_int_equal(ql__sdr_ec_geom_parity_at(&g, g.parity_len - 1, &st, &j), 0);
	assert_int_equal(st, 2048);
	assert_int_equal(j, 1);
	assert_int_equal(ql__sdr_ec_geom_parity_at(&g, g.parity_len, &st, &j), -EINVAL);
	assert_int_equal(ql__sdr_ec_geom_parity_at(&g, UINT64_MAX, &st, &j), -EINVAL);
	/* bad geometry */
	assert_int_equal(ql__sdr_ec_geom_init(&g, 10, 0, 8, 2), -EINVAL);
	assert_int_equal(ql__sdr_ec_geom_init(&g, 10, 64, 0, 2), -EINVAL);
	assert_int_equal(ql__sdr_ec_geom_init(&g, 10, 64, 8, 0), -EINVAL);
	assert_int_equal(ql__sdr_ec_geom_init(&g, UINT64_MAX, 1, 8, 2), -EINVAL);
	assert_int_equal(ql__sdr_ec_parity_room(10, 0, 8, 2), 0);
}

struct hp_arg {
	struct sdr_ec_codec *c;
	struct stripe *s;
};

static int hp_loop(void *arg)
{
	struct hp_arg *a = arg;
	for (int i = 0; i < 50; i++) {
		ql__sdr_ec_encode(a->c, (const uint8_t *const *)a->s->orig, &a->s->work[a->s->k],
				  a->s->len);
		if (ql__sdr_ec_decode(a->c, 0xfcfull, a->s->work, a->s->len) != 2) /* 4, 5 lost */
			return -1;
	}
	return 0;
}

/* encode and decode: no allocation, lock or system call */
static void test_hot_path(void **state)
{
	struct sdr_ec_codec *c;
	struct stripe s;
	struct hp_arg a;
	char why[256] = "";
	(void)state;

	assert_int_equal(ql__sdr_ec_codec_create(8, 4, 4096, &c), 0);
	stripe_make(&s, c, 4096);
	for (unsigned int i = 0; i < 8; i++)
		memcpy(s.work[i], s.orig[i], 4096);
	a.c = c;
	a.s = &s;
	if (hp_check(hp_loop, &a, why, sizeof(why)) != 0)
		fail_msg("%s", why);
	for (unsigned int i = 0; i < 8; i++)
		assert_memory_equal(s.work[i], s.orig[i], 4096);
	stripe_free(&s);
	ql__sdr_ec_codec_destroy(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_pattern),  cmocka_unit_test(test_random_patterns),
		cmocka_unit_test(test_short_and_zero), cmocka_unit_test(test_bad_args),
		cmocka_unit_test(test_geometry),       cmocka_unit_test(test_hot_path),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
