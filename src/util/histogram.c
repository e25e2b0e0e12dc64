/* SPDX-License-Identifier: MIT */
/* Percentiles, merging and resetting of latency histograms (see qlink/histogram.h). */
#include "qlink/histogram.h"

#include <string.h>

int ql_hist_init(struct ql_hist *h)
{
	memset(h, 0, sizeof(*h));
	h->min = UINT64_MAX;
	return 0;
}

void ql_hist_reset(struct ql_hist *h)
{
	ql_hist_init(h);
}

/* The middle of bucket idx: every value in the bucket is within half its
 * width of it, which is what bounds the relative error. */
static uint64_t bucket_mid(unsigned int idx)
{
	unsigned int shift = idx < 2 * QL_HIST_SUB_COUNT ? 0 : (idx >> QL_HIST_SUB_BITS) - 1;
	uint64_t lo = (uint64_t)(idx - (shift << QL_HIST_SUB_BITS)) << shift;

	return lo + ((1ull << shift) >> 1);
}

uint64_t ql_hist_percentile(const struct ql_hist *h, double p)
{
	uint64_t rank, seen = 0;
	double exact_rank;
	uint64_t v;

	if (!h->count)
		return 0;
	if (!(p > 0)) /* also NaN */
		return h->min;
	if (p >= 100)
		return h->max;
	/* p * count first: 99 * 100 / 100 is exactly 99, 0.99 * 100 is not.
	 * Rounded up by hand, which spares the library a libm dependency. */
	exact_rank = p * (double)h->count / 100.0;
	rank = (uint64_t)exact_rank;
	if ((double)rank < exact_rank)
		rank++;
	if (rank < 1)
		rank = 1;
	if (rank > h->count)
		rank = h->count;
	for (unsigned int i = 0; i < QL_HIST_BUCKETS; i++) {
		seen += h->counts[i];
		if (seen >= rank) {
			v = bucket_mid(i);
			/* The extremes are known exactly; never report beyond them. */
			if (v < h->min)
				v = h->min;
			if (v > h->max)
				v = h->max;
			return v;
		}
	}
	return h->max; /* counts disagree with count: only after a torn copy */
}

void ql_hist_merge(struct ql_hist *dst, const struct ql_hist *src)
{
	if (!src->count)
		return;
	for (unsigned int i = 0; i < QL_HIST_BUCKETS; i++)
		dst->counts[i] += src->counts[i];
	dst->count += src->count;
	dst->sum += src->sum;
	if (src->min < dst->min)
		dst->min = src->min;
	if (src->max > dst->max)
		dst->max = src->max;
}
