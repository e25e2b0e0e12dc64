/* SPDX-License-Identifier: MIT */
/*
 * pcap.h: records the RoCEv2 packets of a soft+udp device to a pcap file
 * (the `?pcap=FILE` URI option, tests and debugging only), so tshark or
 * Wireshark can decode a run without root. Each UDP payload is written with
 * a synthesized Ethernet/IPv4 (or IPv6)/UDP framing from its roce_addr; the
 * IPv4 header carries DF, the roce_addr's ip_id and a valid checksum, so the
 * ICRC in the file is checkable as on a real wire. Buffered stdio: not for
 * the timed path. Not thread-safe (the NIC thread writes).
 */
#ifndef QL_UDP_PCAP_H
#define QL_UDP_PCAP_H

#include <stdint.h>
#include <sys/uio.h>

#include "providers/sudp/roce.h"

struct roce_pcap;

/* creates path, a new file (mode 0600): an existing file or a symbolic link
 * at path is refused (-EEXIST/-ELOOP); 0 or a negative errno (ql_error_set
 * detail) */
int ql__roce_pcap_open(struct roce_pcap **out, const char *path);
/* one packet: the UDP payload in iov (ICRC included), timestamp in ns
 * (CLOCK_REALTIME for readable captures); 0 or a negative errno */
int ql__roce_pcap_write(struct roce_pcap *p, uint64_t ts_ns, const struct roce_addr *a,
			const struct iovec *iov, int n);
/* flushes and closes; 0 or a negative errno; NULL is fine */
int ql__roce_pcap_close(struct roce_pcap *p);

#endif
