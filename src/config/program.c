/* SPDX-License-Identifier: MIT */
/*
 * VPPU programs (see config/program.h): libcyaml maps the file onto raw
 * structs of strings, which are then checked and compiled into typed
 * generators; the generators run in the VPPU's send loop, so they only
 * compute, never allocate.
 */
#define _GNU_SOURCE
#include "config/program.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "qlink/error.h"
#include "qlink/rpc.h"
#include "yamlfile/yamlfile.h"

#define MAX_PAYLOAD (65536u - 64u)

struct raw_value {
	char *type;
	int64_t *n;
	char *value;
	char *gen;
	char *pattern;
	int64_t *seed;
};

struct raw_call {
	char *function;
	struct raw_value *args;
	unsigned args_count;
	struct raw_value *expect;
	unsigned expect_count;
	char *check;
	double *rate_hz;
	int64_t *window;
	int64_t *repeat;
};

struct raw_program {
	struct raw_call *calls;
	unsigned calls_count;
};

#define OPT (CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL)
#define STR(key, type, member) CYAML_FIELD_STRING_PTR(key, OPT, type, member, 0, CYAML_UNLIMITED)

static const cyaml_schema_field_t value_fields[] = {
	CYAML_FIELD_STRING_PTR("type", CYAML_FLAG_POINTER, struct raw_value, type, 1,
			       CYAML_UNLIMITED),
	CYAML_FIELD_INT_PTR("n", OPT, struct raw_value, n),
	STR("value", struct raw_value, value),
	STR("gen", struct raw_value, gen),
	STR("pattern", struct raw_value, pattern),
	CYAML_FIELD_INT_PTR("seed", OPT, struct raw_value, seed),
	CYAML_FIELD_END,
};

static const cyaml_schema_value_t value_entry = {
	CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct raw_value, value_fields),
};

static const cyaml_schema_field_t call_fields[] = {
	CYAML_FIELD_STRING_PTR("function", CYAML_FLAG_POINTER, struct raw_call, function, 1,
			       CYAML_UNLIMITED),
	CYAML_FIELD_SEQUENCE("args", OPT, struct raw_call, args, &value_entry, 0, QL_RPC_MAX_ARGS),
	CYAML_FIELD_SEQUENCE("expect", OPT, struct raw_call, expect, &value_entry, 0,
			     QL_RPC_MAX_RESULTS),
	STR("check", struct raw_call, check),
	CYAML_FIELD_FLOAT_PTR("rate_hz", OPT, struct raw_call, rate_hz),
	CYAML_FIELD_INT_PTR("window", OPT, struct raw_call, window),
	CYAML_FIELD_INT_PTR("repeat", OPT, struct raw_call, repeat),
	CYAML_FIELD_END,
};

static const cyaml_schema_value_t call_entry = {
	CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct raw_call, call_fields),
};

static const cyaml_schema_field_t top_fields[] = {
	CYAML_FIELD_SEQUENCE("calls", CYAML_FLAG_POINTER, struct raw_program, calls, &call_entry, 1,
			     CYAML_UNLIMITED),
	CYAML_FIELD_END,
};

static const cyaml_schema_value_t top_schema = {
	CYAML_VALUE_MAPPING(CYAML_FLAG_POINTER, struct raw_program, top_fields),
};

static const char *const type_names[] = { "u8",	 "i32", "u32",	    "i64",
					  "f32", "f64", "u8_array", "bits" };
static const char *const gen_names[] = { "value", "counter", "random", "zeros",
					 "ones",  "pattern", "file" };

/* ---- generators ------------------------------------------------------------ */

static uint64_t splitmix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static int is_scalar(enum ql_program_type t)
{
	return t <= QL_PROGRAM_F64;
}

static void put_scalar(const struct ql_program_value *v, uint8_t *p, int64_t i, double d)
{
	switch (v->type) {
	case QL_PROGRAM_U8:
		ql_rpc_put_u8(p, (uint8_t)i);
		break;
	case QL_PROGRAM_I32:
	case QL_PROGRAM_U32:
		ql_rpc_put_u32(p, (uint32_t)i);
		break;
	case QL_PROGRAM_I64:
		ql_rpc_put_u64(p, (uint64_t)i);
		break;
	case QL_PROGRAM_F32:
		ql_rpc_put_f32(p, (float)d);
		break;
	case QL_PROGRAM_F64:
		ql_rpc_put_f64(p, d);
		break;
	default:
		break;
	}
}

