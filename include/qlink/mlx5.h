/* SPDX-License-Identifier: MIT */
/*
 * mlx5: build work requests and poll completions in the ConnectX (mlx5)
 * queue format, from the CPU or from a GPU, with one piece of code.
 *
 * A QP or CQ created with QL_QP_INIT_MLX5 / QL_CQ_INIT_MLX5 (qlink/verbs.h)
 * is driven through this header instead of ql_qp_post_send/ql_cq_poll:
 * ql_qp_mlx5()/ql_cq_mlx5() hand out plain-data views of its queues (buffer,
 * size, doorbell record, doorbell register) and the functions below write
 * work-queue entries (WQEs), ring the doorbell and read completion-queue
 * entries (CQEs) in them. On an ibv:// device whose provider is mlx5 the
 * views are the ConnectX's own queues (mlx5dv_init_obj); on the soft NIC
 * they are memory the soft NIC's engine reads, as a ConnectX would.
 *
 * Byte layouts are those of the ConnectX programmer's reference manual and
 * rdma-core's <infiniband/mlx5dv.h> (multi-byte fields big-endian); the
 * header does not include mlx5dv.h (it must build where rdma-core's mlx5
 * headers are absent, and under nvcc), tests/test_mlx5_layout.c proves the
 * two agree. docs/mlx5.md has the tables, the ordering rules and what the
 * ConnectX and the soft engine do with each field.
 *
 * Everything here is `static inline` and marked QL_HD: `__host__
 * __device__` under nvcc, nothing for a C compiler. No allocation, locks,
 * syscalls or logging. Threading: one thread drives one queue at a time,
 * as with the verbs API.
 */
#ifndef QLINK_MLX5_H
#define QLINK_MLX5_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__CUDACC__)
#define QL_HD __host__ __device__
#else
#define QL_HD
#endif

/* ---- constants (values of the PRM / mlx5dv.h) -------------------------- */

#define QL_MLX5_SEND_WQE_BB 64 /* send queue basic block */
#define QL_MLX5_SEND_WQE_SHIFT 6
#define QL_MLX5_SEG_SIZE 16 /* every segment is a multiple of 16 bytes; ds counts them */
#define QL_MLX5_MAX_DS 63   /* ctrl.ds is 6 bits: a WQE is at most 1008 bytes */
#define QL_MLX5_INLINE_SEG 0x80000000u
#define QL_MLX5_INVALID_LKEY 0x100u /* ends a receive WQE's scatter list */

/* ctrl segment fm_ce_se byte */
#define QL_MLX5_WQE_CTRL_SOLICITED 0x02 /* SE: solicited event */
#define QL_MLX5_WQE_CTRL_CQ_UPDATE 0x08 /* CE = 2: signaled, write a CQE */
#define QL_MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE 0x20
#define QL_MLX5_WQE_CTRL_FENCE 0x80

/* send WQE opcodes (ctrl segment, low byte of opmod_idx_opcode) */
#define QL_MLX5_OPCODE_NOP 0x00
#define QL_MLX5_OPCODE_SEND_INVAL 0x01
#define QL_MLX5_OPCODE_RDMA_WRITE 0x08
#define QL_MLX5_OPCODE_RDMA_WRITE_IMM 0x09
#define QL_MLX5_OPCODE_SEND 0x0a
#define QL_MLX5_OPCODE_SEND_IMM 0x0b
#define QL_MLX5_OPCODE_RDMA_READ 0x10
#define QL_MLX5_OPCODE_ATOMIC_CS 0x11
#define QL_MLX5_OPCODE_ATOMIC_FA 0x12

/* CQE opcodes (op_own >> 4) */
#define QL_MLX5_CQE_REQ 0
#define QL_MLX5_CQE_RESP_WR_IMM 1
#define QL_MLX5_CQE_RESP_SEND 2
#define QL_MLX5_CQE_RESP_SEND_IMM 3
#define QL_MLX5_CQE_RESP_SEND_INV 4
#define QL_MLX5_CQE_RESIZE_CQ 5
#define QL_MLX5_CQE_SIG_ERR 12
#define QL_MLX5_CQE_REQ_ERR 13
#define QL_MLX5_CQE_RESP_ERR 14
#define QL_MLX5_CQE_INVALID 15
#define QL_MLX5_CQE_OWNER_MASK 1

/* CQE format (op_own bits 3:2): where a small received payload went */
#define QL_MLX5_CQE_FORMAT_NORMAL 0
#define QL_MLX5_CQE_FORMAT_INLINE_32 1 /* data in the CQE's first 32 bytes */
#define QL_MLX5_CQE_FORMAT_INLINE_64 2 /* data in the 64 bytes before (128-byte CQEs) */
#define QL_MLX5_CQE_FORMAT_COMPRESSED 3

/* error CQE syndromes */
#define QL_MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR 0x01
#define QL_MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR 0x02
#define QL_MLX5_CQE_SYNDROME_LOCAL_PROT_ERR 0x04
#define QL_MLX5_CQE_SYNDROME_WR_FLUSH_ERR 0x05
#define QL_MLX5_CQE_SYNDROME_MW_BIND_ERR 0x06
#define QL_MLX5_CQE_SYNDROME_BAD_RESP_ERR 0x10
#define QL_MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR 0x11
#define QL_MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR 0x12
#define QL_MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR 0x13
#define QL_MLX5_CQE_SYNDROME_REMOTE_OP_ERR 0x14
#define QL_MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR 0x15
#define QL_MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR 0x16
#define QL_MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR 0x22

/* doorbell record indices of a QP's two-word record (ConnectX) */
#define QL_MLX5_RCV_DBR 0
#define QL_MLX5_SND_DBR 1

/* ---- segment layouts (16 bytes each, fields big-endian) --------------- */

