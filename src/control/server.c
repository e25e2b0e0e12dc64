/* SPDX-License-Identifier: MIT */
/*
 * Control-plane server (RTH side): one UDP socket, a fixed table of sessions,
 * a reply cache per session, and the state machine of docs/control-plane.md.
 * Everything runs in the caller's ql_ctl_server_poll(); nothing allocates
 * after create except jansson while encoding and decoding.
 *
 * Anti-DoS (docs/control-plane.md §5): a DISCOVER from an unknown source
 * earns only a stateless RETRY cookie; answers to sources without a session
 * are never longer than what they answer; sessions, channels and sessions
 * per address are limited; an ended session's slot is freed at once and its
 * last answer kept in a ring of ended records; admitted session ids are
 * remembered for a cookie's lifetime so a replayed DISCOVER opens nothing.
 */
#define _GNU_SOURCE /* recvmmsg */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "qlink/control.h"
#include "qlink/error.h"
#include "qlink/log.h"
#include "server_internal.h"

static uint64_t ql_ctl_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#define RX_BURST 64    /* datagrams per poll call, so timers still run under a flood */
#define RX_BATCH 16    /* datagrams per recvmmsg */
#define LOG_PER_SEC 10 /* reject lines per second before suppression */
#define PEER_STR_MAX 24
#define ERROR_MIN \
	80 /* bytes: {"v":2,"type":"ERROR","session":"<16>","seq":0,"ts":0,"code":"busy"} */
#define ADMIT_MAX 4096	    /* session ids admitted within a cookie's lifetime */
#define ADMIT_PER_SOURCE 64 /* of which one source address may hold */
#define COOKIE_NS ((uint64_t)QL_CTL_COOKIE_PERIOD_S * 1000000000ull)

struct ql_ctl_session {
	struct ql_ctl_server *srv;
	bool used;
	bool open; /* offer succeeded and no ending callback yet */
	uint64_t id;
	char name[QL_CTL_NAME_MAX];
	uint32_t nchannels;
	enum ql_ctl_state state;
	struct sockaddr_in peer;
	char peer_str[PEER_STR_MAX];
	uint64_t last_seq;
	uint64_t last_rx_ns;
	uint64_t created_ns;
	struct ql_conn_params offered[QL_CTL_MAX_CHANNELS]; /* this RTH's endpoints */
	uint64_t requests; /* requests that ran (duplicates excluded) */
	size_t reply_len;
	uint8_t reply[QL_CTL_MAX_DGRAM];
	void *data;
	/* The RTH -> QCS request in flight (ql_ctl_server_request), if any. */
	uint64_t rseq;	  /* last rseq used */
	bool rq_pending;  /* sent, not answered, retries left */
	int rq_result;	  /* 0, or the answer's errno once not pending */
	uint64_t rq_next; /* next retransmission, ns */
	uint32_t rq_wait_ms, rq_tries;
	enum ql_ctl_type rq_type;
	char rq_code[QL_CTL_CODE_MAX];
	char rq_text[QL_CTL_TEXT_MAX];
	size_t rq_len;
	uint8_t rq[QL_CTL_MAX_DGRAM];
};

/* An ended session, kept after its slot is freed so that a retransmission of
 * its last request still gets the same answer. */
struct ended {
	bool used;
	uint64_t id;
	struct sockaddr_in peer;
	enum ql_ctl_state state;
	uint64_t last_seq;
	uint64_t until_ns;
	size_t reply_len;
	uint8_t reply[QL_CTL_MAX_DGRAM];
};

/* A session id admitted (a DISCOVER with a valid cookie ran): a replay of
 * that DISCOVER while its cookie lives opens nothing. */
struct admitted {
	uint64_t id;
	uint64_t t_ns;
	uint32_t addr;
};

struct allow_net {
	uint32_t net; /* host order */
	uint32_t mask;
};

struct ql_ctl_server {
	int fd;
	uint16_t port;
	struct ql_ctl_server_ops ops;
	void *ctx;
	uint8_t *secret;
	size_t secret_len;
	struct allow_net *allow;
	size_t nallow; /* 0 with allow == NULL: everyone */
	uint32_t max_sessions;
	uint32_t max_channels, max_per_source;
	uint64_t timeout_ns;
	struct ended *ended; /* 2 * max_sessions, a ring */
	uint32_t nended, ended_next;
	struct admitted *admitted;
	uint8_t ckey[2][crypto_auth_hmacsha256_KEYBYTES]; /* by time bucket parity */
	uint64_t cbucket;
	size_t req_len; /* the datagram being handled: bound of an unvalidated answer */
	/* receive batch (recvmmsg), set up once */
	struct mmsghdr rx_msgs[RX_BATCH];
	struct iovec rx_iov[RX_BATCH];
	struct sockaddr_in rx_from[RX_BATCH];
	uint8_t rx_buf[RX_BATCH][QL_CTL_MAX_DGRAM + 64];
	ql_ctl_sender_fn sender; /* tests and fuzzers: replaces sendto */
	void *sender_ctx;
	uint32_t rq_timeout_ms, rq_retries;
	struct ql_ctl_session *sessions;
	struct ql_ctl_stats st; /* updated atomically: read from other threads */
	uint64_t log_window_ns;
	unsigned int log_lines;
	uint64_t log_suppressed;
};

#define STAT_ADD(srv, f, n) __atomic_fetch_add(&(srv)->st.f, (n), __ATOMIC_RELAXED)
#define STAT_INC(srv, f) STAT_ADD(srv, f, 1)

static bool state_open(enum ql_ctl_state s)
{
	return s >= QL_CTL_S_OFFERED && s <= QL_CTL_S_STOPPED;
}

static void peer_format(const struct sockaddr_in *a, char *buf, size_t len)
{
	char ip[INET_ADDRSTRLEN] = "?";

	inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip));
	snprintf(buf, len, "%s:%u", ip, ntohs(a->sin_port));
}

/* Rejects are logged with their source, but a flood must not flood the log:
 * at most LOG_PER_SEC lines a second, then one line saying how many were
 * suppressed. */
static void __attribute__((format(printf, 3, 4)))
reject_log(struct ql_ctl_server *srv, const struct sockaddr_in *from, const char *fmt, ...)
{
	uint64_t now = ql_ctl_now_ns();
	char peer[PEER_STR_MAX], msg[256];
	va_list ap;

	if (now - srv->log_window_ns >= 1000000000ull) {
		if (srv->log_suppressed)
			ql_log_warn("control", "suppressed %llu rejected-datagram lines",
				    (unsigned long long)srv->log_suppressed);
		srv->log_window_ns = now;
		srv->log_lines = 0;
		srv->log_suppressed = 0;
	}
	if (srv->log_lines >= LOG_PER_SEC) {
		srv->log_suppressed++;
		return;
	}
	srv->log_lines++;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	peer_format(from, peer, sizeof(peer));
	ql_log_warn("control", "rejected datagram from %s: %s", peer, msg);
}

static int parse_cidr(const char *text, struct allow_net *out)
{
	char ip[INET_ADDRSTRLEN];
	const char *slash = strchr(text, '/');
	size_t n = slash ? (size_t)(slash - text) : strlen(text);
	struct in_addr a;
	long bits = 32;

	if (n >= sizeof(ip))
		return -EINVAL;
	memcpy(ip, text, n);
	ip[n] = 0;
	if (inet_pton(AF_INET, ip, &a) != 1)
		return -EINVAL;
	if (slash) {
		char *end;

		bits = strtol(slash + 1, &end, 10);
		if (end == slash + 1 || *end || bits < 0 || bits > 32)
			return -EINVAL;
	}
	out->mask = bits ? ~0u << (32 - bits) : 0;
	out->net = ntohl(a.s_addr) & out->mask;
	return 0;
}

