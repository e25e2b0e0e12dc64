/* SPDX-License-Identifier: MIT */
/*
 * qlink qec: the surface-code QEC workload (qlink/qec.h, qlink/qec_wire.h).
 *
 *   qlink qec [--distances 3,5,7] [--p LIST|FROM:TO:N] [--shots N] ...
 *       offline: the threshold sweep, simulation and decoder in this
 *       process; a table of logical error rates with 95 % Wilson
 *       intervals and the decode time per round
 *   qlink qec --wire [--connect HOST[:PORT]] ...
 *       end to end: the VPPU streams syndrome rounds to the decoder plugin
 *       (qlink-qec.so) in a daemon (this process's own, loaded from
 *       --plugin, or a running qlinkd), applies the corrections, and
 *       compares the logical errors with the offline decoding of the same
 *       shots, bit for bit
 *   --plot DIR  writes gnuplot figures (PNG and SVG) of either
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plugin/loader.h"
#include "qlink/client.h"
#include "qlink/clock.h"
#include "qlink/control.h"
#include "qlink/daemon.h"
#include "qlink/error.h"
#include "qlink/qec.h"
#include "qlink/qec_wire.h"
#include "qlink/ring.h"
#include "qlink/vppu.h"
#include "tools.h"

#ifndef QLINK_QEC_PLUGIN_BUILD
#define QLINK_QEC_PLUGIN_BUILD ""
#endif
#ifndef QLINK_QEC_PLUGIN_INSTALL
#define QLINK_QEC_PLUGIN_INSTALL ""
#endif

#define MAX_D 8
#define MAX_P 64

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

struct qec_opts {
	unsigned distances[MAX_D], nd;
	double p[MAX_P];
	unsigned np;
	double q;   /* < 0: = p */
	int rounds; /* < 0: = d */
	enum ql_qec_noise noise;
	uint64_t shots, seed;
	struct ql_qec_decoder_opts dopts;
	bool json;
	const char *plot;
	/* --wire */
	bool wire;
	const char *connect, *plugin, *uri, *secret_file;
	double rate;
	uint32_t window, slots, slot_size;
	int cpu, server_cpu;
	int64_t decoder_id;
	enum ql_qec_input input;
	double call_timeout;
};

enum {
	O_DISTANCES = 256,
	O_DISTANCE,
	O_P,
	O_Q,
	O_NOISE,
	O_ROUNDS,
	O_SHOTS,
	O_SEED,
	O_WINDOW,
	O_COMMIT,
	O_JSON,
	O_PLOT,
	O_WIRE,
	O_CONNECT,
	O_SECRET,
	O_PLUGIN,
	O_DECODER_ID,
	O_INPUT,
	O_RATE,
	O_WCALLS,
	O_URI,
	O_SLOTS,
	O_SLOT_SIZE,
	O_CPU,
	O_SCPU,
	O_CALL_TIMEOUT,
};

static const char *const uri_alias[] = { "uri", "device", NULL };

