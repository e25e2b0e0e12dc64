/* SPDX-License-Identifier: MIT */
/*
 * The VPPU's QEC streaming mode (include/qlink/qec_wire.h): the quantum
 * program of a surface-code memory experiment, played over any VPPU
 * client. Per shot: the simulation's frames (qlink/qec.h, the seed's
 * sequence), one enqueue_syndromes per round at the round rate (the
 * round's stabilizer outcomes, or its detection events), then
 * get_corrections with reset=1; the correction is applied to the true
 * observable and a logical error counted when it stays flipped. Calls are
 * pipelined up to the window and answered in order; the backlog is rounds
 * sent minus rounds answered.
 *
 * It lives in the qec module, above vppu: QEC drives a VPPU client (struct
 * ql_vppu_client, qlink/vppu.h) and the VPPU knows nothing of QEC, so the
 * two modules depend one way only.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "qlink/clock.h"
#include "qlink/error.h"
#include "qlink/qec.h"
#include "qlink/qec_wire.h"
#include "qlink/rpc.h"

enum kind { K_RESET, K_ROUND, K_GET };

struct pend {
	uint64_t sent_ns;
	uint8_t kind;
	uint8_t obs; /* K_GET: the shot's true observable flip */
};

struct stream {
	const struct ql_vppu_client *cl;
	const struct ql_vppu_qec_config *cfg;
	struct ql_vppu_qec_report *rep;
	struct ql_qec_code *code;
	struct ql_qec_sim *sim;
	uint8_t *frames; /* the shot's rounds+1 frames */
	uint8_t *raw;	 /* the stabilizer outcomes sent last (measurements input) */
	uint8_t *msg;
	uint32_t msg_cap;
	size_t fbytes;
	unsigned ndet, nframes;
	struct pend *pend;
	uint64_t mask;
	uint64_t sent, recv;
	uint64_t rounds_answered;
	/* the cursor: shot, and its step (reset, frames 0..rounds, get) */
	uint64_t shot;
	unsigned step;
	bool reset_done, generated;
	uint8_t obs;
};

#define FNV64_OFFSET 0xcbf29ce484222325ull
#define FNV64_PRIME 0x100000001b3ull

static uint64_t hash_shot(uint64_t h, uint8_t flip, uint8_t err)
{
	return (h ^ (uint64_t)(flip | (err << 1))) * FNV64_PRIME;
}

static int send_call(struct stream *s, enum kind k, uint64_t now)
{
	const struct ql_vppu_qec_config *cfg = s->cfg;
	struct ql_rpc_header h = {
		.magic = QL_RPC_MAGIC_REQUEST,
		.request_id = (uint32_t)s->sent,
		.ptp_timestamp = now,
	};
	uint8_t *args = s->msg + QL_RPC_HEADER_SIZE;
	const uint8_t *frame = s->frames + (size_t)s->step * s->fbytes;
	int len, ret;

	switch (k) {
	case K_RESET:
		h.function_id = QL_QEC_FN_RESET_DECODER;
		ql_qec_reset_encode(args, cfg->decoder_id);
		len = QL_QEC_RESET_ARGS;
		break;
	case K_ROUND:
		h.function_id = QL_QEC_FN_ENQUEUE_SYNDROMES;
		len = ql_qec_enqueue_encode(args, s->msg_cap - QL_RPC_HEADER_SIZE, cfg->decoder_id,
					    s->step, frame, s->ndet);
		if (len < 0)
			return len;
		if (cfg->input == QL_QEC_INPUT_MEASUREMENTS) /* outcome = last ^ event */
			for (size_t i = 0; i < s->fbytes; i++)
				args[QL_QEC_ENQUEUE_FIXED + i] ^= s->raw[i];
		break;
	default:
		h.function_id = QL_QEC_FN_GET_CORRECTIONS;
		ql_qec_get_corrections_encode(args, cfg->decoder_id, 1, 1);
		len = QL_QEC_GET_CORRECTIONS_ARGS;
		break;
	}
	h.arg_len = (uint32_t)len;
	ql_rpc_header_encode(s->msg, &h);
	ret = s->cl->send(s->cl->cl, s->msg, QL_RPC_HEADER_SIZE + (uint32_t)len);
	if (ret)
		return ret;
	if (k == K_ROUND && cfg->input == QL_QEC_INPUT_MEASUREMENTS)
		memcpy(s->raw, args + QL_QEC_ENQUEUE_FIXED, s->fbytes);
	s->pend[s->sent & s->mask] =
		(struct pend){ .sent_ns = now, .kind = (uint8_t)k, .obs = s->obs };
	s->sent++;
	s->rep->calls_sent++;
	return 0;
}

