/* SPDX-License-Identifier: MIT */
/*
 * sudp: the soft+udp provider (internals, hidden from users): a software
 * RDMA NIC whose wire is RoCEv2 over UDP, so that its peer can be another
 * qlink process, on this host or another, or Linux's rdma_rxe.
 *
 * Model: one NIC thread per device is the "hardware" (progress=thread), or
 * there is no thread and the application's own poll, post and
 * ql_device_progress calls run the same NIC rounds (progress=caller,
 * docs/progress.md). The application's post and poll calls otherwise only
 * touch rings shared with the NIC (send queue, receive queue, completion
 * queue: single producer, single consumer, no lock, no allocation); the
 * NIC does everything else: it takes work requests off the send queues,
 * segments them into packets by path MTU, sends them with sendmmsg,
 * receives with recvmmsg, runs the RC/UC transport of IBTA vol 1 ch. 9
 * (PSNs, ACK/NAK, retransmission, duplicate detection, READ responses,
 * atomics and their replay cache) and writes completions. Setup calls
 * (modify, create, destroy, MR registration) serialise with the NIC
 * through a private flag (sudp_dev_lock) that posts and polls never wait
 * for (caller mode only tries it: ql__sudp_progress).
 *
 * docs/soft-udp.md ("The provider") is the specification.
 */
#ifndef QL_UDP_SUDP_H
#define QL_UDP_SUDP_H

#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "providers/sudp/fault.h"
#include "providers/sudp/pcap.h"
#include "providers/sudp/roce.h"
#include "verbs/provider.h"

#define SUDP_HIDDEN __attribute__((visibility("hidden")))
#define sudp_likely(x) __builtin_expect(!!(x), 1)
#define sudp_unlikely(x) __builtin_expect(!!(x), 0)

#define SUDP_QP_IDX_BITS 10
#define SUDP_MAX_QP (1u << SUDP_QP_IDX_BITS)
#define SUDP_MR_IDX_BITS 12
#define SUDP_MAX_MR (1u << SUDP_MR_IDX_BITS)
#define SUDP_MAX_QP_WR 16384
#define SUDP_MAX_SGE 16
#define SUDP_MAX_CQE (1 << 20)
#define SUDP_CQ_SLACK 4096 /* receive completions a CQ holds besides cqe */
#define SUDP_MAX_INLINE 256
#define SUDP_MAX_MSG (1u << 31)
#define SUDP_MAX_RD_ATOMIC 16
#define SUDP_BATCH 32	  /* datagrams per recvmmsg/sendmmsg */
#define SUDP_PKT_MAX 4224 /* 4096 payload + headers + ICRC, rounded */
#define SUDP_WINDOW 1024  /* packets a requester has unacknowledged at most */
#define SUDP_ACK_EVERY 16 /* responder: ACK at least every N packets */
#define SUDP_REQ_EVERY 32 /* requester: AckReq at least every N packets */
#define SUDP_TX_STREAM 8  /* caller mode: WRs in flight from which posts batch */

enum sudp_poll_mode { SUDP_POLL_ADAPTIVE, SUDP_POLL_BUSY };

/* peer_port=: which UDP source port a connected peer's packets must come
 * from (docs/soft-udp.md 8) */
enum sudp_peer_port {
	SUDP_PEER_PORT_ANY,  /* any (the default) */
	SUDP_PEER_PORT_SAME, /* this device's own port: what qlink peers send from */
	SUDP_PEER_PORT_RXE,  /* kernel rxe's, derived from the QPNs (sudp_rxe_sport) */
	SUDP_PEER_PORT_FIXED /* the number given */
};

/* One send work request as the NIC sees it. wr.sg_list points to the
 * QP's own copy of the SGEs (or to the inline copy). */
