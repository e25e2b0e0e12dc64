/* SPDX-License-Identifier: MIT */
/*
 * The data-plane fuzz harness: a hostile QCS writes whatever it likes into
 * the RTH's request ring (sequence words, lengths, messages), and the RTH
 * collects what arrived (ql_rx_ring_burst, as the verbs and loopback
 * channels do) and answers each request through ql_rpc_dispatch, as the
 * daemon does. The harness checks the guarantees both promise (docs/rpc.md,
 * docs/wire-protocol.md) after every step and aborts on a violation; ASan
 * sees any access outside the ring or the exactly sized response buffer.
 * Shared by the libFuzzer target (fuzz_rpc_ring) and the corpus replay test
 * (test_rpc_ring_corpus), which is built by the project's compiler.
 *
 * Input: byte 0 the ring geometry (num_slots 1 << (b & 3), slot_size
 * 64 << ((b >> 2) & 3)), byte 1 flags (bit 0: raw slots; bit 1: sequence
 * numbers start just below 2^32; bits 2-4: response capacity, an index into
 * {0, 23, 24, 25, 40, 64, slot_size, 4096}; bits 5-7: burst size, an index
 * into {1, 2, 3, 4, 8, 16, 32, 64}), then rounds until the input ends. A
 * round fills the ring's num_slots slots from the next expected one on: raw,
 * slot_size input bytes copied over each whole slot (sequence word
 * included); otherwise a u16 (little-endian) record length n, then
 * n & 0x7fff bytes copied from the slot's len field on, and the slot's
 * sequence word stamped as the RTH expects unless bit 15 of n is set (a gap).
 * Then the RTH collects and answers until nothing more is ready.
 */
#ifndef QL_FUZZ_RPC_RING_HARNESS_H
#define QL_FUZZ_RPC_RING_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include "qlink/rpc.h"

struct qlf_rpc_ring_stats {
	unsigned int requests;			     /* collected and answered */
	unsigned int by_kind[QL_RPC_ERR_KIND_COUNT]; /* by ql_rpc_err_kind */
	unsigned int rounds;
};

/* Run one input; 0, or -1 for an input too short to describe a ring. A
 * violated guarantee aborts the process after saying which on stderr. */
int qlf_rpc_ring_one(const uint8_t *data, size_t size, struct qlf_rpc_ring_stats *stats);

#endif
