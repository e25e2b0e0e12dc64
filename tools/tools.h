/* SPDX-License-Identifier: MIT */
/* Helpers shared by the qlink subcommands (argument parsing, pipes). */
#ifndef QL_TOOLS_H
#define QL_TOOLS_H

#include <getopt.h> /* optarg, optind: tool_getopt sets them */
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "qlink/channel.h"
#include "qlink/daemon.h"
#include "qlink/hsb.h"
#include "qlink/udp.h"
#include "qlink/verbs.h"
#include "transport/rendezvous.h"

/*
 * ---- options: one table per subcommand, one parser ----
 *
 * Each subcommand declares its options in a table of struct tool_opt
 * (ended by an entry with a NULL name) inside a struct tool_cmd; tool_getopt
 * parses argv against it (getopt_long underneath) and tool_help prints
 * `qlink CMD --help` from it. Values are converted by the caller with the
 * tool_int/tool_u32/... helpers below; their names in the help say the
 * kind and unit (N, URI, HOST:PORT, TIME). */
enum tool_arg {
	TOOL_FLAG,     /* --name */
	TOOL_VALUE,    /* --name VALUE or --name=VALUE */
	TOOL_OPTIONAL, /* --name or --name=VALUE */
};

struct tool_opt {
	const char *name;  /* long name without "--"; NULL ends the table */
	char shortopt;	   /* a one-letter form (-d), or 0 */
	int key;	   /* what tool_getopt returns for it */
	enum tool_arg arg; /* its argument */
	const char *value; /* the value's name, kind and unit in the help ("N", "TIME") */
	const char *help;  /* the help text, lines separated by '\n' */
};

struct tool_cmd {
	const char *name;  /* "bench", "ep call": as in "qlink NAME" */
	const char *usage; /* what follows "qlink NAME" in the usage lines, '\n' between forms */
	const char *about; /* the description printed after the usage (or NULL) */
	const struct tool_opt *opts;
	/* Deprecated aliases, still accepted: pairs of names, the alias then the
	 * option it stands for ("uri", "device"), ended by NULL; or NULL. */
	const char *const *aliases;
	bool in_order; /* stop at the first argument that is not an option */
};

/* tool_getopt's results besides an option's key. */
#define TOOL_END (-1)	/* no more options: the operands start at optind */
#define TOOL_USAGE (-2) /* a usage error, said in one line on stderr: exit 2 */

/* The next option of argv (argv[0] is the subcommand's name): its key, with
 * optarg set as getopt does; TOOL_END; or TOOL_USAGE after one line
 * "qlink CMD: ... (see qlink CMD --help)". -h and --help print the help
 * on stdout and exit 0. Call with optind = 0 first (or 1: the same). */
int tool_getopt(const struct tool_cmd *cmd, int argc, char **argv);
/* Print `qlink CMD --help`: usage, about, the option table, the TIME unit
 * and the deprecated aliases. */
void tool_help(const struct tool_cmd *cmd, FILE *f);
/* Print "qlink CMD: <message> (see qlink CMD --help)" and return 2, the
 * usage error exit status. */
int tool_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A TIME value: seconds, or a number with a unit suffix us, ms, s or m
 * ("250ms", "1.5", "2m"); in [min_s, max_s] seconds. 0 or -EINVAL. */
int tool_time(const char *s, double min_s, double max_s, double *out_s);
/* A device URI as a usage check: SCHEME://REST with a scheme a provider
 * serves (or has reserved). 0 or -EINVAL. */
int tool_device_uri(const char *uri);
/* A peer's address HOST:PORT or [IPV6]:PORT, port 1..65535; a bare HOST
 * when default_port is nonzero. 0 or -EINVAL. */
int tool_hostport(const char *s, uint16_t default_port);
/* The same, into its host (brackets dropped) and port. */
int tool_hostport_split(const char *s, uint16_t default_port, char *host, size_t cap,
			uint16_t *port);
/* A local address to listen on, [ADDR:]PORT, port 0 (any, printed) to
 * 65535. 0 or -EINVAL. */
int tool_listen_port(const char *s);

/* Hex bytes ("01ff", an optional 0x, no separators) into buf; 0 or -EINVAL. */
int tool_hex(const char *s, uint8_t *buf, size_t cap, size_t *len);
/* Bytes in hex (beyond 64 cut, with the length); "(none)" for none. */
void tool_hex_print(FILE *f, const uint8_t *b, size_t len);

