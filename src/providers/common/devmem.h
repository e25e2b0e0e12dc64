/* SPDX-License-Identifier: MIT */
/*
 * devmem: GPU device memory on the software NICs (soft://, soft+shm://,
 * soft+udp://; docs/gpu.md "Device memory on the software NICs").
 *
 * Memory the CPU cannot address (cudaMalloc/cuMemAlloc) is found when it
 * is registered (ql__nic_mem_tag, from ql_mr_reg) and the MR keeps a tag:
 * 0 for host memory (host-mapped GPU memory and managed memory too: the CPU
 * reaches them), the CUDA device ordinal + 1 for device memory. The data
 * path moves bytes of a tagged MR through the CUDA driver's copy engine
 * (cuMemcpyHtoD/DtoH, cuMemcpy under unified addressing) instead of
 * memcpy. Host memory keeps its memcpy path: the NIC tests one tag per
 * access (one predictable branch), and only a WR that names device memory
 * takes the functions below.
 *
 * Tagged SGE lists: resolved scatter/gather lists whose addr is where the
 * bytes are in this process and whose lkey is the tag of the MR.
 *
 * Hot path: nothing here allocates, locks or logs; the one exception is
 * the driver's copy itself (a synchronous cuMemcpy*, with the GPU's primary
 * context pushed around it), the cost of reaching device memory at all.
 */
#ifndef QL_PROVIDERS_DEVMEM_H
#define QL_PROVIDERS_DEVMEM_H

#include <stddef.h>
#include <stdint.h>

#include "providers/common/nic.h"

/* The tag of [addr, addr + length), at registration (set-up path): 0
 * host, ordinal + 1 device memory. -EINVAL / -EOPNOTSUPP with a detail
 * naming `provider` when it is device memory the NIC cannot serve (the
 * range runs past its CUDA allocation; no copy engine and no unified
 * addressing). Never loads the CUDA driver: without libcuda.so.1 in the
 * process, every address is host memory. */
QL__NIC_HIDDEN int ql__nic_mem_tag(const void *addr, size_t length, const char *provider,
				   uint32_t *tag);

/* n bytes from src (tag stag) to dst (tag dtag): memcpy when both are
 * host memory, else the driver's copy. 0 or -EIO. */
QL__NIC_HIDDEN int ql__nic_copy(void *dst, uint32_t dtag, const void *src, uint32_t stag, size_t n);

/* len bytes from byte soff of the tagged list src to byte doff of the
 * tagged list dst (the caller checked both hold them). 0 or -EIO. */
QL__NIC_HIDDEN int ql__nic_sg_copy(const struct ibv_sge *dst, int nd, uint64_t doff,
				   const struct ibv_sge *src, int ns, uint64_t soff, uint64_t len);

/* A WRITE of len bytes from the tagged list src into dst (tag dtag) with
 * the soft NICs' placement rule kept: the last 8 bytes of a WRITE of 8 or
 * more are placed last (a second, synchronous copy after the first). */
QL__NIC_HIDDEN int ql__nic_write_tagged(uint8_t *dst, uint32_t dtag, const struct ibv_sge *src,
					int ns, uint64_t len);

#endif
