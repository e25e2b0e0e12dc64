/* SPDX-License-Identifier: MIT */
/*
 * QCSDevice: the RTH's handle on one QCS, on top of its own control server.
 * The server's callbacks record each step of the one session the device
 * accepts; the public calls drive the server until the step they wait for.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "qlink/error.h"
#include "qlink/log.h"
#include "qlink/qcs.h"

#define DISCONNECT_ABORT_MS 1000

struct ql_qcs_device {
	struct ql_ctl_server *srv;
	char name[QL_CTL_NAME_MAX]; /* "" : any QCS */
	struct ql_channel *ch;	    /* while establishing or connected */
	bool establishing;
	uint64_t session; /* the session offered or connected; 0: none */
	bool connected;
	bool complete;
	bool aborted;
	bool lost;
};

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static bool ours(const struct ql_qcs_device *dev, const struct ql_ctl_session *s)
{
	return dev->session && ql_ctl_session_id(s) == dev->session;
}

static int op_offer(void *ctx, struct ql_ctl_session *s, uint32_t n, struct ql_conn_params *out)
{
	struct ql_qcs_device *dev = ctx;
	const char *name = ql_ctl_session_name(s);

	if (dev->name[0] && strcmp(dev->name, name))
		return ql_error_set(-ECONNREFUSED, "this RTH waits for QCS '%s', not '%s'",
				    dev->name, name);
	if (!dev->establishing || !dev->ch)
		return ql_error_set(-EBUSY, "no channel is waiting for a QCS");
	if (dev->session)
		return ql_error_set(-EBUSY, "the channel is already offered to another session");
	if (n != 1)
		return ql_error_set(-EINVAL, "a QCS device has 1 channel, not %u", n);
	if (ql_verbs_channel_local_params(dev->ch, out))
		return -EIO;
	dev->session = ql_ctl_session_id(s);
	return 0;
}

static int op_accept(void *ctx, struct ql_ctl_session *s, const struct ql_conn_params *client,
		     uint32_t n)
{
	struct ql_qcs_device *dev = ctx;
	int ret;

	if (!ours(dev, s) || !dev->establishing)
		return ql_error_set(-EBUSY, "the offer to this session was withdrawn");
	ret = ql_verbs_channel_connect(dev->ch, &client[0], NULL);
	if (ret)
		return ret;
	dev->connected = true;
	ql_log_info("qcs", "QCS '%s' (%s) connected", ql_ctl_session_name(s),
		    ql_ctl_session_peer(s));
	return 0;
}

/* The session is over (abort, lost) or ended before ACK: the channel is free
 * for the next establish_connection. */
static void session_gone(struct ql_qcs_device *dev)
{
	if (!dev->connected)
		dev->session = 0; /* an offer that was never ACKed */
	dev->connected = false;
}

static int op_abort(void *ctx, struct ql_ctl_session *s)
{
	struct ql_qcs_device *dev = ctx;

	if (ours(dev, s)) {
		dev->aborted = dev->connected;
		session_gone(dev);
	}
	return 0;
}

static int op_complete(void *ctx, struct ql_ctl_session *s)
{
	struct ql_qcs_device *dev = ctx;

	if (ours(dev, s)) {
		dev->complete = true;
		session_gone(dev);
	}
	return 0;
}

static void op_lost(void *ctx, struct ql_ctl_session *s)
{
	struct ql_qcs_device *dev = ctx;

	if (ours(dev, s)) {
		dev->lost = dev->connected;
		session_gone(dev);
	}
}

static const struct ql_ctl_server_ops qcs_ops = {
	.offer = op_offer,
	.accept = op_accept,
	.abort = op_abort,
	.complete = op_complete,
	.lost = op_lost,
};

int ql_qcs_device_create(const struct ql_ctl_server_config *cfg, const char *qcs_name,
			 struct ql_qcs_device **out)
{
	struct ql_ctl_server_config def = { .port = QL_CTL_DEFAULT_PORT };
	struct ql_qcs_device *dev;
	int ret;

	if (!out)
		return ql_error_set(-EINVAL, "qcs: a place for the device is required");
	if (qcs_name && strlen(qcs_name) >= QL_CTL_NAME_MAX)
		return ql_error_set(-EINVAL, "qcs: QCS name longer than %d bytes",
				    QL_CTL_NAME_MAX - 1);
	dev = calloc(1, sizeof(*dev));
	if (!dev)
		return ql_error_set(-ENOMEM, "qcs: out of memory");
	snprintf(dev->name, sizeof(dev->name), "%s", qcs_name ? qcs_name : "");
	ret = ql_ctl_server_create(cfg ? cfg : &def, &qcs_ops, dev, &dev->srv);
	if (ret) {
		free(dev);
		return ret;
	}
	*out = dev;
	return 0;
}

void ql_qcs_device_destroy(struct ql_qcs_device *dev)
{
	if (!dev)
		return;
	ql_ctl_server_destroy(dev->srv);
	free(dev);
}

struct ql_ctl_server *ql_qcs_device_server(struct ql_qcs_device *dev)
{
	return dev->srv;
}

