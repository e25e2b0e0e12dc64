/* SPDX-License-Identifier: MIT */
/*
 * qlinkd's config file: defaults, every key, and every error path reported
 * with its line (unknown key, wrong type, bad geometry, bad port, missing
 * plugin, malformed YAML, empty file, nonexistent file, ...), every problem
 * of a file at once, device URIs, ring memory and multi-document files,
 * Hololink boards (qcs:), CUDA-Q UDP listeners (udp:) and builtins:.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <qlink/clock.h>
#include <qlink/dispatcher.h>

#include "config/config.h"
#include <qlink/error.h>

static char dir[] = "/tmp/qlink-test-config-XXXXXX";

static const char *write_tmp(const char *name, const char *text)
{
	static char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	return path;
}

/* Load text expecting failure; the diagnostics must include line:substr. */
static void expect_error(const char *text, unsigned line, const char *substr)
{
	const char *path = write_tmp("bad.yaml", text);
	struct ql_config *c = (void *)1;
	struct ql_diags d;
	int found = 0;

	assert_int_equal(ql_config_load(path, &c, &d), -EINVAL);
	assert_null(c);
	assert_true(d.count >= 1);
	for (unsigned i = 0; i < d.count; i++)
		if (d.d[i].line == line && strstr(d.d[i].msg, substr))
			found = 1;
	if (!found) {
		ql_diags_print(&d, path, stderr);
		fail_msg("no diagnostic at line %u with '%s'", line, substr);
	}
	/* the first problem is the detail sentence, with file and line */
	assert_non_null(strstr(ql_error_detail(), "bad.yaml:"));
}

static void test_defaults(void **state)
{
	const char *path = write_tmp("min.yaml", "# nothing but defaults\ndevice: soft://loop\n");
	struct ql_config *c;

	assert_int_equal(ql_config_load(path, &c, NULL), 0);
	assert_string_equal(c->device, "soft://loop");
	assert_string_equal(c->control.address, QL_CONFIG_DEFAULT_ADDRESS);
	assert_int_equal(c->control.port, QL_CONFIG_DEFAULT_PORT);
	assert_null(c->control.secret_file);
	assert_int_equal(c->control.allow_count, 0);
	assert_int_equal(c->dispatcher.cpu, -1);
	assert_int_equal(c->dispatcher.burst, 32);
	assert_int_equal(c->ring.slots, QL_CONFIG_DEFAULT_SLOTS);
	assert_int_equal(c->ring.slot_size, QL_CONFIG_DEFAULT_SLOT_SIZE);
	assert_int_equal(c->max_sessions, QL_CONFIG_DEFAULT_MAX_SESSIONS);
	assert_int_equal(c->plugins_count, 0);
	assert_int_equal(c->log.level, QL_LOG_INFO);
	assert_int_equal(c->log.format, QL_LOG_FORMAT_TEXT);
	ql_config_free(c);
}

static void test_full(void **state)
{
	char text[1024];
	struct ql_config *c;
	const char *path;

	write_tmp("secret", "s3cret\n");
	snprintf(text, sizeof(text),
		 "device: soft+shm://rth\n"
		 "control:\n"
		 "  address: \"::1\"\n"
		 "  port: 9000\n"
		 "  secret_file: secret\n"
		 "  allow: [10.0.0.0/8, 192.168.1.7, \"fd00::/8\"]\n"
		 "dispatcher: { cpu: 0, burst: 8 }\n"
		 "ring: { slots: 128, slot_size: 512 }\n"
		 "max_sessions: 2\n"
		 "plugins:\n"
		 "  - path: %s\n"
		 "    config: max_weight=3\n"
		 "log: { level: debug, format: json }\n",
		 QL_TEST_PLUGIN);
	path = write_tmp("full.yaml", text);
	assert_int_equal(ql_config_load(path, &c, NULL), 0);
	assert_string_equal(c->control.address, "::1");
	assert_int_equal(c->control.port, 9000);
	assert_non_null(strstr(c->control.secret_file, "/secret"));
	assert_int_equal(c->control.allow_count, 3);
	assert_string_equal(c->control.allow[2], "fd00::/8");
	assert_int_equal(c->dispatcher.cpu, 0);
	assert_int_equal(c->dispatcher.burst, 8);
	assert_int_equal(c->ring.slots, 128);
	assert_int_equal(c->ring.slot_size, 512);
	assert_int_equal(c->max_sessions, 2);
	assert_int_equal(c->plugins_count, 1);
	assert_string_equal(c->plugins[0].path, QL_TEST_PLUGIN);
	assert_string_equal(c->plugins[0].config, "max_weight=3");
	assert_int_equal(c->plugins[0].line, 11);
	assert_int_equal(c->log.level, QL_LOG_DEBUG);
	assert_int_equal(c->log.format, QL_LOG_FORMAT_JSON);
	ql_config_free(c);
}

