"""The spark tier: one local SparkSession for the run, no broker. Every test here has the session
(building a column expression, as a table's suite does, needs one); a test that asks for the broker
fails, saying where it belongs."""

import pytest


@pytest.fixture(autouse=True)
def _session(spark):
    return spark


@pytest.fixture(scope="session")
def broker_overrides():
    pytest.fail("the spark tier starts no broker: a test that needs one belongs in tests/integration")
