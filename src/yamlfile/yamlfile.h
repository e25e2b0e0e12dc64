/* SPDX-License-Identifier: MIT */
/*
 * yamlfile: how qlink loads a YAML file with libcyaml and reports every
 * problem with its line; shared by qlinkd's configuration and program
 * files (config/) and the endpoint service's endpoints files (endpoint/).
 * A module of its own below both (it needs only libcyaml, libyaml and
 * qlink/error.h), compiled into libqlink-control; in-tree only.
 *
 * libyaml parses the file first into a node tree: syntax errors come out of it with their line, and
 * it maps a key path ("control.port", "plugins.1.path") to the line of that
 * key for the checks made after libcyaml has loaded the structs. libcyaml's
 * own errors are captured from its log callback, whose backtrace names the
 * path and line of the failing value.
 */
#ifndef QL_YAMLFILE_YAMLFILE_H
#define QL_YAMLFILE_YAMLFILE_H

#include <cyaml/cyaml.h>
#include <stddef.h>
#include <yaml.h>

#include "yamlfile/diag.h"

struct ql_yaml_file {
	const char *path;
	char *text;
	size_t len;
	yaml_document_t doc;
	int have_doc;
	struct ql_diags *diags;
};

/* Add a diagnostic (and keep the first as the ql_error detail). */
void ql__diag_add(struct ql_yaml_file *f, unsigned line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Lists and mappings nested deeper than this are refused before the
 * document is built (config, program and endpoint files alike). */
#define QL_YAML_MAX_DEPTH 64u

/* Read and parse path. 0, or a negative errno with a diagnostic added
 * (-EINVAL for a syntax error, nesting deeper than QL_YAML_MAX_DEPTH or an
 * empty document). */
int ql__yaml_open(struct ql_yaml_file *f, const char *path, struct ql_diags *diags);
void ql__yaml_close(struct ql_yaml_file *f);

/* 1-based line of the key (or sequence entry) at a dotted path; of the
 * deepest part of the path that exists if not all of it does; 1 if none. */
unsigned ql__yaml_line(const struct ql_yaml_file *f, const char *path);
/* The same with a printf-formatted path. */
unsigned ql__yaml_linef(const struct ql_yaml_file *f, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Load the file's text with schema; on failure add libcyaml's error as a
 * diagnostic with its path and line and return -EINVAL. */
int ql__yaml_cyaml_load(struct ql_yaml_file *f, const cyaml_schema_value_t *schema, void **out);
void ql__yaml_cyaml_free(const cyaml_schema_value_t *schema, void *data);
/* The one way config and program files are read: open and parse path with
 * schema, then build(f, raw, ctx) turns the raw tree into the caller's object
 * (schema NULL: no libcyaml, raw NULL; build reads f->doc itself)
 * (adding a diagnostic per problem; non-zero only when out of memory).
 * Returns 0, or a negative errno with diags filled and the detail sentence
 * ("FILE:LINE: message") set from the first problem. */
int ql__yaml_load(const char *path, const cyaml_schema_value_t *schema, struct ql_diags *diags,
		  int (*build)(struct ql_yaml_file *f, void *raw, void *ctx), void *ctx);

/* "plugins.0.path" -> "plugins[0].path", in place, for messages. */
void ql__yaml_display_path(char *path);
/* The same into buf, from path left as it is; buf. */
const char *ql__yaml_shown(const char *path, char *buf, size_t len);
/* A node's 1-based line; "a mapping", "a list" or "a scalar". */
unsigned ql__yaml_node_line(const yaml_node_t *n);
const char *ql__yaml_node_kind(const yaml_node_t *n);

/* strdup that tolerates NULL; -ENOMEM is the caller's to report. */
char *ql__strdup0(const char *s);

#endif
