/* SPDX-License-Identifier: MIT */
/*
 * gpu: the GPU dispatcher, seed 000's GPU mode. A persistent kernel polls
 * the request ring (ring.h) in device-visible memory, validates each
 * request as the CPU daemon does, runs its handler from a device function
 * table (gpu_rpc.h), writes the response and posts its SEND itself, as an
 * mlx5 work request on the channel QP's send queue (qlink/mlx5.h), polls
 * the send CQ and moves on: no CPU on the request path. Same wire and
 * statuses as the CPU daemon, so an unmodified QCS client talks to it.
 *
 * The kernel body is written once as host+device code; without a GPU (or
 * by choice) a host thread runs the very same body, the "emulation", and
 * the NIC (the soft NIC's mlx5 engine, or a ConnectX) serves its work
 * requests all the same. docs/gpu.md describes both.
 *
 * The dispatcher owns its channel: a ring registered REMOTE_WRITE, an RC QP
 * driven through its mlx5 queues (QL_QP_INIT_MLX5) and its send CQ
 * (QL_CQ_INIT_MLX5), and the response buffers; or, on the hsb transport
 * (hsb.h), pages registered at iova 0 and a UC QP whose receive queue and
 * receive CQ the body drives through qlink/mlx5.h too. The host starts and stops
 * the kernel (a stop word in mapped memory) and reads its counters while
 * it runs. Setup allocates; the dispatch loop never allocates, locks,
 * logs or enters the kernel.
 */
#ifndef QLINK_GPU_H
#define QLINK_GPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qlink/gpu_rpc.h"
#include "qlink/hsb.h"
#include "qlink/verbs.h"

