/* SPDX-License-Identifier: MIT */
/*
 * sdr_int: the inside of an SDR connection, shared by the core (sdr.c,
 * sdr_ctrl.c, sdr_send.c, sdr_recv.c, sdr_poll.c, mem.c) and the
 * reliability schemes (rel.c, ec.c).
 *
 * A reliability scheme is a table of hooks (struct ql_sdr_ops) the core
 * calls on a message's events, and a set of helpers it may call back: queue
 * packets of the message for (re)transmission, send a control message,
 * read the bitmaps, mark packets rebuilt, end the message. The core owns
 * the QPs, the credits, the wire and the validation of what a peer sends;
 * a scheme owns only the decisions. A new scheme is a new table in
 * ql_sdr_ops_table() (sdr.c looks it up by enum ql_sdr_rel) and nothing
 * else: the core never tests which scheme a message uses.
 *
 * All hooks run inside ql_sdr_progress (or the post calls), on the thread
 * driving the connection; they must not block, allocate or lock (scratch
 * space: tx_priv_size / rx_priv_size bytes per message, reserved at
 * connect time, and conn_init for per-connection tables).
 */
#ifndef QL_SDR_SDR_INT_H
#define QL_SDR_SDR_INT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "qlink/sdr.h"

/* ---- control messages (RC SEND/RECV; docs/sdr.md "Control messages") --- */

#define QL_SDR_CTRL_MAX 256	       /* bytes of one control message, at most */
#define QL_SDR_CTRL_HDR 24	       /* the header below */
#define QL_SDR_HELLO_MAGIC 0x51534452u /* "QSDR" */
#define QL_SDR_VERSION 1

enum ql_sdr_ctrl_type {
	QL_SDR_C_HELLO = 1,	 /* both ways at set-up: geometry, root MR */
	QL_SDR_C_CTS = 2,	 /* receiver: clear to send id/gen, len, rel */
	QL_SDR_C_ACK = 3,	 /* receiver: message id/gen complete */
	QL_SDR_C_NACK = 4,	 /* receiver: these packet ranges are missing */
	QL_SDR_C_ACK_REQ = 5,	 /* sender: timeout, say what you have */
	QL_SDR_C_FAIL = 6,	 /* receiver: the receive id/gen was abandoned (a = errno) */
	QL_SDR_C_CREDIT = 7,	 /* receiver: cumulative receives consumed (credit), b = echo */
	QL_SDR_C_CREDIT_REQ = 8, /* sender: report credits now, a/b = sender's count */
	QL_SDR_C_FIN = 9,	 /* sender: every packet of id/gen was posted once */
	QL_SDR_C_ABORT = 10,	 /* sender: the send to id/gen gave up (a = errno) */
	/* 0x40..0x7f: the scheme's own, routed to the message's scheme: with
	 * QL_SDR_REL_TO_SENDER set in rel (what ql_sdr__rx_ctrl sends) to
	 * tx_on_ctrl of the send, else (ql_sdr__tx_ctrl) to rx_on_ctrl */
	QL_SDR_C_EXT_FIRST = 0x40,
	QL_SDR_C_EXT_LAST = 0x7f,
};

#define QL_SDR_REL_TO_SENDER 0x80

/* The header, host order here; on the wire every field is big-endian at
 * the offsets given (ql_sdr__ctrl_pack / _unpack). */
struct ql_sdr_ctrl {
	uint8_t type;	 /* 0 */
	uint8_t rel;	 /* 1: enum ql_sdr_rel of the message (0 otherwise) */
	uint16_t msg_id; /* 2 */
	uint32_t gen;	 /* 4: the receiver's incarnation number of msg_id */
	uint64_t credit; /* 8: receiver->sender: receives consumed so far */
	uint32_t a;	 /* 16: type-specific */
	uint32_t b;	 /* 20: type-specific */
	/* 24..: payload (len - 24 bytes) */
	uint32_t plen;
	uint8_t payload[QL_SDR_CTRL_MAX - QL_SDR_CTRL_HDR];
};

