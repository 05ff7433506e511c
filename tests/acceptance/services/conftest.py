"""Acceptance tests of the services: fixtures live in service_procs.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from tests.acceptance.services.service_procs import procs

__all__ = ["procs"]


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Iterator[Any]:
    # Let fixtures see whether the test body failed (to print the service logs).
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report
