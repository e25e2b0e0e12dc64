/* SPDX-License-Identifier: MIT */
/*
 * qlink bench: the RPC round trip and rate, measured the way a QCS would
 * see them. A forked daemon process (the RTH) serves qlink_parity over a
 * verbs channel; this process plays the QCS through the VPPU. Phases:
 * closed loop with one call in flight (latency), closed loop with a window
 * (rate), and paced at 1 MHz (syndrome streaming). With --transport udp the
 * daemon serves CUDA-Q Realtime's UDP transport on loopback instead.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "demo/demo.h"
#include "qlink/client.h"
#include "qlink/clock.h"
#include "qlink/control.h"
#include "qlink/daemon.h"
#include "qlink/error.h"
#include "qlink/gpu.h"
#include "qlink/udp.h"
#include "qlink/vppu.h"
#include "tools.h"

struct bench_opts {
	const char *uri;
	const char *server_uri; /* the forked daemon's device; NULL: uri */
	const char *connect;	/* a running qlinkd's control address, or NULL */
	const char *secret_file;
	int client_cpu;
	int server_cpu;
	uint32_t slots;
	uint32_t slot_size;
	uint32_t window;
	double rate_hz;
	double paced_s;
	double rate_s;
	uint64_t lat_calls;
	uint64_t warmup_calls;
	enum ibv_qp_type qp; /* 0: RC, or what --connect's RTH offers */
	bool json;
	bool histogram;	  /* --histogram: each phase's buckets after the table */
	const char *plot; /* --plot DIR */
	bool hsb;	  /* --transport hsb */
	bool udp;	  /* --transport udp: CUDA-Q's UDP transport on 127.0.0.1 */
	bool gpu;	  /* --gpu: the GPU dispatcher (docs/gpu.md) serves */
	enum ql_gpu_mode gpu_mode;
	enum ql_mem_kind gpu_memory; /* --gpu-memory */
};

static const struct tool_opt bench_opts[] = {
	{ "device", 'd', 'u', TOOL_VALUE, "URI",
	  "device both processes open (default soft+shm://qlbench)" },
	{ "transport", 0, 'T', TOOL_VALUE, "T",
	  "ring (qlink ring, default), hsb (Hololink pages:\n"
	  "--slots pages of --slot-size bytes, a multiple of 128)\n"
	  "or udp (CUDA-Q Realtime's UDP transport on 127.0.0.1:\n"
	  "datagrams of --slot-size bytes, no device)" },
	{ "server-device", 0, 'U', TOOL_VALUE, "URI",
	  "the daemon process's device instead (e.g. --device\n"
	  "ibv://rxe1 --server-device ibv://rxe0: two RDMA devices)" },
	{ "connect", 0, 'C', TOOL_VALUE, "HOST:PORT",
	  "run against a running qlinkd through its control\n"
	  "plane instead of forking a daemon (--server-cpu unused)" },
	{ "secret-file", 0, 'S', TOOL_VALUE, "FILE", "shared secret for the control plane" },
	{ "client-cpu", 0, 'c', TOOL_VALUE, "N", "VPPU core (default 0; -1: no pinning)" },
	{ "server-cpu", 0, 's', TOOL_VALUE, "N", "dispatcher core (default 1; -1: no pinning)" },
	{ "slots", 0, 'n', TOOL_VALUE, "N", "ring slots (default 64)" },
	{ "slot-size", 0, 'z', TOOL_VALUE, "N", "ring slot bytes (default 256)" },
	{ "window", 0, 'w', TOOL_VALUE, "N", "calls in flight in the rate phase (default 32)" },
	{ "qp", 0, 'Q', TOOL_VALUE, "rc|uc",
	  "the ring's QP type (default rc; with --connect: the\n"
	  "RTH's, which --qp must then match). On uc lost\n"
	  "requests are resent (URI ?loss= injects losses)" },
	{ "latency-calls", 0, 'l', TOOL_VALUE, "N", "calls in the latency phase (default 200000)" },
	{ "warmup-calls", 0, 'W', TOOL_VALUE, "N", "unmeasured calls before it (default 20000)" },
	{ "rate-seconds", 0, 'R', TOOL_VALUE, "TIME", "length of the rate phase (default 0.3)" },
	{ "rate", 0, 'r', TOOL_VALUE, "HZ", "paced phase rate (default 1000000)" },
	{ "paced-seconds", 0, 'p', TOOL_VALUE, "TIME",
	  "length of the paced phase (default 1; 0 skips it;\n"
	  "scripts/bench.sh runs 10: the sustained-load verdict)" },
	{ "gpu", 0, 'G', TOOL_OPTIONAL, "MODE",
	  "the GPU dispatcher serves instead of the CPU daemon\n"
	  "(ring over RC, or --transport hsb; MODE auto, device\n"
	  "or emulate, default auto: the persistent kernel on a\n"
	  "GPU, else its host emulation on --server-cpu; docs/gpu.md)" },
	{ "gpu-memory", 0, 'M', TOOL_VALUE, "KIND",
	  "with --gpu: the ring (hsb: pages) and response\n"
	  "buffers in host memory the GPU maps (host, default)\n"
	  "or GPU memory (gpu: device memory on ibv, mapped\n"
	  "host memory on the soft NICs; docs/verbs.md)" },
	{ "histogram", 'H', 'H', TOOL_FLAG, NULL,
	  "after the table, each phase's round trips as a\n"
	  "histogram: usec count cumulative% (as ib_write_lat -H)" },
	{ "plot", 0, 'P', TOOL_VALUE, "DIR",
	  "draw the phases' round trips with gnuplot into DIR:\n"
	  "bench_latency.{dat,gp,png,svg}" },
	{ "json", 0, 'j', TOOL_FLAG, NULL, "one JSON object instead of the table" },
	{ 0 },
};

