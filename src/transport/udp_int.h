/* SPDX-License-Identifier: MIT */
/*
 * What the UDP channel and client share: address literals and the stride
 * bounds, checked the same way on both ends.
 */
#ifndef QL_TRANSPORT_UDP_INT_H
#define QL_TRANSPORT_UDP_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

/* An IPv4 or IPv6 literal (no name lookup) and a port into *ss; passive:
 * for bind. -EINVAL with a detail otherwise. */
int ql__udp_parse_addr(const char *host, uint16_t port, bool passive, struct sockaddr_storage *ss,
		       socklen_t *len);
/* The longest source key: an IPv6 address and a port. */
#define QL__UDP_KEY_MAX 18u

/* 0 if stride is within QL_UDP_MIN_SLOT_SIZE..QL_UDP_MAX_SLOT_SIZE. */
int ql__udp_check_stride(uint32_t stride);

#endif
