/* SPDX-License-Identifier: MIT */
/* Loading handler plugins (see plugin/loader.h and qlink/plugin.h). */
#define _GNU_SOURCE
#include "plugin/loader.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/source.h"
#include "qlink/daemon.h"
#include "qlink/error.h"

struct ql_plugin {
	void *handle;
	const struct ql_plugin_info *info;
	void *state;
	int inited;
	uint32_t nfunctions;
	char *path;
	/* for the registrar callbacks */
	struct ql_daemon *daemon;
	struct ql_rpc_table *table;
	struct ql_plugin_registrar *user;
	int first_err;
};

const struct ql_plugin_info *ql_plugin_get_info(const struct ql_plugin *p)
{
	return p->info;
}

const char *ql_plugin_path(const struct ql_plugin *p)
{
	return p->path;
}

uint32_t ql_plugin_function_count(const struct ql_plugin *p)
{
	return p->nfunctions;
}

void ql_plugin_unload(struct ql_plugin *p)
{
	if (!p)
		return;
	if (p->inited && p->info->fini)
		p->info->fini(p->state);
	if (p->handle)
		dlclose(p->handle);
	free(p->path);
	free(p);
}

static int fail(struct ql_plugin *p, int err, const char *fmt, const char *a, const char *b)
{
	char msg[900];

	snprintf(msg, sizeof(msg), fmt, a, b);
	ql_plugin_unload(p);
	return ql_error_set(err, "plugin %s", msg);
}

/*
 * Trust, as sudo and sshd's StrictModes have it: the plugin runs as this
 * process, so nobody but root and this process's effective user may have
 * been able to choose or change its bytes. The file and every directory
 * from / down to it (the canonical path, symbolic links resolved) must be
 * owned by root or the effective uid and writable by neither group nor
 * world. One exception, where sshd's StrictModes is stricter than the
 * threat: a sticky directory (/tmp, mode 1777) may be writable by others,
 * because the sticky bit lets nobody but an entry's owner (or root)
 * rename or remove that entry, and the entry below it on the path is
 * itself checked here (owned by root or us): someone who created the name
 * first owns it and is refused. A clone or build tree in a private
 * directory under /tmp is therefore trusted; a plugin file directly in
 * /tmp is trusted only when it is ours and not group/world-writable.
 */
static int untrusted(const char *path, const char *what, const char *shown, const struct stat *st)
{
	uid_t me = geteuid();

	if (st->st_uid != 0 && st->st_uid != me) {
		char self[48] = "";

		if (me != 0)
			snprintf(self, sizeof(self), " or uid %u", (unsigned)me);
		return ql_error_set(-EPERM,
				    "plugin %s: refused: %s '%s' is owned by uid %u, not root%s "
				    "(the user qlinkd runs as)",
				    path, what, shown, (unsigned)st->st_uid, self);
	}
	if (S_ISDIR(st->st_mode) && (st->st_mode & S_ISVTX))
		return 0; /* sticky: what lies below is checked in turn */
	if (st->st_mode & (S_IWGRP | S_IWOTH))
		return ql_error_set(-EPERM,
				    "plugin %s: refused: %s '%s' is %s-writable (mode %04o)", path,
				    what, shown, (st->st_mode & S_IWOTH) ? "world" : "group",
				    (unsigned)(st->st_mode & 07777));
	return 0;
}

/*
 * Walk the canonical path one component at a time with O_PATH|O_NOFOLLOW
 * descriptors, checking each with fstat: what is checked is what was
 * opened, and a link swapped in after realpath() is refused rather than
 * followed. On success *fd is an O_PATH descriptor of the file and canon
 * its canonical path.
 */