static const struct tool_opt qec_opts[] = {
	{ "distances", 0, O_DISTANCES, TOOL_VALUE, "LIST",
	  "odd distances 3..15, comma-separated (default 3,5,7)" },
	{ "distance", 0, O_DISTANCE, TOOL_VALUE, "D", "one distance (the same as --distances D)" },
	{ "p", 0, O_P, TOOL_VALUE, "LIST",
	  "physical error rates, comma-separated, or FROM:TO:N\n"
	  "(N rates evenly spaced; default 0.01)" },
	{ "q", 0, O_Q, TOOL_VALUE, "Q", "measurement error rate (default: p)" },
	{ "noise", 0, O_NOISE, TOOL_VALUE, "MODEL", "phenomenological (default) or code-capacity" },
	{ "rounds", 0, O_ROUNDS, TOOL_VALUE, "R",
	  "noisy rounds per shot (default: d; code capacity: 0)" },
	{ "shots", 0, O_SHOTS, TOOL_VALUE, "N", "shots per point (default 10000)" },
	{ "seed", 0, O_SEED, TOOL_VALUE, "S", "simulation seed (default 1)" },
	{ "window", 0, O_WINDOW, TOOL_VALUE, "W",
	  "decoder window in rounds (default: the decoder's)" },
	{ "commit", 0, O_COMMIT, TOOL_VALUE, "C",
	  "rounds committed per slide (default: the decoder's)" },
	{ "json", 0, O_JSON, TOOL_FLAG, NULL, "one JSON object per point instead of the table" },
	{ "plot", 0, O_PLOT, TOOL_VALUE, "DIR",
	  "write gnuplot figures, PNG and SVG, into DIR: offline\n"
	  "qec_threshold_NOISE.* (logical vs physical error rate\n"
	  "per distance); --wire qec_latency.* (decode time per\n"
	  "round and round trips)" },
	{ "wire", 0, O_WIRE, TOOL_FLAG, NULL, "end to end through qlink (one distance, one p)" },
	{ "connect", 0, O_CONNECT, TOOL_VALUE, "HOST[:PORT]",
	  "a running qlinkd's control address (default port\n"
	  "7700) instead of this process's own daemon" },
	{ "secret-file", 0, O_SECRET, TOOL_VALUE, "FILE",
	  "shared secret for the control plane (with --connect)" },
	{ "plugin", 0, O_PLUGIN, TOOL_VALUE, "PATH",
	  "the decoder plugin for the own daemon (default: the\n"
	  "installed or built qlink-qec.so)" },
	{ "decoder-id", 0, O_DECODER_ID, TOOL_VALUE, "N", "decoder_id on the wire (default 0)" },
	{ "input", 0, O_INPUT, TOOL_VALUE, "KIND",
	  "measurements (default: stabilizer outcomes, as CUDA-Q\n"
	  "QEC sends) or detectors (detection events)" },
	{ "rate", 0, O_RATE, TOOL_VALUE, "HZ",
	  "syndrome rounds per second (default 1000000: a 1 us\n"
	  "cycle; 0: as fast as the window allows)" },
	{ "window-calls", 0, O_WCALLS, TOOL_VALUE, "N", "calls in flight at most (default 64)" },
	{ "device", 'd', O_URI, TOOL_VALUE, "URI", "device (default soft+shm://qlqec-PID)" },
	{ "slots", 0, O_SLOTS, TOOL_VALUE, "N", "the own daemon's ring slots (default 256)" },
	{ "slot-size", 0, O_SLOT_SIZE, TOOL_VALUE, "N",
	  "the own daemon's slot bytes (default 256)" },
	{ "cpu", 0, O_CPU, TOOL_VALUE, "N", "the VPPU's core (default 0; -1: no pinning)" },
	{ "server-cpu", 0, O_SCPU, TOOL_VALUE, "N",
	  "the own daemon's dispatcher core (default 1; -1: none)" },
	{ "call-timeout", 0, O_CALL_TIMEOUT, TOOL_VALUE, "TIME",
	  "a call unanswered after TIME ends the run (default 5)" },
	{ 0 },
};

static const struct tool_cmd qec_cmd = {
	.aliases = uri_alias,
	.name = "qec",
	.usage = "[--distances LIST] [--p LIST|FROM:TO:N] [--shots N] [options]\n"
		 "--wire [--connect HOST[:PORT] | --plugin PATH] [options]",
	.about = "The rotated surface code memory experiment (docs/qec.md). Offline (the\n"
		 "default): for each distance and physical error rate, simulate --shots shots,\n"
		 "decode them with the union-find sliding-window decoder and print the logical\n"
		 "error rate per shot with its 95 % Wilson interval and the decode time per\n"
		 "round. With --wire: the same shots end to end through qlink: the VPPU streams\n"
		 "each round to the decoder plugin (enqueue_syndromes, CUDA-Q QEC's wire\n"
		 "format), asks for the correction at the end of each shot (get_corrections),\n"
		 "applies it, and compares the logical errors with the offline decoding bit for\n"
		 "bit; it reports the backlog (rounds sent - rounds decoded) and round trips.\n"
		 "Without --connect the daemon is this process's own, with the plugin loaded\n"
		 "from --plugin; with --connect it is a running qlinkd whose qlink-qec plugin\n"
		 "serves --decoder-id with the same parameters. Exits 1 when the wire and\n"
		 "offline results differ, or rounds were lost or refused.\n"
		 "\n",
	.opts = qec_opts,
};

static int parse_list_u(const char *s, unsigned *out, unsigned max, unsigned *n)
{
	char *copy = strdup(s), *save = NULL;
	int ret = 0;

	*n = 0;
	if (!copy)
		return -ENOMEM;
	for (char *t = strtok_r(copy, ",", &save); t && !ret; t = strtok_r(NULL, ",", &save)) {
		uint32_t v;

		if (*n == max || tool_u32(t, QL_QEC_MIN_DISTANCE, QL_QEC_MAX_DISTANCE, &v) ||
		    !(v & 1))
			ret = -EINVAL;
		else
			out[(*n)++] = v;
	}
	free(copy);
	return ret || !*n ? -EINVAL : 0;
}

