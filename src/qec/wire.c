/* SPDX-License-Identifier: MIT */
/*
 * The QEC plugin's decoder configuration (include/qlink/qec_wire.h): the
 * string under the plugin's `config:` in qlinkd's file, parsed and
 * written back.
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qlink/error.h"
#include "qlink/qec_wire.h"

static int bad(unsigned entry, const char *key, const char *why)
{
	return ql_error_set(-EINVAL, "qec decoder %u: %s: %s", entry, key, why);
}

static int parse_ulong(const char *v, unsigned long max, unsigned long *out)
{
	char *end;
	unsigned long x;

	if (!*v || *v == '-' || *v == '+')
		return -EINVAL;
	errno = 0;
	x = strtoul(v, &end, 10);
	if (errno || *end || x > max)
		return -EINVAL;
	*out = x;
	return 0;
}

static int parse_prob(const char *v, double *out)
{
	char *end;
	double x;

	if (!*v)
		return -EINVAL;
	errno = 0;
	x = strtod(v, &end);
	if (errno || *end || !isfinite(x) || x < 0 || x > 1)
		return -EINVAL;
	*out = x;
	return 0;
}

/* One key=value of decoder `entry`. */
static int parse_kv(struct ql_qec_wire_decoder *d, unsigned entry, char *kv, bool *has_q,
		    bool *has_rounds, bool *has_id)
{
	char *eq = strchr(kv, '=');
	const char *k, *v;
	unsigned long x;

	if (!eq)
		return bad(entry, kv, "expected key=value");
	*eq = '\0';
	k = kv;
	v = eq + 1;
	if (!strcmp(k, "id")) {
		if (parse_ulong(v, QL_QEC_MAX_DECODERS - 1, &x))
			return bad(entry, k, "an integer 0..31");
		d->id = (int64_t)x;
		*has_id = true;
	} else if (!strcmp(k, "distance") || !strcmp(k, "d")) {
		if (parse_ulong(v, QL_QEC_MAX_DISTANCE, &x) || x < QL_QEC_MIN_DISTANCE || !(x & 1))
			return bad(entry, k, "an odd integer 3..15");
		d->params.distance = (unsigned)x;
	} else if (!strcmp(k, "rounds")) {
		if (parse_ulong(v, 1000000, &x))
			return bad(entry, k, "an integer 0..1000000");
		d->params.rounds = (unsigned)x;
		*has_rounds = true;
	} else if (!strcmp(k, "noise")) {
		if (!strcmp(v, "phenomenological") || !strcmp(v, "phen"))
			d->params.noise = QL_QEC_PHENOMENOLOGICAL;
		else if (!strcmp(v, "code_capacity") || !strcmp(v, "code-capacity") ||
			 !strcmp(v, "cc"))
			d->params.noise = QL_QEC_CODE_CAPACITY;
		else
			return bad(entry, k, "phenomenological or code_capacity");
	} else if (!strcmp(k, "p")) {
		if (parse_prob(v, &d->params.p))
			return bad(entry, k, "a probability 0..1");
	} else if (!strcmp(k, "q")) {
		if (parse_prob(v, &d->params.q))
			return bad(entry, k, "a probability 0..1");
		*has_q = true;
	} else if (!strcmp(k, "window")) {
		if (parse_ulong(v, 100000, &x))
			return bad(entry, k, "an integer 0..100000");
		d->opts.window = (unsigned)x;
	} else if (!strcmp(k, "commit")) {
		if (parse_ulong(v, 100000, &x))
			return bad(entry, k, "an integer 0..100000");
		d->opts.commit = (unsigned)x;
	} else if (!strcmp(k, "input")) {
		if (!strcmp(v, "measurements"))
			d->input = QL_QEC_INPUT_MEASUREMENTS;
		else if (!strcmp(v, "detectors"))
			d->input = QL_QEC_INPUT_DETECTORS;
		else
			return bad(entry, k, "measurements or detectors");
	} else {
		return bad(entry, k,
			   "unknown key (id, distance, rounds, noise, p, q, window, "
			   "commit, input)");
	}
	return 0;
}

/* Decoder `entry` from the text s (modified). 0, 1 for an empty entry, or
 * -EINVAL. */
static int parse_entry(char *s, unsigned entry, struct ql_qec_wire_decoder *d)
{
	bool has_q = false, has_rounds = false, has_id = false, any = false;
	char *save = NULL;
	int ret;

	memset(d, 0, sizeof(*d));
	d->params.noise = QL_QEC_PHENOMENOLOGICAL;
	for (char *kv = strtok_r(s, " \t\r,", &save); kv; kv = strtok_r(NULL, " \t\r,", &save)) {
		any = true;
		ret = parse_kv(d, entry, kv, &has_q, &has_rounds, &has_id);
		if (ret)
			return ret;
	}
	if (!any)
		return 1;
	if (!has_id)
		return bad(entry, "id", "missing");
	if (!d->params.distance)
		return bad(entry, "distance", "missing");
	if (!has_q)
		d->params.q = d->params.p;
	if (d->params.noise == QL_QEC_CODE_CAPACITY) {
		if (has_rounds && d->params.rounds)
			return bad(entry, "rounds", "must be 0 for code capacity");
		d->params.rounds = 0;
		d->params.q = 0;
	} else if (!has_rounds) {
		d->params.rounds = d->params.distance;
	} else if (!d->params.rounds) {
		return bad(entry, "rounds", "at least 1 for phenomenological noise");
	}
	return 0;
}

int ql_qec_wire_parse(const char *config, struct ql_qec_wire_decoder *out, unsigned max,
		      unsigned *n)
{
	char *copy, *save = NULL;
	unsigned count = 0, entry = 0;
	int ret = 0;

	*n = 0;
	if (!config)
		return ql_error_set(-EINVAL, "qec: no decoder configuration");
	copy = strdup(config);
	if (!copy)
		return -ENOMEM;
	for (char *e = strtok_r(copy, ";\n", &save); e; e = strtok_r(NULL, ";\n", &save)) {
		struct ql_qec_wire_decoder d;

		ret = parse_entry(e, entry, &d);
		if (ret < 0)
			break;
		if (ret > 0) {
			ret = 0;
			continue;
		}
		entry++;
		if (count == max) {
			ret = ql_error_set(-EINVAL, "qec: more than %u decoders", max);
			break;
		}
		for (unsigned i = 0; i < count; i++)
			if (out[i].id == d.id) {
				ret = ql_error_set(-EINVAL, "qec decoder %u: id %lld used twice",
						   entry - 1, (long long)d.id);
				break;
			}
		if (ret)
			break;
		out[count++] = d;
	}
	free(copy);
	if (!ret && !count)
		ret = ql_error_set(-EINVAL, "qec: no decoder configured (e.g. \"id=0 distance=5 "
					    "p=0.01\")");
	if (!ret)
		*n = count;
	return ret;
}

int ql_qec_wire_format(const struct ql_qec_wire_decoder *d, char *buf, size_t len)
{
	return snprintf(buf, len,
			"id=%lld distance=%u rounds=%u noise=%s p=%.17g q=%.17g window=%u "
			"commit=%u input=%s",
			(long long)d->id, d->params.distance, d->params.rounds,
			d->params.noise == QL_QEC_CODE_CAPACITY ? "code_capacity" :
								  "phenomenological",
			d->params.p, d->params.q, d->opts.window, d->opts.commit,
			d->input == QL_QEC_INPUT_DETECTORS ? "detectors" : "measurements");
}
