/* SPDX-License-Identifier: MIT */
/*
 * qlink serve / qlink vppu: the two sides of the data plane as separate
 * programs. qlink vppu --connect meets a qlinkd through the UDP control
 * plane (and --device serves an RTH's QCSDevice); without qlinkd, qlink
 * serve and qlink vppu --params-file meet through files:
 *
 *   qlink serve --params-file /tmp/ql   writes /tmp/ql (its ring and QP),
 *                                       waits for /tmp/ql.client, connects,
 *                                       writes /tmp/ql.ready, serves until
 *                                       SIGINT/SIGTERM, prints its counters
 *   qlink vppu --params-file /tmp/ql    reads /tmp/ql, writes /tmp/ql.client,
 *                                       waits for /tmp/ql.ready, calls
 *                                       qlink_parity and reports
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "config/config.h"
#include "config/program.h"
#include "demo/demo.h"
#include "qlink/client.h"
#include "qlink/clock.h"
#include "qlink/control.h"
#include "qlink/daemon.h"
#include "qlink/error.h"
#include "qlink/hololink.h"
#include "qlink/hsb.h"
#include "qlink/rpc_table.h"
#include "qlink/rpc_wire.h"
#include "qlink/udp.h"
#include "qlink/vppu.h"
#include "tools.h"

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* Waiting for a rendezvous file: poll every 10 ms until told to stop. */
static int rdv_idle(void *ctx)
{
	(void)ctx;
	sleep_ms(10);
	return stop_requested;
}

/* ---- serve ------------------------------------------------------------------ */

static const char *const uri_alias[] = { "uri", "device", NULL };

static const struct tool_opt serve_opts[] = {
	{ "params-file", 0, 'f', TOOL_VALUE, "FILE",
	  "rendezvous file (required for ring and hsb)" },
	{ "device", 'd', 'u', TOOL_VALUE, "URI", "device (default soft+shm://qlserve; not udp)" },
	{ "cpu", 0, 'c', TOOL_VALUE, "N", "dispatcher core (default 1, udp -1; -1: no pinning)" },
	{ "slots", 0, 'n', TOOL_VALUE, "N", "ring slots (default 64; udp 8)" },
	{ "num-slots", 0, 'n', TOOL_VALUE, "N", "the same as --slots (CUDA-Q's name)" },
	{ "slot-size", 0, 'z', TOOL_VALUE, "N", "slot bytes (default 256)" },
	{ "transport", 0, 'T', TOOL_VALUE, "T",
	  "ring (default), hsb: --slots pages of --slot-size\n"
	  "bytes (a multiple of 128), bad requests dropped;\n"
	  "or udp: CUDA-Q Realtime's UDP transport, one datagram of\n"
	  "--slot-size bytes per request, bad requests dropped" },
	{ "port", 0, 'p', TOOL_VALUE, "P", "udp: the port to bind (default 0: any, printed)" },
	{ "address", 0, 'a', TOOL_VALUE, "IP",
	  "udp: the address to bind, IPv4 or IPv6 (default 127.0.0.1)" },
	{ "allow", 0, 'A', TOOL_VALUE, "CIDR",
	  "udp: a source to serve, an address or CIDR block (repeat\n"
	  "for more; 0.0.0.0/0 and ::/0 for everyone); default\n"
	  "loopback only: others are dropped unanswered" },
	{ "dispatch", 0, 'd', TOOL_VALUE, "SHAPE",
	  "udp: ring (default) or unified, CUDA-Q's dispatch shapes:\n"
	  "both served the same way here, printed in READY" },
	{ "unified", 0, 'U', TOOL_FLAG, NULL, "udp: accepted for CUDA-Q's provider (no effect)" },
	{ "bad-requests", 0, 'b', TOOL_VALUE, "P",
	  "drop (hsb and udp default) or answer (ring default):\n"
	  "what happens to a request with a bad header or an\n"
	  "unknown function" },
	{ "qp", 0, 'Q', TOOL_VALUE, "rc|uc", "the ring's QP type (default rc; written to FILE)" },
	{ "timeout", 0, 't', TOOL_VALUE, "TIME",
	  "ring and hsb: how long to wait for the client (default\n"
	  "60); udp: how long to serve at most (default 60, as\n"
	  "CUDA-Q's server), then stop as on SIGTERM" },
	{ 0 },
};

static const struct tool_cmd serve_cmd = {
	.aliases = uri_alias,
	.name = "serve",
	.usage = "--params-file FILE [options]\n"
		 "--transport=udp [--dispatch=ring|unified] [--timeout=TIME] [options]\n"
		 " [-- [--port=P] [--num-slots=N] [--slot-size=S] [--unified] [--address=IP]]",
	.about =
		"Runs a daemon serving the built-in functions qlink_parity and rpc_increment\n"
		"(CUDA-Q Realtime's test function). On a request ring (or, with --transport\n"
		"hsb, on Hololink pages) it writes its connection parameters to FILE, waits\n"
		"for a client's in FILE.client (qlink vppu writes them), connects, writes\n"
		"FILE.ready, and serves until SIGINT or SIGTERM; then prints its counters.\n"
		"With --transport=udp it stands in for CUDA-Q Realtime's test server\n"
		"(docs/cudaq.md): no FILE; it binds a UDP socket, prints\n"
		"  CUDAQ_REALTIME_SERVER_READY transport=udp port=P dispatch=SHAPE slots=N slot_size=S\n"
		"once serving, and on SIGINT or SIGTERM (or after --timeout) prints its\n"
		"counters and\n"
		"  CUDAQ_REALTIME_SERVER_PROCESSED count=K\n"
		"(K: requests handed to a handler; dropped ones are not counted) and exits 0.\n"
		"The transport's arguments (--port, --num-slots, --slot-size, --unified,\n"
		"--address) may follow `--`, as CUDA-Q's server forwards them to its\n"
		"provider; unknown ones there are ignored with a warning.\n",
	.opts = serve_opts,
};

struct serve_opts {
	struct ql_verbs_channel_config vc;
	struct ql_daemon_config dc;
	struct ql_udp_channel_config uc;
	const char *file, *uri, *dispatch;
	double timeout;
	bool hsb, udp, cpu_set, bad_set, slots_set, unified;
	bool udp_only; /* a udp-only option was given */
	const char *allow[16];
};

/* One transport argument after `--` (CUDA-Q's provider syntax, KEY=VALUE).
 * 0, or 2 after printing why. Unknown keys are CUDA-Q's providers' own
 * (--device=, --local-ip=...): ignored, with a warning. */
static int serve_transport_arg(struct serve_opts *o, const char *a)
{
	const char *v = strchr(a, '=');
	size_t klen = v ? (size_t)(v - a) : strlen(a);
	uint32_t port;

#define KEY(k) (klen == sizeof(k) - 1 && !strncmp(a, k, klen))
	if (KEY("--unified") && !v) {
		o->unified = true;
		o->udp_only = true;
	} else if (!v) {
		fprintf(stderr, "qlink serve: ignoring transport argument '%s'\n", a);
	} else if (KEY("--port")) {
		if (tool_u32(v + 1, 0, 65535, &port))
			return tool_bad("serve", "--port", v + 1);
		o->uc.port = (uint16_t)port;
		o->udp_only = true;
	} else if (KEY("--num-slots") || KEY("--slots")) {
		if (tool_u32(v + 1, 1, 65536, &o->vc.num_slots))
			return tool_bad("serve", "--num-slots", v + 1);
		o->slots_set = true;
	} else if (KEY("--slot-size")) {
		if (tool_u32(v + 1, 24, 65507, &o->vc.slot_size))
			return tool_bad("serve", "--slot-size", v + 1);
	} else if (KEY("--address")) {
		o->uc.address = v + 1;
		o->udp_only = true;
	} else {
		fprintf(stderr, "qlink serve: ignoring transport argument '%s'\n", a);
	}
#undef KEY
	return 0;
}

