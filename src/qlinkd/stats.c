/* SPDX-License-Identifier: MIT */
/*
 * qlinkd's live statistics (docs/qlinkd.md, "Live statistics"): a read-only
 * UNIX socket (mode 0600) served from the main loop. A client connects,
 * writes one request line (text, json or prometheus; nothing before EOF:
 * text) and reads the snapshot until the daemon closes. A client gets
 * QLINKD_STATS_DEADLINE_MS in all, and QLINKD_STATS_CLIENTS are served at
 * once (a new one takes the oldest one's place): junk, silence or a flood of
 * connections cost the main loop bounded work and never reach a dispatcher.
 *
 * The snapshot reads the counters the dispatchers already keep (relaxed
 * atomic loads in ql_daemon_stats and friends): no lock on the hot path.
 * A session's final counters are kept when it ends (the last
 * QLINKD_STATS_ENDED sessions, and per function and overall totals since
 * start), so nothing a session counted vanishes with it.
 */

#define _GNU_SOURCE

#include <stddef.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "qlinkd_int.h"
#include "stats_socket.h"

#ifndef QLINK_VERSION
#define QLINK_VERSION "0"
#endif

enum {
	QLINKD_STATS_CLIENTS = 8,
	QLINKD_STATS_DEADLINE_MS = 1000,
	QLINKD_STATS_REQ_MAX = 64,
	QLINKD_STATS_ENDED = 64,
};

/* ---- what is counted ---------------------------------------------------------- */

/* A session's counters: plain, refused (answered with an error status, or
 * dropped under bad_requests: drop, counted in dropped.bad_request too) by
 * reason, and lost by reason. */
static const char *const plain_names[] = { "requests", "responses", "ok", "handler_errors",
					   "sent" };
static const char *const refused_names[] = {
	"short",	   "bad_magic", "bad_length",	  "unknown_function", "bad_args",
	"result_overflow", "internal",	"result_overrun", "deadline"
};
static const char *const dropped_names[] = { "bad_request", "rnr", "peer", "send_failed" };
#define NPLAIN (sizeof(plain_names) / sizeof(plain_names[0]))
#define NREFUSED (sizeof(refused_names) / sizeof(refused_names[0]))
#define NDROPPED (sizeof(dropped_names) / sizeof(dropped_names[0]))

struct ctr {
	const char *name;
	size_t off;
};
#define CTR(type, f)                         \
	{                                    \
#f, offsetof(struct type, f) \
	}
static const struct ctr hsb_ctrs[] = {
	CTR(ql_hsb_channel_stats, frames),	 CTR(ql_hsb_channel_stats, bad_imm),
	CTR(ql_hsb_channel_stats, bad_len),	 CTR(ql_hsb_channel_stats, not_imm),
	CTR(ql_hsb_channel_stats, page_busy),	 CTR(ql_hsb_channel_stats, recv_errors),
	CTR(ql_hsb_channel_stats, resp_too_big),
};
static const struct ctr udp_ctrs[] = {
	CTR(ql_udp_channel_stats, datagrams),	  CTR(ql_udp_channel_stats, oversize),
	CTR(ql_udp_channel_stats, undersize),	  CTR(ql_udp_channel_stats, truncated),
	CTR(ql_udp_channel_stats, not_allowed),	  CTR(ql_udp_channel_stats, shed),
	CTR(ql_udp_channel_stats, reply_clamped), CTR(ql_udp_channel_stats, send_errors),
	CTR(ql_udp_channel_stats, sent),	  CTR(ql_udp_channel_stats, recv_errors),
	CTR(ql_udp_channel_stats, kernel_drops),
};
static const struct ctr dev_ctrs[] = {
	CTR(ql_device_counters, uc_drop_access),    CTR(ql_device_counters, uc_drop_no_recv),
	CTR(ql_device_counters, uc_drop_not_ready), CTR(ql_device_counters, rc_nak_access),
	CTR(ql_device_counters, rc_nak_rnr),	    CTR(ql_device_counters, rc_nak_inv_req),
	CTR(ql_device_counters, rc_nak_op_err),	    CTR(ql_device_counters, uc_drop_injected),
	CTR(ql_device_counters, rc_nak_seq),	    CTR(ql_device_counters, tx_packets),
	CTR(ql_device_counters, rx_packets),	    CTR(ql_device_counters, rx_dropped),
	CTR(ql_device_counters, rx_icrc_errors),    CTR(ql_device_counters, retransmits),
	CTR(ql_device_counters, timeouts),	    CTR(ql_device_counters, naks_received),
	CTR(ql_device_counters, rnr_naks_received), CTR(ql_device_counters, duplicates),
	CTR(ql_device_counters, uc_msgs_dropped),   CTR(ql_device_counters, fault_drop),
	CTR(ql_device_counters, fault_dup),	    CTR(ql_device_counters, fault_reorder),
	CTR(ql_device_counters, fault_delay),	    CTR(ql_device_counters, fault_corrupt),
	CTR(ql_device_counters, rx_kernel_drops),
};
static const struct ctr disp_ctrs[] = {
	CTR(ql_dispatcher_stats, requests),    CTR(ql_dispatcher_stats, rounds),
	CTR(ql_dispatcher_stats, idle_rounds), CTR(ql_dispatcher_stats, backoffs),
	CTR(ql_dispatcher_stats, abandoned),
};
static const struct ctr ctl_ctrs[] = {
	CTR(ql_ctl_stats, received),	    CTR(ql_ctl_stats, replied),
	CTR(ql_ctl_stats, duplicates),	    CTR(ql_ctl_stats, rejected),
	CTR(ql_ctl_stats, malformed),	    CTR(ql_ctl_stats, too_big),
	CTR(ql_ctl_stats, bad_version),	    CTR(ql_ctl_stats, bad_type),
	CTR(ql_ctl_stats, not_allowed),	    CTR(ql_ctl_stats, bad_mac),
	CTR(ql_ctl_stats, replayed),	    CTR(ql_ctl_stats, unknown_session),
	CTR(ql_ctl_stats, bad_state),	    CTR(ql_ctl_stats, busy),
	CTR(ql_ctl_stats, refused),	    CTR(ql_ctl_stats, sessions_active),
	CTR(ql_ctl_stats, sessions_total),  CTR(ql_ctl_stats, sessions_lost),
	CTR(ql_ctl_stats, retries),	    CTR(ql_ctl_stats, bad_cookie),
	CTR(ql_ctl_stats, unanswered),	    CTR(ql_ctl_stats, self_connect),
	CTR(ql_ctl_stats, channels_active),
};
#define NCTR(a) (sizeof(a) / sizeof((a)[0]))

