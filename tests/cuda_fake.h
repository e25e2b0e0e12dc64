/* SPDX-License-Identifier: MIT */
/*
 * cuda_fake: a stand-in CUDA driver (util/cuda_drv.h's table) for tests on
 * machines without a GPU: device memory at a fake address the test never
 * dereferences, dmabuf handles as eventfds, host registration recorded,
 * every call counted in `cu` for the test to check. Install it with
 * cu_fake_install(), remove it with ql__cuda_drv_override(NULL). Include
 * after <cmocka.h>.
 *
 * Device memory a NIC must reach (cu_fake_dev_mem): an address range
 * mapped PROT_NONE, so that any CPU access to it (a memcpy) faults, whose
 * bytes live in a separate host buffer (cu.dev.back) that only the fake's
 * copies (cuMemcpyHtoD/DtoH, cuMemcpy) read and write, each counted;
 * cuPointerGetAttribute says CU_MEMORYTYPE_DEVICE for it, and nothing
 * (CUDA_ERROR_INVALID_VALUE) for any other address.
 */
#ifndef QL_TEST_CUDA_FAKE_H
#define QL_TEST_CUDA_FAKE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>

#include "util/cuda_drv.h"

static struct {
	bool dmabuf;  /* CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED */
	bool can_map; /* CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY */
	int pushed;   /* contexts pushed and not popped */
	int allocs;   /* live cuMemAlloc */
	uint64_t raw; /* what cuMemAlloc gave */
	size_t raw_len;
	uint64_t memset_ptr, sync_ptr;
	size_t memset_len;
	int handle_calls, handle_type, handle_fd;
	uint64_t handle_ptr;
	size_t handle_size;
	int host_regs, host_reg_flags;
	void *host_reg_ptr, *host_unreg_ptr;
	size_t host_reg_len;
	int copies; /* +1 per HtoD, -1 per DtoH */
	uint64_t copy_dev;
	const void *copy_host;
	size_t copy_len;
	bool uva; /* CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING */
	struct {
		uint8_t *base; /* PROT_NONE: what the NIC is given */
		uint8_t *back; /* the bytes */
		size_t len;
		int htod, dtoh, any; /* copies that reached it, by call */
		int fail;	     /* nonzero: the copies into it fail with it */
	} dev;
} cu;

static int cu_init(unsigned int f)
{
	(void)f;
	return 0;
}
static int cu_count(int *n)
{
	*n = 1;
	return 0;
}
static int cu_dev_get(int *d, int o)
{
	*d = o;
	return o == 0 ? 0 : 101; /* CUDA_ERROR_INVALID_DEVICE */
}
static int cu_attr(int *v, int attr, int d)
{
	(void)d;
	*v = attr == QL__CUDA_DEV_ATTR_DMA_BUF_SUPPORTED   ? cu.dmabuf :
	     attr == QL__CUDA_DEV_ATTR_CAN_MAP_HOST_MEMORY ? cu.can_map :
	     attr == QL__CUDA_DEV_ATTR_UNIFIED_ADDRESSING  ? cu.uva :
							     1;
	return 0;
}

/* Whether [a, a + n) is inside the fake device memory (n 0: a is). */
static bool cu_in_dev(uint64_t a, size_t n)
{
	uint64_t b = (uint64_t)(uintptr_t)cu.dev.base;

	return cu.dev.base && a >= b && a - b <= cu.dev.len && n <= cu.dev.len - (a - b) &&
	       (n || a - b < cu.dev.len);
}

static uint8_t *cu_back(uint64_t a)
{
	return cu.dev.back + (a - (uint64_t)(uintptr_t)cu.dev.base);
}

/* len bytes of fake device memory (one allocation at a time), zeroed */
static inline void *cu_fake_dev_mem(size_t len)
{
	void *p = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	assert_true(p != MAP_FAILED);
	assert_null(cu.dev.base);
	cu.dev.base = p;
	cu.dev.back = calloc(1, len);
	assert_non_null(cu.dev.back);
	cu.dev.len = len;
	return p;
}

static inline void cu_fake_dev_free(void)
{
	munmap(cu.dev.base, cu.dev.len);
	free(cu.dev.back);
	memset(&cu.dev, 0, sizeof(cu.dev));
}

/* cuPointerGetAttribute: the widths of cuda.h (CUmemorytype, int and
 * unsigned int: 4 bytes; CUdeviceptr, size_t: 8) */
