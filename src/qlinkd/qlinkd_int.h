/* SPDX-License-Identifier: MIT */
/* qlinkd's private header: the daemon's state and what its files call across
 * (src/qlinkd/: main, session, control, boards, udp, log). */
#ifndef QLINKD_INT_H
#define QLINKD_INT_H

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

/* ---- log.c: structured logs ---------------------------------------------------- */

/* Where the configured level and format (log:) take effect; the library's
 * ql_log() lines are written as qlinkd's from then on. */
void qlinkd_log_config(enum ql_log_level level, enum ql_config_log_format format);
/* A plain line on stderr for the operator, in the text format only. */
void qlinkd_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A configuration's problems, in the log's format. */
void qlinkd_log_diags(const struct ql_diags *diags, const char *file);
/* log.format is json. */
bool qlinkd_log_json(void);
/* s as a JSON string (quoted, escaped, invalid UTF-8 replaced). */
void qlinkd_json_str(FILE *f, const char *s);

/* A field of a log line: its key (stable, docs/qlinkd.md) and typed value. */
enum qlinkd_ftype { QF_END = 0, QF_STR, QF_UINT, QF_INT, QF_HEX, QF_HEX32, QF_REAL };
struct qlinkd_field {
	const char *key;
	enum qlinkd_ftype type;
	union {
		const char *s;
		uint64_t u;
		int64_t i;
		double d;
	} v;
};
#define QS(k, x) ((struct qlinkd_field){ (k), QF_STR, { .s = (x) } })
#define QU(k, x) ((struct qlinkd_field){ (k), QF_UINT, { .u = (uint64_t)(x) } })
#define QI(k, x) ((struct qlinkd_field){ (k), QF_INT, { .i = (int64_t)(x) } })
#define QX(k, x) ((struct qlinkd_field){ (k), QF_HEX, { .u = (uint64_t)(x) } })
#define QX32(k, x) ((struct qlinkd_field){ (k), QF_HEX32, { .u = (uint64_t)(x) } })
#define QR(k, x) ((struct qlinkd_field){ (k), QF_REAL, { .d = (double)(x) } })

/*
 * One line: time, level, component, message, then the fields (f ends at a
 * NULL key). Lines at or under the configured level go to out; force
 * writes whatever the level (the counters).
 */
void qlinkd_log_fields(FILE *out, bool force, enum ql_log_level level, const char *comp,
		       const char *msg, const struct qlinkd_field *f);

#define QL_FIELDS(...) ((const struct qlinkd_field[]){ __VA_ARGS__, { 0 } })
/* qlog(level, component, message, QU("session", id), QS("error", text), ...) */
#define qlog(level, comp, msg, ...) \
	qlinkd_log_fields(stderr, false, level, comp, msg, QL_FIELDS(__VA_ARGS__))
/* A counters line on out (stdout) whatever the level: component "counters". */
#define qcounters(out, what, ...) \
	qlinkd_log_fields(out, true, QL_LOG_INFO, "counters", what, QL_FIELDS(__VA_ARGS__))

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
	char qcs[64];	 /* its QCS's name (DISCOVER), "" if none */
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
	struct qlinkd_stats *stats; /* stats.c: the stats socket, ended sessions */
};

/* ---- session.c ------------------------------------------------------------------- */

/* The kind of the sessions QCSs open (control plane, --params-file). */
enum session_kind qlinkd_qcs_kind(const struct qlinkd *q);
/* A new session, not yet connected; *params (may be NULL) what the QCS needs. */
int qlinkd_session_create(struct qlinkd *q, enum session_kind kind, const struct ql_config_udp *udp,
			  struct qlinkd_session **out, struct ql_conn_params *params);
/* Serve the session on the least-loaded dispatcher (or its pin). */
int qlinkd_session_run(struct qlinkd_session *s);
/* Take the session off its dispatcher (every request taken is answered). */
void qlinkd_session_pause(struct qlinkd_session *s);
/* Connect the session to the QCS's QP and start serving it. */
int qlinkd_session_connect(struct qlinkd_session *s, const struct ql_conn_params *client);
/* Stop, print its final counters and free it (NULL: nothing). */
void qlinkd_session_destroy(struct qlinkd_session *s);
/* Every session's, every dispatcher's and qlinkd's counters on stdout. */
void qlinkd_print_counters(struct qlinkd *q);
/* The shared verbs context and one running dispatcher per core; after every
 * session is gone, their end. */
