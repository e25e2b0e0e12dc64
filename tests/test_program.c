/* SPDX-License-Identifier: MIT */
/*
 * VPPU programs: loading (every field, defaults), the generators and checks
 * of the VPPU adapter run against real handlers through ql_rpc_dispatch,
 * examples/program.yaml, and line-numbered errors.
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
#include <unistd.h>

#include <cmocka.h>

#include "config/program.h"
#include "demo/demo.h"
#include "plugin/loader.h"
#include <qlink/error.h>

static char dir[] = "/tmp/qlink-test-program-XXXXXX";

static const char *write_tmp(const char *name, const char *text, size_t len)
{
	static char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	fwrite(text, 1, len ? len : strlen(text), f);
	fclose(f);
	return path;
}

/* An echo handler: results = arguments. */
static int32_t echo(struct ql_rpc_in *in, struct ql_rpc_out *out, void *ctx)
{
	size_t n = ql_rpc_in_left(in);

	return ql_rpc_write_bytes(out, ql_rpc_in_view(in, n), n) ? 1 : 0;
}

/* Run step s of prog n times through t: calls judged right. */
static uint64_t run_step(struct ql_program *prog, uint32_t s, const struct ql_rpc_table *t,
			 uint64_t n)
{
	struct ql_vppu_call call;
	struct ql_vppu_config cfg;
	uint8_t msg[1024], resp[1024];
	struct ql_rpc_response r = { 0 };
	uint64_t ok = 0;

	assert_int_equal(ql_program_vppu_call(prog, s, &call, &cfg), 0);
	for (uint64_t i = 0; i < n; i++) {
		struct ql_rpc_header h = { QL_RPC_MAGIC_REQUEST, ql_rpc_fnv1a(call.function),
					   call.arg_len, (uint32_t)i, 0 };
		size_t rlen;
		int32_t st;

		ql_rpc_header_encode(msg, &h);
		call.make_args(call.ctx, i, msg + 24);
		st = ql_rpc_dispatch(t, msg, 24 + call.arg_len, resp, sizeof(resp), &rlen, NULL);
		assert_int_equal(ql_rpc_response_parse(resp, rlen, &r, NULL), 0);
		if (!call.check(call.ctx, i, st, resp + 24, r.result_len))
			ok++;
	}
	return ok;
}

static void test_example_program(void **state)
{
	struct ql_program *p;
	struct ql_diags d;
	struct ql_plugin *pl;
	struct ql_rpc_table *t;
	struct ql_vppu_call call;
	struct ql_vppu_config cfg;

	if (ql_program_load(QL_EXAMPLES "/program.yaml", &p, &d)) {
		ql_diags_print(&d, "program.yaml", stderr);
		fail();
	}
	assert_int_equal(p->ncalls, 3);
	assert_string_equal(p->calls[0].function, "qlink_parity");
	assert_int_equal(p->calls[0].arg_len, 32);
	assert_int_equal(p->calls[0].expect_len, 5);
	assert_int_equal(p->calls[0].check, QL_PROGRAM_CHECK_EXPECT);
	assert_int_equal(p->calls[1].check, QL_PROGRAM_CHECK_STATUS0);
	assert_int_equal(ql_program_vppu_call(p, 1, &call, &cfg), 0);
	assert_int_equal(cfg.count, 10000);
	assert_true(cfg.rate_hz == 100000);
	assert_int_equal(cfg.window, 1);
	assert_int_equal(ql_program_vppu_call(p, 3, &call, &cfg), -EINVAL);

	assert_int_equal(ql_rpc_table_create(8, &t), 0);
	assert_int_equal(ql_rpc_table_add(t, ql_demo_parity_function()), 0);
	assert_int_equal(ql_plugin_load(QL_TEST_PLUGIN, NULL, &pl), 0);
	assert_int_equal(ql_plugin_register_table(pl, t), 0);
	assert_int_equal(run_step(p, 0, t, 10), 10);
	assert_int_equal(run_step(p, 1, t, 10), 10);
	assert_int_equal(run_step(p, 2, t, 10), 10);
	ql_rpc_table_destroy(t);
	ql_plugin_unload(pl);
	ql_program_free(p);
}

