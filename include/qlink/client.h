/* SPDX-License-Identifier: MIT */
/*
 * client: the client side of the data plane, the twin of ql_channel
 * (channel.h). A client is what a QCS, the VPPU, the QEC stream or the CLI
 * talks to a real-time host with: open it, connect it, send requests (a
 * whole message, RPCHeader | args: qlink/rpc_wire.h encodes the header),
 * poll or wait for the responses (in request order), release each, close.
 * One interface over three transports, each an implementation of it:
 *
 *   ring  the qlink ring (ring.h): two RDMA WRITEs per request into the
 *         host's ring, responses by SEND; RC or UC (resends on UC)
 *   hsb   the Hololink pages (hsb.h): WRITE ONLY packets and a WRITE WITH
 *         IMMEDIATE per frame, as an FPGA board does; responses by SEND
 *   udp   CUDA-Q Realtime's UDP transport (udp.h): one datagram each way
 *
 * The transport's own client (ql_ring_client, ql_hsb_client,
 * ql_udp_client) IS a ql_client: ql_client_from_ring() and its siblings
 * return the same object seen through this interface (no allocation), and
 * ql_client_ring() and its siblings see a ql_client as its transport's
 * client again (NULL when it is another transport's), for the calls only
 * one transport has (ql_hsb_client_send_raw, ql_udp_client_fd, ...).
 *
 * The hot path (ql_client_send, ql_client_poll, ql_client_release) never
 * allocates, locks, logs or enters the kernel, except the udp transport's
 * one send and one recvmmsg (tests/test_client.c proves it with
 * tests/hotpath.c's interposed allocator and seccomp filter).
 */
#ifndef QLINK_CLIENT_H
#define QLINK_CLIENT_H

#include <errno.h>
#include <stdint.h>

#include "qlink/hsb.h"
#include "qlink/ring.h"
#include "qlink/udp.h"
#include "qlink/verbs.h"