static bool allowed(const struct ql_ctl_server *srv, const struct sockaddr_in *from)
{
	uint32_t a = ntohl(from->sin_addr.s_addr);

	if (!srv->allow)
		return true;
	for (size_t i = 0; i < srv->nallow; i++)
		if ((a & srv->allow[i].mask) == srv->allow[i].net)
			return true;
	return false;
}

static void count_active(struct ql_ctl_server *srv);

static void send_dgram(struct ql_ctl_server *srv, const struct sockaddr_in *to, const uint8_t *buf,
		       size_t len)
{
	/* Counters are current when a reply leaves: a QCS that reads them next sees its own step. */
	count_active(srv);
	if (srv->sender) {
		if (srv->sender(srv->sender_ctx, to, buf, len) >= 0)
			STAT_INC(srv, replied);
		return;
	}
	/* Best effort: a reply lost here is a reply lost on the wire, and the client retries. */
	if (sendto(srv->fd, buf, len, MSG_DONTWAIT, (const struct sockaddr *)to, sizeof(*to)) >= 0)
		STAT_INC(srv, replied);
}

/* Encode m; returns its length in buf or 0 when it cannot be encoded. */
static size_t encode(struct ql_ctl_server *srv, struct ql_ctl_msg *m, uint8_t *buf)
{
	int n;

	m->ts = ql_ctl_now_ns();
	n = ql_ctl_format(m, srv->secret, srv->secret_len, buf, QL_CTL_MAX_DGRAM);
	if (n < 0) {
		ql_log_error("control", "cannot encode %s reply: %s", ql_ctl_type_name(m->type),
			     ql_strerror(n));
		return 0;
	}
	return (size_t)n;
}

static void error_msg(struct ql_ctl_msg *r, const struct ql_ctl_msg *req, const char *code,
		      const char *text)
{
	memset(r, 0, sizeof(*r));
	r->type = QL_CTL_ERROR;
	r->session = req->session;
	r->seq = req->seq;
	snprintf(r->code, sizeof(r->code), "%s", code);
	snprintf(r->text, sizeof(r->text), "%s", text);
}

/* Send an answer to a source no cookie has validated (no session of it):
 * never larger than the datagram that provoked it, so that a spoofed source
 * cannot turn this server into an amplifier. */
static void send_unvalidated(struct ql_ctl_server *srv, const struct sockaddr_in *to,
			     const uint8_t *buf, size_t n)
{
	if (n > srv->req_len) {
		STAT_INC(srv, unanswered);
		return;
	}
	send_dgram(srv, to, buf, n);
}

/* An ERROR for a datagram that belongs to no session (nothing cached): with
 * its message if that fits the no-amplification bound, else without it
 * (and without ts), else none. */
static void reply_error_msg(struct ql_ctl_server *srv, const struct sockaddr_in *to,
			    struct ql_ctl_msg *r)
{
	uint8_t buf[QL_CTL_MAX_DGRAM];
	size_t n;
	int k;

	/* No ERROR is shorter than this: a flood of short garbage costs no encoding. */
	if (srv->req_len < ERROR_MIN + (srv->secret_len ? 1 + QL_CTL_MAC_HEX : 0)) {
		STAT_INC(srv, unanswered);
		return;
	}
	n = encode(srv, r, buf);
	if (n > srv->req_len) {
		r->text[0] = 0;
		r->ts = 0;
		k = ql_ctl_format(r, srv->secret, srv->secret_len, buf, sizeof(buf));
		n = k > 0 ? (size_t)k : 0;
	}
	if (n)
		send_unvalidated(srv, to, buf, n);
}

static void reply_error(struct ql_ctl_server *srv, const struct sockaddr_in *to,
			const struct ql_ctl_msg *req, const char *code, const char *text)
{
	struct ql_ctl_msg r;

	error_msg(&r, req, code, text);
	reply_error_msg(srv, to, &r);
}

/* A peer speaking another version of the protocol: ERROR "bad_version" with
 * the versions this server speaks ("versions"), written in the peer's own
 * version when that is an older one (an ERROR has kept its form since
 * version 1, so an older peer reads the answer), else in the current one. */
static void reply_bad_version(struct ql_ctl_server *srv, const struct sockaddr_in *to,
			      const struct ql_ctl_msg *req)
{
	char text[QL_CTL_TEXT_MAX];
	struct ql_ctl_msg r;

	snprintf(text, sizeof(text),
		 "control protocol v%u is not supported: this RTH speaks v%u "
		 "(docs/control-plane.md section 9)",
		 req->version, QL_CTL_VERSION);
	error_msg(&r, req, "bad_version", text);
	r.version = req->version;
	r.versions = QL_CTL_VERSIONS;
	reply_error_msg(srv, to, &r);
}

static struct ql_ctl_session *session_find(struct ql_ctl_server *srv, uint64_t id)
{
	for (uint32_t i = 0; i < srv->max_sessions; i++)
		if (srv->sessions[i].used && srv->sessions[i].id == id)
			return &srv->sessions[i];
	return NULL;
}

static void session_free(struct ql_ctl_session *s)
{
	struct ql_ctl_server *srv = s->srv;

	memset(s, 0, sizeof(*s));
	s->srv = srv;
}

/* The slot of an ended session is freed at once (its channels were given
 * back by its ending callback); its last answer moves to the ended ring for
 * retransmissions. */
static void session_retire(struct ql_ctl_session *s, uint64_t now)
{
	struct ql_ctl_server *srv = s->srv;
	struct ended *e = &srv->ended[srv->ended_next];
	uint64_t keep = srv->timeout_ns > 2 * COOKIE_NS ? srv->timeout_ns : 2 * COOKIE_NS;

	srv->ended_next = (srv->ended_next + 1) % srv->nended;
	e->used = true;
	e->id = s->id;
	e->peer = s->peer;
	e->state = s->state;
	e->last_seq = s->last_seq;
	e->until_ns = now + keep;
	e->reply_len = s->reply_len;
	memcpy(e->reply, s->reply, s->reply_len);
	session_free(s);
}

static struct ended *ended_find(struct ql_ctl_server *srv, uint64_t id,
				const struct sockaddr_in *from, uint64_t now)
{
	for (uint32_t i = 0; i < srv->nended; i++) {
		struct ended *e = &srv->ended[i];

		if (e->used && now >= e->until_ns)
			e->used = false;
		if (e->used && e->id == id && e->peer.sin_addr.s_addr == from->sin_addr.s_addr &&
		    e->peer.sin_port == from->sin_port)
			return e;
	}
	return NULL;
}

/* ---- cookies (stateless address validation, as DTLS and QUIC do) -------- */

/* Keys rotate every QL_CTL_COOKIE_PERIOD_S; the key of bucket b is
 * ckey[b & 1], so a cookie lives for the rest of its bucket and the next. */
static void cookie_rotate(struct ql_ctl_server *srv, uint64_t now)
{
	uint64_t b = now / COOKIE_NS;

	if (b == srv->cbucket)
		return;
	if (b != srv->cbucket + 1)
		randombytes_buf(srv->ckey[(b + 1) & 1], sizeof(srv->ckey[0]));
	randombytes_buf(srv->ckey[b & 1], sizeof(srv->ckey[0]));
	srv->cbucket = b;
}

