/* SPDX-License-Identifier: MIT */
/*
 * qlink-bench-dispatch: what one dispatcher costs per channel it serves.
 *
 *   idle   a dispatcher polling K idle channels for a while: ns per round
 *          and per empty poll (rounds counted over the wall time), for
 *          loopback channels and for verbs channels (soft://loop, not
 *          connected: the ring check plus the channel's idle work);
 *   rtt    one client thread round-robining calls over N loopback channels
 *          of one dispatcher, one call in flight: the round trip median and
 *          p99 with N = 1, 4, 16 (every other channel is polled idle while
 *          a call waits);
 *   wake   per idle policy (spin, yield, sleep): the round trip of the
 *          first call after the dispatcher has been idle longer than
 *          idle_after (it has backed off), against a warm call.
 *
 * The dispatcher runs on --server-cpu, the client on --client-cpu. Short
 * runs: these VMs stall threads that spin for long (docs/benchmarks.md).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "demo/demo.h"
#include "qlink/channel.h"
#include "qlink/clock.h"
#include "qlink/daemon.h"
#include "qlink/dispatcher.h"
#include "qlink/error.h"
#include "qlink/histogram.h"
#include "qlink/rpc.h"

#define MAXCH 256
#define SLOTS 64
#define SLOT_SIZE 256

static struct {
	int server_cpu, client_cpu;
	double idle_seconds;
	uint64_t calls;
	uint32_t wake_samples;
	uint64_t idle_after_us, sleep_us, gap_us;
} opt = { 1, 0, 0.3, 100000, 200, 50, 50, 2000 };

struct set {
	uint32_t n;
	struct ql_device *dev;
	struct ql_channel *ch[MAXCH];
	struct ql_daemon *d[MAXCH];
	struct ql_dispatcher *p;
};

static void die(const char *what, int ret)
{
	fprintf(stderr, "qlink-bench-dispatch: %s: %s\n", what,
		ql_error_detail()[0] ? ql_error_detail() : ql_strerror(ret));
	exit(1);
}

/* n daemons serving qlink_parity on loop channels (or unconnected verbs
 * channels), attached to a dispatcher of the given policy. */
static void set_open(struct set *s, uint32_t n, bool verbs, enum ql_idle_policy idle)
{
	struct ql_dispatcher_config pc = {
		.cpu = opt.server_cpu,
		.idle = idle,
		.idle_after_ns = opt.idle_after_us * 1000,
		.sleep_ns = opt.sleep_us * 1000,
		.max_daemons = MAXCH,
	};
	struct ql_verbs_channel_config vc = { .num_slots = SLOTS, .slot_size = SLOT_SIZE };
	struct ql_daemon_config dc = { .cpu = -1 };
	int ret;

	memset(s, 0, sizeof(*s));
	s->n = n;
	if (verbs && (ret = ql_device_open("soft://loop", &s->dev)))
		die("soft://loop", ret);
	if ((ret = ql_dispatcher_create(&pc, &s->p)))
		die("dispatcher", ret);
	for (uint32_t i = 0; i < n; i++) {
		ret = verbs ? ql_verbs_channel_create(s->dev, &vc, &s->ch[i]) :
			      ql_loop_channel_create(SLOTS, SLOT_SIZE, &s->ch[i]);
		if (!ret)
			ret = ql_daemon_create(&dc, s->ch[i], &s->d[i]);
		if (!ret)
			ret = ql_daemon_register(s->d[i], ql_demo_parity_function());
		if (!ret)
			ret = ql_dispatcher_attach(s->p, s->d[i]);
		if (ret)
			die("channel", ret);
	}
	if ((ret = ql_dispatcher_start(s->p)))
		die("dispatcher start", ret);
}

static void set_close(struct set *s)
{
	ql_dispatcher_destroy(s->p);
	for (uint32_t i = 0; i < s->n; i++) {
		ql_daemon_destroy(s->d[i]);
		ql_channel_destroy(s->ch[i]);
	}
	if (s->dev)
		ql_device_close(s->dev);
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };

	nanosleep(&ts, NULL);
}

