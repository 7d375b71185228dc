"""``memctl export`` and ``memctl verify``: evidence bundles (issue 15)."""


from pathlib import Path
from typing import Annotated, Any

import typer

from .options import JsonOpt, LockWaitOpt
from .registry import command
from .state import STATE


@command(epilog="""\
\b
Examples:
  memctl export --output case-42.tar.gz
  memctl --store /evidence/copy export -o copy.tar
  memctl export > store.tar                      (stdout, when it is not a terminal)
  memctl export -o bundle.tar --json | jq -r .manifest_sha256
""")
def export(
    output: Annotated[str | None, typer.Option(  # str: "" is refused, not "."
        "--output", "-o", metavar="FILE",
        help="Write the bundle to FILE, a new file outside the store (gzip-compressed when "
             "it ends in .tar.gz, .tgz or .gz).  Default: stdout, when it is not a terminal.")
    ] = None,
    with_backups: Annotated[bool, typer.Option(
        "--with-backups", help="Also include the Markdown .bak files.")] = False,
    json_: JsonOpt = False,
    lock_wait: LockWaitOpt = 5.0,
) -> None:
    """Write one store as a self-verifying evidence bundle; changes nothing.

    The bundle is a tar archive: manifest.json first, then under store/ the
    facts database (a consistent copy taken through SQLite's backup API in
    one read transaction, from the same read-only view 'memctl facts' uses),
    every transcript up to its last complete record, and the Markdown files
    (.bak only with --with-backups).  The manifest records the memctl
    version, the export time, the project's identity and slug, every file's
    path, size and SHA-256, the 'validate --deep' summary and findings and
    the fact statuses of the bundled copy, and its own digest.  Locks,
    database sidecars, temporary and unexpected files are left out and
    listed in the manifest as skipped.  The format is in docs/FORMAT.md,
    "Evidence bundles".

    A read command: nothing in the store is created or changed, even while
    the agent writes; a bundle taken then still verifies.  An existing FILE
    is never overwritten (exit 4); a FILE inside the store is refused (exit 2);
    a FILE in a directory that does not exist is exit 7 (none is made).
    The summary (and the manifest's SHA-256, to hand over separately if the
    recipient must be sure the bundle is the one you sent) goes to stdout,
    or to stderr when the bundle does.  --json prints {"type": "export",
    "schema_version", "output", "compression", "manifest_sha256", "files",
    "bytes", "exported", "project", "skipped", "database", "validate",
    "facts", "facts_error"}.
    """
    import sys

    from lecode_memctl.core.bundle import export_bundle, export_to_file
    from lecode_memctl.core.errors import UsageError
    from lecode_memctl.core.rowmodel import SCHEMA_VERSION

    from .output import emit_json_document, interrupted_after, stdout_binary, stdout_is_tty
    from .state import path_option

    output = path_option("--output", output)
    store = STATE.existing_store()
    if output is None or output == "-":
        if json_:
            raise UsageError("--json needs --output FILE (the bundle would go to stdout)")
        if stdout_is_tty():
            raise UsageError("refusing to write a tar archive to a terminal; use --output FILE "
                             "or redirect stdout")
        sys.stdout.flush()
        res = export_bundle(store, stdout_binary(), with_backups=with_backups,
                            lock_wait=lock_wait, parallel=True)
    else:
        res = export_to_file(store, output, with_backups=with_backups, lock_wait=lock_wait,
                             parallel=True)
        # (an error or an interrupt from here on says the bundle is there: run
        # again, export would refuse the FILE that exists)
        interrupted_after(f"the bundle was written to {output}")
    try:
        if res.output is None:          # (the bundle on stdout, the summary on stderr)
            stdout_binary().flush()
            _summary(res, err=True)
        elif json_:
            # (the rows streamed from the file that holds them, never all in memory)
            doc = {"type": "export", "schema_version": SCHEMA_VERSION, **res.to_json()}
            rows, error = doc.pop("facts"), doc.pop("facts_error")
            emit_json_document(doc, "facts", rows, lambda: {"facts_error": error},
                               {"facts_error": error})
        else:
            _summary(res, err=False)
    finally:
        res.close()


def _summary(res: Any, *, err: bool) -> None:
    from .output import echo, safe

    m = res.manifest
    v = m["validate"]
    where = safe(res.output) if res.output else "stdout"
    echo(f"exported {res.files} file{'s' if res.files != 1 else ''} of "
         f"{safe(m['project']['slug'])} to {where} ({res.bytes} bytes"
         f"{', gzip' if res.compression else ''})", err=err)
    echo(f"manifest sha256: {res.manifest_sha256}", err=err)
    echo(f"validate: {_sev(v['findings'])}; facts: {_facts_line(v)}", err=err)
    if m["facts"]["error"]:
        echo(f"facts: {safe(m['facts']['error']['message'])}", err=err)
    if m["skipped"]:
        echo(f"skipped: {len(m['skipped'])} (" + ", ".join(
            f"{safe(s['path'])}: {s['reason']}" for s in m["skipped"][:5])
            + (", ..." if len(m["skipped"]) > 5 else "") + ")", err=err)


def _sev(counts: dict[str, int]) -> str:
    return ", ".join(f"{counts.get(k, 0)} {k}{'s' if counts.get(k, 0) != 1 and k != 'info' else ''}"
                     for k in ("error", "warning", "info"))


