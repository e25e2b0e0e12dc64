/* SPDX-License-Identifier: MIT */
/*
 * The qlinkd configuration file (see config/config.h). libcyaml loads the
 * file into a raw struct whose scalars are pointers, so that an absent key
 * (NULL) can be told from one set to zero; the raw struct is then checked
 * key by key and copied into struct ql_config with the defaults filled in.
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

struct raw_control {
	char *address;
	int64_t *port;
	char *secret_file;
	char **allow;
	unsigned allow_count;
};

struct raw_dispatcher {
	int64_t *cpu;
	int64_t *cpus;
	unsigned cpus_count;
	int64_t *burst;
	char *idle;
	int64_t *idle_after_us;
	int64_t *sleep_us;
	int64_t *call_deadline_ms;
};

struct raw_ring {
	int64_t *slots;
	int64_t *slot_size;
	char *qp;
};

struct raw_hsb {
	int64_t *pages;
	int64_t *page_size;
	int64_t *frame_len;
	int64_t *resp_size;
};

struct raw_plugin {
	char *path;
	char *config;
};

struct raw_qcs {
	char *kind;
	char *address;
	int64_t *port;
	int64_t *vp;
	int64_t *vp_address;
	int64_t *hif_address;
	int64_t *data_plane;
	int64_t *mtu;
	char *hsb_version;
	int64_t *qp;
	char *gid;
};

struct raw_udp {
	char *listen;
	int64_t *slots;
	int64_t *slot_size;
	int64_t *busy_poll_us;
	char *bad_requests;
	int64_t *cpu;
	char **allow;
	unsigned allow_count;
};

struct raw_log {
	char *level;
	char *format;
};

struct raw_gpu {
	char *mode;
	int64_t *device;
};

struct raw_config {
	char *device;
	char *datapath;
	struct raw_gpu *gpu;
	struct raw_control *control;
	struct raw_dispatcher *dispatcher;
	struct raw_ring *ring;
	char *transport;
	char *bad_requests;
	struct raw_hsb *hsb;
	int64_t *max_sessions;
	struct raw_plugin *plugins;
	unsigned plugins_count;
	struct raw_qcs *qcs;
	unsigned qcs_count;
	struct raw_udp *udp;
	unsigned udp_count;
	char **builtins;
	unsigned builtins_count;
	struct raw_log *log;
};

#define OPT (CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL)
#define STR(key, type, member) CYAML_FIELD_STRING_PTR(key, OPT, type, member, 0, CYAML_UNLIMITED)

static const cyaml_schema_value_t string_entry = {
	CYAML_VALUE_STRING(CYAML_FLAG_POINTER, char, 0, CYAML_UNLIMITED),
};

static const cyaml_schema_field_t control_fields[] = {
	STR("address", struct raw_control, address),
	CYAML_FIELD_INT_PTR("port", OPT, struct raw_control, port),
	STR("secret_file", struct raw_control, secret_file),
	CYAML_FIELD_SEQUENCE("allow", OPT, struct raw_control, allow, &string_entry, 0,
			     CYAML_UNLIMITED),
	CYAML_FIELD_END,
};

static const cyaml_schema_value_t int_entry = {
	CYAML_VALUE_INT(CYAML_FLAG_DEFAULT, int64_t),
};

static const cyaml_schema_field_t dispatcher_fields[] = {
	CYAML_FIELD_INT_PTR("cpu", OPT, struct raw_dispatcher, cpu),
	/* at least one core: libcyaml reports an empty list with its line */
	CYAML_FIELD_SEQUENCE("cpus", OPT, struct raw_dispatcher, cpus, &int_entry, 1,
			     CYAML_UNLIMITED),
	CYAML_FIELD_INT_PTR("burst", OPT, struct raw_dispatcher, burst),
	STR("idle", struct raw_dispatcher, idle),
	CYAML_FIELD_INT_PTR("idle_after_us", OPT, struct raw_dispatcher, idle_after_us),
	CYAML_FIELD_INT_PTR("sleep_us", OPT, struct raw_dispatcher, sleep_us),
	CYAML_FIELD_INT_PTR("call_deadline_ms", OPT, struct raw_dispatcher, call_deadline_ms),
	CYAML_FIELD_END,
};

static const cyaml_schema_field_t ring_fields[] = {
	CYAML_FIELD_INT_PTR("slots", OPT, struct raw_ring, slots),
	CYAML_FIELD_INT_PTR("slot_size", OPT, struct raw_ring, slot_size),
	STR("qp", struct raw_ring, qp),
	CYAML_FIELD_END,
};

