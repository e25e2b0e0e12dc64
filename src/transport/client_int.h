/* SPDX-License-Identifier: MIT */
/*
 * What the three implementations of ql_client (qlink/client.h: ring.c,
 * hsb_client.c, udp_client.c) share: the ops that only forward to the
 * transport's own functions, ql_<t>_client_{send,poll,release,in_flight,
 * max_msg,destroy} on a struct ql_<t>_client whose first member is the
 * struct ql__client_head.
 */
#ifndef QL_TRANSPORT_CLIENT_INT_H
#define QL_TRANSPORT_CLIENT_INT_H

#include "qlink/client.h"

#define QL__CLIENT_FORWARD_OPS(t)                                                          \
	static int t##_op_send(struct ql_client *c, const void *msg, uint32_t len)         \
	{                                                                                  \
		return ql_##t##_client_send((struct ql_##t##_client *)c, msg, len);        \
	}                                                                                  \
	static int t##_op_poll(struct ql_client *c, struct ql_ring_response *out, int max) \
	{                                                                                  \
		return ql_##t##_client_poll((struct ql_##t##_client *)c, out, max);        \
	}                                                                                  \
	static int t##_op_release(struct ql_client *c, const struct ql_ring_response *r)   \
	{                                                                                  \
		return ql_##t##_client_release((struct ql_##t##_client *)c, r);            \
	}                                                                                  \
	static uint32_t t##_op_in_flight(const struct ql_client *c)                        \
	{                                                                                  \
		return ql_##t##_client_in_flight((const struct ql_##t##_client *)c);       \
	}                                                                                  \
	static uint32_t t##_op_max_msg(const struct ql_client *c)                          \
	{                                                                                  \
		return ql_##t##_client_max_msg((const struct ql_##t##_client *)c);         \
	}                                                                                  \
	static void t##_op_destroy(struct ql_client *c)                                    \
	{                                                                                  \
		ql_##t##_client_destroy((struct ql_##t##_client *)c);                      \
	}

/* The ops table of transport t, with its own local_params and connect
 * (t##_op_local_params, t##_op_connect); stats NULL: nothing resent. */
#define QL__CLIENT_OPS(t, tr) QL__CLIENT_OPS_STATS(t, tr, NULL)
#define QL__CLIENT_OPS_STATS(t, tr, stats_fn)                 \
	static const struct ql__client_ops t##_client_ops = { \
		.transport = (tr),                            \
		.send = t##_op_send,                          \
		.poll = t##_op_poll,                          \
		.release = t##_op_release,                    \
		.in_flight = t##_op_in_flight,                \
		.max_msg = t##_op_max_msg,                    \
		.stats = (stats_fn),                          \
		.local_params = t##_op_local_params,          \
		.connect = t##_op_connect,                    \
		.destroy = t##_op_destroy,                    \
	}

#endif