#ifdef __cplusplus
extern "C" {
#endif

struct ql_gpu_dispatcher;

/* Who runs the dispatch body. */
enum ql_gpu_mode {
	QL_GPU_MODE_AUTO = 0, /* the GPU when one is usable, else the emulation */
	QL_GPU_MODE_DEVICE,   /* the GPU, or -ENODEV (with the reason) */
	QL_GPU_MODE_EMULATE,  /* a host thread runs the body */
};

/* Who runs the emulated body (docs/progress.md); a GPU runs its own. */
enum ql_gpu_progress {
	QL_GPU_PROGRESS_AUTO = 0, /* QLINK_PROGRESS if set, else caller when the
				     process has fewer free cores than
				     spinning threads */
	QL_GPU_PROGRESS_THREAD,	  /* a host thread of its own (cpu below) */
	QL_GPU_PROGRESS_CALLER,	  /* ql_gpu_dispatcher_progress, in the caller's
				     loop (qlinkd: its dispatcher's) */
};

/* How requests reach the dispatch body. */
enum ql_gpu_transport {
	QL_GPU_TRANSPORT_RING = 0, /* the request ring (ring.h), an RC QP */
	QL_GPU_TRANSPORT_HSB,	   /* hsb (hsb.h): WRITE WITH IMMEDIATE into pages, UC QP */
};

struct ql_gpu_config {
	enum ql_gpu_mode mode;
	uint32_t num_slots;	/* ring geometry: power of two, 1..65536 (0: 64) */
	uint32_t slot_size;	/* multiple of 64, 64..65536 (0: 256) */
	uint32_t max_functions; /* device function table (0: 64, at most 1024) */
	int cuda_device;	/* GPU ordinal (QL_GPU_MODE_DEVICE / AUTO) */
	int cpu;		/* emulation: pin the thread to this core; -1: unpinned */
	enum ql_gpu_transport transport;
	/* enum ql_bad_request_policy (qlink/daemon.h), as the daemon's:
	 * 0 (ANSWER) answers a request refused before its handler ran with
	 * the error status; 1 (DROP) sends nothing (counted in dropped), as
	 * CUDA-Q Realtime does and as qlinkd serves hsb. */
	int bad_requests;
	/* QL_GPU_TRANSPORT_HSB: the page geometry and the QCS's receive
	 * buffer size as the CPU hsb channel takes them (0s: its defaults);
	 * tx_buffers: response buffers (0: num_pages, rounded down to a power
	 * of two); signal_every is ignored (every SEND is signaled). The
	 * ring geometry above is then unused. */
	struct ql_hsb_channel_config hsb;
	/* The ring (hsb: the pages) and the response buffers: QL_MEM_HOST
	 * (0, default: host memory the kernel reaches mapped, across PCIe)
	 * or QL_MEM_GPU (ql_pd_mem_alloc_attr on cuda_device: device memory
	 * the NIC writes and the kernel polls locally, on ibv; on the soft
	 * NICs host memory mapped into the GPU). Device memory needs the
	 * kernel (the emulation: -EOPNOTSUPP); no CUDA driver: -ENODEV. */
	enum ql_mem_kind memory;
	/* the emulation: a thread of its own, or the caller's loop; with
	 * AUTO and CALLER the program must call ql_gpu_dispatcher_progress
	 * (or ql_gpu_dispatcher_serve_until) while it serves */
	enum ql_gpu_progress progress;
};

/* Counters, written by the dispatch body into mapped memory and readable
 * from the host at any time (each a relaxed 64-bit load). Every request
 * taken from the ring ends in exactly one of ok, handler_error or err_*;
 * every response is posted as a SEND and completes (completed) or fails
 * (send_errors). */
struct ql_gpu_stats {
	uint64_t requests;
	uint64_t ok;
	uint64_t handler_error; /* positive status from the handler */
	uint64_t err_short;
	uint64_t err_bad_magic;
	uint64_t err_bad_length;
	uint64_t err_unknown_function;
	uint64_t err_args;
	uint64_t err_result_overflow;
	uint64_t err_internal;	     /* negative return, broken streams */
	uint64_t err_result_overrun; /* wrote past its results (canary) */
	uint64_t posted;	     /* SENDs posted on the send queue */
	uint64_t completed;	     /* SENDs completed with success */
	uint64_t send_errors;	     /* SEND completions with an error */
	uint64_t handled;	     /* handler calls (cycles below are theirs) */
	uint64_t handler_cycles_sum; /* GPU: clock64() cycles; emulation: TSC */
	uint64_t handler_cycles_max;
	uint64_t polls; /* empty polls of the ring (liveness) */
	/* hsb: frames dropped unanswered, as the CPU hsb channel drops them
	 * (its struct ql_hsb_channel_stats; requests counts the frames taken) */
	uint64_t hsb_bad_imm;	  /* page (imm & 0xFFF) >= num_pages */
	uint64_t hsb_bad_len;	  /* the immediate write's byte count > page_size */
	uint64_t hsb_recv_errors; /* receive completions in error */
	uint64_t dropped;	  /* refused requests not answered (bad_requests DROP) */
	uint64_t hsb_not_imm;	  /* a completion without an immediate (a SEND) */
};

/* 1 when this build can run the kernel on a GPU now (CUDA compiled in and a
 * device present), else 0 with the reason in why (may be NULL). */
int ql_gpu_available(char *why, size_t why_len);

/* Create the dispatcher and its channel on dev (soft://, soft+shm:// or an
 * ibv:// mlx5 device: the provider must give the QP's mlx5 queues, else
 * -EOPNOTSUPP). Nothing runs until ql_gpu_dispatcher_start. */
int ql_gpu_dispatcher_create(struct ql_device *dev, const struct ql_gpu_config *cfg,
			     struct ql_gpu_dispatcher **d);
void ql_gpu_dispatcher_destroy(struct ql_gpu_dispatcher *d);

/* Register a handler (copied; before start). -EINVAL for a NULL name or fn,
 * a device run with no device address (dev_resolve NULL: not compiled by
 * nvcc), -EEXIST for a known id or name, -ENOSPC when the table is full,
 * -EBUSY while running. */
int ql_gpu_dispatcher_register(struct ql_gpu_dispatcher *d, const struct ql_gpu_function *f);

/* The parameters the QCS needs (QP, GID, ring vaddr/rkey/length/geometry),
 * and the connection to it (RESET -> RTS), as ql_verbs_channel_*. With
 * QL_GPU_TRANSPORT_HSB: local_params gives the hsb parameters as
 * ql_hsb_params_to_conn does, and connect connects the UC QP as
 * ql_hsb_channel_connect (PSN 0, REMOTE_WRITE only) and posts a receive
 * WQE per page. */
int ql_gpu_dispatcher_local_params(struct ql_gpu_dispatcher *d, struct ql_conn_params *p);
int ql_gpu_dispatcher_connect(struct ql_gpu_dispatcher *d, const struct ql_conn_params *client,
			      const struct ql_qp_connect_opts *opts);
/* QL_GPU_TRANSPORT_HSB: what the QCS is programmed with (as
 * ql_hsb_channel_local_params); -EINVAL for a ring dispatcher. */
int ql_gpu_dispatcher_hsb_params(struct ql_gpu_dispatcher *d, struct ql_hsb_params *p);

/* Launch the persistent kernel (or the emulation thread). -EBUSY if it
 * runs, -ENOTCONN before connect. */
int ql_gpu_dispatcher_start(struct ql_gpu_dispatcher *d);
/* Ask it to stop (the stop word) and wait for it (at most 5 s, then
 * -ETIMEDOUT). 0 if it was not running. */
int ql_gpu_dispatcher_stop(struct ql_gpu_dispatcher *d);
bool ql_gpu_dispatcher_is_running(const struct ql_gpu_dispatcher *d);
/* Whether the emulated body runs in ql_gpu_dispatcher_progress (caller
 * progress, decided at start; false before it and for a GPU). */
bool ql_gpu_dispatcher_caller(const struct ql_gpu_dispatcher *d);
/* Caller progress: a bounded turn of the started body in the calling
 * thread (up to 32 steps, while there is work), with the dispatch loop's
 * rules (no allocation, lock, system call or log). Otherwise the device's
 * progress (ql_device_progress: a GPU or a body thread driving a
 * caller-progress soft NIC needs someone to run it). > 0 work done, 0
 * none, < 0 the body failed (as ql_gpu_dispatcher_error; it no longer
 * runs). Not concurrently with itself, start or stop. */
int ql_gpu_dispatcher_progress(struct ql_gpu_dispatcher *d);
/* Serve until fd is readable (a control pipe or socket): caller progress
 * runs the body meanwhile and looks at fd (poll(2), no wait) after idle
 * turns only; otherwise this waits in poll(2). 1 when fd is readable,
 * a negative errno when the body failed or poll did. */
int ql_gpu_dispatcher_serve_until(struct ql_gpu_dispatcher *d, int fd);
/* QL_GPU_MODE_DEVICE or QL_GPU_MODE_EMULATE: what runs (or will run). */
enum ql_gpu_mode ql_gpu_dispatcher_mode(const struct ql_gpu_dispatcher *d);
int ql_gpu_dispatcher_stats(const struct ql_gpu_dispatcher *d, struct ql_gpu_stats *st);
/* 0 while healthy, else the negative errno the body stopped with (-EIO: a
 * SEND or the QP failed). */
int ql_gpu_dispatcher_error(const struct ql_gpu_dispatcher *d);

/* "auto", "device", "emulate"; and back (-EINVAL for another name). */
const char *ql_gpu_mode_str(enum ql_gpu_mode m);
int ql_gpu_mode_parse(const char *s, enum ql_gpu_mode *m);

/* The built-in handlers, compiled for host and device: "qlink_parity"
 * (the demo function: 256 bit-packed events in, u8 parity and i32 weight
 * out) and "echo" (raw: its arguments back). NULL for another name. */
const struct ql_gpu_function *ql_gpu_builtin_function(const char *name);

#ifdef __cplusplus
}
#endif
#endif
