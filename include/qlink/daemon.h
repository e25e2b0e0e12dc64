/* SPDX-License-Identifier: MIT */
/*
 * daemon: the RPC server of a real-time host (seed 000, layer 2).
 *
 * A daemon owns one channel and a table of registered functions. A CPU
 * dispatcher (dispatcher.h: one thread pinned to a core, serving many
 * daemons round robin) polls the channel for bursts of up to 32 requests,
 * calls each request's handler with zero-copy streams over the ring slot
 * and the response buffer, and sends the responses. ql_daemon_start gives a
 * daemon a private dispatcher of its own; ql_dispatcher_attach puts it on a
 * shared one instead. Per request: no allocation, lock, syscall or log.
 * Statistics (counts by outcome and by function, a handler-time histogram)
 * are kept by the dispatcher and can be read at any time.
 */
#ifndef QLINK_DAEMON_H
#define QLINK_DAEMON_H

#include <stddef.h>
#include <stdint.h>

#include "qlink/channel.h"
#include "qlink/dispatcher.h"
#include "qlink/histogram.h"
#include "qlink/rpc.h"

#ifdef __cplusplus
extern "C" {
#endif

#define QL_DAEMON_MAX_BURST 32

struct ql_daemon;

/* What happens to a request refused before its handler runs (short, bad
 * magic, bad length, unknown function, arguments not matching the schema):
 * ANSWER sends a response with the error status (the ring's default); DROP
 * sends nothing and frees the slot, as CUDA-Q Realtime does (the hsb
 * transport's default). Counted by kind either way; dropped counts DROP's.
 * A UC ring channel needs ANSWER: its resend cache pairs the k-th response
 * with request k (docs/wire-protocol.md §2.3). */
enum ql_bad_request_policy {
	QL_BAD_REQUEST_ANSWER = 0,
	QL_BAD_REQUEST_DROP = 1,
};

struct ql_daemon_config {
	int cpu;		/* private dispatcher's core (ql_daemon_start); -1: unpinned */
	uint32_t burst;		/* requests per burst, 1..32 (0: 32) */
	uint32_t max_functions; /* capacity of the function table (0: 64) */
	enum ql_bad_request_policy bad_requests; /* 0: ANSWER */
};

/* Counters by outcome. Every request taken from the channel ends in exactly
 * one of ok, handler_error, err_result_overrun, err_deadline or one of the
 * protocol errors. Every response built ends in send_failed (the channel
 * refused it) or sent; every one sent in responses (delivered), dropped_rnr,
 * dropped_peer, or is still in flight. */
struct ql_daemon_stats {
	uint64_t requests;     /* taken from the channel */
	uint64_t responses;    /* delivered: SENDs completed with success (a
			       channel without completions, the loopback:
			       = sent) */
	uint64_t sent;	       /* responses the channel accepted (posted) */
	uint64_t dropped_rnr;  /* lost: no receive buffer at the peer (RNR
				  retries exceeded) */
	uint64_t dropped_peer; /* lost: peer gone (transport retries exceeded,
				  flushed when the QP failed, other errors) */
	uint64_t ok;
	uint64_t handler_error; /* handler returned a positive status */
	uint64_t err_short;	/* message shorter than an RPCHeader */
	uint64_t err_bad_magic;
	uint64_t err_bad_length; /* arg_len beyond the message or the slot */
	uint64_t err_unknown_function;
	uint64_t err_args;	      /* arguments do not match the schema */
	uint64_t err_result_overflow; /* results would not fit */
	uint64_t err_internal;	      /* handler failed (negative return) */
	uint64_t send_failed;	      /* responses the channel refused */
	uint64_t err_result_overrun;  /* handler wrote past its result capacity
					 (answered QL_RPC_E_INTERNAL) */
	uint64_t err_deadline;	      /* handler overran the dispatcher's call
					 deadline (0 or 1: the daemon failed) */
	uint64_t bursts;
	int channel_error; /* 0, or the channel's negative errno */
	int running;	   /* a running dispatcher serves it */
	int failed;	   /* 0, or -ETIMEDOUT: see ql_daemon_failure */
	uint64_t dropped;  /* bad requests not answered (QL_BAD_REQUEST_DROP).
			      Under DROP, requests - dropped is CUDA-Q
			      Realtime's PROCESSED count: the requests
			      dispatched to a handler (answered, status 0 or
			      not), refused ones not counted */
};

struct ql_daemon_function_stats {
	char name[64];
	uint32_t id;
	uint64_t calls;
	uint64_t errors;	  /* handler or result errors of this function */
	uint64_t result_overruns; /* of those: wrote past its result buffer */
};

int ql_daemon_create(const struct ql_daemon_config *cfg, struct ql_channel *ch,
		     struct ql_daemon **d);
/* Stops the dispatcher if it runs; the channel stays the caller's. */
void ql_daemon_destroy(struct ql_daemon *d);

/* Register a function (typed or raw, see rpc.h). Allowed while stopped
 * (attached to no dispatcher); -EBUSY otherwise, -EEXIST for a duplicate
 * name or id. */
int ql_daemon_register(struct ql_daemon *d, const struct ql_rpc_function *fn);

/* Serve the daemon on a private dispatcher thread pinned to cfg.cpu;
 * -EALREADY if a dispatcher (private or shared) serves it. Requests that
 * arrived while stopped are served first. */
int ql_daemon_start(struct ql_daemon *d);
/* Stop serving it, after the burst in progress (every request taken is
 * answered): stops the private dispatcher, or detaches the daemon from the
 * shared one that serves it. Requests still in the channel wait for the
 * next start or attach. */
int ql_daemon_stop(struct ql_daemon *d);

/* One burst in the calling thread (for single-threaded programs and
 * tests, and what a dispatcher calls per daemon per round): the number of
 * requests served, 0 if none, or the channel's negative errno. Must not be
 * used while a dispatcher serves the daemon. */
int ql_daemon_poll(struct ql_daemon *d);

/*
 * 0 while the daemon is sound; -ETIMEDOUT once a handler overran the call
 * deadline of the dispatcher serving it (ql_dispatcher_config
 * .call_deadline_ns): the watchdog then took the daemon off the dispatcher
 * for good and put the other daemons on a fresh thread. fn (may be NULL)
 * receives the function's name. A failed daemon is never served again
 * (attach fails with -EIO) and ql_daemon_destroy does not free it nor may
 * the caller destroy its channel: the abandoned thread may still return
 * from the handler and write into its response buffer (a bounded leak per
 * failure; see docs/daemon.md).
 */
int ql_daemon_failure(const struct ql_daemon *d, char *fn, size_t len);

/* Snapshots, consistent per counter, readable while running. */
void ql_daemon_stats(const struct ql_daemon *d, struct ql_daemon_stats *s);
uint32_t ql_daemon_function_count(const struct ql_daemon *d);
int ql_daemon_function_stats(const struct ql_daemon *d, uint32_t index,
			     struct ql_daemon_function_stats *s);
/* Handler time (ns, dispatch of one request) so far. */
void ql_daemon_handler_hist(const struct ql_daemon *d, struct ql_hist *h);

#ifdef __cplusplus
}
#endif
#endif
