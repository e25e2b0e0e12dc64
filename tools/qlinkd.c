/* SPDX-License-Identifier: MIT */
/*
 * qlinkd: the real-time host daemon.
 *
 *   qlinkd --config FILE [--params-file P]   run in the foreground
 *   qlinkd --check-config FILE [--load-plugins]  validate FILE (and its plugins:
 *                                            trust only, or loaded)
 *
 * It reads the YAML configuration (src/config/config.h), opens the device, loads
 * the handler plugins (qlink/plugin.h) and serves sessions: a session is one
 * verbs channel (a request ring and its QP, in the device's shared verbs
 * context) and one daemon with the built-in functions (qlink_parity and
 * rpc_increment, as `builtins:` says) and every plugin function registered,
 * made when a QCS asks for one. Sessions made at start: a Hololink board
 * of `qcs:` (an hsb channel) and a CUDA-Q UDP listener of `udp:` (a UDP
 * channel, qlink/udp.h), served by the same dispatchers and counted alike. One dispatcher thread
 * runs per configured core; a session is put on the least-loaded one when
 * it starts (ACK, or START after a STOP: a restart may move it). The UDP
 * control plane drives sessions (session_create on DISCOVER,
 * session_connect on ACK, session_destroy on COMPLETE, ABORT or loss);
 * besides it, --params-file runs one session over the same file rendezvous
 * as `qlink serve` (src/transport/rendezvous.h), so qlinkd can also be driven by
 * `qlink vppu --params-file P`.
 *
 * Signals arrive through a signalfd read by the main loop (no work in
 * handlers): SIGINT/SIGTERM tell every connected QCS (ABORT), stop every
 * dispatcher, print the final counters and free everything, exit 0; SIGUSR1
 * prints the counters; SIGHUP is logged and does not reload (it checks the
 * file on disk and says whether a restart would start). Logs are
 * structured lines on stderr, text or JSON per the config; counters go to
 * stdout in the same format.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <ifaddrs.h>
#include <inttypes.h>
#include <linux/if_packet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "config/config.h"
#include "demo/demo.h"
#include "plugin/loader.h"
#include "qlink/channel.h"
#include "qlink/clock.h"
#include "qlink/control.h"
#include "qlink/daemon.h"
#include "qlink/dispatcher.h"
#include "qlink/error.h"
#include "qlink/gpu.h"
#include "qlink/hololink.h"
#include "qlink/hsb.h"
#include "qlink/log.h"
#include "qlink/udp.h"
#include "qlink/verbs.h"
#include "tools.h"

#ifndef QLINK_VERSION
#define QLINK_VERSION "0"
#endif

/* ---- structured logs ------------------------------------------------------ */

static struct {
	enum ql_log_level level;
	enum ql_config_log_format format;
} logcfg = { QL_LOG_INFO, QL_LOG_FORMAT_TEXT };

