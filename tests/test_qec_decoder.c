/* SPDX-License-Identifier: MIT */
/* The decoders (qlink/qec.h): union-find corrects every fault set of weight
 * up to (d-1)/2, in one window and sliding, and agrees there with the exact
 * minimum-weight decoder; its correction explains the syndrome and its
 * observable; the sliding window loses nothing against one big window; the
 * API refuses misuse; and pushing rounds allocates nothing. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hotpath.h"
#include "qec/qec_internal.h"
#include "qlink/qec.h"

#define MAXR 32

struct faults {
	uint64_t data[MAXR][QL_QEC_WORDS];
	uint64_t meas[MAXR][QL_QEC_WORDS];
};

/* Fault location i: data qubit (t, q) for i < data_layers * nq, then
 * measurement (t, s). */
static unsigned n_locations(const struct ql_qec_code *c, const struct ql_qec_params *pa)
{
	return (pa->rounds ? pa->rounds : 1) * c->nq + pa->rounds * c->nd;
}

static void toggle(const struct ql_qec_code *c, const struct ql_qec_params *pa, struct faults *f,
		   unsigned i)
{
	unsigned nd = (pa->rounds ? pa->rounds : 1) * c->nq;

	if (i < nd)
		f->data[i / c->nq][(i % c->nq) / 64] ^= 1ull << (i % c->nq % 64);
	else
		f->meas[(i - nd) / c->nd][(i - nd) % c->nd / 64] ^= 1ull << ((i - nd) % c->nd % 64);
}

/* Decode one shot's frames; the predicted flip. */
static uint8_t uf(struct ql_qec_decoder *dec, const struct ql_qec_code *c,
		  const struct ql_qec_params *pa, const uint8_t *fr)
{
	uint8_t f = 2;

	ql_qec_decoder_reset(dec);
	for (unsigned t = 0; t < pa->rounds; t++)
		assert_int_equal(ql_qec_decoder_push(dec, fr + t * c->frame_bytes), 0);
	assert_int_equal(ql_qec_decoder_finish(dec, fr + pa->rounds * c->frame_bytes, &f), 0);
	return f;
}

struct low_weight {
	struct ql_qec_code *c;
	struct ql_qec_params pa;
	struct ql_qec_decoder *dec;
	struct faults f;
	int exact; /* also compare with the exact decoder */
	unsigned tried, uf_wrong, ex_wrong;
};

static void all_sets(struct low_weight *lw, unsigned start, unsigned left)
{
	uint8_t fr[(MAXR + 1) * 16], o, e;

	if (start) { /* a non-empty set: decode it */
		assert_int_equal(ql__qec_frames_from_faults(lw->c, &lw->pa, lw->f.data, lw->f.meas,
							    fr, &o),
				 0);
		lw->tried++;
		lw->uf_wrong += uf(lw->dec, lw->c, &lw->pa, fr) != o;
		if (lw->exact) {
			assert_int_equal(ql_qec_decode_exact(lw->c, &lw->pa, fr, &e), 0);
			lw->ex_wrong += e != o;
		}
	}
	if (!left)
		return;
	for (unsigned i = start; i < n_locations(lw->c, &lw->pa); i++) {
		toggle(lw->c, &lw->pa, &lw->f, i);
		all_sets(lw, i + 1, left - 1);
		toggle(lw->c, &lw->pa, &lw->f, i);
	}
}

/* measurement error rate of the low-weight runs (p is 0.01) */
static double lw_q = 0.01;

/* Every fault set of weight 1..(d-1)/2 is corrected (and by the exact
 * decoder too where asked). */
static void low_weight(unsigned d, enum ql_qec_noise noise, unsigned rounds, unsigned window,
		       unsigned commit, int exact)
{
	struct low_weight lw = { 0 };
	struct ql_qec_decoder_opts op = { window, commit };

	lw.pa = (struct ql_qec_params){ d, rounds, noise, 0.01, lw_q, 1 };
	lw.exact = exact;
	assert_int_equal(ql_qec_code_create(d, &lw.c), 0);
	assert_int_equal(ql_qec_decoder_create(lw.c, &lw.pa, &op, &lw.dec), 0);
	all_sets(&lw, 0, (d - 1) / 2);
	assert_true(lw.tried > 0);
	if (lw.uf_wrong || lw.ex_wrong)
		fail_msg("d=%u noise=%d rounds=%u window=%u/%u: %u of %u sets miscorrected by "
			 "union-find, %u by the exact decoder",
			 d, noise, rounds, window, commit, lw.uf_wrong, lw.tried, lw.ex_wrong);
	ql_qec_decoder_destroy(lw.dec);
	ql_qec_code_destroy(lw.c);
}