static const char *const bench_alias[] = { "uri", "device", "server-uri", "server-device", NULL };

static const struct tool_cmd bench_cmd = {
	.aliases = bench_alias,
	.name = "bench",
	.about = "Runs a daemon (RTH) and a VPPU (QCS) in two processes over the soft NIC's\n"
		 "shared-memory wire, pinned to two cores, calling the built-in qlink_parity\n"
		 "function (256 bit-packed detection events -> parity, weight), and prints the\n"
		 "round trip and rate beside the targets. Every answer is checked.\n"
		 "\n"
		 "Phases: latency (closed loop, 1 call in flight), rate (closed loop with a\n"
		 "window), paced (fixed rate, e.g. 1 MHz syndrome streaming). The paced\n"
		 "phase's p99 and p99.9 are judged against the requirement p99 < 10 us: the\n"
		 "report says whether it held in this run or was MISSED. The columns are\n"
		 "explained in qlink(1).\n",
	.opts = bench_opts,
};

static int parse(int argc, char **argv, struct bench_opts *o)
{
	int c;

	*o = (struct bench_opts){ .uri = "soft+shm://qlbench",
				  .client_cpu = 0,
				  .server_cpu = 1,
				  .slots = 64,
				  .slot_size = 256,
				  .window = 32,
				  .rate_hz = 1e6,
				  .paced_s = 1.0,
				  .rate_s = 0.3,
				  .lat_calls = 200000,
				  .warmup_calls = 20000 };
	optind = 0;
	while ((c = tool_getopt(&bench_cmd, argc, argv)) != TOOL_END) {
		switch (c) {
		case 'u':
			if (tool_device_uri(optarg))
				return tool_bad("bench", "--device", optarg);
			o->uri = optarg;
			break;
		case 'T':
			o->udp = !strcmp(optarg, "udp");
			if (!o->udp && tool_transport(optarg, &o->hsb))
				return tool_bad("bench", "--transport", optarg);
			break;
		case 'U':
			if (tool_device_uri(optarg))
				return tool_bad("bench", "--server-device", optarg);
			o->server_uri = optarg;
			break;
		case 'C':
			if (tool_hostport(optarg, QL_CTL_DEFAULT_PORT))
				return tool_bad("bench", "--connect", optarg);
			o->connect = optarg;
			break;
		case 'S':
			o->secret_file = optarg;
			break;
		case 'c':
			if (tool_int(optarg, -1, 4095, &o->client_cpu))
				return tool_bad("bench", "--client-cpu", optarg);
			break;
		case 's':
			if (tool_int(optarg, -1, 4095, &o->server_cpu))
				return tool_bad("bench", "--server-cpu", optarg);
			break;
		case 'n':
			if (tool_u32(optarg, 1, 65536, &o->slots))
				return tool_bad("bench", "--slots", optarg);
			break;
		case 'z':
			if (tool_u32(optarg, 64, 65536, &o->slot_size))
				return tool_bad("bench", "--slot-size", optarg);
			break;
		case 'w':
			if (tool_u32(optarg, 1, 65536, &o->window))
				return tool_bad("bench", "--window", optarg);
			break;
		case 'Q':
			if (tool_qp(optarg, &o->qp))
				return tool_bad("bench", "--qp", optarg);
			break;
		case 'l':
			if (tool_u64(optarg, 1, UINT64_MAX, &o->lat_calls))
				return tool_bad("bench", "--latency-calls", optarg);
			break;
		case 'W':
			if (tool_u64(optarg, 0, UINT64_MAX, &o->warmup_calls))
				return tool_bad("bench", "--warmup-calls", optarg);
			break;
		case 'R':
			if (tool_time(optarg, 0.001, 60, &o->rate_s))
				return tool_bad("bench", "--rate-seconds", optarg);
			break;
		case 'r':
			if (tool_double(optarg, 1, 1e9, &o->rate_hz))
				return tool_bad("bench", "--rate", optarg);
			break;
		case 'p':
			if (tool_time(optarg, 0, 3600, &o->paced_s))
				return tool_bad("bench", "--paced-seconds", optarg);
			break;
		case 'j':
			o->json = true;
			break;
		case 'G':
			o->gpu = true;
			if (optarg && ql_gpu_mode_parse(optarg, &o->gpu_mode))
				return tool_bad("bench", "--gpu", optarg);
			break;
		case 'M':
			if (!strcmp(optarg, "host"))
				o->gpu_memory = QL_MEM_HOST;
			else if (!strcmp(optarg, "gpu"))
				o->gpu_memory = QL_MEM_GPU;
			else
				return tool_bad("bench", "--gpu-memory", optarg);
			break;
		case 'H':
			o->histogram = true;
			break;
		case 'P':
			o->plot = optarg;
			break;
		default:
			return 2;
		}
	}
	if (optind < argc)
		return tool_usage("bench", "unexpected argument '%s'", argv[optind]);
	if (o->udp && (o->connect || o->server_uri))
		return tool_usage("bench",
				  "--transport udp forks its own server on loopback "
				  "(for another server: qlink vppu --transport udp --connect)");
	if (o->udp) {
		/* any stride a datagram can carry; slots: the server's burst */
	} else if (o->hsb) {
		struct ql_hsb_params g = { .num_pages = o->slots,
					   .page_size = o->slot_size,
					   /* the channel's default frame */
					   .frame_len =
						   o->slot_size > QL_HSB_METADATA_SIZE ?
							   o->slot_size - QL_HSB_METADATA_SIZE :
							   o->slot_size,
					   .resp_size = QL_HSB_DEFAULT_RESP_SIZE };

		if (ql_hsb_params_check(&g))
			return tool_usage("bench", "%s", ql_error_detail());
	} else if (ql_ring_check_geometry(o->slots, o->slot_size)) {
		return tool_usage("bench", "%s", ql_error_detail());
	}
	if (o->gpu && (o->udp || o->connect || o->qp == IBV_QPT_UC))
		return tool_usage("bench", "--gpu serves the ring over RC or hsb from a forked "
					   "process (no --transport udp, --connect or --qp uc)");
	if (o->server_uri && o->connect)
		return tool_usage("bench", "--server-device names the forked daemon's device; "
					   "with --connect qlinkd's config names it");
	if (o->window > o->slots)
		o->window = o->slots;
	return 0;
}

