/* SPDX-License-Identifier: MIT */
/* qlinkd's sessions: their channels and daemons, the dispatchers serving
 * them, the plugins registered on them, and the watch over them. */

#define _GNU_SOURCE

#include "qlinkd_int.h"

struct reg_host {
	struct ql_daemon *d;
	const char *plugin;
};

static int reg_function(void *host, const struct ql_rpc_function *fn)
{
	return ql_daemon_register(((struct reg_host *)host)->d, fn);
}

/* Plugins log through qlinkd's structured logger. */
static void reg_log(void *host, enum ql_log_level level, const char *msg)
{
	qlog(level, "plugin", msg ? msg : "", QS("plugin", ((struct reg_host *)host)->plugin));
}

/* Register the built-ins `builtins:` names (default: all) and every plugin
 * function on a fresh daemon. */
static int session_register(struct qlinkd *q, struct qlinkd_session *s)
{
	int ret = 0;

	if (q->cfg->builtins & QL_CONFIG_BUILTIN_PARITY)
		ret = ql_daemon_register(s->d, ql_demo_parity_function());
	if (!ret && (q->cfg->builtins & QL_CONFIG_BUILTIN_INCREMENT))
		ret = ql_daemon_register(s->d, ql_demo_increment_function());
	for (uint32_t i = 0; !ret && i < q->nplugins; i++) {
		struct reg_host h = { s->d, ql_plugin_get_info(q->plugins[i])->name };
		struct ql_plugin_registrar r = {
			.host = &h,
			.register_function = reg_function,
			.log = reg_log,
		};

		ret = ql_plugin_register_with(q->plugins[i], &r);
	}
	return ret;
}
/* The kind of the sessions QCSs open (control plane, --params-file). */
enum session_kind qlinkd_qcs_kind(const struct qlinkd *q)
{
	return q->cfg->transport == QL_CONFIG_TRANSPORT_HSB ? SESSION_HSB : SESSION_RING;
}

/* datapath: gpu: the session's GPU dispatcher (its own ring channel, or
 * with transport: hsb its own pages and UC QP, the CPU hsb channel's
 * geometry) with the built-ins that have a GPU build; its emulation, where
 * it runs, on the first dispatcher core (docs/gpu.md). */
static int gpu_session_open(struct qlinkd *q, struct qlinkd_session *s,
			    const struct ql_hsb_channel_config *hc)
{
	struct ql_gpu_config gc = {
		.mode = (enum ql_gpu_mode)q->cfg->gpu.mode,
		.num_slots = q->cfg->ring.slots,
		.slot_size = q->cfg->ring.slot_size,
		.cuda_device = q->cfg->gpu.device,
		.cpu = q->cfg->dispatcher.cpus[0],
		.transport = s->hsb ? QL_GPU_TRANSPORT_HSB : QL_GPU_TRANSPORT_RING,
		.bad_requests = (int)q->cfg->bad_requests,
		.hsb = *hc,
	};
	int ret = ql_gpu_dispatcher_create(q->dev, &gc, &s->gpu);

	if (!ret && (q->cfg->builtins & QL_CONFIG_BUILTIN_PARITY))
		ret = ql_gpu_dispatcher_register(s->gpu, ql_gpu_builtin_function("qlink_parity"));
	if (!ret)
		ret = ql_gpu_dispatcher_local_params(s->gpu, &s->local);
	if (!ret)
		qlog(QL_LOG_INFO, "session", "gpu dispatcher", QU("session", s->id),
		     QS("mode", ql_gpu_mode_str(ql_gpu_dispatcher_mode(s->gpu))),
		     QS("transport", s->hsb ? "hsb" : "ring"));
	return ret;
}

/* A dispatcher's turn of a GPU session's emulated body (caller progress). */
static int gpu_poll(void *arg)
{
	return ql_gpu_dispatcher_progress(arg);
}

/*
 * A new session: its channel on the device and a daemon with every function
 * registered, not yet connected. *params are what the QCS needs (QP, GID,
 * ring address, rkey, geometry), for CONNECTION_PARAMS. A UDP session
 * (kind SESSION_UDP, udp its entry) is a bound socket instead: no params.
 */
