/* SPDX-License-Identifier: MIT */
/*
 * The qlinkd configuration file (see config/config.h), read from a table
 * with one row per key (keys[] below: path, type, range or names, default,
 * field, man-page summary). libyaml parses the file (yamlfile.h); the walk
 * fills struct ql_config with the defaults, then each key of the file is
 * looked up, type- and range-checked and stored where its row says, its
 * hook checking what one value says alone (an address, a file); an unknown
 * key or a bad value is reported and the walk goes on, so one run reports
 * every problem. The checks that need several keys come after the walk.
 */
#define _GNU_SOURCE
#include "config/config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "demo/demo.h"
#include "qlink/clock.h"
#include "qlink/dispatcher.h"
#include "qlink/error.h"
#include "qlink/gpu.h"
#include "qlink/hololink.h"
#include "qlink/hsb.h"
#include "qlink/ring.h"
#include "qlink/udp.h"
#include "qlink/verbs.h"
#include "yamlfile/yamlfile.h"
static const char *const level_names[] = { "error", "warn", "info", "debug" };
static const char *const format_names[] = { "text", "json" };

static const struct {
	uint32_t bit;
	const char *name;
} builtin_names[] = {
	{ QL_CONFIG_BUILTIN_PARITY, QL_DEMO_PARITY_NAME },
	{ QL_CONFIG_BUILTIN_INCREMENT, QL_DEMO_INCREMENT_NAME },
};

const char *ql_config_builtin_name(uint32_t bit)
{
	for (size_t i = 0; i < sizeof(builtin_names) / sizeof(builtin_names[0]); i++)
		if (builtin_names[i].bit == bit)
			return builtin_names[i].name;
	return NULL;
}

const char *ql_config_log_level_str(enum ql_log_level level)
{
	return (unsigned)level < 4 ? level_names[level] : "?";
}

const char *ql_config_log_format_str(enum ql_config_log_format format)
{
	return (unsigned)format < 2 ? format_names[format] : "?";
}

void ql_config_free(struct ql_config *cfg)
{
	if (!cfg)
		return;
	free(cfg->path);
	free(cfg->device);
	free(cfg->control.address);
	free(cfg->control.secret_file);
	for (uint32_t i = 0; i < cfg->control.allow_count; i++)
		free(cfg->control.allow[i]);
	free(cfg->control.allow);
	free(cfg->dispatcher.cpus);
	for (uint32_t i = 0; i < cfg->plugins_count; i++) {
		free(cfg->plugins[i].path);
		free(cfg->plugins[i].config);
	}
	free(cfg->plugins);
	for (uint32_t i = 0; i < cfg->qcs_count; i++) {
		free(cfg->qcs[i].kind);
		free(cfg->qcs[i].address);
	}
	free(cfg->qcs);
	for (uint32_t i = 0; i < cfg->udp_count; i++) {
		free(cfg->udp[i].address);
		for (uint32_t j = 0; j < cfg->udp[i].allow_count; j++)
			free(cfg->udp[i].allow[j]);
		free(cfg->udp[i].allow);
	}
	free(cfg->udp);
	free(cfg);
}

/* A device name as the providers accept it: 1..QL_DEVICE_NAME_MAX-1
 * characters of [A-Za-z0-9_.-]. */
static const char *bad_device_name(const char *name, size_t n)
{
	if (!n)
		return "names no device";
	if (n >= QL_DEVICE_NAME_MAX)
		return "device name longer than 63 characters";
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)name[i]) && !strchr("_.-", name[i]))
			return "device name has a character outside [A-Za-z0-9_.-]";
	return NULL;
}

/* ibv://DEVICE[:PORT[:GID_INDEX]] */
static const char *bad_ibv(const char *rest)
{
	const char *colon = strchr(rest, ':'), *why;
	char *end;
	long v;

	why = bad_device_name(rest, colon ? (size_t)(colon - rest) : strlen(rest));
	if (why || !colon)
		return why;
	errno = 0;
	v = strtol(colon + 1, &end, 10);
	if (end == colon + 1 || errno || v < 1 || v > 255 || (*end && *end != ':'))
		return "port is not 1..255";
	if (*end == ':') {
		const char *g = end + 1;

		v = strtol(g, &end, 10);
		if (end == g || *end || v < 0 || v > 65535)
			return "GID index is not 0..65535";
	}
	return NULL;
}

/* What ql_device_open would refuse, found before start: URI length,
 * scheme://rest syntax, a known and supported scheme, the device name's
 * length and characters, ibv's port and GID index. (Whether an ibv device
 * exists is known only on the host that runs qlinkd: not checked.) */
static void check_device(struct ql_yaml_file *f, const char *uri)
{
	unsigned line = ql__yaml_line(f, "device");
	const char *sep = strstr(uri, "://"), *rest, *why = NULL;
	size_t slen;

	if (strlen(uri) >= QL_DEVICE_URI_MAX) {
		ql__diag_add(f, line, "device: URI longer than %d characters",
			     QL_DEVICE_URI_MAX - 1);
		return;
	}
	if (!sep || sep == uri) {
		ql__diag_add(f, line,
			     "device: '%s' is not a device URI SCHEME://NAME (soft://loop, "
			     "soft+shm://NAME, ibv://DEVICE[:PORT[:GID_INDEX]])",
			     uri);
		return;
	}
	slen = (size_t)(sep - uri);
	rest = sep + 3;
	/* soft devices take a loss-injection query (?loss=P&seed=N&drop_nth=N,
	 * for tests), checked by the provider when it opens the device */
	if (slen == 4 && !strncmp(uri, "soft", 4))
		why = strncmp(rest, "loop", 4) || (rest[4] && rest[4] != '?') ?
			      "the only soft:// device is soft://loop" :
			      NULL;
	else if (slen == 8 && !strncmp(uri, "soft+shm", 8))
		why = bad_device_name(rest, strcspn(rest, "?"));
	else if (slen == 3 && !strncmp(uri, "ibv", 3))
		why = bad_ibv(rest);
	else if (slen == 8 && !strncmp(uri, "soft+udp", 8))
		why = !*rest || *rest == '?' ? "names no address (soft+udp://IP[:PORT])" : NULL;
	else {
		ql__diag_add(f, line,
			     "device: unknown URI scheme '%.*s' in '%s' (known: soft://loop, "
			     "soft+shm://NAME, ibv://DEVICE)",
			     (int)slen, uri, uri);
		return;
	}
	if (why)
		ql__diag_add(f, line, "device: '%s': %s", uri, why);
}

/* Every session registers a ring and a send pool of num_slots * slot_size
 * each: all max_sessions of them must fit this host's memory and, where
 * registration pins memory (ibv), RLIMIT_MEMLOCK; soft+shm carves them from
 * its shared heap (4 GiB unless QLINK_SOFT_HEAP_SIZE says otherwise). */
