"""`sluice collections export` and `sluice collections import` (docs/cli.md, docs/bundles.md)
against the real ingest-api and search: a collection moved under another name answers the same
keyword search, and every refusal is one line on stderr with its exit code."""

from __future__ import annotations

import json

import psycopg

from .test_cli_chunks import keyword_hits, ready_document


def one_line(result) -> str:
    assert result.err.startswith("error: ") and len(result.err.strip().splitlines()) == 1, result.err
    return result.err


def test_export_then_import_under_another_name(sluice, stack, tmp_path):
    ready_document(sluice, stack, tmp_path)
    bundle = tmp_path / "docs.bundle"
    exported = sluice("--json", "collections", "export", "docs", "-o", bundle, *stack.args)
    assert exported.code == 0, exported.err
    described = json.loads(exported.out)
    assert described["collection"] == "docs" and described["documents"] == 1 and described["chunks"] == 3
    assert int(described["size_bytes"]) == bundle.stat().st_size and described["path"] == str(bundle)
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".part")] == []

    again = sluice("collections", "export", "docs", "-o", bundle, *stack.args)
    assert again.code == 1 and "--force" in one_line(again)
    assert sluice("collections", "export", "docs", "-o", bundle, "--force", *stack.args).code == 0

    imported = sluice("collections", "import", bundle, "--as", "docs-copy", *stack.args)
    assert imported.code == 0, imported.err
    assert "Imported docs-copy: 1 documents" in imported.out
    before = keyword_hits(sluice, stack, "Rottnest marsupials")
    after = sluice("--json", "search", "Rottnest marsupials", "-c", "docs-copy", "--mode", "keyword", *stack.args)
    assert after.code == 0, after.err
    assert [(h["text"], round(h["score"], 5)) for h in json.loads(after.out)["hits"]] == [
        (h["text"], round(h["score"], 5)) for h in before
    ]

    taken = sluice("collections", "import", bundle, "--as", "docs-copy", *stack.args)
    assert taken.code == 1 and "COLLECTION_EXISTS" in one_line(taken)


def test_refusals_are_one_line_with_their_exit_code(sluice, stack, tmp_path):
    ready_document(sluice, stack, tmp_path)
    missing = sluice("collections", "export", "nope", "-o", tmp_path / "nope.bundle", *stack.args)
    assert missing.code == 3 and "COLLECTION_NOT_FOUND" in one_line(missing)
    assert not (tmp_path / "nope.bundle").exists() and [p for p in tmp_path.iterdir() if p.name.endswith(".part")] == []
    no_file = sluice("collections", "import", tmp_path / "absent.bundle", "--as", "x", *stack.args)
    assert no_file.code == 2 and "is not a file" in one_line(no_file)
    no_name = sluice("collections", "import", tmp_path / "absent.bundle", *stack.args)
    assert no_name.code == 2

    bundle = tmp_path / "docs.bundle"
    assert sluice("collections", "export", "docs", "-o", bundle, *stack.args).code == 0
    damaged = bytearray(bundle.read_bytes())
    damaged[len(damaged) // 2] ^= 0xFF
    bad = tmp_path / "damaged.bundle"
    bad.write_bytes(bytes(damaged))
    refused = sluice("collections", "import", bad, "--as", "docs-damaged", *stack.args)
    assert refused.code == 2 and "BUNDLE_INVALID" in one_line(refused)
    with psycopg.connect(stack.database_url) as conn:
        assert conn.execute("SELECT count(*) FROM collections WHERE name = 'docs-damaged'").fetchone()[0] == 0