int qlinkd_session_create(struct qlinkd *q, enum session_kind kind, const struct ql_config_udp *udp,
			  struct qlinkd_session **out, struct ql_conn_params *params)
{
	bool hsb = kind == SESSION_HSB;
	struct ql_verbs_channel_config vc = {
		.num_slots = q->cfg->ring.slots,
		.slot_size = q->cfg->ring.slot_size,
		.ctx = q->vctx,
		.qp_type = (enum ibv_qp_type)q->cfg->ring.qp,
	};
	struct ql_hsb_channel_config hc = {
		.num_pages = q->cfg->hsb.pages,
		.page_size = q->cfg->hsb.page_size,
		.frame_len = q->cfg->hsb.frame_len,
		.resp_size = q->cfg->hsb.resp_size,
	};
	struct ql_udp_channel_config uc = {
		.address = udp ? udp->address : NULL,
		.port = udp ? (uint16_t)udp->port : 0,
		.num_slots = udp ? udp->slots : 0,
		.slot_size = udp ? udp->slot_size : 0,
		.busy_poll_us = udp ? udp->busy_poll_us : 0,
		.allow = udp ? (const char *const *)udp->allow : NULL,
		.allow_count = udp ? udp->allow_count : 0,
	};
	struct ql_daemon_config dc = {
		.cpu = -1, /* served by q->disp, not a thread of its own */
		.burst = q->cfg->dispatcher.burst,
		/* a board's hsb session on a ring qlinkd: hsb's default, drop;
		 * a UDP listener: its own (default drop, as CUDA-Q) */
		.bad_requests = udp ? udp->bad_requests :
				hsb && q->cfg->transport != QL_CONFIG_TRANSPORT_HSB ?
				      QL_BAD_REQUEST_DROP :
				      q->cfg->bad_requests,
	};
	struct qlinkd_session *s;
	uint32_t slot;
	int ret;

	for (slot = 0; slot < q->cfg->max_sessions && q->sessions[slot]; slot++)
		;
	if (slot == q->cfg->max_sessions)
		return ql_error_set(-EBUSY, "all %u sessions (max_sessions) are in use",
				    q->cfg->max_sessions);
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->q = q;
	s->id = q->next_id++;
	s->core = -1;
	s->pin = -1;
	s->hsb = hsb;
	s->udp = kind == SESSION_UDP ? udp : NULL;
	if (kind != SESSION_UDP && q->cfg->datapath == QL_CONFIG_DATAPATH_GPU) {
		ret = gpu_session_open(q, s, &hc);
		goto made;
	}
	/* hsb: pages registered at iova 0, its own PD (no shared context) */
	ret = kind == SESSION_UDP ? ql_udp_channel_create(&uc, &s->ch) :
	      hsb		  ? ql_hsb_channel_create(q->dev, &hc, &s->ch) :
				    ql_verbs_channel_create(q->dev, &vc, &s->ch);
	if (!ret)
		ret = ql_daemon_create(&dc, s->ch, &s->d);
	if (!ret)
		ret = session_register(q, s);
	if (!ret && hsb) {
		struct ql_hsb_params hp;

		ret = ql_hsb_channel_local_params(s->ch, &hp);
		if (!ret)
			ql_hsb_params_to_conn(&hp, &s->local);
	} else if (!ret && kind == SESSION_RING) {
		ret = ql_verbs_channel_local_params(s->ch, &s->local);
	}
made:
	if (ret) {
		qlinkd_session_destroy(s);
		return ret;
	}
	q->sessions[slot] = s;
	if (params)
		*params = s->local;
	if (kind != SESSION_UDP)
		qlog(QL_LOG_INFO, "session", "created", QU("session", s->id),
		     QS("transport", hsb ? "hsb" : "ring"), QU("qpn", s->local.qpn),
		     QU("slots", s->local.num_slots), QU("slot_size", s->local.slot_size));
	*out = s;
	return 0;
}

/* Serve the session on the dispatcher with the fewest sessions (the first
 * such core on a tie). */