static void make_value(const struct ql_program_value *v, uint64_t n, uint8_t *p)
{
	uint64_t r;

	switch (v->gen) {
	case QL_PROGRAM_GEN_VALUE:
		put_scalar(v, p, v->ivalue, v->fvalue);
		return;
	case QL_PROGRAM_GEN_COUNTER:
		put_scalar(v, p, (int64_t)((uint64_t)v->ivalue + n), v->fvalue + (double)n);
		return;
	case QL_PROGRAM_GEN_RANDOM:
		r = splitmix64(v->seed ^ splitmix64(n));
		if (v->type == QL_PROGRAM_F32 || v->type == QL_PROGRAM_F64) {
			put_scalar(v, p, 0, (double)(r >> 11) / 9007199254740992.0);
			return;
		}
		for (uint32_t i = 0; i < v->size; i += 8) {
			uint32_t k = v->size - i < 8 ? v->size - i : 8;

			for (uint32_t j = 0; j < k; j++)
				p[i + j] = (uint8_t)(r >> (8 * j));
			r = splitmix64(r);
		}
		break;
	case QL_PROGRAM_GEN_ZEROS:
		memset(p, 0, v->size);
		return;
	case QL_PROGRAM_GEN_ONES:
		if (is_scalar(v->type)) {
			put_scalar(v, p, 1, 1.0);
			return;
		}
		memset(p, 0xff, v->size);
		break;
	case QL_PROGRAM_GEN_PATTERN:
		memcpy(p, v->data, v->size);
		return;
	case QL_PROGRAM_GEN_FILE:
		memcpy(p, v->data + (n % (v->data_len / v->size)) * v->size, v->size);
		break;
	}
	if (v->type == QL_PROGRAM_BITS)
		ql_rpc_bits_clear_tail(p, v->n);
}

void ql_program_make_args(const struct ql_program_call *s, uint64_t n, uint8_t *args)
{
	for (uint32_t i = 0; i < s->nargs; i++) {
		make_value(&s->args[i], n, args);
		args += s->args[i].size;
	}
}

static void vppu_make_args(void *ctx, uint64_t n, uint8_t *args)
{
	ql_program_make_args(ctx, n, args);
}

static int vppu_check(void *ctx, uint64_t n, int32_t status, const uint8_t *res, uint32_t len)
{
	struct ql_program_call *s = ctx;
	uint8_t *p = s->scratch;

	if (status)
		return 1;
	switch (s->check) {
	case QL_PROGRAM_CHECK_STATUS0:
		return 0;
	case QL_PROGRAM_CHECK_ECHO:
		if (len != s->arg_len)
			return 1;
		ql_program_make_args(s, n, p);
		return memcmp(p, res, len) != 0;
	case QL_PROGRAM_CHECK_EXPECT:
		if (len != s->expect_len)
			return 1;
		for (uint32_t i = 0; i < s->nexpect; i++) {
			make_value(&s->expect[i], n, p);
			p += s->expect[i].size;
		}
		return memcmp(s->scratch, res, len) != 0;
	}
	return 1;
}

int ql_program_vppu_call(struct ql_program *prog, uint32_t index, struct ql_vppu_call *call,
			 struct ql_vppu_config *cfg)
{
	struct ql_program_call *s;

	if (!prog || index >= prog->ncalls)
		return ql_error_set(-EINVAL, "program: no step %u", index);
	s = &prog->calls[index];
	memset(call, 0, sizeof(*call));
	memset(cfg, 0, sizeof(*cfg));
	call->function = s->function;
	call->arg_len = s->arg_len;
	call->make_args = vppu_make_args;
	call->check = vppu_check;
	call->ctx = s;
	cfg->window = s->window;
	cfg->rate_hz = s->rate_hz;
	cfg->count = s->repeat;
	return 0;
}

/* ---- loading ----------------------------------------------------------------- */

static void free_value(struct ql_program_value *v)
{
	free(v->data);
}

void ql_program_free(struct ql_program *prog)
{
	if (!prog)
		return;
	for (uint32_t i = 0; i < prog->ncalls; i++) {
		struct ql_program_call *s = &prog->calls[i];

		free(s->function);
		for (uint32_t j = 0; j < s->nargs; j++)
			free_value(&s->args[j]);
		for (uint32_t j = 0; j < s->nexpect; j++)
			free_value(&s->expect[j]);
		free(s->args);
		free(s->expect);
		free(s->scratch);
	}
	free(prog->calls);
	free(prog->path);
	free(prog);
}

static int name_index(const char *s, const char *const *names, int n)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(s, names[i]))
			return i;
	return -1;
}

