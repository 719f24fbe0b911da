"""Expectations on the medallion's tables: declared once, checked by the streams and by `lakehouse check`.

Each table module declares its expectations as data (`Suite`): derived columns, then expectations
on columns. One declaration serves two checkers:

  - the silver and gold streams, row by row as they write, for the row-level expectations
    (`Expectation.violated`), under the stream's policy (declared with the stream;
    `quality.policies.<stream>` overrides it), what Delta Live Tables calls expect /
    expect_or_drop / expect_or_fail:
      warn: write the row, count it;  drop: do not write it (silver sends it to the quarantine
      with reason `failed_expectation`), count it;  fail: stop the stream with the expectation's name.
    The counts are observed metrics in each progress report, as `expectations_<query>`:
    `policy`, `rows` checked, one count per expectation, `failed` rows and `dropped` rows;
  - `lakehouse check`, which turns every expectation, table-level ones included (uniqueness, the
    hourly roll-up against its windows), into a Great Expectations expectation and validates the
    whole table with a Spark data source, writing Data Docs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from shared.config import ExpectationPolicy as Policy
from shared.query_progress import EXPECTATIONS_PREFIX

FAILED_EXPECTATION = "failedExpectation"  # the column naming a row's first failed expectation


@dataclass(frozen=True)
class Expectation:
    """One expectation: `kind` is the Great Expectations class, `column(s)` and `bounds` its arguments."""

    name: str
    kind: str
    columns: tuple[str, ...]
    min_value: Any = None
    max_value: Any = None
    values: tuple[Any, ...] = ()

    def violated(self) -> Column:
        """True where a row violates it (row-level kinds: not the uniqueness ones), with Great Expectations' null rules:
        only NotBeNull fails a null; the other column-map expectations skip nulls."""
        first = F.col(self.columns[0])
        if self.kind == "ExpectColumnValuesToNotBeNull":
            return first.isNull()
        if self.kind == "ExpectColumnValueLengthsToBeBetween":
            return first.isNotNull() & _outside(F.length(first), self.min_value, self.max_value)
        if self.kind == "ExpectColumnValuesToBeBetween":
            return first.isNotNull() & _outside(first, self.min_value, self.max_value)
        if self.kind == "ExpectColumnValuesToBeInSet":
            return first.isNotNull() & ~first.isin(list(self.values))
        if self.kind == "ExpectColumnPairValuesToBeEqual":
            return ~first.eqNullSafe(F.col(self.columns[1]))
        raise ValueError(f"{self.name}: {self.kind} is not a row-level expectation")

    def to_gx(self):
        """The Great Expectations 1.x expectation."""
        import great_expectations.expectations as gxe

        kind = getattr(gxe, self.kind)
        meta = {"name": self.name}
        if self.kind == "ExpectCompoundColumnsToBeUnique":
            return kind(column_list=list(self.columns), meta=meta)
        if self.kind == "ExpectColumnPairValuesToBeEqual":
            return kind(column_A=self.columns[0], column_B=self.columns[1], meta=meta)
        if self.kind == "ExpectColumnValuesToBeInSet":
            return kind(column=self.columns[0], value_set=list(self.values), meta=meta)
        if self.kind in ("ExpectColumnValuesToBeBetween", "ExpectColumnValueLengthsToBeBetween"):
            return kind(column=self.columns[0], min_value=self.min_value, max_value=self.max_value, meta=meta)
        return kind(column=self.columns[0], meta=meta)


def _outside(value: Column, low: Any, high: Any) -> Column:
    outside = F.lit(False)
    if low is not None:
        outside = outside | (value < F.lit(low))
    if high is not None:
        outside = outside | (value > F.lit(high))
    return outside


def not_null(column: str) -> Expectation:
    return Expectation(f"{column}Present", "ExpectColumnValuesToNotBeNull", (column,))


def between(name: str, column: str, min_value: Any = None, max_value: Any = None) -> Expectation:
    return Expectation(name, "ExpectColumnValuesToBeBetween", (column,), min_value, max_value)


def length_between(name: str, column: str, min_value: int, max_value: int) -> Expectation:
    return Expectation(name, "ExpectColumnValueLengthsToBeBetween", (column,), min_value, max_value)


def in_set(name: str, column: str, values: Sequence[Any]) -> Expectation:
    return Expectation(name, "ExpectColumnValuesToBeInSet", (column,), values=tuple(values))


def equal(name: str, column: str, other: str) -> Expectation:
    return Expectation(name, "ExpectColumnPairValuesToBeEqual", (column, other))


def unique(name: str, *columns: str) -> Expectation:
    kind = "ExpectColumnValuesToBeUnique" if len(columns) == 1 else "ExpectCompoundColumnsToBeUnique"
    return Expectation(name, kind, columns)


@dataclass(frozen=True)
class Suite:
    """A table's expectations and the derived columns they are stated on.

    `on_write` are row-level: the stream checks them on each row it writes, and `lakehouse check`
    on the table. `on_table` need the whole table (uniqueness, a comparison with another table):
    only `lakehouse check` runs them. `derive` adds the derived columns to the table's rows;
    `table_view`, when set, builds what `lakehouse check` validates from the derived rows and a
    reader of the other tables.
    """

    on_write: tuple[Expectation, ...]
    on_table: tuple[Expectation, ...] = ()
    derive: Callable[[DataFrame], DataFrame] = lambda rows: rows
    table_view: Callable[[DataFrame, Callable[[str], DataFrame]], DataFrame] | None = None
    #: The table's path: its declaration fills it in (analytical.tables.Table.suite).
    table: str = ""

    @property
    def name(self) -> str:
        return self.table.replace("/", "_")


def with_expectations(rows: DataFrame, suite: Suite, policy: Policy, metrics: str,
                      applies: Column | None = None) -> DataFrame:
    """`rows` with FAILED_EXPECTATION (the first `on_write` expectation a row breaks, else null),
    observed as `metrics`; under `fail`, a violating row stops the query with the expectation's
    name. `applies`: the rows the suite is about (silver's valid events among parsed records)."""
    checked = rows.transform(with_failed_expectation, suite, policy, applies)
    return checked.observe(metrics, *expectation_metrics(suite, policy, applies)).drop(
        *(name for name in checked.columns if name not in rows.columns and name != FAILED_EXPECTATION))


def with_failed_expectation(rows: DataFrame, suite: Suite, policy: Policy, applies: Column | None = None) -> DataFrame:
    """`rows` with FAILED_EXPECTATION, as `with_expectations`, unobserved and with the suite's derived
    columns: for rows whose counts an aggregation of `expectation_metrics` takes instead (a batch's
    rows inside `foreachBatch`, whose observations never reach the stream's progress)."""
    derived = rows.transform(suite.derive)
    applies = F.lit(True) if applies is None else applies
    first_failed = F.lit(None).cast("string")
    for expectation in reversed(suite.on_write):
        first_failed = F.when(applies & expectation.violated(), F.lit(expectation.name)).otherwise(first_failed)
    checked = derived.withColumn(FAILED_EXPECTATION, first_failed)
    if policy == "fail":
        message = F.concat(F.lit(f"expectation failed on {suite.table} (policy fail): "), F.col(FAILED_EXPECTATION))
        checked = checked.withColumn(
            FAILED_EXPECTATION, F.when(F.col(FAILED_EXPECTATION).isNotNull(), F.raise_error(message)).cast("string"))
    return checked


def expectation_metrics(suite: Suite, policy: Policy, applies: Column | None = None) -> list[Column]:
    """The expectations' counts over rows with FAILED_EXPECTATION (aggregate columns): the policy, the
    rows the suite applies to, the rows that broke each expectation, those that failed and those dropped."""
    applies = F.lit(True) if applies is None else applies
    failed = F.col(FAILED_EXPECTATION).isNotNull()
    return [
        F.lit(policy).alias("policy"),
        F.count_if(applies).alias("rows"),
        *(F.count_if(applies & e.violated()).alias(e.name) for e in suite.on_write),
        F.count_if(failed).alias("failed"),  # also what makes Spark evaluate raise_error under `fail`
        F.count_if(failed & F.lit(policy == "drop")).alias("dropped"),
    ]


def passing(rows: DataFrame, policy: Policy) -> DataFrame:
    """The rows to write: all of them unless the policy drops the failing ones."""
    kept = rows if policy != "drop" else rows.where(F.col(FAILED_EXPECTATION).isNull())
    return kept.drop(FAILED_EXPECTATION)


def metrics_name(table_key: str) -> str:
    """The name of the metrics a stream observes of one table's expectations (`Table.key`)."""
    return f"{EXPECTATIONS_PREFIX}{table_key}"