static void json_str(FILE *f, const char *s, size_t n)
{
	fputc('"', f);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static bool is_number(const char *s, size_t n)
{
	char buf[64], *end;

	if (!n || n >= sizeof(buf))
		return false;
	memcpy(buf, s, n);
	buf[n] = '\0';
	if (strspn(buf, "-0123456789.") != n)
		return false; /* no hex, inf or nan: not JSON numbers */
	strtod(buf, &end);
	return *end == '\0';
}

/*
 * One line: time, level, component, message, then the key=value pairs of
 * kv (printf-formatted; pairs separated by spaces, values without spaces).
 * Lines at or under the configured level go to stderr; force sends to out
 * whatever the level (the counters).
 */
static void qlog_to(FILE *out, bool force, enum ql_log_level level, const char *comp,
		    const char *msg, const char *kv, ...) __attribute__((format(printf, 6, 7)));
static void qlog_to(FILE *out, bool force, enum ql_log_level level, const char *comp,
		    const char *msg, const char *kv, ...)
{
	static const char *const names[] = { "error", "warn", "info", "debug" };
	char pairs[1024] = "", ts[40], *p;
	struct timespec now;
	struct tm tm;
	va_list ap;

	if (!force && (int)level > (int)logcfg.level)
		return;
	if (kv) {
		va_start(ap, kv);
		vsnprintf(pairs, sizeof(pairs), kv, ap);
		va_end(ap);
	}
	clock_gettime(CLOCK_REALTIME, &now);
	gmtime_r(&now.tv_sec, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
	flockfile(out);
	if (logcfg.format == QL_LOG_FORMAT_TEXT) {
		/* Values can come from peers: control characters, quotes and backslashes
		 * escaped, so that no line or field can be forged (JSON: json_str). */
		char safe[4 * sizeof(pairs)];

		fprintf(out, "%s.%06ldZ %s %s ", ts, now.tv_nsec / 1000, names[level], comp);
		ql_log_escape(safe, sizeof(safe), msg);
		if (strchr(msg, ' '))
			fprintf(out, "\"%s\"", safe);
		else
			fputs(safe, out);
		ql_log_escape(safe, sizeof(safe), pairs);
		if (pairs[0])
			fprintf(out, " %s", safe);
		fputc('\n', out);
	} else {
		fprintf(out, "{\"ts\":\"%s.%06ldZ\",\"level\":\"%s\",\"component\":", ts,
			now.tv_nsec / 1000, names[level]);
		json_str(out, comp, strlen(comp));
		fputs(",\"msg\":", out);
		json_str(out, msg, strlen(msg));
		for (p = pairs; *p;) {
			char *sp = strchr(p, ' '), *eq;
			size_t n = sp ? (size_t)(sp - p) : strlen(p);

			eq = memchr(p, '=', n);
			if (eq) {
				fputc(',', out);
				json_str(out, p, (size_t)(eq - p));
				fputc(':', out);
				if (is_number(eq + 1, n - (size_t)(eq - p) - 1))
					fwrite(eq + 1, 1, n - (size_t)(eq - p) - 1, out);
				else
					json_str(out, eq + 1, n - (size_t)(eq - p) - 1);
			}
			p += n;
			while (*p == ' ')
				p++;
		}
		fputs("}\n", out);
	}
	fflush(out);
	funlockfile(out);
}

#define qlog(level, comp, msg, ...) qlog_to(stderr, false, level, comp, msg, __VA_ARGS__)

/* ---- the daemon's state ------------------------------------------------------ */

struct qlinkd;

/* The data plane of a session. */
enum session_kind {
	SESSION_RING, /* a request ring and its QP (verbs channel) */
	SESSION_HSB,  /* hsb pages (transport: hsb, or a board of qcs:) */
	SESSION_UDP,  /* a CUDA-Q UDP listener of udp: */
};

/* One QCS's connection: a ring + QP (the channel) and its daemon, served by
 * one of the dispatchers while it runs. */
struct qlinkd_session {
	uint32_t id;
	struct qlinkd *q;
	struct ql_channel *ch;
	struct ql_daemon *d;
	struct ql_gpu_dispatcher *gpu;	   /* datapath: gpu: serves it instead of ch and d */
	int core;			   /* index in q->disp serving it, -1 while stopped */
	bool hsb;			   /* an hsb channel (transport: hsb), not a ring */
	const struct ql_config_udp *udp;   /* its udp: entry (SESSION_UDP), or NULL */
	int pin;			   /* the dispatcher (index) it must run on, -1: any */
	bool warned_oversize;		   /* the one "dropping N-byte datagram" warning */
	char listen[INET6_ADDRSTRLEN + 8]; /* UDP: the bound ADDRESS:PORT */
	struct ql_conn_params local;
	bool connected;
	int reported_error;
	bool reported_failure;
	uint64_t reported_overruns;
	uint64_t ctl_id; /* its QCS's control-plane session; 0: --params-file */
};

struct qlinkd {
	struct ql_config *cfg;
	struct ql_device *dev;
	struct ql_verbs_context *vctx; /* one PD and response MR for every session */
	struct ql_dispatcher **disp;   /* one per cfg->dispatcher.cpus entry */
	uint32_t *load;		       /* sessions each dispatcher serves */
	struct ql_ctl_server *ctl;
	struct ql_plugin **plugins;
	uint32_t nplugins;
	struct qlinkd_session **sessions; /* cfg->max_sessions entries */
	uint32_t next_id;
	int sigfd;
};

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
	qlog(level, "plugin", msg ? msg : "", "plugin=%s", ((struct reg_host *)host)->plugin);
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

static void session_destroy(struct qlinkd_session *s);

/* The kind of the sessions QCSs open (control plane, --params-file). */
static enum session_kind qcs_kind(const struct qlinkd *q)
{
	return q->cfg->transport == QL_CONFIG_TRANSPORT_HSB ? SESSION_HSB : SESSION_RING;
}

/* datapath: gpu: the session's GPU dispatcher (its own ring channel) with
 * the built-ins that have a GPU build; its emulation, where it runs, on
 * the first dispatcher core (docs/gpu.md). */
static int gpu_session_open(struct qlinkd *q, struct qlinkd_session *s)
{
	struct ql_gpu_config gc = {
		.mode = (enum ql_gpu_mode)q->cfg->gpu.mode,
		.num_slots = q->cfg->ring.slots,
		.slot_size = q->cfg->ring.slot_size,
		.cuda_device = q->cfg->gpu.device,
		.cpu = q->cfg->dispatcher.cpus[0],
	};
	int ret = ql_gpu_dispatcher_create(q->dev, &gc, &s->gpu);

	if (!ret && (q->cfg->builtins & QL_CONFIG_BUILTIN_PARITY))
		ret = ql_gpu_dispatcher_register(s->gpu, ql_gpu_builtin_function("qlink_parity"));
	if (!ret)
		ret = ql_gpu_dispatcher_local_params(s->gpu, &s->local);
	if (!ret)
		qlog(QL_LOG_INFO, "session", "gpu dispatcher", "session=%u mode=%s", s->id,
		     ql_gpu_mode_str(ql_gpu_dispatcher_mode(s->gpu)));
	return ret;
}

/*
 * A new session: its channel on the device and a daemon with every function
 * registered, not yet connected. *params are what the QCS needs (QP, GID,
 * ring address, rkey, geometry), for CONNECTION_PARAMS. A UDP session
 * (kind SESSION_UDP, udp its entry) is a bound socket instead: no params.
 */
static int session_create(struct qlinkd *q, enum session_kind kind, const struct ql_config_udp *udp,
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
	if (kind == SESSION_RING && q->cfg->datapath == QL_CONFIG_DATAPATH_GPU) {
		ret = gpu_session_open(q, s);
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
		session_destroy(s);
		return ret;
	}
	q->sessions[slot] = s;
	if (params)
		*params = s->local;
	if (kind != SESSION_UDP)
		qlog(QL_LOG_INFO, "session", "created",
		     "session=%u transport=%s qpn=%u slots=%u slot_size=%u", s->id,
		     hsb ? "hsb" : "ring", s->local.qpn, s->local.num_slots, s->local.slot_size);
	*out = s;
	return 0;
}

/* Serve the session on the dispatcher with the fewest sessions (the first
 * such core on a tie). */
static int session_run(struct qlinkd_session *s)
{
	struct qlinkd *q = s->q;
	uint32_t best = 0;
	int ret;

	if (s->gpu)
		return ql_gpu_dispatcher_is_running(s->gpu) ? 0 : ql_gpu_dispatcher_start(s->gpu);
	if (s->core >= 0)
		return 0;
	for (uint32_t i = 1; i < q->cfg->dispatcher.cpus_count; i++)
		if (q->load[i] < q->load[best])
			best = i;
	if (s->pin >= 0)
		best = (uint32_t)s->pin; /* udp[].cpu */
	ret = ql_dispatcher_attach(q->disp[best], s->d);
	if (ret)
		return ret;
	q->load[best]++;
	s->core = (int)best;
	qlog(QL_LOG_INFO, "session", "dispatching", "session=%u cpu=%d sessions_on_cpu=%u", s->id,
	     q->cfg->dispatcher.cpus[best], q->load[best]);
	return 0;
}

/* Take the session off its dispatcher (every request taken is answered). */
static void session_pause(struct qlinkd_session *s)
{
	if (s->gpu) {
		ql_gpu_dispatcher_stop(s->gpu);
		return;
	}
	if (s->core < 0)
		return;
	ql_dispatcher_detach(s->q->disp[s->core], s->d);
	s->q->load[s->core]--;
	s->core = -1;
}

/* Connect the session's QP to the QCS's and start serving it. */
static int session_connect(struct qlinkd_session *s, const struct ql_conn_params *client)
{
	int ret = s->gpu ? ql_gpu_dispatcher_connect(s->gpu, client, NULL) :
		  s->hsb ? ql_hsb_channel_connect(s->ch, client, NULL) :
			   ql_verbs_channel_connect(s->ch, client, NULL);

	if (!ret)
		ret = session_run(s);
	if (ret)
		return ret;
	s->connected = true;
	if (s->gpu) {
		qlog(QL_LOG_INFO, "session", "connected", "session=%u peer_qpn=%u datapath=gpu",
		     s->id, client->qpn);
		return 0;
	}
	qlog(QL_LOG_INFO, "session", "connected", "session=%u peer_qpn=%u cpu=%d", s->id,
	     client->qpn, s->q->cfg->dispatcher.cpus[s->core]);
	return 0;
}

static void gpu_session_counters(const struct qlinkd_session *s, FILE *out)
{
	struct ql_gpu_stats st;

	ql_gpu_dispatcher_stats(s->gpu, &st);
	qlog_to(out, true, QL_LOG_INFO, "counters", "session",
		"session=%u datapath=gpu mode=%s running=%d requests=%" PRIu64 " responses=%" PRIu64
		" ok=%" PRIu64 " handler_errors=%" PRIu64 " protocol_errors=%" PRIu64
		" result_overruns=%" PRIu64 " sent=%" PRIu64 " send_errors=%" PRIu64
		" error=%d handler_cycles_avg=%.0f handler_cycles_max=%" PRIu64,
		s->id, ql_gpu_mode_str(ql_gpu_dispatcher_mode(s->gpu)),
		ql_gpu_dispatcher_is_running(s->gpu), st.requests, st.completed, st.ok,
		st.handler_error, st.requests - st.ok - st.handler_error - st.err_result_overrun,
		st.err_result_overrun, st.posted, st.send_errors, ql_gpu_dispatcher_error(s->gpu),
		st.handled ? (double)st.handler_cycles_sum / (double)st.handled : 0.0,
		st.handler_cycles_max);
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
	qlog_to(out, true, QL_LOG_INFO, "counters", "session",
		"session=%u running=%d requests=%" PRIu64 " responses=%" PRIu64 " ok=%" PRIu64
		" handler_errors=%" PRIu64 " protocol_errors=%" PRIu64 " dropped=%" PRIu64
		" result_overruns=%" PRIu64 " deadline_exceeded=%" PRIu64 " sent=%" PRIu64
		" dropped_rnr=%" PRIu64 " dropped_peer=%" PRIu64 " send_failed=%" PRIu64
		" bursts=%" PRIu64
		" channel_error=%d failed=%d handler_ns_p50=%.0f handler_ns_p99=%.0f",
		s->id, st.running, st.requests, st.responses, st.ok, st.handler_error,
		st.requests - st.ok - st.handler_error - st.err_result_overrun - st.err_deadline,
		st.dropped, st.err_result_overrun, st.err_deadline, st.sent, st.dropped_rnr,
		st.dropped_peer, st.send_failed, st.bursts, st.channel_error, st.failed,
		ql_hist_count(&h) ? ql_hist_percentile(&h, 50) : 0.0,
		ql_hist_count(&h) ? ql_hist_percentile(&h, 99) : 0.0);
	if (s->udp) {
		struct ql_udp_channel_stats us;

		if (!ql_udp_channel_stats(s->ch, &us))
			qlog_to(out, true, QL_LOG_INFO, "counters", "udp",
				"session=%u listen=%s datagrams=%" PRIu64 " oversize=%" PRIu64
				" undersize=%" PRIu64 " sent=%" PRIu64 " send_errors=%" PRIu64
				" recv_errors=%" PRIu64 " kernel_drops=%" PRIu64 " busy_poll=%d"
				" truncated=%" PRIu64 " not_allowed=%" PRIu64 " shed=%" PRIu64
				" reply_clamped=%" PRIu64,
				s->id, s->listen, us.datagrams, us.oversize, us.undersize, us.sent,
				us.send_errors, us.recv_errors, us.kernel_drops, us.busy_poll,
				us.truncated, us.not_allowed, us.shed, us.reply_clamped);
	}
	if (s->hsb) {
		struct ql_hsb_channel_stats hs;

		/* why frames were refused before the RPC layer saw them */
		if (!ql_hsb_channel_stats(s->ch, &hs))
			qlog_to(out, true, QL_LOG_INFO, "counters", "hsb",
				"session=%u frames=%" PRIu64 " refused=%" PRIu64 " bad_imm=%" PRIu64
				" bad_len=%" PRIu64 " not_imm=%" PRIu64 " page_busy=%" PRIu64
				" recv_errors=%" PRIu64 " resp_too_big=%" PRIu64,
				s->id, hs.frames,
				hs.bad_imm + hs.bad_len + hs.not_imm + hs.page_busy +
					hs.recv_errors,
				hs.bad_imm, hs.bad_len, hs.not_imm, hs.page_busy, hs.recv_errors,
				hs.resp_too_big);
	}
	for (uint32_t i = 0; i < ql_daemon_function_count(s->d); i++) {
		if (ql_daemon_function_stats(s->d, i, &fs))
			continue;
		qlog_to(out, true, QL_LOG_INFO, "counters", "function",
			"session=%u function=%s id=0x%08x calls=%" PRIu64 " errors=%" PRIu64
			" result_overruns=%" PRIu64,
			s->id, fs.name, fs.id, fs.calls, fs.errors, fs.result_overruns);
	}
}

/* Channels of sessions whose handler was abandoned past its deadline: the
 * stuck thread may still write into their response buffers, so they are
 * never destroyed (kept reachable here). */
static struct ql_channel **quarantine;
static size_t nquarantine;

/* Stop the dispatcher (every request taken is answered), then free. */
static void session_destroy(struct qlinkd_session *s)
{
	struct qlinkd *q;
	bool failed = false;

	if (!s)
		return;
	q = s->q;
	if (s->gpu) {
		ql_gpu_dispatcher_stop(s->gpu);
		session_counters(s, stdout);
		ql_gpu_dispatcher_destroy(s->gpu);
	}
	if (s->d) {
		session_pause(s);
		session_counters(s, stdout);
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
		     "session=%u", s->id);
	} else if (s->ch) {
		ql_channel_destroy(s->ch);
	}
	for (uint32_t i = 0; q && i < q->cfg->max_sessions; i++)
		if (q->sessions[i] == s)
			q->sessions[i] = NULL;
	qlog(QL_LOG_INFO, "session", "destroyed", "session=%u", s->id);
	free(s);
}

static void print_counters(struct qlinkd *q)
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
		qlog_to(stdout, true, QL_LOG_INFO, "counters", "dispatcher",
			"cpu=%d sessions=%u requests=%" PRIu64 " rounds=%" PRIu64
			" idle_rounds=%" PRIu64 " backoffs=%" PRIu64,
			ds.cpu, ds.daemons, ds.requests, ds.rounds, ds.idle_rounds, ds.backoffs);
	}
	qlog_to(stdout, true, QL_LOG_INFO, "counters", "qlinkd", "sessions=%u plugins=%u", n,
		q->nplugins);
}