/* NACK payload: up to this many (first, count) ranges of 2 x u32 BE */
#define QL_SDR_NACK_RANGES ((QL_SDR_CTRL_MAX - QL_SDR_CTRL_HDR) / 8)

struct ql_sdr_range {
	uint32_t first;
	uint32_t count;
};

/* ---- messages -------------------------------------------------------- */

enum ql_sdr_state {
	QL_SDR_S_FREE = 0,
	QL_SDR_S_WAIT_CTS, /* send: posted, no clear-to-send matched yet */
	QL_SDR_S_ACTIVE,   /* send: packets going; recv: posted, packets arriving */
	QL_SDR_S_DONE,	   /* ended, status set; waiting for release */
};

struct ql_sdr_conn;
struct ql_sdr_ops;

/* One message being sent (the public struct ql_sdr_send). */
struct ql_sdr_send {
	struct ql_sdr_conn *conn;
	const struct ql_sdr_ops *ops;
	uint32_t index; /* in conn->tx */
	int state;	/* enum ql_sdr_state */
	int status;
	enum ql_sdr_rel rel;
	uint32_t user;
	const uint8_t *addr; /* the data */
	uint64_t len;
	uint32_t lkey;
	/* from the clear-to-send */
	uint32_t msg_id, gen;
	uint64_t raddr; /* the peer's slot: root + msg_id * stride */
	uint32_t rkey;
	/* geometry: packets 0..ndata-1 carry the data, ndata..npkts-1 parity */
	uint32_t ndata, nparity, npkts;
	uint8_t *parity; /* this context's parity region: packet ndata + q at
			    parity + q * mtu (NULL when parity_size is 0) */
	uint32_t parity_lkey;
	/* packets to post: bit set = wanted; cursor: where the next scan starts */
	uint64_t *want;
	uint64_t *sent_once; /* posted at least once (retransmission counting) */
	uint32_t want_count, cursor;
	uint64_t last_send_ns; /* last packet of this message posted */
	uint64_t last_wr;      /* conn->sq_posted after its last packet */
	bool draining;	       /* ended, waiting for its posted packets to complete */
	uint64_t deadline_ns;  /* the scheme's timer (0: none) */
	uint32_t retries;
	ql_sdr_send_cb cb;
	void *arg;
	void *priv;		  /* ops->tx_priv_size bytes */
	struct ql_sdr_send *next; /* conn's active list */
};

/* One message being received (the public struct ql_sdr_recv); conn->rx
 * is indexed by message id. state is read by the backend with acquire. */
struct ql_sdr_recv {
	struct ql_sdr_conn *conn;
	const struct ql_sdr_ops *ops;
	uint32_t msg_id;
	uint32_t gen;
	_Atomic int state; /* enum ql_sdr_state */
	int status;
	enum ql_sdr_rel rel;
	uint8_t *addr; /* the slot */
	uint64_t len;
	uint32_t ndata, nparity, npkts, nchunks;
	_Atomic uint64_t *pkt_bits;    /* npkts bits (data, then parity) */
	_Atomic uint64_t *chunk_bits;  /* nchunks bits */
	_Atomic uint32_t *chunk_count; /* data packets present per chunk */
	_Atomic uint32_t pkts_done;    /* data + parity packets present */
	_Atomic uint32_t chunks_done;
	_Atomic uint32_t user;
	uint64_t cts_ns, last_pkt_ns, last_nack_ns;
	uint32_t pkt_high; /* 1 + the highest packet that arrived (0: none) */
	uint32_t retries, pkts_at_nack;
	bool fin; /* the sender said every packet was posted once */
	uint64_t fin_ns;
	bool ack_pending, fail_pending; /* control message still to send */
	ql_sdr_recv_cb cb;
	ql_sdr_chunk_cb chunk_cb;
	void *arg;
	void *priv; /* ops->rx_priv_size bytes */
};