/* 0: opmod(8) | wqe_index(16) | opcode(8); 4: qpn(24) | ds(8, 6 used);
 * 8: signature; 9-10: dci stream channel id; 11: fm_ce_se; 12: imm */
struct ql_mlx5_ctrl_seg {
	uint32_t opmod_idx_opcode;
	uint32_t qpn_ds;
	uint8_t signature;
	uint8_t dci_stream_channel_id[2];
	uint8_t fm_ce_se;
	uint32_t imm;
};

struct ql_mlx5_raddr_seg {
	uint64_t raddr;
	uint32_t rkey;
	uint32_t reserved;
};

struct ql_mlx5_data_seg {
	uint32_t byte_count;
	uint32_t lkey;
	uint64_t addr;
};

/* followed by the data itself, the whole padded to 16 bytes */
struct ql_mlx5_inl_data_seg {
	uint32_t byte_count; /* length | QL_MLX5_INLINE_SEG */
};

struct ql_mlx5_atomic_seg {
	uint64_t swap_add; /* CAS: the swap value; FA: the addend */
	uint64_t compare;  /* CAS: the compare value; FA: 0 */
};

/* The 64-byte CQE (for 128-byte CQEs, the second half of each entry). */
struct ql_mlx5_cqe64 {
	uint8_t rsvd0[2];
	uint16_t wqe_id;
	uint8_t rsvd4[13];
	uint8_t ml_path;
	uint8_t rsvd18[4];
	uint16_t slid;
	uint32_t flags_rqpn;
	uint8_t hds_ip_ext;
	uint8_t l4_hdr_type_etc;
	uint16_t vlan_info;
	uint32_t srqn_uidx;	 /* 32 */
	uint32_t imm_inval_pkey; /* 36: immediate (RESP_*_IMM) */
	uint8_t app;
	uint8_t app_op;
	uint16_t app_info;
	uint32_t byte_cnt;     /* 44 */
	uint64_t timestamp;    /* 48 */
	uint32_t sop_drop_qpn; /* 56: REQ: send opcode(8) | qpn(24) */
	uint16_t wqe_counter;  /* 60 */
	uint8_t signature;
	uint8_t op_own; /* 63: opcode(4) | format(2) | se(1) | owner(1) */
};

/* The error CQE: the same 64 bytes read differently. */
struct ql_mlx5_err_cqe {
	uint8_t rsvd0[32];
	uint32_t srqn;
	uint8_t rsvd1[18];
	uint8_t vendor_err_synd; /* 54 */
	uint8_t syndrome;	 /* 55 */
	uint32_t s_wqe_opcode_qpn;
	uint16_t wqe_counter;
	uint8_t signature;
	uint8_t op_own;
};

/* ---- queue views (filled by ql_qp_mlx5 / ql_cq_mlx5, qlink/verbs.h) --- */

struct ql_mlx5_wq {
	void *buf;
	uint32_t wqe_cnt;	  /* entries (SQ: basic blocks); a power of two */
	uint32_t stride;	  /* bytes per entry; SQ: 64 (QL_MLX5_SEND_WQE_BB) */
	volatile uint32_t *dbrec; /* big-endian counter (low 16 bits meaningful) */
	uint32_t head;		  /* producer count (SQ: in basic blocks) */
	uint32_t tail;		  /* consumer count: advanced by the *_complete calls */
};

struct ql_mlx5_qp {
	uint32_t qpn;
	struct ql_mlx5_wq sq;
	struct ql_mlx5_wq rq;
	void *bf_reg;	  /* doorbell / BlueFlame register */
	uint32_t bf_size; /* 0: no BlueFlame, 8-byte doorbell write only */
	uint32_t bf_offset;
	/* alternating BlueFlame buffer toggle */ /* Host code only: on a device whose work runs in the caller (the soft
	 * NIC in caller progress mode, docs/progress.md) the views carry the
	 * device's progress call, which ql_mlx5_sq_doorbell and an empty
	 * ql_mlx5_cq_poll run (bounded; no allocation, lock or system call);
	 * NULL elsewhere (a ConnectX, the soft NIC's engine thread). Device
	 * (GPU) code never calls it: a GPU driving a caller-mode soft NIC
	 * needs a host thread calling ql_device_progress. */
	int (*progress)(void *ctx);
	void *progress_ctx;
};

struct ql_mlx5_cq {
	uint32_t cqn;
	void *buf;
	uint32_t cqe_cnt;	  /* a power of two */
	uint32_t cqe_size;	  /* 64 (or 128: the CQE is the entry's second half) */
	volatile uint32_t *dbrec; /* [0]: consumer index, big-endian, 24 bits */
	uint32_t cons_index; /* Host code only: on a device whose work runs in the caller (the soft
	 * NIC in caller progress mode, docs/progress.md) the views carry the
	 * device's progress call, which ql_mlx5_sq_doorbell and an empty
	 * ql_mlx5_cq_poll run (bounded; no allocation, lock or system call);
	 * NULL elsewhere (a ConnectX, the soft NIC's engine thread). Device
	 * (GPU) code never calls it: a GPU driving a caller-mode soft NIC
	 * needs a host thread calling ql_device_progress. */
	int (*progress)(void *ctx);
	void *progress_ctx;
};

/* A scatter/gather element for the posting helpers. */
struct ql_mlx5_sge {
	uint64_t addr;
	uint32_t length;
	uint32_t lkey;
};

