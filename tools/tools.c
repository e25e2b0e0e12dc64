/* SPDX-License-Identifier: MIT */
/* Helpers shared by the qlink subcommands. */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "demo/demo.h"
#include "qlink/error.h"
#include "qlink/histogram.h"
#include "tools.h"
#include "verbs/registry.h"

/* ---- options ------------------------------------------------------------- */

#define TOOL_OPTS_MAX 64

/* The option an alias stands for, or NULL. */
static int opt_index(const struct tool_cmd *cmd, const char *name)
{
	for (int i = 0; cmd->opts[i].name; i++)
		if (!strcmp(cmd->opts[i].name, name))
			return i;
	return -1;
}

int tool_usage(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "qlink %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (see qlink %s --help)\n", cmd);
	return 2;
}

/* The option as the user wrote it, for a message: "--name" or "-x". */
static const char *opt_written(const char *arg, char *buf, size_t len)
{
	size_t n = strcspn(arg, "=");

	snprintf(buf, len, "%.*s", (int)n, arg);
	return buf;
}

int tool_getopt(const struct tool_cmd *cmd, int argc, char **argv)
{
	struct option lo[TOOL_OPTS_MAX + 2];
	char so[3 * TOOL_OPTS_MAX + 8], what[64];
	size_t n = 0, k = 0;
	int c, idx = -1;

	so[k++] = cmd->in_order ? '+' : ':';
	if (cmd->in_order)
		so[k++] = ':';
	so[k++] = 'h';
	for (const struct tool_opt *o = cmd->opts; o->name && n < TOOL_OPTS_MAX; o++, n++) {
		lo[n] = (struct option){ o->name,
					 o->arg == TOOL_FLAG	 ? no_argument :
					 o->arg == TOOL_OPTIONAL ? optional_argument :
								   required_argument,
					 NULL, (int)n + 256 };
		if (o->shortopt) {
			so[k++] = o->shortopt;
			if (o->arg != TOOL_FLAG)
				so[k++] = ':';
			if (o->arg == TOOL_OPTIONAL)
				so[k++] = ':';
		}
	}
	for (const char *const *a = cmd->aliases; a && a[0] && n < TOOL_OPTS_MAX; a += 2) {
		int t = opt_index(cmd, a[1]);

		if (t >= 0) {
			lo[n] = lo[t];
			lo[n++].name = a[0];
		}
	}
	lo[n++] = (struct option){ "help", no_argument, NULL, 'h' };
	lo[n] = (struct option){ NULL, 0, NULL, 0 };
	so[k] = '\0';
	if (optind == 0)
		optind = 1;
	opterr = 0;
	c = getopt_long(argc, argv, so, lo, &idx);
	if (c == -1)
		return TOOL_END;
	if (c == 'h') {
		tool_help(cmd, stdout);
		exit(0);
	}
	if (c >= 256)
		return cmd->opts[c - 256].key;
	if (c != '?' && c != ':') {
		for (const struct tool_opt *o = cmd->opts; o->name; o++)
			if (o->shortopt == c)
				return o->key;
	}
	/* '?' or ':': an unknown option, or one missing its value */
	if (optopt && optopt < 256)
		snprintf(what, sizeof(what), "-%c", optopt);
	else
		opt_written(argv[optind - 1], what, sizeof(what));
	if (c == ':')
		return tool_usage(cmd->name, "option '%s' needs a value", what), TOOL_USAGE;
	if (optopt >= 256) /* a flag given a value: --json=1 */
		return tool_usage(cmd->name, "option '%s' takes no value", what), TOOL_USAGE;
	return tool_usage(cmd->name, "unknown option '%s'", what), TOOL_USAGE;
}

