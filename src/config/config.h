/* SPDX-License-Identifier: MIT */
/*
 * config: the qlinkd configuration file.
 *
 * qlinkd (the RTH daemon) reads one YAML file naming the device URI, the
 * control-plane address, the dispatcher cores and idle policy, the ring
 * geometry, the built-in functions, the handler plugins, the static
 * sessions (Hololink boards, CUDA-Q UDP listeners) and the logging. The
 * file is mapped onto struct ql_config by the key table below (one row per
 * key: type, range, default, field, man-page summary), then checked beyond
 * what one key can say (ring geometry, memory, boards, listeners). Every
 * problem found is reported with the line it is on, all of them in one run,
 * so that `qlinkd --check-config FILE` can print `FILE:LINE: message` lines
 * an editor can jump to. docs/qlinkd.md and qlinkd.yaml(5) document every
 * key and default (checked against the table: tests/check_config_keys.sh).
 *
 * The diagnostics type (struct ql_diags, yamlfile/diag.h) is shared with
 * program.h, which loads VPPU programs the same way, and with the endpoint
 * service's endpoints files. qlinkd-private (the qlinkd_private
 * library, never installed): it describes qlinkd's own file, not an API.
 */
#ifndef QLINK_CONFIG_H
#define QLINK_CONFIG_H

#include <stdint.h>
#include <stdio.h>

#include "qlink/daemon.h"
#include "qlink/hololink.h"
#include "qlink/log.h"
#include "yamlfile/diag.h" /* struct ql_diags */

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the configuration --------------------------------------------------- */

#define QL_CONFIG_DEFAULT_DEVICE "soft+shm://qlinkd"
#define QL_CONFIG_DEFAULT_ADDRESS "0.0.0.0"
#define QL_CONFIG_DEFAULT_PORT 7700 /* QL_CTL_DEFAULT_PORT */
#define QL_CONFIG_DEFAULT_BURST 32
#define QL_CONFIG_DEFAULT_IDLE_AFTER_US 100
#define QL_CONFIG_DEFAULT_SLEEP_US 50
#define QL_CONFIG_DEFAULT_CALL_DEADLINE_MS 1000
#define QL_CONFIG_DEFAULT_SLOTS 64
#define QL_CONFIG_DEFAULT_SLOT_SIZE 256
#define QL_CONFIG_DEFAULT_MAX_SESSIONS 4
#define QL_CONFIG_MAX_SESSIONS 1024

enum ql_config_log_format { QL_LOG_FORMAT_TEXT = 0, QL_LOG_FORMAT_JSON = 1 };

/* The data plane every session gets (docs/wire-protocol.md). */
enum ql_config_transport { QL_CONFIG_TRANSPORT_RING = 0, QL_CONFIG_TRANSPORT_HSB = 1 };

/* Who serves the sessions (`datapath:`): the CPU dispatchers, or a GPU
 * dispatcher per session (qlink/gpu.h, docs/gpu.md). */
enum ql_config_datapath { QL_CONFIG_DATAPATH_CPU = 0, QL_CONFIG_DATAPATH_GPU = 1 };

struct ql_config_plugin {
	char *path;   /* as resolved: relative paths are taken from the config
			 file's directory */
	char *config; /* passed to the plugin's init; NULL if not given */
	unsigned line;
};

/* A QCS qlinkd configures itself (`qcs:`): today only kind `hsb`, a Hololink
 * board whose data-plane registers qlinkd writes (ql_hsb_configure_board). */
struct ql_config_qcs {
	char *kind;			  /* "hsb" */
	char *address;			  /* the board's IPv4 address */
	uint32_t port;			  /* its register port; default 8192 (QL_HL_PORT) */
	uint32_t vp;			  /* the VP qlinkd configures, 0..31 */
	uint32_t vp_address, hif_address; /* 0: the defaults (hololink.h) */
	uint32_t data_plane;		  /* its HIF block: 0x02000300 + 0x10000 x this */
	uint32_t mtu;			  /* Ethernet MTU; default 1500 (DP_PACKET_SIZE 11) */
	enum ql_hsb_layout layout;	  /* hsb_version: 2.6 (default) or 2.5 */
	uint32_t qp;			  /* the board's QP number; default 2 */
	uint8_t gid[16];		  /* the board's GID; default ::ffff:address */
	unsigned line;
};

/* A CUDA-Q Realtime UDP listener (`udp:`): a session made at start, served
 * like any other by the dispatchers, on a UDP socket bound to address:port
 * (ql_udp_channel_create). */
