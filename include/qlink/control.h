/* SPDX-License-Identifier: MIT */
/*
 * control: the UDP control plane between a QCS and a real-time host (RTH).
 *
 * Before any RDMA traffic flows, the two ends must trade connection
 * parameters, and afterwards someone must say when to start, stop or give
 * up. This module does that with small JSON datagrams over UDP
 * (docs/control-plane.md is the normative description): the QCS sends
 * DISCOVER, the RTH answers CONNECTION_PARAMS (one set per channel), the QCS
 * answers ACK with its own QP parameters, then START, STOP, ABORT, COMPLETE,
 * STATUS and KEEPALIVE.
 *
 * Once a session is connected the RTH may also drive the QCS (qcs.h builds
 * on this): it sends PROGRAM (a chunk of an opaque program), TRIGGER and
 * ABORT to the session's address, each numbered in a second sequence space
 * ("rseq") and retransmitted until the QCS answers OK or ERROR; the QCS
 * answers a duplicate from its own reply cache (ql_ctl_client_serve).
 *
 * UDP loses, duplicates and reorders datagrams, so every request carries a
 * per-session sequence number: the client retransmits until the reply with
 * the same (session, seq) arrives, and the server answers a duplicate from a
 * reply cache without running its side effects again. A session that sends
 * nothing valid for session_timeout_ms is declared LOST and torn down through
 * the `lost` callback.
 *
 * The server keeps no state for a source until it has proved it receives at
 * its address: a DISCOVER without a valid cookie is answered RETRY with an
 * HMAC cookie (address, port, session id, 10 s time bucket), and only the
 * DISCOVER that echoes it opens a session (the client does this round trip
 * itself). Answers to sources without a session are never longer than what
 * they answer (no amplification); sessions, channels and sessions per source
 * address are limited separately; an ended session frees its slot at once.
 * Sources can be restricted by an allowlist of CIDRs,
 * and a shared secret makes every datagram carry an HMAC-SHA256 of its JSON
 * bytes; rejected datagrams are counted and logged (rate-limited).
 *
 * The server is single-threaded and driven by the caller: poll
 * ql_ctl_server_fd() together with other descriptors, then call
 * ql_ctl_server_poll(); callbacks run inside that call. Only
 * ql_ctl_server_stats() may be called from another thread. A client is used
 * by one thread at a time.
 */
#ifndef QLINK_CONTROL_H
#define QLINK_CONTROL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qlink/verbs.h"

