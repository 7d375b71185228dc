"""A small, strict parser of the Prometheus text exposition format (0.0.4).

Enough to check what node_exporter's textfile collector would accept:
``# HELP name text`` and ``# TYPE name type`` at most once per metric and
before its samples, samples ``name{label="value",...} value [timestamp]``
with label values escaped (``\\\\``, ``\\"``, ``\\n``), names matching
``[a-zA-Z_:][a-zA-Z0-9_:]*``, no duplicate label sets, and every sample of a
family together.  Raises ``ValueError`` with the line number otherwise.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

NAME_RE = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL_RE = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}


@dataclass
class Sample:
    name: str
    labels: dict[str, str]
    value: float
    timestamp: int | None = None


@dataclass
class Family:
    name: str
    help: str | None = None
    type: str = "untyped"
    samples: list[Sample] = field(default_factory=list)


def _unescape_help(text: str) -> str:
    return text.replace("\\n", "\n").replace("\\\\", "\\")


def _parse_labels(s: str, i: int, lineno: int) -> tuple[dict[str, str], int]:
    """Parse ``{...}`` starting at s[i] == '{'; return labels and the index after '}'."""
    labels: dict[str, str] = {}
    i += 1
    while True:
        while i < len(s) and s[i] == " ":
            i += 1
        if i < len(s) and s[i] == "}":
            return labels, i + 1
        m = LABEL_RE.match(s, i)
        if not m:
            raise ValueError(f"line {lineno}: bad label name at column {i + 1}")
        name = m.group(0)
        i = m.end()
        if s[i:i + 2] != '="':
            raise ValueError(f"line {lineno}: expected =\" after label {name}")
        i += 2
        out = []
        while True:
            if i >= len(s):
                raise ValueError(f"line {lineno}: unterminated label value")
            c = s[i]
            if c == "\\":
                nxt = s[i + 1:i + 2]
                if nxt == "n":
                    out.append("\n")
                elif nxt in ("\\", '"'):
                    out.append(nxt)
                else:
                    raise ValueError(f"line {lineno}: bad escape \\{nxt} in label value")
                i += 2
                continue
            if c == '"':
                i += 1
                break
            if c == "\n":
                raise ValueError(f"line {lineno}: raw newline in label value")
            out.append(c)
            i += 1
        if name in labels:
            raise ValueError(f"line {lineno}: duplicate label {name}")
        labels[name] = "".join(out)
        while i < len(s) and s[i] == " ":
            i += 1
        if i < len(s) and s[i] == ",":
            i += 1
            continue
        if i < len(s) and s[i] == "}":
            return labels, i + 1
        raise ValueError(f"line {lineno}: expected , or }} in labels")


def _value(text: str, lineno: int) -> float:
    t = text.strip()
    if t in ("+Inf", "Inf"):
        return math.inf
    if t == "-Inf":
        return -math.inf
    if t == "NaN":
        return math.nan
    try:
        return float(t)
    except ValueError:
        raise ValueError(f"line {lineno}: bad sample value {text!r}") from None


def parse_exposition(text: str) -> dict[str, Family]:
    if text and not text.endswith("\n"):
        raise ValueError("the exposition must end with a newline")
    fams: dict[str, Family] = {}
    order: list[str] = []
    seen_keys: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    closed: set[str] = set()

    def family(name: str) -> Family:
        if name not in fams:
            fams[name] = Family(name)
            if order:
                closed.add(order[-1])
            order.append(name)
        elif order[-1] != name:
            raise ValueError(f"metric {name}: its lines are not together")
        return fams[name]

    for lineno, line in enumerate(text.split("\n")[:-1], 1):
        if not line.strip():
            continue
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                name = parts[2]
                if not NAME_RE.fullmatch(name):
                    raise ValueError(f"line {lineno}: bad metric name {name!r}")
                fam = family(name)
                rest = parts[3] if len(parts) > 3 else ""
                if parts[1] == "HELP":
                    if fam.help is not None:
                        raise ValueError(f"line {lineno}: second HELP for {name}")
                    fam.help = _unescape_help(rest)
                else:
                    if fam.samples:
                        raise ValueError(f"line {lineno}: TYPE after samples of {name}")
                    if rest not in TYPES:
                        raise ValueError(f"line {lineno}: bad type {rest!r}")
                    fam.type = rest
            continue
        m = NAME_RE.match(line)
        if not m:
            raise ValueError(f"line {lineno}: bad metric name")
        name = m.group(0)
        i = m.end()
        labels: dict[str, str] = {}
        if i < len(line) and line[i] == "{":
            labels, i = _parse_labels(line, i, lineno)
        fields = line[i:].split()
        if not fields or len(fields) > 2 or (i < len(line) and line[i] != " "):
            raise ValueError(f"line {lineno}: expected ' value [timestamp]'")
        value = _value(fields[0], lineno)
        ts = None
        if len(fields) == 2:
            try:
                ts = int(fields[1])
            except ValueError:
                raise ValueError(f"line {lineno}: bad timestamp") from None
        base = name
        for suffix in ("_bucket", "_count", "_sum"):
            if name.endswith(suffix) and name[: -len(suffix)] in fams:
                base = name[: -len(suffix)]
        fam = family(base)
        key = (name, tuple(sorted(labels.items())))
        if key in seen_keys:
            raise ValueError(f"line {lineno}: duplicate sample {name}{labels}")
        seen_keys.add(key)
        fam.samples.append(Sample(name, labels, value, ts))
    return fams
