/* SPDX-License-Identifier: MIT */
/* sock: what the kernel knows of one of our sockets (util/sock.h). */
#define _GNU_SOURCE
#include "util/sock.h"

#include <errno.h>
#include <linux/sock_diag.h>
#include <sys/socket.h>

int ql__sock_drops(int fd, uint32_t *drops)
{
	uint32_t mem[SK_MEMINFO_VARS];
	socklen_t ml = sizeof(mem);

	if (getsockopt(fd, SOL_SOCKET, SO_MEMINFO, mem, &ml))
		return -errno;
	if (ml <= SK_MEMINFO_DROPS * sizeof(uint32_t))
		return -EOPNOTSUPP;
	*drops = mem[SK_MEMINFO_DROPS];
	return 0;
}