static const cyaml_schema_field_t hsb_fields[] = {
	CYAML_FIELD_INT_PTR("pages", OPT, struct raw_hsb, pages),
	CYAML_FIELD_INT_PTR("page_size", OPT, struct raw_hsb, page_size),
	CYAML_FIELD_INT_PTR("frame_len", OPT, struct raw_hsb, frame_len),
	CYAML_FIELD_INT_PTR("resp_size", OPT, struct raw_hsb, resp_size),
	CYAML_FIELD_END,
};

static const cyaml_schema_field_t plugin_fields[] = {
	CYAML_FIELD_STRING_PTR("path", CYAML_FLAG_POINTER, struct raw_plugin, path, 1,
			       CYAML_UNLIMITED),
	STR("config", struct raw_plugin, config),
	CYAML_FIELD_END,
};

static const cyaml_schema_value_t plugin_entry = {
	CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct raw_plugin, plugin_fields),
};

static const cyaml_schema_field_t qcs_fields[] = {
	STR("kind", struct raw_qcs, kind),
	STR("address", struct raw_qcs, address),
	CYAML_FIELD_INT_PTR("port", OPT, struct raw_qcs, port),
	CYAML_FIELD_INT_PTR("vp", OPT, struct raw_qcs, vp),
	CYAML_FIELD_INT_PTR("vp_address", OPT, struct raw_qcs, vp_address),
	CYAML_FIELD_INT_PTR("hif_address", OPT, struct raw_qcs, hif_address),
	CYAML_FIELD_INT_PTR("data_plane", OPT, struct raw_qcs, data_plane),
	CYAML_FIELD_INT_PTR("mtu", OPT, struct raw_qcs, mtu),
	STR("hsb_version", struct raw_qcs, hsb_version),
	CYAML_FIELD_INT_PTR("qp", OPT, struct raw_qcs, qp),
	STR("gid", struct raw_qcs, gid),
	CYAML_FIELD_END,
};

static const cyaml_schema_value_t qcs_entry = {
	CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct raw_qcs, qcs_fields),
};

static const cyaml_schema_field_t udp_fields[] = {
	CYAML_FIELD_STRING_PTR("listen", CYAML_FLAG_POINTER, struct raw_udp, listen, 0,
			       CYAML_UNLIMITED),
	CYAML_FIELD_INT_PTR("slots", OPT, struct raw_udp, slots),
	CYAML_FIELD_INT_PTR("slot_size", OPT, struct raw_udp, slot_size),
	CYAML_FIELD_INT_PTR("busy_poll_us", OPT, struct raw_udp, busy_poll_us),
	STR("bad_requests", struct raw_udp, bad_requests),
	CYAML_FIELD_INT_PTR("cpu", OPT, struct raw_udp, cpu),
	CYAML_FIELD_SEQUENCE("allow", OPT, struct raw_udp, allow, &string_entry, 0,
			     CYAML_UNLIMITED),
	CYAML_FIELD_END,
};

static const cyaml_schema_value_t udp_entry = {
	CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct raw_udp, udp_fields),
};

static const cyaml_schema_field_t log_fields[] = {
	STR("level", struct raw_log, level),
	STR("format", struct raw_log, format),
	CYAML_FIELD_END,
};

static const cyaml_schema_field_t gpu_fields[] = {
	STR("mode", struct raw_gpu, mode),
	CYAML_FIELD_INT_PTR("device", OPT, struct raw_gpu, device),
	CYAML_FIELD_END,
};

static const cyaml_schema_field_t top_fields[] = {
	STR("device", struct raw_config, device),
	STR("datapath", struct raw_config, datapath),
	CYAML_FIELD_MAPPING_PTR("gpu", OPT, struct raw_config, gpu, gpu_fields),
	CYAML_FIELD_MAPPING_PTR("control", OPT, struct raw_config, control, control_fields),
	CYAML_FIELD_MAPPING_PTR("dispatcher", OPT, struct raw_config, dispatcher,
				dispatcher_fields),
	CYAML_FIELD_MAPPING_PTR("ring", OPT, struct raw_config, ring, ring_fields),
	STR("transport", struct raw_config, transport),
	STR("bad_requests", struct raw_config, bad_requests),
	CYAML_FIELD_MAPPING_PTR("hsb", OPT, struct raw_config, hsb, hsb_fields),
	CYAML_FIELD_INT_PTR("max_sessions", OPT, struct raw_config, max_sessions),
	CYAML_FIELD_SEQUENCE("plugins", OPT, struct raw_config, plugins, &plugin_entry, 0,
			     CYAML_UNLIMITED),
	CYAML_FIELD_SEQUENCE("qcs", OPT, struct raw_config, qcs, &qcs_entry, 0, CYAML_UNLIMITED),
	CYAML_FIELD_SEQUENCE("udp", OPT, struct raw_config, udp, &udp_entry, 0, CYAML_UNLIMITED),
	CYAML_FIELD_SEQUENCE("builtins", OPT, struct raw_config, builtins, &string_entry, 0,
			     CYAML_UNLIMITED),
	CYAML_FIELD_MAPPING_PTR("log", OPT, struct raw_config, log, log_fields),
	CYAML_FIELD_END,
};