static uint64_t ctr_get(const void *base, const struct ctr *c)
{
	uint64_t v;

	memcpy(&v, (const char *)base + c->off, sizeof(v));
	return v;
}

struct fnrec {
	char name[64];
	uint32_t id;
	uint64_t calls, errors, result_overruns;
};

/* One session's counters, live or as it ended. */
struct rec {
	uint32_t id;
	const char *kind;  /* ring, hsb, udp, gpu */
	const char *state; /* offered, running, stopped, ended */
	char qcs[64];
	char listen[INET6_ADDRSTRLEN + 8];
	int cpu; /* the dispatcher's core, -1: none or any */
	uint64_t plain[NPLAIN], refused[NREFUSED], dropped[NDROPPED];
	bool has_hsb, has_udp;
	struct ql_hsb_channel_stats hs;
	struct ql_udp_channel_stats us;
	uint64_t lat_count, lat_sum, lat_p50, lat_p90, lat_p99, lat_max;
	uint32_t nfn;
	struct fnrec *fn;
};

struct client {
	int fd;
	uint64_t deadline;
	char in[QLINKD_STATS_REQ_MAX];
	size_t inlen;
	char *out; /* the reply, once the request is read */
	size_t outlen, outoff;
};

struct qlinkd_stats {
	int lfd;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	uint64_t started;
	struct client cl[QLINKD_STATS_CLIENTS];
	/* ended sessions: the last QLINKD_STATS_ENDED, oldest first from head */
	struct rec ended[QLINKD_STATS_ENDED];
	uint32_t nended, head;
	/* since start, every ended session's sum */
	uint64_t sessions_ended;
	uint64_t plain[NPLAIN], refused[NREFUSED], dropped[NDROPPED];
	struct fnrec *fn; /* every function served or called: cumulative */
	uint32_t nfn;
	struct ql_hist hist_ended, scratch;
};

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- a session's record -------------------------------------------------------- */

static void rec_free(struct rec *r)
{
	free(r->fn);
	r->fn = NULL;
	r->nfn = 0;
}

static void rec_latency(struct rec *r, const struct ql_hist *h)
{
	r->lat_count = ql_hist_count(h);
	r->lat_sum = h->sum;
	r->lat_p50 = r->lat_count ? ql_hist_percentile(h, 50) : 0;
	r->lat_p90 = r->lat_count ? ql_hist_percentile(h, 90) : 0;
	r->lat_p99 = r->lat_count ? ql_hist_percentile(h, 99) : 0;
	r->lat_max = r->lat_count ? ql_hist_max(h) : 0;
}

/* The session's counters now; h (scratch) gets its handler histogram. */
static void rec_collect(const struct qlinkd_session *s, struct rec *r, struct ql_hist *h)
{
	memset(r, 0, sizeof(*r));
	r->id = s->id;
	r->kind = s->gpu ? "gpu" : s->udp ? "udp" : s->hsb ? "hsb" : "ring";
	r->state = !s->connected ? "offered" :
		   s->gpu	 ? (ql_gpu_dispatcher_is_running(s->gpu) ? "running" : "stopped") :
		   s->core >= 0	 ? "running" :
				   "stopped";
	snprintf(r->qcs, sizeof(r->qcs), "%s", s->qcs);
	snprintf(r->listen, sizeof(r->listen), "%s", s->listen);
	r->cpu = s->core >= 0 ? s->q->cfg->dispatcher.cpus[s->core] : -1;
	ql_hist_init(h);
	if (s->gpu) {
		struct ql_gpu_stats g;

		ql_gpu_dispatcher_stats(s->gpu, &g);
		r->plain[0] = g.requests;
		r->plain[1] = g.completed;
		r->plain[2] = g.ok;
		r->plain[3] = g.handler_error;
		r->plain[4] = g.posted;
		r->refused[0] = g.err_short;
		r->refused[1] = g.err_bad_magic;
		r->refused[2] = g.err_bad_length;
		r->refused[3] = g.err_unknown_function;
		r->refused[4] = g.err_args;
		r->refused[5] = g.err_result_overflow;
		r->refused[6] = g.err_internal;
		r->refused[7] = g.err_result_overrun;
		r->dropped[0] = g.dropped;
		r->dropped[3] = g.send_errors;
		return;
	}
	if (!s->d)
		return;
	{
		struct ql_daemon_stats st;
		uint32_t n = ql_daemon_function_count(s->d);

		ql_daemon_stats(s->d, &st);
		r->plain[0] = st.requests;
		r->plain[1] = st.responses;
		r->plain[2] = st.ok;
		r->plain[3] = st.handler_error;
		r->plain[4] = st.sent;
		r->refused[0] = st.err_short;
		r->refused[1] = st.err_bad_magic;
		r->refused[2] = st.err_bad_length;
		r->refused[3] = st.err_unknown_function;
		r->refused[4] = st.err_args;
		r->refused[5] = st.err_result_overflow;
		r->refused[6] = st.err_internal;
		r->refused[7] = st.err_result_overrun;
		r->refused[8] = st.err_deadline;
		r->dropped[0] = st.dropped;
		r->dropped[1] = st.dropped_rnr;
		r->dropped[2] = st.dropped_peer;
		r->dropped[3] = st.send_failed;
		ql_daemon_handler_hist(s->d, h);
		rec_latency(r, h);
		r->fn = n ? calloc(n, sizeof(*r->fn)) : NULL;
		for (uint32_t i = 0; r->fn && i < n; i++) {
			struct ql_daemon_function_stats fs;

			if (ql_daemon_function_stats(s->d, i, &fs))
				continue;
			memcpy(r->fn[r->nfn].name, fs.name, sizeof(r->fn[0].name));
			r->fn[r->nfn].id = fs.id;
			r->fn[r->nfn].calls = fs.calls;
			r->fn[r->nfn].errors = fs.errors;
			r->fn[r->nfn].result_overruns = fs.result_overruns;
			r->nfn++;
		}
	}
	if (s->hsb)
		r->has_hsb = !ql_hsb_channel_stats(s->ch, &r->hs);
	if (s->udp)
		r->has_udp = !ql_udp_channel_stats(s->ch, &r->us);
}

