/* SPDX-License-Identifier: MIT */
/*
 * Control-plane client (QCS side): sends one request at a time and
 * retransmits it, with the same seq, until the matching reply arrives; the
 * server's reply cache makes the retransmissions harmless.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "qlink/control.h"
#include "qlink/error.h"
#include "qlink/log.h"

struct ql_ctl_client {
	int fd;
	uint8_t *secret;
	size_t secret_len;
	char name[QL_CTL_NAME_MAX];
	char server[128];
	uint32_t timeout_ms;
	uint32_t retries;
	uint64_t session; /* 0 until discover */
	uint64_t seq;
	uint32_t nchannels;
	bool aborted;	/* the server sent an ABORT notice, or an ABORT request */
	bool forgotten; /* the server answered unknown_session */
	char abort_reason[QL_CTL_TEXT_MAX];
	struct ql_ctl_msg reply; /* big: kept here, not on the stack */
	/* Serving the RTH's requests (ql_ctl_client_serve). */
	uint32_t keepalive_ms;
	uint64_t last_ka_ns;
	enum ql_ctl_state qstate; /* this QCS's state, as its OK answers tell the RTH */
	uint64_t rseq_last;	  /* last RTH request handled, and its cached answer */
	size_t rreply_len;
	uint8_t rreply[QL_CTL_MAX_DGRAM];
	uint8_t *prog; /* the upload being reassembled: prog_have of prog_total bytes */
	uint32_t prog_total, prog_have;
	bool prog_ready; /* a complete upload was accepted by ops->program */
	struct ql_ctl_msg rq;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Read one datagram (non-blocking) and classify it. Returns 1 for the reply to
 * `seq` (in cl->reply), 0 for anything else (ignored), negative for an ABORT
 * notice or a socket error. */
static int receive_one(struct ql_ctl_client *cl, uint64_t seq, bool *unauth)
{
	uint8_t buf[QL_CTL_MAX_DGRAM + 64];
	struct ql_ctl_msg *m = &cl->reply;
	ssize_t n = recv(cl->fd, buf, sizeof(buf), MSG_DONTWAIT);
	int ret;

	/* Errors all mean nothing to read; ECONNREFUSED (a one-shot ICMP port
	 * unreachable) also that this try went nowhere. */
	if (n < 0)
		return errno == ECONNREFUSED ? -ECONNREFUSED : -EAGAIN;
	ret = ql_ctl_parse(buf, (size_t)n, cl->secret, cl->secret_len, m);
	/* A server of another version says which it speaks in an ERROR of its
	 * own version (MAC checked, when there is a secret): that is the reply. */
	if (ret == -EPROTONOSUPPORT && m->type == QL_CTL_ERROR && m->session == cl->session &&
	    m->seq == seq && !m->rseq)
		return 1;
	if (ret) {
		if (ret == -EACCES && m->session == cl->session && m->seq == seq)
			*unauth = true;
		return 0;
	}
	if (m->session != cl->session)
		return 0;
	/* An RTH request (rseq set) is not a reply: ql_ctl_client_serve answers it, and
	 * the RTH retransmits it until then. */
	if (m->rseq)
		return 0;
	if (m->type == QL_CTL_ABORT && m->seq == 0) {
		cl->aborted = true;
		snprintf(cl->abort_reason, sizeof(cl->abort_reason), "%s", m->text);
		return ql_error_set(-ECONNRESET, "control: the server aborted the session: %s",
				    m->text[0] ? m->text : "no reason given");
	}
	if (m->seq != seq)
		return 0;
	if (m->type == QL_CTL_ERROR && !strcmp(m->code, "unknown_session"))
		cl->forgotten = true;
	return 1;
}

static int check_usable(struct ql_ctl_client *cl)
{
	if (cl->aborted)
		return ql_error_set(-ECONNRESET, "control: the server aborted the session: %s",
				    cl->abort_reason[0] ? cl->abort_reason : "no reason given");
	return 0;
}

