/* SPDX-License-Identifier: MIT */
/*
 * sdr/ec: erasure-coded reliability for SDR messages (internal).
 *
 * The paper's variant (SDR-RDMA, arXiv 2505.05366): a message's chunks are
 * grouped into stripes of k data chunks; the sender adds m parity chunks per
 * stripe, computed with a systematic Reed-Solomon code over GF(2^8) (Intel
 * ISA-L's Cauchy generator matrix: any k of the k+m chunks of a stripe
 * determine the rest), and writes them into the slot's parity region right
 * after the data. The receiver rebuilds the missing data chunks of a stripe
 * as soon as any k of its k+m chunks arrived; what cannot be rebuilt (more
 * than m losses in a stripe) falls back to selective repeat of the missing
 * data chunks. docs/sdr.md, "Erasure coding", is the specification.
 *
 * Two parts: the codec (sdr_ec_codec_*: pure GF(2^8) arithmetic over chunk
 * buffers, no I/O, all tables and scratch allocated once at creation) and the
 * stripe geometry of a message (sdr_ec_geom_*), shared by sender and receiver
 * so that both compute the same parity offsets, and by which the receiver
 * checks every parity packet against what it posted, never against what the
 * packet claims.
 */
#ifndef QL_SDR_EC_H
#define QL_SDR_EC_H

#include <stddef.h>
#include <stdint.h>

/* Limits: a stripe's presence is a 64-bit mask, k + m <= 64; ISA-L's tables
 * are 32 bytes per (row, column). */
#define SDR_EC_K_MAX 32
#define SDR_EC_M_MAX 16

struct sdr_ec_codec;

/* A codec for k data + m parity chunks of `chunk` bytes (1 <= k <=
 * SDR_EC_K_MAX, 1 <= m <= SDR_EC_M_MAX, chunk >= 1). Allocates everything
 * encoding and decoding will need (tables, inversion scratch, a zero chunk
 * and a padding chunk): the calls below never allocate. -EINVAL (with a
 * detail) for bad sizes, -ENOMEM. */
int ql__sdr_ec_codec_create(unsigned int k, unsigned int m, size_t chunk,
			    struct sdr_ec_codec **out);
void ql__sdr_ec_codec_destroy(struct sdr_ec_codec *c);
unsigned int ql__sdr_ec_codec_k(const struct sdr_ec_codec *c);
unsigned int ql__sdr_ec_codec_m(const struct sdr_ec_codec *c);
size_t ql__sdr_ec_codec_chunk(const struct sdr_ec_codec *c);
/* A chunk of zeros (stands for data chunks past a message's end) and a
 * chunk-sized scratch buffer (a partial last chunk, zero-padded). */
const uint8_t *ql__sdr_ec_codec_zero(const struct sdr_ec_codec *c);
uint8_t *ql__sdr_ec_codec_pad(struct sdr_ec_codec *c);

/* parity[j] (j < m) = the j-th parity chunk of data[0..k-1], `len` bytes
 * each (len <= chunk). */
void ql__sdr_ec_encode(struct sdr_ec_codec *c, const uint8_t *const *data, uint8_t *const *parity,
		       size_t len);

/* Rebuild the data chunks of one stripe. chunks[0..k-1] are the data
 * chunks, chunks[k..k+m-1] the parity chunks, `len` bytes each; bit i of
 * `present` says chunks[i] holds what was sent. Every missing data chunk
 * chunks[i] (i < k, bit clear) is written. Returns the number of data chunks
 * rebuilt (0 when none was missing), -EAGAIN when fewer than k chunks are
 * present (nothing written), -EINVAL for bits beyond k + m or a len over
 * the chunk size. Never allocates. */
int ql__sdr_ec_decode(struct sdr_ec_codec *c, uint64_t present, uint8_t *const *chunks, size_t len);

/* ---- the stripe geometry of one message ------------------------------ */

/* A message of `len` bytes in chunks of `chunk` bytes: data chunks
 * 0..nchunks-1 at offset i*chunk of the slot (the last one may be short);
 * stripe s holds data chunks s*k .. s*k+k-1 (those >= nchunks are zeros that
 * are never sent) and parity chunks j = 0..m-1 at parity offset
 * (s*m + j)*chunk of the slot's parity region. */
struct sdr_ec_geom {
	uint64_t len;	  /* message bytes */
	uint32_t chunk;	  /* chunk bytes */
	uint32_t k, m;	  /* code */
	uint32_t nchunks; /* data chunks: ceil(len / chunk), at least 1 */
	uint32_t nstripes;
	uint64_t parity_len; /* bytes of parity region used: nstripes*m*chunk */
};

/* 0, or -EINVAL for a zero chunk/k/m or sizes whose products overflow. */
int ql__sdr_ec_geom_init(struct sdr_ec_geom *g, uint64_t len, uint32_t chunk, uint32_t k,
			 uint32_t m);
/* Bytes of data chunk i (chunk, or the short tail of the last one). */
static inline uint32_t sdr_ec_geom_chunk_len(const struct sdr_ec_geom *g, uint32_t i)
{
	uint64_t off = (uint64_t)i * g->chunk;
	if (off >= g->len)
		return 0;
	return g->len - off < g->chunk ? (uint32_t)(g->len - off) : g->chunk;
}
/* Parity region bytes a slot needs for messages up to max_len. */
uint64_t ql__sdr_ec_parity_room(uint64_t max_len, uint32_t chunk, uint32_t k, uint32_t m);

/* The parity chunk a byte offset of the parity region falls in: 0 with
 * *stripe and *j set, or -EINVAL when it lies beyond the parity this message
 * has (nstripes * m chunks). A receiver checks every parity packet with this
 * against the geometry of the message it posted. */
int ql__sdr_ec_geom_parity_at(const struct sdr_ec_geom *g, uint64_t parity_off, uint32_t *stripe,
			      uint32_t *j);

#endif