/* The device's shared verbs context and one running dispatcher per core. */
static int dispatch_open(struct qlinkd *q)
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
		/* each session's GPU dispatcher serves it: no CPU dispatchers */
		qlog(QL_LOG_INFO, "dispatcher", "datapath gpu", "mode=%s device=%d",
		     ql_gpu_mode_str((enum ql_gpu_mode)c->gpu.mode), c->gpu.device);
		return 0;
	}
	/* every session's response buffers in one registration, unless that
	 * would be more than the context holds (1 GiB): then each its own */
	if (c->transport == QL_CONFIG_TRANSPORT_HSB) {
		/* hsb sessions have their own PD: their pages are registered at
		 * iova 0, one region per session */
	} else if (pool * c->max_sessions <= (1u << 30)) {
		xc.tx_bytes = (uint32_t)pool;
		ret = ql_verbs_context_create(q->dev, &xc, &q->vctx);
	} else {
		qlog(QL_LOG_WARN, "dispatcher", "no shared verbs context",
		     "reason=\"max_sessions x ring bytes above 1 GiB\"");
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
		qlog(QL_LOG_INFO, "dispatcher", "started",
		     "cpu=%d idle=%s idle_after_us=%u call_deadline_ms=%u", dc.cpu,
		     ql_idle_policy_str(dc.idle), c->dispatcher.idle_after_us,
		     c->dispatcher.call_deadline_ms);
	}
	return 0;
}