static void check_ring_memory(struct ql_yaml_file *f, const struct ql_config *c)
{
	uint64_t per = (uint64_t)ql_ring_bytes(c->ring.slots, c->ring.slot_size) +
		       (uint64_t)c->ring.slots * c->ring.slot_size;
	uint64_t total = per * c->max_sessions;
	long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
	unsigned line = ql__yaml_line(f, "ring.slots");
	struct rlimit rl;

	if (line == 1)
		line = ql__yaml_line(f, "max_sessions");
	if (pages > 0 && psize > 0 && total > (uint64_t)pages * (uint64_t)psize) {
		ql__diag_add(f, line,
			     "ring: %u sessions x %llu bytes (ring and send pool of %u x %u) = "
			     "%llu bytes, more than this host's memory (%llu bytes)",
			     c->max_sessions, (unsigned long long)per, c->ring.slots,
			     c->ring.slot_size, (unsigned long long)total,
			     (unsigned long long)pages * (unsigned long long)psize);
		return;
	}
	if (!strncmp(c->device, "ibv://", 6) && geteuid() != 0 && !getrlimit(RLIMIT_MEMLOCK, &rl) &&
	    rl.rlim_cur != RLIM_INFINITY && total > rl.rlim_cur)
		ql__diag_add(f, line,
			     "ring: %u sessions x %llu bytes of registered memory = %llu bytes, "
			     "more than RLIMIT_MEMLOCK (%llu bytes): raise `ulimit -l` or shrink "
			     "the ring",
			     c->max_sessions, (unsigned long long)per, (unsigned long long)total,
			     (unsigned long long)rl.rlim_cur);
	if (!strncmp(c->device, "soft+shm://", 11) && !getenv("QLINK_SOFT_HEAP_SIZE") &&
	    total > (4ull << 30))
		ql__diag_add(f, line,
			     "ring: %u sessions x %llu bytes = %llu bytes, more than the soft+shm "
			     "heap (4 GiB; set QLINK_SOFT_HEAP_SIZE)",
			     c->max_sessions, (unsigned long long)per, (unsigned long long)total);
}

static int valid_address(const char *s)
{
	unsigned char buf[16];

	return inet_pton(AF_INET, s, buf) == 1 || inet_pton(AF_INET6, s, buf) == 1;
}

static int valid_cidr(const char *s)
{
	char addr[64], *slash, *end;
	unsigned char buf[16];
	long bits, max;

	if (strlen(s) >= sizeof(addr))
		return 0;
	strcpy(addr, s);
	slash = strchr(addr, '/');
	if (slash)
		*slash = '\0';
	if (inet_pton(AF_INET, addr, buf) == 1)
		max = 32;
	else if (inet_pton(AF_INET6, addr, buf) == 1)
		max = 128;
	else
		return 0;
	if (!slash)
		return 1;
	errno = 0;
	bits = strtol(slash + 1, &end, 10);
	return slash[1] && !*end && !errno && bits >= 0 && bits <= max;
}

/* Plugin paths are taken relative to the config file's directory, so a
 * config and its plugins can move together. */
static char *resolve_path(const char *cfg_path, const char *p)
{
	const char *slash = strrchr(cfg_path, '/');
	char *out;

	if (p[0] == '/' || !slash)
		return strdup(p);
	if (asprintf(&out, "%.*s/%s", (int)(slash - cfg_path), cfg_path, p) < 0)
		return NULL;
	return out;
}

/*
 * "HOST:PORT" with an IPv4 literal, or "[V6]:PORT" with an IPv6 one (the
 * brackets are how an IPv6 address and a port are told apart). NULL and
 * *addr (malloc'd, no brackets) and *port, or the reason it is not one.
 */
static const char *parse_listen(const char *s, char **addr, uint32_t *port)
{
	const char *host = s, *colon;
	unsigned char buf[16];
	size_t hlen;
	char *end, tmp[INET6_ADDRSTRLEN + 1];
	long v;
	int v6 = 0;

	*addr = NULL;
	if (s[0] == '[') {
		const char *rb = strchr(s, ']');

		if (!rb || rb[1] != ':')
			return "an IPv6 address is written [ADDRESS]:PORT";
		host = s + 1;
		hlen = (size_t)(rb - host);
		colon = rb + 1;
		v6 = 1;
	} else {
		colon = strrchr(s, ':');
		if (!colon)
			return "no port: write ADDRESS:PORT (e.g. 127.0.0.1:5000, [::1]:5000)";
		hlen = (size_t)(colon - s);
		if (memchr(s, ':', hlen))
			return "an IPv6 address needs brackets: [ADDRESS]:PORT";
	}
	if (!hlen || hlen >= sizeof(tmp))
		return "no address: write ADDRESS:PORT (0.0.0.0 or [::] for every interface)";
	memcpy(tmp, host, hlen);
	tmp[hlen] = '\0';
	if (inet_pton(v6 ? AF_INET6 : AF_INET, tmp, buf) != 1)
		return v6 ? "not an IPv6 address" : "not an IPv4 address (a literal, not a name)";
	errno = 0;
	v = strtol(colon + 1, &end, 10);
	if (!colon[1] || *end || errno || v < 0 || v > 65535 || !isdigit((unsigned char)colon[1]))
		return "the port is not 0..65535";
	*addr = strdup(tmp);
	*port = (uint32_t)v;
	return *addr ? NULL : "out of memory";
}

/* Two binds that would collide: the same port and the same address, or
 * one of them every address of its family ("::" may take IPv4 too). */
static bool binds_overlap(const char *a, uint32_t pa, const char *b, uint32_t pb)
{
	bool a6 = strchr(a, ':') != NULL, b6 = strchr(b, ':') != NULL;
	bool aany = !strcmp(a, "0.0.0.0") || !strcmp(a, "::");
	bool bany = !strcmp(b, "0.0.0.0") || !strcmp(b, "::");

	if (pa != pb || !pa)
		return false; /* port 0: each gets its own */
	if (!strcmp(a, b))
		return true;
	if ((aany && !strcmp(a, "::")) || (bany && !strcmp(b, "::")))
		return true;
	return a6 == b6 && (aany || bany);
}

/* ---- the walk of one file -------------------------------------------------- */

#define NKEYS 64

struct ql__config_walk {
	struct ql_yaml_file *f;
	struct ql_config *c;
	int ncpu;
	unsigned index;	  /* the entry of the list being read */
	bool seen[NKEYS]; /* keys given (a list entry's keys: in this entry) */
};

static void *at(void *base, size_t off)
{
	return (char *)base + off;
}

/* Every integer and enum field is 32 bits (uint32_t, int or an enum). */
static void put32(void *base, size_t off, int64_t v)
{
	int32_t x = (int32_t)v;

	memcpy(at(base, off), &x, sizeof(x));
}

static int32_t get32(const void *base, size_t off)
{
	int32_t x;

	memcpy(&x, (const char *)base + off, sizeof(x));
	return x;
}

/* The index of s among "a|b|c", or -1. */
static int value_index(const char *values, const char *s)
{
	size_t n = strlen(s);
	int i = 0;

	for (const char *p = values; p; p = strchr(p, '|'), p = p ? p + 1 : NULL, i++)
		if (strcspn(p, "|") == n && !strncmp(p, s, n))
			return i;
	return -1;
}

/* "a|b|c" as "a, b, c". */
static const char *value_list(const char *values, char *buf, size_t len)
{
	size_t o = 0;

	for (const char *p = values; *p && o + 3 < len; p++) {
		if (*p == '|') {
			buf[o++] = ',';
			buf[o++] = ' ';
		} else {
			buf[o++] = *p;
		}
	}
	buf[o] = '\0';
	return buf;
}

static int value_code(const struct ql_config_key *k, int i)
{
	return k->codes ? k->codes[i] : i;
}

static const struct ql_config_key keys[];
static const size_t nkeys;

static size_t key_index(const struct ql_config_key *k)
{
	return (size_t)(k - keys);
}

static const struct ql_config_key *key_find(const char *path)
{
	for (size_t i = 0; i < nkeys; i++)
		if (!strcmp(keys[i].path, path))
			return &keys[i];
	return NULL;
}

