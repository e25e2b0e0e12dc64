/* SPDX-License-Identifier: MIT */
/*
 * The "echo" daemon the dispatcher and daemon tests serve: a raw handler
 * that answers its arguments as its results, and a daemon (no pinned core)
 * on a channel that serves it, made and destroyed N at a time. Header-only:
 * each test program includes what it uses.
 */
#ifndef QL_TEST_ECHO_DAEMON_H
#define QL_TEST_ECHO_DAEMON_H

#include <stddef.h>
#include <stdint.h>

#include <qlink/channel.h>
#include <qlink/daemon.h>
#include <qlink/rpc.h>

/* "echo": its arguments back as its results. */
static inline int32_t ql_test_echo(struct ql_rpc_in *in, struct ql_rpc_out *out, void *ctx)
{
	size_t n = ql_rpc_in_left(in);

	(void)ctx;
	ql_rpc_write_bytes(out, ql_rpc_in_view(in, n), n);
	return 0;
}

/* A daemon on ch (cpu -1) that serves "echo". 0 or a negative errno. */
static inline int ql_test_echo_daemon(struct ql_channel *ch, struct ql_daemon **d)
{
	struct ql_daemon_config dc = { .cpu = -1 };
	int ret = ql_daemon_create(&dc, ch, d);

	return ret ? ret : ql_daemon_register(*d, &QL_RPC_RAW_FUNCTION("echo", ql_test_echo, NULL));
}

/* Destroy daemons d[0..n) and then each one's channel ch[i]. */
static inline void ql_test_echo_daemons_destroy(struct ql_daemon **d, struct ql_channel **ch, int n)
{
	for (int i = 0; i < n; i++) {
		ql_daemon_destroy(d[i]);
		ql_channel_destroy(ch[i]);
	}
}

#endif