int qlinkd_dispatch_open(struct qlinkd *q);
void qlinkd_dispatch_close(struct qlinkd *q);
/* Dispatcher threads left to a handler past its deadline, over all cores. */
uint64_t qlinkd_abandoned_threads(struct qlinkd *q);
/* The plugins of the config: checked (check_only), or loaded; unloaded. */
int qlinkd_load_plugins(struct qlinkd *q, bool check_only, bool load);
void qlinkd_unload_plugins(struct qlinkd *q);
/* --check-config --load-plugins: every function table made once. */
int qlinkd_check_registration(struct qlinkd *q);
/* Failed sessions and channels, checked from the main loop. */
void qlinkd_check_sessions(struct qlinkd *q);

/* ---- control.c ------------------------------------------------------------------- */

/* 1 when a soft+shm device without a secret answers local QCSs only, 0 if
 * not, -EPERM when control.allow names a remote source then. */
int qlinkd_control_local_only(const struct ql_config *c, bool secret);
/* Whether the control plane answers beyond loopback without a shared
 * secret (an address other than loopback, no allowlist or soft+shm rule
 * holding it to 127.0.0.0/8): 1 with the warning's sentence in why, or 0.
 * Logged at start and printed by --check-config (issue 25). */
int qlinkd_control_exposed(const struct ql_config *c, bool secret, char *why, size_t len);
int qlinkd_control_open(struct qlinkd *q);
void qlinkd_control_counters(struct qlinkd *q);

/* ---- boards.c, udp.c: the sessions made at start ------------------------------ */

int qlinkd_boards_open(struct qlinkd *q);
int qlinkd_udp_open_all(struct qlinkd *q);

/* ---- stats.c: live statistics (a read-only UNIX socket) ------------------------- */

/* The socket at path (NULL: the default place, ql_stats_socket_default;
 * "none": no socket); a failure at the default place is logged and qlinkd
 * runs without one, at a given path it is returned. */
int qlinkd_stats_open(struct qlinkd *q, const char *path);
void qlinkd_stats_close(struct qlinkd *q);
/* The main loop's poll: up to max entries filled (the listener and the
 * clients), their number; after the poll, the same entries served. */
int qlinkd_stats_pollfds(struct qlinkd *q, struct pollfd *pfd, int max);
void qlinkd_stats_serve(struct qlinkd *q, const struct pollfd *pfd, int n);
/* A function every session serves (listed with zero calls until called). */
void qlinkd_stats_served(struct qlinkd *q, const char *name, uint32_t id);
/* A session ends: its final counters are kept and added to the totals. */
void qlinkd_stats_retire(struct qlinkd *q, const struct qlinkd_session *s);
/* Log (and count for the stats) every function a session serves. */
int qlinkd_list_functions(struct qlinkd *q);

/* ---- service.c: running under a service manager ------------------------------- */

/* The configuration read when none is given (SYSCONFDIR/qlink/qlinkd.yaml
 * of the install this qlinkd runs from). */
const char *qlinkd_default_config(void);
/* Set the plugin directory (ql_config_set_plugin_dir) to LIBDIR/qlink/plugins
 * and the default configuration to SYSCONFDIR/qlink/qlinkd.yaml, both
 * relative to this executable. */
void qlinkd_install_paths_init(void);
/* sd_notify(3)'s protocol: send state ("READY=1", "STOPPING=1") to
 * $NOTIFY_SOCKET (a path, or @name for an abstract socket); 0 when it is
 * unset or the datagram went, else a negative errno (logged). */
int qlinkd_notify(const char *state);

/* ---- main.c ---------------------------------------------------------------------- */

/* The error detail set with err, else its strerror text. */
const char *qlinkd_detail_or(int err);

#endif
