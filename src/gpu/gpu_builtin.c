/* SPDX-License-Identifier: MIT */
/* The built-in GPU handlers' descriptions (gpu.h, gpu_builtin.h). */
#include <pthread.h>
#include <string.h>

#include "gpu/gpu_builtin.h"
#include "gpu/gpu_int.h"
#include "qlink/gpu.h"

static struct ql_gpu_function builtin_parity, builtin_echo;
static pthread_once_t builtin_once = PTHREAD_ONCE_INIT;

static ql_gpu_resolve_fn dsym(const char *name)
{
#ifdef QLINK_HAVE_CUDA
	return ql__gpu_builtin_dsym(name);
#else
	(void)name;
	return NULL;
#endif
}

static void builtin_init(void)
{
	builtin_parity = QL_GPU_FUNCTION(qlink_parity);
	builtin_parity.dev_resolve = dsym("qlink_parity");
	builtin_echo = QL_GPU_RAW_FUNCTION_DEV(ql_gpu_echo, "echo", NULL);
	builtin_echo.dev_resolve = dsym("echo");
}

const struct ql_gpu_function *ql_gpu_builtin_function(const char *name)
{
	if (!name)
		return NULL;
	pthread_once(&builtin_once, builtin_init);
	if (!strcmp(name, "qlink_parity"))
		return &builtin_parity;
	if (!strcmp(name, "echo"))
		return &builtin_echo;
	return NULL;
}
