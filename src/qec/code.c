/* SPDX-License-Identifier: MIT */
/* The rotated surface code's geometry (layout in qec_internal.h), the PRNG
 * and the memory experiment's simulation. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "qec/qec_internal.h"
#include "qlink/error.h"

/* ---- PRNG: splitmix64 seeds xoshiro256** ---- */

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void ql__qec_rng_seed(struct ql_qec_rng *r, uint64_t seed)
{
	for (int i = 0; i < 4; i++)
		r->s[i] = splitmix64(&seed);
}

static inline uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

uint64_t ql__qec_rng_next(struct ql_qec_rng *r)
{
	uint64_t *s = r->s;
	uint64_t out = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return out;
}

/* A draw below the threshold has probability p (to 2^-64). */
uint64_t ql__qec_threshold(double p)
{
	if (!(p > 0))
		return 0;
	if (p >= 1)
		return UINT64_MAX;
	p *= 18446744073709551616.0; /* 2^64 */
	return p >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)p;
}

/* Natural logarithm for the set-up's edge weights, without libm (libqlink
 * links none): x = m * 2^e, ln m = 2 atanh((m-1)/(m+1)) as a series. */
double ql__qec_ln(double x)
{
	union {
		double f;
		uint64_t u;
	} v = { .f = x };
	int e;
	double m, z, z2, term, sum = 0;

	if (!(x > 0))
		return -1e300;
	e = (int)((v.u >> 52) & 0x7ff) - 1023;
	if (e == -1023) /* subnormal: scale up first */
		return ql__qec_ln(x * 4503599627370496.0) - 52 * 0.6931471805599453;
	v.u = (v.u & ~(0x7ffull << 52)) | (1023ull << 52);
	m = v.f; /* in [1, 2) */
	if (m > 1.4142135623730951) {
		m /= 2;
		e++;
	}
	z = (m - 1) / (m + 1); /* |z| < 0.172 */
	z2 = z * z;
	term = z;
	for (int k = 1; k < 40; k += 2) {
		sum += term / k;
		term *= z2;
	}
	return e * 0.6931471805599453 + 2 * sum;
}

/* ---- geometry ---- */

static int is_z_plaquette(unsigned d, unsigned i, unsigned j)
{
	if ((i + j) % 2)
		return 0;
	if (i >= 1 && i <= d - 1 && j >= 1 && j <= d - 1)
		return 1;
	/* weight-2 Z plaquettes on the left and right sides only */
	return (j == 0 || j == d) && i >= 1 && i <= d - 1;
}

static int is_x_plaquette(unsigned d, unsigned i, unsigned j)
{
	if ((i + j) % 2 == 0)
		return 0;
	if (i >= 1 && i <= d - 1 && j >= 1 && j <= d - 1)
		return 1;
	return (i == 0 || i == d) && j >= 1 && j <= d - 1;
}

/* The data qubits of plaquette (i, j), into sup; their number. */
static unsigned plaquette_support(unsigned d, unsigned i, unsigned j, uint16_t sup[4])
{
	unsigned n = 0;

	for (unsigned di = 0; di < 2; di++)
		for (unsigned dj = 0; dj < 2; dj++) {
			unsigned r = i + di, c = j + dj; /* (i-1+di, j-1+dj) + 1 */

			if (r >= 1 && r <= d && c >= 1 && c <= d)
				sup[n++] = (uint16_t)((r - 1) * d + (c - 1));
		}
	return n;
}

void ql_qec_code_destroy(struct ql_qec_code *c)
{
	if (!c)
		return;
	free(c->det);
	free(c->obs);
	free(c->plaq);
	free(c->nsup);
	free(c->sup);
	free(c->deg);
	free(c->adj);
	free(c->xnsup);
	free(c->xsup);
	free(c);
}