/* 0 to go on, -1 after --help, or the exit status. */
static int serve_parse(int argc, char **argv, struct serve_opts *o)
{
	uint32_t port;
	int c, dd, after = 0;

	*o = (struct serve_opts){ .vc = { .num_slots = 64, .slot_size = 256 },
				  .dc = { .cpu = 1 },
				  .uri = "soft+shm://qlserve",
				  .dispatch = "ring",
				  .timeout = 60 };
	/* what follows `--` is the transport's: left at the end by getopt */
	for (dd = 1; dd < argc && strcmp(argv[dd], "--"); dd++)
		;
	if (dd < argc)
		after = argc - dd - 1;
	optind = 0;
	while ((c = tool_getopt(&serve_cmd, argc, argv)) != TOOL_END) {
		switch (c) {
		case 'f':
			o->file = optarg;
			break;
		case 'u':
			if (tool_device_uri(optarg))
				return tool_bad("serve", "--device", optarg);
			o->uri = optarg;
			break;
		case 'T':
			o->udp = !strcmp(optarg, "udp");
			if (!o->udp && tool_transport(optarg, &o->hsb))
				return tool_bad("serve", "--transport", optarg);
			break;
		case 'c':
			if (tool_int(optarg, -1, 4095, &o->dc.cpu))
				return tool_bad("serve", "--cpu", optarg);
			o->cpu_set = true;
			break;
		case 'b':
			if (strcmp(optarg, "drop") && strcmp(optarg, "answer"))
				return tool_bad("serve", "--bad-requests", optarg);
			o->dc.bad_requests = !strcmp(optarg, "drop") ? QL_BAD_REQUEST_DROP :
								       QL_BAD_REQUEST_ANSWER;
			o->bad_set = true;
			break;
		case 'd':
			if (strcmp(optarg, "ring") && strcmp(optarg, "unified"))
				return tool_bad("serve", "--dispatch", optarg);
			o->dispatch = optarg;
			o->udp_only = true;
			break;
		case 'n':
			if (tool_u32(optarg, 1, 65536, &o->vc.num_slots))
				return tool_bad("serve", "--slots", optarg);
			o->slots_set = true;
			break;
		case 'z':
			if (tool_u32(optarg, 24, 65507, &o->vc.slot_size))
				return tool_bad("serve", "--slot-size", optarg);
			break;
		case 'p':
			if (tool_u32(optarg, 0, 65535, &port))
				return tool_bad("serve", "--port", optarg);
			o->uc.port = (uint16_t)port;
			o->udp_only = true;
			break;
		case 'a':
			o->uc.address = optarg;
			o->udp_only = true;
			break;
		case 'A':
			if (o->uc.allow_count == sizeof(o->allow) / sizeof(o->allow[0]))
				return tool_bad("serve", "--allow (more than 16)", optarg);
			o->allow[o->uc.allow_count++] = optarg;
			o->uc.allow = o->allow;
			o->udp_only = true;
			break;
		case 'U':
			o->unified = true;
			o->udp_only = true;
			break;
		case 'Q':
			if (tool_qp(optarg, &o->vc.qp_type))
				return tool_bad("serve", "--qp", optarg);
			break;
		case 't':
			if (tool_time(optarg, 0.01, 86400, &o->timeout))
				return tool_bad("serve", "--timeout", optarg);
			break;
		default:
			return 2;
		}
	}
	if (argc - optind > after)
		return tool_usage("serve", "unexpected argument '%s'", argv[optind]);
	for (int i = argc - after; i < argc; i++) {
		int r = serve_transport_arg(o, argv[i]);

		if (r)
			return r;
	}
	if (o->udp) {
		if (o->file) {
			return tool_usage("serve", "--transport udp needs no --params-file");
		}
		if (!o->slots_set)
			o->vc.num_slots = QL_UDP_DEFAULT_SLOTS;
		if (!o->cpu_set)
			o->dc.cpu = -1;
		if (!o->bad_set)
			o->dc.bad_requests = QL_BAD_REQUEST_DROP;
		if (o->unified && strcmp(o->dispatch, "unified"))
			fprintf(stderr,
				"qlink serve: --unified without --dispatch=unified: "
				"serving as dispatch=%s\n",
				o->dispatch);
		return 0;
	}
	if (o->udp_only) {
		return tool_usage("serve", "--port, --address, --dispatch and --unified are "
					   "for --transport udp");
	}
	if (!o->file) {
		return tool_usage("serve", "--params-file FILE is required");
	}
	if (o->vc.slot_size < 64) {
		return tool_usage("serve", "--slot-size must be at least 64 for ring and hsb");
	}
	if (o->hsb && !o->bad_set)
		o->dc.bad_requests = QL_BAD_REQUEST_DROP;
	return 0;
}

/* The counters line every transport prints when it stops. */
static void serve_counters(const struct ql_daemon_stats *st)
{
	printf("requests=%" PRIu64 " responses=%" PRIu64 " ok=%" PRIu64 " handler_errors=%" PRIu64
	       " protocol_errors=%" PRIu64 " dropped=%" PRIu64 " channel_error=%d\n",
	       st->requests, st->responses, st->ok, st->handler_error,
	       st->requests - st->ok - st->handler_error, st->dropped, st->channel_error);
}

/* Requests that reached a handler (CUDA-Q's processed count): every one
 * taken but those refused before it, answered (ANSWER) or not (DROP). */
static uint64_t serve_processed(const struct ql_daemon_stats *st)
{
	return st->requests - st->err_short - st->err_bad_magic - st->err_bad_length -
	       st->err_unknown_function - st->err_args;
}

/* ring and hsb: meet the client through the rendezvous files. */
static int serve_rdv(struct serve_opts *o)
{
	struct tool_server srv = { 0 };
	struct ql_rdv rdv = { 0 };
	struct ql_conn_params cp;
	struct ql_daemon_stats st;
	int ret;

	if (ql__rdv_init(&rdv, o->file)) {
		fprintf(stderr, "qlink serve: --params-file: %s\n", ql_error_detail());
		return 2;
	}
	ret = ql__rdv_check_dir(o->file);
	if (!ret && o->hsb) {
		struct ql_hsb_channel_config hc = { .num_pages = o->vc.num_slots,
						    .page_size = o->vc.slot_size };

		ret = tool_server_open_hsb(&srv, o->uri, &hc, &o->dc);
		if (!ret)
			ret = ql__rdv_offer_hsb(&rdv, &srv.hsb_params);
	} else if (!ret) {
		ret = tool_server_open(&srv, o->uri, &o->vc, &o->dc);
		if (!ret)
			ret = ql__rdv_offer(&rdv, &srv.params);
	}
	if (ret) {
		tool_fail("serve", "setup", ret);
		goto out;
	}
	ret = ql__rdv_wait_client(&rdv, o->timeout, rdv_idle, NULL, &cp);
	if (!ret)
		ret = o->hsb ? ql_hsb_channel_connect(srv.ch, &cp, NULL) :
			       ql_verbs_channel_connect(srv.ch, &cp, NULL);
	if (!ret)
		ret = ql_daemon_start(srv.d);
	if (!ret)
		ret = ql__rdv_ready(&rdv);
	if (ret) {
		tool_fail("serve", "connecting the client", ret);
		goto out;
	}
	fprintf(stderr,
		"qlink serve: serving qlink_parity and rpc_increment on %s over %s (SIGINT or "
		"SIGTERM to stop)\n",
		o->uri, o->hsb ? "hsb" : "the ring");
	while (!stop_requested)
		sleep_ms(50);
	ql_daemon_stop(srv.d);
	ql_daemon_stats(srv.d, &st);
	serve_counters(&st);
out:
	ql__rdv_cleanup(&rdv);
	tool_server_close(&srv);
	return ret ? 1 : 0;
}

/* udp: CUDA-Q Realtime's test server (cudaq_realtime_test_server): READY
 * once the socket is bound and the dispatcher polls, PROCESSED on the way
 * out. The dispatch shape is only echoed: requests are served in arrival
 * order and each reply sent as soon as it is built, so neither shape
 * stalls after a dropped request (CUDA-Q's ring shape does). */