static void test_generators_and_checks(void **state)
{
	uint8_t rec[2 * 6] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12 };
	struct ql_program *p;
	struct ql_diags d;
	struct ql_rpc_table *t;
	uint8_t a[64], b[64];
	const char *path;

	write_tmp("records.bin", (const char *)rec, sizeof(rec));
	path = write_tmp("gen.yaml",
			 "calls:\n"
			 "  - function: echo\n"
			 "    check: echo\n"
			 "    args:\n"
			 "      - { type: u32, value: 7, gen: counter }\n"
			 "      - { type: u8_array, n: 6, gen: \"file:records.bin\" }\n"
			 "      - { type: bits, n: 12, gen: ones }\n"
			 "      - { type: f64, value: 0.5 }\n"
			 "      - { type: u8_array, n: 3, pattern: \"0a ff\" }\n"
			 "      - { type: i64, value: -5 }\n"
			 "      - { type: bits, n: 70, gen: random, seed: 3 }\n"
			 "  - function: echo\n"
			 "    args: [ { type: i32, value: 1, gen: counter } ]\n"
			 "    expect: [ { type: i32, value: 1, gen: counter } ]\n"
			 "    window: 8\n"
			 "    repeat: 5\n",
			 0);
	if (ql_program_load(path, &p, &d)) {
		ql_diags_print(&d, path, stderr);
		fail();
	}
	const struct ql_program_call *s = &p->calls[0];

	assert_int_equal(s->arg_len, 4 + 6 + 2 + 8 + 3 + 8 + 9);
	ql_program_make_args(s, 1, a);
	assert_int_equal(ql_rpc_get_u32(a), 8);
	assert_memory_equal(a + 4, rec + 6, 6); /* record 1 */
	assert_int_equal(a[10], 0xff);
	assert_int_equal(a[11], 0x0f); /* tail bits cleared */
	assert_true(ql_rpc_get_f64(a + 12) == 0.5);
	assert_int_equal(a[20], 0x0a);
	assert_int_equal(a[21], 0xff);
	assert_int_equal(a[22], 0);
	assert_int_equal((int64_t)ql_rpc_get_u64(a + 23), -5);
	assert_int_equal(a[31 + 8] & ~0x3f, 0);
	ql_program_make_args(s, 3, b);
	assert_memory_equal(b + 4, rec + 6, 6); /* records cycle: 3 % 2 = 1 */
	ql_program_make_args(s, 2, b);
	assert_memory_equal(b + 4, rec, 6);
	ql_program_make_args(s, 1, b);
	assert_memory_equal(a, b, s->arg_len); /* reproducible */
	assert_int_equal(p->calls[1].window, 8);
	assert_int_equal(p->calls[1].repeat, 5);
	assert_int_equal(p->calls[1].check, QL_PROGRAM_CHECK_EXPECT);

	assert_int_equal(ql_rpc_table_create(4, &t), 0);
	assert_true(ql_rpc_table_add(t, &QL_RPC_RAW_FUNCTION("echo", echo, NULL)) >= 0);
	assert_int_equal(run_step(p, 0, t, 20), 20);
	assert_int_equal(run_step(p, 1, t, 20), 20);
	ql_rpc_table_destroy(t);
	ql_program_free(p);
}

/* A wrong answer is caught: expect a weight the function does not return. */
static void test_check_catches_wrong(void **state)
{
	const char *path =
		write_tmp("wrong.yaml",
			  "calls:\n"
			  "  - function: qlink_parity\n"
			  "    args: [ { type: bits, n: 256, gen: ones } ]\n"
			  "    expect: [ { type: u8, value: 0 }, { type: i32, value: 255 } ]\n",
			  0);
	struct ql_program *p;
	struct ql_rpc_table *t;

	assert_int_equal(ql_program_load(path, &p, NULL), 0);
	assert_int_equal(p->calls[0].repeat, 1);
	assert_int_equal(ql_rpc_table_create(4, &t), 0);
	assert_int_equal(ql_rpc_table_add(t, ql_demo_parity_function()), 0);
	assert_int_equal(run_step(p, 0, t, 3), 0);
	ql_rpc_table_destroy(t);
	ql_program_free(p);
}