static void test_unknown_key(void **state)
{
	expect_error("device: soft://loop\ncontrol:\n  port: 1\n  prot: 2\n", 4,
		     "unknown key 'prot' in control");
	expect_error("devcie: soft://loop\n", 1, "unknown key 'devcie'");
	expect_error("plugins:\n  - path: x\n    cfg: 1\n", 3, "unknown key 'cfg' in plugins[0]");
}

static void test_wrong_type(void **state)
{
	expect_error("control:\n  port: [1, 2]\n", 2, "control.port: wrong type");
	expect_error("control:\n  port: eighty\n", 2, "not an integer");
	expect_error("ring: 64\n", 1, "ring: wrong type: expected a mapping");
	expect_error("plugins: libx.so\n", 1, "plugins: wrong type: expected a list");
	expect_error("- a\n- b\n", 1, "wrong type");
}

static void test_bad_geometry(void **state)
{
	expect_error("ring:\n  slots: 100\n  slot_size: 256\n", 2, "num_slots 100");
	expect_error("ring:\n  slots: 64\n  slot_size: 100\n", 3, "slot_size 100");
	expect_error("ring:\n  slots: 0\n", 2, "out of range");
}

/* hsb.page_size: a page holds round_up(frame_len, 128) + 128 bytes of
 * metadata with frame_len >= 24 (/work/shared/notes/hololink-facts.md):
 * 256 is the least; the key's range says so, the table and
 * qlinkd.yaml(5) alike; 65536 is qlink's bound. */
static void test_hsb_page_size_bounds(void **state)
{
	struct ql_config *c;
	const char *path;

	(void)state;
	expect_error("transport: hsb\nhsb:\n  page_size: 128\n", 3,
		     "hsb.page_size: 128 is out of range (256..65536");
	expect_error("transport: hsb\nhsb:\n  page_size: 65664\n", 3,
		     "hsb.page_size: 65664 is out of range (256..65536");
	expect_error("transport: hsb\nhsb:\n  page_size: 320\n", 3, "page size 320");
	path = write_tmp("page256.yaml",
			 "device: soft://loop\ntransport: hsb\nhsb:\n  page_size: 256\n");
	assert_int_equal(ql_config_load(path, &c, NULL), 0);
	assert_int_equal(c->hsb.page_size, 256);
	assert_int_equal(c->hsb.frame_len, 128); /* page_size - 128 */
	ql_config_free(c);
	path = write_tmp("page64k.yaml",
			 "device: soft://loop\ntransport: hsb\nhsb:\n  page_size: 65536\n");
	assert_int_equal(ql_config_load(path, &c, NULL), 0);
	assert_int_equal(c->hsb.page_size, 65536);
	ql_config_free(c);
}

static void test_bad_port_cpu_and_more(void **state)
{
	expect_error("control:\n  port: 70000\n", 2, "control.port: 70000 is out of range");
	expect_error("control:\n  port: 0\n", 2, "out of range");
	expect_error("dispatcher:\n  cpu: 100000\n", 2, "dispatcher.cpu");
	expect_error("dispatcher:\n  cpu: -2\n", 2, "dispatcher.cpu");
	expect_error("dispatcher:\n  burst: 33\n", 2, "dispatcher.burst");
	expect_error("max_sessions: 0\n", 1, "max_sessions");
	expect_error("device: rdma://mlx5_0\n", 1, "unknown URI scheme");
	expect_error("device: soft+shm://\n", 1, "names no device");
	expect_error("control:\n  address: localhost\n", 2, "not an IPv4 or IPv6");
	expect_error("control:\n  allow:\n    - 10.0.0.0/8\n    - 10.0.0.0/33\n", 4,
		     "control.allow[1]");
	expect_error("control:\n  secret_file: /nonexistent/secret\n", 2, "cannot read");
	expect_error("log:\n  level: verbose\n", 2, "log.level: 'verbose'");
	expect_error("log:\n  format: xml\n", 2, "log.format: 'xml'");
}

/* dispatcher: a list of cores, the idle policy; old one-core files keep
 * loading; bad cores, duplicates, both forms at once are errors on their
 * line. */
