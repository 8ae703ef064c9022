"""Fixtures of the CONTRACT §4 tests (helpers: cli_process.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from cli_process import Background


@pytest.fixture
def background() -> Iterator:
    """``background(*args) -> Background``; every process started is killed after the test."""
    started: list[Background] = []

    def start(*args: object, **kwargs) -> Background:
        process = Background(*args, **kwargs)
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()
