/* SPDX-License-Identifier: MIT */
/*
 * Control-plane messages: the JSON encoding of struct ql_ctl_msg and its
 * HMAC line. One parser serves the server, the client and the fuzzer, so it
 * must be total: every length and every byte value gives a clean error.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qlink/control.h"

static const char *const type_names[QL_CTL_TYPE_COUNT] = {
	[QL_CTL_NONE] = "?",
	[QL_CTL_DISCOVER] = "DISCOVER",
	[QL_CTL_CONNECTION_PARAMS] = "CONNECTION_PARAMS",
	[QL_CTL_ACK] = "ACK",
	[QL_CTL_START] = "START",
	[QL_CTL_STOP] = "STOP",
	[QL_CTL_ABORT] = "ABORT",
	[QL_CTL_COMPLETE] = "COMPLETE",
	[QL_CTL_STATUS] = "STATUS",
	[QL_CTL_STATUS_REPLY] = "STATUS_REPLY",
	[QL_CTL_KEEPALIVE] = "KEEPALIVE",
	[QL_CTL_OK] = "OK",
	[QL_CTL_ERROR] = "ERROR",
	[QL_CTL_PROGRAM] = "PROGRAM",
	[QL_CTL_TRIGGER] = "TRIGGER",
	[QL_CTL_RETRY] = "RETRY",
};

static const char *const state_names[QL_CTL_S_COUNT] = {
	"NEW", "OFFERED", "CONNECTED", "RUNNING", "STOPPED", "ABORTED", "COMPLETE", "LOST",
};

const char *ql_ctl_type_name(enum ql_ctl_type t)
{
	return ((unsigned)t < QL_CTL_TYPE_COUNT) ? type_names[t] : "?";
}

enum ql_ctl_type ql_ctl_type_from_name(const char *name)
{
	for (int t = QL_CTL_DISCOVER; t < QL_CTL_TYPE_COUNT; t++)
		if (!strcmp(name, type_names[t]))
			return (enum ql_ctl_type)t;
	return QL_CTL_NONE;
}

const char *ql_ctl_state_name(enum ql_ctl_state s)
{
	return ((unsigned)s < QL_CTL_S_COUNT) ? state_names[s] : "?";
}

int ql_ctl_error_errno(const char *code)
{
	static const struct {
		const char *code;
		int err;
	} map[] = {
		{ "malformed", -EBADMSG },
		{ "too_big", -EMSGSIZE },
		{ "bad_version", -EPROTONOSUPPORT },
		{ "bad_type", -EOPNOTSUPP },
		{ "bad_mac", -EACCES },
		{ "unknown_session", -ENOTCONN },
		{ "bad_state", -EPROTO },
		{ "busy", -EBUSY },
		{ "refused", -ECONNREFUSED },
	};

	for (size_t i = 0; code && i < sizeof(map) / sizeof(map[0]); i++)
		if (!strcmp(code, map[i].code))
			return map[i].err;
	return -EIO;
}

static enum ql_ctl_state state_from_name(const char *name)
{
	for (int s = 0; s < QL_CTL_S_COUNT; s++)
		if (!strcmp(name, state_names[s]))
			return (enum ql_ctl_state)s;
	return QL_CTL_S_COUNT;
}

/* ---- MAC ---------------------------------------------------------------- */

static void mac_compute(const uint8_t *secret, size_t secret_len, const uint8_t *data, size_t len,
			uint8_t out[crypto_auth_hmacsha256_BYTES])
{
	crypto_auth_hmacsha256_state st;

	crypto_auth_hmacsha256_init(&st, secret, secret_len);
	crypto_auth_hmacsha256_update(&st, data, len);
	crypto_auth_hmacsha256_final(&st, out);
	sodium_memzero(&st, sizeof(st));
}

static void mac_hex(const uint8_t mac[crypto_auth_hmacsha256_BYTES], uint8_t out[QL_CTL_MAC_HEX])
{
	static const char hx[] = "0123456789abcdef";

	for (size_t i = 0; i < crypto_auth_hmacsha256_BYTES; i++) {
		out[2 * i] = (uint8_t)hx[mac[i] >> 4];
		out[2 * i + 1] = (uint8_t)hx[mac[i] & 15];
	}
}

