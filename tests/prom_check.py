#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A validator of the Prometheus text exposition format (version 0.0.4), as
the format's documentation gives its grammar: reads stdin, exits 1 naming
the first offending line. Checked: comment lines (# HELP NAME TEXT, # TYPE
NAME counter|gauge|histogram|summary|untyped, at most one each per family,
before its samples); sample lines NAME[{LABEL="VALUE",...}] VALUE
[TIMESTAMP] with valid metric and label names, label values escaped (\\\\,
\\", \\n only), a float value (or NaN, +Inf, -Inf); a family's samples in
one group; no series twice; a histogram's buckets cumulative with le
ascending and a +Inf bucket equal to _count, and _sum present. Prints the
number of families and samples.
"""
import math
import re
import sys

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r"[a-zA-Z_][a-zA-Z0-9_]*"
LVALUE = r'"(?:[^"\\\n]|\\[\\"n])*"'
SAMPLE = re.compile(r"(%s)(?:\{((?:%s=%s)(?:,%s=%s)*,?)?\})? (\S+)(?: (-?\d+))?$" %
                    (NAME, LABEL, LVALUE, LABEL, LVALUE))
PAIR = re.compile(r"(%s)=(%s)" % (LABEL, LVALUE))
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}


def fail(n, line, why):
    sys.exit("line %d: %s: %r" % (n, why, line))


def value(s):
    if s in ("NaN", "+Inf", "-Inf"):
        return float(s.replace("Inf", "inf").replace("NaN", "nan"))
    if not re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", s):
        raise ValueError(s)
    return float(s)


def family_of(name, types):
    for suffix in ("_bucket", "_sum", "_count"):
        base = name[: -len(suffix)]
        if name.endswith(suffix) and types.get(base) in ("histogram", "summary"):
            return base
    return name


def main():
    helps, types, done, series = set(), {}, set(), set()
    current, nsamples, sampled = None, 0, set()
    hist = {}  # family -> {labels-without-le: [(le, count)], sum/count}
    for n, line in enumerate(sys.stdin.read().split("\n"), 1):
        if line == "":
            continue
        if line.startswith("#"):
            m = re.match(r"# (HELP|TYPE) (%s) ?(.*)$" % NAME, line)
            if not m:
                if re.match(r"# (HELP|TYPE)", line):
                    fail(n, line, "bad HELP or TYPE")
                continue  # another comment
            kind, name, rest = m.groups()
            if name in done:
                fail(n, line, "family %s again after other families" % name)
            if kind == "HELP":
                if name in helps:
                    fail(n, line, "second HELP")
                helps.add(name)
            else:
                if name in types:
                    fail(n, line, "second TYPE")
                if rest not in TYPES:
                    fail(n, line, "unknown type")
                if name in sampled:
                    fail(n, line, "TYPE after samples")
                types[name] = rest
            if current is not None and current != name:
                done.add(current)
            current = name
            continue
        m = SAMPLE.match(line)
        if not m:
            fail(n, line, "not a sample line")
        name, labels, v = m.group(1), m.group(2) or "", m.group(3)
        try:
            val = value(v)
        except ValueError:
            fail(n, line, "bad value")
        fam = family_of(name, types)
        if fam in done:
            fail(n, line, "family %s split in two groups" % fam)
        if current is not None and current != fam:
            done.add(current)
        current = fam
        sampled.add(fam)
        pairs = PAIR.findall(labels)
        names = [p[0] for p in pairs]
        if len(set(names)) != len(names):
            fail(n, line, "label twice")
        key = (name, tuple(sorted(pairs)))
        if key in series:
            fail(n, line, "series twice")
        series.add(key)
        nsamples += 1
        if types.get(fam) == "histogram":
            rest = tuple(sorted(p for p in pairs if p[0] != "le"))
            h = hist.setdefault((fam, rest), {"b": []})
            if name.endswith("_bucket"):
                le = [p[1] for p in pairs if p[0] == "le"]
                if not le:
                    fail(n, line, "bucket without le")
                h["b"].append((value(le[0][1:-1]), val))
            elif name.endswith("_sum"):
                h["sum"] = val
            elif name.endswith("_count"):
                h["count"] = val
        if types.get(fam) == "counter" and (val < 0 or math.isnan(val)):
            fail(n, line, "negative counter")
    for (fam, _), h in hist.items():
        b = h["b"]
        if not b or b[-1][0] != math.inf:
            sys.exit("histogram %s: no +Inf bucket last" % fam)
        if any(b[i][0] >= b[i + 1][0] or b[i][1] > b[i + 1][1] for i in range(len(b) - 1)):
            sys.exit("histogram %s: buckets not ascending and cumulative" % fam)
        if "sum" not in h or h.get("count") != b[-1][1]:
            sys.exit("histogram %s: _sum missing or _count != +Inf bucket" % fam)
    print("%d families, %d samples" % (len(types), nsamples))


main()