int ql_qec_code_create(unsigned distance, struct ql_qec_code **out)
{
	struct ql_qec_code *c;
	unsigned d = distance, s = 0, x = 0;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (d < QL_QEC_MIN_DISTANCE || d > QL_QEC_MAX_DISTANCE || d % 2 == 0)
		return ql_error_set(-EINVAL, "surface code distance %u: odd, %u to %u", d,
				    QL_QEC_MIN_DISTANCE, QL_QEC_MAX_DISTANCE);
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->d = d;
	c->nq = d * d;
	c->nd = (d * d - 1) / 2;
	c->nx = c->nd;
	c->frame_bytes = (c->nd + 7) / 8;
	c->det = malloc(c->nq * sizeof(*c->det));
	c->obs = calloc(c->nq, 1);
	c->plaq = malloc(c->nd * sizeof(*c->plaq));
	c->nsup = malloc(c->nd);
	c->sup = malloc(c->nd * sizeof(*c->sup));
	c->deg = calloc(c->nd, 1);
	c->adj = malloc(c->nd * sizeof(*c->adj));
	c->xnsup = malloc(c->nx);
	c->xsup = malloc(c->nx * sizeof(*c->xsup));
	if (!c->det || !c->obs || !c->plaq || !c->nsup || !c->sup || !c->deg || !c->adj ||
	    !c->xnsup || !c->xsup) {
		ql_qec_code_destroy(c);
		return -ENOMEM;
	}
	for (unsigned q = 0; q < c->nq; q++)
		c->det[q][0] = c->det[q][1] = QL_QEC_NONE;
	for (unsigned i = 0; i <= d; i++)
		for (unsigned j = 0; j <= d; j++) {
			if (is_z_plaquette(d, i, j)) {
				c->plaq[s][0] = (uint8_t)i;
				c->plaq[s][1] = (uint8_t)j;
				c->nsup[s] = (uint8_t)plaquette_support(d, i, j, c->sup[s]);
				for (unsigned k = 0; k < c->nsup[s]; k++) {
					uint32_t *dq = c->det[c->sup[s][k]];

					dq[dq[0] == QL_QEC_NONE ? 0 : 1] = s;
				}
				s++;
			} else if (is_x_plaquette(d, i, j)) {
				c->xnsup[x] = (uint8_t)plaquette_support(d, i, j, c->xsup[x]);
				x++;
			}
		}
	for (unsigned q = 0; q < d; q++)
		c->obs[q] = 1; /* data row 0 */
	for (unsigned q = 0; q < c->nq; q++)
		for (unsigned k = 0; k < 2; k++) {
			uint32_t a = c->det[q][k], b = c->det[q][!k];

			if (a == QL_QEC_NONE)
				continue;
			c->adj[a][c->deg[a]].q = q;
			c->adj[a][c->deg[a]].to = b;
			c->deg[a]++;
		}
	*out = c;
	return 0;
}

unsigned ql_qec_code_distance(const struct ql_qec_code *c)
{
	return c->d;
}

unsigned ql_qec_code_data_qubits(const struct ql_qec_code *c)
{
	return c->nq;
}

unsigned ql_qec_code_detectors(const struct ql_qec_code *c)
{
	return c->nd;
}

size_t ql_qec_frame_bytes(const struct ql_qec_code *c)
{
	return c->frame_bytes;
}

int ql__qec_params_check(const struct ql_qec_code *code, const struct ql_qec_params *pa)
{
	if (!code || !pa)
		return ql_error_set(-EINVAL, "qec: no code or no parameters");
	if (pa->distance != code->d)
		return ql_error_set(-EINVAL, "qec: parameters for distance %u, code of distance %u",
				    pa->distance, code->d);
	if (!(pa->p >= 0 && pa->p <= 1) || !(pa->q >= 0 && pa->q <= 1))
		return ql_error_set(-EINVAL, "qec: error rates p = %g, q = %g: each in [0, 1]",
				    pa->p, pa->q);
	if (pa->noise == QL_QEC_CODE_CAPACITY && pa->rounds != 0)
		return ql_error_set(-EINVAL, "qec: code-capacity noise has no noisy rounds (%u)",
				    pa->rounds);
	if (pa->noise == QL_QEC_PHENOMENOLOGICAL && pa->rounds == 0)
		return ql_error_set(-EINVAL, "qec: phenomenological noise needs a noisy round");
	if (pa->noise != QL_QEC_CODE_CAPACITY && pa->noise != QL_QEC_PHENOMENOLOGICAL)
		return ql_error_set(-EINVAL, "qec: unknown noise model %d", (int)pa->noise);
	return 0;
}

/* ---- the memory experiment ---- */

static inline void bit_flip(uint64_t *w, unsigned i)
{
	w[i >> 6] ^= 1ull << (i & 63);
}

static inline int bit_get(const uint64_t *w, unsigned i)
{
	return (w[i >> 6] >> (i & 63)) & 1;
}

/* Toggle the true syndrome for a flip of data qubit q. */
static inline void flip_data(const struct ql_qec_code *c, uint64_t *x, uint64_t *syn, unsigned q)
{
	bit_flip(x, q);
	bit_flip(syn, c->det[q][0]);
	if (c->det[q][1] != QL_QEC_NONE)
		bit_flip(syn, c->det[q][1]);
}