/* The key's parent path length: "udp.slots" -> 3, "device" -> 0. */
static size_t parent_len(const struct ql_config_key *k)
{
	const char *dot = strrchr(k->path, '.');

	return dot ? (size_t)(dot - k->path) : 0;
}

/* The list whose entries hold k (udp for udp.slots), or NULL. */
static const struct ql_config_key *key_owner(const struct ql_config_key *k)
{
	char p[64];
	size_t n = parent_len(k);

	while (n) {
		const struct ql_config_key *o;

		snprintf(p, sizeof(p), "%.*s", (int)n, k->path);
		o = key_find(p);
		if (o && o->type == QL_CONFIG_KEY_LIST)
			return o;
		n = o ? parent_len(o) : 0;
	}
	return NULL;
}

/* The defaults of the keys that live in base: the top level's (owner
 * NULL) or one list entry's. */
static int apply_defaults(struct ql__config_walk *w, const struct ql_config_key *owner, void *base)
{
	for (size_t i = 0; i < nkeys; i++) {
		const struct ql_config_key *k = &keys[i];

		if (key_owner(k) != owner)
			continue;
		w->seen[i] = false;
		if (k->flags & (QL_CONFIG_KEY_LATE | QL_CONFIG_KEY_NOSTORE))
			continue;
		if (k->type == QL_CONFIG_KEY_INT || k->type == QL_CONFIG_KEY_FLAGS)
			put32(base, k->off, k->def);
		else if (k->type == QL_CONFIG_KEY_ENUM)
			put32(base, k->off, value_code(k, (int)k->def));
		else if (k->type == QL_CONFIG_KEY_STR && k->def_str) {
			char **sp = at(base, k->off);

			free(*sp);
			*sp = strdup(k->def_str);
			if (!*sp)
				return -ENOMEM;
		}
	}
	return 0;
}

static bool parse_int(const char *s, int64_t *v)
{
	char *end;

	errno = 0;
	*v = strtoll(s, &end, 0);
	return *s && !*end && !errno;
}

static int walk_value(struct ql__config_walk *w, const struct ql_config_key *k, yaml_node_t *n,
		      const char *dotted, void *base);

/* A mapping of the keys below tpath (the table's path) at dotted (the
 * file's, with list indices). */
static int walk_map(struct ql__config_walk *w, yaml_node_t *n, const char *tpath,
		    const char *dotted, void *base)
{
	char path[128], sub[160], disp[160];
	size_t tl = strlen(tpath);
	int ret;

	for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top;
	     p++) {
		yaml_node_t *kn = yaml_document_get_node(&w->f->doc, p->key);
		yaml_node_t *val = yaml_document_get_node(&w->f->doc, p->value);
		const struct ql_config_key *k;
		const char *name;

		if (!kn || !val)
			continue;
		ql__yaml_shown(dotted, disp, sizeof(disp));
		if (kn->type != YAML_SCALAR_NODE) {
			ql__diag_add(w->f, ql__yaml_node_line(kn),
				     "%s%sa key must be a scalar, found %s", disp,
				     *disp ? ": " : "", ql__yaml_node_kind(kn));
			continue;
		}
		name = (const char *)kn->data.scalar.value;
		snprintf(path, sizeof(path), "%s%s%s", tpath, tl ? "." : "", name);
		k = key_find(path);
		if (!k) {
			ql__diag_add(w->f, ql__yaml_node_line(kn), "unknown key '%s'%s%s", name,
				     *disp ? " in " : "", disp);
			continue;
		}
		snprintf(sub, sizeof(sub), "%s%s%s", dotted, *dotted ? "." : "", name);
		if (w->seen[key_index(k)]) {
			ql__diag_add(w->f, ql__yaml_node_line(kn), "%s: given twice",
				     ql__yaml_shown(sub, disp, sizeof(disp)));
			continue;
		}
		w->seen[key_index(k)] = true;
		ret = walk_value(w, k, val, sub, base);
		if (ret)
			return ret;
	}
	for (size_t i = 0; i < nkeys; i++) {
		const struct ql_config_key *k = &keys[i];

		if (!(k->flags & QL_CONFIG_KEY_REQUIRED) || w->seen[i] || parent_len(k) != tl ||
		    strncmp(k->path, tpath, tl))
			continue;
		ql__yaml_shown(dotted, disp, sizeof(disp));
		ql__diag_add(w->f, ql__yaml_node_line(n), "missing required key '%s'%s%s",
			     k->path + tl + (tl ? 1 : 0), *disp ? " in " : "", disp);
	}
	return 0;
}

/* An integer within the key's range; false (reported) if it is not one. */
static bool int_value(struct ql__config_walk *w, const struct ql_config_key *k, yaml_node_t *n,
		      const char *dotted, int64_t *v)
{
	const char *s = (const char *)n->data.scalar.value;
	int64_t max = k->flags & QL_CONFIG_KEY_NCPU ? w->ncpu - 1 : k->max;
	char disp[160];

	if (!parse_int(s, v)) {
		ql__diag_add(w->f, ql__yaml_node_line(n),
			     "%s: %s is not an integer (or is out of range)",
			     ql__yaml_shown(dotted, disp, sizeof(disp)), s);
		return false;
	}
	if (k->type == QL_CONFIG_KEY_INT && (*v < k->min || *v > max)) {
		ql__diag_add(w->f, ql__yaml_node_line(n),
			     "%s: %lld is out of range (%lld..%lld%s%s)", dotted, (long long)*v,
			     (long long)k->min, (long long)max, k->why ? "; " : "",
			     k->why ? k->why : "");
		return false;
	}
	return true;
}

/* A list's entries: of mappings (LIST), names (FLAGS), strings or
 * integers. */