/* ---- the scheme table -------------------------------------------------- */

struct ql_sdr_ops {
	enum ql_sdr_rel rel;
	const char *name;
	size_t tx_priv_size, rx_priv_size;
	/* Optional per-connection set-up after the handshake (tables, scratch)
	 * and its undoing; conn->ops_state[rel] is the scheme's to use. */
	int (*conn_init)(struct ql_sdr_conn *c);
	void (*conn_fini)(struct ql_sdr_conn *c);
	/* Parity packets a message of ndata data packets carries (both ends
	 * compute it from the same configuration); NULL: 0. At most what the
	 * slot's parity region holds (the core checks). */
	uint32_t (*parity_packets)(const struct ql_sdr_conn *c, uint32_t ndata);
	/* send side */
	/* The clear-to-send matched: queue packets (ql_sdr__tx_queue), e.g.
	 * all of them; encode parity into tx->parity. Non-zero: the message
	 * fails with that status. */
	int (*tx_start)(struct ql_sdr_send *tx);
	/* Every queued packet was posted (the queue ran empty). */
	void (*tx_on_sent)(struct ql_sdr_send *tx, uint64_t now);
	/* A control message about this message from the receiver (ACK, NACK,
	 * FAIL handled by the core first where noted in docs, EXT types). */
	void (*tx_on_ctrl)(struct ql_sdr_send *tx, const struct ql_sdr_ctrl *m, uint64_t now);
	void (*tx_tick)(struct ql_sdr_send *tx, uint64_t now);
	/* receive side */
	int (*rx_start)(struct ql_sdr_recv *rx);
	/* A packet from the wire set its bit (pkt < npkts; parity ones too;
	 * not called for packets the scheme marks with ql_sdr__rx_mark, so a
	 * hook may mark without re-entering itself). Chunk accounting follows
	 * the hook; if the hook ended the message, nothing more is done. */
	void (*rx_on_packet)(struct ql_sdr_recv *rx, uint32_t pkt, uint64_t now);
	/* A chunk of data packets became complete. */
	void (*rx_on_chunk)(struct ql_sdr_recv *rx, uint32_t chunk, uint64_t now);
	/* Every chunk is complete (the core then ends the message with 0
	 * unless the hook ended it itself). */
	void (*rx_on_complete)(struct ql_sdr_recv *rx, uint64_t now);
	void (*rx_on_ctrl)(struct ql_sdr_recv *rx, const struct ql_sdr_ctrl *m, uint64_t now);
	void (*rx_tick)(struct ql_sdr_recv *rx, uint64_t now);
};

extern const struct ql_sdr_ops ql_sdr_ops_none;
extern const struct ql_sdr_ops ql_sdr_ops_sr;
/* sdrec's (src/sdr/ec.c) */
extern const struct ql_sdr_ops ql_sdr_ops_ec;
/* The table of a scheme, NULL for a value that names none. */
const struct ql_sdr_ops *ql_sdr_ops_table(enum ql_sdr_rel rel);

/* ---- the connection ---------------------------------------------------- */

struct ql_sdr_peer {
	uint64_t root_addr;
	uint32_t rkey;
	uint32_t slots;
	uint64_t slot_stride;
	uint64_t max_msg_size;
	uint64_t parity_size;
	uint32_t mtu;
	uint32_t recv_depth;
	uint32_t chunk_packets;
	uint16_t ec_code; /* HELLO bytes 6-7: the peer's EC code (ql_sdr__ec_code) */
};

/* A clear-to-send not yet matched to a send. */
struct ql_sdr_cts {
	uint32_t msg_id, gen;
	uint64_t len;
	uint32_t rel;
};

#define QL_SDR_POST_BATCH 32