static int serve_udp(struct serve_opts *o)
{
	struct tool_server srv = { 0 };
	struct ql_udp_channel_stats us;
	struct ql_daemon_stats st;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char host[INET6_ADDRSTRLEN] = "?";
	uint64_t deadline;
	uint16_t port = 0;
	bool warned = false;
	int ret;

	o->uc.num_slots = o->vc.num_slots;
	o->uc.slot_size = o->vc.slot_size;
	ret = tool_server_open_udp(&srv, &o->uc, &o->dc);
	if (!ret)
		ret = ql_udp_channel_local_addr(srv.ch, &ss, &sl);
	if (!ret)
		ret = ql_daemon_start(srv.d);
	if (ret) {
		tool_fail("serve", "setup", ret);
		tool_server_close(&srv);
		return 1;
	}
	if (ss.ss_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const void *)&ss;

		port = ntohs(s6->sin6_port);
		inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof(host));
	} else {
		const struct sockaddr_in *s4 = (const void *)&ss;

		port = ntohs(s4->sin_port);
		inet_ntop(AF_INET, &s4->sin_addr, host, sizeof(host));
	}
	/* CUDA-Q's keys in CUDA-Q's order: harnesses parse them */
	printf("CUDAQ_REALTIME_SERVER_READY transport=udp port=%u dispatch=%s slots=%u "
	       "slot_size=%u\n",
	       port, o->dispatch, o->uc.num_slots, o->uc.slot_size);
	fflush(stdout);
	fprintf(stderr,
		"qlink serve: serving rpc_increment and qlink_parity over udp on %s port %u "
		"(SIGINT or SIGTERM to stop)\n",
		host, port);
	deadline = ql_clock_ns() + (uint64_t)(o->timeout * 1e9);
	while (!stop_requested) {
		if (ql_clock_ns() >= deadline) {
			fprintf(stderr, "timeout reached (%gs)\n", o->timeout);
			break;
		}
		/* CUDA-Q's one warning, printed here, off the hot path */
		if (!warned && !ql_udp_channel_stats(srv.ch, &us) && us.oversize) {
			fprintf(stderr,
				"qlink serve: dropping %u-byte datagram longer than the %u-byte slot "
				"stride (client and server must use the same --slot-size); further "
				"ones are dropped silently\n",
				us.last_oversize, o->uc.slot_size);
			warned = true;
		}
		ql_daemon_stats(srv.d, &st);
		if (st.channel_error || st.failed || !st.running) {
			fprintf(stderr, "qlink serve: the daemon stopped: %s\n",
				ql_strerror(st.channel_error ? st.channel_error :
					    st.failed	     ? st.failed :
							       -EIO));
			ret = 1;
			break;
		}
		sleep_ms(20);
	}
	ql_daemon_stop(srv.d);
	ql_daemon_stats(srv.d, &st);
	serve_counters(&st);
	if (!ql_udp_channel_stats(srv.ch, &us))
		printf("datagrams=%" PRIu64 " oversize=%" PRIu64 " undersize=%" PRIu64
		       " send_errors=%" PRIu64 " kernel_drops=%" PRIu64 "\n",
		       us.datagrams, us.oversize, us.undersize, us.send_errors, us.kernel_drops);
	printf("CUDAQ_REALTIME_SERVER_PROCESSED count=%" PRIu64 "\n", serve_processed(&st));
	fflush(stdout);
	tool_server_close(&srv);
	return ret ? 1 : 0;
}

int tool_serve(int argc, char **argv)
{
	struct serve_opts o;
	int ret = serve_parse(argc, argv, &o);

	if (ret)
		return ret < 0 ? 0 : ret;
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	return o.udp ? serve_udp(&o) : serve_rdv(&o);
}

/* ---- vppu ------------------------------------------------------------------- */

static const struct tool_opt vppu_opts[] = {
	{ "connect", 0, 'C', TOOL_VALUE, "HOST:PORT",
	  "qlinkd's control address (default port 7700); with\n"
	  "--transport udp the server's data address\n"
	  "([IPV6]:PORT for IPv6)" },
	{ "program", 0, 'P', TOOL_VALUE, "FILE", "the calls to make (with --connect)" },
	{ "qcs-device", 0, 'D', TOOL_FLAG, NULL,
	  "be a QCSDevice: wait for the RTH's program and\n"
	  "trigger (with --connect)" },
	{ "secret-file", 0, 'S', TOOL_VALUE, "FILE",
	  "shared secret for authenticated control messages" },
	{ "name", 0, 'N', TOOL_VALUE, "NAME", "this QCS's name in DISCOVER (default vppu)" },
	{ "params-file", 0, 'f', TOOL_VALUE, "FILE",
	  "a qlink serve's rendezvous file instead of --connect" },
	{ "device", 'd', 'u', TOOL_VALUE, "URI", "device (default soft+shm://qlvppu)" },
	{ "transport", 0, 'X', TOOL_VALUE, "T",
	  "ring (default) or hsb: play an FPGA with the Hololink\n"
	  "IP (WRITE WITH IMMEDIATE into the server's pages;\n"
	  "not with --qcs-device); must match what the server\n"
	  "offers; or udp: CUDA-Q Realtime's UDP transport (one\n"
	  "datagram of --slot-size bytes per request, zero-filled)" },
	{ "function", 0, 'F', TOOL_VALUE, "NAME|ID",
	  "the function called without --program: a name (its\n"
	  "id is FNV-1a of it) or a numeric id (0x... or decimal).\n"
	  "Default qlink_parity; rpc_increment is CUDA-Q's test\n"
	  "function, the only one a CUDA-Q test server has. Any\n"
	  "other function needs --args" },
	{ "args", 0, 'a', TOOL_VALUE, "HEX",
	  "the argument bytes of every call, in hex (\"01ff...\");\n"
	  "the answer is checked against --expect, or the\n"
	  "built-in function's own answer, or only its status" },
	{ "expect", 0, 'E', TOOL_VALUE, "HEX", "with --args: the result bytes a right answer has" },
	{ "arg-len", 0, 'L', TOOL_VALUE, "N", "rpc_increment's argument bytes (default 16)" },
	{ "slot-size", 0, 'z', TOOL_VALUE, "N",
	  "udp: the slot stride, as the server's (default 256)" },
	{ "cpu", 0, 'c', TOOL_VALUE, "N", "core (default 0; -1: no pinning)" },
	{ "count", 0, 'n', TOOL_VALUE, "N", "calls to make, no program (default: run --seconds)" },
	{ "seconds", 0, 's', TOOL_VALUE, "TIME", "how long to run, no program (default 1)" },
	{ "window", 0, 'w', TOOL_VALUE, "N", "calls in flight, closed loop (default 1)" },
	{ "qp", 0, 'Q', TOOL_VALUE, "rc|uc",
	  "the ring's QP type: must match the server's (default:\n"
	  "the server's, from CONNECTION_PARAMS or the file)" },
	{ "rate", 0, 'r', TOOL_VALUE, "HZ", "paced at HZ instead of closed loop" },
	{ "timeout", 0, 't', TOOL_VALUE, "TIME",
	  "wait for the server, or the trigger (default 60)" },
	{ "call-timeout", 0, 'T', TOOL_VALUE, "TIME",
	  "a call unanswered after TIME ends the run, reported\n"
	  "as timed out, exit 1 (default 5)" },
	{ "histogram", 'H', 'h' + 256, TOOL_FLAG, NULL,
	  "after each report, the round trips as a histogram:\n"
	  "usec count cumulative% (as ib_write_lat -H)" },
	{ "plot", 0, 'p', TOOL_VALUE, "DIR",
	  "draw the round trips with gnuplot into DIR:\n"
	  "vppu_latency.{dat,gp,png,svg}" },
	{ "json", 0, 'j', TOOL_FLAG, NULL, "JSON report (one object per program step)" },
	{ "hsb-listen", 0, 'B', TOOL_VALUE, "[ADDR:]PORT",
	  "be a Hololink board's register side (alone:\n"
	  "wait until the host enables the VP, print its\n"
	  "data-plane parameters, exit; bare PORT: 0.0.0.0);\n"
	  "with --count/--seconds the whole FPGA: print its QP\n"
	  "and GID (for qlinkd's qcs qp/gid), then stream the\n"
	  "calls by WRITE WITH IMMEDIATE once enabled" },
	{ "hsb-vp", 0, 'V', TOOL_VALUE, "N", "the VP the host configures (default 0)" },
	{ "allow", 0, 'A', TOOL_VALUE, "A[/LEN]",
	  "with --hsb-listen: answer only these hosts (up to 8;\n"
	  "default: the first host that talks to the board)" },
	{ 0 },
};