static int walk_list(struct ql__config_walk *w, const struct ql_config_key *k, yaml_node_t *n,
		     const char *dotted, void *base)
{
	long cnt = n->data.sequence.items.top - n->data.sequence.items.start;
	size_t esize = k->type == QL_CONFIG_KEY_LIST ? k->entry_size :
		       k->type == QL_CONFIG_KEY_INTS ? sizeof(int) :
						       sizeof(char *);
	bool store = k->type != QL_CONFIG_KEY_FLAGS && !(k->flags & QL_CONFIG_KEY_NOSTORE);
	uint32_t *count = store ? at(base, k->count_off) : NULL;
	char sub[160], disp[160];
	void *arr = NULL;
	int ret;

	if (cnt < k->min)
		ql__diag_add(w->f, ql__yaml_node_line(n), "%s: a list needs at least %s",
			     ql__yaml_shown(dotted, disp, sizeof(disp)),
			     k->min == 1 ? "one entry" : "more entries");
	if (store && cnt) {
		arr = calloc((size_t)cnt, esize);
		if (!arr)
			return -ENOMEM;
		*(void **)at(base, k->off) = arr;
	}
	if (k->type == QL_CONFIG_KEY_FLAGS)
		put32(base, k->off, 0);
	for (long i = 0; i < cnt; i++) {
		yaml_node_t *e =
			yaml_document_get_node(&w->f->doc, n->data.sequence.items.start[i]);
		yaml_node_type_t want = k->type == QL_CONFIG_KEY_LIST ? YAML_MAPPING_NODE :
									YAML_SCALAR_NODE;
		const char *s = NULL;
		int64_t v = 0;

		if (!e || snprintf(sub, sizeof(sub), "%s.%ld", dotted, i) >= (int)sizeof(sub))
			continue;
		if (e->type != want) {
			ql__diag_add(w->f, ql__yaml_node_line(e),
				     "%s: wrong type: expected %s, found %s",
				     ql__yaml_shown(sub, disp, sizeof(disp)),
				     want == YAML_MAPPING_NODE ? "a mapping" : "a scalar value",
				     ql__yaml_node_kind(e));
			continue;
		}
		if (k->type == QL_CONFIG_KEY_LIST) {
			void *entry = (char *)arr + (size_t)*count * esize;

			w->index = (unsigned)i;
			put32(entry, k->line_off, ql__yaml_node_line(e));
			ret = apply_defaults(w, k, entry);
			(*count)++;
			if (!ret)
				ret = walk_map(w, e, k->path, sub, entry);
			if (!ret && k->hook)
				ret = k->hook(w, k, entry, NULL, i, ql__yaml_node_line(e));
			if (ret)
				return ret;
			continue;
		}
		s = (const char *)e->data.scalar.value;
		if (k->type == QL_CONFIG_KEY_FLAGS) {
			int x = value_index(k->values, s);
			char list[128];
			int32_t bits = get32(base, k->off);

			if (x < 0)
				ql__diag_add(w->f, ql__yaml_node_line(e), "%s: '%s' %s (known: %s)",
					     ql__yaml_shown(sub, disp, sizeof(disp)), s, k->why,
					     value_list(k->values, list, sizeof(list)));
			else if (bits & value_code(k, x))
				ql__diag_add(w->f, ql__yaml_node_line(e),
					     "%s: '%s' is listed twice",
					     ql__yaml_shown(sub, disp, sizeof(disp)), s);
			else
				put32(base, k->off, bits | value_code(k, x));
			continue;
		}
		if (k->type == QL_CONFIG_KEY_INTS) {
			if (!int_value(w, k, e, sub, &v))
				continue;
			if (store)
				((int *)arr)[(*count)++] = (int)v;
		} else if (store) {
			((char **)arr)[*count] = strdup(s);
			if (!((char **)arr)[*count])
				return -ENOMEM;
			(*count)++;
		}
		if (k->hook) {
			ret = k->hook(w, k, base, s, v, ql__yaml_node_line(e));
			if (ret)
				return ret;
		}
	}
	return 0;
}

static int walk_value(struct ql__config_walk *w, const struct ql_config_key *k, yaml_node_t *n,
		      const char *dotted, void *base)
{
	yaml_node_type_t want = k->type == QL_CONFIG_KEY_MAP ? YAML_MAPPING_NODE :
				k->type == QL_CONFIG_KEY_INT || k->type == QL_CONFIG_KEY_STR ||
						k->type == QL_CONFIG_KEY_ENUM ?
							       YAML_SCALAR_NODE :
							       YAML_SEQUENCE_NODE;
	char disp[160], list[128];
	const char *s;
	int64_t v = 0;
	int i;

	if (n->type != want) {
		ql__diag_add(w->f, ql__yaml_node_line(n), "%s%swrong type: expected %s, found %s",
			     ql__yaml_shown(dotted, disp, sizeof(disp)), *dotted ? ": " : "",
			     want == YAML_MAPPING_NODE	? "a mapping" :
			     want == YAML_SEQUENCE_NODE ? "a list" :
							  "a scalar value",
			     ql__yaml_node_kind(n));
		return 0;
	}
	if (k->type == QL_CONFIG_KEY_MAP)
		return walk_map(w, n, k->path, dotted, base);
	if (want == YAML_SEQUENCE_NODE)
		return walk_list(w, k, n, dotted, base);
	s = (const char *)n->data.scalar.value;
	switch (k->type) {
	case QL_CONFIG_KEY_INT:
		if (!int_value(w, k, n, dotted, &v))
			return 0;
		if (!(k->flags & QL_CONFIG_KEY_NOSTORE))
			put32(base, k->off, v);
		break;
	case QL_CONFIG_KEY_ENUM:
		i = value_index(k->values, s);
		if (i < 0) {
			ql__diag_add(w->f, ql__yaml_node_line(n), "%s: '%s' is not one of %s",
				     ql__yaml_shown(dotted, disp, sizeof(disp)), s,
				     value_list(k->values, list, sizeof(list)));
			return 0;
		}
		put32(base, k->off, value_code(k, i));
		break;
	default: /* STR */
		if (!(k->flags & QL_CONFIG_KEY_NOSTORE)) {
			char **sp = at(base, k->off);

			free(*sp);
			*sp = strdup(s);
			if (!*sp)
				return -ENOMEM;
		}
		break;
	}
	return k->hook ? k->hook(w, k, base, s, v, ql__yaml_node_line(n)) : 0;
}

/* ---- the checks of single values (the table's hooks) ---------------------- */

static int hook_device(struct ql__config_walk *w, const struct ql_config_key *k, void *base,
		       const char *s, int64_t v, unsigned line)
{
	check_device(w->f, s);
	return 0;
}

static int hook_address(struct ql__config_walk *w, const struct ql_config_key *k, void *base,
			const char *s, int64_t v, unsigned line)
{
	if (!valid_address(s))
		ql__diag_add(w->f, line, "%s: '%s' is not an IPv4 or IPv6 address", k->path, s);
	return 0;
}

/* The key as messages show it: "control.allow", or with the index of its
 * list entry: "udp[2].allow". */
static const char *key_shown(const struct ql__config_walk *w, const struct ql_config_key *k,
			     char *buf, size_t len)
{
	const struct ql_config_key *owner = key_owner(k);

	if (owner)
		snprintf(buf, len, "%s[%u].%s", owner->path, w->index,
			 k->path + strlen(owner->path) + 1);
	else
		snprintf(buf, len, "%s", k->path);
	return buf;
}

/* control.allow, udp.allow: addresses and CIDR blocks */
static int hook_cidr(struct ql__config_walk *w, const struct ql_config_key *k, void *base,
		     const char *s, int64_t v, unsigned line)
{
	uint32_t n = get32(base, k->count_off);
	char path[64];

	if (valid_cidr(s))
		return 0;
	key_shown(w, k, path, sizeof(path));
	ql__diag_add(w->f, line,
		     "%s[%u]: '%s' is not an address or CIDR block (e.g. 10.0.0.0/8, fd00::/8)",
		     path, n - 1, s);
	return 0;
}

/* control.secret_file, plugins.path: files read at start, taken relative
 * to the config file's directory */
static int hook_file(struct ql__config_walk *w, const struct ql_config_key *k, void *base,
		     const char *s, int64_t v, unsigned line)
{
	char **sp = at(base, k->off);
	char what[64];

	free(*sp);
	*sp = resolve_path(w->f->path, s);
	/* a plugin named by a bare file name may be one installed in the
	 * plugin directory (plugin_dir.c) */
	if (!strcmp(k->path, "plugins.path"))
		*sp = ql__config_plugin_fallback(*sp, s);
	if (!*sp)
		return -ENOMEM;
	key_shown(w, k, what, sizeof(what));
	if (access(*sp, R_OK))
		ql__diag_add(w->f, line, "%s: cannot read '%s': %s", what, *sp, strerror(errno));
	return 0;
}

