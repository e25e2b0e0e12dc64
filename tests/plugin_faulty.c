/* SPDX-License-Identifier: MIT */
/*
 * A plugin whose handlers misbehave, for tests/test_qlinkd_faults.c:
 * fault_hang never returns, fault_smash writes past its result capacity,
 * fault_segv stores to address 16 (a field of a NULL struct). Raw handlers, any arguments.
 */
#include <string.h>

#include <qlink/plugin.h>

static volatile int forever = 1;

static int32_t fault_hang(struct ql_rpc_in *in, struct ql_rpc_out *out, void *ctx)
{
	(void)in;
	(void)out;
	(void)ctx;
	while (forever)
		;
	return 0;
}

static int32_t fault_smash(struct ql_rpc_in *in, struct ql_rpc_out *out, void *ctx)
{
	(void)in;
	(void)ctx;
	memset(out->p, 0x5a, (size_t)(out->end - out->p) + 8);
	return 0;
}

static int32_t fault_segv(struct ql_rpc_in *in, struct ql_rpc_out *out, void *ctx)
{
	volatile int *p = ctx; /* address 16, unmapped: a NULL-struct field (not
				  NULL itself, which sanitizers catch first) */

	(void)in;
	(void)out;
	*p = 42;
	return 0;
}

static int reg(void *state, const struct ql_plugin_registrar *r)
{
	int ret;

	(void)state;
	ret = r->register_function(r->host, &QL_RPC_RAW_FUNCTION("fault_hang", fault_hang, NULL));
	if (!ret)
		ret = r->register_function(r->host,
					   &QL_RPC_RAW_FUNCTION("fault_smash", fault_smash, NULL));
	if (!ret)
		ret = r->register_function(r->host, &QL_RPC_RAW_FUNCTION("fault_segv", fault_segv,
									 (void *)16));
	return ret;
}

static const struct ql_plugin_info info = {
	.abi_version = QL_PLUGIN_ABI_VERSION,
	.name = "faulty",
	.version = "0",
	.register_functions = reg,
	.flags = QL_PLUGIN_STATELESS,
};

QL_PLUGIN_EXPORT const struct ql_plugin_info *ql_plugin_info(void);

const struct ql_plugin_info *ql_plugin_info(void)
{
	return &info;
}
