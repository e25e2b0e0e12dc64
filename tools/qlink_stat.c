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
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "stats_socket.h"
#include "tools.h"

static const struct tool_opt stat_opts[] = {
	{ "socket", 0, 's', TOOL_VALUE, "PATH",
	  "qlinkd's stats socket (default, as qlinkd's:\n"
	  "$RUNTIME_DIRECTORY/qlinkd-stats.sock, else\n"
	  "/run/qlink/qlinkd-stats.sock as root, else\n"
	  "$XDG_RUNTIME_DIR/qlinkd-stats.sock)" },
	{ "json", 0, 'j', TOOL_FLAG, NULL, "one JSON object" },
	{ "prometheus", 0, 'p', TOOL_FLAG, NULL, "the Prometheus text exposition format" },
	{ "timeout", 0, 't', TOOL_VALUE, "TIME", "how long to wait for qlinkd (default 2s)" },
	{ 0 },
};

static const struct tool_cmd stat_cmd = {
	.name = "stat",
	.usage = "[--socket PATH] [--json | --prometheus] [--timeout TIME]",
	.about = "Print a running qlinkd's statistics: sessions (live, and the last 64\n"
		 "ended with their final counters), functions with calls and errors\n"
		 "since start, handler latency, refused and dropped requests by reason,\n"
		 "and device, channel (hsb, udp), dispatcher and control counters. Exit 1\n"
		 "when qlinkd cannot be reached or does not answer in time (the reason\n"
		 "on stderr).\n",
	.opts = stat_opts,
};

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
			fprintf(stderr, "qlink stat: %s: no answer within %gs\n", path,
				timeout_ms / 1000.0);
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
	const char *path = NULL, *req = NULL;
	char def[sizeof(((struct sockaddr_un *)0)->sun_path)];
	double timeout_s = 2;
	int c;

	optind = 0;
	while ((c = tool_getopt(&stat_cmd, argc, argv)) != TOOL_END) {
		switch (c) {
		case 's':
			path = optarg;
			break;
		case 'j':
		case 'p':
			if (req)
				return tool_usage("stat",
						  "--json and --prometheus exclude each other");
			req = c == 'j' ? "json\n" : "prometheus\n";
			break;
		case 't':
			if (tool_time(optarg, 0.001, 600, &timeout_s))
				return tool_bad("stat", "--timeout", optarg);
			break;
		default:
			return 2;
		}
	}
	if (optind < argc)
		return tool_usage("stat", "unexpected argument '%s'", argv[optind]);
	if (!path) {
		int ret = ql_stats_socket_default(def, sizeof(def));

		if (ret)
			return tool_usage("stat", "no default stats socket (%s); give --socket",
					  ret == -ENOENT ? "not root and XDG_RUNTIME_DIR unset" :
							   "path too long");
		path = def;
	}
	return fetch(path, req ? req : "text\n", (int)(timeout_s * 1000 + 0.5));
}
