/* SPDX-License-Identifier: MIT */
/*
 * The dispatch body (internal), written once as host+device code: nvcc
 * compiles it into the persistent kernel (gpu_cuda.cu), the C compiler
 * into the host emulation (gpu.c), where a thread stands in for the GPU.
 *
 * One turn: look at the ring slot of the request expected next (its
 * sequence word, an acquire load: volatile and fenced at system scope on
 * the GPU, never a cached read); once it shows, copy the message out of the
 * slot (volatile loads) and validate and dispatch the copy, so a QCS that
 * rewrites the slot meanwhile cannot change what was checked; run the
 * handler from the function table; write the response into a response
 * buffer; post it as a SEND on the QP's mlx5 send queue (gpu_tx.h); poll
 * the send CQ. The checks, their order and the statuses are
 * ql_rpc_dispatch's own (rpc/dispatch_core.h, shared with the CPU
 * dispatcher) and the daemon's canary: the QCS is
 * untrusted (docs/design.md "Trust"), nothing it writes is taken on faith.
 *
 * On the hsb transport (hsb.pages set) the turn takes a receive CQE
 * instead of a ring slot: a frame the QCS wrote with WRITE WITH IMMEDIATE
 * into a page, checked, copied and re-posted as the CPU hsb channel does
 * (ql_gpu_hsb_step), then dispatched and answered the same way.
 *
 * No allocation, lock, system call or logging anywhere here.
 */
#ifndef QL_GPU_BODY_H
#define QL_GPU_BODY_H

#include <sched.h>
#include <stdint.h>

#include "qlink/gpu.h"
#include "qlink/gpu_rpc.h"
#include "qlink/mlx5.h"
#include "qlink/ring.h"
#include "qlink/rpc_wire.h"
#include "rpc/dispatch_core.h"

#ifndef QL_GPU_TX_CUSTOM
#include "gpu/gpu_tx.h"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* One function of the device table. */
struct ql_gpu_entry {
	uint32_t id;
	uint32_t typed;
	uint32_t args_size;
	uint32_t results_size;
	ql_gpu_handler_fn fn; /* device address on the GPU, host address emulated */
	void *ctx;
};

/* The words host and body share (mapped memory on a GPU). */
struct ql_gpu_shared {
	uint32_t stop;	  /* host: 1 asks the body to return */
	uint32_t running; /* body: 1 from entry to exit */
	int32_t error;	  /* body: the negative errno it stopped with */
	uint32_t pad;
	struct ql_gpu_stats st; /* body: published counters */
};

/* Bytes past a response's capacity the canary takes (the dispatch core's). */
#define QL_GPU_CANARY QL_RPC__CANARY_BYTES

/* Empty polls between two looks at the stop word (on a GPU a look costs a
 * round trip to host memory). */
#define QL_GPU_STOP_EVERY 64u

/* The hsb transport's side of the body (pages NULL: the ring). The
 * receive queue is the channel QP's (tx.qp.rq). */
struct ql_gpu_hsb {
	uint8_t *pages; /* num_pages x page_size, the region at iova 0 */
	uint32_t num_pages;
	uint32_t page_size;
	uint32_t resp_size;    /* the QCS's receive buffers: no response is larger */
	uint32_t frame_len;    /* DP_BUFFER_LENGTH: every frame's length */
	struct ql_mlx5_cq rcq; /* the receive CQ: one CQE per frame */
};

struct ql_gpu_body {
	uint8_t *ring; /* the ring (header, then slots) */
	uint32_t num_slots;
	uint32_t slot_size;
	uint64_t next;	  /* the request expected next: seq next + 1 */
	uint8_t *scratch; /* slot_size bytes, 8-aligned: the request's copy */
	const struct ql_gpu_entry *fns;
	uint32_t nfns;
	uint32_t idle_yield;   /* emulation: yield the CPU after this many
				empty polls in a row (0: never) */
	uint32_t drop_refused; /* QL_BAD_REQUEST_DROP: no response to a request
				  refused before its handler ran */
	struct ql_gpu_shared *sh;
	struct ql_gpu_tx tx;
	struct ql_gpu_hsb hsb;
	struct ql_gpu_stats st; /* the body's own counts, published to sh */
};

