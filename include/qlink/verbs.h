/* SPDX-License-Identifier: MIT */
/*
 * verbs: the provider-neutral RDMA verbs API.
 *
 * Everything above this layer (channels, the RPC daemon, the VPPU) talks to a
 * NIC only through these calls, so moving from the software NIC to a ConnectX
 * is a change of device URI. The API speaks libibverbs' own vocabulary
 * (struct ibv_send_wr, ibv_recv_wr, ibv_wc, ibv_qp_attr, ibv_qp_cap, access
 * flags, opcodes, completion statuses) so that the `ibv` provider is a thin
 * pass-through with no translation of work requests or completions.
 *
 * Devices are opened by URI; the scheme picks the provider from a table
 * (docs/verbs.md, "Providers"):
 *   soft://loop        software NIC, both ends in one process
 *   soft+shm://NAME    software NIC, ends in processes on one host
 *   soft+udp://IP[:PORT][?OPTS]  software NIC on a RoCEv2-over-UDP wire
 *                      (peers: other hosts, Linux rdma_rxe; docs/soft-udp.md)
 *   ibv://DEVICE[:PORT[:GID_INDEX]]  a real RDMA device through libibverbs
 *
 * Threading: like a verbs provider used with thread domains, each QP and each
 * CQ must be driven by one thread at a time; distinct QPs with distinct CQs
 * may be driven by distinct threads. Setup calls are thread-safe.
 *
 * Progress is driven by the caller's own post and poll calls, except on
 * soft+udp, whose devices each run a NIC thread (the "hardware": it sends
 * and receives the packets), and for QPs in the soft NIC's mlx5 queue mode
 * (QL_QP_INIT_MLX5), whose WQEs a device engine thread executes after the
 * doorbell (docs/soft-provider.md). Post and poll never allocate, lock, log or
 * enter the kernel (soft+udp: a post writes an eventfd only to wake a NIC
 * thread that went to sleep after idling, docs/soft-udp.md).
 */
#ifndef QLINK_VERBS_H
#define QLINK_VERBS_H

#include <infiniband/verbs.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct ql_device;
struct ql_pd;
struct ql_mr;
struct ql_cq;
struct ql_qp;

/* ---- devices -------------------------------------------------------- */

#define QL_DEVICE_NAME_MAX 64
#define QL_DEVICE_URI_MAX 160

struct ql_device_attr {
	char name[QL_DEVICE_NAME_MAX]; /* "loop", the NAME of soft+shm://NAME */
	char uri[QL_DEVICE_URI_MAX];   /* the URI it was opened with */
	char provider[16];	       /* "soft", "ibv" */
	char wire[16];		       /* soft: "loop" or "shm" */
	struct ibv_device_attr dev;    /* max_qp, max_qp_wr, max_sge, max_cqe,
	                                   max_mr, max_mr_size, atomic_cap, ... */
	struct ibv_port_attr port;     /* state, active_mtu, max_msg_sz, ... */
	uint32_t max_inline_data;      /* largest IBV_SEND_INLINE payload */
	union ibv_gid gid;	       /* this device's address (GID index 0) */
};

/* Open a device by URI. Unknown schemes (the detail lists the known ones)
 * and reserved-but-unimplemented ones ("not supported yet") fail with
 * -EPROTONOSUPPORT, an ibv device that is not there with -ENODEV listing
 * the devices found; ql_error_detail() says which. */
int ql_device_open(const char *uri, struct ql_device **dev);
/* List device URIs that can be opened here, as each provider enumerates
 * them: soft://loop, soft+shm://NAME (any NAME), and ibv://DEVICE for each
 * libibverbs device. Writes up to `max` entries; returns how many exist. */
int ql_device_list(char (*uris)[QL_DEVICE_URI_MAX], int max);
/* Close a device; -EBUSY while any PD or CQ of it exists. */
int ql_device_close(struct ql_device *dev);
int ql_device_query(struct ql_device *dev, struct ql_device_attr *attr);

/* Counters kept by the responder side of a device: traffic it dropped or
 * refused. Peers in other processes update them too (atomically). */
