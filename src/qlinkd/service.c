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
#ifndef QLINKD_SBINDIR
#define QLINKD_SBINDIR "/usr/sbin"
#endif
#ifndef QLINKD_PREFIX_REL
#define QLINKD_PREFIX_REL ".."
#endif
#ifndef QLINKD_SYSCONF_REL
#define QLINKD_SYSCONF_REL "etc"
#endif
#ifndef QLINKD_PLUGIN_REL
#define QLINKD_PLUGIN_REL "../lib/qlink/plugins"
#endif

#define QLINKD_CONFIG_NAME "qlink/qlinkd.yaml"

static char default_config[PATH_MAX + 64] = QLINKD_DEFAULT_CONFIG;

const char *qlinkd_default_config(void)
{
	return default_config;
}

/* qlinkd runs from another place than the SBINDIR it was configured for
 * (installed with --prefix P, or under DESTDIR): the configuration that
 * install put beside it, as cmake/QlinkInstall.cmake places it:
 * P/SYSCONFDIR, or for a prefix named usr (/usr under DESTDIR) the etc
 * beside it; the first of those that exists, else the rule's. An absolute
 * SYSCONFDIR is where it is. */
static void relocated_config(const char *exe_dir)
{
	char p[PATH_MAX + 16], prefix[PATH_MAX], usr_etc[PATH_MAX + 64];
	const char *base;

	if (!QLINKD_SYSCONF_REL[0])
		return;
	snprintf(p, sizeof(p), "%s/%s", exe_dir, QLINKD_PREFIX_REL);
	if (!realpath(p, prefix))
		return;
	snprintf(default_config, sizeof(default_config), "%s/%s/%s",
		 strcmp(prefix, "/") ? prefix : "", QLINKD_SYSCONF_REL, QLINKD_CONFIG_NAME);
	base = strrchr(prefix, '/');
	if (!base || strcmp(base, "/usr") || access(default_config, F_OK) == 0)
		return;
	snprintf(usr_etc, sizeof(usr_etc), "%.*s/etc/%s", (int)(base - prefix), prefix,
		 QLINKD_CONFIG_NAME);
	snprintf(default_config, sizeof(default_config), "%s", usr_etc);
}

/* The plugin directory and the default configuration, relative to this
 * executable as installed (so an install under any prefix or DESTDIR finds
 * its own); without /proc the configured paths. */
void qlinkd_install_paths_init(void)
{
	char exe[PATH_MAX], dir[PATH_MAX + 64], sbin[PATH_MAX], *slash;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n <= 0)
		return;
	exe[n] = 0;
	slash = strrchr(exe, '/');
	if (!slash)
		return;
	*slash = 0;
	if (!realpath(QLINKD_SBINDIR, sbin) || strcmp(sbin, exe))
		relocated_config(exe);
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
