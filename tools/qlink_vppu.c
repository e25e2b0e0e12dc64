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
#include "qlink/clock.h"
#include "qlink/control.h"
#include "qlink/daemon.h"
#include "qlink/error.h"
#include "qlink/hololink.h"
#include "qlink/hsb.h"
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

static void serve_usage(FILE *f)
{
	fprintf(f, "usage: qlink serve --params-file FILE [options]\n"
		   "\n"
		   "Runs a daemon serving the built-in qlink_parity function on a request\n"
		   "ring (or, with --transport hsb, on Hololink pages). Writes its\n"
		   "connection parameters to FILE, waits for a client's in\n"
		   "FILE.client (qlink vppu writes them), connects, writes FILE.ready, and\n"
		   "serves until SIGINT or SIGTERM; then prints its counters.\n"
		   "\n"
		   "options:\n"
		   "  --params-file FILE  rendezvous file (required)\n"
		   "  --uri URI           device (default soft+shm://qlserve)\n"
		   "  --cpu N             dispatcher core (default 1; -1: no pinning)\n"
		   "  --slots N           ring slots (default 64)\n"
		   "  --slot-size N       slot bytes (default 256)\n"
		   "  --transport T       ring (default) or hsb: --slots pages of --slot-size\n"
		   "                      bytes (a multiple of 128), bad requests dropped\n"
		   "  --qp rc|uc          the ring's QP type (default rc; written to FILE)\n"
		   "  --timeout S         how long to wait for the client (default 60)\n"
		   "  -h, --help          this text\n");
}

int tool_serve(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "params-file", required_argument, NULL, 'f' },
		{ "uri", required_argument, NULL, 'u' },
		{ "transport", required_argument, NULL, 'T' },
		{ "cpu", required_argument, NULL, 'c' },
		{ "slots", required_argument, NULL, 'n' },
		{ "slot-size", required_argument, NULL, 'z' },
		{ "qp", required_argument, NULL, 'Q' },
		{ "timeout", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct ql_verbs_channel_config vc = { .num_slots = 64, .slot_size = 256 };
	struct ql_daemon_config dc = { .cpu = 1 };
	const char *file = NULL, *uri = "soft+shm://qlserve";
	struct tool_server srv = { 0 };
	struct tool_rdv rdv = { 0 };
	struct ql_conn_params cp;
	struct ql_daemon_stats st;
	double timeout = 60;
	bool hsb = false;
	int c, ret;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 'f':
			file = optarg;
			break;
		case 'u':
			uri = optarg;
			break;
		case 'T':
			if (tool_transport(optarg, &hsb))
				return tool_bad("serve", "--transport", optarg);
			break;
		case 'c':
			if (tool_int(optarg, -1, 4095, &dc.cpu))
				return tool_bad("serve", "--cpu", optarg);
			break;
		case 'n':
			if (tool_u32(optarg, 1, 65536, &vc.num_slots))
				return tool_bad("serve", "--slots", optarg);
			break;
		case 'z':
			if (tool_u32(optarg, 64, 65536, &vc.slot_size))
				return tool_bad("serve", "--slot-size", optarg);
			break;
		case 'Q':
			if (tool_qp(optarg, &vc.qp_type))
				return tool_bad("serve", "--qp", optarg);
			break;
		case 't':
			if (tool_double(optarg, 0.01, 86400, &timeout))
				return tool_bad("serve", "--timeout", optarg);
			break;
		case 'h':
			serve_usage(stdout);
			return 0;
		default:
			serve_usage(stderr);
			return 2;
		}
	}
	if (!file || optind < argc) {
		fprintf(stderr, "qlink serve: %s\n",
			file ? "unexpected argument" : "--params-file FILE is required");
		return 2;
	}
	if (tool_rdv_init(&rdv, file)) {
		fprintf(stderr, "qlink serve: --params-file: %s\n", ql_error_detail());
		return 2;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	ret = tool_rdv_check_dir(file);
	if (!ret && hsb) {
		struct ql_hsb_channel_config hc = { .num_pages = vc.num_slots,
						    .page_size = vc.slot_size };

		dc.bad_requests = QL_BAD_REQUEST_DROP;
		ret = tool_server_open_hsb(&srv, uri, &hc, &dc);
		if (!ret)
			ret = tool_rdv_offer_hsb(&rdv, &srv.hsb_params);
	} else if (!ret) {
		ret = tool_server_open(&srv, uri, &vc, &dc);
		if (!ret)
			ret = tool_rdv_offer(&rdv, &srv.params);
	}
	if (ret) {
		tool_fail("serve", "setup", ret);
		goto out;
	}
	ret = tool_rdv_wait_client(&rdv, timeout, rdv_idle, NULL, &cp);
	if (!ret)
		ret = hsb ? ql_hsb_channel_connect(srv.ch, &cp, NULL) :
			    ql_verbs_channel_connect(srv.ch, &cp, NULL);
	if (!ret)
		ret = ql_daemon_start(srv.d);
	if (!ret)
		ret = tool_rdv_ready(&rdv);
	if (ret) {
		tool_fail("serve", "connecting the client", ret);
		goto out;
	}
	fprintf(stderr,
		"qlink serve: serving qlink_parity on %s over %s (SIGINT or SIGTERM to stop)\n",
		uri, hsb ? "hsb" : "the ring");
	while (!stop_requested)
		sleep_ms(50);
	ql_daemon_stop(srv.d);
	ql_daemon_stats(srv.d, &st);
	printf("requests=%" PRIu64 " responses=%" PRIu64 " ok=%" PRIu64 " handler_errors=%" PRIu64
	       " protocol_errors=%" PRIu64 " dropped=%" PRIu64 " channel_error=%d\n",
	       st.requests, st.responses, st.ok, st.handler_error,
	       st.requests - st.ok - st.handler_error, st.dropped, st.channel_error);
out:
	tool_rdv_cleanup(&rdv);
	tool_server_close(&srv);
	return ret ? 1 : 0;
}