#ifdef __cplusplus
extern "C" {
#endif

/* "v" of every message: the control protocol's version (docs/control-plane.md
 * §9 has the changelog). 1 was the first exchange (no padding, no cookie);
 * 2 added the padded DISCOVER and the RETRY/cookie round trip. A server
 * answers any other "v" with ERROR "bad_version" listing, in "versions",
 * the versions it speaks (QL_CTL_VERSIONS, bit v set for version v). */
#define QL_CTL_VERSION 2
#define QL_CTL_VERSIONS (1u << QL_CTL_VERSION)
#define QL_CTL_PROTO 1	      /* "proto": the data-plane (ring) protocol offered */
#define QL_CTL_MAX_DGRAM 1400 /* JSON plus optional MAC line, bytes */
#define QL_CTL_MAX_CHANNELS 4 /* channels per session: what fits in one datagram */
#define QL_CTL_MAC_HEX 64     /* HMAC-SHA256 as lowercase hex */
#define QL_CTL_NAME_MAX 64    /* DISCOVER "name", NUL included */
#define QL_CTL_TEXT_MAX 160   /* ERROR "message", ABORT "reason" */
#define QL_CTL_CODE_MAX 24    /* ERROR "code" */
#define QL_CTL_STATUS_MAX 768 /* STATUS_REPLY "counters", compact JSON text */
#define QL_CTL_DEFAULT_PORT 7700
#define QL_CTL_CHUNK_MAX 768		/* PROGRAM "data" bytes (1024 in base64) */
#define QL_CTL_PROGRAM_MAX (256u << 10) /* PROGRAM "total": largest program */
/* Anti-DoS (docs/control-plane.md §5): a DISCOVER is padded to at least
 * QL_CTL_DISCOVER_MIN bytes so that the RETRY it earns is never larger; a
 * cookie is 32 lowercase hex digits (128 bits of HMAC-SHA256) and lives
 * QL_CTL_COOKIE_PERIOD_S to twice that. */
#define QL_CTL_DISCOVER_MIN 256
#define QL_CTL_COOKIE_HEX 32
#define QL_CTL_COOKIE_PERIOD_S 10
#define QL_CTL_REQUEST_PAD 256 /* the reference client pads its other requests to this */

/* ---- messages -------------------------------------------------------- */

enum ql_ctl_type {
	QL_CTL_NONE = 0,
	QL_CTL_DISCOVER,	  /* QCS -> RTH: open a session */
	QL_CTL_CONNECTION_PARAMS, /* RTH -> QCS: reply to DISCOVER */
	QL_CTL_ACK,		  /* QCS -> RTH: the QCS's QP parameters */
	QL_CTL_START,		  /* QCS -> RTH */
	QL_CTL_STOP,		  /* QCS -> RTH */
	QL_CTL_ABORT,		  /* either way (RTH: seq 0; a notice, or a request with rseq) */
	QL_CTL_COMPLETE,	  /* QCS -> RTH: the program finished; session ends */
	QL_CTL_STATUS,		  /* QCS -> RTH */
	QL_CTL_STATUS_REPLY,	  /* RTH -> QCS: reply to STATUS */
	QL_CTL_KEEPALIVE,	  /* QCS -> RTH: heartbeat */
	QL_CTL_OK,    /* reply to ACK/START/STOP/ABORT/COMPLETE/KEEPALIVE; QCS: to RTH's */
	QL_CTL_ERROR, /* the request was refused (either way) */
	/* RTH -> QCS requests (with "rseq"; ABORT too), answered OK or ERROR by the QCS */
	QL_CTL_PROGRAM, /* a chunk of the program to run */
	QL_CTL_TRIGGER, /* run the uploaded program */
	QL_CTL_RETRY,	/* RTH -> QCS: reply to a DISCOVER without a valid cookie */
	QL_CTL_TYPE_COUNT
};

/* Server-side session states (docs/control-plane.md has the diagram). */
enum ql_ctl_state {
	QL_CTL_S_NEW = 0,
	QL_CTL_S_OFFERED,   /* CONNECTION_PARAMS sent */
	QL_CTL_S_CONNECTED, /* ACK accepted: remote QP set, daemon started */
	QL_CTL_S_RUNNING,   /* START accepted */
	QL_CTL_S_STOPPED,   /* STOP accepted; START may follow */
	QL_CTL_S_ABORTED,   /* terminal */
	QL_CTL_S_COMPLETE,  /* terminal */
	QL_CTL_S_LOST,	    /* terminal: nothing valid for session_timeout_ms */
	QL_CTL_S_COUNT
};

/* One decoded datagram. Fields beyond the header are set for the types that
 * carry them and zero otherwise. */
struct ql_ctl_msg {
	enum ql_ctl_type type;
	/* parsed: the "v" read; ql_ctl_format writes it when 1..QL_CTL_VERSION
	 * (an ERROR to an older peer, in its own version), else QL_CTL_VERSION */
	uint32_t version;
	uint64_t session;
	uint64_t seq;
	/* RTH -> QCS requests and their answers: the RTH's request number (>= 1),
	 * with seq 0; 0 in every QCS -> RTH request and its reply. */
	uint64_t rseq;
	uint64_t ts;
	bool mac_ok; /* a MAC was present and verified against the secret */
	/* DISCOVER: name ([A-Za-z0-9._:@-] only); DISCOVER, RETRY: cookie ("" if none) */
	char name[QL_CTL_NAME_MAX];
	char cookie[QL_CTL_COOKIE_HEX + 1];
	/* DISCOVER: channels asked for; CONNECTION_PARAMS, ACK: entries in ch */
	uint32_t nchannels;
	uint32_t proto; /* CONNECTION_PARAMS */
	struct ql_conn_params ch[QL_CTL_MAX_CHANNELS];
	/* OK: the request type answered and the session state after it */
	enum ql_ctl_type re;
	enum ql_ctl_state state;
	/* ERROR: code and message; ABORT: reason in text */
	char code[QL_CTL_CODE_MAX];
	/* ERROR "bad_version": the versions the sender speaks ("versions":[2]),
	 * bit v set for version v (1..31); 0: none given */
	uint32_t versions;
	char text[QL_CTL_TEXT_MAX];
	/* STATUS_REPLY: the "counters" object as compact JSON text */
	char status[QL_CTL_STATUS_MAX];
	/* PROGRAM: bytes [offset, offset + data_len) of a program of total bytes */
	uint32_t offset;
	uint32_t total;
	uint32_t data_len;
	uint8_t data[QL_CTL_CHUNK_MAX];
	/* ql_ctl_format: pad with a "pad" key to at least this many bytes (MAC line
	 * included); a DISCOVER is always padded to QL_CTL_DISCOVER_MIN. */
	uint32_t pad_to;
};

/* Decode one datagram. Pure and total: any bytes give 0 or a negative
 * errno, never a crash. With a secret, the datagram must end in "\n" and 64
 * hex digits of HMAC-SHA256(secret, JSON bytes); without one, such a MAC
 * line is accepted and not verified. Errors:
 *   -EMSGSIZE         longer than QL_CTL_MAX_DGRAM
 *   -EBADMSG          not a JSON object, a field missing or of the wrong type
 *   -EPROTONOSUPPORT  "v" is not QL_CTL_VERSION (an ERROR of another
 *                     version is still decoded: its code, message and
 *                     versions are in out, so that a peer's "bad_version"
 *                     answer can be read whatever its "v")
 *   -EOPNOTSUPP       unknown "type"
 *   -EACCES           MAC missing or wrong (secret set)
 * On failure, out->type/session/seq hold what could be read, so that a
 * server can address its ERROR reply. */
int ql_ctl_parse(const uint8_t *dgram, size_t len, const uint8_t *secret, size_t secret_len,
		 struct ql_ctl_msg *out);

/* Encode a message (plus its MAC line when secret_len > 0) into buf. Returns
 * the datagram length or a negative errno (-EMSGSIZE when it does not fit in
 * min(cap, QL_CTL_MAX_DGRAM), -EINVAL for a bad field). */
int ql_ctl_format(const struct ql_ctl_msg *m, const uint8_t *secret, size_t secret_len,
		  uint8_t *buf, size_t cap);

/* "DISCOVER", ..., or "?"; and the reverse (QL_CTL_NONE when unknown). */
const char *ql_ctl_type_name(enum ql_ctl_type t);
enum ql_ctl_type ql_ctl_type_from_name(const char *name);
/* "NEW", "OFFERED", ..., or "?". */
const char *ql_ctl_state_name(enum ql_ctl_state s);
/* The errno an ERROR "code" stands for (docs/control-plane.md §6); -EIO for
 * a code this library does not know. */
int ql_ctl_error_errno(const char *code);

/* ---- server (RTH) ---------------------------------------------------- */

struct ql_ctl_server;
struct ql_ctl_session;

struct ql_ctl_server_config {
	const char *bind_addr;	  /* IPv4 address; NULL: "0.0.0.0" */
	uint16_t port;		  /* 0: any; ql_ctl_server_port() tells which */
	const char *const *allow; /* CIDRs ("127.0.0.0/8", "10.1.2.3"), NULL-terminated;
	                             NULL: every source */
	const uint8_t *secret;	  /* NULL/0: no authentication */
	size_t secret_len;
	uint32_t max_sessions;		  /* 0: 16 */
	uint32_t max_channels;		  /* channels over all open sessions; 0: 2 * max_sessions */
	uint32_t max_sessions_per_source; /* open sessions per source IPv4 address; 0: 4 */
	uint32_t session_timeout_ms;	  /* 0: 3000 */
	/* RTH -> QCS requests (ql_ctl_server_request): first wait for the
	 * answer (0: 200 ms, doubled per retry up to 8x) and retransmissions
	 * (0: 5), as the client does for its requests. */
	uint32_t request_timeout_ms;
	uint32_t request_retries;
};

/* What the embedding RTH does at each step. Callbacks run inside
 * ql_ctl_server_poll() and return 0 or a negative errno; a failure is sent
 * to the QCS as ERROR "refused" with ql_error_detail() as its message.
 * Only `offer` is required. Once `offer` has succeeded, exactly one of
 * `complete`, `abort` or `lost` ends the session (the server calls `abort`
 * for sessions still open when it is destroyed, and when `accept` fails). */
struct ql_ctl_server_ops {
	/* DISCOVER: reserve `n` channels and fill one ql_conn_params each. */
	int (*offer)(void *ctx, struct ql_ctl_session *s, uint32_t n, struct ql_conn_params *out);
	/* ACK: connect the channels to the QCS's QPs, start serving them. */
	int (*accept)(void *ctx, struct ql_ctl_session *s, const struct ql_conn_params *client,
		      uint32_t n);
	int (*start)(void *ctx, struct ql_ctl_session *s);
	int (*stop)(void *ctx, struct ql_ctl_session *s);
	int (*abort)(void *ctx, struct ql_ctl_session *s);
	int (*complete)(void *ctx, struct ql_ctl_session *s);
	/* STATUS: write a JSON object (e.g. `{"requests":12,"errors":0}`) of at
	 * most len-1 bytes into json; it becomes the reply's "counters". */
	int (*status)(void *ctx, struct ql_ctl_session *s, char *json, size_t len);
	/* The QCS went silent for session_timeout_ms: tear its channels down. */
	void (*lost)(void *ctx, struct ql_ctl_session *s);
};

/* Counters; readable from any thread. */
struct ql_ctl_stats {
	uint64_t received;    /* datagrams read */
	uint64_t replied;     /* datagrams sent, replies and notices */
	uint64_t duplicates;  /* requests answered again from the reply cache */
	uint64_t rejected;    /* sum of the reasons below */
	uint64_t malformed;   /* not JSON, fields missing or of the wrong type */
	uint64_t too_big;     /* longer than QL_CTL_MAX_DGRAM */
	uint64_t bad_version; /* "v" not QL_CTL_VERSION (answered with "versions") */
	uint64_t bad_type;    /* unknown type, or a type a QCS may not send */
	uint64_t not_allowed; /* source outside the allowlist: dropped unanswered */
	uint64_t bad_mac;     /* MAC missing or wrong */
	uint64_t replayed;    /* seq older than the session's last: dropped unanswered */
	uint64_t unknown_session;
	uint64_t bad_state; /* request not valid in the session's state */
	uint64_t busy;	    /* DISCOVER refused: a session or channel limit reached */
	uint64_t refused;   /* a callback failed */
	uint64_t sessions_active;
	uint64_t sessions_total;
	uint64_t sessions_lost;
	/* Anti-DoS (appended to keep the layout of the fields above). */
	uint64_t retries;      /* RETRY (cookie) replies sent to DISCOVERs without a valid cookie */
	uint64_t bad_cookie;   /* DISCOVER with a wrong or expired cookie (also answered RETRY) */
	uint64_t unanswered;   /* rejected without an answer: the answer would have been larger */
	uint64_t self_connect; /* ACK naming an endpoint of this RTH (counted in refused too) */
	uint64_t channels_active;
};

int ql_ctl_server_create(const struct ql_ctl_server_config *cfg,
			 const struct ql_ctl_server_ops *ops, void *ctx,
			 struct ql_ctl_server **srv);
/* Sends ABORT (reason "server shutdown") to every open session, calls the
 * `abort` callback for each, closes the socket. NULL is a no-op. */
void ql_ctl_server_destroy(struct ql_ctl_server *srv);
/* The UDP socket, non-blocking, for the caller's poll()/epoll. */
int ql_ctl_server_fd(const struct ql_ctl_server *srv);
uint16_t ql_ctl_server_port(const struct ql_ctl_server *srv);
/* Wait up to timeout_ms (0: do not wait, <0: until a datagram or a session
 * deadline) for datagrams, handle those pending and expire silent sessions.
 * Returns the number of datagrams handled or a negative errno. */
int ql_ctl_server_poll(struct ql_ctl_server *srv, int timeout_ms);
void ql_ctl_server_stats(const struct ql_ctl_server *srv, struct ql_ctl_stats *st);

/* Send an RTH -> QCS request on an open session and serve the socket
 * (ql_ctl_server_poll, callbacks included) until the QCS answers, the
 * retries run out or timeout_ms passes. m->type is QL_CTL_PROGRAM (offset,
 * total, data, data_len), QL_CTL_TRIGGER or QL_CTL_ABORT (text: an optional
 * reason); the server fills session, seq and rseq. An ABORT ends the session
 * (the `abort` callback runs) whatever the answer. One request at a time per
 * session; not from inside a callback. Returns 0 when the QCS answered OK,
 * else -ENOTCONN (no such open session, or it ended meanwhile), -EPROTO
 * (PROGRAM or TRIGGER before ACK), -EBUSY (a request is in flight),
 * -ETIMEDOUT, or the QCS's ERROR as its errno with "qcs: CODE: MESSAGE" in
 * ql_error_detail(). */
int ql_ctl_server_request(struct ql_ctl_server *srv, uint64_t session, const struct ql_ctl_msg *m,
			  int timeout_ms);

/* Session accessors, valid inside callbacks (a session is freed after its
 * ending callback returns and its reply cache expires). */
uint64_t ql_ctl_session_id(const struct ql_ctl_session *s);
const char *ql_ctl_session_name(const struct ql_ctl_session *s);
uint32_t ql_ctl_session_nchannels(const struct ql_ctl_session *s);
enum ql_ctl_state ql_ctl_session_state(const struct ql_ctl_session *s);
/* "127.0.0.1:40312" */
const char *ql_ctl_session_peer(const struct ql_ctl_session *s);
void ql_ctl_session_set_data(struct ql_ctl_session *s, void *data);
void *ql_ctl_session_data(const struct ql_ctl_session *s);

/* ---- client (QCS) ---------------------------------------------------- */

struct ql_ctl_client;

struct ql_ctl_client_config {
	const char *name;      /* DISCOVER "name"; NULL: "qcs" */
	const char *bind_addr; /* local IPv4 address; NULL: any */
	uint32_t timeout_ms;   /* first wait for a reply; 0: 200, doubled per retry up to 8x */
	uint32_t retries;      /* retransmissions after the first send; 0: 5 */
	uint32_t keepalive_ms; /* ql_ctl_client_serve's KEEPALIVE period; 0: 1000 */
};

/* host_port: "HOST:PORT" (IPv4 literal or name). cfg may be NULL. */
int ql_ctl_client_create(const char *host_port, const uint8_t *secret, size_t secret_len,
			 const struct ql_ctl_client_config *cfg, struct ql_ctl_client **cl);
void ql_ctl_client_destroy(struct ql_ctl_client *cl);

/* Each request below retransmits until its reply arrives; errors:
 * -ETIMEDOUT (no reply after the retries), -ECONNREFUSED when three tries
 * (or every try, with fewer retries) met an ICMP port unreachable (nothing
 * listens at host_port; detail "port unreachable"), the server's ERROR mapped to an
 * errno (-EACCES, -EBUSY, -ECONNREFUSED, -EPROTO, -ENOTCONN, -EBADMSG) with
 * "server: <code>: <message>" in ql_error_detail(), and -ECONNRESET once the
 * server has sent an ABORT notice. */

/* DISCOVER with a fresh session id; fills n RTH parameter sets. */
int ql_ctl_client_discover(struct ql_ctl_client *cl, uint32_t n, struct ql_conn_params *rth);
/* ACK with the QCS's own parameters (n must match discover's). */
int ql_ctl_client_ack(struct ql_ctl_client *cl, const struct ql_conn_params *mine, uint32_t n);
int ql_ctl_client_start(struct ql_ctl_client *cl);
int ql_ctl_client_stop(struct ql_ctl_client *cl);
int ql_ctl_client_abort(struct ql_ctl_client *cl);
int ql_ctl_client_complete(struct ql_ctl_client *cl);
/* STATUS; writes the reply's "counters" JSON object text into json. */
int ql_ctl_client_status(struct ql_ctl_client *cl, char *json, size_t len);
/* Send one KEEPALIVE without waiting for its reply and drain replies that
 * arrived meanwhile. Cheap; call every keepalive period (a third of the
 * server's session timeout is a good choice). -ECONNRESET after an ABORT
 * notice from the server, -ENOTCONN when the server no longer knows the
 * session. */
int ql_ctl_client_keepalive(struct ql_ctl_client *cl);
uint64_t ql_ctl_client_session(const struct ql_ctl_client *cl);

/* What a QCS does when its RTH drives it. Callbacks run inside
 * ql_ctl_client_serve() and return 0 or a negative errno; a failure is
 * answered ERROR "refused" with ql_error_detail() as its message. */
struct ql_ctl_client_ops {
	/* The upload is complete: len bytes (the buffer is the library's, valid
	 * during the call). Required. */
	int (*program)(void *ctx, const void *bytes, size_t len);
	/* Run the program uploaded last. Required. */
	int (*trigger)(void *ctx);
	/* The RTH gave up the session: stop. Optional. */
	void (*abort)(void *ctx, const char *reason);
};

/* Serve the RTH's requests (PROGRAM, TRIGGER, ABORT) for up to timeout_ms
 * (0: only what is waiting), answering each, retransmissions from a reply
 * cache; send KEEPALIVE when keepalive_ms has passed since the last one.
 * Returns as soon as a request was handled: the number handled, 0 when none
 * came, -ECONNRESET once the session was aborted (an ABORT from the RTH,
 * after ops->abort ran, or its shutdown notice), -ENOTCONN when the server no
 * longer knows the session, another negative errno on socket errors. Not
 * while another request of this client is in progress (one thread). */
int ql_ctl_client_serve(struct ql_ctl_client *cl, int timeout_ms,
			const struct ql_ctl_client_ops *ops, void *ctx);

#ifdef __cplusplus
}
#endif
#endif
