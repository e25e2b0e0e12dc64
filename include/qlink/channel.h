/* SPDX-License-Identifier: MIT */
/*
 * channel: the transport layer of the data plane (seed 000, layer 1).
 *
 * A channel moves whole messages between the network and the layers above
 * without copying them: receive_burst hands out buffers that wrap the ring
 * slots the peer wrote into, send_burst transmits buffers taken from a
 * pre-registered pool. Everything is allocated when the channel is made;
 * the burst calls never allocate, lock, log or enter the kernel.
 *
 * Implementations: the verbs channel (the server side of a qlink ring over
 * any verbs provider, see ring.h and docs/wire-protocol.md), the hsb
 * channel (hsb.h), the UDP channel (CUDA-Q's UDP transport, udp.h: its
 * bursts are one recvmmsg/sendmmsg each) and the loopback channel (in
 * memory, for testing the layers above).
 */
#ifndef QLINK_CHANNEL_H
#define QLINK_CHANNEL_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "qlink/verbs.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- buffers --------------------------------------------------------- */

/* A window on memory the channel owns: | headroom | data | tailroom |. */
struct ql_buffer {
	uint8_t *base;	    /* first byte of headroom */
	uint32_t capacity;  /* bytes from base */
	uint32_t offset;    /* data = base + offset */
	uint32_t len;	    /* data bytes */
	uint32_t index;	    /* the owner's index of this buffer */
	uint64_t tag;	    /* the request sequence on RX; on TX the tag of the
			      request the response answers (see below) */
	uint32_t reply_max; /* RX: the longest response the channel will send
			       for this request, header included (UDP: the
			       request datagram's length); 0: no limit but
			       the response buffer's */
};

static inline uint8_t *ql_buffer_data(const struct ql_buffer *b)
{
	return b->base + b->offset;
}

static inline uint32_t ql_buffer_headroom(const struct ql_buffer *b)
{
	return b->offset;
}

static inline uint32_t ql_buffer_tailroom(const struct ql_buffer *b)
{
	return b->capacity - b->offset - b->len;
}

/* Grow the data at the front (into headroom); NULL if there is no room. */
static inline uint8_t *ql_buffer_prepend(struct ql_buffer *b, uint32_t n)
{
	if (n > b->offset)
		return NULL;
	b->offset -= n;
	b->len += n;
	return b->base + b->offset;
}

/* Grow the data at the back (into tailroom); returns where the new bytes
 * go, NULL if there is no room. */
static inline uint8_t *ql_buffer_append(struct ql_buffer *b, uint32_t n)
{
	uint8_t *p;

	if (n > ql_buffer_tailroom(b))
		return NULL;
	p = b->base + b->offset + b->len;
	b->len += n;
	return p;
}

static inline void ql_buffer_reset(struct ql_buffer *b, uint32_t headroom)
{
	b->offset = headroom <= b->capacity ? headroom : b->capacity;
	b->len = 0;
}

/* ---- pools ------------------------------------------------------------ */

/* A fixed set of equal buffers carved from one region; get/put are O(1),
 * LIFO, single-threaded. Each buffer is followed by QL_POOL_SLACK bytes
 * outside its capacity, writable by the buffer's user: the daemon keeps its
 * result-overrun canary there, so a handler gets the buffer's whole
 * capacity. The region must hold ql_pool_region_size(count, buf_size). */
struct ql_pool;

#define QL_POOL_SLACK 8u

static inline size_t ql_pool_region_size(uint32_t count, uint32_t buf_size)
{
	return (size_t)count * ((size_t)buf_size + QL_POOL_SLACK);
}

int ql_pool_create(void *region, size_t region_len, uint32_t count, uint32_t buf_size,
		   uint32_t headroom, struct ql_pool **pool);
void ql_pool_destroy(struct ql_pool *pool);
struct ql_buffer *ql_pool_get(struct ql_pool *pool);
void ql_pool_put(struct ql_pool *pool, struct ql_buffer *b);
uint32_t ql_pool_available(const struct ql_pool *pool);

/* ---- channels --------------------------------------------------------- */

struct ql_channel;

/* What became of the SENDs a channel transmitted, as its completions say
 * (RC delivers in order: a SEND completes successfully once the peer
 * acknowledged it). Counted by the thread that drives the channel, with
 * relaxed atomic stores: readable from any thread, no lock, no syscall. */
struct ql_channel_send_stats {
	uint64_t posted;       /* SENDs handed to the NIC */
	uint64_t completed;    /* delivered: completed with success */
	uint64_t dropped_rnr;  /* no receive buffer at the peer: RNR retries
				  exceeded */
	uint64_t dropped_peer; /* peer gone: transport retries exceeded,
				  flushed when the QP failed, other errors */
};