/* What ql_mlx5_cq_poll read from one CQE, in host byte order. */
struct ql_mlx5_cqe_info {
	uint8_t opcode;		 /* QL_MLX5_CQE_REQ, _RESP_SEND, ..., _REQ_ERR, _RESP_ERR */
	uint8_t format;		 /* QL_MLX5_CQE_FORMAT_* (see inline_data) */
	uint8_t syndrome;	 /* error CQEs: QL_MLX5_CQE_SYNDROME_*; 0 otherwise */
	uint8_t vendor_syndrome; /* error CQEs: the vendor's; 0 otherwise */
	uint8_t send_opcode;	 /* REQ and REQ_ERR: the WQE's opcode; 0 otherwise */
	uint8_t owner;		 /* the owner bit as found (tests, diagnostics) */
	uint16_t wqe_counter;	 /* REQ: the SQ WQE's index; RESP: the RQ WQE's */
	uint32_t byte_cnt;	 /* RESP: bytes received; REQ of READ/atomic: bytes read */
	uint32_t imm;		 /* RESP_SEND_IMM / RESP_WR_IMM: the immediate */
	uint32_t qpn;
	uint64_t timestamp; /* raw device clock (0 where the device writes none) */
	/* format INLINE_32/INLINE_64: the received bytes (byte_cnt of them) are
	 * here and not in the receive buffer; valid until the CQE slot is
	 * reused (cqe_cnt more completions). NULL otherwise. */
	const void *inline_data;
};

/* ---- byte order and barriers -------------------------------------------- */

static inline QL_HD uint32_t ql_mlx5_bswap32(uint32_t v)
{
	return (v >> 24) | ((v >> 8) & 0xff00u) | ((v << 8) & 0xff0000u) | (v << 24);
}

static inline QL_HD uint16_t ql_mlx5_bswap16(uint16_t v)
{
	return (uint16_t)((v >> 8) | (v << 8));
}

static inline QL_HD uint64_t ql_mlx5_bswap64(uint64_t v)
{
	return ((uint64_t)ql_mlx5_bswap32((uint32_t)v) << 32) |
	       ql_mlx5_bswap32((uint32_t)(v >> 32));
}

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define ql_mlx5_htobe16(v) ((uint16_t)(v))
#define ql_mlx5_htobe32(v) ((uint32_t)(v))
#define ql_mlx5_htobe64(v) ((uint64_t)(v))
#else
#define ql_mlx5_htobe16(v) ql_mlx5_bswap16((uint16_t)(v))
#define ql_mlx5_htobe32(v) ql_mlx5_bswap32((uint32_t)(v))
#define ql_mlx5_htobe64(v) ql_mlx5_bswap64((uint64_t)(v))
#endif
#define ql_mlx5_be16toh(v) ql_mlx5_htobe16(v)
#define ql_mlx5_be32toh(v) ql_mlx5_htobe32(v)
#define ql_mlx5_be64toh(v) ql_mlx5_htobe64(v)

/*
 * Ordering between the producer and the device (docs/mlx5.md, "Ordering"):
 *   ql_mlx5_wmb        stores to queue memory before later stores to queue
 *                      memory (WQE before doorbell record, CQE reads done
 *                      before the CQ's consumer index is given back);
 *   ql_mlx5_rmb        a CQE's owner byte before its other bytes;
 *   ql_mlx5_mmio_fence the doorbell record before the doorbell register
 *                      write, and that write out of the write-combining
 *                      buffer (BlueFlame) before the next one.
 * On the GPU every one is __threadfence_system(): the queues live in host
 * (or NIC) memory that the GPU writes over PCIe, and that fence orders the
 * thread's writes as seen by every observer in the system, the NIC included.
 * x86 orders stores to write-back memory and loads after loads already
 * (TSO), as rdma-core's udma barriers assume, so there a compiler barrier is
 * enough, but write-combined doorbell stores need sfence. aarch64 needs
 * outer-shareable barriers: the device is not in the inner domain.
 */
static inline QL_HD void ql_mlx5_wmb(void)
{
#if defined(__CUDA_ARCH__)
	__threadfence_system();
#elif defined(__x86_64__) || defined(__i386__)
	__asm__ __volatile__("" ::: "memory");
#elif defined(__aarch64__)
	__asm__ __volatile__("dmb osh" ::: "memory");
#else
	__sync_synchronize();
#endif
}

static inline QL_HD void ql_mlx5_rmb(void)
{
#if defined(__CUDA_ARCH__)
	__threadfence_system();
#elif defined(__x86_64__) || defined(__i386__)
	__asm__ __volatile__("" ::: "memory");
#elif defined(__aarch64__)
	__asm__ __volatile__("dmb oshld" ::: "memory");
#else
	__sync_synchronize();
#endif
}

static inline QL_HD void ql_mlx5_mmio_fence(void)
{
#if defined(__CUDA_ARCH__)
	__threadfence_system();
#elif defined(__x86_64__) || defined(__i386__)
	__asm__ __volatile__("sfence" ::: "memory");
#elif defined(__aarch64__)
	__asm__ __volatile__("dsb st" ::: "memory");
#else
	__sync_synchronize();
#endif
}

/* Aligned big-endian stores and loads into queue memory. */
static inline QL_HD void ql_mlx5_st32(void *p, uint32_t v)
{
	*(volatile uint32_t *)p = ql_mlx5_htobe32(v);
}

static inline QL_HD void ql_mlx5_st64(void *p, uint64_t v)
{
	*(volatile uint64_t *)p = ql_mlx5_htobe64(v);
}

static inline QL_HD uint32_t ql_mlx5_ld32(const void *p)
{
	return ql_mlx5_be32toh(*(const volatile uint32_t *)p);
}

static inline QL_HD uint16_t ql_mlx5_ld16(const void *p)
{
	return ql_mlx5_be16toh(*(const volatile uint16_t *)p);
}

static inline QL_HD uint64_t ql_mlx5_ld64(const void *p)
{
	return ql_mlx5_be64toh(*(const volatile uint64_t *)p);
}