int qlinkd_session_run(struct qlinkd_session *s)
{
	struct qlinkd *q = s->q;
	uint32_t best = 0;
	int ret;

	if (s->gpu) {
		if (ql_gpu_dispatcher_is_running(s->gpu))
			return 0;
		ret = ql_gpu_dispatcher_start(s->gpu);
		/* the emulated body in caller progress: a dispatcher's round
		 * runs it (docs/progress.md), else its thread or the GPU does */
		if (ret || !ql_gpu_dispatcher_caller(s->gpu))
			return ret;
	}
	if (s->core >= 0)
		return 0;
	for (uint32_t i = 1; i < q->cfg->dispatcher.cpus_count; i++)
		if (q->load[i] < q->load[best])
			best = i;
	if (s->pin >= 0)
		best = (uint32_t)s->pin; /* udp[].cpu */
	ret = s->gpu ? ql_dispatcher_attach_poll(q->disp[best], gpu_poll, s->gpu) :
		       ql_dispatcher_attach(q->disp[best], s->d);
	if (ret) {
		if (s->gpu)
			ql_gpu_dispatcher_stop(s->gpu);
		return ret;
	}
	q->load[best]++;
	s->core = (int)best;
	qlog(QL_LOG_INFO, "session", "dispatching", QU("session", s->id),
	     QI("cpu", q->cfg->dispatcher.cpus[best]), QU("sessions_on_cpu", q->load[best]));
	return 0;
}

/* Take the session off its dispatcher (every request taken is answered). */
void qlinkd_session_pause(struct qlinkd_session *s)
{
	if (s->core >= 0) {
		/* (a GPU session's poller first: stop runs the body's end) */
		if (s->gpu)
			ql_dispatcher_detach_poll(s->q->disp[s->core], gpu_poll, s->gpu);
		else
			ql_dispatcher_detach(s->q->disp[s->core], s->d);
		s->q->load[s->core]--;
		s->core = -1;
	}
	if (s->gpu)
		ql_gpu_dispatcher_stop(s->gpu);
}

/* Connect the session's QP to the QCS's and start serving it. */
int qlinkd_session_connect(struct qlinkd_session *s, const struct ql_conn_params *client)
{
	int ret = s->gpu ? ql_gpu_dispatcher_connect(s->gpu, client, NULL) :
		  s->hsb ? ql_hsb_channel_connect(s->ch, client, NULL) :
			   ql_verbs_channel_connect(s->ch, client, NULL);

	if (!ret)
		ret = qlinkd_session_run(s);
	if (ret)
		return ret;
	s->connected = true;
	if (s->gpu) {
		qlog(QL_LOG_INFO, "session", "connected", QU("session", s->id),
		     QU("peer_qpn", client->qpn), QS("datapath", "gpu"));
		return 0;
	}
	qlog(QL_LOG_INFO, "session", "connected", QU("session", s->id), QU("peer_qpn", client->qpn),
	     QI("cpu", s->q->cfg->dispatcher.cpus[s->core]));
	return 0;
}

static void gpu_session_counters(const struct qlinkd_session *s, FILE *out)
{
	struct ql_gpu_stats st;

	ql_gpu_dispatcher_stats(s->gpu, &st);
	qcounters(out, "session", QU("session", s->id), QS("datapath", "gpu"),
		  QS("mode", ql_gpu_mode_str(ql_gpu_dispatcher_mode(s->gpu))),
		  QI("running", ql_gpu_dispatcher_is_running(s->gpu)), QU("requests", st.requests),
		  QU("responses", st.completed), QU("ok", st.ok),
		  QU("handler_errors", st.handler_error),
		  QU("protocol_errors",
		     st.requests - st.ok - st.handler_error - st.err_result_overrun),
		  QU("result_overruns", st.err_result_overrun), QU("sent", st.posted),
		  QU("send_errors", st.send_errors), QI("error", ql_gpu_dispatcher_error(s->gpu)),
		  QR("handler_cycles_avg",
		     st.handled ? (double)st.handler_cycles_sum / (double)st.handled : 0.0),
		  QU("handler_cycles_max", st.handler_cycles_max));
	if (s->hsb) {
		/* the CPU channel's hsb line; page_busy cannot happen (a page
		 * is free once copied), a result past resp_size is
		 * RESULT_OVERFLOW (protocol_errors) */
		uint64_t refused =
			st.hsb_bad_imm + st.hsb_bad_len + st.hsb_not_imm + st.hsb_recv_errors;

		qcounters(out, "hsb", QU("session", s->id), QS("datapath", "gpu"),
			  QU("frames", st.requests + refused), QU("refused", refused),
			  QU("bad_imm", st.hsb_bad_imm), QU("bad_len", st.hsb_bad_len),
			  QU("not_imm", st.hsb_not_imm), QU("recv_errors", st.hsb_recv_errors),
			  QU("dropped", st.dropped));
	}
}