struct sudp_swqe {
	struct ibv_send_wr wr;
	uint64_t len;	    /* bytes of the message */
	uint32_t first_psn; /* assigned when its first packet is sent */
	uint32_t npkts;	    /* packets (READ: response packets) */
	uint32_t rd_rcvd;   /* READ: response packets placed so far */
	uint32_t rd_base;   /* READ: first response packet the request last
			       (re)issued asks for: its response starts with
			       FIRST or ONLY there (IBTA 9.7.5.1.4) */
	uint8_t started;
	uint8_t done;	  /* READ/atomic: the response is in */
	uint8_t status;	  /* enum ibv_wc_status to complete with */
	uint8_t local_ok; /* local SGEs checked */
	uint8_t ldev;	  /* ... and some of them are GPU device memory */
};

struct sudp_cqe {
	struct ibv_wc wc;
	struct sudp_qp *qp;
	uint64_t idx; /* send or receive queue index */
	bool send;
};

struct sudp_cq {
	struct ql_cq base;
	struct sudp_device *dev;
	int depth; /* send completions it holds (cqe) */
	uint32_t mask;
	struct sudp_cqe *ring;
	_Atomic uint64_t tail;	   /* NIC */
	_Atomic uint64_t head;	   /* application */
	_Atomic uint64_t send_out; /* send completions written, not yet polled */
	_Atomic int err;
	uint32_t nrefs;
};

struct sudp_mr_entry {
	uint32_t lkey, rkey; /* 0: free */
	uint32_t access;
	uint32_t pd_id;
	uint64_t addr, length, iova;
	uint32_t cuda; /* 0 host memory, GPU ordinal + 1 device memory (devmem.h) */
};

struct sudp_mr {
	struct ql_mr base;
	uint32_t idx;
};

struct sudp_qp {
	struct ql_qp base;
	struct sudp_device *dev;
	struct sudp_cq *scq, *rcq;
	uint32_t idx;
	uint32_t pd_id;
	enum ibv_qp_type type;
	int sq_sig_all;
	void *qp_context;
	struct ibv_qp_cap cap;
	struct ibv_qp_attr attr;
	_Atomic int state;

	/* send queue: the application writes slots and sq_pi; the NIC reads */
	uint32_t sq_mask;
	struct sudp_swqe *sq;
	struct ibv_sge *sq_sge;
	uint8_t *sq_inline;
	uint32_t sq_nsge;
	_Atomic uint64_t sq_pi;
	uint64_t sq_retired; /* application: completions polled */

	/* receive queue */
	uint32_t rq_mask;
	uint32_t rq_nsge;
	uint64_t *rq_wrid;
	uint64_t *rq_len;
	uint32_t *rq_num;
	struct ibv_sge *rq_sge;
	_Atomic uint64_t rq_pi;
	uint64_t rq_retired; /* application: completions polled */
	uint64_t rq_ci;	     /* NIC: next receive WQE to consume */

	/* the peer (set by modify, read by the NIC under the device lock) */
	struct sockaddr_storage peer;
	socklen_t peerlen;
	struct roce_addr txaddr; /* ICRC facts of what we send to the peer */
	uint8_t peer_ip[16];	 /* v4: first 4 bytes */
	uint32_t dest_qpn;
	uint32_t mtu; /* path MTU in bytes */
	bool connected;

	/* requester (NIC) */
	uint64_t sq_ci;	 /* oldest WR not completed */
	uint64_t sq_tx;	 /* WR being transmitted */
	uint64_t tx_off; /* bytes of it sent */
	uint32_t npsn;	 /* next PSN to send */
	/* the furthest the transmitter got (go-back-N rewinds sq_tx, tx_off
	 * and npsn; ACKs may still come for what was sent beyond) */
	uint64_t hi_tx, hi_off;
	uint32_t hi_psn;
	uint32_t una;	 /* oldest unacknowledged PSN */
	uint32_t rd_out; /* READ/atomic requests outstanding */
	uint32_t since_req;
	uint8_t retry_left, rnr_left;
	bool probe;	     /* after a timeout: one packet out until an ACK moves */
	uint64_t deadline;   /* retransmission timer, 0: off */
	uint64_t rnr_until;  /* RNR wait: transmit nothing before */
	uint32_t resync_psn; /* READ response gap already asked again for */
	bool resync_on;
	struct roce_fault *fault; /* per-QP fault injection (NULL: device's) */