/* What qlinkd does not free when it exits with a handler still running. */
static struct qlinkd kept_on_exit;

/* Dispatcher threads left to a handler past its deadline, over all cores. */
static uint64_t abandoned_threads(struct qlinkd *q)
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
static void dispatch_close(struct qlinkd *q)
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
static int load_plugins(struct qlinkd *q, bool check_only, bool load)
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
			fprintf(stderr, "%s:%u: plugins[%u]: %s\n", c->path, c->plugins[i].line, i,
				ql_error_detail()[0] ? ql_error_detail() : ql_strerror(r));
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
			fprintf(stderr,
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
			qlog(QL_LOG_INFO, "plugin", "loaded", "plugin=%s version=%s path=%s",
			     ql_plugin_get_info(p)->name,
			     ql_plugin_get_info(p)->version ? ql_plugin_get_info(p)->version : "-",
			     c->plugins[i].path);
	}
	return ret;
}

static void unload_plugins(struct qlinkd *q)
{
	for (uint32_t i = 0; i < q->nplugins; i++)
		ql_plugin_unload(q->plugins[i]);
	free(q->plugins);
	q->plugins = NULL;
	q->nplugins = 0;
}

/* In --check-config, also make every function table once: a plugin whose
 * functions clash with another's (or the built-in) is caught here. */
static int check_registration(struct qlinkd *q)
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
		if (ret)
			fprintf(stderr, "%s:%u: plugins[%u]: %s\n", q->cfg->path,
				q->cfg->plugins[i].line, i, ql_error_detail());
	}
	ql_rpc_table_destroy(t);
	return ret < 0 ? ret : 0;
}

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
		session_destroy(l->s[i]);
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
		ret = session_create(q, qcs_kind(q), NULL, &l->s[l->n], &out[l->n]);
		if (ret)
			break;
		l->s[l->n]->ctl_id = ql_ctl_session_id(cs);
	}
	if (ret) {
		ctl_link_free(cs);
		return ret;
	}
	qlog(QL_LOG_INFO, "control", "offered", "qcs=%s peer=%s channels=%u",
	     ql_ctl_session_name(cs), ql_ctl_session_peer(cs), n);
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
		int ret = session_connect(l->s[i], &client[i]);

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
		int ret = session_run(l->s[i]);

		if (ret)
			return ret;
	}
	qlog(QL_LOG_INFO, "control", "started", "qcs=%s", ql_ctl_session_name(cs));
	return 0;
}

/* STOP: the run is over; stop the dispatchers (every request taken is
 * answered) and keep the counters until COMPLETE, ABORT or loss. */
static int ctl_stop(void *ctx, struct ql_ctl_session *cs)
{
	struct ctl_link *l = ql_ctl_session_data(cs);

	(void)ctx;
	for (uint32_t i = 0; l && i < l->n; i++)
		session_pause(l->s[i]);
	qlog(QL_LOG_INFO, "control", "stopped", "qcs=%s", ql_ctl_session_name(cs));
	return 0;
}

static int ctl_end(void *ctx, struct ql_ctl_session *cs)
{
	(void)ctx;
	qlog(QL_LOG_INFO, "control", "session ended", "qcs=%s state=%s", ql_ctl_session_name(cs),
	     ql_ctl_state_name(ql_ctl_session_state(cs)));
	ctl_link_free(cs);
	return 0;
}