static void session_counters(const struct qlinkd_session *s, FILE *out)
{
	struct ql_daemon_stats st;
	struct ql_daemon_function_stats fs;
	struct ql_hist h;

	if (s->gpu) {
		gpu_session_counters(s, out);
		return;
	}
	ql_daemon_stats(s->d, &st);
	ql_daemon_handler_hist(s->d, &h);
	qcounters(out, "session", QU("session", s->id), QI("running", st.running),
		  QU("requests", st.requests), QU("responses", st.responses), QU("ok", st.ok),
		  QU("handler_errors", st.handler_error),
		  QU("protocol_errors", st.requests - st.ok - st.handler_error -
						st.err_result_overrun - st.err_deadline),
		  QU("dropped", st.dropped), QU("result_overruns", st.err_result_overrun),
		  QU("deadline_exceeded", st.err_deadline), QU("sent", st.sent),
		  QU("dropped_rnr", st.dropped_rnr), QU("dropped_peer", st.dropped_peer),
		  QU("send_failed", st.send_failed), QU("bursts", st.bursts),
		  QI("channel_error", st.channel_error), QI("failed", st.failed),
		  QU("handler_ns_p50", ql_hist_count(&h) ? ql_hist_percentile(&h, 50) : 0),
		  QU("handler_ns_p99", ql_hist_count(&h) ? ql_hist_percentile(&h, 99) : 0));
	if (s->udp) {
		struct ql_udp_channel_stats us;

		if (!ql_udp_channel_stats(s->ch, &us))
			qcounters(out, "udp", QU("session", s->id), QS("listen", s->listen),
				  QU("datagrams", us.datagrams), QU("oversize", us.oversize),
				  QU("undersize", us.undersize), QU("sent", us.sent),
				  QU("send_errors", us.send_errors),
				  QU("recv_errors", us.recv_errors),
				  QU("kernel_drops", us.kernel_drops),
				  QI("busy_poll", us.busy_poll), QU("truncated", us.truncated),
				  QU("not_allowed", us.not_allowed), QU("shed", us.shed),
				  QU("reply_clamped", us.reply_clamped));
	}
	if (s->hsb) {
		struct ql_hsb_channel_stats hs;

		/* why frames were refused before the RPC layer saw them */
		if (!ql_hsb_channel_stats(s->ch, &hs))
			qcounters(out, "hsb", QU("session", s->id), QU("frames", hs.frames),
				  QU("refused", hs.bad_imm + hs.bad_len + hs.not_imm +
							hs.page_busy + hs.recv_errors),
				  QU("bad_imm", hs.bad_imm), QU("bad_len", hs.bad_len),
				  QU("not_imm", hs.not_imm), QU("page_busy", hs.page_busy),
				  QU("recv_errors", hs.recv_errors),
				  QU("resp_too_big", hs.resp_too_big));
	}
	for (uint32_t i = 0; i < ql_daemon_function_count(s->d); i++) {
		if (ql_daemon_function_stats(s->d, i, &fs))
			continue;
		qcounters(out, "function", QU("session", s->id), QS("function", fs.name),
			  QX32("id", fs.id), QU("calls", fs.calls), QU("errors", fs.errors),
			  QU("result_overruns", fs.result_overruns));
	}
}

/* Channels of sessions whose handler was abandoned past its deadline: the
 * stuck thread may still write into their response buffers, so they are
 * never destroyed (kept reachable here). */