/* ---- the daemon process --------------------------------------------------- */

/* The daemon's final counters, for the client's report. */
static void server_report(struct tool_server *srv, int wfd)
{
	struct ql_daemon_stats st;
	char line[256];

	ql_daemon_stop(srv->d);
	ql_daemon_stats(srv->d, &st);
	snprintf(line, sizeof(line),
		 "requests=%" PRIu64 " responses=%" PRIu64 " ok=%" PRIu64 " errors=%" PRIu64
		 " dropped=%" PRIu64 "\n",
		 st.requests, st.responses, st.ok, st.requests - st.ok, st.dropped);
	ql__write_all(wfd, line, strlen(line));
}

/* --transport udp: bind 127.0.0.1 (any port), start polling, then say the
 * port; serve until told "done". */
static int server_udp(const struct bench_opts *o, const struct ql_daemon_config *dc, int rfd,
		      int wfd)
{
	struct ql_udp_channel_config uc = { .address = "127.0.0.1",
					    .num_slots = o->slots,
					    .slot_size = o->slot_size };
	struct ql_daemon_config udc = *dc;
	struct tool_server srv;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char line[64];
	int ret;

	udc.bad_requests = QL_BAD_REQUEST_DROP;
	ret = tool_server_open_udp(&srv, &uc, &udc);
	if (!ret)
		ret = ql_udp_channel_local_addr(srv.ch, &ss, &sl);
	if (!ret)
		ret = ql_daemon_start(srv.d);
	if (ret) {
		tool_fail("bench server", "setup", ret);
		tool_server_close(&srv);
		return 1;
	}
	snprintf(line, sizeof(line), "%u\n", ntohs(((const struct sockaddr_in *)&ss)->sin_port));
	if (ql__write_all(wfd, line, strlen(line)))
		ret = -EIO;
	if (!ret && ql__read_line(rfd, line, sizeof(line)) < 0)
		line[0] = '\0';
	server_report(&srv, wfd);
	tool_server_close(&srv);
	return ret ? 1 : 0;
}