struct ql_device_counters {
	uint64_t uc_drop_access;    /* UC: remote access violation, dropped */
	uint64_t uc_drop_no_recv;   /* UC: SEND/WRITE_WITH_IMM with no receive posted */
	uint64_t uc_drop_not_ready; /* UC: packet for a QP not in RTR/RTS/SQD */
	uint64_t rc_nak_access;	    /* RC: remote access NAKs sent */
	uint64_t rc_nak_rnr;	    /* RC: receiver-not-ready NAKs sent */
	uint64_t rc_nak_inv_req;    /* RC: invalid request NAKs sent */
	uint64_t rc_nak_op_err;	    /* RC: remote operational error NAKs sent */
	/* soft, requester side: UC messages this device's QPs sent that loss
	 * injection dropped (docs/soft-provider.md); 0 elsewhere */
	uint64_t uc_drop_injected;
	/* soft+udp only (0 elsewhere): the wire. rc_nak_seq: PSN sequence
	 * error NAKs sent; tx_packets: datagrams put on the wire (after
	 * fault injection); rx_packets: datagrams received and processed,
	 * whatever the verdict; rx_dropped: of them refused (malformed,
	 * unknown or unconnected QP, wrong source), rx_icrc_errors: of them
	 * with a bad ICRC; duplicates: requests received
	 * again (re-ACKed, READ re-executed, atomic replayed); retransmits:
	 * packets sent again (timeouts and NAKs); fault_*: packets the fault
	 * injection of the device and its QPs dropped, duplicated, reordered,
	 * delayed or corrupted (uc_drop_injected = fault_drop there);
	 * rx_kernel_drops: datagrams the kernel dropped before the device saw
	 * them, its socket's receive buffer full (SO_RXQ_OVFL; the kernel's
	 * count is 32 bits, extended here). */
	uint64_t rc_nak_seq;
	uint64_t tx_packets;
	uint64_t rx_packets;
	uint64_t rx_dropped;
	uint64_t rx_icrc_errors;
	uint64_t retransmits;
	uint64_t timeouts;
	uint64_t naks_received;
	uint64_t rnr_naks_received;
	uint64_t duplicates;
	uint64_t uc_msgs_dropped;
	uint64_t fault_drop;
	uint64_t fault_dup;
	uint64_t fault_reorder;
	uint64_t fault_delay;
	uint64_t fault_corrupt;
	uint64_t rx_kernel_drops;
};
int ql_device_counters(struct ql_device *dev, struct ql_device_counters *c);

/* Run the device's software-NIC work in the calling thread: what a device
 * in caller progress mode (docs/progress.md) does on every poll of its CQs,
 * for callers that wait without polling (blocking waits, timers). Bounded
 * per call; no allocation, lock or syscall beyond one recvmmsg/sendmmsg.
 * Returns > 0 when work was done, 0 when none was pending or the device
 * progresses on its own (hardware, or a NIC thread), or a negative errno. */
int ql_device_progress(struct ql_device *dev);

/* ---- protection domains and memory ---------------------------------- */

int ql_pd_alloc(struct ql_device *dev, struct ql_pd **pd);
/* -EBUSY while MRs or QPs of the PD exist. */
int ql_pd_free(struct ql_pd *pd);

/* Memory scoped to a PD, as UCX scopes memory to a memory domain: what the
 * PD's provider can register on it and expose to peers (soft+shm: its
 * shared heap, which peers in other processes map; ibv: anonymous pages for
 * ibv_reg_mr; soft://loop: anonymous pages). Zero-filled, page-aligned,
 * `length` rounded up to whole pages. -EINVAL for a NULL argument, length 0
 * or one that overflows when rounded; -ENOMEM when none is left. While any
 * is outstanding, ql_pd_free fails with -EBUSY (and so the device stays
 * open). */
int ql_pd_mem_alloc(struct ql_pd *pd, size_t length, void **addr);
/* Free memory from ql_pd_mem_alloc on the same PD; -EINVAL for any other
 * address (memory of another PD, an interior pointer, a second free);
 * -EBUSY while any MR (of any PD) covers part of it: deregister first. */
int ql_pd_mem_free(struct ql_pd *pd, void *addr);

/* Kinds of PD-scoped memory (ql_pd_mem_alloc_attr). */
enum ql_mem_kind {
	QL_MEM_HOST = 0, /* host pages: what ql_pd_mem_alloc gives */
	QL_MEM_GPU,	 /* GPU memory (docs/verbs.md "GPU memory") */
};