static struct ql_channel **quarantine;
static size_t nquarantine;

/* Stop the dispatcher (every request taken is answered), then free. */
void qlinkd_session_destroy(struct qlinkd_session *s)
{
	struct qlinkd *q;
	bool failed = false;

	if (!s)
		return;
	q = s->q;
	if (s->gpu) {
		qlinkd_session_pause(s);
		session_counters(s, stdout);
		if (s->connected)
			qlinkd_stats_retire(q, s);
		ql_gpu_dispatcher_destroy(s->gpu);
	}
	if (s->d) {
		qlinkd_session_pause(s);
		session_counters(s, stdout);
		if (s->connected)
			qlinkd_stats_retire(q, s);
		failed = ql_daemon_failure(s->d, NULL, 0) != 0;
		ql_daemon_destroy(s->d); /* a failed one is kept by the library */
	}
	if (failed) {
		struct ql_channel **nq = realloc(quarantine, (nquarantine + 1) * sizeof(*nq));

		if (nq) {
			quarantine = nq;
			quarantine[nquarantine++] = s->ch;
		}
		/* else: leaked, unreachable, but never freed under the thread */
		qlog(QL_LOG_WARN, "session", "channel kept: its handler may still run",
		     QU("session", s->id));
	} else if (s->ch) {
		ql_channel_destroy(s->ch);
	}
	for (uint32_t i = 0; q && i < q->cfg->max_sessions; i++)
		if (q->sessions[i] == s)
			q->sessions[i] = NULL;
	qlog(QL_LOG_INFO, "session", "destroyed", QU("session", s->id));
	free(s);
}

void qlinkd_print_counters(struct qlinkd *q)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < q->cfg->max_sessions; i++) {
		if (q->sessions[i]) {
			session_counters(q->sessions[i], stdout);
			n++;
		}
	}
	for (uint32_t i = 0; q->disp && i < q->cfg->dispatcher.cpus_count; i++) {
		struct ql_dispatcher_stats ds;

		ql_dispatcher_stats(q->disp[i], &ds);
		qcounters(stdout, "dispatcher", QI("cpu", ds.cpu), QU("sessions", ds.daemons),
			  QU("requests", ds.requests), QU("rounds", ds.rounds),
			  QU("idle_rounds", ds.idle_rounds), QU("backoffs", ds.backoffs));
	}
	qcounters(stdout, "qlinkd", QU("sessions", n), QU("plugins", q->nplugins));
}

/* The device's shared verbs context and one running dispatcher per core. */
int qlinkd_dispatch_open(struct qlinkd *q)
{
	const struct ql_config *c = q->cfg;
	struct ql_verbs_context_config xc = {
		.max_channels = c->max_sessions,
	};
	struct ql_dispatcher_config dc = {
		.idle = (enum ql_idle_policy)c->dispatcher.idle,
		.idle_after_ns = (uint64_t)c->dispatcher.idle_after_us * 1000,
		.sleep_ns = (uint64_t)c->dispatcher.sleep_us * 1000,
		.max_daemons = c->max_sessions,
		.call_deadline_ns = (uint64_t)c->dispatcher.call_deadline_ms * 1000000,
	};
	uint64_t pool = ql_pool_region_size(c->ring.slots, c->ring.slot_size);
	int ret = 0;

	if (c->datapath == QL_CONFIG_DATAPATH_GPU) {
		/* each session's GPU dispatcher serves it: the CPU dispatchers
		 * run the emulated bodies in caller progress (docs/progress.md)
		 * and nothing else (an empty round naps) */
		qlog(QL_LOG_INFO, "dispatcher", "datapath gpu",
		     QS("mode", ql_gpu_mode_str((enum ql_gpu_mode)c->gpu.mode)),
		     QI("device", c->gpu.device));
	} else if (c->transport == QL_CONFIG_TRANSPORT_HSB) {
		/* hsb sessions have their own PD: their pages are registered at
		 * iova 0, one region per session */
	} else if (pool * c->max_sessions <= (1u << 30)) {
		/* every session's response buffers in one registration, unless
		 * that would be more than the context holds (1 GiB): then each
		 * its own */
		xc.tx_bytes = (uint32_t)pool;
		ret = ql_verbs_context_create(q->dev, &xc, &q->vctx);
	} else {
		qlog(QL_LOG_WARN, "dispatcher", "no shared verbs context",
		     QS("reason", "max_sessions x ring bytes above 1 GiB"));
	}
	if (ret)
		return ret;
	q->disp = calloc(c->dispatcher.cpus_count, sizeof(*q->disp));
	q->load = calloc(c->dispatcher.cpus_count, sizeof(*q->load));
	if (!q->disp || !q->load)
		return -ENOMEM;
	for (uint32_t i = 0; i < c->dispatcher.cpus_count; i++) {
		dc.cpu = c->dispatcher.cpus[i];
		ret = ql_dispatcher_create(&dc, &q->disp[i]);
		if (!ret)
			ret = ql_dispatcher_start(q->disp[i]);
		if (ret)
			return ret;
		qlog(QL_LOG_INFO, "dispatcher", "started", QI("cpu", dc.cpu),
		     QS("idle", ql_idle_policy_str(dc.idle)),
		     QU("idle_after_us", c->dispatcher.idle_after_us),
		     QU("call_deadline_ms", c->dispatcher.call_deadline_ms));
	}
	return 0;
}