	/* responder (NIC) */
	uint32_t epsn; /* expected PSN */
	uint32_t msn;
	bool nak_sent; /* one NAK per out-of-sequence episode */
	bool ack_pending;
	uint64_t ack_round; /* the round whose receive made it pending */
	uint32_t unacked;
	bool in_send, in_write, drop_msg;
	uint64_t recv_off;
	uint32_t recv_dev; /* the receive WQE being filled names device memory */
	uint32_t wr_tag;   /* the WRITE's MR: its device-memory tag (devmem.h) */
	uint8_t *wr_ptr;   /* WRITE in progress: where the next byte goes */
	uint32_t wr_rkey;  /* ... in the MR of this rkey, re-checked per packet:
			     a dereg between packets ends the message */
	uint64_t wr_left;
	uint64_t wr_total;
	struct {
		uint32_t psn;
		uint64_t orig;
		bool valid;
	} atom[SUDP_MAX_RD_ATOMIC];
	uint32_t atom_next;
	/* the last READ requests executed (the responder resources of IBTA
	 * 9.7.5.1.4): a duplicate READ is executed again only if it asks for
	 * the rest of one of these from one of its PSNs (o9-...: "valid
	 * duplicate"); any other duplicate READ is dropped */
	struct {
		uint64_t va;
		uint32_t psn, npkts, rkey, len;
		bool valid;
	} rd[SUDP_MAX_RD_ATOMIC];
	uint32_t rd_next;
	uint16_t peer_sport[2]; /* accept packets only from these UDP source
				   ports, [0] = 0: any (the device's peer_port=) */

	bool flushed; /* ERR: queues flushed up to the indices seen */
};

struct sudp_txslot {
	uint8_t buf[SUDP_PKT_MAX];
};

struct sudp_counters {
	_Atomic uint64_t v[32];
};

/* indices into struct sudp_counters */
enum {
	SC_UC_DROP_ACCESS,
	SC_UC_DROP_NO_RECV,
	SC_UC_DROP_NOT_READY,
	SC_NAK_ACCESS,
	SC_NAK_RNR,
	SC_NAK_INV_REQ,
	SC_NAK_OP_ERR,
	SC_NAK_SEQ,
	SC_TX_PKTS,
	SC_RX_PKTS,
	SC_RX_BAD,
	SC_RX_ICRC,
	SC_RX_NO_QP,
	SC_RETRANSMIT,
	SC_TIMEOUT,
	SC_NAK_RCVD,
	SC_RNR_RCVD,
	SC_DUP,
	SC_UC_MSG_DROPPED,
	SC_NCOUNTERS
};

struct sudp_device {
	struct ql_device base;
	pthread_mutex_t setup; /* setup calls among themselves */
	_Atomic int nic_lock;  /* the NIC thread against setup calls */
	_Atomic int want_lock;
	char name[QL_DEVICE_NAME_MAX];
	union ibv_gid gid;
	int family;
	uint8_t my_ip[16];
	uint16_t port;
	int sock;
	int efd;
	enum sudp_poll_mode poll_mode;
	uint32_t idle_us;
	int cpu; /* the NIC thread's CPU, -1: any */
	enum sudp_peer_port peer_port;
	uint16_t peer_port_n; /* SUDP_PEER_PORT_FIXED */
	enum ibv_mtu active_mtu;
	bool caller; /* progress=caller: no NIC thread, the application's calls
			run the NIC (ql__sudp_progress) */
	pthread_t thread;
	_Atomic bool stop;
	_Atomic int need_wakeup;