static const struct tool_cmd vppu_cmd = {
	.aliases = uri_alias,
	.name = "vppu",
	.usage =
		"--connect HOST:PORT [--program FILE | --qcs-device] [options]\n"
		"--params-file FILE [options]\n"
		"--transport udp --connect HOST:PORT [options]\n"
		"--hsb-listen [ADDR:]PORT [--hsb-vp N] [--allow ADDR[/LEN]]... [--count N | --seconds TIME]",
	.about =
		"The virtual PPU: a software QCS. With --connect it discovers a qlinkd through\n"
		"the UDP control plane (DISCOVER, ACK, START ... STOP, COMPLETE), connects its QP\n"
		"to the ring it is offered and runs a program of device calls (YAML, see\n"
		"docs/qlinkd.md) or, without --program, calls --function. With --params-file\n"
		"it meets a `qlink serve` through files instead. With --transport udp it is a\n"
		"caller of CUDA-Q Realtime's UDP transport: --connect names the server's socket\n"
		"(qlink serve --transport=udp or CUDA-Q's own server), no control plane.\n"
		"Every answer is checked; it reports round trips (from the echoed\n"
		"ptp_timestamp), rates, wrong answers (the first one with its expected and\n"
		"received bytes), error statuses by name, timeouts and lost calls, and exits 1\n"
		"if anything was wrong, lost or timed out. SIGINT/SIGTERM end the run at once,\n"
		"even with its window full. With --qcs-device the RTH drives it (QCSDevice,\n"
		"include/qlink/qcs.h): after DISCOVER and ACK it waits for the RTH to upload a\n"
		"program (PROGRAM) and TRIGGER it, runs it, and says COMPLETE; an ABORT from\n"
		"the RTH stops it (exit 3). The report's fields are explained in qlink(1).\n",
	.opts = vppu_opts,
};

static void report(const struct ql_vppu_report *rep, const char *name, bool json)
{
	const struct ql_hist *h = &rep->rtt_ns;

	if (json) {
		ql_vppu_report_json(rep, name, stdout);
		putchar('\n');
		return;
	}
	printf("%s: calls %" PRIu64 " answered %" PRIu64 " ok %" PRIu64 " wrong %" PRIu64
	       " handler_errors %" PRIu64 " protocol_errors %" PRIu64 " timeouts %" PRIu64
	       " late %" PRIu64 " lost %" PRIu64 " resent %" PRIu64 " gave_up %" PRIu64 "\n",
	       name, rep->sent, rep->received, rep->ok, rep->wrong, rep->handler_errors,
	       rep->protocol_errors, rep->timeouts, rep->late, rep->lost, rep->resent,
	       rep->gave_up);
	printf("%s: round trip us: p50 %.3f p90 %.3f p99 %.3f p99.9 %.3f max %.3f; %.0f RPC/s\n",
	       name, ql_hist_percentile(h, 50) / 1e3, ql_hist_percentile(h, 90) / 1e3,
	       ql_hist_percentile(h, 99) / 1e3, ql_hist_percentile(h, 99.9) / 1e3,
	       (ql_hist_count(h) ? ql_hist_max(h) : 0) / 1e3, rep->rpc_per_s);
}

static bool report_bad(const struct ql_vppu_report *rep)
{
	return rep->lost || rep->wrong || rep->protocol_errors || rep->handler_errors ||
	       rep->unexpected || rep->transport_error;
}

static void keepalive(void *ctx)
{
	ql_ctl_client_keepalive(ctx);
}

/* ---- vppu --device: the RTH drives this QCS ---------------------------------- */

#define DEVICE_EXIT_ABORTED 3

struct device {
	struct ql_ctl_client *ctl;
	struct ql_program *prog; /* the program uploaded last */
	bool triggered;
	bool aborted;
};

/* The program loader reads files: give it the uploaded bytes as one. */
static int device_program(void *ctx, const void *bytes, size_t len)
{
	struct device *d = ctx;
	char path[] = "/tmp/qlink-vppu-program-XXXXXX";
	struct ql_program *p = NULL;
	struct ql_diags diags;
	int fd, ret;

	fd = mkstemp(path);
	if (fd < 0)
		return ql_error_set(-errno, "cannot write the program to a temporary file: %s",
				    strerror(errno));
	ret = ql__write_all(fd, bytes, len);
	close(fd);
	if (!ret) {
		memset(&diags, 0, sizeof(diags));
		ret = ql_program_load(path, &p, &diags);
		if (ret && diags.count)
			ql_error_set(ret, "line %u: %s", diags.d[0].line, diags.d[0].msg);
		else if (ret)
			ql_error_set(ret, "the program does not load");
	} else {
		ql_error_set(ret, "cannot write the program to %s", path);
	}
	unlink(path);
	if (ret)
		return ret;
	ql_program_free(d->prog);
	d->prog = p;
	fprintf(stderr, "qlink vppu: program of %zu bytes, %u step(s) uploaded\n", len, p->ncalls);
	return 0;
}

static int device_trigger(void *ctx)
{
	((struct device *)ctx)->triggered = true;
	return 0;
}

static void device_abort(void *ctx, const char *reason)
{
	((struct device *)ctx)->aborted = true;
	fprintf(stderr, "qlink vppu: aborted: %s\n", reason);
}

static const struct ql_ctl_client_ops device_ops = {
	.program = device_program,
	.trigger = device_trigger,
	.abort = device_abort,
};

static void device_tick(void *ctx)
{
	struct device *d = ctx;

	if (!d->aborted)
		ql_ctl_client_serve(d->ctl, 0, &device_ops, d);
}

/* ql_vppu_run cannot be stopped midway, so a step runs in slices (about
 * 0.1 s paced, 4096 calls closed loop) and ABORT takes effect between them.
 * Call n of a slice is call base + n of the step, so generated arguments and
 * checks are those of one uninterrupted run. */
struct slice {
	const struct ql_vppu_call *step;
	uint64_t base;
};

static void slice_args(void *ctx, uint64_t n, uint8_t *args)
{
	struct slice *s = ctx;

	s->step->make_args(s->step->ctx, s->base + n, args);
}

static int slice_check(void *ctx, uint64_t n, int32_t status, const uint8_t *results,
		       uint32_t result_len)
{
	struct slice *s = ctx;

	return s->step->check(s->step->ctx, s->base + n, status, results, result_len);
}

static void report_add(struct ql_vppu_report *sum, const struct ql_vppu_report *r)
{
	sum->sent += r->sent;
	sum->received += r->received;
	sum->ok += r->ok;
	sum->wrong += r->wrong;
	sum->handler_errors += r->handler_errors;
	sum->protocol_errors += r->protocol_errors;
	sum->unexpected += r->unexpected;
	sum->timeouts += r->timeouts;
	sum->late += r->late;
	sum->lost += r->lost;
	sum->elapsed_s += r->elapsed_s;
	sum->rpc_per_s = sum->elapsed_s > 0 ? (double)sum->received / sum->elapsed_s : 0;
	ql_hist_merge(&sum->rtt_ns, &r->rtt_ns);
	if (!sum->transport_error)
		sum->transport_error = r->transport_error;
}

static int device_step(struct device *d, const struct ql_vppu_client *cl, uint32_t i,
		       struct ql_vppu_report *sum)
{
	struct ql_vppu_call step, call;
	struct ql_vppu_config pc, sc;
	struct ql_vppu_report rep;
	struct slice sl = { .step = &step };
	uint64_t chunk;
	int ret;

	ret = ql_program_vppu_call(d->prog, i, &step, &pc);
	if (ret)
		return ret;
	memset(sum, 0, sizeof(*sum));
	ql_hist_init(&sum->rtt_ns);
	call = step;
	call.make_args = step.make_args ? slice_args : NULL;
	call.check = step.check ? slice_check : NULL;
	call.ctx = &sl;
	chunk = pc.rate_hz > 0 ? (uint64_t)(pc.rate_hz / 10) : 4096;
	chunk = chunk ? chunk : 1;
	while (sl.base < pc.count && !d->aborted && !stop_requested) {
		sc = pc;
		sc.count = pc.count - sl.base < chunk ? pc.count - sl.base : chunk;
		sc.tick = device_tick;
		sc.tick_ctx = d;
		sc.stop = &stop_requested;
		sc.tick_ns = 50000000ull;
		ret = ql_vppu_run_client(cl, &call, &sc, &rep);
		if (ret)
			return ret;
		report_add(sum, &rep);
		if (rep.transport_error)
			break;
		sl.base += sc.count;
		ql_ctl_client_serve(d->ctl, 0, &device_ops, d);
	}
	return 0;
}