/* ---- memory access ------------------------------------------------------ */

QL_HD static inline uint64_t ql_gpu_load_acquire_u64(const uint8_t *p)
{
#if defined(__CUDA_ARCH__)
	uint64_t v = *(const volatile uint64_t *)p;

	__threadfence_system(); /* nothing after it is read before it */
	return v;
#else
	return __atomic_load_n((const uint64_t *)(const void *)p, __ATOMIC_ACQUIRE);
#endif
}

QL_HD static inline uint32_t ql_gpu_load_u32(const uint32_t *p)
{
	return *(const volatile uint32_t *)p;
}

QL_HD static inline void ql_gpu_store_release_u32(uint32_t *p, uint32_t v)
{
#if defined(__CUDA_ARCH__)
	__threadfence_system();
	*(volatile uint32_t *)p = v;
#else
	__atomic_store_n(p, v, __ATOMIC_RELEASE);
#endif
}

/* Copy n bytes (rounded up to 8) out of a ring slot with volatile 8-byte
 * loads: fresh from memory each time, never a stale cached line. src and
 * dst are 8-aligned (slots are 64-aligned, the message at +16). */
QL_HD static inline void ql_gpu_copy_in(uint8_t *dst, const uint8_t *src, uint32_t n)
{
	const volatile uint64_t *s = (const volatile uint64_t *)(const void *)src;
	uint64_t *d = (uint64_t *)(void *)dst;
	uint32_t w = (n + 7) / 8;

	for (uint32_t i = 0; i < w; i++)
		d[i] = s[i];
}

QL_HD static inline uint64_t ql_gpu_cycles(void)
{
#if defined(__CUDA_ARCH__)
	return (uint64_t)clock64();
#elif defined(__x86_64__) || defined(__i386__)
	return __builtin_ia32_rdtsc();
#elif defined(__aarch64__)
	uint64_t v;

	__asm__ volatile("mrs %0, cntvct_el0" : "=r"(v));
	return v;
#else
	return 0;
#endif
}

#if !defined(__CUDA_ARCH__)
/* The emulation's idle yield (host only; never on the request path). */
static inline void ql_gpu_host_yield(void)
{
	sched_yield();
}
#endif