	uint32_t next_pd_id;
	uint32_t key_secret[2];
	uint32_t mr_epoch[SUDP_MAX_MR];
	struct sudp_mr_entry mr[SUDP_MAX_MR];
	struct sudp_mr *mrs[SUDP_MAX_MR];
	uint32_t qp_gen[SUDP_MAX_QP];
	struct sudp_qp *qps[SUDP_MAX_QP];
	struct sudp_qp *live[SUDP_MAX_QP]; /* compact list the NIC walks */
	uint32_t nlive;

	struct roce_fault_cfg fault_cfg;
	struct roce_fault *fault; /* device-wide, NULL: none */
	struct roce_pcap *pcap;	  /* ?pcap=FILE, NULL: none */
	struct sudp_counters cnt;
	/* datagrams the kernel dropped at this socket (full receive buffer),
	 * its 32-bit count (SO_RXQ_OVFL) extended to 64: the low 32 bits are
	 * the last count seen; written by the NIC only */
	_Atomic uint64_t rx_kdrops;

	/* NIC thread private: batches */
	struct sudp_txslot *tx;
	struct iovec tx_iov[SUDP_BATCH];
	struct mmsghdr tx_msg[SUDP_BATCH];
	struct sockaddr_storage tx_peer[SUDP_BATCH];
	uint32_t ntx;
	struct sudp_txslot *rx;
	struct iovec rx_iov[SUDP_BATCH];
	struct mmsghdr rx_msg[SUDP_BATCH];
	struct sockaddr_storage rx_peer[SUDP_BATCH];
	union {
		char buf[CMSG_SPACE(sizeof(uint32_t))]; /* SO_RXQ_OVFL's count */
		struct cmsghdr align;
	} rx_ctl[SUDP_BATCH];
	uint64_t now;
	uint64_t round; /* rounds run (nic_round): an ACK waits for the next */
};

/* rx_kdrops after the kernel's 32-bit count k, seen after v */
static inline uint64_t sudp_kdrops_extend(uint64_t v, uint32_t k)
{
	return v + (uint32_t)(k - (uint32_t)v);
}

static inline void sudp_cnt(struct sudp_device *d, int i)
{
	atomic_fetch_add_explicit(&d->cnt.v[i], 1, memory_order_relaxed);
}

/* 24-bit PSN arithmetic: the signed distance a - b in (-2^23, 2^23]. */
static inline int32_t sudp_psn_diff(uint32_t a, uint32_t b)
{
	return (int32_t)((a - b) << 8) >> 8;
}

static inline void sudp_dev_lock(struct sudp_device *d)
{
	atomic_fetch_add(&d->want_lock, 1);
	while (atomic_exchange_explicit(&d->nic_lock, 1, memory_order_acquire))
		sched_yield();
	atomic_fetch_sub(&d->want_lock, 1);
}

static inline void sudp_dev_unlock(struct sudp_device *d)
{
	atomic_store_explicit(&d->nic_lock, 0, memory_order_release);
}

/* Wake the NIC thread if it sleeps (a post made work for it). */
SUDP_HIDDEN void ql__sudp_kick(struct sudp_device *d);
SUDP_HIDDEN void ql__sudp_kick_always(struct sudp_device *d);

/* device.c: what ql_device_query reports and ql_qp_create checks */
SUDP_HIDDEN extern const struct ql__nic_limits ql__sudp_limits;

/* qp.c */
SUDP_HIDDEN extern const struct ql__qp_ops ql__sudp_qp_ops;
SUDP_HIDDEN extern const struct ql__cq_ops ql__sudp_cq_ops;
SUDP_HIDDEN int ql__sudp_qp_create(struct ql_pd *pd, struct ql_qp_init_attr *attr,
				   struct ql_qp **qp);
SUDP_HIDDEN int ql__sudp_qp_destroy(struct ql_qp *qp);
SUDP_HIDDEN int ql__sudp_qp_modify(struct ql_qp *qp, struct ibv_qp_attr *attr, int attr_mask);
SUDP_HIDDEN int ql__sudp_qp_query(struct ql_qp *qp, struct ibv_qp_attr *attr, int attr_mask,
				  struct ql_qp_init_attr *init_attr);
