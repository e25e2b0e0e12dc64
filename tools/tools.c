/* SPDX-License-Identifier: MIT */
/* Helpers shared by the qlink subcommands. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "demo/demo.h"
#include "qlink/error.h"
#include "tools.h"

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
