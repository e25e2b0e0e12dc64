/* SPDX-License-Identifier: MIT */
/*
 * Plugins: the example decoder loads, registers and answers through
 * ql_rpc_dispatch and on a daemon; so does the example with a frame handler
 * (CUDA-Q's HOST_CALL form) and a raw one; a wrong ABI version (a future
 * one, and version 1, from before frame handlers), a library that is
 * not a plugin, one with unresolved symbols, a missing file and a bad
 * config string are refused with a clear error. A plugin that anyone but
 * root or this user could have written (its file or a directory above it
 * group/world-writable, /tmp included, or owned by another uid) is refused
 * before any of its code runs (issue 22 item 5).
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
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "demo/demo.h"
#include "plugin/loader.h"
#include <qlink/channel.h>
#include <qlink/daemon.h>
#include <qlink/error.h>

/* A request for repcode_decode with the errors at `flips` (distance 64). */
static long decode_request(uint8_t *msg, size_t cap, const int *flips, int nflips)
{
	uint8_t err[8] = { 0 }, syn[8] = { 0 };
	struct ql_rpc_out out;

	for (int i = 0; i < nflips; i++)
		ql_rpc_bit_set(err, (size_t)flips[i], 1);
	for (int i = 0; i < 63; i++)
		ql_rpc_bit_set(syn, (size_t)i,
			       ql_rpc_bit_get(err, (size_t)i) ^ ql_rpc_bit_get(err, (size_t)i + 1));
	ql_rpc_request_begin(&out, msg, cap);
	ql_rpc_write_bytes(&out, syn, 8);
	return ql_rpc_request_finish(&out, ql_rpc_fnv1a("repcode_decode"), 7, 99);
}

static void test_load_and_dispatch(void **state)
{
	struct ql_plugin *p;
	struct ql_rpc_table *t;
	uint8_t msg[128], resp[128];
	struct ql_rpc_response r;
	struct ql_rpc_in in = { 0 };
	size_t rlen;
	const int flips[] = { 5, 6, 40 };
	long n;

	assert_int_equal(ql_plugin_load(QL_TEST_PLUGIN, "max_weight=4", &p), 0);
	assert_string_equal(ql_plugin_get_info(p)->name, "repcode_decoder");
	assert_int_equal(ql_plugin_get_info(p)->abi_version, QL_PLUGIN_ABI_VERSION);
	assert_int_equal(ql_rpc_table_create(8, &t), 0);
	assert_int_equal(ql_plugin_register_table(p, t), 0);
	assert_int_equal(ql_plugin_function_count(p), 1);
	assert_non_null(ql_rpc_table_lookup(t, ql_rpc_fnv1a("repcode_decode")));

	n = decode_request(msg, sizeof(msg), flips, 3);
	assert_true(n > 0);
	assert_int_equal(ql_rpc_dispatch(t, msg, (size_t)n, resp, sizeof(resp), &rlen, NULL), 0);
	assert_int_equal(ql_rpc_response_parse(resp, rlen, &r, &in), 0);
	assert_int_equal(r.request_id, 7);
	assert_int_equal(r.result_len, 8 + 4);
	const uint8_t *corr = ql_rpc_in_view(&in, 8);
	for (int i = 0; i < 64; i++)
		assert_int_equal(ql_rpc_bit_get(corr, (size_t)i), i == 5 || i == 6 || i == 40);
	assert_int_equal(ql_rpc_read_i32(&in), 3);

	/* 40 flips: the complement (24) is lighter, and above max_weight 4 */
	int many[40];
	for (int i = 0; i < 40; i++)
		many[i] = i;
	n = decode_request(msg, sizeof(msg), many, 40);
	assert_int_equal(ql_rpc_dispatch(t, msg, (size_t)n, resp, sizeof(resp), &rlen, NULL), 1);

	/* registering twice on one table: -EEXIST, reported */
	assert_int_equal(ql_plugin_register_table(p, t), -EEXIST);
	assert_non_null(strstr(ql_error_detail(), "repcode_decode"));
	ql_rpc_table_destroy(t);
	ql_plugin_unload(p);
}

