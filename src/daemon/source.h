/* SPDX-License-Identifier: MIT */
/*
 * The source of the request a handler is serving, for plugins that keep
 * state per caller (struct ql_plugin_registrar.request_source).
 */
#ifndef QL_DAEMON_SOURCE_H
#define QL_DAEMON_SOURCE_H

#include <stddef.h>
#include <stdint.h>

/* Called from a handler on a dispatcher thread: the key of the source of
 * the request being served (the channel's source op: UDP gives address
 * then port, network order, 6 or 18 bytes) into key[0..cap); its length,
 * 0 when the session has a single peer (ring, hsb) or outside a handler. */
size_t ql__daemon_request_source(uint8_t *key, size_t cap);

#endif
