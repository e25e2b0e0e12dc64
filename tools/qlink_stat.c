/* SPDX-License-Identifier: MIT */
/*
 * qlink stat: qlinkd's live statistics, read from its stats socket
 * (docs/qlinkd.md, "Live statistics"): sessions (live and the last ended),
 * functions, handler latency, refusals and drops by reason, device,
 * channel, dispatcher and control-plane counters; as text, JSON or the
 * Prometheus text exposition format.
 */
#define _GNU_SOURCE

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "stats_socket.h"
#include "tools.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: qlink stat [--socket PATH] [--json | --prometheus] [--timeout MS]\n"
		   "\n"
		   "Print a running qlinkd's statistics: sessions (live, and the last 64\n"
		   "ended with their final counters), functions with calls and errors\n"
		   "since start, handler latency, refused and dropped requests by reason,\n"
		   "and device, channel (hsb, udp), dispatcher and control counters.\n"
		   "\n"
		   "options:\n"
		   "  --socket PATH   qlinkd's stats socket (its --stats-socket; default\n"
		   "                  /run/qlink/qlinkd-stats.sock as root, else\n"
		   "                  $XDG_RUNTIME_DIR/qlinkd-stats.sock)\n"
		   "  --json          one JSON object\n"
		   "  --prometheus    the Prometheus text exposition format\n"
		   "  --timeout MS    how long to wait for qlinkd (default 2000)\n"
		   "  -h, --help      this text\n");
}

/* Send the request line, copy the reply to stdout until qlinkd closes. */
static int fetch(const char *path, const char *req, int timeout_ms)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	char buf[65536];
	size_t got = 0;
	int fd, ret = 0;

	if (strlen(path) >= sizeof(a.sun_path)) {
		fprintf(stderr, "qlink stat: socket path too long: %s\n", path);
		return 1;
	}
	memcpy(a.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		fprintf(stderr,
			"qlink stat: %s: %s (is qlinkd running, and is this its --stats-socket?)\n",
			path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return 1;
	}
	if (send(fd, req, strlen(req), MSG_NOSIGNAL) != (ssize_t)strlen(req)) {
		fprintf(stderr, "qlink stat: %s: %s\n", path, strerror(errno));
		close(fd);
		return 1;
	}
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t r;

		if (poll(&p, 1, timeout_ms) <= 0) {
			fprintf(stderr, "qlink stat: %s: no answer within %d ms\n", path,
				timeout_ms);
			ret = 1;
			break;
		}
		r = read(fd, buf, sizeof(buf));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			if (r < 0) {
				fprintf(stderr, "qlink stat: %s: %s\n", path, strerror(errno));
				ret = 1;
			}
			break;
		}
		if (!got && r >= 6 && !memcmp(buf, "error:", 6)) {
			fprintf(stderr, "qlink stat: qlinkd says %.*s", (int)r, buf);
			ret = 1;
			break;
		}
		fwrite(buf, 1, (size_t)r, stdout);
		got += (size_t)r;
	}
	close(fd);
	if (!ret && !got) {
		fprintf(stderr, "qlink stat: %s: qlinkd closed without an answer\n", path);
		ret = 1;
	}
	return ret;
}

int tool_stat(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ "prometheus", no_argument, NULL, 'p' },
		{ "timeout", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *path = NULL, *req = "text\n";
	char def[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int c, timeout = 2000;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 's':
			path = optarg;
			break;
		case 'j':
			req = "json\n";
			break;
		case 'p':
			req = "prometheus\n";
			break;
		case 't':
			if (tool_int(optarg, 1, 600000, &timeout))
				return tool_bad("stat", "--timeout", optarg);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			fprintf(stderr, "qlink stat: see qlink stat --help\n");
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "qlink stat: unexpected argument '%s'; see qlink stat --help\n",
			argv[optind]);
		return 2;
	}
	if (!path) {
		int ret = ql_stats_socket_default(def, sizeof(def));

		if (ret) {
			fprintf(stderr, "qlink stat: no default stats socket (%s); give --socket\n",
				ret == -ENOENT ? "not root and XDG_RUNTIME_DIR unset" :
						 "path too long");
			return 2;
		}
		path = def;
	}
	return fetch(path, req, timeout);
}