static void test_on_daemon(void **state)
{
	struct ql_daemon_config dc = { .cpu = -1 };
	struct ql_channel *ch;
	struct ql_daemon *d;
	struct ql_plugin *p;
	uint8_t msg[128], resp[256];
	struct ql_rpc_response r;
	const int flips[] = { 63 };
	long n;
	int len;

	assert_int_equal(ql_plugin_load(QL_TEST_PLUGIN, NULL, &p), 0);
	assert_int_equal(ql_loop_channel_create(8, 128, &ch), 0);
	assert_int_equal(ql_daemon_create(&dc, ch, &d), 0);
	assert_int_equal(ql_daemon_register(d, ql_demo_parity_function()), 0);
	assert_int_equal(ql_plugin_register(p, d), 0);
	assert_int_equal(ql_daemon_function_count(d), 2);
	n = decode_request(msg, sizeof(msg), flips, 1);
	assert_int_equal(ql_loop_channel_push(ch, msg, (uint32_t)n, (uint32_t)n), 0);
	assert_int_equal(ql_daemon_poll(d), 1);
	len = ql_loop_channel_pop(ch, resp, sizeof(resp));
	assert_true(len > 0);
	assert_int_equal(ql_rpc_response_parse(resp, (size_t)len, &r, NULL), 0);
	assert_int_equal(r.status, 0);
	assert_int_equal(ql_rpc_get_i32(resp + 24 + 8), 1);
	ql_daemon_destroy(d);
	ql_channel_destroy(ch);
	ql_plugin_unload(p);
}

/* A request of n argument bytes 1, 2, ..., n for function name. */
static long bytes_request(uint8_t *msg, size_t cap, const char *name, uint32_t n)
{
	struct ql_rpc_out out;

	ql_rpc_request_begin(&out, msg, cap);
	for (uint32_t i = 0; i < n; i++)
		ql_rpc_write_u8(&out, (uint8_t)(i + 1));
	return ql_rpc_request_finish(&out, ql_rpc_fnv1a(name), 31, 0xabcdef0123ull);
}

/* The example plugin registers a frame handler (CUDA-Q's HOST_CALL form)
 * and a raw stream handler through the same registrar; both answer through
 * ql_rpc_dispatch and on a daemon, whose counters see them. */
static void test_host_call_plugin(void **state)
{
	struct ql_daemon_config dc = { .cpu = -1 };
	struct ql_daemon_function_stats fs;
	struct ql_daemon_stats st;
	struct ql_channel *ch;
	struct ql_daemon *d;
	struct ql_plugin *p;
	struct ql_rpc_table *t;
	struct ql_rpc_response r;
	uint8_t msg[128], resp[256];
	size_t rlen;
	long n;
	int len;

	assert_int_equal(ql_plugin_load(QL_TEST_PLUGIN_HOST_CALL, NULL, &p), 0);
	assert_int_equal(ql_rpc_table_create(8, &t), 0);
	assert_int_equal(ql_plugin_register_table(p, t), 0);
	assert_int_equal(ql_plugin_function_count(p), 2);
	assert_non_null(ql_rpc_table_lookup(t, ql_rpc_fnv1a("reverse_bytes"))->frame);
	assert_non_null(ql_rpc_table_lookup(t, ql_rpc_fnv1a("byte_sum"))->fn);

	n = bytes_request(msg, sizeof(msg), "reverse_bytes", 10);
	assert_int_equal(ql_rpc_dispatch(t, msg, (size_t)n, resp, sizeof(resp), &rlen, NULL), 0);
	assert_int_equal(rlen, 24 + 10);
	ql_rpc_response_decode(resp, &r);
	assert_int_equal(r.request_id, 31);
	assert_true(r.ptp_timestamp == 0xabcdef0123ull);
	for (int i = 0; i < 10; i++)
		assert_int_equal(resp[24 + i], 10 - i);
	/* its own status when the reply would not fit */
	assert_int_equal(ql_rpc_dispatch(t, msg, (size_t)n, resp, 24 + 9, &rlen, NULL), 1);
	n = bytes_request(msg, sizeof(msg), "byte_sum", 10);
	assert_int_equal(ql_rpc_dispatch(t, msg, (size_t)n, resp, sizeof(resp), &rlen, NULL), 0);
	assert_int_equal(ql_rpc_get_u32(resp + 24), 55);
	ql_rpc_table_destroy(t);

	/* on a daemon, next to the built-ins */
	assert_int_equal(ql_loop_channel_create(8, 128, &ch), 0);
	assert_int_equal(ql_daemon_create(&dc, ch, &d), 0);
	assert_int_equal(ql_daemon_register(d, ql_demo_parity_function()), 0);
	assert_int_equal(ql_daemon_register(d, ql_demo_increment_function()), 0);
	assert_int_equal(ql_plugin_register(p, d), 0);
	assert_int_equal(ql_daemon_function_count(d), 4);
	for (int k = 0; k < 3; k++) {
		n = bytes_request(msg, sizeof(msg), "reverse_bytes", (uint32_t)(20 + k));
		assert_int_equal(ql_loop_channel_push(ch, msg, (uint32_t)n, (uint32_t)n), 0);
		assert_int_equal(ql_daemon_poll(d), 1);
		len = ql_loop_channel_pop(ch, resp, sizeof(resp));
		assert_int_equal(len, 24 + 20 + k);
		assert_int_equal(resp[24], 20 + k);
	}
	ql_daemon_stats(d, &st);
	assert_int_equal(st.ok, 3);
	assert_int_equal(ql_daemon_function_stats(d, 2, &fs), 0);
	assert_string_equal(fs.name, "reverse_bytes");
	assert_int_equal(fs.calls, 3);
	ql_daemon_destroy(d);
	ql_channel_destroy(ch);
	ql_plugin_unload(p);
}