static void bench_idle(uint32_t k, bool verbs)
{
	struct ql_dispatcher_stats a, b;
	struct set s;
	uint64_t t0, t1;
	double ns_round;

	set_open(&s, k, verbs, QL_IDLE_SPIN);
	sleep_ns(20000000); /* let it settle on its core */
	ql_dispatcher_stats(s.p, &a);
	t0 = ql_clock_ns();
	sleep_ns((uint64_t)(opt.idle_seconds * 1e9));
	ql_dispatcher_stats(s.p, &b);
	t1 = ql_clock_ns();
	ns_round = (double)(t1 - t0) / (double)(b.rounds - a.rounds);
	printf("idle  %-5s channels %4u  rounds %10" PRIu64
	       "  ns/round %8.1f  ns/empty poll %6.2f\n",
	       verbs ? "verbs" : "loop", k, b.rounds - a.rounds, ns_round, ns_round / k);
	set_close(&s);
}

/* One parity call on channel c; returns its round trip in ns. */
static uint64_t call(struct set *s, uint32_t c, uint64_t seq)
{
	uint8_t msg[SLOT_SIZE], resp[SLOT_SIZE], syn[QL_DEMO_PARITY_ARG_LEN];
	struct ql_rpc_header h = {
		.magic = QL_RPC_MAGIC_REQUEST,
		.function_id = ql_rpc_fnv1a(QL_DEMO_PARITY_NAME),
		.arg_len = sizeof(syn),
		.request_id = (uint32_t)seq,
	};
	uint64_t t0, t1, spins = 0;
	int n;

	ql_demo_parity_syndrome(1, seq, syn);
	ql_rpc_header_encode(msg, &h);
	memcpy(msg + QL_RPC_HEADER_SIZE, syn, sizeof(syn));
	t0 = ql_tsc();
	if (ql_loop_channel_push(s->ch[c], msg, QL_RPC_HEADER_SIZE + sizeof(syn),
				 QL_RPC_HEADER_SIZE + sizeof(syn)))
		die("push", -EAGAIN);
	while ((n = ql_loop_channel_pop(s->ch[c], resp, sizeof(resp))) == -EAGAIN)
		if (++spins == 4000000000ull)
			die("no response", -ETIMEDOUT);
	t1 = ql_tsc();
	if (n != QL_RPC_RESPONSE_SIZE + 5 || ql_rpc_get_i32(resp + 4) != 0)
		die("bad response", -EBADMSG);
	return (uint64_t)((double)(t1 - t0) / ql_tsc_ghz());
}

static void bench_rtt(uint32_t n)
{
	struct ql_hist h;
	struct set s;

	ql_hist_init(&h);
	set_open(&s, n, false, QL_IDLE_SPIN);
	for (uint64_t i = 0; i < 1000; i++) /* warm up */
		call(&s, (uint32_t)(i % n), i);
	for (uint64_t i = 0; i < opt.calls; i++)
		ql_hist_record(&h, call(&s, (uint32_t)(i % n), i));
	printf("rtt   channels %3u  calls %8" PRIu64
	       "  median %7.3f us  p99 %7.3f us  p99.9 %7.3f us\n",
	       n, ql_hist_count(&h), ql_hist_percentile(&h, 50) / 1e3,
	       ql_hist_percentile(&h, 99) / 1e3, ql_hist_percentile(&h, 99.9) / 1e3);
	set_close(&s);
}

