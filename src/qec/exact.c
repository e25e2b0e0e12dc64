/* SPDX-License-Identifier: MIT */
/*
 * The exact decoder, for cross-checking the union-find one on small codes.
 * It shares nothing with decoder.c but the code's stabilizer supports.
 *
 * Minimum-weight decoding of graph-like errors is a minimum-weight T-join
 * (T: the defects, the boundary free). Such a T-join splits into walks
 * that pair the defects (or take one to the boundary), so its weight and
 * its observable parity are those of the best pairing of shortest walks
 * of each parity. This decoder finds those walks by Dijkstra on the
 * decoding graph doubled by observable parity, then the best pairing by
 * dynamic programming over all subsets of defects: exact, exponential in
 * the number of defects, for small codes only.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "qec/qec_internal.h"
#include "qlink/error.h"

#define EX_MAX_DEFECTS 20
#define EX_MAX_NODES 512
#define INF 1e300

struct ex_edge {
	uint32_t a, b; /* b == nodes: the boundary */
	double w;
	uint8_t obs;
};

struct ex_graph {
	unsigned nodes, nedges;
	struct ex_edge *e;
	/* adjacency, CSR */
	unsigned *first, *list;
};

static int build(const struct ql_qec_code *c, const struct ql_qec_params *pa, struct ex_graph *g)
{
	unsigned rounds = pa->noise == QL_QEC_CODE_CAPACITY ? 0 : pa->rounds;
	unsigned layers = rounds + 1, data_layers = rounds ? rounds : 1, k = 0;
	double wp = -ql__qec_ln(pa->p > 1e-12 ? pa->p : 1e-12) + ql__qec_ln(1 - pa->p);
	double wq = -ql__qec_ln(pa->q > 1e-12 ? pa->q : 1e-12) + ql__qec_ln(1 - pa->q);

	g->nodes = layers * c->nd;
	g->nedges = data_layers * c->nq + rounds * c->nd;
	g->e = calloc(g->nedges, sizeof(*g->e));
	g->first = calloc(g->nodes + 2, sizeof(unsigned));
	g->list = calloc(2 * g->nedges, sizeof(unsigned));
	if (!g->e || !g->first || !g->list)
		return -ENOMEM;
	for (unsigned t = 0; t < data_layers; t++)
		for (unsigned q = 0; q < c->nq; q++) {
			/* the Z checks on q, read off the supports */
			unsigned ends[2] = { 0, 0 }, ne = 0;

			for (unsigned s = 0; s < c->nd; s++)
				for (unsigned j = 0; j < c->nsup[s]; j++)
					if (c->sup[s][j] == q && ne < 2)
						ends[ne++] = s;
			g->e[k].a = t * c->nd + ends[0];
			g->e[k].b = ne == 2 ? t * c->nd + ends[1] : g->nodes;
			g->e[k].w = wp;
			g->e[k].obs = q < c->d; /* data row 0 */
			k++;
		}
	for (unsigned t = 0; t < rounds; t++)
		for (unsigned s = 0; s < c->nd; s++) {
			g->e[k].a = t * c->nd + s;
			g->e[k].b = (t + 1) * c->nd + s;
			g->e[k].w = wq;
			k++;
		}
	for (unsigned i = 0; i < k; i++) {
		g->first[g->e[i].a + 1]++;
		g->first[g->e[i].b + 1]++;
	}
	for (unsigned i = 1; i <= g->nodes + 1; i++)
		g->first[i] += g->first[i - 1];
	{
		unsigned *fill = calloc(g->nodes + 1, sizeof(unsigned));

		if (!fill)
			return -ENOMEM;
		for (unsigned i = 0; i < k; i++) {
			g->list[g->first[g->e[i].a] + fill[g->e[i].a]++] = i;
			g->list[g->first[g->e[i].b] + fill[g->e[i].b]++] = i;
		}
		free(fill);
	}
	return 0;
}

/* Shortest walks of each observable parity from src: dist[2*node + par],
 * the boundary (node == nodes) a sink. O(V^2) Dijkstra: V is small. */