/* Dispatcher threads left to a handler past its deadline, over all cores. */
uint64_t qlinkd_abandoned_threads(struct qlinkd *q)
{
	uint64_t n = 0;

	for (uint32_t i = 0; q->disp && i < q->cfg->dispatcher.cpus_count; i++) {
		struct ql_dispatcher_stats ds;

		ql_dispatcher_stats(q->disp[i], &ds);
		n += ds.abandoned;
	}
	return n;
}

/* After every session is gone. */
void qlinkd_dispatch_close(struct qlinkd *q)
{
	for (uint32_t i = 0; q->disp && i < q->cfg->dispatcher.cpus_count; i++)
		ql_dispatcher_destroy(q->disp[i]);
	free(q->disp);
	free(q->load);
	q->disp = NULL;
	q->load = NULL;
	ql_verbs_context_destroy(q->vctx);
	q->vctx = NULL;
}

/* ---- plugins ------------------------------------------------------------------ */

/* check_only: --check-config. Without --load-plugins (load false) each
 * plugin's file is checked (exists, trusted: ql_plugin_check) and none of
 * its code runs; with it, each is loaded (constructor and init run). */
int qlinkd_load_plugins(struct qlinkd *q, bool check_only, bool load)
{
	const struct ql_config *c = q->cfg;
	int ret = 0;

	q->plugins = calloc(c->plugins_count ? c->plugins_count : 1, sizeof(*q->plugins));
	if (!q->plugins)
		return -ENOMEM;
	for (uint32_t i = 0; i < c->plugins_count; i++) {
		struct ql_plugin *p;
		int r;

		if (check_only && access(c->plugins[i].path, R_OK))
			continue; /* the config check said so already */
		p = NULL;
		if (check_only && !load)
			r = ql_plugin_check(c->plugins[i].path);
		else
			r = ql_plugin_load(c->plugins[i].path, c->plugins[i].config, &p);

		if (r) {
			if (!check_only)
				qlog(QL_LOG_ERROR, "plugin", "cannot load",
				     QS("path", c->plugins[i].path), QS("config", c->path),
				     QU("line", c->plugins[i].line),
				     QS("error", qlinkd_detail_or(r)));
			qlinkd_say("%s:%u: plugins[%u]: %s\n", c->path, c->plugins[i].line, i,
				   qlinkd_detail_or(r));
			ret = ret ? ret : r;
			continue;
		}
		if (!p)
			continue; /* checked only: no flags to read without loading */
		q->plugins[q->nplugins++] = p;
		if (c->udp_count &&
		    !(ql_plugin_flags(p) & (QL_PLUGIN_STATELESS | QL_PLUGIN_PER_SOURCE))) {
			/* every sender a listener allows reaches the one session:
			 * per-session state would be every caller's to reset,
			 * feed or read */
			if (!check_only)
				qlog(QL_LOG_ERROR, "plugin",
				     "keeps state per session: refused with udp",
				     QS("plugin", ql_plugin_get_info(p)->name),
				     QS("path", c->plugins[i].path), QS("config", c->path),
				     QU("line", c->plugins[i].line));
			qlinkd_say(
				"%s:%u: plugins[%u]: plugin '%s' keeps state per session (it "
				"declares neither QL_PLUGIN_STATELESS nor QL_PLUGIN_PER_SOURCE) "
				"and udp[0] (line %u) is a listener shared by every sender: one "
				"caller could reset or read another's state; rebuild the plugin "
				"declaring its flags (plugin ABI 3) or remove the udp listeners\n",
				c->path, c->plugins[i].line, i, ql_plugin_get_info(p)->name,
				c->udp[0].line);
			ret = ret ? ret : -EINVAL;
			continue;
		}
		if (!check_only)
			qlog(QL_LOG_INFO, "plugin", "loaded",
			     QS("plugin", ql_plugin_get_info(p)->name),
			     QS("version", ql_plugin_get_info(p)->version ?
						   ql_plugin_get_info(p)->version :
						   ""),
			     QS("path", c->plugins[i].path));
	}
	return ret;
}

