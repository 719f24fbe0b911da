"""Expectations as row checks and their policies, on tiny inputs."""

from __future__ import annotations

from chispa import assert_df_equality
from pyspark.sql import functions as F

from analytical.quality import FAILED_EXPECTATION, Suite, between, equal, in_set, not_null, passing, with_expectations


SUITE = Suite(on_write=(not_null("id"), between("smallCount", "count", 1, 10), in_set("knownKind", "kind", ["a"]),
                         equal("flagMatches", "flag", "expectedFlag")),
              derive=lambda rows: rows.withColumn("expectedFlag", F.col("count") > 5), table="t")


def rows(spark):
    return spark.createDataFrame(
        [("r1", 3, "a", False), (None, 3, "a", False), ("r3", 11, "a", True), ("r4", None, None, None),
         ("r5", 7, "b", True), ("r6", 8, "a", False)],
        "id string, count int, kind string, flag boolean",
    )


def test_each_row_gets_its_first_failed_expectation_with_great_expectations_null_rules(spark):
    checked = rows(spark).transform(with_expectations, SUITE, "warn", "expectations_t")

    # r4: between and in_set skip nulls (as Great Expectations does), but flag <=> expectedFlag does not
    # (null vs null is equal) -- count is null, so expectedFlag is null too.
    expected = spark.createDataFrame(
        [("r1", None), (None, "idPresent"), ("r3", "smallCount"), ("r4", None), ("r5", "knownKind"),
         ("r6", "flagMatches")], f"id string, {FAILED_EXPECTATION} string")
    assert_df_equality(checked.select("id", FAILED_EXPECTATION), expected, ignore_row_order=True)
    assert "expectedFlag" not in checked.columns  # derived columns stay inside the check


def test_drop_keeps_only_passing_rows_and_warn_keeps_all(spark):
    checked = rows(spark).transform(with_expectations, SUITE, "drop", "expectations_t")

    assert sorted(row.id for row in checked.transform(passing, "drop").collect()) == ["r1", "r4"]
    assert checked.transform(passing, "warn").count() == 6
    assert FAILED_EXPECTATION not in checked.transform(passing, "drop").columns
