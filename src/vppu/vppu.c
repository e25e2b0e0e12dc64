/* SPDX-License-Identifier: MIT */
/*
 * The virtual PPU (see include/qlink/vppu.h): a QCS in software, the
 * developer's test partner and the benchmark client.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "qlink/client.h"
#include "qlink/clock.h"
#include "qlink/error.h"
#include "qlink/rpc.h"
#include "qlink/vppu.h"

/* Nanoseconds from TSC ticks, relative to the start of a run. */
struct vclock {
	uint64_t tsc0;
	uint64_t ns0;	   /* CLOCK_MONOTONIC at tsc0 */
	uint64_t mult_q32; /* ns per tick, 32.32 */
};

static void vclock_init(struct vclock *c)
{
	c->mult_q32 = (uint64_t)((double)(1ull << 32) / ql_tsc_ghz());
	c->ns0 = ql_clock_ns();
	c->tsc0 = ql_tsc();
}

static inline uint64_t vclock_ns(const struct vclock *c)
{
	return c->ns0 + (uint64_t)(((unsigned __int128)(ql_tsc() - c->tsc0) * c->mult_q32) >> 32);
}

struct run {
	const struct ql_vppu_client *cl;
	const struct ql_vppu_call *call;
	struct ql_vppu_report *rep;
	struct vclock clk;
	uint8_t *msg;
	uint64_t *sent_ns; /* send time of call n at [n & sent_mask] */
	uint64_t sent_mask;
	uint32_t msg_len;
	uint32_t fid;
	uint64_t last_rx_ns;
};

static int send_one(struct run *r, uint64_t n, uint64_t now)
{
	struct ql_rpc_header h = {
		.magic = QL_RPC_MAGIC_REQUEST,
		.function_id = r->fid,
		.arg_len = r->call->arg_len,
		.request_id = (uint32_t)n,
		.ptp_timestamp = now,
	};

	ql_rpc_header_encode(r->msg, &h);
	if (r->call->make_args)
		r->call->make_args(r->call->ctx, n, r->msg + QL_RPC_HEADER_SIZE);
	return r->cl->send(r->cl->cl, r->msg, r->msg_len);
}

/* Take whatever responses arrived; returns how many or a negative errno. */
static int reap(struct run *r)
{
	struct ql_ring_response resp[16];
	struct ql_vppu_report *rep = r->rep;
	int n = r->cl->poll(r->cl->cl, resp, 16);
	uint64_t now;

	if (n <= 0)
		return n;
	now = vclock_ns(&r->clk);
	for (int i = 0; i < n; i++) {
		struct ql_rpc_response rh;
		uint64_t want = rep->received; /* the client hands answers in order */

		rep->received++;
		if (!resp[i].msg) {
			/* UC: given up after its resends (the client counts it) */
			r->cl->release(r->cl->cl, &resp[i]);
			continue;
		}
		if (resp[i].len >= QL_RPC_RESPONSE_SIZE)
			ql_rpc_response_decode(resp[i].msg, &rh);
		if (resp[i].len < QL_RPC_RESPONSE_SIZE || rh.magic != QL_RPC_MAGIC_RESPONSE ||
		    rh.request_id != (uint32_t)want) {
			rep->unexpected++;
		} else {
			ql_hist_record(&rep->rtt_ns, now - rh.ptp_timestamp);
			if (rh.status && !rep->first_error_status) {
				rep->first_error_status = rh.status;
				rep->first_error_call = want;
			}
			if (rh.status < 0)
				rep->protocol_errors++;
			else if (rh.status > 0)
				rep->handler_errors++;
			else if (rh.result_len > resp[i].len - QL_RPC_RESPONSE_SIZE ||
				 (r->call->check &&
				  r->call->check(r->call->ctx, want, rh.status,
						 resp[i].msg + QL_RPC_RESPONSE_SIZE,
						 rh.result_len)))
				rep->wrong++;
			else
				rep->ok++;
		}
		r->cl->release(r->cl->cl, &resp[i]);
	}
	r->last_rx_ns = now;
	return n;
}

/* Calls in flight are at most the window and the ring's slots: one send
 * time per possible call in flight, a power of two for masking. */
static int alloc_sent_times(struct run *r, uint64_t window)
{
	uint64_t cap = 1;

	if (window > QL_RING_MAX_SLOTS)
		window = QL_RING_MAX_SLOTS;
	while (cap < window)
		cap <<= 1;
	r->sent_ns = calloc(cap, sizeof(*r->sent_ns));
	r->sent_mask = cap - 1;
	return r->sent_ns ? 0 : -ENOMEM;
}

/* The oldest call in flight has waited longer than timeout. */
static inline bool oldest_timed_out(const struct run *r, uint64_t now, uint64_t timeout)
{
	const struct ql_vppu_report *rep = r->rep;

	return rep->sent > rep->received &&
	       now - r->sent_ns[rep->received & r->sent_mask] > timeout;
}