/* ---- segment builders ---------------------------------------------------- */

/* The control segment: opcode, WQE index (the SQ producer count in basic
 * blocks, 16 bits), QP number, size in 16-byte units (ds, ctrl included),
 * fm_ce_se flags and the immediate (host order; stored big-endian, so the
 * peer's ibv_wc.imm_data is htonl(imm), as with ibv_send_wr.imm_data). */
static inline QL_HD void ql_mlx5_ctrl_seg(void *seg, uint8_t opmod, uint8_t opcode,
					  uint16_t wqe_idx, uint32_t qpn, uint8_t ds,
					  uint8_t fm_ce_se, uint32_t imm)
{
	uint8_t *p = (uint8_t *)seg;

	ql_mlx5_st32(p, ((uint32_t)opmod << 24) | ((uint32_t)wqe_idx << 8) | opcode);
	ql_mlx5_st32(p + 4, (qpn << 8) | (ds & 0x3f));
	/* signature 0, dci stream channel 0, then fm_ce_se: one word */
	ql_mlx5_st32(p + 8, fm_ce_se);
	ql_mlx5_st32(p + 12, imm);
}

static inline QL_HD void ql_mlx5_raddr_seg(void *seg, uint64_t raddr, uint32_t rkey)
{
	uint8_t *p = (uint8_t *)seg;

	ql_mlx5_st64(p, raddr);
	ql_mlx5_st32(p + 8, rkey);
	ql_mlx5_st32(p + 12, 0);
}

static inline QL_HD void ql_mlx5_data_seg(void *seg, uint64_t addr, uint32_t length, uint32_t lkey)
{
	uint8_t *p = (uint8_t *)seg;

	ql_mlx5_st32(p, length);
	ql_mlx5_st32(p + 4, lkey);
	ql_mlx5_st64(p + 8, addr);
}

static inline QL_HD void ql_mlx5_atomic_seg(void *seg, uint64_t swap_add, uint64_t compare)
{
	uint8_t *p = (uint8_t *)seg;

	ql_mlx5_st64(p, swap_add);
	ql_mlx5_st64(p + 8, compare);
}

/* 16-byte units an inline segment of `length` bytes takes (header
 * included, padded to 16). */
static inline QL_HD uint32_t ql_mlx5_inline_ds(uint32_t length)
{
	return (4 + length + 15) / 16;
}

/* ---- send queue ---------------------------------------------------------- */

/* The WQE at producer count `idx` (basic blocks). */
static inline QL_HD void *ql_mlx5_sq_wqe(const struct ql_mlx5_wq *sq, uint32_t idx)
{
	return (uint8_t *)sq->buf + (size_t)(idx & (sq->wqe_cnt - 1)) * QL_MLX5_SEND_WQE_BB;
}

/* The 16-byte unit `n` of the WQE at `idx`. A WQE longer than one basic
 * block that starts in the ring's last blocks continues at the ring's
 * start: the device reads a WQE basic block by basic block, modulo the
 * ring (PRM), so the wrap falls on a block boundary and no segment is ever
 * split by it; only inline data, which is not segment-aligned, is copied
 * in two parts (ql_mlx5_inline_seg). */
static inline QL_HD void *ql_mlx5_sq_seg(const struct ql_mlx5_wq *sq, uint32_t idx, uint32_t n)
{
	uint32_t size = sq->wqe_cnt * QL_MLX5_SEND_WQE_BB;
	uint32_t off = ((idx & (sq->wqe_cnt - 1)) * QL_MLX5_SEND_WQE_BB + n * QL_MLX5_SEG_SIZE) &
		       (size - 1);

	return (uint8_t *)sq->buf + off;
}

/* Write an inline data segment at unit `n` of the WQE at `idx`: the
 * header, `length` bytes of `data`, zeros up to the next 16 bytes (the
 * device ignores the padding; zeros make the WQE reproducible). Returns the
 * 16-byte units taken. */
static inline QL_HD uint32_t ql_mlx5_inline_seg(const struct ql_mlx5_wq *sq, uint32_t idx,
						uint32_t n, const void *data, uint32_t length)
{
	uint32_t units = ql_mlx5_inline_ds(length);
	uint8_t *ring = (uint8_t *)sq->buf;
	uint32_t size = sq->wqe_cnt * QL_MLX5_SEND_WQE_BB;
	uint32_t off = (uint32_t)((uint8_t *)ql_mlx5_sq_seg(sq, idx, n) - ring);
	const uint8_t *src = (const uint8_t *)data;
	uint32_t i;

	ql_mlx5_st32(ring + off, length | QL_MLX5_INLINE_SEG);
	off += 4;
	for (i = 0; i < units * QL_MLX5_SEG_SIZE - 4; i++) {
		ring[off & (size - 1)] = i < length ? src[i] : 0;
		off++;
	}
	return units;
}

/* Basic blocks free in the send queue. */
static inline QL_HD uint32_t ql_mlx5_sq_room(const struct ql_mlx5_wq *sq)
{
	return sq->wqe_cnt - (sq->head - sq->tail);
}

/*
 * One send work request for ql_mlx5_sq_post. What is used depends on the
 * opcode:
 *   SEND, SEND_IMM          sge (or inline_data), imm
 *   RDMA_WRITE(_IMM)        sge (or inline_data), raddr, rkey, imm
 *   RDMA_READ               sge (where the data lands), raddr, rkey
 *   ATOMIC_CS, ATOMIC_FA    sge (8 bytes: the old value), raddr, rkey,
 *                           swap_add, compare
 * fm_ce_se: QL_MLX5_WQE_CTRL_CQ_UPDATE for a signaled WR, _SOLICITED,
 * _FENCE.
 */
