/* SPDX-License-Identifier: MIT */
/* A plugin built for another plugin ABI version: loading must refuse it.
 * Built twice: for a future version (42) and for version 1 (before frame
 * handlers, when struct ql_rpc_function was shorter). */
#include <qlink/plugin.h>

#ifndef QL_TEST_ABI
#define QL_TEST_ABI 42u
#endif

static int reg(void *state, const struct ql_plugin_registrar *r)
{
	(void)state;
	(void)r;
	return 0;
}

static const struct ql_plugin_info info = {
	.abi_version = QL_TEST_ABI,
	.name = "bad_abi",
	.version = "0",
	.register_functions = reg,
};

QL_PLUGIN_EXPORT const struct ql_plugin_info *ql_plugin_info(void);

const struct ql_plugin_info *ql_plugin_info(void)
{
	return &info;
}
