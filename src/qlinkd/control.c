/* SPDX-License-Identifier: MIT */
/* qlinkd's control-plane glue: the ql_ctl_server callbacks (a QCS's
 * channels as sessions), its socket and counters. */

#define _GNU_SOURCE

#include "qlinkd_int.h"

#include "tools.h"
/* ---- the control plane ---------------------------------------------------------- */

/* The channel sessions behind one control-plane session (one per channel
 * the QCS asked for). */
struct ctl_link {
	uint32_t n;
	struct qlinkd_session *s[QL_CTL_MAX_CHANNELS];
};

static void ctl_link_free(struct ql_ctl_session *cs)
{
	struct ctl_link *l = ql_ctl_session_data(cs);

	if (!l)
		return;
	for (uint32_t i = 0; i < l->n; i++)
		qlinkd_session_destroy(l->s[i]);
	free(l);
	ql_ctl_session_set_data(cs, NULL);
}

static int ctl_offer(void *ctx, struct ql_ctl_session *cs, uint32_t n, struct ql_conn_params *out)
{
	struct qlinkd *q = ctx;
	struct ctl_link *l = calloc(1, sizeof(*l));
	int ret = 0;

	if (!l)
		return -ENOMEM;
	ql_ctl_session_set_data(cs, l);
	for (; l->n < n && !ret; l->n++) {
		ret = qlinkd_session_create(q, qlinkd_qcs_kind(q), NULL, &l->s[l->n], &out[l->n]);
		if (ret)
			break;
		l->s[l->n]->ctl_id = ql_ctl_session_id(cs);
		snprintf(l->s[l->n]->qcs, sizeof(l->s[l->n]->qcs), "%s", ql_ctl_session_name(cs));
	}
	if (ret) {
		ctl_link_free(cs);
		return ret;
	}
	qlog(QL_LOG_INFO, "control", "offered", QS("qcs", ql_ctl_session_name(cs)),
	     QS("peer", ql_ctl_session_peer(cs)), QU("channels", n));
	return 0;
}

static int ctl_accept(void *ctx, struct ql_ctl_session *cs, const struct ql_conn_params *client,
		      uint32_t n)
{
	struct ctl_link *l = ql_ctl_session_data(cs);

	(void)ctx;
	if (!l || n != l->n)
		return ql_error_set(-EINVAL, "ACK for %u channels, %u offered", n, l ? l->n : 0);
	for (uint32_t i = 0; i < n; i++) {
		int ret = qlinkd_session_connect(l->s[i], &client[i]);

		if (ret)
			return ret;
	}
	return 0;
}

/* START (again after a STOP): serve every channel, each on the least-loaded
 * dispatcher now, so a restart may move a session to another core. */
static int ctl_start(void *ctx, struct ql_ctl_session *cs)
{
	struct ctl_link *l = ql_ctl_session_data(cs);

	(void)ctx;
	for (uint32_t i = 0; l && i < l->n; i++) {
		int ret = qlinkd_session_run(l->s[i]);

		if (ret)
			return ret;
	}
	qlog(QL_LOG_INFO, "control", "started", QS("qcs", ql_ctl_session_name(cs)));
	return 0;
}

/* STOP: the run is over; stop the dispatchers (every request taken is
 * answered) and keep the counters until COMPLETE, ABORT or loss. */
static int ctl_stop(void *ctx, struct ql_ctl_session *cs)
{
	struct ctl_link *l = ql_ctl_session_data(cs);

	(void)ctx;
	for (uint32_t i = 0; l && i < l->n; i++)
		qlinkd_session_pause(l->s[i]);
	qlog(QL_LOG_INFO, "control", "stopped", QS("qcs", ql_ctl_session_name(cs)));
	return 0;
}

static int ctl_end(void *ctx, struct ql_ctl_session *cs)
{
	(void)ctx;
	qlog(QL_LOG_INFO, "control", "session ended", QS("qcs", ql_ctl_session_name(cs)),
	     QS("state", ql_ctl_state_name(ql_ctl_session_state(cs))));
	ctl_link_free(cs);
	return 0;
}

static void ctl_lost(void *ctx, struct ql_ctl_session *cs)
{
	(void)ctx;
	qlog(QL_LOG_WARN, "control", "QCS lost: tearing its channels down",
	     QS("qcs", ql_ctl_session_name(cs)), QS("peer", ql_ctl_session_peer(cs)));
	ctl_link_free(cs);
}

