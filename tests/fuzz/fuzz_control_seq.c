/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the control server's state machine: one input is a
 * sequence of datagrams from a few source addresses, fed to a fresh server
 * through its internal input hook (no socket traffic), answers captured.
 * Besides raw bytes the input can ask for well-formed DISCOVER (echoing the
 * cookie of the last RETRY that source got), ACK (possibly naming the RTH's
 * own endpoints), START, STOP, COMPLETE, ABORT, STATUS and KEEPALIVE with
 * chosen, repeated or older seqs, with or without the shared secret.
 *
 * Invariants checked after every datagram (abort() on violation):
 *  - open sessions <= max_sessions, channels <= max_channels, per source
 *    <= max_sessions_per_source (from the server's counters and from the
 *    callbacks' own tally);
 *  - no answer to a source that has never had a session is larger than the
 *    datagram that provoked it (no amplification), and none exceeds
 *    QL_CTL_MAX_DGRAM;
 *  - no ACK naming an endpoint of an open session of the RTH reaches `accept`;
 *  - on destroy, every offered session has ended exactly once.
 *
 * Input format: byte 0 selects the config (bit 0: secret); then records of
 * [op][src][arg][len?][bytes...] until the input runs out.
 */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/control/server_internal.h"
#include "qlink/control.h"
#include "qlink/error.h"
#include "qlink/log.h"

#define NSRC 4
#define MAX_SESSIONS 4
#define MAX_CHANNELS 6
#define PER_SOURCE 2

static const uint8_t key[] = "qlink-test-secret";

struct src {
	struct sockaddr_in addr;
	char peer[32];
	char cookie[QL_CTL_COOKIE_HEX + 1];
	uint64_t session;
	uint64_t seq;
	bool validated; /* had a session: answers may be larger than requests */
	int open;	/* its open sessions, by the callbacks */
	struct ql_conn_params rth[QL_CTL_MAX_CHANNELS];
	uint32_t nrth;
};

struct fz {
	struct src src[NSRC];
	bool secret;
	size_t req_len;
	int cur; /* source being served */
	int open, channels;
	int offers, ends;
	uint32_t next_qpn;
	struct ql_conn_params offered[64];
	uint64_t owner[64]; /* session id of each offer; 0 once that session ended */
	int noffered;
};

static struct fz fz;

static struct src *src_of(struct ql_ctl_session *s)
{
	for (int i = 0; i < NSRC; i++)
		if (!strcmp(fz.src[i].peer, ql_ctl_session_peer(s)))
			return &fz.src[i];
	abort(); /* a session from an address that never sent anything */
}

static int op_offer(void *ctx, struct ql_ctl_session *s, uint32_t n, struct ql_conn_params *out)
{
	src_of(s)->validated = true;
	for (uint32_t i = 0; i < n; i++) {
		memset(&out[i], 0, sizeof(out[i]));
		out[i].qpn = ++fz.next_qpn;
		inet_pton(AF_INET6, "fd71::1", out[i].gid.raw);
		out[i].mtu = IBV_MTU_4096;
		out[i].length = 4096;
		out[i].num_slots = 16;
		out[i].slot_size = 256;
		if (fz.noffered < 64) {
			fz.owner[fz.noffered] = ql_ctl_session_id(s);
			fz.offered[fz.noffered++] = out[i];
		}
	}
	fz.offers++;
	fz.open++;
	/* sources 0 and 1 share an address: the per-source limit is per address */
	if (++src_of(s)->open > PER_SOURCE || fz.src[0].open + fz.src[1].open > PER_SOURCE)
		abort();
	fz.channels += (int)n;
	ql_ctl_session_set_data(s, (void *)(uintptr_t)n);
	return 0;
}

static int op_accept(void *ctx, struct ql_ctl_session *s, const struct ql_conn_params *c,
		     uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		for (int k = 0; k < fz.noffered; k++)
			if (fz.owner[k] && c[i].qpn == fz.offered[k].qpn &&
			    !memcmp(c[i].gid.raw, fz.offered[k].gid.raw, 16))
				abort(); /* self-connect reached accept */
	return c[0].qpn == 0xdead ? ql_error_set(-EINVAL, "no") : 0;
}

static void ended(struct ql_ctl_session *s)
{
	for (int k = 0; k < fz.noffered; k++)
		if (fz.owner[k] == ql_ctl_session_id(s))
			fz.owner[k] = 0;
	fz.ends++;
	fz.open--;
	src_of(s)->open--;
	fz.channels -= (int)(uintptr_t)ql_ctl_session_data(s);
}

static int op_end(void *ctx, struct ql_ctl_session *s)
{
	ended(s);
	return 0;
}

static void op_lost(void *ctx, struct ql_ctl_session *s)
{
	ended(s);
}

static int op_ok(void *ctx, struct ql_ctl_session *s)
{
	return 0;
}

static const struct ql_ctl_server_ops ops = {
	.offer = op_offer,
	.accept = op_accept,
	.start = op_ok,
	.stop = op_ok,
	.abort = op_end,
	.complete = op_end,
	.lost = op_lost,
};

static ssize_t sender(void *ctx, const struct sockaddr_in *to, const uint8_t *buf, size_t len)
{
	struct ql_ctl_msg m;
	struct src *s = NULL;

	for (int i = 0; i < NSRC; i++)
		if (fz.src[i].addr.sin_addr.s_addr == to->sin_addr.s_addr &&
		    fz.src[i].addr.sin_port == to->sin_port)
			s = &fz.src[i];
	if (!s || len > QL_CTL_MAX_DGRAM)
		abort();
	if (!s->validated && len > fz.req_len)
		abort(); /* amplification towards an unvalidated source */
	if (ql_ctl_parse(buf, len, fz.secret ? key : NULL, fz.secret ? sizeof(key) - 1 : 0, &m))
		abort(); /* the server must send what it parses */
	if (m.type == QL_CTL_RETRY)
		memcpy(s->cookie, m.cookie, sizeof(s->cookie));
	if (m.type == QL_CTL_CONNECTION_PARAMS) {
		s->nrth = m.nchannels;
		memcpy(s->rth, m.ch, sizeof(m.ch));
	}
	return (ssize_t)len;
}

static size_t take(const uint8_t **p, size_t *n, size_t want, const uint8_t **out)
{
	size_t k = want < *n ? want : *n;

	*out = *p;
	*p += k;
	*n -= k;
	return k;
}

static uint8_t byte(const uint8_t **p, size_t *n)
{
	uint8_t b = 0;

	if (*n) {
		b = **p;
		(*p)++;
		(*n)--;
	}
	return b;
}

static void check(struct ql_ctl_server *srv)
{
	struct ql_ctl_stats st;

	ql_ctl_server_stats(srv, &st);
	if (st.sessions_active > MAX_SESSIONS || st.channels_active > MAX_CHANNELS || fz.open < 0 ||
	    fz.open > MAX_SESSIONS || fz.channels > MAX_CHANNELS ||
	    (uint64_t)fz.open != st.sessions_active || (uint64_t)fz.channels != st.channels_active)
		abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	ql_log_set_level(QL_LOG_ERROR);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const addrs[NSRC] = { "127.0.0.1", "127.0.0.1", "127.0.0.2",
						 "10.9.8.7" };
	struct ql_ctl_server_config cfg = {
		.bind_addr = "127.0.0.1",
		.max_sessions = MAX_SESSIONS,
		.max_channels = MAX_CHANNELS,
		.max_sessions_per_source = PER_SOURCE,
	};
	struct ql_ctl_server *srv;
	const uint8_t *p = data;
	size_t n = size;

	memset(&fz, 0, sizeof(fz));
	fz.secret = byte(&p, &n) & 1;
	if (fz.secret) {
		cfg.secret = key;
		cfg.secret_len = sizeof(key) - 1;
	}
	for (int i = 0; i < NSRC; i++) {
		fz.src[i].addr.sin_family = AF_INET;
		inet_pton(AF_INET, addrs[i], &fz.src[i].addr.sin_addr);
		fz.src[i].addr.sin_port = htons((uint16_t)(4000 + i));
		snprintf(fz.src[i].peer, sizeof(fz.src[i].peer), "%s:%d", addrs[i], 4000 + i);
		fz.src[i].session = 0x1000 + (uint64_t)i;
	}
	if (ql_ctl_server_create(&cfg, &ops, NULL, &srv))
		return 0;
	ql_ctl_server_set_sender(srv, sender, NULL);
	while (n) {
		uint8_t op = byte(&p, &n), arg;
		struct src *s = &fz.src[byte(&p, &n) % NSRC];
		uint8_t buf[QL_CTL_MAX_DGRAM + 64];
		const uint8_t *raw;
		struct ql_ctl_msg m;
		size_t len = 0;
		int k;

		arg = byte(&p, &n);
		memset(&m, 0, sizeof(m));
		m.session = s->session;
		m.pad_to = QL_CTL_REQUEST_PAD;
		/* seq: the next one, the same again, or an older one */
		m.seq = arg % 4 == 0 && s->seq	   ? s->seq :
			arg % 4 == 1 && s->seq > 1 ? s->seq - 1 :
						     ++s->seq;
		switch (op % 10) {
		case 0: /* raw bytes */
			len = take(&p, &n, (size_t)arg * 6, &raw);
			memcpy(buf, raw, len);
			break;
		case 1: /* DISCOVER, with the cookie this source was given if any */
			m.type = QL_CTL_DISCOVER;
			m.nchannels = (uint32_t)(arg % QL_CTL_MAX_CHANNELS) + 1;
			snprintf(m.name, sizeof(m.name), "q%d", arg);
			if (arg & 0x80)
				memcpy(m.cookie, s->cookie, sizeof(m.cookie));
			if (arg & 0x40) {
				s->session = 0x1000 + (uint64_t)arg;
				m.session = s->session;
				s->seq = m.seq = 1;
			}
			break;
		case 2: /* ACK: the QCS's QPs, or the RTH's own */
			m.type = QL_CTL_ACK;
			m.nchannels = s->nrth ? s->nrth : 1;
			for (uint32_t i = 0; i < m.nchannels; i++) {
				if (arg & 1 && s->nrth)
					m.ch[i] = s->rth[i];
				else if (arg & 2 && fz.noffered)
					m.ch[i] = fz.offered[arg % fz.noffered];
				else {
					m.ch[i].qpn = 0x9000 + arg;
					inet_pton(AF_INET6, "fd71::2", m.ch[i].gid.raw);
					m.ch[i].mtu = IBV_MTU_1024;
				}
			}
			break;
		case 3:
			m.type = QL_CTL_START;
			break;
		case 4:
			m.type = QL_CTL_STOP;
			break;
		case 5:
			m.type = QL_CTL_COMPLETE;
			break;
		case 6:
			m.type = QL_CTL_ABORT;
			break;
		case 7:
			m.type = QL_CTL_STATUS;
			break;
		case 8:
			m.type = QL_CTL_KEEPALIVE;
			break;
		default: /* an answer to an RTH request the RTH never sent */
			m.type = arg & 1 ? QL_CTL_OK : QL_CTL_ERROR;
			m.rseq = arg;
			m.seq = 0;
			m.re = QL_CTL_TRIGGER;
			m.state = QL_CTL_S_RUNNING;
			strcpy(m.code, "refused");
			break;
		}
		if (m.type) {
			bool mac = fz.secret && !(arg == 0x33);

			k = ql_ctl_format(&m, mac ? key : NULL, mac ? sizeof(key) - 1 : 0, buf,
					  sizeof(buf));
			if (k <= 0)
				continue;
			len = (size_t)k;
		}
		fz.req_len = len;
		fz.cur = (int)(s - fz.src);
		ql_ctl_server_input(srv, buf, len, &s->addr);
		check(srv);
	}
	ql_ctl_server_destroy(srv);
	if (fz.open != 0 || fz.offers != fz.ends)
		abort();
	return 0;
}
