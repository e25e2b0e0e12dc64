/* SPDX-License-Identifier: MIT */
/*
 * free_port.h: UDP ports for a test's servers (qlinkd's control plane, its
 * listeners, a QCS), asked of the kernel instead of fixed or guessed, so
 * that tests run beside each other (ctest -j, another worktree's suite, a
 * qlinkd of the host) do not collide.
 */
#ifndef QL_TEST_FREE_PORT_H
#define QL_TEST_FREE_PORT_H

#include <netinet/in.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* A base port p with p .. p+n-1 (n 1..16) all free for UDP on every
 * address (each bound to the wildcard address once): the first the
 * kernel's pick for port 0, from its ephemeral range, the others checked.
 * The ports are released on return: a server binds them a moment later (a
 * port-0 bind elsewhere could take one meanwhile: unlikely, not
 * impossible). Returns the port, or -1. */
static inline int ql_test_free_ports(int n)
{
	if (n < 1 || n > 16)
		return -1;
	for (int tries = 0; tries < 64; tries++) {
		int s[16], k = 0, base = -1;
		struct sockaddr_in a;
		socklen_t l = sizeof(a);

		memset(&a, 0, sizeof(a));
		a.sin_family = AF_INET;
		a.sin_addr.s_addr = htonl(INADDR_ANY);
		for (; k < n; k++) {
			s[k] = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
			if (s[k] < 0)
				break;
			a.sin_port = htons((uint16_t)(k ? base + k : 0));
			if (bind(s[k], (struct sockaddr *)&a, sizeof(a))) {
				close(s[k]);
				break;
			}
			if (!k) {
				if (getsockname(s[0], (struct sockaddr *)&a, &l) ||
				    ntohs(a.sin_port) + n - 1 > 65535) {
					close(s[0]);
					break;
				}
				base = ntohs(a.sin_port);
			}
		}
		for (int i = 0; i < k; i++)
			close(s[i]);
		if (k == n)
			return base;
	}
	return -1;
}

#endif
