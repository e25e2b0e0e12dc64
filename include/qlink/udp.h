/* SPDX-License-Identifier: MIT */
/*
 * udp: CUDA-Q Realtime's UDP transport in qlink's data plane
 * (docs/wire-protocol.md, "CUDA-Q UDP transport").
 *
 * One datagram carries one RPC frame in one slot stride: the server channel
 * takes up to a burst of datagrams with one recvmmsg into pre-allocated
 * slots (a short datagram holding its whole frame is served as it is, one
 * shorter than its own header says is dropped and counted, never
 * zero-filled; a long one is dropped and counted; a source outside the
 * allowlist, loopback by default, is dropped; under a backlog each source
 * keeps at most its share of a burst) and answers with one sendmmsg, each
 * response sent from the bound socket to the source address of the
 * request it answers and never longer than that request's datagram (no
 * reflection amplifier).
 * The channel is a struct ql_channel like the verbs and hsb channels, so the
 * same daemon, dispatcher, handlers and statistics serve it; give the daemon
 * QL_BAD_REQUEST_DROP to behave as CUDA-Q does (bad magic and unknown
 * functions dropped without reply). Per request: no allocation, lock, log or
 * system call beyond the batched recvmmsg/sendmmsg.
 *
 * Addressing differs from CUDA-Q's in one case: CUDA-Q sends every reply to
 * the source of the most recent datagram (its "last requester"), qlink each
 * reply to the source of the request it answers (the buffer tag rule of
 * channel.h). With one caller the two are the same; with several, qlink
 * answers each its own. Requests are served in arrival order, and a dropped
 * request frees its slot at once: later replies are never stalled (CUDA-Q's
 * ring shape stalls). Serving CUDA-Q callers: QL_BAD_REQUEST_DROP; then
 * CUDA-Q's PROCESSED count is the daemon's requests - dropped.
 *
 * The client plays a CUDA-Q caller or a QCS (tests, the VPPU): a connect()ed
 * socket, a window of requests in flight, full-stride zero-filled sends.
 */
#ifndef QLINK_UDP_H
#define QLINK_UDP_H

#include <stdint.h>
#include <sys/socket.h>

#include "qlink/channel.h"
#include "qlink/ring.h"