#ifdef __cplusplus
extern "C" {
#endif

struct ql_client;

enum ql_client_transport {
	QL_CLIENT_RING = 0, /* ring.h */
	QL_CLIENT_HSB = 1,  /* hsb.h */
	QL_CLIENT_UDP = 2,  /* udp.h */
};

/* What the client did about losses: the ring over UC resends; the other
 * transports and the ring over RC count 0. */
struct ql_client_stats {
	uint64_t resent;	/* requests written again after their deadline */
	uint64_t lost;		/* requests given up after the last resend */
	uint64_t dup_responses; /* responses to a request already answered */
};

struct ql__client_ops {
	enum ql_client_transport transport;
	int (*send)(struct ql_client *cl, const void *msg, uint32_t len);
	int (*poll)(struct ql_client *cl, struct ql_ring_response *out, int max);
	int (*release)(struct ql_client *cl, const struct ql_ring_response *r);
	uint32_t (*in_flight)(const struct ql_client *cl);
	uint32_t (*max_msg)(const struct ql_client *cl);
	/* optional: clients that never resend leave it NULL (all 0) */
	void (*stats)(const struct ql_client *cl, struct ql_client_stats *st);
	int (*local_params)(struct ql_client *cl, struct ql_conn_params *p);
	int (*connect)(struct ql_client *cl, const struct ql_conn_params *server,
		       const struct ql_qp_connect_opts *opts);
	void (*destroy)(struct ql_client *cl);
};

/* Every client starts with this; applications must not touch it. */
struct ql__client_head {
	const struct ql__client_ops *ops;
};

/* ---- open, connect, close ----------------------------------------------- */

struct ql_client_config {
	enum ql_client_transport transport;
	struct ql_device *dev; /* ring, hsb: the device the QP lives on */
	/* ring: the server's ring (vaddr, rkey, length, num_slots, slot_size),
	 * which the client is sized for; hsb, udp: unused */
	const struct ql_conn_params *server;
	struct ql_ring_client_config ring; /* ring: window, qp_type, resends */
	struct ql_hsb_client_config hsb;   /* hsb: buffers, window, packet size */
	struct ql_udp_client_config udp;   /* udp: host, port, stride, window */
};

/* Open a client of cfg->transport: the transport's create (a QP, its CQs
 * and buffers; udp: a socket connect()ed to host:port). -EINVAL for an
 * unknown transport or what the transport's create refuses. */
int ql_client_create(const struct ql_client_config *cfg, struct ql_client **cl);
/* ring, hsb: the client's qpn, psn, gid and mtu (what the host connects
 * its QP to); udp: -EOPNOTSUPP (there is no QP). */
int ql_client_local_params(struct ql_client *cl, struct ql_conn_params *p);
/* ring: connect the QP to the server's (the ring given at create); hsb:
 * program the client with the host's pages (server as
 * ql_hsb_params_to_conn gives them) and connect its UC QP; udp: nothing
 * (connected at create; server may be NULL). opts NULL: defaults. */
int ql_client_connect(struct ql_client *cl, const struct ql_conn_params *server,
		      const struct ql_qp_connect_opts *opts);
/* The three in one, for a server whose parameters are known first:
 * create, the local parameters into *local (NULL: not wanted; udp has
 * none), connect to server. On failure nothing is left (*cl NULL). */
int ql_client_open(const struct ql_client_config *cfg, const struct ql_conn_params *server,
		   const struct ql_qp_connect_opts *opts, struct ql_client **cl,
		   struct ql_conn_params *local);
/* Close: what the transport's destroy does. NULL is a no-op. */
void ql_client_destroy(struct ql_client *cl);

/* The transport a client speaks. */
static inline enum ql_client_transport ql_client_transport(const struct ql_client *cl)
{
	return ((const struct ql__client_head *)(const void *)cl)->ops->transport;
}

/* A transport's client as a ql_client (the same object; NULL for NULL). */
struct ql_client *ql_client_from_ring(struct ql_ring_client *rc);
struct ql_client *ql_client_from_hsb(struct ql_hsb_client *hc);
struct ql_client *ql_client_from_udp(struct ql_udp_client *uc);
/* A ql_client as its transport's client; NULL when it is another's. */
struct ql_ring_client *ql_client_ring(struct ql_client *cl);
struct ql_hsb_client *ql_client_hsb(struct ql_client *cl);
struct ql_udp_client *ql_client_udp(struct ql_client *cl);

/* ---- the hot path ---------------------------------------------------- */

/* Send one message (RPCHeader | args, `len` bytes) as the next request.
 * 0; -EAGAIN when the window is full (poll for responses), -EMSGSIZE when
 * it is longer than ql_client_max_msg, -EIO (ring, hsb) when the QP
 * failed, other negative errnos from udp's send. */
static inline int ql_client_send(struct ql_client *cl, const void *msg, uint32_t len)
{
	return ((const struct ql__client_head *)(const void *)cl)->ops->send(cl, msg, len);
}

/* Up to `max` responses in the order the requests were sent (udp: in the
 * order they arrive, which is the host's); 0 when none. A response points
 * into the client's receive buffer until ql_client_release. On the ring
 * over UC a request given up comes as msg NULL, len 0 in its place. */
static inline int ql_client_poll(struct ql_client *cl, struct ql_ring_response *out, int max)
{
	return ((const struct ql__client_head *)(const void *)cl)->ops->poll(cl, out, max);
}

/* Give a polled response's buffer back (once). */
static inline int ql_client_release(struct ql_client *cl, const struct ql_ring_response *r)
{
	return ((const struct ql__client_head *)(const void *)cl)->ops->release(cl, r);
}

/* Requests sent whose responses have not arrived. */
static inline uint32_t ql_client_in_flight(const struct ql_client *cl)
{
	return ((const struct ql__client_head *)(const void *)cl)->ops->in_flight(cl);
}

/* The longest message: a ring slot's, the host's frame_len, the stride. */
static inline uint32_t ql_client_max_msg(const struct ql_client *cl)
{
	return ((const struct ql__client_head *)(const void *)cl)->ops->max_msg(cl);
}

/* The loss counters so far (all 0 where the transport does not resend). */
static inline void ql_client_stats(const struct ql_client *cl, struct ql_client_stats *st)
{
	const struct ql__client_ops *ops = ((const struct ql__client_head *)(const void *)cl)->ops;

	if (ops->stats)
		ops->stats(cl, st);
	else
		st->resent = st->lost = st->dup_responses = 0;
}

/* Poll until a response arrives or timeout_ns passed (spinning: for tools
 * and tests, not the hot path): 1 with *out filled, -ETIMEDOUT, or the
 * poll's negative errno. */
int ql_client_wait(struct ql_client *cl, struct ql_ring_response *out, uint64_t timeout_ns);

#ifdef __cplusplus
}
#endif
#endif
