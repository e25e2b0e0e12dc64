/* SPDX-License-Identifier: MIT */
/*
 * soft provider: the mlx5 queue mode (docs/soft-provider.md, "mlx5 queue
 * mode").
 *
 * A QP created with QL_QP_INIT_MLX5 (and its CQs, QL_CQ_INIT_MLX5) has
 * mlx5-format queues in the soft heap: a send queue of 64-byte basic blocks,
 * a receive queue of data-segment lists, a CQE ring of 64-byte CQEs and
 * doorbell records, laid out as the ConnectX programmer's reference manual
 * and rdma-core's mlx5dv.h define them, so that code written against
 * qlink/mlx5.h (on the CPU, or on a GPU) drives the soft NIC exactly as it
 * drives a ConnectX. The device's engine, one thread started with the first
 * mlx5-mode QP and stopped with the last (a real NIC's processing is not the
 * caller's either), plays the NIC:
 *
 *  - it watches each QP's send doorbell record, copies every new WQE out of
 *    the ring (the ring is written by code it does not trust: nothing read
 *    from a WQE reaches beyond the copy), validates it as a NIC does, and
 *    posts it as a work request on the QP's own soft send queue, so it runs
 *    through exec.c like any ql_qp_post_send: same wire, same checks, same
 *    errors, across processes on soft+shm;
 *  - it turns each new receive WQE into a soft receive, which peers fill as
 *    they fill any;
 *  - it turns what the soft CQs complete into mlx5 CQEs (owner bit, opcode,
 *    WQE counter, byte count, immediate, syndrome) in the CQ's ring, as
 *    long as the consumer index in the CQ's doorbell record leaves room.
 *
 * The engine's loop allocates nothing, takes no lock and makes no system
 * call while there is work (tests/test_soft_mlx5.c proves it); idle, it
 * spins, then yields, then sleeps (see idle_backoff). Setup calls on the
 * objects it drives park it first (ql__soft_engine_park): a handshake on two
 * flags, not a lock on its path.
 *
 * In caller progress mode (`?progress=caller`, or `auto` on a process
 * short of free cores; docs/progress.md) there is no thread: the views
 * carry ql__soft_mlx5_progress, which the doorbells and empty CQ polls of
 * qlink/mlx5.h run, as do ql_cq_poll of the device's other CQs and
 * ql_device_progress. One pass of the loop per call, under a busy flag
 * taken by exchange (a caller that finds it taken returns at once: someone
 * is progressing); setup calls park the engine by taking that flag.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "providers/common/progress.h"
#include "providers/soft/soft.h"
#include "qlink/error.h"
#include "qlink/log.h"
#include "qlink/mlx5.h"

/* ---- the PRM's facts (ConnectX PRM, rdma-core mlx5dv.h) ---------------- */

#define SMX_BB 64	       /* send WQE basic block */
#define SMX_DS 16	       /* descriptor segment unit */
#define SMX_CQE 64	       /* CQE size */
#define SMX_MAX_WQE_BB 16      /* 63 DS at most: 1008 bytes */
#define SMX_INLINE 0x80000000u /* byte_count flag of an inline segment */
#define SMX_INVALID_LKEY 0x100u
#define SMX_CTRL_CQ_UPDATE 0x08 /* fm_ce_se: CE = 2, always a CQE */

enum {
	SMX_OP_NOP = 0x00,
	SMX_OP_RDMA_WRITE = 0x08,
	SMX_OP_RDMA_WRITE_IMM = 0x09,
	SMX_OP_SEND = 0x0a,
	SMX_OP_SEND_IMM = 0x0b,
	SMX_OP_RDMA_READ = 0x10,
	SMX_OP_ATOMIC_CS = 0x11,
	SMX_OP_ATOMIC_FA = 0x12,
};

enum {
	SMX_CQE_REQ = 0,
	SMX_CQE_RESP_WR_IMM = 1,
	SMX_CQE_RESP_SEND = 2,
	SMX_CQE_RESP_SEND_IMM = 3,
	SMX_CQE_REQ_ERR = 13,
	SMX_CQE_RESP_ERR = 14,
	SMX_CQE_INVALID = 15,
};

/* Byte offsets in a 64-byte CQE (struct mlx5_cqe64 / mlx5_err_cqe). */
enum {
	SMX_CQE_FLAGS_RQPN = 24,
	SMX_CQE_IMM = 36,
	SMX_CQE_BYTE_CNT = 44,
	SMX_CQE_VENDOR_SYND = 54,
	SMX_CQE_SYNDROME = 55,
	SMX_CQE_SOP_QPN = 56,
	SMX_CQE_WQE_COUNTER = 60,
	SMX_CQE_SIGNATURE = 62,
	SMX_CQE_OP_OWN = 63,
};

/* Doorbell record words of a QP (MLX5_RCV_DBR, MLX5_SND_DBR) and of a CQ
 * (MLX5_CQ_SET_CI). */
#define SMX_DB_RQ 0
#define SMX_DB_SQ 1
#define SMX_DB_CQ_CI 0
/* In a QP's doorbell page: the soft NIC's "doorbell register" (bf_reg, 8
 * bytes written, 64-byte aligned) at 0 and the doorbell record right after
 * it, in the same cache line: a doorbell (record, then register) moves one
 * line from the producer's core to the engine's, not two. */
#define SMX_BF_OFF 0
#define SMX_DB_OFF 8
/* BlueFlame (bf_size 64, the default): two 64-byte buffers, each a cache
 * line of its own after the record's, written alternately by
 * ql_mlx5_sq_doorbell with the whole of a one-basic-block WQE, its first
 * 8 bytes last. The engine takes such a WQE from there (one line moved from
 * the producer's core) instead of from the ring. */
#define SMX_BF_BUF 64
#define SMX_BF_SIZE 64
#define SMX_PAGE 4096

/* What the engine does per QP and visit before it looks at the others. */
#define SMX_BUDGET 32