struct ql_config_udp {
	char *address;	       /* IPv4 or IPv6 literal, brackets removed */
	uint32_t port;	       /* 0: ephemeral (the bound port is logged) */
	uint32_t slots;	       /* receive slots, default 8 */
	uint32_t slot_size;    /* the stride: bytes of one datagram, default 256 */
	uint32_t busy_poll_us; /* SO_BUSY_POLL, 0: none */
	enum ql_bad_request_policy bad_requests; /* default drop, as CUDA-Q */
	int cpu;      /* the core of the dispatcher serving it (one of dispatcher.cpus);
		    -1: the least-loaded one, as other sessions */
	char **allow; /* sources served: addresses or CIDR blocks; none given:
			 loopback only (127.0.0.0/8, ::1) */
	uint32_t allow_count;
	unsigned line;
};

/* The built-in functions qlinkd registers on every session (`builtins:`). */
#define QL_CONFIG_BUILTIN_PARITY 0x1u	 /* qlink_parity */
#define QL_CONFIG_BUILTIN_INCREMENT 0x2u /* rpc_increment (CUDA-Q's test function) */
#define QL_CONFIG_BUILTINS_DEFAULT (QL_CONFIG_BUILTIN_PARITY | QL_CONFIG_BUILTIN_INCREMENT)

/* Every string is owned by the struct; absent keys hold the defaults. */
struct ql_config {
	char *path;   /* the file it was loaded from */
	char *device; /* URI: soft://loop, soft+shm://NAME, soft+udp://..., ibv://DEV */
	struct {
		char *address;	   /* IPv4 or IPv6 literal to listen on */
		uint32_t port;	   /* 1..65535 */
		char *secret_file; /* NULL: no shared secret */
		char **allow;	   /* CIDR blocks allowed to connect; none: any */
		uint32_t allow_count;
	} control;
	struct {
		int cpu;   /* the first dispatcher's core; -1: not pinned */
		int *cpus; /* one dispatcher per entry: `cpus`, or [cpu] */
		uint32_t cpus_count;
		uint32_t burst;		   /* 1..32 */
		uint32_t idle;		   /* enum ql_idle_policy */
		uint32_t idle_after_us;	   /* idle time before backing off */
		uint32_t sleep_us;	   /* nap of the sleep policy */
		uint32_t call_deadline_ms; /* longest handler call; 0: none */
	} dispatcher;
	struct {
		uint32_t slots;	    /* power of two */
		uint32_t slot_size; /* multiple of 64 */
		uint32_t qp;	    /* IBV_QPT_RC (default) or IBV_QPT_UC */
	} ring;
	enum ql_config_transport transport;	 /* ring (default) or hsb */
	enum ql_bad_request_policy bad_requests; /* default: answer (ring), drop (hsb) */
	struct {
		uint32_t pages;	    /* 1..4096 */
		uint32_t page_size; /* multiple of 128 */
		uint32_t frame_len; /* 24..page_size */
		uint32_t resp_size; /* the QCS's receive buffers */
	} hsb;
	uint32_t max_sessions;
	enum ql_config_datapath datapath; /* cpu (default) or gpu */
	struct {
		uint32_t mode; /* enum ql_gpu_mode: auto (default), device, emulate */
		int device;    /* the CUDA device ordinal (default 0) */
	} gpu;
	uint32_t builtins; /* QL_CONFIG_BUILTIN_* bits; default both (datapath
			      gpu: qlink_parity, the one with a GPU build) */
	struct ql_config_plugin *plugins;
	uint32_t plugins_count;
	struct ql_config_qcs *qcs;
	uint32_t qcs_count;
	struct ql_config_udp *udp;
	uint32_t udp_count;
	struct {
		enum ql_log_level level;
		enum ql_config_log_format format;
	} log;
};

/* ---- the key table ------------------------------------------------------ */

/*
 * Every key of the file is one row of a table (src/config/config.c): its
 * YAML path, type, range or allowed values, default, where it goes in
 * struct ql_config and the man page's summary of it. Parsing, range checks,
 * defaults and `qlinkd --check-config` run from the table;
 * scripts/gen-config-keys.sh writes qlinkd.yaml(5)'s KEY SUMMARY from it and
 * tests/check_config_keys.sh (ctest config_keys_sync) fails when a key of the
 * table is not documented, or a documented key is not in the table.
 */