/* The server speaks another version of the control protocol: say which. */
static int version_error(struct ql_ctl_client *cl)
{
	const struct ql_ctl_msg *r = &cl->reply;
	char vs[96] = "";
	size_t k = 0;

	for (unsigned v = 1; v < 32; v++)
		if ((r->versions & (1u << v)) && k < sizeof(vs))
			k += (size_t)snprintf(vs + k, sizeof(vs) - k, "%sv%u", k ? ", " : "", v);
	return ql_error_set(-EPROTONOSUPPORT,
			    "server: bad_version: this client speaks control protocol v%u, "
			    "the server (answering in v%u) speaks %s%s%s",
			    QL_CTL_VERSION, r->version, vs[0] ? vs : "another version",
			    r->text[0] ? ": " : "", r->text);
}

/* Tries answered by an ICMP port unreachable that end a request: nothing
 * listens at the server's address (a server still starting gets the time
 * of three tries to bind). */
#define QL__CTL_REFUSED_TRIES 3u

/* Send m (seq assigned here) until its reply arrives; the reply is cl->reply. */
static int transact(struct ql_ctl_client *cl, struct ql_ctl_msg *m, enum ql_ctl_type want)
{
	uint8_t buf[QL_CTL_MAX_DGRAM];
	bool unauth = false;
	uint32_t wait = cl->timeout_ms, refused = 0;
	int n, ret;

	ret = check_usable(cl);
	if (ret)
		return ret;
	m->session = cl->session;
	m->seq = ++cl->seq;
	m->ts = now_ns();
	/* Padded, so that a server that has forgotten this session may still answer
	 * it (it never answers an unvalidated source with more than it received). */
	if (!m->pad_to)
		m->pad_to = QL_CTL_REQUEST_PAD;
	n = ql_ctl_format(m, cl->secret, cl->secret_len, buf, sizeof(buf));
	if (n < 0)
		return ql_error_set(n, "control: cannot encode %s: %s", ql_ctl_type_name(m->type),
				    ql_strerror(n));
	for (uint32_t attempt = 0; attempt <= cl->retries; attempt++) {
		uint64_t deadline = now_ns() + (uint64_t)wait * 1000000ull;
		bool try_refused = false;

		/* A port unreachable is a lost try (the server may be starting);
		 * three of them end the request (below). */
		if (send(cl->fd, buf, (size_t)n, 0) < 0) {
			if (errno != ECONNREFUSED)
				return ql_error_set(-errno, "control: send to %s: %s", cl->server,
						    strerror(errno));
			try_refused = true;
		}
		for (;;) {
			uint64_t now = now_ns();
			struct pollfd pfd = { .fd = cl->fd, .events = POLLIN };

			if (now >= deadline)
				break;
			if (poll(&pfd, 1, (int)((deadline - now + 999999) / 1000000)) <= 0)
				continue;
			while ((ret = receive_one(cl, m->seq, &unauth)) == 0)
				;
			try_refused |= ret == -ECONNREFUSED;
			if (ret == -EAGAIN || ret == -ECONNREFUSED)
				continue;
			if (ret < 0)
				return ret;
			goto got;
		}
		refused += try_refused;
		if (refused >= QL__CTL_REFUSED_TRIES ||
		    (refused && refused == attempt + 1 && attempt == cl->retries))
			return ql_error_set(-ECONNREFUSED,
					    "control: %s to %s: port unreachable on %u of %u "
					    "tries: nothing listens there; is qlinkd running, "
					    "with this control address?",
					    ql_ctl_type_name(m->type), cl->server, refused,
					    attempt + 1);
		wait = wait * 2 > cl->timeout_ms * 8 ? cl->timeout_ms * 8 : wait * 2;
	}
	if (unauth)
		return ql_error_set(-ETIMEDOUT,
				    "control: %s: replies from %s failed authentication "
				    "(is the secret the same on both ends?)",
				    ql_ctl_type_name(m->type), cl->server);
	return ql_error_set(-ETIMEDOUT, "control: no reply to %s from %s after %u tries",
			    ql_ctl_type_name(m->type), cl->server, cl->retries + 1);
got:
	if (cl->reply.type == QL_CTL_RETRY && m->type == QL_CTL_DISCOVER)
		return 1; /* the caller repeats the DISCOVER with the cookie */
	if (cl->reply.type == QL_CTL_ERROR && !strcmp(cl->reply.code, "bad_version"))
		return version_error(cl);
	if (cl->reply.type == QL_CTL_ERROR)
		return ql_error_set(ql_ctl_error_errno(cl->reply.code), "server: %s: %s",
				    cl->reply.code, cl->reply.text);
	if (cl->reply.type != want || (want == QL_CTL_OK && cl->reply.re != m->type))
		return ql_error_set(-EPROTO, "control: %s answered with %s",
				    ql_ctl_type_name(m->type), ql_ctl_type_name(cl->reply.type));
	return 0;
}

