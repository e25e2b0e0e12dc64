/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the data plane as a hostile QCS sees it: the request
 * ring's slots and the RPC messages in them (rpc_ring_harness.h has the
 * input format and the checked guarantees).
 */
#include <stddef.h>
#include <stdint.h>

#include "rpc_ring_harness.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	qlf_rpc_ring_one(data, size, NULL);
	return 0;
}
