/* SPDX-License-Identifier: MIT */
/*
 * A plugin that misbehaves in the way the environment variable
 * QL_TEST_PLUGIN_MODE says (read at each load): its description NULL,
 * nameless or without register_functions; register_functions failing with
 * a negative or positive value, registering a NULL function, or ignoring
 * a refused registration; or behaving ("good"), with fini counting its
 * calls through the state init made. test_plugin_misbehaving loads it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <qlink/plugin.h>
#include <qlink/rpc.h>

static const char *mode(void)
{
	const char *m = getenv("QL_TEST_PLUGIN_MODE");

	return m ? m : "good";
}

static int32_t nop(struct ql_rpc_in *in, struct ql_rpc_out *out, void *ctx)
{
	(void)in;
	(void)out;
	(void)ctx;
	return 0;
}

static int reg(void *state, const struct ql_plugin_registrar *r)
{
	struct ql_rpc_function f = QL_RPC_RAW_FUNCTION("misbehaving_nop", nop, NULL);
	const char *m = mode();

	(void)state;
	if (!strcmp(m, "regfail"))
		return -EIO;
	if (!strcmp(m, "regpositive"))
		return 3;
	if (!strcmp(m, "regnull"))
		return r->register_function(r->host, NULL);
	r->log(r->host, QL_LOG_DEBUG, "registering");
	if (r->register_function(r->host, &f))
		return -1;
	if (!strcmp(m, "regignore"))
		r->register_function(r->host, &f); /* a duplicate, refused and ignored */
	return 0;
}

static int init(const char *config, void **state)
{
	if (config && !strcmp(config, "fail"))
		return -EINVAL;
	*state = getenv("QL_TEST_PLUGIN_FINI"); /* where fini leaves its mark */
	return 0;
}

static void fini(void *state)
{
	if (state)
		setenv("QL_TEST_PLUGIN_FINI", "called", 1);
}

static struct ql_plugin_info info = {
	.abi_version = QL_PLUGIN_ABI_VERSION,
	.version = "1",
	.init = init,
	.fini = fini,
};

QL_PLUGIN_EXPORT const struct ql_plugin_info *ql_plugin_info(void);

const struct ql_plugin_info *ql_plugin_info(void)
{
	const char *m = mode();

	if (!strcmp(m, "null"))
		return NULL;
	info.name = strcmp(m, "noname") ? "misbehaving" : "";
	info.register_functions = strcmp(m, "noreg") ? reg : NULL;
	return &info;
}