/* --gpu: the GPU dispatcher (or its emulation) serves qlink_parity. */
static int server_gpu(const struct bench_opts *o, int rfd, int wfd)
{
	struct ql_gpu_config gc = { .mode = o->gpu_mode,
				    .num_slots = o->slots,
				    .slot_size = o->slot_size,
				    .cpu = o->server_cpu,
				    .memory = o->gpu_memory };
	struct ql_hsb_params hp;
	struct ql_device *dev = NULL;
	struct ql_gpu_dispatcher *d = NULL;
	struct ql_conn_params sp, cp;
	struct ql_gpu_stats st;
	char line[512];
	int ret;

	if (o->hsb) {
		/* as the CPU hsb server: pages of slot_size, refused requests
		 * dropped (CUDA-Q's behaviour) */
		gc.transport = QL_GPU_TRANSPORT_HSB;
		gc.hsb.num_pages = o->slots;
		gc.hsb.page_size = o->slot_size;
		gc.bad_requests = QL_BAD_REQUEST_DROP;
	}
	ret = ql_device_open(o->server_uri ? o->server_uri : o->uri, &dev);
	if (!ret)
		ret = ql_gpu_dispatcher_create(dev, &gc, &d);
	if (!ret)
		ret = ql_gpu_dispatcher_register(d, ql_gpu_builtin_function("qlink_parity"));
	if (!ret)
		ret = o->hsb ? ql_gpu_dispatcher_hsb_params(d, &hp) :
			       ql_gpu_dispatcher_local_params(d, &sp);
	if (ret) {
		tool_fail("bench server", "gpu setup", ret);
		goto out;
	}
	if (o->hsb) {
		int n = ql_hsb_params_format(&hp, line, sizeof(line) - 1);

		if (n < 0 || (size_t)n >= sizeof(line) - 1) {
			ret = -EINVAL;
			goto out;
		}
		line[n++] = '\n';
		if (ql__write_all(wfd, line, (size_t)n)) {
			ret = -EIO;
			goto out;
		}
	} else if (ql__send_params(wfd, &sp)) {
		ret = -EIO;
		goto out;
	}
	if (ql__recv_params(rfd, &cp)) {
		ret = -EIO;
		goto out;
	}
	ret = ql_gpu_dispatcher_connect(d, &cp, NULL);
	if (!ret)
		ret = ql_gpu_dispatcher_start(d);
	if (ret) {
		tool_fail("bench server", "gpu start", ret);
		goto out;
	}
	/* caller progress (docs/progress.md): the emulated body runs in this
	 * wait, on this thread (pinned to --server-cpu) */
	if (ql_gpu_dispatcher_caller(d) && o->server_cpu >= 0)
		ql_cpu_pin(o->server_cpu);
	if (ql_gpu_dispatcher_serve_until(d, rfd) != 1 ||
	    ql__read_line(rfd, line, sizeof(line)) < 0)
		line[0] = '\0';
	ql_gpu_dispatcher_stop(d);
	ql_gpu_dispatcher_stats(d, &st);
	snprintf(line, sizeof(line),
		 "gpu %s memory=%s: requests=%" PRIu64 " responses=%" PRIu64 " ok=%" PRIu64
		 " errors=%" PRIu64 " handler_cycles_avg=%.0f handler_cycles_max=%" PRIu64 "\n",
		 ql_gpu_mode_str(ql_gpu_dispatcher_mode(d)),
		 o->gpu_memory == QL_MEM_GPU ? "gpu" : "host", st.requests, st.completed, st.ok,
		 st.requests - st.ok,
		 st.handled ? (double)st.handler_cycles_sum / (double)st.handled : 0.0,
		 st.handler_cycles_max);
	ql__write_all(wfd, line, strlen(line));
out:
	ql_gpu_dispatcher_destroy(d);
	if (dev)
		ql_device_close(dev);
	return ret ? 1 : 0;
}

static int server(const struct bench_opts *o, int rfd, int wfd)
{
	struct ql_verbs_channel_config vc = { .num_slots = o->slots,
					      .slot_size = o->slot_size,
					      .qp_type = o->qp };
	struct ql_hsb_channel_config hc = { .num_pages = o->slots, .page_size = o->slot_size };
	struct ql_daemon_config dc = { .cpu = o->server_cpu,
				       .bad_requests = o->hsb ? QL_BAD_REQUEST_DROP :
								QL_BAD_REQUEST_ANSWER };
	struct tool_server srv;
	struct ql_conn_params cp;
	char line[512];
	int ret;

	/* --gpu: only the body's thread is pinned (to --server-cpu); the soft
	 * NIC's engine thread, the "hardware", is left to the scheduler */
	if (o->gpu)
		return server_gpu(o, rfd, wfd);
	if (o->server_cpu >= 0)
		ql_cpu_pin(o->server_cpu);
	if (o->udp)
		return server_udp(o, &dc, rfd, wfd);
	ret = o->hsb ?
		      tool_server_open_hsb(&srv, o->server_uri ? o->server_uri : o->uri, &hc, &dc) :
		      tool_server_open(&srv, o->server_uri ? o->server_uri : o->uri, &vc, &dc);
	if (ret) {
		tool_fail("bench server", "setup", ret);
		return 1;
	}
	if (o->hsb) {
		int n = ql_hsb_params_format(&srv.hsb_params, line, sizeof(line) - 1);

		if (n < 0 || (size_t)n >= sizeof(line) - 1)
			return 1;
		line[n++] = '\n';
		if (ql__write_all(wfd, line, (size_t)n) || ql__recv_params(rfd, &cp))
			return 1;
		ret = ql_hsb_channel_connect(srv.ch, &cp, NULL);
	} else {
		if (ql__send_params(wfd, &srv.params) || ql__recv_params(rfd, &cp))
			return 1;
		ret = ql_verbs_channel_connect(srv.ch, &cp, NULL);
	}
	if (!ret)
		ret = ql_daemon_start(srv.d);
	if (ret) {
		tool_fail("bench server", "connect", ret);
		return 1;
	}
	/* serve until the client says it is done, then report our counts */
	if (ql__read_line(rfd, line, sizeof(line)) < 0)
		line[0] = '\0';
	server_report(&srv, wfd);
	tool_server_close(&srv);
	return 0;
}

/* ---- the VPPU (this process) ---------------------------------------------- */