/* Where memory of a PD lives (ql_pd_mem_query). */
enum ql_mem_path {
	QL_MEM_PATH_HOST = 0, /* host pages */
	/* CUDA device memory (cuMemAlloc): the address is a CUDA device
	 * pointer, not for the CPU to read or write; the ibv provider */
	QL_MEM_PATH_DEVICE,
	/* host pages mapped into the GPU (cuMemHostRegister DEVICEMAP): the
	 * CPU and the soft NICs use the address, kernels device_addr (the
	 * same value under unified addressing) */
	QL_MEM_PATH_HOST_MAPPED,
};

struct ql_mem_attr {
	enum ql_mem_kind kind;
	int cuda_device; /* QL_MEM_GPU: the CUDA device ordinal */
};

/* ql_pd_mem_alloc with a kind. QL_MEM_HOST is ql_pd_mem_alloc. QL_MEM_GPU
 * loads the CUDA driver at run time (libcuda.so.1; libqlink does not link
 * CUDA) and gives, on the ibv provider, device memory (QL_MEM_PATH_DEVICE,
 * zero-filled; ql_mr_reg registers it through a dmabuf or peer memory,
 * whichever the system has), on the soft providers the provider's own
 * memory mapped into the GPU (QL_MEM_PATH_HOST_MAPPED), so the same code
 * runs on a machine with a GPU and no RDMA NIC. -ENODEV when there is no
 * CUDA driver or no such device, -EOPNOTSUPP when the provider or the
 * device cannot give GPU memory (the detail says which); the other errors
 * as ql_pd_mem_alloc. attr NULL: QL_MEM_HOST. Free with ql_pd_mem_free. */
int ql_pd_mem_alloc_attr(struct ql_pd *pd, size_t length, const struct ql_mem_attr *attr,
			 void **addr);

struct ql_mem_info {
	enum ql_mem_kind kind;
	enum ql_mem_path path;
	int cuda_device;      /* QL_MEM_GPU */
	void *addr;	      /* the start of the allocation holding the address */
	size_t length;	      /* its length (whole pages) */
	uint64_t device_addr; /* QL_MEM_GPU: addr as a CUDA kernel names it */
};
/* What memory of ql_pd_mem_alloc(_attr) on pd holds `addr` (any address
 * inside it); -ENOENT for any other address. */
int ql_pd_mem_query(struct ql_pd *pd, const void *addr, struct ql_mem_info *info);
/* Copy into or out of memory of ql_pd_mem_alloc(_attr) on pd, whatever its
 * path: memcpy for host and host-mapped memory, the CUDA driver's copy
 * (cuMemcpyHtoD/DtoH) for device memory, which the CPU cannot touch.
 * -EINVAL when [addr, addr + len) is not inside one allocation of pd. */
int ql_pd_mem_write(struct ql_pd *pd, void *addr, const void *src, size_t len);
int ql_pd_mem_read(struct ql_pd *pd, void *dst, const void *addr, size_t len);

/* The process-wide default: the soft provider's shared heap, which every
 * provider can register and which soft+shm peers in other processes can
 * reach (see docs/soft-provider.md). Kept for code written before PD-scoped
 * memory; prefer ql_pd_mem_alloc. Zero-filled, page-aligned. Returns NULL
 * with errno set on failure. */
void *ql_mem_alloc(size_t length);
void ql_mem_free(void *addr);

/* Register [addr, addr+length) with IBV_ACCESS_* flags (LOCAL_WRITE,
 * REMOTE_WRITE, REMOTE_READ, REMOTE_ATOMIC). REMOTE_WRITE and REMOTE_ATOMIC
 * require LOCAL_WRITE (-EINVAL otherwise). Pages are pinned when
 * RLIMIT_MEMLOCK allows it; otherwise a warning is logged once. On the
 * software NICs addr may be CUDA device memory (cuMemAlloc), moved by the
 * driver's copy engine, atomics on it refused (docs/gpu.md "Device memory
 * on the software NICs"). */
int ql_mr_reg(struct ql_pd *pd, void *addr, size_t length, int access, struct ql_mr **mr);
/* As ql_mr_reg, but peers address the region by `iova` instead of by its
 * virtual address (libibverbs' ibv_reg_mr_iova): a remote address iova + k
 * names addr + k, and everything outside [iova, iova + length) is a remote
 * access error. What a QCS that needs small addresses is given (the hsb
 * transport registers its pages at iova 0). Local SGEs naming the MR use
 * iova addresses on ibv; the soft provider refuses local use of an MR whose
 * iova differs from its address (IBV_WC_LOC_PROT_ERR): register the memory
 * a second time for that. -EOPNOTSUPP where the provider (or the system's
 * libibverbs) cannot do it. */
