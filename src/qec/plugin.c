/* SPDX-License-Identifier: MIT */
/*
 * qlink-qec.so: the surface-code decoder (qlink/qec.h) as a qlinkd plugin,
 * serving CUDA-Q QEC's three decoder functions with their ids, payloads
 * and statuses (qlink/qec_wire.h; docs/qec.md, "Over the wire"):
 *
 *   enqueue_syndromes  one round of a shot: counter = the round (0..rounds,
 *                      in order), its syndromes the round's stabilizer
 *                      outcomes (or detection events, `input=detectors`);
 *                      round `rounds` is the final readout and finishes
 *                      the shot. Decoded as it arrives (the sliding window).
 *   get_corrections    the shot's logical correction (return_size <= 1
 *                      observable), and with reset=1 a new shot
 *   reset_decoder      a new shot
 *
 * Decoders come from the config string (ql_qec_wire_parse: several ids,
 * each its distance, rounds, noise, p, q, window). Each session (one QCS,
 * or one `udp:` listener) gets its own decoders, made when its functions
 * are registered, and within it each request source its own (struct
 * table below: QL_PLUGIN_PER_SOURCE), so handlers of different sessions
 * and callers share nothing but the immutable codes; handlers allocate
 * nothing. The module carries its own copy of what it
 * needs of libqlink (static, hidden) and exports ql_plugin_info alone
 * (plugin.map).
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "qlink/error.h"
#include "qlink/plugin.h"
#include "qlink/qec.h"
#include "qlink/qec_wire.h"
#include "qlink/rpc.h"

/* One decoder of one session. */
struct qdec {
	const struct ql_qec_wire_decoder *cfg;
	struct ql_qec_decoder *dec;
	uint8_t *prev;	/* the last round's outcomes (measurements input) */
	uint8_t *frame; /* this round's detection events */
	size_t fbytes;
	unsigned ndet;
	uint64_t next; /* the counter expected next: 0..rounds */
	int finished;
	uint8_t flip;
};

/* The decoders of one caller: every configured decoder, its own shots. */
struct session {
	struct qdec *by_id[QL_QEC_MAX_DECODERS];
	unsigned n;
	struct qdec decs[];
};

/*
 * Per-source state. A qlinkd session (a QCS's ring, or a `udp:` listener
 * every allowed sender reaches) gets a table of QEC_SOURCES decoder sets,
 * made when its functions are registered; each request is served by the
 * set of its source (registrar->request_source: address and port). A
 * session with one peer (ring, hsb) has a single source (key length 0).
 * A new source takes a free entry, else the least recently used entry
 * that is idle: every decoder between shots (nothing enqueued since its
 * last reset) or unused for QEC_IDLE_NS; the entry's decoders are reset
 * for it. With none idle the request is refused with QL_QEC_E_DECODER
 * and nothing is touched: no source can reset, feed or read another's
 * shot.
 */
#define QEC_SOURCES 8u
#define QEC_IDLE_NS 10000000000ull /* 10 s */

struct source {
	uint8_t klen; /* 0: unused, or the single source of a one-peer session */
	bool used;
	uint8_t key[QL_PLUGIN_SOURCE_MAX];
	uint64_t last_ns;
	struct session *s;
};

struct table {
	struct table *next;
	size_t (*source)(void *host, uint8_t *key, size_t cap); /* NULL: one source */
	struct source src[QEC_SOURCES];
};

struct plugin {
	struct ql_qec_wire_decoder cfg[QL_QEC_MAX_DECODERS];
	struct ql_qec_code *code[QL_QEC_MAX_DECODERS];
	unsigned n;
	pthread_mutex_t lock; /* tables */
	struct table *tables;
};

static void shot_reset(struct qdec *q)
{
	ql_qec_decoder_reset(q->dec);
	memset(q->prev, 0, q->fbytes);
	q->next = 0;
	q->finished = 0;
	q->flip = 0;
}

static struct qdec *find(struct session *s, int64_t id)
{
	return id >= 0 && id < (int64_t)QL_QEC_MAX_DECODERS ? s->by_id[id] : NULL;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	/* the vDSO: no system call */
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* No shot in progress on any of its decoders. */
static bool between_shots(const struct session *s)
{
	for (unsigned i = 0; i < s->n; i++)
		if (s->decs[i].next)
			return false;
	return true;
}

/* The decoders of the request's source; NULL when the table is full of
 * busy sources. */
static struct session *pick(struct table *t)
{
	uint8_t key[QL_PLUGIN_SOURCE_MAX];
	size_t klen = t->source ? t->source(NULL, key, sizeof(key)) : 0;
	struct source *victim = NULL;
	uint64_t now = now_ns();

