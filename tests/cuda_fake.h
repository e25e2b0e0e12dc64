/* SPDX-License-Identifier: MIT */
/*
 * cuda_fake: a stand-in CUDA driver (util/cuda_drv.h's table) for tests on
 * machines without a GPU: device memory at a fake address the test never
 * dereferences, dmabuf handles as eventfds, host registration recorded,
 * every call counted in `cu` for the test to check. Install it with
 * cu_fake_install(), remove it with ql__cuda_drv_override(NULL). Include
 * after <cmocka.h>.
 */
#ifndef QL_TEST_CUDA_FAKE_H
#define QL_TEST_CUDA_FAKE_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>

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
							     1;
	return 0;
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
	cu.copy_dev = dst;
	cu.copy_host = src;
	cu.copy_len = n;
	cu.copies++;
	return 0;
}
static int cu_dtoh(void *dst, uint64_t src, size_t n)
{
	cu.copy_dev = src;
	cu.copy_host = dst;
	cu.copy_len = n;
	cu.copies--;
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
};

/* A device 0 that exports dmabufs and maps host memory. */
static inline void cu_fake_install(void)
{
	memset(&cu, 0, sizeof(cu));
	cu.dmabuf = true;
	cu.can_map = true;
	cu_drv.mem_get_handle = cu_handle;
	ql__cuda_drv_override(&cu_drv);
}

#endif
