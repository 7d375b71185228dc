"""The row models themselves (:class:`RowModel`, one per record type, and
:data:`MODELS`), apart from :mod:`.rowmodel` so that a command that prints
none of them does not build them (see core/_lazy.py); ``rowmodel`` offers
every name of this module."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ._record import record
from .rowmodel import SCHEMA_VERSION, TIME_PATTERN, utc_time


@record(frozen=True)
class Field:
    name: str
    type: str           # string, integer, number, boolean, time, list, object, scalar
    doc: str
    nullable: bool = False
    items: str = "string"   # for type "list": string, integer or object

    def json_schema(self) -> dict[str, Any]:
        base: dict[str, Any]
        if self.type == "time":
            base = {"type": "string", "format": "date-time", "pattern": TIME_PATTERN}
        elif self.type == "list":
            base = {"type": "array", "items": {"type": self.items}}
        elif self.type == "scalar":
            base = {"type": ["string", "integer", "number", "boolean"]}
        else:
            base = {"type": self.type}
        if self.nullable:
            t = base["type"]
            base["type"] = [*t, "null"] if isinstance(t, list) else [t, "null"]
        base["description"] = self.doc
        return base


@record(frozen=True)
class RowModel:
    """The records one command lists (``type`` is their ``"type"`` value)."""

    command: str
    type: str
    doc: str
    fields: tuple[Field, ...]
    ids: tuple[str, ...] = ()        # id columns: never cut or wrapped in a table
    alt_types: tuple[str, ...] = ()  # other "type" values of the same record shape

    @property
    def names(self) -> list[str]:
        return [f.name for f in self.fields]

    def row(self, **values: Any) -> dict[str, Any]:
        """A row with every field, in order; unknown keys are a bug."""
        plan = self._plan()
        if not values.keys() <= plan[0]:
            extra = set(values) - plan[0]
            raise KeyError(f"{self.type} row: unknown fields {sorted(extra)}")
        out: dict[str, Any] = {"type": self.type}
        get = values.get
        for name, is_time in plan[1]:
            v = get(name)
            out[name] = utc_time(v) if is_time and v is not None else v
        return out

    def record(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """:meth:`row` of a mapping that holds every field but ``type``, in
        the model's order (a listing's rows): the same dict, made in fewer
        steps; any other mapping goes through :meth:`row`."""
        plan = self._plan()
        if list(values) != plan[2]:
            return self.row(**values)
        out: dict[str, Any] = {"type": self.type, **values}
        for name in plan[3]:
            v = out[name]
            if v is not None:
                out[name] = utc_time(v)
        return out

    def _plan(self) -> tuple[frozenset[str], tuple[tuple[str, bool], ...], list[str],
                             tuple[str, ...]]:
        """The field names; (name, is a time) after ``type``; the names after
        ``type``; the time fields: computed once (a listing builds a row per
        fact)."""
        plan = self.__dict__.get("_row_plan")
        if plan is None:
            rest = self.fields[1:]
            plan = (frozenset(self.names), tuple((f.name, f.type == "time") for f in rest),
                    [f.name for f in rest], tuple(f.name for f in rest if f.type == "time"))
            object.__setattr__(self, "_row_plan", plan)
        return plan

    def json_schema(self) -> dict[str, Any]:
        from urllib.parse import quote

        # (``$id`` is a URI reference: the command's spaces percent-encoded,
        # ``validate%20--list-codes``; before 2026-12-07 they were written as
        # they are, and two records' ids were no URI reference)
        return {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": f"memctl/{SCHEMA_VERSION}/{quote(self.command, safe=',')}/"
                   f"{quote(self.type, safe='')}",
            "title": f"memctl {self.command}: {self.type} record (output schema {SCHEMA_VERSION})",
            "description": self.doc,
            "type": "object",
            "properties": {f.name: (f.json_schema() if f.name != "type"
                                    else {"enum": [self.type, *self.alt_types],
                                          "description": f.doc})
                           for f in self.fields},
            "required": self.names,
            "additionalProperties": False,
        }


def _t(doc: str) -> Field:
    return Field("type", "string", doc)


FACT = RowModel("facts", "fact", "One fact at its current revision, with its evidence status today.", (
    _t('"fact"'),
    Field("fact_id", "string", "16 hex digits"),
    Field("revision", "integer", "current revision (1, 2, ...; null when the stored one is no "
          "integer: a damaged database)", True),
    Field("status", "string", "valid, missing, stale, hidden or unverified"),
    Field("reason", "string", "machine-readable reason of a status other than valid", True),
    Field("about_revision", "integer", "the revision the status is about (null when valid)", True),
    Field("source", "string", "current source as session:positions (3-5,8)", True),
    Field("source_ref", "object", "current SourceRef {session_id, seqs, digest}", True),
    Field("text", "string", "the fact text, at most 512 characters"),
    Field("fact_text_truncated", "boolean", "whether text was cut at 512 characters"),
    Field("created", "time", "when revision 1 was written", True),
    Field("updated", "time", "when the current revision was written", True),
), ids=("fact_id", "source"))

SESSION = RowModel("sessions", "session", "One session transcript.", (
    _t('"session"'),
    Field("id", "string", "the session id"),
    Field("created", "time", "the header's created time", True),
    Field("last_time", "time", "time of the last append (the file's modification time)", True),
    Field("records", "integer", "the last complete line's seq + 1: the records, the header "
          "included, when state is ok (null when state is refused or unreadable: not read; or "
          "corrupt with no last seq to count from)", True),
    Field("messages", "integer", "message records (null when state is refused or unreadable: "
          "not read)", True),
    Field("compactions", "integer", "compact events (null when state is refused or "
          "unreadable: not read)", True),
    Field("size", "integer", "bytes"),
    Field("state", "string", "ok, torn_tail, corrupt, refused or unreadable"),
    Field("reason", "string", "null when state is ok, else the kind of that state "
          "(torn_tail: torn_tail; corrupt: the kind of the first problem found, as "
          "'memctl sessions --help' lists them; refused: refused_symlink, refused_header, "
          "refused_project, or invalid_ref, a *.jsonl whose file name is not a valid "
          "session id, never opened; unreadable: session_unreadable)", True),
    Field("detail", "string", "a human explanation", True),
), ids=("id",))

NOTE = RowModel("notes", "note", "One named note, notes/<name>.md.", (
    _t('"note"'),
    Field("name", "string", "the note name (without .md)"),
    Field("path", "string", "absolute path"),
    Field("size", "integer", "bytes"),
    Field("modified", "time", "modification time (null when the file's time is past what a "
          "time can be here, year 1 to 9999)", True),
), ids=("name", "path"))

HIT = RowModel("search", "hit", "One matching line of the Markdown memory.", (
    _t('"hit"'),
    Field("file", "string", "path relative to the store"),
    Field("line", "integer", "1-based line number"),
    Field("text", "string", "the whole line"),
), ids=("file",))

REVISION = RowModel("history", "revision", "One revision of a fact.", (
    _t('"revision"'),
    Field("fact_id", "string", "16 hex digits"),
    Field("revision", "integer", "1, 2, ... without gaps (null when stored as no integer: "
          "a BLOB, a real, +Inf, a text; a damaged database)", True),
    Field("current", "boolean", "whether this is the current revision (never a row whose "
          "revision is null, and none when the fact's current revision reads as null)"),
    Field("created", "time", "when the revision was written", True),
    Field("status", "string", "status of this revision's evidence today"),
    Field("reason", "string", "machine-readable reason of a status other than valid", True),
    Field("source", "string", "source as session:positions", True),
    Field("source_ref", "object", "SourceRef {session_id, seqs, digest}", True),
    Field("provenance", "list", "legacy provenance [{session_id, seqs}]", items="object"),
    Field("text", "string", "the whole revision text"),
), ids=("fact_id", "source"))

USAGE = RowModel("usage", "purpose", "Model-call accounting for one purpose (type "
                 '"total" for the sum of every purpose).', (
    _t('"purpose", or "total" for the last row'),
    Field("purpose", "string", "summarization, learning, answering, ... as the events name it "
          "(\"total\" in the total row; null for the memory_usage events whose purpose is "
          "missing, null, empty or not a string; in a table, whose rows have no type, the "
          "total row says (total), this row (none), and a purpose beginning with ( or \" is "
          "shown as a JSON string)", True),
    Field("calls", "integer", "calls counted"),
    Field("known_usage_calls", "integer", "calls that reported their usage"),
    Field("unknown_usage_calls", "integer", "calls whose usage was not reported (not zero)"),
    Field("input_tokens", "integer", "known subtotal"),
    Field("output_tokens", "integer", "known subtotal"),
    Field("cost", "number", "known subtotal; null when no call reported a cost", True),
    Field("unknown_cost_calls", "integer", "calls with tokens but no cost"),
    Field("complete", "boolean", "true when neither unknown count nor repeated_events is above "
          "zero"),
    Field("compact_events", "integer", "compact events counted"),
    Field("memory_usage_events", "integer", "memory_usage events counted"),
    Field("repeated_events", "integer", "events whose seq repeats or goes back in their "
          "transcript: not counted as calls (since 2026-12-07)"),
), alt_types=("total",))

PROJECT = RowModel("projects", "project", "One store under <config dir>/memory/.", (
    _t('"project"'),
    Field("slug", "string", "the store's directory name"),
    Field("path", "string", "absolute path of the store"),
    Field("kind", "string", "project, legacy, unclaimed, symlink, not_a_directory (a file, a "
          "FIFO, ... in the store's place: facts_error says which) or unreadable (an entry "
          "that cannot be looked up)"),
    Field("root", "string", "the verified project root (null when unknown, and for a legacy "
          "store, whose directory is legacy_directory)", True),
    Field("root_source", "string", "how the root was found: session header (the store's own "
          "or, for its project's row, a legacy store's), current project or --root", True),
    Field("root_exists", "boolean", "whether the root still exists (null: unknown)", True),
    Field("legacy_of", "string", "the project a legacy store belongs to", True),
    Field("legacy_directory", "string", "the directory a legacy store was kept for", True),
    Field("possibly_legacy", "boolean", "Markdown only: maybe a legacy store"),
    Field("sessions", "integer", "session transcripts: files <id>.jsonl of a valid session id "
          "(memctl sessions also lists other *.jsonl names, refused); null when sessions/ "
          "cannot be listed, or the entry is a symlink (not followed), not_a_directory or "
          "unreadable (not known)", True),
    Field("facts", "integer", "facts (null when the database cannot be read)", True),
    Field("facts_error", "string", "why facts is null", True),
    Field("size", "integer", "bytes of the regular files in the store; null when a directory "
          "of it cannot be listed or an entry looked up, or the entry is a symlink, "
          "not_a_directory or unreadable (not known: never a count too low)", True),
    Field("files", "integer", "regular files in the store; null as size is", True),
    Field("last_activity", "time", "newest modification time of any file (of those that "
          "could be read)", True),
), ids=("slug", "path", "root"))

FINDING = RowModel("validate", "finding", "One problem found by validate.", (
    _t('"finding"'),
    Field("code", "string", "stable finding code (memctl validate --list-codes)"),
    Field("severity", "string", "error, warning or info"),
    Field("check", "string", "the check (the code's group)"),
    Field("project", "string", "the store's slug"),
    Field("file", "string",
          "file relative to the store (config.toml: its absolute path, outside the store)", True),
    Field("line", "integer", "1-based line", True),
    Field("offset", "integer", "byte offset", True),
    Field("seq", "integer", "record seq; null when beyond 64 bits (a line over 1 MiB "
          "placed by its first bytes: the message says it)", True),
    Field("session_id", "string", "session id", True),
    Field("fact_id", "string", "fact id", True),
    Field("revision", "integer", "fact revision", True),
    Field("reason", "string", "sub-kind of the finding", True),
    Field("key", "string", "config key or learning reason code", True),
    Field("table", "string", "database table", True),
    Field("message", "string", "one line"),
), ids=("fact_id", "session_id", "project", "file"))

SUMMARY = RowModel("validate", "summary", "The audit of one store (after its findings).", (
    _t('"summary"'),
    Field("project", "string", "the store's slug"),
    Field("store", "string", "absolute path of the store"),
    Field("deep", "boolean", "whether --deep was given"),
    Field("ok", "boolean", "nothing at error severity (--strict: nor warning)"),
    Field("started", "time", "when the audit of this store started"),
    Field("finished", "time", "when it finished", True),
    Field("duration_seconds", "number", "finished - started", True),
    Field("findings", "object", "{error, warning, info}: counts by severity"),
    Field("by_code", "object", "{code: count}"),
    Field("ignored", "integer", "findings dropped by --ignore"),
    Field("facts", "object", "{status: count}, each fact under its worst revision; null when "
          "the facts were not all read (a database that cannot be read: not known)", True),
    Field("facts_total", "integer", "facts; null when the facts were not all read (not known)",
          True),
    Field("sessions", "integer", "session transcripts: files <id>.jsonl of a valid session id "
          "(memctl sessions also lists other *.jsonl names, refused); null when sessions/ "
          "cannot be listed (not known)", True),
    Field("transcript_bytes_read", "integer", "bytes of transcripts read"),
))

CODE = RowModel("validate --list-codes", "code", "One finding code validate can report.", (
    _t('"code"'),
    Field("code", "string", "the finding code"),
    Field("severity", "string", "error, warning or info (session.torn_tail, session.missing_header: "
          "warning or error; layout.temp_file: warning or info)"),
    Field("group", "string", "the check it belongs to (--ignore 'GROUP.*')"),
    Field("deep", "boolean", "only looked for with --deep"),
    Field("meaning", "string", "what it means"),
), ids=("code",))

PLAN_ITEM = RowModel("migrate-legacy", "item", "One file of the migration plan.", (
    _t('"item"'),
    Field("source", "string", "the legacy file"),
    Field("destination", "string", "where it goes in the project store", True),
    Field("action", "string", "copy or skip"),
    Field("reason", "string", "why it is skipped", True),
    Field("conflict", "boolean", "whether skipping it loses content: other content in the "
          "project store or an earlier store, unreadable, or Markdown skipped as a symbolic "
          "link, not a regular file or by its name"),
    Field("blocked", "boolean", "destination_exists only: something that is not a regular file "
          "(a directory, a symbolic link), or that cannot be read, is in the way; such an item "
          "makes the exit status 4 (an ordinary existing destination does not)"),
    Field("not_utf8", "boolean", "Markdown whose bytes are not valid UTF-8 (detail names the "
          "first bad byte): a copy is byte for byte all the same, and then validate reports "
          "markdown.invalid_utf8 for it"),
    Field("result", "string", "null unless applied (a dry run, or nothing to copy: applied false); "
          "after applying: copied, skipped (a skip item), "
          "identical, conflict, source_changed", True),
    Field("store", "integer", "index of the legacy store (#N in the plan)"),
    Field("name", "string", "the file relative to the store"),
    Field("size", "integer", "bytes", True),
    Field("sha256", "string", "content hash", True),
    Field("provided_by", "string", "duplicate, identical: the earlier legacy file that "
          "provides this destination first (or the earlier store's directory that could not be "
          "listed)", True),
    Field("detail", "string", "a human explanation", True),
    Field("diff", "string", "with --diff, for a conflict: the legacy file against the "
          "project's (unified diff)", True),
), ids=("name", "source"))

SETTING = RowModel("config", "setting", "One [memory] setting.", (
    _t('"setting"'),
    Field("key", "string", "memory.<name>"),
    Field("value", "scalar", "the effective value"),
    Field("default", "scalar", "the default value"),
    Field("source", "string", "the absolute path of config.toml (config_file) when set there, else default"),
), ids=("key",))

MATCH = RowModel("grep", "match", "One line of a transcript field that matches.", (
    _t('"match"'),
    Field("session_id", "string", "the session"),
    Field("seq", "integer", "the record's seq"),
    Field("role", "string", "the record's role as written (user, assistant, tool, system, or any "
          "other string); summary for a compaction summary, whose path is $.summary (a "
          "message whose role is summary has a $.content path); null for a message without "
          "a string role", True),
    Field("path", "string", "JSON path of the field in the record ($.content, $.summary, ...)"),
    Field("line_no", "integer", "1-based line of the field's text"),
    Field("line", "string", "that line (about 400 characters around the match when longer)"),
    Field("start", "integer", "offset of the match in line (characters)"),
    Field("end", "integer", "offset after the match in line"),
    Field("match", "string", "the matched text"),
    Field("before", "list", "with -C N: up to N lines before (each its first 400 characters)"),
    Field("after", "list", "with -C N: up to N lines after (each its first 400 characters)"),
    Field("visible", "boolean", "whether the agent may see this record"),
    Field("hidden_reason", "string", "why not: excluded, undone, cleared, epoch or inert", True),
), ids=("session_id",))

MATCH_COUNT = RowModel("grep -c, grep -l", "match_count", "The hits of one session "
                       "(sessions without a hit are not listed).", (
    _t('"match_count"'),
    Field("session_id", "string", "the session"),
    Field("count", "integer", "hits in it (within --limit)"),
), ids=("session_id",))

SECRET = RowModel("secrets", "secret", "One credential found; the value itself is never "
                  "printed, only a masked preview, its length and its SHA-256.", (
    _t('"secret"'),
    Field("detector", "string", "the detector (aws-access-key, github-token, ...)"),
    Field("kind", "string", "transcript, file, fact or database"),
    Field("project", "string", "the store's slug"),
    Field("file", "string", "file relative to the store (a value in a session id shown as "
          "its marker)", True),
    Field("session_id", "string", "session id (transcripts; a value in it shown as its "
          "marker)", True),
    Field("seq", "integer", "record seq (transcripts); null when the record's seq is no "
          "integer (true, 2.5, text)", True),
    Field("path", "string", "JSON path in the record (transcripts; a value in a key on it "
          "shown as its marker)", True),
    Field("line", "integer", "1-based line of the file (files, and transcripts: the record's line)", True),
    Field("offset", "integer", "byte offset (database)", True),
    Field("fact_id", "string", "fact id (facts)", True),
    Field("revision", "integer", "fact revision (facts); null when stored as no integer "
          "(a real, a text, a BLOB: a damaged database)", True),
    Field("preview", "string", "at most four leading characters, then the length"),
    Field("length", "integer", "the value's length in characters"),
    Field("hash", "string", "SHA-256 of the value (hex; the allowlist's form)"),
), ids=("session_id", "fact_id", "hash", "project", "file"))

SECRETS_SCAN = RowModel("secrets", "scan", "The scan of one store (JSONL: after its secrets).", (
    _t('"scan"'),
    Field("project", "string", "the store's slug"),
    Field("store", "string", "absolute path of the store"),
    Field("ok", "boolean", "no secret found and every file read"),
    Field("findings", "integer", "secrets found (allowlisted ones not counted)"),
    Field("by_detector", "object", "{detector: count}"),
    Field("allowlisted", "integer", "findings whose value is in the allowlist: counted, not "
          "listed (each place a value is found, as findings counts them)"),
    Field("files_scanned", "integer", "files read"),
    Field("bytes_scanned", "integer", "bytes read"),
    Field("unreadable", "integer", "files that could not be read (they may hide a value)"),
    Field("skipped", "list", "[{file, reason, unreadable}]: files not read", items="object"),
), ids=("project",))

REWRITE = RowModel("redact", "rewrite", "One file the redaction rewrites (plan.files).", (
    _t('"rewrite"'),
    Field("file", "string", "file relative to the store"),
    Field("kind", "string", "transcript or file"),
    Field("replacements", "integer", "values replaced"),
    Field("found", "integer", "of the replacements, those where a detector found the value"),
    Field("copies", "integer", "of the replacements, copies elsewhere (replacements - found)"),
    Field("records", "list", "seqs of the rewritten records (transcripts; a record whose "
          "seq is no integer, true say, is not listed)", items="integer"),
    Field("lines", "integer", "raw lines changed (Markdown files, corrupt or torn records)"),
    Field("sha256", "string", "the file's content hash when planned", True),
), ids=("file",))

FACT_CHECK = RowModel("verify", "fact_check", "One fact of a bundle: its status recomputed "
                      "from the bundled copy against the manifest's.", (
    _t('"fact_check"'),
    Field("fact_id", "string", "16 hex digits, as export writes it (a manifest's other value "
          "as it is, or its JSON text when it is not text)"),
    Field("revision", "integer", "current revision (null when the manifest's, read where "
          "the database has no row, is no integer)", True),
    Field("status", "string", "status recomputed now (null: not in the bundled database)", True),
    Field("reason", "string", "its reason", True),
    Field("manifest_status", "string", "status at export (null: not in the manifest; a "
          "manifest's value that is no text as its JSON text)", True),
    Field("manifest_reason", "string", "its reason at export (a value that is no text as its "
          "JSON text)", True),
    Field("same", "boolean", "whether the two agree"),
), ids=("fact_id",))

PROBLEM = RowModel("verify", "problem", "One way a bundle differs from its manifest.", (
    _t('"problem"'),
    Field("kind", "string", "archive, manifest, changed, missing, added, refused, order, "
          "duplicate, validate or facts"),
    Field("path", "string", "the member concerned (over 4096 characters: its first 4096, "
          "then `... (N bytes, sha256 HEX)`)", True),
    Field("detail", "string", "one line (cut as `path` past 4096 characters)"),
), ids=("path",))

MODELS: tuple[RowModel, ...] = (FACT, SESSION, NOTE, HIT, REVISION, USAGE, PROJECT, FINDING,
                                SUMMARY, CODE, PLAN_ITEM, SETTING, MATCH, MATCH_COUNT, SECRET,
                                SECRETS_SCAN, REWRITE, FACT_CHECK, PROBLEM)


def schema_document() -> dict[str, Any]:
    """Everything ``memctl schema`` prints: the version and each record's JSON Schema."""
    return {"schema_version": SCHEMA_VERSION,
            "records": {m.type: {"command": m.command, "schema": m.json_schema()}
                        for m in MODELS}}


def check_rows(model: RowModel, rows: Iterable[Mapping[str, Any]]) -> None:
    """Assert that rows follow the model (tests and debugging)."""
    for r in rows:
        if list(r) != model.names:
            raise AssertionError(f"{model.type}: fields {list(r)} != {model.names}")
