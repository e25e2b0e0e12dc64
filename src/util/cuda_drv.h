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
/* CU_POINTER_ATTRIBUTE_* and CU_MEMORYTYPE_DEVICE (cuda.h, CUDA 13.0) */
#define QL__CUDA_PTR_ATTR_MEMORY_TYPE 2
#define QL__CUDA_PTR_ATTR_HOST_POINTER 4
#define QL__CUDA_PTR_ATTR_SYNC_MEMOPS 6
#define QL__CUDA_PTR_ATTR_IS_MANAGED 8
#define QL__CUDA_PTR_ATTR_DEVICE_ORDINAL 9
#define QL__CUDA_PTR_ATTR_RANGE_START_ADDR 11
#define QL__CUDA_PTR_ATTR_RANGE_SIZE 12
#define QL__CUDA_MEMORYTYPE_DEVICE 2
#define QL__CUDA_HANDLE_DMA_BUF_FD 1 /* CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD */
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
	/* cuPointerGetAttribute (optional: without it no pointer is known
	 * to be device memory) */
	int (*pointer_get_attribute)(void *v, int attr, uint64_t ptr);
	/* cuMemcpy: any direction under unified addressing (optional) */
	int (*memcpy_any)(uint64_t dst, uint64_t src, size_t n);
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
/*
 * Device memory for the software NICs (providers/common/devmem.h).
 *
 * ql__cuda_mem_classify: whether [p, p + len) is CUDA device memory that
 * the CPU cannot address (cuPointerGetAttribute: CU_MEMORYTYPE_DEVICE, not
 * managed, no host pointer). 0 with *ordinal -1: host memory, which is
 * also the answer when libcuda.so.1 is not loaded in the process (no
 * device memory can exist then: the driver is never loaded for this).
 * 0 with *ordinal >= 0: device memory of that GPU, whose primary context
 * is retained for ql__cuda_copy. -EINVAL (the range runs past its CUDA
 * allocation) or -EOPNOTSUPP (the driver has neither cuMemcpyHtoD/DtoH
 * nor cuMemcpy under unified addressing) with a detail. Set-up path.
 *
 * ql__cuda_copy: n bytes from src to dst, either or both device memory
 * (dst_dev, src_dev) classified on GPU `ordinal` (the context pushed for
 * the copy). cuMemcpyHtoD/DtoH, cuMemcpy (unified addressing) device to
 * device, else through a bounce buffer on the stack. No allocation, lock
 * or log of its own: the driver's copy (synchronous) is the one call it
 * makes. 0 or -EIO.
 */
int ql__cuda_mem_classify(const void *p, size_t len, int *ordinal);
int ql__cuda_copy(int ordinal, void *dst, int dst_dev, const void *src, int src_dev, size_t n);
/* Tests: use `fake` in place of libcuda.so.1 from now on (NULL: back to
 * the real driver, loaded again on the next call). */
void ql__cuda_drv_override(const struct ql__cuda_drv *fake);

#endif