static const cyaml_schema_value_t top_schema = {
	CYAML_VALUE_MAPPING(CYAML_FLAG_POINTER, struct raw_config, top_fields),
};

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

/* An integer key within [min, max], or the default when absent. */
static int64_t int_key(struct ql_yaml_file *f, const int64_t *v, const char *path, int64_t min,
		       int64_t max, int64_t def, const char *why)
{
	if (!v)
		return def;
	if (*v < min || *v > max) {
		ql__diag_add(f, ql__yaml_line(f, path), "%s: %lld is out of range (%lld..%lld%s%s)",
			     path, (long long)*v, (long long)min, (long long)max, why ? "; " : "",
			     why ? why : "");
		return def;
	}
	return *v;
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

static int name_index(const char *s, const char *const *names, int n)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(s, names[i]))
			return i;
	return -1;
}

/* dispatcher: one core (cpu) or a list of them (cpus), one dispatcher
 * thread each, and the idle policy they share. */
static int convert_dispatcher(struct ql_yaml_file *f, const struct raw_dispatcher *rd,
			      struct ql_config *c, int ncpu)
{
	enum ql_idle_policy idle = QL_IDLE_SPIN;
	unsigned used_list = 0;

	c->dispatcher.cpu = (int)int_key(f, rd ? rd->cpu : NULL, "dispatcher.cpu", -1, ncpu - 1, -1,
					 "-1 for no pinning; this host's CPUs");
	c->dispatcher.burst = (uint32_t)int_key(f, rd ? rd->burst : NULL, "dispatcher.burst", 1, 32,
						QL_CONFIG_DEFAULT_BURST, NULL);
	c->dispatcher.cpus = calloc(rd && rd->cpus_count ? rd->cpus_count : 1, sizeof(int));
	if (!c->dispatcher.cpus)
		return -ENOMEM;
	c->dispatcher.cpus[0] = c->dispatcher.cpu;
	c->dispatcher.cpus_count = 1;
	if (rd && rd->cpus && rd->cpu)
		ql__diag_add(f, ql__yaml_line(f, "dispatcher.cpus"),
			     "dispatcher: give cpu (one core) or cpus (a list), not both");
	for (unsigned i = 0; rd && rd->cpus && !rd->cpu && i < rd->cpus_count; i++) {
		unsigned line = ql__yaml_linef(f, "dispatcher.cpus.%u", i);
		int64_t v = rd->cpus[i];

		if (v < 0 || v >= ncpu) {
			ql__diag_add(f, line,
				     "dispatcher.cpus[%u]: %lld is not a CPU of this host (0..%d)",
				     i, (long long)v, ncpu - 1);
			continue;
		}
		for (unsigned j = 0; j < i; j++)
			if (rd->cpus[j] == v) {
				ql__diag_add(f, line,
					     "dispatcher.cpus[%u]: cpu %lld is listed twice (one "
					     "dispatcher per core)",
					     i, (long long)v);
				v = -1;
				break;
			}
		if (v < 0)
			continue;
		if (!used_list++)
			c->dispatcher.cpus_count = 0;
		c->dispatcher.cpus[c->dispatcher.cpus_count++] = (int)v;
	}
	c->dispatcher.cpu = c->dispatcher.cpus[0];
	if (rd && rd->idle && ql_idle_policy_parse(rd->idle, &idle))
		ql__diag_add(f, ql__yaml_line(f, "dispatcher.idle"),
			     "dispatcher.idle: '%s' is not one of spin, yield, sleep", rd->idle);
	c->dispatcher.idle = (uint32_t)idle;
	c->dispatcher.idle_after_us =
		(uint32_t)int_key(f, rd ? rd->idle_after_us : NULL, "dispatcher.idle_after_us", 1,
				  1000000, QL_CONFIG_DEFAULT_IDLE_AFTER_US, "at most a second");
	c->dispatcher.sleep_us = (uint32_t)int_key(f, rd ? rd->sleep_us : NULL,
						   "dispatcher.sleep_us", 1, 100000,
						   QL_CONFIG_DEFAULT_SLEEP_US, "at most 100 ms");
	c->dispatcher.call_deadline_ms = (uint32_t)int_key(
		f, rd ? rd->call_deadline_ms : NULL, "dispatcher.call_deadline_ms", 0, 3600000,
		QL_CONFIG_DEFAULT_CALL_DEADLINE_MS, "0 (no deadline) up to an hour");
	return 0;
}

