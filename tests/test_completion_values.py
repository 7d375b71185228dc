"""Completion offers only values the command takes.

- ``--format``: the listing formats offered are all accepted
  (``output.check_format``); ``rst`` and ``orgtbl`` were offered after they
  were refused (2026-12-07: tabulate formats that would write a store's
  text as live markup).
- note names: a file ``notes/a.md.md`` is listed as ``a.md.md`` (which every
  command refuses: ``a.md`` names ``notes/a.md``); completion offered
  ``a.md``, the other file's name."""

from __future__ import annotations

from types import SimpleNamespace
from unittest import mock

from lecode_memctl.cli import completion
from lecode_memctl.cli.output import check_format


def test_every_offered_listing_format_is_accepted():
    for name in completion.complete_format(""):
        assert check_format(name) == name


def test_a_note_file_whose_name_without_md_names_another_is_not_offered(tmp_path):
    notes = tmp_path / "notes"
    notes.mkdir()
    for name in ("a.md", "a.md.md", "b.md"):
        (notes / name).write_text("x\n")
    with mock.patch.object(completion, "store_from_context",
                           lambda ctx: SimpleNamespace(path=tmp_path)):
        assert completion.complete_note_name(None, [], "") == ["a", "b"]
