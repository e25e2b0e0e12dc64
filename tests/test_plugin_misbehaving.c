/* SPDX-License-Identifier: MIT */
/*
 * Plugin loading against a plugin that misbehaves (tests/plugin_misbehaving.c,
 * its behaviour chosen per load by QL_TEST_PLUGIN_MODE): a NULL or malformed
 * description is refused at load with the file named; init failing is
 * refused; register_functions failing (negative or positive), registering a
 * NULL function, or ignoring a refused registration is an error of the
 * registration with the plugin named, never a partial success; a path
 * without a slash names a file in the current directory, not one on the
 * library path; fini runs at unload.
 */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "expect_detail.h"

#include "qlink/error.h"
#if __has_include("plugin/loader.h")
#include "plugin/loader.h" /* the loader is qlinkd's own since the library split */
#else
#include "qlink/plugin.h"
#endif
#include "qlink/rpc.h"

static int load(const char *mode, const char *config, struct ql_plugin **p)
{
	setenv("QL_TEST_PLUGIN_MODE", mode, 1);
	*p = NULL;
	return ql_plugin_load(QL_TEST_PLUGIN, config, p);
}

static void test_bad_descriptions(void **state)
{
	struct ql_plugin *p;

	(void)state;
	assert_int_equal(load("null", NULL, &p), -EINVAL);
	expect_detail("ql_plugin_info() returned NULL");
	expect_detail(QL_TEST_PLUGIN);
	assert_null(p);
	assert_int_equal(load("noname", NULL, &p), -EINVAL);
	expect_detail("malformed description: name is empty");
	assert_int_equal(load("noreg", NULL, &p), -EINVAL);
	expect_detail("malformed description: register_functions is NULL");
	assert_int_equal(load("good", "fail", &p), -EINVAL);
	expect_detail("init failed");
	expect_detail("(fail)");
	assert_null(p);
}

static void test_registration_failures(void **state)
{
	static const struct {
		const char *mode;
		int err;
		const char *detail;
	} cases[] = {
		{ "regfail", -EIO, "plugin misbehaving: register_functions failed" },
		{ "regpositive", -EINVAL, "plugin misbehaving: register_functions failed" },
		{ "regnull", -EINVAL, "plugin misbehaving: registering (null)" },
		{ "regignore", -EEXIST, "plugin misbehaving: registering misbehaving_nop" },
	};
	struct ql_rpc_table *t;
	struct ql_plugin *p;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(ql_rpc_table_create(4, &t), 0);
		assert_int_equal(load(cases[i].mode, NULL, &p), 0);
		if (ql_plugin_register_table(p, t) != cases[i].err)
			fail_msg("%s: not %d (%s)", cases[i].mode, cases[i].err, ql_error_detail());
		expect_detail(cases[i].detail);
		ql_plugin_unload(p);
		ql_rpc_table_destroy(t);
	}
	/* and when it behaves */
	assert_int_equal(ql_rpc_table_create(4, &t), 0);
	assert_int_equal(load("good", NULL, &p), 0);
	assert_int_equal(ql_plugin_register_table(p, t), 0);
	assert_int_equal(ql_plugin_function_count(p), 1);
	assert_string_equal(ql_plugin_path(p), QL_TEST_PLUGIN);
	assert_string_equal(ql_plugin_get_info(p)->name, "misbehaving");
	assert_true(ql_rpc_table_find(t, ql_rpc_fnv1a("misbehaving_nop")) >= 0);
	ql_plugin_unload(p);
	ql_rpc_table_destroy(t);
	ql_plugin_unload(NULL);
}

static void test_fini_and_relative_path(void **state)
{
	char dir[PATH_MAX], cwd[PATH_MAX];
	struct ql_plugin *p;

	(void)state;
	/* fini runs at unload, with the state init made */
	setenv("QL_TEST_PLUGIN_FINI", "set", 1);
	assert_int_equal(load("good", NULL, &p), 0);
	ql_plugin_unload(p);
	assert_string_equal(getenv("QL_TEST_PLUGIN_FINI"), "called");
	unsetenv("QL_TEST_PLUGIN_FINI");

	/* a bare file name is the file in the current directory */
	snprintf(dir, sizeof(dir), "%s", QL_TEST_PLUGIN);
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	assert_int_equal(chdir(dirname(dir)), 0);
	setenv("QL_TEST_PLUGIN_MODE", "good", 1);
	assert_int_equal(ql_plugin_load("plugin_misbehaving.so", NULL, &p), 0);
	ql_plugin_unload(p);
	assert_int_equal(ql_plugin_load("no_such_plugin.so", NULL, &p), -ENOENT);
	assert_int_equal(chdir(cwd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_descriptions),
		cmocka_unit_test(test_registration_failures),
		cmocka_unit_test(test_fini_and_relative_path),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
