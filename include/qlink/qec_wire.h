/* SPDX-License-Identifier: MIT */
/*
 * qec_wire: the QEC decoder over the wire. CUDA-Q QEC's three decoder RPC
 * functions (enqueue_syndromes, get_corrections, reset_decoder: the ids,
 * payloads and statuses of CUDA-QX's decoder_rpc_wire_format.h and its
 * host handlers), encoded and decoded here without relying on host struct
 * layout; the decoder configuration string qlinkd's QEC plugin
 * (qlink-qec.so) reads; and the VPPU's QEC streaming mode, which plays the
 * quantum program: syndrome rounds of the surface-code simulation (qec.h)
 * at a chosen cycle time, enqueue_syndromes per round, get_corrections at
 * the end of each shot, corrections applied, logical errors counted and
 * the decoder's backlog reported. docs/qec.md, "Over the wire", has it all
 * byte by byte. The codec is header-only (the plugin and a QCS author
 * need nothing else); the configuration parser and the stream are in
 * libqlink.
 */
#ifndef QLINK_QEC_WIRE_H
#define QLINK_QEC_WIRE_H

#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "qlink/histogram.h"
#include "qlink/qec.h"
#include "qlink/rpc_wire.h"
#include "qlink/vppu.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the three functions ------------------------------------------------------ */

/* FNV-1a of the names, as CUDA-QX fixes them. */
#define QL_QEC_FN_ENQUEUE_SYNDROMES 0x7ED8BE82u
#define QL_QEC_FN_GET_CORRECTIONS 0x882D5BA1u
#define QL_QEC_FN_RESET_DECODER 0x977A59CFu

/* enqueue_syndromes: i64 decoder_id, i64 counter, i64 syndrome_mapping_id
 * (0), i64 num_syndromes, then ceil(num_syndromes/8) bit-packed bytes,
 * LSB-first; arg_len is that total rounded up to a multiple of 8. */
#define QL_QEC_ENQUEUE_FIXED 32u
/* get_corrections: i64 decoder_id, i64 return_size, u8 reset; exactly 17. */
#define QL_QEC_GET_CORRECTIONS_ARGS 17u
/* reset_decoder: i64 decoder_id; exactly 8. */
#define QL_QEC_RESET_ARGS 8u
/* CUDA-QX's caps: syndrome bits in one request, decoders per session. */
#define QL_QEC_MAX_SYNDROME_BITS (1u << 20)
#define QL_QEC_MAX_DECODERS 32u

/* Response statuses, CUDA-QX's host handlers' (qec_realtime_session.cpp). */
enum {
	QL_QEC_OK = 0,
	QL_QEC_E_ARG_LEN = -1,	  /* arg_len shorter than (or not) the fixed part */
	QL_QEC_E_DECODER = -2,	  /* unknown decoder_id, or the decoder refused */
	QL_QEC_E_TOO_LARGE = -3,  /* num_syndromes above QL_QEC_MAX_SYNDROME_BITS */
	QL_QEC_E_INVALID = -4,	  /* negative size, mapping id, arg_len vs size,
				     wrong bit count, counter out of order */
	QL_QEC_E_REPLY_SIZE = -5, /* the corrections would not fit the reply slot */
};

static inline size_t ql_qec_align8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

/* arg_len of an enqueue_syndromes carrying nbits syndrome bits. */
static inline size_t ql_qec_enqueue_arg_len(uint64_t nbits)
{
	return ql_qec_align8(QL_QEC_ENQUEUE_FIXED + (size_t)((nbits + 7) / 8));
}

/* result_len of a get_corrections answer for return_size bits. */
static inline size_t ql_qec_corrections_len(uint64_t return_size)
{
	return ql_qec_align8((size_t)((return_size + 7) / 8));
}

/* Write enqueue_syndromes arguments into args (cap bytes): returns arg_len,
 * or -EMSGSIZE when they do not fit. Padding and unused bits are zeroed. */
static inline int ql_qec_enqueue_encode(uint8_t *args, size_t cap, int64_t decoder_id,
					int64_t counter, const uint8_t *bits, uint64_t nbits)
{
	size_t len = ql_qec_enqueue_arg_len(nbits), nbytes = (size_t)((nbits + 7) / 8);

	if (nbits > QL_QEC_MAX_SYNDROME_BITS || len > cap)
		return -EMSGSIZE;
	ql_rpc_put_i64(args, decoder_id);
	ql_rpc_put_i64(args + 8, counter);
	ql_rpc_put_i64(args + 16, 0);
	ql_rpc_put_i64(args + 24, (int64_t)nbits);
	if (nbytes)
		memcpy(args + QL_QEC_ENQUEUE_FIXED, bits, nbytes);
	memset(args + QL_QEC_ENQUEUE_FIXED + nbytes, 0, len - QL_QEC_ENQUEUE_FIXED - nbytes);
	if (nbits & 7)
		args[QL_QEC_ENQUEUE_FIXED + nbytes - 1] &= (uint8_t)((1u << (nbits & 7)) - 1);
	return (int)len;
}

