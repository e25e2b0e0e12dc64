/* SPDX-License-Identifier: MIT */
/*
 * sdr/ec: the erasure code (ISA-L Reed-Solomon over GF(2^8), Cauchy matrix)
 * and the stripe geometry. See ec.h.
 */
#include "sdr/ec.h"

#include <errno.h>
#include <isa-l/erasure_code.h>
#include <stdlib.h>
#include <string.h>

#include "qlink/error.h"
#include "qlink/sdr_ec.h"

struct sdr_ec_codec {
	unsigned int k, m;
	size_t chunk;
	/* (k+m) x k generator: identity on top (systematic), Cauchy below */
	uint8_t gen[(SDR_EC_K_MAX + SDR_EC_M_MAX) * SDR_EC_K_MAX];
	uint8_t enc_tbls[32 * SDR_EC_K_MAX * SDR_EC_M_MAX];
	/* decode scratch: the k rows of what arrived, its inverse, the rows
	 * that give the missing data chunks, their tables */
	uint8_t sub[SDR_EC_K_MAX * SDR_EC_K_MAX];
	uint8_t inv[SDR_EC_K_MAX * SDR_EC_K_MAX];
	uint8_t rows[SDR_EC_M_MAX * SDR_EC_K_MAX];
	uint8_t dec_tbls[32 * SDR_EC_K_MAX * SDR_EC_M_MAX];
	uint8_t *srcs[SDR_EC_K_MAX];
	uint8_t *outs[SDR_EC_M_MAX];
	uint8_t *zero; /* chunk bytes of zeros */
	uint8_t *pad;  /* chunk bytes of scratch */
};

int sdr_ec_codec_create(unsigned int k, unsigned int m, size_t chunk, struct sdr_ec_codec **out)
{
	struct sdr_ec_codec *c;

	if (!out)
		return ql_error_set(-EINVAL, "sdr ec: no output pointer");
	*out = NULL;
	if (k < 1 || k > SDR_EC_K_MAX || m < 1 || m > SDR_EC_M_MAX)
		return ql_error_set(-EINVAL, "sdr ec: k=%u m=%u out of range (k 1..%d, m 1..%d)", k,
				    m, SDR_EC_K_MAX, SDR_EC_M_MAX);
	if (chunk < 1 || chunk > (size_t)INT32_MAX)
		return ql_error_set(-EINVAL, "sdr ec: chunk size %zu out of range", chunk);
	c = calloc(1, sizeof(*c));
	if (!c)
		return ql_error_set(-ENOMEM, "sdr ec: out of memory");
	c->k = k;
	c->m = m;
	c->chunk = chunk;
	c->zero = calloc(1, chunk);
	c->pad = calloc(1, chunk);
	if (!c->zero || !c->pad) {
		sdr_ec_codec_destroy(c);
		return ql_error_set(-ENOMEM, "sdr ec: out of memory for %zu-byte chunks", chunk);
	}
	/* Cauchy rather than ISA-L's Vandermonde-style gf_gen_rs_matrix: every
	 * square submatrix of a Cauchy matrix is invertible, so any k of the
	 * k+m chunks decode for every k and m (the RS one only for small m). */
	gf_gen_cauchy1_matrix(c->gen, (int)(k + m), (int)k);
	ec_init_tables((int)k, (int)m, &c->gen[k * k], c->enc_tbls);
	*out = c;
	return 0;
}

void sdr_ec_codec_destroy(struct sdr_ec_codec *c)
{
	if (!c)
		return;
	free(c->zero);
	free(c->pad);
	free(c);
}

unsigned int sdr_ec_codec_k(const struct sdr_ec_codec *c)
{
	return c->k;
}

unsigned int sdr_ec_codec_m(const struct sdr_ec_codec *c)
{
	return c->m;
}

size_t sdr_ec_codec_chunk(const struct sdr_ec_codec *c)
{
	return c->chunk;
}

const uint8_t *sdr_ec_codec_zero(const struct sdr_ec_codec *c)
{
	return c->zero;
}

uint8_t *sdr_ec_codec_pad(struct sdr_ec_codec *c)
{
	return c->pad;
}

void sdr_ec_encode(struct sdr_ec_codec *c, const uint8_t *const *data, uint8_t *const *parity,
		   size_t len)
{
	unsigned int i;

	if (len == 0 || len > c->chunk)
		return;
	/* ISA-L takes non-const pointer arrays; it only reads the sources */
	for (i = 0; i < c->k; i++)
		c->srcs[i] = (uint8_t *)(uintptr_t)data[i];
	for (i = 0; i < c->m; i++)
		c->outs[i] = parity[i];
	ec_encode_data((int)len, (int)c->k, (int)c->m, c->enc_tbls, c->srcs, c->outs);
}

