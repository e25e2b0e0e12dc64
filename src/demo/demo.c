/* SPDX-License-Identifier: MIT */
/* The demonstration function qlink_parity (see demo/demo.h). */
#include <string.h>

#include "demo/demo.h"

/* Bit count of a word, inline: without -mpopcnt, __builtin_popcount is a
 * call into libgcc that costs more than the rest of the handler. */
static inline uint32_t popcount64(uint64_t x)
{
	x -= (x >> 1) & 0x5555555555555555ull;
	x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
	x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
	return (uint32_t)((x * 0x0101010101010101ull) >> 56);
}

static int32_t qlink_parity(const uint8_t *events, uint8_t *parity, int32_t *weight)
{
	uint32_t w = 0;

	for (int i = 0; i < QL_DEMO_PARITY_ARG_LEN; i += 8) {
		uint64_t v;

		memcpy(&v, events + i, 8); /* the message need not be aligned */
		w += popcount64(v);
	}
	*parity = (uint8_t)(w & 1);
	*weight = (int32_t)w;
	return 0;
}

QL_RPC_FN(qlink_parity, QL_ARG_BITS(QL_DEMO_PARITY_BITS), QL_RES_U8, QL_RES_I32);

const struct ql_rpc_function *ql_demo_parity_function(void)
{
	/* FNV-1a of the name is not a constant expression in C: fill once */
	static struct ql_rpc_function f;

	if (!f.fn)
		f = QL_RPC_FUNCTION_AS(qlink_parity, QL_DEMO_PARITY_NAME, NULL);
	return &f;
}

static uint64_t splitmix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

void ql_demo_parity_syndrome(uint64_t seed, uint64_t n, uint8_t out[QL_DEMO_PARITY_ARG_LEN])
{
	for (int i = 0; i < QL_DEMO_PARITY_ARG_LEN / 8; i++) {
		/* sparse, as detection events are: about 1 in 8 bits set */
		uint64_t a = splitmix64(seed ^ (n * 4 + (uint64_t)i));
		uint64_t b = splitmix64(a), c = splitmix64(b);
		uint64_t v = a & b & c;

		memcpy(out + 8 * i, &v, 8);
	}
}

static void make_args(void *ctx, uint64_t n, uint8_t *args)
{
	ql_demo_parity_syndrome(*(const uint64_t *)ctx, n, args);
}

static int check(void *ctx, uint64_t n, int32_t status, const uint8_t *res, uint32_t len)
{
	uint8_t syn[QL_DEMO_PARITY_ARG_LEN], parity;
	int32_t weight;

	if (status || len != QL_DEMO_PARITY_RESULT_LEN)
		return 1;
	ql_demo_parity_syndrome(*(const uint64_t *)ctx, n, syn);
	qlink_parity(syn, &parity, &weight);
	return res[0] != parity || ql_rpc_get_i32(res + 1) != weight;
}

void ql_demo_parity_call(struct ql_vppu_call *call, uint64_t *seed)
{
	memset(call, 0, sizeof(*call));
	call->function = QL_DEMO_PARITY_NAME;
	call->arg_len = QL_DEMO_PARITY_ARG_LEN;
	call->make_args = make_args;
	call->check = check;
	call->ctx = seed;
}