/* "  -d, --device URI" or "      --json" */
static int opt_head(const struct tool_opt *o, char *buf, size_t len)
{
	const struct tool_opt *t = o;

	return snprintf(buf, len, "  %c%c%s--%s%s%s%s", o->shortopt ? '-' : ' ',
			o->shortopt ? o->shortopt : ' ', o->shortopt ? ", " : "  ", o->name,
			t->arg == TOOL_OPTIONAL ? "[=" :
			t->arg == TOOL_VALUE	? " " :
						  "",
			t->arg != TOOL_FLAG && t->value ? t->value : "",
			t->arg == TOOL_OPTIONAL ? "]" : "");
}

void tool_help(const struct tool_cmd *cmd, FILE *f)
{
	char head[128];
	int width = 12; /* "  -h, --help" */
	bool time = false;
	const char *u = cmd->usage ? cmd->usage : "[options]";

	/* usage: one line per form */
	for (bool first = true; *u; first = false) {
		size_t l = strcspn(u, "\n");

		if (*u == ' ') /* a continuation of the form above */
			fprintf(f, "%*s%.*s\n", (int)strlen(cmd->name) + 13, "", (int)l, u);
		else
			fprintf(f, "%s qlink %s %.*s\n", first ? "usage:" : "      ", cmd->name,
				(int)l, u);
		u += l + (u[l] == '\n');
	}
	if (cmd->about)
		fprintf(f, "\n%s", cmd->about);
	for (const struct tool_opt *o = cmd->opts; o->name; o++) {
		int w = opt_head(o, head, sizeof(head));

		if (w > width && w <= 30)
			width = w;
		time |= o->value && strstr(o->value, "TIME");
	}
	fprintf(f, "\noptions:\n");
	for (const struct tool_opt *o = cmd->opts; o->name; o++) {
		const char *h = o->help ? o->help : "";
		int w = opt_head(o, head, sizeof(head));

		fputs(head, f);
		if (w > width) { /* too long: the help starts on the next line */
			fputc('\n', f);
			w = 0;
		}
		do {
			size_t l = strcspn(h, "\n");

			fprintf(f, "%*s%.*s\n", width - w + 2, "", (int)l, h);
			h += l + (h[l] == '\n');
			w = 0;
		} while (*h);
	}
	fprintf(f, "  -h, --help%*sthis text\n", width - 12 + 2, "");
	if (time)
		fprintf(f, "\nTIME: seconds, or a number with a unit: us, ms, s or m "
			   "(250ms, 1.5, 2m).\n");
	if (cmd->aliases && cmd->aliases[0]) {
		fprintf(f, "\ndeprecated aliases (still accepted):");
		for (const char *const *a = cmd->aliases; a[0]; a += 2)
			fprintf(f, " --%s (--%s)", a[0], a[1]);
		fputc('\n', f);
	}
}

int tool_time(const char *s, double min_s, double max_s, double *out_s)
{
	static const struct {
		const char *suffix;
		double scale;
	} units[] = { { "", 1 }, { "s", 1 }, { "ms", 1e-3 }, { "us", 1e-6 }, { "m", 60 } };
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || isnan(v) || isinf(v) || (!isdigit((unsigned char)*s) && *s != '.'))
		return -EINVAL;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(end, units[i].suffix))
			continue;
		v *= units[i].scale;
		if (v < min_s || v > max_s)
			return -EINVAL;
		*out_s = v;
		return 0;
	}
	return -EINVAL;
}

int tool_device_uri(const char *uri)
{
	const char *sep = strstr(uri, "://"), *matched;

	if (!sep || sep == uri || !sep[3])
		return -EINVAL;
	return ql_registry_find(uri, (size_t)(sep - uri), &matched) ? 0 : -EINVAL;
}