int ql_ctl_client_create(const char *host_port, const uint8_t *secret, size_t secret_len,
			 const struct ql_ctl_client_config *cfg, struct ql_ctl_client **out)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_DGRAM }, *ai = NULL;
	char host[128];
	const char *colon;
	struct ql_ctl_client *cl;
	int ret;

	if (!host_port || !out || (secret_len && !secret))
		return ql_error_set(-EINVAL, "control client: host:port required");
	colon = strrchr(host_port, ':');
	if (!colon || colon == host_port || (size_t)(colon - host_port) >= sizeof(host) ||
	    !colon[1])
		return ql_error_set(-EINVAL, "control client: '%s' is not HOST:PORT", host_port);
	memcpy(host, host_port, (size_t)(colon - host_port));
	host[colon - host_port] = 0;
	if (sodium_init() < 0)
		return ql_error_set(-EIO, "control client: libsodium failed to initialize");
	ret = getaddrinfo(host, colon + 1, &hints, &ai);
	if (ret)
		return ql_error_set(-EHOSTUNREACH, "control client: cannot resolve '%s': %s",
				    host_port, gai_strerror(ret));
	cl = calloc(1, sizeof(*cl));
	if (!cl) {
		freeaddrinfo(ai);
		return ql_error_set(-ENOMEM, "control client: out of memory");
	}
	snprintf(cl->server, sizeof(cl->server), "%s", host_port);
	snprintf(cl->name, sizeof(cl->name), "%s", cfg && cfg->name ? cfg->name : "qcs");
	cl->timeout_ms = cfg && cfg->timeout_ms ? cfg->timeout_ms : 200;
	cl->retries = cfg && cfg->retries ? cfg->retries : 5;
	cl->keepalive_ms = cfg && cfg->keepalive_ms ? cfg->keepalive_ms : 1000;
	cl->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (cl->fd < 0) {
		ret = ql_error_set(-errno, "control client: socket: %s", strerror(errno));
		goto fail;
	}
	if (cfg && cfg->bind_addr) {
		struct sockaddr_in a = { .sin_family = AF_INET };

		if (inet_pton(AF_INET, cfg->bind_addr, &a.sin_addr) != 1) {
			ret = ql_error_set(-EINVAL, "control client: bind address '%s' is not IPv4",
					   cfg->bind_addr);
			goto fail;
		}
		if (bind(cl->fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
			ret = ql_error_set(-errno, "control client: cannot bind %s: %s",
					   cfg->bind_addr, strerror(errno));
			goto fail;
		}
	}
	/* A connected UDP socket only receives from the server. */
	if (connect(cl->fd, ai->ai_addr, ai->ai_addrlen) < 0) {
		ret = ql_error_set(-errno, "control client: connect %s: %s", host_port,
				   strerror(errno));
		goto fail;
	}
	if (secret_len) {
		cl->secret = malloc(secret_len);
		if (!cl->secret) {
			ret = ql_error_set(-ENOMEM, "control client: out of memory");
			goto fail;
		}
		memcpy(cl->secret, secret, secret_len);
		cl->secret_len = secret_len;
	}
	freeaddrinfo(ai);
	*out = cl;
	return 0;
fail:
	freeaddrinfo(ai);
	if (cl->fd >= 0)
		close(cl->fd);
	free(cl);
	return ret;
}