static void cookie_make(struct ql_ctl_server *srv, uint64_t bucket, const struct sockaddr_in *from,
			uint64_t session, char out[QL_CTL_COOKIE_HEX + 1])
{
	static const char hx[] = "0123456789abcdef";
	uint8_t in[4 + 2 + 8 + 8], mac[crypto_auth_hmacsha256_BYTES];

	memcpy(in, &from->sin_addr.s_addr, 4);
	memcpy(in + 4, &from->sin_port, 2);
	memcpy(in + 6, &session, 8);
	memcpy(in + 14, &bucket, 8);
	crypto_auth_hmacsha256(mac, in, sizeof(in), srv->ckey[bucket & 1]);
	for (int i = 0; i < QL_CTL_COOKIE_HEX / 2; i++) {
		out[2 * i] = hx[mac[i] >> 4];
		out[2 * i + 1] = hx[mac[i] & 15];
	}
	out[QL_CTL_COOKIE_HEX] = 0;
}

static bool cookie_ok(struct ql_ctl_server *srv, const struct ql_ctl_msg *req,
		      const struct sockaddr_in *from)
{
	char want[QL_CTL_COOKIE_HEX + 1];

	if (strlen(req->cookie) != QL_CTL_COOKIE_HEX)
		return false;
	cookie_make(srv, srv->cbucket, from, req->session, want);
	if (!sodium_memcmp(want, req->cookie, QL_CTL_COOKIE_HEX))
		return true;
	cookie_make(srv, srv->cbucket - 1, from, req->session, want);
	return !sodium_memcmp(want, req->cookie, QL_CTL_COOKIE_HEX);
}

/* RETRY: the cookie the DISCOVER must carry. Costs no state; as small as
 * possible and never larger than the DISCOVER (send_unvalidated). */
static void send_retry(struct ql_ctl_server *srv, const struct ql_ctl_msg *req,
		       const struct sockaddr_in *from)
{
	uint8_t buf[QL_CTL_MAX_DGRAM];
	struct ql_ctl_msg r;
	int n;

	memset(&r, 0, sizeof(r));
	r.type = QL_CTL_RETRY;
	r.session = req->session;
	r.seq = req->seq;
	cookie_make(srv, srv->cbucket, from, req->session, r.cookie);
	n = ql_ctl_format(&r, srv->secret, srv->secret_len, buf, sizeof(buf));
	STAT_INC(srv, retries);
	if (n > 0)
		send_unvalidated(srv, from, buf, (size_t)n);
}

/* 0: admitted now; -EALREADY: admitted before (a replay); -EBUSY: no room
 * (for this source). */
static int admit(struct ql_ctl_server *srv, uint64_t id, const struct sockaddr_in *from,
		 uint64_t now)
{
	struct admitted *free_slot = NULL;
	uint32_t mine = 0;

	for (uint32_t i = 0; i < ADMIT_MAX; i++) {
		struct admitted *a = &srv->admitted[i];

		if (a->t_ns && now - a->t_ns > 2 * COOKIE_NS + 1000000000ull)
			a->t_ns = 0;
		if (!a->t_ns) {
			if (!free_slot)
				free_slot = a;
			continue;
		}
		if (a->id == id)
			return -EALREADY;
		mine += a->addr == from->sin_addr.s_addr;
	}
	if (!free_slot || mine >= ADMIT_PER_SOURCE)
		return -EBUSY;
	free_slot->id = id;
	free_slot->t_ns = now ? now : 1;
	free_slot->addr = from->sin_addr.s_addr;
	return 0;
}

static void count_active(struct ql_ctl_server *srv)
{
	uint64_t n = 0, c = 0;

	for (uint32_t i = 0; i < srv->max_sessions; i++) {
		bool on = srv->sessions[i].used && state_open(srv->sessions[i].state);

		n += on;
		c += on ? srv->sessions[i].nchannels : 0;
	}
	__atomic_store_n(&srv->st.sessions_active, n, __ATOMIC_RELAXED);
	__atomic_store_n(&srv->st.channels_active, c, __ATOMIC_RELAXED);
}

/* Callback failures go back to the QCS as ERROR "refused" with the detail sentence. */
static int op_result(struct ql_ctl_msg *r, const struct ql_ctl_msg *req, int ret, const char *what)
{
	char text[QL_CTL_TEXT_MAX];

	if (!ret)
		return 0;
	snprintf(text, sizeof(text), "%s failed: %s%s%s", what, ql_strerror(ret),
		 ql_error_detail()[0] ? ": " : "", ql_error_detail());
	error_msg(r, req, "refused", text);
	return ret;
}

static void end_session(struct ql_ctl_session *s, enum ql_ctl_state st)
{
	s->state = st;
	s->open = false;
}

/* Whether one of the QCS's endpoints (QP number and GID) is one this RTH
 * offered, in any open session. */
static bool owns_endpoint(struct ql_ctl_server *srv, const struct ql_conn_params *ch, uint32_t n)
{
	for (uint32_t i = 0; i < srv->max_sessions; i++) {
		const struct ql_ctl_session *o = &srv->sessions[i];

		if (!o->used)
			continue;
		for (uint32_t j = 0; j < o->nchannels; j++)
			for (uint32_t k = 0; k < n; k++)
				if (ch[k].qpn == o->offered[j].qpn &&
				    !memcmp(ch[k].gid.raw, o->offered[j].gid.raw,
					    sizeof(ch[k].gid.raw)))
					return true;
	}
	return false;
}