static int ctl_status(void *ctx, struct ql_ctl_session *cs, char *json, size_t len)
{
	struct ctl_link *l = ql_ctl_session_data(cs);
	uint64_t req = 0, resp = 0, ok = 0, herr = 0, dropped = 0, sends_dropped = 0, overrun = 0;
	int chan_err = 0, failed = 0, n;

	(void)ctx;
	for (uint32_t i = 0; l && i < l->n; i++) {
		struct ql_daemon_stats st;

		if (l->s[i]->gpu) {
			struct ql_gpu_stats g;

			ql_gpu_dispatcher_stats(l->s[i]->gpu, &g);
			req += g.requests;
			resp += g.completed;
			ok += g.ok;
			herr += g.handler_error;
			dropped += g.dropped;
			sends_dropped += g.send_errors;
			overrun += g.err_result_overrun;
			if (ql_gpu_dispatcher_error(l->s[i]->gpu))
				chan_err = ql_gpu_dispatcher_error(l->s[i]->gpu);
			continue;
		}
		ql_daemon_stats(l->s[i]->d, &st);
		req += st.requests;
		resp += st.responses;
		ok += st.ok;
		herr += st.handler_error;
		dropped += st.dropped;
		sends_dropped += st.dropped_rnr + st.dropped_peer;
		overrun += st.err_result_overrun;
		if (st.channel_error)
			chan_err = st.channel_error;
		if (st.failed)
			failed = st.failed;
	}
	n = snprintf(json, len,
		     "{\"channels\":%u,\"requests\":%" PRIu64 ",\"responses\":%" PRIu64
		     ",\"ok\":%" PRIu64 ",\"handler_errors\":%" PRIu64
		     ",\"protocol_errors\":%" PRIu64 ",\"dropped\":%" PRIu64
		     ",\"sends_dropped\":%" PRIu64 ",\"result_overruns\":%" PRIu64
		     ",\"channel_error\":%d,\"failed\":%d}",
		     l ? l->n : 0, req, resp, ok, herr, req - ok - herr, dropped, sends_dropped,
		     overrun, chan_err, failed);
	/* UC rings: the resends answered from the cache, and those too old */
	if (l && l->n && l->s[0]->local.qp_type == IBV_QPT_UC && n > 0 && (size_t)n < len) {
		struct ql_verbs_channel_uc_stats u, sum = { 0 };

		for (uint32_t i = 0; i < l->n; i++)
			if (!ql_verbs_channel_uc_stats(l->s[i]->ch, &u)) {
				sum.dup_answered += u.dup_answered;
				sum.dup_missed += u.dup_missed;
			}
		snprintf(json + n - 1, len - (size_t)n + 1,
			 ",\"dup_answered\":%" PRIu64 ",\"dup_missed\":%" PRIu64 "}",
			 sum.dup_answered, sum.dup_missed);
	}
	return 0;
}

static const struct ql_ctl_server_ops ctl_ops = {
	.offer = ctl_offer,
	.accept = ctl_accept,
	.start = ctl_start,
	.stop = ctl_stop,
	.abort = ctl_end,
	.complete = ctl_end,
	.status = ctl_status,
	.lost = ctl_lost,
};

/* An allowlist entry ("A.B.C.D" or "A.B.C.D/N") inside 127.0.0.0/8. */
static bool cidr_is_loopback(const char *cidr)
{
	unsigned a, n = 32;
	char tail;

	if (sscanf(cidr, "%u.", &a) != 1 || a != 127)
		return false;
	const char *slash = strchr(cidr, '/');
	if (slash && (sscanf(slash + 1, "%u%c", &n, &tail) != 1 || n < 8))
		return false;
	return true;
}

/*
 * soft+shm connection parameters name a process, one of its fds and a heap
 * address (docs/security.md, "Peer memory"). Without a shared secret no QCS
 * is authenticated, so they go to local sources only: soft+shm peers are on
 * this host anyway, and a remote host learns nothing of this process.
 */
static const char *const loopback_only[] = { "127.0.0.0/8", NULL };

