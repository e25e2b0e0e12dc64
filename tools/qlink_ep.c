/* SPDX-License-Identifier: MIT */
/*
 * qlink ep: the endpoint service (qlink/endpoint.h, docs/endpoint.md) from
 * the command line.
 *
 *   qlink ep serve FILE   serve the endpoints of a YAML file; each path is a
 *                         mailbox: what is sent/written to it is what its
 *                         receive/read endpoint gives back
 *   qlink ep call PATH    one operation (or --repeat N, timed) on a server
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qlink/clock.h"
#include "qlink/endpoint.h"
#include "qlink/error.h"
#include "tools.h"

#define EP_DEFAULT_DEVICE "soft+shm://qlink-ep"
#define EP_DEFAULT_LISTEN "127.0.0.1:7471"

static const char *const uri_alias[] = { "uri", "device", NULL };

static const struct tool_opt ep_serve_opts[] = {
	{ "device", 'd', 'd', TOOL_VALUE, "URI", "verbs device (default " EP_DEFAULT_DEVICE ")" },
	{ "listen", 0, 'l', TOOL_VALUE, "ADDR",
	  "HOST:PORT or unix:PATH (default " EP_DEFAULT_LISTEN ")" },
	{ "max-conns", 0, 'm', TOOL_VALUE, "N", "concurrent connections (default 64)" },
	{ "busy-poll", 0, 'b', TOOL_FLAG, NULL,
	  "never sleep when idle (lowest latency, one core busy)" },
	{ "verbose", 0, 'v', TOOL_FLAG, NULL, "print every handler call" },
	{ 0 },
};

static const struct tool_cmd ep_serve_cmd = {
	.aliases = uri_alias,
	.name = "ep serve",
	.usage = "FILE [--device URI] [--listen ADDR] [--max-conns N] [--busy-poll] [--verbose]",
	.about = "Serves the endpoints of a YAML endpoints file (docs/endpoint.md).\n"
		 "Each path is a mailbox: what a client sends or writes to it is what the\n"
		 "same path's receive or read endpoint gives back.\n",
	.opts = ep_serve_opts,
};

static const struct tool_opt ep_call_opts[] = {
	{ "device", 'd', 'd', TOOL_VALUE, "URI", "verbs device (default " EP_DEFAULT_DEVICE ")" },
	{ "connect", 0, 'c', TOOL_VALUE, "ADDR",
	  "the server, HOST:PORT or unix:PATH (default " EP_DEFAULT_LISTEN ")" },
	{ "type", 0, 't', TOOL_VALUE, "TYPE",
	  "send, receive, write or read (default: write with\n"
	  "--data/--file, read without)" },
	{ "data", 0, 'D', TOOL_VALUE, "TEXT", "the bytes to send or write" },
	{ "file", 0, 'f', TOOL_VALUE, "FILE", "the bytes to send or write, from a file" },
	{ "len", 0, 'n', TOOL_VALUE, "N",
	  "bytes to read (default: the endpoint's size), or the\n"
	  "receive capacity (default 4194304)" },
	{ "out", 0, 'o', TOOL_VALUE, "FILE", "where received or read bytes go (default: stdout)" },
	{ "repeat", 0, 'r', TOOL_VALUE, "N", "do it N times and print latency percentiles" },
	{ "timeout", 0, 'T', TOOL_VALUE, "TIME", "how long to wait for the server (default 5)" },
	{ 0 },
};

static const struct tool_cmd ep_call_cmd = {
	.aliases = uri_alias,
	.name = "ep call",
	.usage = "[--device URI] [--connect ADDR] [--type TYPE] PATH [--data TEXT | --file FILE]\n"
		 "[--len N] [--out FILE] [--repeat N] [--timeout TIME]",
	.about = "One operation on an endpoint of a server (qlink ep serve).\n",
	.opts = ep_call_opts,
};

/* ADDR of --listen and --connect: unix:PATH, or HOST:PORT (listen: port 0
 * is any). */
static int ep_addr(const char *s, bool listen)
{
	if (!strncmp(s, "unix:", 5))
		return s[5] ? 0 : -EINVAL;
	return listen ? tool_listen_port(s) : tool_hostport(s, 0);
}