static void ctl_lost(void *ctx, struct ql_ctl_session *cs)
{
	(void)ctx;
	qlog(QL_LOG_WARN, "control", "QCS lost: tearing its channels down", "qcs=%s peer=%s",
	     ql_ctl_session_name(cs), ql_ctl_session_peer(cs));
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

static int control_local_only(const struct ql_config *c, bool secret)
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

static int control_open(struct qlinkd *q)
{
	const struct ql_config *c = q->cfg;
	const char **allow = NULL;
	uint8_t secret[256];
	size_t secret_len = 0;
	int local, ret;

	if (c->control.secret_file) {
		ret = tool_read_secret(c->control.secret_file, secret, sizeof(secret), &secret_len);
		if (ret)
			return ret;
	}
	local = control_local_only(c, secret_len > 0);
	if (local < 0)
		return local;
	if (local && !c->control.allow_count)
		qlog(QL_LOG_INFO, "control", "soft+shm without a secret: local QCSs only",
		     "allow=127.0.0.0/8");
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
		qlog(QL_LOG_INFO, "control", "listening", "address=%s port=%u auth=%s allow=%u",
		     c->control.address, ql_ctl_server_port(q->ctl), secret_len ? "hmac" : "none",
		     c->control.allow_count);
	return ret;
}

static void control_counters(struct qlinkd *q)
{
	struct ql_ctl_stats st;

	if (!q->ctl)
		return;
	ql_ctl_server_stats(q->ctl, &st);
	qlog_to(stdout, true, QL_LOG_INFO, "counters", "control",
		"received=%" PRIu64 " replied=%" PRIu64 " duplicates=%" PRIu64 " rejected=%" PRIu64
		" malformed=%" PRIu64 " too_big=%" PRIu64 " bad_version=%" PRIu64
		" not_allowed=%" PRIu64 " bad_mac=%" PRIu64 " replayed=%" PRIu64
		" sessions_active=%" PRIu64 " sessions_lost=%" PRIu64 " sessions_total=%" PRIu64
		" busy=%" PRIu64 " retries=%" PRIu64 " bad_cookie=%" PRIu64 " unanswered=%" PRIu64
		" self_connect=%" PRIu64,
		st.received, st.replied, st.duplicates, st.rejected, st.malformed, st.too_big,
		st.bad_version, st.not_allowed, st.bad_mac, st.replayed, st.sessions_active,
		st.sessions_lost, st.sessions_total, st.busy, st.retries, st.bad_cookie,
		st.unanswered, st.self_connect);
}

/* ---- signals and the params-file rendezvous --------------------------------- */

enum { EV_NONE, EV_STOP, EV_COUNTERS };

static const char *signal_name(uint32_t signo)
{
	switch (signo) {
	case SIGINT:
		return "SIGINT";
	case SIGTERM:
		return "SIGTERM";
	case SIGHUP:
		return "SIGHUP";
	case SIGUSR1:
		return "SIGUSR1";
	default:
		return "other";
	}
}

/* SIGHUP does not reload: the device, control socket and running sessions
 * cannot change under a QCS. It says so, and checks the file on disk so
 * the operator knows whether a restart would start. */
static void on_sighup(struct qlinkd *q)
{
	struct ql_config *c = NULL;
	struct ql_diags diags;
	int ret = ql_config_load(q->cfg->path, &c, &diags);

	ql_config_free(c);
	qlog(QL_LOG_WARN, "qlinkd",
	     "SIGHUP: configuration not reloaded; restart qlinkd to apply changes",
	     "config=%s config_on_disk=%s problems=%u", q->cfg->path, ret ? "invalid" : "valid",
	     ret ? diags.count + diags.dropped : 0u);
	if (ret)
		ql_diags_print(&diags, q->cfg->path, stderr);
}

/* Wait up to ms for a signal, serving the control plane meanwhile; what
 * the signal asks for. */
static int wait_signal(struct qlinkd *q, int ms)
{
	struct pollfd pfd[2] = {
		{ .fd = q->sigfd, .events = POLLIN },
		{ .fd = q->ctl ? ql_ctl_server_fd(q->ctl) : -1, .events = POLLIN },
	};
	struct signalfd_siginfo si;
	int n = poll(pfd, 2, ms);

	/* datagrams, and session deadlines even when none came */
	if (q->ctl)
		ql_ctl_server_poll(q->ctl, 0);
	if (n <= 0 || !(pfd[0].revents & POLLIN))
		return EV_NONE;
	if (read(q->sigfd, &si, sizeof(si)) != (ssize_t)sizeof(si))
		return EV_NONE;
	if (si.ssi_signo == SIGUSR1)
		return EV_COUNTERS;
	if (si.ssi_signo == SIGHUP) {
		on_sighup(q);
		return EV_NONE;
	}
	qlog(QL_LOG_INFO, "qlinkd", "stopping: ending every session (QCS told by ABORT)",
	     "signal=%s", signal_name(si.ssi_signo));
	return EV_STOP;
}

/* The --params-file rendezvous (src/transport/rendezvous.h); its files are removed
 * when qlinkd exits. */
static struct ql_rdv params_rdv;

static int params_idle(void *ctx)
{
	struct qlinkd *q = ctx;

	switch (wait_signal(q, 10)) {
	case EV_STOP:
		return 1;
	case EV_COUNTERS:
		print_counters(q);
		break;
	}
	return 0;
}

static int params_rendezvous(struct qlinkd *q, const char *file, double timeout)
{
	struct qlinkd_session *s = NULL;
	struct ql_conn_params sp, cp;
	int ret;

	ret = ql__rdv_init(&params_rdv, file);
	if (!ret)
		ret = ql__rdv_check_dir(file);
	if (!ret)
		ret = session_create(q, qcs_kind(q), NULL, &s, &sp);
	if (!ret)
		ret = ql__rdv_offer(&params_rdv, &sp);
	if (ret)
		return ret;
	qlog(QL_LOG_INFO, "session", "waiting for a client", "session=%u params_file=%s", s->id,
	     file);
	ret = ql__rdv_wait_client(&params_rdv, timeout, params_idle, q, &cp);
	if (!ret)
		ret = session_connect(s, &cp);
	if (!ret)
		ret = ql__rdv_ready(&params_rdv);
	return ret;
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
	     "session=%u function=%s deadline_ms=%u error=\"%s\"", id, fn,
	     q->cfg->dispatcher.call_deadline_ms, ql_strerror(err));
	if (!s->ctl_id || !q->ctl)
		return false;
	snprintf(m.text, sizeof(m.text), "handler '%s' exceeded its deadline (%u ms)", fn,
		 q->cfg->dispatcher.call_deadline_ms);
	ret = ql_ctl_server_request(q->ctl, s->ctl_id, &m, 1000);
	qlog(ret ? QL_LOG_WARN : QL_LOG_INFO, "control", "QCS told (ABORT)",
	     "session=%u answer=\"%s\"", id, ret ? ql_strerror(ret) : "OK");
	return true;
}