struct soft_mlx5_qp {
	uint8_t *sq;	  /* sq_cnt basic blocks */
	uint8_t *rq;	  /* rq_cnt entries of rq_stride bytes */
	uint32_t *db;	  /* doorbell record: [0] RQ, [1] SQ counters, big endian */
	uint64_t *bf_reg; /* bf_size 0: written by the doorbell, a hint to look now */
	uint8_t *bf_buf;  /* bf_size 64: the two BlueFlame buffers */
	uint8_t *page;	  /* db, bf_reg, bf_buf */
	uint32_t bf_size; /* 0 or SMX_BF_SIZE (per QP) */
	uint32_t bf_next; /* the buffer (0, 1) the next BlueFlame write goes to */
	uint64_t bf_hits; /* WQEs taken from a BlueFlame buffer (tests) */
	uint32_t sq_cnt;
	uint32_t rq_cnt;
	uint32_t rq_stride;
	uint32_t rq_max_sge; /* rq_stride / 16 */
	uint32_t sq_ci;	     /* basic blocks consumed (low 16 bits count) */
	uint32_t rq_seen;    /* receive WQEs taken */
	uint64_t bf_last;
};

struct soft_mlx5_cq {
	uint8_t *buf; /* cnt CQEs */
	uint32_t *db; /* [0] consumer index (big endian, 24 bits), [1] arm */
	uint32_t cnt;
	uint32_t pi; /* CQEs written */
	uint32_t quiet;
	struct ibv_wc wc[SMX_BUDGET];
};

struct soft_engine {
	struct soft_device *dev;
	pthread_t thread;
	bool running; /* the thread exists */
	bool manual;  /* tests drive ql__soft_mlx5_engine_poll themselves */
	bool caller;  /* caller progress: no thread, the callers' polls run it */
	int busy;     /* no thread: a pass (or a parker) is on (__atomic) */
	_Atomic bool stop;
	_Atomic uint32_t park_req;
	_Atomic uint32_t parked;
	pthread_mutex_t park_lock; /* serializes parkers (setup path) */
	uint32_t nqps;
	struct soft_qp *qps[SOFT_MAX_QP];
};

static inline uint32_t ld_be32(const void *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return be32toh(v);
}

static inline uint64_t ld_be64(const void *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return be64toh(v);
}

static inline void st_be32(void *p, uint32_t v)
{
	v = htobe32(v);
	memcpy(p, &v, 4);
}

static inline void st_be16(void *p, uint16_t v)
{
	v = htobe16(v);
	memcpy(p, &v, 2);
}