static int cu_ptr_get(void *v, int attr, uint64_t p)
{
	uint32_t u32;
	uint64_t u64;

	if (!cu_in_dev(p, 0))
		return 1; /* CUDA_ERROR_INVALID_VALUE */
	switch (attr) {
	case QL__CUDA_PTR_ATTR_MEMORY_TYPE:
		u32 = QL__CUDA_MEMORYTYPE_DEVICE;
		memcpy(v, &u32, 4);
		return 0;
	case QL__CUDA_PTR_ATTR_IS_MANAGED:
	case QL__CUDA_PTR_ATTR_DEVICE_ORDINAL:
		u32 = 0;
		memcpy(v, &u32, 4);
		return 0;
	case QL__CUDA_PTR_ATTR_HOST_POINTER:
		return 1; /* device memory has none */
	case QL__CUDA_PTR_ATTR_RANGE_START_ADDR:
		u64 = (uint64_t)(uintptr_t)cu.dev.base;
		memcpy(v, &u64, 8);
		return 0;
	case QL__CUDA_PTR_ATTR_RANGE_SIZE:
		u64 = cu.dev.len;
		memcpy(v, &u64, 8);
		return 0;
	default:
		return 1;
	}
}
static int cu_retain(void **ctx, int d)
{
	(void)d;
	*ctx = &cu;
	return 0;
}
static int cu_push(void *ctx)
{
	assert_ptr_equal(ctx, &cu);
	cu.pushed++;
	return 0;
}
static int cu_pop(void **ctx)
{
	*ctx = &cu;
	cu.pushed--;
	return 0;
}
static int cu_alloc(uint64_t *p, size_t n)
{
	/* a device address the test never dereferences, 256-aligned as
	 * cuMemAlloc's and deliberately not page-aligned */
	cu.raw = 0x7f0000000100ull;
	cu.raw_len = n;
	cu.allocs++;
	*p = cu.raw;
	return 0;
}
static int cu_free(uint64_t p)
{
	assert_true(p == cu.raw);
	cu.allocs--;
	return 0;
}
static int cu_memset(uint64_t p, unsigned char v, size_t n)
{
	assert_int_equal(v, 0);
	cu.memset_ptr = p;
	cu.memset_len = n;
	return 0;
}
static int cu_ptr_attr(const void *v, int attr, uint64_t p)
{
	assert_int_equal(attr, QL__CUDA_PTR_ATTR_SYNC_MEMOPS);
	assert_int_equal(*(const unsigned int *)v, 1);
	cu.sync_ptr = p;
	return 0;
}
static int cu_handle(void *h, uint64_t p, size_t size, int type, unsigned long long flags)
{
	assert_true(flags == 0);
	cu.handle_calls++;
	cu.handle_ptr = p;
	cu.handle_size = size;
	cu.handle_type = type;
	cu.handle_fd = eventfd(0, 0); /* any fd: the provider must close it */
	*(int *)h = cu.handle_fd;
	return 0;
}
static int cu_host_reg(void *p, size_t n, unsigned int flags)
{
	cu.host_regs++;
	cu.host_reg_ptr = p;
	cu.host_reg_len = n;
	cu.host_reg_flags = (int)flags;
	return 0;
}
static int cu_host_unreg(void *p)
{
	cu.host_unreg_ptr = p;
	cu.host_regs--;
	return 0;
}
static int cu_host_dptr(uint64_t *d, void *p, unsigned int f)
{
	(void)f;
	*d = (uint64_t)(uintptr_t)p + 0x1000000; /* distinct, to see it used */
	return 0;
}
static int cu_htod(uint64_t dst, const void *src, size_t n)
{
	if (cu_in_dev(dst, n)) {
		assert_false(cu_in_dev((uint64_t)(uintptr_t)src, 0));
		cu.dev.htod++;
		if (cu.dev.fail)
			return cu.dev.fail;
		memcpy(cu_back(dst), src, n);
		return 0;
	}
	cu.copy_dev = dst;
	cu.copy_host = src;
	cu.copy_len = n;
	cu.copies++;
	return 0;
}
static int cu_dtoh(void *dst, uint64_t src, size_t n)
{
	if (cu_in_dev(src, n)) {
		assert_false(cu_in_dev((uint64_t)(uintptr_t)dst, 0));
		cu.dev.dtoh++;
		memcpy(dst, cu_back(src), n);
		return 0;
	}
	cu.copy_dev = src;
	cu.copy_host = dst;
	cu.copy_len = n;
	cu.copies--;
	return 0;
}
/* cuMemcpy: either side may be the fake device memory */
static int cu_any(uint64_t dst, uint64_t src, size_t n)
{
	void *d = cu_in_dev(dst, n) ? cu_back(dst) : (void *)(uintptr_t)dst;
	const void *s = cu_in_dev(src, n) ? cu_back(src) : (const void *)(uintptr_t)src;

	assert_true(cu.uva);
	cu.dev.any++;
	if (cu.dev.fail && cu_in_dev(dst, n))
		return cu.dev.fail;
	memmove(d, s, n);
	return 0;
}

static int cu_err_name(int e, const char **n)
{
	*n = e == 101 ? "CUDA_ERROR_INVALID_DEVICE" : "CUDA_ERROR_FAKE";
	return 0;
}

static struct ql__cuda_drv cu_drv = {
	.init = cu_init,
	.device_get_count = cu_count,
	.device_get = cu_dev_get,
	.device_get_attribute = cu_attr,
	.primary_ctx_retain = cu_retain,
	.ctx_push = cu_push,
	.ctx_pop = cu_pop,
	.mem_alloc = cu_alloc,
	.mem_free = cu_free,
	.memset_d8 = cu_memset,
	.pointer_set_attribute = cu_ptr_attr,
	.mem_get_handle = cu_handle,
	.host_register = cu_host_reg,
	.host_unregister = cu_host_unreg,
	.host_get_device_pointer = cu_host_dptr,
	.memcpy_htod = cu_htod,
	.memcpy_dtoh = cu_dtoh,
	.get_error_name = cu_err_name,
	.pointer_get_attribute = cu_ptr_get,
	.memcpy_any = cu_any,
};

/* A device 0 that exports dmabufs and maps host memory. */
static inline void cu_fake_install(void)
{
	memset(&cu, 0, sizeof(cu));
	cu.dmabuf = true;
	cu.can_map = true;
	cu.uva = true;
	cu_drv.mem_get_handle = cu_handle;
	cu_drv.memcpy_htod = cu_htod;
	cu_drv.memcpy_dtoh = cu_dtoh;
	cu_drv.memcpy_any = cu_any;
	cu_drv.pointer_get_attribute = cu_ptr_get;
	ql__cuda_drv_override(&cu_drv);
}

#endif
