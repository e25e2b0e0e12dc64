/* SPDX-License-Identifier: MIT */
/*
 * sdr: software-defined reliability over unreliable RDMA (SDR-RDMA, arXiv
 * 2505.05366).
 *
 * A message is written into a slot of the receiver's registered root buffer
 * as one RDMA WRITE WITH IMMEDIATE per MTU packet on a UC QP; the immediate
 * names the message and the packet. The receiver's backend polls the
 * receive CQ, re-posts receives and sets a bit per packet in a lock-free
 * bitmap, and a frontend bitmap per chunk of packets tells the application
 * which parts have arrived, so reliability is the application's choice per
 * message: none (UC semantics: what arrived, with its bitmap), selective
 * repeat (the receiver NACKs the gaps of its bitmap), or erasure coding.
 * Set-up, clear-to-send, credits, NACKs and ACKs travel on a reliable RC
 * control QP beside the UC data QP. Everything goes through the public verbs
 * API (qlink/verbs.h), so it runs on soft://loop, soft+shm, soft+udp and ibv.
 *
 * Wire format, credit rule and state machines: docs/sdr.md.
 *
 * Threading: a connection is driven by one thread at a time (the caller's
 * ql_sdr_progress and post/poll calls), like a verbs QP; the bitmaps may be
 * read from any thread. The memory table is thread-safe.
 */
#ifndef QLINK_SDR_H
#define QLINK_SDR_H

#include <arpa/inet.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <qlink/verbs.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the immediate ------------------------------------------------------ */

/* The 32-bit immediate of every data packet, in host terms:
 *   bits 31..22  message id (10 bits: 0..1023), the receiver's slot
 *   bits 21..4   packet offset (18 bits: 0..262143), in packets of the MTU
 *   bits  3..0   user bits (4 bits: 0..15), passed through to the receiver
 * On the wire (and in struct ibv_send_wr.imm_data / struct ibv_wc.imm_data,
 * which verbs declares __be32) it is in network byte order: the encoder
 * returns the __be32 to store in imm_data, the decoder takes it as read
 * from the completion. */
#define QL_SDR_MSG_ID_BITS 10
#define QL_SDR_PKT_BITS 18
#define QL_SDR_USER_BITS 4
#define QL_SDR_MAX_MSG_IDS (1u << QL_SDR_MSG_ID_BITS)
#define QL_SDR_MAX_PACKETS (1u << QL_SDR_PKT_BITS)
#define QL_SDR_MAX_USER ((1u << QL_SDR_USER_BITS) - 1)

/* Encode; the fields are masked to their widths. */
static inline __be32 ql_sdr_imm_encode(uint32_t msg_id, uint32_t pkt, uint32_t user)
{
	uint32_t h = ((msg_id & 0x3ffu) << 22) | ((pkt & 0x3ffffu) << 4) | (user & 0xfu);

	return (__be32)htonl(h);
}

static inline void ql_sdr_imm_decode(__be32 imm, uint32_t *msg_id, uint32_t *pkt, uint32_t *user)
{
	uint32_t h = ntohl((uint32_t)imm);

	*msg_id = (h >> 22) & 0x3ffu;
	*pkt = (h >> 4) & 0x3ffffu;
	*user = h & 0xfu;
}

/* ---- the memory table --------------------------------------------------- */

/* A root buffer of `slots` slots of `slot_stride` bytes each, allocated on
 * a PD (ql_pd_mem_alloc) and registered once; a table maps a message id
 * (the slot index) to its offset and length, the local MR, and the remote
 * MR it is written to (the sender's view: where the peer's slot is). */
struct ql_sdr_mem;

struct ql_sdr_slot {
	uint32_t msg_id;
	uint64_t offset;	/* of the slot in the root buffer: msg_id * slot_stride */
	void *addr;		/* root + offset */
	uint64_t length;	/* bytes allocated to the message (<= slot_stride) */
	struct ql_mr *local_mr; /* the root MR */
	/* the remote side of this id (0 until ql_sdr_mem_update_remote) */
	uint64_t remote_addr;
	uint32_t remote_rkey;
	uint64_t remote_length;
};

/* slot_stride: bytes per slot (max_msg_size plus any parity region);
 * slots: 1..QL_SDR_MAX_MSG_IDS; access: IBV_ACCESS_* of the root MR. */
int ql_sdr_mem_create(struct ql_pd *pd, uint64_t slot_stride, uint32_t slots, int access,
		      struct ql_sdr_mem **mem);
/* -EBUSY while slots are allocated. */
int ql_sdr_mem_destroy(struct ql_sdr_mem *mem);
/* Allocate the slot msg_id for a message of length bytes (<= slot_stride):
 * -EBUSY if it is allocated, -ERANGE for a bad id or length. */
