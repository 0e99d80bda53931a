"""Segmentation for keyword search: English and Chinese, and agreement with PostgreSQL's parser."""

import psycopg
import pytest
from sluice_common.textsearch import highlight_spans, query_terms, search_terms, tsquery_text

SAMPLES = [
    "中华人民共和国成立于1949年",
    "我们使用PostgreSQL的全文检索功能进行中文分词",
    "Hello, World! node.js e-mail 3.14 foo_bar C++",
    "ＡＢＣ全角 café naïve İstanbul ﬁle 日本語のテキスト Ωμέγα",
    "'; DROP TABLE chunks; -- & | ! <-> :* ()",
]


def test_english_is_lowercased_words():
    assert search_terms("Hello, World! The QUICK fox.") == "hello world the quick fox"


def test_chinese_is_segmented_with_sub_words():
    terms = search_terms("我们使用PostgreSQL的全文检索功能").split()
    assert {"postgresql", "全文检索", "全文", "检索", "功能"} <= set(terms)


def test_full_width_and_ligatures_are_normalised():
    assert search_terms("ＡＢＣ ﬁle") == "abc file"  # noqa: RUF001 - full-width letters are the input


def test_query_terms_drop_stop_words_unless_nothing_else_is_left():
    assert query_terms("What is the capital of France?") == ["capital", "france"]
    assert query_terms("the of") == ["the", "of"]
    assert query_terms("如何 使用 向量 检索") == ["使用", "向量", "检索"]


def test_tsquery_text_cannot_carry_syntax():
    assert tsquery_text(query_terms("a & b | !c <-> 'd':*")) in {"'b' | 'c' | 'd'", "'a' | 'b' | 'c' | 'd'"}
    assert tsquery_text(["ok", "bad'quote", "x|y"]) == "'ok'"


def test_highlights_are_code_point_spans_of_the_original_text():
    text = "我们使用PostgreSQL的全文检索功能 ﬁle 😀 Vector"
    spans = highlight_spans(text, query_terms("postgresql 检索 file vector"))
    assert [text[s:e] for s, e in spans] == ["PostgreSQL", "检索", "ﬁle", "Vector"]


def test_empty_text():
    assert search_terms("") == ""
    assert query_terms("  ?! ") == []
    assert highlight_spans("", ["a"]) == []


@pytest.mark.parametrize("text", SAMPLES)
def test_postgres_keeps_every_term_as_one_lexeme(database_url, text):
    """to_tsvector('simple', search_terms) must neither split nor merge our terms, or queries
    built from query_terms would miss what the index holds."""
    terms = search_terms(text)
    with psycopg.connect(database_url) as conn:
        lexemes = conn.execute("SELECT tsvector_to_array(to_tsvector('simple', %s))", (terms,)).fetchone()[0]
        assert set(lexemes) == set(terms.split())
        query = tsquery_text(query_terms(text))
        matched = conn.execute("SELECT to_tsvector('simple', %s) @@ to_tsquery('simple', %s)", (terms, query)).fetchone()[0]
        assert matched


def test_the_ascii_highlighter_gives_textsearchs_spans():
    """sluice_search.highlight takes a short cut for ASCII text: the same spans, on texts of every
    kind (ASCII, accented, Chinese, ligatures, words split by underscores and punctuation)."""
    import random

    from sluice_search import highlight

    rng = random.Random(18)
    words = [
        "lease",
        "Lease",
        "LEASES",
        "worker",
        "job_id",
        "v2",
        "2024",
        "vacuum",
        "x",
        "ﬁle",
        "Café",
        "检索",
        "向量",
        "a-b",
        "it's",
        "  ",
        "\n",
        "...",
        "fence",
        "__",
        "İstanbul",
    ]
    terms = ["lease", "leases", "worker", "v2", "2024", "vacuum", "x", "file", "café", "检索", "job", "id", "b"]
    ascii_words = [w for w in words if w.isascii()]
    for n in range(1000):
        pool = ascii_words if n % 2 else words  # half of them all ASCII: the short cut
        text = "".join(rng.choice(pool) + rng.choice([" ", "", ".", "_", "-"]) for _ in range(rng.randint(0, 30)))
        wanted = rng.sample(terms, rng.randint(0, len(terms)))
        assert highlight.highlight_spans(text, wanted) == highlight_spans(text, wanted), (text, wanted)