struct ql_mlx5_wr {
	uint8_t opcode; /* QL_MLX5_OPCODE_* */
	uint8_t fm_ce_se;
	uint32_t imm; /* host order */
	const struct ql_mlx5_sge *sge;
	uint32_t num_sge;
	const void *inline_data; /* non-NULL: send these bytes inline (sge unused) */
	uint32_t inline_len;
	uint64_t raddr;
	uint32_t rkey;
	uint64_t swap_add;
	uint64_t compare;
};

/* Write one WQE at the SQ's producer count and advance it (no doorbell).
 * *ctrl (if not NULL) gets the WQE's control segment for
 * ql_mlx5_sq_doorbell. Returns 0, -EINVAL (opcode, sizes: the WQE must
 * fit in QL_MLX5_MAX_DS units; atomics take one 8-byte sge and no inline
 * data; READ no inline data) or -ENOMEM (not enough free basic blocks:
 * ql_mlx5_sq_complete frees them). */
static inline QL_HD int ql_mlx5_sq_post(struct ql_mlx5_qp *qp, const struct ql_mlx5_wr *wr,
					void **ctrl)
{
	struct ql_mlx5_wq *sq = &qp->sq;
	uint32_t idx = sq->head;
	uint32_t ds = 1, nbb, i;
	int has_raddr = 0, atomic = 0;

	switch (wr->opcode) {
	case QL_MLX5_OPCODE_SEND:
	case QL_MLX5_OPCODE_SEND_IMM:
		break;
	case QL_MLX5_OPCODE_RDMA_WRITE:
	case QL_MLX5_OPCODE_RDMA_WRITE_IMM:
		has_raddr = 1;
		break;
	case QL_MLX5_OPCODE_RDMA_READ:
		has_raddr = 1;
		if (wr->inline_data)
			return -EINVAL;
		break;
	case QL_MLX5_OPCODE_ATOMIC_CS:
	case QL_MLX5_OPCODE_ATOMIC_FA:
		has_raddr = 1;
		atomic = 1;
		if (wr->inline_data || wr->num_sge != 1 || wr->sge[0].length != 8)
			return -EINVAL;
		break;
	default:
		return -EINVAL;
	}
	ds += (uint32_t)has_raddr + (uint32_t)atomic;
	if (wr->inline_data) {
		if (wr->inline_len > QL_MLX5_MAX_DS * QL_MLX5_SEG_SIZE)
			return -EINVAL;
		ds += ql_mlx5_inline_ds(wr->inline_len);
	} else {
		if (wr->num_sge && !wr->sge)
			return -EINVAL;
		ds += wr->num_sge;
	}
	if (ds > QL_MLX5_MAX_DS)
		return -EINVAL;
	nbb = (ds * QL_MLX5_SEG_SIZE + QL_MLX5_SEND_WQE_BB - 1) / QL_MLX5_SEND_WQE_BB;
	if (nbb > ql_mlx5_sq_room(sq))
		return -ENOMEM;

	i = 1;
	if (has_raddr)
		ql_mlx5_raddr_seg(ql_mlx5_sq_seg(sq, idx, i++), wr->raddr, wr->rkey);
	if (atomic)
		ql_mlx5_atomic_seg(ql_mlx5_sq_seg(sq, idx, i++), wr->swap_add,
				   wr->opcode == QL_MLX5_OPCODE_ATOMIC_CS ? wr->compare : 0);
	if (wr->inline_data) {
		ql_mlx5_inline_seg(sq, idx, i, wr->inline_data, wr->inline_len);
	} else {
		uint32_t k;

		for (k = 0; k < wr->num_sge; k++)
			ql_mlx5_data_seg(ql_mlx5_sq_seg(sq, idx, i++), wr->sge[k].addr,
					 wr->sge[k].length, wr->sge[k].lkey);
	}
	/* the control segment last: a device that prefetches sees a WQE
	 * whose first word changed only once the rest is in place */
	ql_mlx5_ctrl_seg(ql_mlx5_sq_seg(sq, idx, 0), 0, wr->opcode, (uint16_t)idx, qp->qpn,
			 (uint8_t)ds, wr->fm_ce_se,
			 wr->opcode == QL_MLX5_OPCODE_SEND_IMM ||
					 wr->opcode == QL_MLX5_OPCODE_RDMA_WRITE_IMM ?
				 wr->imm :
				 0);
	sq->head = idx + nbb;
	if (ctrl)
		*ctrl = ql_mlx5_sq_wqe(sq, idx);
	return 0;
}

/* The common work requests, one buffer each. */
static inline QL_HD int ql_mlx5_sq_post_send(struct ql_mlx5_qp *qp, uint64_t laddr, uint32_t length,
					     uint32_t lkey, uint8_t fm_ce_se, void **ctrl)
{
	struct ql_mlx5_sge sge = { laddr, length, lkey };
	struct ql_mlx5_wr wr = { QL_MLX5_OPCODE_SEND, fm_ce_se, 0, &sge, 1, 0, 0, 0, 0, 0, 0 };

	return ql_mlx5_sq_post(qp, &wr, ctrl);
}

static inline QL_HD int ql_mlx5_sq_post_send_imm(struct ql_mlx5_qp *qp, uint64_t laddr,
						 uint32_t length, uint32_t lkey, uint32_t imm,
						 uint8_t fm_ce_se, void **ctrl)
{
	struct ql_mlx5_sge sge = { laddr, length, lkey };
	struct ql_mlx5_wr wr = { QL_MLX5_OPCODE_SEND_IMM, fm_ce_se, imm, &sge, 1, 0, 0, 0, 0, 0, 0 };

	return ql_mlx5_sq_post(qp, &wr, ctrl);
}