static void session_discover(struct ql_ctl_server *srv, const struct ql_ctl_msg *req,
			     const struct sockaddr_in *from, uint64_t now)
{
	struct ql_ctl_session *s = NULL;
	uint32_t channels = 0, mine = 0;
	const char *why = NULL;
	struct ql_ctl_msg r;
	int ret;

	for (uint32_t i = 0; i < srv->max_sessions; i++) {
		struct ql_ctl_session *o = &srv->sessions[i];

		if (!o->used) {
			if (!s)
				s = o;
			continue;
		}
		channels += o->nchannels;
		mine += o->peer.sin_addr.s_addr == from->sin_addr.s_addr;
	}
	/* Sessions and channels are limited separately, and per source, so that one
	 * QCS asking for everything leaves room for the others. */
	if (!s)
		why = "the server has no free session";
	else if (channels + req->nchannels > srv->max_channels)
		why = "the server has no free channel";
	else if (mine >= srv->max_per_source)
		why = "too many sessions from this address";
	if (!why) {
		ret = admit(srv, req->session, from, now);
		if (ret == -EALREADY) {
			STAT_INC(srv, replayed);
			STAT_INC(srv, rejected);
			reject_log(srv, from, "DISCOVER replayed (session %016llx seen before)",
				   (unsigned long long)req->session);
			return;
		}
		if (ret)
			why = "too many new sessions from this address";
	}
	if (why) {
		STAT_INC(srv, busy);
		STAT_INC(srv, rejected);
		reject_log(srv, from, "DISCOVER refused: %s", why);
		reply_error(srv, from, req, "busy", why);
		return;
	}
	s->used = true;
	s->created_ns = now;
	s->id = req->session;
	snprintf(s->name, sizeof(s->name), "%s", req->name);
	s->nchannels = req->nchannels;
	s->state = QL_CTL_S_NEW;
	s->peer = *from;
	peer_format(from, s->peer_str, sizeof(s->peer_str));
	s->last_seq = req->seq;
	s->last_rx_ns = now;

	memset(&r, 0, sizeof(r));
	r.type = QL_CTL_CONNECTION_PARAMS;
	r.session = s->id;
	r.seq = req->seq;
	r.proto = QL_CTL_PROTO;
	r.nchannels = s->nchannels;
	ql_error_clear();
	ret = srv->ops.offer(srv->ctx, s, s->nchannels, r.ch);
	if (op_result(&r, req, ret, "offer")) {
		STAT_INC(srv, refused);
		STAT_INC(srv, rejected);
		ql_log_warn("control", "DISCOVER from %s refused: %s", s->peer_str, r.text);
		/* Cached in the ended ring: the retransmitted DISCOVER gets the same answer
		 * (its session id is admitted, so it would otherwise count as a replay). */
		s->state = QL_CTL_S_ABORTED;
		s->reply_len = encode(srv, &r, s->reply);
		if (s->reply_len)
			send_dgram(srv, from, s->reply, s->reply_len);
		session_retire(s, now);
		return;
	}
	memcpy(s->offered, r.ch, s->nchannels * sizeof(r.ch[0]));
	s->state = QL_CTL_S_OFFERED;
	s->open = true;
	s->requests = 1;
	s->reply_len = encode(srv, &r, s->reply);
	if (!s->reply_len) {
		/* Parameters that do not encode are a bug of the embedding RTH: give them back. */
		end_session(s, QL_CTL_S_ABORTED);
		if (srv->ops.abort)
			srv->ops.abort(srv->ctx, s);
		reply_error(srv, from, req, "refused",
			    "connection parameters could not be encoded");
		session_retire(s, now);
		return;
	}
	STAT_INC(srv, sessions_total);
	ql_log_info("control", "session %016llx from %s (%s): %u channel(s) offered",
		    (unsigned long long)s->id, s->peer_str, s->name, s->nchannels);
	send_dgram(srv, from, s->reply, s->reply_len);
}

static bool same_peer(const struct sockaddr_in *a, const struct sockaddr_in *b)
{
	return a->sin_addr.s_addr == b->sin_addr.s_addr && a->sin_port == b->sin_port;
}

/* The QCS's answer to an RTH request. Never answered itself: an answer to
 * an answer could ping-pong between two confused peers. */
static void rth_answer(struct ql_ctl_server *srv, const struct ql_ctl_msg *m,
		       const struct sockaddr_in *from, uint64_t now)
{
	struct ql_ctl_session *s = session_find(srv, m->session);

	if (!s || !same_peer(&s->peer, from)) {
		STAT_INC(srv, unknown_session);
		STAT_INC(srv, rejected);
		reject_log(srv, from, "%s answer for unknown session %016llx",
			   ql_ctl_type_name(m->type), (unsigned long long)m->session);
		return;
	}
	s->last_rx_ns = now;
	if (!s->rq_pending || m->rseq != s->rseq) {
		/* The answer to a retransmission of a request already settled. */
		STAT_INC(srv, duplicates);
		return;
	}
	s->rq_pending = false;
	s->rq_result = 0;
	if (m->type == QL_CTL_ERROR) {
		s->rq_result = ql_ctl_error_errno(m->code);
		snprintf(s->rq_code, sizeof(s->rq_code), "%s", m->code);
		snprintf(s->rq_text, sizeof(s->rq_text), "%s", m->text);
	}
}

/* A datagram of a session that has ended (its slot already free). */
static void session_ended(struct ql_ctl_server *srv, struct ended *e, const struct ql_ctl_msg *req,
			  const struct sockaddr_in *from)
{
	char text[QL_CTL_TEXT_MAX];

	if (req->seq == e->last_seq) {
		STAT_INC(srv, duplicates);
		if (e->reply_len)
			send_dgram(srv, from, e->reply, e->reply_len);
		return;
	}
	if (req->seq < e->last_seq) {
		STAT_INC(srv, replayed);
		STAT_INC(srv, rejected);
		reject_log(srv, from, "%s seq %llu older than %llu (ended session %016llx)",
			   ql_ctl_type_name(req->type), (unsigned long long)req->seq,
			   (unsigned long long)e->last_seq, (unsigned long long)e->id);
		return;
	}
	e->last_seq = req->seq;
	STAT_INC(srv, bad_state);
	STAT_INC(srv, rejected);
	snprintf(text, sizeof(text), "%s is not valid in state %s", ql_ctl_type_name(req->type),
		 ql_ctl_state_name(e->state));
	reject_log(srv, from, "%s", text);
	/* Bound to the address its cookie validated: the answer may be cached and sent. */
	{
		struct ql_ctl_msg r;

		error_msg(&r, req, "bad_state", text);
		e->reply_len = encode(srv, &r, e->reply);
		if (e->reply_len)
			send_dgram(srv, from, e->reply, e->reply_len);
	}
}

/* ---- the request handlers: one per message type, and their table ---- */

/* What one request carries into its handler. */
struct ctl_in {
	const struct ql_ctl_msg *req;
	const struct sockaddr_in *from;
	uint64_t now;
	struct ql_ctl_session *s; /* CTL_AUTH_SESSION: the sender's session */
	struct ql_ctl_msg *r;	  /* CTL_AUTH_SESSION: the reply (OK, header filled) */
};

/* What a session handler returns besides the session's next state (>= 0). */
enum {
	CTL_REFUSED = -1, /* the RTH refused it: r holds the ERROR */
	CTL_REPLIED = -2, /* r holds the answer; the state does not move */
};

static int on_ack(struct ql_ctl_server *srv, struct ctl_in *in)
{
	const struct ql_ctl_server_ops *ops = &srv->ops;
	const struct ql_ctl_msg *req = in->req;
	struct ql_ctl_session *s = in->s;
	int ret;

	if (req->nchannels != s->nchannels) {
		error_msg(in->r, req, "malformed", "ACK must carry one entry per offered channel");
		STAT_INC(srv, malformed);
		STAT_INC(srv, rejected);
		return CTL_REPLIED;
	}
	if (owns_endpoint(srv, req->ch, req->nchannels)) {
		/* Connecting the RTH's QP to itself or to another of its own QPs
		 * would loop its ring into itself: refused, and the offer released. */
		STAT_INC(srv, self_connect);
		ret = ql_error_set(-EINVAL, "the ACK names an endpoint of this RTH");
	} else {
		ret = ops->accept ? ops->accept(srv->ctx, s, req->ch, req->nchannels) : 0;
	}
	if (op_result(in->r, req, ret, "accept")) {
		/* The offer reserved resources: release them through abort. */
		end_session(s, QL_CTL_S_ABORTED);
		if (ops->abort)
			ops->abort(srv->ctx, s);
		return CTL_REFUSED;
	}
	return QL_CTL_S_CONNECTED;
}

static int on_start(struct ql_ctl_server *srv, struct ctl_in *in)
{
	int ret = srv->ops.start ? srv->ops.start(srv->ctx, in->s) : 0;

	return op_result(in->r, in->req, ret, "start") ? CTL_REFUSED : QL_CTL_S_RUNNING;
}

static int on_stop(struct ql_ctl_server *srv, struct ctl_in *in)
{
	int ret = srv->ops.stop ? srv->ops.stop(srv->ctx, in->s) : 0;

	return op_result(in->r, in->req, ret, "stop") ? CTL_REFUSED : QL_CTL_S_STOPPED;
}

