/* SPDX-License-Identifier: MIT */
/*
 * The real-time decoder: union-find with weighted growth and peeling
 * (Delfosse and Nickerson, "Almost-linear time decoding algorithm for
 * topological codes", 2021: the odd clusters with the smallest boundary
 * grow first, by half edges) over the space-time decoding graph, with edge
 * lengths from the log-likelihood weights of data and measurement errors
 * (as in Huang, Newman and Brown, "Fault-tolerant weighted union-find
 * decoding on the toric code", 2020), in a sliding window.
 *
 * The window holds up to W rounds of detection events (a ring of bitsets).
 * When it is full, the W rounds are decoded with an open top (a detector
 * of the newest round may match the future through a time edge), and the
 * correction is kept for the oldest C rounds only: their space edges
 * become data corrections, and a chosen time edge from round C-1 to round
 * C flips that detector of round C, which stays in the window. The window
 * then slides by C. finish() decodes what is left with the perfect final
 * round closing the top.
 *
 * Work is proportional to the defects: vertex and edge state carries the
 * number of the decode that last wrote it (an epoch), so nothing is
 * cleared between windows, and only clusters grown from defects are ever
 * visited. All arrays are sized for a window at creation.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "qec/qec_internal.h"
#include "qlink/error.h"

#define DW 2 /* words per detector bitset: 112 detectors at d = 15 */
_Static_assert(QL_QEC_MAX_DET <= DW * 64, "detector bitset too small");
#define NONE QL_QEC_NONE
#define MAX_LEN 64 /* longest edge, in growth steps */

struct vtx {
	uint32_t stamp;	       /* epoch of the decode that touched it; else untouched */
	uint32_t parent;       /* union-find */
	uint32_t size;	       /* at a root: vertices in the cluster */
	uint32_t blen;	       /* at a root: vertices in its growth list */
	uint32_t head, tail;   /* at a root: vertices that may still grow */
	uint32_t next;	       /* in that list */
	uint32_t pedge, pnode; /* peeling forest: edge and vertex towards the root */
	uint32_t amark;	       /* growth step it was last queued as active in */
	uint8_t odd, bnd;      /* at a root: odd defect count; touches the boundary */
	uint8_t def, seen;     /* defect (parity while peeling); in the forest */
};

struct edge_st {
	uint32_t stamp;
	uint32_t sup; /* growth so far, 0..len */
};

struct inc {
	uint32_t e, u, len;
};

struct fuse {
	uint32_t v, u;
};

struct ql_qec_decoder {
	const struct ql_qec_code *code;
	unsigned n, nq, W, C, cc;
	uint32_t lp, lq; /* edge lengths: data flip, measurement error */
	uint32_t ntime0; /* first time-edge id: W*nq */
	/* the pending rounds: ring slot (ring0 + l) % W holds window layer l */
	uint64_t (*ring)[DW];
	unsigned np; /* rounds pending */
	unsigned ring0;
	int finished;
	uint64_t corr[QL_QEC_WORDS];
	uint8_t obs;
	uint64_t work_v, work_e; /* vertices and edges visited (tests) */
	/* the decode in progress */
	uint32_t epoch, gstep;
	unsigned L, space_layers, top_open, commit;
	struct vtx *v;
	struct edge_st *es;
	uint32_t *active, *active2, *order;
	struct fuse *fuse;
	size_t nv, ne;
};

/* The edges at vertex v (detector s of window layer l), computed from the
 * one-round graph rather than stored: space edges where the layer has data
 * noise, the time edge down, the time edge up (to the boundary above an
 * open top). Returns how many (at most 6). */