struct ql__channel_ops {
	int (*receive_burst)(struct ql_channel *ch, struct ql_buffer **bufs, int max);
	int (*send_burst)(struct ql_channel *ch, struct ql_buffer **bufs, int n);
	struct ql_buffer *(*acquire_buffer)(struct ql_channel *ch);
	void (*release_buffer)(struct ql_channel *ch, struct ql_buffer *b);
	int (*register_memory)(struct ql_channel *ch, void *addr, size_t len, uint32_t *lkey);
	int (*poll_errors)(struct ql_channel *ch);
	void (*destroy)(struct ql_channel *ch);
	/* optional: channels without completions (the loopback) leave it NULL */
	void (*send_stats)(const struct ql_channel *ch, struct ql_channel_send_stats *s);
	/* optional: the key of the source of received buffer rx (UDP: its
	 * address then port, network order) into key[0..cap); its length, 0
	 * when the channel has one peer (ring, hsb) or does not know */
	size_t (*source)(const struct ql_channel *ch, const struct ql_buffer *rx, uint8_t *key,
			 size_t cap);
	/* optional: take the send completions that arrived (the thread that
	 * owns the channel only); channels without completions leave it NULL */
	void (*reap_sends)(struct ql_channel *ch);
	/* optional: the verbs device the channel runs on (NULL: none) */
	struct ql_device *(*device)(const struct ql_channel *ch);
};

/* Every channel starts with this; applications must not touch it. */
struct ql__channel_head {
	const struct ql__channel_ops *ops;
};

/* Up to `max` received messages, oldest first: buffers wrapping the ring
 * slots (data = the message, len = its length). Hand each back with
 * ql_channel_release_buffer. Returns the count or a negative errno. */
static inline int ql_channel_receive_burst(struct ql_channel *ch, struct ql_buffer **bufs, int max)
{
	return ((const struct ql__channel_head *)(const void *)ch)
		->ops->receive_burst(ch, bufs, max);
}

/* Transmit `n` buffers from ql_channel_acquire_buffer (data..data+len).
 * Rule: a response buffer's tag names the request it answers (the user of
 * the channel copies the request buffer's tag into it before sending, as
 * the daemon does); a channel that addresses each response to its
 * requester (the UDP channel) finds the requester by it, the others
 * ignore it.
 * Returns how many were accepted (the rest stay the caller's) or a
 * negative errno; accepted buffers return to the pool by themselves. */
static inline int ql_channel_send_burst(struct ql_channel *ch, struct ql_buffer **bufs, int n)
{
	return ((const struct ql__channel_head *)(const void *)ch)->ops->send_burst(ch, bufs, n);
}

/* A transmit buffer with headroom for the channel's own header, or NULL
 * when every buffer is in flight. */
static inline struct ql_buffer *ql_channel_acquire_buffer(struct ql_channel *ch)
{
	return ((const struct ql__channel_head *)(const void *)ch)->ops->acquire_buffer(ch);
}

/* Give back a received buffer (the slot may be reused) or an unsent
 * transmit buffer. */
static inline void ql_channel_release_buffer(struct ql_channel *ch, struct ql_buffer *b)
{
	((const struct ql__channel_head *)(const void *)ch)->ops->release_buffer(ch, b);
}

/* The verbs device the channel runs on (ring and hsb channels), NULL for
 * channels without one (loopback, UDP): what a poller of the channel
 * progresses with ql_device_progress (docs/progress.md). */
static inline struct ql_device *ql_channel_device(const struct ql_channel *ch)
{
	const struct ql__channel_ops *ops =
		((const struct ql__channel_head *)(const void *)ch)->ops;

	return ops->device ? ops->device(ch) : NULL;
}

/* Register application memory with the channel's protection domain. */
int ql_channel_register_memory(struct ql_channel *ch, void *addr, size_t len, uint32_t *lkey);

/* 0 while healthy; a negative errno once the channel failed (peer gone,
 * QP in error). Cheap: callable from a busy loop. */
static inline int ql_channel_poll_errors(struct ql_channel *ch)
{
	return ((const struct ql__channel_head *)(const void *)ch)->ops->poll_errors(ch);
}

/* The outcome of its SENDs so far (posted - completed - dropped_* are in
 * flight); -EOPNOTSUPP for a channel that has no completions (the
 * loopback: what it accepts is delivered). Any thread, any time. */
static inline int ql_channel_send_stats(const struct ql_channel *ch,
					struct ql_channel_send_stats *s)
{
	const struct ql__channel_ops *ops =
		((const struct ql__channel_head *)(const void *)ch)->ops;

	if (!ops->send_stats)
		return -EOPNOTSUPP;
	ops->send_stats(ch, s);
	return 0;
}

/* For the thread that owns the channel once its dispatcher has let go of
 * it (a session stopping): wait up to timeout_ns for the completions of
 * the SENDs still in flight, so that ql_channel_send_stats counts every
 * response a peer already received (the last one's completion may come
 * after the peer's next control message). Returns the SENDs still in
 * flight then, 0 when all are accounted for or the channel has no
 * completions. Not for the hot path (it sleeps). */
uint64_t ql_channel_drain_sends(struct ql_channel *ch, uint64_t timeout_ns);

void ql_channel_destroy(struct ql_channel *ch);

/* ---- the verbs channel: server side of a qlink ring -------------------- */

