/* SPDX-License-Identifier: MIT */
/* A library with a symbol nothing defines: RTLD_NOW must refuse it. */
int ql_test_symbol_that_does_not_exist(int x);
int uses_missing(int x);

int uses_missing(int x)
{
	return ql_test_symbol_that_does_not_exist(x);
}