int tool_int(const char *s, long min, long max, int *out);
int tool_u32(const char *s, uint64_t min, uint64_t max, uint32_t *out);
int tool_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);
int tool_double(const char *s, double min, double max, double *out);
/* "rc" or "uc" as IBV_QPT_RC / IBV_QPT_UC (--qp); 0 or -EINVAL. */
int tool_qp(const char *s, enum ibv_qp_type *out);
/* The ring's QP type as the client must follow it: `want` (0: whatever
 * the server offers) against the server's; 0 or -EPROTO, printed. */
int tool_qp_check(const char *cmd, enum ibv_qp_type want, const struct ql_conn_params *srv);
/* Print "qlink CMD: bad value 'V' for OPT" and return 2. */
int tool_bad(const char *cmd, const char *opt, const char *val);
/* Print "qlink CMD: WHAT: error text (detail)". */
void tool_fail(const char *cmd, const char *what, int err);

/* ---- latency output shared by bench, vppu and qec ------------------------ */

struct ql_hist;
/* --histogram: every non-empty bucket of h as "usec count cumulative%"
 * lines, after a "#name" header (as ib_write_lat -H prints its RTTs). */
void tool_hist_print(FILE *f, const char *name, const struct ql_hist *h);
/* --plot DIR: make DIR (once), write BASE.dat with the n histograms (one
 * gnuplot index each: bucket_us count fraction fraction_slower) and
 * BASE.gp, and draw BASE.png and BASE.svg with gnuplot: the fraction of
 * calls slower than x, log-log. Prints "plots: ..." unless quiet. 0, or
 * -ENOENT without gnuplot, or -errno (ql_error_detail says why). */
int tool_plot_latency(const char *dir, const char *base, const char *title, unsigned n,
		      const char *const *names, const struct ql_hist *const *hists, bool quiet);
/* The plot helpers under it, for other figures (qlink qec's threshold). */
int tool_plot_dir(const char *dir);
FILE *tool_plot_open(const char *dir, const char *name);
/* Write BASE.gp drawing body on PNG and SVG terminals and run gnuplot on it. */
int tool_plot_draw(const char *dir, const char *base, const char *body);

/* A shared secret file: its bytes, trailing newline dropped. */
int tool_read_secret(const char *path, uint8_t *buf, size_t cap, size_t *len);

/* An RTH side: device, verbs channel, daemon serving the built-in
 * functions (qlink_parity, rpc_increment), and the channel's connection
 * parameters. */
struct tool_server {
	struct ql_device *dev;
	struct ql_channel *ch;
	struct ql_daemon *d;
	struct ql_conn_params params;
	bool hsb; /* an hsb channel (params unused: hsb_params) */
	struct ql_hsb_params hsb_params;
};

int tool_server_open(struct tool_server *s, const char *uri,
		     const struct ql_verbs_channel_config *vc, const struct ql_daemon_config *dc);
/* The same over an hsb channel (--transport hsb). */
int tool_server_open_hsb(struct tool_server *s, const char *uri,
			 const struct ql_hsb_channel_config *hc, const struct ql_daemon_config *dc);
/* The same over CUDA-Q's UDP transport (no device; --transport udp). */
int tool_server_open_udp(struct tool_server *s, const struct ql_udp_channel_config *uc,
			 const struct ql_daemon_config *dc);
/* "ring" or "hsb" -> hsb false/true; -1 for anything else. */
int tool_transport(const char *s, bool *hsb);
void tool_server_close(struct tool_server *s);

int tool_bench(int argc, char **argv);
int tool_ep(int argc, char **argv); /* qlink_ep.c */
int tool_serve(int argc, char **argv);
int tool_vppu(int argc, char **argv);
int tool_hololink(int argc, char **argv);
int tool_qec(int argc, char **argv);
int tool_sdr(int argc, char **argv);  /* qlink_sdr.c */
int tool_stat(int argc, char **argv); /* qlink_stat.c */

/* The hsb personality's register side (tools/qlink_hololink.c): an emulated
 * Hololink board on [ADDR:]PORT (bare PORT: 0.0.0.0; port 0: ephemeral,
 * printed), served until VP `vp` is enabled (or timeout_s: -ETIMEDOUT);
 * prints and returns its data-plane parameters, and leaves the board in
 * *srv for the caller to keep serving (ql_hl_server_poll) and destroy. */
struct ql_hl_server;
struct ql_hsb_dataplane;
/* stop (may be NULL): set by a signal handler, ends the wait (-EINTR). */
int tool_hsb_listen(const char *spec, uint32_t vp, const uint32_t *allow, const uint32_t *allow_len,
		    uint32_t n_allow, double timeout_s, const volatile sig_atomic_t *stop,
		    struct ql_hl_server **srv, struct ql_hsb_dataplane *out);
void tool_hsb_print(FILE *f, uint32_t vp, const struct ql_hsb_dataplane *dp);

#endif