int ql_mr_reg_iova(struct ql_pd *pd, void *addr, size_t length, uint64_t iova, int access,
		   struct ql_mr **mr);
/* How an MR over QL_MEM_PATH_DEVICE memory was registered (ql_mr_reg
 * picks at run time, in this order): ibv_reg_dmabuf_mr with the dmabuf
 * of the range (cuMemGetHandleForAddressRange), where the driver, the
 * device and libibverbs can; else plain ibv_reg_mr of the device pointer,
 * which the kernel's peer-memory client (nvidia-peermem) resolves. When
 * neither works ql_mr_reg fails with the errno of the last and a detail
 * naming both failures. Registering part of such memory on another PD
 * than its own is the plain (peer-memory) path. */
enum ql_mr_gpu_reg {
	QL_MR_GPU_NONE = 0, /* host memory (host-mapped GPU memory too) */
	QL_MR_GPU_DMABUF,
	QL_MR_GPU_PEERMEM,
};
enum ql_mr_gpu_reg ql_mr_gpu_reg(const struct ql_mr *mr);
/* -EBUSY while a posted, unfinished work request still names the MR. */
int ql_mr_dereg(struct ql_mr *mr);
uint32_t ql_mr_lkey(const struct ql_mr *mr);
uint32_t ql_mr_rkey(const struct ql_mr *mr);
void *ql_mr_addr(const struct ql_mr *mr);
size_t ql_mr_length(const struct ql_mr *mr);

/* ---- completion queues ---------------------------------------------- */

/* A CQ holds at least `cqe` send-side completions. Receive completions are
 * held in their receive queue's slots until polled, so they cannot overrun a
 * CQ. Overrun of the send side is reported: the CQ enters an error state and
 * ql_cq_poll returns -EOVERFLOW once the completions it holds are drained. */
int ql_cq_create(struct ql_device *dev, int cqe, struct ql_cq **cq);
/* Creation flags of ql_cq_create_flags. */
#define QL_CQ_INIT_MLX5 0x1u /* completions as mlx5 CQEs, read through qlink/mlx5.h */
/* ql_cq_create with flags (0: the same as ql_cq_create). A QL_CQ_INIT_MLX5
 * CQ holds its completions as mlx5 CQEs in a buffer ql_cq_mlx5 hands out;
 * ql_cq_poll on it fails with -EINVAL. -EINVAL for unknown flags,
 * -EOPNOTSUPP where the provider has no mlx5 queues (docs/mlx5.md). */
int ql_cq_create_flags(struct ql_device *dev, int cqe, unsigned int flags, struct ql_cq **cq);
/* -EBUSY while a QP uses the CQ. */
int ql_cq_destroy(struct ql_cq *cq);

/* ---- queue pairs ---------------------------------------------------- */

struct ql_qp_init_attr {
	struct ql_cq *send_cq;
	struct ql_cq *recv_cq;
	struct ibv_qp_cap cap;	  /* in: requested; out: granted */
	enum ibv_qp_type qp_type; /* IBV_QPT_RC or IBV_QPT_UC */
	int sq_sig_all;		  /* every send WR completes, signaled or not */
	void *qp_context;
	unsigned int flags; /* QL_QP_INIT_* (0: none) */
};

/* Drive this QP through qlink/mlx5.h (work requests written as mlx5 WQEs
 * into the queues ql_qp_mlx5 hands out); ql_qp_post_send/ql_qp_post_recv
 * on it fail with -EINVAL. Its send and receive CQs must be
 * QL_CQ_INIT_MLX5 CQs, and an mlx5 CQ serves mlx5 QPs only (-EINVAL
 * otherwise). -EOPNOTSUPP where the provider has no mlx5 queues. */
#define QL_QP_INIT_MLX5 0x1u
/* With QL_QP_INIT_MLX5: no BlueFlame on the soft NIC (bf_size 0 in the
 * view, 8-byte doorbell writes; docs/soft-provider.md). Ignored by ibv. */
#define QL_QP_INIT_MLX5_NO_BF 0x2u

int ql_qp_create(struct ql_pd *pd, struct ql_qp_init_attr *attr, struct ql_qp **qp);
int ql_qp_destroy(struct ql_qp *qp);