int qlinkd_control_local_only(const struct ql_config *c, bool secret)
{
	if (secret || strncmp(c->device, "soft+shm://", 11))
		return 0;
	for (uint32_t i = 0; i < c->control.allow_count; i++)
		if (!cidr_is_loopback(c->control.allow[i]))
			return ql_error_set(
				-EPERM,
				"control.allow '%s': a soft+shm device without "
				"control.secret_file answers local (127.0.0.0/8) QCSs only; "
				"configure a secret or allow loopback sources only",
				c->control.allow[i]);
	return 1;
}

int qlinkd_control_exposed(const struct ql_config *c, bool secret, char *why, size_t len)
{
	/* held to loopback: by its address, the soft+shm rule or an
	 * allowlist of loopback entries only */
	bool held = qlinkd_control_local_only(c, secret) > 0 ||
		    !strcmp(c->control.address, "::1") || cidr_is_loopback(c->control.address);
	bool allow_lo = c->control.allow_count > 0;

	for (uint32_t i = 0; i < c->control.allow_count; i++)
		allow_lo = allow_lo && cidr_is_loopback(c->control.allow[i]);
	held = held || allow_lo;
	if (secret || held)
		return 0;
	snprintf(why, len,
		 "the control plane listens on %s port %u beyond loopback without "
		 "control.secret_file: any host that reaches it%s can open sessions and call "
		 "every function; set control.secret_file (docs/security.md), or listen on "
		 "127.0.0.1",
		 c->control.address, c->control.port,
		 c->control.allow_count ? " from control.allow" : "");
	return 1;
}

int qlinkd_control_open(struct qlinkd *q)
{
	const struct ql_config *c = q->cfg;
	const char **allow = NULL;
	uint8_t secret[256];
	size_t secret_len = 0;
	char why[320];
	int local, ret;

	if (c->control.secret_file) {
		ret = tool_read_secret(c->control.secret_file, secret, sizeof(secret), &secret_len);
		if (ret)
			return ret;
	}
	local = qlinkd_control_local_only(c, secret_len > 0);
	if (local < 0)
		return local;
	if (local && !c->control.allow_count)
		qlog(QL_LOG_INFO, "control", "soft+shm without a secret: local QCSs only",
		     QS("allow", "127.0.0.0/8"));
	if (qlinkd_control_exposed(c, secret_len > 0, why, sizeof(why)))
		qlog(QL_LOG_WARN, "control",
		     "listening beyond loopback without a secret: any host that reaches it can "
		     "open sessions; set control.secret_file",
		     QS("address", c->control.address), QU("port", c->control.port),
		     QU("allow", c->control.allow_count));
	if (c->control.allow_count) {
		allow = calloc(c->control.allow_count + 1, sizeof(*allow));
		if (!allow)
			return -ENOMEM;
		for (uint32_t i = 0; i < c->control.allow_count; i++)
			allow[i] = c->control.allow[i];
	}
	struct ql_ctl_server_config sc = {
		.bind_addr = c->control.address,
		.port = (uint16_t)c->control.port,
		.allow = allow ? (const char *const *)allow :
			 local ? loopback_only :
				 NULL,
		.secret = secret_len ? secret : NULL,
		.secret_len = secret_len,
		.max_sessions = c->max_sessions,
	};
	ret = ql_ctl_server_create(&sc, &ctl_ops, q, &q->ctl);
	free(allow);
	if (!ret)
		qlog(QL_LOG_INFO, "control", "listening", QS("address", c->control.address),
		     QU("port", ql_ctl_server_port(q->ctl)),
		     QS("auth", secret_len ? "hmac" : "none"), QU("allow", c->control.allow_count));
	return ret;
}

void qlinkd_control_counters(struct qlinkd *q)
{
	struct ql_ctl_stats st;

	if (!q->ctl)
		return;
	ql_ctl_server_stats(q->ctl, &st);
	qcounters(stdout, "control", QU("received", st.received), QU("replied", st.replied),
		  QU("duplicates", st.duplicates), QU("rejected", st.rejected),
		  QU("malformed", st.malformed), QU("too_big", st.too_big),
		  QU("bad_version", st.bad_version), QU("not_allowed", st.not_allowed),
		  QU("bad_mac", st.bad_mac), QU("replayed", st.replayed),
		  QU("sessions_active", st.sessions_active), QU("sessions_lost", st.sessions_lost),
		  QU("sessions_total", st.sessions_total), QU("busy", st.busy),
		  QU("retries", st.retries), QU("bad_cookie", st.bad_cookie),
		  QU("unanswered", st.unanswered), QU("self_connect", st.self_connect));
}