/* Wait for PROGRAM and TRIGGER, run the program, say COMPLETE; an ABORT
 * from the RTH ends it early. Returns the exit status. */
static int device_run(struct ql_ctl_client *ctl, const struct ql_vppu_client *cl, double timeout,
		      bool json)
{
	struct device d = { .ctl = ctl };
	struct ql_vppu_report rep;
	uint64_t deadline = ql_clock_ns() + (uint64_t)(timeout * 1e9);
	bool bad = false;
	int ret = 0;

	fprintf(stderr, "qlink vppu: connected; waiting for the RTH's program and trigger\n");
	while (!d.triggered && !d.aborted && !stop_requested) {
		if (ql_clock_ns() > deadline) {
			ret = ql_error_set(-ETIMEDOUT, "no TRIGGER from the RTH within %.1f s",
					   timeout);
			break;
		}
		ret = ql_ctl_client_serve(ctl, 100, &device_ops, &d);
		if (ret == -ECONNRESET)
			ret = 0; /* aborted: device_abort said so */
		if (ret < 0)
			break;
		ret = 0;
	}
	if (ret) {
		tool_fail("vppu", "waiting for the RTH", ret);
		goto out;
	}
	for (uint32_t i = 0; d.triggered && i < d.prog->ncalls && !d.aborted && !stop_requested;
	     i++) {
		char step[160];

		ret = device_step(&d, cl, i, &rep);
		if (ret) {
			tool_fail("vppu", "run", ret);
			goto out;
		}
		snprintf(step, sizeof(step), "step %u %s", i + 1, d.prog->calls[i].function);
		report(&rep, step, json);
		bad |= report_bad(&rep);
		if (rep.transport_error) {
			tool_fail("vppu", "transport", rep.transport_error);
			break;
		}
	}
	if (d.aborted) {
		ql_program_free(d.prog);
		return DEVICE_EXIT_ABORTED;
	}
	if (stop_requested) {
		ql_ctl_client_abort(ctl);
		ret = -EINTR;
		goto out;
	}
	ret = ql_ctl_client_complete(ctl);
	if (ret)
		tool_fail("vppu", "sending COMPLETE", ret);
out:
	ql_program_free(d.prog);
	return ret || bad ? 1 : 0;
}

/* ---- vppu: options, connection, run, end ---------------------------------- */

struct vppu_opts {
	struct ql_vppu_config cfg;
	const char *file, *uri, *connect, *program, *secret_file, *name;
	const char *hsb_listen; /* [ADDR:]PORT of the hsb register server */
	/* --allow: the hosts the board answers (none: the first, TOFU) */
	uint32_t hsb_allow[QL_HL_ALLOW_MAX], hsb_allow_len[QL_HL_ALLOW_MAX], n_hsb_allow;
	const char *function; /* without --program: a name or an id */
	uint8_t args[QL_UDP_MAX_SLOT_SIZE], expect[QL_UDP_MAX_SLOT_SIZE]; /* --args, --expect */
	size_t args_len, expect_len;
	bool have_args, have_expect;
	bool histogram;	  /* --histogram */
	const char *plot; /* --plot DIR */
	uint32_t hsb_vp;
	uint32_t arg_len;   /* rpc_increment's argument bytes */
	uint32_t slot_size; /* udp: the stride */
	bool udp;	    /* --transport udp: --connect is a CUDA-Q UDP server */
	char udp_host[256]; /* udp: --connect's address and port */
	uint16_t udp_port;
	double seconds, timeout, call_timeout;
	bool json, device, hsb;
	bool run; /* --count or --seconds given: with --hsb-listen, stream */
	int cpu;
	enum ibv_qp_type qp; /* 0: the server's */
};

/* --connect HOST:PORT or [IPV6]:PORT (udp: no default port); 0 or -1. */
static int vppu_udp_addr(struct vppu_opts *o)
{
	return tool_hostport_split(o->connect, 0, o->udp_host, sizeof(o->udp_host), &o->udp_port) ?
		       -1 :
		       0;
}

/* 0 to go on, or the exit status (0 for --help). */
static int vppu_parse(int argc, char **argv, struct vppu_opts *o)
{
	int c;

	*o = (struct vppu_opts){ .cfg = { .window = 1 },
				 .uri = "soft+shm://qlvppu",
				 .name = "vppu",
				 .function = QL_DEMO_PARITY_NAME,
				 .arg_len = 16,
				 .slot_size = QL_UDP_DEFAULT_SLOT_SIZE,
				 .seconds = 1,
				 .timeout = 60,
				 .call_timeout = 5 };
	optind = 0;
	while ((c = tool_getopt(&vppu_cmd, argc, argv)) != TOOL_END) {
		switch (c) {
		case 'f':
			o->file = optarg;
			break;
		case 'C':
			o->connect = optarg;
			break;
		case 'P':
			o->program = optarg;
			break;
		case 'D':
			o->device = true;
			break;
		case 'S':
			o->secret_file = optarg;
			break;
		case 'N':
			o->name = optarg;
			break;
		case 'u':
			if (tool_device_uri(optarg))
				return tool_bad("vppu", "--device", optarg);
			o->uri = optarg;
			break;
		case 'X':
			o->udp = !strcmp(optarg, "udp");
			if (!o->udp && tool_transport(optarg, &o->hsb))
				return tool_bad("vppu", "--transport", optarg);
			break;
		case 'F':
			if (!*optarg || strlen(optarg) > 127)
				return tool_bad("vppu", "--function", optarg);
			o->function = optarg;
			break;
		case 'a':
			if (tool_hex(optarg, o->args, sizeof(o->args), &o->args_len))
				return tool_bad("vppu", "--args", optarg);
			o->have_args = true;
			break;
		case 'E':
			if (tool_hex(optarg, o->expect, sizeof(o->expect), &o->expect_len))
				return tool_bad("vppu", "--expect", optarg);
			o->have_expect = true;
			break;
		case 'h' + 256:
			o->histogram = true;
			break;
		case 'p':
			o->plot = optarg;
			break;
		case 'L':
			if (tool_u32(optarg, 0, QL_UDP_MAX_SLOT_SIZE - QL_RPC_HEADER_SIZE,
				     &o->arg_len))
				return tool_bad("vppu", "--arg-len", optarg);
			break;
		case 'z':
			if (tool_u32(optarg, QL_UDP_MIN_SLOT_SIZE, QL_UDP_MAX_SLOT_SIZE,
				     &o->slot_size))
				return tool_bad("vppu", "--slot-size", optarg);
			break;
		case 'c':
			if (tool_int(optarg, -1, 4095, &o->cpu))
				return tool_bad("vppu", "--cpu", optarg);
			break;
		case 'n':
			if (tool_u64(optarg, 1, UINT64_MAX, &o->cfg.count))
				return tool_bad("vppu", "--count", optarg);
			o->run = true;
			break;
		case 's':
			if (tool_time(optarg, 0.001, 86400, &o->seconds))
				return tool_bad("vppu", "--seconds", optarg);
			o->run = true;
			break;
		case 'w':
			if (tool_u32(optarg, 1, 65536, &o->cfg.window))
				return tool_bad("vppu", "--window", optarg);
			break;
		case 'r':
			if (tool_double(optarg, 1, 1e9, &o->cfg.rate_hz))
				return tool_bad("vppu", "--rate", optarg);
			break;
		case 't':
			if (tool_time(optarg, 0.01, 86400, &o->timeout))
				return tool_bad("vppu", "--timeout", optarg);
			break;
		case 'Q':
			if (tool_qp(optarg, &o->qp))
				return tool_bad("vppu", "--qp", optarg);
			break;
		case 'T':
			if (tool_time(optarg, 0.001, 86400, &o->call_timeout))
				return tool_bad("vppu", "--call-timeout", optarg);
			break;
		case 'j':
			o->json = true;
			break;
		case 'B':
			if (tool_listen_port(optarg))
				return tool_bad("vppu", "--hsb-listen", optarg);
			o->hsb_listen = optarg;
			break;
		case 'V':
			if (tool_u32(optarg, 0, QL_HSB_MAX_VPS - 1, &o->hsb_vp))
				return tool_bad("vppu", "--hsb-vp", optarg);
			break;
		case 'A':
			if (o->n_hsb_allow == QL_HL_ALLOW_MAX ||
			    ql_hl_allow_parse(optarg, &o->hsb_allow[o->n_hsb_allow],
					      &o->hsb_allow_len[o->n_hsb_allow]))
				return tool_bad("vppu", "--allow", optarg);
			o->n_hsb_allow++;
			break;
		default:
			return 2;
		}
	}
	if (o->connect && !o->udp && tool_hostport(o->connect, QL_CTL_DEFAULT_PORT))
		return tool_bad("vppu", "--connect", o->connect);
	if (o->have_expect && !o->have_args)
		return tool_usage("vppu", "--expect checks the answers to --args");
	if (!o->have_args && strcmp(o->function, QL_DEMO_PARITY_NAME) &&
	    strcmp(o->function, QL_DEMO_INCREMENT_NAME))
		return tool_usage("vppu", "--function %s: give its arguments with --args HEX",
				  o->function);
	if (!o->cfg.count)
		o->cfg.duration_ns = (uint64_t)(o->seconds * 1e9);
	o->cfg.timeout_ns = (uint64_t)(o->call_timeout * 1e9);
	o->cfg.stop = &stop_requested;
	if (o->n_hsb_allow && !o->hsb_listen) {
		return tool_usage("vppu", "--allow is the board's (with --hsb-listen)");
	}
	/* --hsb-listen: the hsb personality (the board; no server to find) */
	if (o->hsb_listen && !o->file && !o->connect && !o->program && !o->device && optind == argc)
		return 0;
	if (o->hsb_listen) {
		return tool_usage("vppu", "--hsb-listen is the board: no --connect, "
					  "--params-file, --program or --qcs-device");
	}
	if (optind < argc || !!o->file == !!o->connect || (o->program && !o->connect) ||
	    (o->device && (!o->connect || o->program))) {
		return tool_usage("vppu", "%s",
				  optind < argc ?
					  "unexpected argument" :
				  o->program && !o->connect ?
					  "--program needs --connect" :
				  o->device && !o->connect ?
					  "--qcs-device needs --connect" :
				  o->device && o->program ?
					  "--qcs-device gets its program from the RTH" :
					  "give one of --connect HOST:PORT or --params-file FILE");
	}
	if (o->udp && (o->file || o->program || o->device)) {
		return tool_usage("vppu", "--transport udp: --connect is the server's UDP "
					  "address; no --params-file, --program or --qcs-device");
	}
	if (o->udp && vppu_udp_addr(o)) {
		return tool_usage("vppu", "--connect %s: want HOST:PORT or [IPV6]:PORT",
				  o->connect);
	}
	if (o->hsb && o->device) {
		return tool_usage("vppu", "--transport hsb does not work with --qcs-device");
	}
	return 0;
}