struct phase {
	const char *name;
	struct ql_vppu_config cfg;
	struct ql_vppu_report rep;
};

/* The seed's goal, judged on the paced phase: p99 < 10 us under load. */
static double paced_p99_us(const struct ql_vppu_report *r)
{
	return ql_hist_percentile(&r->rtt_ns, 99) / 1e3;
}

static bool paced_held(const struct ql_vppu_report *r)
{
	return ql_hist_count(&r->rtt_ns) && r->received == r->sent && paced_p99_us(r) < 10.0;
}

/* "held", or "MISSED (p99 = 15.8 us)" (or why nothing was measured). */
static const char *paced_verdict(const struct ql_vppu_report *r, char *buf, size_t len)
{
	if (paced_held(r))
		return "held";
	if (!ql_hist_count(&r->rtt_ns))
		snprintf(buf, len, "MISSED (no answers)");
	else if (r->received != r->sent)
		snprintf(buf, len, "MISSED (%" PRIu64 " calls lost, p99 = %.1f us)", r->lost,
			 paced_p99_us(r));
	else
		snprintf(buf, len, "MISSED (p99 = %.1f us)", paced_p99_us(r));
	return buf;
}

static void print_table(const struct bench_opts *o, struct phase *ph, int n, const char *srv)
{
	const struct ql_vppu_report *lat = &ph[0].rep, *rate = &ph[1].rep;
	uint64_t lost = 0, wrong = 0;

	printf("qlink bench: qlink_parity (32-byte syndrome -> parity, weight) over %s%s%s\n",
	       o->udp ? "CUDA-Q UDP on 127.0.0.1" : o->uri, o->server_uri ? ", daemon on " : "",
	       o->server_uri ? o->server_uri : "");
	if (o->connect)
		printf("VPPU on cpu %d, against the qlinkd at %s\n\n", o->client_cpu, o->connect);
	else
		printf("VPPU on cpu %d, dispatcher on cpu %d, %s %u x %u bytes\n\n", o->client_cpu,
		       o->server_cpu,
		       o->udp ? "udp slots" :
		       o->hsb ? "hsb pages" :
				"ring",
		       o->slots, o->slot_size);
	printf("%-8s %10s %9s %9s %9s %9s %9s %12s %6s %6s\n", "phase", "calls", "p50 us", "p90 us",
	       "p99 us", "p99.9 us", "max us", "RPC/s", "lost", "wrong");
	for (int i = 0; i < n; i++) {
		const struct ql_vppu_report *r = &ph[i].rep;
		const struct ql_hist *h = &r->rtt_ns;

		printf("%-8s %10" PRIu64 " %9.3f %9.3f %9.3f %9.3f %9.3f %12.0f %6" PRIu64
		       " %6" PRIu64 "\n",
		       ph[i].name, r->received, ql_hist_percentile(h, 50) / 1e3,
		       ql_hist_percentile(h, 90) / 1e3, ql_hist_percentile(h, 99) / 1e3,
		       ql_hist_percentile(h, 99.9) / 1e3,
		       (ql_hist_count(h) ? ql_hist_max(h) : 0) / 1e3, r->rpc_per_s, r->lost,
		       r->wrong + r->protocol_errors + r->handler_errors + r->unexpected);
		lost += r->lost;
		wrong += r->wrong + r->protocol_errors + r->handler_errors + r->unexpected;
	}
	printf("\nserver: %s\n", srv);
	printf("\n%-44s %-14s %-14s %s\n", "target", "goal", "measured", "verdict");
#define ROW(what, goal, meas, ok) \
	printf("%-44s %-14s %-14s %s\n", what, goal, meas, (ok) ? "met" : "MISSED")
	{
		char m[32];
		double p50 = ql_hist_percentile(&lat->rtt_ns, 50) / 1e3;
		double p99 = ql_hist_percentile(&lat->rtt_ns, 99) / 1e3;

		snprintf(m, sizeof(m), "%.3f us", p50);
		ROW("round trip median (qlink goal)", "<= 0.8 us", m, p50 <= 0.8);
		snprintf(m, sizeof(m), "%.3f us", p99);
		ROW("round trip p99, run <= 1 s (qlink goal)", "<= 2 us", m, p99 <= 2.0);
		ROW("round trip p99, 1 in flight (requirement)", "< 10 us", m, p99 < 10.0);
		snprintf(m, sizeof(m), "%.2f M/s", rate->rpc_per_s / 1e6);
		ROW("closed-loop rate with a window (qlink goal)", ">= 3 M/s", m,
		    rate->rpc_per_s >= 3e6);
		ROW("packet rate (requirement)", "> 1 M/s", m, rate->rpc_per_s > 1e6);
		if (n > 2) {
			char what[64];

			snprintf(m, sizeof(m), "%.3f us", paced_p99_us(&ph[2].rep));
			snprintf(what, sizeof(what), "paced p99, %.0f Hz for %g s (requirement)",
				 o->rate_hz, o->paced_s);
			ROW(what, "< 10 us", m, paced_held(&ph[2].rep));
			snprintf(m, sizeof(m), "%.3f us",
				 ql_hist_percentile(&ph[2].rep.rtt_ns, 99.9) / 1e3);
			printf("%-44s %-14s %-14s %s\n", "paced p99.9 (info)", "-", m, "-");
			snprintf(m, sizeof(m), "%" PRIu64 " lost", ph[2].rep.lost);
			ROW("paced at the rate, nothing lost", "0 lost", m,
			    ph[2].rep.lost == 0 && ph[2].rep.received == ph[2].rep.sent);
			snprintf(m, sizeof(m), "%" PRIu64 " late", ph[2].rep.late);
			/* not a target: host preemption makes calls leave late */
			printf("%-44s %-14s %-14s %s\n", "paced: calls > 1 period late (info)", "-",
			       m, "-");
		}
		snprintf(m, sizeof(m), "%" PRIu64 " lost", lost);
		ROW("zero lost, every answer right (requirement)", "0 / 0", m,
		    lost == 0 && wrong == 0);
	}
#undef ROW
	if (n > 2) {
		char v[96];

		printf("\np99 < 10 us under paced load (%.0f Hz, %g s): %s\n", o->rate_hz,
		       o->paced_s, paced_verdict(&ph[2].rep, v, sizeof(v)));
	}
}