int tool_hostport_split(const char *s, uint16_t default_port, char *host, size_t cap,
			uint16_t *port)
{
	const char *colon, *h = s;
	size_t hlen;
	uint32_t p = default_port;

	if (s[0] == '[') {
		const char *end = strchr(s, ']');

		if (!end || end == s + 1 || (end[1] && end[1] != ':'))
			return -EINVAL;
		colon = end[1] ? end + 1 : NULL;
		h = s + 1;
		hlen = (size_t)(end - h);
	} else {
		colon = strrchr(s, ':');
		if (colon && memchr(s, ':', (size_t)(colon - s)))
			return -EINVAL; /* a bare IPv6 address: brackets needed */
		hlen = colon ? (size_t)(colon - s) : strlen(s);
	}
	if (!hlen || hlen >= cap || memchr(h, ' ', hlen))
		return -EINVAL;
	if (colon ? tool_u32(colon + 1, 1, 65535, &p) : !default_port)
		return -EINVAL;
	snprintf(host, cap, "%.*s", (int)hlen, h);
	*port = (uint16_t)p;
	return 0;
}

int tool_hostport(const char *s, uint16_t default_port)
{
	char host[256];
	uint16_t port;

	return tool_hostport_split(s, default_port, host, sizeof(host), &port);
}

int tool_listen_port(const char *s)
{
	const char *colon = strrchr(s, ':');
	uint32_t port;

	if (colon && colon == s)
		return -EINVAL;
	return tool_u32(colon ? colon + 1 : s, 0, 65535, &port);
}

/* ---- latency output ------------------------------------------------------ */

/* The lower bound of histogram bucket i (see ql__hist_index). */
static uint64_t bucket_value(unsigned i)
{
	unsigned s;

	if (i < QL_HIST_SUB_COUNT)
		return i;
	s = (i >> QL_HIST_SUB_BITS) - 1;
	return (uint64_t)(i - (s << QL_HIST_SUB_BITS)) << s;
}

void tool_hist_print(FILE *f, const char *name, const struct ql_hist *h)
{
	uint64_t seen = 0;

	fprintf(f, "#%s: usec count cumulative%%\n", name);
	for (unsigned i = 0; i < QL_HIST_BUCKETS; i++)
		if (h->counts[i]) {
			seen += h->counts[i];
			fprintf(f, "%.3f %" PRIu64 " %.3f\n", bucket_value(i) / 1e3, h->counts[i],
				100.0 * (double)seen / (double)h->count);
		}
}

static void hist_write(FILE *f, const char *name, const struct ql_hist *h)
{
	uint64_t above = h->count;

	fprintf(f, "# %s: bucket_us count fraction fraction_slower\n", name);
	for (unsigned i = 0; i < QL_HIST_BUCKETS; i++)
		if (h->counts[i]) {
			above -= h->counts[i];
			fprintf(f, "%.4f %" PRIu64 " %.6g %.6g\n", bucket_value(i) / 1e3,
				h->counts[i], (double)h->counts[i] / (double)h->count,
				(double)above / (double)h->count);
		}
	fprintf(f, "\n\n");
}

int tool_plot_dir(const char *dir)
{
	if (mkdir(dir, 0755) && errno != EEXIST)
		return ql_error_set(-errno, "cannot make %s: %s", dir, strerror(errno));
	return 0;
}

FILE *tool_plot_open(const char *dir, const char *name)
{
	char path[4200];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	if (!f)
		ql_error_set(-errno, "cannot write %s: %s", path, strerror(errno));
	return f;
}

/* Run gnuplot on BASE.gp in dir: 0, or -ENOENT when gnuplot is missing. */
static int gnuplot(const char *dir, const char *script)
{
	pid_t pid = fork();
	int st;

	if (pid < 0)
		return ql_error_set(-errno, "cannot run gnuplot: %s", strerror(errno));
	if (pid == 0) { /* no shell: a directory may have any name */
		if (chdir(dir) == 0)
			execlp("gnuplot", "gnuplot", script, (char *)NULL);
		_exit(127);
	}
	if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
		return ql_error_set(WIFEXITED(st) && WEXITSTATUS(st) == 127 ? -ENOENT : -EIO,
				    "gnuplot failed on %s/%s (is gnuplot-nox installed?)", dir,
				    script);
	return 0;
}