static int parse_p(const char *s, struct qec_opts *o)
{
	double a, b;
	unsigned n;
	char tail;

	if (sscanf(s, "%lf:%lf:%u%c", &a, &b, &n, &tail) == 3) {
		if (n < 1 || n > MAX_P || a < 0 || b > 1 || a > b)
			return -EINVAL;
		for (unsigned i = 0; i < n; i++)
			o->p[i] = n == 1 ? a : a + (b - a) * i / (n - 1);
		o->np = n;
		return 0;
	}
	{
		char *copy = strdup(s), *save = NULL;
		int ret = 0;

		o->np = 0;
		if (!copy)
			return -ENOMEM;
		for (char *t = strtok_r(copy, ",", &save); t && !ret;
		     t = strtok_r(NULL, ",", &save)) {
			if (o->np == MAX_P || tool_double(t, 0, 1, &o->p[o->np]))
				ret = -EINVAL;
			else
				o->np++;
		}
		free(copy);
		return ret || !o->np ? -EINVAL : 0;
	}
}

static int parse(int argc, char **argv, struct qec_opts *o)
{
	int c;
	uint32_t u;

	memset(o, 0, sizeof(*o));
	o->distances[0] = 3;
	o->distances[1] = 5;
	o->distances[2] = 7;
	o->nd = 3;
	o->p[0] = 0.01;
	o->np = 1;
	o->q = -1;
	o->rounds = -1;
	o->noise = QL_QEC_PHENOMENOLOGICAL;
	o->shots = 10000;
	o->seed = 1;
	o->rate = 1e6;
	o->window = 64;
	o->slots = 256;
	o->slot_size = 256;
	o->cpu = 0;
	o->server_cpu = 1;
	o->call_timeout = 5;
	optind = 0;
	while ((c = tool_getopt(&qec_cmd, argc, argv)) != TOOL_END) {
		switch (c) {
		case O_DISTANCES:
		case O_DISTANCE:
			if (parse_list_u(optarg, o->distances, MAX_D, &o->nd))
				return tool_bad("qec",
						c == O_DISTANCE ? "--distance" : "--distances",
						optarg);
			break;
		case O_P:
			if (parse_p(optarg, o))
				return tool_bad("qec", "--p", optarg);
			break;
		case O_Q:
			if (tool_double(optarg, 0, 1, &o->q))
				return tool_bad("qec", "--q", optarg);
			break;
		case O_NOISE:
			if (!strcmp(optarg, "phenomenological"))
				o->noise = QL_QEC_PHENOMENOLOGICAL;
			else if (!strcmp(optarg, "code-capacity") ||
				 !strcmp(optarg, "code_capacity"))
				o->noise = QL_QEC_CODE_CAPACITY;
			else
				return tool_bad("qec", "--noise", optarg);
			break;
		case O_ROUNDS:
			if (tool_int(optarg, 0, 1000000, &o->rounds))
				return tool_bad("qec", "--rounds", optarg);
			break;
		case O_SHOTS:
			if (tool_u64(optarg, 1, UINT64_MAX / 2, &o->shots))
				return tool_bad("qec", "--shots", optarg);
			break;
		case O_SEED:
			if (tool_u64(optarg, 0, UINT64_MAX, &o->seed))
				return tool_bad("qec", "--seed", optarg);
			break;
		case O_WINDOW:
			if (tool_u32(optarg, 0, 100000, &u))
				return tool_bad("qec", "--window", optarg);
			o->dopts.window = u;
			break;
		case O_COMMIT:
			if (tool_u32(optarg, 0, 100000, &u))
				return tool_bad("qec", "--commit", optarg);
			o->dopts.commit = u;
			break;
		case O_JSON:
			o->json = true;
			break;
		case O_PLOT:
			o->plot = optarg;
			break;
		case O_WIRE:
			o->wire = true;
			break;
		case O_CONNECT:
			if (tool_hostport(optarg, QL_CTL_DEFAULT_PORT))
				return tool_bad("qec", "--connect", optarg);
			o->connect = optarg;
			break;
		case O_SECRET:
			o->secret_file = optarg;
			break;
		case O_PLUGIN:
			o->plugin = optarg;
			break;
		case O_DECODER_ID:
			if (tool_u32(optarg, 0, QL_QEC_MAX_DECODERS - 1, &u))
				return tool_bad("qec", "--decoder-id", optarg);
			o->decoder_id = u;
			break;
		case O_INPUT:
			if (!strcmp(optarg, "measurements"))
				o->input = QL_QEC_INPUT_MEASUREMENTS;
			else if (!strcmp(optarg, "detectors"))
				o->input = QL_QEC_INPUT_DETECTORS;
			else
				return tool_bad("qec", "--input", optarg);
			break;
		case O_RATE:
			if (tool_double(optarg, 0, 1e9, &o->rate))
				return tool_bad("qec", "--rate", optarg);
			break;
		case O_WCALLS:
			if (tool_u32(optarg, 1, QL_RING_MAX_SLOTS, &o->window))
				return tool_bad("qec", "--window-calls", optarg);
			break;
		case O_URI:
			if (tool_device_uri(optarg))
				return tool_bad("qec", "--device", optarg);
			o->uri = optarg;
			break;
		case O_SLOTS:
			if (tool_u32(optarg, 1, 65536, &o->slots) || (o->slots & (o->slots - 1)))
				return tool_bad("qec", "--slots", optarg);
			break;
		case O_SLOT_SIZE:
			if (tool_u32(optarg, 64, 65536, &o->slot_size) || o->slot_size % 64)
				return tool_bad("qec", "--slot-size", optarg);
			break;
		case O_CPU:
			if (tool_int(optarg, -1, 4095, &o->cpu))
				return tool_bad("qec", "--cpu", optarg);
			break;
		case O_SCPU:
			if (tool_int(optarg, -1, 4095, &o->server_cpu))
				return tool_bad("qec", "--server-cpu", optarg);
			break;
		case O_CALL_TIMEOUT:
			if (tool_time(optarg, 0.001, 3600, &o->call_timeout))
				return tool_bad("qec", "--call-timeout", optarg);
			break;
		default:
			return 2;
		}
	}
	if (optind < argc)
		return tool_usage("qec", "unexpected argument '%s'", argv[optind]);
	if (o->noise == QL_QEC_CODE_CAPACITY && o->rounds > 0)
		return tool_usage("qec", "code capacity has no noisy rounds (--rounds 0)");
	if (o->noise == QL_QEC_PHENOMENOLOGICAL && o->rounds == 0)
		return tool_usage("qec", "phenomenological noise needs at least one round");
	if (o->wire && (o->nd != 1 || o->np != 1))
		return tool_usage("qec", "--wire runs one point: give one --distance and one --p");
	return 0;
}

