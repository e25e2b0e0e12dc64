/* SPDX-License-Identifier: MIT */
/*
 * rendezvous: how two programs hand connection parameters to each other
 * without the control plane, through a pipe (qlink bench's forked daemon,
 * tests) or through files (qlink serve, qlink vppu --params-file, qlinkd
 * --params-file, the CUDA-Q bridge provider). One place so that every
 * side writes and reads them the same way, with the same safety rules.
 *
 * The transport module's in-tree interface (not public: libqlink.so does
 * not export it, libqlink.a has it, under ql__rdv_ names), used by the
 * tools, the bridge and the tests.
 *
 * The file protocol, for a rendezvous path FILE:
 *   server: writes FILE (its parameters), waits for FILE.client, connects,
 *           writes FILE.ready;
 *   client: waits for FILE, writes FILE.client (its parameters), waits for
 *           FILE.ready.
 * Each side removes the files it wrote when it ends.
 *
 * Safety rules (docs/qlinkd.md, "Rendezvous files"): a file's directory
 * must be owned by the effective uid and not writable by group or others
 * unless it is sticky (as /tmp is); a file is created with
 * O_EXCL|O_NOFOLLOW|O_CLOEXEC and mode 0600, so a pre-existing file or a
 * symlink planted at its name is refused, never followed or overwritten;
 * a reader opens with O_NOFOLLOW and refuses a file that is not a regular
 * file owned by its uid, or that group or others may write.
 */
#ifndef QL_TRANSPORT_RENDEZVOUS_H
#define QL_TRANSPORT_RENDEZVOUS_H

#include <stdbool.h>
#include <stddef.h>

#include "qlink/channel.h"
#include "qlink/hsb.h"

/* Called between polls while waiting for a file: non-zero stops the wait
 * (-EINTR). It also paces the polls (it should sleep or poll ~10 ms). */
typedef int (*ql_rdv_idle_fn)(void *ctx);

/* ---- pipes and lines -------------------------------------------------------- */

int ql__write_all(int fd, const void *buf, size_t len);
/* Read one line (without the newline) from fd; its length or -1. */
int ql__read_line(int fd, char *buf, size_t len);
/* Parameters as one text line over a pipe or socket: 0 or -1. */
int ql__send_params(int fd, const struct ql_conn_params *p);
int ql__recv_params(int fd, struct ql_conn_params *p);

/* ---- files --------------------------------------------------------------------- */

/* 0 if the directory holding path satisfies the rule above, else a
 * negative errno with the reason in ql_error_detail(). */
int ql__rdv_check_dir(const char *path);
/* Create path (exclusively, 0600) holding text. */
int ql__rdv_create(const char *path, const char *text);
/* Wait up to timeout_s for path to hold a complete first line, check it
 * as a reader must, and return that line (without the newline). -ETIMEDOUT,
 * -EINTR (idle said stop), or -EPERM/-ELOOP/... for a refused file. */
int ql__rdv_wait(const char *path, double timeout_s, ql_rdv_idle_fn idle, void *ctx, char *line,
		 size_t len);

/* The protocol above. FILE's path must leave room for ".client". */
struct ql_rdv {
	char file[4096];
	char client[4104];
	char ready[4104];
	bool wrote_file, wrote_client, wrote_ready;
};

int ql__rdv_init(struct ql_rdv *r, const char *file);
/* server */
int ql__rdv_offer(struct ql_rdv *r, const struct ql_conn_params *server);
int ql__rdv_wait_client(struct ql_rdv *r, double timeout_s, ql_rdv_idle_fn idle, void *ctx,
			struct ql_conn_params *client);
int ql__rdv_ready(struct ql_rdv *r);
/* client */
int ql__rdv_wait_server(struct ql_rdv *r, double timeout_s, ql_rdv_idle_fn idle, void *ctx,
			struct ql_conn_params *server);
int ql__rdv_join(struct ql_rdv *r, const struct ql_conn_params *client, double timeout_s,
		 ql_rdv_idle_fn idle, void *ctx);
/* The same for an hsb server: FILE holds its struct ql_hsb_params
 * (ql_hsb_params_format); the client's FILE.client is its conn params. */
int ql__rdv_offer_hsb(struct ql_rdv *r, const struct ql_hsb_params *server);
int ql__rdv_wait_server_hsb(struct ql_rdv *r, double timeout_s, ql_rdv_idle_fn idle, void *ctx,
			    struct ql_hsb_params *server);
/* Remove the files this side wrote. */
void ql__rdv_cleanup(struct ql_rdv *r);

#endif