/* Send what is due (closed loop: all the window allows); paced calls that
 * are due leave back to back. 0 or the client's negative errno. */
static int send_due(struct run *r, uint64_t now, uint64_t *due, uint64_t period, uint64_t window,
		    uint64_t target)
{
	struct ql_vppu_report *rep = r->rep;
	int ret = 0;

	while ((!period || now >= *due) && rep->sent - rep->received < window &&
	       !(target && rep->sent >= target)) {
		ret = send_one(r, rep->sent, now);
		if (ret)
			break;
		if (period && now - *due > period)
			rep->late++;
		r->sent_ns[rep->sent & r->sent_mask] = now;
		rep->sent++;
		*due += period;
	}
	return ret == -EAGAIN ? 0 : ret;
}

/* The VPPU's four calls on any ql_client (client.h). */
static int client_send(void *cl, const void *msg, uint32_t len)
{
	return ql_client_send(cl, msg, len);
}

static int client_poll(void *cl, struct ql_ring_response *out, int max)
{
	return ql_client_poll(cl, out, max);
}

static int client_release(void *cl, const struct ql_ring_response *r)
{
	return ql_client_release(cl, r);
}

static uint32_t client_max_msg(const void *cl)
{
	return ql_client_max_msg(cl);
}

static int client_stats(const void *cl, struct ql_ring_client_stats *st)
{
	struct ql_client_stats cs;

	ql_client_stats(cl, &cs);
	*st = (struct ql_ring_client_stats){ .resent = cs.resent,
					     .lost = cs.lost,
					     .dup_responses = cs.dup_responses };
	return 0;
}

void ql_vppu_client_of(struct ql_vppu_client *c, struct ql_client *cl)
{
	*c = (struct ql_vppu_client){ .cl = cl,
				      .send = client_send,
				      .poll = client_poll,
				      .release = client_release,
				      .max_msg = client_max_msg,
				      .stats = client_stats };
}

void ql_vppu_client_udp(struct ql_vppu_client *c, struct ql_udp_client *cl)
{
	ql_vppu_client_of(c, ql_client_from_udp(cl));
}

void ql_vppu_client_ring(struct ql_vppu_client *c, struct ql_ring_client *cl)
{
	ql_vppu_client_of(c, ql_client_from_ring(cl));
}

void ql_vppu_client_hsb(struct ql_vppu_client *c, struct ql_hsb_client *cl)
{
	ql_vppu_client_of(c, ql_client_from_hsb(cl));
}

int ql_vppu_run(struct ql_ring_client *cl, const struct ql_vppu_call *call,
		const struct ql_vppu_config *cfg, struct ql_vppu_report *rep)
{
	struct ql_vppu_client c;

	if (!cl)
		return -EINVAL;
	ql_vppu_client_ring(&c, cl);
	return ql_vppu_run_client(&c, call, cfg, rep);
}