static int parse_scalar(struct ql_yaml_file *f, struct ql_program_value *v, const char *s,
			const char *where)
{
	char *end;

	errno = 0;
	if (v->type == QL_PROGRAM_F32 || v->type == QL_PROGRAM_F64) {
		v->fvalue = strtod(s, &end);
		if (end == s || *end || errno) {
			ql__diag_add(f, v->line, "%s.value: '%s' is not a number", where, s);
			return -EINVAL;
		}
		return 0;
	}
	static const int64_t lo[] = { 0, INT32_MIN, 0, INT64_MIN };
	static const int64_t hi[] = { 255, INT32_MAX, UINT32_MAX, INT64_MAX };
	long long x = strtoll(s, &end, 0);

	if (end == s || *end || errno || x < lo[v->type] || x > hi[v->type]) {
		ql__diag_add(f, v->line, "%s.value: '%s' is not a %s (%lld..%lld)", where, s,
			     type_names[v->type], (long long)lo[v->type], (long long)hi[v->type]);
		return -EINVAL;
	}
	v->ivalue = x;
	v->fvalue = (double)x;
	return 0;
}

static int parse_pattern(struct ql_yaml_file *f, struct ql_program_value *v, const char *s,
			 const char *where)
{
	uint32_t i = 0;

	v->data = calloc(1, v->size);
	if (!v->data)
		return -ENOMEM;
	v->data_len = v->size;
	for (const char *c = s; *c; c++) {
		if (*c == ' ' || *c == '_' || *c == ',')
			continue;
		if (v->type == QL_PROGRAM_BITS) {
			if (*c != '0' && *c != '1') {
				ql__diag_add(f, v->line, "%s.pattern: '%c' is not a bit (0 or 1)",
					     where, *c);
				return -EINVAL;
			}
			if (i >= v->n)
				goto too_long;
			ql_rpc_bit_set(v->data, i++, *c == '1');
		} else {
			if (!isxdigit((unsigned char)c[0]) || !isxdigit((unsigned char)c[1])) {
				ql__diag_add(f, v->line,
					     "%s.pattern: expected hex bytes like \"01 ff 3a\"",
					     where);
				return -EINVAL;
			}
			if (i >= v->size)
				goto too_long;
			char hex[3] = { c[0], c[1], 0 };

			v->data[i++] = (uint8_t)strtoul(hex, NULL, 16);
			c++;
		}
	}
	return 0;
too_long:
	ql__diag_add(f, v->line, "%s.pattern: longer than the value (%u %s)", where, v->n,
		     v->type == QL_PROGRAM_BITS ? "bits" : "bytes");
	return -EINVAL;
}

static int load_file(struct ql_yaml_file *f, struct ql_program_value *v, const char *name,
		     const char *where)
{
	struct ql_yaml_file g;
	struct ql_diags none;
	const char *slash = strrchr(f->path, '/');
	char *path = NULL;
	int ret;

	if (name[0] != '/' && slash) {
		if (asprintf(&path, "%.*s/%s", (int)(slash - f->path), f->path, name) < 0)
			return -ENOMEM;
	} else {
		path = strdup(name);
		if (!path)
			return -ENOMEM;
	}
	/* read it as text: yaml_open fails parsing binary data but keeps it */
	memset(&none, 0, sizeof(none));
	ret = ql__yaml_open(&g, path, &none);
	if (ret && !g.text) {
		ql__diag_add(f, v->line, "%s.gen: cannot read '%s': %s", where, path,
			     ql_strerror(ret));
		free(path);
		ql__yaml_close(&g);
		return -EINVAL;
	}
	if (!g.len || g.len % v->size || g.len > UINT32_MAX) {
		ql__diag_add(f, v->line,
			     "%s.gen: '%s' holds %zu bytes, not a whole number of %u-byte records",
			     where, path, g.len, v->size);
		free(path);
		ql__yaml_close(&g);
		return -EINVAL;
	}
	v->data = (uint8_t *)g.text;
	v->data_len = (uint32_t)g.len;
	g.text = NULL;
	ql__yaml_close(&g);
	free(path);
	return 0;
}

static int compile_value(struct ql_yaml_file *f, const struct raw_value *r,
			 struct ql_program_value *v, const char *where)
{
	char shown[64];
	int t, g;

