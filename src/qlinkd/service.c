/* SPDX-License-Identifier: MIT */
/*
 * qlinkd as a service: the default configuration path, the plugin
 * directory of its install, and systemd's readiness protocol (sd_notify,
 * written by hand: a datagram to $NOTIFY_SOCKET, so no libsystemd).
 * docs/qlinkd.md, "Running as a service".
 */
#define _GNU_SOURCE

#include <limits.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "qlinkd_int.h"

#ifndef QLINKD_DEFAULT_CONFIG
#define QLINKD_DEFAULT_CONFIG "/etc/qlink/qlinkd.yaml"
#endif
#ifndef QLINKD_PLUGIN_REL
#define QLINKD_PLUGIN_REL "../lib/qlink/plugins"
#endif

const char *qlinkd_default_config(void)
{
	return QLINKD_DEFAULT_CONFIG;
}

/* The plugin directory, relative to this executable as installed (so an
 * install under any prefix or DESTDIR finds its own plugins). */
void qlinkd_plugin_dir_init(void)
{
	char exe[PATH_MAX], dir[PATH_MAX + 64], *slash;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n <= 0)
		return;
	exe[n] = 0;
	slash = strrchr(exe, '/');
	if (!slash)
		return;
	*slash = 0;
	snprintf(dir, sizeof(dir), "%s/%s", exe, QLINKD_PLUGIN_REL);
	ql_config_set_plugin_dir(realpath(dir, exe) ? exe : dir);
}

int qlinkd_notify(const char *state)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t n;
	ssize_t w;
	int fd, ret;

	if (!path || !path[0])
		return 0;
	n = strlen(path);
	if ((path[0] != '/' && path[0] != '@') || n >= sizeof(sa.sun_path))
		return -EINVAL;
	memcpy(sa.sun_path, path, n);
	if (path[0] == '@')
		sa.sun_path[0] = 0; /* an abstract socket */
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	w = sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa,
		   (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n));
	ret = w < 0 ? -errno : 0;
	close(fd);
	if (ret)
		qlog(QL_LOG_WARN, "qlinkd", "cannot notify the service manager",
		     QS("notify_socket", path), QS("error", ql_strerror(ret)));
	return ret;
}
