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
#include <string.h>

#include "qlink/error.h"

#define QL_CUDA_MAX_DEVICES 64

static pthread_mutex_t drv_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ql__cuda_drv real;
/* loaded (or overridden); written under drv_lock with release, read
 * without it by ql__cuda_copy (device memory is classified, and so its
 * MR made, only after it was set) */
static const struct ql__cuda_drv *drv_now;
static const struct ql__cuda_drv *drv_fake;
static int drv_err; /* the load's failure, kept */
static char drv_why[256];
/* retained primary contexts (as drv_now: ql__cuda_copy reads them) */
static void *ctxs[QL_CUDA_MAX_DEVICES];
/* GPUs whose memory ql__cuda_copy may move with cuMemcpy (unified
 * addressing), set by ql__cuda_mem_classify */
static bool uva[QL_CUDA_MAX_DEVICES];

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
		SYM("cuPointerGetAttribute", pointer_get_attribute, true),
		SYM("cuMemcpy", memcpy_any, true),
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
		__atomic_store_n(&drv_now, drv_fake, __ATOMIC_RELEASE);
	} else if (!drv_now && !drv_err) {
		drv_err = load();
		if (!drv_err)
			__atomic_store_n(&drv_now, &real, __ATOMIC_RELEASE);
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
	__atomic_store_n(&drv_now, NULL, __ATOMIC_RELEASE);
	drv_err = 0;
	for (int i = 0; i < QL_CUDA_MAX_DEVICES; i++) {
		__atomic_store_n(&ctxs[i], NULL, __ATOMIC_RELEASE);
		__atomic_store_n(&uva[i], false, __ATOMIC_RELAXED);
	}
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
			__atomic_store_n(&ctxs[ordinal], ctx, __ATOMIC_RELEASE);
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

/* Whether libcuda.so.1 is in the process already (or a fake stands in):
 * without it no pointer can be device memory, and classifying host memory
 * must not load the driver into every program that registers an MR. */
static bool driver_in_process(void)
{
	bool in;
	void *h;

	pthread_mutex_lock(&drv_lock);
	in = drv_fake || drv_now;
	pthread_mutex_unlock(&drv_lock);
	if (in)
		return true;
	h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
	if (!h)
		return false;
	dlclose(h);
	return true;
}

/* One pointer attribute into a zeroed 8-byte word (the attributes used are
 * 4 or 8 bytes wide, little-endian hosts); nonzero when the driver refused. */
static int ptr_attr(const struct ql__cuda_drv *drv, int attr, uint64_t a, uint64_t *v)
{
	*v = 0;
	return drv->pointer_get_attribute(v, attr, a);
}

int ql__cuda_mem_classify(const void *p, size_t len, int *ordinal)
{
	const struct ql__cuda_drv *drv;
	uint64_t a = (uint64_t)(uintptr_t)p, v, start, size;
	int ord, unified = 0, ret;

	*ordinal = -1;
	if (!driver_in_process() || ql__cuda_drv_get(&drv) || !drv->pointer_get_attribute)
		return 0; /* no usable driver: no device memory either */
	if (ptr_attr(drv, QL__CUDA_PTR_ATTR_MEMORY_TYPE, a, &v) ||
	    (uint32_t)v != QL__CUDA_MEMORYTYPE_DEVICE)
		return 0; /* unknown to CUDA, or host memory */
	if (!ptr_attr(drv, QL__CUDA_PTR_ATTR_IS_MANAGED, a, &v) && v)
		return 0; /* managed memory: the CPU reaches it */
	if (!ptr_attr(drv, QL__CUDA_PTR_ATTR_HOST_POINTER, a, &v) && v)
		return 0; /* mapped host memory */
	if (ptr_attr(drv, QL__CUDA_PTR_ATTR_DEVICE_ORDINAL, a, &v) || (int32_t)(uint32_t)v < 0 ||
	    (int32_t)(uint32_t)v >= QL_CUDA_MAX_DEVICES)
		return ql_error_set(
			-EOPNOTSUPP,
			"GPU device memory at %p: the CUDA driver does not say which GPU "
			"holds it",
			p);
	ord = (int32_t)(uint32_t)v;
	if (!ptr_attr(drv, QL__CUDA_PTR_ATTR_RANGE_START_ADDR, a, &start) &&
	    !ptr_attr(drv, QL__CUDA_PTR_ATTR_RANGE_SIZE, a, &size) &&
	    (a - start > size || len > size - (a - start)))
		return ql_error_set(-EINVAL,
				    "GPU device memory at %p: %zu bytes run past the end of its "
				    "CUDA allocation (%llu bytes at 0x%llx)",
				    p, len, (unsigned long long)size, (unsigned long long)start);
	if (drv->memcpy_any &&
	    drv->device_get_attribute(&unified, QL__CUDA_DEV_ATTR_UNIFIED_ADDRESSING, ord))
		unified = 0;
	if (!(drv->memcpy_htod && drv->memcpy_dtoh) && !(drv->memcpy_any && unified))
		return ql_error_set(
			-EOPNOTSUPP,
			"GPU device memory at %p on GPU %d: the CUDA driver has neither "
			"the copy engine's cuMemcpyHtoD/cuMemcpyDtoH nor cuMemcpy with "
			"unified addressing, so a software NIC cannot move its bytes",
			p, ord);
	/* the primary context retained, for ql__cuda_copy to push */
	ret = ql__cuda_ctx_enter(drv, ord);
	if (ret)
		return ret;
	ql__cuda_ctx_leave(drv);
	__atomic_store_n(&uva[ord], unified != 0, __ATOMIC_RELEASE);
	*ordinal = ord;
	return 0;
}

/* Device to device without cuMemcpy: through the host, in pieces. */
static int bounce(const struct ql__cuda_drv *drv, uint64_t d, uint64_t s, size_t n)
{
	uint8_t buf[4096];
	int r = 0;

	while (n && !r) {
		size_t c = n < sizeof(buf) ? n : sizeof(buf);

		r = drv->memcpy_dtoh(buf, s, c);
		if (!r)
			r = drv->memcpy_htod(d, buf, c);
		d += c;
		s += c;
		n -= c;
	}
	return r;
}

int ql__cuda_copy(int ordinal, void *dst, int dst_dev, const void *src, int src_dev, size_t n)
{
	const struct ql__cuda_drv *drv = __atomic_load_n(&drv_now, __ATOMIC_ACQUIRE);
	uint64_t d = (uint64_t)(uintptr_t)dst, s = (uint64_t)(uintptr_t)src;
	bool any;
	void *ctx;
	int r;

	if (!drv || ordinal < 0 || ordinal >= QL_CUDA_MAX_DEVICES)
		return -EIO;
	ctx = __atomic_load_n(&ctxs[ordinal], __ATOMIC_ACQUIRE);
	any = drv->memcpy_any && __atomic_load_n(&uva[ordinal], __ATOMIC_ACQUIRE);
	if (!ctx || drv->ctx_push(ctx))
		return -EIO;
	/* (classification made sure one of the two ways is there) */
	if (dst_dev && src_dev)
		r = any ? drv->memcpy_any(d, s, n) : bounce(drv, d, s, n);
	else if (dst_dev)
		r = drv->memcpy_htod ? drv->memcpy_htod(d, src, n) : drv->memcpy_any(d, s, n);
	else if (src_dev)
		r = drv->memcpy_dtoh ? drv->memcpy_dtoh(dst, s, n) : drv->memcpy_any(d, s, n);
	else
		r = (memcpy(dst, src, n), 0);
	drv->ctx_pop(&ctx);
	return r ? -EIO : 0;
}