/* dispatcher.cpus: cores of this host, each once */
static int hook_cpus(struct ql__config_walk *w, const struct ql_config_key *k, void *base,
		     const char *s, int64_t v, unsigned line)
{
	const struct ql_config *c = base;
	uint32_t i = c->dispatcher.cpus_count - 1;

	if (v < 0 || v >= w->ncpu) {
		ql__diag_add(w->f, line,
			     "dispatcher.cpus[%u]: %lld is not a CPU of this host (0..%d)", i,
			     (long long)v, w->ncpu - 1);
		return 0;
	}
	for (uint32_t j = 0; j < i; j++)
		if (c->dispatcher.cpus[j] == v) {
			ql__diag_add(
				w->f, line,
				"dispatcher.cpus[%u]: cpu %lld is listed twice (one dispatcher "
				"per core)",
				i, (long long)v);
			break;
		}
	return 0;
}

static int hook_hsb_version(struct ql__config_walk *w, const struct ql_config_key *k, void *base,
			    const char *s, int64_t v, unsigned line)
{
	struct ql_config_qcs *q = base;

	if (ql_hsb_layout_parse(s, &q->layout))
		ql__diag_add(w->f, line,
			     "qcs[%u].hsb_version: '%s' is not a supported HSB version (2.6: 2.6.0 "
			     "and later; 2.5: before 2.6.0)",
			     w->index, s);
	return 0;
}

static int hook_gid(struct ql__config_walk *w, const struct ql_config_key *k, void *base,
		    const char *s, int64_t v, unsigned line)
{
	struct ql_config_qcs *q = base;

	if (inet_pton(AF_INET6, s, q->gid) != 1)
		ql__diag_add(w->f, line, "qcs[%u].gid: '%s' is not a GID (IPv6 text form)",
			     w->index, s);
	return 0;
}

/* One qcs entry, its keys read: the GID defaults to its address,
 * IPv4-mapped. */
static int hook_qcs_entry(struct ql__config_walk *w, const struct ql_config_key *k, void *base,
			  const char *s, int64_t v, unsigned line)
{
	struct ql_config_qcs *q = base;
	unsigned char a4[4];
	const struct ql_config_key *gid = key_find("qcs.gid");

	if (w->seen[key_index(gid)])
		return 0;
	memset(q->gid, 0, sizeof(q->gid));
	q->gid[10] = q->gid[11] = 0xff;
	if (q->address && inet_pton(AF_INET, q->address, a4) == 1)
		memcpy(q->gid + 12, a4, 4);
	return 0;
}

/* udp.listen: a bare port (loopback), ADDRESS:PORT or [ADDRESS]:PORT */
static int hook_listen(struct ql__config_walk *w, const struct ql_config_key *k, void *base,
		       const char *s, int64_t v, unsigned line)
{
	struct ql_config_udp *u = base;
	const char *why;

	free(u->address);
	if (s[0] && strspn(s, "0123456789") == strlen(s) && strlen(s) <= 5) {
		/* a bare port: loopback (an address must be written to listen
		 * wider) */
		char lo[32];

		snprintf(lo, sizeof(lo), "127.0.0.1:%s", s);
		why = parse_listen(lo, &u->address, &u->port);
	} else {
		why = parse_listen(s, &u->address, &u->port);
	}
	if (why && !u->address && !strcmp(why, "out of memory"))
		return -ENOMEM;
	if (why)
		ql__diag_add(w->f, line, "udp[%u].listen: '%s': %s", w->index, s, why);
	return 0;
}

/* ---- the table -------------------------------------------------------------- */

#define C(m) offsetof(struct ql_config, m)
#define Q(m) offsetof(struct ql_config_qcs, m)
#define U(m) offsetof(struct ql_config_udp, m)
#define P(m) offsetof(struct ql_config_plugin, m)
#define INT(p, o, lo, hi, d, ...)                                                               \
	{                                                                                       \
		.path = p, .type = QL_CONFIG_KEY_INT, .off = o, .min = lo, .max = hi, .def = d, \
		__VA_ARGS__                                                                     \
	}
#define ENUM(p, o, vals, d, ...)                                                           \
	{                                                                                  \
		.path = p, .type = QL_CONFIG_KEY_ENUM, .off = o, .values = vals, .def = d, \
		__VA_ARGS__                                                                \
	}
#define STR(p, o, ...)                                                      \
	{                                                                   \
		.path = p, .type = QL_CONFIG_KEY_STR, .off = o, __VA_ARGS__ \
	}
#define MAP(p, ...)                                               \
	{                                                         \
		.path = p, .type = QL_CONFIG_KEY_MAP, __VA_ARGS__ \
	}

static const int qp_codes[] = { IBV_QPT_RC, IBV_QPT_UC };
static const int drop_answer[] = { QL_BAD_REQUEST_DROP, QL_BAD_REQUEST_ANSWER };
static const int builtin_codes[] = { QL_CONFIG_BUILTIN_PARITY, QL_CONFIG_BUILTIN_INCREMENT };