static void point_params(const struct qec_opts *o, unsigned d, double p, struct ql_qec_params *pp)
{
	memset(pp, 0, sizeof(*pp));
	pp->distance = d;
	pp->noise = o->noise;
	pp->p = p;
	if (o->noise == QL_QEC_CODE_CAPACITY) {
		pp->rounds = 0;
		pp->q = 0;
	} else {
		pp->rounds = o->rounds >= 0 ? (unsigned)o->rounds : d;
		pp->q = o->q >= 0 ? o->q : p;
	}
	pp->seed = o->seed;
}

/* 95 % Wilson score interval of k successes in n. */
static void wilson(uint64_t k, uint64_t n, double *lo, double *hi)
{
	const double z = 1.959963984540054;
	double ph, den, c, w;

	if (!n) {
		*lo = 0;
		*hi = 1;
		return;
	}
	ph = (double)k / (double)n;
	den = 1 + z * z / (double)n;
	c = (ph + z * z / (2.0 * (double)n)) / den;
	w = z * sqrt(ph * (1 - ph) / (double)n + z * z / (4.0 * (double)n * (double)n)) / den;
	*lo = c - w < 0 ? 0 : c - w;
	*hi = c + w > 1 ? 1 : c + w;
}

/* ---- offline -------------------------------------------------------------------- */

struct point {
	struct ql_qec_params params;
	uint64_t shots, errors;
	double lo, hi;
	struct ql_hist decode_ns; /* per round (push; finish for the last frame) */
	double seconds;
};

static int run_point(const struct qec_opts *o, struct point *pt)
{
	struct ql_qec_code *code = NULL;
	struct ql_qec_sim *sim = NULL;
	struct ql_qec_decoder *dec = NULL;
	uint8_t *frames = NULL;
	unsigned nframes = pt->params.rounds + 1;
	size_t fb;
	uint64_t t0;
	int ret;

	ql_hist_init(&pt->decode_ns);
	ret = ql_qec_code_create(pt->params.distance, &code);
	if (!ret)
		ret = ql_qec_sim_create(code, &pt->params, &sim);
	if (!ret)
		ret = ql_qec_decoder_create(code, &pt->params, &o->dopts, &dec);
	if (ret)
		goto out;
	fb = ql_qec_frame_bytes(code);
	frames = calloc(nframes, fb);
	if (!frames) {
		ret = -ENOMEM;
		goto out;
	}
	t0 = ql_clock_ns();
	for (uint64_t n = 0; n < o->shots && !ret && !stop_requested; n++) {
		uint8_t obs, flip = 0;
		uint64_t a, b;

		ret = ql_qec_sim_shot(sim, frames, &obs);
		ql_qec_decoder_reset(dec);
		for (unsigned r = 0; !ret && r + 1 < nframes; r++) {
			a = ql_clock_ns();
			ret = ql_qec_decoder_push(dec, frames + (size_t)r * fb);
			b = ql_clock_ns();
			ql_hist_record(&pt->decode_ns, b - a);
		}
		if (!ret) {
			a = ql_clock_ns();
			ret = ql_qec_decoder_finish(dec, frames + (size_t)(nframes - 1) * fb,
						    &flip);
			b = ql_clock_ns();
			ql_hist_record(&pt->decode_ns, b - a);
		}
		if (!ret) {
			pt->shots++;
			pt->errors += flip ^ obs;
		}
	}
	pt->seconds = (double)(ql_clock_ns() - t0) / 1e9;
	wilson(pt->errors, pt->shots, &pt->lo, &pt->hi);
out:
	free(frames);
	ql_qec_decoder_destroy(dec);
	ql_qec_sim_destroy(sim);
	ql_qec_code_destroy(code);
	return ret;
}

