"""The command line as a user meets it: help everywhere, one clear line on bad input, exit codes."""

import pytest

from lakehouse.cli import build_parser
from tests.helpers import run_lakehouse

COMMANDS = [[], ["kafka"], ["kafka", "start"], ["kafka", "stop"], ["kafka", "status"], ["kafka", "topics"],
            ["generate"], ["inspect"], ["demo"], ["config"], ["sql"], ["query", "top-pages"], ["status"],
            ["cluster", "status"]]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "lakehouse")
def test_every_command_has_help(command, capsys):
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args([*command, "--help"])

    assert done.value.code == 0
    assert "usage: lakehouse" in capsys.readouterr().out


def test_top_level_help_lists_the_commands():
    result = run_lakehouse("--help")

    assert result.returncode == 0
    for command in ("kafka", "generate", "inspect", "config"):
        assert command in result.stdout


def test_a_bad_config_value_is_one_clear_line_and_exit_2():
    result = run_lakehouse("config", "--set", "hot_pages.threshold=many")

    assert result.returncode == 2
    assert "hot_pages.threshold" in result.stderr and "many" in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def test_set_before_the_subcommand_is_kept():
    result = run_lakehouse("--set", "hot_pages.threshold=42", "config")

    assert result.returncode == 0
    assert "threshold: 42" in result.stdout


def test_a_bad_option_value_is_refused_by_the_parser():
    result = run_lakehouse("generate", "--late-fraction", "2")

    assert result.returncode == 2
    assert "between 0 and 1" in result.stderr


def test_status_of_a_broker_that_never_ran_exits_1(tmp_path):
    result = run_lakehouse("kafka", "status", "--set", f"broker.run_dir={tmp_path}",
                           "--set", "kafka.bootstrap_servers=127.0.0.1:1")

    assert result.returncode == 1
    assert "not running" in result.stdout


def test_generate_without_a_broker_says_how_to_start_one(tmp_path):
    result = run_lakehouse("generate", "--events", "10", "--set", "kafka.bootstrap_servers=127.0.0.1:1")

    assert result.returncode == 2
    assert "lakehouse kafka start" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_benchmark_load_the_generator_cannot_make_is_refused_before_anything_starts():
    result = run_lakehouse("bench", "latency", "--rate", "5000", "--seconds", "30",
                           "--set", "kafka.bootstrap_servers=127.0.0.1:1")  # refused before the broker is asked

    assert result.returncode == 2
    assert "--hot-pages 8 at threshold 5000 per 5 s needs --rate 15003 or more" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("options, said", [
    (["--interleave", "60", "--pairs", "3"], "give --pairs or --interleave, not both"),
    (["--interleave", "60", "--seconds", "90"], "--seconds (90) holds fewer than two blocks"),
])
def test_bench_notify_refuses_interleaving_it_cannot_do_before_anything_starts(options, said):
    result = run_lakehouse("bench", "notify", *options, "--set", "kafka.bootstrap_servers=127.0.0.1:1")

    assert result.returncode == 2 and said in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


RESULT_COMMANDS = [["kafka", "topics"], ["cluster", "status"], ["alerts"], ["analytical"], ["status"], ["rebuild"],
                   ["maintain"], ["check"], ["reconcile"], ["inspect"], ["query", "top-pages"], ["query", "trend"],
                   ["query", "hot-windows"], ["sql"]]


@pytest.mark.parametrize("command", RESULT_COMMANDS, ids=" ".join)
def test_every_command_that_prints_a_result_takes_one_format_option(command, capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args([*command, "--help"])
    assert "--format {table,json,csv}" in capsys.readouterr().out


def _verdict(pending: list[dict], closed_up_to: str | None) -> dict:
    return {"windowsCompared": 3, "matched": 3, "pending": len(pending), "pendingWindows": pending,
            "mismatches": [], "byCause": {}, "unexplained": 0, "consistent": True, "outsideHistory": 0,
            "alertRecords": 7, "invalidAlertRecords": 0, "closedUpTo": closed_up_to}


def test_the_reconciliation_says_every_window_is_closed_when_none_is_pending():
    from lakehouse.cli.quality import _reconciliation_text

    closed = _reconciliation_text(_verdict([], None))
    waiting = _reconciliation_text(_verdict([{"pageId": "/a", "windowStart": "2026-11-26T00:00:05.000Z",
                                              "operationalCount": 9, "goldCount": 8, "openIn": ["gold"],
                                              "why": {"gold": "the medallion is running"}}], None))

    assert "every window closed in both paths" in closed and "None" not in closed
    assert "the watermarks have closed no window in both paths yet" in waiting
    assert "open in the gold: the medallion is running" in waiting