static const struct ql_config_key keys[] = {
	STR("device", C(device), .def_str = QL_CONFIG_DEFAULT_DEVICE, .hook = hook_device,
	    .doc = "the device URI: soft://loop, soft+shm://NAME, soft+udp://IP[:PORT] or "
		   "ibv://DEVICE[:PORT[:GID]]"),
	MAP("control", .doc = "the UDP control plane, through which a QCS opens sessions"),
	STR("control.address", C(control.address), .def_str = QL_CONFIG_DEFAULT_ADDRESS,
	    .hook = hook_address, .doc = "the IPv4 address the control plane listens on"),
	INT("control.port", C(control.port), 1, 65535, QL_CONFIG_DEFAULT_PORT, .why = "a UDP port",
	    .doc = "the control plane's UDP port"),
	STR("control.secret_file", C(control.secret_file), .flags = QL_CONFIG_KEY_NOSTORE,
	    .hook = hook_file, .def_doc = "none (not authenticated)",
	    .doc = "the file holding the shared secret of control messages (HMAC-SHA256)"),
	{ .path = "control.allow",
	  .type = QL_CONFIG_KEY_STRS,
	  .off = C(control.allow),
	  .count_off = C(control.allow_count),
	  .max = INT32_MAX,
	  .hook = hook_cidr,
	  .def_doc = "any (soft+shm without a secret: 127.0.0.0/8)",
	  .doc = "the addresses and CIDR blocks a QCS may connect from" },
	MAP("dispatcher", .doc = "the CPU dispatchers, one polling thread per core"),
	INT("dispatcher.cpu", C(dispatcher.cpu), -1, 0, -1, .flags = QL_CONFIG_KEY_NCPU,
	    .why = "-1 for no pinning; this host's CPUs",
	    .doc = "the core of a single dispatcher; -1 leaves it unpinned"),
	{ .path = "dispatcher.cpus",
	  .type = QL_CONFIG_KEY_INTS,
	  .off = C(dispatcher.cpus),
	  .count_off = C(dispatcher.cpus_count),
	  .min = 1,
	  .max = INT32_MAX,
	  .hook = hook_cpus,
	  .def_doc = "[cpu]",
	  .doc = "the cores, one dispatcher pinned to each (instead of cpu)" },
	ENUM("dispatcher.idle", C(dispatcher.idle), "spin|yield|sleep", QL_IDLE_SPIN,
	     .doc = "what an idle dispatcher does"),
	INT("dispatcher.idle_after_us", C(dispatcher.idle_after_us), 1, 1000000,
	    QL_CONFIG_DEFAULT_IDLE_AFTER_US, .why = "at most a second",
	    .doc = "idle time in microseconds before yield or sleep back off"),
	INT("dispatcher.sleep_us", C(dispatcher.sleep_us), 1, 100000, QL_CONFIG_DEFAULT_SLEEP_US,
	    .why = "at most 100 ms", .doc = "one nap of the sleep policy, in microseconds"),
	INT("dispatcher.call_deadline_ms", C(dispatcher.call_deadline_ms), 0, 3600000,
	    QL_CONFIG_DEFAULT_CALL_DEADLINE_MS, .why = "0 (no deadline) up to an hour",
	    .doc = "the longest a handler call may run, in milliseconds; 0: no deadline"),
	INT("dispatcher.burst", C(dispatcher.burst), 1, 32, QL_CONFIG_DEFAULT_BURST,
	    .doc = "requests taken per burst"),
	MAP("ring", .doc = "the geometry of each session's request ring"),
	INT("ring.slots", C(ring.slots), 1, QL_RING_MAX_SLOTS, QL_CONFIG_DEFAULT_SLOTS,
	    .doc = "slots per ring, a power of two"),
	INT("ring.slot_size", C(ring.slot_size), QL_RING_MIN_SLOT, QL_RING_MAX_SLOT,
	    QL_CONFIG_DEFAULT_SLOT_SIZE, .doc = "bytes per slot, a multiple of 64"),
	ENUM("ring.qp", C(ring.qp), "rc|uc", 0, .codes = qp_codes,
	     .doc = "the rings' QP type, sent to the QCS as qp_type"),
	ENUM("transport", C(transport), "ring|hsb", QL_CONFIG_TRANSPORT_RING,
	     .doc = "the data plane of the sessions QCSs open through the control plane"),
	ENUM("datapath", C(datapath), "cpu|gpu", QL_CONFIG_DATAPATH_CPU,
	     .doc = "who serves the ring sessions: the CPU dispatchers or a GPU dispatcher"),
	MAP("gpu", .doc = "the GPU dispatcher of datapath: gpu"),
	ENUM("gpu.mode", C(gpu.mode), "auto|device|emulate", QL_GPU_MODE_AUTO,
	     .doc = "the GPU, or its host emulation"),
	INT("gpu.device", C(gpu.device), 0, 1023, 0, .doc = "the CUDA device ordinal"),
	ENUM("bad_requests", C(bad_requests), "answer|drop", 0, .flags = QL_CONFIG_KEY_LATE,
	     .def_doc = "answer (ring), drop (hsb)",
	     .doc = "what a request refused before its handler runs gets"),
	MAP("hsb", .doc = "the page geometry of each hsb session"),
	INT("hsb.pages", C(hsb.pages), 1, QL_HSB_MAX_PAGES, QL_HSB_DEFAULT_PAGES,
	    .doc = "pages per session"),
	/* the least page holds the smallest frame (24 bytes, rounded up to
	 * 128) and the board's 128 bytes of metadata after it */
	INT("hsb.page_size", C(hsb.page_size), 2 * QL_HSB_PAGE_UNIT, QL_HSB_MAX_PAGE_SIZE,
	    QL_HSB_DEFAULT_PAGE_SIZE, .why = "a multiple of 128",
	    .doc = "bytes per page, a multiple of 128"),
	INT("hsb.frame_len", C(hsb.frame_len), 24, QL_HSB_MAX_PAGE_SIZE, 0,
	    .flags = QL_CONFIG_KEY_LATE, .def_doc = "page_size - 128",
	    .doc = "bytes the QCS writes per frame"),
	INT("hsb.resp_size", C(hsb.resp_size), 24, QL_HSB_MAX_PAGE_SIZE, QL_HSB_DEFAULT_RESP_SIZE,
	    .doc = "bytes of each QCS receive buffer"),
	INT("max_sessions", C(max_sessions), 1, QL_CONFIG_MAX_SESSIONS,
	    QL_CONFIG_DEFAULT_MAX_SESSIONS, .doc = "concurrent QCS sessions"),
	{ .path = "builtins",
	  .type = QL_CONFIG_KEY_FLAGS,
	  .off = C(builtins),
	  .values = QL_DEMO_PARITY_NAME "|" QL_DEMO_INCREMENT_NAME,
	  .codes = builtin_codes,
	  .def = QL_CONFIG_BUILTINS_DEFAULT,
	  .max = INT32_MAX,
	  .why = "is not a built-in function",
	  .def_doc = "[" QL_DEMO_PARITY_NAME ", " QL_DEMO_INCREMENT_NAME "]",
	  .doc = "the built-in functions every session serves" },
	{ .path = "plugins",
	  .type = QL_CONFIG_KEY_LIST,
	  .off = C(plugins),
	  .count_off = C(plugins_count),
	  .entry_size = sizeof(struct ql_config_plugin),
	  .line_off = P(line),
	  .max = INT32_MAX,
	  .def_doc = "none",
	  .doc = "handler plugins, each a mapping" },
	STR("plugins.path", P(path), .flags = QL_CONFIG_KEY_REQUIRED | QL_CONFIG_KEY_NOSTORE,
	    .hook = hook_file, .doc = "the plugin's shared library"),
	STR("plugins.config", P(config), .def_doc = "none",
	    .doc = "a string passed to the plugin's init"),
	{ .path = "qcs",
	  .type = QL_CONFIG_KEY_LIST,
	  .off = C(qcs),
	  .count_off = C(qcs_count),
	  .entry_size = sizeof(struct ql_config_qcs),
	  .line_off = Q(line),
	  .max = INT32_MAX,
	  .hook = hook_qcs_entry,
	  .def_doc = "none",
	  .doc = "QCSs qlinkd configures itself (Hololink boards), each a mapping" },
	STR("qcs.kind", Q(kind), .def_doc = "none (required)",
	    .doc = "the QCS's kind: hsb (a Hololink board)"),
	STR("qcs.address", Q(address), .def_doc = "none (required)",
	    .doc = "the board's IPv4 address"),
	INT("qcs.port", Q(port), 1, 65535, QL_HL_PORT, .why = "a UDP port",
	    .doc = "the board's register port"),
	INT("qcs.vp", Q(vp), 0, 31, 0, .why = "one bit of DP_VP_MASK",
	    .doc = "the virtual port qlinkd configures"),
	INT("qcs.vp_address", Q(vp_address), 0, UINT32_MAX - 0x40, 0, .flags = QL_CONFIG_KEY_HEX,
	    .def_doc = "0x1000 + 0x40 x vp", .doc = "the VP's register block, a multiple of 4"),
	INT("qcs.hif_address", Q(hif_address), 0, UINT32_MAX - 0x10, 0, .flags = QL_CONFIG_KEY_HEX,
	    .def_doc = "0x02000300 + 0x10000 x data_plane",
	    .doc = "the board's HIF block, a multiple of 4"),
	INT("qcs.data_plane", Q(data_plane), 0, QL_HSB_MAX_DATA_PLANES - 1, 0,
	    .why = "the board's data plane (HIF block)",
	    .doc = "the data plane whose HIF block qlinkd writes"),
	INT("qcs.mtu", Q(mtu), QL_HSB_ROCE_OVERHEAD + QL_HSB_PAGE, 9216, QL_HSB_ETH_MTU,
	    .why = "the Ethernet MTU (sets DP_PACKET_SIZE)", .doc = "the Ethernet MTU to the host"),
	STR("qcs.hsb_version", Q(layout), .flags = QL_CONFIG_KEY_NOSTORE, .hook = hook_hsb_version,
	    .def_doc = "2.6", .doc = "the board's register layout: 2.6 or 2.5"),
	INT("qcs.qp", Q(qp), 1, 0xffffff, 2, .flags = QL_CONFIG_KEY_HEX,
	    .why = "the board's QP number (24 bits)", .doc = "the board's QP number"),
	STR("qcs.gid", Q(gid), .flags = QL_CONFIG_KEY_NOSTORE, .hook = hook_gid,
	    .def_doc = "::ffff:ADDRESS", .doc = "the board's GID, IPv6 text form"),
	{ .path = "udp",
	  .type = QL_CONFIG_KEY_LIST,
	  .off = C(udp),
	  .count_off = C(udp_count),
	  .entry_size = sizeof(struct ql_config_udp),
	  .line_off = U(line),
	  .max = INT32_MAX,
	  .def_doc = "none",
	  .doc = "CUDA-Q Realtime UDP listeners, each a mapping" },
	STR("udp.listen", U(address), .flags = QL_CONFIG_KEY_REQUIRED | QL_CONFIG_KEY_NOSTORE,
	    .hook = hook_listen, .doc = "PORT (loopback), ADDRESS:PORT or [ADDRESS]:PORT"),
	{ .path = "udp.allow",
	  .type = QL_CONFIG_KEY_STRS,
	  .off = U(allow),
	  .count_off = U(allow_count),
	  .max = INT32_MAX,
	  .hook = hook_cidr,
	  .def_doc = "loopback (127.0.0.0/8, ::1)",
	  .doc = "the addresses and CIDR blocks served" },
	INT("udp.slots", U(slots), 1, QL_UDP_MAX_SLOTS, QL_UDP_DEFAULT_SLOTS,
	    .why = "receive slots", .doc = "receive slots"),
	INT("udp.slot_size", U(slot_size), QL_UDP_MIN_SLOT_SIZE, QL_UDP_MAX_SLOT_SIZE,
	    QL_UDP_DEFAULT_SLOT_SIZE,
	    .why = "bytes of one datagram: a 24-byte header and the arguments",
	    .doc = "the slot stride: bytes of one datagram"),
	INT("udp.busy_poll_us", U(busy_poll_us), 0, 1000000, 0, .why = "SO_BUSY_POLL; 0 for none",
	    .doc = "SO_BUSY_POLL of the socket, in microseconds; 0: none"),
	ENUM("udp.bad_requests", U(bad_requests), "drop|answer", 0, .codes = drop_answer,
	     .doc = "what a refused request gets"),
	INT("udp.cpu", U(cpu), INT32_MIN + 1, INT32_MAX, INT32_MIN,
	    .def_doc = "the least-loaded dispatcher",
	    .doc = "the core of the dispatcher serving it, one of dispatcher.cpu(s)"),
	MAP("log", .doc = "log lines (stderr) and counters (stdout)"),
	ENUM("log.level", C(log.level), "error|warn|info|debug", QL_LOG_INFO,
	     .doc = "the least severe level logged"),
	ENUM("log.format", C(log.format), "text|json", QL_LOG_FORMAT_TEXT,
	     .doc = "text, or one JSON object per line"),
};