/* What a running vppu holds; vppu_close frees it. */
struct vppu {
	const struct vppu_opts *o;
	struct ql_device *dev;
	struct ql_client *cl;	 /* ring, hsb or udp */
	struct ql_hsb_params hp; /* the hsb server's (--transport hsb) */
	struct ql_vppu_client vc;
	struct ql_ctl_client *ctl;
	struct ql_program *prog;
	struct ql_rdv rdv;
	struct ql_hl_server *hs; /* --hsb-listen: the board's registers */
};

/* The server's parameters: from qlinkd's control plane or the file. */
static int vppu_discover(struct vppu *v, struct ql_conn_params *sp)
{
	const struct vppu_opts *o = v->o;
	int ret;

	if (o->connect) {
		struct ql_ctl_client_config cc = { .name = o->name };
		uint8_t secret[256];
		size_t secret_len = 0;
		char hp[300];

		/* a bare host means the default control port */
		snprintf(hp, sizeof(hp), strchr(o->connect, ':') ? "%s" : "%s:7700", o->connect);
		ret = o->secret_file ? tool_read_secret(o->secret_file, secret, sizeof(secret),
							&secret_len) :
				       0;
		if (!ret)
			ret = ql_ctl_client_create(hp, secret_len ? secret : NULL, secret_len, &cc,
						   &v->ctl);
		if (!ret)
			ret = ql_ctl_client_discover(v->ctl, 1, sp);
		/* the RTH says which transport it offers (resp_size: hsb) */
		if (!ret && !!sp->resp_size != o->hsb)
			ret = ql_error_set(-EPROTO,
					   "the RTH offers the %s transport: use "
					   "--transport %s",
					   sp->resp_size ? "hsb" : "ring",
					   sp->resp_size ? "hsb" : "ring");
		if (!ret && o->hsb)
			ret = ql_hsb_params_from_conn(sp, &v->hp);
		if (ret)
			tool_fail("vppu", "discovering the RTH", ret);
		return ret;
	}
	ret = ql__rdv_init(&v->rdv, o->file);
	if (!ret && o->hsb)
		ret = ql__rdv_wait_server_hsb(&v->rdv, o->timeout, rdv_idle, NULL, &v->hp);
	else if (!ret)
		ret = ql__rdv_wait_server(&v->rdv, o->timeout, rdv_idle, NULL, sp);
	if (ret)
		tool_fail("vppu", "reading the server's parameters", ret);
	return ret;
}

/* Open the device, connect the ring client, and tell the server. */
static int vppu_connect(struct vppu *v, const struct ql_conn_params *sp)
{
	const struct vppu_opts *o = v->o;
	struct ql_client_config cc = { .transport = QL_CLIENT_RING, .server = sp };
	struct ql_conn_params cp, hsb;
	int ret;

	ret = tool_qp_check("vppu", o->qp, sp);
	if (ret)
		return ret;
	ret = ql_device_open(o->uri, &v->dev);
	cc.dev = v->dev;
	if (o->hsb) {
		cc.transport = QL_CLIENT_HSB;
		cc.hsb.recv_size = v->hp.resp_size;
		ql_hsb_params_to_conn(&v->hp, &hsb);
		sp = &hsb;
	}
	if (!ret)
		ret = ql_client_open(&cc, sp, NULL, &v->cl, &cp);
	if (!ret)
		ql_vppu_client_of(&v->vc, v->cl);
	if (!ret && v->ctl) {
		ret = ql_ctl_client_ack(v->ctl, &cp, 1);
		if (!ret && !o->device)
			ret = ql_ctl_client_start(v->ctl);
	} else if (!ret) {
		ret = ql__rdv_join(&v->rdv, &cp, o->timeout, rdv_idle, NULL);
	}
	if (ret)
		tool_fail("vppu", "connecting to the server", ret);
	return ret;
}

/* --transport udp: no control plane, no files; --connect is the server's
 * socket, as a CUDA-Q caller knows it. */
static int vppu_connect_udp(struct vppu *v)
{
	const struct vppu_opts *o = v->o;
	struct ql_client_config cc = { .transport = QL_CLIENT_UDP,
				       .udp = { .host = o->udp_host,
						.port = o->udp_port,
						.slot_size = o->slot_size,
						.window = o->cfg.window } };
	int ret = ql_client_open(&cc, NULL, NULL, &v->cl, NULL);

	if (ret) {
		tool_fail("vppu", "connecting to the server", ret);
		return ret;
	}
	ql_vppu_client_of(&v->vc, v->cl);
	return 0;
}

/* A run ended by a timeout or a signal says so plainly. */
static void report_end(const struct ql_vppu_report *rep, const char *name,
		       const struct vppu_opts *o)
{
	if (rep->timed_out)
		fprintf(stderr,
			"qlink vppu: %s: %" PRIu64 " call(s) unanswered after %.3f s: timed out; "
			"the run ended there\n",
			name, rep->timeouts, o->call_timeout);
	if (rep->stopped)
		fprintf(stderr,
			"qlink vppu: %s: stopped by a signal with %" PRIu64 " call(s) in flight\n",
			name, rep->lost);
	if (rep->transport_error)
		tool_fail("vppu", "transport", rep->transport_error);
}

