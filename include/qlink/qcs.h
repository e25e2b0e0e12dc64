/* SPDX-License-Identifier: MIT */
/*
 * qcs: QCSDevice, a real-time host's handle on one quantum control system
 * (seed 000, control layer).
 *
 * The RTH owns the data plane (a verbs channel and the daemon serving it);
 * the QCS writes requests into it. A QCS device brings the two together and
 * then drives the QCS: it runs its own control server (control.h), waits for
 * the QCS (by name, if given) to DISCOVER, offers the channel's ring and QP,
 * connects the channel on the QCS's ACK, and from then on sends it requests
 * of its own: PROGRAM (the program to run, uploaded in chunks), TRIGGER and
 * ABORT, each retransmitted until the QCS answers. The QCS says COMPLETE when
 * its program has finished. The device configures the channel but does not
 * own it: the caller creates it, starts the daemon on it, and destroys it.
 *
 * The device owns its control server rather than sharing one, because the
 * server's callbacks (offer, accept, complete, ...) are how it learns each
 * step and are fixed at ql_ctl_server_create(). One device serves one QCS
 * and one session at a time; everything runs in the caller's thread, inside
 * these calls (use ql_qcs_poll() or ql_qcs_is_complete() to keep serving the
 * socket while waiting). A device is used by one thread at a time.
 */
#ifndef QLINK_QCS_H
#define QLINK_QCS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qlink/channel.h"
#include "qlink/control.h"

#ifdef __cplusplus
extern "C" {
#endif

struct ql_qcs_device;

/* A device with its own control server on cfg's address (cfg NULL:
 * 0.0.0.0, port 7700, no allowlist or secret). qcs_name: accept only a QCS
 * whose DISCOVER carries this name (others are refused); NULL: any. */
int ql_qcs_device_create(const struct ql_ctl_server_config *cfg, const char *qcs_name,
			 struct ql_qcs_device **dev);
/* Ends an open session (the QCS gets the server's ABORT notice) and closes
 * the server. The channel stays the caller's. NULL is a no-op. */
void ql_qcs_device_destroy(struct ql_qcs_device *dev);

/* The control server, for its port, descriptor and counters. */
struct ql_ctl_server *ql_qcs_device_server(struct ql_qcs_device *dev);

/* Serve the control socket until a QCS (with the device's name, if set)
 * sends DISCOVER; offer it `ch`'s parameters (ch is a verbs channel,
 * ql_verbs_channel_create) and, on its ACK, connect ch to the QCS's QP.
 * 0 once connected; -ETIMEDOUT after timeout_ms; -EISCONN when a session
 * is already connected (disconnect first); -EINVAL for a bad argument. */
int ql_qcs_establish_connection(struct ql_qcs_device *dev, struct ql_channel *ch, int timeout_ms);
/* From the ACK until the session ends (COMPLETE, ABORT, lost, disconnect). */
bool ql_qcs_is_connected(const struct ql_qcs_device *dev);

/* Upload len bytes (1 .. QL_CTL_PROGRAM_MAX) in QL_CTL_CHUNK_MAX chunks,
 * each one acknowledged; the QCS checks the whole program when the last
 * chunk arrives and refuses one it cannot run (-ECONNREFUSED, its reason in
 * ql_error_detail()). timeout_ms bounds the whole upload. */
int ql_qcs_upload_program(struct ql_qcs_device *dev, const void *bytes, size_t len, int timeout_ms);
/* Run the uploaded program (-EPROTO: nothing uploaded, or already running). */
int ql_qcs_trigger(struct ql_qcs_device *dev, int timeout_ms);
/* Tell the QCS to stop and end the session. The session ends even when the
 * QCS does not answer (-ETIMEDOUT). */
int ql_qcs_abort(struct ql_qcs_device *dev, int timeout_ms);
/* Serve the control socket once without waiting; true once the QCS has
 * said COMPLETE. Stays true until the next establish_connection. */
bool ql_qcs_is_complete(struct ql_qcs_device *dev);
/* Serve the control socket for up to timeout_ms (keepalives, STATUS, the
 * end of a session). Returns ql_ctl_server_poll()'s result. */
int ql_qcs_poll(struct ql_qcs_device *dev, int timeout_ms);
/* End the session: an unfinished one is aborted (ABORT, waiting up to a
 * second for the QCS's answer). The channel is left as it is: reset its
 * ring (ql_verbs_channel_reset_ring) before connecting it again. 0, also
 * when nothing was connected. */
int ql_qcs_disconnect(struct ql_qcs_device *dev);

#ifdef __cplusplus
}
#endif
#endif