static const char *noise_name(enum ql_qec_noise n)
{
	return n == QL_QEC_CODE_CAPACITY ? "code-capacity" : "phenomenological";
}

static void print_point(const struct qec_opts *o, const struct point *pt)
{
	const struct ql_hist *h = &pt->decode_ns;
	double ler = pt->shots ? (double)pt->errors / (double)pt->shots : 0;

	if (o->json) {
		printf("{\"noise\":\"%s\",\"distance\":%u,\"rounds\":%u,\"p\":%g,\"q\":%g,"
		       "\"shots\":%" PRIu64 ",\"logical_errors\":%" PRIu64
		       ",\"ler\":%.6g,\"ci95\":[%.6g,%.6g],\"seed\":%" PRIu64
		       ",\"decode_ns_per_round\":{\"p50\":%" PRIu64 ",\"p99\":%" PRIu64
		       ",\"max\":%" PRIu64 "},\"seconds\":%.3f}\n",
		       noise_name(pt->params.noise), pt->params.distance, pt->params.rounds,
		       pt->params.p, pt->params.q, pt->shots, pt->errors, ler, pt->lo, pt->hi,
		       pt->params.seed, ql_hist_percentile(h, 50), ql_hist_percentile(h, 99),
		       ql_hist_max(h), pt->seconds);
		return;
	}
	printf("%3u %6u %9.5f %9.5f %9" PRIu64 " %8" PRIu64 " %10.3e %10.3e %10.3e %9.3f %9.3f\n",
	       pt->params.distance, pt->params.rounds, pt->params.p, pt->params.q, pt->shots,
	       pt->errors, ler, pt->lo, pt->hi, ql_hist_percentile(h, 50) / 1e3,
	       ql_hist_percentile(h, 99) / 1e3);
}

/* ---- plots ------------------------------------------------------------------------ */

static int plot_threshold(const struct qec_opts *o, const struct point *pts, unsigned n)
{
	char body[8192], base[64], name[96];
	size_t off = 0;
	FILE *f;
	int ret;

	snprintf(base, sizeof(base), "qec_threshold_%s",
		 o->noise == QL_QEC_CODE_CAPACITY ? "code_capacity" : "phenomenological");
	snprintf(name, sizeof(name), "%s.dat", base);
	f = tool_plot_open(o->plot, name);
	if (!f)
		return -EIO;
	fprintf(f,
		"# distance p q rounds shots errors ler ci_lo ci_hi (qlink qec, seed %" PRIu64
		")\n",
		o->seed);
	for (unsigned d = 0; d < o->nd; d++) {
		fprintf(f, "# d=%u\n", o->distances[d]);
		for (unsigned i = 0; i < n; i++)
			if (pts[i].params.distance == o->distances[d])
				fprintf(f,
					"%u %.6g %.6g %u %" PRIu64 " %" PRIu64 " %.6g %.6g %.6g\n",
					pts[i].params.distance, pts[i].params.p, pts[i].params.q,
					pts[i].params.rounds, pts[i].shots, pts[i].errors,
					pts[i].shots ? (double)pts[i].errors / pts[i].shots : 0,
					pts[i].lo, pts[i].hi);
		fprintf(f, "\n\n");
	}
	fclose(f);
	off += (size_t)snprintf(body + off, sizeof(body) - off,
				"set title 'Rotated surface code, %s noise, union-find decoder, "
				"%" PRIu64 " shots per point'\n"
				"set xlabel 'physical error rate p'\nset ylabel 'logical error "
				"rate per shot'\n"
				"set logscale y\nset format y '%%.0e'\nset key left top\nset grid\n"
				"plot ",
				noise_name(o->noise), o->shots);
	for (unsigned d = 0; d < o->nd; d++)
		off += (size_t)snprintf(body + off, sizeof(body) - off,
					"%s'%s.dat' index %u using 2:7:8:9 with "
					"yerrorlines title 'd = %u'",
					d ? ", " : "", base, d, o->distances[d]);
	snprintf(body + off, sizeof(body) - off, "\n");
	ret = tool_plot_draw(o->plot, base, body);
	if (!ret && !o->json)
		printf("plots: %s/%s.png, %s/%s.svg\n", o->plot, base, o->plot, base);
	return ret;
}

