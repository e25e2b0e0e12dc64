/* SPDX-License-Identifier: MIT */
/*
 * The endpoints specification: built in code (ql_ep_spec_add) or loaded from
 * a YAML file with libcyaml (docs/endpoint.md, "The endpoints file"), with a
 * line number on every problem (yamlfile/yamlfile.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "endpoint/ep_int.h"
#include "qlink/error.h"
#include "yamlfile/yamlfile.h"

static const char *const type_names[] = { NULL, "send", "receive", "write", "read" };

const char *ql_ep_type_name(enum ql_ep_type type)
{
	return (int)type >= QL_EP_SEND && (int)type <= QL_EP_READ ? type_names[type] : NULL;
}

int ql_ep_type_parse(const char *name, enum ql_ep_type *type)
{
	for (int t = QL_EP_SEND; name && t <= QL_EP_READ; t++)
		if (!strcmp(name, type_names[t])) {
			*type = (enum ql_ep_type)t;
			return 0;
		}
	return ql_error_set(-EINVAL, "unknown endpoint type '%s' (send, receive, write, read)",
			    name ? name : "(null)");
}

const char *ql__ep_path_problem(const char *path, size_t len)
{
	if (len == 0 || path[0] != '/')
		return "a path starts with '/'";
	if (len >= QL_EP_PATH_MAX)
		return "a path is at most 127 bytes";
	for (size_t i = 0; i < len; i++)
		if (path[i] <= ' ' || path[i] > '~')
			return "a path is printable ASCII without spaces";
	return NULL;
}

int ql_ep_spec_create(struct ql_ep_spec **spec)
{
	if (!spec)
		return ql_error_set(-EINVAL, "ql_ep_spec_create: NULL argument");
	*spec = calloc(1, sizeof(**spec));
	return *spec ? 0 : ql_error_set(-ENOMEM, "out of memory");
}

int ql_ep_spec_add(struct ql_ep_spec *spec, const char *path, enum ql_ep_type type, size_t size)
{
	const char *why;

	if (!spec || !path)
		return ql_error_set(-EINVAL, "ql_ep_spec_add: NULL argument");
	if ((why = ql__ep_path_problem(path, strlen(path))))
		return ql_error_set(-EINVAL, "endpoint path '%.40s': %s", path, why);
	if (!ql_ep_type_name(type))
		return ql_error_set(-EINVAL, "endpoint %s: unknown type %d", path, (int)type);
	if (size == 0 || size > QL_EP_SIZE_MAX)
		return ql_error_set(-EINVAL, "endpoint %s: size %zu out of range (1 .. %llu)", path,
				    size, QL_EP_SIZE_MAX);
	for (int i = 0; i < spec->count; i++)
		if (spec->e[i].type == type && !strcmp(spec->e[i].path, path))
			return ql_error_set(-EEXIST, "endpoint %s (%s) is defined twice", path,
					    ql_ep_type_name(type));
	if (spec->count >= QL_EP_MAX_ENDPOINTS)
		return ql_error_set(-ENOSPC, "more than %d endpoints", QL_EP_MAX_ENDPOINTS);
	strcpy(spec->e[spec->count].path, path);
	spec->e[spec->count].type = type;
	spec->e[spec->count].size = size;
	spec->count++;
	return 0;
}

int ql_ep_spec_count(const struct ql_ep_spec *spec)
{
	return spec ? spec->count : 0;
}

int ql_ep_spec_get(const struct ql_ep_spec *spec, int i, struct ql_ep_info *info)
{
	if (!spec || !info || i < 0 || i >= spec->count)
		return -ERANGE;
	info->path = spec->e[i].path;
	info->type = spec->e[i].type;
	info->size = spec->e[i].size;
	return 0;
}

void ql_ep_spec_free(struct ql_ep_spec *spec)
{
	free(spec);
}

/* ---- YAML ------------------------------------------------------------- */

struct raw_buffer {
	int64_t *size;
};

struct raw_endpoint {
	char *path;
	char *type;
	struct raw_buffer *buffer;
};

struct raw_spec {
	char *version;
	struct raw_endpoint *endpoints;
	unsigned endpoints_count;
};

static const cyaml_schema_field_t buffer_fields[] = {
	CYAML_FIELD_INT_PTR("size", CYAML_FLAG_POINTER, struct raw_buffer, size),
	CYAML_FIELD_END,
};

static const cyaml_schema_field_t endpoint_fields[] = {
	CYAML_FIELD_STRING_PTR("path", CYAML_FLAG_POINTER, struct raw_endpoint, path, 0,
			       CYAML_UNLIMITED),
	CYAML_FIELD_STRING_PTR("type", CYAML_FLAG_POINTER, struct raw_endpoint, type, 0,
			       CYAML_UNLIMITED),
	CYAML_FIELD_MAPPING_PTR("buffer", CYAML_FLAG_POINTER, struct raw_endpoint, buffer,
				buffer_fields),
	CYAML_FIELD_END,
};