void ql_ctl_client_destroy(struct ql_ctl_client *cl)
{
	if (!cl)
		return;
	close(cl->fd);
	if (cl->secret)
		sodium_memzero(cl->secret, cl->secret_len);
	free(cl->secret);
	free(cl->prog);
	free(cl);
}

int ql_ctl_client_discover(struct ql_ctl_client *cl, uint32_t n, struct ql_conn_params *rth)
{
	struct ql_ctl_msg m;
	int ret;

	if (n < 1 || n > QL_CTL_MAX_CHANNELS || !rth)
		return ql_error_set(-EINVAL, "control: 1 to %d channels per session, not %u",
				    QL_CTL_MAX_CHANNELS, n);
	/* A fresh random id per DISCOVER: a restarted QCS never collides with its old
	 * session, and a stranger cannot guess it. */
	do {
		if (getrandom(&cl->session, sizeof(cl->session), 0) != sizeof(cl->session))
			randombytes_buf(&cl->session, sizeof(cl->session));
	} while (!cl->session);
	cl->seq = 0;
	cl->aborted = false;
	cl->forgotten = false;
	cl->qstate = QL_CTL_S_OFFERED;
	cl->rseq_last = 0;
	cl->rreply_len = 0;
	cl->prog_have = cl->prog_total = 0;
	cl->prog_ready = false;
	memset(&m, 0, sizeof(m));
	m.type = QL_CTL_DISCOVER;
	snprintf(m.name, sizeof(m.name), "%s", cl->name);
	m.nchannels = n;
	/* The server answers a DISCOVER without a valid cookie with RETRY and its
	 * cookie: repeat it with the cookie (again if the cookie expired meanwhile). */
	for (int round = 0; (ret = transact(cl, &m, QL_CTL_CONNECTION_PARAMS)) == 1; round++) {
		if (round == 3)
			return ql_error_set(-EPROTO, "control: %s keeps answering RETRY",
					    cl->server);
		memcpy(m.cookie, cl->reply.cookie, sizeof(m.cookie));
	}
	if (ret)
		return ret;
	if (cl->reply.nchannels != n)
		return ql_error_set(-EPROTO, "control: asked for %u channels, offered %u", n,
				    cl->reply.nchannels);
	if (cl->reply.proto != QL_CTL_PROTO)
		return ql_error_set(-EPROTONOSUPPORT,
				    "control: server offers ring protocol %u, "
				    "this client speaks %u",
				    cl->reply.proto, QL_CTL_PROTO);
	cl->nchannels = n;
	memcpy(rth, cl->reply.ch, n * sizeof(*rth));
	return 0;
}

int ql_ctl_client_ack(struct ql_ctl_client *cl, const struct ql_conn_params *mine, uint32_t n)
{
	struct ql_ctl_msg m;
	int ret;

	if (!cl->session)
		return ql_error_set(-ENOTCONN, "control: ACK before DISCOVER");
	if (n != cl->nchannels || !mine)
		return ql_error_set(-EINVAL, "control: ACK needs %u channel(s), got %u",
				    cl->nchannels, n);
	memset(&m, 0, sizeof(m));
	m.type = QL_CTL_ACK;
	m.nchannels = n;
	memcpy(m.ch, mine, n * sizeof(*mine));
	ret = transact(cl, &m, QL_CTL_OK);
	if (!ret)
		cl->qstate = QL_CTL_S_CONNECTED;
	return ret;
}

