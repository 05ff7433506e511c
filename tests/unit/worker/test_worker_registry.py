from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from codity.domain.errors import ConfigurationError
from codity.worker.context import JobContext
from codity.worker.registry import HandlerRegistry, default_registry, load_app


def test_async_and_sync_handlers_are_told_apart() -> None:
    r = HandlerRegistry()

    @r.handler("a")
    async def a(ctx: JobContext) -> None: ...

    @r.handler("s")
    def s(ctx: JobContext) -> None: ...

    assert r.get("a") is not None
    assert r.get("a").is_async
    assert r.get("s") is not None
    assert not r.get("s").is_async
    assert r.get("missing") is None
    assert r.names() == ["a", "s"]


def test_two_functions_under_one_name_is_a_configuration_error() -> None:
    r = HandlerRegistry()

    @r.handler("dup")
    def first(ctx: JobContext) -> None: ...

    with pytest.raises(ConfigurationError, match="two handlers are registered as 'dup'"):

        @r.handler("dup")
        def second(ctx: JobContext) -> None: ...


def test_load_app_imports_a_module_from_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "myjobs_for_registry_test.py").write_text(
        textwrap.dedent(
            """
            from codity.worker import handler

            @handler("registry-test.hello")
            async def hello(ctx):
                return "hi"
            """
        )
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    load_app("myjobs_for_registry_test")
    assert default_registry.get("registry-test.hello") is not None


def test_load_app_with_a_missing_module_says_so() -> None:
    with pytest.raises(ConfigurationError, match="cannot import handler module 'no_such_mod_xyz'"):
        load_app("no_such_mod_xyz")


def test_tasks_load_app_resolves_module_colon_attribute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from codity.tasks import App
    from codity.tasks import load_app as load_tasks_app

    (tmp_path / "myapp_for_registry_test.py").write_text(
        textwrap.dedent(
            """
            import codity

            app = codity.App("postgresql://unused")
            not_an_app = 42

            @app.task(name="registry-test.typed")
            def typed(n: int) -> int:
                return n
            """
        )
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    app = load_tasks_app("myapp_for_registry_test:app")
    assert isinstance(app, App)
    assert app.registry.get("registry-test.typed") is not None
    assert default_registry.get("registry-test.typed") is None  # the worker includes it
    assert load_tasks_app("myapp_for_registry_test") is None  # a bare module: @handler only
    with pytest.raises(ConfigurationError, match=r"has no codity\.App named 'missing'$"):
        load_tasks_app("myapp_for_registry_test:missing")
    with pytest.raises(ConfigurationError, match=r"named 'not_an_app' \(found int\)"):
        load_tasks_app("myapp_for_registry_test:not_an_app")