/* ---- vppu ------------------------------------------------------------------- */

static void vppu_usage(FILE *f)
{
	fprintf(f,
		"usage: qlink vppu --connect HOST:PORT [--program FILE | --device] [options]\n"
		"       qlink vppu --params-file FILE [options]\n"
		"       qlink vppu --hsb-listen [ADDR:]PORT [--hsb-vp N] [--count N | --seconds S]\n"
		"\n"
		"The virtual PPU: a software QCS. With --connect it discovers a qlinkd through\n"
		"the UDP control plane (DISCOVER, ACK, START ... STOP, COMPLETE), connects its QP\n"
		"to the ring it is offered and runs a program of device calls (YAML, see\n"
		"docs/qlinkd.md) or, without --program, calls qlink_parity. With --params-file\n"
		"it meets a `qlink serve` through files instead. Every answer is checked; it\n"
		"reports round trips (from the echoed ptp_timestamp), rates, wrong answers,\n"
		"errors, timeouts and lost calls, and exits 1 if anything was wrong, lost or\n"
		"timed out. SIGINT/SIGTERM end the run at once, even with its window full.\n"
		"With --device the RTH drives it (QCSDevice, include/qlink/qcs.h): after\n"
		"DISCOVER and ACK it waits for the RTH to upload a program (PROGRAM) and\n"
		"TRIGGER it, runs it, and says COMPLETE; an ABORT from the RTH stops it (exit 3).\n"
		"\n"
		"options:\n"
		"  --connect HOST:PORT  qlinkd's control address (default port 7700)\n"
		"  --program FILE       the calls to make (with --connect)\n"
		"  --device             wait for the RTH's program and trigger (with --connect)\n"
		"  --secret-file FILE   shared secret for authenticated control messages\n"
		"  --name NAME          this QCS's name in DISCOVER (default vppu)\n"
		"  --params-file FILE   a qlink serve's rendezvous file instead of --connect\n"
		"  --uri URI            device (default soft+shm://qlvppu)\n"
		"  --transport T        ring (default) or hsb: play an FPGA with the Hololink\n"
		"                       IP (WRITE WITH IMMEDIATE into the server's pages;\n"
		"                       not with --device); must match what the server offers\n"
		"  --cpu N              core (default 0; -1: no pinning)\n"
		"  --count N            calls to make, no program (default: run --seconds)\n"
		"  --seconds S          how long to run, no program (default 1)\n"
		"  --window N           calls in flight, closed loop (default 1)\n"
		"  --qp rc|uc           the ring's QP type: must match the server's (default:\n"
		"                       the server's, from CONNECTION_PARAMS or the file)\n"
		"  --rate HZ            paced at HZ instead of closed loop\n"
		"  --timeout S          wait for the server, or the trigger (default 60)\n"
		"  --call-timeout S     a call unanswered after S ends the run, reported as\n"
		"                       timed out, exit 1 (default 5)\n"
		"  --json               JSON report (one object per program step)\n"
		"  --hsb-listen [ADDR:]PORT  be a Hololink board's register side (alone:\n"
		"                       wait until the host enables the VP, print its\n"
		"                       data-plane parameters, exit; bare PORT: 0.0.0.0);\n"
		"                       with --count/--seconds the whole FPGA: print its QP\n"
		"                       and GID (for qlinkd's qcs qp/gid), then stream the\n"
		"                       calls by WRITE WITH IMMEDIATE once enabled\n"
		"  --hsb-vp N           the VP the host configures (default 0)\n"
		"  -h, --help           this text\n");
}

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
	ret = tool_write_all(fd, bytes, len);
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

