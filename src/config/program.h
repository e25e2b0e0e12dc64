/* SPDX-License-Identifier: MIT */
/*
 * program: VPPU programs, the device calls a virtual QCS makes.
 *
 * A program is a YAML file listing calls, each a function name, its
 * arguments as typed generators (constants, counters, seeded random data,
 * bit patterns, records from a file), what a right answer is (expected
 * typed results, an echo of the arguments, or just status 0), and how to
 * make the calls: a repeat count, closed loop with a window of calls in
 * flight or paced at a rate. ql_program_load() maps the file with libcyaml
 * and checks it with line-numbered diagnostics, as config.h does for
 * qlinkd's configuration; ql_program_vppu_call() turns one step into a
 * struct ql_vppu_call and a struct ql_vppu_config for ql_vppu_run(), so the
 * same program drives a ring client over any transport. docs/qlinkd.md
 * documents the format. qlinkd-private (never installed), like config.h.
 */
#ifndef QLINK_PROGRAM_H
#define QLINK_PROGRAM_H

#include <stdint.h>

#include "config/config.h"
#include "qlink/vppu.h"

#ifdef __cplusplus
extern "C" {
#endif

enum ql_program_type {
	QL_PROGRAM_U8,
	QL_PROGRAM_I32,
	QL_PROGRAM_U32,
	QL_PROGRAM_I64,
	QL_PROGRAM_F32,
	QL_PROGRAM_F64,
	QL_PROGRAM_U8_ARRAY,
	QL_PROGRAM_BITS,
};

enum ql_program_gen {
	QL_PROGRAM_GEN_VALUE,	/* scalars: value */
	QL_PROGRAM_GEN_COUNTER, /* scalars: value + call number */
	QL_PROGRAM_GEN_RANDOM,	/* seeded, reproducible per call number */
	QL_PROGRAM_GEN_ZEROS,
	QL_PROGRAM_GEN_ONES,
	QL_PROGRAM_GEN_PATTERN, /* bits: "0110..."; u8_array: hex bytes; rest zero */
	QL_PROGRAM_GEN_FILE,	/* records of the value's size, one per call, cycling */
};

enum ql_program_check {
	QL_PROGRAM_CHECK_STATUS0, /* any status-0 response is right */
	QL_PROGRAM_CHECK_EXPECT,  /* results equal the expected values */
	QL_PROGRAM_CHECK_ECHO,	  /* results equal the arguments */
};

/* One typed argument or expected result and how to make it for call n. */
struct ql_program_value {
	enum ql_program_type type;
	enum ql_program_gen gen;
	uint32_t n;    /* elements (arrays) or bits; 1 for scalars */
	uint32_t size; /* bytes in the payload */
	int64_t ivalue;
	double fvalue;
	uint64_t seed;
	uint8_t *data; /* pattern (size bytes) or file records (a multiple of size) */
	uint32_t data_len;
	unsigned line;
};

struct ql_program_call {
	char *function;
	unsigned line;
	struct ql_program_value *args;
	uint32_t nargs, arg_len;
	struct ql_program_value *expect;
	uint32_t nexpect, expect_len;
	enum ql_program_check check;
	double rate_hz;	  /* 0: closed loop */
	uint32_t window;  /* closed loop: calls in flight */
	uint64_t repeat;  /* calls to make */
	uint8_t *scratch; /* for check(): max(arg_len, expect_len) bytes */
};

struct ql_program {
	char *path;
	struct ql_program_call *calls;
	uint32_t ncalls;
};

/* Load and check path; like ql_config_load (diags may be NULL). */
int ql_program_load(const char *path, struct ql_program **out, struct ql_diags *diags);
void ql_program_free(struct ql_program *prog);

/* Fill call n's arguments of step s (s->arg_len bytes). */
void ql_program_make_args(const struct ql_program_call *s, uint64_t n, uint8_t *args);

/*
 * Step `index` as a VPPU call and configuration (count = repeat, window,
 * rate_hz; the other fields zero for the caller to set). The call points
 * into prog, which must outlive it; check() uses the step's scratch, so a
 * step must not be run by two threads at once. 0 or -EINVAL (no such step).
 */
int ql_program_vppu_call(struct ql_program *prog, uint32_t index, struct ql_vppu_call *call,
			 struct ql_vppu_config *cfg);

#ifdef __cplusplus
}
#endif
#endif