static int plot_latency(const struct qec_opts *o, const struct ql_hist *decode,
			const struct ql_hist *handler, const struct ql_hist *round_rtt,
			const struct ql_hist *shot_rtt, const char *title)
{
	static const char *const names[] = { "decode per round (offline)",
					     "handler time in the daemon",
					     "round trip, enqueue_syndromes",
					     "round trip, get_corrections" };
	const struct ql_hist *const hists[] = { decode, handler, round_rtt, shot_rtt };

	return tool_plot_latency(o->plot, "qec_latency", title, 4, names, hists, o->json);
}

static int run_offline(const struct qec_opts *o)
{
	struct point *pts = calloc((size_t)o->nd * o->np, sizeof(*pts));
	unsigned n = 0;
	int ret = 0;

	if (!pts)
		return 1;
	if (o->plot && tool_plot_dir(o->plot)) {
		tool_fail("qec", "plot", -EIO);
		free(pts);
		return 1;
	}
	if (!o->json) {
		printf("qlink qec: rotated surface code, %s noise, union-find sliding-window "
		       "decoder, seed %" PRIu64 "\n",
		       noise_name(o->noise), o->seed);
		printf("  d rounds         p         q     shots   errors  LER/shot     "
		       "ci95 lo    ci95 hi  dec p50us dec p99us\n");
	}
	for (unsigned d = 0; d < o->nd && !ret && !stop_requested; d++)
		for (unsigned i = 0; i < o->np && !ret && !stop_requested; i++) {
			struct point *pt = &pts[n];

			point_params(o, o->distances[d], o->p[i], &pt->params);
			ret = run_point(o, pt);
			if (ret) {
				tool_fail("qec", "decoding", ret);
				break;
			}
			print_point(o, pt);
			fflush(stdout);
			n++;
		}
	if (!ret && o->plot && plot_threshold(o, pts, n)) {
		tool_fail("qec", "plot", -EIO);
		ret = 1;
	}
	free(pts);
	return ret ? 1 : 0;
}

/* ---- wire --------------------------------------------------------------------------- */

static const char *default_plugin(void)
{
	const char *env = getenv("QLINK_QEC_PLUGIN");

	if (env && *env)
		return env;
	if (*QLINK_QEC_PLUGIN_BUILD && !access(QLINK_QEC_PLUGIN_BUILD, R_OK))
		return QLINK_QEC_PLUGIN_BUILD;
	return QLINK_QEC_PLUGIN_INSTALL;
}

struct wire {
	const struct qec_opts *o;
	struct ql_plugin *plugin;
	struct tool_server srv;
	bool srv_open;
	struct ql_device *dev;
	struct ql_client *cl; /* the ring */
	struct ql_ctl_client *ctl;
	struct ql_vppu_client vc;
	char uri[128];
};

static void keepalive(void *ctx)
{
	ql_ctl_client_keepalive(ctx);
}

/* This process's own daemon serving the plugin; the client connected. */
static int wire_own(struct wire *w, const struct ql_qec_wire_decoder *wd)
{
	const struct qec_opts *o = w->o;
	struct ql_verbs_channel_config vc = { .num_slots = o->slots, .slot_size = o->slot_size };
	struct ql_daemon_config dc = { .cpu = o->server_cpu };
	struct ql_client_config cc = { .transport = QL_CLIENT_RING, .server = &w->srv.params };
	struct ql_conn_params cp;
	char config[512];
	const char *path = o->plugin ? o->plugin : default_plugin();
	int ret;

	ql_qec_wire_format(wd, config, sizeof(config));
	ret = ql_plugin_load(path, config, &w->plugin);
	if (ret) {
		tool_fail("qec", "loading the decoder plugin", ret);
		return ret;
	}
	ret = tool_server_open(&w->srv, w->uri, &vc, &dc);
	w->srv_open = !ret;
	if (!ret)
		ret = ql_plugin_register(w->plugin, w->srv.d);
	if (!ret)
		ret = ql_device_open(w->uri, &w->dev);
	if (!ret)
		cc.dev = w->dev;
	if (!ret)
		ret = ql_client_create(&cc, &w->cl);
	if (!ret)
		ret = ql_client_local_params(w->cl, &cp);
	if (!ret)
		ret = ql_verbs_channel_connect(w->srv.ch, &cp, NULL);
	if (!ret)
		ret = ql_client_connect(w->cl, &w->srv.params, NULL);
	if (!ret)
		ret = ql_daemon_start(w->srv.d);
	if (ret)
		tool_fail("qec", "starting the daemon", ret);
	return ret;
}

