/* SPDX-License-Identifier: MIT */
/*
 * soft: the software RDMA NIC (provider internals, hidden from users).
 *
 * Model: the requester's own post and poll calls play the NIC (for QPs in the
 * mlx5 queue mode, the device's engine thread does: mlx5_engine.c). Every object a
 * peer must reach (the MR table, QP state, receive queues) lives in a shared
 * per-process heap (a memfd); a peer in another process maps that heap once,
 * when its QP is connected, and from then on executes WRITE, READ, atomics
 * and SEND straight into the target's memory with no target CPU involved.
 * The target sees a receive completion in its receive queue slot, polled by
 * its CQ. Same-process peers (soft://loop, or two soft+shm devices in one
 * process) use the same code with a zero address offset.
 *
 * Concurrency rules (see docs/soft-provider.md):
 *  - each side writes only its own cache lines, except the receive-queue
 *    head (claimed by CAS) and a receive slot's completion part (written by
 *    the requester that claimed the slot);
 *  - the liveness of a peer process is a robust futex word, which the
 *    kernel marks FUTEX_OWNER_DIED when the owner dies: no syscall to check;
 *  - an op epoch (odd while a requester is inside an operation) plus
 *    membarrier() on the slow path lets a target free queue memory only
 *    after in-flight requesters have left it.
 */
#ifndef QL_SOFT_H
#define QL_SOFT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "providers/common/nic.h"
#include "verbs/provider.h"

#define SOFT_HIDDEN __attribute__((visibility("hidden")))
#define soft_likely(x) __builtin_expect(!!(x), 1)
#define soft_unlikely(x) __builtin_expect(!!(x), 0)
/* One load of a value that another process may be rewriting: read it once,
 * into a local, and validate the local (never the memory again). */
#define SOFT_PEEK(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define SOFT_CACHELINE 64

/* Device limits. Index bits of keys and QP numbers follow from them. */
#define SOFT_QP_IDX_BITS 10
#define SOFT_MAX_QP (1u << SOFT_QP_IDX_BITS)
#define SOFT_MR_IDX_BITS 12
#define SOFT_MAX_MR (1u << SOFT_MR_IDX_BITS)
#define SOFT_MAX_QP_WR 16384
#define SOFT_MAX_SGE 16
#define SOFT_MAX_CQE (1 << 20)
#define SOFT_MAX_INLINE 256
#define SOFT_MAX_MSG (1u << 31)
#define SOFT_MAX_RD_ATOMIC 16
#define SOFT_MAX_DEVS_PER_HEAP 64

#define SOFT_WIRE_LOOP 1
#define SOFT_WIRE_SHM 2

/* GID layout: fd71:WWVV:PPPP:PPPP:FFFF:FFFF:DDDD:DDDD (wire, format version,
 * pid, heap fd, device id), an IPv6 unique-local address. */
#define SOFT_GID_PREFIX0 0xfd
#define SOFT_GID_PREFIX1 0x71
#define SOFT_GID_VERSION 1

/* ---- shared memory layout (lives in a heap, seen by peers) ---------- */

struct soft_heap_hdr {
	uint64_t magic;
	uint32_t version;
	uint32_t pid;
	uint64_t size;
	uint64_t base;	 /* the owner's mapping address: remote vaddr -> offset */
	int32_t live_fd; /* the process's liveness page (struct soft_live) */
	uint32_t pad;
	_Atomic uint32_t dev_id[SOFT_MAX_DEVS_PER_HEAP];
	uint64_t dev_off[SOFT_MAX_DEVS_PER_HEAP];
};

/* One page per process whose robust, process-shared mutex is held by the
 * process's main thread (taken in a library constructor, or right after
 * fork in the child): its lock word is the liveness flag peers read. */
struct soft_live {
	uint64_t magic;
	uint32_t pid;
	uint32_t pad;
	pthread_mutex_t alive;
};

struct soft_mr_entry {
	_Atomic uint32_t rkey; /* 0 = free; written last on register, first on deregister */
	_Atomic uint32_t lkey;
	uint32_t access;
	uint32_t pd_id;
	uint64_t addr;
	uint64_t length;
	uint32_t in_heap; /* reachable from other processes */
	/* 0: host memory; CUDA device ordinal + 1: GPU device memory, moved
	 * by the copy engine (providers/common/devmem.h). Honoured only in
	 * this process's private table: another process's device memory is
	 * never reachable, whatever its heap entry says. */
	uint32_t cuda;
	uint64_t iova; /* what remote addresses are relative to (addr, or the
			  ql_mr_reg_iova address) */
};

