"""Fixtures of the dev gateway's tests: one gateway per test, on a free loopback port."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from provisioner.devgateway import RunningGateway, serve_in_thread


@pytest.fixture
def gateway() -> Iterator[RunningGateway]:
    with serve_in_thread(seed=3) as running:
        yield running


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(trust_env=False, timeout=10) as http:
        yield http
