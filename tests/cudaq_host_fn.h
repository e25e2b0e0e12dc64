/* SPDX-License-Identifier: MIT */
/*
 * cudaq_host_fn.h: CUDA-Q's RPC framing (RPCHeader / RPCResponse, 24 bytes,
 * little-endian) and two HOST_CALL handlers in CUDA-Q's host-call form, as
 * a CUDA-Q user writes them: for the programs that stand in for CUDA-Q's
 * host dispatcher over the bridge provider (tests/test_cudaq_bridge.c,
 * bench/bridge_bench.c).
 */
#ifndef QL_TESTS_CUDAQ_HOST_FN_H
#define QL_TESTS_CUDAQ_HOST_FN_H

#include <stddef.h>
#include <stdint.h>

#define MAGIC_REQ 0x43555152u
#define MAGIC_RESP 0x43555153u

/* CUDAQ_REALTIME_CPU_RELAX: all CUDA-Q's host dispatcher loops do when idle
 * (cudaq_host_dispatcher_loop, dispatch_core): a pause, never a yield */
#if defined(__x86_64__) || defined(__i386__)
#define cudaq_cpu_relax() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define cudaq_cpu_relax() __asm__ __volatile__("yield" ::: "memory")
#else
#define cudaq_cpu_relax() __asm__ __volatile__("" ::: "memory")
#endif

/* ---- little-endian fields ---------------------------------------------------- */

static inline void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

/* CUDA-Q's test function: every argument byte plus one; the handler writes
 * the whole response header, request_id and ptp_timestamp copied. */
static inline void rpc_increment(const void *rx_slot, void *tx_slot, size_t slot_size)
{
	const uint8_t *rq = rx_slot;
	uint8_t *rs = tx_slot;
	uint32_t arg_len = get32(rq + 8);
	int32_t status = 0;

	if (arg_len > slot_size - 24) {
		arg_len = 0;
		status = -1;
	}
	put32(rs, MAGIC_RESP);
	put32(rs + 4, (uint32_t)status);
	put32(rs + 8, arg_len);
	put32(rs + 12, get32(rq + 12));
	put64(rs + 16, get64(rq + 16));
	for (uint32_t i = 0; i < arg_len; i++)
		rs[24 + i] = (uint8_t)(rq[24 + i] + 1);
}

/* qlink_parity, the function `qlink vppu` calls (docs/rpc.md): 256 bits in,
 * their parity (u8) and weight (i32) out; written here as CUDA-Q's host-call
 * form, as a CUDA-Q user would. */
static inline void qlink_parity(const void *rx_slot, void *tx_slot, size_t slot_size)
{
	const uint8_t *rq = rx_slot;
	uint8_t *rs = tx_slot;
	uint32_t w = 0, arg_len = get32(rq + 8);
	int32_t status = 0;

	if (arg_len != 32 || slot_size < 24 + 32) {
		status = -1;
	} else {
		for (int i = 0; i < 32; i++)
			w += (uint32_t)__builtin_popcount(rq[24 + i]);
	}
	put32(rs, MAGIC_RESP);
	put32(rs + 4, (uint32_t)status);
	put32(rs + 8, status ? 0 : 5);
	put32(rs + 12, get32(rq + 12));
	put64(rs + 16, get64(rq + 16));
	rs[24] = (uint8_t)(w & 1);
	put32(rs + 25, w);
}

#endif
