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
 * each its distance, rounds, noise, p, q, window). Each session (one QCS)
 * gets its own decoders, made when its functions are registered, so
 * handlers of different sessions share nothing but the immutable codes;
 * handlers allocate nothing. The module carries its own copy of what it
 * needs of libqlink (static, hidden) and exports ql_plugin_info alone
 * (plugin.map).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

struct session {
	struct session *next;
	struct qdec *by_id[QL_QEC_MAX_DECODERS];
	unsigned n;
	struct qdec decs[];
};

struct plugin {
	struct ql_qec_wire_decoder cfg[QL_QEC_MAX_DECODERS];
	struct ql_qec_code *code[QL_QEC_MAX_DECODERS];
	unsigned n;
	pthread_mutex_t lock; /* sessions */
	struct session *sessions;
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
	if (st == QL_QEC_OK)
		st = enqueue(ctx, &e);
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

	if (st == QL_QEC_OK && !(q = find(ctx, g.decoder_id)))
		st = QL_QEC_E_DECODER;
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
		q = find(ctx, id);
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

static void plugin_fini(void *state)
{
	struct plugin *p = state;

	if (!p)
		return;
	while (p->sessions) {
		struct session *s = p->sessions;

		p->sessions = s->next;
		session_free(s);
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
	struct session *s;
	char msg[160];
	int ret = session_new(p, &s);

	if (ret)
		return ret;
	pthread_mutex_lock(&p->lock);
	s->next = p->sessions;
	p->sessions = s;
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
};

QL_PLUGIN_EXPORT const struct ql_plugin_info *ql_plugin_info(void);

const struct ql_plugin_info *ql_plugin_info(void)
{
	return &info;
}
