/* SPDX-License-Identifier: MIT */
/*
 * qlinkd: the real-time host daemon.
 *
 *   qlinkd [--config FILE] [--params-file P] run in the foreground (default FILE:
 *                                            SYSCONFDIR/qlink/qlinkd.yaml)
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
 * control plane drives sessions (qlinkd_session_create on DISCOVER,
 * qlinkd_session_connect on ACK, qlinkd_session_destroy on COMPLETE, ABORT or
 * loss);
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

#include "qlinkd_int.h"
#include "tools.h"
#include "transport/rendezvous.h"

#ifndef QLINK_VERSION
#define QLINK_VERSION "0"
#endif

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
	     QS("config", q->cfg->path), QS("config_on_disk", ret ? "invalid" : "valid"),
	     QU("problems", ret ? diags.count + diags.dropped : 0u));
	if (ret)
		qlinkd_log_diags(&diags, q->cfg->path);
}

/* Wait up to ms for a signal, serving the control plane meanwhile; what
 * the signal asks for. */
static int wait_signal(struct qlinkd *q, int ms)
{
	struct pollfd pfd[2 + 16] = {
		{ .fd = q->sigfd, .events = POLLIN },
		{ .fd = q->ctl ? ql_ctl_server_fd(q->ctl) : -1, .events = POLLIN },
	};
	struct signalfd_siginfo si;
	int ns = qlinkd_stats_pollfds(q, pfd + 2, 16);
	int n = poll(pfd, 2 + (nfds_t)ns, ms);

	/* datagrams, and session deadlines even when none came */
	if (q->ctl)
		ql_ctl_server_poll(q->ctl, 0);
	if (n > 0)
		qlinkd_stats_serve(q, pfd + 2, ns); /* stats clients: bounded work */
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
	     QS("signal", signal_name(si.ssi_signo)));
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
		qlinkd_print_counters(q);
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
		ret = qlinkd_session_create(q, qlinkd_qcs_kind(q), NULL, &s, &sp);
	if (!ret)
		ret = ql__rdv_offer(&params_rdv, &sp);
	if (ret)
		return ret;
	qlog(QL_LOG_INFO, "session", "waiting for a client", QU("session", s->id),
	     QS("params_file", file));
	ret = ql__rdv_wait_client(&params_rdv, timeout, params_idle, q, &cp);
	if (!ret)
		ret = qlinkd_session_connect(s, &cp);
	if (!ret)
		ret = ql__rdv_ready(&params_rdv);
	return ret;
}

/* What qlinkd does not free when it exits with a handler still running. */
static struct qlinkd kept_on_exit;

/* ---- main ---------------------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: qlinkd [--config FILE] [--params-file FILE] [--stats-socket PATH]\n"
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
		"  --timeout TIME           how long to wait for that client (default 60; a\n"
		"                           number of seconds, or with a unit: 500ms, 2m)\n"
		"  --stats-socket PATH      the read-only statistics socket `qlink stat`\n"
		"                           reads (mode 0600; default\n"
		"                           $RUNTIME_DIRECTORY/qlinkd-stats.sock, else\n"
		"                           /run/qlink/qlinkd-stats.sock as root, else\n"
		"                           $XDG_RUNTIME_DIR/qlinkd-stats.sock; none: no socket)\n"
		"  -h, --help               this text\n"
		"  -V, --version            the version\n");
	fprintf(f, "\ndefault configuration: %s\nplugin directory: %s\n", qlinkd_default_config(),
		ql_config_plugin_dir());
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
	char why[320];
	int ret = ql_config_check(path, &q.cfg, &diags);

	if (ret)
		ql_diags_print(&diags, path, stderr);
	if (!q.cfg)
		return 1;
	if (q.cfg->device &&
	    qlinkd_control_local_only(q.cfg, q.cfg->control.secret_file != NULL) < 0) {
		fprintf(stderr, "%s: %s\n", path, ql_error_detail());
		ret = -EINVAL;
	}
	if (q.cfg->device &&
	    qlinkd_control_exposed(q.cfg, q.cfg->control.secret_file != NULL, why, sizeof(why)))
		fprintf(stderr, "%s: warning: %s\n", path, why);
	if (qlinkd_load_plugins(&q, true, load))
		ret = -EINVAL;
	else if (load && qlinkd_check_registration(&q))
		ret = -EINVAL;
	qlinkd_unload_plugins(&q);
	ql_config_free(q.cfg);
	if (ret)
		return 1;
	printf("%s: OK\n", path);
	return 0;
}

struct qlinkd_opts {
	const char *config, *check, *params;
	const char *stats_socket; /* --stats-socket: NULL the default place */
	bool load_plugins;	  /* --load-plugins: --check-config runs the plugins' code */
	double timeout;		  /* for --params-file's client */
};