struct ql_qec_enqueue {
	int64_t decoder_id;
	int64_t counter;
	uint64_t num_syndromes;
	const uint8_t *bits; /* into the arguments, ceil(num_syndromes/8) bytes */
};

/* Read enqueue_syndromes arguments args[0..arg_len) with CUDA-QX's checks,
 * in its order: QL_QEC_OK, or QL_QEC_E_ARG_LEN (shorter than the fixed
 * part), QL_QEC_E_INVALID (negative num_syndromes, a mapping id not 0,
 * arg_len not the one num_syndromes implies), QL_QEC_E_TOO_LARGE (more
 * than QL_QEC_MAX_SYNDROME_BITS). The decoder id is not judged here. */
static inline int32_t ql_qec_enqueue_decode(const uint8_t *args, size_t arg_len,
					    struct ql_qec_enqueue *out)
{
	int64_t n;

	if (arg_len < QL_QEC_ENQUEUE_FIXED)
		return QL_QEC_E_ARG_LEN;
	out->decoder_id = ql_rpc_get_i64(args);
	out->counter = ql_rpc_get_i64(args + 8);
	n = ql_rpc_get_i64(args + 24);
	if (n < 0 || ql_rpc_get_i64(args + 16) != 0)
		return QL_QEC_E_INVALID;
	if ((uint64_t)n > QL_QEC_MAX_SYNDROME_BITS)
		return QL_QEC_E_TOO_LARGE;
	if (arg_len != ql_qec_enqueue_arg_len((uint64_t)n))
		return QL_QEC_E_INVALID;
	out->num_syndromes = (uint64_t)n;
	out->bits = args + QL_QEC_ENQUEUE_FIXED;
	return QL_QEC_OK;
}

/* get_corrections arguments (17 bytes). */
static inline void ql_qec_get_corrections_encode(uint8_t *args, int64_t decoder_id,
						 int64_t return_size, uint8_t reset)
{
	ql_rpc_put_i64(args, decoder_id);
	ql_rpc_put_i64(args + 8, return_size);
	args[16] = reset;
}

struct ql_qec_get_corrections {
	int64_t decoder_id;
	uint64_t return_size;
	uint8_t reset; /* non-zero: clear (a new shot) after reading */
};

/* QL_QEC_OK, QL_QEC_E_ARG_LEN (arg_len not 17), QL_QEC_E_INVALID
 * (negative return_size). */
static inline int32_t ql_qec_get_corrections_decode(const uint8_t *args, size_t arg_len,
						    struct ql_qec_get_corrections *out)
{
	int64_t n;

	if (arg_len != QL_QEC_GET_CORRECTIONS_ARGS)
		return QL_QEC_E_ARG_LEN;
	out->decoder_id = ql_rpc_get_i64(args);
	n = ql_rpc_get_i64(args + 8);
	if (n < 0)
		return QL_QEC_E_INVALID;
	out->return_size = (uint64_t)n;
	out->reset = args[16];
	return QL_QEC_OK;
}

/* reset_decoder arguments (8 bytes); decode: QL_QEC_OK or QL_QEC_E_ARG_LEN. */
static inline void ql_qec_reset_encode(uint8_t *args, int64_t decoder_id)
{
	ql_rpc_put_i64(args, decoder_id);
}

static inline int32_t ql_qec_reset_decode(const uint8_t *args, size_t arg_len, int64_t *decoder_id)
{
	if (arg_len != QL_QEC_RESET_ARGS)
		return QL_QEC_E_ARG_LEN;
	*decoder_id = ql_rpc_get_i64(args);
	return QL_QEC_OK;
}

/* ---- decoder configuration -------------------------------------------------------- */

/*
 * What a round's "syndromes" are on the wire. CUDA-Q QEC's kernels enqueue
 * the raw stabilizer measurement outcomes of each round and the decoder
 * turns them into detection events (its D matrix: an outcome XOR the same
 * stabilizer's previous outcome): QL_QEC_INPUT_MEASUREMENTS, the default.
 * QL_QEC_INPUT_DETECTORS takes detection events as they are.
 */
