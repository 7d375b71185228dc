"""``where`` on a store directory that is a symbolic link, or a file in its
place.  Every other command refuses such a store (exit 5); ``where`` read a
link's target as the store (listing what is behind it) and called a file
"does not exist yet" (``store_exists`` false).  It now says what is there,
in ``store_error``, and reads nothing below it."""

from __future__ import annotations

import orjson

from .conftest import run_cli


def _where(store):
    r = run_cli("--store", str(store), "--no-state", "where", "--json")
    assert r.exit_code == 0, r.stderr
    return orjson.loads(r.stdout)


def test_a_symlinked_store_is_named_a_link_and_not_read(tmp_path):
    real = tmp_path / "real"
    (real / "sessions").mkdir(parents=True)
    (real / "MEMORY.md").write_text("# secret memory\n")
    link = tmp_path / "p-0123456789ab"
    link.symlink_to(real)
    doc = _where(link)
    assert doc["store_exists"] is True
    assert doc["store_error"].startswith("symbolic link"), doc
    assert doc["items"] == []
    text = run_cli("--store", str(link), "--no-state", "where").stdout
    assert "symbolic link" in text and "MEMORY.md" not in text


def test_a_file_in_the_stores_place_is_not_a_store_yet_to_come(tmp_path):
    f = tmp_path / "p-0123456789ab"
    f.write_text("junk\n")
    doc = _where(f)
    assert (doc["store_exists"], doc["store_error"], doc["items"]) == (True, "not a directory", [])
    assert "does not exist yet" not in run_cli("--store", str(f), "--no-state", "where").stdout


def test_a_store_that_is_there_or_not_has_no_error(tmp_path):
    (tmp_path / "s").mkdir()
    doc = _where(tmp_path / "s")
    assert (doc["store_exists"], doc["store_error"]) == (True, None) and doc["items"]
    doc = _where(tmp_path / "absent")
    assert (doc["store_exists"], doc["store_error"]) == (False, None)