/* ---- serve -------------------------------------------------------------- */

static volatile int ep_stop;

static void ep_on_signal(int sig)
{
	(void)sig;
	ep_stop = 1;
}

struct mailbox {
	struct ql_ep_server *srv;
	int verbose;
	/* per endpoint of the spec: the length last deposited in it */
	size_t *len;
	const struct ql_ep_spec *spec;
};

static int mailbox_index(const struct mailbox *mb, const char *path, enum ql_ep_type type)
{
	struct ql_ep_info in;

	for (int i = 0; ql_ep_spec_get(mb->spec, i, &in) == 0; i++)
		if (in.type == type && !strcmp(in.path, path))
			return i;
	return -1;
}

static int mailbox_handler(struct ql_ep_call *call, void *arg)
{
	struct mailbox *mb = arg;
	enum ql_ep_type peer = 0;
	int self = mailbox_index(mb, call->path, call->type), other;
	size_t size = 0;
	void *dst;

	if (mb->verbose)
		printf("conn %llu %s %s %zu bytes\n", (unsigned long long)call->conn,
		       ql_ep_type_name(call->type), call->path,
		       call->type == QL_EP_RECEIVE && self >= 0 ? mb->len[self] : call->len);
	switch (call->type) {
	case QL_EP_SEND:
		peer = QL_EP_RECEIVE;
		break;
	case QL_EP_WRITE:
		peer = QL_EP_READ;
		break;
	case QL_EP_RECEIVE:
		if (self >= 0) {
			if (mb->len[self] > call->len)
				return -EMSGSIZE;
			call->len = mb->len[self];
		}
		goto out;
	case QL_EP_READ:
		goto out;
	}
	other = mailbox_index(mb, call->path, peer);
	dst = ql_ep_server_buffer(mb->srv, call->path, peer, &size);
	if (other >= 0 && dst) {
		size_t n = call->len < size ? call->len : size;

		memcpy(dst, call->buf, n);
		mb->len[other] = n;
	}
out:
	if (mb->verbose)
		fflush(stdout);
	return 0;
}

static int ep_serve(int argc, char **argv)
{
	struct ql_ep_server_opts o = { .device = EP_DEFAULT_DEVICE, .listen = EP_DEFAULT_LISTEN };
	struct ql_ep_server_stats st;
	struct mailbox mb = { 0 };
	struct ql_ep_spec *spec = NULL;
	struct ql_ep_info in;
	char addr[160];
	int c, ret;

	optind = 0;
	while ((c = tool_getopt(&ep_serve_cmd, argc, argv)) != TOOL_END) {
		switch (c) {
		case 'd':
			if (tool_device_uri(optarg))
				return tool_bad("ep serve", "--device", optarg);
			o.device = optarg;
			break;
		case 'l':
			if (ep_addr(optarg, true))
				return tool_bad("ep serve", "--listen", optarg);
			o.listen = optarg;
			break;
		case 'm':
			if (tool_int(optarg, 1, 4096, &o.max_conns))
				return tool_bad("ep serve", "--max-conns", optarg);
			break;
		case 'b':
			o.idle_us = -1;
			break;
		case 'v':
			mb.verbose = 1;
			break;
		default:
			return 2;
		}
	}
	if (optind + 1 != argc)
		return tool_usage("ep serve", "expected one endpoints file");
	ret = ql_ep_spec_load(argv[optind], &spec);
	if (ret) {
		fprintf(stderr, "qlink ep serve: %s\n", ql_error_detail());
		return 1;
	}
	ret = ql_ep_server_create(spec, &o, &mb.srv);
	if (ret) {
		tool_fail("ep serve", "cannot start", ret);
		ql_ep_spec_free(spec);
		return 1;
	}
	mb.spec = spec;
	mb.len = calloc((size_t)ql_ep_spec_count(spec), sizeof(*mb.len));
	if (!mb.len) {
		ret = -ENOMEM;
		goto out;
	}
	/* read endpoints get no handler: there is nothing to prepare, and a
	 * read without one is a READ and an ack, no round trip (READY) */
	for (int i = 0; ql_ep_spec_get(spec, i, &in) == 0; i++)
		if (in.type != QL_EP_READ)
			ql_ep_server_handle(mb.srv, in.path, in.type, mailbox_handler, &mb);
	signal(SIGINT, ep_on_signal);
	signal(SIGTERM, ep_on_signal);
	ql_ep_server_address(mb.srv, addr, sizeof(addr));
	printf("qlink ep serve: %d endpoints on %s, listening on %s\n", ql_ep_spec_count(spec),
	       o.device, addr);
	fflush(stdout);
	ret = ql_ep_server_run(mb.srv, &ep_stop);
	ql_ep_server_stats(mb.srv, &st);
	printf("qlink ep serve: %llu connections, %llu requests (%llu refused), %llu acks, "
	       "%llu sends, %llu violations\n",
	       (unsigned long long)st.conns_accepted, (unsigned long long)st.requests,
	       (unsigned long long)st.requests_refused, (unsigned long long)st.acks,
	       (unsigned long long)st.data, (unsigned long long)st.violations);
out:
	ql_ep_server_destroy(mb.srv);
	ql_ep_spec_free(spec);
	free(mb.len);
	if (ret)
		tool_fail("ep serve", "serving", ret);
	return ret ? 1 : 0;
}