#ifdef __cplusplus
extern "C" {
#endif

#define QL_UDP_DEFAULT_SLOTS 8u
#define QL_UDP_DEFAULT_SLOT_SIZE 256u
#define QL_UDP_MIN_SLOT_SIZE 24u    /* one RPC header */
#define QL_UDP_MAX_SLOT_SIZE 65507u /* largest UDP payload over IPv4 */
#define QL_UDP_MAX_SLOTS 65536u

/* ---- the channel: the server side ---------------------------------------- */

struct ql_udp_channel_config {
	const char *address;	  /* local IPv4/IPv6 literal to bind ("127.0.0.1", "::1",
				"0.0.0.0", "::"); NULL: "127.0.0.1" */
	uint16_t port;		  /* 0: ephemeral */
	uint32_t num_slots;	  /* receive slots = ring depth, 1..65536 (0: 8) */
	uint32_t slot_size;	  /* stride, bytes of one datagram, 24..65507 (0: 256) */
	uint32_t tx_buffers;	  /* response buffers (0: num_slots) */
	uint32_t rcvbuf;	  /* SO_RCVBUF bytes, the backlog the kernel holds
				while the dispatcher is busy (0: the kernel's
				default, at least 256 KiB asked) */
	uint32_t busy_poll_us;	  /* SO_BUSY_POLL (0: none); refused without
				  CAP_NET_ADMIN above net.core.busy_read: then
				  ignored, see ql_udp_channel_stats.busy_poll */
	const char *const *allow; /* sources served: allow_count IPv4/IPv6
				     addresses or CIDR blocks ("10.0.0.0/8",
				     "fd00::/8"; "0.0.0.0/0" and "::/0" for
				     everyone); an IPv4-mapped IPv6 source
				     matches as IPv4. NULL/0: loopback only
				     (127.0.0.0/8, ::1). Others are dropped
				     and counted (not_allowed). */
	uint32_t allow_count;
	uint32_t fair_share; /* per-source fairness: in a burst of at least 8
				that took every datagram it could (a backlog)
				and holds several sources, each source hands
				on at most this many and the rest of its
				datagrams are shed (counted); 0: the burst
				divided evenly among its sources; UINT32_MAX:
				off */
};

/* A non-blocking UDP socket bound to address:port (IPv4 or IPv6 from the
 * literal; "::" is dual-stack where the system allows), the slots and the
 * response pool. -EINVAL for a bad config or address literal (with a
 * detail), -EADDRINUSE when the port is taken, other negative errnos from
 * socket/bind. */
int ql_udp_channel_create(const struct ql_udp_channel_config *cfg, struct ql_channel **ch);
/* The bound address (the port resolved when 0 was asked). */
int ql_udp_channel_local_addr(struct ql_channel *ch, struct sockaddr_storage *ss, socklen_t *len);
/* The bound socket, for the owner's poll/epoll (not to read or write). */
int ql_udp_channel_fd(struct ql_channel *ch);

/* Counted by the thread that drives the channel (relaxed stores): readable
 * from any thread. The channel never logs; a tool prints "dropping N-byte
 * datagram" once, outside the hot path, when it sees oversize grow from 0
 * (CUDA-Q's one warning). */
struct ql_udp_channel_stats {
	uint64_t datagrams;	/* received (every size, oversize included) */
	uint64_t oversize;	/* longer than the stride: dropped, not handed on */
	uint64_t undersize;	/* shorter than the stride, complete: handed on
				   as they are (not padded) */
	uint64_t truncated;	/* shorter than their own header says (under 24
				   bytes, or 24 + arg_len): dropped, never
				   zero-filled */
	uint64_t not_allowed;	/* from a source outside the allowlist: dropped */
	uint64_t shed;		/* dropped by per-source fairness (fair_share) */
	uint64_t reply_clamped; /* responses longer than the request datagram
				   that caused them: replaced by a 24-byte
				   QL_RPC_E_RESULT_OVERFLOW response */
	uint64_t send_errors;	/* responses sendmmsg refused (lost) */
	uint64_t sent;		/* responses the kernel accepted */
	uint64_t unaddressed;	/* responses whose request's source address was
				 overwritten before they were sent (never with
				 the daemon, which answers within its burst) */
	uint64_t recv_errors;	/* recvmmsg failures other than "nothing there" */
	uint64_t kernel_drops;	/* datagrams the kernel dropped because the
				     socket buffer was full (SO_MEMINFO; 0 where
				     the kernel does not say) */
	uint32_t last_oversize; /* length of the last oversize datagram */
	int last_send_error;	/* errno of the last refused response */
	int busy_poll;		/* 0: not asked; 1: set; negative errno: refused */
};
int ql_udp_channel_stats(const struct ql_channel *ch, struct ql_udp_channel_stats *st);

/* ---- the client: a CUDA-Q caller ------------------------------------------ */

/* A ql_client of the udp transport (qlink/client.h: ql_client_from_udp). */

struct ql_udp_client;

struct ql_udp_client_config {
	const char *host; /* server address literal (IPv4/IPv6) */
	uint16_t port;
	uint32_t slot_size; /* stride (0: 256): the largest request and the
			       largest response accepted */
	uint32_t window;    /* requests in flight (0: 8) */
	int full_stride;    /* send whole slot_size datagrams, zero-filled, as
			       CUDA-Q's caller does (the default); set
			       QL_UDP_CLIENT_EXACT to send only the frame */
};

/* full_stride: 0 means the default (1); this value sends exact lengths */
#define QL_UDP_CLIENT_EXACT (-1)

/* A socket connect()ed to host:port (replies from any other source are
 * discarded by the kernel) and its buffers. -EINVAL for a bad address
 * literal or stride. */
int ql_udp_client_create(const struct ql_udp_client_config *cfg, struct ql_udp_client **cl);
void ql_udp_client_destroy(struct ql_udp_client *cl);
/* Send one frame (RPCHeader | args, `len` bytes), padded with zeros to the
 * stride unless configured otherwise. 0; -EAGAIN when `window` requests
 * are in flight (or the socket buffer is full); -EMSGSIZE above the stride;
 * other negative errnos from send (e.g. -ECONNREFUSED: no server there). */
int ql_udp_client_send(struct ql_udp_client *cl, const void *msg, uint32_t len);
/* Send `len` raw bytes outside the window (tests: garbage, oversize). */
int ql_udp_client_send_raw(struct ql_udp_client *cl, const void *msg, uint32_t len);
/* Up to `max` responses in arrival order (0: none), each taking one from
 * in flight; a response matching no request in flight is still returned
 * (its request_id tells). Responses longer than the stride are dropped
 * and counted. Release each, once. */
int ql_udp_client_poll(struct ql_udp_client *cl, struct ql_ring_response *out, int max);
int ql_udp_client_release(struct ql_udp_client *cl, const struct ql_ring_response *r);
/* The largest frame: the stride. */
uint32_t ql_udp_client_max_msg(const struct ql_udp_client *cl);
/* Requests sent and not answered (nor forgotten). */
uint32_t ql_udp_client_in_flight(const struct ql_udp_client *cl);
/* Forget n requests in flight (one the server dropped is never answered). */
void ql_udp_client_forget(struct ql_udp_client *cl, uint32_t n);
/* The connected socket (for poll). */
int ql_udp_client_fd(const struct ql_udp_client *cl);

struct ql_udp_client_stats {
	uint64_t sent;	      /* requests sent (window) */
	uint64_t received;    /* responses returned by poll */
	uint64_t oversize;    /* responses longer than the stride, dropped */
	uint64_t recv_errors; /* recvmmsg errors (e.g. ECONNREFUSED) */
	int last_recv_error;  /* errno of the last one */
};
int ql_udp_client_stats(const struct ql_udp_client *cl, struct ql_udp_client_stats *st);

#ifdef __cplusplus
}
#endif
#endif