static int hexval(uint8_t c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* The MAC line, if the datagram ends in "\n" + 64 hex digits. */
static const uint8_t *mac_line(const uint8_t *d, size_t len)
{
	if (len < QL_CTL_MAC_HEX + 1 || d[len - QL_CTL_MAC_HEX - 1] != '\n')
		return NULL;
	for (size_t i = len - QL_CTL_MAC_HEX; i < len; i++)
		if (hexval(d[i]) < 0)
			return NULL;
	return d + len - QL_CTL_MAC_HEX;
}

/* ---- field readers ------------------------------------------------------ */

static int get_u64(json_t *o, const char *key, bool required, uint64_t max, uint64_t *out)
{
	json_t *v = json_object_get(o, key);

	if (!v)
		return required ? -EBADMSG : 0;
	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    (uint64_t)json_integer_value(v) > max)
		return -EBADMSG;
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

static int get_u32(json_t *o, const char *key, bool required, uint32_t *out)
{
	uint64_t v = 0;
	int ret = get_u64(o, key, required, UINT32_MAX, &v);

	if (!ret && json_object_get(o, key))
		*out = (uint32_t)v;
	return ret;
}

/* 64-bit values travel as "0x..." strings: JSON numbers lose precision above 2^53 in many
 * peers (JavaScript, Python's json with floats), and addresses use all 64 bits. */
static int parse_hex64(const char *s, size_t n, uint64_t *out)
{
	uint64_t v = 0;

	if (n < 1 || n > 16)
		return -EBADMSG;
	for (size_t i = 0; i < n; i++) {
		int h = hexval((uint8_t)s[i]);

		if (h < 0)
			return -EBADMSG;
		v = v << 4 | (uint64_t)h;
	}
	*out = v;
	return 0;
}

static int get_hex64(json_t *o, const char *key, bool required, bool prefix, uint64_t *out)
{
	json_t *v = json_object_get(o, key);
	const char *s;
	size_t n;

	if (!v)
		return required ? -EBADMSG : 0;
	if (!json_is_string(v))
		return -EBADMSG;
	s = json_string_value(v);
	n = json_string_length(v);
	if (prefix) {
		if (n < 2 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X'))
			return -EBADMSG;
		s += 2;
		n -= 2;
	}
	return parse_hex64(s, n, out);
}

static int get_str(json_t *o, const char *key, bool required, char *out, size_t cap)
{
	json_t *v = json_object_get(o, key);
	size_t n;

	if (!v)
		return required ? -EBADMSG : 0;
	if (!json_is_string(v))
		return -EBADMSG;
	n = json_string_length(v);
	if (n >= cap || memchr(json_string_value(v), 0, n))
		return -EBADMSG;
	memcpy(out, json_string_value(v), n + 1);
	return 0;
}

/* ERROR "versions": an optional array of at most 31 integers 1..31, as a bit set. */
static int get_versions(json_t *o, uint32_t *out)
{
	json_t *a = json_object_get(o, "versions"), *e;
	size_t i;

	*out = 0;
	if (!a)
		return 0;
	if (!json_is_array(a) || json_array_size(a) > 31)
		return -EBADMSG;
	json_array_foreach(a, i, e)
	{
		if (!json_is_integer(e) || json_integer_value(e) < 1 || json_integer_value(e) > 31)
			return -EBADMSG;
		*out |= 1u << json_integer_value(e);
	}
	return 0;
}

static int get_params(json_t *o, struct ql_conn_params *p)
{
	char gid[INET6_ADDRSTRLEN];
	uint32_t mtu = 0;
	int ret = 0;

	if (!json_is_object(o))
		return -EBADMSG;
	memset(p, 0, sizeof(*p));
	ret |= get_u32(o, "qpn", true, &p->qpn);
	ret |= get_u32(o, "psn", false, &p->psn);
	ret |= get_str(o, "gid", true, gid, sizeof(gid));
	ret |= get_u32(o, "mtu", false, &mtu);
	ret |= get_hex64(o, "vaddr", false, true, &p->vaddr);
	ret |= get_u32(o, "rkey", false, &p->rkey);
	ret |= get_hex64(o, "length", false, true, &p->length);
	ret |= get_u32(o, "num_slots", false, &p->num_slots);
	ret |= get_u32(o, "slot_size", false, &p->slot_size);
	{
		/* the ring's QP type; absent: RC (older RTHs) */
		char qt[4] = "rc";

		ret |= get_str(o, "qp_type", false, qt, sizeof(qt));
		if (!strcmp(qt, "uc"))
			p->qp_type = IBV_QPT_UC;
		else if (strcmp(qt, "rc"))
			ret = -EBADMSG;
	}
	ret |= get_u32(o, "frame_len", false, &p->frame_len); /* hsb transport */
	ret |= get_u32(o, "resp_size", false, &p->resp_size);
	if (ret)
		return -EBADMSG;
	if (inet_pton(AF_INET6, gid, p->gid.raw) != 1)
		return -EBADMSG;
	p->mtu = IBV_MTU_4096;
	if (mtu) {
		int m;

		for (m = IBV_MTU_256; m <= IBV_MTU_4096; m++)
			if ((uint32_t)(128 << m) == mtu)
				break;
		if (m > IBV_MTU_4096)
			return -EBADMSG;
		p->mtu = (enum ibv_mtu)m;
	}
	return 0;
}

static int get_channels(json_t *o, struct ql_ctl_msg *m)
{
	json_t *a = json_object_get(o, "channels");
	size_t n = json_array_size(a);

	if (!json_is_array(a) || n < 1 || n > QL_CTL_MAX_CHANNELS)
		return -EBADMSG;
	for (size_t i = 0; i < n; i++)
		if (get_params(json_array_get(a, i), &m->ch[i]))
			return -EBADMSG;
	m->nchannels = (uint32_t)n;
	return 0;
}

/* PROGRAM: the chunk must lie inside the program, and a program is at most
 * QL_CTL_PROGRAM_MAX bytes, so a receiver can size its buffer from "total". */
static int get_chunk(json_t *o, struct ql_ctl_msg *m)
{
	json_t *d = json_object_get(o, "data");
	const char *end = NULL;
	size_t n = 0;

	if (get_u32(o, "offset", true, &m->offset) || get_u32(o, "total", true, &m->total) ||
	    !json_is_string(d))
		return -EBADMSG;
	if (sodium_base642bin(m->data, sizeof(m->data), json_string_value(d), json_string_length(d),
			      NULL, &n, &end, sodium_base64_VARIANT_ORIGINAL) ||
	    end != json_string_value(d) + json_string_length(d))
		return -EBADMSG;
	m->data_len = (uint32_t)n;
	if (!m->data_len || !m->total || m->total > QL_CTL_PROGRAM_MAX ||
	    m->offset > m->total - m->data_len)
		return -EBADMSG;
	return 0;
}

#define NAME_CHARS "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:@-"

/* "cookie": exactly QL_CTL_COOKIE_HEX lowercase hex digits. */
static int get_cookie(json_t *o, bool required, struct ql_ctl_msg *m)
{
	int ret = get_str(o, "cookie", required, m->cookie, sizeof(m->cookie));

	if (ret || !m->cookie[0])
		return ret ? ret : (required ? -EBADMSG : 0);
	if (strlen(m->cookie) != QL_CTL_COOKIE_HEX ||
	    strspn(m->cookie, "0123456789abcdef") != QL_CTL_COOKIE_HEX)
		return -EBADMSG;
	return 0;
}

static int parse_body(json_t *o, struct ql_ctl_msg *m)
{
	char name[QL_CTL_CODE_MAX] = "";
	json_t *c;
	char *s;

	switch (m->type) {
	case QL_CTL_DISCOVER:
		m->nchannels = 1;
		if (get_str(o, "name", false, m->name, sizeof(m->name)) ||
		    get_u32(o, "channels", false, &m->nchannels) || get_cookie(o, false, m))
			return -EBADMSG;
		if (m->nchannels < 1 || m->nchannels > QL_CTL_MAX_CHANNELS)
			return -EBADMSG;
		/* The name ends up in logs: a restricted alphabet forges no lines or keys. */
		if (strspn(m->name, NAME_CHARS) != strlen(m->name))
			return -EBADMSG;
		return 0;
	case QL_CTL_RETRY:
		return get_cookie(o, true, m);
	case QL_CTL_CONNECTION_PARAMS:
		if (get_u32(o, "proto", true, &m->proto))
			return -EBADMSG;
		return get_channels(o, m);
	case QL_CTL_ACK:
		return get_channels(o, m);
	case QL_CTL_ABORT:
		return get_str(o, "reason", false, m->text, sizeof(m->text));
	case QL_CTL_PROGRAM:
		return get_chunk(o, m);
	case QL_CTL_OK:
		if (get_str(o, "re", true, name, sizeof(name)))
			return -EBADMSG;
		m->re = ql_ctl_type_from_name(name);
		if (get_str(o, "state", true, name, sizeof(name)))
			return -EBADMSG;
		m->state = state_from_name(name);
		if (m->re == QL_CTL_NONE || m->state == QL_CTL_S_COUNT)
			return -EBADMSG;
		return 0;
	case QL_CTL_ERROR:
		if (get_str(o, "code", true, m->code, sizeof(m->code)) ||
		    get_str(o, "message", false, m->text, sizeof(m->text)) ||
		    get_versions(o, &m->versions))
			return -EBADMSG;
		return 0;
	case QL_CTL_STATUS_REPLY:
		if (get_str(o, "state", true, name, sizeof(name)))
			return -EBADMSG;
		m->state = state_from_name(name);
		c = json_object_get(o, "counters");
		if (m->state == QL_CTL_S_COUNT || !json_is_object(c))
			return -EBADMSG;
		s = json_dumps(c, JSON_COMPACT);
		if (!s || strlen(s) >= sizeof(m->status)) {
			free(s);
			return -EBADMSG;
		}
		strcpy(m->status, s);
		free(s);
		return 0;
	default:
		return 0;
	}
}

int ql_ctl_parse(const uint8_t *dgram, size_t len, const uint8_t *secret, size_t secret_len,
		 struct ql_ctl_msg *out)
{
	char type[QL_CTL_CODE_MAX];
	const uint8_t *mac;
	size_t jlen = len;
	json_error_t jerr;
	uint64_t v = 0;
	json_t *o;
	int ret;

	memset(out, 0, sizeof(*out));
	if (!dgram && len)
		return -EBADMSG;
	if (len > QL_CTL_MAX_DGRAM)
		return -EMSGSIZE;
	mac = mac_line(dgram, len);
	if (mac)
		jlen = len - QL_CTL_MAC_HEX - 1;
	o = json_loadb((const char *)dgram, jlen, JSON_REJECT_DUPLICATES, &jerr);
	if (!o)
		return -EBADMSG;
	ret = -EBADMSG;
	if (!json_is_object(o))
		goto out;
	/* The header first, so that a refused datagram can still be answered. */
	get_hex64(o, "session", false, false, &out->session);
	get_u64(o, "seq", false, UINT64_MAX >> 1, &out->seq);
	get_u64(o, "ts", false, UINT64_MAX >> 1, &out->ts);
	get_u64(o, "rseq", false, UINT64_MAX >> 1, &out->rseq);
	if (!get_str(o, "type", false, type, sizeof(type)))
		out->type = ql_ctl_type_from_name(type);
	if (get_u64(o, "v", true, UINT32_MAX, &v) || get_str(o, "type", true, type, sizeof(type)) ||
	    get_hex64(o, "session", true, false, &out->session) ||
	    get_u64(o, "seq", true, UINT64_MAX >> 1, &out->seq) ||
	    get_u64(o, "ts", false, UINT64_MAX >> 1, &out->ts) ||
	    get_u64(o, "rseq", false, UINT64_MAX >> 1, &out->rseq))
		goto out;
	out->version = (uint32_t)v;
	if (secret_len) {
		uint8_t want[crypto_auth_hmacsha256_BYTES], want_hex[QL_CTL_MAC_HEX];

		ret = -EACCES;
		if (!mac)
			goto out;
		mac_compute(secret, secret_len, dgram, jlen, want);
		mac_hex(want, want_hex);
		/* The text is compared, not its value: the MAC is lowercase hex exactly as
		 * specified (an uppercase digit is a wrong MAC), and in constant time. */
		if (sodium_memcmp(want_hex, mac, QL_CTL_MAC_HEX))
			goto out;
		out->mac_ok = true;
	}
	ret = -EPROTONOSUPPORT;
	if (out->version != QL_CTL_VERSION) {
		/* Another version's ERROR (a "bad_version" answer above all) is
		 * read all the same, so that its sender's versions are known. */
		if (out->type == QL_CTL_ERROR)
			parse_body(o, out);
		goto out;
	}
	ret = -EOPNOTSUPP;
	if (out->type == QL_CTL_NONE)
		goto out;
	ret = parse_body(o, out);
out:
	json_decref(o);
	return ret;
}

/* ---- encoding ----------------------------------------------------------- */

static json_t *hex64(uint64_t v)
{
	char b[24];

	snprintf(b, sizeof(b), "0x%llx", (unsigned long long)v);
	return json_string(b);
}

/* A GID as sent: eight groups of four lowercase hex digits, no "::" and no
 * dotted quad, so that the simplest parser reads it (docs/wire-protocol.md
 * §1); any inet_pton form is accepted on input. */
static void gid_full(const union ibv_gid *g, char out[40])
{
	for (int i = 0; i < 8; i++)
		snprintf(out + 5 * i, 6, "%02x%02x%s", g->raw[2 * i], g->raw[2 * i + 1],
			 i < 7 ? ":" : "");
}

static json_t *params_json(const struct ql_conn_params *p, bool full)
{
	char gid[40];
	json_t *o = json_object();

	gid_full(&p->gid, gid);
	if (!o || p->mtu < IBV_MTU_256 || p->mtu > IBV_MTU_4096) {
		json_decref(o);
		return NULL;
	}
	json_object_set_new(o, "qpn", json_integer(p->qpn));
	json_object_set_new(o, "psn", json_integer(p->psn));
	json_object_set_new(o, "gid", json_string(gid));
	json_object_set_new(o, "mtu", json_integer(128 << p->mtu));
	if (full) {
		json_object_set_new(o, "vaddr", hex64(p->vaddr));
		json_object_set_new(o, "rkey", json_integer(p->rkey));
		json_object_set_new(o, "length", hex64(p->length));
		json_object_set_new(o, "num_slots", json_integer(p->num_slots));
		json_object_set_new(o, "slot_size", json_integer(p->slot_size));
		json_object_set_new(o, "qp_type",
				    json_string(p->qp_type == IBV_QPT_UC ? "uc" : "rc"));
		if (p->resp_size) { /* hsb transport: pages, not a ring */
			json_object_set_new(o, "transport", json_string("hsb"));
			json_object_set_new(o, "frame_len", json_integer(p->frame_len));
			json_object_set_new(o, "resp_size", json_integer(p->resp_size));
		}
	}
	return o;
}

static int body_json(json_t *o, const struct ql_ctl_msg *m)
{
	json_t *a, *c;

	switch (m->type) {
	case QL_CTL_DISCOVER:
		json_object_set_new(o, "name", json_string(m->name));
		json_object_set_new(o, "channels", json_integer(m->nchannels ? m->nchannels : 1));
		if (m->cookie[0])
			json_object_set_new(o, "cookie", json_string(m->cookie));
		return 0;
	case QL_CTL_RETRY:
		if (strlen(m->cookie) != QL_CTL_COOKIE_HEX)
			return -EINVAL;
		json_object_set_new(o, "cookie", json_string(m->cookie));
		return 0;
	case QL_CTL_CONNECTION_PARAMS:
	case QL_CTL_ACK:
		if (m->nchannels < 1 || m->nchannels > QL_CTL_MAX_CHANNELS)
			return -EINVAL;
		if (m->type == QL_CTL_CONNECTION_PARAMS)
			json_object_set_new(o, "proto", json_integer(m->proto));
		a = json_array();
		json_object_set_new(o, "channels", a);
		for (uint32_t i = 0; i < m->nchannels; i++) {
			c = params_json(&m->ch[i], m->type == QL_CTL_CONNECTION_PARAMS);
			if (!c)
				return -EINVAL;
			json_array_append_new(a, c);
		}
		return 0;
	case QL_CTL_ABORT:
		if (m->text[0])
			json_object_set_new(o, "reason", json_string(m->text));
		return 0;
	case QL_CTL_PROGRAM: {
		char b64[sodium_base64_ENCODED_LEN(QL_CTL_CHUNK_MAX,
						   sodium_base64_VARIANT_ORIGINAL)];

		if (!m->data_len || m->data_len > QL_CTL_CHUNK_MAX || !m->total ||
		    m->total > QL_CTL_PROGRAM_MAX || m->offset > m->total - m->data_len)
			return -EINVAL;
		sodium_bin2base64(b64, sizeof(b64), m->data, m->data_len,
				  sodium_base64_VARIANT_ORIGINAL);
		json_object_set_new(o, "offset", json_integer(m->offset));
		json_object_set_new(o, "total", json_integer(m->total));
		json_object_set_new(o, "data", json_string(b64));
		return 0;
	}
	case QL_CTL_OK:
		json_object_set_new(o, "re", json_string(ql_ctl_type_name(m->re)));
		json_object_set_new(o, "state", json_string(ql_ctl_state_name(m->state)));
		return 0;
	case QL_CTL_ERROR:
		json_object_set_new(o, "code", json_string(m->code));
		/* Optional: left out when empty, for the shortest answer to an unvalidated source. */
		if (m->text[0])
			json_object_set_new(o, "message", json_string(m->text));
		if (m->versions) {
			json_t *vs = json_array();

			for (json_int_t v = 1; v < 32; v++)
				if (m->versions & (1u << v))
					json_array_append_new(vs, json_integer(v));
			json_object_set_new(o, "versions", vs);
		}
		return 0;
	case QL_CTL_STATUS_REPLY:
		json_object_set_new(o, "state", json_string(ql_ctl_state_name(m->state)));
		c = json_loads(m->status[0] ? m->status : "{}", 0, NULL);
		if (!json_is_object(c)) {
			json_decref(c);
			return -EINVAL;
		}
		json_object_set_new(o, "counters", c);
		return 0;
	default:
		return 0;
	}
}

int ql_ctl_format(const struct ql_ctl_msg *m, const uint8_t *secret, size_t secret_len,
		  uint8_t *buf, size_t cap)
{
	char session[17];
	size_t n, pad_to, max = cap < QL_CTL_MAX_DGRAM ? cap : QL_CTL_MAX_DGRAM;
	json_t *o;
	int ret;

	if ((unsigned)m->type <= QL_CTL_NONE || (unsigned)m->type >= QL_CTL_TYPE_COUNT)
		return -EINVAL;
	o = json_object();
	if (!o)
		return -ENOMEM;
	snprintf(session, sizeof(session), "%016llx", (unsigned long long)m->session);
	json_object_set_new(o, "v",
			    json_integer(m->version >= 1 && m->version <= QL_CTL_VERSION ?
						 m->version :
						 QL_CTL_VERSION));
	json_object_set_new(o, "type", json_string(ql_ctl_type_name(m->type)));
	json_object_set_new(o, "session", json_string(session));
	json_object_set_new(o, "seq", json_integer((json_int_t)(m->seq & (UINT64_MAX >> 1))));
	json_object_set_new(o, "ts", json_integer((json_int_t)(m->ts & (UINT64_MAX >> 1))));
	if (m->rseq)
		json_object_set_new(o, "rseq",
				    json_integer((json_int_t)(m->rseq & (UINT64_MAX >> 1))));
	ret = body_json(o, m);
	if (ret)
		goto out;
	n = json_dumpb(o, (char *)buf, max, JSON_COMPACT);
	pad_to = m->type == QL_CTL_DISCOVER && m->pad_to < QL_CTL_DISCOVER_MIN ?
			 QL_CTL_DISCOVER_MIN :
			 m->pad_to;
	if (pad_to > max)
		pad_to = max;
	if (pad_to && n > 0 && n <= max) {
		/* Pad to QL_CTL_DISCOVER_MIN bytes (MAC line included): the server answers an
		 * unvalidated source only with replies no larger than its request. */
		size_t total = n + (secret_len ? 1 + QL_CTL_MAC_HEX : 0), fill = 9; /* ,"pad":"" */

		if (total < pad_to) {
			char pad[QL_CTL_MAX_DGRAM];
			size_t k = total + fill < pad_to ? pad_to - total - fill : 0;

			memset(pad, '.', k);
			pad[k] = 0;
			json_object_set_new(o, "pad", json_string(pad));
			n = json_dumpb(o, (char *)buf, max, JSON_COMPACT);
		}
	}
	ret = -EMSGSIZE;
	if (n == 0 || n > max || (secret_len && n + 1 + QL_CTL_MAC_HEX > max))
		goto out;
	if (secret_len) {
		uint8_t mac[crypto_auth_hmacsha256_BYTES];

		mac_compute(secret, secret_len, buf, n, mac);
		buf[n] = '\n';
		/* sodium_bin2hex writes a NUL after the digits: build the line in place by hand. */
		mac_hex(mac, buf + n + 1);
		n += 1 + QL_CTL_MAC_HEX;
	}
	ret = (int)n;
out:
	json_decref(o);
	return ret;
}