/* Send what is due; 0, or the client's negative errno. */
static int send_due(struct stream *s, uint64_t now, uint64_t *due, uint64_t period, uint64_t window)
{
	const struct ql_vppu_qec_config *cfg = s->cfg;
	struct ql_vppu_qec_report *rep = s->rep;
	int ret = 0;

	while (s->shot < cfg->shots && s->sent - s->recv < window) {
		if (!s->reset_done && (s->shot == 0 || cfg->reset_each_shot)) {
			ret = send_call(s, K_RESET, now);
			if (ret)
				break;
			s->reset_done = true;
			continue;
		}
		if (!s->generated) {
			ret = ql_qec_sim_shot(s->sim, s->frames, &s->obs);
			if (ret)
				return ql_error_set(ret, "qec stream: the simulation failed");
			memset(s->raw, 0, s->fbytes);
			s->generated = true;
		}
		if (s->step < s->nframes) {
			if (period && now < *due)
				break;
			ret = send_call(s, K_ROUND, now);
			if (ret)
				break;
			if (period && now - *due > period)
				rep->late++;
			*due += period;
			rep->rounds_sent++;
			if (rep->rounds_sent - s->rounds_answered > rep->backlog_max)
				rep->backlog_max = rep->rounds_sent - s->rounds_answered;
			s->step++;
			continue;
		}
		ret = send_call(s, K_GET, now);
		if (ret)
			break;
		s->shot++;
		s->step = 0;
		s->generated = false;
		s->reset_done = false;
		if (s->shot == cfg->shots)
			rep->backlog_final = rep->rounds_sent - s->rounds_answered;
	}
	return ret == -EAGAIN ? 0 : ret;
}

static void take(struct stream *s, const struct ql_ring_response *r, uint64_t now)
{
	struct ql_vppu_qec_report *rep = s->rep;
	const struct pend *p = &s->pend[s->recv & s->mask];
	struct ql_rpc_response rh;

	s->recv++;
	rep->responses++;
	if (p->kind == K_ROUND)
		s->rounds_answered++;
	if (!r->msg || r->len < QL_RPC_RESPONSE_SIZE) {
		rep->unexpected++;
		return;
	}
	ql_rpc_response_decode(r->msg, &rh);
	if (rh.magic != QL_RPC_MAGIC_RESPONSE || rh.request_id != (uint32_t)(s->recv - 1) ||
	    rh.result_len > r->len - QL_RPC_RESPONSE_SIZE) {
		rep->unexpected++;
		return;
	}
	if (rh.status) {
		if (!rep->errors)
			rep->first_error = rh.status;
		rep->errors++;
		return;
	}
	switch (p->kind) {
	case K_ROUND:
		rep->rounds_decoded++;
		ql_hist_record(&rep->round_rtt_ns, now - p->sent_ns);
		break;
	case K_GET:
		ql_hist_record(&rep->shot_rtt_ns, now - p->sent_ns);
		if (rh.result_len < 1) {
			rep->unexpected++;
			break;
		}
		{
			uint8_t flip = r->msg[QL_RPC_RESPONSE_SIZE] & 1, err = flip ^ p->obs;

			rep->shots++;
			rep->logical_errors += err;
			rep->error_hash = hash_shot(rep->error_hash, flip, err);
		}
		break;
	default:
		break;
	}
}

static int reap(struct stream *s)
{
	struct ql_ring_response r[16];
	int n = s->cl->poll(s->cl->cl, r, 16);
	uint64_t now;

	if (n <= 0)
		return n;
	now = ql_clock_ns();
	for (int i = 0; i < n; i++) {
		if (s->recv == s->sent)
			s->rep->unexpected++; /* nothing was asked */
		else
			take(s, &r[i], now);
		s->cl->release(s->cl->cl, &r[i]);
	}
	return n;
}

static void stream_free(struct stream *s)
{
	ql_qec_sim_destroy(s->sim);
	ql_qec_code_destroy(s->code);
	free(s->frames);
	free(s->raw);
	free(s->msg);
	free(s->pend);
}