static void print_json(const struct bench_opts *o, struct phase *ph, int n, const char *srv)
{
	const struct ql_hist *h = &ph[0].rep.rtt_ns;
	uint64_t lost = 0, wrong = 0;

	for (int i = 0; i < n; i++) {
		lost += ph[i].rep.lost;
		wrong += ph[i].rep.wrong + ph[i].rep.protocol_errors + ph[i].rep.handler_errors +
			 ph[i].rep.unexpected;
	}
	printf("{\"uri\":\"%s\",\"server_uri\":\"%s\",\"transport\":\"%s\",\"function\":\"%s\","
	       "\"slots\":%u,\"slot_size\":%u,",
	       o->uri, o->server_uri ? o->server_uri : o->uri,
	       o->udp ? "udp" :
	       o->hsb ? "hsb" :
			"ring",
	       QL_DEMO_PARITY_NAME, o->slots, o->slot_size);
	printf("\"rtt_ns\":{\"p50\":%" PRIu64 ",\"p90\":%" PRIu64 ",\"p99\":%" PRIu64
	       ",\"p999\":%" PRIu64 ",\"max\":%" PRIu64 "},",
	       ql_hist_percentile(h, 50), ql_hist_percentile(h, 90), ql_hist_percentile(h, 99),
	       ql_hist_percentile(h, 99.9), ql_hist_count(h) ? ql_hist_max(h) : 0);
	printf("\"rpc_per_s\":%.1f,\"lost\":%" PRIu64 ",\"wrong\":%" PRIu64 ",\"server\":\"%s\",",
	       ph[1].rep.rpc_per_s, lost, wrong, srv);
	if (n > 2) {
		const struct ql_hist *p = &ph[2].rep.rtt_ns;
		char v[96];

		printf("\"paced\":{\"rate_hz\":%.0f,\"seconds\":%g,\"p99_ns\":%" PRIu64
		       ",\"p999_ns\":%" PRIu64 ",\"goal_p99_ns\":10000,\"held\":%s,"
		       "\"verdict\":\"%s\"},",
		       o->rate_hz, o->paced_s, ql_hist_percentile(p, 99),
		       ql_hist_percentile(p, 99.9), paced_held(&ph[2].rep) ? "true" : "false",
		       paced_verdict(&ph[2].rep, v, sizeof(v)));
	}
	printf("\"phases\":[");
	for (int i = 0; i < n; i++) {
		ql_vppu_report_json(&ph[i].rep, ph[i].name, stdout);
		printf(i + 1 < n ? "," : "");
	}
	printf("]}\n");
}

static void bench_keepalive(void *ctl)
{
	ql_ctl_client_keepalive(ctl);
}

/* What one bench run holds: the server (a forked daemon process and its
 * pipes, or a running qlinkd's control plane) and the VPPU's ring client. */
struct bench {
	const struct bench_opts *o;
	struct ql_device *dev;
	struct ql_client *cl;	 /* ring, hsb or udp */
	struct ql_hsb_params hp; /* the hsb server's */
	struct ql_vppu_client vc;
	struct ql_ctl_client *ctl;
	int to_srv, from_srv;
	uint16_t udp_port; /* --transport udp: the server's */
	pid_t pid;
};

/* A running qlinkd: the control plane offers its ring. */
static int bench_discover(struct bench *b, struct ql_conn_params *sp)
{
	const struct bench_opts *o = b->o;
	struct ql_ctl_client_config cc = { .name = "qlink-bench" };
	uint8_t secret[256];
	size_t slen = 0;
	int ret;

	ret = o->secret_file ? tool_read_secret(o->secret_file, secret, sizeof(secret), &slen) : 0;
	if (!ret)
		ret = ql_ctl_client_create(o->connect, slen ? secret : NULL, slen, &cc, &b->ctl);
	if (!ret)
		ret = ql_ctl_client_discover(b->ctl, 1, sp);
	if (!ret && !!sp->resp_size != o->hsb)
		ret = ql_error_set(-EPROTO, "the RTH offers the %s transport: use --transport %s",
				   sp->resp_size ? "hsb" : "ring", sp->resp_size ? "hsb" : "ring");
	if (!ret && o->hsb)
		ret = ql_hsb_params_from_conn(sp, &b->hp);
	if (ret)
		tool_fail("bench", "discovering the RTH", ret);
	return ret;
}