static int on_complete(struct ql_ctl_server *srv, struct ctl_in *in)
{
	int ret;

	end_session(in->s, QL_CTL_S_COMPLETE);
	ret = srv->ops.complete ? srv->ops.complete(srv->ctx, in->s) : 0;
	return op_result(in->r, in->req, ret, "complete") ? CTL_REFUSED : QL_CTL_S_COMPLETE;
}

static int on_abort(struct ql_ctl_server *srv, struct ctl_in *in)
{
	int ret;

	end_session(in->s, QL_CTL_S_ABORTED);
	ret = srv->ops.abort ? srv->ops.abort(srv->ctx, in->s) : 0;
	return op_result(in->r, in->req, ret, "abort") ? CTL_REFUSED : QL_CTL_S_ABORTED;
}

static int on_keepalive(struct ql_ctl_server *srv, struct ctl_in *in)
{
	(void)srv;
	return (int)in->s->state;
}

static int on_status(struct ql_ctl_server *srv, struct ctl_in *in)
{
	const struct ql_ctl_server_ops *ops = &srv->ops;
	struct ql_ctl_session *s = in->s;
	struct ql_ctl_msg *r = in->r;
	enum ql_ctl_state st = s->state;

	r->type = QL_CTL_STATUS_REPLY;
	r->re = QL_CTL_NONE;
	r->state = st;
	if (ops->status && st >= QL_CTL_S_CONNECTED && st <= QL_CTL_S_STOPPED) {
		int ret = ops->status(srv->ctx, s, r->status, sizeof(r->status));

		r->status[sizeof(r->status) - 1] = 0;
		if (op_result(r, in->req, ret, "status"))
			return CTL_REFUSED;
	} else {
		snprintf(r->status, sizeof(r->status), "{\"requests\":%llu}",
			 (unsigned long long)s->requests);
	}
	return CTL_REPLIED;
}

static int on_discover(struct ql_ctl_server *srv, struct ctl_in *in)
{
	session_discover(srv, in->req, in->from, in->now);
	return 0;
}

static int on_answer(struct ql_ctl_server *srv, struct ctl_in *in)
{
	rth_answer(srv, in->req, in->from, in->now);
	return 0;
}

/* Who may send a message type to the RTH, and what proves it. */
enum ctl_auth {
	CTL_AUTH_SESSION, /* a session open from the sender's address */
	CTL_AUTH_COOKIE,  /* opens a session: a cookie proves the address (DISCOVER) */
	CTL_AUTH_ANSWER,  /* the QCS's answer to an RTH request (rseq set); else SERVER */
	CTL_AUTH_SERVER,  /* sent by servers only: refused */
};

#define ST(x) (1u << QL_CTL_S_##x)
#define ST_OPEN (ST(OFFERED) | ST(CONNECTED) | ST(RUNNING) | ST(STOPPED))
#define ST_ANY ((1u << QL_CTL_S_COUNT) - 1)
_Static_assert(QL_CTL_S_COUNT <= 16, "the states column is 16 bits");

/* The table: type -> handler. min_len: datagram bytes at least (checked
 * once the sender is otherwise admissible); states: for CTL_AUTH_SESSION,
 * the session states the request is valid in (else bad_state). A type
 * without a row (NONE) is a session request valid in no state. */
static const struct ctl_handler {
	enum ctl_auth auth;
	uint16_t min_len;
	uint16_t states;
	int (*fn)(struct ql_ctl_server *srv, struct ctl_in *in);
} ctl_handlers[QL_CTL_TYPE_COUNT] = {
	[QL_CTL_DISCOVER] = { CTL_AUTH_COOKIE, QL_CTL_DISCOVER_MIN, 0, on_discover },
	[QL_CTL_CONNECTION_PARAMS] = { CTL_AUTH_SERVER, 0, 0, NULL },
	[QL_CTL_ACK] = { CTL_AUTH_SESSION, 0, ST(OFFERED), on_ack },
	[QL_CTL_START] = { CTL_AUTH_SESSION, 0, ST(CONNECTED) | ST(STOPPED), on_start },
	[QL_CTL_STOP] = { CTL_AUTH_SESSION, 0, ST(RUNNING), on_stop },
	[QL_CTL_ABORT] = { CTL_AUTH_SESSION, 0, ST_OPEN, on_abort },
	[QL_CTL_COMPLETE] = { CTL_AUTH_SESSION, 0, ST(CONNECTED) | ST(RUNNING) | ST(STOPPED),
			      on_complete },
	[QL_CTL_STATUS] = { CTL_AUTH_SESSION, 0, ST_ANY, on_status },
	[QL_CTL_STATUS_REPLY] = { CTL_AUTH_SERVER, 0, 0, NULL },
	[QL_CTL_KEEPALIVE] = { CTL_AUTH_SESSION, 0, ST_ANY, on_keepalive },
	[QL_CTL_OK] = { CTL_AUTH_ANSWER, 0, 0, on_answer },
	[QL_CTL_ERROR] = { CTL_AUTH_ANSWER, 0, 0, on_answer },
	[QL_CTL_PROGRAM] = { CTL_AUTH_SERVER, 0, 0, NULL },
	[QL_CTL_TRIGGER] = { CTL_AUTH_SERVER, 0, 0, NULL },
	[QL_CTL_RETRY] = { CTL_AUTH_SERVER, 0, 0, NULL },
};

static const struct ctl_handler *handler_of(enum ql_ctl_type t)
{
	static const struct ctl_handler none = { CTL_AUTH_SESSION, 0, 0, NULL };

	return (unsigned)t < QL_CTL_TYPE_COUNT ? &ctl_handlers[t] : &none;
}

/* Run one new request of an existing session; fills the reply. */
static void session_request(struct ql_ctl_server *srv, struct ql_ctl_session *s,
			    const struct ctl_handler *h, struct ctl_in *in)
{
	const struct ql_ctl_msg *req = in->req;
	struct ql_ctl_msg *r = in->r;
	enum ql_ctl_state st = s->state;
	int next;

	memset(r, 0, sizeof(*r));
	r->type = QL_CTL_OK;
	r->session = s->id;
	r->seq = req->seq;
	r->re = req->type;
	ql_error_clear();
	if (h->auth != CTL_AUTH_SESSION || !h->fn || (unsigned)st >= QL_CTL_S_COUNT ||
	    !(h->states & (1u << st))) {
		char text[QL_CTL_TEXT_MAX];

		STAT_INC(srv, bad_state);
		STAT_INC(srv, rejected);
		snprintf(text, sizeof(text), "%s is not valid in state %s",
			 ql_ctl_type_name(req->type), ql_ctl_state_name(st));
		error_msg(r, req, "bad_state", text);
		return;
	}
	next = h->fn(srv, in);
	if (next == CTL_REPLIED)
		return;
	if (next == CTL_REFUSED) {
		STAT_INC(srv, refused);
		STAT_INC(srv, rejected);
		ql_log_warn("control", "session %016llx (%s): %s", (unsigned long long)s->id,
			    s->peer_str, r->text);
		return;
	}
	s->state = (enum ql_ctl_state)next;
	r->state = (enum ql_ctl_state)next;
}

/* A datagram that did not parse: counted, logged and answered (bounded). */
static void reject_unparsed(struct ql_ctl_server *srv, const struct sockaddr_in *from,
			    struct ql_ctl_msg *req, int ret, size_t len, size_t real_len)
{
	const char *code, *text;

