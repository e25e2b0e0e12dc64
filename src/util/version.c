/* SPDX-License-Identifier: MIT */
/* The library's own version string (see qlink/version.h). */
#include "qlink/version.h"

const char *ql_version(void)
{
	return QL_VERSION_STRING;
}