static void test_dispatcher_cores(void **state)
{
	char text[256];
	struct ql_config *c;
	const char *path;
	int last = ql_cpu_count() - 1;

	(void)state;
	expect_error("dispatcher:\n  cpus:\n    - 0\n    - 100000\n", 4,
		     "dispatcher.cpus[1]: 100000 is not a CPU of this host");
	expect_error("dispatcher:\n  cpus: [-1]\n", 2, "dispatcher.cpus[0]: -1");
	expect_error("dispatcher:\n  cpus:\n    - 0\n    - 0\n", 4, "listed twice");
	expect_error("dispatcher:\n  cpus: []\n", 2,
		     "dispatcher.cpus: a list needs at least one entry");
	expect_error("dispatcher:\n  cpu: 0\n  cpus: [0]\n", 3, "not both");
	expect_error("dispatcher:\n  cpus: 0\n", 2, "dispatcher.cpus: wrong type");
	expect_error("dispatcher:\n  cpus: [zero]\n", 2, "not an integer");
	expect_error("dispatcher:\n  idle: nap\n", 2, "dispatcher.idle: 'nap'");
	expect_error("dispatcher:\n  idle_after_us: 0\n", 2, "dispatcher.idle_after_us");
	expect_error("dispatcher:\n  sleep_us: 1000000\n", 2, "dispatcher.sleep_us");
	expect_error("dispatcher:\n  call_deadline_ms: -1\n", 2, "dispatcher.call_deadline_ms");
	expect_error("dispatcher:\n  call_deadline_ms: 3600001\n", 2,
		     "dispatcher.call_deadline_ms: 3600001 is out of range");
	path = write_tmp("old.yaml", "dispatcher: { cpu: 0, burst: 4 }\n");
	assert_int_equal(ql_config_load(path, &c, NULL), 0);
	assert_int_equal(c->dispatcher.cpus_count, 1);
	assert_int_equal(c->dispatcher.cpus[0], 0);
	assert_int_equal(c->dispatcher.idle, QL_IDLE_SPIN);
	assert_int_equal(c->dispatcher.idle_after_us, QL_CONFIG_DEFAULT_IDLE_AFTER_US);
	assert_int_equal(c->dispatcher.sleep_us, QL_CONFIG_DEFAULT_SLEEP_US);
	assert_int_equal(c->dispatcher.call_deadline_ms, QL_CONFIG_DEFAULT_CALL_DEADLINE_MS);
	ql_config_free(c);
	path = write_tmp("none.yaml", "device: soft://loop\n");
	assert_int_equal(ql_config_load(path, &c, NULL), 0);
	assert_int_equal(c->dispatcher.cpus_count, 1);
	assert_int_equal(c->dispatcher.cpus[0], -1);
	ql_config_free(c);
	snprintf(text, sizeof(text),
		 "dispatcher:\n  cpus: [%d, 0]\n  idle: sleep\n  idle_after_us: 250\n"
		 "  sleep_us: 20\n  call_deadline_ms: 0\n",
		 last);
	path = write_tmp("cores.yaml", text);
	if (last == 0) /* a one-CPU host: [0, 0] lists a core twice */
		return;
	assert_int_equal(ql_config_load(path, &c, NULL), 0);
	assert_int_equal(c->dispatcher.cpus_count, 2);
	assert_int_equal(c->dispatcher.cpus[0], last);
	assert_int_equal(c->dispatcher.cpus[1], 0);
	assert_int_equal(c->dispatcher.cpu, last);
	assert_int_equal(c->dispatcher.idle, QL_IDLE_SLEEP);
	assert_int_equal(c->dispatcher.idle_after_us, 250);
	assert_int_equal(c->dispatcher.sleep_us, 20);
	assert_int_equal(c->dispatcher.call_deadline_ms, 0);
	ql_config_free(c);
}

static void test_several_errors(void **state)
{
	const char *path = write_tmp("many.yaml", "control:\n  port: 0\nring:\n  slots: 3\n"
						  "log:\n  level: loud\n");
	struct ql_config *c;
	struct ql_diags d;

	assert_int_equal(ql_config_load(path, &c, &d), -EINVAL);
	assert_int_equal(d.count, 3);
	assert_int_equal(d.d[0].line, 2);
	assert_int_equal(d.d[1].line, 4);
	assert_int_equal(d.d[2].line, 6);
}

static void test_missing_plugin(void **state)
{
	expect_error("plugins:\n  - path: /nonexistent/libdecoder.so\n", 2,
		     "plugins[0].path: cannot read '/nonexistent/libdecoder.so'");
	expect_error("plugins:\n  - config: x\n", 2, "missing required key 'path' in plugins[0]");
	/* relative paths are taken from the config file's directory */
	expect_error("plugins:\n  - path: nothere.so\n", 2, "qlink-test-config-");
}

static void test_malformed_empty_missing(void **state)
{
	struct ql_config *c;
	struct ql_diags d;

	expect_error("device: [soft://loop\n", 2, "YAML syntax error");
	expect_error("control:\n  port: 1\n port: 2\n", 3, "YAML syntax error");
	expect_error("device: \"unterminated\n", 2, "YAML syntax error");
	expect_error("", 1, "empty");
	expect_error("# only a comment\n", 1, "empty");
	assert_int_equal(ql_config_load("/nonexistent/qlinkd.yaml", &c, &d), -ENOENT);
	assert_int_equal(d.count, 1);
	assert_int_equal(d.d[0].line, 0);
	assert_non_null(strstr(d.d[0].msg, "cannot read the file"));
	assert_int_equal(ql_config_load(dir, &c, &d), -EISDIR);
}

