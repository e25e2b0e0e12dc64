/* SPDX-License-Identifier: MIT */
/*
 * qlink-bench-qec: the QEC workload's two measurements (docs/qec.md,
 * docs/benchmarks.md).
 *
 *   latency    decode time per round of the union-find decoder: shots are
 *              simulated first (phenomenological noise, p = q), then every
 *              ql_qec_decoder_push (one noisy round) and the closing
 *              ql_qec_decoder_finish is timed with the TSC on one core;
 *              p50, p99, p99.9, max and the mean per round (total time over
 *              rounds: what sets the sustainable round rate), per distance
 *              and error rate;
 *   threshold  the logical error rate per shot against the physical one,
 *              per distance, with a Wilson 95 % interval, for code-capacity
 *              or phenomenological noise (rounds = d, q = p unless given).
 *
 * Everything is deterministic from --seed (the k-th (d, p) point of a run
 * uses seed + k), so a run is repeatable bit for bit.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qlink/clock.h"
#include "qlink/error.h"
#include "qlink/histogram.h"
#include "qlink/qec.h"

#define MAXLIST 32

struct opts {
	unsigned d[MAXLIST], nd;
	double p[MAXLIST];
	unsigned np;
	double q;	 /* < 0: q = p */
	unsigned rounds; /* 0: the mode's default */
	unsigned long shots;
	unsigned window, commit;
	enum ql_qec_noise noise;
	uint64_t seed;
	int cpu;
	int json;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: qlink-bench-qec latency|threshold [options]\n"
		"  -d, --distance LIST  odd distances, comma-separated (latency: 5,7,9,11,13,15;\n"
		"                       threshold: 3,5,7,9)\n"
		"  -p, --p LIST         physical error rates (latency: 0.001,0.005;\n"
		"                       threshold: around the expected crossing)\n"
		"  -q, --q RATE         measurement error rate (default: q = p)\n"
		"  -n, --noise NAME     threshold: code-capacity or phenomenological (default)\n"
		"  -r, --rounds N       noisy rounds per shot (latency: 1000; threshold: d)\n"
		"  -s, --shots N        shots per point (latency: 20; threshold: 20000)\n"
		"  -w, --window N       decoder window in rounds (default: the decoder's)\n"
		"  -c, --commit N       rounds committed per slide (default: the decoder's)\n"
		"      --seed N         first seed (default 1)\n"
		"      --cpu N          pin to this CPU (default: not pinned)\n"
		"      --json           one JSON object per point instead of the table\n");
}

