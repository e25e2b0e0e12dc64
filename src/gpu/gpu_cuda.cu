/* SPDX-License-Identifier: MIT */
/*
 * The GPU dispatcher's CUDA part (gpu_int.h), compiled only when the build
 * has CUDA: the persistent kernel (one thread running the dispatch body of
 * gpu_body.h, the same code the host emulation runs), host memory made
 * device-visible with cudaHostRegister (mapped), the shared words in mapped
 * memory, the function table's device addresses, launch and wait.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime.h>

#include "gpu/gpu_builtin.h"
#include "gpu/gpu_int.h"
#include "qlink/error.h"

#define GPU_MAX_MAPS 32

struct ql__gpu_cuda {
	int device;
	cudaStream_t stream;
	void *maps[GPU_MAX_MAPS]; /* page ranges registered here */
	int nmaps;
	void *mapped_alloc[4]; /* cudaHostAlloc'd */
	int nmapped;
	void *dev_alloc[8]; /* cudaMalloc'd */
	int ndev;
	struct ql_gpu_body *dbody; /* the body's state on the device */
};

static __global__ void ql_gpu_persistent_kernel(struct ql_gpu_body *gb)
{
	struct ql_gpu_body b = *gb;

	ql_gpu_body_run(&b);
	*gb = b;
}

static int cuda_err(cudaError_t e, const char *what)
{
	if (e == cudaSuccess)
		return 0;
	return ql_error_set(-EIO, "gpu: %s: %s", what, cudaGetErrorString(e));
}

extern "C" int ql__gpu_cuda_probe(int device, char *why, size_t why_len)
{
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);

	if (e != cudaSuccess || n <= 0) {
		if (why && why_len)
			snprintf(why, why_len, "no CUDA device (%s)",
				 e != cudaSuccess ? cudaGetErrorString(e) : "none found");
		return 0;
	}
	if (device < 0 || device >= n) {
		if (why && why_len)
			snprintf(why, why_len, "no CUDA device %d (%d present)", device, n);
		return 0;
	}
	return 1;
}

extern "C" int ql__gpu_cuda_open(int device, struct ql__gpu_cuda **out)
{
	struct ql__gpu_cuda *c = (struct ql__gpu_cuda *)calloc(1, sizeof(*c));
	int ret;

	if (!c)
		return -ENOMEM;
	c->device = device;
	ret = cuda_err(cudaSetDevice(device), "cudaSetDevice");
	if (!ret)
		ret = cuda_err(cudaSetDeviceFlags(cudaDeviceMapHost), "cudaSetDeviceFlags");
	if (ret == -EIO)
		ret = 0; /* flags already set by an earlier context: fine */
	if (!ret)
		ret = cuda_err(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking),
			       "cudaStreamCreate");
	if (ret) {
		free(c);
		return ret;
	}
	*out = c;
	return 0;
}

extern "C" void ql__gpu_cuda_close(struct ql__gpu_cuda *c)
{
	if (!c)
		return;
	for (int i = 0; i < c->nmaps; i++)
		cudaHostUnregister(c->maps[i]);
	for (int i = 0; i < c->nmapped; i++)
		cudaFreeHost(c->mapped_alloc[i]);
	for (int i = 0; i < c->ndev; i++)
		cudaFree(c->dev_alloc[i]);
	if (c->dbody)
		cudaFree(c->dbody);
	if (c->stream)
		cudaStreamDestroy(c->stream);
	free(c);
}

extern "C" int ql__gpu_cuda_map(struct ql__gpu_cuda *c, void *addr, size_t len, void **dev)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	uintptr_t a = (uintptr_t)addr, lo = a & ~(uintptr_t)(pg - 1);
	uintptr_t hi = (a + len + pg - 1) & ~(uintptr_t)(pg - 1);
	cudaError_t e;
	void *d = NULL;

	e = cudaHostRegister((void *)lo, hi - lo,
			     cudaHostRegisterMapped | cudaHostRegisterPortable);
	if (e != cudaSuccess && e != cudaErrorHostMemoryAlreadyRegistered) {
		/* a ConnectX's doorbell register is device memory (its UAR page,
		 * mapped by the driver): that takes IoMemory */
		cudaGetLastError();
		e = cudaHostRegister((void *)lo, hi - lo,
				     cudaHostRegisterMapped | cudaHostRegisterIoMemory);
	}
	if (e == cudaSuccess) {
		if (c->nmaps < GPU_MAX_MAPS)
			c->maps[c->nmaps++] = (void *)lo;
	} else if (e == cudaErrorHostMemoryAlreadyRegistered) {
		cudaGetLastError(); /* the page is mapped already: fine */
	} else {
		return cuda_err(e, "cudaHostRegister");
	}
	e = cudaHostGetDevicePointer(&d, addr, 0);
	if (e != cudaSuccess)
		return cuda_err(e, "cudaHostGetDevicePointer");
	*dev = d;
	return 0;
}