/* fns[*n] += f (by name and id); false when out of memory. */
static bool fn_add(struct fnrec **fns, uint32_t *n, const struct fnrec *f)
{
	struct fnrec *nf;

	for (uint32_t i = 0; i < *n; i++) {
		if ((*fns)[i].id == f->id && !strcmp((*fns)[i].name, f->name)) {
			(*fns)[i].calls += f->calls;
			(*fns)[i].errors += f->errors;
			(*fns)[i].result_overruns += f->result_overruns;
			return true;
		}
	}
	nf = realloc(*fns, (*n + 1) * sizeof(*nf));
	if (!nf)
		return false;
	nf[*n] = *f;
	*fns = nf;
	(*n)++;
	return true;
}

void qlinkd_stats_served(struct qlinkd *q, const char *name, uint32_t id)
{
	struct fnrec f = { .id = id };

	if (!q->stats)
		return;
	snprintf(f.name, sizeof(f.name), "%s", name ? name : "");
	fn_add(&q->stats->fn, &q->stats->nfn, &f);
}

/* A session ends: its final counters kept, added to the totals. */
void qlinkd_stats_retire(struct qlinkd *q, const struct qlinkd_session *s)
{
	struct qlinkd_stats *st = q->stats;
	struct rec *r;

	if (!st)
		return;
	r = &st->ended[(st->head + st->nended) % QLINKD_STATS_ENDED];
	if (st->nended == QLINKD_STATS_ENDED) {
		rec_free(&st->ended[st->head]); /* the oldest goes */
		st->head = (st->head + 1) % QLINKD_STATS_ENDED;
	} else {
		st->nended++;
	}
	rec_collect(s, r, &st->scratch);
	r->state = "ended";
	r->cpu = -1;
	ql_hist_merge(&st->hist_ended, &st->scratch);
	st->sessions_ended++;
	for (size_t i = 0; i < NPLAIN; i++)
		st->plain[i] += r->plain[i];
	for (size_t i = 0; i < NREFUSED; i++)
		st->refused[i] += r->refused[i];
	for (size_t i = 0; i < NDROPPED; i++)
		st->dropped[i] += r->dropped[i];
	for (uint32_t i = 0; i < r->nfn; i++)
		fn_add(&st->fn, &st->nfn, &r->fn[i]);
}

/* ---- the snapshot -------------------------------------------------------------- */

struct snap {
	struct rec *live;
	uint32_t nlive;
	const struct rec *all[QLINKD_STATS_ENDED + 1024]; /* live, then ended */
	uint32_t nall;
	uint64_t plain[NPLAIN], refused[NREFUSED], dropped[NDROPPED];
	struct fnrec *fn;
	uint32_t nfn;
	struct ql_hist *hist; /* every session's, ended ones included */
	bool has_dev, has_ctl;
	struct ql_device_counters dev;
	struct ql_ctl_stats ctl;
	struct ql_dispatcher_stats *disp;
	uint32_t ndisp;
	uint64_t uptime_ms;
};

static void snap_free(struct snap *sn)
{
	for (uint32_t i = 0; i < sn->nlive; i++)
		rec_free(&sn->live[i]);
	free(sn->live);
	free(sn->fn);
	free(sn->disp);
	free(sn->hist);
}

static int snap_take(struct qlinkd *q, struct snap *sn)
{
	struct qlinkd_stats *st = q->stats;
	uint32_t cap = q->cfg->max_sessions;

	memset(sn, 0, sizeof(*sn));
	sn->live = calloc(cap ? cap : 1, sizeof(*sn->live));
	sn->hist = malloc(sizeof(*sn->hist));
	sn->ndisp = q->disp ? q->cfg->dispatcher.cpus_count : 0;
	sn->disp = calloc(sn->ndisp ? sn->ndisp : 1, sizeof(*sn->disp));
	if (!sn->live || !sn->hist || !sn->disp)
		return -ENOMEM;
	*sn->hist = st->hist_ended;
	memcpy(sn->plain, st->plain, sizeof(sn->plain));
	memcpy(sn->refused, st->refused, sizeof(sn->refused));
	memcpy(sn->dropped, st->dropped, sizeof(sn->dropped));
	for (uint32_t i = 0; i < st->nfn; i++)
		if (!fn_add(&sn->fn, &sn->nfn, &st->fn[i]))
			return -ENOMEM;
	for (uint32_t i = 0; q->sessions && i < cap && sn->nall < 1024; i++) {
		struct rec *r;

		if (!q->sessions[i])
			continue;
		r = &sn->live[sn->nlive++];
		rec_collect(q->sessions[i], r, &st->scratch);
		ql_hist_merge(sn->hist, &st->scratch);
		for (size_t k = 0; k < NPLAIN; k++)
			sn->plain[k] += r->plain[k];
		for (size_t k = 0; k < NREFUSED; k++)
			sn->refused[k] += r->refused[k];
		for (size_t k = 0; k < NDROPPED; k++)
			sn->dropped[k] += r->dropped[k];
		for (uint32_t k = 0; k < r->nfn; k++)
			if (!fn_add(&sn->fn, &sn->nfn, &r->fn[k]))
				return -ENOMEM;
		sn->all[sn->nall++] = r;
	}
	for (uint32_t i = 0; i < st->nended; i++)
		sn->all[sn->nall++] = &st->ended[(st->head + i) % QLINKD_STATS_ENDED];
	sn->has_dev = q->dev && !ql_device_counters(q->dev, &sn->dev);
	if (q->ctl) {
		ql_ctl_server_stats(q->ctl, &sn->ctl);
		sn->has_ctl = true;
	}
	for (uint32_t i = 0; i < sn->ndisp; i++)
		ql_dispatcher_stats(q->disp[i], &sn->disp[i]);
	sn->uptime_ms = now_ms() - st->started;
	return 0;
}