	if (real_len > len)
		memset(req, 0, sizeof(*req));
	switch (ret) {
	case -EMSGSIZE:
		STAT_INC(srv, too_big);
		code = "too_big";
		text = "datagram longer than 1400 bytes";
		break;
	case -EPROTONOSUPPORT:
		STAT_INC(srv, bad_version);
		STAT_INC(srv, rejected);
		reject_log(srv, from, "bad_version v=%u (%zu bytes)", req->version, real_len);
		reply_bad_version(srv, from, req);
		return;
	case -EOPNOTSUPP:
		STAT_INC(srv, bad_type);
		code = "bad_type";
		text = "unknown message type";
		break;
	case -EACCES:
		STAT_INC(srv, bad_mac);
		code = "bad_mac";
		text = "message authentication failed (MAC missing or wrong)";
		break;
	default:
		STAT_INC(srv, malformed);
		code = "malformed";
		text = "not a valid control message (JSON object with v, type, session, seq)";
		break;
	}
	STAT_INC(srv, rejected);
	reject_log(srv, from, "%s (%zu bytes)", code, real_len);
	reply_error(srv, from, req, code, text);
}

/* A request that opens a session (CTL_AUTH_COOKIE) from an address with none. */
static void session_open(struct ql_ctl_server *srv, const struct ctl_handler *h, struct ctl_in *in,
			 size_t len)
{
	const struct ql_ctl_msg *req = in->req;
	const struct sockaddr_in *from = in->from;

	if (session_find(srv, req->session)) {
		STAT_INC(srv, bad_state);
		STAT_INC(srv, rejected);
		reject_log(srv, from, "session id already in use from another address");
		reply_error(srv, from, req, "bad_state", "session id in use");
		return;
	}
	if (len < h->min_len) {
		char text[QL_CTL_TEXT_MAX];

		STAT_INC(srv, malformed);
		STAT_INC(srv, rejected);
		reject_log(srv, from, "%s of %zu bytes, not padded to %d",
			   ql_ctl_type_name(req->type), len, h->min_len);
		snprintf(text, sizeof(text), "%s must be padded to %d bytes",
			 ql_ctl_type_name(req->type), h->min_len);
		reply_error(srv, from, req, "malformed", text);
		return;
	}
	cookie_rotate(srv, in->now);
	if (!cookie_ok(srv, req, from)) {
		/* No state for an address not yet shown to be real. */
		if (req->cookie[0])
			STAT_INC(srv, bad_cookie);
		send_retry(srv, req, from);
		return;
	}
	h->fn(srv, in);
}

static void handle(struct ql_ctl_server *srv, const uint8_t *buf, size_t len, size_t real_len,
		   const struct sockaddr_in *from)
{
	uint64_t now = ql_ctl_now_ns();
	const struct ctl_handler *h;
	struct ql_ctl_session *s;
	struct ql_ctl_msg req, r;
	struct ctl_in in = { .req = &req, .from = from, .now = now, .r = &r };
	int ret;

	STAT_INC(srv, received);
	srv->req_len = real_len;
	if (!allowed(srv, from)) {
		/* Unanswered: a reply would tell a stranger that something listens here. */
		STAT_INC(srv, not_allowed);
		STAT_INC(srv, rejected);
		reject_log(srv, from, "source not in the allowlist");
		return;
	}
	if (real_len > len)
		ret = -EMSGSIZE;
	else if (len < 2 || buf[0] != '{')
		ret = -EBADMSG; /* garbage costs no JSON parse (flood: docs/benchmarks.md) */
	else
		ret = ql_ctl_parse(buf, len, srv->secret, srv->secret_len, &req);
	if (ret) {
		reject_unparsed(srv, from, &req, ret, len, real_len);
		return;
	}
	h = handler_of(req.type);
	if (h->auth == CTL_AUTH_ANSWER && req.rseq) {
		h->fn(srv, &in);
		return;
	}
	if (h->auth == CTL_AUTH_ANSWER || h->auth == CTL_AUTH_SERVER) {
		STAT_INC(srv, bad_type);
		STAT_INC(srv, rejected);
		reject_log(srv, from, "%s is sent by servers only", ql_ctl_type_name(req.type));
		reply_error(srv, from, &req, "bad_type",
			    "this message type is sent by servers only");
		return;
	}
	s = session_find(srv, req.session);
	if (s && !same_peer(&s->peer, from))
		s = NULL; /* a session is bound to the address that opened it */
	if (!s) {
		struct ended *e = ended_find(srv, req.session, from, now);

		if (e) {
			session_ended(srv, e, &req, from);
			return;
		}
		if (h->auth == CTL_AUTH_COOKIE) {
			session_open(srv, h, &in, len);
			return;
		}
		STAT_INC(srv, unknown_session);
		STAT_INC(srv, rejected);
		reject_log(srv, from, "%s for unknown session %016llx", ql_ctl_type_name(req.type),
			   (unsigned long long)req.session);
		reply_error(srv, from, &req, "unknown_session", "no such session on this server");
		return;
	}
	if (req.seq == s->last_seq) {
		/* A retransmission: same answer, no second side effect. */
		STAT_INC(srv, duplicates);
		s->last_rx_ns = now;
		if (s->reply_len)
			send_dgram(srv, from, s->reply, s->reply_len);
		return;
	}
	if (req.seq < s->last_seq) {
		/* Older than what was answered: a late copy or a replay. It does not count as a
		 * sign of life, so a replay cannot keep a dead session open. */
		STAT_INC(srv, replayed);
		STAT_INC(srv, rejected);
		reject_log(srv, from, "%s seq %llu older than %llu (session %016llx)",
			   ql_ctl_type_name(req.type), (unsigned long long)req.seq,
			   (unsigned long long)s->last_seq, (unsigned long long)s->id);
		return;
	}
	s->last_seq = req.seq;
	s->last_rx_ns = now;
	s->requests++;
	in.s = s;
	session_request(srv, s, h, &in);
	if (r.type == QL_CTL_ERROR && !strcmp(r.code, "bad_state"))
		reject_log(srv, from, "%s", r.text);
	s->reply_len = encode(srv, &r, s->reply);
	if (s->reply_len)
		send_dgram(srv, from, s->reply, s->reply_len);
	if (!s->open)
		session_retire(s, now);
}

/* Retransmit RTH requests that are due, with the client's back-off; give
 * up after the retries. Returns the next retransmission time. */
static uint64_t resend(struct ql_ctl_server *srv, uint64_t now)
{
	uint64_t next = UINT64_MAX;

	for (uint32_t i = 0; i < srv->max_sessions; i++) {
		struct ql_ctl_session *s = &srv->sessions[i];

		if (!s->used || !s->rq_pending)
			continue;
		if (now >= s->rq_next) {
			if (s->rq_tries > srv->rq_retries) {
				s->rq_pending = false;
				s->rq_result = -ETIMEDOUT;
				continue;
			}
			s->rq_tries++;
			s->rq_wait_ms = s->rq_wait_ms * 2 > srv->rq_timeout_ms * 8 ?
						srv->rq_timeout_ms * 8 :
						s->rq_wait_ms * 2;
			s->rq_next = now + (uint64_t)s->rq_wait_ms * 1000000ull;
			send_dgram(srv, &s->peer, s->rq, s->rq_len);
		}
		next = s->rq_next < next ? s->rq_next : next;
	}
	return next;
}