static void expect_error(const char *text, unsigned line, const char *substr)
{
	const char *path = write_tmp("bad.yaml", text, 0);
	struct ql_program *p = (void *)1;
	struct ql_diags d;
	int found = 0;

	assert_int_not_equal(ql_program_load(path, &p, &d), 0);
	assert_null(p);
	for (unsigned i = 0; i < d.count; i++)
		if (d.d[i].line == line && strstr(d.d[i].msg, substr))
			found = 1;
	if (!found) {
		ql_diags_print(&d, path, stderr);
		fail_msg("no diagnostic at line %u with '%s'", line, substr);
	}
}

/* Every schema problem at once, and one document per file. */
static void test_every_problem_one_document(void **state)
{
	const char *path = write_tmp("many.yaml",
				     "calls:\n  - function: f\n    repeat: many\n    windw: 2\n"
				     "  - args: {}\n",
				     0);
	struct ql_program *p = NULL;
	struct ql_diags d;

	(void)state;
	assert_int_equal(ql_program_load(path, &p, &d), -EINVAL);
	assert_null(p);
	if (d.count != 4)
		ql_diags_print(&d, path, stderr);
	assert_int_equal(d.count, 4);
	assert_int_equal(d.d[0].line, 3); /* repeat: not an integer */
	assert_int_equal(d.d[1].line, 4); /* windw: unknown */
	assert_int_equal(d.d[2].line, 5); /* args: not a list */
	assert_int_equal(d.d[3].line, 5); /* function missing */
	expect_error("calls:\n  - function: f\n---\ncalls:\n  - function: g\n", 3,
		     "a second YAML document");
}

static void test_errors(void **state)
{
	struct ql_program *p;

	expect_error("", 1, "empty");
	expect_error("calls: [\n", 2, "YAML syntax error");
	expect_error("calls: []\n", 1, "calls: a list needs at least one entry");
	expect_error("cals:\n  - function: f\n", 1, "unknown key 'cals'");
	expect_error("calls:\n  - args: []\n", 2, "missing required key 'function' in calls[0]");
	expect_error("calls:\n  - function: f\n    args:\n      - { type: u16 }\n", 4,
		     "calls[0].args[0].type: 'u16'");
	expect_error("calls:\n  - function: f\n    args:\n      - { type: bits }\n", 4, "needs n");
	expect_error("calls:\n  - function: f\n    args:\n      - { type: u8, value: 300 }\n", 4,
		     "is not a u8");
	expect_error("calls:\n  - function: f\n    args:\n      - { type: f32, value: x }\n", 4,
		     "not a number");
	expect_error("calls:\n  - function: f\n    args:\n      - { type: bits, n: 4, pattern: "
		     "\"10101\" }\n",
		     4, "longer than the value");
	expect_error("calls:\n  - function: f\n    args:\n      - { type: bits, n: 4, pattern: "
		     "\"12\" }\n",
		     4, "not a bit");
	expect_error(
		"calls:\n  - function: f\n    args:\n      - { type: bits, n: 8, gen: walk }\n", 4,
		"gen: 'walk'");
	expect_error("calls:\n  - function: f\n    args:\n      - { type: bits, n: 8, gen: "
		     "\"file:/nonexistent\" }\n",
		     4, "cannot read '/nonexistent'");
	expect_error("calls:\n  - function: f\n    args:\n      - { type: u8_array, n: 7, gen: "
		     "counter }\n",
		     4, "is for scalars");
	expect_error("calls:\n  - function: f\n    check: echo\n    expect: [ { type: u8 } ]\n", 3,
		     "contradicts");
	expect_error("calls:\n  - function: f\n    check: exact\n", 3, "'exact' is not one of");
	expect_error("calls:\n  - function: f\n    rate_hz: -1\n", 3, "rate_hz");
	expect_error("calls:\n  - function: f\n    window: 0\n", 3, "window");
	expect_error("calls:\n  - function: f\n    repeat: 0\n", 3, "repeat");
	expect_error("calls:\n  - function: f\n    repeat: many\n", 3, "not an integer");
	assert_int_equal(ql_program_load("/nonexistent.yaml", &p, NULL), -ENOENT);
	assert_non_null(strstr(ql_error_detail(), "/nonexistent.yaml"));
}

static int setup(void **state)
{
	return mkdtemp(dir) ? 0 : -1;
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
		cmocka_unit_test(test_example_program),
		cmocka_unit_test(test_generators_and_checks),
		cmocka_unit_test(test_check_catches_wrong),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_every_problem_one_document),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