static void expect_refused(const char *path, const char *config, int err, const char *substr)
{
	struct ql_plugin *p = (void *)1;

	assert_int_equal(ql_plugin_load(path, config, &p), err);
	assert_null(p);
	if (!strstr(ql_error_detail(), substr))
		fail_msg("detail '%s' lacks '%s'", ql_error_detail(), substr);
}

static void test_refused(void **state)
{
	expect_refused(QL_TEST_PLUGIN_BAD_ABI, NULL, -EPROTO, "plugin ABI version 42");
	/* the version before frame handlers, named as such */
	expect_refused(QL_TEST_PLUGIN_OLD_ABI, NULL, -EPROTO,
		       "built for plugin ABI version 1, this qlinkd speaks 2..3 (struct "
		       "ql_rpc_function has gained frame handlers since)");
	expect_refused(QL_TEST_PLUGIN_NOT_PLUGIN, NULL, -ENOSYS, "not a qlink plugin");
	{
		/* a version 2 plugin still loads; it has no flags field, read as
		 * 0 (state per session: refused by qlinkd with udp listeners) */
		struct ql_plugin *p = NULL;

		assert_int_equal(ql_plugin_load(QL_TEST_PLUGIN_V2_ABI, NULL, &p), 0);
		assert_int_equal(ql_plugin_flags(p), 0);
		ql_plugin_unload(p);
		/* the examples declare themselves stateless, the QEC plugin
		 * per source */
		assert_int_equal(ql_plugin_load(QL_TEST_PLUGIN, NULL, &p), 0);
		assert_int_equal(ql_plugin_flags(p), QL_PLUGIN_STATELESS);
		ql_plugin_unload(p);
	}
	expect_refused(QL_TEST_PLUGIN_UNRESOLVED, NULL, -ENOEXEC,
		       "ql_test_symbol_that_does_not_exist");
	expect_refused("/nonexistent/plugin.so", NULL, -ENOENT, "/nonexistent/plugin.so");
	expect_refused("/tmp", NULL, -ENOEXEC, "not a regular file");
	expect_refused("/etc/hostname", NULL, -ENOEXEC, "cannot be loaded");
	expect_refused(QL_TEST_PLUGIN, "max_weight=lots", -EINVAL, "init failed");
	expect_refused("", NULL, -EINVAL, "no path");
}

/* ---- trust (issue 22 item 5) ------------------------------------------ */

static char marker[512];

static int marker_ran(void)
{
	int ran = access(marker, F_OK) == 0;

	unlink(marker);
	return ran;
}

static void copy_file(const char *from, const char *to)
{
	char buf[65536];
	FILE *in = fopen(from, "rb"), *out;
	size_t n;

	assert_non_null(in);
	unlink(to);
	out = fopen(to, "wb");
	assert_non_null(out);
	while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
		assert_int_equal(fwrite(buf, 1, n, out), n);
	fclose(in);
	assert_int_equal(fclose(out), 0);
	assert_int_equal(chmod(to, 0755), 0);
}

/* The attack: a plugin path whose file or directory someone else can
 * write. Each is refused with -EPERM naming the offending path, and the
 * plugin's constructor (which writes the marker) never runs. */
static void expect_untrusted(const char *path, const char *offender, const char *why)
{
	struct ql_plugin *p = (void *)1;
	int ret = ql_plugin_load(path, NULL, &p);

	if (ret == 0)
		ql_plugin_unload(p);
	assert_int_equal(ret, -EPERM);
	assert_null(p);
	if (!strstr(ql_error_detail(), offender) || !strstr(ql_error_detail(), why))
		fail_msg("detail '%s' lacks '%s' or '%s'", ql_error_detail(), offender, why);
	assert_false(marker_ran());
	assert_int_equal(ql_plugin_check(path), -EPERM);
}

