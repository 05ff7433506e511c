"""Named statements with named parameters and fragments (`codity.db.queries.bind`)."""

from __future__ import annotations

import re

import pytest

from codity.db import queries
from codity.db.queries import Fragments, all_queries, bind


def _code(text: str) -> str:
    """The statement without its comment lines (which keep the `:name` documentation)."""
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))


def test_parameters_are_numbered_in_order_of_first_use_and_repeats_share_a_number() -> None:
    q = bind("quota_consume", key="k", cost=2, limit=5, window_s=60)
    assert q.args == ("k", 2, 60, 5)  # :key, :cost, :window_s, then :limit in the WHERE
    code = _code(q.text)
    assert ":cost" not in code
    assert code.count("$2") == 4  # every :cost is the same parameter
    assert "::int" in q.text  # casts are not taken for parameters


def test_fragments_make_one_statement_per_filter_shape() -> None:
    plain = bind("api_jobs_list", project_id=1, limit=10)
    filtered = (
        Fragments()
        .add("api_jobs_when_queue", queue_id=2)
        .bind("api_jobs_list", project_id=1, limit=10)
    )
    assert "j.queue_id" not in plain.text.split("/*fragments*/")[1]
    assert "AND j.queue_id = $2::uuid" in filtered.text
    assert filtered.args == (1, 2, 10)
    # No always-true `(:x IS NULL OR ...)` in any list statement: absent filters are absent.
    for name, text in all_queries().items():
        if name.startswith("api_"):
            assert not re.search(r":\w+(::\w+)? IS NULL OR", text), name


def test_a_fragment_with_a_slot_goes_to_its_mark() -> None:
    q = bind("api_workers_list", "api_workers_of_project", org_id=1, project_id=2, limit=3)
    inner, outer = q.text.split(") mine ON")
    assert "q.project_id = $2::uuid" in inner
    assert "project_id" not in outer


def test_missing_and_unused_parameters_are_errors_not_silent_nulls() -> None:
    with pytest.raises(ValueError, match=r"missing parameters \['limit'\]"):
        bind("api_jobs_list", project_id=1)
    with pytest.raises(ValueError, match=r"unused parameters \['queue_id'\]"):
        bind("api_jobs_list", project_id=1, limit=1, queue_id=2)
    with pytest.raises(ValueError, match="has no"):
        bind("api_users_get", "api_jobs_when_queue", user_id=1, queue_id=2)


def test_literals_and_comments_are_not_parameters() -> None:
    text = "SELECT ':not_a_param', \"col:x\" -- :nor_this\nFROM t WHERE a = :real::int"
    numbered = queries._TOKENS.sub(lambda m: m.group(0) if m.group("param") is None else "$1", text)
    assert numbered == "SELECT ':not_a_param', \"col:x\" -- :nor_this\nFROM t WHERE a = $1::int"


def test_every_api_statement_binds() -> None:
    """Each named statement of the API numbers its parameters (a typo such as `:projet_id`
    shows up as an extra parameter the caller does not pass, caught by the API tests)."""
    for name in all_queries():
        if name.startswith("api_"):
            text, order = queries._numbered(name, ())
            assert not re.search(r"(?<![:\w]):[a-z_]", _code(text)), name
            assert len(order) == len(set(order))


def test_a_positional_statement_takes_its_fragment_only_when_asked() -> None:
    """The bulk enqueue: ON CONFLICT (and its ORDER BY) only in the keyed statement's text."""
    plain = queries.spliced("insert_jobs")
    keyed = queries.spliced("insert_jobs", "insert_jobs_first_key_wins")
    assert plain == queries.sql("insert_jobs")
    assert "ON CONFLICT (queue_id" not in plain
    assert "ORDER BY ord\nON CONFLICT (queue_id, idempotency_key)" in keyed
    clause = keyed.index("ON CONFLICT (queue_id")
    assert keyed.index("/*first_key_wins*/\n") < clause < keyed.index("RETURNING id, status")
    assert "$20::uuid" in keyed  # positional parameters are left as written


def test_a_mark_named_in_a_comment_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """A mark quoted in a comment would take the fragment too, its first line commented out and
    the rest loose in the statement (the first draft of insert_jobs's mark did exactly that).
    A mark written twice in the statement itself is fine: each gets the fragments."""
    texts = {
        "commented": "-- see /*fragments*/\nSELECT 1 WHERE true /*fragments*/",
        "twice": "SELECT 1 WHERE true /*fragments*/ UNION ALL SELECT 2 WHERE true /*fragments*/",
        "f": "AND 2 > 1",
    }
    monkeypatch.setattr(queries, "sql", texts.__getitem__)
    queries._spliced.cache_clear()
    try:
        with pytest.raises(ValueError, match="in a comment"):
            queries.spliced("commented", "f")
        assert queries.spliced("twice", "f").count("AND 2 > 1") == 2
    finally:
        queries._spliced.cache_clear()