static int simple(struct ql_ctl_client *cl, enum ql_ctl_type t)
{
	struct ql_ctl_msg m;

	if (!cl->session)
		return ql_error_set(-ENOTCONN, "control: %s before DISCOVER", ql_ctl_type_name(t));
	memset(&m, 0, sizeof(m));
	m.type = t;
	return transact(cl, &m, QL_CTL_OK);
}

int ql_ctl_client_start(struct ql_ctl_client *cl)
{
	return simple(cl, QL_CTL_START);
}

int ql_ctl_client_stop(struct ql_ctl_client *cl)
{
	return simple(cl, QL_CTL_STOP);
}

int ql_ctl_client_abort(struct ql_ctl_client *cl)
{
	return simple(cl, QL_CTL_ABORT);
}

int ql_ctl_client_complete(struct ql_ctl_client *cl)
{
	int ret = simple(cl, QL_CTL_COMPLETE);

	if (!ret)
		cl->qstate = QL_CTL_S_COMPLETE;
	return ret;
}

int ql_ctl_client_status(struct ql_ctl_client *cl, char *json, size_t len)
{
	struct ql_ctl_msg m;
	int ret;

	if (!cl->session)
		return ql_error_set(-ENOTCONN, "control: STATUS before DISCOVER");
	memset(&m, 0, sizeof(m));
	m.type = QL_CTL_STATUS;
	ret = transact(cl, &m, QL_CTL_STATUS_REPLY);
	if (ret)
		return ret;
	if (json && len) {
		if (strlen(cl->reply.status) >= len)
			return ql_error_set(-ENOSPC, "control: status needs %zu bytes",
					    strlen(cl->reply.status) + 1);
		strcpy(json, cl->reply.status);
	}
	return 0;
}

static int send_keepalive(struct ql_ctl_client *cl)
{
	uint8_t buf[QL_CTL_MAX_DGRAM];
	struct ql_ctl_msg m;
	int n;

	memset(&m, 0, sizeof(m));
	m.type = QL_CTL_KEEPALIVE;
	m.pad_to = QL_CTL_REQUEST_PAD;
	m.session = cl->session;
	m.seq = ++cl->seq;
	m.ts = now_ns();
	n = ql_ctl_format(&m, cl->secret, cl->secret_len, buf, sizeof(buf));
	if (n < 0)
		return n;
	cl->last_ka_ns = now_ns();
	if (send(cl->fd, buf, (size_t)n, 0) < 0 && errno != ECONNREFUSED)
		return -errno;
	return 0;
}

int ql_ctl_client_keepalive(struct ql_ctl_client *cl)
{
	bool unauth = false;
	int ret;

	if (!cl->session)
		return ql_error_set(-ENOTCONN, "control: KEEPALIVE before DISCOVER");
	/* Replies to earlier keepalives, and any ABORT notice, are waiting here. */
	while ((ret = receive_one(cl, cl->seq, &unauth)) >= 0)
		;
	if (ret != -EAGAIN)
		return ret;
	ret = check_usable(cl);
	if (ret)
		return ret;
	if (cl->forgotten)
		return ql_error_set(-ENOTCONN,
				    "control: the server no longer knows session "
				    "%016llx",
				    (unsigned long long)cl->session);
	return send_keepalive(cl);
}

uint64_t ql_ctl_client_session(const struct ql_ctl_client *cl)
{
	return cl->session;
}

/* ---- serving the RTH's requests --------------------------------------------- */