/* Fork the daemon process; its parameters come back over a pipe. */
static int bench_fork_server(struct bench *b, struct ql_conn_params *sp)
{
	int to_srv[2], from_srv[2];

	if (pipe(to_srv))
		return perror("qlink bench: pipe"), -errno;
	if (pipe(from_srv)) {
		perror("qlink bench: pipe");
		close(to_srv[0]);
		close(to_srv[1]);
		return -EIO;
	}
	fflush(NULL);
	b->pid = fork();
	if (b->pid < 0) {
		perror("qlink bench: fork");
		return -errno;
	}
	if (b->pid == 0) {
		close(to_srv[1]);
		close(from_srv[0]);
		_exit(server(b->o, to_srv[0], from_srv[1]));
	}
	close(to_srv[0]);
	close(from_srv[1]);
	b->to_srv = to_srv[1];
	b->from_srv = from_srv[0];
	if (b->o->udp) {
		char line[64];
		uint32_t port;

		if (ql__read_line(b->from_srv, line, sizeof(line)) < 0 ||
		    tool_u32(line, 1, 65535, &port)) {
			fprintf(stderr, "qlink bench: the daemon process did not start\n");
			return -EIO;
		}
		b->udp_port = (uint16_t)port;
		return 0;
	}
	if (b->o->hsb) {
		char line[512];

		if (ql__read_line(b->from_srv, line, sizeof(line)) < 0 ||
		    ql_hsb_params_parse(line, &b->hp)) {
			fprintf(stderr, "qlink bench: the daemon process did not start\n");
			return -EIO;
		}
		return 0;
	}
	if (ql__recv_params(b->from_srv, sp)) {
		fprintf(stderr, "qlink bench: the daemon process did not start\n");
		return -EIO;
	}
	return 0;
}

/* The VPPU's client, connected; then tell the server ours. */
static int bench_connect(struct bench *b, const struct ql_conn_params *sp)
{
	struct ql_client_config cc = { .transport = QL_CLIENT_RING, .server = sp };
	struct ql_conn_params cp, hsb;
	int ret;

	if (b->o->udp) {
		cc.transport = QL_CLIENT_UDP;
		cc.udp = (struct ql_udp_client_config){ .host = "127.0.0.1",
							.port = b->udp_port,
							.slot_size = b->o->slot_size,
							.window = b->o->slots };
		ret = ql_client_open(&cc, NULL, NULL, &b->cl, NULL);
		if (ret) {
			tool_fail("bench", "client setup", ret);
			return ret;
		}
		ql_vppu_client_of(&b->vc, b->cl);
		return 0;
	}
	ret = tool_qp_check("bench", b->o->qp, sp);
	if (ret)
		return ret;
	ret = ql_device_open(b->o->uri, &b->dev);
	cc.dev = b->dev;
	if (b->o->hsb) {
		cc.transport = QL_CLIENT_HSB;
		cc.hsb = (struct ql_hsb_client_config){ .recv_buffers = b->o->slots,
							.recv_size = b->hp.resp_size };
		ql_hsb_params_to_conn(&b->hp, &hsb);
		sp = &hsb;
	}
	if (!ret)
		ret = ql_client_open(&cc, sp, NULL, &b->cl, &cp);
	if (!ret)
		ql_vppu_client_of(&b->vc, b->cl);
	if (ret) {
		tool_fail("bench", "client setup", ret);
		return ret;
	}
	if (!b->ctl)
		return ql__send_params(b->to_srv, &cp) ? -EIO : 0;
	ret = ql_ctl_client_ack(b->ctl, &cp, 1);
	if (!ret)
		ret = ql_ctl_client_start(b->ctl);
	if (ret)
		tool_fail("bench", "connecting to the RTH", ret);
	return ret;
}

/* Warm up, then the phases in order; how many ran (*status 1 if one could
 * not finish). */