static int stream_setup(struct stream *s, uint64_t window)
{
	const struct ql_qec_params *pp = &s->cfg->params;
	uint64_t cap = 1;
	int ret;

	ret = ql_qec_code_create(pp->distance, &s->code);
	if (!ret)
		ret = ql_qec_sim_create(s->code, pp, &s->sim);
	if (ret)
		return ret;
	s->ndet = ql_qec_code_detectors(s->code);
	s->fbytes = ql_qec_frame_bytes(s->code);
	s->nframes = pp->rounds + 1;
	s->msg_cap = QL_RPC_HEADER_SIZE + (uint32_t)ql_qec_enqueue_arg_len(s->ndet);
	if (s->msg_cap < QL_RPC_HEADER_SIZE + QL_QEC_GET_CORRECTIONS_ARGS)
		s->msg_cap = QL_RPC_HEADER_SIZE + QL_QEC_GET_CORRECTIONS_ARGS;
	if (window > QL_RING_MAX_SLOTS)
		window = QL_RING_MAX_SLOTS;
	while (cap < window)
		cap <<= 1;
	s->mask = cap - 1;
	s->frames = calloc(s->nframes, s->fbytes);
	s->raw = calloc(1, s->fbytes);
	s->msg = calloc(1, s->msg_cap);
	s->pend = calloc(cap, sizeof(*s->pend));
	if (!s->frames || !s->raw || !s->msg || !s->pend)
		return -ENOMEM;
	return 0;
}

int ql_vppu_qec_run(const struct ql_vppu_client *cl, const struct ql_vppu_qec_config *cfg,
		    struct ql_vppu_qec_report *rep)
{
	struct stream s = { .cl = cl, .cfg = cfg, .rep = rep };
	uint64_t window, period = 0, timeout, start, due, now, next_tick, end;
	int ret;

	if (!cl || !cl->cl || !cl->send || !cl->poll || !cl->release || !cl->max_msg || !cfg ||
	    !rep || cfg->round_rate_hz < 0)
		return -EINVAL;
	if (!cfg->shots)
		return ql_error_set(-EINVAL, "qec stream: no shots to run");
	memset(rep, 0, sizeof(*rep));
	ql_hist_init(&rep->round_rtt_ns);
	ql_hist_init(&rep->shot_rtt_ns);
	rep->error_hash = FNV64_OFFSET;
	window = cfg->window ? cfg->window : QL_RING_MAX_SLOTS;
	ret = stream_setup(&s, window);
	if (!ret && s.msg_cap > cl->max_msg(cl->cl))
		ret = ql_error_set(-EMSGSIZE,
				   "qec stream: a round (%u bytes) does not fit a slot (%u)",
				   s.msg_cap, cl->max_msg(cl->cl));
	if (ret) {
		stream_free(&s);
		return ret;
	}
	if (cfg->round_rate_hz > 0)
		period = (uint64_t)(1e9 / cfg->round_rate_hz + 0.5);
	timeout = cfg->timeout_ns ? cfg->timeout_ns : 5000000000ull;
	start = ql_clock_ns();
	due = start;
	next_tick = start + cfg->tick_ns;
	for (;;) {
		now = ql_clock_ns();
		if (cfg->stop && *cfg->stop) {
			rep->stopped = 1;
			break;
		}
		if (s.sent > s.recv && now - s.pend[s.recv & s.mask].sent_ns > timeout) {
			rep->timed_out = 1;
			break;
		}
		if (cfg->tick && now >= next_tick) {
			cfg->tick(cfg->tick_ctx);
			next_tick = now + cfg->tick_ns;
		}
		if (s.shot >= cfg->shots && s.recv == s.sent)
			break;
		ret = send_due(&s, now, &due, period, window);
		if (ret)
			break;
		ret = reap(&s);
		if (ret < 0)
			break;
		ret = 0;
	}
	/* what is still in flight gets until its deadline, unless stopped */
	end = !ret && !rep->stopped && s.sent > s.recv ?
		      s.pend[(s.sent - 1) & s.mask].sent_ns + timeout :
		      0;
	while (!ret && s.recv < s.sent && ql_clock_ns() < end && !(cfg->stop && *cfg->stop)) {
		ret = reap(&s);
		if (ret > 0)
			ret = 0;
	}
	if (ret < 0)
		rep->transport_error = ret;
	if (s.shot < cfg->shots)
		rep->backlog_final = rep->rounds_sent - s.rounds_answered;
	rep->lost = s.sent - s.recv;
	if (rep->lost)
		rep->timed_out = rep->timed_out || !rep->stopped;
	rep->elapsed_s = (double)(ql_clock_ns() - start) / 1e9;
	rep->rounds_per_s = rep->elapsed_s > 0 ? (double)rep->rounds_decoded / rep->elapsed_s : 0;
	stream_free(&s);
	return 0;
}

