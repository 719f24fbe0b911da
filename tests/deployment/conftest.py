"""Fixtures of the deployment suite."""

from __future__ import annotations

import pytest

from tests.deployment.clusters import cluster_settings_in


@pytest.fixture(scope="module")
def cluster_settings(tmp_path_factory) -> list[str]:
    """--set values of both embedded clusters on this module's own free ports and folder (not started)."""
    return cluster_settings_in(tmp_path_factory.mktemp("cluster"))