/* Failed sessions and channels, checked from the main loop. */
static void check_sessions(struct qlinkd *q)
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
				     "session=%u error=\"%s\"", s->id, ql_strerror(err));
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
					     "session=%u function=%s result_overruns=%" PRIu64,
					     s->id, fs.name, fs.result_overruns);
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
				     "session=%u listen=%s bytes=%u slot_size=%u oversize=%" PRIu64,
				     s->id, s->listen, us.last_oversize, s->udp->slot_size,
				     us.oversize);
			}
		}
		if (st.channel_error && !s->reported_error) {
			s->reported_error = st.channel_error;
			qlog(QL_LOG_WARN, "session", "channel failed (peer gone?)",
			     "session=%u error=\"%s\"", s->id, ql_strerror(st.channel_error));
		}
	}
}

static const char *detail_or(int err);

#define QLINKD_BOARD_TIMEOUT_MS 200 /* per register transaction try */
#define QLINKD_BOARD_RETRIES 3

/* ---- boards (`qcs:`) ------------------------------------------------------------ */

/* The MAC of the interface that holds the IPv4 of an IPv4-mapped GID (what
 * a RoCE board addresses its frames to): 0, or -ENOENT (not mapped, e.g.
 * soft, or no such interface: the MAC stays 0). */
static int host_mac(const uint8_t gid[16], uint8_t mac[6])
{
	static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	struct ifaddrs *ifs, *a, *b;
	int ret = -ENOENT;

	if (memcmp(gid, v4mapped, sizeof(v4mapped)) || getifaddrs(&ifs))
		return -ENOENT;
	for (a = ifs; a && ret; a = a->ifa_next) {
		if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET ||
		    memcmp(&((struct sockaddr_in *)a->ifa_addr)->sin_addr, gid + 12, 4))
			continue;
		for (b = ifs; b && ret; b = b->ifa_next) {
			const struct sockaddr_ll *ll = (const void *)b->ifa_addr;

			if (ll && ll->sll_family == AF_PACKET && ll->sll_halen == 6 &&
			    !strcmp(a->ifa_name, b->ifa_name)) {
				memcpy(mac, ll->sll_addr, 6);
				ret = 0;
			}
		}
	}
	freeifaddrs(ifs);
	return ret;
}

/*
 * One `qcs` entry of kind hsb: an hsb session connected to the board's QP
 * (qcs.qp, default 2; GID qcs.gid, default its address IPv4-mapped),
 * dispatching before the board is told anything (its first frame may come
 * the moment its VP is enabled), then the board's data-plane registers
 * written and read back (ql_hsb_configure_board). On failure the session is
 * destroyed and the error, naming the board, VP and register, logged.
 */
static int board_open(struct qlinkd *q, const struct ql_config_qcs *b)
{
	const struct ql_hsb_target t = { .vp = b->vp,
					 .data_plane = b->data_plane,
					 .vp_address = b->vp_address,
					 .hif_address = b->hif_address,
					 .layout = b->layout };
	struct ql_hsb_dataplane dp = { 0 };
	struct ql_conn_params board = { 0 };
	struct qlinkd_session *s = NULL;
	struct ql_hsb_params hp;
	char gid[INET6_ADDRSTRLEN];
	uint32_t ip_version = 0;
	int ret;

	inet_ntop(AF_INET6, b->gid, gid, sizeof(gid));
	/* a board is hsb whatever `transport` */
	ret = session_create(q, SESSION_HSB, NULL, &s, NULL);
	if (!ret)
		ret = ql_hsb_channel_local_params(s->ch, &hp);
	if (!ret) {
		board.qpn = b->qp;
		memcpy(board.gid.raw, b->gid, 16);
		board.mtu = hp.mtu;
		ret = session_connect(s, &board);
	}
	if (!ret) {
		dp.qpn = hp.qpn;
		dp.rkey = hp.rkey;
		dp.page_addr = hp.page_addr;
		dp.page_inc = hp.page_size;
		dp.num_pages = hp.num_pages;
		dp.frame_len = hp.frame_len;
		memcpy(dp.gid, hp.gid.raw, 16);
		if (host_mac(dp.gid, dp.mac) && !memcmp(dp.gid + 10, "\xff\xff", 2))
			qlog(QL_LOG_WARN, "board", "no interface holds the host IP: MAC 0",
			     "board=%s:%u vp=%u", b->address, b->port, b->vp);
		/* DP_PACKET_SIZE follows the Ethernet MTU (qcs.mtu, 1500), not
		 * the IB path MTU, as upstream's host sets it */
		dp.mtu = b->mtu;
		ret = ql_hsb_configure_board(b->address, (uint16_t)b->port, &t, &dp,
					     QLINKD_BOARD_TIMEOUT_MS, QLINKD_BOARD_RETRIES,
					     &ip_version);
	}
	if (ret) {
		qlog(QL_LOG_ERROR, "board", "not programmed: session failed",
		     "board=%s:%u vp=%u board_qpn=%u board_gid=%s error=\"%s\"", b->address,
		     b->port, b->vp, b->qp, gid, detail_or(ret));
		fprintf(stderr, "qlinkd: qcs board %s:%u VP %u: %s\n", b->address, b->port, b->vp,
			detail_or(ret));
		session_destroy(s);
		return ret;
	}
	qlog(QL_LOG_INFO, "board", "programmed",
	     "session=%u board=%s:%u vp=%u board_qpn=%u board_gid=%s hsb_ip_version=0x%04x "
	     "hsb_version=%s qpn=%u rkey=0x%x pages=%u page_size=%u frame_len=%u mtu=%u "
	     "mac=%02x:%02x:%02x:%02x:%02x:%02x",
	     s->id, b->address, b->port, b->vp, b->qp, gid, ip_version,
	     ql_hsb_layout_name(b->layout), hp.qpn, hp.rkey, hp.num_pages, hp.page_size,
	     hp.frame_len, b->mtu, dp.mac[0], dp.mac[1], dp.mac[2], dp.mac[3], dp.mac[4],
	     dp.mac[5]);
	return 0;
}

/* Every `qcs` entry, in order; the first that fails stops qlinkd (a board
 * named in the config that is not served is an error, not a degraded run). */
static int boards_open(struct qlinkd *q)
{
	for (uint32_t i = 0; i < q->cfg->qcs_count; i++) {
		int ret = board_open(q, &q->cfg->qcs[i]);

		if (ret)
			return ret;
	}
	return 0;
}

/* ---- CUDA-Q UDP listeners (`udp:`) ----------------------------------------------- */

/* One `udp` entry: a UDP channel bound to its address and port, a daemon
 * with every function, served from now on (on the dispatcher of udp.cpu,
 * or the least-loaded one). The bound address (the port resolved when 0
 * was asked) is logged. */