/* A doorbell record word, written by the (untrusted) producer. */
static inline uint32_t db_load(uint32_t *w)
{
	return be32toh(__atomic_load_n(w, __ATOMIC_ACQUIRE));
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/* ---- the wr_id the engine gives its soft work requests --------------- */

/* send: WQE counter (16 bits) | mlx5 opcode << 16 | signaled << 24 */
static inline uint64_t wr_id_make(uint32_t idx, uint32_t op, bool sig)
{
	return (idx & 0xffff) | (uint64_t)(op & 0xff) << 16 | (uint64_t)sig << 24;
}

/* ---- setup ---------------------------------------------------------------- */

static uint32_t pow2_ge(uint32_t v)
{
	uint32_t p = 1;

	while (p < v)
		p <<= 1;
	return p;
}

/* A send WQE for these caps, in basic blocks: control, remote address,
 * atomic and then the larger of the data segments and the inline data. */
static uint32_t wqe_bbs(const struct ibv_qp_cap *cap)
{
	uint32_t data = (cap->max_send_sge ? cap->max_send_sge : 1) * SMX_DS;
	uint32_t inl = (4 + cap->max_inline_data + SMX_DS - 1) & ~(uint32_t)(SMX_DS - 1);
	uint32_t bytes = 3 * SMX_DS + (data > inl ? data : inl);

	return (bytes + SMX_BB - 1) / SMX_BB;
}

int ql__soft_mlx5_qp_caps(struct ibv_qp_cap *cap, uint32_t *sq_cnt, uint32_t *rq_cnt)
{
	uint64_t bbs;

	if (cap->max_send_wr < 1 || cap->max_send_wr > SOFT_MAX_QP_WR || cap->max_recv_wr < 1 ||
	    cap->max_recv_wr > SOFT_MAX_QP_WR)
		return ql_error_set(-EINVAL, "ql_qp_create: max_send_wr/max_recv_wr must be 1..%d",
				    SOFT_MAX_QP_WR);
	if (cap->max_send_sge > SOFT_MAX_SGE || cap->max_recv_sge > SOFT_MAX_SGE)
		return ql_error_set(-EINVAL, "ql_qp_create: at most %d SGEs per WR", SOFT_MAX_SGE);
	if (cap->max_inline_data > SOFT_MAX_INLINE)
		return ql_error_set(-EINVAL, "ql_qp_create: max_inline_data above %d",
				    SOFT_MAX_INLINE);
	bbs = (uint64_t)pow2_ge(cap->max_send_wr * wqe_bbs(cap));
	/* the doorbell counters are 16 bits: the ring must be at most half */
	if (bbs > 32768)
		return ql_error_set(-EINVAL,
				    "ql_qp_create: mlx5 mode: max_send_wr %u with these SGE and "
				    "inline limits needs %llu basic blocks (at most 32768)",
				    cap->max_send_wr, (unsigned long long)bbs);
	*sq_cnt = (uint32_t)bbs;
	*rq_cnt = pow2_ge(cap->max_recv_wr);
	/* The soft queues behind the rings: one soft send WR per WQE (a WQE
	 * is at least one basic block), all of the soft NIC's SGE and inline
	 * limits (the engine enforces the WQE's own), one receive per RQ
	 * entry. */
	cap->max_send_wr = bbs < SOFT_MAX_QP_WR ? (uint32_t)bbs : SOFT_MAX_QP_WR;
	cap->max_send_sge = SOFT_MAX_SGE;
	cap->max_inline_data = SOFT_MAX_INLINE;
	cap->max_recv_wr = *rq_cnt;
	cap->max_recv_sge = pow2_ge(cap->max_recv_sge ? cap->max_recv_sge : 1);
	return 0;
}

/* Whole pages: no two buffers share one, so that each can be registered
 * with cudaHostRegister on its own. */
static size_t pages(size_t len)
{
	return (len + SMX_PAGE - 1) & ~(size_t)(SMX_PAGE - 1);
}

static struct soft_engine *engine_get(struct soft_device *dev)
{
	struct soft_engine *eng;

	pthread_mutex_lock(&dev->lock);
	eng = dev->eng;
	if (!eng) {
		eng = calloc(1, sizeof(*eng));
		if (eng) {
			eng->dev = dev;
			/* auto: weighed when the engine is first needed, with
			 * one spinning thread more (its own); the thread that
			 * drives its queues is the caller's, which the rule
			 * counts (docs/progress.md §2) */
			eng->caller = ql__progress_resolve(dev->progress, 1) == QL__PROGRESS_CALLER;
			pthread_mutex_init(&eng->park_lock, NULL);
			/* the callers' polls load it without the lock */
			__atomic_store_n(&dev->eng, eng, __ATOMIC_RELEASE);
		}
	}
	pthread_mutex_unlock(&dev->lock);
	return eng;
}

void ql__soft_engine_free(struct soft_device *dev)
{
	if (!dev->eng)
		return;
	pthread_mutex_destroy(&dev->eng->park_lock);
	free(dev->eng);
	dev->eng = NULL;
}

/* With park_lock held: stop the thread at the top of its loop; without a
 * thread, wait out the caller's pass in progress and keep others out. */
static void park_locked(struct soft_engine *eng)
{
	if (!eng->running) {
		while (__atomic_exchange_n(&eng->busy, 1, __ATOMIC_ACQUIRE))
			sched_yield();
		return;
	}
	atomic_store_explicit(&eng->park_req, 1, memory_order_release);
	while (!atomic_load_explicit(&eng->parked, memory_order_acquire))
		sched_yield();
}

static void unpark_locked(struct soft_engine *eng)
{
	if (!eng->running) {
		__atomic_store_n(&eng->busy, 0, __ATOMIC_RELEASE);
		return;
	}
	atomic_store_explicit(&eng->park_req, 0, memory_order_release);
	/* the next parker must not take the flag of this round for its own */
	while (atomic_load_explicit(&eng->parked, memory_order_acquire))
		sched_yield();
}

void ql__soft_engine_park(struct soft_device *dev)
{
	if (!dev->eng)
		return;
	pthread_mutex_lock(&dev->eng->park_lock);
	park_locked(dev->eng);
}

void ql__soft_engine_unpark(struct soft_device *dev)
{
	if (!dev->eng)
		return;
	unpark_locked(dev->eng);
	pthread_mutex_unlock(&dev->eng->park_lock);
}

static void *engine_main(void *arg);

int ql__soft_mlx5_qp_attach(struct soft_qp *qp, uint32_t sq_cnt, uint32_t rq_cnt, bool bf)
{
	struct soft_engine *eng = engine_get(qp->dev);
	struct soft_mlx5_qp *m;
	int ret;

	if (!eng)
		return -ENOMEM;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->sq_cnt = sq_cnt;
	m->rq_cnt = rq_cnt;
	m->rq_max_sge = qp->cap.max_recv_sge; /* a power of two (caps) */
	m->rq_stride = m->rq_max_sge * SMX_DS;
	/* Page-aligned, in the soft heap (GPU code registers them with
	 * cudaHostRegister) and zero-filled: empty doorbell records. */
	m->sq = ql__soft_heap_alloc(pages((size_t)sq_cnt * SMX_BB), SMX_PAGE);
	m->rq = ql__soft_heap_alloc(pages((size_t)rq_cnt * m->rq_stride), SMX_PAGE);
	m->page = ql__soft_heap_alloc(SMX_PAGE, SMX_PAGE);
	if (!m->sq || !m->rq || !m->page) {
		ret = ql_error_set(-ENOMEM, "soft: shared heap exhausted (QLINK_SOFT_HEAP_SIZE)");
		goto err;
	}
	memset(m->sq, 0, (size_t)sq_cnt * SMX_BB);
	memset(m->rq, 0, (size_t)rq_cnt * m->rq_stride);
	memset(m->page, 0, SMX_PAGE);
	m->db = (uint32_t *)(void *)(m->page + SMX_DB_OFF);
	m->bf_reg = (uint64_t *)(void *)(m->page + SMX_BF_OFF);
	m->bf_buf = m->page + SMX_BF_BUF;
	m->bf_size = bf ? SMX_BF_SIZE : 0;

	pthread_mutex_lock(&eng->park_lock);
	park_locked(eng);
	qp->mx = m;
	qp->atomic_be = true;
	{
		struct soft_heap *heap;

		if (!ql__soft_heap_get(&heap))
			qp->sh->mx_rq_db_off =
				(uint64_t)((uint8_t *)&m->db[SMX_DB_RQ] - heap->base);
	}
	eng->qps[eng->nqps++] = qp;
	if (eng->running || eng->manual || eng->caller) {
		unpark_locked(eng);
	} else {
		unpark_locked(eng); /* no thread yet: the flag park took */
		atomic_store(&eng->stop, false);
		atomic_store(&eng->park_req, 0);
		atomic_store(&eng->parked, 0);
		ret = pthread_create(&eng->thread, NULL, engine_main, eng);
		if (ret) {
			eng->qps[--eng->nqps] = NULL;
			qp->mx = NULL;
			qp->atomic_be = false;
			qp->sh->mx_rq_db_off = 0;
			pthread_mutex_unlock(&eng->park_lock);
			ret = ql_error_set(-ret, "soft: cannot start the mlx5 engine thread");
			goto err;
		}
		eng->running = true;
		ql__progress_threads_add(1);
	}
	pthread_mutex_unlock(&eng->park_lock);
	return 0;
err:
	ql__soft_heap_free(m->sq);
	ql__soft_heap_free(m->rq);
	ql__soft_heap_free(m->page);
	free(m);
	return ret;
}

void ql__soft_mlx5_qp_detach(struct soft_qp *qp)
{
	struct soft_engine *eng = qp->dev->eng;
	struct soft_mlx5_qp *m = qp->mx;

	if (!m)
		return;
	qp->sh->mx_rq_db_off = 0;
	pthread_mutex_lock(&eng->park_lock);
	park_locked(eng);
	for (uint32_t i = 0; i < eng->nqps; i++) {
		if (eng->qps[i] == qp) {
			eng->qps[i] = eng->qps[--eng->nqps];
			eng->qps[eng->nqps] = NULL;
			break;
		}
	}
	if (!eng->nqps && eng->running) {
		/* the last mlx5 QP is gone: so is the engine's thread */
		atomic_store(&eng->stop, true);
		atomic_store_explicit(&eng->park_req, 0, memory_order_release);
		pthread_join(eng->thread, NULL);
		eng->running = false;
		ql__progress_threads_add(-1);
	} else {
		unpark_locked(eng);
	}
	qp->mx = NULL;
	pthread_mutex_unlock(&eng->park_lock);
	ql__soft_heap_free(m->sq);
	ql__soft_heap_free(m->rq);
	ql__soft_heap_free(m->page);
	free(m);
}

/* The QP went to RESET (the engine is parked): as on a ConnectX, the queues
 * start again at index 0 with empty doorbell records. */
void ql__soft_mlx5_qp_reset(struct soft_qp *qp)
{
	struct soft_mlx5_qp *m = qp->mx;

	if (!m)
		return;
	m->sq_ci = 0;
	m->rq_seen = 0;
	m->bf_last = 0;
	m->bf_next = 0;
	/* a BlueFlame line of before the reset would name WQE indices the
	 * ring uses again: ds 0 in both, so neither matches until rewritten */
	memset(m->bf_buf, 0, 2 * SMX_BF_SIZE);
	__atomic_store_n(&m->db[SMX_DB_RQ], 0, __ATOMIC_RELEASE);
	__atomic_store_n(&m->db[SMX_DB_SQ], 0, __ATOMIC_RELEASE);
}

int ql__soft_mlx5_cq_attach(struct soft_cq *cq, uint32_t cnt)
{
	struct soft_mlx5_cq *x;

	if (!engine_get(cq->dev))
		return -ENOMEM;
	x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	x->cnt = cnt;
	x->buf = ql__soft_heap_alloc(pages((size_t)cnt * SMX_CQE), SMX_PAGE);
	x->db = ql__soft_heap_alloc(SMX_PAGE, SMX_PAGE);
	if (!x->buf || !x->db) {
		ql__soft_heap_free(x->buf);
		ql__soft_heap_free(x->db);
		free(x);
		return ql_error_set(-ENOMEM, "soft: shared heap exhausted (QLINK_SOFT_HEAP_SIZE)");
	}
	memset(x->db, 0, SMX_PAGE);
	/* every CQE invalid, owner bit 0: the first pass writes owner 0 */
	memset(x->buf, 0, (size_t)cnt * SMX_CQE);
	for (uint32_t i = 0; i < cnt; i++)
		x->buf[(size_t)i * SMX_CQE + SMX_CQE_OP_OWN] = SMX_CQE_INVALID << 4;
	cq->mx = x;
	return 0;
}

void ql__soft_mlx5_cq_detach(struct soft_cq *cq)
{
	struct soft_mlx5_cq *x = cq->mx;

	if (!x)
		return;
	cq->mx = NULL;
	ql__soft_heap_free(x->buf);
	ql__soft_heap_free(x->db);
	free(x);
}

/* ---- CQEs ----------------------------------------------------------------- */

static uint8_t syndrome(enum ibv_wc_status st)
{
	switch (st) {
	case IBV_WC_LOC_LEN_ERR:
		return 0x01;
	case IBV_WC_LOC_QP_OP_ERR:
		return 0x02;
	case IBV_WC_LOC_PROT_ERR:
		return 0x04;
	case IBV_WC_WR_FLUSH_ERR:
		return 0x05;
	case IBV_WC_MW_BIND_ERR:
		return 0x06;
	case IBV_WC_BAD_RESP_ERR:
		return 0x10;
	case IBV_WC_LOC_ACCESS_ERR:
		return 0x11;
	case IBV_WC_REM_INV_REQ_ERR:
		return 0x12;
	case IBV_WC_REM_ACCESS_ERR:
		return 0x13;
	case IBV_WC_REM_OP_ERR:
		return 0x14;
	case IBV_WC_RETRY_EXC_ERR:
		return 0x15;
	case IBV_WC_RNR_RETRY_EXC_ERR:
		return 0x16;
	case IBV_WC_REM_ABORT_ERR:
		return 0x22;
	default:
		return 0x02;
	}
}

/* Write one CQE for a soft completion; false when none is due (a send
 * that succeeded and was not signaled). The op_own byte goes last, with
 * release: a poller that sees its owner bit sees the rest. */
static inline bool cqe_write(struct soft_mlx5_cq *x, const struct ibv_wc *wc)
{
	uint8_t c[SMX_CQE];
	uint8_t *e;
	uint8_t op;
	uint32_t qpn = wc->qp_num & 0xffffff;

	memset(c, 0, sizeof(c));
	if (!(wc->opcode & IBV_WC_RECV)) {
		const uint32_t sop = (uint32_t)(wc->wr_id >> 16) & 0xff;

		if (wc->status == IBV_WC_SUCCESS) {
			if (!(wc->wr_id & (1ull << 24)))
				return false;
			op = SMX_CQE_REQ;
			st_be32(c + SMX_CQE_BYTE_CNT, wc->byte_len);
		} else {
			op = SMX_CQE_REQ_ERR;
			c[SMX_CQE_SYNDROME] = syndrome(wc->status);
		}
		st_be32(c + SMX_CQE_SOP_QPN, sop << 24 | qpn);
	} else {
		if (wc->status == IBV_WC_SUCCESS) {
			if (wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM)
				op = SMX_CQE_RESP_WR_IMM;
			else if (wc->wc_flags & IBV_WC_WITH_IMM)
				op = SMX_CQE_RESP_SEND_IMM;
			else
				op = SMX_CQE_RESP_SEND;
			st_be32(c + SMX_CQE_BYTE_CNT, wc->byte_len);
			/* imm_data is already in network byte order */
			memcpy(c + SMX_CQE_IMM, &wc->imm_data, 4);
			st_be32(c + SMX_CQE_FLAGS_RQPN, wc->src_qp & 0xffffff);
		} else {
			op = SMX_CQE_RESP_ERR;
			c[SMX_CQE_SYNDROME] = syndrome(wc->status);
		}
		st_be32(c + SMX_CQE_SOP_QPN, qpn);
	}
	st_be16(c + SMX_CQE_WQE_COUNTER, (uint16_t)wc->wr_id);
	e = x->buf + (size_t)(x->pi & (x->cnt - 1)) * SMX_CQE;
	memcpy(e, c, SMX_CQE_OP_OWN);
	__atomic_store_n(e + SMX_CQE_OP_OWN, (uint8_t)(op << 4 | !!(x->pi & x->cnt)),
			 __ATOMIC_RELEASE);
	x->pi++;
	return true;
}

/* Nothing for the soft CQ's poll to report (checked without a call: the
 * engine asks every pass, for every QP). */
static inline bool cq_quiet(const struct soft_cq *cq)
{
	if (cq->head != cq->tail || cq->n_pending)
		return false;
	for (uint32_t i = 0; i < cq->n_rq_qps; i++) {
		const struct soft_qp *q = cq->rq_qps[i];
		const struct soft_rq_slot *sl;

		if (q->rq_ci == q->rq_pi)
			continue;
		sl = soft_rq_slot(q->rq, q->rq_slot_size, q->rq_mask, q->rq_ci);
		if (atomic_load_explicit(&sl->done, memory_order_relaxed) == q->rq_ci + 1)
			return false;
	}
	return true;
}

/* Move what the soft CQ completed into the mlx5 ring, as far as the
 * consumer index leaves room (no overrun: the rest waits in the soft CQ,
 * and a QP whose CQ is full stops taking WQEs, see sq_consume). */
static int cq_drain(struct soft_cq *cq)
{
	struct soft_mlx5_cq *x = cq->mx;
	uint32_t ci, used, room;
	int n;

	/* quiet: the full poll (which also checks the peers' liveness) only
	 * every 256th pass */
	if (cq_quiet(cq) && (++x->quiet & 255))
		return 0;
	ci = db_load(&x->db[SMX_DB_CQ_CI]) & 0xffffff;
	used = (x->pi - ci) & 0xffffff;
	/* a consumer index ahead of what was written is the consumer's
	 * mistake (or malice): the ring counts as full */
	if (used >= x->cnt)
		return 0;
	room = x->cnt - used;
	n = ql__soft_cq_ops.poll(&cq->base, room < SMX_BUDGET ? (int)room : SMX_BUDGET, x->wc);
	for (int i = 0; i < n; i++)
		cqe_write(x, &x->wc[i]);
	return n > 0;
}

/* ---- receive queue ------------------------------------------------------ */

static int rq_refill(struct soft_qp *qp, struct soft_mlx5_qp *m)
{
	const uint32_t head = db_load(&m->db[SMX_DB_RQ]) & 0xffff;
	uint32_t pend = (head - m->rq_seen) & 0xffff;
	int n = 0;

	if (!pend || qp->state == IBV_QPS_RESET)
		return 0;
	while (pend && n < SMX_BUDGET && qp->rq_pi - qp->rq_ci < qp->cap.max_recv_wr) {
		uint8_t w[SOFT_MAX_SGE * SMX_DS];
		struct ibv_sge sg[SOFT_MAX_SGE];
		struct ibv_recv_wr wr, *bad;
		uint32_t k, nsg = 0;

		/* one copy of the entry, then only the copy is read */
		memcpy(w, m->rq + (size_t)(m->rq_seen & (m->rq_cnt - 1)) * m->rq_stride,
		       m->rq_stride);
		for (k = 0; k < m->rq_max_sge; k++) {
			const uint8_t *d = w + k * SMX_DS;
			const uint32_t lkey = ld_be32(d + 4);

			if (lkey == SMX_INVALID_LKEY)
				break;
			sg[nsg].length = ld_be32(d) & 0x7fffffff;
			sg[nsg].lkey = lkey;
			sg[nsg].addr = ld_be64(d + 8);
			nsg++;
		}
		wr.wr_id = m->rq_seen & 0xffff;
		wr.next = NULL;
		wr.sg_list = sg;
		wr.num_sge = (int)nsg;
		if (ql__soft_qp_ops.post_recv(&qp->base, &wr, &bad))
			break;
		m->rq_seen++;
		pend--;
		n++;
	}
	return n;
}

/* ---- send queue --------------------------------------------------------- */

/* A WQE the NIC refuses: an error CQE for it and the QP in error. */
static void wqe_bad(struct soft_qp *qp, uint32_t idx, uint32_t op, enum ibv_wc_status st)
{
	ql__soft_sq_fail(qp, wr_id_make(idx, op, true), st, IBV_WC_SEND);
}

enum { WQE_OK, WQE_WAIT };

/* Parse the WQE copied into w (ds descriptor segments) and post it on the
 * soft send queue. WQE_WAIT: the soft send queue is full, try again. */
static int wqe_exec(struct soft_qp *qp, const uint8_t *w, uint32_t ds, uint32_t idx)
{
	const uint32_t op = ld_be32(w) & 0xff;
	const uint32_t end = ds * SMX_DS;
	const uint8_t fm_ce_se = w[11];
	struct ibv_sge sg[SOFT_MAX_SGE];
	struct ibv_send_wr wr, *bad;
	uint32_t off = SMX_DS, nsg = 0;
	bool inl = false;
	int ret;

	/* (field by field: a memset of the whole WR is a measurable part of
	 * a WQE's cost) */
	wr.next = NULL;
	wr.imm_data = 0;
	wr.wr.atomic.remote_addr = 0;
	wr.wr.atomic.compare_add = 0;
	wr.wr.atomic.swap = 0;
	wr.wr.atomic.rkey = 0;
	switch (op) {
	case SMX_OP_NOP:
		/* a zero-length WRITE (no rkey checked, IB spec): ordered
		 * with the rest, completes as the NOP it is */
		wr.opcode = IBV_WR_RDMA_WRITE;
		off = end;
		break;
	case SMX_OP_SEND:
		wr.opcode = IBV_WR_SEND;
		break;
	case SMX_OP_SEND_IMM:
		wr.opcode = IBV_WR_SEND_WITH_IMM;
		break;
	case SMX_OP_RDMA_WRITE:
	case SMX_OP_RDMA_WRITE_IMM:
	case SMX_OP_RDMA_READ:
		if (end < off + SMX_DS)
			goto bad_qp_op;
		wr.opcode = op == SMX_OP_RDMA_READ  ? IBV_WR_RDMA_READ :
			    op == SMX_OP_RDMA_WRITE ? IBV_WR_RDMA_WRITE :
						      IBV_WR_RDMA_WRITE_WITH_IMM;
		wr.wr.rdma.remote_addr = ld_be64(w + off);
		wr.wr.rdma.rkey = ld_be32(w + off + 8);
		off += SMX_DS;
		break;
	case SMX_OP_ATOMIC_CS:
	case SMX_OP_ATOMIC_FA:
		if (end < off + 2 * SMX_DS)
			goto bad_qp_op;
		wr.opcode = op == SMX_OP_ATOMIC_CS ? IBV_WR_ATOMIC_CMP_AND_SWP :
						     IBV_WR_ATOMIC_FETCH_AND_ADD;
		wr.wr.atomic.remote_addr = ld_be64(w + off);
		wr.wr.atomic.rkey = ld_be32(w + off + 8);
		/* atomic segment: swap_add, then compare */
		if (op == SMX_OP_ATOMIC_CS) {
			wr.wr.atomic.swap = ld_be64(w + off + SMX_DS);
			wr.wr.atomic.compare_add = ld_be64(w + off + SMX_DS + 8);
		} else {
			wr.wr.atomic.compare_add = ld_be64(w + off + SMX_DS);
		}
		off += 2 * SMX_DS;
		break;
	default:
		goto bad_qp_op;
	}
	if (op == SMX_OP_SEND_IMM || op == SMX_OP_RDMA_WRITE_IMM)
		memcpy(&wr.imm_data, w + 12, 4); /* network order, as ibv's */

	/* data: one inline segment, or data segments */
	while (off < end) {
		const uint32_t bc = ld_be32(w + off);

		if (bc & SMX_INLINE) {
			const uint32_t len = bc & ~SMX_INLINE;

			if (inl || nsg)
				goto bad_qp_op;
			/* the length may not reach beyond the WQE's own DS */
			if (len > end - off - 4)
				goto bad_len;
			if (len > SOFT_MAX_INLINE)
				goto bad_len;
			sg[0].addr = (uint64_t)(uintptr_t)(w + off + 4);
			sg[0].length = len;
			sg[0].lkey = 0;
			nsg = len ? 1 : 0;
			inl = true;
			off += (4 + len + SMX_DS - 1) & ~(uint32_t)(SMX_DS - 1);
			continue;
		}
		if (inl || end - off < SMX_DS)
			goto bad_qp_op;
		if (bc) {
			if (nsg == SOFT_MAX_SGE)
				goto bad_qp_op;
			sg[nsg].length = bc;
			sg[nsg].lkey = ld_be32(w + off + 4);
			sg[nsg].addr = ld_be64(w + off + 8);
			nsg++;
		}
		off += SMX_DS;
	}
	if (inl && (op == SMX_OP_RDMA_READ || op == SMX_OP_ATOMIC_CS || op == SMX_OP_ATOMIC_FA))
		goto bad_qp_op;
	wr.wr_id = wr_id_make(idx, op, fm_ce_se & SMX_CTRL_CQ_UPDATE);
	wr.sg_list = sg;
	wr.num_sge = (int)nsg;
	/* Signaled on the soft queue as in the WQE. Unsignaled soft WRs
	 * retire with the next signaled one's completion, as the WQEs do in
	 * the ring: the soft queue (one WR per WQE, at least as many as the
	 * ring has basic blocks) cannot fill before the ring does. */
	wr.send_flags = ((fm_ce_se & SMX_CTRL_CQ_UPDATE) ? IBV_SEND_SIGNALED : 0) |
			(inl ? IBV_SEND_INLINE : 0);
	ret = ql__soft_qp_ops.post_send(&qp->base, &wr, &bad);
	if (soft_likely(!ret))
		return WQE_OK;
	if (ret == -ENOMEM)
		return WQE_WAIT;
	/* -EINVAL: what the QP cannot do (READ or atomics on UC, an atomic
	 * without exactly one data segment) */
bad_qp_op:
	wqe_bad(qp, idx, op, IBV_WC_LOC_QP_OP_ERR);
	return WQE_OK;
bad_len:
	wqe_bad(qp, idx, op, IBV_WC_LOC_LEN_ERR);
	return WQE_OK;
}

/*
 * The WQE with index idx from a BlueFlame buffer, into w (64 bytes); the
 * buffer's number, or -1 when neither holds it whole (the caller reads the
 * ring). The
 * buffers are producer memory like the ring: what is read is copied once
 * and only the copy is parsed (wqe_exec bounds everything by its ds).
 *
 * Why a copy is whole: ql_mlx5_sq_doorbell writes the doorbell record,
 * then the buffer, the first 8 bytes (opcode, index, QP number, ds) last.
 * Those 8 bytes are read first (acquire): seeing idx there, the rest of
 * this WQE is visible. The copy of the rest could only be mixed with a
 * later WQE if the producer had begun to write this buffer again, which it
 * does two doorbells later, after a record covering idx + 3 or more: the
 * record is read again after the copy and must cover idx and at most
 * idx + 2 (the next WQE and no more). Anything else (an index that is not
 * the next, ds 0 or beyond one basic block, a record that moved on) falls
 * back to the ring, which an honest producer wrote before the buffer.
 */
static int bf_take(struct soft_mlx5_qp *m, uint32_t idx, uint8_t *w)
{
	for (uint32_t k = 0; k < 2; k++) {
		const uint32_t b = m->bf_next ^ k;
		const uint8_t *line = m->bf_buf + (size_t)b * SMX_BF_SIZE;
		uint64_t head =
			__atomic_load_n((const uint64_t *)(const void *)line, __ATOMIC_ACQUIRE);
		uint32_t ds, pi;

		memcpy(w, &head, 8);
		if (((ld_be32(w) >> 8) & 0xffff) != idx)
			continue;
		ds = ld_be32(w + 4) & 0x3f;
		if (!ds || ds * SMX_DS > SMX_BF_SIZE)
			return -1; /* an 8-byte doorbell of a longer WQE */
		memcpy(w + 8, line + 8, SMX_BF_SIZE - 8);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		pi = db_load(&m->db[SMX_DB_SQ]);
		if (((pi - idx) & 0xffff) - 1 > 1)
			return -1;
		return (int)b;
	}
	return -1;
}

static int sq_consume(struct soft_qp *qp, struct soft_mlx5_qp *m)
{
	struct soft_cq *scq = qp->send_cq;
	uint32_t pi, pend;
	bool try_bf;
	int n = 0;

	pi = db_load(&m->db[SMX_DB_SQ]) & 0xffff;
	pend = (pi - m->sq_ci) & 0xffff;

	if (!pend)
		return 0;
	try_bf = m->bf_size && pend <= 2;
	/* doorbells of a QP not yet in RTS wait, as on a ConnectX */
	if (qp->state == IBV_QPS_RESET || qp->state == IBV_QPS_INIT || qp->state == IBV_QPS_RTR)
		return 0;
	while (pend && n < SMX_BUDGET) {
		_Alignas(64) uint8_t w[SMX_MAX_WQE_BB * SMX_BB];
		const uint32_t mask = m->sq_cnt - 1;
		uint32_t ds, nbb, idx = m->sq_ci & 0xffff;
		int bf;

		/* in order: nothing new while a WQE waits (RNR, peer not
		 * ready), and only with room for its completion */
		if (qp->sq_exec != qp->sq_pi || scq->tail - scq->head >= (uint64_t)scq->depth)
			break;
		if (pend > m->sq_cnt) {
			/* the doorbell record claims more than the ring holds */
			wqe_bad(qp, idx, 0, IBV_WC_LOC_QP_OP_ERR);
			m->sq_ci = pi;
			n++;
			break;
		}
		/* the last WQE rung (pend 1 or 2: see bf_take) may be in a
		 * BlueFlame buffer; the others are read from the ring, and so
		 * is all of a batch found rung at once (its producer is
		 * rewriting the buffers meanwhile: reading them would only
		 * take their lines away from it) */
		if (try_bf && pend <= 2 && (bf = bf_take(m, idx, w)) >= 0) {
			if (wqe_exec(qp, w, ld_be32(w + 4) & 0x3f, idx) == WQE_WAIT)
				break;
			m->bf_next = (uint32_t)bf ^ 1;
			m->bf_hits++;
			m->sq_ci += 1;
			pend -= 1;
			n++;
			continue;
		}
		memcpy(w, m->sq + (size_t)(m->sq_ci & mask) * SMX_BB, SMX_BB);
		ds = ld_be32(w + 4) & 0x3f;
		nbb = (ds * SMX_DS + SMX_BB - 1) / SMX_BB;
		if (!ds || nbb > pend) {
			/* ds 0, or more than the doorbell covers: the WQE is
			 * refused and so is the rest of what was rung */
			wqe_bad(qp, idx, ld_be32(w) & 0xff, IBV_WC_LOC_QP_OP_ERR);
			m->sq_ci += pend;
			n++;
			break;
		}
		for (uint32_t b = 1; b < nbb; b++)
			memcpy(w + b * SMX_BB, m->sq + (size_t)((m->sq_ci + b) & mask) * SMX_BB,
			       SMX_BB);
		if (wqe_exec(qp, w, ds, idx) == WQE_WAIT)
			break;
		m->sq_ci += nbb;
		pend -= nbb;
		n++;
	}
	return n;
}

/* ---- the engine ------------------------------------------------------------- */

static int qp_poll(struct soft_qp *qp)
{
	struct soft_mlx5_qp *m = qp->mx;
	int work;

	/* The next WQE's line is where it will be (a BlueFlame buffer, or the
	 * ring): fetch it alongside the doorbell record (first read by
	 * rq_refill), not after: the two line transfers overlap. */
	if (m->bf_size)
		__builtin_prefetch(m->bf_buf + (size_t)m->bf_next * SMX_BF_SIZE);
	else
		__builtin_prefetch(m->sq + (size_t)(m->sq_ci & (m->sq_cnt - 1)) * SMX_BB);
	soft_qp_sync_err(qp); /* put in ERR by its peer? */
	/* the send queue first: a doorbell's WQE is on the way to its peer
	 * before the rest of the pass */
	work = sq_consume(qp, m);
	work += rq_refill(qp, m);
	work += cq_drain(qp->send_cq);
	if (qp->recv_cq != qp->send_cq)
		work += cq_drain(qp->recv_cq);
	if (!work) {
		/* a doorbell register write with nothing new in the record is
		 * still activity: stay awake for what follows */
		uint64_t bf =
			__atomic_load_n(m->bf_reg, __ATOMIC_RELAXED) ^
			(m->bf_size ?
				 __atomic_load_n((uint64_t *)(void *)m->bf_buf, __ATOMIC_RELAXED) ^
					 __atomic_load_n(
						 (uint64_t *)(void *)(m->bf_buf + SMX_BF_SIZE),
						 __ATOMIC_RELAXED) :
				 0);

		if (bf != m->bf_last) {
			m->bf_last = bf;
			work = 1;
		}
	}
	return work;
}

static int engine_poll(struct soft_engine *eng)
{
	int work = 0;

	for (uint32_t i = 0; i < eng->nqps; i++)
		work += qp_poll(eng->qps[i]);
	return work;
}

/* Caller progress: one pass of the engine in the calling thread, unless
 * another caller (or a parker) is at it. */
int ql__soft_mlx5_progress(struct soft_device *dev)
{
	struct soft_engine *eng = __atomic_load_n(&dev->eng, __ATOMIC_ACQUIRE);
	int work;

	if (!eng || !(eng->caller || eng->manual))
		return 0;
	if (__atomic_exchange_n(&eng->busy, 1, __ATOMIC_ACQUIRE))
		return 0;
	work = engine_poll(eng);
	__atomic_store_n(&eng->busy, 0, __ATOMIC_RELEASE);
	return work;
}

/* What the views of a caller-progress device carry (qlink/mlx5.h). */
static int view_progress(void *ctx)
{
	return ql__soft_mlx5_progress(ctx);
}

/* ql_cq_poll of an ordinary CQ of a device whose engine runs in the
 * callers: the engine's pass first (a receive the mlx5 side rang is then
 * there for the SEND this poll retries). */
static int poll_progress(struct ql_cq *c, int n, struct ibv_wc *wc)
{
	ql__soft_mlx5_progress(((struct soft_cq *)c)->dev);
	return ql__soft_cq_ops.poll(c, n, wc);
}

const struct ql__cq_ops ql__soft_cq_ops_progress = {
	.poll = poll_progress,
};

/*
 * Idle policy (docs/soft-provider.md): spin with a pause for ENG_SPIN empty
 * polls (tens of microseconds: a doorbell within that is seen at once), then
 * yield the CPU for ENG_YIELD more (about a millisecond on an idle core;
 * other threads run first on a busy one), then sleep ENG_SLEEP_NS between
 * polls: a doorbell rung after a long idle waits at most that long. A
 * doorbell register write cannot wake a sleeping thread (a GPU writes it;
 * no system call), so a bounded sleep is the floor.
 */
#define ENG_SPIN 4096u
#define ENG_YIELD 2048u
#define ENG_SLEEP_NS 50000L

static void idle_backoff(unsigned *idle)
{
	if (*idle < ENG_SPIN) {
		cpu_relax();
		(*idle)++;
	} else if (*idle < ENG_SPIN + ENG_YIELD) {
		sched_yield();
		(*idle)++;
	} else {
		struct timespec ts = { 0, ENG_SLEEP_NS };

		nanosleep(&ts, NULL);
	}
}

static void *engine_main(void *arg)
{
	struct soft_engine *eng = arg;
	unsigned idle = 0;

	pthread_setname_np(pthread_self(), "qlink-mlx5");
	while (!atomic_load_explicit(&eng->stop, memory_order_acquire)) {
		if (soft_unlikely(atomic_load_explicit(&eng->park_req, memory_order_acquire))) {
			atomic_store_explicit(&eng->parked, 1, memory_order_release);
			while (atomic_load_explicit(&eng->park_req, memory_order_acquire) &&
			       !atomic_load_explicit(&eng->stop, memory_order_acquire))
				sched_yield();
			atomic_store_explicit(&eng->parked, 0, memory_order_release);
			idle = 0;
			continue;
		}
		if (engine_poll(eng)) {
			idle = 0;
			continue;
		}
		idle_backoff(&idle);
	}
	return NULL;
}

/* ---- test hooks (internal: tests link the static library) --------------- */

/* No engine thread for this device's mlx5 QPs, and no progress in the
 * views even in caller mode: the caller drives the engine with
 * ql__soft_mlx5_engine_poll (the strict hot-path proof runs it under a
 * system call filter; tests rewrite a BlueFlame line before the engine
 * reads it). Before the first mlx5-mode QP is made. */
SOFT_HIDDEN int ql__soft_mlx5_engine_manual(struct ql_device *d);
int ql__soft_mlx5_engine_manual(struct ql_device *d)
{
	struct soft_engine *eng = engine_get((struct soft_device *)d);

	if (!eng)
		return -ENOMEM;
	if (eng->running)
		return -EBUSY;
	eng->manual = true;
	return 0;
}

/* One pass of the engine over its QPs; > 0 if it did anything. */
SOFT_HIDDEN int ql__soft_mlx5_engine_poll(struct ql_device *d);
int ql__soft_mlx5_engine_poll(struct ql_device *d)
{
	return ql__soft_mlx5_progress((struct soft_device *)d);
}

/* WQEs the engine took from a QP's BlueFlame buffers (not the ring). */
SOFT_HIDDEN uint64_t ql__soft_mlx5_bf_hits(struct ql_qp *q);
uint64_t ql__soft_mlx5_bf_hits(struct ql_qp *q)
{
	struct soft_mlx5_qp *m = ((struct soft_qp *)q)->mx;

	return m ? m->bf_hits : 0;
}

/* Whether the device's engine thread runs (started with the first
 * mlx5-mode QP, stopped with the last). */
SOFT_HIDDEN bool ql__soft_mlx5_engine_running(struct ql_device *d);
bool ql__soft_mlx5_engine_running(struct ql_device *d)
{
	struct soft_engine *eng = ((struct soft_device *)d)->eng;

	return eng && eng->running;
}

/* ---- the views qlink/mlx5.h drives (ql_qp_mlx5, ql_cq_mlx5) ---------- */

int ql__soft_mlx5_qp_view(struct ql_qp *q, struct ql_mlx5_qp *out)
{
	struct soft_qp *qp = (struct soft_qp *)q;
	struct soft_mlx5_qp *m = qp->mx;

	if (!m)
		return ql_error_set(-EOPNOTSUPP, "ql_qp_mlx5: the QP has no mlx5 queues");
	memset(out, 0, sizeof(*out));
	out->qpn = q->qp_num;
	out->sq.buf = m->sq;
	out->sq.wqe_cnt = m->sq_cnt;
	out->sq.stride = SMX_BB;
	out->sq.dbrec = &m->db[SMX_DB_SQ];
	out->rq.buf = m->rq;
	out->rq.wqe_cnt = m->rq_cnt;
	out->rq.stride = m->rq_stride;
	out->rq.dbrec = &m->db[SMX_DB_RQ];
	/* the counts so far (0 for a fresh or reset QP): the records hold
	 * their low 16 bits, which is all the queues need */
	out->sq.head = out->sq.tail = db_load(&m->db[SMX_DB_SQ]) & 0xffff;
	out->rq.head = out->rq.tail = db_load(&m->db[SMX_DB_RQ]) & 0xffff;
	if (qp->dev->eng->caller && !qp->dev->eng->manual) {
		out->progress = view_progress;
		out->progress_ctx = qp->dev;
	}
	if (m->bf_size) {
		/* BlueFlame: the producer's next write goes to buffer bf_next
		 * (0 after creation or a reset) */
		out->bf_reg = m->bf_buf;
		out->bf_size = m->bf_size;
		out->bf_offset = m->bf_next * m->bf_size;
	} else {
		out->bf_reg = m->bf_reg;
		out->bf_size = 0;
		out->bf_offset = 0;
	}
	return 0;
}

int ql__soft_mlx5_cq_view(struct ql_cq *c, struct ql_mlx5_cq *out)
{
	struct soft_cq *cq = (struct soft_cq *)c;
	struct soft_mlx5_cq *x = cq->mx;

	if (!x)
		return ql_error_set(-EOPNOTSUPP, "ql_cq_mlx5: the CQ has no mlx5 ring");
	memset(out, 0, sizeof(*out));
	out->cqn = (uint32_t)((uintptr_t)x->buf >> 12) & 0xffffff; /* a name, no more */
	out->buf = x->buf;
	out->cqe_cnt = x->cnt;
	out->cqe_size = SMX_CQE;
	out->dbrec = x->db;
	out->cons_index = db_load(&x->db[SMX_DB_CQ_CI]) & 0xffffff;
	if (cq->dev->eng->caller && !cq->dev->eng->manual) {
		out->progress = view_progress;
		out->progress_ctx = cq->dev;
	}
	return 0;
}