/* Handler latency buckets: values below 2^k ns, k = LAT_K0..LAT_K1 (the
 * histogram's buckets never straddle a power of two from 256 on). */
enum { LAT_K0 = 8, LAT_K1 = 34 };

static uint64_t bucket_top(unsigned int i) /* the largest value of bucket i */
{
	unsigned int s;

	if (i < 2 * QL_HIST_SUB_COUNT)
		return i;
	s = (i >> QL_HIST_SUB_BITS) - 1;
	return ((uint64_t)(i - (s << QL_HIST_SUB_BITS) + 1) << s) - 1;
}

/* cum[k - LAT_K0]: values below 2^k */
static void lat_buckets(const struct ql_hist *h, uint64_t cum[LAT_K1 - LAT_K0 + 1])
{
	memset(cum, 0, (LAT_K1 - LAT_K0 + 1) * sizeof(*cum));
	for (unsigned int i = 0; i < QL_HIST_BUCKETS; i++) {
		uint64_t top;

		if (!h->counts[i])
			continue;
		top = bucket_top(i);
		for (int k = LAT_K0; k <= LAT_K1; k++)
			if (top < (1ull << k))
				cum[k - LAT_K0] += h->counts[i];
	}
}

/* ---- text ---------------------------------------------------------------------- */

static void text_ctrs(FILE *f, const char *title, const void *base, const struct ctr *c, size_t n)
{
	fprintf(f, "%s:", title);
	for (size_t i = 0; i < n; i++)
		fprintf(f, " %s=%" PRIu64, c[i].name, ctr_get(base, &c[i]));
	fputc('\n', f);
}

static void text_names(FILE *f, const char *title, const char *const *names, const uint64_t *v,
		       size_t n)
{
	fprintf(f, "%s:", title);
	for (size_t i = 0; i < n; i++)
		fprintf(f, " %s=%" PRIu64, names[i], v[i]);
	fputc('\n', f);
}

static void render_text(struct qlinkd *q, const struct snap *sn, FILE *f)
{
	uint64_t refused = 0, dropped = 0;

	fprintf(f, "qlinkd %s  device %s  up %" PRIu64 " s  sessions %u live, %" PRIu64 " ended\n",
		QLINK_VERSION, q->cfg->device, sn->uptime_ms / 1000, sn->nlive,
		q->stats->sessions_ended);
	fprintf(f, "\nsessions (the last %d ended kept):\n", QLINKD_STATS_ENDED);
	fprintf(f, "%8s %-4s %-8s %4s %-16s %12s %12s %12s %10s %10s %10s %10s %10s\n", "SESSION",
		"KIND", "STATE", "CPU", "QCS", "REQUESTS", "RESPONSES", "OK", "HANDLER_ERR",
		"REFUSED", "DROPPED", "P50_NS", "P99_NS");
	for (uint32_t i = 0; i < sn->nall; i++) {
		const struct rec *r = sn->all[i];
		uint64_t rf = 0, dr = 0;

		for (size_t k = 0; k < NREFUSED; k++)
			rf += r->refused[k];
		for (size_t k = 0; k < NDROPPED; k++)
			dr += r->dropped[k];
		fprintf(f,
			"%8u %-4s %-8s %4d %-16s %12" PRIu64 " %12" PRIu64 " %12" PRIu64
			" %10" PRIu64 " %10" PRIu64 " %10" PRIu64 " %10" PRIu64 " %10" PRIu64 "\n",
			r->id, r->kind, r->state, r->cpu,
			r->qcs[0]    ? r->qcs :
			r->listen[0] ? r->listen :
				       "-",
			r->plain[0], r->plain[1], r->plain[2], r->plain[3], rf, dr, r->lat_p50,
			r->lat_p99);
	}
	fprintf(f, "\nfunctions (every session, ended ones included):\n");
	fprintf(f, "%-32s %10s %14s %12s %16s\n", "NAME", "ID", "CALLS", "ERRORS",
		"RESULT_OVERRUNS");
	for (uint32_t i = 0; i < sn->nfn; i++)
		fprintf(f, "%-32s 0x%08x %14" PRIu64 " %12" PRIu64 " %16" PRIu64 "\n",
			sn->fn[i].name, sn->fn[i].id, sn->fn[i].calls, sn->fn[i].errors,
			sn->fn[i].result_overruns);
	for (size_t k = 0; k < NREFUSED; k++)
		refused += sn->refused[k];
	for (size_t k = 0; k < NDROPPED; k++)
		dropped += sn->dropped[k];
	fprintf(f,
		"\ntotals (every session): requests=%" PRIu64 " responses=%" PRIu64
		" refused=%" PRIu64 " dropped=%" PRIu64 "\n",
		sn->plain[0], sn->plain[1], refused, dropped);
	text_names(f, "refused by reason", refused_names, sn->refused, NREFUSED);
	text_names(f, "dropped by reason", dropped_names, sn->dropped, NDROPPED);
	{
		const struct ql_hist *h = sn->hist;
		uint64_t cum[LAT_K1 - LAT_K0 + 1], prev = 0;

		fprintf(f,
			"\nhandler latency (ns, every session): count=%" PRIu64 " p50=%" PRIu64
			" p90=%" PRIu64 " p99=%" PRIu64 " max=%" PRIu64 "\n",
			ql_hist_count(h), ql_hist_count(h) ? ql_hist_percentile(h, 50) : 0,
			ql_hist_count(h) ? ql_hist_percentile(h, 90) : 0,
			ql_hist_count(h) ? ql_hist_percentile(h, 99) : 0,
			ql_hist_count(h) ? ql_hist_max(h) : 0);
		lat_buckets(h, cum);
		for (int k = LAT_K0; k <= LAT_K1; k++) {
			if (cum[k - LAT_K0] != prev)
				fprintf(f, "  < %12llu ns %12" PRIu64 "\n", 1ull << k,
					cum[k - LAT_K0] - prev);
			prev = cum[k - LAT_K0];
		}
		if (ql_hist_count(h) != prev)
			fprintf(f, "  >= %11llu ns %12" PRIu64 "\n", 1ull << LAT_K1,
				ql_hist_count(h) - prev);
	}
	fputc('\n', f);
	if (sn->has_dev)
		text_ctrs(f, "device", &sn->dev, dev_ctrs, NCTR(dev_ctrs));
	for (uint32_t i = 0; i < sn->nall; i++) {
		char t[48];

		snprintf(t, sizeof(t), "hsb session %u", sn->all[i]->id);
		if (sn->all[i]->has_hsb)
			text_ctrs(f, t, &sn->all[i]->hs, hsb_ctrs, NCTR(hsb_ctrs));
		snprintf(t, sizeof(t), "udp session %u", sn->all[i]->id);
		if (sn->all[i]->has_udp)
			text_ctrs(f, t, &sn->all[i]->us, udp_ctrs, NCTR(udp_ctrs));
	}
	for (uint32_t i = 0; i < sn->ndisp; i++) {
		char t[48];

		snprintf(t, sizeof(t), "dispatcher cpu %d sessions=%u", sn->disp[i].cpu,
			 sn->disp[i].daemons);
		text_ctrs(f, t, &sn->disp[i], disp_ctrs, NCTR(disp_ctrs));
	}
	if (sn->has_ctl)
		text_ctrs(f, "control", &sn->ctl, ctl_ctrs, NCTR(ctl_ctrs));
}