/* A usage error: one line pointing to --help, exit status 2 (as qlink's). */
static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "qlinkd: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (see qlinkd --help)\n");
	return 2;
}

/* Command line: -1 to go on, else the exit status (--help, --version, errors). */
static int parse_args(int argc, char **argv, struct qlinkd_opts *o)
{
	static const struct option lo[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "check-config", required_argument, NULL, 'C' },
		{ "load-plugins", no_argument, NULL, 'L' },
		{ "params-file", required_argument, NULL, 'p' },
		{ "timeout", required_argument, NULL, 't' },
		{ "stats-socket", required_argument, NULL, 'S' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	*o = (struct qlinkd_opts){ .timeout = 60 };
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":c:hV", lo, NULL)) != -1) {
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
		case 'S':
			o->stats_socket = optarg;
			break;
		case 't':
			if (tool_time(optarg, 0.001, 86400, &o->timeout))
				return usage_error("bad value '%s' for --timeout", optarg);
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("qlinkd %s (plugin ABI %u)\n", QLINK_VERSION, QL_PLUGIN_ABI_VERSION);
			return 0;
		case ':':
			return usage_error("option '%.*s' needs a value",
					   (int)strcspn(argv[optind - 1], "="), argv[optind - 1]);
		default: { /* '?': unknown, or a flag given a value */
			const char *a = argv[optind - 1];
			int n = (int)strcspn(a, "=");

			if (strncmp(a, "--", 2))
				return usage_error("unknown option '-%c'", optopt);
			return usage_error(optopt ? "option '%.*s' takes no value" :
						    "unknown option '%.*s'",
					   n, a);
		}
		}
	}
	if (o->load_plugins && !o->check)
		return usage_error("--load-plugins goes with --check-config");
	if (!o->config && !o->check)
		o->config = qlinkd_default_config();
	if (optind < argc)
		return usage_error("unexpected argument '%s'", argv[optind]);
	if (o->config && o->check)
		return usage_error("give one of --config FILE or --check-config FILE");
	return -1;
}

