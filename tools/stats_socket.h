/* SPDX-License-Identifier: MIT */
/*
 * Where qlinkd's read-only statistics socket is by default, for qlinkd
 * (--stats-socket) and `qlink stat` (--socket) alike (docs/qlinkd.md,
 * "Live statistics"): $RUNTIME_DIRECTORY/qlinkd-stats.sock (the first
 * directory systemd's RuntimeDirectory= gives the service), else
 * /run/qlink/qlinkd-stats.sock for root, else
 * $XDG_RUNTIME_DIR/qlinkd-stats.sock. 0, or -ENOENT when none applies (not
 * root and no XDG_RUNTIME_DIR), -ENAMETOOLONG past a socket path's length.
 */
#ifndef QLINK_TOOLS_STATS_SOCKET_H
#define QLINK_TOOLS_STATS_SOCKET_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>

#define QL_STATS_SOCKET_NAME "qlinkd-stats.sock"
#define QL_STATS_SOCKET_ROOT_DIR "/run/qlink"

static inline int ql_stats_socket_default(char *buf, size_t len)
{
	const char *rd = getenv("RUNTIME_DIRECTORY"), *x = getenv("XDG_RUNTIME_DIR");
	size_t dlen;
	int n;

	if (rd && *rd == '/') {
		dlen = strcspn(rd, ":"); /* several directories: the first */
	} else if (geteuid() == 0) {
		rd = QL_STATS_SOCKET_ROOT_DIR;
		dlen = strlen(rd);
	} else if (x && *x == '/') {
		rd = x;
		dlen = strlen(x);
	} else {
		return -ENOENT;
	}
	n = snprintf(buf, len, "%.*s/%s", (int)dlen, rd, QL_STATS_SOCKET_NAME);
	if (n < 0 || (size_t)n >= len || (size_t)n >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return -ENAMETOOLONG;
	return 0;
}

#endif
