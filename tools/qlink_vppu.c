/*
 * qlink serve / qlink vppu: the two sides of the data plane as separate
 * programs, connected through a parameters file until the UDP control
 * plane does it (a later release):
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

#include "qlink/clock.h"
#include "qlink/daemon.h"
#include "qlink/demo.h"
#include "qlink/error.h"
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

/* Write text to path atomically (write a temporary, rename). */
static int write_file(const char *path, const char *text)
{
	char tmp[4200];
	int fd, ret;

	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	ret = tool_write_all(fd, text, strlen(text));
	close(fd);
	if (ret || rename(tmp, path)) {
		ret = -errno;
		unlink(tmp);
		return ret ? ret : -EIO;
	}
	return 0;
}

/* Wait up to timeout_s for path to exist, then read its first line. */
static int wait_file(const char *path, double timeout_s, char *line, size_t len)
{
	uint64_t deadline = ql_clock_ns() + (uint64_t)(timeout_s * 1e9);

	while (!stop_requested) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);

		if (fd >= 0) {
			int n = tool_read_line(fd, line, len);

			close(fd);
			return n < 0 ? -EIO : 0;
		}
		if (ql_clock_ns() > deadline)
			return -ETIMEDOUT;
		sleep_ms(10);
	}
	return -EINTR;
}

static int params_text(const struct ql_conn_params *p, char *buf, size_t len)
{
	int n = ql_conn_params_format(p, buf, len - 1);

	if (n < 0 || (size_t)n >= len - 1)
		return -EINVAL;
	buf[n] = '\n';
	buf[n + 1] = '\0';
	return 0;
}

/* ---- serve ------------------------------------------------------------------ */

static void serve_usage(FILE *f)
{
	fprintf(f, "usage: qlink serve --params-file FILE [options]\n"
		   "\n"
		   "Runs a daemon serving the built-in qlink_parity function on a request\n"
		   "ring. Writes its connection parameters to FILE, waits for a client's in\n"
		   "FILE.client (qlink vppu writes them), connects, writes FILE.ready, and\n"
		   "serves until SIGINT or SIGTERM; then prints its counters.\n"
		   "\n"
		   "options:\n"
		   "  --params-file FILE  rendezvous file (required)\n"
		   "  --uri URI           device (default soft+shm://qlserve)\n"
		   "  --cpu N             dispatcher core (default 1; -1: no pinning)\n"
		   "  --slots N           ring slots (default 64)\n"
		   "  --slot-size N       slot bytes (default 256)\n"
		   "  --timeout S         how long to wait for the client (default 60)\n"
		   "  -h, --help          this text\n");
}