struct ql_sdr_conn {
	struct ql_sdr_config cfg; /* defaults filled in */
	struct ql_pd *pd;
	struct ql_device *dev;
	struct ql_cq *data_scq, *data_rcq, *ctrl_scq, *ctrl_rcq;
	struct ql_qp *data_qp, *ctrl_qp;
	struct ql_sdr_mem *mem; /* receive slots */
	uint32_t local_mtu;	/* what this side offers */
	uint32_t mtu;		/* agreed (after the handshake) */
	bool connected;
	int broken; /* negative errno once a QP failed */
	struct ql_sdr_peer peer;

	/* control path: ctrl_depth receive buffers and send buffers */
	uint32_t ctrl_depth;
	uint8_t *ctrl_buf; /* 2 * ctrl_depth * QL_SDR_CTRL_MAX */
	struct ql_mr *ctrl_mr;
	uint32_t ctrl_send_head; /* sends posted */
	uint32_t ctrl_send_done; /* sends completed */
	/* messages waiting for room in the control send queue (ctrl_depth) */
	uint8_t *ctrl_backlog;
	uint32_t *ctrl_backlog_len;
	uint32_t ctrl_backlog_head, ctrl_backlog_count;
	bool handshaking, hello_received, hello_bad;
	struct ql_sdr_peer hello;	   /* the peer's, as received */
	uint32_t rx_max_pkts, tx_max_pkts; /* bitmap sizes (packets per slot) */
	size_t parity_stride;		   /* bytes of each send context's parity */
	size_t tx_priv_max, rx_priv_max;
	bool ops_inited[QL_SDR_REL_COUNT];
	uint64_t last_tick_ns;

	/* send side */
	uint32_t ntx;
	struct ql_sdr_send *tx;	       /* ntx contexts */
	struct ql_sdr_send *tx_active; /* list */
	struct ql_sdr_send **tx_wait;  /* FIFO of sends waiting for a CTS (ntx) */
	uint32_t tx_wait_head, tx_wait_count;
	struct ql_sdr_cts *cts_q; /* FIFO of unmatched CTSs (peer slots) */
	uint32_t cts_head, cts_count;
	struct ql_sdr_send **tx_by_id; /* peer msg id -> active send */
	uint8_t *peer_id_busy;	       /* peer msg id has a CTS queued or a send */
	uint8_t *parity_buf;	       /* ntx x parity region */
	struct ql_mr *parity_mr;
	/* credits (docs/sdr.md "Credits") */
	uint64_t pkts_posted;	/* S: data packets posted on the UC QP */
	uint64_t peer_consumed; /* C: highest the peer reported */
	uint64_t lost;		/* L: reclaimed as lost */
	uint64_t credit_req_ns; /* when the last CREDIT_REQ went */
	uint64_t reclaim_c;	/* C of the last answer for the same S (else ~0) */
	uint64_t credit_reqs;	/* CREDIT_REQs sent (the tests count them) */
	bool credit_req_pending;
	bool credit_stalled;
	uint64_t last_data_ns;
	/* UC send queue: completions signaled every sig_every posts */
	uint32_t sq_depth, sig_every;
	uint64_t sq_posted;   /* WRs posted on the UC QP (packets and fences) */
	uint64_t sq_done;     /* of them known complete (wr_id = sequence) */
	uint64_t sq_signaled; /* the last signaled one */
	bool need_fence;      /* a zero-length signaled WRITE is due (draining) */
	struct ibv_send_wr wrs[QL_SDR_POST_BATCH];
	struct ibv_sge sges[QL_SDR_POST_BATCH];

	/* receive side */
	struct ql_sdr_recv *rx; /* slots entries, index = msg id */
	uint32_t recv_depth;
	uint64_t consumed; /* receive completions polled */
	uint64_t consumed_reported;
	uint32_t gen_next;
	struct ibv_recv_wr rwrs[QL_SDR_POST_BATCH];
	struct ibv_wc wcs[QL_SDR_POST_BATCH];
	struct ibv_wc dwcs[QL_SDR_POST_BATCH]; /* the data receive CQ's (drain_data) */
	uint32_t nrx_active;