int sdr_ec_decode(struct sdr_ec_codec *c, uint64_t present, uint8_t *const *chunks, size_t len)
{
	unsigned int n = c->k + c->m, k = c->k, i, j, got = 0, nerr = 0;
	uint8_t missing[SDR_EC_M_MAX];

	if (len > c->chunk || (n < 64 && (present >> n) != 0))
		return -EINVAL;
	for (i = 0; i < k; i++)
		if (!(present & (1ull << i))) {
			if (nerr == c->m)
				return -EAGAIN; /* more than m data chunks lost */
			missing[nerr++] = (uint8_t)i;
		}
	if (nerr == 0)
		return 0;
	/* the first k chunks that arrived, and their generator rows */
	for (i = 0; i < n && got < k; i++) {
		if (!(present & (1ull << i)))
			continue;
		memcpy(&c->sub[got * k], &c->gen[i * k], k);
		c->srcs[got++] = chunks[i];
	}
	if (got < k)
		return -EAGAIN;
	if (len == 0)
		return (int)nerr;
	/* sub * data = received, so data = inv * received: the rows of inv of
	 * the missing data chunks rebuild them */
	if (gf_invert_matrix(c->sub, c->inv, (int)k) != 0)
		return -EIO; /* cannot happen for a Cauchy code */
	for (j = 0; j < nerr; j++) {
		memcpy(&c->rows[j * k], &c->inv[missing[j] * k], k);
		c->outs[j] = chunks[missing[j]];
	}
	ec_init_tables((int)k, (int)nerr, c->rows, c->dec_tbls);
	ec_encode_data((int)len, (int)k, (int)nerr, c->dec_tbls, c->srcs, c->outs);
	return (int)nerr;
}

/* ---- geometry -------------------------------------------------------- */

int sdr_ec_geom_init(struct sdr_ec_geom *g, uint64_t len, uint32_t chunk, uint32_t k, uint32_t m)
{
	uint64_t nchunks, nstripes;

	memset(g, 0, sizeof(*g));
	if (chunk == 0 || k == 0 || m == 0 || k > SDR_EC_K_MAX || m > SDR_EC_M_MAX)
		return -EINVAL;
	nchunks = len == 0 ? 1 : (len - 1) / chunk + 1;
	if (nchunks > UINT32_MAX)
		return -EINVAL;
	nstripes = (nchunks + k - 1) / k;
	/* nstripes * m * chunk: nstripes < 2^32, m <= 16, chunk < 2^32 */
	if (nstripes * m > UINT64_MAX / chunk)
		return -EINVAL;
	g->len = len;
	g->chunk = chunk;
	g->k = k;
	g->m = m;
	g->nchunks = (uint32_t)nchunks;
	g->nstripes = (uint32_t)nstripes;
	g->parity_len = nstripes * m * chunk;
	return 0;
}

uint64_t sdr_ec_parity_room(uint64_t max_len, uint32_t chunk, uint32_t k, uint32_t m)
{
	struct sdr_ec_geom g;

	if (sdr_ec_geom_init(&g, max_len, chunk, k, m) != 0)
		return 0;
	return g.parity_len;
}

int sdr_ec_geom_parity_at(const struct sdr_ec_geom *g, uint64_t parity_off, uint32_t *stripe,
			  uint32_t *j)
{
	uint64_t c;

	if (g->chunk == 0 || parity_off >= g->parity_len)
		return -EINVAL;
	c = parity_off / g->chunk;
	*stripe = (uint32_t)(c / g->m);
	*j = (uint32_t)(c % g->m);
	return 0;
}

uint64_t ql_sdr_ec_parity_size(uint64_t max_msg_size, uint32_t k, uint32_t m)
{
	uint64_t worst = 0, p;

	if (k == 0)
		k = QL_SDR_EC_DATA_DEFAULT;
	if (m == 0)
		m = QL_SDR_EC_PARITY_DEFAULT;
	if (k > SDR_EC_K_MAX || m > SDR_EC_M_MAX)
		return 0;
	/* the rounding of the last stripe depends on the MTU: take the worst */
	for (uint32_t mtu = 64; mtu <= 4096; mtu *= 2) {
		p = sdr_ec_parity_room(max_msg_size, mtu, k, m);
		if (p > worst)
			worst = p;
	}
	return (worst + 4095) & ~(uint64_t)4095;
}