/* ---- json ---------------------------------------------------------------------- */

static void json_ctrs(FILE *f, const char *key, const void *base, const struct ctr *c, size_t n)
{
	fprintf(f, "\"%s\":{", key);
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%s\"%s\":%" PRIu64, i ? "," : "", c[i].name, ctr_get(base, &c[i]));
	fputc('}', f);
}

static void json_names(FILE *f, const char *key, const char *const *names, const uint64_t *v,
		       size_t n)
{
	fprintf(f, "\"%s\":{", key);
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%s\"%s\":%" PRIu64, i ? "," : "", names[i], v[i]);
	fputc('}', f);
}

static void json_fns(FILE *f, const struct fnrec *fn, uint32_t n)
{
	fputs("\"functions\":[", f);
	for (uint32_t i = 0; i < n; i++) {
		fputs(i ? ",{\"name\":" : "{\"name\":", f);
		qlinkd_json_str(f, fn[i].name);
		fprintf(f,
			",\"id\":%u,\"calls\":%" PRIu64 ",\"errors\":%" PRIu64
			",\"result_overruns\":%" PRIu64 "}",
			fn[i].id, fn[i].calls, fn[i].errors, fn[i].result_overruns);
	}
	fputc(']', f);
}

static void render_json(struct qlinkd *q, const struct snap *sn, FILE *f)
{
	const struct ql_hist *h = sn->hist;
	uint64_t cum[LAT_K1 - LAT_K0 + 1];

	fputs("{\"version\":", f);
	qlinkd_json_str(f, QLINK_VERSION);
	fputs(",\"device\":", f);
	qlinkd_json_str(f, q->cfg->device);
	fprintf(f, ",\"uptime_ms\":%" PRIu64 ",\"sessions_live\":%u,\"sessions_ended\":%" PRIu64,
		sn->uptime_ms, sn->nlive, q->stats->sessions_ended);
	fputs(",\"sessions\":[", f);
	for (uint32_t i = 0; i < sn->nall; i++) {
		const struct rec *r = sn->all[i];

		fprintf(f, "%s{\"id\":%u,\"kind\":\"%s\",\"state\":\"%s\",\"cpu\":%d,\"qcs\":",
			i ? "," : "", r->id, r->kind, r->state, r->cpu);
		qlinkd_json_str(f, r->qcs);
		fputs(",\"listen\":", f);
		qlinkd_json_str(f, r->listen);
		for (size_t k = 0; k < NPLAIN; k++)
			fprintf(f, ",\"%s\":%" PRIu64, plain_names[k], r->plain[k]);
		fputc(',', f);
		json_names(f, "refused", refused_names, r->refused, NREFUSED);
		fputc(',', f);
		json_names(f, "dropped", dropped_names, r->dropped, NDROPPED);
		fprintf(f,
			",\"latency_ns\":{\"count\":%" PRIu64 ",\"sum\":%" PRIu64
			",\"p50\":%" PRIu64 ",\"p90\":%" PRIu64 ",\"p99\":%" PRIu64
			",\"max\":%" PRIu64 "},",
			r->lat_count, r->lat_sum, r->lat_p50, r->lat_p90, r->lat_p99, r->lat_max);
		json_fns(f, r->fn, r->nfn);
		if (r->has_hsb) {
			fputc(',', f);
			json_ctrs(f, "hsb", &r->hs, hsb_ctrs, NCTR(hsb_ctrs));
		}
		if (r->has_udp) {
			fputc(',', f);
			json_ctrs(f, "udp", &r->us, udp_ctrs, NCTR(udp_ctrs));
		}
		fputc('}', f);
	}
	fputs("],\"totals\":{", f);
	for (size_t k = 0; k < NPLAIN; k++)
		fprintf(f, "\"%s\":%" PRIu64 ",", plain_names[k], sn->plain[k]);
	json_names(f, "refused", refused_names, sn->refused, NREFUSED);
	fputc(',', f);
	json_names(f, "dropped", dropped_names, sn->dropped, NDROPPED);
	fputs("},", f);
	json_fns(f, sn->fn, sn->nfn);
	fprintf(f,
		",\"latency_ns\":{\"count\":%" PRIu64 ",\"sum\":%" PRIu64 ",\"p50\":%" PRIu64
		",\"p90\":%" PRIu64 ",\"p99\":%" PRIu64 ",\"max\":%" PRIu64 ",\"below\":[",
		ql_hist_count(h), h->sum, ql_hist_count(h) ? ql_hist_percentile(h, 50) : 0,
		ql_hist_count(h) ? ql_hist_percentile(h, 90) : 0,
		ql_hist_count(h) ? ql_hist_percentile(h, 99) : 0,
		ql_hist_count(h) ? ql_hist_max(h) : 0);
	lat_buckets(h, cum);
	for (int k = LAT_K0; k <= LAT_K1; k++)
		fprintf(f, "%s{\"ns\":%llu,\"count\":%" PRIu64 "}", k > LAT_K0 ? "," : "",
			1ull << k, cum[k - LAT_K0]);
	fputs("]}", f);
	if (sn->has_dev) {
		fputc(',', f);
		json_ctrs(f, "device_counters", &sn->dev, dev_ctrs, NCTR(dev_ctrs));
	}
	fputs(",\"dispatchers\":[", f);
	for (uint32_t i = 0; i < sn->ndisp; i++) {
		fprintf(f, "%s{\"cpu\":%d,\"sessions\":%u,", i ? "," : "", sn->disp[i].cpu,
			sn->disp[i].daemons);
		json_ctrs(f, "counters", &sn->disp[i], disp_ctrs, NCTR(disp_ctrs));
		fputc('}', f);
	}
	fputc(']', f);
	if (sn->has_ctl) {
		fputc(',', f);
		json_ctrs(f, "control", &sn->ctl, ctl_ctrs, NCTR(ctl_ctrs));
	}
	fputs("}\n", f);
}