/* What ql_qp_setup makes: a QP with one SGE per work request each way. */
struct ql_qp_setup {
	enum ibv_qp_type qp_type; /* IBV_QPT_RC (or 0) or IBV_QPT_UC */
	uint32_t send_wr;	  /* send queue entries (0: 1) */
	uint32_t recv_wr;	  /* receive queue entries (0: 1) */
	uint32_t max_inline;	  /* inline bytes wanted; the device's limit caps it */
	int send_cqe;		  /* entries of a send CQ made here (0: send_wr) */
	int recv_cqe;		  /* entries of a receive CQ made here (0: recv_wr) */
	unsigned int flags;	  /* QL_QP_INIT_*; with QL_QP_INIT_MLX5 the CQs
				     made here are QL_CQ_INIT_MLX5 CQs */
};
/* The QP set-up every user of a QP writes: its CQs, then the QP in pd. A
 * CQ already in *scq or *rcq is used as it is (one shared with other QPs);
 * a NULL one is made on pd's device and stored there (scq == rcq: one CQ
 * of send_cqe entries for both). What was made stays in *scq, *rcq and *qp on failure too,
 * for the caller's own clean-up. granted (NULL: not wanted): the caps the
 * QP got (max_inline_data as granted). Connect it with ql_qp_connect. */
int ql_qp_setup(struct ql_pd *pd, const struct ql_qp_setup *s, struct ql_cq **scq,
		struct ql_cq **rcq, struct ql_qp **qp, struct ibv_qp_cap *granted);
/* Transitions follow the InfiniBand QP state machine (RESET, INIT, RTR, RTS,
 * SQD, SQE, ERR) with the required and optional attribute masks of the spec;
 * an illegal transition or mask fails with -EINVAL and changes nothing. */
int ql_qp_modify(struct ql_qp *qp, struct ibv_qp_attr *attr, int attr_mask);
int ql_qp_query(struct ql_qp *qp, struct ibv_qp_attr *attr, int attr_mask,
		struct ql_qp_init_attr *init_attr);
uint32_t ql_qp_num(const struct ql_qp *qp);
/* Fault injection on the packets one QP sends (soft+udp; tests only):
 * `spec` takes the fault options of the device URI's query
 * (docs/soft-udp.md: "drop=0.01&seed=7", "drop_nth=5", ...), replacing the
 * device's for this QP; NULL or "" turns the QP's off (back to the
 * device's). -EINVAL for a bad spec, -EOPNOTSUPP on other providers. */
int ql_qp_fault(struct ql_qp *qp, const char *spec);
enum ibv_qp_state ql_qp_state(const struct ql_qp *qp);

/* ---- mlx5 queues (qlink/mlx5.h) ------------------------------------- */

struct ql_mlx5_qp;
struct ql_mlx5_cq;
/* Fill the plain-data view of a QL_QP_INIT_MLX5 QP's queues (producer and
 * consumer counts 0 for a QP nothing was posted to) / of a QL_CQ_INIT_MLX5
 * CQ's CQE ring. The memory stays valid until the QP/CQ is destroyed; a QP
 * taken back to RESET starts its queues again at 0: take a new view then.
 * -EOPNOTSUPP for a QP/CQ created without the flag or a provider with no
 * mlx5 queues (soft+udp); docs/mlx5.md says what each provider hands out. */
int ql_qp_mlx5(struct ql_qp *qp, struct ql_mlx5_qp *out);
int ql_cq_mlx5(struct ql_cq *cq, struct ql_mlx5_cq *out);

/* ---- connection parameters ------------------------------------------ */

/* What two ends exchange out of band to connect, in one format for every
 * provider. vaddr/rkey/length describe an optional memory region the peer
 * may access (0 when none). */
struct ql_conn_params {
	uint32_t qpn;
	uint32_t psn;
	union ibv_gid gid;
	enum ibv_mtu mtu;
	uint64_t vaddr;
	uint32_t rkey;
	uint64_t length;
	uint32_t num_slots; /* ring geometry when the region is a qlink ring (0: none) */
	uint32_t slot_size;
	enum ibv_qp_type qp_type; /* the QP's type: IBV_QPT_RC (or 0) or IBV_QPT_UC */
	/* hsb transport (qlink/hsb.h): the region is num_slots pages of
	 * slot_size bytes at vaddr (an iova); frame_len is what the QCS writes
	 * per frame, resp_size the QCS's receive buffer size. 0: not hsb. */
	uint32_t frame_len;
	uint32_t resp_size;
};

