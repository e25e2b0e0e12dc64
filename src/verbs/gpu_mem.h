/* SPDX-License-Identifier: MIT */
/*
 * gpu_mem: the CUDA side of QL_MEM_GPU memory for the verbs layer
 * (ql_pd_mem_alloc_attr, ql_mr_reg over it; docs/verbs.md "GPU memory").
 * The verbs layer keeps the bookkeeping; these allocate, free and register.
 */
#ifndef QL_VERBS_GPU_MEM_H
#define QL_VERBS_GPU_MEM_H

#include <stddef.h>
#include <stdint.h>

#include "qlink/verbs.h"

/* One QL_MEM_GPU allocation as the verbs layer keeps it. */
struct ql__gpu_mem {
	enum ql_mem_path path;
	int cuda_device;
	uint64_t raw;	      /* QL_MEM_PATH_DEVICE: what cuMemAlloc gave */
	uint64_t device_addr; /* the kernels' address of the start */
};

/* `length` bytes (whole pages) of the provider's kind of GPU memory into
 * *addr (page-aligned), g filled. -ENODEV/-EOPNOTSUPP with a detail. */
int ql__gpu_mem_alloc(struct ql_pd *pd, size_t length, int cuda_device, void **addr,
		      struct ql__gpu_mem *g);
void ql__gpu_mem_free(struct ql_pd *pd, void *addr, size_t length, const struct ql__gpu_mem *g);
/* Copy to (dir 1) or from (0) device memory of g. */
int ql__gpu_mem_copy(const struct ql__gpu_mem *g, void *dev, void *host, size_t len, int to_dev);
/* Register [addr, addr + length) of QL_MEM_PATH_DEVICE memory: dmabuf,
 * then peer memory (ql_mr_gpu_reg). iova NULL: the address itself. */
int ql__gpu_mr_reg(struct ql_pd *pd, void *addr, size_t length, const uint64_t *iova, int access,
		   const struct ql__gpu_mem *g, struct ql_mr **mr);

#endif