static void test_low_weight_code_capacity(void **state)
{
	(void)state;
	low_weight(3, QL_QEC_CODE_CAPACITY, 0, 0, 0, 1);
	low_weight(5, QL_QEC_CODE_CAPACITY, 0, 0, 0, 1);
	low_weight(7, QL_QEC_CODE_CAPACITY, 0, 0, 0, 0);
	low_weight(9, QL_QEC_CODE_CAPACITY, 0, 0, 0, 0); /* weight 4: 1.7 M sets */
}

static void test_low_weight_phenomenological(void **state)
{
	(void)state;
	low_weight(3, QL_QEC_PHENOMENOLOGICAL, 3, 0, 0, 1);
	low_weight(3, QL_QEC_PHENOMENOLOGICAL, 6, 0, 0, 1);
	low_weight(5, QL_QEC_PHENOMENOLOGICAL, 5, 0, 0, 0);
}

/* The window slides (rounds well past the window; the smallest windows)
 * and still corrects every low-weight set. */
static void test_low_weight_sliding(void **state)
{
	(void)state;
	low_weight(3, QL_QEC_PHENOMENOLOGICAL, 12, 2, 1, 0);
	low_weight(3, QL_QEC_PHENOMENOLOGICAL, 12, 0, 0, 1);
	low_weight(5, QL_QEC_PHENOMENOLOGICAL, 12, 0, 0, 0);
	low_weight(5, QL_QEC_PHENOMENOLOGICAL, 9, 4, 2, 0);
	low_weight(5, QL_QEC_PHENOMENOLOGICAL, 9, 3, 1, 0);
}

/* p != q: edges of two lengths (weighted growth proper); still every
 * low-weight set, the exact decoder with the same weights agreeing. */
static void test_low_weight_unequal_rates(void **state)
{
	static const double qs[] = { 0.001, 0.1 };

	(void)state;
	for (unsigned i = 0; i < 2; i++) {
		lw_q = qs[i];
		low_weight(3, QL_QEC_PHENOMENOLOGICAL, 4, 0, 0, 1);
		low_weight(5, QL_QEC_PHENOMENOLOGICAL, 5, 0, 0, 0);
		low_weight(5, QL_QEC_PHENOMENOLOGICAL, 9, 4, 2, 0);
	}
	lw_q = 0.01;
}

static uint64_t rng_state = 0x853c49e6748fea9bull;