static const size_t nkeys = sizeof(keys) / sizeof(keys[0]);
_Static_assert(sizeof(keys) / sizeof(keys[0]) <= NKEYS, "NKEYS: raise it");

const struct ql_config_key *ql_config_keys(size_t *count)
{
	*count = nkeys;
	return keys;
}

static bool seen(const struct ql__config_walk *w, const char *path)
{
	return w->seen[key_index(key_find(path))];
}

/* ---- what one value cannot say alone --------------------------------------- */

/* dispatcher: one core (cpu) or a list of them (cpus), not both; the
 * list's bad entries (reported) left out. */
static int check_dispatcher(struct ql__config_walk *w, struct ql_config *c)
{
	uint32_t n = 0;

	if (seen(w, "dispatcher.cpu") && seen(w, "dispatcher.cpus"))
		ql__diag_add(w->f, ql__yaml_line(w->f, "dispatcher.cpus"),
			     "dispatcher: give cpu (one core) or cpus (a list), not both");
	else
		for (uint32_t i = 0; i < c->dispatcher.cpus_count; i++) {
			int v = c->dispatcher.cpus[i];
			bool dup = false;

			for (uint32_t j = 0; j < i; j++)
				dup = dup || c->dispatcher.cpus[j] == v;
			if (v >= 0 && v < w->ncpu && !dup)
				c->dispatcher.cpus[n++] = v;
		}
	if (!n) {
		free(c->dispatcher.cpus);
		c->dispatcher.cpus = calloc(1, sizeof(int));
		if (!c->dispatcher.cpus)
			return -ENOMEM;
		c->dispatcher.cpus[0] = c->dispatcher.cpu;
		n = 1;
	}
	c->dispatcher.cpus_count = n;
	c->dispatcher.cpu = c->dispatcher.cpus[0];
	return 0;
}

/* qcs: Hololink boards; kind and address are required. */
static void check_qcs(struct ql__config_walk *w, struct ql_config *c)
{
	struct ql_yaml_file *f = w->f;
	unsigned char a4[4];

	for (unsigned i = 0; i < c->qcs_count; i++) {
		const struct ql_config_qcs *q = &c->qcs[i];

		if (!q->kind || strcmp(q->kind, "hsb"))
			ql__diag_add(f, q->kind ? ql__yaml_linef(f, "qcs.%u.kind", i) : q->line,
				     "qcs[%u].kind: %s%s%s (known: hsb)", i,
				     q->kind ? "'" : "required", q->kind ? q->kind : "",
				     q->kind ? "' is not a QCS kind" : "");
		if (!q->address || inet_pton(AF_INET, q->address, a4) != 1)
			ql__diag_add(
				f, q->address ? ql__yaml_linef(f, "qcs.%u.address", i) : q->line,
				"qcs[%u].address: %s%s%s", i, q->address ? "'" : "required",
				q->address ? q->address : "",
				q->address ? "' is not an IPv4 address" : " (the board's IPv4)");
		if ((q->vp_address | q->hif_address) & 3)
			ql__diag_add(f, q->line, "qcs[%u]: register addresses are multiples of 4",
				     i);
		for (unsigned j = 0; j < i; j++)
			if (q->address && c->qcs[j].address &&
			    !strcmp(q->address, c->qcs[j].address) && q->port == c->qcs[j].port &&
			    q->vp == c->qcs[j].vp)
				ql__diag_add(f, q->line,
					     "qcs[%u]: the same board and VP as qcs[%u]", i, j);
	}
}

/* udp: each listener's dispatcher, and binds that would collide. */
static void check_udp(struct ql__config_walk *w, struct ql_config *c)
{
	struct ql_yaml_file *f = w->f;

	for (unsigned i = 0; i < c->udp_count; i++) {
		struct ql_config_udp *u = &c->udp[i];

		if (u->cpu != INT32_MIN) {
			bool found = false;

			for (uint32_t k = 0; k < c->dispatcher.cpus_count; k++)
				found = found || c->dispatcher.cpus[k] == u->cpu;
			if (!found || u->cpu < 0)
				ql__diag_add(f, ql__yaml_linef(f, "udp.%u.cpu", i),
					     "udp[%u].cpu: %d is not the core of a dispatcher "
					     "(dispatcher.cpu or dispatcher.cpus)",
					     i, u->cpu);
		}
		u->cpu = u->cpu == INT32_MIN || u->cpu < 0 ? -1 : u->cpu;
		if (!u->address)
			continue;
		if (binds_overlap(u->address, u->port, c->control.address, c->control.port))
			ql__diag_add(f, u->line,
				     "udp[%u]: %s port %u is the control plane's (control.address "
				     "%s, control.port %u)",
				     i, u->address, u->port, c->control.address, c->control.port);
		for (unsigned j = 0; j < i; j++)
			if (c->udp[j].address &&
			    binds_overlap(u->address, u->port, c->udp[j].address, c->udp[j].port))
				ql__diag_add(f, u->line,
					     "udp[%u]: listens where udp[%u] does (%s port %u)", i,
					     j, c->udp[j].address, c->udp[j].port);
	}
}