/* ---- vppu --function, --args, --expect: the call and its answers ---------- */

#define ANSWER_SHOW 256 /* received bytes kept of the first wrong answer */

/* The call made without --program, and the check of its answers: the
 * built-in function's own check, or --expect, or (any other function)
 * status 0. The first wrong answer is kept to be shown beside the
 * expected bytes: --expect's, or what the built-in function answers
 * here to the same arguments. */
struct answer {
	const struct vppu_opts *o;
	struct ql_vppu_call inner; /* the built-in function's call (function NULL: none) */
	uint32_t fid;
	uint64_t seed;
	bool wrong;	      /* one was seen */
	uint64_t wrong_call;  /* which */
	int32_t wrong_status; /* its status */
	uint8_t got[ANSWER_SHOW];
	uint32_t got_len;
	/* --args to a built-in function: its answer here, the same for every call */
	uint8_t want[QL_UDP_MAX_SLOT_SIZE];
	int want_len; /* -1: none */
};

static void answer_args(void *ctx, uint64_t n, uint8_t *args)
{
	struct answer *a = ctx;

	if (a->o->have_args)
		memcpy(args, a->o->args, a->o->args_len);
	else
		a->inner.make_args(a->inner.ctx, n, args);
}

static int answer_check(void *ctx, uint64_t n, int32_t status, const uint8_t *res, uint32_t len)
{
	struct answer *a = ctx;
	const struct vppu_opts *o = a->o;
	int bad;

	if (o->have_expect)
		bad = len != o->expect_len || memcmp(res, o->expect, len);
	else if (a->want_len >= 0)
		bad = len != (uint32_t)a->want_len || memcmp(res, a->want, len);
	else if (a->inner.function && !o->have_args)
		bad = a->inner.check(a->inner.ctx, n, status, res, len);
	else
		bad = 0; /* not built in, or not answered here: any status 0 answer */
	if (bad && !a->wrong) {
		a->wrong = true;
		a->wrong_call = n;
		a->wrong_status = status;
		a->got_len = len;
		memcpy(a->got, res, len < ANSWER_SHOW ? len : ANSWER_SHOW);
	}
	return bad;
}

/* What the built-in function answers here to call n's arguments: its
 * result bytes into out; their length, or -1 when it is not built in. */
static int answer_local(const struct answer *a, uint64_t n, uint8_t *out, size_t cap)
{
	static uint8_t msg[QL_RPC_HEADER_SIZE + QL_UDP_MAX_SLOT_SIZE];
	static uint8_t resp[QL_RPC_RESPONSE_SIZE + QL_UDP_MAX_SLOT_SIZE];
	uint32_t arg_len = a->o->have_args ? (uint32_t)a->o->args_len : a->inner.arg_len;
	struct ql_rpc_header h = { .magic = QL_RPC_MAGIC_REQUEST,
				   .function_id = a->fid,
				   .arg_len = arg_len,
				   .request_id = (uint32_t)n };
	struct ql_rpc_table *t = NULL;
	size_t rlen = 0, got;
	int32_t st;

	if (!a->inner.function || ql_rpc_table_create(4, &t))
		return -1;
	ql_rpc_table_add(t, ql_demo_parity_function());
	ql_rpc_table_add(t, ql_demo_increment_function());
	ql_rpc_header_encode(msg, &h);
	answer_args((void *)a, n, msg + QL_RPC_HEADER_SIZE);
	st = ql_rpc_dispatch(t, msg, QL_RPC_HEADER_SIZE + arg_len, resp, sizeof(resp), &rlen, NULL);
	ql_rpc_table_destroy(t);
	if (st || rlen < QL_RPC_RESPONSE_SIZE)
		return -1;
	got = rlen - QL_RPC_RESPONSE_SIZE;
	memcpy(out, resp + QL_RPC_RESPONSE_SIZE, got < cap ? got : cap);
	return (int)got;
}

/* Set up the call of --function (a name, or an id) with its arguments. */
static void answer_init(struct answer *a, const struct vppu_opts *o, struct ql_vppu_call *call)
{
	uint32_t id = 0;

	memset(a, 0, sizeof(*a));
	a->o = o;
	a->seed = 0x5eed;
	if (isdigit((unsigned char)o->function[0]) && !tool_u32(o->function, 1, UINT32_MAX, &id))
		a->fid = id;
	else
		a->fid = ql_rpc_fnv1a(o->function);
	if (a->fid == ql_rpc_fnv1a(QL_DEMO_INCREMENT_NAME))
		ql_demo_increment_call(&a->inner, o->arg_len);
	else if (a->fid == ql_rpc_fnv1a(QL_DEMO_PARITY_NAME))
		ql_demo_parity_call(&a->inner, &a->seed);
	a->want_len = -1;
	if (o->have_args && !o->have_expect)
		a->want_len = answer_local(a, 0, a->want, sizeof(a->want));
	*call = (struct ql_vppu_call){
		.function = o->function,
		.function_id = id,
		.arg_len = o->have_args ? (uint32_t)o->args_len : a->inner.arg_len,
		.make_args = answer_args,
		.check = answer_check,
		.ctx = a,
	};
}

/* After the run: the first wrong answer, expected beside received. */
static void answer_report(const struct answer *a, const char *name, FILE *f)
{
	uint8_t want[ANSWER_SHOW];
	int wlen;

	if (!a->wrong)
		return;
	fprintf(f, "qlink vppu: %s: call %" PRIu64 " of %s answered wrong (status %d, %s)\n", name,
		a->wrong_call, a->o->function, a->wrong_status, ql_rpc_status_str(a->wrong_status));
	fprintf(f, "  expected: ");
	if (a->o->have_expect) {
		tool_hex_print(f, a->o->expect, a->o->expect_len);
	} else if (a->want_len >= 0) {
		tool_hex_print(f, a->want, (size_t)a->want_len);
	} else {
		wlen = answer_local(a, a->wrong_call, want, sizeof(want));
		if (wlen < 0)
			fprintf(f, "(unknown)");
		else
			tool_hex_print(f, want, (size_t)wlen);
	}
	fprintf(f, "\n  received: ");
	tool_hex_print(f, a->got, a->got_len);
	fprintf(f, "\n");
}

/* Run one call with cfg; report it. 0, 1 (something wrong or lost) or -1
 * (could not run). a: the --function call's answers (NULL: a program
 * step's). */
static int vppu_phase(struct vppu *v, const struct ql_vppu_call *call,
		      const struct ql_vppu_config *cfg, const char *name, struct answer *a)
{
	const struct vppu_opts *o = v->o;
	struct ql_vppu_report rep;
	int ret = ql_vppu_run_client(&v->vc, call, cfg, &rep);

	if (ret) {
		tool_fail("vppu", "run", ret);
		return -1;
	}
	report(&rep, name, o->json);
	report_end(&rep, name, o);
	if (a)
		answer_report(a, name, stderr);
	if (rep.first_error_status)
		fprintf(stderr,
			"qlink vppu: %s: the first error answer (call %" PRIu64
			"): status %d, %s\n",
			name, rep.first_error_call, rep.first_error_status,
			ql_rpc_status_str(rep.first_error_status));
	if (o->histogram && !o->json)
		tool_hist_print(stdout, name, &rep.rtt_ns);
	if (o->plot) {
		const struct ql_hist *h = &rep.rtt_ns;
		char base[200], title[300];

		snprintf(base, sizeof(base), "vppu_latency%s%s", a ? "" : "_",
			 a ? "" : name + strcspn(name, "0123456789"));
		base[strcspn(base, " ")] = '\0';
		snprintf(title, sizeof(title), "qlink vppu: round trip, %s", name);
		ret = tool_plot_latency(o->plot, base, title, 1, &name, &h, o->json);
		if (ret)
			tool_fail("vppu", "plot", ret);
	}
	return report_bad(&rep) || rep.timed_out || rep.stopped || ret ? 1 : 0;
}

static void board_tick(void *ctx)
{
	ql_hl_server_poll(ctx, 0);
}