static void test_untrusted(void **state)
{
	char dir[400], file[450], tmpdir[64], tmpfile[100];
	struct ql_plugin *p;
	int root = geteuid() == 0;

	(void)state;
	snprintf(marker, sizeof(marker), "%s/plugin-marker-%d", QL_TEST_SCRATCH, (int)getpid());
	setenv("QL_TEST_PLUGIN_MARKER", marker, 1);
	unlink(marker);
	snprintf(dir, sizeof(dir), "%s/plugin-trust-%d", QL_TEST_SCRATCH, (int)getpid());
	snprintf(file, sizeof(file), "%s/marker.so", dir);
	mkdir(dir, 0755);
	assert_int_equal(chmod(dir, 0755), 0);
	copy_file(QL_TEST_PLUGIN_MARKER, file);

	/* the control: a copy in a 0755 directory of ours loads, and its
	 * constructor runs (so the marker would show one that ran) */
	assert_int_equal(ql_plugin_check(file), 0);
	assert_int_equal(ql_plugin_load(file, NULL, &p), 0);
	ql_plugin_unload(p);
	assert_true(marker_ran());

	/* a group- or world-writable file */
	assert_int_equal(chmod(file, 0775), 0);
	expect_untrusted(file, file, "is group-writable (mode 0775)");
	assert_int_equal(chmod(file, 0757), 0);
	expect_untrusted(file, file, "is world-writable (mode 0757)");
	assert_int_equal(chmod(file, 0666), 0);
	expect_untrusted(file, file, "world-writable");
	assert_int_equal(chmod(file, 0755), 0);

	/* a world-writable directory above it and a group-writable one; a
	 * sticky one (as /tmp) of ours or root's is no way in while the file
	 * in it is ours (only its owner may rename or remove it) */
	assert_int_equal(chmod(dir, 0777), 0);
	expect_untrusted(file, dir, "is world-writable (mode 0777)");
	assert_int_equal(chmod(dir, 01777), 0);
	assert_int_equal(ql_plugin_check(file), 0);
	assert_int_equal(chmod(dir, 0775), 0);
	expect_untrusted(file, dir, "group-writable");
	assert_int_equal(chmod(dir, 0755), 0);
	/* a relative path is judged by where it leads */
	assert_int_equal(chmod(dir, 0777), 0);
	{
		char cwd[512];

		assert_non_null(getcwd(cwd, sizeof(cwd)));
		assert_int_equal(chdir(dir), 0);
		expect_untrusted("marker.so", dir, "world-writable");
		assert_int_equal(chdir(cwd), 0);
	}
	assert_int_equal(chmod(dir, 0755), 0);

	/* /tmp itself (1777): a plugin in a private directory of ours under
	 * it is trusted (the sticky bit keeps others from replacing it) */
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/ql-plugin-XXXXXX");
	assert_non_null(mkdtemp(tmpdir));
	snprintf(tmpfile, sizeof(tmpfile), "%s/marker.so", tmpdir);
	copy_file(QL_TEST_PLUGIN_MARKER, tmpfile);
	{
		struct stat st;

		assert_int_equal(stat("/tmp", &st), 0);
		if ((st.st_mode & S_IWOTH) && (st.st_mode & S_ISVTX))
			assert_int_equal(ql_plugin_check(tmpfile), 0);
		/* but not when the directory under /tmp is world-writable */
		assert_int_equal(chmod(tmpdir, 0777), 0);
		expect_untrusted(tmpfile, tmpdir, "is world-writable (mode 0777)");
		assert_int_equal(chmod(tmpdir, 0700), 0);
		/* nor when someone else created it first (as root: nobody) */
		if (root) {
			assert_int_equal(chown(tmpdir, 65534, 65534), 0);
			expect_untrusted(tmpfile, tmpdir, "is owned by uid 65534");
			assert_int_equal(chown(tmpdir, 0, 0), 0);
		}
	}
	unlink(tmpfile);
	rmdir(tmpdir);

	/* owned by another user (nobody): the file, then the directory */
	if (root) {
		assert_int_equal(chown(file, 65534, 65534), 0);
		expect_untrusted(file, file, "is owned by uid 65534, not root");
		assert_int_equal(chown(file, 0, 0), 0);
		assert_int_equal(chown(dir, 65534, 65534), 0);
		expect_untrusted(file, dir, "is owned by uid 65534");
		assert_int_equal(chown(dir, 0, 0), 0);
		/* a 0666 file owned by nobody in a 1777 directory: the report */
		assert_int_equal(chown(file, 65534, 65534), 0);
		assert_int_equal(chmod(file, 0666), 0);
		assert_int_equal(chmod(dir, 01777), 0);
		expect_untrusted(file, "refused", "plugin");
		assert_int_equal(chmod(dir, 0755), 0);
	} else {
		print_message("not root: the other-owner cases are skipped\n");
	}
	unlink(file);
	rmdir(dir);
	unsetenv("QL_TEST_PLUGIN_MARKER");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_load_and_dispatch), cmocka_unit_test(test_on_daemon),
		cmocka_unit_test(test_host_call_plugin),  cmocka_unit_test(test_refused),
		cmocka_unit_test(test_untrusted),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
