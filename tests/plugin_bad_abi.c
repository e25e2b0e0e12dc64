/* SPDX-License-Identifier: MIT */
/* A plugin built for another plugin ABI version: loading must refuse it. */
#include <qlink/plugin.h>

static int reg(void *state, const struct ql_plugin_registrar *r)
{
	(void)state;
	(void)r;
	return 0;
}

static const struct ql_plugin_info info = {
	.abi_version = QL_PLUGIN_ABI_VERSION + 41,
	.name = "bad_abi",
	.version = "0",
	.register_functions = reg,
};

QL_PLUGIN_EXPORT const struct ql_plugin_info *ql_plugin_info(void);

const struct ql_plugin_info *ql_plugin_info(void)
{
	return &info;
}