/* Text form: "qpn=0x000102 psn=0x000000 gid=fd71:0201:... mtu=4096
 * vaddr=0x7f... rkey=0x... length=4096", plus " slots=N slot_size=N" when
 * num_slots is set, " qp=uc" for a UC QP (absent: RC; qp=rc parses too) and
 * " frame_len=N resp_size=N" when resp_size is (the hsb transport). Returns the length written (like snprintf) or a
 * negative errno. */
int ql_conn_params_format(const struct ql_conn_params *p, char *buf, size_t len);
int ql_conn_params_parse(const char *text, struct ql_conn_params *p);
/* Fill qpn, psn, gid and mtu of a local QP (no memory region). psn is the
 * first PSN the QP sends when connected with ql_qp_connect: random on
 * soft+udp (docs/soft-udp.md 11), 0 on the other providers, or once
 * connected the connect option's local_psn where one was given. */
int ql_qp_local_params(struct ql_qp *qp, struct ql_conn_params *p);

struct ql_qp_connect_opts {
	unsigned int access; /* qp_access_flags granted to the peer */
	uint8_t timeout;     /* local ACK timeout exponent, 4.096 us * 2^t */
	uint8_t retry_cnt;
	uint8_t rnr_retry;     /* 7 = retry forever */
	uint8_t min_rnr_timer; /* encoded, IB table */
	/* The first PSN this QP sends (24 bits), or QL_QP_PSN_PROVIDER: the
	 * one the provider chose at create, which ql_qp_local_params reported
	 * before the connect. Set it where the peer assumes a PSN instead of
	 * reading ours (HSB: both directions start at 0); ql_qp_local_params
	 * reports it once connected. Above 24 bits: -EINVAL. */
	uint32_t local_psn;
};
#define QL_QP_PSN_PROVIDER 0xffffffffu
/* Defaults: all remote access, timeout 14, retry_cnt 7, rnr_retry 7,
 * min_rnr_timer 12 (0.64 ms), local_psn QL_QP_PSN_PROVIDER. */
void ql_qp_connect_opts_default(struct ql_qp_connect_opts *o);
/* RESET -> INIT -> RTR -> RTS towards `remote` (opts NULL: defaults). */
int ql_qp_connect(struct ql_qp *qp, const struct ql_conn_params *remote,
		  const struct ql_qp_connect_opts *opts);

/* ---- the hot path ---------------------------------------------------- */

/* Provider dispatch. Every provider's QP and CQ begin with these headers;
 * applications must not touch them. */
struct ql__qp_ops {
	int (*post_send)(struct ql_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr);
	int (*post_recv)(struct ql_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr);
};
struct ql__cq_ops {
	int (*poll)(struct ql_cq *cq, int num_entries, struct ibv_wc *wc);
};
struct ql__qp_head {
	const struct ql__qp_ops *ops;
};
struct ql__cq_head {
	const struct ql__cq_ops *ops;
};

/* Post a chain of send WRs. Returns 0, or a negative errno with *bad_wr
 * set to the first WR not posted: -EINVAL (QP state, opcode, num_sge,
 * inline size), -ENOMEM (send queue full). */
static inline int ql_qp_post_send(struct ql_qp *qp, struct ibv_send_wr *wr,
				  struct ibv_send_wr **bad_wr)
{
	return ((const struct ql__qp_head *)(const void *)qp)->ops->post_send(qp, wr, bad_wr);
}

static inline int ql_qp_post_recv(struct ql_qp *qp, struct ibv_recv_wr *wr,
				  struct ibv_recv_wr **bad_wr)
{
	return ((const struct ql__qp_head *)(const void *)qp)->ops->post_recv(qp, wr, bad_wr);
}

/* Poll up to num_entries completions. Returns the number polled (0..n) or
 * a negative errno (-EOVERFLOW after a CQ overrun). */
static inline int ql_cq_poll(struct ql_cq *cq, int num_entries, struct ibv_wc *wc)
{
	return ((const struct ql__cq_head *)(const void *)cq)->ops->poll(cq, num_entries, wc);
}

/* The IB spec's encoded RNR timer (Table 45) in nanoseconds. */
uint64_t ql_rnr_timer_ns(uint8_t encoded);

#ifdef __cplusplus
}
#endif
#endif
