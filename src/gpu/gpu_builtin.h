/* SPDX-License-Identifier: MIT */
/*
 * The built-in GPU handlers (internal), host+device code: qlink_parity,
 * the demo function of demo/demo.h (256 bit-packed detection events in,
 * their parity u8 and weight i32 out: the shape of a QEC decoding round),
 * and echo (raw: the arguments back). Included by gpu_builtin.c (the host
 * addresses) and gpu_cuda.cu (the device addresses).
 */
#ifndef QL_GPU_BUILTIN_H
#define QL_GPU_BUILTIN_H

#include "qlink/gpu_rpc.h"

#define QL_GPU_PARITY_BITS 256

QL_HD static inline int32_t qlink_parity(const uint8_t *events, uint8_t *parity, int32_t *weight)
{
	int32_t w = 0;

	for (int i = 0; i < QL_GPU_PARITY_BITS / 8; i++) {
		uint32_t x = events[i];

		/* popcount by hand: no host or device builtin needed */
		x = x - ((x >> 1) & 0x55u);
		x = (x & 0x33u) + ((x >> 2) & 0x33u);
		w += (int32_t)((x + (x >> 4)) & 0x0fu);
	}
	*parity = (uint8_t)(w & 1);
	*weight = w;
	return 0;
}
QL_GPU_FN(qlink_parity, QL_ARG_BITS(QL_GPU_PARITY_BITS), QL_RES_U8, QL_RES_I32);

QL_HD static inline int32_t ql_gpu_echo(struct ql_gpu_in *in, struct ql_gpu_out *out, void *ctx)
{
	size_t n = ql_gpu_in_left(in);

	(void)ctx;
	ql_gpu_write_bytes(out, ql_gpu_in_view(in, n), n);
	return 0;
}
QL_GPU_RAW(ql_gpu_echo);

#endif