static inline unsigned incident(const struct ql_qec_decoder *d, uint32_t v, struct inc out[6])
{
	unsigned l = v / d->n, s = v - l * d->n, k = 0;

	if (l < d->space_layers) {
		const struct ql_qec_code *c = d->code;

		for (unsigned a = 0; a < c->deg[s]; a++) {
			uint32_t to = c->adj[s][a].to;

			out[k].e = l * d->nq + c->adj[s][a].q;
			out[k].u = to == NONE ? NONE : l * d->n + to;
			out[k].len = d->lp;
			k++;
		}
	}
	if (l > 0) {
		out[k].e = d->ntime0 + (l - 1) * d->n + s;
		out[k].u = v - d->n;
		out[k].len = d->lq;
		k++;
	}
	if (l + 1 < d->L || d->top_open) {
		out[k].e = d->ntime0 + l * d->n + s;
		out[k].u = l + 1 < d->L ? v + d->n : NONE;
		out[k].len = d->lq;
		k++;
	}
	return k;
}

static inline uint32_t sup_get(const struct ql_qec_decoder *d, uint32_t e)
{
	return d->es[e].stamp == d->epoch ? d->es[e].sup : 0;
}

static inline int touched(const struct ql_qec_decoder *d, uint32_t v)
{
	return d->v[v].stamp == d->epoch;
}

static inline void touch(struct ql_qec_decoder *d, uint32_t v, uint8_t def)
{
	struct vtx *x = &d->v[v];

	x->stamp = d->epoch;
	x->parent = v;
	x->size = 1;
	x->blen = 1;
	x->head = x->tail = v;
	x->next = NONE;
	x->amark = 0;
	x->odd = def;
	x->bnd = 0;
	x->def = def;
	x->seen = 0;
}

static inline uint32_t find(struct ql_qec_decoder *d, uint32_t v)
{
	while (d->v[v].parent != v) {
		d->v[v].parent = d->v[d->v[v].parent].parent; /* path halving */
		v = d->v[v].parent;
	}
	return v;
}

static inline void list_append(struct ql_qec_decoder *d, uint32_t r, uint32_t h, uint32_t t)
{
	if (h == NONE)
		return;
	if (d->v[r].head == NONE)
		d->v[r].head = h;
	else
		d->v[d->v[r].tail].next = h;
	d->v[r].tail = t;
}

/* Grow cluster r by one unit on every edge its list vertices still have;
 * edges that become full go to the fusion list. Vertices left with no
 * growing edge leave the list. Returns how many units were added. */
static unsigned grow(struct ql_qec_decoder *d, uint32_t r, unsigned *nf)
{
	uint32_t prev = NONE, v = d->v[r].head;
	unsigned added = 0;

	while (v != NONE) {
		struct inc in[6];
		unsigned k = incident(d, v, in), open = 0;
		uint32_t next = d->v[v].next;

		for (unsigned i = 0; i < k; i++) {
			uint32_t e = in[i].e, s = sup_get(d, e);

			if (s >= in[i].len)
				continue;
			d->work_e += d->es[e].stamp != d->epoch;
			d->es[e].stamp = d->epoch;
			d->es[e].sup = ++s;
			added++;
			if (s == in[i].len) {
				d->fuse[*nf].v = v;
				d->fuse[*nf].u = in[i].u;
				(*nf)++;
			} else {
				open = 1;
			}
		}
		if (!open) { /* nothing left to grow from v */
			d->v[r].blen--;
			if (prev == NONE)
				d->v[r].head = next;
			else
				d->v[prev].next = next;
			if (d->v[r].tail == v)
				d->v[r].tail = prev;
		} else {
			prev = v;
		}
		v = next;
	}
	return added;
}

static void apply_edge(struct ql_qec_decoder *d, uint32_t e)
{
	if (e < d->ntime0) {
		unsigned l = e / d->nq, q = e - l * d->nq;

		if (l < d->commit) {
			d->corr[q >> 6] ^= 1ull << (q & 63);
			d->obs ^= d->code->obs[q];
		}
	} else {
		unsigned k = e - d->ntime0, l = k / d->n, s = k - l * d->n;

		/* a measurement error across the commit line: the detector
		 * above it, still pending, changes */
		if (l + 1 == d->commit && d->commit < d->L) {
			unsigned slot = (d->ring0 + d->commit) % d->W;

			d->ring[slot][s >> 6] ^= 1ull << (s & 63);
		}
	}
}