int ql_sdr_mem_alloc(struct ql_sdr_mem *mem, uint32_t msg_id, uint64_t length,
		     struct ql_sdr_slot *slot);
/* Allocate any free slot, least recently freed first (so an id is reused
 * as late as possible); -ENOSPC when none is free. */
int ql_sdr_mem_alloc_any(struct ql_sdr_mem *mem, uint64_t length, struct ql_sdr_slot *slot);
int ql_sdr_mem_free(struct ql_sdr_mem *mem, uint32_t msg_id);
/* Copy out an allocated slot; -ENOENT if it is not allocated. */
int ql_sdr_mem_get(struct ql_sdr_mem *mem, uint32_t msg_id, struct ql_sdr_slot *slot);
int ql_sdr_mem_update_remote(struct ql_sdr_mem *mem, uint32_t msg_id, uint64_t remote_addr,
			     uint32_t rkey, uint64_t remote_length);
struct ql_mr *ql_sdr_mem_root_mr(const struct ql_sdr_mem *mem);
uint64_t ql_sdr_mem_slot_stride(const struct ql_sdr_mem *mem);
uint32_t ql_sdr_mem_slots(const struct ql_sdr_mem *mem);

/* ---- connections -------------------------------------------------------- */

/* Reliability of one message. */
enum ql_sdr_rel {
	QL_SDR_REL_NONE = 0, /* UC semantics: what arrived, with its bitmap */
	QL_SDR_REL_SR = 1,   /* selective repeat driven by the receiver's bitmap */
	QL_SDR_REL_EC = 2,   /* erasure coding over chunks (src/sdr/ec.c) */
	QL_SDR_REL_COUNT = 3
};

struct ql_sdr_config {
	uint64_t max_msg_size;	/* bytes of the largest message (slot data region) */
	uint32_t slots;		/* message ids = slots of the root buffer, <= 1024 */
	uint32_t mtu;		/* packet payload, a power of two 64..4096; 0: the
	                             path MTU of the QP (the smaller side's wins) */
	uint32_t chunk_packets; /* packets per chunk of the frontend bitmap (0: 64) */
	uint64_t parity_size;	/* bytes per slot after the data, for EC (0: none) */
	uint32_t recv_depth;	/* receive WQEs on the UC QP = send credits (0: 256) */
	uint32_t send_depth;	/* send WQEs on the UC QP (0: 256) */
	uint64_t rto_ns;	/* sender: no ACK this long after the last packet: ask (0: 20 ms) */
	uint64_t nack_delay_ns; /* receiver: idle this long with gaps: NACK (0: 2 ms) */
	uint32_t max_retries;	/* NACK/timeout rounds without progress, then fail (0: 16) */
	uint64_t credit_grace_ns; /* sender: out of credits and nothing sent this
	                             long: reclaim what was lost (0: 5 ms) */
	/* EC parameters, read by the EC ops only (0: their defaults) */
	uint32_t ec_data;
	uint32_t ec_parity;
};

/* Fill the defaults documented above (max_msg_size 1 MiB, slots 16). */
void ql_sdr_config_default(struct ql_sdr_config *cfg);

struct ql_sdr_conn;
struct ql_sdr_send; /* one message being sent */
struct ql_sdr_recv; /* one message being received */

/* Per-connection counters (ql_sdr_conn_stats). */
struct ql_sdr_stats {
	uint64_t msgs_sent;	     /* send side: messages completed (any status) */
	uint64_t msgs_failed;	     /* send side: ended in error */
	uint64_t pkts_sent;	     /* data packets posted, first transmissions */
	uint64_t pkts_retransmitted; /* data packets posted again */
	uint64_t nacks_sent;
	uint64_t nacks_received;
	uint64_t acks_sent;
	uint64_t acks_received;
	uint64_t timeouts;	    /* sender timeouts (lost tail, lost ACK) */
	uint64_t credit_stalls;	    /* times the sender had packets but no credit */
	uint64_t credits_reclaimed; /* credits taken back for packets lost on the wire */
	uint64_t msgs_received;	    /* receive side: messages completed (any status) */
	uint64_t pkts_received;	    /* data packets accepted (new bits) */
	uint64_t pkts_duplicate;    /* accepted id and offset, bit already set */
	uint64_t drop_bad_id;	    /* packet for an id not posted now */
	uint64_t drop_bad_offset;   /* packet offset beyond the posted message */
	uint64_t drop_bad_len;	    /* packet length not what its offset implies */
	uint64_t drop_bad_ctrl;	    /* control messages refused (malformed, stale) */
	uint64_t recv_errors;	    /* receive completions in error */
	uint64_t pkts_recovered;    /* packets rebuilt by the reliability (EC) */
	uint64_t fences;	    /* zero-length WRITEs posted to complete the send
	                               queue (docs/sdr.md "Send queue") */
};

