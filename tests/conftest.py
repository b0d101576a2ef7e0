"""Shared fixtures. Tests that need a real external part (Chromium, a PostgreSQL server) call
`require(available, reason)`: under LDP_REQUIRE_ALL=1 a missing part fails the test; otherwise
the test skips with the reason in capitals so nobody mistakes a skip for a pass.
"""

import json
import os
from pathlib import Path

import pytest

REFERENCE = json.loads((Path(__file__).parent / "reference" / "forced_response_cases.json")
                       .read_text())


def require(available: bool, reason: str) -> None:
    """Fail (LDP_REQUIRE_ALL=1) or skip loudly when a real dependency is missing."""
    if available:
        return
    if os.environ.get("LDP_REQUIRE_ALL") == "1":
        pytest.fail(f"LDP_REQUIRE_ALL=1 but {reason}", pytrace=False)
    pytest.skip(f"SKIPPED, NOT TESTED: {reason} (set LDP_REQUIRE_ALL=1 to make this fail)")


@pytest.fixture(scope="session")
def reference() -> dict:
    """The worked reference cases from ../shared/reference (copied into tests/reference)."""
    return REFERENCE