enum ql_config_key_type {
	QL_CONFIG_KEY_MAP,   /* a mapping of the keys below it */
	QL_CONFIG_KEY_LIST,  /* a list of such mappings (entry_size bytes each) */
	QL_CONFIG_KEY_INT,   /* an integer in min..max */
	QL_CONFIG_KEY_STR,   /* a string */
	QL_CONFIG_KEY_ENUM,  /* one of the names of values */
	QL_CONFIG_KEY_FLAGS, /* a list of names of values, their codes OR'd */
	QL_CONFIG_KEY_STRS,  /* a list of strings */
	QL_CONFIG_KEY_INTS,  /* a list of integers */
};

#define QL_CONFIG_KEY_REQUIRED 0x1u /* a mapping without it is an error */
#define QL_CONFIG_KEY_NCPU 0x2u	    /* max: this host's last CPU */
#define QL_CONFIG_KEY_NOSTORE 0x4u  /* its hook stores it */
#define QL_CONFIG_KEY_LATE 0x8u	    /* default computed from other keys */
#define QL_CONFIG_KEY_HEX 0x10u	    /* documented in hexadecimal */

struct ql__config_walk; /* config.c's walk of one file */

struct ql_config_key {
	const char *path; /* "control.port"; a list entry's key: "udp.slots" */
	enum ql_config_key_type type;
	int64_t min, max;    /* INT: the range; LIST, STRS, INTS: min..max entries */
	const char *values;  /* ENUM, FLAGS: "ring|hsb" */
	const int *codes;    /* ENUM, FLAGS: the value of each name; NULL: its index */
	int64_t def;	     /* INT: the default; ENUM: index of the default; FLAGS: codes */
	const char *def_str; /* STR: the default (NULL: none) */
	const char *def_doc; /* the default as documented, when not def/def_str */
	size_t off;	     /* the field in struct ql_config, or in the list's entry */
	size_t count_off;    /* LIST, STRS, INTS: its uint32_t count */
	size_t entry_size;   /* LIST: one entry */
	size_t line_off;     /* LIST: the entry's `unsigned line` */
	unsigned flags;	     /* QL_CONFIG_KEY_* */
	const char *why;     /* INT: said with the range when out of it;
				 FLAGS: what an unknown name is not */
	const char *doc;     /* the man page's summary (one sentence) */
	/* checks the value (s: a scalar's text, v: an INT or INTS entry) at
	 * base (struct ql_config or the list's entry); LIST: called per entry,
	 * when its keys are read. 0, or -ENOMEM. */
	int (*hook)(struct ql__config_walk *w, const struct ql_config_key *k, void *base,
		    const char *s, int64_t v, unsigned line);
};

/* The table, in file order of the man page. */
const struct ql_config_key *ql_config_keys(size_t *count);

/*
 * Load and check path. Returns 0 and *out (free with ql_config_free), or a
 * negative errno: -ENOENT/-EACCES/... when the file cannot be read, -EINVAL
 * when it has problems. diags (may be NULL) receives every problem found;
 * the first is also the ql_error_detail() sentence, as "FILE:LINE: msg".
 */
int ql_config_load(const char *path, struct ql_config **out, struct ql_diags *diags);
void ql_config_free(struct ql_config *cfg);
/* As ql_config_load, for `qlinkd --check-config`: when the file could be
 * read and its keys mapped but some values are wrong (-EINVAL), *out is
 * still set (wrong values replaced by their defaults) so that the caller
 * can go on and check the plugins too. Free *out whenever it is set. */
int ql_config_check(const char *path, struct ql_config **out, struct ql_diags *diags);

/* "qlink_parity" for QL_CONFIG_BUILTIN_PARITY, "rpc_increment" for
 * QL_CONFIG_BUILTIN_INCREMENT; NULL for another value. */
const char *ql_config_builtin_name(uint32_t bit);

/*
 * The plugin directory (qlinkd sets it: LIBDIR/qlink/plugins of its install,
 * src/qlinkd/service.c; "" none). A plugin named by a bare file name
 * ("plugin_decoder.so") is taken from the configuration file's directory
 * when it is there, else from this directory when it is there.
 */
void ql_config_set_plugin_dir(const char *dir);
const char *ql_config_plugin_dir(void);
/* resolved (the name taken relative to the config, malloc'd; may be NULL)
 * or, when that does not exist and given is a bare name found in the
 * plugin directory, that path instead (resolved freed). */
char *ql__config_plugin_fallback(char *resolved, const char *given);

/* "error", "warn", "info", "debug"; "text", "json". */
const char *ql_config_log_level_str(enum ql_log_level level);
const char *ql_config_log_format_str(enum ql_config_log_format format);

#ifdef __cplusplus
}
#endif
#endif