/* Create a connection's local side on dev: its own PD, a UC data QP, an
 * RC control QP, their CQs, the receive memory table (slots slots of
 * round_up(max_msg_size, 4096) + round_up(parity_size, 4096) bytes);
 * nothing connected yet. cfg NULL: the defaults. */
int ql_sdr_conn_create(struct ql_device *dev, const struct ql_sdr_config *cfg,
		       struct ql_sdr_conn **conn);
int ql_sdr_conn_destroy(struct ql_sdr_conn *conn);

/* Out-of-band addressing: the two QPs' ql_conn_params in their text form,
 * one line "data <params> ; ctrl <params>" (the data params carry qp=uc).
 * ql_sdr_conn_params_format writes the local side (like snprintf);
 * parse takes the peer's. */
int ql_sdr_conn_params_format(struct ql_sdr_conn *conn, char *buf, size_t len);
int ql_sdr_conn_params_parse(const char *text, struct ql_conn_params *data,
			     struct ql_conn_params *ctrl);
int ql_sdr_conn_local_params(struct ql_sdr_conn *conn, struct ql_conn_params *data,
			     struct ql_conn_params *ctrl);

/* Connect both QPs to the peer's params, then run the handshake on the
 * control QP: the connector sends HELLO (its root MR, slot geometry, MTU,
 * receive depth), the acceptor checks it and answers with its own; both
 * then know where the other's slots are. Blocks (driving progress) up to
 * timeout_ms; -ETIMEDOUT, -EPROTO for a HELLO that does not fit. */
int ql_sdr_accept(struct ql_sdr_conn *conn, const struct ql_conn_params *data,
		  const struct ql_conn_params *ctrl, int timeout_ms);
int ql_sdr_connect(struct ql_sdr_conn *conn, const struct ql_conn_params *data,
		   const struct ql_conn_params *ctrl, int timeout_ms);

/* Drive the connection: poll the data and control CQs, set bits, re-post
 * receives, return credits, post packets as credits allow, run the
 * reliability timers. Never blocks, allocates, locks or enters the kernel
 * (except what the provider's post does: docs/verbs.md). Returns the
 * number of events handled (>= 0) or a negative errno when the connection
 * broke (a QP in error). */
int ql_sdr_progress(struct ql_sdr_conn *conn);

void ql_sdr_conn_stats(const struct ql_sdr_conn *conn, struct ql_sdr_stats *st);
/* The packet payload size the connection uses (after the handshake: the
 * smaller of the two sides'). */
uint32_t ql_sdr_conn_mtu(const struct ql_sdr_conn *conn);
/* The receiver's clear-to-send grants that have arrived and no send has
 * taken yet: a send posted now starts at once when this is non-zero (a
 * benchmark starts its clock here). 0 for a connection without CTS. */
uint32_t ql_sdr_conn_cts_pending(const struct ql_sdr_conn *conn);
struct ql_sdr_mem *ql_sdr_conn_mem(struct ql_sdr_conn *conn);
/* The connection's PD: register send buffers on it. */
struct ql_pd *ql_sdr_conn_pd(struct ql_sdr_conn *conn);
/* The data and control QPs (tests: fault injection with ql_qp_fault). */
struct ql_qp *ql_sdr_conn_data_qp(struct ql_sdr_conn *conn);
struct ql_qp *ql_sdr_conn_ctrl_qp(struct ql_sdr_conn *conn);
/* Memory to send from: registered on the connection's PD (ql_pd_mem_alloc
 * + ql_mr_reg); free with ql_sdr_buf_free. */
int ql_sdr_buf_alloc(struct ql_sdr_conn *conn, size_t len, void **addr, struct ql_mr **mr);
void ql_sdr_buf_free(struct ql_sdr_conn *conn, void *addr, struct ql_mr *mr);

/* ---- receiving -------------------------------------------------------- */

/* Completion callback: the message ended (status 0, or a negative errno),
 * called from ql_sdr_progress. */
typedef void (*ql_sdr_recv_cb)(struct ql_sdr_recv *rx, int status, void *arg);
/* Chunk callback: chunk `chunk` of the message became complete. */
typedef void (*ql_sdr_chunk_cb)(struct ql_sdr_recv *rx, uint32_t chunk, void *arg);

struct ql_sdr_recv_opts {
	enum ql_sdr_rel rel;
	ql_sdr_recv_cb on_complete; /* NULL: poll */
	ql_sdr_chunk_cb on_chunk;   /* NULL: none */
	void *arg;
};

