/* SPDX-License-Identifier: MIT */
/* Connection parameters over pipes and rendezvous files (see rendezvous.h). */
#define _GNU_SOURCE
#include "transport/rendezvous.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "qlink/clock.h"
#include "qlink/error.h"

int ql__write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int ql__read_line(int fd, char *buf, size_t len)
{
	size_t n = 0;

	while (n + 1 < len) {
		ssize_t r = read(fd, buf + n, 1);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		if (buf[n] == '\n')
			break;
		n++;
	}
	buf[n] = '\0';
	return (int)n;
}

/* "text\n" of p, in buf. */
static int params_line(const struct ql_conn_params *p, char *buf, size_t len)
{
	int n = ql_conn_params_format(p, buf, len - 1);

	if (n < 0 || (size_t)n >= len - 1)
		return ql_error_set(-EINVAL, "connection parameters do not fit a line");
	buf[n] = '\n';
	buf[n + 1] = '\0';
	return n + 1;
}

int ql__send_params(int fd, const struct ql_conn_params *p)
{
	char line[512];
	int n = params_line(p, line, sizeof(line));

	return n < 0 ? -1 : ql__write_all(fd, line, (size_t)n);
}

int ql__recv_params(int fd, struct ql_conn_params *p)
{
	char line[512];

	if (ql__read_line(fd, line, sizeof(line)) < 0)
		return -1;
	return ql_conn_params_parse(line, p) ? -1 : 0;
}

/* ---- files ------------------------------------------------------------------ */

int ql__rdv_check_dir(const char *path)
{
	char dir[4096];
	const char *slash = strrchr(path, '/');
	struct stat st;

	if (!slash)
		strcpy(dir, ".");
	else if (slash == path)
		strcpy(dir, "/");
	else if ((size_t)(slash - path) < sizeof(dir))
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	else
		return ql_error_set(-ENAMETOOLONG, "%s: path too long", path);
	if (stat(dir, &st))
		return ql_error_set(-errno, "rendezvous directory %s: %s", dir, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return ql_error_set(-ENOTDIR, "rendezvous directory %s is not a directory", dir);
	if (st.st_uid != geteuid())
		return ql_error_set(-EPERM,
				    "rendezvous directory %s is owned by uid %u, not by this "
				    "process (uid %u): refusing it (use a private directory, "
				    "e.g. mktemp -d)",
				    dir, (unsigned)st.st_uid, (unsigned)geteuid());
	if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
		return ql_error_set(-EPERM,
				    "rendezvous directory %s is writable by group or others and "
				    "not sticky (mode %04o): refusing it",
				    dir, (unsigned)(st.st_mode & 07777));
	return 0;
}

int ql__rdv_create(const char *path, const char *text)
{
	size_t n = strlen(text);
	struct stat st;
	int fd, ret;

	ret = ql__rdv_check_dir(path);
	if (ret)
		return ret;
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		ret = -errno;
		if (ret == -EEXIST && !lstat(path, &st) && S_ISLNK(st.st_mode))
			return ql_error_set(-ELOOP,
					    "%s is a symbolic link: refusing to follow or "
					    "replace it",
					    path);
		if (ret == -EEXIST)
			return ql_error_set(ret,
					    "%s already exists (a stale rendezvous or another "
					    "user's file): refusing to reuse it; remove it or "
					    "choose another path",
					    path);
		return ql_error_set(ret, "cannot create %s: %s", path, strerror(-ret));
	}
	/* One write: a reader takes the file only once its line is complete. */
	ret = ql__write_all(fd, text, n) ? -EIO : 0;
	if (close(fd) && !ret)
		ret = -EIO;
	if (ret) {
		unlink(path);
		return ql_error_set(ret, "cannot write %s", path);
	}
	return 0;
}

/* Open path as a reader may: 0 and the line, -ENOENT/-EAGAIN (not there
 * yet or not complete: wait), or a refusal. */
static int read_checked(const char *path, char *line, size_t len)
{
	struct stat st;
	ssize_t n;
	char *nl;
	int fd, ret = 0;

	/* O_NONBLOCK: a FIFO planted at the name must not block the open */
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return -ENOENT;
		if (errno == ELOOP)
			return ql_error_set(-ELOOP, "%s is a symbolic link: refusing to follow it",
					    path);
		return ql_error_set(-errno, "cannot open %s: %s", path, strerror(errno));
	}
	if (fstat(fd, &st))
		ret = ql_error_set(-errno, "%s: %s", path, strerror(errno));
	else if (!S_ISREG(st.st_mode))
		ret = ql_error_set(-EPERM, "%s is not a regular file: refusing it", path);
	else if (st.st_uid != geteuid())
		ret = ql_error_set(-EPERM,
				   "%s is owned by uid %u, not by this process (uid %u): "
				   "refusing it",
				   path, (unsigned)st.st_uid, (unsigned)geteuid());
	else if (st.st_mode & (S_IWGRP | S_IWOTH))
		ret = ql_error_set(-EPERM,
				   "%s is writable by group or others (mode %04o): refusing it",
				   path, (unsigned)(st.st_mode & 07777));
	else if (st.st_nlink != 1)
		ret = ql_error_set(-EPERM, "%s has %u hard links: refusing it", path,
				   (unsigned)st.st_nlink);
	if (!ret) {
		n = pread(fd, line, len - 1, 0);
		if (n < 0)
			ret = ql_error_set(-errno, "cannot read %s: %s", path, strerror(errno));
		else {
			line[n] = '\0';
			nl = strchr(line, '\n');
			if (nl)
				*nl = '\0';
			else if ((size_t)n == len - 1)
				ret = ql_error_set(-EINVAL, "%s: first line too long", path);
			else
				ret = -EAGAIN; /* still being written */
		}
	}
	close(fd);
	return ret;
}