int ql_qcs_establish_connection(struct ql_qcs_device *dev, struct ql_channel *ch, int timeout_ms)
{
	uint64_t deadline = now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
	int ret = 0;

	if (!dev || !ch)
		return ql_error_set(-EINVAL, "qcs: a device and a channel are required");
	if (dev->connected)
		return ql_error_set(-EISCONN, "qcs: already connected; disconnect first");
	dev->ch = ch;
	dev->session = 0;
	dev->complete = dev->aborted = dev->lost = false;
	dev->establishing = true;
	while (!dev->connected) {
		uint64_t now = now_ms();

		if (now >= deadline) {
			ret = ql_error_set(-ETIMEDOUT, "qcs: no QCS%s%s%s connected within %d ms",
					   dev->name[0] ? " named '" : "", dev->name,
					   dev->name[0] ? "'" : "", timeout_ms);
			break;
		}
		ret = ql_ctl_server_poll(dev->srv, (int)(deadline - now));
		if (ret < 0)
			break;
		ret = 0;
	}
	dev->establishing = false;
	if (ret) {
		/* An offer still waiting for its ACK is withdrawn: accept will refuse it. */
		dev->session = 0;
		dev->ch = NULL;
	}
	return ret;
}

bool ql_qcs_is_connected(const struct ql_qcs_device *dev)
{
	return dev && dev->connected;
}

static int check_connected(struct ql_qcs_device *dev, const char *what)
{
	if (!dev)
		return ql_error_set(-EINVAL, "qcs: no device");
	if (!dev->connected)
		return ql_error_set(-ENOTCONN, "qcs: %s: no QCS is connected%s", what,
				    dev->complete ? " (its program completed)" :
				    dev->aborted  ? " (the session was aborted)" :
				    dev->lost	  ? " (the QCS went silent)" :
						    "");
	return 0;
}

int ql_qcs_upload_program(struct ql_qcs_device *dev, const void *bytes, size_t len, int timeout_ms)
{
	uint64_t deadline = now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
	struct ql_ctl_msg *m;
	int ret;

	ret = check_connected(dev, "upload_program");
	if (ret)
		return ret;
	if (!bytes || !len || len > QL_CTL_PROGRAM_MAX)
		return ql_error_set(-EINVAL, "qcs: a program is 1 to %u bytes, not %zu",
				    QL_CTL_PROGRAM_MAX, len);
	m = calloc(1, sizeof(*m));
	if (!m)
		return ql_error_set(-ENOMEM, "qcs: out of memory");
	m->type = QL_CTL_PROGRAM;
	m->total = (uint32_t)len;
	for (size_t off = 0; off < len && !ret; off += m->data_len) {
		uint64_t now = now_ms();

		if (now >= deadline) {
			ret = ql_error_set(-ETIMEDOUT, "qcs: upload of %zu bytes not done in %d ms",
					   len, timeout_ms);
			break;
		}
		m->offset = (uint32_t)off;
		m->data_len = len - off < QL_CTL_CHUNK_MAX ? (uint32_t)(len - off) :
							     QL_CTL_CHUNK_MAX;
		memcpy(m->data, (const uint8_t *)bytes + off, m->data_len);
		ret = ql_ctl_server_request(dev->srv, dev->session, m, (int)(deadline - now));
	}
	free(m);
	return ret;
}

static int simple(struct ql_qcs_device *dev, enum ql_ctl_type t, int timeout_ms)
{
	struct ql_ctl_msg *m;
	int ret;

	ret = check_connected(dev, ql_ctl_type_name(t));
	if (ret)
		return ret;
	m = calloc(1, sizeof(*m));
	if (!m)
		return ql_error_set(-ENOMEM, "qcs: out of memory");
	m->type = t;
	if (t == QL_CTL_ABORT)
		snprintf(m->text, sizeof(m->text), "aborted by the RTH");
	ret = ql_ctl_server_request(dev->srv, dev->session, m, timeout_ms);
	free(m);
	return ret;
}

int ql_qcs_trigger(struct ql_qcs_device *dev, int timeout_ms)
{
	return simple(dev, QL_CTL_TRIGGER, timeout_ms);
}

int ql_qcs_abort(struct ql_qcs_device *dev, int timeout_ms)
{
	/* The server ends the session (op_abort) whatever the QCS answers. */
	return simple(dev, QL_CTL_ABORT, timeout_ms);
}

bool ql_qcs_is_complete(struct ql_qcs_device *dev)
{
	if (!dev)
		return false;
	ql_ctl_server_poll(dev->srv, 0);
	return dev->complete;
}

int ql_qcs_poll(struct ql_qcs_device *dev, int timeout_ms)
{
	return ql_ctl_server_poll(dev->srv, timeout_ms);
}

int ql_qcs_disconnect(struct ql_qcs_device *dev)
{
	if (!dev)
		return ql_error_set(-EINVAL, "qcs: no device");
	if (dev->connected && ql_qcs_abort(dev, DISCONNECT_ABORT_MS))
		ql_log_warn("qcs", "disconnect: the QCS did not acknowledge ABORT: %s",
			    ql_error_detail());
	dev->connected = false;
	dev->session = 0;
	dev->ch = NULL;
	return 0;
}
