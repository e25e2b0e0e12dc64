/* SPDX-License-Identifier: MIT */
/*
 * vppu: the virtual PPU, a software QCS.
 *
 * It plays the quantum control system against a real-time host: writes
 * requests into the host's ring through the reference client (ring.h), or
 * into its pages as an FPGA does (the hsb client, hsb.h), or as datagrams
 * of CUDA-Q's UDP transport (the udp client, udp.h),
 * stamps each with its send time in ptp_timestamp, matches responses by
 * request_id, checks every result, and measures round trips from the
 * echoed timestamp. Two modes: closed loop with a window of calls in
 * flight, and paced at a fixed rate (syndrome streaming at, say, 1 MHz),
 * where a call that cannot leave on time is counted late.
 */
#ifndef QLINK_VPPU_H
#define QLINK_VPPU_H

#include <signal.h>
#include <stdint.h>
#include <stdio.h>

#include "qlink/histogram.h"
#include "qlink/ring.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The device call the VPPU makes over and over. */
struct ql_vppu_call {
	const char *function; /* handler name; function_id = FNV-1a of it */
	uint32_t arg_len;
	/* Fill the arguments of call n (arg_len bytes). */
	void (*make_args)(void *ctx, uint64_t n, uint8_t *args);
	/* 0 if the response to call n is right, non-zero if not. NULL: any
	 * status 0 response is right. */
	int (*check)(void *ctx, uint64_t n, int32_t status, const uint8_t *results,
		     uint32_t result_len);
	void *ctx;
	/* Nonzero: the function_id sent, instead of FNV-1a of function (a
	 * function known by its id only; function then names it in reports). */
	uint32_t function_id;
};

struct ql_vppu_config {
	uint32_t window;      /* closed loop: calls in flight (0: the ring's slots) */
	double rate_hz;	      /* 0: closed loop; > 0: paced at this rate */
	uint64_t count;	      /* calls to make (0: run for duration_ns) */
	uint64_t duration_ns; /* when count is 0 */
	/* Per-call timeout (0: 5 s): a call unanswered this long after it was
	 * sent ends the run; it and every call still in flight past its own
	 * deadline are counted in timeouts. Also bounds the final drain. */
	uint64_t timeout_ns;
	/* Checked every loop turn (NULL: none): non-zero ends the run at once,
	 * even with the window full; calls in flight are counted lost. */
	const volatile sig_atomic_t *stop;
	/* Called about every tick_ns while running (e.g. the control plane's
	 * keepalive); NULL: none. Not for measurement-critical work. */
	void (*tick)(void *tick_ctx);
	void *tick_ctx;
	uint64_t tick_ns;
};

struct ql_vppu_report {
	uint64_t sent;
	uint64_t received;
	uint64_t ok;
	uint64_t wrong;		  /* status 0 but check() said wrong */
	uint64_t handler_errors;  /* status > 0 */
	uint64_t protocol_errors; /* status < 0 */
	uint64_t unexpected;	  /* response matching no call in flight */
	uint64_t timeouts;	  /* calls unanswered timeout_ns after they left */
	uint64_t late;		  /* paced: calls that left more than a period late */
	uint64_t lost;		  /* sent - received at the end, plus gave_up */
	/* UC (the ring client's counts, ql_ring_client_stats): */
	uint64_t resent;	/* requests written again after the deadline */
	uint64_t gave_up;	/* requests given up after the last resend */
	uint64_t dup_responses; /* extra responses to resent requests, dropped */
	double elapsed_s;
	double rpc_per_s;
	struct ql_hist rtt_ns;
	int transport_error; /* 0 or the client's negative errno */
	int timed_out;	     /* the run ended because a call timed out */
	int stopped;	     /* the run ended because *stop was set */
	/* The first error response (status != 0): its status (a handler's
	 * positive one, or a protocol status, ql_rpc_status_str) and the
	 * call it answered; first_error_status 0: none. */
	int32_t first_error_status;
	uint64_t first_error_call;
};

/* Run one phase. Returns 0 (whatever the counts say) or a negative errno
 * if it could not run at all. */
int ql_vppu_run(struct ql_ring_client *cl, const struct ql_vppu_call *call,
		const struct ql_vppu_config *cfg, struct ql_vppu_report *rep);

/* The data plane the VPPU drives, as four calls on a client: a ql_client
 * (client.h: the ring, hsb or udp client), or any client with the same
 * contract (send: 0, -EAGAIN when its window is full; poll: responses in
 * the order the requests were sent; release: re-post the buffer). */
struct ql_hsb_client;
struct ql_vppu_client {
	void *cl;
	int (*send)(void *cl, const void *msg, uint32_t len);
	int (*poll)(void *cl, struct ql_ring_response *out, int max);
	int (*release)(void *cl, const struct ql_ring_response *r);
	uint32_t (*max_msg)(const void *cl);
	/* optional (NULL: none): the client's resend counters (ring over UC) */
	int (*stats)(const void *cl, struct ql_ring_client_stats *st);
};
/* Any ql_client (client.h: ring, hsb or udp; over udp responses come in
 * the order qlink answers), its loss counters as stats. */
struct ql_client;
void ql_vppu_client_of(struct ql_vppu_client *c, struct ql_client *cl);
/* The same for a transport's own client (ql_client_from_ring(cl), ...). */
void ql_vppu_client_ring(struct ql_vppu_client *c, struct ql_ring_client *cl);
void ql_vppu_client_hsb(struct ql_vppu_client *c, struct ql_hsb_client *cl);
struct ql_udp_client;
void ql_vppu_client_udp(struct ql_vppu_client *c, struct ql_udp_client *cl);
/* ql_vppu_run over any client. */
int ql_vppu_run_client(const struct ql_vppu_client *c, const struct ql_vppu_call *call,
		       const struct ql_vppu_config *cfg, struct ql_vppu_report *rep);

/* The report as one JSON object (rtt_ns.{min,p50,p90,p99,p999,max},
 * rpc_per_s, sent, received, ok, wrong, ..., lost). */
void ql_vppu_report_json(const struct ql_vppu_report *rep, const char *name, FILE *f);

#ifdef __cplusplus
}
#endif
#endif
