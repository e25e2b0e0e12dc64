/* SPDX-License-Identifier: MIT */
/* YAML loading with line-numbered diagnostics (see yamlfile.h). */
#define _GNU_SOURCE
#include "yamlfile/yamlfile.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qlink/error.h"

char *ql__strdup0(const char *s)
{
	return s ? strdup(s) : NULL;
}

void ql_diags_print(const struct ql_diags *diags, const char *file, FILE *f)
{
	for (unsigned i = 0; i < diags->count; i++) {
		if (diags->d[i].line)
			fprintf(f, "%s:%u: %s\n", file, diags->d[i].line, diags->d[i].msg);
		else
			fprintf(f, "%s: %s\n", file, diags->d[i].msg);
	}
	if (diags->dropped)
		fprintf(f, "%s: ... and %u more\n", file, diags->dropped);
}

void ql__diag_add(struct ql_yaml_file *f, unsigned line, const char *fmt, ...)
{
	struct ql_diags *d = f->diags;
	char msg[QL_DIAG_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (!d->count) {
		if (line)
			ql_error_set(-EINVAL, "%s:%u: %s", f->path, line, msg);
		else
			ql_error_set(-EINVAL, "%s: %s", f->path, msg);
	}
	if (d->count >= QL_DIAG_MAX) {
		d->dropped++;
		return;
	}
	d->d[d->count].line = line;
	memcpy(d->d[d->count].msg, msg, sizeof(msg));
	d->count++;
}

static int read_all(const char *path, char **text, size_t *len)
{
	FILE *fp = fopen(path, "rb");
	size_t cap = 4096, n = 0;
	char *buf;

	if (!fp)
		return -errno;
	buf = malloc(cap + 1);
	while (buf) {
		size_t r = fread(buf + n, 1, cap - n, fp);

		n += r;
		if (n < cap)
			break;
		if (cap >= (64u << 20)) { /* no config or program is this big */
			free(buf);
			fclose(fp);
			return -EFBIG;
		}
		cap *= 2;
		char *nb = realloc(buf, cap + 1);

		if (!nb)
			free(buf);
		buf = nb;
	}
	if (!buf) {
		fclose(fp);
		return -ENOMEM;
	}
	if (ferror(fp)) {
		int err = errno ? -errno : -EIO;

		free(buf);
		fclose(fp);
		return err;
	}
	fclose(fp);
	buf[n] = '\0';
	*text = buf;
	*len = n;
	return 0;
}

/* One file, one document: libcyaml would read the first and silently drop
 * the rest, so a second document (a second '---') is refused. */
static int refuse_more_documents(struct ql_yaml_file *f, yaml_parser_t *parser)
{
	yaml_document_t next;
	int ret = 0;

	if (!yaml_parser_load(parser, &next)) {
		ql__diag_add(f, (unsigned)parser->problem_mark.line + 1, "YAML syntax error: %s",
			     parser->problem ? parser->problem : "malformed input");
		return -EINVAL;
	}
	if (yaml_document_get_root_node(&next)) {
		ql__diag_add(f, (unsigned)next.start_mark.line + 1,
			     "a second YAML document starts here: the file must hold exactly "
			     "one (remove the extra '---')");
		ret = -EINVAL;
	}
	yaml_document_delete(&next);
	return ret;
}

/*
 * Nesting depth, checked on libyaml's event stream before the document is
 * built: libyaml's scanner is quadratic in the number of open flow
 * collections (100 000 '[' took 15 s and more), and the schema walk and
 * libcyaml recurse per level. Nothing qlink reads nests deeper than a few
 * levels. 0, or -EINVAL with a FILE:LINE diagnostic where the limit is
 * passed; a syntax error is left to the real parse, which reports it.
 */
static int check_depth(struct ql_yaml_file *f)
{
	yaml_parser_t parser;
	yaml_event_t ev;
	unsigned depth = 0;
	int ret = 0, done = 0;

	if (!yaml_parser_initialize(&parser)) {
		ql__diag_add(f, 0, "out of memory");
		return -ENOMEM;
	}
	yaml_parser_set_input_string(&parser, (const unsigned char *)f->text, f->len);
	while (!done && yaml_parser_parse(&parser, &ev)) {
		switch (ev.type) {
		case YAML_SEQUENCE_START_EVENT:
		case YAML_MAPPING_START_EVENT:
			if (++depth > QL_YAML_MAX_DEPTH) {
				ql__diag_add(f, (unsigned)ev.start_mark.line + 1,
					     "lists and mappings nested more than %u deep: refused "
					     "(no setting nests this deep)",
					     QL_YAML_MAX_DEPTH);
				ret = -EINVAL;
				done = 1;
			}
			break;
		case YAML_SEQUENCE_END_EVENT:
		case YAML_MAPPING_END_EVENT:
			depth--;
			break;
		case YAML_STREAM_END_EVENT:
			done = 1;
			break;
		default:
			break;
		}
		yaml_event_delete(&ev);
	}
	yaml_parser_delete(&parser);
	return ret;
}

int ql__yaml_open(struct ql_yaml_file *f, const char *path, struct ql_diags *diags)
{
	yaml_parser_t parser;
	int ret;

	memset(f, 0, sizeof(*f));
	f->path = path;
	f->diags = diags;
	ret = read_all(path, &f->text, &f->len);
	if (ret) {
		ql__diag_add(f, 0, "cannot read the file: %s", ql_strerror(ret));
		return ret;
	}
	ret = check_depth(f);
	if (ret)
		return ret;
	if (!yaml_parser_initialize(&parser)) {
		ql__diag_add(f, 0, "out of memory");
		return -ENOMEM;
	}
	yaml_parser_set_input_string(&parser, (const unsigned char *)f->text, f->len);
	if (!yaml_parser_load(&parser, &f->doc)) {
		unsigned line = (unsigned)parser.problem_mark.line + 1;

		if (parser.context)
			ql__diag_add(f, line, "YAML syntax error: %s %s (line %u)",
				     parser.problem ? parser.problem : "error", parser.context,
				     (unsigned)parser.context_mark.line + 1);
		else
			ql__diag_add(f, line, "YAML syntax error: %s",
				     parser.problem ? parser.problem : "malformed input");
		yaml_parser_delete(&parser);
		return -EINVAL;
	}
	f->have_doc = 1;
	if (!yaml_document_get_root_node(&f->doc)) {
		yaml_parser_delete(&parser);
		ql__diag_add(f, 1, "the file is empty: expected a mapping of settings");
		return -EINVAL;
	}
	ret = refuse_more_documents(f, &parser);
	yaml_parser_delete(&parser);
	return ret;
}

void ql__yaml_close(struct ql_yaml_file *f)
{
	if (f->have_doc)
		yaml_document_delete(&f->doc);
	free(f->text);
	f->have_doc = 0;
	f->text = NULL;
}

unsigned ql__yaml_line(const struct ql_yaml_file *f, const char *path)
{
	yaml_document_t *doc = (yaml_document_t *)&f->doc;
	yaml_node_t *node;
	unsigned line = 1;
	char buf[256], *save = NULL, *seg;

	if (!f->have_doc || !(node = yaml_document_get_root_node(doc)))
		return 1;
	line = (unsigned)node->start_mark.line + 1;
	snprintf(buf, sizeof(buf), "%s", path);
	for (seg = strtok_r(buf, ".", &save); seg && node; seg = strtok_r(NULL, ".", &save)) {
		yaml_node_t *next = NULL;

		if (node->type == YAML_MAPPING_NODE) {
			for (yaml_node_pair_t *p = node->data.mapping.pairs.start;
			     p < node->data.mapping.pairs.top; p++) {
				yaml_node_t *k = yaml_document_get_node(doc, p->key);

				if (k && k->type == YAML_SCALAR_NODE &&
				    !strcmp((const char *)k->data.scalar.value, seg)) {
					line = (unsigned)k->start_mark.line + 1;
					next = yaml_document_get_node(doc, p->value);
					break;
				}
			}
		} else if (node->type == YAML_SEQUENCE_NODE && isdigit((unsigned char)*seg)) {
			long i = strtol(seg, NULL, 10);
			long n = node->data.sequence.items.top - node->data.sequence.items.start;

			if (i >= 0 && i < n) {
				next = yaml_document_get_node(doc,
							      node->data.sequence.items.start[i]);
				if (next)
					line = (unsigned)next->start_mark.line + 1;
			}
		}
		node = next;
	}
	return line;
}

unsigned ql__yaml_linef(const struct ql_yaml_file *f, const char *fmt, ...)
{
	char path[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	return ql__yaml_line(f, path);
}

/* ---- libcyaml errors ------------------------------------------------------- */

/* What libcyaml logs for one failed load: the error line, then a backtrace
 * from the innermost value out, each entry with its line. */
struct cyaml_capture {
	char msg[200];
	char path[200];	 /* built outermost first: "plugins.1.path" */
	char inner[200]; /* innermost entry alone */
	unsigned line;
	int in_backtrace, inner_is_field, entries;
};

static void prepend_seg(char *path, size_t cap, const char *seg)
{
	size_t ns = strlen(seg), np = strlen(path);

	if (ns + 1 + np + 1 > cap)
		return;
	if (np) {
		memmove(path + ns + 1, path, np + 1);
		path[ns] = '.';
	} else {
		path[ns] = '\0';
	}
	memcpy(path, seg, ns);
}

static void cyaml_log_cb(cyaml_log_t level, void *ctx, const char *fmt, va_list ap)
{
	struct cyaml_capture *c = ctx;
	char line[300], seg[160];
	const char *q, *e;
	size_t n;

	if (level < CYAML_LOG_ERROR || !c)
		return;
	vsnprintf(line, sizeof(line), fmt, ap);
	n = strlen(line);
	while (n && (line[n - 1] == '\n' || line[n - 1] == ' '))
		line[--n] = '\0';
	if (strstr(line, "Backtrace:")) {
		c->in_backtrace = 1;
		return;
	}
	if (!c->in_backtrace) {
		const char *m = !strncmp(line, "Load: ", 6) ? line + 6 : line;

		if (!c->msg[0]) {
			size_t ml = strlen(m);

			if (ml >= sizeof(c->msg))
				ml = sizeof(c->msg) - 1;
			memcpy(c->msg, m, ml);
			c->msg[ml] = '\0';
		}
		return;
	}
	/* "  in mapping field 'control' (line: 3, column: 3)" */
	e = strstr(line, "(line: ");
	if (e && !c->line)
		c->line = (unsigned)strtoul(e + 7, NULL, 10);
	q = strchr(line, '\'');
	if (!q)
		return;
	e = strchr(q + 1, '\'');
	if (!e || (size_t)(e - q - 1) >= sizeof(seg))
		return;
	memcpy(seg, q + 1, (size_t)(e - q - 1));
	seg[e - q - 1] = '\0';
	if (strstr(line, "sequence entry")) {
		/* libcyaml counts entries from 1; paths here count from 0 */
		snprintf(seg, sizeof(seg), "%ld", strtol(seg, NULL, 10) - 1);
	}
	if (!c->entries++) {
		c->inner_is_field = strstr(line, "mapping field") != NULL;
		snprintf(c->inner, sizeof(c->inner), "%s", seg);
	}
	prepend_seg(c->path, sizeof(c->path), seg);
}

/* "plugins.0.path" -> "plugins[0].path", as people write it. */
void ql__yaml_display_path(char *path)
{
	char out[200];
	size_t o = 0;

	for (char *seg = path; *seg && o + 4 < sizeof(out);) {
		size_t n = strcspn(seg, ".");
		int num = isdigit((unsigned char)*seg);

		if (o + n + 3 >= sizeof(out))
			break;
		if (num)
			out[o++] = '[';
		else if (o)
			out[o++] = '.';
		memcpy(out + o, seg, n);
		o += n;
		if (num)
			out[o++] = ']';
		seg += n;
		if (*seg == '.')
			seg++;
	}
	out[o] = '\0';
	memcpy(path, out, o + 1);
}

/* Turn libcyaml's wording into ours: "KEY: problem". */
static void cyaml_explain(struct ql_yaml_file *f, struct cyaml_capture *c, cyaml_err_t err)
{
	char path[200];
	const char *m = c->msg[0] ? c->msg : cyaml_strerror(err);
	unsigned line = c->line;

	snprintf(path, sizeof(path), "%s", c->path);
	if (!strncmp(m, "Unexpected key: ", 16)) {
		char key[400];

		/* the backtrace ends at the mapping holding the key; libcyaml's
		 * line is the mapping's, ours the key's own */
		snprintf(key, sizeof(key), "%s%s%s", path, *path ? "." : "", m + 16);
		ql__yaml_display_path(path);
		ql__diag_add(f, ql__yaml_line(f, key), "unknown key '%s'%s%s", m + 16,
			     *path ? " in " : "", path);
		return;
	}
	if (!strncmp(m, "Missing required mapping field: ", 32)) {
		/* the innermost entry is the last key read, not the container */
		if (c->inner_is_field) {
			char *dot = strrchr(path, '.');

			if (dot)
				*dot = '\0';
			else
				*path = '\0';
		}
		if (*path)
			line = ql__yaml_line(f, path);
		ql__yaml_display_path(path);
		ql__diag_add(f, line ? line : 1, "missing required key '%s'%s%s", m + 32,
			     *path ? " in " : "", path);
		return;
	}
	if (!line)
		line = 1;
	if (!strncmp(m, "Insufficient entries", 20)) {
		char *dot = strrchr(path, '.');

		if (dot && !strcmp(dot, ".-1"))
			*dot = '\0';
		else if (!strcmp(path, "-1"))
			*path = '\0';
		ql__yaml_display_path(path);
		ql__diag_add(f, line, "%s%sa list needs at least one entry", path,
			     *path ? ": " : "");
		return;
	}
	ql__yaml_display_path(path);
	if (!strncmp(m, "Expecting ", 10)) {
		char want[32] = "", got[32] = "";

		sscanf(m, "Expecting %31[A-Z_], got event: %31[A-Z_]", want, got);
		for (char *p = want; *p; p++)
			*p = (char)tolower((unsigned char)*p);
		for (char *p = got; *p; p++)
			*p = (char)tolower((unsigned char)*p);
		if (!strcmp(want, "string") || !strcmp(want, "int") || !strcmp(want, "uint") ||
		    !strcmp(want, "float") || !strcmp(want, "bool"))
			strcpy(want, "a scalar value");
		if (!strcmp(got, "sequence_start"))
			strcpy(got, "a list");
		else if (!strcmp(got, "mapping_start"))
			strcpy(got, "a mapping");
		else if (!strcmp(got, "scalar"))
			strcpy(got, "a scalar");
		ql__diag_add(f, line, "%s%swrong type: expected %s, found %s", path,
			     *path ? ": " : "",
			     !strcmp(want, "mapping")  ? "a mapping" :
			     !strcmp(want, "sequence") ? "a list" :
							 want,
			     got);
		return;
	}
	if (!strncmp(m, "Invalid INT value: ", 19) || !strncmp(m, "Invalid UINT value: ", 20)) {
		ql__diag_add(f, line, "%s%s%s is not an integer (or is out of range)", path,
			     *path ? ": " : "", strchr(m, ':') + 2);
		return;
	}
	if (!strncmp(m, "Invalid FLOAT value: ", 21)) {
		ql__diag_add(f, line, "%s%s'%s' is not a number", path, *path ? ": " : "", m + 21);
		return;
	}
	ql__diag_add(f, line, "%s%s%s", path, *path ? ": " : "", m);
}

int ql__yaml_cyaml_load(struct ql_yaml_file *f, const cyaml_schema_value_t *schema, void **out)
{
	struct cyaml_capture cap;
	cyaml_config_t cc = {
		.log_fn = cyaml_log_cb,
		.log_ctx = &cap,
		.mem_fn = cyaml_mem,
		.log_level = CYAML_LOG_ERROR,
		.flags = CYAML_CFG_DEFAULT,
	};
	cyaml_err_t err;

	memset(&cap, 0, sizeof(cap));
	*out = NULL;
	err = cyaml_load_data((const uint8_t *)f->text, f->len, &cc, schema, out, NULL);
	if (err == CYAML_OK && *out)
		return 0;
	if (err == CYAML_ERR_OOM) {
		ql__diag_add(f, 0, "out of memory");
		return -ENOMEM;
	}
	if (err == CYAML_OK) {
		ql__diag_add(f, 1, "the file is empty: expected a mapping of settings");
		return -EINVAL;
	}
	cyaml_explain(f, &cap, err);
	return -EINVAL;
}

void ql__yaml_cyaml_free(const cyaml_schema_value_t *schema, void *data)
{
	cyaml_config_t cc = { .mem_fn = cyaml_mem, .log_level = CYAML_LOG_ERROR };

	if (data)
		cyaml_free(&cc, schema, data, 0);
}

/* ---- every schema problem, not only libcyaml's first ----------------------- */

unsigned ql__yaml_node_line(const yaml_node_t *n)
{
	return (unsigned)n->start_mark.line + 1;
}

static bool is_null_scalar(const yaml_node_t *n)
{
	const char *v = (const char *)n->data.scalar.value;

	return n->type == YAML_SCALAR_NODE && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
	       (!*v || !strcmp(v, "~") || !strcmp(v, "null") || !strcmp(v, "Null") ||
		!strcmp(v, "NULL"));
}

const char *ql__yaml_node_kind(const yaml_node_t *n)
{
	return n->type == YAML_MAPPING_NODE  ? "a mapping" :
	       n->type == YAML_SEQUENCE_NODE ? "a list" :
					       "a scalar";
}

const char *ql__yaml_shown(const char *path, char *buf, size_t len)
{
	snprintf(buf, len, "%s", path);
	ql__yaml_display_path(buf);
	return buf;
}

static void walk(struct ql_yaml_file *f, const cyaml_schema_value_t *v, yaml_node_t *n,
		 const char *path, unsigned *found);

static void walk_mapping(struct ql_yaml_file *f, const cyaml_schema_value_t *v, yaml_node_t *n,
			 const char *path, unsigned *found)
{
	char sub[256], disp[256];

	for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top;
	     p++) {
		yaml_node_t *k = yaml_document_get_node(&f->doc, p->key);
		yaml_node_t *val = yaml_document_get_node(&f->doc, p->value);
		const cyaml_schema_field_t *fd = v->mapping.fields;
		const char *key;

		if (!k || !val || k->type != YAML_SCALAR_NODE)
			continue;
		key = (const char *)k->data.scalar.value;
		while (fd->key && strcmp(fd->key, key))
			fd++;
		if (!fd->key) {
			ql__yaml_shown(path, disp, sizeof(disp));
			ql__diag_add(f, ql__yaml_node_line(k), "unknown key '%s'%s%s", key,
				     *disp ? " in " : "", disp);
			(*found)++;
			continue;
		}
		snprintf(sub, sizeof(sub), "%s%s%s", path, *path ? "." : "", key);
		walk(f, &fd->value, val, sub, found);
	}
	for (const cyaml_schema_field_t *fd = v->mapping.fields; fd->key; fd++) {
		bool present = false;

		if (fd->value.flags & CYAML_FLAG_OPTIONAL)
			continue;
		for (yaml_node_pair_t *p = n->data.mapping.pairs.start;
		     p < n->data.mapping.pairs.top && !present; p++) {
			yaml_node_t *k = yaml_document_get_node(&f->doc, p->key);

			present = k && k->type == YAML_SCALAR_NODE &&
				  !strcmp((const char *)k->data.scalar.value, fd->key);
		}
		if (!present) {
			ql__yaml_shown(path, disp, sizeof(disp));
			ql__diag_add(f, ql__yaml_node_line(n), "missing required key '%s'%s%s",
				     fd->key, *disp ? " in " : "", disp);
			(*found)++;
		}
	}
}

static void walk(struct ql_yaml_file *f, const cyaml_schema_value_t *v, yaml_node_t *n,
		 const char *path, unsigned *found)
{
	char disp[256], sub[256];
	const char *want;
	yaml_node_type_t type;

	switch (v->type) {
	case CYAML_MAPPING:
		type = YAML_MAPPING_NODE;
		want = "a mapping";
		break;
	case CYAML_SEQUENCE:
	case CYAML_SEQUENCE_FIXED:
	case CYAML_FLAGS:
		type = YAML_SEQUENCE_NODE;
		want = "a list";
		break;
	case CYAML_IGNORE:
		return;
	default:
		type = YAML_SCALAR_NODE;
		want = "a scalar value";
		break;
	}
	if ((v->flags & CYAML_FLAG_POINTER) && is_null_scalar(n) && type != YAML_SCALAR_NODE)
		return; /* an explicit null: libcyaml decides */
	ql__yaml_shown(path, disp, sizeof(disp));
	if (n->type != type) {
		ql__diag_add(f, ql__yaml_node_line(n), "%s%swrong type: expected %s, found %s",
			     disp, *disp ? ": " : "", want, ql__yaml_node_kind(n));
		(*found)++;
		return;
	}
	if (type == YAML_MAPPING_NODE) {
		walk_mapping(f, v, n, path, found);
	} else if (type == YAML_SEQUENCE_NODE && v->type != CYAML_FLAGS) {
		long cnt = n->data.sequence.items.top - n->data.sequence.items.start;

		if (cnt < (long)v->sequence.min) {
			ql__diag_add(f, ql__yaml_node_line(n), "%s%sa list needs at least %s", disp,
				     *disp ? ": " : "",
				     v->sequence.min == 1 ? "one entry" : "more entries");
			(*found)++;
		} else if (v->sequence.max != CYAML_UNLIMITED && cnt > (long)v->sequence.max) {
			ql__diag_add(f, ql__yaml_node_line(n), "%s%sat most %u entries, found %ld",
				     disp, *disp ? ": " : "", v->sequence.max, cnt);
			(*found)++;
		}
		for (long i = 0; i < cnt; i++) {
			yaml_node_t *e =
				yaml_document_get_node(&f->doc, n->data.sequence.items.start[i]);

			snprintf(sub, sizeof(sub), "%s%s%ld", path, *path ? "." : "", i);
			if (e)
				walk(f, v->sequence.entry, e, sub, found);
		}
	} else if (v->type == CYAML_INT || v->type == CYAML_UINT || v->type == CYAML_FLOAT) {
		const char *s = (const char *)n->data.scalar.value;
		char *end;

		errno = 0;
		if (v->type == CYAML_FLOAT)
			strtod(s, &end);
		else
			strtoll(s, &end, 0);
		if (!*s || *end || errno) {
			if (v->type == CYAML_FLOAT)
				ql__diag_add(f, ql__yaml_node_line(n), "%s%s'%s' is not a number",
					     disp, *disp ? ": " : "", s);
			else
				ql__diag_add(f, ql__yaml_node_line(n),
					     "%s%s%s is not an integer (or is out of range)", disp,
					     *disp ? ": " : "", s);
			(*found)++;
		}
	}
}

/* Check the parsed tree against schema: every unknown key, wrong kind of
 * value, missing required key, bad list length and non-numeric number,
 * each with its line (libcyaml stops at the first). How many found. */
static unsigned schema_check(struct ql_yaml_file *f, const cyaml_schema_value_t *schema)
{
	yaml_node_t *root = yaml_document_get_root_node(&f->doc);
	unsigned found = 0;

	if (root)
		walk(f, schema, root, "", &found);
	return found;
}

int ql__yaml_load(const char *path, const cyaml_schema_value_t *schema, struct ql_diags *diags,
		  int (*build)(struct ql_yaml_file *f, void *raw, void *ctx), void *ctx)
{
	struct ql_yaml_file f;
	void *raw = NULL;
	int ret;

	memset(diags, 0, sizeof(*diags));
	ql_error_clear();
	ret = ql__yaml_open(&f, path, diags);
	if (!ret && schema && schema_check(&f, schema))
		ret = -EINVAL;
	if (!ret && schema)
		ret = ql__yaml_cyaml_load(&f, schema, &raw);
	if (!ret) {
		ret = build(&f, raw, ctx);
		if (ret)
			ql__diag_add(&f, 0, "out of memory");
		else if (diags->count)
			ret = -EINVAL;
	}
	if (schema)
		ql__yaml_cyaml_free(schema, raw);
	ql__yaml_close(&f);
	/* later checks may have overwritten the first sentence */
	if (ret && diags->count && diags->d[0].line)
		ql_error_set(ret, "%s:%u: %s", path, diags->d[0].line, diags->d[0].msg);
	else if (ret && diags->count)
		ql_error_set(ret, "%s: %s", path, diags->d[0].msg);
	return ret;
}