/* Load text expecting exactly the diagnostics at lines[] (in order). */
static void expect_lines(const char *text, unsigned n, const unsigned *lines)
{
	const char *path = write_tmp("many.yaml", text);
	struct ql_config *c;
	struct ql_diags d;

	assert_int_equal(ql_config_load(path, &c, &d), -EINVAL);
	if (d.count != n)
		ql_diags_print(&d, path, stderr);
	assert_int_equal(d.count, n);
	for (unsigned i = 0; i < n; i++)
		assert_int_equal(d.d[i].line, lines[i]);
}

/* Schema problems (unknown keys, wrong kinds, non-numbers, missing keys)
 * are all reported, each with its line, not only libcyaml's first. */
static void test_every_schema_problem(void **state)
{
	static const unsigned a[] = { 1, 3, 4, 6 };
	static const unsigned b[] = { 2, 4 };

	(void)state;
	expect_lines("devcie: soft://loop\ncontrol:\n  prot: 1\nring: 64\nlog:\n  level: [x]\n", 4,
		     a);
	expect_lines("control:\n  port: eighty\nplugins:\n  - config: x\n", 2, b);
	expect_error("devcie: soft://loop\ncontrol:\n  prot: 1\n", 3,
		     "unknown key 'prot' in control");
}

/* What would fail at start is caught by the check: URI syntax, scheme,
 * device name length and characters, ibv port and GID index. */
static void test_device_uri(void **state)
{
	char text[400], name[80];

	(void)state;
	memset(name, 'a', 64);
	name[64] = '\0';
	snprintf(text, sizeof(text), "device: soft+shm://%s\n", name);
	expect_error(text, 1, "device name longer than 63 characters");
	name[63] = '\0';
	snprintf(text, sizeof(text), "device: soft+shm://%s\n", name);
	{
		const char *path = write_tmp("ok.yaml", text);
		struct ql_config *c;

		assert_int_equal(ql_config_load(path, &c, NULL), 0); /* 63 is the most */
		ql_config_free(c);
	}
	memset(name, 'b', 70);
	name[70] = '\0';
	snprintf(text, sizeof(text), "device: ibv://%s%s%s\n", name, name, name);
	expect_error(text, 1, "URI longer than 159 characters");
	expect_error("device: soft+shm://a/b\n", 1, "outside [A-Za-z0-9_.-]");
	expect_error("device: soft+shm://\n", 1, "names no device");
	expect_error("device: soft+shm:/x\n", 1, "is not a device URI SCHEME://NAME");
	expect_error("device: ://x\n", 1, "is not a device URI");
	expect_error("device: rdma://x\n", 1, "unknown URI scheme 'rdma'");
	expect_error("device: soft://other\n", 1, "the only soft:// device is soft://loop");
	expect_error("device: soft+udp://\n", 1, "names no address");
	expect_error("device: ibv://mlx5_0:0\n", 1, "port is not 1..255");
	expect_error("device: ibv://mlx5_0:1:x\n", 1, "GID index");
	expect_error("device: ibv://:1\n", 1, "names no device");
}

/* Rings that cannot be allocated (more than the host's memory) or pinned
 * (more than RLIMIT_MEMLOCK, for ibv) are caught with the ring's line. */
