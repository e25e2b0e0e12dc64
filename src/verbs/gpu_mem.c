/* SPDX-License-Identifier: MIT */
/*
 * gpu_mem: QL_MEM_GPU memory through the CUDA driver loaded at run time
 * (util/cuda_drv.h): device memory for NICs that reach the GPU over PCIe
 * (registered with a dmabuf, else through peer memory), host memory mapped
 * into the GPU for the software NICs. Setup path only.
 */
#include "verbs/gpu_mem.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "qlink/error.h"
#include "util/cuda_drv.h"
#include "verbs/provider.h"
#include "verbs/registry.h"

static size_t host_page(void)
{
	long ps = sysconf(_SC_PAGESIZE);

	return ps > 0 ? (size_t)ps : 4096;
}

static int device_alloc(const struct ql__cuda_drv *drv, size_t length, void **addr,
			struct ql__gpu_mem *g)
{
	size_t ps = host_page();
	uint64_t dptr;
	unsigned int one = 1;
	int r;

	/* a page more, so the start is page-aligned and every page-rounded
	 * range of it (a dmabuf's) stays inside the allocation */
	if (length > SIZE_MAX - ps)
		return ql_error_set(-EINVAL, "QL_MEM_GPU: length %zu too large", length);
	r = drv->mem_alloc(&g->raw, length + ps);
	if (r)
		return ql_error_set(r == 2 ? -ENOMEM : -EIO, "cuMemAlloc(%zu bytes) on GPU %d: %s",
				    length + ps, g->cuda_device, ql__cuda_err(drv, r));
	dptr = (g->raw + ps - 1) & ~(uint64_t)(ps - 1);
	r = drv->memset_d8(dptr, 0, length);
	/* every synchronous copy finished before an RDMA access sees it, as
	 * GPUDirect RDMA asks (its documentation, "Synchronization") */
	if (!r)
		r = drv->pointer_set_attribute(&one, QL__CUDA_PTR_ATTR_SYNC_MEMOPS, dptr);
	if (r) {
		drv->mem_free(g->raw);
		return ql_error_set(-EIO, "GPU memory set-up (cuMemsetD8, SYNC_MEMOPS): %s",
				    ql__cuda_err(drv, r));
	}
	g->device_addr = dptr;
	*addr = (void *)(uintptr_t)dptr;
	return 0;
}

static int host_mapped_alloc(const struct ql__cuda_drv *drv, struct ql_pd *pd, size_t length,
			     void **addr, struct ql__gpu_mem *g)
{
	const struct ql_provider *p = pd->dev->provider;
	int can = 0, r, ret;

	r = drv->device_get_attribute(&can, QL__CUDA_DEV_ATTR_CAN_MAP_HOST_MEMORY, g->cuda_device);
	if (r || !can)
		return ql_error_set(-EOPNOTSUPP,
				    "%s: GPU %d cannot map host memory, which the software NIC's "
				    "GPU memory is",
				    p->name, g->cuda_device);
	ret = p->mem_alloc(pd, length, addr);
	if (ret)
		return ret;
	r = drv->host_register(*addr, length,
			       QL__CUDA_HOSTREGISTER_PORTABLE | QL__CUDA_HOSTREGISTER_DEVICEMAP);
	if (!r)
		r = drv->host_get_device_pointer(&g->device_addr, *addr, 0);
	if (r) {
		p->mem_free(pd, *addr, length);
		*addr = NULL;
		return ql_error_set(-EIO,
				    "%s: mapping %zu bytes into GPU %d (cuMemHostRegister): %s",
				    p->name, length, g->cuda_device, ql__cuda_err(drv, r));
	}
	return 0;
}

int ql__gpu_mem_alloc(struct ql_pd *pd, size_t length, int cuda_device, void **addr,
		      struct ql__gpu_mem *g)
{
	const struct ql_provider *p = pd->dev->provider;
	const struct ql__cuda_drv *drv;
	int ret;

	memset(g, 0, sizeof(*g));
	g->cuda_device = cuda_device;
	g->path = p->gpu_mem;
	if (g->path == QL_MEM_PATH_HOST)
		return ql_error_set(-EOPNOTSUPP, "%s: no GPU memory on this provider", p->name);
	ret = ql__cuda_enter("QL_MEM_GPU", cuda_device, &drv);
	if (ret)
		return ret;
	ret = g->path == QL_MEM_PATH_DEVICE ? device_alloc(drv, length, addr, g) :
					      host_mapped_alloc(drv, pd, length, addr, g);
	ql__cuda_ctx_leave(drv);
	return ret;
}

void ql__gpu_mem_free(struct ql_pd *pd, void *addr, size_t length, const struct ql__gpu_mem *g)
{
	const struct ql__cuda_drv *drv;

	if (ql__cuda_enter("QL_MEM_GPU", g->cuda_device, &drv))
		return; /* it was allocated through it: cannot happen */
	if (g->path == QL_MEM_PATH_DEVICE) {
		drv->mem_free(g->raw);
	} else {
		drv->host_unregister(addr);
		pd->dev->provider->mem_free(pd, addr, length);
	}
	ql__cuda_ctx_leave(drv);
}