/* A running qlinkd: DISCOVER, connect, ACK, START. */
static int wire_connect(struct wire *w)
{
	const struct qec_opts *o = w->o;
	struct ql_ctl_client_config cc = { .name = "qlink-qec" };
	struct ql_client_config qc = { .transport = QL_CLIENT_RING };
	struct ql_conn_params sp, cp;
	uint8_t secret[256];
	size_t secret_len = 0;
	char hp[300];
	int ret;

	snprintf(hp, sizeof(hp), strchr(o->connect, ':') ? "%s" : "%s:7700", o->connect);
	ret = o->secret_file ?
		      tool_read_secret(o->secret_file, secret, sizeof(secret), &secret_len) :
		      0;
	if (!ret)
		ret = ql_ctl_client_create(hp, secret_len ? secret : NULL, secret_len, &cc,
					   &w->ctl);
	if (!ret)
		ret = ql_ctl_client_discover(w->ctl, 1, &sp);
	if (!ret && sp.resp_size)
		ret = ql_error_set(-EPROTO, "the RTH offers the hsb transport; qlink qec speaks "
					    "the ring");
	if (!ret)
		ret = ql_device_open(w->uri, &w->dev);
	qc.dev = w->dev;
	qc.server = &sp;
	if (!ret)
		ret = ql_client_open(&qc, &sp, NULL, &w->cl, &cp);
	if (!ret)
		ret = ql_ctl_client_ack(w->ctl, &cp, 1);
	if (!ret)
		ret = ql_ctl_client_start(w->ctl);
	if (ret)
		tool_fail("qec", "connecting to qlinkd", ret);
	return ret;
}

static void wire_close(struct wire *w)
{
	if (w->ctl) {
		if (stop_requested)
			ql_ctl_client_abort(w->ctl);
		else if (!ql_ctl_client_stop(w->ctl))
			ql_ctl_client_complete(w->ctl);
		ql_ctl_client_destroy(w->ctl);
	}
	if (w->srv_open) {
		ql_daemon_stop(w->srv.d);
		tool_server_close(&w->srv);
	}
	ql_client_destroy(w->cl);
	if (w->dev)
		ql_device_close(w->dev);
	ql_plugin_unload(w->plugin);
}

static void print_hist_us(const char *name, const struct ql_hist *h)
{
	printf("  %-34s p50 %8.3f  p99 %8.3f  p99.9 %8.3f  max %9.3f us  (%" PRIu64 ")\n", name,
	       ql_hist_percentile(h, 50) / 1e3, ql_hist_percentile(h, 99) / 1e3,
	       ql_hist_percentile(h, 99.9) / 1e3, ql_hist_max(h) / 1e3, ql_hist_count(h));
}