int tool_plot_draw(const char *dir, const char *base, const char *body)
{
	char name[256];
	FILE *g;

	snprintf(name, sizeof(name), "%s.gp", base);
	g = tool_plot_open(dir, name);
	if (!g)
		return -EIO;
	fprintf(g, "set terminal pngcairo size 900,600 noenhanced\nset output '%s.png'\n%s", base,
		body);
	fprintf(g, "set terminal svg size 900,600 noenhanced\nset output '%s.svg'\n%s", base, body);
	fclose(g);
	return gnuplot(dir, name);
}

int tool_plot_latency(const char *dir, const char *base, const char *title, unsigned n,
		      const char *const *names, const struct ql_hist *const *hists, bool quiet)
{
	char body[4096], name[256];
	size_t off;
	FILE *f;
	int ret = tool_plot_dir(dir);

	if (ret)
		return ret;
	snprintf(name, sizeof(name), "%s.dat", base);
	f = tool_plot_open(dir, name);
	if (!f)
		return -EIO;
	for (unsigned i = 0; i < n; i++)
		hist_write(f, names[i], hists[i]);
	fclose(f);
	off = (size_t)snprintf(body, sizeof(body),
			       "set title '%s'\nset xlabel 'microseconds'\n"
			       "set ylabel 'fraction of calls slower than x'\n"
			       "set logscale x\nset logscale y\nset format y '%%g'\n"
			       "set yrange [1e-5:1]\nset grid\nset key right top\nplot ",
			       title);
	for (unsigned i = 0; i < n && off < sizeof(body); i++)
		off += (size_t)snprintf(body + off, sizeof(body) - off,
					"%s'%s' index %u using 1:($4 > 0 ? $4 : 1e-6) with steps "
					"lw 2 title '%s'",
					i ? ", " : "", i ? "" : name, i, names[i]);
	if (off < sizeof(body))
		snprintf(body + off, sizeof(body) - off, "\n");
	ret = tool_plot_draw(dir, base, body);
	if (!ret && !quiet)
		printf("plots: %s/%s.png, %s/%s.svg\n", dir, base, dir, base);
	return ret;
}

int tool_hex(const char *s, uint8_t *buf, size_t cap, size_t *len)
{
	size_t n;

	if (!strncmp(s, "0x", 2) || !strncmp(s, "0X", 2))
		s += 2;
	n = strlen(s);
	if (n % 2 || n / 2 > cap)
		return -EINVAL;
	for (size_t i = 0; i < n / 2; i++) {
		unsigned v;

		if (!isxdigit((unsigned char)s[2 * i]) || !isxdigit((unsigned char)s[2 * i + 1]) ||
		    sscanf(s + 2 * i, "%2x", &v) != 1)
			return -EINVAL;
		buf[i] = (uint8_t)v;
	}
	*len = n / 2;
	return 0;
}

void tool_hex_print(FILE *f, const uint8_t *b, size_t len)
{
	size_t show = len > 64 ? 64 : len;

	for (size_t i = 0; i < show; i++)
		fprintf(f, "%02x", b[i]);
	if (show < len)
		fprintf(f, "... (%zu bytes)", len);
	if (!len)
		fprintf(f, "(none)");
}

int tool_int(const char *s, long min, long max, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		return -EINVAL;
	*out = (int)v;
	return 0;
}

int tool_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!*s || *s == '-')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || *end || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