	struct ql_sdr_stats st;
	void *ops_state[QL_SDR_REL_COUNT]; /* the schemes' per-connection state */
};

/* ---- helpers for the schemes --------------------------------------------- */

/* Bytes of packet pkt of a message of len bytes, ndata data packets: the
 * MTU, less for the last data packet; parity packets are whole MTUs. */
static inline uint32_t ql_sdr__pkt_len(const struct ql_sdr_conn *c, uint64_t len, uint32_t ndata,
				       uint32_t pkt)
{
	if (pkt + 1 < ndata || pkt >= ndata)
		return c->mtu;
	return (uint32_t)(len - (uint64_t)(ndata - 1) * c->mtu);
}

/* Where packet pkt lives in the slot: at pkt * mtu, data and parity
 * alike (parity packets ndata.. follow the data's last, padded, packet). */
static inline uint64_t ql_sdr__pkt_offset(const struct ql_sdr_conn *c, uint32_t pkt)
{
	return (uint64_t)pkt * c->mtu;
}

static inline bool ql_sdr__bit(const _Atomic uint64_t *w, uint32_t i)
{
	return (atomic_load_explicit(&w[i / 64], memory_order_acquire) >> (i % 64)) & 1;
}

/* send side */
/* Queue packets [first, first + count) of tx (clipped to npkts) to be
 * posted as credits allow; already queued ones stay queued once. */
void ql_sdr__tx_queue(struct ql_sdr_send *tx, uint32_t first, uint32_t count);
/* End the message: status 0 or a negative errno; the callback runs. */
void ql_sdr__tx_complete(struct ql_sdr_send *tx, int status);
/* Send a control message about tx to the receiver (header msg_id, gen,
 * rel filled in). 0, or -EAGAIN when the control send queue is full. */
int ql_sdr__tx_ctrl(struct ql_sdr_send *tx, uint8_t type, uint32_t a, uint32_t b,
		    const void *payload, uint32_t plen);
/* Where packet pkt's bytes come from (data or this context's parity). */
void *ql_sdr__tx_pkt_addr(const struct ql_sdr_send *tx, uint32_t pkt);

/* receive side */
/* Send a control message about rx to the sender; as above. */
int ql_sdr__rx_ctrl(struct ql_sdr_recv *rx, uint8_t type, uint32_t a, uint32_t b,
		    const void *payload, uint32_t plen);
/* The missing packets of rx within [from, limit) as ranges (at most
 * max); returns how many ranges were written. */
uint32_t ql_sdr__rx_missing(const struct ql_sdr_recv *rx, uint32_t from, uint32_t limit,
			    struct ql_sdr_range *r, uint32_t max);
/* How many packets of rx within [0, limit) are missing. */
uint32_t ql_sdr__rx_missing_count(const struct ql_sdr_recv *rx, uint32_t limit);
/* NACK what rx lacks below limit, as ranges from `from` on (wrapping to 0
 * once); `missing` is the message's total lack, sent along. Sets
 * rx->last_nack_ns; returns where the next NACK starts (rel.c). */
uint32_t ql_sdr__rx_nack(struct ql_sdr_recv *rx, uint32_t from, uint32_t limit, uint32_t missing,
			 uint64_t now);
/* Mark packets [first, first+count) present without a packet on the wire
 * (rebuilt by the scheme: counted as recovered); chunk and completion
 * accounting run as for a received packet (rx_on_chunk, rx_on_complete),
 * rx_on_packet does not. Bits already set are skipped. */
void ql_sdr__rx_mark(struct ql_sdr_recv *rx, uint32_t first, uint32_t count, uint64_t now);
/* End the message (status 0 or negative errno); the callback runs. */
void ql_sdr__rx_complete(struct ql_sdr_recv *rx, int status);
/* Slot address of packet pkt. */
void *ql_sdr__rx_pkt_addr(const struct ql_sdr_recv *rx, uint32_t pkt);