QL_HD static inline void ql_gpu_relax(void)
{
#if defined(__CUDA_ARCH__)
	/* nothing: one thread, and a nanosleep would add latency */
#elif defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/* ---- the checks and the call ---------------------------------------------- */

struct ql_gpu_result {
	int32_t status;
	uint32_t result_len;
	int kind;    /* enum ql_rpc_err_kind */
	int overrun; /* the handler wrote past its capacity */
	int handled; /* a handler ran */
	uint64_t cycles;
};

QL_HD static inline const struct ql_gpu_entry *ql_gpu_find(const struct ql_gpu_body *b, uint32_t id)
{
	for (uint32_t i = 0; i < b->nfns; i++)
		if (b->fns[i].id == id)
			return &b->fns[i];
	return (const struct ql_gpu_entry *)0;
}

/*
 * msg[0..msg_len) in, the response into resp (capacity resp_cap >= 24,
 * with QL_GPU_CANARY writable bytes after it). The checks, their order and
 * the response header are the dispatch core's (rpc/dispatch_core.h), the
 * very functions ql_rpc_dispatch runs; here the lookup in the device table,
 * the canary always (the daemon's guard), and the handler's cycles.
 */
QL_HD static inline void ql_gpu_dispatch(const struct ql_gpu_body *b, const uint8_t *msg,
					 uint32_t msg_len, uint8_t *resp, uint32_t resp_cap,
					 struct ql_gpu_result *r)
{
	struct ql_rpc_header h = { 0, 0, 0, 0, 0 };
	const struct ql_gpu_entry *e = (const struct ql_gpu_entry *)0;
	enum ql_rpc_err_kind kind;
	struct ql_gpu_in in;
	struct ql_gpu_out out;
	size_t cap = resp_cap - QL_RPC_RESPONSE_SIZE;
	uint64_t t0;
	int32_t ret;

	r->result_len = 0;
	r->overrun = 0;
	r->handled = 0;
	r->cycles = 0;
	r->status = ql_rpc__check_header(msg, msg_len, &h, &kind);
	if (r->status)
		goto respond;
	e = ql_gpu_find(b, h.function_id);
	r->status = ql_rpc__check_call(e != 0, e && e->typed, e ? e->args_size : 0,
				       e ? e->results_size : 0, h.arg_len, &cap, &kind);
	if (r->status)
		goto respond;
	ql_gpu_in_init(&in, msg + QL_RPC_HEADER_SIZE, h.arg_len);
	ql_gpu_out_init(&out, resp + QL_RPC_RESPONSE_SIZE, cap);
	ql_rpc__canary_set(resp + QL_RPC_RESPONSE_SIZE + cap);
	t0 = ql_gpu_cycles();
	ret = e->fn(&in, &out, e->ctx);
	r->cycles = ql_gpu_cycles() - t0;
	r->handled = 1;
	if (!ql_rpc__canary_ok(resp + QL_RPC_RESPONSE_SIZE + cap)) {
		r->overrun = 1;
		r->status = QL_RPC_E_INTERNAL;
		kind = QL_RPC_ERR_INTERNAL;
		goto respond;
	}
	r->status = ql_rpc__check_return(ret, &in, &out, e->typed, e->results_size, &r->result_len,
					 &kind);
respond:
	r->kind = kind;
	ql_rpc__respond(resp, r->status, r->result_len, &h);
}

/* ---- counters ------------------------------------------------------------ */

/* Publish one counter: a plain 64-bit store the host reads relaxed. */
#define QL_GPU_PUB(b, f) (*(volatile uint64_t *)&(b)->sh->st.f = (b)->st.f)

QL_HD static inline void ql_gpu_count(struct ql_gpu_body *b, const struct ql_gpu_result *r)
{
	b->st.requests++;
	QL_GPU_PUB(b, requests);
	if (r->overrun) {
		b->st.err_result_overrun++;
		QL_GPU_PUB(b, err_result_overrun);
	} else {
		switch (r->kind) {
		case QL_RPC_ERR_NONE:
			b->st.ok++;
			QL_GPU_PUB(b, ok);
			break;
		case QL_RPC_ERR_HANDLER:
			b->st.handler_error++;
			QL_GPU_PUB(b, handler_error);
			break;
		case QL_RPC_ERR_SHORT:
			b->st.err_short++;
			QL_GPU_PUB(b, err_short);
			break;
		case QL_RPC_ERR_BAD_MAGIC:
			b->st.err_bad_magic++;
			QL_GPU_PUB(b, err_bad_magic);
			break;
		case QL_RPC_ERR_BAD_LENGTH:
			b->st.err_bad_length++;
			QL_GPU_PUB(b, err_bad_length);
			break;
		case QL_RPC_ERR_UNKNOWN_FUNCTION:
			b->st.err_unknown_function++;
			QL_GPU_PUB(b, err_unknown_function);
			break;
		case QL_RPC_ERR_ARGS_MISMATCH:
			b->st.err_args++;
			QL_GPU_PUB(b, err_args);
			break;
		case QL_RPC_ERR_RESULT_OVERFLOW:
			b->st.err_result_overflow++;
			QL_GPU_PUB(b, err_result_overflow);
			break;
		default:
			b->st.err_internal++;
			QL_GPU_PUB(b, err_internal);
			break;
		}
	}
	if (r->handled) {
		b->st.handled++;
		b->st.handler_cycles_sum += r->cycles;
		if (r->cycles > b->st.handler_cycles_max) {
			b->st.handler_cycles_max = r->cycles;
			QL_GPU_PUB(b, handler_cycles_max);
		}
		QL_GPU_PUB(b, handler_cycles_sum);
		QL_GPU_PUB(b, handled);
	}
}

QL_HD static inline void ql_gpu_count_tx(struct ql_gpu_body *b)
{
	b->st.posted = b->tx.posted;
	b->st.completed = b->tx.done - b->tx.failed;
	b->st.send_errors = b->tx.failed;
	QL_GPU_PUB(b, posted);
	QL_GPU_PUB(b, completed);
	QL_GPU_PUB(b, send_errors);
}

/* QL_BAD_REQUEST_DROP leaves these unanswered, as the daemon does
 * (daemon.c's refused(): a handler's own error status is always answered). */
QL_HD static inline int ql_gpu_drop(const struct ql_gpu_body *b, const struct ql_gpu_result *r)
{
	if (!b->drop_refused)
		return 0;
	return r->kind == QL_RPC_ERR_SHORT || r->kind == QL_RPC_ERR_BAD_MAGIC ||
	       r->kind == QL_RPC_ERR_BAD_LENGTH || r->kind == QL_RPC_ERR_UNKNOWN_FUNCTION ||
	       r->kind == QL_RPC_ERR_ARGS_MISMATCH;
}

QL_HD static inline void ql_gpu_count_drop(struct ql_gpu_body *b)
{
	b->st.dropped++;
	QL_GPU_PUB(b, dropped);
}

/* ---- one turn, and the loop ---------------------------------------------- */

/*
 * Serve the request expected next if it arrived. 1: served, 0: nothing
 * (yet), or the negative errno the body must stop with (-EIO: the send
 * queue or its CQ failed, or a SEND completed in error: the RC QP is then
 * in error and nothing more can be answered).
 */
QL_HD static inline int ql_gpu_ring_step(struct ql_gpu_body *b)
{
	const uint32_t cap = b->slot_size - QL_RING_SLOT_HDR;
	uint64_t k = b->next;
	const uint8_t *slot =
		b->ring + QL_RING_HDR_SIZE + (k & (b->num_slots - 1)) * (uint64_t)b->slot_size;
	struct ql_gpu_result r;
	uint8_t *resp;
	uint32_t len;
	int n;

	if (ql_gpu_load_acquire_u64(slot) != k + 1) {
		/* idle: give the send buffers back */
		if (b->tx.posted != b->tx.done) {
			n = ql_gpu_tx_reap(&b->tx);
			if (n < 0)
				return n;
			if (n)
				ql_gpu_count_tx(b);
			if (b->tx.failed)
				return -EIO;
		}
		return 0;
	}
	resp = ql_gpu_tx_next(&b->tx);
	if (!resp) {
		/* every response buffer in flight: take the completions; none
		 * yet, and the request waits in its slot */
		n = ql_gpu_tx_reap(&b->tx);
		if (n < 0)
			return n;
		ql_gpu_count_tx(b);
		if (b->tx.failed)
			return -EIO;
		resp = ql_gpu_tx_next(&b->tx);
		if (!resp)
			return 0;
	}
	len = *(const volatile uint32_t *)(const void *)(slot + 8);
	if (len > cap) {
		/* the client's error: answered BAD_LENGTH, as the CPU ring does
		 * (the copy's arg_len made larger than any slot) */
		ql_gpu_copy_in(b->scratch, slot + QL_RING_SLOT_HDR, cap);
		if (cap >= 12)
			ql_gpu_put_u32(b->scratch + 8, 0xffffffffu);
		len = cap;
	} else {
		ql_gpu_copy_in(b->scratch, slot + QL_RING_SLOT_HDR, len);
	}
	ql_gpu_dispatch(b, b->scratch, len, resp, b->slot_size, &r);
	ql_gpu_count(b, &r);
	if (ql_gpu_drop(b, &r)) {
		ql_gpu_count_drop(b);
		b->next = k + 1;
		return 1;
	}
	if (ql_gpu_tx_post(&b->tx, QL_RPC_RESPONSE_SIZE + r.result_len))
		return -EIO;
	ql_gpu_count_tx(b);
	b->next = k + 1;
	return 1;
}

/* ---- the hsb transport ----------------------------------------------------- */

/* (Not with a custom send side, tests/test_gpu_body.c's: the hsb turn
 * drives the QP's mlx5 receive queue, which only gpu_tx.h's side has.) */
#ifndef QL_GPU_TX_CUSTOM

/* Give the receive queue its WQE back: no scatter list (a WRITE WITH
 * IMMEDIATE places nothing through it, the page is the immediate's).
 * -EIO if the queue refused it (it holds one per page: a bug). */
QL_HD static inline int ql_gpu_hsb_repost(struct ql_gpu_body *b)
{
	return ql_mlx5_rq_post(&b->tx.qp, (const struct ql_mlx5_sge *)0, 0) ? -EIO : 0;
}

/* Take the send completions while idle or out of response buffers, as the
 * ring's turn does. 0, or the errno to stop with. */
QL_HD static inline int ql_gpu_tx_idle(struct ql_gpu_body *b)
{
	int n;

	if (b->tx.posted == b->tx.done)
		return 0;
	n = ql_gpu_tx_reap(&b->tx);
	if (n < 0)
		return n;
	if (n)
		ql_gpu_count_tx(b);
	return b->tx.failed ? -EIO : 0;
}

/*
 * One frame, as the CPU hsb channel takes it (hsb_channel.c) and the daemon
 * answers it: the receive CQE is the board's metadata write (or a QCS's
 * frame written with its immediate); page = imm & 0xFFF (the upper 20 bits
 * are the PSN), the QCS's word: checked against num_pages; the CQE's byte
 * count is checked against page_size but the frame is frame_len bytes,
 * what the board was told to write. A refused frame or a receive error
 * costs the QCS that frame (counted by reason, its WQE re-posted, nothing
 * answered); a receive flushed means the QP failed (-ECONNRESET). A good
 * frame is copied out of its page (volatile loads: a QCS rewriting the
 * page cannot change what was checked), its WQE re-posted at once (the page
 * is free once copied, so a page can never be busy), dispatched with the
 * response capped at resp_size, and answered by a SEND. 1: a frame was
 * taken, 0: none.
 */
QL_HD static inline int ql_gpu_hsb_step(struct ql_gpu_body *b)
{
	struct ql_gpu_hsb *h = &b->hsb;
	struct ql_mlx5_cqe_info ci;
	struct ql_gpu_result r;
	uint8_t *resp;
	uint32_t page, len;
	int n;

	/* a response buffer first: without one the frame waits in its CQE */
	resp = ql_gpu_tx_next(&b->tx);
	if (!resp) {
		n = ql_gpu_tx_idle(b);
		if (n < 0)
			return n;
		resp = ql_gpu_tx_next(&b->tx);
		if (!resp)
			return 0;
	}
	n = ql_mlx5_cq_poll(&h->rcq, &ci);
	if (n < 0)
		return -EIO;
	if (n == 0)
		return ql_gpu_tx_idle(b);
	ql_mlx5_rq_complete(&b->tx.qp);
	if (ci.opcode == QL_MLX5_CQE_RESP_ERR) {
		b->st.hsb_recv_errors++;
		QL_GPU_PUB(b, hsb_recv_errors);
		if (ci.syndrome == QL_MLX5_CQE_SYNDROME_WR_FLUSH_ERR)
			return -ECONNRESET;
		return ql_gpu_hsb_repost(b) ? -EIO : 1;
	}
	if (ci.opcode != QL_MLX5_CQE_RESP_WR_IMM) {
		b->st.hsb_not_imm++;
		QL_GPU_PUB(b, hsb_not_imm);
		return ql_gpu_hsb_repost(b) ? -EIO : 1;
	}
	/* host order (ql_mlx5_cq_poll read it big-endian); the PSN above */
	page = ci.imm & QL_HSB_IMM_PAGE_MASK;
	if (page >= h->num_pages) {
		b->st.hsb_bad_imm++;
		QL_GPU_PUB(b, hsb_bad_imm);
		return ql_gpu_hsb_repost(b) ? -EIO : 1;
	}
	if (ci.byte_cnt > h->page_size) {
		b->st.hsb_bad_len++;
		QL_GPU_PUB(b, hsb_bad_len);
		return ql_gpu_hsb_repost(b) ? -EIO : 1;
	}
	len = h->frame_len;
	/* page_size is a multiple of 128: the 8-byte rounding stays in it */
	ql_gpu_copy_in(b->scratch, h->pages + (uint64_t)page * h->page_size, len);
	if (ql_gpu_hsb_repost(b))
		return -EIO;
	ql_gpu_dispatch(b, b->scratch, len, resp, h->resp_size, &r);
	ql_gpu_count(b, &r);
	b->next++;
	if (ql_gpu_drop(b, &r)) {
		ql_gpu_count_drop(b);
		return 1;
	}
	if (ql_gpu_tx_post(&b->tx, QL_RPC_RESPONSE_SIZE + r.result_len))
		return -EIO;
	ql_gpu_count_tx(b);
	return 1;
}

#endif /* !QL_GPU_TX_CUSTOM */

/* One turn of whichever transport the body serves. */
QL_HD static inline int ql_gpu_body_step(struct ql_gpu_body *b)
{
#ifndef QL_GPU_TX_CUSTOM
	if (b->hsb.pages)
		return ql_gpu_hsb_step(b);
#endif
	return ql_gpu_ring_step(b);
}

/* After an empty step (*idle of them in a row, this one counted): the
 * polls published every QL_GPU_STOP_EVERY, and then whether the host set
 * the stop word. */
QL_HD static inline bool ql_gpu_body_idle(struct ql_gpu_body *b, uint32_t *idle)
{
	if (++*idle % QL_GPU_STOP_EVERY)
		return false;
	b->st.polls += QL_GPU_STOP_EVERY;
	QL_GPU_PUB(b, polls);
	return ql_gpu_load_u32(&b->sh->stop) != 0;
}

/* The body's end (ret: 0 stopped, < 0 failed): take the completions still
 * due (bounded: the peer may be gone) and say so in the shared words. */
QL_HD static inline void ql_gpu_body_finish(struct ql_gpu_body *b, int ret)
{
	if (ret >= 0) {
		for (uint32_t i = 0; i < (1u << 20) && b->tx.posted != b->tx.done; i++)
			if (ql_gpu_tx_reap(&b->tx) < 0)
				break;
		ret = 0;
	}
	ql_gpu_count_tx(b);
	b->sh->error = ret;
	ql_gpu_store_release_u32(&b->sh->running, 0);
}

/* Serve until the host sets the stop word (or the body fails); then
 * finish. */
QL_HD static inline void ql_gpu_body_run(struct ql_gpu_body *b)
{
	uint32_t idle = 0;
	int ret = 0;

	ql_gpu_store_release_u32(&b->sh->running, 1);
	for (;;) {
		ret = ql_gpu_body_step(b);
		if (ret < 0)
			break;
		if (ret > 0) {
			idle = 0;
			continue;
		}
		if (ql_gpu_body_idle(b, &idle))
			break;
#if !defined(__CUDA_ARCH__)
		if (b->idle_yield && idle >= b->idle_yield) {
			idle = 0;
			ql_gpu_host_yield();
			continue;
		}
#endif
		ql_gpu_relax();
	}
	ql_gpu_body_finish(b, ret);
}

#ifdef __cplusplus
}
#endif
#endif