static int open_trusted(const char *path, char *canon, int *fdp)
{
	char shown[PATH_MAX];
	struct stat st;
	char *comp, *next;
	int dfd, fd, ret;

	*fdp = -1;
	if (!realpath(path, canon)) {
		ret = -errno;
		return ql_error_set(ret, "plugin %s: %s", path, strerror(-ret));
	}
	dfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || fstat(dfd, &st)) {
		ret = -errno;
		if (dfd >= 0)
			close(dfd);
		return ql_error_set(ret, "plugin %s: /: %s", path, strerror(-ret));
	}
	ret = untrusted(path, "directory", "/", &st);
	if (ret)
		goto out;
	strcpy(shown, canon);
	if (!shown[1]) {
		ret = ql_error_set(-ENOEXEC, "plugin %s: not a regular file", path);
		goto out;
	}
	for (comp = shown + 1; *comp; comp = next) {
		bool last;

		next = strchr(comp, '/');
		last = !next;
		if (next)
			*next = '\0';
		fd = openat(dfd, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0 || fstat(fd, &st)) {
			ret = -errno;
			if (fd >= 0)
				close(fd);
			ql_error_set(ret, "plugin %s: '%s': %s", path, shown, strerror(-ret));
			goto out;
		}
		close(dfd);
		dfd = fd;
		if (S_ISLNK(st.st_mode)) {
			ret = ql_error_set(-ELOOP,
					   "plugin %s: refused: '%s' became a symbolic link while "
					   "being checked",
					   path, shown);
			goto out;
		}
		if (last && !S_ISREG(st.st_mode)) {
			ret = ql_error_set(-ENOEXEC, "plugin %s: not a regular file", path);
			goto out;
		}
		if (!last && !S_ISDIR(st.st_mode)) {
			ret = ql_error_set(-ENOTDIR, "plugin %s: '%s' is not a directory", path,
					   shown);
			goto out;
		}
		ret = untrusted(path, last ? "file" : "directory", shown, &st);
		if (ret)
			goto out;
		if (next)
			*next++ = '/';
		else
			next = comp + strlen(comp);
	}
	*fdp = dfd;
	return 0;
out:
	close(dfd);
	return ret;
}

int ql_plugin_check(const char *path)
{
	char canon[PATH_MAX];
	int fd, ret;

	if (!path || !*path)
		return ql_error_set(-EINVAL, "plugin: no path given");
	ret = open_trusted(path, canon, &fd);
	if (!ret)
		close(fd);
	return ret;
}

int ql_plugin_load(const char *path, const char *config, struct ql_plugin **out)
{
	struct ql_plugin *p;
	ql_plugin_info_fn fn;
	const struct ql_plugin_info *info;
	char abi[128], canon[PATH_MAX];
	int ret, fd;

	*out = NULL;
	if (!path || !*path)
		return ql_error_set(-EINVAL, "plugin: no path given");
	ret = open_trusted(path, canon, &fd);
	if (ret)
		return ret;
	p = calloc(1, sizeof(*p));
	if (!p || !(p->path = strdup(path))) {
		free(p);
		close(fd);
		return ql_error_set(-ENOMEM, "plugin %s: out of memory", path);
	}
	/* RTLD_NOW: an unresolved symbol is an error here, not a crash at the
	 * first call; RTLD_LOCAL: plugins cannot see each other's symbols.
	 * By the canonical path just checked, not /proc/self/fd/N: that would
	 * make the plugin's $ORIGIN /proc/self/fd. Every directory on it is
	 * one only root or this user can change, so the file cannot be swapped
	 * between the check and dlopen by anyone else (the residual race is
	 * with root or ourselves, docs/security.md); a swap that stayed is
	 * caught below. */
	p->handle = dlopen(canon, RTLD_NOW | RTLD_LOCAL);
	if (p->handle) {
		struct stat a, b;

		if (fstat(fd, &a) || stat(canon, &b) || a.st_dev != b.st_dev ||
		    a.st_ino != b.st_ino) {
			close(fd);
			ql_plugin_unload(p);
			return ql_error_set(
				-EPERM, "plugin %s: refused: '%s' was replaced while being loaded",
				path, canon);
		}
	}
	close(fd);
	if (!p->handle)
		return fail(p, -ENOEXEC, "%s: cannot be loaded: %s", path, dlerror());
	dlerror();
	*(void **)&fn = dlsym(p->handle, QL_PLUGIN_SYMBOL);
	if (!fn)
		return fail(p, -ENOSYS,
			    "%s: not a qlink plugin: it exports no %s() function "
			    "(see docs/qlinkd.md, \"Plugins\")",
			    path, QL_PLUGIN_SYMBOL);
	info = fn();
	if (!info)
		return fail(p, -EINVAL, "%s: %s() returned NULL", path, QL_PLUGIN_SYMBOL);
	if (info->abi_version < QL_PLUGIN_ABI_MIN || info->abi_version > QL_PLUGIN_ABI_VERSION) {
		/* Version 1's struct ql_rpc_function is shorter: its functions
		 * would be read with a garbage frame pointer. Say so. */
		snprintf(abi, sizeof(abi), "%u, this qlinkd speaks %u..%u%s", info->abi_version,
			 QL_PLUGIN_ABI_MIN, QL_PLUGIN_ABI_VERSION,
			 info->abi_version == 1 ? " (struct ql_rpc_function has gained frame "
						  "handlers since)" :
						  "");
		return fail(p, -EPROTO,
			    "%s: built for plugin ABI version %s; rebuild it against this "
			    "qlink's headers",
			    path, abi);
	}
	if (!info->name || !*info->name || !info->register_functions)
		return fail(p, -EINVAL, "%s: malformed description: %s", path,
			    !info->register_functions ? "register_functions is NULL" :
							"name is empty");
	p->info = info;
	if (info->init) {
		ret = info->init(config, &p->state);
		if (ret) {
			char why[200];

			snprintf(why, sizeof(why), "%s (%s)", ql_strerror(ret),
				 config ? config : "no config");
			ql_plugin_unload(p);
			return ql_error_set(ret < 0 ? ret : -EINVAL, "plugin %s: init failed: %s",
					    path, why);
		}
	}
	p->inited = 1;
	*out = p;
	return 0;
}