const char *qlinkd_detail_or(int err)
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
	char control[300];
	sigset_t mask;
	int ret;

	qlinkd_log_config(q->cfg->log.level, q->cfg->log.format);
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
		qlog(QL_LOG_ERROR, "qlinkd", "setup failed", QS("error", ql_strerror(ret)));
		return ret;
	}
	snprintf(control, sizeof(control), "%s:%u", q->cfg->control.address, q->cfg->control.port);
	qlog(QL_LOG_INFO, "qlinkd", "starting", QS("version", QLINK_VERSION),
	     QS("config", o->config), QS("device", q->cfg->device), QS("control", control),
	     QI("cpu", q->cfg->dispatcher.cpu), QU("dispatchers", q->cfg->dispatcher.cpus_count),
	     QU("slots", q->cfg->ring.slots), QU("slot_size", q->cfg->ring.slot_size));
	ret = qlinkd_stats_open(q, o->stats_socket);
	if (!ret)
		ret = qlinkd_load_plugins(q, false, true);
	if (!ret)
		ret = qlinkd_list_functions(q);
	if (ret)
		return ret;
	ret = ql_device_open(q->cfg->device, &q->dev);
	if (ret) {
		qlog(QL_LOG_ERROR, "qlinkd", "cannot open the device", QS("device", q->cfg->device),
		     QS("error", qlinkd_detail_or(ret)));
		qlinkd_say("%s: device %s: %s\n", o->config, q->cfg->device, qlinkd_detail_or(ret));
		return ret;
	}
	ret = qlinkd_dispatch_open(q);
	if (ret) {
		qlog(QL_LOG_ERROR, "dispatcher", "cannot start the dispatchers",
		     QS("error", qlinkd_detail_or(ret)));
		return ret;
	}
	ret = qlinkd_control_open(q);
	if (ret) {
		qlog(QL_LOG_ERROR, "control", "cannot listen",
		     QS("address", q->cfg->control.address), QU("port", q->cfg->control.port),
		     QS("error", qlinkd_detail_or(ret)));
		qlinkd_say("%s: control %s:%u: %s\n", o->config, q->cfg->control.address,
			   q->cfg->control.port, qlinkd_detail_or(ret));
		return ret;
	}
	ret = qlinkd_boards_open(q);
	if (!ret)
		ret = qlinkd_udp_open_all(q);
	if (ret)
		return ret;
	/* every listener is up: a service manager may start what depends on us */
	qlinkd_notify("READY=1\nSTATUS=serving");
	if (o->params) {
		ret = params_rendezvous(q, o->params, o->timeout);
		if (ret && ret != -EINTR) {
			qlog(QL_LOG_ERROR, "session", "rendezvous failed",
			     QS("params_file", o->params), QS("error", qlinkd_detail_or(ret)));
			qlinkd_say("qlinkd: %s: %s\n", o->params, qlinkd_detail_or(ret));
		}
	}
	return ret;
}

/* Service: signals, counters on SIGUSR1, sessions watched, until a stop. */
static void qlinkd_serve(struct qlinkd *q, bool params)
{
	int ev;

	qlog(QL_LOG_INFO, "qlinkd", "serving", QU("control_port", ql_ctl_server_port(q->ctl)),
	     QU("params_sessions", params ? 1u : 0u));
	for (;;) {
		ev = wait_signal(q, 200);
		if (ev == EV_STOP)
			break;
		if (ev == EV_COUNTERS) {
			qlinkd_print_counters(q);
			qlinkd_control_counters(q);
		}
		qlinkd_check_sessions(q);
	}
}

/*
 * Final counters; then tell every connected QCS (ABORT "server shutdown")
 * and end their sessions through the abort callback, each printing its own
 * final counters; then free what was made. The exit status.
 */
static int qlinkd_stop(struct qlinkd *q, int ret)
{
	qlinkd_notify("STOPPING=1");
	qlinkd_control_counters(q);
	ql_ctl_server_destroy(q->ctl);
	q->ctl = NULL;
	if (q->sessions)
		for (uint32_t i = 0; i < q->cfg->max_sessions; i++)
			qlinkd_session_destroy(q->sessions[i]);
	free(q->sessions);
	ql__rdv_cleanup(&params_rdv);
	if (qlinkd_abandoned_threads(q)) {
		/* A thread is still inside a handler (past its deadline): the
		 * plugin's code, the device's memory and the response buffers
		 * must stay mapped under it. Exit without freeing them (kept
		 * reachable); the thread is not joined. */
		qlog(QL_LOG_WARN, "qlinkd", "exiting with a handler still running",
		     QU("abandoned_threads", qlinkd_abandoned_threads(q)));
		kept_on_exit = *q;
		q->dev = NULL;
	} else {
		qlinkd_dispatch_close(q);
		qlinkd_unload_plugins(q);
	}
	if (q->dev)
		ql_device_close(q->dev);
	qlinkd_stats_close(q);
	if (q->sigfd >= 0)
		close(q->sigfd);
	qlog(QL_LOG_INFO, "qlinkd", ret ? "exiting on an error" : "stopped",
	     QI("status", ret ? 1 : 0));
	ql_config_free(q->cfg);
	return ret ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct qlinkd q = { .sigfd = -1 };
	struct qlinkd_opts o;
	struct ql_diags diags;
	int ret;

	qlinkd_install_paths_init();
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