static void bench_wake(enum ql_idle_policy pol)
{
	struct ql_hist cold, warm;
	struct ql_dispatcher_stats a, b;
	struct set s;

	ql_hist_init(&cold);
	ql_hist_init(&warm);
	set_open(&s, 1, false, pol);
	for (uint64_t i = 0; i < 1000; i++)
		call(&s, 0, i);
	ql_dispatcher_stats(s.p, &a);
	for (uint32_t k = 0; k < opt.wake_samples; k++) {
		sleep_ns(opt.gap_us * 1000); /* longer than idle_after: backed off */
		ql_hist_record(&cold, call(&s, 0, k));
		ql_hist_record(&warm, call(&s, 0, k)); /* right after: awake */
	}
	ql_dispatcher_stats(s.p, &b);
	printf("wake  %-5s  first call after %" PRIu64 " us idle: median %8.3f us  p99 %8.3f us"
	       "   next call: median %7.3f us   backoffs %" PRIu64 "\n",
	       ql_idle_policy_str(pol), opt.gap_us, ql_hist_percentile(&cold, 50) / 1e3,
	       ql_hist_percentile(&cold, 99) / 1e3, ql_hist_percentile(&warm, 50) / 1e3,
	       b.backoffs - a.backoffs);
	set_close(&s);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: qlink-bench-dispatch [options] [idle] [rtt] [wake]   (default: all three)\n"
		"  --server-cpu N     the dispatcher's core (default 1; -1 unpinned)\n"
		"  --client-cpu N     the client's core (default 0; -1 unpinned)\n"
		"  --idle-seconds S   how long each idle measurement runs (default 0.3)\n"
		"  --calls N          calls per rtt configuration (default 100000)\n"
		"  --wake-samples N   wake-ups measured per policy (default 200)\n"
		"  --gap-us N         idle time before each wake-up call (default 2000)\n"
		"  --idle-after-us N  the dispatchers' idle_after (default 50)\n"
		"  --sleep-us N       the sleep policy's nap (default 50)\n");
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "server-cpu", required_argument, NULL, 's' },
		{ "client-cpu", required_argument, NULL, 'c' },
		{ "idle-seconds", required_argument, NULL, 'i' },
		{ "calls", required_argument, NULL, 'n' },
		{ "wake-samples", required_argument, NULL, 'w' },
		{ "gap-us", required_argument, NULL, 'g' },
		{ "idle-after-us", required_argument, NULL, 'a' },
		{ "sleep-us", required_argument, NULL, 'z' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool idle = false, rtt = false, wake = false;
	int c, ret;

	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 's':
			opt.server_cpu = atoi(optarg);
			break;
		case 'c':
			opt.client_cpu = atoi(optarg);
			break;
		case 'i':
			opt.idle_seconds = atof(optarg);
			break;
		case 'n':
			opt.calls = strtoull(optarg, NULL, 0);
			break;
		case 'w':
			opt.wake_samples = (uint32_t)strtoul(optarg, NULL, 0);
			break;
		case 'g':
			opt.gap_us = strtoull(optarg, NULL, 0);
			break;
		case 'a':
			opt.idle_after_us = strtoull(optarg, NULL, 0);
			break;
		case 'z':
			opt.sleep_us = strtoull(optarg, NULL, 0);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	for (int i = optind; i < argc; i++) {
		if (!strcmp(argv[i], "idle"))
			idle = true;
		else if (!strcmp(argv[i], "rtt"))
			rtt = true;
		else if (!strcmp(argv[i], "wake"))
			wake = true;
		else {
			usage(stderr);
			return 2;
		}
	}
	if (!idle && !rtt && !wake)
		idle = rtt = wake = true;
	if (!(opt.idle_seconds > 0) || !opt.calls || !opt.wake_samples ||
	    opt.gap_us <= opt.idle_after_us) {
		fprintf(stderr, "qlink-bench-dispatch: bad values (gap-us must exceed "
				"idle-after-us)\n");
		return 2;
	}
	if (opt.client_cpu >= 0 && (ret = ql_cpu_pin(opt.client_cpu)))
		die("pinning the client", ret);
	printf("qlink-bench-dispatch: dispatcher on cpu %d, client on cpu %d\n", opt.server_cpu,
	       opt.client_cpu);
	if (idle) {
		const uint32_t ks[] = { 1, 16, 64, 256 };

		for (size_t i = 0; i < sizeof(ks) / sizeof(ks[0]); i++)
			bench_idle(ks[i], false);
		for (size_t i = 0; i < 3; i++)
			bench_idle(ks[i], true);
	}
	if (rtt) {
		const uint32_t ns[] = { 1, 4, 16 };

		for (size_t i = 0; i < 3; i++)
			bench_rtt(ns[i]);
	}
	if (wake) {
		bench_wake(QL_IDLE_SPIN);
		bench_wake(QL_IDLE_YIELD);
		bench_wake(QL_IDLE_SLEEP);
	}
	return 0;
}