int ql__gpu_mem_copy(const struct ql__gpu_mem *g, void *dev, void *host, size_t len, int to_dev)
{
	const struct ql__cuda_drv *drv;
	uint64_t d = (uint64_t)(uintptr_t)dev;
	int r, ret;

	ret = ql__cuda_enter("QL_MEM_GPU", g->cuda_device, &drv);
	if (ret)
		return ret;
	r = to_dev ? drv->memcpy_htod(d, host, len) : drv->memcpy_dtoh(host, d, len);
	ql__cuda_ctx_leave(drv);
	if (r)
		return ql_error_set(-EIO, "%s of %zu bytes: %s",
				    to_dev ? "cuMemcpyHtoD" : "cuMemcpyDtoH", len,
				    ql__cuda_err(drv, r));
	return 0;
}

/* nvidia-peermem (or the older nv_peer_mem) is in the kernel */
static bool peermem_loaded(void)
{
	return !access("/sys/module/nvidia_peermem", F_OK) ||
	       !access("/sys/module/nv_peer_mem", F_OK);
}

/* The dmabuf path: the fd of the page-rounded range, the MR at its offset.
 * 1 when the path is not there (why in why), else 0 or -errno. */
static int reg_dmabuf(struct ql_pd *pd, const struct ql__cuda_drv *drv, uint64_t a, size_t length,
		      uint64_t iova, int access, const struct ql__gpu_mem *g, struct ql_mr **mr,
		      char *why, size_t why_len)
{
	uint64_t ps = host_page(), base = a & ~(ps - 1), end = (a + length + ps - 1) & ~(ps - 1);
	int fd = -1, ok = 0, r, ret;

	if (!pd->dev->ops->mr_reg_dmabuf) {
		snprintf(why, why_len, "%s has no dmabuf registration", pd->dev->provider->name);
		return 1;
	}
	if (!drv->mem_get_handle) {
		snprintf(why, why_len, "the CUDA driver has no cuMemGetHandleForAddressRange");
		return 1;
	}
	r = drv->device_get_attribute(&ok, QL__CUDA_DEV_ATTR_DMA_BUF_SUPPORTED, g->cuda_device);
	if (r || !ok) {
		snprintf(why, why_len,
			 "GPU %d does not export dmabufs (needs an open kernel "
			 "module and Linux 5.12+)",
			 g->cuda_device);
		return 1;
	}
	r = drv->mem_get_handle(&fd, base, (size_t)(end - base), QL__CUDA_HANDLE_DMA_BUF_FD, 0);
	if (r || fd < 0) {
		snprintf(why, why_len, "cuMemGetHandleForAddressRange: %s", ql__cuda_err(drv, r));
		return 1;
	}
	ret = pd->dev->ops->mr_reg_dmabuf(pd, a - base, length, iova, fd, access, mr);
	close(fd); /* the MR holds the dmabuf */
	if (ret) {
		snprintf(why, why_len, "%s", ql_error_detail());
		return 1;
	}
	return 0;
}

int ql__gpu_mr_reg(struct ql_pd *pd, void *addr, size_t length, const uint64_t *iova, int access,
		   const struct ql__gpu_mem *g, struct ql_mr **mr)
{
	const struct ql__cuda_drv *drv;
	uint64_t a = (uint64_t)(uintptr_t)addr;
	char dmabuf_why[256], peer_why[256];
	int ret;

	ret = ql__cuda_drv_get(&drv);
	if (ret)
		return ret;
	ret = reg_dmabuf(pd, drv, a, length, iova ? *iova : a, access, g, mr, dmabuf_why,
			 sizeof(dmabuf_why));
	if (ret <= 0) {
		if (!ret)
			(*mr)->gpu_reg = QL_MR_GPU_DMABUF;
		return ret;
	}
	/* peer memory: the device pointer as any address; the kernel's
	 * nvidia-peermem client pins the GPU pages behind it */
	ret = iova ? (pd->dev->ops->mr_reg_iova ?
			      pd->dev->ops->mr_reg_iova(pd, addr, length, *iova, access, mr) :
			      -EOPNOTSUPP) :
		     pd->dev->ops->mr_reg(pd, addr, length, access, mr);
	if (!ret) {
		(*mr)->gpu_reg = QL_MR_GPU_PEERMEM;
		return 0;
	}
	snprintf(peer_why, sizeof(peer_why), "%s",
		 ret == -EOPNOTSUPP && iova ? "no registration at an iova" : ql_error_detail());
	return ql_error_set(ret,
			    "GPU memory registration failed: dmabuf: %s; peer memory: %s "
			    "(nvidia_peermem %s)",
			    dmabuf_why, peer_why, peermem_loaded() ? "loaded" : "not loaded");
}