static int reg_function(void *host, const struct ql_rpc_function *fn)
{
	struct ql_plugin *p = host;
	int ret;

	if (!fn)
		ret = -EINVAL;
	else if (p->daemon)
		ret = ql_daemon_register(p->daemon, fn);
	else if (p->table)
		ret = ql_rpc_table_add(p->table, fn);
	else
		ret = p->user->register_function(p->user->host, fn);
	if (ret < 0) {
		if (!p->first_err)
			ql_error_set(ret, "plugin %s: registering %s: %s", p->info->name,
				     fn && fn->name ? fn->name : "(null)", ql_strerror(ret));
		p->first_err = p->first_err ? p->first_err : ret;
		return ret;
	}
	p->nfunctions++;
	return 0;
}

static void reg_log(void *host, enum ql_log_level level, const char *msg)
{
	struct ql_plugin *p = host;

	if (p->user && p->user->log)
		p->user->log(p->user->host, level, msg);
	else
		ql_log(level, p->info->name, "%s", msg ? msg : "");
}

static size_t reg_source(void *host, uint8_t *key, size_t cap)
{
	(void)host;
	return ql__daemon_request_source(key, cap);
}

uint32_t ql_plugin_flags(const struct ql_plugin *p)
{
	/* a version 2 description has no flags field: state per session */
	return p->info->abi_version >= 3 ? p->info->flags : 0;
}

static int do_register(struct ql_plugin *p)
{
	struct ql_plugin_registrar r = {
		.abi_version = QL_PLUGIN_ABI_VERSION,
		.host = p,
		.register_function = reg_function,
		.log = reg_log,
		.request_source = reg_source,
	};
	int ret;

	p->nfunctions = 0;
	p->first_err = 0;
	ret = p->info->register_functions(p->state, &r);
	if (!ret && p->first_err)
		ret = p->first_err; /* the plugin ignored a failed registration */
	if (ret && !p->first_err)
		ql_error_set(ret < 0 ? ret : -EINVAL, "plugin %s: register_functions failed: %s",
			     p->info->name, ql_strerror(ret));
	p->daemon = NULL;
	p->table = NULL;
	p->user = NULL;
	return ret < 0 ? ret : ret ? -EINVAL : 0;
}

int ql_plugin_register(struct ql_plugin *p, struct ql_daemon *daemon)
{
	p->daemon = daemon;
	return do_register(p);
}

int ql_plugin_register_table(struct ql_plugin *p, struct ql_rpc_table *table)
{
	p->table = table;
	return do_register(p);
}

int ql_plugin_register_with(struct ql_plugin *p, struct ql_plugin_registrar *reg)
{
	reg->abi_version = QL_PLUGIN_ABI_VERSION;
	p->user = reg;
	return do_register(p);
}