def _facts_line(v: dict[str, Any]) -> str:
    if v.get("facts_total") is None:    # (the database was not read: not known)
        return "unknown"
    parts = [f"{n} {k}" for k, n in (v.get("facts") or {}).items() if n]
    return f"{v['facts_total']}" + (f" ({', '.join(parts)})" if parts else "")


@command(epilog="""\
\b
Examples:
  memctl verify case-42.tar.gz
  memctl verify unpacked-bundle/            (a directory 'tar -x' made)
  memctl verify case-42.tar.gz --json | jq '.problems[]'
""")
def verify(
    bundle: Annotated[str, typer.Argument(  # str: "" is refused, not "." (Path(""))
        metavar="BUNDLE", help="A bundle 'memctl export' wrote, or a directory it was "
                               "unpacked into.", show_default=False)],
    json_: JsonOpt = False,
) -> None:
    """Check an evidence bundle offline: hashes, then the store's audit.

    Recomputes the SHA-256 of every file and reports each changed, missing
    or added one by name; checks that manifest.json is first and intact (its
    digest), that the members are in manifest order and that the archive is
    not truncated.  Then audits the bundle's store exactly as 'validate
    --deep' and 'facts' would, with the slug from the manifest (wherever the
    bundle is, under any name, with any config dir), and compares the
    summary, the findings and every fact's status with the manifest's; the
    fact statuses are printed.  An archive is unpacked into a private
    temporary directory, removed afterwards: members with an absolute path,
    '..', a link, a device, a FIFO, a sparse file, or a header 'tar -x'
    reads another name from (a prefix field outside a POSIX ustar header)
    are refused and reported, never written.
    Nothing else is written.

    Exit status: 0 when everything agrees with the manifest, 1 when
    anything differs (each difference is listed), 2 usage (BUNDLE neither a
    file nor a directory: a FIFO, a device), 3 no such BUNDLE, 5 BUNDLE
    cannot be read, 7 the private temporary directory takes no more.
    --json prints {"type": "verify", "schema_version", "ok", "exit_code",
    "bundle", "kind", "compression", "manifest_sha256", "manifest", "files":
    {"checked", "changed", "missing", "added", "refused"}, "problems":
    [problem rows], "validate", "findings": [finding rows], "facts":
    [fact_check rows]} (docs/OUTPUT.md).
    """
    from lecode_memctl.core.bundle import verify_bundle

    from .state import path_option

    rep = verify_bundle(Path(str(path_option("BUNDLE", bundle))), parallel=True)
    try:
        _report(rep, json_)
    finally:
        rep.close()


def _report(rep: Any, json_: bool) -> None:
    """``verify``'s report: JSON, or for people; exits 0 or 1."""
    from lecode_memctl.core.rowmodel import SCHEMA_VERSION

    from .cmd_facts import _status_cell
    from .output import echo, emit_json_document, render_rows, safe

    code = 0 if rep.ok else 1
    if json_:
        # (the findings and the fact rows streamed, not made one document in
        # memory; "findings" and "facts" are the last members)
        doc = {"type": "verify", "schema_version": SCHEMA_VERSION, **rep.to_json()}
        facts = doc.pop("facts")
        emit_json_document(doc, "findings", doc.pop("findings"), dict, {},
                           more=[("facts", facts)])
        raise typer.Exit(code)
    kind = rep.kind + (f", {rep.compression}" if rep.compression else "")

    def one(value: Any) -> str:
        # the bundle's own strings, untrusted: one line each (\n, \t), as the
        # problem lines below, so that a manifest cannot print an "OK:" line
        return safe(str(value))

    echo(f"bundle {one(rep.bundle)} ({kind})")
    if rep.manifest is not None:
        m = rep.manifest
        p = m["project"]
        echo(f"  exported {one(m.get('exported'))} by memctl "
             f"{one(m.get('memctl_version'))} from {one(p['slug'])}"
             + (f" ({one(p.get('store'))})" if p.get("store") else ""))
        echo(f"  manifest sha256: {rep.manifest_sha256}")
    c = rep.counts()
    echo(f"files: {rep.files_checked} checked, {c['changed']} changed, {c['missing']} missing, "
         f"{c['added']} added, {c['refused']} refused")
    if rep.audit is not None:
        v = rep.audit["validate"]
        echo(f"validate: {_sev(v['findings'])}; facts: {_facts_line(v)}")
        # the bundle's database could not be read (export copied it byte
        # for byte: manifest.database.copy raw): "facts: 0" alone read as a
        # store with no facts, every fact's evidence checked
        error = (rep.audit.get("facts") or {}).get("error")
        if error:
            echo(f"facts: {safe(str(error.get('message')))}; no fact, and no fact's "
                 "evidence, could be checked")
    if rep.facts:
        rows = ({"fact_id": r["fact_id"], "revision": r["revision"],
                 "status": _status_cell(r["status"], r["reason"]) if r["status"] else "-",
                 "at export": ("same" if r["same"] else
                               _status_cell(r["manifest_status"], r["manifest_reason"])
                               if r["manifest_status"] else "-")} for r in rep.facts)
        render_rows(rows, ["fact_id", "revision", "status", "at export"], "table")
    for pr in rep.problems:
        where = f"{safe(pr.path)}: " if pr.path else ""
        echo(f"  {pr.kind:<9} {where}{safe(pr.detail)}")
    if rep.ok:
        echo("OK: the bundle matches its manifest")
    else:
        echo(f"DIFFERS: {len(rep.problems)} problem{'s' if len(rep.problems) != 1 else ''}")
    raise typer.Exit(code)