int ql__rdv_wait(const char *path, double timeout_s, ql_rdv_idle_fn idle, void *ctx, char *line,
		 size_t len)
{
	uint64_t deadline = ql_clock_ns() + (uint64_t)(timeout_s * 1e9);
	int ret = ql__rdv_check_dir(path);

	if (ret)
		return ret;
	for (;;) {
		ret = read_checked(path, line, len);
		if (ret != -ENOENT && ret != -EAGAIN)
			return ret;
		if (ql_clock_ns() > deadline)
			return ql_error_set(-ETIMEDOUT, "no %s within %.1f s", path, timeout_s);
		if (idle(ctx))
			return -EINTR;
	}
}

int ql__rdv_init(struct ql_rdv *r, const char *file)
{
	memset(r, 0, sizeof(*r));
	if (!*file || strlen(file) >= sizeof(r->file))
		return ql_error_set(-ENAMETOOLONG, "rendezvous path empty or too long");
	snprintf(r->file, sizeof(r->file), "%s", file);
	snprintf(r->client, sizeof(r->client), "%s.client", file);
	snprintf(r->ready, sizeof(r->ready), "%s.ready", file);
	return 0;
}

static int wait_params(const char *path, double timeout_s, ql_rdv_idle_fn idle, void *ctx,
		       struct ql_conn_params *p)
{
	char line[512];
	int ret = ql__rdv_wait(path, timeout_s, idle, ctx, line, sizeof(line));

	if (!ret && ql_conn_params_parse(line, p))
		ret = ql_error_set(-EINVAL, "%s: not connection parameters", path);
	return ret;
}

static int create_params(const char *path, const struct ql_conn_params *p)
{
	char line[512];
	int n = params_line(p, line, sizeof(line));

	return n < 0 ? n : ql__rdv_create(path, line);
}

int ql__rdv_offer(struct ql_rdv *r, const struct ql_conn_params *server)
{
	int ret = create_params(r->file, server);

	r->wrote_file = !ret;
	return ret;
}

int ql__rdv_wait_client(struct ql_rdv *r, double timeout_s, ql_rdv_idle_fn idle, void *ctx,
			struct ql_conn_params *client)
{
	return wait_params(r->client, timeout_s, idle, ctx, client);
}

int ql__rdv_offer_hsb(struct ql_rdv *r, const struct ql_hsb_params *server)
{
	char line[512];
	int n = ql_hsb_params_format(server, line, sizeof(line) - 1), ret;

	if (n < 0 || (size_t)n >= sizeof(line) - 1)
		return ql_error_set(-EINVAL, "hsb parameters do not fit a line");
	line[n] = '\n';
	line[n + 1] = '\0';
	ret = ql__rdv_create(r->file, line);
	r->wrote_file = !ret;
	return ret;
}

int ql__rdv_wait_server_hsb(struct ql_rdv *r, double timeout_s, ql_rdv_idle_fn idle, void *ctx,
			    struct ql_hsb_params *server)
{
	char line[512];
	int ret = ql__rdv_wait(r->file, timeout_s, idle, ctx, line, sizeof(line));

	if (!ret && ql_hsb_params_parse(line, server))
		ret = ql_error_set(-EINVAL, "%s: not hsb parameters (%s)", r->file,
				   ql_error_detail());
	return ret;
}

int ql__rdv_ready(struct ql_rdv *r)
{
	int ret = ql__rdv_create(r->ready, "ready\n");

	r->wrote_ready = !ret;
	return ret;
}

int ql__rdv_wait_server(struct ql_rdv *r, double timeout_s, ql_rdv_idle_fn idle, void *ctx,
			struct ql_conn_params *server)
{
	return wait_params(r->file, timeout_s, idle, ctx, server);
}

int ql__rdv_join(struct ql_rdv *r, const struct ql_conn_params *client, double timeout_s,
		 ql_rdv_idle_fn idle, void *ctx)
{
	char line[64];
	int ret = create_params(r->client, client);

	r->wrote_client = !ret;
	if (!ret)
		ret = ql__rdv_wait(r->ready, timeout_s, idle, ctx, line, sizeof(line));
	return ret;
}

void ql__rdv_cleanup(struct ql_rdv *r)
{
	if (r->wrote_file)
		unlink(r->file);
	if (r->wrote_client)
		unlink(r->client);
	if (r->wrote_ready)
		unlink(r->ready);
	r->wrote_file = r->wrote_client = r->wrote_ready = false;
}