int tool_u32(const char *s, uint64_t min, uint64_t max, uint32_t *out)
{
	uint64_t v;

	if (tool_u64(s, min, max > UINT32_MAX ? UINT32_MAX : max, &v))
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

int tool_double(const char *s, double min, double max, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || isnan(v) || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

int tool_qp(const char *s, enum ibv_qp_type *out)
{
	if (!strcmp(s, "rc"))
		*out = IBV_QPT_RC;
	else if (!strcmp(s, "uc"))
		*out = IBV_QPT_UC;
	else
		return -EINVAL;
	return 0;
}

int tool_qp_check(const char *cmd, enum ibv_qp_type want, const struct ql_conn_params *srv)
{
	enum ibv_qp_type have = srv->qp_type == IBV_QPT_UC ? IBV_QPT_UC : IBV_QPT_RC;

	if (!want || want == have)
		return 0;
	fprintf(stderr, "qlink %s: --qp %s, but the server's ring is %s\n", cmd,
		want == IBV_QPT_UC ? "uc" : "rc", have == IBV_QPT_UC ? "uc" : "rc");
	return -EPROTO;
}

int tool_bad(const char *cmd, const char *opt, const char *val)
{
	fprintf(stderr, "qlink %s: bad value '%s' for %s (see qlink %s --help)\n", cmd, val, opt,
		cmd);
	return 2;
}

void tool_fail(const char *cmd, const char *what, int err)
{
	const char *d = ql_error_detail();

	fprintf(stderr, "qlink %s: %s: %s%s%s%s\n", cmd, what, ql_strerror(err), d[0] ? " (" : "",
		d, d[0] ? ")" : "");
}

/* The built-in functions every tool server offers. */
static int tool_register_demo(struct ql_daemon *d)
{
	int ret = ql_daemon_register(d, ql_demo_parity_function());

	if (!ret)
		ret = ql_daemon_register(d, ql_demo_increment_function());
	return ret;
}

int tool_server_open(struct tool_server *s, const char *uri,
		     const struct ql_verbs_channel_config *vc, const struct ql_daemon_config *dc)
{
	int ret;

	memset(s, 0, sizeof(*s));
	ret = ql_device_open(uri, &s->dev);
	if (!ret)
		ret = ql_verbs_channel_create(s->dev, vc, &s->ch);
	if (!ret)
		ret = ql_daemon_create(dc, s->ch, &s->d);
	if (!ret)
		ret = tool_register_demo(s->d);
	if (!ret)
		ret = ql_verbs_channel_local_params(s->ch, &s->params);
	if (ret)
		tool_server_close(s);
	return ret;
}

int tool_server_open_hsb(struct tool_server *s, const char *uri,
			 const struct ql_hsb_channel_config *hc, const struct ql_daemon_config *dc)
{
	int ret;

	memset(s, 0, sizeof(*s));
	s->hsb = true;
	ret = ql_device_open(uri, &s->dev);
	if (!ret)
		ret = ql_hsb_channel_create(s->dev, hc, &s->ch);
	if (!ret)
		ret = ql_daemon_create(dc, s->ch, &s->d);
	if (!ret)
		ret = tool_register_demo(s->d);
	if (!ret)
		ret = ql_hsb_channel_local_params(s->ch, &s->hsb_params);
	if (ret)
		tool_server_close(s);
	return ret;
}

int tool_server_open_udp(struct tool_server *s, const struct ql_udp_channel_config *uc,
			 const struct ql_daemon_config *dc)
{
	int ret;

	memset(s, 0, sizeof(*s));
	ret = ql_udp_channel_create(uc, &s->ch);
	if (!ret)
		ret = ql_daemon_create(dc, s->ch, &s->d);
	if (!ret)
		ret = tool_register_demo(s->d);
	if (ret)
		tool_server_close(s);
	return ret;
}

int tool_transport(const char *s, bool *hsb)
{
	if (!strcmp(s, "ring"))
		*hsb = false;
	else if (!strcmp(s, "hsb"))
		*hsb = true;
	else
		return -1;
	return 0;
}

void tool_server_close(struct tool_server *s)
{
	ql_daemon_destroy(s->d);
	ql_channel_destroy(s->ch);
	if (s->dev)
		ql_device_close(s->dev);
	memset(s, 0, sizeof(*s));
}

int tool_read_secret(const char *path, uint8_t *buf, size_t cap, size_t *len)
{
	FILE *f = fopen(path, "rb");
	size_t n;

	if (!f)
		return ql_error_set(-errno, "cannot read the secret file %s: %s", path,
				    strerror(errno));
	n = fread(buf, 1, cap, f);
	fclose(f);
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		n--;
	if (!n)
		return ql_error_set(-EINVAL, "the secret file %s is empty", path);
	*len = n;
	return 0;
}