/* qcs: QCSs qlinkd configures itself. Kind hsb: a Hololink board's IPv4
 * address (qlinkd talks to no other), its register port, the VP and, for
 * boards that report other ones, the VP and HIF block addresses. */
static int convert_qcs(struct ql_yaml_file *f, const struct raw_config *r, struct ql_config *c)
{
	unsigned char a4[4];

	if (r->qcs_count) {
		c->qcs = calloc(r->qcs_count, sizeof(*c->qcs));
		if (!c->qcs)
			return -ENOMEM;
	}
	for (unsigned i = 0; i < r->qcs_count; i++) {
		const struct raw_qcs *rq = &r->qcs[i];
		struct ql_config_qcs *q = &c->qcs[i];
		char key[64];

		q->line = ql__yaml_linef(f, "qcs.%u", i);
		q->kind = ql__strdup0(rq->kind);
		q->address = ql__strdup0(rq->address);
		if ((rq->kind && !q->kind) || (rq->address && !q->address))
			return -ENOMEM;
		c->qcs_count++;
		if (!rq->kind || strcmp(rq->kind, "hsb"))
			ql__diag_add(f, rq->kind ? ql__yaml_linef(f, "qcs.%u.kind", i) : q->line,
				     "qcs[%u].kind: %s%s%s (known: hsb)", i,
				     rq->kind ? "'" : "required", rq->kind ? rq->kind : "",
				     rq->kind ? "' is not a QCS kind" : "");
		if (!rq->address || inet_pton(AF_INET, rq->address, a4) != 1)
			ql__diag_add(
				f, rq->address ? ql__yaml_linef(f, "qcs.%u.address", i) : q->line,
				"qcs[%u].address: %s%s%s", i, rq->address ? "'" : "required",
				rq->address ? rq->address : "",
				rq->address ? "' is not an IPv4 address" : " (the board's IPv4)");
		snprintf(key, sizeof(key), "qcs.%u.port", i);
		q->port = (uint32_t)int_key(f, rq->port, key, 1, 65535, 8192, "a UDP port");
		snprintf(key, sizeof(key), "qcs.%u.vp", i);
		q->vp = (uint32_t)int_key(f, rq->vp, key, 0, 31, 0, "one bit of DP_VP_MASK");
		snprintf(key, sizeof(key), "qcs.%u.vp_address", i);
		q->vp_address =
			(uint32_t)int_key(f, rq->vp_address, key, 0, UINT32_MAX - 0x40, 0, NULL);
		snprintf(key, sizeof(key), "qcs.%u.hif_address", i);
		q->hif_address =
			(uint32_t)int_key(f, rq->hif_address, key, 0, UINT32_MAX - 0x10, 0, NULL);
		snprintf(key, sizeof(key), "qcs.%u.data_plane", i);
		q->data_plane = (uint32_t)int_key(f, rq->data_plane, key, 0,
						  QL_HSB_MAX_DATA_PLANES - 1, 0,
						  "the board's data plane (HIF block)");
		snprintf(key, sizeof(key), "qcs.%u.mtu", i);
		q->mtu = (uint32_t)int_key(f, rq->mtu, key, QL_HSB_ROCE_OVERHEAD + QL_HSB_PAGE,
					   9216, QL_HSB_ETH_MTU,
					   "the Ethernet MTU (sets DP_PACKET_SIZE)");
		if (rq->hsb_version && ql_hsb_layout_parse(rq->hsb_version, &q->layout))
			ql__diag_add(f, ql__yaml_linef(f, "qcs.%u.hsb_version", i),
				     "qcs[%u].hsb_version: '%s' is not a supported HSB version "
				     "(2.6: 2.6.0 and later; 2.5: before 2.6.0)",
				     i, rq->hsb_version);
		snprintf(key, sizeof(key), "qcs.%u.qp", i);
		q->qp = (uint32_t)int_key(f, rq->qp, key, 1, 0xffffff, 2,
					  "the board's QP number (24 bits)");
		/* the board's GID: by default its address, IPv4-mapped */
		q->gid[10] = q->gid[11] = 0xff;
		if (q->address && inet_pton(AF_INET, q->address, a4) == 1)
			memcpy(q->gid + 12, a4, 4);
		if (rq->gid && inet_pton(AF_INET6, rq->gid, q->gid) != 1)
			ql__diag_add(f, ql__yaml_linef(f, "qcs.%u.gid", i),
				     "qcs[%u].gid: '%s' is not a GID (IPv6 text form)", i, rq->gid);
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
	return 0;
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

/* udp: CUDA-Q UDP listeners, each a session made at start. */
static int convert_udp(struct ql_yaml_file *f, const struct raw_config *r, struct ql_config *c)
{
	static const char *const policies[] = { "answer", "drop" };

	if (r->udp_count) {
		c->udp = calloc(r->udp_count, sizeof(*c->udp));
		if (!c->udp)
			return -ENOMEM;
	}
	for (unsigned i = 0; i < r->udp_count; i++) {
		const struct raw_udp *ru = &r->udp[i];
		struct ql_config_udp *u = &c->udp[i];
		const char *why;
		char key[64];

		u->line = ql__yaml_linef(f, "udp.%u", i);
		c->udp_count++;
		if (ru->listen[0] && strspn(ru->listen, "0123456789") == strlen(ru->listen) &&
		    strlen(ru->listen) <= 5) {
			/* a bare port: loopback (an address must be written to
			 * listen wider) */
			char lo[32];

			snprintf(lo, sizeof(lo), "127.0.0.1:%s", ru->listen);
			why = parse_listen(lo, &u->address, &u->port);
		} else {
			why = parse_listen(ru->listen, &u->address, &u->port);
		}
		if (why && !u->address && !strcmp(why, "out of memory"))
			return -ENOMEM;
		if (why)
			ql__diag_add(f, ql__yaml_linef(f, "udp.%u.listen", i),
				     "udp[%u].listen: '%s': %s", i, ru->listen, why);
		snprintf(key, sizeof(key), "udp.%u.slots", i);
		u->slots = (uint32_t)int_key(f, ru->slots, key, 1, QL_UDP_MAX_SLOTS,
					     QL_UDP_DEFAULT_SLOTS, "receive slots");
		snprintf(key, sizeof(key), "udp.%u.slot_size", i);
		u->slot_size = (uint32_t)int_key(
			f, ru->slot_size, key, QL_UDP_MIN_SLOT_SIZE, QL_UDP_MAX_SLOT_SIZE,
			QL_UDP_DEFAULT_SLOT_SIZE,
			"bytes of one datagram: a 24-byte header and the arguments");
		snprintf(key, sizeof(key), "udp.%u.busy_poll_us", i);
		u->busy_poll_us = (uint32_t)int_key(f, ru->busy_poll_us, key, 0, 1000000, 0,
						    "SO_BUSY_POLL; 0 for none");
		u->bad_requests = QL_BAD_REQUEST_DROP;
		if (ru->bad_requests) {
			int k = name_index(ru->bad_requests, policies, 2);

			if (k < 0)
				ql__diag_add(
					f, ql__yaml_linef(f, "udp.%u.bad_requests", i),
					"udp[%u].bad_requests: '%s' is not one of drop, answer", i,
					ru->bad_requests);
			else
				u->bad_requests = (enum ql_bad_request_policy)k;
		}
		if (ru->allow_count) {
			u->allow = calloc(ru->allow_count, sizeof(char *));
			if (!u->allow)
				return -ENOMEM;
		}
		for (unsigned k = 0; k < ru->allow_count; k++) {
			u->allow[k] = strdup(ru->allow[k]);
			if (!u->allow[k])
				return -ENOMEM;
			u->allow_count++;
			if (!valid_cidr(ru->allow[k]))
				ql__diag_add(f, ql__yaml_linef(f, "udp.%u.allow.%u", i, k),
					     "udp[%u].allow[%u]: '%s' is not an address or CIDR "
					     "block (e.g. 10.0.0.0/8, fd00::/8)",
					     i, k, ru->allow[k]);
		}
		u->cpu = -1;
		if (ru->cpu) {
			bool found = false;

			for (uint32_t k = 0; k < c->dispatcher.cpus_count; k++)
				found = found || c->dispatcher.cpus[k] == *ru->cpu;
			if (!found || *ru->cpu < 0)
				ql__diag_add(f, ql__yaml_linef(f, "udp.%u.cpu", i),
					     "udp[%u].cpu: %lld is not the core of a dispatcher "
					     "(dispatcher.cpu or dispatcher.cpus)",
					     i, (long long)*ru->cpu);
			else
				u->cpu = (int)*ru->cpu;
		}
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
	return 0;
}

/* Whether the file has this top-level key (libcyaml leaves an empty list
 * and an absent one alike NULL). */
static bool top_key_present(struct ql_yaml_file *f, const char *key)
{
	yaml_node_t *root = f->have_doc ? yaml_document_get_root_node(&f->doc) : NULL;

	if (!root || root->type != YAML_MAPPING_NODE)
		return false;
	for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top;
	     p++) {
		yaml_node_t *k = yaml_document_get_node(&f->doc, p->key);

		if (k && k->type == YAML_SCALAR_NODE && k->data.scalar.length == strlen(key) &&
		    !memcmp(k->data.scalar.value, key, strlen(key)))
			return true;
	}
	return false;
}

/* builtins: the built-in functions every session registers (default all;
 * [] for none, e.g. when a plugin brings its own rpc_increment). */
static void convert_builtins(struct ql_yaml_file *f, const struct raw_config *r,
			     struct ql_config *c)
{
	c->builtins = QL_CONFIG_BUILTINS_DEFAULT;
	if (!r->builtins && !top_key_present(f, "builtins"))
		return;
	c->builtins = 0;
	for (unsigned i = 0; i < r->builtins_count; i++) {
		unsigned line = ql__yaml_linef(f, "builtins.%u", i);
		uint32_t bit = 0;

		for (size_t k = 0; k < sizeof(builtin_names) / sizeof(builtin_names[0]); k++)
			if (!strcmp(r->builtins[i], builtin_names[k].name))
				bit = builtin_names[k].bit;
		if (!bit)
			ql__diag_add(
				f, line,
				"builtins[%u]: '%s' is not a built-in function (known: %s, %s)", i,
				r->builtins[i], QL_DEMO_PARITY_NAME, QL_DEMO_INCREMENT_NAME);
		else if (c->builtins & bit)
			ql__diag_add(f, line, "builtins[%u]: '%s' is listed twice", i,
				     r->builtins[i]);
		c->builtins |= bit;
	}
}

/* transport: ring|hsb, bad_requests: answer|drop (default: the
 * transport's), hsb: the page geometry (checked as a QCS is programmed). */
static void convert_transport(struct ql_yaml_file *f, const struct raw_config *r,
			      struct ql_config *c)
{
	static const char *const transports[] = { "ring", "hsb" };
	static const char *const policies[] = { "answer", "drop" };
	const struct raw_hsb *h = r->hsb;
	struct ql_hsb_params g = { 0 };
	int i;

	c->transport = QL_CONFIG_TRANSPORT_RING;
	if (r->transport) {
		i = name_index(r->transport, transports, 2);
		if (i < 0)
			ql__diag_add(f, ql__yaml_line(f, "transport"),
				     "transport: '%s' is not one of ring, hsb", r->transport);
		else
			c->transport = (enum ql_config_transport)i;
	}
	c->bad_requests = c->transport == QL_CONFIG_TRANSPORT_HSB ? QL_BAD_REQUEST_DROP :
								    QL_BAD_REQUEST_ANSWER;
	if (r->bad_requests) {
		i = name_index(r->bad_requests, policies, 2);
		if (i < 0)
			ql__diag_add(f, ql__yaml_line(f, "bad_requests"),
				     "bad_requests: '%s' is not one of answer, drop",
				     r->bad_requests);
		else
			c->bad_requests = (enum ql_bad_request_policy)i;
	}
	/* a UC ring's resend cache pairs the k-th response with request k:
	 * every request must be answered (docs/wire-protocol.md §2.3) */
	if (c->transport == QL_CONFIG_TRANSPORT_RING && c->ring.qp == IBV_QPT_UC &&
	    c->bad_requests == QL_BAD_REQUEST_DROP)
		ql__diag_add(f, ql__yaml_line(f, "bad_requests"),
			     "bad_requests: drop is not possible on a UC ring (ring.qp: uc): its "
			     "resend cache needs every request answered");
	c->hsb.pages = (uint32_t)int_key(f, h ? h->pages : NULL, "hsb.pages", 1, QL_HSB_MAX_PAGES,
					 QL_HSB_DEFAULT_PAGES, NULL);
	c->hsb.page_size = (uint32_t)int_key(f, h ? h->page_size : NULL, "hsb.page_size",
					     QL_HSB_PAGE_UNIT, QL_HSB_MAX_PAGE_SIZE,
					     QL_HSB_DEFAULT_PAGE_SIZE, "a multiple of 128");
	/* default: the largest frame that leaves the board's 128 bytes of
	 * metadata room at page + round_up(frame, 128) */
	c->hsb.frame_len = (uint32_t)int_key(f, h ? h->frame_len : NULL, "hsb.frame_len", 24,
					     QL_HSB_MAX_PAGE_SIZE,
					     c->hsb.page_size > QL_HSB_METADATA_SIZE ?
						     c->hsb.page_size - QL_HSB_METADATA_SIZE :
						     c->hsb.page_size,
					     NULL);
	c->hsb.resp_size = (uint32_t)int_key(f, h ? h->resp_size : NULL, "hsb.resp_size", 24,
					     QL_HSB_MAX_PAGE_SIZE, QL_HSB_DEFAULT_RESP_SIZE, NULL);
	g.num_pages = c->hsb.pages;
	g.page_size = c->hsb.page_size;
	g.frame_len = c->hsb.frame_len;
	g.resp_size = c->hsb.resp_size;
	if (ql_hsb_params_check(&g))
		ql__diag_add(f,
			     ql__yaml_line(f, h && h->frame_len ? "hsb.frame_len" :
					      h			? "hsb" :
								  "transport"),
			     "%s", ql_error_detail());
}

/* datapath: cpu|gpu, gpu: mode and device. The GPU dispatcher serves the
 * ring over RC, or hsb, with its own handlers: no UC ring, plugins, boards
 * or UDP listeners, and of the built-ins only qlink_parity. */
static void convert_datapath(struct ql_yaml_file *f, const struct raw_config *r,
			     struct ql_config *c)
{
	static const char *const datapaths[] = { "cpu", "gpu" };
	static const char *const modes[] = { "auto", "device", "emulate" };
	unsigned line = ql__yaml_line(f, "datapath");
	int i;

	c->datapath = QL_CONFIG_DATAPATH_CPU;
	c->gpu.mode = QL_GPU_MODE_AUTO;
	if (r->datapath) {
		i = name_index(r->datapath, datapaths, 2);
		if (i < 0)
			ql__diag_add(f, line, "datapath: '%s' is not one of cpu, gpu", r->datapath);
		else
			c->datapath = (enum ql_config_datapath)i;
	}
	if (r->gpu && r->gpu->mode) {
		i = name_index(r->gpu->mode, modes, 3);
		if (i < 0)
			ql__diag_add(f, ql__yaml_line(f, "gpu.mode"),
				     "gpu.mode: '%s' is not one of auto, device, emulate",
				     r->gpu->mode);
		else
			c->gpu.mode = (uint32_t)i;
	}
	c->gpu.device =
		(int)int_key(f, r->gpu ? r->gpu->device : NULL, "gpu.device", 0, 1023, 0, NULL);
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
	if (top_key_present(f, "builtins") && (c->builtins & QL_CONFIG_BUILTIN_INCREMENT))
		ql__diag_add(f, ql__yaml_line(f, "builtins"),
			     "builtins: %s has no GPU build (datapath: gpu)",
			     QL_DEMO_INCREMENT_NAME);
	c->builtins &= QL_CONFIG_BUILTIN_PARITY;
}

static int convert(struct ql_yaml_file *f, const struct raw_config *r, struct ql_config *c)
{
	const struct raw_control *rc = r->control;
	const struct raw_dispatcher *rd = r->dispatcher;
	const struct raw_ring *rr = r->ring;
	int ncpu = ql_cpu_count();

	c->path = strdup(f->path);
	c->device = strdup(r->device ? r->device : QL_CONFIG_DEFAULT_DEVICE);
	c->control.address = strdup(rc && rc->address ? rc->address : QL_CONFIG_DEFAULT_ADDRESS);
	if (!c->path || !c->device || !c->control.address)
		return -ENOMEM;
	check_device(f, c->device);
	if (!valid_address(c->control.address))
		ql__diag_add(f, ql__yaml_line(f, "control.address"),
			     "control.address: '%s' is not an IPv4 or IPv6 address",
			     c->control.address);
	c->control.port = (uint32_t)int_key(f, rc ? rc->port : NULL, "control.port", 1, 65535,
					    QL_CONFIG_DEFAULT_PORT, "a UDP port");
	if (rc && rc->secret_file) {
		c->control.secret_file = resolve_path(f->path, rc->secret_file);
		if (!c->control.secret_file)
			return -ENOMEM;
		if (access(c->control.secret_file, R_OK))
			ql__diag_add(f, ql__yaml_line(f, "control.secret_file"),
				     "control.secret_file: cannot read '%s': %s",
				     c->control.secret_file, strerror(errno));
	}
	if (rc && rc->allow_count) {
		c->control.allow = calloc(rc->allow_count, sizeof(char *));
		if (!c->control.allow)
			return -ENOMEM;
		for (unsigned i = 0; i < rc->allow_count; i++) {
			c->control.allow[i] = strdup(rc->allow[i]);
			if (!c->control.allow[i])
				return -ENOMEM;
			c->control.allow_count++;
			if (!valid_cidr(rc->allow[i]))
				ql__diag_add(f, ql__yaml_linef(f, "control.allow.%u", i),
					     "control.allow[%u]: '%s' is not an address or CIDR "
					     "block (e.g. 10.0.0.0/8, fd00::/8)",
					     i, rc->allow[i]);
		}
	}
	if (convert_dispatcher(f, rd, c, ncpu))
		return -ENOMEM;
	c->ring.slots = (uint32_t)int_key(f, rr ? rr->slots : NULL, "ring.slots", 1,
					  QL_RING_MAX_SLOTS, QL_CONFIG_DEFAULT_SLOTS, NULL);
	c->ring.slot_size = (uint32_t)int_key(f, rr ? rr->slot_size : NULL, "ring.slot_size",
					      QL_RING_MIN_SLOT, QL_RING_MAX_SLOT,
					      QL_CONFIG_DEFAULT_SLOT_SIZE, NULL);
	c->ring.qp = IBV_QPT_RC;
	if (rr && rr->qp) {
		if (!strcmp(rr->qp, "uc"))
			c->ring.qp = IBV_QPT_UC;
		else if (strcmp(rr->qp, "rc"))
			ql__diag_add(f, ql__yaml_line(f, "ring.qp"),
				     "ring.qp: '%s' is not one of rc, uc", rr->qp);
	}
	if (ql_ring_check_geometry(c->ring.slots, c->ring.slot_size))
		ql__diag_add(f,
			     ql__yaml_line(f, c->ring.slots & (c->ring.slots - 1) ?
						      "ring.slots" :
						      "ring.slot_size"),
			     "%s", ql_error_detail());
	convert_transport(f, r, c);
	c->max_sessions = (uint32_t)int_key(f, r->max_sessions, "max_sessions", 1,
					    QL_CONFIG_MAX_SESSIONS, QL_CONFIG_DEFAULT_MAX_SESSIONS,
					    NULL);
	if (!ql_ring_check_geometry(c->ring.slots, c->ring.slot_size))
		check_ring_memory(f, c);
	if (r->plugins_count) {
		c->plugins = calloc(r->plugins_count, sizeof(*c->plugins));
		if (!c->plugins)
			return -ENOMEM;
	}
	for (unsigned i = 0; i < r->plugins_count; i++) {
		struct ql_config_plugin *p = &c->plugins[i];

		p->line = ql__yaml_linef(f, "plugins.%u", i);
		p->path = resolve_path(f->path, r->plugins[i].path);
		p->config = ql__strdup0(r->plugins[i].config);
		if (!p->path || (r->plugins[i].config && !p->config))
			return -ENOMEM;
		c->plugins_count++;
		if (access(p->path, R_OK))
			ql__diag_add(f, ql__yaml_linef(f, "plugins.%u.path", i),
				     "plugins[%u].path: cannot read '%s': %s", i, p->path,
				     strerror(errno));
	}
	if (convert_qcs(f, r, c))
		return -ENOMEM;
	if (convert_udp(f, r, c))
		return -ENOMEM;
	convert_builtins(f, r, c);
	convert_datapath(f, r, c);
	/* sessions made at start take their places among max_sessions */
	if (c->qcs_count + c->udp_count > c->max_sessions)
		ql__diag_add(f,
			     ql__yaml_line(f, r->max_sessions ? "max_sessions" :
					      c->udp_count    ? "udp" :
								"qcs"),
			     "max_sessions: %u is fewer than the %u sessions qcs and udp make at "
			     "start (each takes one of max_sessions)",
			     c->max_sessions, c->qcs_count + c->udp_count);
	c->log.level = QL_LOG_INFO;
	c->log.format = QL_LOG_FORMAT_TEXT;
	if (r->log && r->log->level) {
		int l = name_index(r->log->level, level_names, 4);

		if (l < 0)
			ql__diag_add(f, ql__yaml_line(f, "log.level"),
				     "log.level: '%s' is not one of error, warn, info, debug",
				     r->log->level);
		else
			c->log.level = (enum ql_log_level)l;
	}
	if (r->log && r->log->format) {
		int l = name_index(r->log->format, format_names, 2);

		if (l < 0)
			ql__diag_add(f, ql__yaml_line(f, "log.format"),
				     "log.format: '%s' is not one of text, json", r->log->format);
		else
			c->log.format = (enum ql_config_log_format)l;
	}
	return 0;
}

static int build_config(struct ql_yaml_file *f, void *raw, void *ctx)
{
	return convert(f, raw, ctx);
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
	ret = ql__yaml_load(path, &top_schema, diags ? diags : &local, build_config, c);
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