/* ---- prometheus ---------------------------------------------------------------- */

/* A label value: backslash, quote and newline escaped (exposition format). */
static void prom_label(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			fprintf(f, "\\%c", *s);
		else if (*s == '\n')
			fputs("\\n", f);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

static void prom_head(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* name{session="ID"[,extra="v"]} value, one per session of the snapshot */
static void prom_sessions(FILE *f, const struct snap *sn, const char *name, const char *type,
			  const char *help, size_t which, size_t k)
{
	prom_head(f, name, type, help);
	for (uint32_t i = 0; i < sn->nall; i++) {
		const struct rec *r = sn->all[i];
		uint64_t v = which == 0 ? r->plain[k] : 0;

		if (which == 0) {
			fprintf(f, "%s{session=\"%u\"} %" PRIu64 "\n", name, r->id, v);
			continue;
		}
		for (size_t j = 0; j < (which == 1 ? NREFUSED : NDROPPED); j++)
			fprintf(f, "%s{session=\"%u\",reason=\"%s\"} %" PRIu64 "\n", name, r->id,
				which == 1 ? refused_names[j] : dropped_names[j],
				which == 1 ? r->refused[j] : r->dropped[j]);
	}
}

static void prom_ctrs(FILE *f, const char *name, const char *help, const char *labels,
		      const void *base, const struct ctr *c, size_t n, bool head)
{
	if (head)
		prom_head(f, name, "counter", help);
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%s{%scounter=\"%s\"} %" PRIu64 "\n", name, labels, c[i].name,
			ctr_get(base, &c[i]));
}

static void prom_fns(FILE *f, const char *name, const char *help, const struct snap *sn,
		     size_t which)
{
	prom_head(f, name, "counter", help);
	for (uint32_t i = 0; i < sn->nfn; i++) {
		const struct fnrec *fn = &sn->fn[i];

		fprintf(f, "%s{function=", name);
		prom_label(f, fn->name);
		fprintf(f, ",id=\"0x%08x\"} %" PRIu64 "\n", fn->id,
			which == 0 ? fn->calls :
			which == 1 ? fn->errors :
				     fn->result_overruns);
	}
}

static void render_prometheus(struct qlinkd *q, const struct snap *sn, FILE *f)
{
	static const char *const plain_help[] = {
		"Requests taken from the session's channel.",
		"Responses delivered (SENDs completed with success).",
		"Requests answered with status 0.",
		"Requests whose handler returned an error status.",
		"Responses the channel accepted.",
	};
	const struct ql_hist *h = sn->hist;
	uint64_t cum[LAT_K1 - LAT_K0 + 1];
	bool first = true;

	prom_head(f, "qlinkd_info", "gauge", "qlinkd's version and device (always 1).");
	fputs("qlinkd_info{version=", f);
	prom_label(f, QLINK_VERSION);
	fputs(",device=", f);
	prom_label(f, q->cfg->device);
	fputs("} 1\n", f);
	prom_head(f, "qlinkd_uptime_seconds", "gauge", "Seconds since qlinkd started.");
	fprintf(f, "qlinkd_uptime_seconds %.3f\n", (double)sn->uptime_ms / 1000);
	prom_head(f, "qlinkd_sessions", "gauge", "Sessions alive now.");
	fprintf(f, "qlinkd_sessions %u\n", sn->nlive);
	prom_head(f, "qlinkd_sessions_ended_total", "counter", "Sessions ended since start.");
	fprintf(f, "qlinkd_sessions_ended_total %" PRIu64 "\n", q->stats->sessions_ended);
	prom_head(f, "qlinkd_session_info", "gauge",
		  "A session (live, or among the last ended) and its kind, state and QCS (1).");
	for (uint32_t i = 0; i < sn->nall; i++) {
		const struct rec *r = sn->all[i];

		fprintf(f,
			"qlinkd_session_info{session=\"%u\",kind=\"%s\",state=\"%s\",qcs=", r->id,
			r->kind, r->state);
		prom_label(f, r->qcs);
		fputs("} 1\n", f);
	}
	for (size_t k = 0; k < NPLAIN; k++) {
		char name[64];

		snprintf(name, sizeof(name), "qlinkd_session_%s_total", plain_names[k]);
		prom_sessions(f, sn, name, "counter", plain_help[k], 0, k);
	}
	prom_sessions(f, sn, "qlinkd_session_refused_total", "counter",
		      "Requests refused before or by the handler, by reason.", 1, 0);
	prom_sessions(f, sn, "qlinkd_session_dropped_total", "counter",
		      "Requests or responses lost, by reason.", 2, 0);
	prom_head(f, "qlinkd_refused_total", "counter",
		  "Requests refused, every session since start, by reason.");
	for (size_t k = 0; k < NREFUSED; k++)
		fprintf(f, "qlinkd_refused_total{reason=\"%s\"} %" PRIu64 "\n", refused_names[k],
			sn->refused[k]);
	prom_head(f, "qlinkd_dropped_total", "counter",
		  "Requests or responses lost, every session since start, by reason.");
	for (size_t k = 0; k < NDROPPED; k++)
		fprintf(f, "qlinkd_dropped_total{reason=\"%s\"} %" PRIu64 "\n", dropped_names[k],
			sn->dropped[k]);
	prom_head(f, "qlinkd_requests_total", "counter",
		  "Requests taken, every session since start.");
	fprintf(f, "qlinkd_requests_total %" PRIu64 "\n", sn->plain[0]);
	prom_fns(f, "qlinkd_function_calls_total",
		 "Calls of a function, every session since start.", sn, 0);
	prom_fns(f, "qlinkd_function_errors_total",
		 "Handler or result errors of a function, every session since start.", sn, 1);
	prom_fns(f, "qlinkd_function_result_overruns_total",
		 "Handler writes past the result buffer, every session since start.", sn, 2);
	prom_head(f, "qlinkd_handler_latency_seconds", "histogram",
		  "Handler time per request, every session since start.");
	lat_buckets(h, cum);
	for (int k = LAT_K0; k <= LAT_K1; k++)
		fprintf(f, "qlinkd_handler_latency_seconds_bucket{le=\"%.9f\"} %" PRIu64 "\n",
			(double)(1ull << k) / 1e9, cum[k - LAT_K0]);
	fprintf(f, "qlinkd_handler_latency_seconds_bucket{le=\"+Inf\"} %" PRIu64 "\n",
		ql_hist_count(h));
	fprintf(f, "qlinkd_handler_latency_seconds_sum %.9f\n", (double)h->sum / 1e9);
	fprintf(f, "qlinkd_handler_latency_seconds_count %" PRIu64 "\n", ql_hist_count(h));
	if (sn->has_dev)
		prom_ctrs(f, "qlinkd_device_counter_total",
			  "The device's counters (ql_device_counters).", "", &sn->dev, dev_ctrs,
			  NCTR(dev_ctrs), true);
	for (uint32_t i = 0; i < sn->nall; i++) {
		char l[32];

		if (!sn->all[i]->has_hsb)
			continue;
		snprintf(l, sizeof(l), "session=\"%u\",", sn->all[i]->id);
		prom_ctrs(f, "qlinkd_hsb_counter_total", "An hsb channel's frame counters.", l,
			  &sn->all[i]->hs, hsb_ctrs, NCTR(hsb_ctrs), first);
		first = false;
	}
	first = true;
	for (uint32_t i = 0; i < sn->nall; i++) {
		char l[32];

		if (!sn->all[i]->has_udp)
			continue;
		snprintf(l, sizeof(l), "session=\"%u\",", sn->all[i]->id);
		prom_ctrs(f, "qlinkd_udp_counter_total", "A UDP listener's datagram counters.", l,
			  &sn->all[i]->us, udp_ctrs, NCTR(udp_ctrs), first);
		first = false;
	}
	for (uint32_t i = 0; i < sn->ndisp; i++) {
		char l[32];

		snprintf(l, sizeof(l), "cpu=\"%d\",", sn->disp[i].cpu);
		prom_ctrs(f, "qlinkd_dispatcher_counter_total", "A dispatcher's counters.", l,
			  &sn->disp[i], disp_ctrs, NCTR(disp_ctrs), i == 0);
	}
	if (sn->has_ctl)
		prom_ctrs(f, "qlinkd_control_counter_total", "The control plane's counters.", "",
			  &sn->ctl, ctl_ctrs, NCTR(ctl_ctrs), true);
}

/* ---- the socket ---------------------------------------------------------------- */

static void client_close(struct client *c)
{
	if (c->fd >= 0)
		close(c->fd);
	free(c->out);
	memset(c, 0, sizeof(*c));
	c->fd = -1;
}

/* The request is read: the reply, in memory, to be written. */
static void client_reply(struct qlinkd *q, struct client *c)
{
	enum { TEXT, JSON, PROM, BAD } fmt;
	struct snap sn;
	size_t n = strcspn(c->in, "\r\n");
	FILE *f;

	c->in[n] = '\0';
	fmt = !n || !strcmp(c->in, "text") ? TEXT :
	      !strcmp(c->in, "json")	   ? JSON :
	      !strcmp(c->in, "prometheus") ? PROM :
					     BAD;
	f = open_memstream(&c->out, &c->outlen);
	if (!f) {
		client_close(c);
		return;
	}
	if (fmt == BAD) {
		fputs("error: unknown request (send text, json or prometheus and a newline)\n", f);
	} else if (snap_take(q, &sn)) {
		fputs("error: out of memory\n", f);
	} else if (fmt == TEXT) {
		render_text(q, &sn, f);
	} else if (fmt == JSON) {
		render_json(q, &sn, f);
	} else {
		render_prometheus(q, &sn, f);
	}
	if (fmt != BAD)
		snap_free(&sn);
	if (fclose(f)) {
		client_close(c);
		return;
	}
	c->outoff = 0;
	shutdown(c->fd, SHUT_RD);
}

static void client_io(struct qlinkd *q, struct client *c, short revents)
{
	if (!c->out && (revents & (POLLIN | POLLHUP | POLLERR))) {
		ssize_t r = recv(c->fd, c->in + c->inlen, sizeof(c->in) - 1 - c->inlen, 0);

		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (r < 0) {
			client_close(c);
			return;
		}
		c->inlen += (size_t)r;
		c->in[c->inlen] = '\0';
		if (r == 0 || memchr(c->in, '\n', c->inlen) || c->inlen == sizeof(c->in) - 1)
			client_reply(q, c);
		else
			return;
		if (c->fd < 0)
			return;
	}
	if (c->out) {
		while (c->outoff < c->outlen) {
			ssize_t w = send(c->fd, c->out + c->outoff, c->outlen - c->outoff,
					 MSG_NOSIGNAL | MSG_DONTWAIT);

			if (w < 0 && errno == EAGAIN)
				return; /* POLLOUT later, within the deadline */
			if (w <= 0) {
				client_close(c);
				return;
			}
			c->outoff += (size_t)w;
		}
		client_close(c);
	}
}

int qlinkd_stats_pollfds(struct qlinkd *q, struct pollfd *pfd, int max)
{
	struct qlinkd_stats *st = q->stats;
	uint64_t now;
	int n = 0;

	if (!st || st->lfd < 0 || max < 1 + QLINKD_STATS_CLIENTS)
		return 0;
	now = now_ms();
	pfd[n++] = (struct pollfd){ .fd = st->lfd, .events = POLLIN };
	for (int i = 0; i < QLINKD_STATS_CLIENTS; i++) {
		struct client *c = &st->cl[i];

		if (c->fd >= 0 && now >= c->deadline)
			client_close(c); /* silent, slow or stuck: its time is up */
		pfd[n++] = (struct pollfd){ .fd = c->fd, .events = c->out ? POLLOUT : POLLIN };
	}
	return n;
}

void qlinkd_stats_serve(struct qlinkd *q, const struct pollfd *pfd, int n)
{
	struct qlinkd_stats *st = q->stats;

	if (!st || n < 1 + QLINKD_STATS_CLIENTS)
		return;
	for (int i = 0; i < QLINKD_STATS_CLIENTS; i++)
		if (st->cl[i].fd >= 0 && pfd[1 + i].fd == st->cl[i].fd && pfd[1 + i].revents)
			client_io(q, &st->cl[i], pfd[1 + i].revents);
	if (!(pfd[0].revents & POLLIN))
		return;
	for (int k = 0; k < 2 * QLINKD_STATS_CLIENTS; k++) {
		int fd = accept4(st->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC), i;

		if (fd < 0)
			return;
		for (i = 0; i < QLINKD_STATS_CLIENTS && st->cl[i].fd >= 0; i++)
			;
		if (i == QLINKD_STATS_CLIENTS) {
			/* every slot busy: the oldest client goes (one that
			 * connects and hangs cannot keep the others out) */
			i = 0;
			for (int k2 = 1; k2 < QLINKD_STATS_CLIENTS; k2++)
				if (st->cl[k2].deadline < st->cl[i].deadline)
					i = k2;
			client_close(&st->cl[i]);
		}
		st->cl[i].fd = fd;
		st->cl[i].deadline = now_ms() + QLINKD_STATS_DEADLINE_MS;
	}
}

/* Bind path (mode 0600): a stale socket left by a dead qlinkd is replaced,
 * a live one (it accepts) or anything that is no socket is not. */
static int stats_bind(int fd, const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct stat sb;
	mode_t old;
	int ret;

	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	for (int attempt = 0;; attempt++) {
		old = umask(0177);
		ret = bind(fd, (struct sockaddr *)&a, sizeof(a));
		umask(old);
		if (!ret)
			break;
		ret = -errno;
		if (ret != -EADDRINUSE || attempt)
			return ql_error_set(ret, "stats socket %s: bind: %s", path, strerror(-ret));
		if (lstat(path, &sb) || !S_ISSOCK(sb.st_mode))
			return ql_error_set(-EEXIST, "stats socket %s: exists and is no socket",
					    path);
		{
			int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
			bool live = probe >= 0 && !connect(probe, (struct sockaddr *)&a, sizeof(a));

			if (probe >= 0)
				close(probe);
			if (live)
				return ql_error_set(-EADDRINUSE,
						    "stats socket %s: another qlinkd serves it",
						    path);
		}
		unlink(path); /* stale */
	}
	if (chmod(path, 0600))
		return ql_error_set(-errno, "stats socket %s: chmod: %s", path, strerror(errno));
	return 0;
}

int qlinkd_stats_open(struct qlinkd *q, const char *path)
{
	struct qlinkd_stats *st = calloc(1, sizeof(*st));
	char def[sizeof(st->path)];
	bool given = path != NULL;
	int ret;

	if (!st)
		return -ENOMEM;
	st->lfd = -1;
	st->started = now_ms();
	for (int i = 0; i < QLINKD_STATS_CLIENTS; i++)
		st->cl[i].fd = -1;
	ql_hist_init(&st->hist_ended);
	q->stats = st;
	if (path && !strcmp(path, "none")) {
		qlog(QL_LOG_INFO, "stats", "no stats socket", QS("stats_socket", "none"));
		return 0;
	}
	if (!path) {
		ret = ql_stats_socket_default(def, sizeof(def));
		if (ret) {
			qlog(QL_LOG_WARN, "stats", "no stats socket: no default place",
			     QS("reason", ret == -ENOENT ? "not root and no XDG_RUNTIME_DIR" :
							   "path too long"));
			return 0;
		}
		path = def;
		if (geteuid() == 0 && !getenv("RUNTIME_DIRECTORY"))
			mkdir(QL_STATS_SOCKET_ROOT_DIR, 0755); /* exists: fine */
	}
	if (strlen(path) >= sizeof(st->path)) {
		ret = ql_error_set(-ENAMETOOLONG, "stats socket %s: longer than %zu bytes", path,
				   sizeof(st->path) - 1);
		goto fail;
	}
	st->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (st->lfd < 0) {
		ret = ql_error_set(-errno, "stats socket: %s", strerror(errno));
		goto fail;
	}
	ret = stats_bind(st->lfd, path);
	if (!ret && listen(st->lfd, 16))
		ret = ql_error_set(-errno, "stats socket %s: listen: %s", path, strerror(errno));
	if (ret)
		goto fail;
	snprintf(st->path, sizeof(st->path), "%s", path);
	qlog(QL_LOG_INFO, "stats", "socket ready", QS("stats_socket", st->path),
	     QS("mode", "0600"));
	return 0;
fail:
	if (st->lfd >= 0)
		close(st->lfd);
	st->lfd = -1;
	qlog(given ? QL_LOG_ERROR : QL_LOG_WARN, "stats",
	     given ? "cannot open the stats socket" : "no stats socket",
	     QS("error", ql_error_detail()));
	/* the default place taken (another qlinkd of this user): run without */
	return given ? ret : 0;
}

void qlinkd_stats_close(struct qlinkd *q)
{
	struct qlinkd_stats *st = q->stats;

	if (!st)
		return;
	for (int i = 0; i < QLINKD_STATS_CLIENTS; i++)
		client_close(&st->cl[i]);
	if (st->lfd >= 0) {
		close(st->lfd);
		unlink(st->path);
	}
	for (uint32_t i = 0; i < st->nended; i++)
		rec_free(&st->ended[(st->head + i) % QLINKD_STATS_ENDED]);
	free(st->fn);
	free(st);
	q->stats = NULL;
}