struct soft_rq_slot {
	/* written by the owner when posting (the wr_id stays private, in
	 * struct soft_rq_priv: nothing the peer can write reaches a wc) */
	uint64_t unused;
	uint32_t num_sge;
	/* written by whoever completes the slot, before `done` */
	uint32_t status;
	uint32_t opcode;
	uint32_t byte_len;
	uint32_t imm; /* network byte order, as in ibv_wc */
	uint32_t wc_flags;
	uint32_t src_qp;
	uint32_t pad;
	_Atomic uint64_t done; /* slot index + 1 once the completion is valid */
	struct ibv_sge sge[];
};

struct soft_qp_shared {
	/* Line 0: written by the owner at modify time only (read-mostly). */
	_Atomic uint32_t qpn; /* 0 = free */
	_Atomic uint32_t state;
	uint64_t dest_tag; /* soft_conn_tag() of the QP this one is connected to */
	uint32_t type;
	uint32_t pd_id;
	uint32_t dest_qpn;
	uint32_t access; /* qp_access_flags */
	uint32_t min_rnr_timer;
	uint32_t rq_mask;
	uint32_t rq_slot_size;
	uint32_t max_recv_sge;
	uint64_t rq_off; /* heap offset of the receive slots */
	/* Line 1: receive-queue head, claimed by the peer requester (CAS). */
	_Atomic uint64_t rq_head __attribute__((aligned(SOFT_CACHELINE)));
	/* Line 2: receive-queue tail, written by the owner. */
	_Atomic uint64_t rq_tail __attribute__((aligned(SOFT_CACHELINE)));
	/* Line 3: odd while this QP, as requester, is inside an operation on
	 * its peer's memory. */
	_Atomic uint64_t op_epoch __attribute__((aligned(SOFT_CACHELINE)));
	/* Line 4: cold. */
	uint8_t dest_gid[16] __attribute__((aligned(SOFT_CACHELINE)));
	/* mlx5 queue mode: heap offset of the receive doorbell record word,
	 * which the QP's application rings before its engine has taken the
	 * receive into this queue (0: not in that mode). A requester that
	 * finds no receive waits a bounded while for one rung (exec.c). */
	uint64_t mx_rq_db_off;
} __attribute__((aligned(SOFT_CACHELINE)));

/* What a responder's dest_tag must equal for a requester to pass: the
 * requester's device id, the low byte of its pid, and its QP number. The
 * full GID check stays on the slow path. */
static inline uint64_t soft_conn_tag(uint32_t dev_id, uint32_t pid, uint32_t qpn)
{
	return ((uint64_t)dev_id << 32) | ((uint64_t)(pid & 0xff) << 24) | (qpn & 0xffffff);
}

struct soft_dev_counters {
	_Atomic uint64_t uc_drop_access;
	_Atomic uint64_t uc_drop_no_recv;
	_Atomic uint64_t uc_drop_not_ready;
	_Atomic uint64_t rc_nak_access;
	_Atomic uint64_t rc_nak_rnr;
	_Atomic uint64_t rc_nak_inv_req;
	_Atomic uint64_t rc_nak_op_err;
};

struct soft_dev_shared {
	uint64_t magic;
	uint32_t id;
	uint32_t wire;
	_Atomic uint32_t open;
	char name[QL_DEVICE_NAME_MAX];
	struct soft_dev_counters counters __attribute__((aligned(SOFT_CACHELINE)));
	struct soft_mr_entry mr[SOFT_MAX_MR] __attribute__((aligned(SOFT_CACHELINE)));
	struct soft_qp_shared qp[SOFT_MAX_QP];
};

/* ---- process-private objects ---------------------------------------- */

/* The process's own heap. */
struct soft_heap {
	int fd;
	uint8_t *base;
	size_t size;
	pid_t pid;
	struct soft_heap_hdr *hdr;
};

/* A peer process's heap mapped into this one (refcounted, shared by all
 * QPs talking to that process). */
struct soft_peer_heap {
	struct soft_peer_heap *next;
	int refs;
	bool self;
	pid_t pid;
	int fd_num;
	uint8_t *map;
	size_t size;
	void *live_map;
	intptr_t delta; /* local address = peer address + delta */
	uint64_t lo;	/* the peer's address of map[0] (map - delta) */
	uint64_t span;	/* bytes a peer address may reach from lo (self: all) */
	const _Atomic int *alive_word;
};

struct soft_device;
struct soft_cq;
struct soft_mlx5_qp;
struct soft_mlx5_cq;
struct soft_engine;

/* A send WR that could not execute at once (RNR, peer not ready, SQD). */
struct soft_swqe {
	struct ibv_send_wr wr;
	uint64_t idx;
};

