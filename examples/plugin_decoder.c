/* SPDX-License-Identifier: MIT */
/*
 * plugin_decoder: a qlinkd plugin serving a real (small) QEC decoder.
 *
 * `repcode_decode` decodes one round of a distance-64 bit-flip repetition
 * code: 64 data qubits in a line, 63 parity checks between neighbours.
 * The syndrome bit s[i] is e[i] XOR e[i+1] for the error e. On a line every
 * syndrome is explained by exactly two error patterns, complements of each
 * other (fix e[0] = 0 or 1 and propagate), so minimum-weight matching is to
 * build one and take it or its complement, whichever flips fewer qubits.
 * Returns the correction (64 bits, bit-packed LSB first) and its weight.
 *
 * The config string, `max_weight=N`, makes the decoder refuse (handler
 * status 1) a correction heavier than N, as a decoder flags a round it
 * does not trust. Build as a MODULE (see examples/CMakeLists.txt) and list
 * it under `plugins:` in qlinkd's config; docs/qlinkd.md walks through it.
 *
 * The plugin uses only qlink's headers: QL_RPC_FN and the streams are
 * inline, and registration goes through the registrar's function
 * pointers, so it links against nothing of qlink's.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <qlink/plugin.h>

#define DISTANCE 64
#define CHECKS (DISTANCE - 1)

struct decoder {
	int32_t max_weight;
};

static int32_t repcode_decode(void *ctx, const uint8_t *syndrome, uint8_t *correction,
			      int32_t *weight)
{
	const struct decoder *d = ctx;
	int e = 0, w = 0;

	/* e[0] = 0; e[i + 1] = e[i] ^ s[i] */
	for (int i = 0; i < DISTANCE; i++) {
		if (i)
			e ^= ql_rpc_bit_get(syndrome, (size_t)i - 1);
		ql_rpc_bit_set(correction, (size_t)i, e);
		w += e;
	}
	if (w > DISTANCE - w) { /* the complement is lighter */
		for (int i = 0; i < DISTANCE / 8; i++)
			correction[i] = (uint8_t)~correction[i];
		w = DISTANCE - w;
	}
	*weight = w;
	return w > d->max_weight ? 1 : 0;
}
QL_RPC_FN_CTX(repcode_decode, QL_ARG_BITS(CHECKS), QL_RES_BITS(DISTANCE), QL_RES_I32);

static int decoder_init(const char *config, void **state)
{
	struct decoder *d = calloc(1, sizeof(*d));
	char *end;

	if (!d)
		return -ENOMEM;
	d->max_weight = DISTANCE / 2;
	if (config && *config) {
		if (strncmp(config, "max_weight=", 11)) {
			free(d);
			return -EINVAL;
		}
		long v = strtol(config + 11, &end, 10);

		if (*end || end == config + 11 || v < 0 || v > DISTANCE) {
			free(d);
			return -EINVAL;
		}
		d->max_weight = (int32_t)v;
	}
	*state = d;
	return 0;
}

static void decoder_fini(void *state)
{
	free(state);
}

static int decoder_register(void *state, const struct ql_plugin_registrar *reg)
{
	char msg[80];

	snprintf(msg, sizeof(msg), "repcode_decode: distance %d, max_weight %d", DISTANCE,
		 ((struct decoder *)state)->max_weight);
	if (reg->log)
		reg->log(reg->host, QL_LOG_DEBUG, msg);
	return reg->register_function(reg->host, &QL_RPC_FUNCTION_CTX(repcode_decode, state));
}

static const struct ql_plugin_info info = {
	.abi_version = QL_PLUGIN_ABI_VERSION,
	.name = "repcode_decoder",
	.version = "1.0",
	.init = decoder_init,
	.fini = decoder_fini,
	.register_functions = decoder_register,
	/* reads only its configuration: safe on a listener shared by many callers */
	.flags = QL_PLUGIN_STATELESS,
};

QL_PLUGIN_EXPORT const struct ql_plugin_info *ql_plugin_info(void);

const struct ql_plugin_info *ql_plugin_info(void)
{
	return &info;
}