static uint64_t expire(struct ql_ctl_server *srv, uint64_t now)
{
	uint64_t next = resend(srv, now);

	for (uint32_t i = 0; i < srv->max_sessions; i++) {
		struct ql_ctl_session *s = &srv->sessions[i];
		/* An offer must be taken up (ACK) within the timeout: keepalives alone do
		 * not hold reserved channels. */
		uint64_t deadline = (s->state == QL_CTL_S_OFFERED ? s->created_ns : s->last_rx_ns) +
				    srv->timeout_ns;

		if (!s->used)
			continue;
		if (!s->open) {
			session_retire(s, now);
			continue;
		}
		if (now < deadline) {
			next = deadline < next ? deadline : next;
			continue;
		}
		if (s->open) {
			ql_log_warn("control",
				    "session %016llx from %s (%s) lost: silent for %llu ms",
				    (unsigned long long)s->id, s->peer_str, s->name,
				    (unsigned long long)(srv->timeout_ns / 1000000));
			end_session(s, QL_CTL_S_LOST);
			STAT_INC(srv, sessions_lost);
			if (srv->ops.lost)
				srv->ops.lost(srv->ctx, s);
		}
		session_free(s);
	}
	count_active(srv);
	return next;
}

void ql_ctl_server_set_sender(struct ql_ctl_server *srv, ql_ctl_sender_fn fn, void *ctx)
{
	srv->sender = fn;
	srv->sender_ctx = ctx;
}

void ql_ctl_server_input(struct ql_ctl_server *srv, const uint8_t *buf, size_t len,
			 const struct sockaddr_in *from)
{
	handle(srv, buf, len > QL_CTL_MAX_DGRAM + 64 ? QL_CTL_MAX_DGRAM + 64 : len, len, from);
	expire(srv, ql_ctl_now_ns());
}

int ql_ctl_server_poll(struct ql_ctl_server *srv, int timeout_ms)
{
	uint64_t now = ql_ctl_now_ns(), next = expire(srv, now);
	struct pollfd pfd = { .fd = srv->fd, .events = POLLIN };
	int handled = 0, ret;

	if (next != UINT64_MAX) {
		uint64_t ms = (next - now + 999999) / 1000000;

		if (timeout_ms < 0 || ms < (uint64_t)timeout_ms)
			timeout_ms = (int)ms;
	}
	ret = poll(&pfd, 1, timeout_ms);
	if (ret < 0 && errno != EINTR)
		return -errno;
	while (handled < RX_BURST) {
		/* A batch per system call: under a flood the syscalls, not the parsing, would
		 * dominate the cost of a rejected datagram. */
		int got = recvmmsg(srv->fd, srv->rx_msgs, RX_BATCH, MSG_DONTWAIT, NULL);

		if (got < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
				break;
			/* ICMP errors from earlier sends surface here; they are not ours to fail on. */
			if (errno == ECONNREFUSED || errno == EHOSTUNREACH || errno == ENETUNREACH)
				continue;
			return -errno;
		}
		for (int i = 0; i < got; i++) {
			struct mmsghdr *mh = &srv->rx_msgs[i];
			const struct sockaddr_in *from = &srv->rx_from[i];
			size_t n = mh->msg_len, cap = sizeof(srv->rx_buf[i]);

			handled++;
			/* MSG_TRUNC: longer than the buffer, so longer than allowed. */
			if (mh->msg_hdr.msg_flags & MSG_TRUNC)
				n = cap + 1;
			if (mh->msg_hdr.msg_namelen != sizeof(*from) || from->sin_family != AF_INET)
				continue;
			handle(srv, srv->rx_buf[i], n > cap ? cap : n, n, from);
		}
		for (int i = 0; i < got; i++) {
			srv->rx_msgs[i].msg_hdr.msg_namelen = sizeof(srv->rx_from[i]);
			srv->rx_msgs[i].msg_hdr.msg_flags = 0;
		}
		if (got < RX_BATCH)
			break;
	}
	expire(srv, ql_ctl_now_ns());
	return handled;
}

int ql_ctl_server_create(const struct ql_ctl_server_config *cfg,
			 const struct ql_ctl_server_ops *ops, void *ctx, struct ql_ctl_server **out)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t alen = sizeof(a);
	struct ql_ctl_server *srv;
	const char *bind_addr;
	int ret;

	if (!cfg || !ops || !ops->offer || !out)
		return ql_error_set(-EINVAL,
				    "control server: config, ops and ops->offer are required");
	if (cfg->secret_len && !cfg->secret)
		return ql_error_set(-EINVAL, "control server: secret_len set without a secret");
	if (sodium_init() < 0)
		return ql_error_set(-EIO, "control server: libsodium failed to initialize");
	srv = calloc(1, sizeof(*srv));
	if (!srv)
		return ql_error_set(-ENOMEM, "control server: out of memory");
	srv->fd = -1;
	srv->ops = *ops;
	srv->ctx = ctx;
	srv->max_sessions = cfg->max_sessions ? cfg->max_sessions : 16;
	srv->max_channels = cfg->max_channels ? cfg->max_channels : 2 * srv->max_sessions;
	srv->max_per_source = cfg->max_sessions_per_source ? cfg->max_sessions_per_source : 4;
	srv->timeout_ns =
		(uint64_t)(cfg->session_timeout_ms ? cfg->session_timeout_ms : 3000) * 1000000ull;
	srv->rq_timeout_ms = cfg->request_timeout_ms ? cfg->request_timeout_ms : 200;
	srv->rq_retries = cfg->request_retries ? cfg->request_retries : 5;
	srv->sessions = calloc(srv->max_sessions, sizeof(*srv->sessions));
	srv->nended = 2 * srv->max_sessions;
	srv->ended = calloc(srv->nended, sizeof(*srv->ended));
	srv->admitted = calloc(ADMIT_MAX, sizeof(*srv->admitted));
	ret = ql_error_set(-ENOMEM, "control server: out of memory");
	if (!srv->sessions || !srv->ended || !srv->admitted)
		goto fail;
	srv->cbucket = ql_ctl_now_ns() / COOKIE_NS;
	for (int i = 0; i < RX_BATCH; i++) {
		srv->rx_iov[i] = (struct iovec){ srv->rx_buf[i], sizeof(srv->rx_buf[i]) };
		srv->rx_msgs[i].msg_hdr = (struct msghdr){ .msg_name = &srv->rx_from[i],
							   .msg_namelen = sizeof(srv->rx_from[i]),
							   .msg_iov = &srv->rx_iov[i],
							   .msg_iovlen = 1 };
	}
	randombytes_buf(srv->ckey, sizeof(srv->ckey));
	for (uint32_t i = 0; i < srv->max_sessions; i++)
		srv->sessions[i].srv = srv;
	if (cfg->secret_len) {
		srv->secret = malloc(cfg->secret_len);
		if (!srv->secret)
			goto fail;
		memcpy(srv->secret, cfg->secret, cfg->secret_len);
		srv->secret_len = cfg->secret_len;
	}
	if (cfg->allow) {
		size_t n = 0;

		while (cfg->allow[n])
			n++;
		srv->allow = calloc(n ? n : 1, sizeof(*srv->allow));
		if (!srv->allow)
			goto fail;
		for (size_t i = 0; i < n; i++) {
			ret = parse_cidr(cfg->allow[i], &srv->allow[i]);
			if (ret) {
				ret = ql_error_set(ret,
						   "control server: allowlist entry '%s' is not "
						   "an IPv4 address or CIDR",
						   cfg->allow[i]);
				goto fail;
			}
		}
		srv->nallow = n;
	}
	bind_addr = cfg->bind_addr ? cfg->bind_addr : "0.0.0.0";
	if (inet_pton(AF_INET, bind_addr, &a.sin_addr) != 1) {
		ret = ql_error_set(-EINVAL,
				   "control server: bind address '%s' is not an IPv4 "
				   "address",
				   bind_addr);
		goto fail;
	}
	a.sin_port = htons(cfg->port);
	srv->fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (srv->fd < 0) {
		ret = ql_error_set(-errno, "control server: socket: %s", strerror(errno));
		goto fail;
	}
	/* No SO_REUSEADDR or SO_REUSEPORT: on UDP they let a second socket (another
	 * qlinkd, or another user's program) bind the same port and take datagrams. */
	if (bind(srv->fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		if (errno == EADDRINUSE)
			ret = ql_error_set(-EADDRINUSE,
					   "control port %u already in use on %s (another qlinkd, "
					   "or another program, is bound to it)",
					   cfg->port, bind_addr);
		else
			ret = ql_error_set(-errno, "control server: cannot bind %s:%u: %s",
					   bind_addr, cfg->port, strerror(errno));
		goto fail;
	}
	getsockname(srv->fd, (struct sockaddr *)&a, &alen);
	srv->port = ntohs(a.sin_port);
	srv->log_window_ns = ql_ctl_now_ns();
	*out = srv;
	return 0;
fail:
	if (srv->fd >= 0)
		close(srv->fd);
	free(srv->allow);
	if (srv->secret)
		sodium_memzero(srv->secret, srv->secret_len);
	free(srv->secret);
	free(srv->sessions);
	free(srv->ended);
	free(srv->admitted);
	sodium_memzero(srv->ckey, sizeof(srv->ckey));
	free(srv);
	return ret;
}

