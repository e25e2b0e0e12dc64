/* SPDX-License-Identifier: MIT */
/*
 * sock: what the kernel knows of one of our sockets, read outside the hot
 * path (a getsockopt each).
 */
#ifndef QL_UTIL_SOCK_H
#define QL_UTIL_SOCK_H

#include <stdint.h>

/* The datagrams the kernel dropped at socket fd (SO_MEMINFO's
 * SK_MEMINFO_DROPS: a full receive buffer, mostly; its count is 32 bits
 * and wraps): 0, or a negative errno with *drops untouched. */
int ql__sock_drops(int fd, uint32_t *drops);

#endif