/* ---- call ----------------------------------------------------------------- */

static int read_file(const char *path, uint8_t **buf, size_t *len)
{
	FILE *f = fopen(path, "rb");
	size_t cap = 1 << 16, n = 0;
	uint8_t *b = NULL;

	if (!f)
		return -errno;
	for (;;) {
		uint8_t *nb = realloc(b, cap);

		if (!nb) {
			free(b);
			fclose(f);
			return -ENOMEM;
		}
		b = nb;
		n += fread(b + n, 1, cap - n, f);
		if (n < cap || cap > QL_EP_SIZE_MAX)
			break;
		cap *= 2;
	}
	fclose(f);
	*buf = b;
	*len = n;
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int ep_call(int argc, char **argv)
{
	const char *device = EP_DEFAULT_DEVICE, *addr = EP_DEFAULT_LISTEN, *data = NULL;
	const char *file = NULL, *out = NULL, *path;
	enum ql_ep_type type = 0;
	uint64_t len = 0, *lat = NULL;
	int c, ret, repeat = 1, timeout = 5000, have_len = 0;
	double timeout_s;
	struct ql_ep_client *cl = NULL;
	uint8_t *payload = NULL, *buf = NULL;
	size_t plen = 0, nbytes = 0;

	optind = 0;
	while ((c = tool_getopt(&ep_call_cmd, argc, argv)) != TOOL_END) {
		switch (c) {
		case 'd':
			if (tool_device_uri(optarg))
				return tool_bad("ep call", "--device", optarg);
			device = optarg;
			break;
		case 'c':
			if (ep_addr(optarg, false))
				return tool_bad("ep call", "--connect", optarg);
			addr = optarg;
			break;
		case 't':
			if (ql_ep_type_parse(optarg, &type))
				return tool_bad("ep call", "--type", optarg);
			break;
		case 'D':
			data = optarg;
			break;
		case 'f':
			file = optarg;
			break;
		case 'n':
			if (tool_u64(optarg, 0, QL_EP_SIZE_MAX, &len))
				return tool_bad("ep call", "--len", optarg);
			have_len = 1;
			break;
		case 'o':
			out = optarg;
			break;
		case 'r':
			if (tool_int(optarg, 1, 100000000, &repeat))
				return tool_bad("ep call", "--repeat", optarg);
			break;
		case 'T':
			if (tool_time(optarg, 0.001, 3600, &timeout_s))
				return tool_bad("ep call", "--timeout", optarg);
			timeout = (int)(timeout_s * 1000 + 0.5);
			break;
		default:
			return 2;
		}
	}
	if (optind + 1 != argc)
		return tool_usage("ep call", "expected one endpoint PATH");
	path = argv[optind];
	if (data && file)
		return tool_usage("ep call", "--data and --file exclude each other");
	if (!type)
		type = data || file ? QL_EP_WRITE : QL_EP_READ;
	if ((type == QL_EP_SEND || type == QL_EP_WRITE) != (data || file)) {
		return tool_usage("ep call", "%s %s", ql_ep_type_name(type),
				  data || file ? "takes no --data/--file" :
						 "needs --data or --file");
	}
	if (file && (ret = read_file(file, &payload, &plen))) {
		tool_fail("ep call", file, ret);
		return 1;
	}
	if (data) {
		payload = (uint8_t *)strdup(data);
		plen = strlen(data);
	}
	ret = ql_ep_client_connect(device, addr, &cl);
	if (ret) {
		tool_fail("ep call", "connect", ret);
		free(payload);
		return 1;
	}
	ql_ep_client_set_timeout(cl, timeout);
	if (type == QL_EP_READ && !have_len) {
		size_t sz;

		ret = ql_ep_client_size(cl, path, QL_EP_READ, &sz);
		if (ret)
			goto fail;
		len = sz;
	}
	if (type == QL_EP_RECEIVE && !have_len)
		len = 4u << 20;
	nbytes = type == QL_EP_SEND || type == QL_EP_WRITE ? plen : (size_t)len;
	/* registered memory: the calls move the bytes with no copy */
	buf = ql_ep_client_alloc(cl, nbytes ? nbytes : 1);
	lat = calloc((size_t)repeat, sizeof(*lat));
	if (!buf || !lat) {
		ret = -ENOMEM;
		goto fail;
	}
	if (payload)
		memcpy(buf, payload, plen);
	for (int i = 0; i < repeat; i++) {
		uint64_t t0 = ql_clock_ns();
		long r = 0;

		switch (type) {
		case QL_EP_SEND:
			r = ql_ep_send(cl, path, buf, plen);
			break;
		case QL_EP_WRITE:
			r = ql_ep_write(cl, path, buf, plen);
			break;
		case QL_EP_READ:
			r = ql_ep_read(cl, path, buf, (size_t)len);
			break;
		case QL_EP_RECEIVE:
			r = ql_ep_recv(cl, path, buf, (size_t)len);
			if (r >= 0) {
				nbytes = (size_t)r;
				r = 0;
			}
			break;
		}
		lat[i] = ql_clock_ns() - t0;
		if (r) {
			ret = (int)r;
			goto fail;
		}
	}
	if (repeat > 1) {
		qsort(lat, (size_t)repeat, sizeof(*lat), cmp_u64);
		fprintf(stderr,
			"qlink ep call: %s %s %zu bytes x %d: median %.2f us, p99 %.2f us, "
			"min %.2f us\n",
			ql_ep_type_name(type), path, nbytes, repeat, lat[repeat / 2] / 1e3,
			lat[(size_t)repeat * 99 / 100] / 1e3, lat[0] / 1e3);
	}
	if (type == QL_EP_READ || type == QL_EP_RECEIVE) {
		FILE *f = out ? fopen(out, "wb") : stdout;

		if (!f || fwrite(buf, 1, nbytes, f) != nbytes) {
			ret = -errno;
			if (f && f != stdout)
				fclose(f);
			tool_fail("ep call", out ? out : "stdout", ret ? ret : -EIO);
			ret = 1;
			goto done;
		}
		if (f != stdout)
			fclose(f);
		else
			fflush(stdout);
	}
	ret = 0;
	goto done;
fail:
	tool_fail("ep call", path, ret);
	ret = 1;
done:
	free(lat);
	free(payload);
	ql_ep_client_close(cl);
	return ret;
}

int tool_ep(int argc, char **argv)
{
	if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		tool_help(&ep_serve_cmd, stdout);
		printf("\n");
		tool_help(&ep_call_cmd, stdout);
		return 0;
	}
	if (argc >= 2 && !strcmp(argv[1], "serve"))
		return ep_serve(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "call"))
		return ep_call(argc - 1, argv + 1);
	if (argc < 2)
		return tool_usage("ep", "say serve or call");
	return tool_usage("ep", "unknown command '%s' (serve, call)", argv[1]);
}
