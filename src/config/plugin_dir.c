/* SPDX-License-Identifier: MIT */
/*
 * The plugin directory: where `cmake --install` puts plugins
 * (LIBDIR/qlink/plugins), searched for a plugin named by a bare file name
 * that is not next to the configuration file (docs/qlinkd.md, "Plugins").
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"

static char plugin_dir[PATH_MAX];

void ql_config_set_plugin_dir(const char *dir)
{
	snprintf(plugin_dir, sizeof(plugin_dir), "%s", dir ? dir : "");
}

const char *ql_config_plugin_dir(void)
{
	return plugin_dir;
}

char *ql__config_plugin_fallback(char *resolved, const char *given)
{
	char *alt;

	if (!resolved || !plugin_dir[0] || strchr(given, '/') || !access(resolved, F_OK))
		return resolved;
	if (asprintf(&alt, "%s/%s", plugin_dir, given) < 0)
		return resolved;
	if (access(alt, F_OK)) {
		free(alt);
		return resolved; /* reported as the path next to the configuration */
	}
	free(resolved);
	return alt;
}