struct soft_qp {
	struct ql_qp base;
	struct soft_device *dev;
	struct soft_qp_shared *sh;
	struct soft_cq *send_cq;
	struct soft_cq *recv_cq;
	uint32_t idx;
	uint32_t pd_id;
	enum ibv_qp_type type;
	int sq_sig_all;
	void *qp_context;
	struct ibv_qp_cap cap;
	struct ibv_qp_attr attr; /* last values set through modify */
	enum ibv_qp_state state; /* private copy of sh->state */

	/* send queue: posted [retired, pi), executed [retired, exec) */
	uint64_t sq_pi;
	uint64_t sq_exec;
	uint64_t sq_retired;
	uint32_t sq_mask;
	struct soft_swqe *sq;
	struct ibv_sge *sq_sge;
	uint8_t *sq_inline;
	bool pending_listed;

	/* stall of the WR at sq_exec */
	bool stalled;
	uint8_t rnr_left;
	uint8_t retry_left;
	uint64_t stall_until_ns;

	/* receive queue (slots in the shared heap). The geometry, the tail
	 * and what each slot was posted with are kept here too: the heap
	 * copies are for the peer, and a peer can rewrite them. */
	uint8_t *rq;
	uint64_t rq_ci; /* next slot to report as a completion */
	uint64_t rq_pi; /* next slot to post (private copy of rq_tail) */
	uint32_t rq_slots;
	uint32_t rq_mask; /* rq_slots - 1 */
	uint32_t rq_slot_size;
	struct soft_rq_priv *rq_priv; /* [rq_slots] */

	/* the connected peer */
	struct soft_peer_heap *peer_heap;
	struct soft_dev_shared *peer_dev;
	struct soft_qp_shared *peer_qp;
	/* The peer's MR table: its shared table (another process: checked
	 * against the mapping below), or this process's private copy of it
	 * (a device of this process). */
	const struct soft_mr_entry *peer_mr;
	intptr_t peer_delta;
	uint64_t peer_lo;   /* a peer address must lie in [lo, lo + span) */
	uint64_t peer_span; /* of the mapping (self: unbounded, MRs are private) */
	bool peer_self;
	/* The peer QP's receive queue as validated when connecting (NULL:
	 * unusable), never re-read from the peer's memory. */
	uint8_t *peer_rq;
	uint32_t peer_rq_mask;
	uint32_t peer_rq_slot_size;
	uint32_t peer_rq_max_sge;
	/* the peer's mlx5 receive doorbell record (mx_rq_db_off, checked
	 * against the mapping when connecting), NULL if none */
	const uint32_t *peer_mx_db;
	uint32_t dest_qpn;
	uint64_t my_tag; /* soft_conn_tag() of this QP */
	uint8_t my_gid[16];
	uint8_t peer_gid[16];
	bool need_err; /* a completion could not be queued: enter ERR */
	/* mlx5 queue mode (QL_QP_INIT_MLX5, mlx5_engine.c): the mlx5-format
	 * queues the device's engine thread consumes; NULL otherwise */
	struct soft_mlx5_qp *mx;
	bool atomic_be; /* mlx5 mode: atomics return the old value big-endian */
};

/* What the owner posted in a receive slot (private: the completion's
 * wr_id and the byte_len bound come from here, not from the slot). */
struct soft_rq_priv {
	uint64_t wr_id;
	uint64_t len;
};

struct soft_cqe {
	struct ibv_wc wc;
	struct soft_qp *qp; /* send completions: retire the send queue on poll */
	uint64_t sq_idx;
};

struct soft_cq {
	struct ql_cq base;
	struct soft_device *dev;
	int depth;
	uint32_t mask;
	uint64_t head;
	uint64_t tail;
	struct soft_cqe *ring;
	int err;
	uint32_t nrefs;
	/* QPs that use this CQ for receives (polled for slot completions) and
	 * for sends with work still pending (progressed on poll) */
	struct soft_qp **rq_qps;
	uint32_t n_rq_qps;
	struct soft_qp **pending;
	uint32_t n_pending;
	uint32_t cap_qps;
	uint32_t live_rr;
	/* mlx5 queue mode (QL_CQ_INIT_MLX5): the mlx5 CQE ring the engine
	 * writes; NULL otherwise */
	struct soft_mlx5_cq *mx;
};

struct soft_mr {
	struct ql_mr base;
	uint32_t idx;
	bool pinned;
};