static uint64_t rng(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

/* Random faults at rate p; the true data error x (XOR over rounds). */
static void random_faults(const struct ql_qec_code *c, const struct ql_qec_params *pa, double p,
			  struct faults *f, uint64_t *x)
{
	uint64_t thr = (uint64_t)(p * 18446744073709551616.0);

	memset(f, 0, sizeof(*f));
	memset(x, 0, QL_QEC_WORDS * 8);
	for (unsigned i = 0; i < n_locations(c, pa); i++)
		if (rng() < thr) {
			toggle(c, pa, f, i);
			if (i < (pa->rounds ? pa->rounds : 1) * c->nq)
				x[(i % c->nq) / 64] ^= 1ull << (i % c->nq % 64);
		}
}

/* The correction explains the final syndrome (x + correction has none)
 * and its observable parity is the predicted flip: the committed
 * corrections of every window, and the detector flips carried across the
 * commit line, add up. Many shots at a high rate, sliding windows. */
static void consistent(unsigned d, enum ql_qec_noise noise, unsigned rounds, double p,
		       unsigned window, unsigned commit)
{
	struct ql_qec_code *c;
	struct ql_qec_params pa = { d, rounds, noise, p, p, 1 };
	struct ql_qec_decoder_opts op = { window, commit };
	struct ql_qec_decoder *dec;
	struct faults *f = malloc(sizeof(*f));
	uint8_t *fr = malloc((MAXR + 1) * 16), o, fl, bits[32];
	uint64_t x[QL_QEC_WORDS];

	assert_int_equal(ql_qec_code_create(d, &c), 0);
	assert_int_equal(ql_qec_decoder_create(c, &pa, &op, &dec), 0);
	for (int shot = 0; shot < 300; shot++) {
		uint8_t syn_obs = 0;

		random_faults(c, &pa, p, f, x);
		assert_int_equal(ql__qec_frames_from_faults(c, &pa, f->data, f->meas, fr, &o), 0);
		fl = uf(dec, c, &pa, fr);
		assert_int_equal(ql_qec_decoder_corrections(dec, bits, 8 * sizeof(bits)), 0);
		for (unsigned q = 0; q < c->nq; q++)
			if (ql__qec_bit(bits, q))
				x[q / 64] ^= 1ull << (q % 64);
		for (unsigned s = 0; s < c->nd; s++) {
			unsigned par = 0;

			for (unsigned k = 0; k < c->nsup[s]; k++)
				par ^= (x[c->sup[s][k] / 64] >> (c->sup[s][k] % 64)) & 1;
			assert_int_equal(par, 0);
		}
		for (unsigned q = 0; q < d; q++) {
			syn_obs ^= ql__qec_bit(bits, q);
		}
		assert_int_equal(syn_obs, fl);
		for (unsigned q = c->nq; q < 8 * sizeof(bits); q++)
			assert_int_equal(ql__qec_bit(bits, q), 0);
	}
	ql_qec_decoder_destroy(dec);
	ql_qec_code_destroy(c);
	free(f);
	free(fr);
}

static void test_correction_consistent(void **state)
{
	(void)state;
	consistent(3, QL_QEC_CODE_CAPACITY, 0, 0.1, 0, 0);
	consistent(9, QL_QEC_CODE_CAPACITY, 0, 0.1, 0, 0);
	consistent(5, QL_QEC_PHENOMENOLOGICAL, 20, 0.03, 0, 0);
	consistent(7, QL_QEC_PHENOMENOLOGICAL, 30, 0.03, 4, 1);
	consistent(7, QL_QEC_PHENOMENOLOGICAL, 30, 0.03, 3, 2);
	consistent(15, QL_QEC_PHENOMENOLOGICAL, 31, 0.02, 0, 0);
}

/* Random shots on d = 3: union-find against exact minimum weight. They may
 * differ beyond weight 1; the rate is printed, and union-find may not be
 * much worse than minimum weight. */
static void versus_exact(enum ql_qec_noise noise, unsigned rounds, double p, unsigned shots)
{
	struct ql_qec_code *c;
	struct ql_qec_params pa = { 3, rounds, noise, p, p, 2024 };
	struct ql_qec_decoder *dec;
	struct ql_qec_sim *sim;
	uint8_t fr[(MAXR + 1) * 2], o, e;
	unsigned differ = 0, uf_wrong = 0, ex_wrong = 0;

	assert_int_equal(ql_qec_code_create(3, &c), 0);
	assert_int_equal(ql_qec_decoder_create(c, &pa, NULL, &dec), 0);
	assert_int_equal(ql_qec_sim_create(c, &pa, &sim), 0);
	for (unsigned i = 0; i < shots; i++) {
		uint8_t f;

		assert_int_equal(ql_qec_sim_shot(sim, fr, &o), 0);
		f = uf(dec, c, &pa, fr);
		assert_int_equal(ql_qec_decode_exact(c, &pa, fr, &e), 0);
		differ += f != e;
		uf_wrong += f != o;
		ex_wrong += e != o;
	}
	printf("d=3 %s rounds=%u p=q=%g: %u shots, union-find and exact differ on %u (%.2f %%); "
	       "logical errors: union-find %u, exact %u\n",
	       noise == QL_QEC_CODE_CAPACITY ? "code-capacity" : "phenomenological", rounds, p,
	       shots, differ, 100.0 * differ / shots, uf_wrong, ex_wrong);
	assert_true(ex_wrong > 0);
	assert_true(uf_wrong < 2 * ex_wrong);
	ql_qec_sim_destroy(sim);
	ql_qec_decoder_destroy(dec);
	ql_qec_code_destroy(c);
}

static void test_versus_exact(void **state)
{
	(void)state;
	versus_exact(QL_QEC_CODE_CAPACITY, 0, 0.05, 20000);
	versus_exact(QL_QEC_PHENOMENOLOGICAL, 3, 0.02, 3000);
}

/* The exact decoder on its own: no defect, no flip; a defect on the top
 * boundary's check alone is a row-0 qubit (flip); too big a code. */
static void test_exact_refusals(void **state)
{
	struct ql_qec_code *c3, *c7;
	struct ql_qec_params p3 = { 3, 0, QL_QEC_CODE_CAPACITY, 0.05, 0.05, 1 };
	struct ql_qec_params p7 = { 7, 0, QL_QEC_CODE_CAPACITY, 0.05, 0.05, 1 };
	uint8_t fr[8] = { 0 }, e = 9;

	(void)state;
	assert_int_equal(ql_qec_code_create(3, &c3), 0);
	assert_int_equal(ql_qec_code_create(7, &c7), 0);
	assert_int_equal(ql_qec_decode_exact(c3, &p3, fr, &e), 0);
	assert_int_equal(e, 0);
	assert_int_equal(ql_qec_decode_exact(c7, &p7, fr, &e), -E2BIG);
	assert_int_equal(ql_qec_decode_exact(c3, &p7, fr, &e), -EINVAL);
	assert_int_equal(ql_qec_decode_exact(c3, &p3, NULL, &e), -EINVAL);
	p3.rounds = 200;
	p3.noise = QL_QEC_PHENOMENOLOGICAL;
	assert_int_equal(ql_qec_decode_exact(c3, &p3, fr, &e), -E2BIG);
	ql_qec_code_destroy(c3);
	ql_qec_code_destroy(c7);
}

static void test_decoder_refusals(void **state)
{
	struct ql_qec_code *c;
	struct ql_qec_params pa = { 5, 4, QL_QEC_PHENOMENOLOGICAL, 0.01, 0.01, 1 }, cc;
	struct ql_qec_decoder_opts bad1 = { 4, 4 }, bad2 = { 1, 0 }, bad3 = { 5000, 1 };
	struct ql_qec_decoder *dec = (struct ql_qec_decoder *)1;
	uint8_t fr[2] = { 0 }, f, bits[4];

	(void)state;
	assert_int_equal(ql_qec_code_create(5, &c), 0);
	assert_int_equal(ql_qec_decoder_create(c, &pa, &bad1, &dec), -EINVAL);
	assert_null(dec);
	assert_int_equal(ql_qec_decoder_create(c, &pa, &bad2, &dec), -EINVAL);
	assert_int_equal(ql_qec_decoder_create(c, &pa, &bad3, &dec), -EINVAL);
	cc = pa;
	cc.distance = 7;
	assert_int_equal(ql_qec_decoder_create(c, &cc, NULL, &dec), -EINVAL);
	assert_int_equal(ql_qec_decoder_create(c, &pa, NULL, &dec), 0);
	assert_int_equal(ql_qec_decoder_push(dec, NULL), -EINVAL);
	assert_int_equal(ql_qec_decoder_push(dec, fr), 0);
	assert_int_equal(ql_qec_decoder_finish(dec, fr, &f), 0);
	assert_int_equal(f, 0);
	assert_int_equal(ql_qec_decoder_push(dec, fr), -EALREADY);
	assert_int_equal(ql_qec_decoder_finish(dec, fr, &f), -EALREADY);
	assert_int_equal(ql_qec_decoder_corrections(dec, bits, 24), -EINVAL);
	assert_int_equal(ql_qec_decoder_corrections(dec, bits, 25), 0);
	ql_qec_decoder_reset(dec);
	assert_int_equal(ql_qec_decoder_push(dec, fr), 0);
	ql_qec_decoder_destroy(dec);
	cc = (struct ql_qec_params){ 5, 0, QL_QEC_CODE_CAPACITY, 0.1, 0, 1 };
	assert_int_equal(ql_qec_decoder_create(c, &cc, NULL, &dec), 0);
	assert_int_equal(ql_qec_decoder_push(dec, fr), -EINVAL);
	assert_int_equal(ql_qec_decoder_finish(dec, fr, &f), 0);
	ql_qec_decoder_destroy(dec);
	ql_qec_decoder_destroy(NULL);
	ql_qec_decoder_reset(NULL);
	ql_qec_code_destroy(c);
}

/* Bits past the last detector (d = 3: 4 detectors, 4 spare bits) are
 * ignored: a frame with garbage there decodes as without it. */
static void test_spare_bits_ignored(void **state)
{
	struct ql_qec_code *c;
	struct ql_qec_params pa = { 3, 0, QL_QEC_CODE_CAPACITY, 0.1, 0, 1 };
	struct ql_qec_decoder *dec;
	uint8_t f1, f2;

	(void)state;
	assert_int_equal(ql_qec_code_create(3, &c), 0);
	assert_int_equal(ql_qec_decoder_create(c, &pa, NULL, &dec), 0);
	for (unsigned s = 0; s < 16; s++) {
		uint8_t fr = (uint8_t)s, dirty = (uint8_t)(s | 0xf0);

		f1 = uf(dec, c, &pa, &fr);
		f2 = uf(dec, c, &pa, &dirty);
		assert_int_equal(f1, f2);
	}
	ql_qec_decoder_destroy(dec);
	ql_qec_code_destroy(c);
}

/* Work follows the defects, not the code or the number of rounds: 200
 * empty rounds cost no vertex and no edge at d = 5 and d = 15; one data
 * flip in the bulk (two defects, next to each other) costs the same at
 * both distances: its two vertices and their edges, in each of the (at
 * most two) overlapping windows that decode its round (the same window
 * sizes at both distances). */
static void test_sparse_work(void **state)
{
	uint64_t v[2], e[2];

	(void)state;
	for (unsigned k = 0; k < 2; k++) {
		unsigned d = k ? 15 : 5;
		struct ql_qec_code *c;
		struct ql_qec_params pa = { d, 200, QL_QEC_PHENOMENOLOGICAL, 0.01, 0.01, 1 };
		struct ql_qec_decoder *dec;
		struct faults *f = calloc(1, sizeof(*f));
		uint8_t *fr = calloc(201, 16), o, fl;
		unsigned q = (d / 2) * d + d / 2;	   /* the centre */
		struct ql_qec_decoder_opts op = { 10, 5 }; /* the same windows for both */

		assert_int_equal(ql_qec_code_create(d, &c), 0);
		assert_int_equal(ql_qec_decoder_create(c, &pa, &op, &dec), 0);
		for (unsigned t = 0; t < 200; t++)
			assert_int_equal(ql_qec_decoder_push(dec, fr), 0);
		assert_int_equal(ql_qec_decoder_finish(dec, fr, &fl), 0);
		ql__qec_decoder_work(dec, &v[k], &e[k]);
		assert_int_equal(v[k], 0);
		assert_int_equal(e[k], 0);
		/* frames_from_faults takes at most MAXR rounds: place the flip by
		 * hand, round 100 of 200 */
		f->data[0][q / 64] |= 1ull << (q % 64);
		pa.rounds = 1;
		assert_int_equal(ql__qec_frames_from_faults(c, &pa, f->data, f->meas, fr, &o), 0);
		pa.rounds = 200;
		ql_qec_decoder_reset(dec);
		for (unsigned t = 0; t < 200; t++)
			assert_int_equal(ql_qec_decoder_push(dec, fr + (t == 100 ? 0 : 200 * 16)),
					 0);
		assert_int_equal(ql_qec_decoder_finish(dec, fr + 200 * 16, &fl), 0);
		assert_int_equal(fl, o);
		ql__qec_decoder_work(dec, &v[k], &e[k]);
		assert_true(v[k] >= 2 && v[k] <= 4);
		assert_true(e[k] >= 1 && e[k] <= 24);
		ql_qec_decoder_destroy(dec);
		ql_qec_code_destroy(c);
		free(f);
		free(fr);
	}
	assert_true(v[0] == v[1] && e[0] == e[1]);
}

/* ---- the hot path: simulating and pushing rounds allocate nothing ---- */

struct hot {
	struct ql_qec_code *c;
	struct ql_qec_params pa;
	struct ql_qec_decoder *dec;
	struct ql_qec_sim *sim;
	uint8_t *frames, *obs;
	unsigned shots;
	unsigned wrong;
};

/* The simulation too (a VPPU streams shots from it): simulate into the
 * first shot's buffer and decode, shot after shot. */
static int hot_sim_loop(void *arg)
{
	struct hot *h = arg;
	size_t fb = h->c->frame_bytes;

	h->wrong = 0;
	for (unsigned i = 0; i < h->shots; i++) {
		uint8_t o, f;

		if (ql_qec_sim_shot(h->sim, h->frames, &o))
			return 3;
		ql_qec_decoder_reset(h->dec);
		for (unsigned t = 0; t < h->pa.rounds; t++)
			if (ql_qec_decoder_push(h->dec, h->frames + t * fb))
				return 1;
		if (ql_qec_decoder_finish(h->dec, h->frames + h->pa.rounds * fb, &f))
			return 2;
		h->wrong += f != o;
	}
	return 0;
}

static int hot_loop(void *arg)
{
	struct hot *h = arg;
	size_t n = (h->pa.rounds + 1) * h->c->frame_bytes;

	h->wrong = 0;
	for (unsigned i = 0; i < h->shots; i++) {
		const uint8_t *fr = h->frames + i * n;
		uint8_t f;

		ql_qec_decoder_reset(h->dec);
		for (unsigned t = 0; t < h->pa.rounds; t++)
			if (ql_qec_decoder_push(h->dec, fr + t * h->c->frame_bytes))
				return 1;
		if (ql_qec_decoder_finish(h->dec, fr + h->pa.rounds * h->c->frame_bytes, &f))
			return 2;
		h->wrong += f != h->obs[i];
	}
	return 0;
}

static void test_hot_path(void **state)
{
	static const unsigned ds[] = { 5, 11, 15 };
	char why[160];

	(void)state;
	for (unsigned k = 0; k < 3; k++) {
		struct hot h = { 0 };
		struct ql_qec_sim *sim;
		size_t n;

		h.pa = (struct ql_qec_params){
			ds[k], 100, QL_QEC_PHENOMENOLOGICAL, 0.005, 0.005, 5
		};
		h.shots = 100; /* 10 000 rounds */
		assert_int_equal(ql_qec_code_create(ds[k], &h.c), 0);
		assert_int_equal(ql_qec_sim_create(h.c, &h.pa, &sim), 0);
		assert_int_equal(ql_qec_decoder_create(h.c, &h.pa, NULL, &h.dec), 0);
		n = (h.pa.rounds + 1) * h.c->frame_bytes;
		h.frames = malloc(h.shots * n);
		h.obs = malloc(h.shots);
		for (unsigned i = 0; i < h.shots; i++)
			assert_int_equal(ql_qec_sim_shot(sim, h.frames + i * n, &h.obs[i]), 0);
		if (hp_check(hot_loop, &h, why, sizeof(why)))
			fail_msg("d=%u, %u rounds: %s", ds[k], h.shots * h.pa.rounds, why);
		/* the loop decoded: defects were there, and mostly right */
		assert_true(h.wrong < h.shots / 4);
		h.sim = sim;
		if (hp_check(hot_sim_loop, &h, why, sizeof(why)))
			fail_msg("d=%u, simulating and decoding %u rounds: %s", ds[k],
				 h.shots * h.pa.rounds, why);
		assert_true(h.wrong < h.shots / 4);
		free(h.frames);
		free(h.obs);
		ql_qec_decoder_destroy(h.dec);
		ql_qec_sim_destroy(sim);
		ql_qec_code_destroy(h.c);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_low_weight_code_capacity),
		cmocka_unit_test(test_low_weight_phenomenological),
		cmocka_unit_test(test_low_weight_sliding),
		cmocka_unit_test(test_low_weight_unequal_rates),
		cmocka_unit_test(test_correction_consistent),
		cmocka_unit_test(test_versus_exact),
		cmocka_unit_test(test_exact_refusals),
		cmocka_unit_test(test_decoder_refusals),
		cmocka_unit_test(test_spare_bits_ignored),
		cmocka_unit_test(test_sparse_work),
		cmocka_unit_test(test_hot_path),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