int ql_vppu_qec_offline(const struct ql_vppu_qec_config *cfg, struct ql_vppu_qec_report *rep)
{
	struct ql_qec_code *code = NULL;
	struct ql_qec_sim *sim = NULL;
	struct ql_qec_decoder *dec = NULL;
	uint8_t *frames = NULL;
	size_t fb;
	unsigned nframes;
	uint64_t t0;
	int ret;

	if (!cfg || !rep)
		return -EINVAL;
	memset(rep, 0, sizeof(*rep));
	ql_hist_init(&rep->round_rtt_ns);
	ql_hist_init(&rep->shot_rtt_ns);
	rep->error_hash = FNV64_OFFSET;
	ret = ql_qec_code_create(cfg->params.distance, &code);
	if (!ret)
		ret = ql_qec_sim_create(code, &cfg->params, &sim);
	if (!ret)
		ret = ql_qec_decoder_create(code, &cfg->params, &cfg->opts, &dec);
	if (ret)
		goto out;
	fb = ql_qec_frame_bytes(code);
	nframes = cfg->params.rounds + 1;
	frames = calloc(nframes, fb);
	if (!frames) {
		ret = -ENOMEM;
		goto out;
	}
	t0 = ql_clock_ns();
	for (uint64_t n = 0; n < cfg->shots && !ret; n++) {
		uint8_t obs, flip = 0;

		ret = ql_qec_sim_shot(sim, frames, &obs);
		ql_qec_decoder_reset(dec);
		for (unsigned r = 0; !ret && r + 1 < nframes; r++)
			ret = ql_qec_decoder_push(dec, frames + (size_t)r * fb);
		if (!ret)
			ret = ql_qec_decoder_finish(dec, frames + (size_t)(nframes - 1) * fb,
						    &flip);
		if (!ret) {
			rep->shots++;
			rep->logical_errors += flip ^ obs;
			rep->error_hash = hash_shot(rep->error_hash, flip, flip ^ obs);
			rep->rounds_sent += nframes;
			rep->rounds_decoded += nframes;
		}
	}
	rep->elapsed_s = (double)(ql_clock_ns() - t0) / 1e9;
	rep->rounds_per_s = rep->elapsed_s > 0 ? (double)rep->rounds_decoded / rep->elapsed_s : 0;
out:
	free(frames);
	ql_qec_decoder_destroy(dec);
	ql_qec_sim_destroy(sim);
	ql_qec_code_destroy(code);
	return ret;
}

void ql_vppu_qec_report_json(const struct ql_vppu_qec_report *rep, FILE *f)
{
	const struct ql_hist *r = &rep->round_rtt_ns, *g = &rep->shot_rtt_ns;

	fprintf(f,
		"{\"shots\":%" PRIu64 ",\"logical_errors\":%" PRIu64 ",\"error_hash\":\"%016" PRIx64
		"\",\"rounds_sent\":%" PRIu64 ",\"rounds_decoded\":%" PRIu64
		",\"backlog_max\":%" PRIu64 ",\"backlog_final\":%" PRIu64 ",\"calls_sent\":%" PRIu64
		",\"responses\":%" PRIu64 ",\"errors\":%" PRIu64
		",\"first_error\":%d,\"unexpected\":%" PRIu64 ",\"late\":%" PRIu64
		",\"lost\":%" PRIu64
		",\"elapsed_s\":%.6f,\"rounds_per_s\":%.1f,\"transport_error\":%d,"
		"\"timed_out\":%s,\"stopped\":%s,"
		"\"round_rtt_ns\":{\"p50\":%" PRIu64 ",\"p99\":%" PRIu64 ",\"max\":%" PRIu64
		"},\"shot_rtt_ns\":{\"p50\":%" PRIu64 ",\"p99\":%" PRIu64 ",\"max\":%" PRIu64 "}}",
		rep->shots, rep->logical_errors, rep->error_hash, rep->rounds_sent,
		rep->rounds_decoded, rep->backlog_max, rep->backlog_final, rep->calls_sent,
		rep->responses, rep->errors, rep->first_error, rep->unexpected, rep->late,
		rep->lost, rep->elapsed_s, rep->rounds_per_s, rep->transport_error,
		rep->timed_out ? "true" : "false", rep->stopped ? "true" : "false",
		ql_hist_percentile(r, 50), ql_hist_percentile(r, 99), ql_hist_max(r),
		ql_hist_percentile(g, 50), ql_hist_percentile(g, 99), ql_hist_max(g));
}