/* The EC code a configuration uses, (k << 8) | m with the defaults filled
 * in (src/sdr/ec.c); carried in the HELLO so that the EC scheme refuses to
 * run between ends that would not decode each other's parity. */
uint16_t ql_sdr__ec_code(const struct ql_sdr_config *cfg);

/* control message encoding (also used by the tests' hostile peer) */
size_t ql_sdr__ctrl_pack(const struct ql_sdr_ctrl *m, uint8_t *buf);
int ql_sdr__ctrl_unpack(const uint8_t *buf, size_t len, struct ql_sdr_ctrl *m);

/* ---- the core's own seams (sdr.c, sdr_ctrl.c, sdr_send.c, sdr_recv.c,
 * sdr_poll.c); not for the schemes ------------------------------------- */

/* big-endian fields of the control messages and the HELLO */
static inline void ql_sdr__put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}
static inline void ql_sdr__put32(uint8_t *p, uint32_t v)
{
	ql_sdr__put16(p, (uint16_t)(v >> 16));
	ql_sdr__put16(p + 2, (uint16_t)v);
}
static inline void ql_sdr__put64(uint8_t *p, uint64_t v)
{
	ql_sdr__put32(p, (uint32_t)(v >> 32));
	ql_sdr__put32(p + 4, (uint32_t)v);
}
static inline uint16_t ql_sdr__get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}
static inline uint32_t ql_sdr__get32(const uint8_t *p)
{
	return (uint32_t)ql_sdr__get16(p) << 16 | ql_sdr__get16(p + 2);
}
static inline uint64_t ql_sdr__get64(const uint8_t *p)
{
	return (uint64_t)ql_sdr__get32(p) << 32 | ql_sdr__get32(p + 4);
}

/* connection (sdr.c): the peer's HELLO validated into h; 0 or -EPROTO */
int ql_sdr__hello_unpack(const uint8_t *p, uint32_t len, struct ql_sdr_peer *h);

/* control path (sdr_ctrl.c) */
/* The receive buffer of control ring entry i. */
static inline uint8_t *ql_sdr__ctrl_rbuf(struct ql_sdr_conn *c, uint32_t i)
{
	return c->ctrl_buf + (size_t)i * QL_SDR_CTRL_MAX;
}
/* (Re-)post control receive i. */
int ql_sdr__ctrl_post_recv(struct ql_sdr_conn *c, uint32_t i);
/* Move backlogged control messages to the send queue while it has room. */
void ql_sdr__ctrl_flush(struct ql_sdr_conn *c);
/* Send one control message (the credit filled in); backlogged when the
 * send queue is full, -EAGAIN when the backlog is full too, -EMSGSIZE for
 * a payload above what a message carries. */
int ql_sdr__msg_ctrl(struct ql_sdr_conn *c, uint8_t type, enum ql_sdr_rel rel, uint32_t id,
		     uint32_t gen, uint32_t a, uint32_t b, const void *payload, uint32_t plen);

/* sender (sdr_send.c) */
/* Start sends whose clear-to-send has come, in order. */
void ql_sdr__tx_match(struct ql_sdr_conn *c);
/* The user-visible end of a send whose posted packets are complete. */
void ql_sdr__tx_finish(struct ql_sdr_send *tx);
/* Post packets of the active sends as credits and the send queue allow;
 * returns the packets posted. */
int ql_sdr__tx_pump(struct ql_sdr_conn *c, uint64_t now);

/* receiver (sdr_recv.c) */
/* Post n data receives (zero-length: RDMA WRITE with immediate). */
int ql_sdr__post_data_recvs(struct ql_sdr_conn *c, uint32_t n);
/* Drain the data receive CQ into the bitmaps, receives re-posted; the
 * completions handled or a negative errno. */
int ql_sdr__rx_drain(struct ql_sdr_conn *c, uint64_t now);

#endif