static unsigned parse_list(const char *s, double *out)
{
	unsigned n = 0;
	char *end;

	while (*s && n < MAXLIST) {
		out[n++] = strtod(s, &end);
		if (end == s)
			return 0;
		s = *end == ',' ? end + 1 : end;
		if (*end && *end != ',')
			return 0;
	}
	return n;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Wilson score interval, 95 %. */
static void wilson(unsigned long k, unsigned long n, double *lo, double *hi)
{
	const double z = 1.959963984540054;
	double ph = (double)k / n, z2n = z * z / n;
	double c = (ph + z2n / 2) / (1 + z2n);
	double h = z * sqrt(ph * (1 - ph) / n + z2n / (4 * n)) / (1 + z2n);

	*lo = c - h < 0 ? 0 : c - h;
	*hi = c + h > 1 ? 1 : c + h;
}

/* The code, its noise simulator and its decoder, as both measurements make
 * them; an error is said on stderr. */
static int chain_create(const struct ql_qec_params *pa, const struct ql_qec_decoder_opts *dopts,
			struct ql_qec_code **c, struct ql_qec_sim **sim,
			struct ql_qec_decoder **dec)
{
	int rc = ql_qec_code_create(pa->distance, c);

	if (!rc)
		rc = ql_qec_sim_create(*c, pa, sim);
	if (!rc)
		rc = ql_qec_decoder_create(*c, pa, dopts, dec);
	if (rc)
		fprintf(stderr, "qlink-bench-qec: d=%u p=%g: %s (%s)\n", pa->distance, pa->p,
			strerror(-rc), ql_error_detail());
	return rc;
}

static void chain_destroy(struct ql_qec_code *c, struct ql_qec_sim *sim, struct ql_qec_decoder *dec)
{
	ql_qec_decoder_destroy(dec);
	ql_qec_sim_destroy(sim);
	ql_qec_code_destroy(c);
}

static int latency_point(const struct opts *o, unsigned d, double p, uint64_t seed, double ghz)
{
	struct ql_qec_params pa = { d, o->rounds,	    QL_QEC_PHENOMENOLOGICAL,
				    p, o->q < 0 ? p : o->q, seed };
	struct ql_qec_decoder_opts dopts = { o->window, o->commit };
	struct ql_qec_code *c = NULL;
	struct ql_qec_sim *sim = NULL;
	struct ql_qec_decoder *dec = NULL;
	struct ql_hist *h = malloc(sizeof(*h));
	size_t fb, n;
	uint8_t *frames = NULL, *obs = NULL;
	unsigned long wrong = 0;
	uint64_t total = 0, *per_shot = calloc(o->shots, sizeof(uint64_t));
	int rc;

	if (!h || !per_shot) {
		free(h);
		free(per_shot);
		return -ENOMEM;
	}
	ql_hist_init(h);
	rc = chain_create(&pa, &dopts, &c, &sim, &dec);
	if (rc)
		goto out;
	fb = ql_qec_frame_bytes(c);
	n = (size_t)(o->rounds + 1) * fb;
	frames = malloc(o->shots * n);
	obs = malloc(o->shots);
	rc = -ENOMEM;
	if (!frames || !obs)
		goto out;
	for (unsigned long i = 0; i < o->shots; i++)
		ql_qec_sim_shot(sim, frames + i * n, &obs[i]);
	for (unsigned long i = 0; i < o->shots; i++) {
		const uint8_t *fr = frames + i * n;
		uint8_t flip;
		uint64_t t0, t1;

		ql_qec_decoder_reset(dec);
		for (unsigned t = 0; t < o->rounds; t++) {
			t0 = ql_tsc();
			rc = ql_qec_decoder_push(dec, fr + t * fb);
			t1 = ql_tsc();
			if (rc)
				goto out;
			ql_hist_record(h, t1 - t0);
			total += t1 - t0;
			per_shot[i] += t1 - t0;
		}
		t0 = ql_tsc();
		rc = ql_qec_decoder_finish(dec, fr + o->rounds * fb, &flip);
		t1 = ql_tsc();
		if (rc)
			goto out;
		ql_hist_record(h, t1 - t0);
		total += t1 - t0;
		per_shot[i] += t1 - t0;
		wrong += flip != obs[i];
	}
	{
		double rounds = (double)o->shots * (o->rounds + 1);
		double p50 = ql_hist_percentile(h, 50) / ghz, p99 = ql_hist_percentile(h, 99) / ghz;
		double p999 = ql_hist_percentile(h, 99.9) / ghz, mx = h->max / ghz;
		double mean = total / ghz / rounds, shot_med;

		/* the median shot's time per round: the mean without the
		 * preemptions a loaded machine puts into a few shots */
		qsort(per_shot, o->shots, sizeof(uint64_t), cmp_u64);
		shot_med = per_shot[o->shots / 2] / ghz / (o->rounds + 1);

		if (o->json)
			printf("{\"test\":\"qec-latency\",\"distance\":%u,\"p\":%g,\"q\":%g,"
			       "\"rounds\":%u,\"shots\":%lu,\"round_ns\":{\"p50\":%.1f,\"p99\":%.1f,"
			       "\"p999\":%.1f,\"max\":%.1f,\"mean\":%.1f,\"shot_median_mean\":%.1f},"
			       "\"logical_errors\":%lu}\n",
			       d, p, pa.q, o->rounds, o->shots, p50, p99, p999, mx, mean, shot_med,
			       wrong);
		else
			printf("%3u %8.4f %8.4f %8.0f %8.1f %8.1f %9.1f %10.1f %8.1f %8.1f %6lu/%lu\n",
			       d, p, pa.q, rounds, p50, p99, p999, mx, mean, shot_med, wrong,
			       o->shots);
	}
	rc = 0;
out:
	free(frames);
	free(obs);
	free(h);
	free(per_shot);
	chain_destroy(c, sim, dec);
	return rc;
}

static int threshold_point(const struct opts *o, unsigned d, double p, uint64_t seed)
{
	unsigned rounds = o->noise == QL_QEC_CODE_CAPACITY ? 0 : (o->rounds ? o->rounds : d);
	struct ql_qec_params pa = { d, rounds, o->noise, p, o->q < 0 ? p : o->q, seed };
	struct ql_qec_decoder_opts dopts = { o->window, o->commit };
	struct ql_qec_code *c = NULL;
	struct ql_qec_sim *sim = NULL;
	struct ql_qec_decoder *dec = NULL;
	uint8_t *fr = NULL;
	unsigned long wrong = 0;
	size_t fb;
	double lo, hi;
	int rc;

	rc = chain_create(&pa, &dopts, &c, &sim, &dec);
	if (rc)
		goto out;
	fb = ql_qec_frame_bytes(c);
	rc = -ENOMEM;
	fr = malloc((rounds + 1) * fb);
	if (!fr)
		goto out;
	for (unsigned long i = 0; i < o->shots; i++) {
		uint8_t obs, flip;

		ql_qec_sim_shot(sim, fr, &obs);
		ql_qec_decoder_reset(dec);
		for (unsigned t = 0; t < rounds; t++)
			if ((rc = ql_qec_decoder_push(dec, fr + t * fb)))
				goto out;
		if ((rc = ql_qec_decoder_finish(dec, fr + rounds * fb, &flip)))
			goto out;
		wrong += flip != obs;
	}
	wilson(wrong, o->shots, &lo, &hi);
	if (o->json)
		printf("{\"test\":\"qec-threshold\",\"noise\":\"%s\",\"distance\":%u,\"p\":%g,"
		       "\"q\":%g,\"rounds\":%u,\"shots\":%lu,\"logical_errors\":%lu,\"rate\":%.6g,"
		       "\"ci95\":[%.6g,%.6g],\"seed\":%llu}\n",
		       o->noise == QL_QEC_CODE_CAPACITY ? "code-capacity" : "phenomenological", d,
		       p, pa.q, rounds, o->shots, wrong, (double)wrong / o->shots, lo, hi,
		       (unsigned long long)seed);
	else
		printf("%8.4f %3u %6u %8lu %8lu %9.5f  [%.5f, %.5f]\n", p, d, rounds, o->shots,
		       wrong, (double)wrong / o->shots, lo, hi);
	fflush(stdout);
	rc = 0;
out:
	free(fr);
	chain_destroy(c, sim, dec);
	return rc;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = { { "distance", required_argument, 0, 'd' },
					    { "p", required_argument, 0, 'p' },
					    { "q", required_argument, 0, 'q' },
					    { "noise", required_argument, 0, 'n' },
					    { "rounds", required_argument, 0, 'r' },
					    { "shots", required_argument, 0, 's' },
					    { "window", required_argument, 0, 'w' },
					    { "commit", required_argument, 0, 'c' },
					    { "seed", required_argument, 0, 'S' },
					    { "cpu", required_argument, 0, 'C' },
					    { "json", no_argument, 0, 'J' },
					    { "help", no_argument, 0, 'h' },
					    { 0, 0, 0, 0 } };
	struct opts o = { .q = -1, .noise = QL_QEC_PHENOMENOLOGICAL, .seed = 1, .cpu = -1 };
	double tmp[MAXLIST];
	int latency, ch, rc = 0;
	uint64_t seed;

	if (argc < 2 || (strcmp(argv[1], "latency") && strcmp(argv[1], "threshold"))) {
		usage(argc >= 2 && !strcmp(argv[1], "--help") ? stdout : stderr);
		return argc >= 2 && !strcmp(argv[1], "--help") ? 0 : 2;
	}
	latency = !strcmp(argv[1], "latency");
	optind = 2;
	while ((ch = getopt_long(argc, argv, "d:p:q:n:r:s:w:c:h", lo, NULL)) != -1) {
		switch (ch) {
		case 'd':
			o.nd = parse_list(optarg, tmp);
			for (unsigned i = 0; i < o.nd; i++)
				o.d[i] = (unsigned)tmp[i];
			if (!o.nd)
				goto bad;
			break;
		case 'p':
			o.np = parse_list(optarg, o.p);
			if (!o.np)
				goto bad;
			break;
		case 'q':
			o.q = strtod(optarg, NULL);
			break;
		case 'n':
			if (!strcmp(optarg, "code-capacity"))
				o.noise = QL_QEC_CODE_CAPACITY;
			else if (!strcmp(optarg, "phenomenological"))
				o.noise = QL_QEC_PHENOMENOLOGICAL;
			else
				goto bad;
			break;
		case 'r':
			o.rounds = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 's':
			o.shots = strtoul(optarg, NULL, 0);
			break;
		case 'w':
			o.window = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 'c':
			o.commit = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 'S':
			o.seed = strtoull(optarg, NULL, 0);
			break;
		case 'C':
			o.cpu = atoi(optarg);
			break;
		case 'J':
			o.json = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			goto bad;
		}
	}
	if (!o.nd) {
		static const unsigned lat[] = { 5, 7, 9, 11, 13, 15 }, thr[] = { 3, 5, 7, 9 };

		o.nd = latency ? 6 : 4;
		memcpy(o.d, latency ? lat : thr, o.nd * sizeof(unsigned));
	}
	if (!o.np) {
		static const double lat[] = { 0.001, 0.005 };
		static const double cc[] = { 0.07, 0.08, 0.09, 0.10, 0.11, 0.12 };
		static const double ph[] = { 0.015, 0.02, 0.025, 0.03, 0.035 };

		if (latency) {
			o.np = 2;
			memcpy(o.p, lat, sizeof(lat));
		} else if (o.noise == QL_QEC_CODE_CAPACITY) {
			o.np = 6;
			memcpy(o.p, cc, sizeof(cc));
		} else {
			o.np = 5;
			memcpy(o.p, ph, sizeof(ph));
		}
	}
	if (!o.shots)
		o.shots = latency ? 20 : 20000;
	if (latency && !o.rounds)
		o.rounds = 1000;
	if (latency && o.noise == QL_QEC_CODE_CAPACITY)
		goto bad; /* the latency run streams rounds */
	if (o.cpu >= 0 && (rc = ql_cpu_pin(o.cpu))) {
		fprintf(stderr, "qlink-bench-qec: cannot pin to CPU %d\n", o.cpu);
		return 1;
	}
	seed = o.seed;
	if (latency) {
		double ghz = ql_tsc_ghz();

		if (!o.json)
			printf("# time per round (one push; the last: finish), ns\n"
			       "  d        p        q   rounds      p50      p99     p99.9        max "
			       "    mean shot-med errors/shots\n");
		for (unsigned i = 0; i < o.np; i++)
			for (unsigned j = 0; j < o.nd; j++)
				if ((rc = latency_point(&o, o.d[j], o.p[i], seed++, ghz)))
					return 1;
	} else {
		if (!o.json)
			printf("# %s noise; per point: shots, logical errors, rate, Wilson 95 %% "
			       "interval\n#      p   d rounds    shots   errors      rate  interval\n",
			       o.noise == QL_QEC_CODE_CAPACITY ? "code-capacity" :
								 "phenomenological");
		for (unsigned i = 0; i < o.np; i++)
			for (unsigned j = 0; j < o.nd; j++)
				if ((rc = threshold_point(&o, o.d[j], o.p[i], seed++)))
					return 1;
	}
	return 0;
bad:
	usage(stderr);
	return 2;
}
