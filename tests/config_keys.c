/* SPDX-License-Identifier: MIT */
/*
 * config_keys: qlinkd's configuration keys as the key table
 * (src/config/config.c) has them, for the man page.
 *
 *   config_keys list   every key's path, one a line, in the table's order
 *   config_keys man    qlinkd.yaml(5)'s KEY SUMMARY section (groff), as
 *                      scripts/gen-config-keys.sh writes it into the page
 *                      and tests/check_config_keys.sh compares it
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "config/config.h"

/* Text for groff: backslashes escaped, no request at a line start. */
static void put_text(const char *s)
{
	if (*s == '.' || *s == '\'')
		fputs("\\&", stdout);
	for (; *s; s++) {
		if (*s == '\\')
			fputs("\\e", stdout);
		else if (*s == '-')
			fputs("\\-", stdout);
		else
			putchar(*s);
	}
}

/* "a|b" as "a, b" */
static void put_values(const char *v)
{
	char buf[256];
	size_t o = 0;

	for (; *v && o + 3 < sizeof(buf); v++) {
		if (*v == '|') {
			buf[o++] = ',';
			buf[o++] = ' ';
		} else {
			buf[o++] = *v;
		}
	}
	buf[o] = '\0';
	put_text(buf);
}

static void put_int(const struct ql_config_key *k, int64_t v)
{
	char buf[32];

	if ((k->flags & QL_CONFIG_KEY_HEX) && v > 9)
		snprintf(buf, sizeof(buf), "0x%" PRIX64, (uint64_t)v);
	else
		snprintf(buf, sizeof(buf), "%" PRId64, v);
	put_text(buf);
}

/* The n-th name of "a|b|c". */
static void put_value(const char *values, int64_t n)
{
	char buf[64];
	const char *p = values;

	for (; n > 0 && p; n--) {
		p = strchr(p, '|');
		if (p)
			p++;
	}
	snprintf(buf, sizeof(buf), "%.*s", p ? (int)strcspn(p, "|") : 0, p ? p : "");
	put_text(buf);
}

static void put_key(const struct ql_config_key *k)
{
	static const char *const types[] = {
		[QL_CONFIG_KEY_MAP] = "mapping",	  [QL_CONFIG_KEY_LIST] = "list of mappings",
		[QL_CONFIG_KEY_INT] = "integer",	  [QL_CONFIG_KEY_STR] = "string",
		[QL_CONFIG_KEY_ENUM] = "one of",	  [QL_CONFIG_KEY_FLAGS] = "list of",
		[QL_CONFIG_KEY_STRS] = "list of strings", [QL_CONFIG_KEY_INTS] = "list of integers",
	};

	printf(".TP\n.B %s\n", k->path);
	fputs(types[k->type], stdout);
	if (k->type == QL_CONFIG_KEY_ENUM || k->type == QL_CONFIG_KEY_FLAGS) {
		putchar(' ');
		put_values(k->values);
	}
	if (k->type == QL_CONFIG_KEY_INT && k->min > INT32_MIN + 1) {
		fputs(", ", stdout);
		put_int(k, k->min);
		fputs("..", stdout);
		if (k->flags & QL_CONFIG_KEY_NCPU)
			fputs("(CPUs \\- 1)", stdout);
		else
			put_int(k, k->max);
	}
	if (k->flags & QL_CONFIG_KEY_REQUIRED) {
		fputs(", required", stdout);
	} else if (k->def_doc) {
		fputs(", default ", stdout);
		put_text(k->def_doc);
	} else if (k->type == QL_CONFIG_KEY_INT) {
		fputs(", default ", stdout);
		put_int(k, k->def);
	} else if (k->type == QL_CONFIG_KEY_ENUM) {
		fputs(", default ", stdout);
		put_value(k->values, k->def);
	} else if (k->type == QL_CONFIG_KEY_STR) {
		fputs(", default ", stdout);
		put_text(k->def_str ? k->def_str : "none");
	}
	fputs(": ", stdout);
	put_text(k->doc);
	fputs(".\n", stdout);
}

int main(int argc, char **argv)
{
	size_t n;
	const struct ql_config_key *k = ql_config_keys(&n);

	if (argc == 2 && !strcmp(argv[1], "list")) {
		for (size_t i = 0; i < n; i++)
			printf("%s\n", k[i].path);
		return 0;
	}
	if (argc != 2 || strcmp(argv[1], "man")) {
		fprintf(stderr, "usage: config_keys list|man\n");
		return 2;
	}
	printf(".SH KEY SUMMARY\n"
	       "Every key, with its type, its range or values and its default, as\n"
	       "qlinkd's key table has them (generated from it by\n"
	       ".BR scripts/gen\\-config\\-keys.sh ;\n"
	       "the sections above describe each key).\n");
	for (size_t i = 0; i < n; i++)
		put_key(&k[i]);
	return 0;
}
