"""`sluice chunks …`, `sluice documents download` and `sluice search --explain / --generation`
against the real ingest-api and search (issue 34): the chunks table, disabling, enabling and
editing a chunk (what search returns then), the original file back with its SHA-256, and why a
hit ranked where it did."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re

PARAGRAPHS = [
    "Leases expire when the worker stops renewing them.",
    "A worker claims a job with FOR UPDATE SKIP LOCKED.",
    "Quokkas are marsupials that live on Rottnest Island.",
]


def ready_document(sluice, stack, tmp_path) -> tuple[dict, bytes]:
    assert sluice("collections", "create", "docs", "--embedder", "hashing", *stack.args).code == 0
    path = tmp_path / "handbook.md"
    path.write_text("\n\n".join(PARAGRAPHS) + "\n")
    result = sluice("--json", "upload", path, "--collection", "docs", *stack.args)
    assert result.code == 0, result.err
    (uploaded,) = json.loads(result.out)["results"]
    return uploaded["document"], path.read_bytes()


def chunks_of(sluice, stack, document: str, *extra: str) -> dict:
    result = sluice("--json", "chunks", "list", document, *extra, *stack.args)
    assert result.code == 0, result.err
    return json.loads(result.out)


def keyword_hits(sluice, stack, query: str) -> list[dict]:
    result = sluice("--json", "search", query, "-c", "docs", "--mode", "keyword", *stack.args)
    assert result.code == 0, result.err
    return json.loads(result.out)["hits"]


def test_chunks_list_shows_a_table_and_json(sluice, stack, tmp_path):
    document, _ = ready_document(sluice, stack, tmp_path)
    table = sluice("chunks", "list", "handbook.md", *stack.args)  # a unique file name names the document
    assert table.code == 0, table.err
    header, *rows, summary = table.out.strip().splitlines()
    assert header.split() == ["#", "PAGE", "TOKENS", "ENABLED", "ID", "TEXT"]
    assert [row.split()[0] for row in rows] == ["0", "1", "2"] and "Quokkas are marsupials" in rows[2]
    assert all(row.split()[1] == "1" and row.split()[3] == "yes" for row in rows)
    assert re.match(r"3 of 3 chunk\(s\), generation \d+$", summary), summary
    listed = chunks_of(sluice, stack, document["id"], "--all")
    assert listed["total_size"] == 3 and listed["next_page_token"] == "" and listed["document_id"] == document["id"]
    assert [c["text"] for c in listed["chunks"]] == PARAGRAPHS
    assert {"id", "etag", "enabled", "token_count", "page_number", "generation"} <= set(listed["chunks"][0])
    again = chunks_of(sluice, stack, document["id"], "--generation", str(listed["generation"]))
    assert [c["id"] for c in again["chunks"]] == [c["id"] for c in listed["chunks"]]
    missing = sluice("chunks", "list", document["id"], "--generation", str(listed["generation"] + 40), *stack.args)
    assert missing.code == 3 and missing.err.startswith("error: ") and len(missing.err.strip().splitlines()) == 1
    unknown = sluice("chunks", "list", "nope.md", *stack.args)
    assert unknown.code == 3 and "no document matches" in unknown.err


def test_disable_enable_and_edit_a_chunk(sluice, stack, tmp_path, monkeypatch):
    document, _ = ready_document(sluice, stack, tmp_path)
    quokka = chunks_of(sluice, stack, document["id"])["chunks"][2]
    assert [h["chunk_id"] for h in keyword_hits(sluice, stack, "quokkas")] == [quokka["id"]]

    disabled = sluice("chunks", "disable", quokka["id"], "--etag", quokka["etag"], *stack.args)
    assert disabled.code == 0, disabled.err
    assert f"Disabled chunk #2 of {document['id']}" in disabled.out and "disabled" in disabled.out
    assert keyword_hits(sluice, stack, "quokkas") == []
    row = next(line for line in sluice("chunks", "list", document["id"], *stack.args).out.splitlines() if "Quokkas" in line)
    assert row.split()[3] == "no"
    stale = sluice("chunks", "enable", quokka["id"], "--etag", quokka["etag"], *stack.args)
    assert stale.code == 1 and "[CHUNK_CHANGED]" in stale.err and len(stale.err.strip().splitlines()) == 1
    enabled = json.loads(sluice("--json", "chunks", "enable", quokka["id"], *stack.args).out)
    assert enabled["enabled"] is True and enabled["id"] == quokka["id"]
    assert len(keyword_hits(sluice, stack, "quokkas")) == 1

    leases = chunks_of(sluice, stack, document["id"])["chunks"][0]
    by_text = sluice("chunks", "edit", leases["id"], "--text", "Leases lapse: the platypus rule.", *stack.args)
    assert by_text.code == 0 and "Edited chunk #0" in by_text.out and "edited" in by_text.out
    assert [h["chunk_id"] for h in keyword_hits(sluice, stack, "platypus")] == [leases["id"]]
    text_file = tmp_path / "new.txt"
    text_file.write_text("Leases lapse: the wombat rule.")
    assert sluice("chunks", "edit", leases["id"], "--file", text_file, *stack.args).code == 0
    assert [h["chunk_id"] for h in keyword_hits(sluice, stack, "wombat")] == [leases["id"]]
    monkeypatch.setattr("sys.stdin", io.StringIO("Leases lapse: the echidna rule.\n"))
    from_stdin = json.loads(sluice("--json", "chunks", "edit", leases["id"], "-", *stack.args).out)
    assert from_stdin["edited"] and from_stdin["original_text"] == PARAGRAPHS[0] and "echidna" in from_stdin["text"]

    nothing = sluice("chunks", "edit", leases["id"], *stack.args)
    assert nothing.code == 2 and "--text TEXT, --file PATH, or -" in nothing.err
    both = sluice("chunks", "edit", leases["id"], "--text", "a", "--file", text_file, *stack.args)
    assert both.code == 2
    empty = sluice("chunks", "edit", leases["id"], "--text", "  ", *stack.args)
    assert empty.code == 2 and empty.err.startswith("error: ")
    gone = sluice("chunks", "disable", "999999999", *stack.args)
    assert gone.code == 3


def test_documents_download_writes_the_file_and_refuses_to_overwrite(sluice, stack, tmp_path, monkeypatch):
    document, original = ready_document(sluice, stack, tmp_path)
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    first = sluice("documents", "download", document["id"], *stack.args)
    assert first.code == 0, first.err
    assert (here / "handbook.md").read_bytes() == original and "SHA-256 checked" in first.out
    again = sluice("documents", "download", document["id"], *stack.args)
    assert again.code == 1 and "exists already; --force overwrites it" in again.err
    (here / "handbook.md").write_text("changed locally")
    forced = sluice("documents", "download", document["id"], "--force", *stack.args)
    assert forced.code == 0 and (here / "handbook.md").read_bytes() == original
    as_json = json.loads(sluice("--json", "documents", "download", "handbook.md", "-o", tmp_path / "copy.md", *stack.args).out)
    assert as_json["path"] == str(tmp_path / "copy.md") and (tmp_path / "copy.md").read_bytes() == original
    assert as_json["content_sha256"] == hashlib.sha256(original).hexdigest() and as_json["size_bytes"] == str(len(original))
    into = tmp_path / "folder"
    into.mkdir()
    assert sluice("documents", "download", document["id"], "-o", into, *stack.args).code == 0
    assert (into / "handbook.md").read_bytes() == original
    assert sorted(p.name for p in here.iterdir()) == ["handbook.md"]  # no temporary file left behind
    missing = sluice("documents", "download", "00000000-0000-4000-8000-000000000000", *stack.args)
    assert missing.code == 3
    to_stdout = sluice("documents", "download", document["id"], "-o", "-", *stack.args)
    assert to_stdout.code == 0 and to_stdout.out.encode() == original
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        refused = sluice("documents", "download", document["id"], "-o", locked, *stack.args)
    finally:
        locked.chmod(0o700)
    if os.geteuid() != 0:  # root writes anywhere
        assert refused.code == 1 and "cannot write" in refused.err and "Traceback" not in refused.err


def test_search_explain_shows_each_hits_lists(sluice, stack, tmp_path):
    ready_document(sluice, stack, tmp_path)
    shown = sluice("search", "quokkas marsupials", "-c", "docs", "--explain", *stack.args)
    assert shown.code == 0, shown.err
    lines = shown.out.splitlines()
    assert "handbook.md" in lines[0]
    table = "\n".join(lines[2:8])
    assert re.search(r"SCORE\s+RANK\s+PART", table), shown.out
    assert re.search(r"keyword\s+\d+\.\d{4}\s+1\s+\d+\.\d{4}", table), shown.out
    assert re.search(r"vector\s+-?\d+\.\d{4}\s+\d+\s+\d+\.\d{4}", table), shown.out
    assert re.search(r"fused\s+\d+\.\d{4}\s+1", table), shown.out
    assert "matched: " in shown.out and "vector weight" in shown.out
    keyword_only = sluice("search", "quokkas", "-c", "docs", "--mode", "keyword", "--explain", *stack.args)
    assert re.search(r"vector\s+-\s+-", keyword_only.out), keyword_only.out  # not in the vector list: no score, not 0
    as_json = json.loads(sluice("--json", "search", "quokkas", "-c", "docs", "--explain", *stack.args).out)
    explanation = as_json["hits"][0]["explanation"]
    assert explanation["keyword_rank"] == 1 and explanation["first_stage_rank"] == 1
    plain = json.loads(sluice("--json", "search", "quokkas", "-c", "docs", *stack.args).out)
    assert "explanation" not in plain["hits"][0]
    generation = as_json["generation"]
    by_generation = sluice("search", "quokkas", "-c", "docs", "--generation", str(generation), *stack.args)
    assert by_generation.code == 0 and f"generation {generation}" in by_generation.out
    assert sluice("search", "quokkas", "-c", "docs", "--generation", str(generation + 40), *stack.args).code == 3


def test_chunks_list_shows_the_first_page_and_all_with_all(sluice, stack, tmp_path):
    assert sluice("collections", "create", "docs", "--embedder", "hashing", *stack.args).code == 0
    path = tmp_path / "long.txt"
    path.write_text("\n\n".join(f"Paragraph number {n} of a long file." for n in range(105)))
    assert sluice("upload", path, "--collection", "docs", *stack.args).code == 0
    first = sluice("chunks", "list", "long.txt", *stack.args)
    lines = first.out.strip().splitlines()
    assert len(lines) == 1 + 100 + 1 and lines[-1].startswith("100 of 105 chunk(s)") and lines[-1].endswith("--all for every one")
    every = sluice("chunks", "list", "long.txt", "--all", *stack.args)
    assert len(every.out.strip().splitlines()) == 1 + 105 + 1 and "--all" not in every.out.splitlines()[-1]
    as_json = chunks_of(sluice, stack, "long.txt")
    assert len(as_json["chunks"]) == 100 and as_json["next_page_token"] and as_json["total_size"] == 105
