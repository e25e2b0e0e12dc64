/* SPDX-License-Identifier: MIT */
/*
 * histogram: latency distributions in nanoseconds, recorded without cost.
 *
 * Benchmarks, the dispatchers and the VPPU record one value per round trip,
 * so recording must be a few instructions: no allocation, lock or system
 * call. The buckets are log-linear, as in HdrHistogram: values below 256 are
 * exact, and every power-of-two range above is split into 128 equal
 * sub-buckets. Any uint64_t can be recorded (no clamping), and a reported
 * percentile is within QL_HIST_REL_ERROR (1/256, 0.4 %) of the exact one.
 *
 * A histogram has one writer at a time; threads each keep their own and
 * ql_hist_merge() them when reading. The structure is public and fixed-size
 * (about 58 KiB), so it can live in shared memory or inside another struct.
 */
#ifndef QLINK_HISTOGRAM_H
#define QLINK_HISTOGRAM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define QL_HIST_SUB_BITS 7
#define QL_HIST_SUB_COUNT (1u << QL_HIST_SUB_BITS) /* sub-buckets per power of two */
/* Shifts 0..(64 - SUB_BITS - 1), each covering SUB_COUNT buckets, plus the
 * first SUB_COUNT exact values. */
#define QL_HIST_BUCKETS ((64 - QL_HIST_SUB_BITS + 1) * QL_HIST_SUB_COUNT)
/* Bound on |reported - exact| / exact for percentiles (half a bucket). */
#define QL_HIST_REL_ERROR (1.0 / (2 * QL_HIST_SUB_COUNT))

struct ql_hist {
	uint64_t count;
	uint64_t sum; /* wraps after 584 years of recorded time */
	uint64_t min; /* UINT64_MAX while empty */
	uint64_t max;
	uint64_t counts[QL_HIST_BUCKETS];
};

#ifdef __cplusplus
static_assert(sizeof(struct ql_hist) <= 64 * 1024, "ql_hist must stay under 64 KiB");
#else
_Static_assert(sizeof(struct ql_hist) <= 64 * 1024, "ql_hist must stay under 64 KiB");
#endif

/* Make h empty. Always returns 0. */
int ql_hist_init(struct ql_hist *h);
/* Same as ql_hist_init: forget every recorded value. */
void ql_hist_reset(struct ql_hist *h);

/* Bucket of a value: the shift is how many low bits the bucket ignores. */
static inline unsigned int ql__hist_index(uint64_t v)
{
	/* OR-ing SUB_COUNT makes values below it land on shift 0 (exact). */
	unsigned int shift = 63 - __builtin_clzll(v | QL_HIST_SUB_COUNT) - QL_HIST_SUB_BITS;

	return (shift << QL_HIST_SUB_BITS) + (unsigned int)(v >> shift);
}

static inline void ql_hist_record(struct ql_hist *h, uint64_t ns)
{
	h->counts[ql__hist_index(ns)]++;
	h->count++;
	h->sum += ns;
	if (ns < h->min)
		h->min = ns;
	if (ns > h->max)
		h->max = ns;
}

/*
 * The value at percentile p (0..100, clamped): the smallest recorded value
 * with at least ceil(p/100 * count) values at or below it, approximated to
 * QL_HIST_REL_ERROR. p = 0 gives the exact minimum and p = 100 the exact
 * maximum. 0 when the histogram is empty.
 */
uint64_t ql_hist_percentile(const struct ql_hist *h, double p);

/* Add every value recorded in src to dst. */
void ql_hist_merge(struct ql_hist *dst, const struct ql_hist *src);

static inline uint64_t ql_hist_count(const struct ql_hist *h)
{
	return h->count;
}

/* Exact minimum; 0 when empty. */
static inline uint64_t ql_hist_min(const struct ql_hist *h)
{
	return h->count ? h->min : 0;
}

/* Exact maximum; 0 when empty. */
static inline uint64_t ql_hist_max(const struct ql_hist *h)
{
	return h->max;
}

/* Exact mean (from the running sum); 0 when empty. */
static inline double ql_hist_mean(const struct ql_hist *h)
{
	return h->count ? (double)h->sum / (double)h->count : 0.0;
}

#ifdef __cplusplus
}
#endif
#endif