int tool_serve(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "params-file", required_argument, NULL, 'f' },
		{ "uri", required_argument, NULL, 'u' },
		{ "cpu", required_argument, NULL, 'c' },
		{ "slots", required_argument, NULL, 'n' },
		{ "slot-size", required_argument, NULL, 'z' },
		{ "timeout", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct ql_verbs_channel_config vc = { .num_slots = 64, .slot_size = 256 };
	struct ql_daemon_config dc = { .cpu = 1 };
	const char *file = NULL, *uri = "soft+shm://qlserve";
	struct tool_server srv = { 0 };
	struct ql_conn_params cp;
	struct ql_daemon_stats st;
	char path[4096], text[512];
	double timeout = 60;
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
	if (strlen(file) > sizeof(path) - 16) {
		fprintf(stderr, "qlink serve: --params-file path too long\n");
		return 2;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	ret = tool_server_open(&srv, uri, &vc, &dc);
	if (!ret)
		ret = params_text(&srv.params, text, sizeof(text));
	if (!ret)
		ret = write_file(file, text);
	if (ret) {
		tool_fail("serve", "setup", ret);
		goto out;
	}
	snprintf(path, sizeof(path), "%s.client", file);
	ret = wait_file(path, timeout, text, sizeof(text));
	if (!ret && ql_conn_params_parse(text, &cp))
		ret = -EINVAL;
	if (!ret)
		ret = ql_verbs_channel_connect(srv.ch, &cp, NULL);
	if (!ret)
		ret = ql_daemon_start(srv.d);
	snprintf(path, sizeof(path), "%s.ready", file);
	if (!ret)
		ret = write_file(path, "ready\n");
	if (ret) {
		tool_fail("serve", "connecting the client", ret);
		goto out;
	}
	fprintf(stderr, "qlink serve: serving qlink_parity on %s (SIGINT or SIGTERM to stop)\n",
		uri);
	while (!stop_requested)
		sleep_ms(50);
	ql_daemon_stop(srv.d);
	ql_daemon_stats(srv.d, &st);
	printf("requests=%" PRIu64 " responses=%" PRIu64 " ok=%" PRIu64 " handler_errors=%" PRIu64
	       " protocol_errors=%" PRIu64 " channel_error=%d\n",
	       st.requests, st.responses, st.ok, st.handler_error,
	       st.requests - st.ok - st.handler_error, st.channel_error);
out:
	tool_server_close(&srv);
	return ret ? 1 : 0;
}

/* ---- vppu ------------------------------------------------------------------- */

static void vppu_usage(FILE *f)
{
	fprintf(f, "usage: qlink vppu --params-file FILE [options]\n"
		   "\n"
		   "The virtual PPU: a software QCS that calls qlink_parity on a running\n"
		   "qlink serve, checks every answer and reports the round trips (from the\n"
		   "echoed ptp_timestamp), the rate, and counts of wrong answers, errors,\n"
		   "timeouts and lost responses. Exits 1 if anything was wrong or lost.\n"
		   "\n"
		   "options:\n"
		   "  --params-file FILE  the server's rendezvous file (required)\n"
		   "  --uri URI           device (default soft+shm://qlvppu)\n"
		   "  --cpu N             core (default 0; -1: no pinning)\n"
		   "  --count N           calls to make (default: run --seconds)\n"
		   "  --seconds S         how long to run (default 1)\n"
		   "  --window N          calls in flight, closed loop (default 1)\n"
		   "  --rate HZ           paced at HZ instead of closed loop\n"
		   "  --timeout S         wait for the server (default 60)\n"
		   "  --json              JSON report\n"
		   "  -h, --help          this text\n");
}

int tool_vppu(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "params-file", required_argument, NULL, 'f' },
		{ "uri", required_argument, NULL, 'u' },
		{ "cpu", required_argument, NULL, 'c' },
		{ "count", required_argument, NULL, 'n' },
		{ "seconds", required_argument, NULL, 's' },
		{ "window", required_argument, NULL, 'w' },
		{ "rate", required_argument, NULL, 'r' },
		{ "timeout", required_argument, NULL, 't' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct ql_vppu_config cfg = { .window = 1 };
	const char *file = NULL, *uri = "soft+shm://qlvppu";
	struct ql_device *dev = NULL;
	struct ql_ring_client *cl = NULL;
	struct ql_conn_params sp, cp;
	struct ql_vppu_call call;
	struct ql_vppu_report rep;
	uint64_t seed = 0x5eed;
	char path[4096], text[512];
	double seconds = 1, timeout = 60;
	bool json = false;
	int c, ret, cpu = 0;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 'f':
			file = optarg;
			break;
		case 'u':
			uri = optarg;
			break;
		case 'c':
			if (tool_int(optarg, -1, 4095, &cpu))
				return tool_bad("vppu", "--cpu", optarg);
			break;
		case 'n':
			if (tool_u64(optarg, 1, UINT64_MAX, &cfg.count))
				return tool_bad("vppu", "--count", optarg);
			break;
		case 's':
			if (tool_double(optarg, 0.001, 86400, &seconds))
				return tool_bad("vppu", "--seconds", optarg);
			break;
		case 'w':
			if (tool_u32(optarg, 1, 65536, &cfg.window))
				return tool_bad("vppu", "--window", optarg);
			break;
		case 'r':
			if (tool_double(optarg, 1, 1e9, &cfg.rate_hz))
				return tool_bad("vppu", "--rate", optarg);
			break;
		case 't':
			if (tool_double(optarg, 0.01, 86400, &timeout))
				return tool_bad("vppu", "--timeout", optarg);
			break;
		case 'j':
			json = true;
			break;
		case 'h':
			vppu_usage(stdout);
			return 0;
		default:
			vppu_usage(stderr);
			return 2;
		}
	}
	if (!file || optind < argc) {
		fprintf(stderr, "qlink vppu: %s\n",
			file ? "unexpected argument" : "--params-file FILE is required");
		return 2;
	}
	if (strlen(file) > sizeof(path) - 16) {
		fprintf(stderr, "qlink vppu: --params-file path too long\n");
		return 2;
	}
	if (!cfg.count)
		cfg.duration_ns = (uint64_t)(seconds * 1e9);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	if (cpu >= 0 && ql_cpu_pin(cpu))
		fprintf(stderr, "qlink vppu: cannot pin to cpu %d; running unpinned\n", cpu);
	ret = wait_file(file, timeout, text, sizeof(text));
	if (!ret && ql_conn_params_parse(text, &sp))
		ret = -EINVAL;
	if (!ret)
		ret = ql_device_open(uri, &dev);
	if (!ret)
		ret = ql_ring_client_create(dev, &sp, NULL, &cl);
	if (!ret)
		ret = ql_ring_client_local_params(cl, &cp);
	if (!ret)
		ret = ql_ring_client_connect(cl, &sp, NULL);
	if (!ret)
		ret = params_text(&cp, text, sizeof(text));
	snprintf(path, sizeof(path), "%s.client", file);
	if (!ret)
		ret = write_file(path, text);
	snprintf(path, sizeof(path), "%s.ready", file);
	if (!ret)
		ret = wait_file(path, timeout, text, sizeof(text));
	if (ret) {
		tool_fail("vppu", "connecting to the server", ret);
		goto out;
	}
	ql_demo_parity_call(&call, &seed);
	ret = ql_vppu_run(cl, &call, &cfg, &rep);
	if (ret) {
		tool_fail("vppu", "run", ret);
		goto out;
	}
	if (json) {
		ql_vppu_report_json(&rep, cfg.rate_hz > 0 ? "paced" : "closed", stdout);
		putchar('\n');
	} else {
		const struct ql_hist *h = &rep.rtt_ns;

		printf("calls %" PRIu64 " answered %" PRIu64 " ok %" PRIu64 " wrong %" PRIu64
		       " handler_errors %" PRIu64 " protocol_errors %" PRIu64 " timeouts %" PRIu64
		       " late %" PRIu64 " lost %" PRIu64 "\n",
		       rep.sent, rep.received, rep.ok, rep.wrong, rep.handler_errors,
		       rep.protocol_errors, rep.timeouts, rep.late, rep.lost);
		printf("round trip us: p50 %.3f p90 %.3f p99 %.3f p99.9 %.3f max %.3f; %.0f RPC/s\n",
		       ql_hist_percentile(h, 50) / 1e3, ql_hist_percentile(h, 90) / 1e3,
		       ql_hist_percentile(h, 99) / 1e3, ql_hist_percentile(h, 99.9) / 1e3,
		       (ql_hist_count(h) ? ql_hist_max(h) : 0) / 1e3, rep.rpc_per_s);
	}
	if (rep.transport_error)
		tool_fail("vppu", "transport", rep.transport_error);
	ret = rep.lost || rep.wrong || rep.protocol_errors || rep.handler_errors ||
	      rep.unexpected || rep.transport_error;
out:
	ql_ring_client_destroy(cl);
	if (dev)
		ql_device_close(dev);
	return ret ? 1 : 0;
}