	v->line = ql__yaml_line(f, where);
	snprintf(shown, sizeof(shown), "%s", where);
	ql__yaml_display_path(shown);
	where = shown;
	t = name_index(r->type, type_names, 8);
	if (t < 0) {
		ql__diag_add(f, v->line,
			     "%s.type: '%s' is not one of u8, i32, u32, i64, f32, f64, u8_array, "
			     "bits",
			     where, r->type);
		return -EINVAL;
	}
	v->type = (enum ql_program_type)t;
	if (is_scalar(v->type)) {
		if (r->n && *r->n != 1) {
			ql__diag_add(f, v->line, "%s.n: a %s is one value; n must be 1 or absent",
				     where, r->type);
			return -EINVAL;
		}
		v->n = 1;
		v->size = (uint32_t)ql_rpc_type_elem_size((uint8_t[]){
			QL_RPC_TYPE_UINT8, QL_RPC_TYPE_INT32, QL_RPC_TYPE_INT32, QL_RPC_TYPE_INT64,
			QL_RPC_TYPE_FLOAT32, QL_RPC_TYPE_FLOAT64 }[v->type]);
	} else {
		if (!r->n || *r->n < 1 || *r->n > (int64_t)MAX_PAYLOAD * 8 ||
		    (v->type == QL_PROGRAM_U8_ARRAY && *r->n > MAX_PAYLOAD)) {
			ql__diag_add(f, v->line, "%s.n: a %s needs n, 1..%u", where, r->type,
				     v->type == QL_PROGRAM_BITS ? MAX_PAYLOAD * 8 : MAX_PAYLOAD);
			return -EINVAL;
		}
		v->n = (uint32_t)*r->n;
		v->size = v->type == QL_PROGRAM_BITS ? (uint32_t)ql_rpc_bits_size(v->n) : v->n;
	}
	v->seed = r->seed ? (uint64_t)*r->seed : 1;
	if (r->gen && !strncmp(r->gen, "file:", 5)) {
		v->gen = QL_PROGRAM_GEN_FILE;
		return load_file(f, v, r->gen + 5, where);
	}
	if (r->gen) {
		g = name_index(r->gen, gen_names, 7);
		if (g < 0 || g == QL_PROGRAM_GEN_FILE) {
			ql__diag_add(f, v->line,
				     "%s.gen: '%s' is not one of value, counter, random, zeros, "
				     "ones, pattern, file:PATH",
				     where, r->gen);
			return -EINVAL;
		}
	} else {
		g = r->value   ? QL_PROGRAM_GEN_VALUE :
		    r->pattern ? QL_PROGRAM_GEN_PATTERN :
				 QL_PROGRAM_GEN_ZEROS;
	}
	v->gen = (enum ql_program_gen)g;
	if ((g == QL_PROGRAM_GEN_VALUE || g == QL_PROGRAM_GEN_COUNTER) && !is_scalar(v->type)) {
		ql__diag_add(f, v->line,
			     "%s: gen %s is for scalars; a %s takes random, zeros, "
			     "ones, pattern or file:PATH",
			     where, gen_names[g], r->type);
		return -EINVAL;
	}
	if (g == QL_PROGRAM_GEN_PATTERN && is_scalar(v->type)) {
		ql__diag_add(f, v->line, "%s: a pattern is for bits and u8_array, not %s", where,
			     r->type);
		return -EINVAL;
	}
	if (g == QL_PROGRAM_GEN_VALUE && !r->value) {
		ql__diag_add(f, v->line, "%s: gen value needs a value", where);
		return -EINVAL;
	}
	if (g == QL_PROGRAM_GEN_PATTERN && !r->pattern) {
		ql__diag_add(f, v->line, "%s: gen pattern needs a pattern", where);
		return -EINVAL;
	}
	if (r->value && is_scalar(v->type) && parse_scalar(f, v, r->value, where))
		return -EINVAL;
	if (g == QL_PROGRAM_GEN_PATTERN)
		return parse_pattern(f, v, r->pattern, where);
	return 0;
}

static int compile_values(struct ql_yaml_file *f, const struct raw_value *raw, unsigned count,
			  struct ql_program_value **out, uint32_t *nout, uint32_t *len,
			  const char *where)
{
	char w[64];
	int ret = 0;
	uint64_t total = 0;

	if (!count)
		return 0;
	*out = calloc(count, sizeof(**out));
	if (!*out)
		return -ENOMEM;
	for (unsigned i = 0; i < count; i++) {
		snprintf(w, sizeof(w), "%s.%u", where, i);
		*nout = i + 1;
		if (compile_value(f, &raw[i], &(*out)[i], w))
			ret = -EINVAL;
		total += (*out)[i].size;
	}
	if (!ret && total > MAX_PAYLOAD) {
		snprintf(w, sizeof(w), "%s", where);
		ql__yaml_display_path(w);
		ql__diag_add(f, ql__yaml_line(f, where), "%s: %llu bytes do not fit a ring slot", w,
			     (unsigned long long)total);
		ret = -EINVAL;
	}
	*len = (uint32_t)total;
	return ret;
}