static inline QL_HD int ql_mlx5_sq_post_send_inline(struct ql_mlx5_qp *qp, const void *data,
						    uint32_t length, uint8_t fm_ce_se, void **ctrl)
{
	struct ql_mlx5_wr wr = { QL_MLX5_OPCODE_SEND, fm_ce_se, 0, 0, 0, data, length, 0, 0, 0, 0 };

	return ql_mlx5_sq_post(qp, &wr, ctrl);
}

static inline QL_HD int ql_mlx5_sq_post_write(struct ql_mlx5_qp *qp, uint64_t laddr,
					      uint32_t length, uint32_t lkey, uint64_t raddr,
					      uint32_t rkey, uint8_t fm_ce_se, void **ctrl)
{
	struct ql_mlx5_sge sge = { laddr, length, lkey };
	struct ql_mlx5_wr wr = {
		QL_MLX5_OPCODE_RDMA_WRITE, fm_ce_se, 0, &sge, 1, 0, 0, raddr, rkey, 0, 0
	};

	return ql_mlx5_sq_post(qp, &wr, ctrl);
}

static inline QL_HD int ql_mlx5_sq_post_write_imm(struct ql_mlx5_qp *qp, uint64_t laddr,
						  uint32_t length, uint32_t lkey, uint64_t raddr,
						  uint32_t rkey, uint32_t imm, uint8_t fm_ce_se,
						  void **ctrl)
{
	struct ql_mlx5_sge sge = { laddr, length, lkey };
	struct ql_mlx5_wr wr = {
		QL_MLX5_OPCODE_RDMA_WRITE_IMM, fm_ce_se, imm, &sge, 1, 0, 0, raddr, rkey, 0, 0
	};

	return ql_mlx5_sq_post(qp, &wr, ctrl);
}

static inline QL_HD int ql_mlx5_sq_post_write_inline(struct ql_mlx5_qp *qp, const void *data,
						     uint32_t length, uint64_t raddr, uint32_t rkey,
						     uint8_t fm_ce_se, void **ctrl)
{
	struct ql_mlx5_wr wr = {
		QL_MLX5_OPCODE_RDMA_WRITE, fm_ce_se, 0, 0, 0, data, length, raddr, rkey, 0, 0
	};

	return ql_mlx5_sq_post(qp, &wr, ctrl);
}

static inline QL_HD int ql_mlx5_sq_post_read(struct ql_mlx5_qp *qp, uint64_t laddr, uint32_t length,
					     uint32_t lkey, uint64_t raddr, uint32_t rkey,
					     uint8_t fm_ce_se, void **ctrl)
{
	struct ql_mlx5_sge sge = { laddr, length, lkey };
	struct ql_mlx5_wr wr = {
		QL_MLX5_OPCODE_RDMA_READ, fm_ce_se, 0, &sge, 1, 0, 0, raddr, rkey, 0, 0
	};

	return ql_mlx5_sq_post(qp, &wr, ctrl);
}

/* Compare-and-swap / fetch-and-add on the 8 bytes at raddr; the old value
 * lands (big-endian, as on the wire) at laddr. */
static inline QL_HD int ql_mlx5_sq_post_cas(struct ql_mlx5_qp *qp, uint64_t laddr, uint32_t lkey,
					    uint64_t raddr, uint32_t rkey, uint64_t compare,
					    uint64_t swap, uint8_t fm_ce_se, void **ctrl)
{
	struct ql_mlx5_sge sge = { laddr, 8, lkey };
	struct ql_mlx5_wr wr = {
		QL_MLX5_OPCODE_ATOMIC_CS, fm_ce_se, 0, &sge, 1, 0, 0, raddr, rkey, swap, compare
	};

	return ql_mlx5_sq_post(qp, &wr, ctrl);
}

static inline QL_HD int ql_mlx5_sq_post_fadd(struct ql_mlx5_qp *qp, uint64_t laddr, uint32_t lkey,
					     uint64_t raddr, uint32_t rkey, uint64_t add,
					     uint8_t fm_ce_se, void **ctrl)
{
	struct ql_mlx5_sge sge = { laddr, 8, lkey };
	struct ql_mlx5_wr wr = {
		QL_MLX5_OPCODE_ATOMIC_FA, fm_ce_se, 0, &sge, 1, 0, 0, raddr, rkey, add, 0
	};

	return ql_mlx5_sq_post(qp, &wr, ctrl);
}

/* Basic blocks of the WQE whose control segment is `ctrl`. */
static inline QL_HD uint32_t ql_mlx5_wqe_nbb(const void *ctrl)
{
	uint32_t ds = ql_mlx5_ld32((const uint8_t *)ctrl + 4) & 0x3f;

	return (ds * QL_MLX5_SEG_SIZE + QL_MLX5_SEND_WQE_BB - 1) / QL_MLX5_SEND_WQE_BB;
}

/*
 * Ring the send queue's doorbell for everything posted so far; `ctrl` is
 * the control segment of the last WQE posted. In this order:
 *   1. ql_mlx5_wmb: the WQEs are in memory before the doorbell record;
 *   2. the doorbell record (sq.dbrec) = producer count & 0xffff, big-endian;
 *   3. ql_mlx5_mmio_fence: the record before the register write;
 *   4. the register write at bf_reg + bf_offset: with BlueFlame (bf_size
 *      != 0) and a last WQE that fits in bf_size, that whole WQE in 8-byte
 *      stores, its first 8 bytes last (the device then need not fetch it;
 *      the soft NIC relies on that order, docs/mlx5.md); otherwise the first 8
 *      bytes of the control segment (opcode, WQE index, QP number, ds) as
 *      one 8-byte store;
 *   5. ql_mlx5_mmio_fence: out of the write-combining buffer before the
 *      next doorbell, whose buffer half (bf_offset ^= bf_size) alternates.
 *   6. host code, on a caller-progress device (qp->progress set): the
 *      device's progress runs, so the WQE is on its way when this returns.
 * BlueFlame carries one WQE: ring after each post if you want it for each.
 */
