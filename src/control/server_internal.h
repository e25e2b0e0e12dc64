/* SPDX-License-Identifier: MIT */
/*
 * Internal hooks of the control server for the state-machine fuzzer
 * (tests/fuzz/fuzz_control_seq.c), which compiles the sources directly:
 * feed datagrams without a socket and capture the answers. Not exported.
 */
#ifndef QLINK_CONTROL_SERVER_INTERNAL_H
#define QLINK_CONTROL_SERVER_INTERNAL_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct ql_ctl_server;

typedef ssize_t (*ql_ctl_sender_fn)(void *ctx, const struct sockaddr_in *to, const uint8_t *buf,
				    size_t len);

/* Every datagram the server sends goes to fn instead of the socket. */
void ql_ctl_server_set_sender(struct ql_ctl_server *srv, ql_ctl_sender_fn fn, void *ctx);
/* Handle one datagram as if it had arrived from `from`, then expire sessions. */
void ql_ctl_server_input(struct ql_ctl_server *srv, const uint8_t *buf, size_t len,
			 const struct sockaddr_in *from);

#endif