struct soft_device {
	struct ql_device base;
	pthread_mutex_t lock;
	uint32_t wire;
	char name[QL_DEVICE_NAME_MAX];
	struct soft_dev_shared *sh;
	union ibv_gid gid;
	uint32_t next_pd_id;
	uint32_t key_secret[2];
	uint32_t mr_epoch[SOFT_MAX_MR];
	/* The authoritative MR table: sh->mr is its copy for peers in other
	 * processes, who can also write it. Never freed (see heap.c). */
	struct soft_mr_entry *mr_priv;
	uint32_t qp_gen[SOFT_MAX_QP];
	struct soft_qp *qps[SOFT_MAX_QP];
	struct soft_mr *mrs[SOFT_MAX_MR];
	/* Loss injection (URI query, test only): UC messages sent by this
	 * device's QPs are dropped, every drop_nth-th or with probability
	 * loss_p64 / 2^64 drawn from splitmix64(seed + message number). */
	bool loss_on;
	uint64_t drop_nth;
	uint64_t loss_p64;
	uint64_t loss_seed;
	_Atomic uint64_t loss_msgs;    /* UC messages seen */
	_Atomic uint64_t loss_dropped; /* of them dropped */
	/* The mlx5 queue mode's engine (mlx5_engine.c), made with the first
	 * mlx5-mode QP or CQ; freed with the device. */
	struct soft_engine *eng;
	/* ?progress= (enum ql__progress_mode): who runs the engine */
	int progress;
};

/* Loss injection's verdict on the next UC message of `dev` (exec.c). */
SOFT_HIDDEN bool ql__soft_loss_drop(struct soft_device *dev);

/* ---- heap.c ---------------------------------------------------------- */
SOFT_HIDDEN int ql__soft_heap_get(struct soft_heap **heap);
SOFT_HIDDEN void *ql__soft_heap_alloc(size_t len, size_t align);
SOFT_HIDDEN void ql__soft_heap_free(void *p);
SOFT_HIDDEN bool ql__soft_heap_contains(const void *p, size_t len);
SOFT_HIDDEN int ql__soft_heap_register_dev(struct soft_dev_shared *sh,
					   struct soft_mr_entry **mr_priv);
SOFT_HIDDEN void ql__soft_heap_unregister_dev(struct soft_dev_shared *sh);
SOFT_HIDDEN int ql__soft_peer_heap_get(pid_t pid, int fd, struct soft_peer_heap **out);
SOFT_HIDDEN void ql__soft_peer_heap_put(struct soft_peer_heap *ph);
SOFT_HIDDEN struct soft_dev_shared *ql__soft_peer_find_dev(struct soft_peer_heap *ph, uint32_t id,
							   const struct soft_mr_entry **mr);
SOFT_HIDDEN void ql__soft_qp_latch_peer_rq(struct soft_qp *qp);
SOFT_HIDDEN void ql__soft_quiesce(void);

static inline bool soft_peer_alive(const struct soft_peer_heap *ph)
{
	/* glibc robust mutex lock word: owner TID, plus FUTEX_OWNER_DIED
	 * (0x40000000) set by the kernel when the owner thread (the peer's
	 * main thread) dies, i.e. when the process exits or is killed. */
	int w;

	if (ph->self)
		return true;
	w = atomic_load_explicit(ph->alive_word, memory_order_relaxed);
	return (w & 0x3fffffff) != 0 && !(w & 0x40000000);
}

/* device.c: what ql_device_query reports and ql_qp_create checks */
SOFT_HIDDEN extern const struct ql__nic_limits ql__soft_limits;

/* ---- qp.c / exec.c ---------------------------------------------------- */
SOFT_HIDDEN extern const struct ql__qp_ops ql__soft_qp_ops;
SOFT_HIDDEN extern const struct ql__cq_ops ql__soft_cq_ops;
SOFT_HIDDEN int ql__soft_qp_create(struct ql_pd *pd, struct ql_qp_init_attr *attr,
				   struct ql_qp **qp);
SOFT_HIDDEN int ql__soft_qp_destroy(struct ql_qp *qp);
SOFT_HIDDEN int ql__soft_qp_modify(struct ql_qp *qp, struct ibv_qp_attr *attr, int attr_mask);
SOFT_HIDDEN int ql__soft_qp_query(struct ql_qp *qp, struct ibv_qp_attr *attr, int attr_mask,
				  struct ql_qp_init_attr *init_attr);
SOFT_HIDDEN void ql__soft_qp_enter_err(struct soft_qp *qp);

/* A responder QP can be put in ERR by its peer's requester, which found a
 * Class C error (remote access, invalid request) executing a request on it
 * and stored ERR in the shared state (IB spec: the responder QP goes to the
 * Error state). The owner catches up at its next call: flush and all. */