static void frame_out(const struct ql_qec_code *c, const uint64_t *ev, uint8_t *frame)
{
	for (size_t b = 0; b < c->frame_bytes; b++)
		frame[b] = (uint8_t)(ev[b >> 3] >> ((b & 7) * 8));
}

static uint8_t observable_of(const struct ql_qec_code *c, const uint64_t *x)
{
	uint8_t o = 0;

	for (unsigned q = 0; q < c->d; q++)
		o ^= (uint8_t)bit_get(x, q);
	return o;
}

int ql__qec_frames_from_faults(const struct ql_qec_code *c, const struct ql_qec_params *pa,
			       const uint64_t (*data)[QL_QEC_WORDS],
			       const uint64_t (*meas)[QL_QEC_WORDS], uint8_t *frames,
			       uint8_t *observable)
{
	uint64_t x[QL_QEC_WORDS] = { 0 }, syn[QL_QEC_WORDS] = { 0 }, prev[QL_QEC_WORDS] = { 0 };
	uint64_t ev[QL_QEC_WORDS];
	unsigned rounds = pa->noise == QL_QEC_CODE_CAPACITY ? 0 : pa->rounds;
	int rc = ql__qec_params_check(c, pa);

	if (rc)
		return rc;
	for (unsigned t = 0; t <= rounds; t++) {
		int final = t == rounds;

		if (!final || pa->noise == QL_QEC_CODE_CAPACITY)
			for (unsigned q = 0; q < c->nq; q++)
				if (bit_get(data[t], q))
					flip_data(c, x, syn, q);
		for (unsigned w = 0; w < QL_QEC_WORDS; w++) {
			uint64_t m = syn[w] ^ (final ? 0 : meas[t][w]);

			ev[w] = m ^ prev[w];
			prev[w] = m;
		}
		frame_out(c, ev, frames + (size_t)t * c->frame_bytes);
	}
	*observable = observable_of(c, x);
	return 0;
}

struct ql_qec_sim {
	const struct ql_qec_code *code;
	struct ql_qec_params params;
	struct ql_qec_rng rng;
	uint64_t thr_p, thr_q;
};

int ql_qec_sim_create(const struct ql_qec_code *code, const struct ql_qec_params *params,
		      struct ql_qec_sim **out)
{
	struct ql_qec_sim *s;
	int rc;

	if (!out)
		return -EINVAL;
	*out = NULL;
	rc = ql__qec_params_check(code, params);
	if (rc)
		return rc;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->code = code;
	s->params = *params;
	ql__qec_rng_seed(&s->rng, params->seed);
	s->thr_p = ql__qec_threshold(params->p);
	s->thr_q = ql__qec_threshold(params->q);
	*out = s;
	return 0;
}

void ql_qec_sim_destroy(struct ql_qec_sim *s)
{
	free(s);
}

/* Same frames as ql__qec_frames_from_faults with random faults, drawn in a
 * fixed order (per round: data qubits 0..nq-1, then detectors 0..nd-1), so
 * that a seed fixes the shot sequence. */
int ql_qec_sim_shot(struct ql_qec_sim *s, uint8_t *frames, uint8_t *observable)
{
	const struct ql_qec_code *c;
	uint64_t x[QL_QEC_WORDS] = { 0 }, syn[QL_QEC_WORDS] = { 0 }, prev[QL_QEC_WORDS] = { 0 };
	uint64_t ev[QL_QEC_WORDS];
	unsigned rounds;

	if (!s || !frames || !observable)
		return -EINVAL;
	c = s->code;
	rounds = s->params.rounds;
	for (unsigned t = 0; t <= rounds; t++) {
		int final = t == rounds;
		uint64_t meas[QL_QEC_WORDS] = { 0 };

		if (!final || s->params.noise == QL_QEC_CODE_CAPACITY)
			for (unsigned q = 0; q < c->nq; q++)
				if (ql__qec_bernoulli(&s->rng, s->thr_p))
					flip_data(c, x, syn, q);
		if (!final)
			for (unsigned d = 0; d < c->nd; d++)
				if (ql__qec_bernoulli(&s->rng, s->thr_q))
					bit_flip(meas, d);
		for (unsigned w = 0; w < QL_QEC_WORDS; w++) {
			uint64_t m = syn[w] ^ meas[w];

			ev[w] = m ^ prev[w];
			prev[w] = m;
		}
		frame_out(c, ev, frames + (size_t)t * c->frame_bytes);
	}
	*observable = observable_of(c, x);
	return 0;
}