static int run_wire(const struct qec_opts *o)
{
	struct ql_qec_wire_decoder wd = { .id = o->decoder_id,
					  .opts = o->dopts,
					  .input = o->input };
	struct ql_vppu_qec_config cfg;
	struct ql_vppu_qec_report rep, off;
	struct ql_hist handler;
	struct point pt;
	struct wire w = { .o = o };
	bool same;
	int ret;

	point_params(o, o->distances[0], o->p[0], &wd.params);
	if (o->uri)
		snprintf(w.uri, sizeof(w.uri), "%s", o->uri);
	else
		snprintf(w.uri, sizeof(w.uri), "soft+shm://qlqec-%d", (int)getpid());
	memset(&cfg, 0, sizeof(cfg));
	cfg.params = wd.params;
	cfg.opts = o->dopts;
	cfg.decoder_id = o->decoder_id;
	cfg.input = o->input;
	cfg.shots = o->shots;
	cfg.round_rate_hz = o->rate;
	cfg.window = o->window;
	cfg.timeout_ns = (uint64_t)(o->call_timeout * 1e9);
	cfg.stop = &stop_requested;
	ql_hist_init(&handler);
	if (o->plot && tool_plot_dir(o->plot))
		return 1;
	/* the reference first: the same shots, decoded here */
	ret = ql_vppu_qec_offline(&cfg, &off);
	if (ret) {
		tool_fail("qec", "offline reference", ret);
		return 1;
	}
	ret = o->connect ? wire_connect(&w) : wire_own(&w, &wd);
	if (!ret) {
		if (w.ctl) {
			cfg.tick = keepalive;
			cfg.tick_ctx = w.ctl;
			cfg.tick_ns = 100000000;
		}
		ql_vppu_client_of(&w.vc, w.cl);
		if (o->cpu >= 0 && ql_cpu_pin(o->cpu))
			fprintf(stderr, "qlink qec: cannot pin to cpu %d; running unpinned\n",
				o->cpu);
		ret = ql_vppu_qec_run(&w.vc, &cfg, &rep);
		if (ret)
			tool_fail("qec", "streaming", ret);
	}
	if (!ret && w.srv_open)
		ql_daemon_handler_hist(w.srv.d, &handler);
	wire_close(&w);
	if (ret)
		return 1;
	same = rep.shots == off.shots && rep.logical_errors == off.logical_errors &&
	       rep.error_hash == off.error_hash;
	if (o->json) {
		ql_vppu_qec_report_json(&rep, stdout);
		printf("\n{\"offline\":{\"shots\":%" PRIu64 ",\"logical_errors\":%" PRIu64
		       ",\"error_hash\":\"%016" PRIx64 "\"},\"bit_for_bit\":%s}\n",
		       off.shots, off.logical_errors, off.error_hash, same ? "true" : "false");
	} else {
		double lo, hi;

		wilson(rep.logical_errors, rep.shots, &lo, &hi);
		printf("qlink qec --wire: d=%u rounds=%u %s p=%g q=%g seed=%" PRIu64
		       ", %s input, decoder %lld, %s\n",
		       wd.params.distance, wd.params.rounds, noise_name(wd.params.noise),
		       wd.params.p, wd.params.q, o->seed,
		       o->input == QL_QEC_INPUT_DETECTORS ? "detectors" : "measurements",
		       (long long)o->decoder_id, o->connect ? o->connect : "own daemon");
		printf("  round rate %.0f Hz requested, %.0f rounds/s decoded over %.3f s\n",
		       o->rate, rep.rounds_per_s, rep.elapsed_s);
		printf("  shots %" PRIu64 ", logical errors %" PRIu64
		       " (LER %.3e, ci95 %.3e..%.3e)\n",
		       rep.shots, rep.logical_errors,
		       rep.shots ? (double)rep.logical_errors / rep.shots : 0, lo, hi);
		printf("  offline: shots %" PRIu64 ", logical errors %" PRIu64
		       "; bit for bit: %s (hash %016" PRIx64 " / %016" PRIx64 ")\n",
		       off.shots, off.logical_errors, same ? "equal" : "DIFFERENT", rep.error_hash,
		       off.error_hash);
		printf("  rounds sent %" PRIu64 ", decoded %" PRIu64 ", backlog max %" PRIu64
		       " final %" PRIu64 ", late %" PRIu64 ", lost %" PRIu64 ", errors %" PRIu64
		       " (first %d), unexpected %" PRIu64 "\n",
		       rep.rounds_sent, rep.rounds_decoded, rep.backlog_max, rep.backlog_final,
		       rep.late, rep.lost, rep.errors, rep.first_error, rep.unexpected);
		print_hist_us("round trip, enqueue_syndromes", &rep.round_rtt_ns);
		print_hist_us("round trip, get_corrections", &rep.shot_rtt_ns);
		if (w.srv_open || ql_hist_count(&handler))
			print_hist_us("handler time in the daemon", &handler);
	}
	if (o->plot) {
		char title[256];

		memset(&pt, 0, sizeof(pt));
		pt.params = wd.params;
		if (run_point(o, &pt))
			return 1;
		snprintf(title, sizeof(title),
			 "d = %u, %u rounds, p = %g, %.0f rounds/s over qlink (%s)",
			 wd.params.distance, wd.params.rounds, wd.params.p, o->rate,
			 o->connect ? "qlinkd" : "own daemon, soft+shm");
		if (plot_latency(o, &pt.decode_ns, &handler, &rep.round_rtt_ns, &rep.shot_rtt_ns,
				 title)) {
			tool_fail("qec", "plot", -EIO);
			return 1;
		}
	}
	if (rep.stopped)
		return 1;
	return same && !rep.lost && !rep.errors && !rep.unexpected && !rep.timed_out &&
			       !rep.transport_error ?
		       0 :
		       1;
}

int tool_qec(int argc, char **argv)
{
	struct qec_opts o;
	int ret = parse(argc, argv, &o);

	if (ret)
		return ret < 0 ? 0 : ret;
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	return o.wire ? run_wire(&o) : run_offline(&o);
}
