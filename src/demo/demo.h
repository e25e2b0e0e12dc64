/* SPDX-License-Identifier: MIT */
/*
 * demo: the built-in functions, so a fresh install has something real to
 * call (and CUDA-Q's test function, rpc_increment, below). `qlink_parity` takes a syndrome of 256 bit-packed
 * detection events and returns its parity (u8) and weight (i32): the
 * shape of a QEC decoding round, with real work on every bit. qlinkd,
 * qlink bench/serve/vppu and the tests use it; the VPPU side generates
 * reproducible syndromes and checks every answer. qlinkd-private (never
 * installed): the tools and tests link it from the qlinkd_private library.
 */
#ifndef QLINK_DEMO_H
#define QLINK_DEMO_H

#include <stdint.h>

#include "qlink/rpc.h"
#include "qlink/vppu.h"

#ifdef __cplusplus
extern "C" {
#endif

#define QL_DEMO_PARITY_NAME "qlink_parity"
#define QL_DEMO_PARITY_BITS 256
#define QL_DEMO_PARITY_ARG_LEN (QL_DEMO_PARITY_BITS / 8)
#define QL_DEMO_PARITY_RESULT_LEN 5 /* u8 parity, i32 weight */

/* The function, ready for ql_daemon_register / ql_rpc_table_add. */
const struct ql_rpc_function *ql_demo_parity_function(void);

/* The syndrome of call n (deterministic in seed and n). */
void ql_demo_parity_syndrome(uint64_t seed, uint64_t n, uint8_t out[QL_DEMO_PARITY_ARG_LEN]);

/* A VPPU call of qlink_parity whose syndromes come from seed and whose
 * answers are checked bit for bit. `seed` must outlive the call. */
void ql_demo_parity_call(struct ql_vppu_call *call, uint64_t *seed);

/*
 * rpc_increment: CUDA-Q Realtime's test function, so that scripts and
 * test suites written for CUDA-Q's test server run against qlink. A frame
 * handler (CUDA-Q's HOST_CALL form) with an open-ended byte-array argument:
 * the result is every argument byte plus one (mod 256), result_len =
 * arg_len, status 0. When the result would not fit the response capacity
 * it answers status QL_RPC_E_RESULT_OVERFLOW with no results (CUDA-Q's
 * handler truncates to its slot instead; its request and reply slots have
 * the same stride, so the case never arises there).
 */
#define QL_DEMO_INCREMENT_NAME "rpc_increment"
#define QL_DEMO_INCREMENT_ID 0x191b6322u /* FNV-1a of the name */

/* The function, ready for ql_daemon_register / ql_rpc_table_add. */
const struct ql_rpc_function *ql_demo_increment_function(void);

/* The arguments of call n (deterministic in n and arg_len). */
void ql_demo_increment_args(uint64_t n, uint8_t *args, uint32_t arg_len);

/* A VPPU call of rpc_increment with arg_len argument bytes per call,
 * reproducible, whose replies are checked byte for byte (result_len must
 * be arg_len). */
void ql_demo_increment_call(struct ql_vppu_call *call, uint32_t arg_len);

#ifdef __cplusplus
}
#endif
#endif