static void rth_error(struct ql_ctl_msg *r, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void rth_error(struct ql_ctl_msg *r, const char *code, const char *fmt, ...)
{
	va_list ap;

	r->type = QL_CTL_ERROR;
	snprintf(r->code, sizeof(r->code), "%s", code);
	va_start(ap, fmt);
	vsnprintf(r->text, sizeof(r->text), fmt, ap);
	va_end(ap);
}

static void rth_refused(struct ql_ctl_msg *r, const char *what, int ret)
{
	rth_error(r, "refused", "%s failed: %s%s%s", what, ql_strerror(ret),
		  ql_error_detail()[0] ? ": " : "", ql_error_detail());
}

/* PROGRAM chunks arrive in order (the RTH has one request in flight and
 * duplicates never get here), so reassembly is an append; offset 0 starts a
 * new upload, which lets the RTH restart one it gave up on. */
static void rth_program(struct ql_ctl_client *cl, const struct ql_ctl_msg *m, struct ql_ctl_msg *r,
			const struct ql_ctl_client_ops *ops, void *ctx)
{
	int ret;

	if (cl->qstate == QL_CTL_S_RUNNING) {
		rth_error(r, "bad_state", "PROGRAM is not valid while a program runs");
		return;
	}
	if (m->offset == 0) {
		uint8_t *p = realloc(cl->prog, m->total);

		if (!p) {
			rth_error(r, "refused", "no memory for a %u-byte program", m->total);
			return;
		}
		cl->prog = p;
		cl->prog_total = m->total;
		cl->prog_have = 0;
		cl->prog_ready = false;
	} else if (m->total != cl->prog_total || m->offset != cl->prog_have) {
		rth_error(r, "malformed", "PROGRAM chunk at %u of %u, expected one at %u of %u",
			  m->offset, m->total, cl->prog_have, cl->prog_total);
		return;
	}
	memcpy(cl->prog + m->offset, m->data, m->data_len);
	cl->prog_have += m->data_len;
	if (cl->prog_have < cl->prog_total)
		return;
	ql_error_clear();
	ret = ops->program(ctx, cl->prog, cl->prog_total);
	if (ret) {
		cl->prog_have = 0;
		rth_refused(r, "program", ret);
		return;
	}
	cl->prog_ready = true;
}

static void rth_request(struct ql_ctl_client *cl, const struct ql_ctl_msg *m,
			const struct ql_ctl_client_ops *ops, void *ctx)
{
	struct ql_ctl_msg r;
	int n, ret;

	if (m->rseq == cl->rseq_last) {
		/* Our answer was lost: the same bytes again, no second side effect. */
		if (cl->rreply_len)
			send(cl->fd, cl->rreply, cl->rreply_len, 0);
		return;
	}
	if (m->rseq < cl->rseq_last)
		return; /* a late copy of something answered */
	cl->rseq_last = m->rseq;
	memset(&r, 0, sizeof(r));
	r.type = QL_CTL_OK;
	r.session = cl->session;
	r.rseq = m->rseq;
	r.re = m->type;
	switch (m->type) {
	case QL_CTL_PROGRAM:
		rth_program(cl, m, &r, ops, ctx);
		break;
	case QL_CTL_TRIGGER:
		if (cl->qstate == QL_CTL_S_RUNNING) {
			rth_error(&r, "bad_state", "TRIGGER is not valid while a program runs");
			break;
		}
		if (!cl->prog_ready) {
			rth_error(&r, "bad_state", "TRIGGER before a complete PROGRAM");
			break;
		}
		ql_error_clear();
		ret = ops->trigger(ctx);
		if (ret) {
			rth_refused(&r, "trigger", ret);
			break;
		}
		cl->qstate = QL_CTL_S_RUNNING;
		break;
	default: /* QL_CTL_ABORT */
		if (cl->aborted)
			break; /* already over: the answer is all that is left to give */
		cl->qstate = QL_CTL_S_ABORTED;
		cl->aborted = true;
		snprintf(cl->abort_reason, sizeof(cl->abort_reason), "%s",
			 m->text[0] ? m->text : "aborted by the RTH");
		if (ops->abort)
			ops->abort(ctx, cl->abort_reason);
		break;
	}
	r.state = cl->qstate;
	r.ts = now_ns();
	n = ql_ctl_format(&r, cl->secret, cl->secret_len, cl->rreply, sizeof(cl->rreply));
	if (n < 0) {
		ql_log_error("control", "cannot encode the answer to %s: %s",
			     ql_ctl_type_name(m->type), ql_strerror(n));
		cl->rreply_len = 0;
		return;
	}
	cl->rreply_len = (size_t)n;
	send(cl->fd, cl->rreply, cl->rreply_len, 0);
}

/* Drain the socket. Returns the RTH requests handled, or a negative errno
 * for a socket error. */
static int serve_drain(struct ql_ctl_client *cl, const struct ql_ctl_client_ops *ops, void *ctx)
{
	uint8_t buf[QL_CTL_MAX_DGRAM + 64];
	struct ql_ctl_msg *m = &cl->rq;
	int handled = 0;

	for (;;) {
		ssize_t n = recv(cl->fd, buf, sizeof(buf), MSG_DONTWAIT);

		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ||
			    errno == ECONNREFUSED)
				return handled;
			return -errno;
		}
		/* Unauthenticated or foreign datagrams get no answer: only the RTH may drive us. */
		if (ql_ctl_parse(buf, (size_t)n, cl->secret, cl->secret_len, m) ||
		    m->session != cl->session)
			continue;
		if (m->rseq && (m->type == QL_CTL_PROGRAM || m->type == QL_CTL_TRIGGER ||
				m->type == QL_CTL_ABORT)) {
			rth_request(cl, m, ops, ctx);
			handled++;
		} else if (m->type == QL_CTL_ABORT && m->seq == 0) {
			if (!cl->aborted) {
				cl->aborted = true;
				cl->qstate = QL_CTL_S_ABORTED;
				snprintf(cl->abort_reason, sizeof(cl->abort_reason), "%s",
					 m->text[0] ? m->text : "no reason given");
				if (ops->abort)
					ops->abort(ctx, cl->abort_reason);
			}
		} else if (m->type == QL_CTL_ERROR && !strcmp(m->code, "unknown_session")) {
			cl->forgotten = true;
		}
		/* Anything else: replies to our keepalives. */
	}
}