/* Post a receive of exactly len bytes (1..max_msg_size): take a slot (an id
 * not used for the longest time), clear its bitmaps and send the peer a
 * clear-to-send with the id, length and reliability. The message arrives
 * in the slot (ql_sdr_recv_data). -ENOSPC when every slot is in use,
 * -EAGAIN when the control send queue is full (progress, then retry). */
int ql_sdr_recv_post(struct ql_sdr_conn *conn, size_t len, const struct ql_sdr_recv_opts *opts,
		     struct ql_sdr_recv **rx);
/* 1 when the message ended, 0 while in progress; *status: 0 complete,
 * -ENODATA (NONE: the sender is done, what arrived is in the bitmap),
 * -ETIMEDOUT (the sender gave up), -ECONNABORTED (the sender abandoned
 * it), -EPROTO / -EMSGSIZE (the send's reliability / length differ).
 * Does not drive progress. */
int ql_sdr_recv_poll(const struct ql_sdr_recv *rx, int *status);
/* Give the slot back (any time; a message in progress is abandoned and the
 * sender told). rx is invalid afterwards. */
int ql_sdr_recv_release(struct ql_sdr_recv *rx);
void *ql_sdr_recv_data(const struct ql_sdr_recv *rx);
size_t ql_sdr_recv_len(const struct ql_sdr_recv *rx);
uint32_t ql_sdr_recv_msg_id(const struct ql_sdr_recv *rx);
/* The bitmaps: packet i arrived (or was rebuilt) iff bit i%64 of word i/64
 * is set; chunk c (packets c*chunk_packets ..) complete likewise. Words are
 * read atomically; returns the number of bits (data packets, chunks). */
uint32_t ql_sdr_recv_packets(const struct ql_sdr_recv *rx);
uint32_t ql_sdr_recv_chunks(const struct ql_sdr_recv *rx);
bool ql_sdr_recv_packet_done(const struct ql_sdr_recv *rx, uint32_t pkt);
bool ql_sdr_recv_chunk_done(const struct ql_sdr_recv *rx, uint32_t chunk);
/* Copy the packet bitmap (data packets) into words[0..nwords); returns the
 * number of packets received (popcount). */
uint32_t ql_sdr_recv_bitmap(const struct ql_sdr_recv *rx, uint64_t *words, size_t nwords);
/* The user bits (0..15) of the last packet that set a bit. */
uint32_t ql_sdr_recv_user(const struct ql_sdr_recv *rx);

/* ---- sending ---------------------------------------------------------- */

typedef void (*ql_sdr_send_cb)(struct ql_sdr_send *tx, int status, void *arg);

struct ql_sdr_send_opts {
	enum ql_sdr_rel rel;
	uint32_t user; /* the 4 user bits of every packet */
	ql_sdr_send_cb on_complete;
	void *arg;
};

/* Send len bytes from addr (inside mr, which must be on the connection's
 * PD). The message waits for the peer's next clear-to-send (messages are
 * matched to clear-to-sends in order), then goes out as packets as credits
 * allow. The reliability must be the one the receiver posted (else the
 * message fails with -EPROTO); len must equal the receiver's length
 * (-EMSGSIZE otherwise). -EAGAIN when `slots` sends are outstanding. */
int ql_sdr_send_post(struct ql_sdr_conn *conn, const void *addr, size_t len, struct ql_mr *mr,
		     const struct ql_sdr_send_opts *opts, struct ql_sdr_send **tx);
/* 1 when ended (*status 0: delivered (SR/EC: acknowledged; NONE: every
 * packet posted), or a negative errno), 0 while in progress. */
int ql_sdr_send_poll(const struct ql_sdr_send *tx, int *status);
/* Free an ended send (-EBUSY while in progress). */
int ql_sdr_send_release(struct ql_sdr_send *tx);

/* Blocking helpers for tools and tests: drive progress until the message
 * ends or timeout_ms passes (-ETIMEDOUT); return the message's status.
 * They end with one more run of the device (as ql_sdr_connect and
 * ql_sdr_accept do), so a device in caller progress holds no ACK for the
 * peer's last message when they return (docs/progress.md §4). */
int ql_sdr_send_wait(struct ql_sdr_conn *conn, struct ql_sdr_send *tx, int timeout_ms);
int ql_sdr_recv_wait(struct ql_sdr_conn *conn, struct ql_sdr_recv *rx, int timeout_ms);

const char *ql_sdr_rel_name(enum ql_sdr_rel rel);
/* "none", "sr", "ec" -> the enum; -EINVAL otherwise. */
int ql_sdr_rel_parse(const char *name, enum ql_sdr_rel *rel);

#ifdef __cplusplus
}
#endif
#endif