/* The program's steps in order, or qlink_parity. 0, 1 or -1 as above. */
static int vppu_calls(struct vppu *v)
{
	const struct vppu_opts *o = v->o;
	struct ql_vppu_call call;
	int bad = 0, r;

	if (!v->prog) {
		struct ql_vppu_config cfg = o->cfg;
		struct answer a;

		answer_init(&a, o, &call);
		if (v->hs) {
			/* the board keeps answering its registers (the host
			 * reads the enable bit back after setting it) */
			cfg.tick = board_tick;
			cfg.tick_ctx = v->hs;
			cfg.tick_ns = 10000000ull;
		} else if (v->ctl) {
			cfg.tick = keepalive;
			cfg.tick_ctx = v->ctl;
			cfg.tick_ns = 500000000ull;
		}
		return vppu_phase(v, &call, &cfg, cfg.rate_hz > 0 ? "paced" : "closed", &a);
	}
	for (uint32_t i = 0; i < v->prog->ncalls && !stop_requested; i++) {
		struct ql_vppu_config pc;
		char step[160];

		r = ql_program_vppu_call(v->prog, i, &call, &pc);
		if (r) {
			tool_fail("vppu", "program", r);
			return -1;
		}
		pc.tick = keepalive;
		pc.tick_ctx = v->ctl;
		pc.tick_ns = 500000000ull;
		pc.timeout_ns = o->cfg.timeout_ns;
		pc.stop = &stop_requested;
		snprintf(step, sizeof(step), "step %u %s", i + 1, call.function);
		r = vppu_phase(v, &call, &pc, step, NULL);
		if (r < 0)
			return r;
		bad |= r;
		ql_ctl_client_keepalive(v->ctl);
	}
	return bad;
}

/* STOP first, so the counters are final when STATUS reads them. */
static int vppu_end_session(struct vppu *v)
{
	char counters[1024];
	int ret;

	if (stop_requested) {
		ql_ctl_client_abort(v->ctl);
		return -EINTR;
	}
	ret = ql_ctl_client_stop(v->ctl);
	if (!ret && !ql_ctl_client_status(v->ctl, counters, sizeof(counters)) && !v->o->json)
		printf("server: %s\n", counters);
	if (!ret)
		ret = ql_ctl_client_complete(v->ctl);
	if (ret)
		tool_fail("vppu", "ending the session", ret);
	return ret;
}

static void vppu_close(struct vppu *v)
{
	ql__rdv_cleanup(&v->rdv);
	ql_client_destroy(v->cl);
	if (v->dev)
		ql_device_close(v->dev);
	ql_ctl_client_destroy(v->ctl);
	ql_program_free(v->prog);
	ql_hl_server_destroy(v->hs);
}

/* The largest IB MTU that fits the board's packet size (DP_PACKET_SIZE x
 * 128 + 74 bytes). */
static enum ibv_mtu board_mtu(uint32_t bytes)
{
	enum ibv_mtu m = IBV_MTU_4096;

	while (m > IBV_MTU_256 && (128u << m) > bytes)
		m = (enum ibv_mtu)(m - 1);
	return m;
}

/*
 * --hsb-listen with a run (--count/--seconds): the whole FPGA. Its UC QP
 * exists first and is printed ("hsb: data plane qpn 0x.. gid ..."): the
 * host connects to it (qlinkd's qcs `qp`/`gid`). Once the host enables the
 * VP, the registers are the data plane's parameters: WRITE WITH IMMEDIATE
 * into page_addr + page x stride with the rkey, responses by SEND into
 * this board's receive buffers (256 bytes each). 0, 1 or -1 as vppu_calls.
 */
static int vppu_board(struct vppu *v)
{
	const struct vppu_opts *o = v->o;
	struct ql_client_config cc = { .transport = QL_CLIENT_HSB, .hsb.window = o->cfg.window };
	struct ql_hsb_dataplane dp;
	struct ql_conn_params lp;
	struct ql_hsb_params hp = { 0 };
	char gid[INET6_ADDRSTRLEN];
	int ret;

	ret = ql_device_open(o->uri, &v->dev);
	cc.dev = v->dev;
	if (!ret)
		ret = ql_client_create(&cc, &v->cl);
	if (!ret)
		ret = ql_client_local_params(v->cl, &lp);
	if (ret) {
		tool_fail("vppu", "the board's data plane", ret);
		return -1;
	}
	inet_ntop(AF_INET6, lp.gid.raw, gid, sizeof(gid));
	printf("hsb: data plane qpn 0x%x (%u) gid %s\n", lp.qpn, lp.qpn, gid);
	fflush(stdout);
	ret = tool_hsb_listen(o->hsb_listen, o->hsb_vp, o->hsb_allow, o->hsb_allow_len,
			      o->n_hsb_allow, o->timeout, &stop_requested, &v->hs, &dp);
	if (ret) {
		tool_fail("vppu", "hsb register server", ret);
		return -1;
	}
	/* The host reads the enable bit back after setting it: answer its
	 * configuration traffic until it has been quiet for 100 ms (at most
	 * 1 s) before streaming, so that a short run cannot end (and this
	 * process exit) before the host has finished. A real board stays up. */
	for (int i = 0; i < 10 && ql_hl_server_poll(v->hs, 100) > 0; i++)
		;
	hp.qpn = dp.qpn;
	memcpy(hp.gid.raw, dp.gid, 16);
	hp.mtu = board_mtu(dp.mtu);
	hp.rkey = dp.rkey;
	hp.page_addr = dp.page_addr;
	hp.page_size = dp.page_inc;
	hp.num_pages = dp.num_pages;
	hp.frame_len = dp.frame_len;
	hp.resp_size = QL_HSB_DEFAULT_RESP_SIZE; /* this board's receive buffers */
	ql_hsb_params_to_conn(&hp, &lp);
	ret = ql_client_connect(v->cl, &lp, NULL);
	if (ret) {
		tool_fail("vppu", "connecting the board's QP to the host", ret);
		return -1;
	}
	ql_vppu_client_of(&v->vc, v->cl);
	return vppu_calls(v);
}

int tool_vppu(int argc, char **argv)
{
	struct vppu_opts o;
	struct vppu v = { .o = &o };
	struct ql_conn_params sp;
	int ret;

	ret = vppu_parse(argc, argv, &o);
	if (ret)
		return ret < 0 ? 0 : ret;
	if (o.hsb_listen && o.run) {
		signal(SIGINT, on_signal);
		signal(SIGTERM, on_signal);
		if (o.cpu >= 0 && ql_cpu_pin(o.cpu))
			fprintf(stderr, "qlink vppu: cannot pin to cpu %d; running unpinned\n",
				o.cpu);
		ret = vppu_board(&v);
		vppu_close(&v);
		return ret ? 1 : 0;
	}
	if (o.hsb_listen) {
		struct ql_hl_server *hs = NULL;
		struct ql_hsb_dataplane dp;

		ret = tool_hsb_listen(o.hsb_listen, o.hsb_vp, o.hsb_allow, o.hsb_allow_len,
				      o.n_hsb_allow, o.timeout, NULL, &hs, &dp);
		if (ret)
			tool_fail("vppu", "hsb register server", ret);
		ql_hl_server_destroy(hs);
		return ret ? 1 : 0;
	}
	if (o.program) {
		struct ql_diags diags;

		if (ql_program_load(o.program, &v.prog, &diags)) {
			ql_diags_print(&diags, o.program, stderr);
			return 1;
		}
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	if (o.cpu >= 0 && ql_cpu_pin(o.cpu))
		fprintf(stderr, "qlink vppu: cannot pin to cpu %d; running unpinned\n", o.cpu);
	if (o.udp) {
		ret = vppu_connect_udp(&v);
	} else {
		ret = vppu_discover(&v, &sp);
		if (!ret)
			ret = vppu_connect(&v, &sp);
	}
	if (ret) {
		ret = 1;
	} else if (o.device) {
		ret = device_run(v.ctl, &v.vc, o.timeout, o.json);
	} else {
		ret = vppu_calls(&v);
		if (ret >= 0 && v.ctl && vppu_end_session(&v))
			ret = 1;
		ret = ret ? 1 : 0;
	}
	vppu_close(&v);
	return ret;
}
