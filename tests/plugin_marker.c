/* SPDX-License-Identifier: MIT */
/* A well-formed plugin whose ELF constructor appends a line to the file
 * $QL_TEST_PLUGIN_MARKER names: the test of issue 22 item 5 sees from it
 * whether any of a plugin's code ran (a refused untrusted plugin, or
 * `qlinkd --check-config` without --load-plugins, must run none). */
#include <stdio.h>
#include <stdlib.h>

#include <qlink/plugin.h>

__attribute__((constructor)) static void marker_ctor(void)
{
	const char *path = getenv("QL_TEST_PLUGIN_MARKER");
	FILE *f;

	if (!path || !*path)
		return;
	f = fopen(path, "a");
	if (f) {
		fputs("constructor ran\n", f);
		fclose(f);
	}
}

static int reg(void *state, const struct ql_plugin_registrar *r)
{
	(void)state;
	(void)r;
	return 0;
}

static const struct ql_plugin_info info = {
	.abi_version = QL_PLUGIN_ABI_VERSION,
	.name = "marker",
	.version = "0",
	.register_functions = reg,
};

QL_PLUGIN_EXPORT const struct ql_plugin_info *ql_plugin_info(void);

const struct ql_plugin_info *ql_plugin_info(void)
{
	return &info;
}