extern "C" int ql__gpu_cuda_alloc_mapped(struct ql__gpu_cuda *c, size_t len, void **host,
					 void **dev)
{
	void *h = NULL;
	int ret;

	if (c->nmapped == (int)(sizeof(c->mapped_alloc) / sizeof(c->mapped_alloc[0])))
		return -ENOSPC;
	ret = cuda_err(cudaHostAlloc(&h, len, cudaHostAllocMapped | cudaHostAllocPortable),
		       "cudaHostAlloc");
	if (ret)
		return ret;
	c->mapped_alloc[c->nmapped++] = h;
	memset(h, 0, len);
	ret = cuda_err(cudaHostGetDevicePointer(dev, h, 0), "cudaHostGetDevicePointer");
	if (ret)
		return ret;
	*host = h;
	return 0;
}

extern "C" int ql__gpu_cuda_upload(struct ql__gpu_cuda *c, const void *src, size_t len, void **dev)
{
	void *d = NULL;
	int ret;

	if (c->ndev == (int)(sizeof(c->dev_alloc) / sizeof(c->dev_alloc[0]))) {
		/* a restart: the table and scratch of the last run go */
		for (int i = 0; i < c->ndev; i++)
			cudaFree(c->dev_alloc[i]);
		c->ndev = 0;
	}
	ret = cuda_err(cudaMalloc(&d, len), "cudaMalloc");
	if (!ret)
		ret = cuda_err(cudaMemcpy(d, src, len, cudaMemcpyHostToDevice), "cudaMemcpy");
	if (ret) {
		if (d)
			cudaFree(d);
		return ret;
	}
	c->dev_alloc[c->ndev++] = d;
	*dev = d;
	return 0;
}

extern "C" int ql__gpu_cuda_launch(struct ql__gpu_cuda *c, const struct ql_gpu_body *b)
{
	int ret;

	if (!c->dbody) {
		ret = cuda_err(cudaMalloc((void **)&c->dbody, sizeof(*b)), "cudaMalloc");
		if (ret)
			return ret;
	}
	ret = cuda_err(cudaMemcpyAsync(c->dbody, b, sizeof(*b), cudaMemcpyHostToDevice, c->stream),
		       "cudaMemcpyAsync");
	if (ret)
		return ret;
	ql_gpu_persistent_kernel<<<1, 1, 0, c->stream>>>(c->dbody);
	return cuda_err(cudaGetLastError(), "launch");
}

extern "C" int ql__gpu_cuda_wait(struct ql__gpu_cuda *c, uint64_t timeout_ns, struct ql_gpu_body *b)
{
	struct timespec t0, t;
	cudaError_t e;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while ((e = cudaStreamQuery(c->stream)) == cudaErrorNotReady) {
		struct timespec ts = { 0, 100000 };

		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((uint64_t)(t.tv_sec - t0.tv_sec) * 1000000000ull + (uint64_t)t.tv_nsec -
			    (uint64_t)t0.tv_nsec >
		    timeout_ns)
			return ql_error_set(-ETIMEDOUT, "gpu: the kernel did not return");
		nanosleep(&ts, NULL);
	}
	if (e != cudaSuccess)
		return cuda_err(e, "kernel");
	return cuda_err(cudaMemcpy(b, c->dbody, sizeof(*b), cudaMemcpyDeviceToHost), "cudaMemcpy");
}

extern "C" ql_gpu_resolve_fn ql__gpu_builtin_dsym(const char *name)
{
	if (!strcmp(name, "qlink_parity"))
		return QL_GPU__DSYM(qlink_parity);
	if (!strcmp(name, "echo"))
		return QL_GPU__DSYM(ql_gpu_echo);
	return NULL;
}