static int decode_window(struct ql_qec_decoder *d)
{
	unsigned na = 0, nord = 0;

	if (++d->epoch == 0) { /* wrapped: forget every stamp */
		for (size_t i = 0; i < d->nv; i++)
			d->v[i].stamp = 0;
		for (size_t i = 0; i < d->ne; i++)
			d->es[i].stamp = 0;
		d->epoch = 1;
	}
	/* defects */
	for (unsigned l = 0; l < d->L; l++) {
		const uint64_t *w = d->ring[(d->ring0 + l) % d->W];

		for (unsigned i = 0; i < DW; i++)
			for (uint64_t b = w[i]; b; b &= b - 1) {
				uint32_t v = l * d->n + i * 64 + (unsigned)__builtin_ctzll(b);

				touch(d, v, 1);
				d->active[na++] = v;
				d->order[nord++] = v;
			}
	}
	/* growth: every odd cluster that does not touch the boundary grows */
	while (na) {
		unsigned nf = 0, added = 0, na2 = 0;

		uint32_t smallest = UINT32_MAX;

		/* weighted growth: only the smallest odd clusters grow */
		for (unsigned i = 0; i < na; i++)
			if (d->v[d->active[i]].blen < smallest)
				smallest = d->v[d->active[i]].blen;
		for (unsigned i = 0; i < na; i++)
			if (d->v[d->active[i]].blen == smallest)
				added += grow(d, d->active[i], &nf);
		if (!added)
			return -EIO; /* an odd cluster with nowhere to grow */
		for (unsigned i = 0; i < nf; i++) {
			uint32_t rv = find(d, d->fuse[i].v), u = d->fuse[i].u, ru;

			if (u == NONE) {
				d->v[rv].bnd = 1;
				continue;
			}
			if (!touched(d, u)) {
				touch(d, u, 0);
				d->order[nord++] = u;
				d->v[u].parent = rv;
				d->v[rv].size++;
				d->v[rv].blen++;
				list_append(d, rv, u, u);
				continue;
			}
			ru = find(d, u);
			if (ru == rv)
				continue;
			if (d->v[ru].size > d->v[rv].size) {
				uint32_t t = ru;

				ru = rv;
				rv = t;
			}
			/* ru joins rv */
			d->v[ru].parent = rv;
			d->v[rv].size += d->v[ru].size;
			d->v[rv].blen += d->v[ru].blen;
			d->v[rv].odd ^= d->v[ru].odd;
			d->v[rv].bnd |= d->v[ru].bnd;
			list_append(d, rv, d->v[ru].head, d->v[ru].tail);
		}
		if (++d->gstep == 0)
			d->gstep = 1; /* amark 0 means never queued */
		for (unsigned i = 0; i < na; i++) {
			uint32_t r = find(d, d->active[i]);
			struct vtx *x = &d->v[r];

			if (x->odd && !x->bnd && x->amark != d->gstep) {
				x->amark = d->gstep;
				d->active2[na2++] = r;
			}
		}
		{
			uint32_t *t = d->active;

			d->active = d->active2;
			d->active2 = t;
		}
		na = na2;
	}
	d->work_v += nord;
	/* peeling: a spanning forest of the full edges, rooted at the
	 * boundary where a cluster reaches it (the order array is reused as
	 * the BFS queue, after the list of touched vertices it held) */
	{
		unsigned ntouched = nord, qh, qt;
		uint32_t *q = d->active; /* free now; as long as order */

		qt = 0;
		for (unsigned i = 0; i < ntouched; i++) {
			uint32_t v = d->order[i];
			struct inc in[6];
			unsigned k = incident(d, v, in);

			for (unsigned j = 0; j < k; j++)
				if (in[j].u == NONE && sup_get(d, in[j].e) >= in[j].len) {
					d->v[v].seen = 1;
					d->v[v].pedge = in[j].e;
					d->v[v].pnode = NONE;
					q[qt++] = v;
					break;
				}
		}
		qh = 0;
		for (unsigned i = 0;; i++) {
			while (qh < qt) {
				uint32_t v = q[qh++];
				struct inc in[6];
				unsigned k = incident(d, v, in);

				for (unsigned j = 0; j < k; j++) {
					uint32_t u = in[j].u;

					if (u == NONE || !touched(d, u) || d->v[u].seen ||
					    sup_get(d, in[j].e) < in[j].len)
						continue;
					d->v[u].seen = 1;
					d->v[u].pedge = in[j].e;
					d->v[u].pnode = v;
					q[qt++] = u;
				}
			}
			while (i < ntouched && d->v[d->order[i]].seen)
				i++;
			if (i >= ntouched)
				break;
			d->v[d->order[i]].seen = 1;
			d->v[d->order[i]].pedge = NONE;
			d->v[d->order[i]].pnode = NONE;
			q[qt++] = d->order[i];
		}
		/* leaves first: a vertex with odd parity takes its parent edge */
		while (qt--) {
			struct vtx *x = &d->v[q[qt]];

			if (!x->def)
				continue;
			if (x->pedge == NONE)
				return -EIO; /* an odd cluster: cannot happen */
			apply_edge(d, x->pedge);
			x->def = 0;
			if (x->pnode != NONE)
				d->v[x->pnode].def ^= 1;
		}
	}
	return 0;
}