static void dijkstra(const struct ex_graph *g, unsigned src, double *dist, uint8_t *done)
{
	unsigned V = 2 * (g->nodes + 1);

	for (unsigned i = 0; i < V; i++) {
		dist[i] = INF;
		done[i] = 0;
	}
	dist[2 * src] = 0;
	for (;;) {
		unsigned best = V;

		for (unsigned i = 0; i < V; i++)
			if (!done[i] && dist[i] < INF && (best == V || dist[i] < dist[best]))
				best = i;
		if (best == V)
			break;
		done[best] = 1;
		if (best / 2 == g->nodes)
			continue;
		for (unsigned j = g->first[best / 2]; j < g->first[best / 2 + 1]; j++) {
			const struct ex_edge *e = &g->e[g->list[j]];
			unsigned other = e->a == best / 2 ? e->b : e->a;
			unsigned to = 2 * other + ((best & 1) ^ e->obs);

			if (dist[best] + e->w < dist[to])
				dist[to] = dist[best] + e->w;
		}
	}
}

int ql_qec_decode_exact(const struct ql_qec_code *c, const struct ql_qec_params *pa,
			const uint8_t *frames, uint8_t *observable_flip)
{
	struct ex_graph g = { 0 };
	unsigned def[EX_MAX_DEFECTS], k = 0, rounds;
	double *pd = NULL, *dist = NULL, *f = NULL;
	uint8_t *done = NULL;
	int rc;

	if (!frames || !observable_flip)
		return -EINVAL;
	rc = ql__qec_params_check(c, pa);
	if (rc)
		return rc;
	rounds = pa->noise == QL_QEC_CODE_CAPACITY ? 0 : pa->rounds;
	if (c->d > 5 || (rounds + 1) * c->nd > EX_MAX_NODES)
		return ql_error_set(-E2BIG,
				    "exact decoder: d = %u, %u rounds: too big (d <= 5, "
				    "at most %u detectors in all)",
				    c->d, rounds, EX_MAX_NODES);
	for (unsigned t = 0; t <= rounds; t++)
		for (unsigned s = 0; s < c->nd; s++)
			if (ql__qec_bit(frames + t * c->frame_bytes, s)) {
				if (k == EX_MAX_DEFECTS)
					return ql_error_set(-E2BIG,
							    "exact decoder: more than %u defects",
							    EX_MAX_DEFECTS);
				def[k++] = t * c->nd + s;
			}
	*observable_flip = 0;
	if (!k)
		return 0;
	rc = build(c, pa, &g);
	if (rc)
		goto out;
	rc = -ENOMEM;
	/* pd[(i*(k+1) + j)*2 + par]: defect i to defect j (j == k: boundary) */
	pd = malloc((size_t)k * (k + 1) * 2 * sizeof(double));
	dist = malloc(2 * (g.nodes + 1) * sizeof(double));
	done = malloc(2 * (g.nodes + 1));
	f = malloc(((size_t)1 << k) * 2 * sizeof(double));
	if (!pd || !dist || !done || !f)
		goto out;
	for (unsigned i = 0; i < k; i++) {
		dijkstra(&g, def[i], dist, done);
		for (unsigned j = 0; j <= k; j++)
			for (unsigned b = 0; b < 2; b++)
				pd[(i * (k + 1) + j) * 2 + b] =
					dist[2 * (j == k ? g.nodes : def[j]) + b];
	}
	/* f[mask*2 + par]: the lightest way to pair off the defects in mask
	 * with observable parity par; the lowest defect of mask goes first */
	f[0] = 0;
	f[1] = INF;
	for (size_t mask = 1; mask < ((size_t)1 << k); mask++) {
		unsigned i = (unsigned)__builtin_ctzll(mask);
		size_t rest = mask & ~((size_t)1 << i);

		for (unsigned b = 0; b < 2; b++) {
			double best = INF;

			for (unsigned pb = 0; pb < 2; pb++) {
				double x = f[rest * 2 + (b ^ pb)] + pd[(i * (k + 1) + k) * 2 + pb];

				if (x < best)
					best = x;
				for (unsigned j = i + 1; j < k; j++) {
					if (!((rest >> j) & 1))
						continue;
					x = f[(rest & ~((size_t)1 << j)) * 2 + (b ^ pb)] +
					    pd[(i * (k + 1) + j) * 2 + pb];
					if (x < best)
						best = x;
				}
			}
			f[mask * 2 + b] = best;
		}
	}
	{
		size_t all = ((size_t)1 << k) - 1;
		double w0 = f[all * 2], w1 = f[all * 2 + 1];

		/* ties (to rounding) go to no flip */
		*observable_flip = w1 < w0 - 1e-9 * (w0 < INF ? w0 + 1 : 1);
	}
	rc = 0;
out:
	free(g.e);
	free(g.first);
	free(g.list);
	free(pd);
	free(dist);
	free(done);
	free(f);
	return rc;
}
