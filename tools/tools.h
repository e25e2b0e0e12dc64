/* SPDX-License-Identifier: MIT */
/* Helpers shared by the qlink subcommands (argument parsing, pipes). */
#ifndef QL_TOOLS_H
#define QL_TOOLS_H

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