static void load(struct ql_qec_decoder *d, unsigned slot, const uint8_t *frame)
{
	uint64_t *w = d->ring[slot];
	size_t nb = d->code->frame_bytes;

	w[0] = w[1] = 0;
	for (size_t b = 0; b < nb; b++)
		w[b >> 3] |= (uint64_t)frame[b] << ((b & 7) * 8);
	if (d->n % 64) /* bits past the last detector mean nothing */
		w[d->n / 64] &= (1ull << (d->n % 64)) - 1;
}

static uint32_t edge_len(double w, double wmin)
{
	double x = 2 * w / wmin + 0.5;

	if (!(x < MAX_LEN))
		return MAX_LEN;
	return x < 1 ? 1 : (uint32_t)x;
}

/* Edge weight log((1-p)/p), from a probability kept inside (0, 0.5). */
static double weight(double p)
{
	if (p < 1e-12)
		p = 1e-12;
	if (p > 0.45)
		p = 0.45;
	return ql__qec_ln((1 - p) / p);
}

int ql_qec_decoder_create(const struct ql_qec_code *code, const struct ql_qec_params *params,
			  const struct ql_qec_decoder_opts *opts, struct ql_qec_decoder **out)
{
	struct ql_qec_decoder *d;
	unsigned W, C;
	int rc;

	if (!out)
		return -EINVAL;
	*out = NULL;
	rc = ql__qec_params_check(code, params);
	if (rc)
		return rc;
	W = opts && opts->window ? opts->window : 2 * code->d;
	C = opts && opts->commit ? opts->commit : (W + 1) / 2;
	if (params->noise == QL_QEC_CODE_CAPACITY) {
		W = 1; /* one round, decoded by finish */
		C = 1;
	} else if (W < 2 || C >= W || W > 4096) {
		return ql_error_set(-EINVAL,
				    "qec decoder: window %u, commit %u: need 2 <= window <= 4096 "
				    "and 1 <= commit < window",
				    W, C);
	}
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->code = code;
	d->n = code->nd;
	d->nq = code->nq;
	d->W = W;
	d->C = C;
	d->cc = params->noise == QL_QEC_CODE_CAPACITY;
	if (d->cc) {
		d->lp = d->lq = 2;
	} else {
		double wp = weight(params->p), wq = weight(params->q);
		double wmin = wp < wq ? wp : wq;

		d->lp = edge_len(wp, wmin);
		d->lq = edge_len(wq, wmin);
	}
	d->ntime0 = W * d->nq;
	d->nv = (size_t)W * d->n;
	d->ne = (size_t)W * d->nq + (size_t)W * d->n;
	d->ring = calloc(W, sizeof(*d->ring));
	d->v = calloc(d->nv, sizeof(*d->v));
	d->es = calloc(d->ne, sizeof(*d->es));
	d->active = malloc(d->nv * sizeof(uint32_t));
	d->active2 = malloc(d->nv * sizeof(uint32_t));
	d->order = malloc(d->nv * sizeof(uint32_t));
	/* a growth step fills at most every edge once, each from one side */
	d->fuse = malloc(2 * d->ne * sizeof(*d->fuse));
	if (!d->ring || !d->v || !d->es || !d->active || !d->active2 || !d->order || !d->fuse) {
		ql_qec_decoder_destroy(d);
		return -ENOMEM;
	}
	*out = d;
	return 0;
}