static inline QL_HD void ql_mlx5_sq_doorbell(struct ql_mlx5_qp *qp, const void *ctrl)
{
	volatile uint64_t *reg =
		(volatile uint64_t *)(void *)((uint8_t *)qp->bf_reg + qp->bf_offset);
	uint32_t nbb = ql_mlx5_wqe_nbb(ctrl);

	ql_mlx5_wmb();
	*qp->sq.dbrec = ql_mlx5_htobe32(qp->sq.head & 0xffff);
	ql_mlx5_mmio_fence();
	if (qp->bf_size && nbb * QL_MLX5_SEND_WQE_BB <= qp->bf_size) {
		uint32_t idx = (uint32_t)((const uint8_t *)ctrl - (const uint8_t *)qp->sq.buf) /
			       QL_MLX5_SEND_WQE_BB;
		uint32_t b, w;

		for (b = 0; b < nbb; b++) {
			const volatile uint64_t *src =
				(const volatile uint64_t *)ql_mlx5_sq_wqe(&qp->sq, idx + b);

			for (w = b ? 0 : 1; w < QL_MLX5_SEND_WQE_BB / 8; w++)
				reg[b * (QL_MLX5_SEND_WQE_BB / 8) + w] = src[w];
		}
		/* the control segment's first 8 bytes last: a device that
		 * reads the buffer as memory (the soft NIC) and sees them sees
		 * the rest; a ConnectX takes the write-combined burst whole */
		ql_mlx5_wmb();
		reg[0] = *(const volatile uint64_t *)ctrl;
	} else {
		*reg = *(const volatile uint64_t *)ctrl;
	}
	ql_mlx5_mmio_fence();
	qp->bf_offset ^= qp->bf_size;
#if !defined(__CUDA_ARCH__)
	if (qp->progress)
		qp->progress(qp->progress_ctx);
#endif
}

/* The device completed the WQE with index `wqe_counter` (a CQE's, 16
 * bits): it and every WQE before it are free again (a CQE for a signaled
 * WQE stands for the unsignaled ones before it). Reads the WQE's size from
 * its control segment, which is still in place. */
static inline QL_HD void ql_mlx5_sq_complete(struct ql_mlx5_qp *qp, uint16_t wqe_counter)
{
	struct ql_mlx5_wq *sq = &qp->sq;
	uint32_t idx = sq->tail + (uint32_t)(uint16_t)(wqe_counter - (uint16_t)sq->tail);

	sq->tail = idx + ql_mlx5_wqe_nbb(ql_mlx5_sq_wqe(sq, idx));
}

/* ---- receive queue ------------------------------------------------------- */

/* Post one receive WQE (its scatter list; fewer entries than the stride
 * holds are ended by a QL_MLX5_INVALID_LKEY segment) and update the
 * receive doorbell record (the receive queue has no doorbell register);
 * host code on a caller-progress device then runs its progress.
 * Returns 0, -EINVAL (more entries than the stride holds) or -ENOMEM (the
 * queue is full: ql_mlx5_rq_complete frees entries). */
static inline QL_HD int ql_mlx5_rq_post(struct ql_mlx5_qp *qp, const struct ql_mlx5_sge *sge,
					uint32_t num_sge)
{
	struct ql_mlx5_wq *rq = &qp->rq;
	uint8_t *wqe;
	uint32_t k;

	if (num_sge * QL_MLX5_SEG_SIZE > rq->stride)
		return -EINVAL;
	if (rq->head - rq->tail >= rq->wqe_cnt)
		return -ENOMEM;
	wqe = (uint8_t *)rq->buf + (size_t)(rq->head & (rq->wqe_cnt - 1)) * rq->stride;
	for (k = 0; k < num_sge; k++)
		ql_mlx5_data_seg(wqe + k * QL_MLX5_SEG_SIZE, sge[k].addr, sge[k].length,
				 sge[k].lkey);
	if (num_sge * QL_MLX5_SEG_SIZE < rq->stride)
		ql_mlx5_data_seg(wqe + num_sge * QL_MLX5_SEG_SIZE, 0, 0, QL_MLX5_INVALID_LKEY);
	rq->head++;
	ql_mlx5_wmb();
	*rq->dbrec = ql_mlx5_htobe32(rq->head & 0xffff);
#if !defined(__CUDA_ARCH__)
	if (qp->progress)
		qp->progress(qp->progress_ctx);
#endif
	return 0;
}

/* One receive completion: receive WQEs are consumed in order. */
static inline QL_HD void ql_mlx5_rq_complete(struct ql_mlx5_qp *qp)
{
	qp->rq.tail++;
}

/* ---- completion queue ---------------------------------------------------- */

/* The 64-byte CQE at consumer count `n`. */
static inline QL_HD void *ql_mlx5_cqe(const struct ql_mlx5_cq *cq, uint32_t n)
{
	uint8_t *e = (uint8_t *)cq->buf + (size_t)(n & (cq->cqe_cnt - 1)) * cq->cqe_size;

	return cq->cqe_size == 128 ? e + 64 : e;
}

/* The owner bit software expects at consumer count n: it flips on every
 * pass over the ring (0 on the first), so a CQE left from the previous pass
 * never looks new. */
static inline QL_HD uint8_t ql_mlx5_cqe_sw_owner(const struct ql_mlx5_cq *cq, uint32_t n)
{
	return (n & cq->cqe_cnt) ? 1 : 0;
}