int ql_ctl_client_serve(struct ql_ctl_client *cl, int timeout_ms,
			const struct ql_ctl_client_ops *ops, void *ctx)
{
	uint64_t deadline = now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ull;
	uint64_t period = (uint64_t)cl->keepalive_ms * 1000000ull;

	if (!ops || !ops->program || !ops->trigger)
		return ql_error_set(-EINVAL, "control: serve needs ops->program and ops->trigger");
	if (!cl->session)
		return ql_error_set(-ENOTCONN, "control: serve before DISCOVER");
	for (;;) {
		struct pollfd pfd = { .fd = cl->fd, .events = POLLIN };
		uint64_t now = now_ns(), wake;
		int ret = serve_drain(cl, ops, ctx);

		if (ret < 0)
			return ql_error_set(ret, "control: receive from %s: %s", cl->server,
					    strerror(-ret));
		if (cl->aborted)
			return ql_error_set(-ECONNRESET, "control: the session was aborted: %s",
					    cl->abort_reason);
		if (cl->forgotten)
			return ql_error_set(-ENOTCONN,
					    "control: the server no longer knows session %016llx",
					    (unsigned long long)cl->session);
		if (ret > 0)
			return ret;
		now = now_ns();
		if (now - cl->last_ka_ns >= period) {
			ret = send_keepalive(cl);
			if (ret)
				return ql_error_set(ret, "control: KEEPALIVE to %s: %s", cl->server,
						    ql_strerror(ret));
		}
		if (now >= deadline)
			return 0;
		wake = cl->last_ka_ns + period < deadline ? cl->last_ka_ns + period : deadline;
		poll(&pfd, 1, wake > now ? (int)((wake - now + 999999) / 1000000) : 0);
	}
}
