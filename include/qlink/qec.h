/* SPDX-License-Identifier: MIT */
/*
 * qec: a quantum error-correction workload, the rotated surface code
 * memory experiment and its real-time decoder.
 *
 * qlink exists so that a decoder answers a quantum control system within
 * microseconds; this module is that decoder and the simulation that feeds
 * it. The code is the rotated surface code of odd distance d (3..15): d*d
 * data qubits and (d*d-1)/2 Z-type stabilizers, measured every round. The
 * experiment is a memory in the Z basis: X errors flip data qubits, the
 * Z-type stabilizers detect them, and the logical observable is the parity
 * of the data qubits of one row of the lattice (a logical Z operator).
 *
 * Noise models: code capacity (one round of X flips with probability p, a
 * perfect readout) and phenomenological (each noisy round flips each data
 * qubit with probability p, then measures each stabilizer with a wrong
 * outcome with probability q; the shot ends with a perfect readout of the
 * data qubits). The simulation is deterministic from a seed (xoshiro256**
 * seeded by splitmix64, see docs/qec.md).
 *
 * A detection event is the change of a stabilizer's outcome from one round
 * to the next; one round's events are a frame, bit-packed LSB-first (bit i
 * of byte i/8 is detector i). A shot is rounds+1 frames: one per noisy
 * round and the last one from the final data readout.
 *
 * The decoder is union-find with weighted growth and peeling over the
 * space-time decoding graph, in a sliding window: frames are pushed as the
 * rounds arrive, and each time the window is full the oldest `commit`
 * rounds are decoded for good. Pushing, finishing and resetting allocate
 * nothing; all memory is taken at creation. ql_qec_decode_exact is an
 * independent exact minimum-weight decoder for small codes, for testing.
 *
 * Functions return 0 or a negative errno. Objects are not thread-safe: one
 * thread at a time per decoder or simulation.
 */
#ifndef QLINK_QEC_H
#define QLINK_QEC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define QL_QEC_MIN_DISTANCE 3u
#define QL_QEC_MAX_DISTANCE 15u

enum ql_qec_noise { QL_QEC_CODE_CAPACITY, QL_QEC_PHENOMENOLOGICAL };

struct ql_qec_params {
	unsigned distance; /* odd, 3..15 */
	unsigned rounds;   /* noisy syndrome rounds; code capacity: 0 */
	enum ql_qec_noise noise;
	double p;      /* data flip, per data qubit per round */
	double q;      /* measurement error, per stabilizer per round */
	uint64_t seed; /* the simulation's; the decoder ignores it */
};

/* The code: lattice geometry, stabilizers and the decoding graph's shape.
 * Immutable once created; simulations and decoders share it. */
struct ql_qec_code;
/* -EINVAL unless distance is odd and in 3..15, -ENOMEM. */
int ql_qec_code_create(unsigned distance, struct ql_qec_code **out);
void ql_qec_code_destroy(struct ql_qec_code *code);
unsigned ql_qec_code_distance(const struct ql_qec_code *code);
unsigned ql_qec_code_data_qubits(const struct ql_qec_code *code); /* d*d */
unsigned ql_qec_code_detectors(const struct ql_qec_code *code);	  /* per round, (d*d-1)/2 */
/* One round's detection events, bit-packed LSB-first: bit i of byte i/8 is
 * detector i. Unused high bits of the last byte are 0. */
size_t ql_qec_frame_bytes(const struct ql_qec_code *code);

/* The memory experiment. */
struct ql_qec_sim;
/* -EINVAL for a params that does not match the code (distance), a
 * probability outside [0, 1], a code-capacity run with rounds != 0; -ENOMEM. */
int ql_qec_sim_create(const struct ql_qec_code *code, const struct ql_qec_params *params,
		      struct ql_qec_sim **out);
void ql_qec_sim_destroy(struct ql_qec_sim *sim);
/* One shot: rounds+1 frames (the last one from the perfect final data
 * readout), frame_bytes each, into frames; *observable = the true logical
 * flip (0/1). Code capacity: 1 frame. Shots follow each other in the
 * sequence the seed fixes. */
int ql_qec_sim_shot(struct ql_qec_sim *sim, uint8_t *frames, uint8_t *observable);

/* The real-time decoder. */
struct ql_qec_decoder;
struct ql_qec_decoder_opts {
	unsigned window; /* rounds per window; 0 = default (docs/qec.md) */
	unsigned commit; /* rounds committed per slide, < window; 0 = default */
};
/* Edge weights come from params (p, q and the noise model); distance must
 * match the code; params->rounds is a hint only (any number of frames may
 * be pushed). opts may be NULL. -EINVAL, -ENOMEM. */
int ql_qec_decoder_create(const struct ql_qec_code *code, const struct ql_qec_params *params,
			  const struct ql_qec_decoder_opts *opts, struct ql_qec_decoder **out);
void ql_qec_decoder_destroy(struct ql_qec_decoder *dec);
/* One noisy round; decodes committed rounds as the window slides; no
 * allocation. -EINVAL for a code-capacity decoder (it takes its one frame
 * in ql_qec_decoder_finish). */
int ql_qec_decoder_push(struct ql_qec_decoder *dec, const uint8_t *frame);
/* The last (perfect) frame; decodes the rest; *observable_flip = the
 * predicted logical flip. Further pushes are refused (-EALREADY) until
 * ql_qec_decoder_reset. */
int ql_qec_decoder_finish(struct ql_qec_decoder *dec, const uint8_t *final_frame,
			  uint8_t *observable_flip);
/* Data-qubit corrections so far (of the committed rounds, and all of them
 * after finish), bit i = data qubit i, LSB-first; nbits must be at least
 * d*d (-EINVAL), the bits past d*d are cleared. */
int ql_qec_decoder_corrections(const struct ql_qec_decoder *dec, uint8_t *bits, size_t nbits);
/* Ready for a new shot, no allocation. */
void ql_qec_decoder_reset(struct ql_qec_decoder *dec);

/* Exact minimum-weight decoding of a whole shot (rounds+1 frames as from
 * ql_qec_sim_shot) by enumeration, independent of the union-find code: for
 * small codes only (d = 3, and for phenomenological noise a few rounds),
 * -E2BIG beyond. Ties between equal-weight corrections go to the lower
 * observable flip. */
int ql_qec_decode_exact(const struct ql_qec_code *code, const struct ql_qec_params *params,
			const uint8_t *frames, uint8_t *observable_flip);

#ifdef __cplusplus
}
#endif

#endif