static int device_step(struct device *d, struct ql_ring_client *cl, uint32_t i,
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
		ret = ql_vppu_run(cl, &call, &sc, &rep);
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
static int device_run(struct ql_ctl_client *ctl, struct ql_ring_client *cl, double timeout,
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
	uint32_t hsb_vp;
	double seconds, timeout, call_timeout;
	bool json, device, hsb;
	bool run; /* --count or --seconds given: with --hsb-listen, stream */
	int cpu;
	enum ibv_qp_type qp; /* 0: the server's */
};

/* 0 to go on, or the exit status (0 for --help). */
static int vppu_parse(int argc, char **argv, struct vppu_opts *o)
{
	static const struct option lo[] = {
		{ "params-file", required_argument, NULL, 'f' },
		{ "connect", required_argument, NULL, 'C' },
		{ "program", required_argument, NULL, 'P' },
		{ "device", no_argument, NULL, 'D' },
		{ "secret-file", required_argument, NULL, 'S' },
		{ "name", required_argument, NULL, 'N' },
		{ "uri", required_argument, NULL, 'u' },
		{ "transport", required_argument, NULL, 'X' },
		{ "cpu", required_argument, NULL, 'c' },
		{ "count", required_argument, NULL, 'n' },
		{ "seconds", required_argument, NULL, 's' },
		{ "window", required_argument, NULL, 'w' },
		{ "qp", required_argument, NULL, 'Q' },
		{ "rate", required_argument, NULL, 'r' },
		{ "timeout", required_argument, NULL, 't' },
		{ "call-timeout", required_argument, NULL, 'T' },
		{ "json", no_argument, NULL, 'j' },
		{ "hsb-listen", required_argument, NULL, 'H' },
		{ "hsb-vp", required_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	*o = (struct vppu_opts){ .cfg = { .window = 1 },
				 .uri = "soft+shm://qlvppu",
				 .name = "vppu",
				 .seconds = 1,
				 .timeout = 60,
				 .call_timeout = 5 };
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
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
			o->uri = optarg;
			break;
		case 'X':
			if (tool_transport(optarg, &o->hsb))
				return tool_bad("vppu", "--transport", optarg);
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
			if (tool_double(optarg, 0.001, 86400, &o->seconds))
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
			if (tool_double(optarg, 0.01, 86400, &o->timeout))
				return tool_bad("vppu", "--timeout", optarg);
			break;
		case 'Q':
			if (tool_qp(optarg, &o->qp))
				return tool_bad("vppu", "--qp", optarg);
			break;
		case 'T':
			if (tool_double(optarg, 0.001, 86400, &o->call_timeout))
				return tool_bad("vppu", "--call-timeout", optarg);
			break;
		case 'j':
			o->json = true;
			break;
		case 'H':
			o->hsb_listen = optarg;
			break;
		case 'V':
			if (tool_u32(optarg, 0, QL_HSB_MAX_VPS - 1, &o->hsb_vp))
				return tool_bad("vppu", "--hsb-vp", optarg);
			break;
		case 'h':
			vppu_usage(stdout);
			return -1;
		default:
			vppu_usage(stderr);
			return 2;
		}
	}
	if (!o->cfg.count)
		o->cfg.duration_ns = (uint64_t)(o->seconds * 1e9);
	o->cfg.timeout_ns = (uint64_t)(o->call_timeout * 1e9);
	o->cfg.stop = &stop_requested;
	/* --hsb-listen: the hsb personality (the board; no server to find) */
	if (o->hsb_listen && !o->file && !o->connect && !o->program && !o->device && optind == argc)
		return 0;
	if (o->hsb_listen) {
		fprintf(stderr, "qlink vppu: --hsb-listen is the board: no --connect, "
				"--params-file, --program or --device\n");
		return 2;
	}
	if (optind < argc || !!o->file == !!o->connect || (o->program && !o->connect) ||
	    (o->device && (!o->connect || o->program))) {
		fprintf(stderr, "qlink vppu: %s\n",
			optind < argc ? "unexpected argument" :
			o->program && !o->connect ?
					"--program needs --connect" :
			o->device && !o->connect ?
					"--device needs --connect" :
			o->device && o->program ?
					"--device gets its program from the RTH" :
					"give one of --connect HOST:PORT or --params-file FILE");
		return 2;
	}
	if (o->hsb && o->device) {
		fprintf(stderr, "qlink vppu: --transport hsb does not work with --device\n");
		return 2;
	}
	return 0;
}

/* What a running vppu holds; vppu_close frees it. */
struct vppu {
	const struct vppu_opts *o;
	struct ql_device *dev;
	struct ql_ring_client *cl;
	struct ql_hsb_client *hcl;
	struct ql_hsb_params hp; /* the hsb server's (--transport hsb) */
	struct ql_vppu_client vc;
	struct ql_ctl_client *ctl;
	struct ql_program *prog;
	struct tool_rdv rdv;
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
	ret = tool_rdv_init(&v->rdv, o->file);
	if (!ret && o->hsb)
		ret = tool_rdv_wait_server_hsb(&v->rdv, o->timeout, rdv_idle, NULL, &v->hp);
	else if (!ret)
		ret = tool_rdv_wait_server(&v->rdv, o->timeout, rdv_idle, NULL, sp);
	if (ret)
		tool_fail("vppu", "reading the server's parameters", ret);
	return ret;
}

/* Open the device, connect the ring client, and tell the server. */
static int vppu_connect(struct vppu *v, const struct ql_conn_params *sp)
{
	const struct vppu_opts *o = v->o;
	struct ql_conn_params cp;
	int ret;

	ret = tool_qp_check("vppu", o->qp, sp);
	if (ret)
		return ret;
	ret = ql_device_open(o->uri, &v->dev);
	if (o->hsb) {
		struct ql_hsb_client_config hc = { .recv_size = v->hp.resp_size };

		if (!ret)
			ret = ql_hsb_client_create(v->dev, &hc, &v->hcl);
		if (!ret)
			ret = ql_hsb_client_local_params(v->hcl, &cp);
		if (!ret)
			ret = ql_hsb_client_connect(v->hcl, &v->hp, NULL);
		if (!ret)
			ql_vppu_client_hsb(&v->vc, v->hcl);
	} else {
		if (!ret)
			ret = ql_ring_client_create(v->dev, sp, NULL, &v->cl);
		if (!ret)
			ret = ql_ring_client_local_params(v->cl, &cp);
		if (!ret)
			ret = ql_ring_client_connect(v->cl, sp, NULL);
		if (!ret)
			ql_vppu_client_ring(&v->vc, v->cl);
	}
	if (!ret && v->ctl) {
		ret = ql_ctl_client_ack(v->ctl, &cp, 1);
		if (!ret && !o->device)
			ret = ql_ctl_client_start(v->ctl);
	} else if (!ret) {
		ret = tool_rdv_join(&v->rdv, &cp, o->timeout, rdv_idle, NULL);
	}
	if (ret)
		tool_fail("vppu", "connecting to the server", ret);
	return ret;
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

/* Run one call with cfg; report it. 0, 1 (something wrong or lost) or -1
 * (could not run). */
static int vppu_phase(struct vppu *v, const struct ql_vppu_call *call,
		      const struct ql_vppu_config *cfg, const char *name)
{
	struct ql_vppu_report rep;
	int ret = ql_vppu_run_client(&v->vc, call, cfg, &rep);

	if (ret) {
		tool_fail("vppu", "run", ret);
		return -1;
	}
	report(&rep, name, v->o->json);
	report_end(&rep, name, v->o);
	return report_bad(&rep) || rep.timed_out || rep.stopped ? 1 : 0;
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
	uint64_t seed = 0x5eed;
	int bad = 0, r;

	if (!v->prog) {
		struct ql_vppu_config cfg = o->cfg;

		ql_demo_parity_call(&call, &seed);
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
		return vppu_phase(v, &call, &cfg, cfg.rate_hz > 0 ? "paced" : "closed");
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
		r = vppu_phase(v, &call, &pc, step);
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
	tool_rdv_cleanup(&v->rdv);
	ql_ring_client_destroy(v->cl);
	ql_hsb_client_destroy(v->hcl);
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
	struct ql_hsb_client_config hc = { .window = o->cfg.window };
	struct ql_hsb_dataplane dp;
	struct ql_conn_params lp;
	struct ql_hsb_params hp = { 0 };
	char gid[INET6_ADDRSTRLEN];
	int ret;

	ret = ql_device_open(o->uri, &v->dev);
	if (!ret)
		ret = ql_hsb_client_create(v->dev, &hc, &v->hcl);
	if (!ret)
		ret = ql_hsb_client_local_params(v->hcl, &lp);
	if (ret) {
		tool_fail("vppu", "the board's data plane", ret);
		return -1;
	}
	inet_ntop(AF_INET6, lp.gid.raw, gid, sizeof(gid));
	printf("hsb: data plane qpn 0x%x (%u) gid %s\n", lp.qpn, lp.qpn, gid);
	fflush(stdout);
	ret = tool_hsb_listen(o->hsb_listen, o->hsb_vp, o->timeout, &stop_requested, &v->hs, &dp);
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
	ret = ql_hsb_client_connect(v->hcl, &hp, NULL);
	if (ret) {
		tool_fail("vppu", "connecting the board's QP to the host", ret);
		return -1;
	}
	ql_vppu_client_hsb(&v->vc, v->hcl);
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

		ret = tool_hsb_listen(o.hsb_listen, o.hsb_vp, o.timeout, NULL, &hs, &dp);
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
	ret = vppu_discover(&v, &sp);
	if (!ret)
		ret = vppu_connect(&v, &sp);
	if (ret) {
		ret = 1;
	} else if (o.device) {
		ret = device_run(v.ctl, v.cl, o.timeout, o.json);
	} else {
		ret = vppu_calls(&v);
		if (ret >= 0 && v.ctl && vppu_end_session(&v))
			ret = 1;
		ret = ret ? 1 : 0;
	}
	vppu_close(&v);
	return ret;
}