	if (klen > sizeof(key))
		klen = 0;
	for (unsigned i = 0; i < QEC_SOURCES; i++) {
		struct source *e = &t->src[i];

		if (e->used && e->klen == klen && !memcmp(e->key, key, klen)) {
			e->last_ns = now;
			return e->s;
		}
	}
	for (unsigned i = 0; i < QEC_SOURCES; i++) {
		struct source *e = &t->src[i];

		if (!e->used) {
			victim = e;
			break;
		}
		if ((between_shots(e->s) || now - e->last_ns >= QEC_IDLE_NS) &&
		    (!victim || e->last_ns < victim->last_ns))
			victim = e;
	}
	if (!victim)
		return NULL;
	for (unsigned i = 0; i < victim->s->n; i++)
		shot_reset(&victim->s->decs[i]);
	victim->used = true;
	victim->klen = (uint8_t)klen;
	memcpy(victim->key, key, klen);
	victim->last_ns = now;
	return victim->s;
}

/* ---- the handlers (frame handlers: CUDA-QX writes negative statuses) ------ */

static int32_t enqueue(struct session *s, const struct ql_qec_enqueue *e)
{
	struct qdec *q = find(s, e->decoder_id);
	const uint8_t *det = e->bits;
	int ret;

	if (!q)
		return QL_QEC_E_DECODER;
	if (e->num_syndromes != q->ndet || q->finished || e->counter < 0 ||
	    (uint64_t)e->counter != q->next)
		return QL_QEC_E_INVALID;
	if (q->cfg->input == QL_QEC_INPUT_MEASUREMENTS) {
		/* a detection event: this outcome differs from the last one */
		for (size_t i = 0; i < q->fbytes; i++) {
			q->frame[i] = e->bits[i] ^ q->prev[i];
			q->prev[i] = e->bits[i];
		}
		det = q->frame;
	} else {
		memcpy(q->frame, e->bits, q->fbytes);
		det = q->frame;
	}
	if (q->ndet & 7) /* the wire's unused high bits are not ours to trust */
		q->frame[q->fbytes - 1] &= (uint8_t)((1u << (q->ndet & 7)) - 1);
	if (q->next < q->cfg->params.rounds) {
		ret = ql_qec_decoder_push(q->dec, det);
	} else {
		ret = ql_qec_decoder_finish(q->dec, det, &q->flip);
		q->finished = !ret;
	}
	if (ret)
		return QL_QEC_E_DECODER;
	q->next++;
	return QL_QEC_OK;
}

static int32_t h_enqueue(const uint8_t *req, size_t req_len, uint8_t *resp, size_t resp_cap,
			 void *ctx)
{
	struct ql_qec_enqueue e;
	int32_t st =
		ql_qec_enqueue_decode(req + QL_RPC_HEADER_SIZE, req_len - QL_RPC_HEADER_SIZE, &e);

	(void)resp_cap;
	if (st == QL_QEC_OK) {
		struct session *s = pick(ctx);

		st = s ? enqueue(s, &e) : QL_QEC_E_DECODER;
	}
	ql_rpc_frame_respond(req, resp, st, 0);
	return 0;
}

static int32_t h_get_corrections(const uint8_t *req, size_t req_len, uint8_t *resp, size_t resp_cap,
				 void *ctx)
{
	struct ql_qec_get_corrections g;
	struct qdec *q = NULL;
	size_t len = 0;
	int32_t st = ql_qec_get_corrections_decode(req + QL_RPC_HEADER_SIZE,
						   req_len - QL_RPC_HEADER_SIZE, &g);

	if (st == QL_QEC_OK) {
		struct session *s = pick(ctx);

		if (!s || !(q = find(s, g.decoder_id)))
			st = QL_QEC_E_DECODER;
	}
	if (st == QL_QEC_OK && g.return_size > 1) /* one observable: the logical Z */
		st = QL_QEC_E_INVALID;
	if (st == QL_QEC_OK) {
		len = ql_qec_corrections_len(g.return_size);
		if (QL_RPC_RESPONSE_SIZE + len > resp_cap)
			st = QL_QEC_E_REPLY_SIZE;
		else if (g.return_size && !q->finished)
			st = QL_QEC_E_DECODER; /* the shot's final readout has not come */
	}
	if (st == QL_QEC_OK) {
		memset(resp + QL_RPC_RESPONSE_SIZE, 0, len);
		if (g.return_size)
			resp[QL_RPC_RESPONSE_SIZE] = q->flip & 1;
		if (g.reset)
			shot_reset(q);
	}
	ql_rpc_frame_respond(req, resp, st, st == QL_QEC_OK ? (uint32_t)len : 0);
	return 0;
}

static int32_t h_reset(const uint8_t *req, size_t req_len, uint8_t *resp, size_t resp_cap,
		       void *ctx)
{
	int64_t id;
	struct qdec *q;
	int32_t st =
		ql_qec_reset_decode(req + QL_RPC_HEADER_SIZE, req_len - QL_RPC_HEADER_SIZE, &id);

	(void)resp_cap;
	if (st == QL_QEC_OK) {
		struct session *s = pick(ctx);

		q = s ? find(s, id) : NULL;
		if (q)
			shot_reset(q);
		else
			st = QL_QEC_E_DECODER;
	}
	ql_rpc_frame_respond(req, resp, st, 0);
	return 0;
}

/* ---- sessions ------------------------------------------------------------------ */

static void session_free(struct session *s)
{
	for (unsigned i = 0; i < s->n; i++) {
		ql_qec_decoder_destroy(s->decs[i].dec);
		free(s->decs[i].prev);
		free(s->decs[i].frame);
	}
	free(s);
}

static int session_new(struct plugin *p, struct session **out)
{
	struct session *s = calloc(1, sizeof(*s) + p->n * sizeof(struct qdec));
	int ret = 0;

	if (!s)
		return -ENOMEM;
	for (unsigned i = 0; i < p->n && !ret; i++) {
		struct qdec *q = &s->decs[i];

		q->cfg = &p->cfg[i];
		q->ndet = ql_qec_code_detectors(p->code[i]);
		q->fbytes = ql_qec_frame_bytes(p->code[i]);
		q->prev = calloc(1, q->fbytes);
		q->frame = calloc(1, q->fbytes);
		s->n++;
		if (!q->prev || !q->frame)
			ret = -ENOMEM;
		else
			ret = ql_qec_decoder_create(p->code[i], &p->cfg[i].params, &p->cfg[i].opts,
						    &q->dec);
		if (!ret) {
			shot_reset(q);
			s->by_id[p->cfg[i].id] = q;
		}
	}
	if (ret) {
		session_free(s);
		return ret;
	}
	*out = s;
	return 0;
}

static void table_free(struct table *t)
{
	for (unsigned i = 0; i < QEC_SOURCES; i++)
		if (t->src[i].s)
			session_free(t->src[i].s);
	free(t);
}

static int table_new(struct plugin *p, struct table **out)
{
	struct table *t = calloc(1, sizeof(*t));
	int ret = 0;

	if (!t)
		return -ENOMEM;
	for (unsigned i = 0; i < QEC_SOURCES && !ret; i++)
		ret = session_new(p, &t->src[i].s);
	if (ret) {
		table_free(t);
		return ret;
	}
	*out = t;
	return 0;
}

static void plugin_fini(void *state)
{
	struct plugin *p = state;

	if (!p)
		return;
	while (p->tables) {
		struct table *t = p->tables;

		p->tables = t->next;
		table_free(t);
	}
	for (unsigned i = 0; i < p->n; i++)
		ql_qec_code_destroy(p->code[i]);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

static int plugin_init(const char *config, void **state)
{
	struct plugin *p = calloc(1, sizeof(*p));
	struct session *probe;
	int ret;

	if (!p)
		return -ENOMEM;
	pthread_mutex_init(&p->lock, NULL);
	ret = ql_qec_wire_parse(config, p->cfg, QL_QEC_MAX_DECODERS, &p->n);
	for (unsigned i = 0; !ret && i < p->n; i++)
		ret = ql_qec_code_create(p->cfg[i].params.distance, &p->code[i]);
	/* a decoder the configuration cannot make fails the load, not a session */
	if (!ret)
		ret = session_new(p, &probe);
	if (!ret)
		session_free(probe);
	if (ret) {
		/* the loader reports the errno; the detail lives in our copy of
		 * libqlink, so say it here */
		fprintf(stderr, "qlink-qec: %s\n",
			ql_error_detail()[0] ? ql_error_detail() : strerror(-ret));
		plugin_fini(p);
		return ret;
	}
	*state = p;
	return 0;
}

static int plugin_register(void *state, const struct ql_plugin_registrar *reg)
{
	struct plugin *p = state;
	struct table *s;
	char msg[160];
	int ret = table_new(p, &s);

	if (ret)
		return ret;
	/* a version 2 host has no request_source: one source per session */
	s->source = reg->abi_version >= 3 ? reg->request_source : NULL;
	pthread_mutex_lock(&p->lock);
	s->next = p->tables;
	p->tables = s;
	pthread_mutex_unlock(&p->lock);
	ret = reg->register_function(reg->host,
				     &QL_RPC_FRAME_FUNCTION("enqueue_syndromes", h_enqueue, s));
	if (!ret)
		ret = reg->register_function(
			reg->host, &QL_RPC_FRAME_FUNCTION("get_corrections", h_get_corrections, s));
	if (!ret)
		ret = reg->register_function(reg->host,
					     &QL_RPC_FRAME_FUNCTION("reset_decoder", h_reset, s));
	if (!ret && reg->log) {
		for (unsigned i = 0; i < p->n; i++) {
			ql_qec_wire_format(&p->cfg[i], msg, sizeof(msg));
			reg->log(reg->host, QL_LOG_DEBUG, msg);
		}
	}
	return ret;
}

static const struct ql_plugin_info info = {
	.abi_version = QL_PLUGIN_ABI_VERSION,
	.name = "qec",
	.version = "1.0",
	.init = plugin_init,
	.fini = plugin_fini,
	.register_functions = plugin_register,
	.flags = QL_PLUGIN_PER_SOURCE,
};

QL_PLUGIN_EXPORT const struct ql_plugin_info *ql_plugin_info(void);

const struct ql_plugin_info *ql_plugin_info(void)
{
	return &info;
}