/*
 * Poll one CQE. Returns 1 (one CQE consumed and described in *out; error
 * CQEs too: out->opcode REQ_ERR/RESP_ERR with the syndromes), 0 (none
 * ready) or -EPROTO (a compressed CQE, a format qlink never enables; it is
 * left in place). After consuming, the consumer index goes to dbrec[0]
 * (24 bits, big-endian) once the CQE's bytes are read, so the device can
 * reuse the slot. Owner check, then ql_mlx5_rmb, then the other bytes.
 * Host code, on a caller-progress device (cq->progress set): when no CQE
 * is ready the device's progress runs and the CQE is looked at once more.
 */
static inline QL_HD int ql_mlx5_cq_poll(struct ql_mlx5_cq *cq, struct ql_mlx5_cqe_info *out)
{
	const uint8_t *cqe = (const uint8_t *)ql_mlx5_cqe(cq, cq->cons_index);
	uint8_t op_own = *(const volatile uint8_t *)(cqe + 63);
	uint8_t opcode = (uint8_t)(op_own >> 4);
	uint32_t w;

	if (opcode == QL_MLX5_CQE_INVALID ||
	    (op_own & QL_MLX5_CQE_OWNER_MASK) != ql_mlx5_cqe_sw_owner(cq, cq->cons_index)) {
#if !defined(__CUDA_ARCH__)
		/* caller progress: run the device, then look once more */
		if (!cq->progress || cq->progress(cq->progress_ctx) <= 0)
			return 0;
		op_own = *(const volatile uint8_t *)(cqe + 63);
		opcode = (uint8_t)(op_own >> 4);
		if (opcode == QL_MLX5_CQE_INVALID ||
		    (op_own & QL_MLX5_CQE_OWNER_MASK) != ql_mlx5_cqe_sw_owner(cq, cq->cons_index))
			return 0;
#else
		return 0;
#endif
	}
	ql_mlx5_rmb();
	out->format = (uint8_t)((op_own >> 2) & 3);
	if (out->format == QL_MLX5_CQE_FORMAT_COMPRESSED)
		return -EPROTO;
	out->opcode = opcode;
	out->owner = (uint8_t)(op_own & 1);
	out->wqe_counter = ql_mlx5_ld16(cqe + 60);
	out->byte_cnt = ql_mlx5_ld32(cqe + 44);
	out->timestamp = ql_mlx5_ld64(cqe + 48);
	w = ql_mlx5_ld32(cqe + 56);
	out->qpn = w & 0xffffff;
	out->send_opcode =
		opcode == QL_MLX5_CQE_REQ || opcode == QL_MLX5_CQE_REQ_ERR ? (uint8_t)(w >> 24) : 0;
	out->imm = opcode == QL_MLX5_CQE_RESP_SEND_IMM || opcode == QL_MLX5_CQE_RESP_WR_IMM ?
			   ql_mlx5_ld32(cqe + 36) :
			   0;
	if (opcode == QL_MLX5_CQE_REQ_ERR || opcode == QL_MLX5_CQE_RESP_ERR) {
		out->syndrome = *(const volatile uint8_t *)(cqe + 55);
		out->vendor_syndrome = *(const volatile uint8_t *)(cqe + 54);
		out->byte_cnt = 0;
	} else {
		out->syndrome = 0;
		out->vendor_syndrome = 0;
	}
	if (out->format == QL_MLX5_CQE_FORMAT_INLINE_32)
		out->inline_data = cqe;
	else if (out->format == QL_MLX5_CQE_FORMAT_INLINE_64)
		out->inline_data = cqe - 64;
	else
		out->inline_data = 0;
	cq->cons_index++;
	/* every byte of the CQE read before the slot is given back */
	ql_mlx5_wmb();
	cq->dbrec[0] = ql_mlx5_htobe32(cq->cons_index & 0xffffff);
	return 1;
}

/* The libibverbs completion status (enum ibv_wc_status, as a number: this
 * header does not include verbs.h) of an error CQE's syndrome, as rdma-core's
 * mlx5 provider reports it in ibv_wc.status; IBV_WC_GENERAL_ERR (21) for a
 * syndrome it does not name. */
static inline QL_HD int ql_mlx5_wc_status(uint8_t syndrome)
{
	switch (syndrome) {
	case QL_MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR:
		return 1; /* IBV_WC_LOC_LEN_ERR */
	case QL_MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR:
		return 2; /* IBV_WC_LOC_QP_OP_ERR */
	case QL_MLX5_CQE_SYNDROME_LOCAL_PROT_ERR:
		return 4; /* IBV_WC_LOC_PROT_ERR */
	case QL_MLX5_CQE_SYNDROME_WR_FLUSH_ERR:
		return 5; /* IBV_WC_WR_FLUSH_ERR */
	case QL_MLX5_CQE_SYNDROME_MW_BIND_ERR:
		return 6; /* IBV_WC_MW_BIND_ERR */
	case QL_MLX5_CQE_SYNDROME_BAD_RESP_ERR:
		return 7; /* IBV_WC_BAD_RESP_ERR */
	case QL_MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR:
		return 8; /* IBV_WC_LOC_ACCESS_ERR */
	case QL_MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR:
		return 9; /* IBV_WC_REM_INV_REQ_ERR */
	case QL_MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR:
		return 10; /* IBV_WC_REM_ACCESS_ERR */
	case QL_MLX5_CQE_SYNDROME_REMOTE_OP_ERR:
		return 11; /* IBV_WC_REM_OP_ERR */
	case QL_MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR:
		return 12; /* IBV_WC_RETRY_EXC_ERR */
	case QL_MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR:
		return 13; /* IBV_WC_RNR_RETRY_EXC_ERR */
	case QL_MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR:
		return 16; /* IBV_WC_REM_ABORT_ERR */
	default:
		return 21; /* IBV_WC_GENERAL_ERR */
	}
}

#ifdef __cplusplus
}
#endif

#endif