void qlinkd_unload_plugins(struct qlinkd *q)
{
	for (uint32_t i = 0; i < q->nplugins; i++)
		ql_plugin_unload(q->plugins[i]);
	free(q->plugins);
	q->plugins = NULL;
	q->nplugins = 0;
}

/* The table every session's functions make (the built-ins `builtins:`
 * names, then each plugin's), in *out; a plugin whose functions clash with
 * another's (or a built-in) fails here (logged too when serving). */
static int function_table(struct qlinkd *q, bool serving, struct ql_rpc_table **out)
{
	struct ql_rpc_table *t;
	int ret = ql_rpc_table_create(1024, &t);

	if (ret)
		return ret;
	ret = 0;
	if (q->cfg->builtins & QL_CONFIG_BUILTIN_PARITY)
		ret = ql_rpc_table_add(t, ql_demo_parity_function());
	if (ret >= 0 && (q->cfg->builtins & QL_CONFIG_BUILTIN_INCREMENT))
		ret = ql_rpc_table_add(t, ql_demo_increment_function());
	for (uint32_t i = 0; ret >= 0 && i < q->nplugins; i++) {
		ret = ql_plugin_register_table(q->plugins[i], t);
		if (ret && serving)
			qlog(QL_LOG_ERROR, "plugin", "cannot register its functions",
			     QS("plugin", ql_plugin_get_info(q->plugins[i])->name),
			     QS("config", q->cfg->path), QU("line", q->cfg->plugins[i].line),
			     QS("error", ql_error_detail()));
		if (ret)
			qlinkd_say("%s:%u: plugins[%u]: %s\n", q->cfg->path,
				   q->cfg->plugins[i].line, i, ql_error_detail());
	}
	if (ret < 0) {
		ql_rpc_table_destroy(t);
		return ret;
	}
	*out = t;
	return 0;
}

/* In --check-config, also make every function table once. */
int qlinkd_check_registration(struct qlinkd *q)
{
	struct ql_rpc_table *t;
	int ret = function_table(q, false, &t);

	if (!ret)
		ql_rpc_table_destroy(t);
	return ret;
}

/* Every function a session serves, logged with its id (and listed by the
 * stats with zero calls until called). */
int qlinkd_list_functions(struct qlinkd *q)
{
	struct ql_rpc_table *t;
	int ret;

	if (q->cfg->datapath == QL_CONFIG_DATAPATH_GPU)
		return 0; /* its own table: qlink_parity, as gpu_session_open says */
	ret = function_table(q, true, &t);
	if (ret)
		return ret;
	for (uint32_t i = 0; i < ql_rpc_table_count(t); i++) {
		const struct ql_rpc_function *fn = ql_rpc_table_get(t, (int)i);

		if (!fn)
			continue;
		qlog(QL_LOG_INFO, "qlinkd", "serves", QS("function", fn->name ? fn->name : ""),
		     QX32("id", fn->id));
		qlinkd_stats_served(q, fn->name, fn->id);
	}
	ql_rpc_table_destroy(t);
	return 0;
}