static int compile(struct ql_yaml_file *f, const struct raw_program *r, struct ql_program *p)
{
	p->calls = calloc(r->calls_count, sizeof(*p->calls));
	if (!p->calls)
		return -ENOMEM;
	for (unsigned i = 0; i < r->calls_count; i++) {
		const struct raw_call *rc = &r->calls[i];
		struct ql_program_call *s = &p->calls[i];
		char where[64];
		unsigned line = ql__yaml_linef(f, "calls.%u", i);

		p->ncalls = i + 1;
		s->line = line;
		s->function = strdup(rc->function);
		if (!s->function)
			return -ENOMEM;
		snprintf(where, sizeof(where), "calls.%u.args", i);
		if (compile_values(f, rc->args, rc->args_count, &s->args, &s->nargs, &s->arg_len,
				   where) == -ENOMEM)
			return -ENOMEM;
		snprintf(where, sizeof(where), "calls.%u.expect", i);
		if (compile_values(f, rc->expect, rc->expect_count, &s->expect, &s->nexpect,
				   &s->expect_len, where) == -ENOMEM)
			return -ENOMEM;
		s->check = rc->expect_count ? QL_PROGRAM_CHECK_EXPECT : QL_PROGRAM_CHECK_STATUS0;
		if (rc->check) {
			unsigned cl = ql__yaml_linef(f, "calls.%u.check", i);

			if (!strcmp(rc->check, "echo") && !rc->expect_count)
				s->check = QL_PROGRAM_CHECK_ECHO;
			else if (!strcmp(rc->check, "expect") && rc->expect_count)
				s->check = QL_PROGRAM_CHECK_EXPECT;
			else if (!strcmp(rc->check, "status0") && !rc->expect_count)
				s->check = QL_PROGRAM_CHECK_STATUS0;
			else if (!strcmp(rc->check, "status0") || !strcmp(rc->check, "echo") ||
				 !strcmp(rc->check, "expect"))
				ql__diag_add(f, cl, "calls[%u].check: '%s' %s", i, rc->check,
					     rc->expect_count ? "contradicts the expect list" :
								"needs an expect list");
			else
				ql__diag_add(f, cl,
					     "calls[%u].check: '%s' is not one of status0, echo, "
					     "expect",
					     i, rc->check);
		}
		s->rate_hz = rc->rate_hz ? *rc->rate_hz : 0;
		if (!(s->rate_hz >= 0 && s->rate_hz <= 1e9))
			ql__diag_add(f, ql__yaml_linef(f, "calls.%u.rate_hz", i),
				     "calls[%u].rate_hz: %g is out of range (0 closed loop, "
				     "up to 1e9)",
				     i, s->rate_hz);
		s->window = 1;
		if (rc->window) {
			if (*rc->window < 1 || *rc->window > 65536)
				ql__diag_add(f, ql__yaml_linef(f, "calls.%u.window", i),
					     "calls[%u].window: %lld is out of range (1..65536)", i,
					     (long long)*rc->window);
			else
				s->window = (uint32_t)*rc->window;
		}
		s->repeat = 1;
		if (rc->repeat) {
			if (*rc->repeat < 1)
				ql__diag_add(f, ql__yaml_linef(f, "calls.%u.repeat", i),
					     "calls[%u].repeat: %lld: must be at least 1", i,
					     (long long)*rc->repeat);
			else
				s->repeat = (uint64_t)*rc->repeat;
		}
		s->scratch =
			calloc(1, (s->arg_len > s->expect_len ? s->arg_len : s->expect_len) + 8);
		if (!s->scratch)
			return -ENOMEM;
	}
	return 0;
}

static int build_program(struct ql_yaml_file *f, void *raw, void *ctx)
{
	return compile(f, raw, ctx);
}

int ql_program_load(const char *path, struct ql_program **out, struct ql_diags *diags)
{
	struct ql_diags local;
	struct ql_program *p;
	int ret;

	*out = NULL;
	p = calloc(1, sizeof(*p));
	if (!p || !(p->path = strdup(path))) {
		free(p);
		return -ENOMEM;
	}
	ret = ql__yaml_load(path, &top_schema, diags ? diags : &local, build_program, p);
	if (ret) {
		ql_program_free(p);
		return ret;
	}
	*out = p;
	return 0;
}