void ql_qec_decoder_destroy(struct ql_qec_decoder *d)
{
	if (!d)
		return;
	free(d->ring);
	free(d->v);
	free(d->es);
	free(d->active);
	free(d->active2);
	free(d->order);
	free(d->fuse);
	free(d);
}

int ql_qec_decoder_push(struct ql_qec_decoder *d, const uint8_t *frame)
{
	int rc;

	if (!d || !frame)
		return -EINVAL;
	if (d->cc)
		return -EINVAL;
	if (d->finished)
		return -EALREADY;
	load(d, (d->ring0 + d->np) % d->W, frame);
	if (++d->np < d->W)
		return 0;
	d->L = d->W;
	d->space_layers = d->W;
	d->top_open = 1;
	d->commit = d->C;
	rc = decode_window(d);
	d->ring0 = (d->ring0 + d->C) % d->W;
	d->np -= d->C;
	return rc;
}

int ql_qec_decoder_finish(struct ql_qec_decoder *d, const uint8_t *final_frame,
			  uint8_t *observable_flip)
{
	int rc;

	if (!d || !final_frame || !observable_flip)
		return -EINVAL;
	if (d->finished)
		return -EALREADY;
	load(d, (d->ring0 + d->np) % d->W, final_frame);
	d->np++;
	d->L = d->np;
	d->space_layers = d->cc ? 1 : d->np - 1; /* the final readout adds no data error */
	d->top_open = 0;
	d->commit = d->np;
	rc = decode_window(d);
	d->finished = 1;
	*observable_flip = d->obs;
	return rc;
}

int ql_qec_decoder_corrections(const struct ql_qec_decoder *d, uint8_t *bits, size_t nbits)
{
	if (!d || !bits || nbits < d->nq)
		return -EINVAL;
	memset(bits, 0, (nbits + 7) / 8);
	for (unsigned q = 0; q < d->nq; q++)
		if ((d->corr[q >> 6] >> (q & 63)) & 1)
			bits[q >> 3] |= (uint8_t)(1u << (q & 7));
	return 0;
}

void ql_qec_decoder_reset(struct ql_qec_decoder *d)
{
	if (!d)
		return;
	memset(d->ring, 0, d->W * sizeof(*d->ring));
	memset(d->corr, 0, sizeof(d->corr));
	d->np = 0;
	d->ring0 = 0;
	d->finished = 0;
	d->obs = 0;
	d->work_v = d->work_e = 0;
}

void ql__qec_decoder_work(const struct ql_qec_decoder *d, uint64_t *vertices, uint64_t *edges)
{
	*vertices = d->work_v;
	*edges = d->work_e;
}
