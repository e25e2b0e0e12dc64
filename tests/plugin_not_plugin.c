/* SPDX-License-Identifier: MIT */
/* A shared library that is not a qlink plugin (no ql_plugin_info). */
int not_a_plugin(int x);

int not_a_plugin(int x)
{
	return x + 1;
}