/* transport and bad_requests (default: the transport's), the ring and
 * hsb geometries. */
static void check_geometry(struct ql__config_walk *w, struct ql_config *c)
{
	struct ql_yaml_file *f = w->f;
	struct ql_hsb_params g = { 0 };

	if (ql_ring_check_geometry(c->ring.slots, c->ring.slot_size))
		ql__diag_add(f,
			     ql__yaml_line(f, c->ring.slots & (c->ring.slots - 1) ?
						      "ring.slots" :
						      "ring.slot_size"),
			     "%s", ql_error_detail());
	if (!seen(w, "bad_requests"))
		c->bad_requests = c->transport == QL_CONFIG_TRANSPORT_HSB ? QL_BAD_REQUEST_DROP :
									    QL_BAD_REQUEST_ANSWER;
	/* a UC ring's resend cache pairs the k-th response with request k:
	 * every request must be answered (docs/wire-protocol.md §2.3) */
	if (c->transport == QL_CONFIG_TRANSPORT_RING && c->ring.qp == IBV_QPT_UC &&
	    c->bad_requests == QL_BAD_REQUEST_DROP)
		ql__diag_add(f, ql__yaml_line(f, "bad_requests"),
			     "bad_requests: drop is not possible on a UC ring (ring.qp: uc): its "
			     "resend cache needs every request answered");
	/* default: the largest frame that leaves the board's 128 bytes of
	 * metadata room at page + round_up(frame, 128) */
	if (!seen(w, "hsb.frame_len"))
		c->hsb.frame_len = c->hsb.page_size > QL_HSB_METADATA_SIZE ?
					   c->hsb.page_size - QL_HSB_METADATA_SIZE :
					   c->hsb.page_size;
	g.num_pages = c->hsb.pages;
	g.page_size = c->hsb.page_size;
	g.frame_len = c->hsb.frame_len;
	g.resp_size = c->hsb.resp_size;
	if (ql_hsb_params_check(&g))
		ql__diag_add(f,
			     ql__yaml_line(f, seen(w, "hsb.frame_len") ? "hsb.frame_len" :
					      seen(w, "hsb.page_size") ? "hsb.page_size" :
					      seen(w, "hsb")	       ? "hsb" :
									 "transport"),
			     "%s", ql_error_detail());
	if (!ql_ring_check_geometry(c->ring.slots, c->ring.slot_size))
		check_ring_memory(f, c);
}

/* datapath: gpu serves the ring over RC, or hsb, with its own handlers: no
 * UC ring, plugins, boards or UDP listeners, and of the built-ins only
 * qlink_parity. */
static void check_datapath(struct ql__config_walk *w, struct ql_config *c)
{
	struct ql_yaml_file *f = w->f;
	unsigned line = ql__yaml_line(f, "datapath");

	if (c->datapath != QL_CONFIG_DATAPATH_GPU)
		return;
	if (c->transport == QL_CONFIG_TRANSPORT_RING && c->ring.qp != IBV_QPT_RC)
		ql__diag_add(f, line, "datapath: gpu serves the ring over RC only (ring.qp: rc)");
	if (c->plugins_count)
		ql__diag_add(f, line,
			     "datapath: gpu takes no plugins (CPU handlers); its "
			     "handlers are built for the GPU (docs/gpu.md)");
	if (c->qcs_count || c->udp_count)
		ql__diag_add(f, line,
			     "datapath: gpu serves the QCSs' ring or hsb sessions only "
			     "(no qcs: or udp:)");
	if (seen(w, "builtins") && (c->builtins & QL_CONFIG_BUILTIN_INCREMENT))
		ql__diag_add(f, ql__yaml_line(f, "builtins"),
			     "builtins: %s has no GPU build (datapath: gpu)",
			     QL_DEMO_INCREMENT_NAME);
	c->builtins &= QL_CONFIG_BUILTIN_PARITY;
}

/* Plugins without a path (reported) are left out. */
static void drop_pathless_plugins(struct ql_config *c)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < c->plugins_count; i++) {
		if (c->plugins[i].path)
			c->plugins[n++] = c->plugins[i];
		else
			free(c->plugins[i].config);
	}
	c->plugins_count = n;
}

/* Diagnostics in the file's order (stable: one line's stay in the order
 * found). */
static void sort_diags(struct ql_diags *d)
{
	for (unsigned i = 1; i < d->count; i++) {
		struct ql_diag x = d->d[i];
		unsigned j = i;

		for (; j > 0 && d->d[j - 1].line > x.line; j--)
			d->d[j] = d->d[j - 1];
		d->d[j] = x;
	}
}

static int build_config(struct ql_yaml_file *f, void *raw, void *ctx)
{
	struct ql__config_walk w = { .f = f, .c = ctx, .ncpu = ql_cpu_count() };
	struct ql_config *c = ctx;
	yaml_node_t *root = yaml_document_get_root_node(&f->doc);
	int ret;

	(void)raw;
	c->path = strdup(f->path);
	if (!c->path)
		return -ENOMEM;
	ret = apply_defaults(&w, NULL, c);
	if (!ret && root->type != YAML_MAPPING_NODE)
		ql__diag_add(f, ql__yaml_node_line(root),
			     "wrong type: expected a mapping, found %s", ql__yaml_node_kind(root));
	else if (!ret)
		ret = walk_map(&w, root, "", "", c);
	if (!ret)
		ret = check_dispatcher(&w, c);
	if (ret)
		return ret;
	drop_pathless_plugins(c);
	check_geometry(&w, c);
	check_qcs(&w, c);
	check_udp(&w, c);
	check_datapath(&w, c);
	/* sessions made at start take their places among max_sessions */
	if (c->qcs_count + c->udp_count > c->max_sessions)
		ql__diag_add(f,
			     ql__yaml_line(f, seen(&w, "max_sessions") ? "max_sessions" :
					      c->udp_count	       ? "udp" :
									 "qcs"),
			     "max_sessions: %u is fewer than the %u sessions qcs and udp make at "
			     "start (each takes one of max_sessions)",
			     c->max_sessions, c->qcs_count + c->udp_count);
	sort_diags(f->diags);
	return 0;
}

/* Load; with keep_partial, *out is also set when the file was read and
 * built but has problems (absent or bad keys hold their defaults). */
static int config_load(const char *path, struct ql_config **out, struct ql_diags *diags,
		       bool keep_partial)
{
	struct ql_diags local;
	struct ql_config *c;
	int ret;

	*out = NULL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	ret = ql__yaml_load(path, NULL, diags ? diags : &local, build_config, c);
	if (ret && !(keep_partial && ret == -EINVAL && c->path)) {
		ql_config_free(c);
		return ret;
	}
	*out = c;
	return ret;
}

int ql_config_load(const char *path, struct ql_config **out, struct ql_diags *diags)
{
	return config_load(path, out, diags, false);
}

int ql_config_check(const char *path, struct ql_config **out, struct ql_diags *diags)
{
	return config_load(path, out, diags, true);
}
