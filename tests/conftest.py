"""Fixtures shared by the test folders."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def local_llm():
    """The local model's install (scripts/setup-local-llm), or a skip: `make test` installs it
    and sets DEEP_RESEARCH_REQUIRE_LLM=1, which turns a missing install into a failure."""
    from tests.local_llm import find_install, required

    install = find_install()
    if install is None:
        if required():
            pytest.fail("the local model is not installed: run scripts/setup-local-llm")
        pytest.skip("the local model is not installed (scripts/setup-local-llm)")
    return install
