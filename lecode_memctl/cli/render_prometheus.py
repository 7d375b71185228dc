"""``memctl validate --format prometheus``: the audit summaries in the
Prometheus text exposition format (node_exporter textfile collector).  The
core returns the summaries; rendering them is the CLI's."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from lecode_memctl.core.audit import CODES, SEVERITIES, SEVERITY_RANK, Summary
from lecode_memctl.core.rowmodel import no_surrogates
from lecode_memctl.core.sourceref import STATUSES

if TYPE_CHECKING:  # pragma: no cover - validate's renderer must not import the secrets audit
    from lecode_memctl.core.secrets import SecretsReport

def _prom_escape(value: str) -> str:
    """A label value as the exposition format wants it: UTF-8, escaped
    (backslash, quote, newline).  A store name's bytes that are not UTF-8
    (lone surrogates, from os.listdir) are first spelt ``\\xNN``, as the JSON
    output spells them (``rowmodel.no_surrogates``), so that the label is the
    same text as JSON's ``project`` (they were written raw: an encoding error,
    exit 70, or ``\\udcff``, which the format does not know)."""
    return (no_surrogates(value).replace("\\", "\\\\").replace('"', '\\"')
            .replace("\n", "\\n"))


def _labels(**kv: str) -> str:
    return "{" + ",".join(f'{k}="{_prom_escape(v)}"' for k, v in kv.items()) + "}"


def _project_labels(projects: Iterable[str]) -> list[dict[str, str]]:
    """Each project's labels: ``project``, and for the second, third...
    store whose name is spelt the same as an earlier one's (``a`` and a
    byte 0xFF, ``a`` and the four characters ``\\xff``: both ``a\\xff``),
    ``spelt_same`` "2", "3"..., so that no series repeats: node_exporter's
    textfile collector rejects a file that repeats one, and every metric in
    it with the file (before 2026-12-07 both were written alike)."""
    seen: dict[str, int] = {}
    out: list[dict[str, str]] = []
    for p in projects:
        spelt = no_surrogates(p)
        n = seen[spelt] = seen.get(spelt, 0) + 1
        out.append({"project": p} if n == 1 else {"project": p, "spelt_same": str(n)})
    return out


PROM_METRICS: tuple[tuple[str, str, str], ...] = (
    ("memctl_validate_ok", "gauge",
     "1 when the last memctl validate found nothing at error severity (warnings too with --strict), else 0."),
    ("memctl_validate_findings", "gauge",
     "Findings of the last memctl validate by severity and code (ignored codes excluded)."),
    ("memctl_validate_findings_by_severity", "gauge",
     "Findings of the last memctl validate by severity, zero included."),
    ("memctl_validate_facts", "gauge",
     "Facts by validation status (a fact counts under its worst revision's status)."),
    ("memctl_validate_sessions", "gauge", "Session transcripts in the store."),
    ("memctl_validate_duration_seconds", "gauge", "Wall-clock time the audit of the store took."),
    ("memctl_validate_last_run_timestamp_seconds", "gauge",
     "Unix time at which the audit of the store finished."),
)


def prometheus_text(summaries: Sequence[Summary], *, strict: bool = False) -> str:
    """Every metric, HELP and TYPE once each, then one sample per project/label set."""
    out: list[str] = []
    labelled = list(zip(summaries, _project_labels(s.project for s in summaries), strict=True))
    for name, typ, help_ in PROM_METRICS:
        out.append(f"# HELP {name} {help_}")
        out.append(f"# TYPE {name} {typ}")
        for s, p in labelled:
            if name == "memctl_validate_ok":
                out.append(f"{name}{_labels(**p)} {1 if s.ok(strict) else 0}")
            elif name == "memctl_validate_findings":
                for code, n in sorted(s.by_code.items()):
                    sev = CODES[code].severity
                    # torn tails may be counted at either severity; split them by severity
                    out.extend(_findings_lines(name, p, code, sev, n, s))
            elif name == "memctl_validate_findings_by_severity":
                for sev in SEVERITIES:
                    out.append(f"{name}{_labels(**p, severity=sev)} {s.by_severity[sev]}")
            elif name == "memctl_validate_facts":
                # (left out for a store whose facts were not all read: not
                # known; before 2026-12-07 they read 0)
                if s.facts_total is not None:
                    for st in STATUSES:
                        out.append(f"{name}{_labels(**p, status=st)} {s.facts[st]}")
            elif name == "memctl_validate_sessions":
                # (left out for a store whose sessions/ cannot be listed:
                # the count is not known, and 0 or the cited ones would lie)
                if s.sessions is not None:
                    out.append(f"{name}{_labels(**p)} {s.sessions}")
            elif name == "memctl_validate_duration_seconds":
                d = (s.finished or s.started) - s.started
                out.append(f"{name}{_labels(**p)} {d:.6f}")
            else:
                out.append(f"{name}{_labels(**p)} {int(s.finished or s.started)}")
    return "\n".join(out) + "\n"


def _findings_lines(name: str, project: dict[str, str], code: str, sev: str, n: int,
                    s: Summary) -> list[str]:
    by = s.by_code_severity.get(code)
    if not by:
        return [f"{name}{_labels(**project, severity=sev, code=code)} {n}"]
    return [f"{name}{_labels(**project, severity=sv, code=code)} {k}"
            for sv, k in sorted(by.items(), key=lambda kv: SEVERITY_RANK[kv[0]])]


def secrets_prometheus_text(reports: Iterable[SecretsReport], *, now: float,
                            stores: int | None = None) -> str:
    """``memctl secrets --format prometheus``: counts only (never a value, a
    preview or a hash).  ``stores``: the store directories scanned (a link
    in memory/, reported, is none), for ``memctl_secrets_stores``."""
    reports = list(reports)
    # (each report's labels, written: project, and spelt_same where needed)
    # (the projects as outputs show them: a found value a store's name
    # holds masked, so that two stores may be spelt alike: spelt_same)
    pl = [_labels(**p)[1:-1] for p in _project_labels(r.shown_project for r in reports)]
    lines = [
        "# HELP memctl_secrets_ok 1 when the store holds no credential-shaped value (allowlist applied).",
        "# TYPE memctl_secrets_ok gauge",
    ]
    for r, p in zip(reports, pl, strict=True):
        lines.append(f'memctl_secrets_ok{{{p}}} {1 if r.ok else 0}')
    lines += ["# HELP memctl_secrets_findings Credential-shaped values found, by detector and kind of place.",
              "# TYPE memctl_secrets_findings gauge"]
    for r, p in zip(reports, pl, strict=True):
        counts: dict[tuple[str, str], int] = {}
        for f in r.findings:
            counts[(f.detector, f.kind)] = counts.get((f.detector, f.kind), 0) + 1
        for (det, kind), n in sorted(counts.items()):
            lines.append(f'memctl_secrets_findings{{{p},'
                         f'detector="{_prom_escape(det)}",kind="{kind}"}} {n}')
    lines += ["# HELP memctl_secrets_unreadable_files Files the audit could not read "
              "(they may hide a value).",
              "# TYPE memctl_secrets_unreadable_files gauge"]
    for r, p in zip(reports, pl, strict=True):
        lines.append(f'memctl_secrets_unreadable_files{{{p}}} {len(r.unreadable)}')
    lines += ["# HELP memctl_secrets_allowlisted Findings left out because their hash is in the allowlist.",
              "# TYPE memctl_secrets_allowlisted gauge"]
    for r, p in zip(reports, pl, strict=True):
        lines.append(f'memctl_secrets_allowlisted{{{p}}} {r.allowlisted}')
    lines += ["# HELP memctl_secrets_bytes_scanned Bytes read by the audit.",
              "# TYPE memctl_secrets_bytes_scanned gauge"]
    for r, p in zip(reports, pl, strict=True):
        lines.append(f'memctl_secrets_bytes_scanned{{{p}}} {r.bytes_scanned}')
    lines += ["# HELP memctl_secrets_last_run_timestamp_seconds When the audit ran.",
              "# TYPE memctl_secrets_last_run_timestamp_seconds gauge",
              f"memctl_secrets_last_run_timestamp_seconds {now:.3f}",
              # (a run that scanned no store -- the wrong HOME or config
              # directory in a crontab -- wrote no _ok series at all: only
              # this count says so, as memctl_validate_stores does)
              "# HELP memctl_secrets_stores Stores scanned by the last memctl secrets run.",
              "# TYPE memctl_secrets_stores gauge",
              f"memctl_secrets_stores {len(reports) if stores is None else stores}"]
    return "\n".join(lines) + "\n"