/* A session whose handler overran the call deadline: the watchdog failed it
 * and moved the other sessions of its core to a fresh thread. Say so, and
 * tell its QCS (ABORT with the reason; the abort callback then ends the
 * QCS's session, every channel of it). Returns true when it sent one (the
 * session table may have changed). */
static bool report_failure(struct qlinkd *q, struct qlinkd_session *s)
{
	struct ql_ctl_msg m = { .type = QL_CTL_ABORT };
	char fn[64];
	int err = ql_daemon_failure(s->d, fn, sizeof(fn)), ret;
	uint32_t id = s->id;

	s->reported_failure = true;
	qlog(QL_LOG_ERROR, "session", "handler exceeded its deadline: session failed",
	     QU("session", id), QS("function", fn),
	     QU("deadline_ms", q->cfg->dispatcher.call_deadline_ms), QS("error", ql_strerror(err)));
	if (!s->ctl_id || !q->ctl)
		return false;
	snprintf(m.text, sizeof(m.text), "handler '%s' exceeded its deadline (%u ms)", fn,
		 q->cfg->dispatcher.call_deadline_ms);
	ret = ql_ctl_server_request(q->ctl, s->ctl_id, &m, 1000);
	qlog(ret ? QL_LOG_WARN : QL_LOG_INFO, "control", "QCS told (ABORT)", QU("session", id),
	     QS("answer", ret ? ql_strerror(ret) : "OK"));
	return true;
}

/* Failed sessions and channels, checked from the main loop. */
void qlinkd_check_sessions(struct qlinkd *q)
{
	for (uint32_t i = 0; i < q->cfg->max_sessions; i++) {
		struct qlinkd_session *s = q->sessions[i];
		struct ql_daemon_stats st;

		if (!s || !s->connected)
			continue;
		if (s->gpu) {
			int err = ql_gpu_dispatcher_error(s->gpu);

			if (err && !s->reported_error) {
				s->reported_error = err;
				qlog(QL_LOG_WARN, "session", "gpu dispatcher stopped (peer gone?)",
				     QU("session", s->id), QS("error", ql_strerror(err)));
			}
			continue;
		}
		ql_daemon_stats(s->d, &st);
		if (st.failed && !s->reported_failure) {
			if (report_failure(q, s))
				return; /* sessions may be gone: the next tick goes on */
			continue;
		}
		if (st.err_result_overrun != s->reported_overruns) {
			/* name the functions: the canary is not enough to
			 * find a buggy plugin from the counters alone */
			s->reported_overruns = st.err_result_overrun;
			for (uint32_t k = 0; k < ql_daemon_function_count(s->d); k++) {
				struct ql_daemon_function_stats fs;

				if (!ql_daemon_function_stats(s->d, k, &fs) && fs.result_overruns)
					qlog(QL_LOG_ERROR, "session",
					     "handler wrote past its result buffer (answered -7)",
					     QU("session", s->id), QS("function", fs.name),
					     QU("result_overruns", fs.result_overruns));
			}
		}
		if (s->udp && !s->warned_oversize) {
			struct ql_udp_channel_stats us;

			/* CUDA-Q's one warning, from this thread: the channel
			 * only counts (no logging on the hot path) */
			if (!ql_udp_channel_stats(s->ch, &us) && us.oversize) {
				s->warned_oversize = true;
				qlog(QL_LOG_WARN, "session",
				     "dropping datagrams longer than the slot stride (warned "
				     "once; counted as udp oversize)",
				     QU("session", s->id), QS("listen", s->listen),
				     QU("bytes", us.last_oversize),
				     QU("slot_size", s->udp->slot_size),
				     QU("oversize", us.oversize));
			}
		}
		if (st.channel_error && !s->reported_error) {
			s->reported_error = st.channel_error;
			qlog(QL_LOG_WARN, "session", "channel failed (peer gone?)",
			     QU("session", s->id), QS("error", ql_strerror(st.channel_error)));
		}
	}
}
