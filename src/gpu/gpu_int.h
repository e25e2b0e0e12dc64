/* SPDX-License-Identifier: MIT */
/*
 * Between the GPU dispatcher's host code (gpu.c, C) and its CUDA part
 * (gpu_cuda.cu, compiled by nvcc only when the build has CUDA): mapping
 * host memory for the device, the function table's device addresses, and
 * the persistent kernel's launch and wait (internal).
 */
#ifndef QL_GPU_INT_H
#define QL_GPU_INT_H

#include <stddef.h>
#include <stdint.h>

#include "gpu/gpu_body.h"
#include "qlink/gpu.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the CUDA part keeps per dispatcher (opaque to gpu.c). */
struct ql__gpu_cuda;

/* 1: a device is usable; 0: not, with the reason in why. */
int ql__gpu_cuda_probe(int device, char *why, size_t why_len);
int ql__gpu_cuda_open(int device, struct ql__gpu_cuda **c);
void ql__gpu_cuda_close(struct ql__gpu_cuda *c);
/* Make [addr, addr+len) device-visible (cudaHostRegister, mapped, whole
 * pages; a page already registered is fine) and give its device address. */
int ql__gpu_cuda_map(struct ql__gpu_cuda *c, void *addr, size_t len, void **dev);
/* Mapped host memory (cudaHostAlloc) for the shared words. */
int ql__gpu_cuda_alloc_mapped(struct ql__gpu_cuda *c, size_t len, void **host, void **dev);
/* Device memory holding a copy of len bytes at src. */
int ql__gpu_cuda_upload(struct ql__gpu_cuda *c, const void *src, size_t len, void **dev);
/* Launch the persistent kernel on the body (copied to the device; the
 * kernel writes its state back there when it returns). */
int ql__gpu_cuda_launch(struct ql__gpu_cuda *c, const struct ql_gpu_body *b);
/* Wait for the kernel to return (at most timeout_ns) and fetch the body's
 * state into b. */
int ql__gpu_cuda_wait(struct ql__gpu_cuda *c, uint64_t timeout_ns, struct ql_gpu_body *b);
/* The device-address resolver of a built-in function, or NULL. */
ql_gpu_resolve_fn ql__gpu_builtin_dsym(const char *name);

/* Tests (the static library): one turn of the dispatch body on the calling
 * thread, for a dispatcher connected and not started. 1, 0 or a negative
 * errno as ql_gpu_body_step; -EBUSY while a run is on. */
int ql__gpu_dispatcher_step(struct ql_gpu_dispatcher *d);

#ifdef __cplusplus
}
#endif
#endif
