"""The registry: the contract's tables in dependency order, and policies from the declarations unless
configured (the schemas the streams create: tests/spark/test_table_declarations.py)."""

from __future__ import annotations

import pytest

from analytical import gold_page_clicks_5s, silver_clicks
from analytical.registry import STREAMS, TABLES, check_policies, rebuilt, running
from shared.errors import ConfigError
from tests.conftest import make_config

#: CONTRACT.md's tables, in the order their streams write them: what users and readers rely on.
CONTRACT_TABLES = ["bronze/clicks", "silver/clicks", "silver/quarantine", "gold/page_clicks_5s",
                   "gold/page_clicks_hourly", "gold/user_sessions", "gold/page_conversion"]


def test_the_registry_holds_the_contracts_tables_in_dependency_order():
    assert [table.name for table in TABLES] == CONTRACT_TABLES
    assert [stream.name for stream in STREAMS] == ["medallion", "gold_page_clicks_hourly", "gold_user_sessions"]
    rebuilding = rebuilt()
    assert [stream.name for stream in rebuilding] == ["medallion_rebuild", "gold_page_clicks_hourly", "gold_user_sessions"]
    assert [table.name for table in rebuilding[0].writes] == CONTRACT_TABLES[1:4], "a rebuild reads bronze, not writes it"


def test_the_sessions_stream_runs_unless_the_configuration_turns_it_off():
    assert running(make_config("sessions.enabled=true")) == STREAMS
    assert [stream.name for stream in running(make_config("sessions.enabled=false"))] == \
        ["medallion", "gold_page_clicks_hourly"]
    assert [stream.name for stream in rebuilt(running(make_config("sessions.enabled=false")))] == \
        ["medallion_rebuild", "gold_page_clicks_hourly"]


def test_a_table_keeps_its_declared_policy_unless_the_config_names_it():
    assert silver_clicks.TABLE.expectation_policy(make_config()) == "drop"
    assert gold_page_clicks_5s.TABLE.expectation_policy(make_config()) == "fail"
    overridden = make_config("quality.policies.gold_page_clicks_5s=warn")
    assert gold_page_clicks_5s.TABLE.expectation_policy(overridden) == "warn"
    assert silver_clicks.TABLE.expectation_policy(overridden) == "drop"
    check_policies(overridden)


def test_a_policy_for_a_table_that_does_not_exist_names_the_key():
    with pytest.raises(ConfigError, match=r"quality\.policies\.gold_page_clicks_5: no table of that name"):
        check_policies(make_config("quality.policies.gold_page_clicks_5=warn"))
    with pytest.raises(ConfigError, match=r"quality\.policies\.bronze_clicks"):  # bronze checks no expectations
        check_policies(make_config("quality.policies.bronze_clicks=warn"))