int ql_vppu_run_client(const struct ql_vppu_client *cl, const struct ql_vppu_call *call,
		       const struct ql_vppu_config *cfg, struct ql_vppu_report *rep)
{
	struct run r = { .cl = cl, .call = call, .rep = rep };
	struct ql_ring_client_stats st0;
	uint64_t start, end, target, timeout, window, period = 0, due, next_tick, now;
	int ret = 0;

	if (!cl || !cl->cl || !cl->send || !cl->poll || !cl->release || !cl->max_msg || !call ||
	    !call->function || !cfg || !rep)
		return -EINVAL;
	if (cfg->rate_hz < 0 || (!cfg->count && !cfg->duration_ns))
		return ql_error_set(-EINVAL, "vppu: give a call count or a duration");
	memset(rep, 0, sizeof(*rep));
	ql_hist_init(&rep->rtt_ns);
	if (!cl->stats || cl->stats(cl->cl, &st0))
		memset(&st0, 0, sizeof(st0));
	r.msg_len = QL_RPC_HEADER_SIZE + call->arg_len;
	if (r.msg_len > cl->max_msg(cl->cl))
		return ql_error_set(-EMSGSIZE, "vppu: %u bytes of arguments do not fit a slot",
				    call->arg_len);
	window = cfg->window ? cfg->window : UINT32_MAX; /* the client caps it */
	r.msg = calloc(1, r.msg_len);
	if (!r.msg || alloc_sent_times(&r, window)) {
		free(r.msg);
		return -ENOMEM;
	}
	r.fid = call->function_id ? call->function_id : ql_rpc_fnv1a(call->function);
	timeout = cfg->timeout_ns ? cfg->timeout_ns : 5000000000ull;
	if (cfg->rate_hz > 0)
		period = (uint64_t)(1e9 / cfg->rate_hz);
	target = cfg->count;
	if (!target && period)
		target = cfg->duration_ns / period;

	vclock_init(&r.clk);
	start = vclock_ns(&r.clk);
	end = cfg->count ? UINT64_MAX : start + cfg->duration_ns;
	due = start;
	next_tick = start + cfg->tick_ns;
	for (;;) {
		now = vclock_ns(&r.clk);
		if (cfg->stop && *cfg->stop) {
			rep->stopped = 1;
			break;
		}
		if (oldest_timed_out(&r, now, timeout)) {
			rep->timed_out = 1;
			break;
		}
		if (cfg->tick && now >= next_tick) {
			cfg->tick(cfg->tick_ctx);
			next_tick = now + cfg->tick_ns;
		}
		if ((target && rep->sent >= target) || (!target && now >= end))
			break;
		ret = send_due(&r, now, &due, period, window, target);
		if (ret)
			break;
		ret = reap(&r);
		if (ret < 0)
			break;
		ret = 0;
	}
	/* Drain: every call in flight gets until its own deadline (the newest
	 * call's is the last); a stop request does not wait. */
	if (!ret && !rep->stopped && rep->sent > rep->received)
		end = r.sent_ns[(rep->sent - 1) & r.sent_mask] + timeout;
	else
		end = 0;
	while (!ret && rep->received < rep->sent && vclock_ns(&r.clk) < end &&
	       !(cfg->stop && *cfg->stop)) {
		ret = reap(&r);
		if (ret > 0)
			ret = 0;
	}
	/* One more poll whatever ended the run: the transport's own
	 * protocol work for the last answer (soft+udp in caller progress
	 * holds its ACK for the next round, docs/progress.md §4) goes out
	 * now, before the caller ends the session. */
	if (!ret) {
		int last = reap(&r);

		if (last < 0)
			ret = last;
	}
	if (ret < 0)
		rep->transport_error = ret;
	now = vclock_ns(&r.clk);
	for (uint64_t n = rep->received; n < rep->sent; n++)
		if (now - r.sent_ns[n & r.sent_mask] > timeout)
			rep->timeouts++;
	if (rep->timeouts)
		rep->timed_out = 1;
	{
		struct ql_ring_client_stats st;

		/* this run's share of the client's counts */
		if (cl->stats && !cl->stats(cl->cl, &st)) {
			rep->resent = st.resent - st0.resent;
			rep->gave_up = st.lost - st0.lost;
			rep->dup_responses = st.dup_responses - st0.dup_responses;
		}
	}
	rep->lost = rep->sent - rep->received + rep->gave_up;
	rep->elapsed_s =
		(double)((r.last_rx_ns > start ? r.last_rx_ns : vclock_ns(&r.clk)) - start) / 1e9;
	rep->rpc_per_s = rep->elapsed_s > 0 ? (double)rep->received / rep->elapsed_s : 0;
	free(r.sent_ns);
	free(r.msg);
	return 0;
}

void ql_vppu_report_json(const struct ql_vppu_report *rep, const char *name, FILE *f)
{
	const struct ql_hist *h = &rep->rtt_ns;

	fprintf(f,
		"{\"phase\":\"%s\",\"sent\":%" PRIu64 ",\"received\":%" PRIu64 ",\"ok\":%" PRIu64
		",\"wrong\":%" PRIu64 ",\"handler_errors\":%" PRIu64 ",\"protocol_errors\":%" PRIu64
		",\"unexpected\":%" PRIu64 ",\"timeouts\":%" PRIu64 ",\"late\":%" PRIu64
		",\"lost\":%" PRIu64 ",\"resent\":%" PRIu64 ",\"gave_up\":%" PRIu64
		",\"dup_responses\":%" PRIu64
		",\"elapsed_s\":%.6f,\"rpc_per_s\":%.1f,\"transport_error\":%d,"
		"\"timed_out\":%s,\"stopped\":%s,"
		"\"rtt_ns\":{\"min\":%" PRIu64 ",\"p50\":%" PRIu64 ",\"p90\":%" PRIu64
		",\"p99\":%" PRIu64 ",\"p999\":%" PRIu64 ",\"max\":%" PRIu64 ",\"mean\":%.1f}}",
		name ? name : "", rep->sent, rep->received, rep->ok, rep->wrong,
		rep->handler_errors, rep->protocol_errors, rep->unexpected, rep->timeouts,
		rep->late, rep->lost, rep->resent, rep->gave_up, rep->dup_responses, rep->elapsed_s,
		rep->rpc_per_s, rep->transport_error, rep->timed_out ? "true" : "false",
		rep->stopped ? "true" : "false", ql_hist_count(h) ? ql_hist_min(h) : 0,
		ql_hist_percentile(h, 50), ql_hist_percentile(h, 90), ql_hist_percentile(h, 99),
		ql_hist_percentile(h, 99.9), ql_hist_count(h) ? ql_hist_max(h) : 0,
		ql_hist_mean(h));
}
