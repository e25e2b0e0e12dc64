/* SPDX-License-Identifier: MIT */
/* The built-in functions qlink_parity and rpc_increment (see demo/demo.h). */
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

/* ---- rpc_increment ------------------------------------------------------- */

static int32_t rpc_increment(const uint8_t *req, size_t req_len, uint8_t *resp, size_t resp_cap,
			     void *ctx)
{
	size_t n = req_len - QL_RPC_HEADER_SIZE;
	const uint8_t *in = req + QL_RPC_HEADER_SIZE;
	uint8_t *out = resp + QL_RPC_RESPONSE_SIZE;

	(void)ctx;
	if (n > resp_cap - QL_RPC_RESPONSE_SIZE) {
		ql_rpc_frame_respond(req, resp, QL_RPC_E_RESULT_OVERFLOW, 0);
		return 0;
	}
	for (size_t i = 0; i < n; i++)
		out[i] = (uint8_t)(in[i] + 1);
	ql_rpc_frame_respond(req, resp, 0, (uint32_t)n);
	return 0;
}

const struct ql_rpc_function *ql_demo_increment_function(void)
{
	static const struct ql_rpc_function f = {
		.name = QL_DEMO_INCREMENT_NAME,
		.id = QL_DEMO_INCREMENT_ID, /* tests check it is FNV-1a of the name */
		.frame = rpc_increment,
	};

	return &f;
}

/* Eight argument bytes (word w) of call n. */
static void increment_word(uint64_t n, uint32_t w, uint8_t out[8])
{
	uint64_t v = splitmix64(n * 0x100000001b3ull ^ w);

	memcpy(out, &v, 8);
}

void ql_demo_increment_args(uint64_t n, uint8_t *args, uint32_t arg_len)
{
	for (uint32_t i = 0; i < arg_len; i += 8) {
		uint8_t b[8];

		increment_word(n, i / 8, b);
		memcpy(args + i, b, arg_len - i < 8 ? arg_len - i : 8);
	}
}

/* ctx carries arg_len itself: the call needs no storage of its own. */
static void increment_make_args(void *ctx, uint64_t n, uint8_t *args)
{
	ql_demo_increment_args(n, args, (uint32_t)(uintptr_t)ctx);
}

static int increment_check(void *ctx, uint64_t n, int32_t status, const uint8_t *res, uint32_t len)
{
	uint32_t arg_len = (uint32_t)(uintptr_t)ctx;

	if (status || len != arg_len)
		return 1;
	for (uint32_t i = 0; i < len; i += 8) {
		uint8_t b[8];

		increment_word(n, i / 8, b);
		for (uint32_t j = 0; j < 8 && i + j < len; j++)
			if (res[i + j] != (uint8_t)(b[j] + 1))
				return 1;
	}
	return 0;
}

void ql_demo_increment_call(struct ql_vppu_call *call, uint32_t arg_len)
{
	memset(call, 0, sizeof(*call));
	call->function = QL_DEMO_INCREMENT_NAME;
	call->arg_len = arg_len;
	call->make_args = increment_make_args;
	call->check = increment_check;
	call->ctx = (void *)(uintptr_t)arg_len;
}
