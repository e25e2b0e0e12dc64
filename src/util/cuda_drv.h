/* SPDX-License-Identifier: MIT */
/*
 * cuda_drv: the CUDA driver API (libcuda.so.1), loaded at run time with
 * dlopen, for what libqlink does with GPU memory outside the kernel
 * (ql_pd_mem_alloc_attr's QL_MEM_GPU, the dmabuf handle of ibv
 * registration, qlink/rdmaxcel.h's memory registration). libqlink has no
 * link dependency on CUDA: without the driver (no NVIDIA driver installed,
 * the toolkit's stub library, no device) the calls fail with -ENODEV and a
 * detail saying which. The types are the driver's ABI (cuda.h): CUdevice
 * is an int, CUdeviceptr an unsigned 64-bit integer, CUresult an int (0:
 * CUDA_SUCCESS), contexts opaque pointers. Setup path only.
 */
#ifndef QL_UTIL_CUDA_DRV_H
#define QL_UTIL_CUDA_DRV_H

#include <stddef.h>
#include <stdint.h>

#define QL__CUDA_DEV_ATTR_CAN_MAP_HOST_MEMORY 19 /* CU_DEVICE_ATTRIBUTE_* */
#define QL__CUDA_DEV_ATTR_UNIFIED_ADDRESSING 41
#define QL__CUDA_DEV_ATTR_DMA_BUF_SUPPORTED 124
#define QL__CUDA_PTR_ATTR_SYNC_MEMOPS 6 /* CU_POINTER_ATTRIBUTE_SYNC_MEMOPS */
#define QL__CUDA_HANDLE_DMA_BUF_FD 1	/* CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD */
#define QL__CUDA_HOSTREGISTER_PORTABLE 0x01
#define QL__CUDA_HOSTREGISTER_DEVICEMAP 0x02

/* The entry points used, by their versioned names in libcuda.so.1. */
struct ql__cuda_drv {
	int (*init)(unsigned int flags);			    /* cuInit */
	int (*device_get_count)(int *n);			    /* cuDeviceGetCount */
	int (*device_get)(int *dev, int ordinal);		    /* cuDeviceGet */
	int (*device_get_attribute)(int *v, int attr, int dev);	    /* cuDeviceGetAttribute */
	int (*primary_ctx_retain)(void **ctx, int dev);		    /* cuDevicePrimaryCtxRetain */
	int (*ctx_push)(void *ctx);				    /* cuCtxPushCurrent_v2 */
	int (*ctx_pop)(void **ctx);				    /* cuCtxPopCurrent_v2 */
	int (*mem_alloc)(uint64_t *dptr, size_t len);		    /* cuMemAlloc_v2 */
	int (*mem_free)(uint64_t dptr);				    /* cuMemFree_v2 */
	int (*memset_d8)(uint64_t dptr, unsigned char v, size_t n); /* cuMemsetD8_v2 */
	int (*pointer_set_attribute)(const void *v, int attr, uint64_t dptr);
	/* cuMemGetHandleForAddressRange (CUDA 11.7+; NULL in older drivers) */
	int (*mem_get_handle)(void *handle, uint64_t dptr, size_t size, int type,
			      unsigned long long flags);
	int (*host_register)(void *p, size_t len, unsigned int flags); /* cuMemHostRegister_v2 */
	int (*host_unregister)(void *p);			       /* cuMemHostUnregister */
	int (*host_get_device_pointer)(uint64_t *dptr, void *p, unsigned int flags);
	int (*memcpy_htod)(uint64_t dst, const void *src, size_t n); /* cuMemcpyHtoD_v2 */
	int (*memcpy_dtoh)(void *dst, uint64_t src, size_t n);	     /* cuMemcpyDtoH_v2 */
	int (*get_error_name)(int err, const char **name);	     /* cuGetErrorName */
};

/* The driver, loaded and cuInit'ed once (thread-safe), or -ENODEV with a
 * detail: libcuda.so.1 missing, an entry point missing, cuInit failing
 * (the stub library, no device, a driver/kernel mismatch). */
int ql__cuda_drv_get(const struct ql__cuda_drv **drv);
/* Make `ordinal`'s primary context current on this thread (pushed; pop
 * with ql__cuda_ctx_leave). -ENODEV with a detail for no such device. */
int ql__cuda_ctx_enter(const struct ql__cuda_drv *drv, int ordinal);
void ql__cuda_ctx_leave(const struct ql__cuda_drv *drv);
/* Both: the driver, then `ordinal`'s context entered; a failure's detail
 * prefixed with "who: " (leave with ql__cuda_ctx_leave). */
int ql__cuda_enter(const char *who, int ordinal, const struct ql__cuda_drv **drv);
/* "CUDA_ERROR_..." for a CUresult (never NULL). */
const char *ql__cuda_err(const struct ql__cuda_drv *drv, int err);
/* Tests: use `fake` in place of libcuda.so.1 from now on (NULL: back to
 * the real driver, loaded again on the next call). */
void ql__cuda_drv_override(const struct ql__cuda_drv *fake);

#endif
