#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Check qlinkd's log lines (tests/qlinkd_logs.sh, docs/qlinkd.md "Logs").

  qlinkd_logcheck.py json FILE...   every line is one JSON object with the
                                    fields ts, level, component, msg first
  qlinkd_logcheck.py text FILE...   every line reads back as TS LEVEL
                                    COMPONENT MESSAGE KEY=VALUE...
  qlinkd_logcheck.py field FORMAT FILE MSG KEY   print KEY's value (the
                                    first line whose msg is MSG), as read
                                    back: a JSON value is printed as JSON
Exits 1 naming the first line that does not parse.
"""
import json
import re
import sys

LEVELS = {"error", "warn", "info", "debug"}
BARE = re.compile(r'[^ "=\\\x00-\x1f\x7f]+')


def unescape(s):
    out, i = [], 0
    while i < len(s):
        c = s[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        e = s[i + 1]
        if e in '\\"':
            out.append(e)
            i += 2
        elif e in "nrt":
            out.append({"n": "\n", "r": "\r", "t": "\t"}[e])
            i += 2
        elif e == "x" and re.fullmatch(r"[0-9a-f]{2}", s[i + 2:i + 4]):
            out.append(chr(int(s[i + 2:i + 4], 16)))
            i += 4
        else:
            raise ValueError("bad escape \\%s" % e)
    return "".join(out)


def value(line, i):
    """The value at line[i]: bare or quoted; (value, next index)."""
    if line.startswith('"', i):
        m = re.compile(r'"((?:[^"\\]|\\.)*)"').match(line, i)
        if not m:
            raise ValueError("unterminated quote at %d" % i)
        return unescape(m.group(1)), m.end()
    m = BARE.match(line, i)
    if not m:
        raise ValueError("empty or bad bare value at %d" % i)
    return m.group(0), m.end()


def parse_text(line):
    m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z) (error|warn|info|debug) ", line)
    if not m:
        raise ValueError("no timestamp and level")
    rec = {"ts": m.group(1), "level": m.group(2)}
    i = m.end()
    rec["component"], i = value(line, i)
    if not line.startswith(" ", i):
        raise ValueError("no message")
    rec["msg"], i = value(line, i + 1)
    while i < len(line):
        k = re.compile(r" ([a-z_][a-z0-9_]*)=").match(line, i)
        if not k:
            raise ValueError("bad field at %d" % i)
        if k.group(1) in rec:
            raise ValueError("field %s twice" % k.group(1))
        rec[k.group(1)], i = value(line, k.end())
    return rec


def parse_json(line):
    rec = json.loads(line)
    if not isinstance(rec, dict):
        raise ValueError("not an object")
    keys = list(rec)
    if keys[:4] != ["ts", "level", "component", "msg"]:
        raise ValueError("first fields are %s" % keys[:4])
    if rec["level"] not in LEVELS:
        raise ValueError("level %r" % rec["level"])
    for k in keys:
        if not re.fullmatch(r"[a-z_][a-z0-9_]*", k):
            raise ValueError("key %r" % k)
    return rec


def records(fmt, path):
    parse = parse_json if fmt == "json" else parse_text
    with open(path, "rb") as f:
        data = f.read()
    text = data.decode("utf-8")  # a byte that is not UTF-8 fails here
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # the last line's newline (a missing one fails below)
    for n, line in enumerate(lines, 1):
        try:
            yield parse(line)
        except (ValueError, KeyError, IndexError) as e:
            sys.exit("%s:%d: not a %s log line (%s): %r" % (path, n, fmt, e, line))


def main():
    if sys.argv[1] == "field":
        fmt, path, msg, key = sys.argv[2:6]
        for rec in records(fmt, path):
            if rec["msg"] == msg and key in rec:
                v = rec[key]
                print(json.dumps(v) if fmt == "json" else v)
                return
        sys.exit("%s: no line %r with %s" % (path, msg, key))
    n = 0
    for path in sys.argv[2:]:
        for _ in records(sys.argv[1], path):
            n += 1
    print("%d %s lines parse" % (n, sys.argv[1]))


main()