static inline void soft_qp_sync_err(struct soft_qp *qp)
{
	if (soft_unlikely(atomic_load_explicit(&qp->sh->state, memory_order_acquire) ==
				  IBV_QPS_ERR &&
			  qp->state != IBV_QPS_ERR))
		ql__soft_qp_enter_err(qp);
}
SOFT_HIDDEN void ql__soft_qp_set_state(struct soft_qp *qp, enum ibv_qp_state s);
SOFT_HIDDEN void ql__soft_rq_flush(struct soft_qp *qp, bool peer_dead);
SOFT_HIDDEN void ql__soft_sq_flush(struct soft_qp *qp);
SOFT_HIDDEN void ql__soft_sq_progress(struct soft_qp *qp);
SOFT_HIDDEN void ql__soft_cq_list_add(struct soft_qp ***list, uint32_t *n, struct soft_qp *qp);
SOFT_HIDDEN void ql__soft_cq_list_del(struct soft_qp **list, uint32_t *n, struct soft_qp *qp);
SOFT_HIDDEN bool ql__soft_mr_referenced(struct soft_device *dev, uint32_t lkey);
SOFT_HIDDEN void ql__soft_dev_wait_peers(struct soft_device *dev);

/* A work request the engine refuses before it reaches the send queue (a
 * malformed mlx5 WQE): it takes a send-queue slot, completes with `st` (or
 * WR_FLUSH_ERR when the QP is already in ERR) and puts the QP in ERR. */
SOFT_HIDDEN void ql__soft_sq_fail(struct soft_qp *qp, uint64_t wr_id, enum ibv_wc_status st,
				  enum ibv_wc_opcode op);

/* ---- mlx5_engine.c: the mlx5 queue mode --------------------------------- */
struct ql_mlx5_qp;
struct ql_mlx5_cq;
/* Setup of the mlx5 queues of a QP (after ql__soft_qp_create made the QP, whose
 * caps it first adjusts with ql__soft_mlx5_qp_caps) and of a CQ; teardown. */
SOFT_HIDDEN int ql__soft_mlx5_qp_caps(struct ibv_qp_cap *cap, uint32_t *sq_cnt, uint32_t *rq_cnt);
SOFT_HIDDEN int ql__soft_mlx5_qp_attach(struct soft_qp *qp, uint32_t sq_cnt, uint32_t rq_cnt,
					bool bf);
SOFT_HIDDEN void ql__soft_mlx5_qp_detach(struct soft_qp *qp);
SOFT_HIDDEN void ql__soft_mlx5_qp_reset(struct soft_qp *qp);
SOFT_HIDDEN int ql__soft_mlx5_cq_attach(struct soft_cq *cq, uint32_t cnt);
SOFT_HIDDEN void ql__soft_mlx5_cq_detach(struct soft_cq *cq);
SOFT_HIDDEN void ql__soft_engine_free(struct soft_device *dev);
SOFT_HIDDEN int ql__soft_mlx5_qp_view(struct ql_qp *qp, struct ql_mlx5_qp *out);
SOFT_HIDDEN int ql__soft_mlx5_cq_view(struct ql_cq *cq, struct ql_mlx5_cq *out);
/* Setup calls on objects the engine drives stop it first (no lock on its
 * hot path: it parks at the top of its loop and waits). */
SOFT_HIDDEN void ql__soft_engine_park(struct soft_device *dev);
SOFT_HIDDEN void ql__soft_engine_unpark(struct soft_device *dev);
/* Caller progress (docs/progress.md): one pass of the engine in the calling
 * thread (0 without an engine, or when its thread runs it); and the CQ ops
 * of the ordinary CQs of a device that may progress in its callers. */
SOFT_HIDDEN int ql__soft_mlx5_progress(struct soft_device *dev);
SOFT_HIDDEN extern const struct ql__cq_ops ql__soft_cq_ops_progress;

/* mask and slot_size must be the reader's own (validated) copies. */
static inline struct soft_rq_slot *soft_rq_slot(uint8_t *rq, uint32_t slot_size, uint32_t mask,
						uint64_t i)
{
	return (struct soft_rq_slot *)(rq + (size_t)(i & mask) * slot_size);
}

/* Bytes of a receive slot with n SGEs (n >= 1), cache-line rounded. */
static inline uint32_t soft_rq_slot_bytes(uint32_t n)
{
	return (uint32_t)((sizeof(struct soft_rq_slot) + n * sizeof(struct ibv_sge) +
			   SOFT_CACHELINE - 1) &
			  ~(size_t)(SOFT_CACHELINE - 1));
}

#endif
