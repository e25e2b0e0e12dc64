/* SPDX-License-Identifier: MIT */
/*
 * qec_internal: what the simulation, the decoders and the tests share about
 * a rotated surface code (src/qec only; not installed).
 *
 * Data qubit (r, c), r and c in 0..d-1, is index r*d + c. Plaquette (i, j),
 * i and j in 0..d, covers the data qubits (i-1, j-1), (i-1, j), (i, j-1)
 * and (i, j) that exist; its type follows the checkerboard, Z where i + j
 * is even. The bulk plaquettes (1 <= i, j <= d-1) are all kept; of the
 * weight-2 plaquettes, the Z ones are kept on the left (j = 0) and right
 * (j = d) sides and the X ones on the top (i = 0) and bottom (i = d) sides.
 * Detectors are the Z plaquettes in row-major (i, j) order.
 *
 * Every data qubit is in one or two Z plaquettes: two in the bulk, one in
 * the top and bottom rows (those are the decoding graph's boundary edges).
 * An X chain from the top to the bottom side is the logical X; the
 * observable is the parity of the X errors on data row 0 (a logical Z
 * operator: it meets every X plaquette in 0 or 2 qubits).
 */
#ifndef QL_QEC_INTERNAL_H
#define QL_QEC_INTERNAL_H

#include <stdint.h>

#include "qlink/qec.h"

#define QL_QEC_NONE UINT32_MAX /* "no detector": the boundary */
#define QL_QEC_MAX_DATA (QL_QEC_MAX_DISTANCE * QL_QEC_MAX_DISTANCE)
#define QL_QEC_MAX_DET ((QL_QEC_MAX_DATA - 1) / 2)
#define QL_QEC_WORDS ((QL_QEC_MAX_DATA + 63) / 64) /* a data-qubit bitset */

struct ql_qec_code {
	unsigned d, nq, nd; /* distance, data qubits, detectors per round */
	size_t frame_bytes;
	/* data qubit q: its Z detectors det[q][0] and det[q][1] (NONE: the
	 * boundary; det[q][0] is never NONE); obs[q]: on the observable row */
	uint32_t (*det)[2];
	uint8_t *obs;
	/* detector s: plaquette (pi, pj), its 2 or 4 data qubits */
	uint8_t (*plaq)[2];
	uint8_t *nsup;
	uint16_t (*sup)[4];
	/* detector s: its neighbours in the one-round matching graph; edge
	 * adj[s][k].q (a data qubit) to adj[s][k].to (a detector or NONE) */
	uint8_t *deg;
	struct ql_qec_adj {
		uint32_t q, to;
	} (*adj)[4];
	/* the X plaquettes, for the geometry tests */
	unsigned nx;
	uint8_t *xnsup;
	uint16_t (*xsup)[4];
};

/* xoshiro256** (Blackman and Vigna), seeded by splitmix64 of the seed. */
struct ql_qec_rng {
	uint64_t s[4];
};
void ql__qec_rng_seed(struct ql_qec_rng *r, uint64_t seed);
uint64_t ql__qec_rng_next(struct ql_qec_rng *r);
/* P(true) = p, from one 64-bit draw (threshold compare). */
static inline int ql__qec_bernoulli(struct ql_qec_rng *r, uint64_t thr)
{
	return ql__qec_rng_next(r) < thr;
}
uint64_t ql__qec_threshold(double p);
double ql__qec_ln(double x);

/* Frames of a given fault set: data[t] (bit q: data qubit q flips in round
 * t, t < layers_with_data_noise) and meas[t] (bit s: round t's outcome of
 * detector s is wrong, t < rounds), as bitsets of QL_QEC_WORDS words;
 * rounds+1 frames (code capacity: rounds = 0, one frame, data[0] the
 * errors). The simulation uses it; so do the tests, to place faults. */
int ql__qec_frames_from_faults(const struct ql_qec_code *code, const struct ql_qec_params *params,
			       const uint64_t (*data)[QL_QEC_WORDS],
			       const uint64_t (*meas)[QL_QEC_WORDS], uint8_t *frames,
			       uint8_t *observable);

/* The decoder's work since its last reset: vertices its clusters covered
 * and edges they grew over, summed over the windows decoded (for the test
 * that the work follows the defects, not the code's size). */
void ql__qec_decoder_work(const struct ql_qec_decoder *dec, uint64_t *vertices, uint64_t *edges);

/* Check a params against a code: 0 or -EINVAL. */
int ql__qec_params_check(const struct ql_qec_code *code, const struct ql_qec_params *params);

static inline int ql__qec_bit(const uint8_t *bits, unsigned i)
{
	return (bits[i >> 3] >> (i & 7)) & 1;
}

#endif
