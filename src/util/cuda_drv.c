/* SPDX-License-Identifier: MIT */
/*
 * cuda_drv: libcuda.so.1 through dlopen (cuda_drv.h). Loaded once, on the
 * first call that needs it; never unloaded (the driver keeps threads).
 */
#include "util/cuda_drv.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>

#include "qlink/error.h"

#define QL_CUDA_MAX_DEVICES 64

static pthread_mutex_t drv_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ql__cuda_drv real;
static const struct ql__cuda_drv *drv_now; /* loaded (or overridden) */
static const struct ql__cuda_drv *drv_fake;
static int drv_err; /* the load's failure, kept */
static char drv_why[256];
static void *ctxs[QL_CUDA_MAX_DEVICES]; /* retained primary contexts */

static int load(void)
{
	static const struct {
		const char *name;
		size_t off;
		bool optional;
	} syms[] = {
#define SYM(n, f, o) { n, offsetof(struct ql__cuda_drv, f), o }
		SYM("cuInit", init, false),
		SYM("cuDeviceGetCount", device_get_count, false),
		SYM("cuDeviceGet", device_get, false),
		SYM("cuDeviceGetAttribute", device_get_attribute, false),
		SYM("cuDevicePrimaryCtxRetain", primary_ctx_retain, false),
		SYM("cuCtxPushCurrent_v2", ctx_push, false),
		SYM("cuCtxPopCurrent_v2", ctx_pop, false),
		SYM("cuMemAlloc_v2", mem_alloc, false),
		SYM("cuMemFree_v2", mem_free, false),
		SYM("cuMemsetD8_v2", memset_d8, false),
		SYM("cuPointerSetAttribute", pointer_set_attribute, false),
		SYM("cuMemGetHandleForAddressRange", mem_get_handle, true),
		SYM("cuMemHostRegister_v2", host_register, false),
		SYM("cuMemHostUnregister", host_unregister, false),
		SYM("cuMemHostGetDevicePointer_v2", host_get_device_pointer, false),
		SYM("cuMemcpyHtoD_v2", memcpy_htod, false),
		SYM("cuMemcpyDtoH_v2", memcpy_dtoh, false),
		SYM("cuGetErrorName", get_error_name, false),
#undef SYM
	};
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	int n = 0, r;

	if (!h) {
		const char *e = dlerror();

		snprintf(drv_why, sizeof(drv_why), "no CUDA driver (libcuda.so.1: %s)",
			 e ? e : "not found");
		return -ENODEV;
	}
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		void *f = dlsym(h, syms[i].name);

		if (!f && !syms[i].optional) {
			snprintf(drv_why, sizeof(drv_why),
				 "libcuda.so.1 has no %s (driver too old)", syms[i].name);
			return -ENODEV;
		}
		*(void **)((char *)&real + syms[i].off) = f;
	}
	r = real.init(0);
	if (r) {
		const char *name = NULL;

		real.get_error_name(r, &name);
		snprintf(drv_why, sizeof(drv_why), "cuInit: %s%s", name ? name : "error",
			 r == 34 ? " (the toolkit's stub libcuda, not a driver)" : "");
		return -ENODEV;
	}
	if (real.device_get_count(&n) || n < 1) {
		snprintf(drv_why, sizeof(drv_why), "the CUDA driver sees no GPU");
		return -ENODEV;
	}
	return 0;
}

int ql__cuda_drv_get(const struct ql__cuda_drv **drv)
{
	int ret;

	pthread_mutex_lock(&drv_lock);
	if (drv_fake) {
		drv_now = drv_fake;
	} else if (!drv_now && !drv_err) {
		drv_err = load();
		if (!drv_err)
			drv_now = &real;
	}
	*drv = drv_now;
	ret = drv_now ? 0 : drv_err;
	pthread_mutex_unlock(&drv_lock);
	if (ret)
		return ql_error_set(ret, "%s", drv_why);
	return 0;
}

void ql__cuda_drv_override(const struct ql__cuda_drv *fake)
{
	pthread_mutex_lock(&drv_lock);
	drv_fake = fake;
	drv_now = NULL;
	drv_err = 0;
	for (int i = 0; i < QL_CUDA_MAX_DEVICES; i++)
		ctxs[i] = NULL;
	pthread_mutex_unlock(&drv_lock);
}

const char *ql__cuda_err(const struct ql__cuda_drv *drv, int err)
{
	const char *name = NULL;

	if (drv && drv->get_error_name && !drv->get_error_name(err, &name) && name)
		return name;
	return "CUDA_ERROR_UNKNOWN";
}

int ql__cuda_ctx_enter(const struct ql__cuda_drv *drv, int ordinal)
{
	void *ctx;
	int dev, r;

	if (ordinal < 0 || ordinal >= QL_CUDA_MAX_DEVICES)
		return ql_error_set(-ENODEV, "CUDA device %d: no such device", ordinal);
	pthread_mutex_lock(&drv_lock);
	ctx = ctxs[ordinal];
	r = 0;
	if (!ctx) {
		r = drv->device_get(&dev, ordinal);
		if (!r)
			r = drv->primary_ctx_retain(&ctx, dev);
		if (!r)
			ctxs[ordinal] = ctx;
	}
	pthread_mutex_unlock(&drv_lock);
	if (r)
		return ql_error_set(-ENODEV, "CUDA device %d: %s", ordinal, ql__cuda_err(drv, r));
	r = drv->ctx_push(ctx);
	if (r)
		return ql_error_set(-ENODEV, "CUDA device %d: cuCtxPushCurrent: %s", ordinal,
				    ql__cuda_err(drv, r));
	return 0;
}

void ql__cuda_ctx_leave(const struct ql__cuda_drv *drv)
{
	void *ctx;

	drv->ctx_pop(&ctx);
}

int ql__cuda_enter(const char *who, int ordinal, const struct ql__cuda_drv **drv)
{
	char why[256];
	int ret = ql__cuda_drv_get(drv);

	if (!ret)
		ret = ql__cuda_ctx_enter(*drv, ordinal);
	if (!ret)
		return 0;
	snprintf(why, sizeof(why), "%s", ql_error_detail());
	return ql_error_set(ret, "%s: %s", who, why);
}