SUDP_HIDDEN bool ql__sudp_mr_referenced(struct sudp_device *dev, uint32_t lkey);

/* The UDP source ports kernel rxe sends a QP's packets from (requests and
 * responses alike). Linux <= 5.17 (rxe_qp.c): RXE_ROCE_V2_SPORT (0xc000) +
 * (hash_32(qp_num, 14) & 0x3fff), hash_32 the multiplicative hash of
 * include/linux/hash.h (GOLDEN_RATIO_32 0x61c88647). Linux >= 5.18
 * (rxe_modify_qp): rdma_get_udp_sport(flow_label, own QPN, peer QPN) of
 * include/rdma/ib_verbs.h, with flow label 0: the 20-bit fold of
 * lqpn * rqpn (rdma_calc_flow_label), its high 6 bits XORed into the low 14,
 * | 0xc000 (rdma_flow_label_to_udp_sport). rxe_qpn: the rxe QP's number
 * (our dest_qpn), our_qpn: ours. */
static inline uint16_t sudp_rxe_sport_old(uint32_t rxe_qpn)
{
	return (uint16_t)(0xc000u + (((rxe_qpn * 0x61c88647u) >> (32 - 14)) & 0x3fffu));
}

static inline uint16_t sudp_rxe_sport(uint32_t rxe_qpn, uint32_t our_qpn)
{
	uint64_t v = (uint64_t)rxe_qpn * our_qpn;
	uint32_t fl, lo;

	v ^= v >> 20;
	v ^= v >> 40;
	fl = (uint32_t)(v & 0xfffffu);
	lo = (fl & 0x3fffu) ^ ((fl & 0xfc000u) >> 14);
	return (uint16_t)(lo | 0xc000u);
}

/* device.c: getrandom (setup calls only) */

/* qp.c: the ports a QP's peer may send from (0: any) */
SUDP_HIDDEN void ql__sudp_peer_sport(const struct sudp_qp *qp, uint16_t port[2]);

/* nic.c (the roles it runs: nic_int.h) */
SUDP_HIDDEN void *ql__sudp_nic_main(void *arg);
/* wire.c: the receive batch's buffers (once, at open) */
SUDP_HIDDEN void ql__sudp_rx_init(struct sudp_device *dev);
/* Caller progress: one bounded round of the NIC in the calling thread
 * (rx false: timers and transmit only, no recvmmsg), unless another thread
 * runs one now or a setup call waits for the NIC flag (then 0 at once).
 * > 0 when something moved. */
SUDP_HIDDEN int ql__sudp_progress(struct sudp_device *d, bool rx);
/* In caller mode, the post and poll calls run the NIC (hot path: a
 * branch, and one try of the NIC flag) */
static inline void sudp_caller_progress(struct sudp_device *d, bool rx)
{
	if (d->caller)
		(void)ql__sudp_progress(d, rx);
}

/* Caller mode's transmit batching (docs/progress.md §3): a post joins the
 * transmit batch instead of sending at once while the QP streams —
 * SUDP_TX_STREAM or more WRs sent and not yet acknowledged — until the
 * batch would hold SUDP_BATCH WRs; the next round (any poll, progress, or
 * post that finds the QP not streaming) sends it. A ping-pong has one WR
 * in flight and is never batched. The application thread reads the NIC's
 * counters here without the NIC flag: a stale value only moves one post's
 * packets to the next round or sends a batch early. */
static inline bool sudp_tx_batches(const struct sudp_qp *qp, uint64_t pi)
{
	uint64_t ci = __atomic_load_n(&qp->sq_ci, __ATOMIC_RELAXED);
	uint64_t hi = __atomic_load_n(&qp->hi_tx, __ATOMIC_RELAXED);

	return hi - ci >= SUDP_TX_STREAM && pi - hi < SUDP_BATCH;
}
SUDP_HIDDEN void ql__sudp_qp_reset_transport(struct sudp_qp *qp);

#endif