/*
 * A verbs context: what the channels of one device can share, one PD and
 * one registered region holding every channel's response buffers (one MR,
 * one lkey), instead of a PD and two MRs per channel. Each channel still
 * registers its ring on its own (REMOTE_WRITE, in the shared PD), so the
 * rkey its client is given covers that ring and nothing else: a WRITE
 * outside it is a remote access error. Within one PD an rkey is valid on
 * every QP of the PD, so a peer that learned another ring's rkey could
 * write that ring (rkeys are not guessable on soft: keyed tags); where QCSs
 * must be isolated from each other by the NIC, give channels no context.
 */
struct ql_verbs_context;

struct ql_verbs_context_config {
	uint32_t max_channels; /* channels at once (0: 16; at most 4096) */
	uint32_t tx_bytes;     /* response memory per channel (0: 64 KiB): at
				  least ql_pool_region_size(tx_buffers, slot_size)
				  of each channel */
};

int ql_verbs_context_create(struct ql_device *dev, const struct ql_verbs_context_config *cfg,
			    struct ql_verbs_context **ctx);
/* -EBUSY while channels use it (destroy them first). */
int ql_verbs_context_destroy(struct ql_verbs_context *ctx);
struct ql_pd *ql_verbs_context_pd(const struct ql_verbs_context *ctx);
/* Channels using it now. */
uint32_t ql_verbs_context_channels(struct ql_verbs_context *ctx);

struct ql_verbs_channel_config {
	uint32_t num_slots;	      /* power of two, 1..65536 */
	uint32_t slot_size;	      /* multiple of 64, 64..65536 */
	uint32_t tx_buffers;	      /* response buffers (0: num_slots) */
	uint32_t signal_every;	      /* signal one SEND in n (0: 16) */
	struct ql_verbs_context *ctx; /* shared PD and response memory of
					 this device; NULL: the channel's own */
	/* IBV_QPT_RC (0 means RC) or IBV_QPT_UC: on UC requests and responses
	 * can be lost; the client resends and the channel answers a resend
	 * from its cache of recent responses (docs/wire-protocol.md, UC). */
	enum ibv_qp_type qp_type;
	/* UC: responses remembered for resends (0: num_slots, at most 16 MiB
	 * of them; never more than num_slots). A client must keep no more
	 * requests outstanding than this, or a resend may find its response
	 * forgotten (counted dup_missed, not answered). */
	uint32_t dup_cache;
};

/* Create the ring (ql_mem_alloc'd, registered REMOTE_WRITE), an RC or UC QP, its
 * CQs and the response pool on `dev`. With cfg->ctx: in the context's PD,
 * the pool in a block of its region (-ENOSPC when every block is taken,
 * -EMSGSIZE when the pool is larger than a block). */
int ql_verbs_channel_create(struct ql_device *dev, const struct ql_verbs_channel_config *cfg,
			    struct ql_channel **ch);
/* What the client needs: QP, GID, the ring's vaddr/rkey/length and
 * geometry. */
int ql_verbs_channel_local_params(struct ql_channel *ch, struct ql_conn_params *p);
/* Connect the QP to the client's (RESET -> RTS). */
int ql_verbs_channel_connect(struct ql_channel *ch, const struct ql_conn_params *client,
			     const struct ql_qp_connect_opts *opts);
/* Where a channel's memory is, and under which PD and keys. */
struct ql_verbs_channel_info {
	struct ql_pd *pd;
	struct ql_verbs_context *ctx; /* NULL: none */
	void *ring;
	size_t ring_len;
	uint32_t ring_rkey;
	void *tx_mem; /* response buffers */
	size_t tx_len;
	uint32_t tx_lkey;
};
int ql_verbs_channel_info(struct ql_channel *ch, struct ql_verbs_channel_info *info);
/* Forget every slot: the next request expected is sequence 1 again (for a
 * client that reconnects). */
int ql_verbs_channel_reset_ring(struct ql_channel *ch);
/* The losses a UC channel saw (all 0 on RC). */
struct ql_verbs_channel_uc_stats {
	uint64_t dup_answered; /* resent requests answered from the cache */
	uint64_t dup_missed;   /* resent requests too old for the cache: not
				  answered (the client counts them lost) */
};
int ql_verbs_channel_uc_stats(struct ql_channel *ch, struct ql_verbs_channel_uc_stats *st);

/* ---- the loopback channel: in memory, for tests ------------------------ */

int ql_loop_channel_create(uint32_t num_slots, uint32_t slot_size, struct ql_channel **ch);
/* Play the client: place a message in the next slot (as the two RDMA
 * WRITEs would). -EAGAIN when num_slots requests await responses,
 * -EMSGSIZE when it does not fit a slot. `len` is written to the slot's
 * length field as given; `msg_bytes` bytes of msg are copied. */
int ql_loop_channel_push(struct ql_channel *ch, const void *msg, uint32_t len, uint32_t msg_bytes);
/* Take the oldest response: its length, or -EAGAIN when there is none,
 * -EMSGSIZE when cap is too small (the response stays). */
int ql_loop_channel_pop(struct ql_channel *ch, void *buf, uint32_t cap);

#ifdef __cplusplus
}
#endif
#endif