static const cyaml_schema_value_t endpoint_entry = {
	CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct raw_endpoint, endpoint_fields),
};

static const cyaml_schema_field_t top_fields[] = {
	/* a string: the seed writes "0.0.1" (see spec_version) */
	CYAML_FIELD_STRING_PTR("version", CYAML_FLAG_POINTER, struct raw_spec, version, 0,
			       CYAML_UNLIMITED),
	CYAML_FIELD_SEQUENCE("endpoints", CYAML_FLAG_POINTER, struct raw_spec, endpoints,
			     &endpoint_entry, 1, QL_EP_MAX_ENDPOINTS),
	CYAML_FIELD_END,
};

static const cyaml_schema_value_t top_schema = {
	CYAML_VALUE_MAPPING(CYAML_FLAG_POINTER, struct raw_spec, top_fields),
};

/* The seed's own example (doca-cpp, seed 002) says version: "0.0.1" of
 * the same keys, which qlink reads as its version 1 (docs/endpoint.md, "The
 * seed's version"). */
#define QL_EP_SPEC_SEED_VERSION "0.0.1"

/* Whether qlink reads this version: 1 (an integer, as YAML writes it) or
 * the seed's "0.0.1". */
static bool spec_version(const char *v)
{
	char *end;
	long n;

	if (!strcmp(v, QL_EP_SPEC_SEED_VERSION))
		return true;
	errno = 0;
	n = strtol(v, &end, 10);
	return *v && !*end && !errno && n == QL_EP_SPEC_VERSION;
}

static int build_spec(struct ql_yaml_file *f, void *rawp, void *ctx)
{
	struct raw_spec *raw = rawp;
	struct ql_ep_spec *spec = ctx;

	if (!spec_version(raw->version))
		ql__diag_add(f, ql__yaml_line(f, "version"),
			     "version %.20s is not supported (this qlink reads version %d, and the "
			     "seed's \"%s\" as version %d)",
			     raw->version, QL_EP_SPEC_VERSION, QL_EP_SPEC_SEED_VERSION,
			     QL_EP_SPEC_VERSION);
	for (unsigned i = 0; i < raw->endpoints_count; i++) {
		const struct raw_endpoint *r = &raw->endpoints[i];
		enum ql_ep_type type = 0;
		const char *why = ql__ep_path_problem(r->path, strlen(r->path));
		int ok = 1;

		if (why) {
			ql__diag_add(f, ql__yaml_linef(f, "endpoints.%u.path", i),
				     "endpoints[%u].path '%.40s': %s", i, r->path, why);
			ok = 0;
		}
		for (int t = QL_EP_SEND; t <= QL_EP_READ; t++)
			if (!strcmp(r->type, type_names[t]))
				type = (enum ql_ep_type)t;
		if (!type) {
			ql__diag_add(f, ql__yaml_linef(f, "endpoints.%u.type", i),
				     "endpoints[%u].type '%.20s' is not one of send, receive, "
				     "write, read",
				     i, r->type);
			ok = 0;
		}
		if (*r->buffer->size < 1 || (uint64_t)*r->buffer->size > QL_EP_SIZE_MAX) {
			ql__diag_add(f, ql__yaml_linef(f, "endpoints.%u.buffer.size", i),
				     "endpoints[%u].buffer.size %lld is out of range (1 .. %llu)",
				     i, (long long)*r->buffer->size, QL_EP_SIZE_MAX);
			ok = 0;
		}
		if (!ok)
			continue;
		for (int j = 0; j < spec->count; j++)
			if (spec->e[j].type == type && !strcmp(spec->e[j].path, r->path)) {
				ql__diag_add(f, ql__yaml_linef(f, "endpoints.%u.path", i),
					     "endpoints[%u]: %s (%s) is already defined "
					     "(endpoints[%d])",
					     i, r->path, type_names[type], j);
				ok = 0;
				break;
			}
		if (!ok)
			continue;
		strcpy(spec->e[spec->count].path, r->path);
		spec->e[spec->count].type = type;
		spec->e[spec->count].size = (size_t)*r->buffer->size;
		spec->count++;
	}
	return 0;
}

int ql_ep_spec_load(const char *file, struct ql_ep_spec **out)
{
	struct ql_diags diags;
	struct ql_ep_spec *spec;
	int ret;

	if (!file || !out)
		return ql_error_set(-EINVAL, "ql_ep_spec_load: NULL argument");
	*out = NULL;
	memset(&diags, 0, sizeof(diags));
	ret = ql_ep_spec_create(&spec);
	if (ret)
		return ret;
	ret = ql__yaml_load(file, &top_schema, &diags, build_spec, spec);
	if (ret) {
		free(spec);
		return ret;
	}
	*out = spec;
	return 0;
}