static int udp_open(struct qlinkd *q, const struct ql_config_udp *u)
{
	struct qlinkd_session *s = NULL;
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char host[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;
	int ret = session_create(q, SESSION_UDP, u, &s, NULL);

	if (!ret)
		ret = ql_udp_channel_local_addr(s->ch, &ss, &len);
	if (!ret) {
		if (ss.ss_family == AF_INET6) {
			const struct sockaddr_in6 *a = (const void *)&ss;

			inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
			port = ntohs(a->sin6_port);
			snprintf(s->listen, sizeof(s->listen), "[%s]:%u", host, port);
		} else {
			const struct sockaddr_in *a = (const void *)&ss;

			inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
			port = ntohs(a->sin_port);
			snprintf(s->listen, sizeof(s->listen), "%s:%u", host, port);
		}
		for (uint32_t i = 0; u->cpu >= 0 && i < q->cfg->dispatcher.cpus_count; i++)
			if (q->cfg->dispatcher.cpus[i] == u->cpu)
				s->pin = (int)i;
		ret = session_run(s);
	}
	if (ret) {
		qlog(QL_LOG_ERROR, "udp", "cannot listen: session failed",
		     "address=%s port=%u error=\"%s\"", u->address, u->port, detail_or(ret));
		fprintf(stderr, "%s:%u: udp %s port %u: %s\n", q->cfg->path, u->line, u->address,
			u->port, detail_or(ret));
		session_destroy(s);
		return ret;
	}
	s->connected = true; /* watched by check_sessions from now on */
	qlog(QL_LOG_INFO, "udp", "listening",
	     "session=%u listen=%s port=%u slots=%u slot_size=%u bad_requests=%s cpu=%d", s->id,
	     s->listen, port, u->slots, u->slot_size,
	     u->bad_requests == QL_BAD_REQUEST_DROP ? "drop" : "answer",
	     q->cfg->dispatcher.cpus[s->core]);
	return 0;
}

/* Every `udp` entry, in order; the first that fails stops qlinkd. */
static int udp_open_all(struct qlinkd *q)
{
	for (uint32_t i = 0; i < q->cfg->udp_count; i++) {
		int ret = udp_open(q, &q->cfg->udp[i]);

		if (ret)
			return ret;
	}
	return 0;
}

/* ---- main ---------------------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f, "usage: qlinkd --config FILE [--params-file FILE]\n"
		   "       qlinkd --check-config FILE [--load-plugins]\n"
		   "\n"
		   "The qlink real-time host daemon: serves RPC functions (the built-ins\n"
		   "qlink_parity and rpc_increment, and those of the plugins in the config)\n"
		   "to quantum control systems over RDMA, and over CUDA-Q Realtime's UDP\n"
		   "transport. Runs in the foreground; SIGINT or SIGTERM stop it\n"
		   "cleanly, SIGUSR1 prints its counters, SIGHUP is logged (no reload).\n"
		   "See docs/qlinkd.md.\n"
		   "\n"
		   "options:\n"
		   "  -c, --config FILE        the YAML configuration\n"
		   "  --check-config FILE      check FILE and that its plugins exist and are\n"
		   "                           trusted (no plugin code runs); print FILE: OK\n"
		   "                           or FILE:LINE: message per problem; exit 0 or 1\n"
		   "  --load-plugins           with --check-config: also load each plugin (its\n"
		   "                           constructors and init run) and register its\n"
		   "                           functions\n"
		   "  --params-file FILE       serve one session over a rendezvous file, as\n"
		   "                           `qlink serve` does (besides the control plane)\n"
		   "  --timeout S              how long to wait for that client (default 60)\n"
		   "  -h, --help               this text\n"
		   "  -V, --version            the version\n");
}

/* Every problem the file and its plugins have, each with its line: the
 * file's own first, then each plugin that is missing or untrusted, or (load:
 * --load-plugins) does not load or register. Without load no plugin code
 * runs: a root --check-config of someone's config must not run their
 * constructors as root. */
static int check_config(const char *path, bool load)
{
	struct qlinkd q = { 0 };
	struct ql_diags diags;
	int ret = ql_config_check(path, &q.cfg, &diags);

	if (ret)
		ql_diags_print(&diags, path, stderr);
	if (!q.cfg)
		return 1;
	if (q.cfg->device && control_local_only(q.cfg, q.cfg->control.secret_file != NULL) < 0) {
		fprintf(stderr, "%s: %s\n", path, ql_error_detail());
		ret = -EINVAL;
	}
	if (load_plugins(&q, true, load))
		ret = -EINVAL;
	else if (load && check_registration(&q))
		ret = -EINVAL;
	unload_plugins(&q);
	ql_config_free(q.cfg);
	if (ret)
		return 1;
	printf("%s: OK\n", path);
	return 0;
}

struct qlinkd_opts {
	const char *config, *check, *params;
	bool load_plugins; /* --load-plugins: --check-config runs the plugins' code */
	double timeout;	   /* for --params-file's client */
};

/* Command line: -1 to go on, else the exit status (--help, --version, errors). */
static int parse_args(int argc, char **argv, struct qlinkd_opts *o)
{
	static const struct option lo[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "check-config", required_argument, NULL, 'C' },
		{ "load-plugins", no_argument, NULL, 'L' },
		{ "params-file", required_argument, NULL, 'p' },
		{ "timeout", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	*o = (struct qlinkd_opts){ .timeout = 60 };
	while ((c = getopt_long(argc, argv, "c:hV", lo, NULL)) != -1) {
		switch (c) {
		case 'c':
			o->config = optarg;
			break;
		case 'C':
			o->check = optarg;
			break;
		case 'L':
			o->load_plugins = true;
			break;
		case 'p':
			o->params = optarg;
			break;
		case 't': {
			char *end;

			o->timeout = strtod(optarg, &end);
			if (*end || !(o->timeout > 0 && o->timeout <= 86400)) {
				fprintf(stderr, "qlinkd: bad value '%s' for --timeout\n", optarg);
				return 2;
			}
			break;
		}
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("qlinkd %s (plugin ABI %u)\n", QLINK_VERSION, QL_PLUGIN_ABI_VERSION);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (o->load_plugins && !o->check) {
		fprintf(stderr, "qlinkd: --load-plugins goes with --check-config\n");
		usage(stderr);
		return 2;
	}
	if (optind < argc || (!o->config && !o->check) || (o->config && o->check)) {
		fprintf(stderr, "qlinkd: %s\n",
			optind < argc ? "unexpected argument" :
					"give one of --config FILE or --check-config FILE");
		usage(stderr);
		return 2;
	}
	return -1;
}

static const char *detail_or(int err)
{
	return ql_error_detail()[0] ? ql_error_detail() : ql_strerror(err);
}

/*
 * Everything before service: signals, plugins, device, dispatchers, control
 * plane, and the --params-file session. 0, -EINTR (a signal while waiting
 * for the params-file client: a clean stop) or a negative errno (logged).
 */
static int qlinkd_start(struct qlinkd *q, const struct qlinkd_opts *o)
{
	sigset_t mask;
	int ret;

	logcfg.level = q->cfg->log.level;
	logcfg.format = q->cfg->log.format;
	ql_log_set_level(q->cfg->log.level);
	/* a handler that crashes the process is named on stderr first */
	ql_dispatcher_crash_report("qlinkd");
	/* Blocked before any thread exists, so every dispatcher inherits the
	 * mask and the signals reach only the signalfd. */
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGUSR1);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	q->sigfd = signalfd(-1, &mask, SFD_CLOEXEC);
	q->sessions = calloc(q->cfg->max_sessions, sizeof(*q->sessions));
	if (q->sigfd < 0 || !q->sessions) {
		ret = q->sigfd < 0 ? -errno : -ENOMEM;
		qlog(QL_LOG_ERROR, "qlinkd", "setup failed", "error=%s", ql_strerror(ret));
		return ret;
	}
	qlog(QL_LOG_INFO, "qlinkd", "starting",
	     "version=%s config=%s device=%s control=%s:%u cpu=%d dispatchers=%u slots=%u "
	     "slot_size=%u",
	     QLINK_VERSION, o->config, q->cfg->device, q->cfg->control.address,
	     q->cfg->control.port, q->cfg->dispatcher.cpu, q->cfg->dispatcher.cpus_count,
	     q->cfg->ring.slots, q->cfg->ring.slot_size);
	ret = load_plugins(q, false, true);
	if (ret)
		return ret;
	ret = ql_device_open(q->cfg->device, &q->dev);
	if (ret) {
		qlog(QL_LOG_ERROR, "qlinkd", "cannot open the device", "device=%s error=\"%s\"",
		     q->cfg->device, detail_or(ret));
		fprintf(stderr, "%s: device %s: %s\n", o->config, q->cfg->device, detail_or(ret));
		return ret;
	}
	ret = dispatch_open(q);
	if (ret) {
		qlog(QL_LOG_ERROR, "dispatcher", "cannot start the dispatchers", "error=\"%s\"",
		     detail_or(ret));
		return ret;
	}
	ret = control_open(q);
	if (ret) {
		qlog(QL_LOG_ERROR, "control", "cannot listen", "address=%s port=%u error=\"%s\"",
		     q->cfg->control.address, q->cfg->control.port, detail_or(ret));
		fprintf(stderr, "%s: control %s:%u: %s\n", o->config, q->cfg->control.address,
			q->cfg->control.port, detail_or(ret));
		return ret;
	}
	ret = boards_open(q);
	if (!ret)
		ret = udp_open_all(q);
	if (ret)
		return ret;
	if (o->params) {
		ret = params_rendezvous(q, o->params, o->timeout);
		if (ret && ret != -EINTR) {
			qlog(QL_LOG_ERROR, "session", "rendezvous failed", "params_file=%s",
			     o->params);
			fprintf(stderr, "qlinkd: %s: %s\n", o->params, detail_or(ret));
		}
	}
	return ret;
}

/* Service: signals, counters on SIGUSR1, sessions watched, until a stop. */
static void qlinkd_serve(struct qlinkd *q, bool params)
{
	int ev;

	qlog(QL_LOG_INFO, "qlinkd", "serving", "control_port=%u params_sessions=%u",
	     ql_ctl_server_port(q->ctl), params ? 1u : 0u);
	for (;;) {
		ev = wait_signal(q, 200);
		if (ev == EV_STOP)
			break;
		if (ev == EV_COUNTERS) {
			print_counters(q);
			control_counters(q);
		}
		check_sessions(q);
	}
}

/*
 * Final counters; then tell every connected QCS (ABORT "server shutdown")
 * and end their sessions through the abort callback, each printing its own
 * final counters; then free what was made. The exit status.
 */
static int qlinkd_stop(struct qlinkd *q, int ret)
{
	control_counters(q);
	ql_ctl_server_destroy(q->ctl);
	q->ctl = NULL;
	if (q->sessions)
		for (uint32_t i = 0; i < q->cfg->max_sessions; i++)
			session_destroy(q->sessions[i]);
	free(q->sessions);
	ql__rdv_cleanup(&params_rdv);
	if (abandoned_threads(q)) {
		/* A thread is still inside a handler (past its deadline): the
		 * plugin's code, the device's memory and the response buffers
		 * must stay mapped under it. Exit without freeing them (kept
		 * reachable); the thread is not joined. */
		qlog(QL_LOG_WARN, "qlinkd", "exiting with a handler still running",
		     "abandoned_threads=%" PRIu64, abandoned_threads(q));
		kept_on_exit = *q;
		q->dev = NULL;
	} else {
		dispatch_close(q);
		unload_plugins(q);
	}
	if (q->dev)
		ql_device_close(q->dev);
	if (q->sigfd >= 0)
		close(q->sigfd);
	qlog(QL_LOG_INFO, "qlinkd", ret ? "exiting on an error" : "stopped", "status=%d",
	     ret ? 1 : 0);
	ql_config_free(q->cfg);
	return ret ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct qlinkd q = { .sigfd = -1 };
	struct qlinkd_opts o;
	struct ql_diags diags;
	int ret;

	ret = parse_args(argc, argv, &o);
	if (ret >= 0)
		return ret;
	if (o.check)
		return check_config(o.check, o.load_plugins);
	ret = ql_config_load(o.config, &q.cfg, &diags);
	if (ret) {
		ql_diags_print(&diags, o.config, stderr);
		return 1;
	}
	ret = qlinkd_start(&q, &o);
	if (ret == -EINTR)
		ret = 0; /* stopped while waiting for the params-file client */
	else if (!ret) {
		qlinkd_serve(&q, o.params != NULL);
		ret = 0;
	}
	return qlinkd_stop(&q, ret);
}