static int bench_phases(struct bench *b, struct phase *ph, int *status)
{
	const struct bench_opts *o = b->o;
	struct ql_vppu_call call;
	uint64_t seed = 0x5eed;
	int n, ret = 0;

	ql_demo_parity_call(&call, &seed);
	ph[0] = (struct phase){ .name = "latency", .cfg = { .window = 1, .count = o->lat_calls } };
	ph[1] = (struct phase){ .name = "rate",
				.cfg = { .window = o->window,
					 .duration_ns = (uint64_t)(o->rate_s * 1e9) } };
	ph[2] = (struct phase){ .name = "paced",
				.cfg = { .window = o->slots,
					 .rate_hz = o->rate_hz,
					 .duration_ns = (uint64_t)(o->paced_s * 1e9) } };
	for (n = 0; n < (o->paced_s > 0 ? 3 : 2); n++) {
		/* warm up caches and the host's scheduling before measuring; it
		 * keeps the session alive too: on a starved host 20 000 calls can
		 * outlast qlinkd's silence timeout */
		if (n == 0 && o->warmup_calls) {
			struct ql_vppu_config w = { .window = 1, .count = o->warmup_calls };

			if (b->ctl) {
				w.tick = bench_keepalive;
				w.tick_ctx = b->ctl;
				w.tick_ns = 500000000ull;
			}
			ret = ql_vppu_run_client(&b->vc, &call, &w, &ph[0].rep);
			if (!ret && ph[0].rep.lost)
				ret = -EIO;
		}
		if (b->ctl) {
			ph[n].cfg.tick = bench_keepalive;
			ph[n].cfg.tick_ctx = b->ctl;
			ph[n].cfg.tick_ns = 500000000ull;
		}
		if (!ret)
			ret = ql_vppu_run_client(&b->vc, &call, &ph[n].cfg, &ph[n].rep);
		if (ret || ph[n].rep.transport_error) {
			tool_fail("bench", ph[n].name, ret ? ret : ph[n].rep.transport_error);
			*status = 1;
			return n + 1;
		}
	}
	return n;
}

/* The server's final counters: STOP then STATUS from qlinkd, or the forked
 * daemon's line once told "done". */
static void bench_server_report(struct bench *b, char *srv, size_t len)
{
	if (getenv("QLINK_BENCH_DEBUG")) {
		struct ql_device_counters dc;

		ql_device_counters(b->dev, &dc);
		fprintf(stderr,
			"client device: rnr_naks_sent %llu inv_req %llu op_err %llu access %llu\n",
			(unsigned long long)dc.rc_nak_rnr, (unsigned long long)dc.rc_nak_inv_req,
			(unsigned long long)dc.rc_nak_op_err, (unsigned long long)dc.rc_nak_access);
	}
	if (b->ctl) {
		if (ql_ctl_client_stop(b->ctl) || ql_ctl_client_status(b->ctl, srv, len))
			snprintf(srv, len, "no report (%s)", ql_error_detail());
		ql_ctl_client_complete(b->ctl);
		return;
	}
	ql__write_all(b->to_srv, "done\n", 5);
	if (ql__read_line(b->from_srv, srv, len) < 0)
		snprintf(srv, len, "no report");
}

/* --histogram and --plot: each phase's round trips. 0, or -errno after
 * saying why. */
static int bench_latency_out(const struct bench_opts *o, const struct phase *ph, int n)
{
	const struct ql_hist *hists[3];
	const char *names[3];
	int ret;

	for (int i = 0; i < n; i++) {
		names[i] = ph[i].name;
		hists[i] = &ph[i].rep.rtt_ns;
		if (o->histogram && !o->json) {
			char title[64];

			snprintf(title, sizeof(title), "%s round trip", ph[i].name);
			printf("\n");
			tool_hist_print(stdout, title, hists[i]);
		}
	}
	if (!o->plot)
		return 0;
	ret = tool_plot_latency(o->plot, "bench_latency", "qlink bench: round trip per phase",
				(unsigned)n, names, hists, o->json);
	if (ret)
		tool_fail("bench", "plot", ret);
	return ret;
}

/* Close everything; 1 if the daemon process failed. */
static int bench_close(struct bench *b)
{
	int st, bad = 0;

	if (b->to_srv >= 0)
		close(b->to_srv);
	if (b->from_srv >= 0)
		close(b->from_srv);
	if (b->pid > 0 && waitpid(b->pid, &st, 0) == b->pid && (!WIFEXITED(st) || WEXITSTATUS(st)))
		bad = 1;
	ql_ctl_client_destroy(b->ctl);
	ql_client_destroy(b->cl);
	if (b->dev)
		ql_device_close(b->dev);
	return bad;
}

int tool_bench(int argc, char **argv)
{
	struct bench_opts o;
	struct bench b = { .o = &o, .to_srv = -1, .from_srv = -1, .pid = -1 };
	struct ql_conn_params sp;
	struct phase ph[3];
	char srv[1024] = "no report";
	int ret, n = 0, status = 0;

	ret = parse(argc, argv, &o);
	if (ret)
		return ret;
	ret = o.connect ? bench_discover(&b, &sp) : bench_fork_server(&b, &sp);
	if (o.client_cpu >= 0)
		ql_cpu_pin(o.client_cpu);
	if (!ret)
		ret = bench_connect(&b, &sp);
	if (!ret) {
		n = bench_phases(&b, ph, &status);
		bench_server_report(&b, srv, sizeof(srv));
		if (o.json)
			print_json(&o, ph, n, srv);
		else
			print_table(&o, ph, n, srv);
		if (bench_latency_out(&o, ph, n))
			status = 1;
		for (int i = 0; i < n; i++)
			if (ph[i].rep.lost || ph[i].rep.wrong || ph[i].rep.unexpected ||
			    ph[i].rep.protocol_errors || ph[i].rep.handler_errors)
				status = 1;
	}
	if (bench_close(&b))
		status = 1;
	return n ? status : 1;
}