void ql_ctl_server_destroy(struct ql_ctl_server *srv)
{
	if (!srv)
		return;
	for (uint32_t i = 0; i < srv->max_sessions; i++) {
		struct ql_ctl_session *s = &srv->sessions[i];
		uint8_t buf[QL_CTL_MAX_DGRAM];
		struct ql_ctl_msg m;
		size_t n;

		if (!s->used || !s->open)
			continue;
		/* Tell the QCS rather than let it find out by timeouts. */
		memset(&m, 0, sizeof(m));
		m.type = QL_CTL_ABORT;
		m.session = s->id;
		m.seq = 0;
		snprintf(m.text, sizeof(m.text), "server shutdown");
		n = encode(srv, &m, buf);
		if (n)
			send_dgram(srv, &s->peer, buf, n);
		end_session(s, QL_CTL_S_ABORTED);
		if (srv->ops.abort)
			srv->ops.abort(srv->ctx, s);
	}
	close(srv->fd);
	free(srv->allow);
	if (srv->secret)
		sodium_memzero(srv->secret, srv->secret_len);
	free(srv->secret);
	free(srv->sessions);
	free(srv->ended);
	free(srv->admitted);
	sodium_memzero(srv->ckey, sizeof(srv->ckey));
	free(srv);
}

int ql_ctl_server_request(struct ql_ctl_server *srv, uint64_t session, const struct ql_ctl_msg *m,
			  int timeout_ms)
{
	uint64_t now = ql_ctl_now_ns(),
		 deadline = now + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ull;
	const char *what = ql_ctl_type_name(m->type);
	struct ql_ctl_session *s = session_find(srv, session);
	struct ql_ctl_msg r;
	int ret;

	if (m->type != QL_CTL_PROGRAM && m->type != QL_CTL_TRIGGER && m->type != QL_CTL_ABORT)
		return ql_error_set(-EINVAL, "control: %s is not a request the RTH sends", what);
	if (!s || !s->open)
		return ql_error_set(-ENOTCONN, "control: %s: no open session %016llx", what,
				    (unsigned long long)session);
	if (m->type != QL_CTL_ABORT && s->state == QL_CTL_S_OFFERED)
		return ql_error_set(-EPROTO, "control: %s before the QCS's ACK", what);
	if (s->rq_pending)
		return ql_error_set(-EBUSY, "control: %s: session %016llx has a request in flight",
				    what, (unsigned long long)session);
	r = *m;
	r.session = session;
	r.seq = 0;
	r.rseq = ++s->rseq;
	s->rq_len = encode(srv, &r, s->rq);
	if (!s->rq_len)
		return ql_error_set(-EINVAL, "control: %s could not be encoded", what);
	s->rq_type = m->type;
	s->rq_pending = true;
	s->rq_tries = 0;
	s->rq_wait_ms = srv->rq_timeout_ms;
	s->rq_next = now + (uint64_t)s->rq_wait_ms * 1000000ull;
	send_dgram(srv, &s->peer, s->rq, s->rq_len);
	for (;;) {
		now = ql_ctl_now_ns();
		/* The slot is reused once a lost session is forgotten: check it is still ours. */
		if (!s->used || s->id != session)
			return ql_error_set(-ENOTCONN, "control: %s: session %016llx ended", what,
					    (unsigned long long)session);
		if (!s->rq_pending || now >= deadline)
			break;
		ret = ql_ctl_server_poll(srv, (int)((deadline - now + 999999) / 1000000));
		if (ret < 0)
			return ret;
	}
	if (s->rq_pending) {
		s->rq_pending = false;
		s->rq_result = -ETIMEDOUT;
	}
	ret = s->rq_result;
	if (m->type == QL_CTL_ABORT && s->open) {
		/* The RTH has given up whatever the QCS said: release the channels now. */
		end_session(s, QL_CTL_S_ABORTED);
		if (srv->ops.abort)
			srv->ops.abort(srv->ctx, s);
		count_active(srv);
	}
	if (ret == -ETIMEDOUT)
		return ql_error_set(ret, "control: no answer to %s from %s (%s)", what, s->peer_str,
				    s->name);
	if (ret)
		return ql_error_set(ret, "qcs: %s: %s", s->rq_code, s->rq_text);
	return 0;
}

int ql_ctl_server_fd(const struct ql_ctl_server *srv)
{
	return srv->fd;
}

uint16_t ql_ctl_server_port(const struct ql_ctl_server *srv)
{
	return srv->port;
}

void ql_ctl_server_stats(const struct ql_ctl_server *srv, struct ql_ctl_stats *st)
{
	const uint64_t *src = (const uint64_t *)&srv->st;
	uint64_t *dst = (uint64_t *)st;

	for (size_t i = 0; i < sizeof(*st) / sizeof(uint64_t); i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
}

uint64_t ql_ctl_session_id(const struct ql_ctl_session *s)
{
	return s->id;
}

const char *ql_ctl_session_name(const struct ql_ctl_session *s)
{
	return s->name;
}

uint32_t ql_ctl_session_nchannels(const struct ql_ctl_session *s)
{
	return s->nchannels;
}

enum ql_ctl_state ql_ctl_session_state(const struct ql_ctl_session *s)
{
	return s->state;
}

const char *ql_ctl_session_peer(const struct ql_ctl_session *s)
{
	return s->peer_str;
}

void ql_ctl_session_set_data(struct ql_ctl_session *s, void *data)
{
	s->data = data;
}

void *ql_ctl_session_data(const struct ql_ctl_session *s)
{
	return s->data;
}