static void test_ring_memory(void **state)
{
	const char *path;
	pid_t pid;
	int st;

	(void)state;
	expect_error("device: soft://loop\nmax_sessions: 1024\nring:\n  slots: 65536\n"
		     "  slot_size: 65536\n",
		     4, "more than this host's memory");
	expect_error("device: soft+shm://x\nmax_sessions: 64\nring:\n  slots: 8192\n"
		     "  slot_size: 8192\n",
		     4, "more than the soft+shm heap");
	/* memlock: an unprivileged process with a 64 KiB limit */
	path = write_tmp("memlock.yaml", "device: ibv://mlx5_0\nring:\n  slots: 1024\n"
					 "  slot_size: 1024\n");
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct rlimit rl = { 65536, 65536 };
		struct ql_config *c;
		struct ql_diags d;

		if (setrlimit(RLIMIT_MEMLOCK, &rl))
			_exit(10);
		if (geteuid() == 0 &&
		    (chmod(dir, 0755) || chmod(path, 0644) || setgid(65534) || setuid(65534)))
			_exit(11);
		if (ql_config_load(path, &c, &d) != -EINVAL || d.count != 1 || d.d[0].line != 3 ||
		    !strstr(d.d[0].msg, "more than RLIMIT_MEMLOCK"))
			_exit(12);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

/* One file, one document: a second '---' is refused, with its line. */
static void test_multi_document(void **state)
{
	const char *path;
	struct ql_config *c;

	(void)state;
	expect_error("device: soft://loop\n---\ndevice: soft+shm://x\n", 2,
		     "a second YAML document");
	expect_error("---\ndevice: soft://loop\n...\n---\nring: {}\n", 4, "a second YAML document");
	path = write_tmp("one.yaml", "---\ndevice: soft://loop\n...\n");
	assert_int_equal(ql_config_load(path, &c, NULL), 0);
	ql_config_free(c);
}

/* The attack of issue 22 item 6: 100 000 nested '[' (well-formed, closed)
 * took libyaml 15 s and more. Refused at the line where the nesting passes
 * 64 levels, at once; 64 levels is still read (and found the wrong type). */
static void test_deep_nesting(void **state)
{
	enum { N = 100000 };
	char *text = malloc(2 * N + 64), *p;
	uint64_t t0;

	(void)state;
	assert_non_null(text);
	p = text + sprintf(text, "device: soft://loop\nring:\n  slots:\n    ");
	memset(p, '[', N);
	memset(p + N, ']', N);
	strcpy(p + 2 * N, "\n");
	t0 = ql_clock_ns();
	expect_error(text, 4, "nested more than 64 deep");
	assert_true(ql_clock_ns() - t0 < 2000000000ull);
	/* block style too: a mapping in a mapping ... */
	p = text;
	for (int i = 0; i < 70; i++)
		p += sprintf(p, "%*sk%d:\n", i, "", i);
	sprintf(p, "%*sx: 1\n", 70, "");
	expect_error(text, 65, "nested more than 64 deep");
	/* at the limit: parsed, and refused for what it is */
	p = text + sprintf(text, "device:\n  ");
	memset(p, '[', 63);
	memset(p + 63, ']', 63);
	strcpy(p + 126, "\n");
	expect_error(text, 2, "wrong type");
	free(text);
}

/* --check-config's load: the config comes back with its problems, so the
 * plugins can be checked too. */
static void test_check_keeps_partial(void **state)
{
	const char *path = write_tmp("partial.yaml", "control:\n  port: 0\nplugins:\n"
						     "  - path: /nonexistent/x.so\n");
	struct ql_config *c = NULL;
	struct ql_diags d;

	(void)state;
	assert_int_equal(ql_config_check(path, &c, &d), -EINVAL);
	assert_non_null(c);
	assert_int_equal(d.count, 2);
	assert_int_equal(c->control.port, 7700); /* the default stands in */
	assert_int_equal(c->plugins_count, 1);
	ql_config_free(c);
	/* an unknown key hides nothing: the rest is built and checked */
	path = write_tmp("partial.yaml", "prot: 1\ncontrol:\n  port: 0\n");
	assert_int_equal(ql_config_check(path, &c, &d), -EINVAL);
	assert_non_null(c);
	assert_int_equal(d.count, 2);
	ql_config_free(c);
}

/* Issue 25: one run reports every problem of a file, whatever its kind:
 * unknown keys do not hide bad values, nor the first error the later ones;
 * each on its line, in the file's order. */
static void test_every_problem_at_once(void **state)
{
	static const struct {
		unsigned line;
		const char *msg;
	} want[] = {
		{ 2, "unknown key 'contrl'" },
		{ 5, "dispatcher.burst: 64 is out of range (1..32)" },
		{ 7, "ring.slots: wrong type: expected a scalar value, found a list" },
		{ 8, "log: wrong type: expected a mapping, found a scalar" },
		{ 9, "max_sessions: 0 is out of range" },
		{ 12, "unknown key 'ring' in udp[0]" },
		{ 13, "udp[0].slot_size: wrong type: expected a scalar value, found a mapping" },
		{ 14, "udp[0].bad_requests: 'loud' is not one of drop, answer" },
		{ 15, "transport: 'rings' is not one of ring, hsb" },
	};
	const char *path = write_tmp("every.yaml", "device: soft://loop\n"	  /* 1 */
						   "contrl:\n"			  /* 2 */
						   "  port: 7700\n"		  /* 3 */
						   "dispatcher:\n"		  /* 4 */
						   "  burst: 64\n"		  /* 5 */
						   "ring:\n"			  /* 6 */
						   "  slots: [64]\n"		  /* 7 */
						   "log: debug\n"		  /* 8 */
						   "max_sessions: 0\n"		  /* 9 */
						   "udp:\n"			  /* 10 */
						   "  - listen: 127.0.0.1:5000\n" /* 11 */
						   "    ring: { slots: 4 }\n"	  /* 12 */
						   "    slot_size: { a: 1 }\n"	  /* 13 */
						   "    bad_requests: loud\n"	  /* 14 */
						   "transport: rings\n");	  /* 15 */
	struct ql_config *c = NULL;
	struct ql_diags d;

	(void)state;
	assert_int_equal(ql_config_check(path, &c, &d), -EINVAL);
	assert_non_null(c);
	ql_config_free(c);
	if (d.count != sizeof(want) / sizeof(want[0]))
		ql_diags_print(&d, path, stderr);
	assert_int_equal(d.count, sizeof(want) / sizeof(want[0]));
	for (unsigned i = 0; i < d.count; i++) {
		if (d.d[i].line != want[i].line || !strstr(d.d[i].msg, want[i].msg))
			ql_diags_print(&d, path, stderr);
		assert_int_equal(d.d[i].line, want[i].line);
		assert_non_null(strstr(d.d[i].msg, want[i].msg));
	}
	/* the detail sentence is the first of them */
	assert_non_null(strstr(ql_error_detail(), "every.yaml:2: unknown key 'contrl'"));
}

static int setup(void **state)
{
	return mkdtemp(dir) ? 0 : -1;
}

/* qcs: hsb boards qlinkd configures (docs/hololink.md). */
static void test_qcs_hsb(void **state)
{
	const char *path = write_tmp("qcs.yaml", "device: soft://loop\ntransport: hsb\n"
						 "qcs:\n"
						 "  - { kind: hsb, address: 10.0.0.2 }\n"
						 "  - kind: hsb\n"
						 "    address: 10.0.0.3\n"
						 "    port: 8193\n"
						 "    vp: 3\n"
						 "    vp_address: 0x2000\n"
						 "    hif_address: 0x0900\n"
						 "    data_plane: 1\n"
						 "    mtu: 9000\n"
						 "    hsb_version: 2.5\n"
						 "    qp: 0x123\n"
						 "    gid: fd71:201::1\n");
	struct ql_config *c;

	(void)state;
	assert_int_equal(ql_config_load(path, &c, NULL), 0);
	assert_int_equal(c->qcs_count, 2);
	assert_string_equal(c->qcs[0].kind, "hsb");
	assert_string_equal(c->qcs[0].address, "10.0.0.2");
	assert_int_equal(c->qcs[0].port, 8192);
	assert_int_equal(c->qcs[0].vp, 0);
	assert_int_equal(c->qcs[0].vp_address, 0);
	assert_int_equal(c->qcs[0].line, 4);
	assert_int_equal(c->qcs[0].qp, 2); /* the FPGA's default */
	assert_int_equal(c->qcs[0].gid[10], 0xff);
	assert_int_equal(c->qcs[0].gid[12], 10); /* ::ffff:10.0.0.2 */
	assert_int_equal(c->qcs[0].gid[15], 2);
	assert_int_equal(c->qcs[1].qp, 0x123);
	assert_int_equal(c->qcs[1].gid[0], 0xfd);
	assert_int_equal(c->qcs[1].gid[15], 1);
	assert_int_equal(c->qcs[1].port, 8193);
	assert_int_equal(c->qcs[1].vp, 3);
	assert_int_equal(c->qcs[1].vp_address, 0x2000);
	assert_int_equal(c->qcs[1].hif_address, 0x900);
	/* upstream's defaults: Ethernet MTU 1500, layout 2.6, data plane 0 */
	assert_int_equal(c->qcs[0].mtu, 1500);
	assert_int_equal(c->qcs[0].layout, QL_HSB_LAYOUT_2_6);
	assert_int_equal(c->qcs[0].data_plane, 0);
	assert_int_equal(c->qcs[1].mtu, 9000);
	assert_int_equal(c->qcs[1].layout, QL_HSB_LAYOUT_2_5);
	assert_int_equal(c->qcs[1].data_plane, 1);
	ql_config_free(c);
	expect_error(
		"transport: hsb\nqcs:\n  - { kind: hsb, address: 10.0.0.2, hsb_version: 2.4 }\n", 3,
		"'2.4' is not a supported HSB version");
	expect_error("transport: hsb\nqcs:\n  - { kind: hsb, address: 10.0.0.2, mtu: 100 }\n", 3,
		     "qcs.0.mtu: 100 is out of range");
	expect_error("transport: hsb\nqcs:\n  - { kind: fpga, address: 10.0.0.2 }\n", 3,
		     "'fpga' is not a QCS kind");
	expect_error("transport: hsb\nqcs:\n  - { address: 10.0.0.2 }\n", 3,
		     "qcs[0].kind: required");
	expect_error("transport: hsb\nqcs:\n  - kind: hsb\n    address: board.example\n", 4,
		     "'board.example' is not an IPv4 address");
	expect_error("transport: hsb\nqcs:\n  - { kind: hsb }\n", 3, "qcs[0].address: required");
	expect_error("transport: hsb\nqcs:\n  - kind: hsb\n    address: 10.0.0.2\n    vp: 32\n", 5,
		     "qcs.0.vp: 32 is out of range (0..31");
	expect_error("transport: hsb\nqcs:\n  - kind: hsb\n    address: 10.0.0.2\n    port: 0\n", 5,
		     "qcs.0.port: 0 is out of range");
	expect_error(
		"transport: hsb\nqcs:\n  - { kind: hsb, address: 10.0.0.2, vp_address: 0x1002 }\n",
		3, "multiples of 4");
	expect_error("transport: hsb\nqcs:\n  - { kind: hsb, address: 10.0.0.2 }\n"
		     "  - { kind: hsb, address: 10.0.0.2, port: 8192 }\n",
		     4, "the same board and VP as qcs[0]");
	expect_error("transport: hsb\nqcs:\n  - { kind: hsb, address: 10.0.0.2, colour: red }\n", 3,
		     "colour");
	expect_error("transport: hsb\nqcs:\n  - { kind: hsb, address: 10.0.0.2, qp: 0x1000000 }\n",
		     3, "qcs.0.qp: 16777216 is out of range");
	expect_error(
		"transport: hsb\nqcs:\n  - kind: hsb\n    address: 10.0.0.2\n    gid: 10.0.0.2\n",
		5, "qcs[0].gid: '10.0.0.2' is not a GID");
}

/* udp: CUDA-Q UDP listeners, and builtins: */
static void test_udp(void **state)
{
	const char *path = write_tmp("udp.yaml", "device: soft://loop\n"
						 "dispatcher: { cpus: [0] }\n"
						 "udp:\n"
						 "  - listen: \"127.0.0.1:5000\"\n"
						 "  - listen: \"[::1]:0\"\n"
						 "    slots: 4\n"
						 "    slot_size: 1024\n"
						 "    busy_poll_us: 50\n"
						 "    bad_requests: answer\n"
						 "    cpu: 0\n"
						 "  - { listen: \"0.0.0.0:5001\" }\n"
						 "builtins: [rpc_increment]\n");
	struct ql_config *c;

	(void)state;
	assert_int_equal(ql_config_load(path, &c, NULL), 0);
	assert_int_equal(c->udp_count, 3);
	assert_string_equal(c->udp[0].address, "127.0.0.1");
	assert_int_equal(c->udp[0].port, 5000);
	assert_int_equal(c->udp[0].slots, 8); /* CUDA-Q's defaults */
	assert_int_equal(c->udp[0].slot_size, 256);
	assert_int_equal(c->udp[0].bad_requests, QL_BAD_REQUEST_DROP); /* as CUDA-Q */
	assert_int_equal(c->udp[0].busy_poll_us, 0);
	assert_int_equal(c->udp[0].cpu, -1);
	assert_int_equal(c->udp[0].line, 4);
	assert_string_equal(c->udp[1].address, "::1"); /* no brackets */
	assert_int_equal(c->udp[1].port, 0);
	assert_int_equal(c->udp[1].slots, 4);
	assert_int_equal(c->udp[1].slot_size, 1024);
	assert_int_equal(c->udp[1].busy_poll_us, 50);
	assert_int_equal(c->udp[1].bad_requests, QL_BAD_REQUEST_ANSWER);
	assert_int_equal(c->udp[1].cpu, 0);
	assert_string_equal(c->udp[2].address, "0.0.0.0");
	assert_int_equal(c->builtins, QL_CONFIG_BUILTIN_INCREMENT);
	ql_config_free(c);

	/* defaults: no listener, every built-in */
	path = write_tmp("noudp.yaml", "device: soft://loop\n");
	assert_int_equal(ql_config_load(path, &c, NULL), 0);
	assert_int_equal(c->udp_count, 0);
	assert_int_equal(c->builtins, QL_CONFIG_BUILTINS_DEFAULT);
	assert_string_equal(ql_config_builtin_name(QL_CONFIG_BUILTIN_PARITY), "qlink_parity");
	assert_string_equal(ql_config_builtin_name(QL_CONFIG_BUILTIN_INCREMENT), "rpc_increment");
	assert_null(ql_config_builtin_name(0x80));
	ql_config_free(c);
	path = write_tmp("nobuiltins.yaml", "device: soft://loop\nbuiltins: []\n");
	assert_int_equal(ql_config_load(path, &c, NULL), 0);
	assert_int_equal(c->builtins, 0);
	ql_config_free(c);

	/* every way a listener is wrong, with its line */
	expect_error("udp:\n  - listen: \"::1:5000\"\n", 2, "an IPv6 address needs brackets");
	expect_error("udp:\n  - listen: \"[::1]5000\"\n", 2, "[ADDRESS]:PORT");
	expect_error("udp:\n  - listen: \"[127.0.0.1]:5000\"\n", 2, "not an IPv6 address");
	expect_error("udp:\n  - listen: \"localhost:5000\"\n", 2, "not an IPv4 address");
	expect_error("udp:\n  - listen: \"127.0.0.1\"\n", 2, "no port");
	expect_error("udp:\n  - listen: \":5000\"\n", 2, "no address");
	expect_error("udp:\n  - listen: \"127.0.0.1:\"\n", 2, "the port is not 0..65535");
	expect_error("udp:\n  - listen: \"127.0.0.1:65536\"\n", 2, "the port is not 0..65535");
	expect_error("udp:\n  - listen: \"127.0.0.1:-1\"\n", 2, "the port is not 0..65535");
	expect_error("udp:\n  - listen: \"127.0.0.1:50x\"\n", 2, "the port is not 0..65535");
	expect_error("udp:\n  - { slots: 4 }\n", 2, "listen");
	expect_error("udp:\n  - listen: \"127.0.0.1:5000\"\n    slots: 0\n", 3,
		     "udp.0.slots: 0 is out of range (1..65536");
	expect_error("udp:\n  - listen: \"127.0.0.1:5000\"\n    slot_size: 23\n", 3,
		     "udp.0.slot_size: 23 is out of range (24..65507");
	expect_error("udp:\n  - listen: \"127.0.0.1:5000\"\n    slot_size: 65508\n", 3,
		     "udp.0.slot_size: 65508 is out of range");
	expect_error("udp:\n  - listen: \"127.0.0.1:5000\"\n    bad_requests: ignore\n", 3,
		     "udp[0].bad_requests: 'ignore' is not one of drop, answer");
	expect_error("dispatcher: { cpu: -1 }\nudp:\n  - listen: \"127.0.0.1:5000\"\n    cpu: 0\n",
		     4, "udp[0].cpu: 0 is not the core of a dispatcher");
	expect_error("udp:\n  - listen: \"127.0.0.1:5000\"\n    colour: red\n", 3, "colour");
	/* binds that collide: the same address and port, a wildcard of the
	 * family, "::" with anything, the control plane's port */
	expect_error("udp:\n  - listen: \"127.0.0.1:5000\"\n  - listen: \"127.0.0.1:5000\"\n", 3,
		     "udp[1]: listens where udp[0] does (127.0.0.1 port 5000)");
	expect_error("udp:\n  - listen: \"0.0.0.0:5000\"\n  - listen: \"127.0.0.1:5000\"\n", 3,
		     "listens where udp[0] does");
	expect_error("udp:\n  - listen: \"[::]:5000\"\n  - listen: \"127.0.0.1:5000\"\n", 3,
		     "listens where udp[0] does");
	expect_error("control: { port: 7000 }\nudp:\n  - listen: \"127.0.0.1:7000\"\n", 3,
		     "udp[0]: 127.0.0.1 port 7000 is the control plane's");
	expect_error("max_sessions: 1\nudp:\n  - listen: \"127.0.0.1:5000\"\n"
		     "  - listen: \"127.0.0.1:5001\"\n",
		     1, "max_sessions: 1 is fewer than the 2 sessions qcs and udp make at start");
	expect_error("builtins: [rpc_increment, qlink_decode]\n", 1,
		     "builtins[1]: 'qlink_decode' is not a built-in function (known: qlink_parity, "
		     "rpc_increment)");
	expect_error("builtins: [rpc_increment, rpc_increment]\n", 1,
		     "builtins[1]: 'rpc_increment' is listed twice");

	/* ports 0, different ports, different families: no collision */
	path = write_tmp("ok2.yaml", "udp:\n  - listen: \"127.0.0.1:0\"\n"
				     "  - listen: \"127.0.0.1:0\"\n"
				     "  - listen: \"0.0.0.0:5000\"\n"
				     "  - listen: \"[::1]:5000\"\n"
				     "  - listen: \"127.0.0.2:5001\"\n"
				     "  - listen: \"127.0.0.1:5001\"\n"
				     "max_sessions: 6\n");
	assert_int_equal(ql_config_load(path, &c, NULL), 0);
	assert_int_equal(c->udp_count, 6);
	ql_config_free(c);
}

static int teardown(void **state)
{
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) ? -1 : 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_full),
		cmocka_unit_test(test_unknown_key),
		cmocka_unit_test(test_wrong_type),
		cmocka_unit_test(test_bad_geometry),
		cmocka_unit_test(test_hsb_page_size_bounds),
		cmocka_unit_test(test_bad_port_cpu_and_more),
		cmocka_unit_test(test_dispatcher_cores),
		cmocka_unit_test(test_several_errors),
		cmocka_unit_test(test_missing_plugin),
		cmocka_unit_test(test_malformed_empty_missing),
		cmocka_unit_test(test_every_schema_problem),
		cmocka_unit_test(test_device_uri),
		cmocka_unit_test(test_ring_memory),
		cmocka_unit_test(test_multi_document),
		cmocka_unit_test(test_check_keeps_partial),
		cmocka_unit_test(test_every_problem_at_once),
		cmocka_unit_test(test_deep_nesting),
		cmocka_unit_test(test_qcs_hsb),
		cmocka_unit_test(test_udp),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