enum ql_qec_input { QL_QEC_INPUT_MEASUREMENTS, QL_QEC_INPUT_DETECTORS };

/* One decoder the plugin serves. */
struct ql_qec_wire_decoder {
	int64_t id;		     /* decoder_id on the wire, 0..31 */
	struct ql_qec_params params; /* distance, rounds, noise, p, q (seed unused) */
	struct ql_qec_decoder_opts opts;
	enum ql_qec_input input;
};

/*
 * Parse the plugin's configuration string: decoders separated by ';' or
 * newlines, each a list of key=value separated by spaces or commas:
 *   id=0 distance=5 rounds=5 noise=phenomenological p=0.01 q=0.01
 *   window=5 commit=2 input=measurements
 * (distance also d; noise also code_capacity / phen / cc; q defaults to p;
 * rounds defaults to d for phenomenological and must be 0 for code
 * capacity; window and commit default to the decoder's). At most max
 * decoders; ids distinct. 0 and *n, or -EINVAL with a detail naming the
 * entry and the key.
 */
int ql_qec_wire_parse(const char *config, struct ql_qec_wire_decoder *out, unsigned max,
		      unsigned *n);
/* One decoder as the parser reads it back (for a generated config);
 * snprintf's return. */
int ql_qec_wire_format(const struct ql_qec_wire_decoder *d, char *buf, size_t len);

/* ---- the VPPU's QEC stream --------------------------------------------------------- */

struct ql_vppu_qec_config {
	struct ql_qec_params params;	 /* the simulation: the same seed gives the same shots */
	struct ql_qec_decoder_opts opts; /* for the offline reference only */
	int64_t decoder_id;
	enum ql_qec_input input;
	uint64_t shots;
	/* Syndrome rounds per second (1e6: a 1 us cycle); 0: as fast as the
	 * window allows. get_corrections leaves right after a shot's last
	 * frame, unpaced. */
	double round_rate_hz;
	uint32_t window;     /* calls in flight at most (0: the client's) */
	uint64_t timeout_ns; /* a call unanswered this long ends the run (0: 5 s) */
	const volatile sig_atomic_t *stop;
	/* Called about every tick_ns (e.g. the control plane's keepalive). */
	void (*tick)(void *tick_ctx);
	void *tick_ctx;
	uint64_t tick_ns;
	int reset_each_shot; /* reset_decoder before every shot, not only the first */
};

struct ql_vppu_qec_report {
	uint64_t shots;		 /* shots whose corrections came back */
	uint64_t logical_errors; /* corrected observable != 0 */
	uint64_t error_hash;	 /* FNV-1a over each shot's (decoded flip, error) */
	uint64_t rounds_sent;	 /* enqueue_syndromes calls sent (frames) */
	uint64_t rounds_decoded; /* ... answered with status 0 */
	uint64_t backlog_max;	 /* max of rounds sent - rounds answered */
	uint64_t backlog_final;	 /* the same when the last round left */
	uint64_t calls_sent;
	uint64_t responses;
	uint64_t errors;	     /* non-zero statuses */
	uint64_t unexpected;	     /* answers matching no call, or malformed */
	uint64_t late;		     /* rounds that left more than a period late */
	uint64_t lost;		     /* calls sent and never answered */
	struct ql_hist round_rtt_ns; /* enqueue_syndromes round trips */
	struct ql_hist shot_rtt_ns;  /* get_corrections round trips */
	double elapsed_s;
	double rounds_per_s;
	int transport_error;
	int timed_out;
	int stopped;
	int32_t first_error; /* the first non-zero status seen */
};

/* Stream cfg->shots shots over the client c. 0 (whatever the counts say),
 * or a negative errno if it could not run at all. */
int ql_vppu_qec_run(const struct ql_vppu_client *c, const struct ql_vppu_qec_config *cfg,
		    struct ql_vppu_qec_report *rep);

/* The same shots decoded in this process (ql_qec_sim + ql_qec_decoder, the
 * plugin's sequence): the offline reference the stream must equal bit for
 * bit. Fills shots, logical_errors and error_hash. */
int ql_vppu_qec_offline(const struct ql_vppu_qec_config *cfg, struct ql_vppu_qec_report *rep);

/* The report as one JSON object. */
void ql_vppu_qec_report_json(const struct ql_vppu_qec_report *rep, FILE *f);

#ifdef __cplusplus
}
#endif
#endif
