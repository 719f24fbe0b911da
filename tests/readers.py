"""Every Delta table under a root as three readers outside Spark see it: deltalake, Polars, DuckDB.

Run as a separate process (`python -m tests.readers ROOT COLUMNS`), as an analyst's notebook would
be, with nothing of the product: a local folder, or an `s3a://` root found with the standard AWS
environment (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, ...), as each reader documents it. It prints it prints one JSON object, {table: {reader: [row, ...]}}, each row normalised by `normalised` so
that rows from different readers (and from Spark) compare equal when they hold the same values. A
reader that fails on a table gives {"error": "..."} for it instead of rows.
`assert_every_table_reads_alike` runs it and compares with what the test's SparkSession reads.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def normalised(value: Any) -> Any:
    """A value as plain JSON, the same whichever reader produced it: instants as microseconds since
    the epoch (a naive datetime, as PySpark returns one, is local time), bytes as hex, maps as
    sorted [key, value] pairs (a dict, a list of pairs or of {key, value} structs)."""
    if isinstance(value, datetime):
        aware = value if value.tzinfo else value.astimezone(timezone.utc)
        return (aware - EPOCH) // timedelta(microseconds=1)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dict):
        if set(value) == {"key", "value"}:
            return [normalised(value["key"]), normalised(value["value"])]
        return sorted([str(key), normalised(item)] for key, item in value.items())
    if isinstance(value, (list, tuple)):
        items = [normalised(item) for item in value]
        if value and all(isinstance(item, (tuple, dict)) and len(item) == 2 for item in value):
            return sorted(items, key=json.dumps)  # a map's entries, whose order no reader promises
        return items
    return value


def rows_of(records: list[dict[str, Any]], columns: list[str]) -> list[list[Any]]:
    """Records as sorted rows of normalised values, in `columns` order."""
    return sorted(([normalised(record[column]) for column in columns] for record in records), key=json.dumps)


def _on_s3(path: str) -> bool:
    return path.startswith(("s3a://", "s3://"))


def _s3_options() -> dict[str, str]:
    """delta-rs's and Polars' storage options, from the standard AWS environment."""
    endpoint = os.environ.get("AWS_ENDPOINT_URL", "")
    return {"AWS_ALLOW_HTTP": str(endpoint.startswith("http://")).lower(), "AWS_REGION": "us-east-1",
            "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false"}


def _files(path: str, environment: Any = os.environ) -> Any:
    """A concrete pyarrow file system for the table's files: with deltalake's own (the default),
    deltalake 1.6.6 and pyarrow abort the process at exit ("terminate called without an active exception")."""
    import pyarrow.fs

    if _on_s3(path):
        endpoint = environment["AWS_ENDPOINT_URL"]
        s3 = pyarrow.fs.S3FileSystem(endpoint_override=endpoint.split("://", 1)[1], scheme=endpoint.split("://")[0],
                                     region="us-east-1", access_key=environment["AWS_ACCESS_KEY_ID"],
                                     secret_key=environment["AWS_SECRET_ACCESS_KEY"])
        return pyarrow.fs.SubTreeFileSystem(path.split("://", 1)[1], s3)
    return pyarrow.fs.SubTreeFileSystem(str(Path(path).resolve()), pyarrow.fs.LocalFileSystem())


def with_deltalake(path: str, columns: list[str]) -> list[list[Any]]:
    from deltalake import DeltaTable

    options = _s3_options() if _on_s3(path) else None
    return rows_of(DeltaTable(path, storage_options=options).to_pyarrow_table(filesystem=_files(path)).to_pylist(),
                   columns)


def with_polars(path: str, columns: list[str]) -> list[list[Any]]:
    import polars

    return rows_of(polars.read_delta(path, storage_options=_s3_options() if _on_s3(path) else None).to_dicts(),
                   columns)


def with_duckdb(path: str, columns: list[str]) -> list[list[Any]]:
    import duckdb
    from duckdb_extensions import import_extension

    connection = duckdb.connect()
    import_extension("delta")  # from the duckdb-extension-delta wheel: no download at run time
    connection.load_extension("delta")
    if _on_s3(path):  # DuckDB's own S3 client (httpfs, from its wheel), its secret from the AWS environment
        import_extension("httpfs")
        connection.load_extension("httpfs")
        endpoint = os.environ["AWS_ENDPOINT_URL"]
        connection.execute("CREATE SECRET (TYPE s3, PROVIDER config, KEY_ID ?, SECRET ?, ENDPOINT ?, USE_SSL ?, "
                           "URL_STYLE 'path', REGION 'us-east-1')",
                           [os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"],
                            endpoint.split("://", 1)[1], endpoint.startswith("https://")])
        path = "s3://" + path.split("://", 1)[1]
    # Through Arrow: DuckDB's own Python conversion of time-zoned timestamps needs pytz.
    return rows_of(connection.execute("SELECT * FROM delta_scan(?)", [path]).to_arrow_table().to_pylist(), columns)


READERS: dict[str, Callable[[str, list[str]], list[list[Any]]]] = {
    "deltalake": with_deltalake, "polars": with_polars, "duckdb": with_duckdb,
}


def tables_under(root: str, environment: Any = os.environ) -> list[str]:
    """Table names (paths relative to `root`) of every Delta table under it, checkpoints excluded
    (`environment`: an object store's AWS_* variables)."""
    import pyarrow.fs

    files = _files(root, environment)
    found = files.get_file_info(pyarrow.fs.FileSelector("", recursive=True, allow_not_found=True))
    return sorted(info.path.rsplit("/_delta_log", 1)[0].strip("/") for info in found
                  if info.base_name == "_delta_log" and "_checkpoints" not in info.path.split("/"))


def read_everything(root: str, columns: dict[str, list[str]]) -> dict[str, dict[str, Any]]:
    result: dict[str, dict[str, Any]] = {}
    for name, table_columns in columns.items():
        path = f"{root.rstrip('/')}/{name}"
        result[name] = {}
        for reader, read in READERS.items():
            try:
                result[name][reader] = read(path, table_columns)
            except Exception as error:  # reported per table and reader: the test names which failed
                result[name][reader] = {"error": f"{type(error).__name__}: {str(error).splitlines()[0]}"}
    return result


def assert_every_table_reads_alike(spark: Any, root: str, environment: dict[str, str] | None = None) -> None:
    """deltalake, Polars and DuckDB read every table under `root` with the rows Spark reads; the
    gold 5-second table must not be empty (or nothing would be compared). `environment`: the
    readers' process's (an object store's AWS_* variables)."""
    from analytical.gold_page_clicks_5s import TABLE as GOLD_PAGE_CLICKS_5S
    from analytical.registry import written
    from shared import PROJECT_ROOT
    from tests.conftest import make_config

    names = tables_under(root, environment or os.environ)
    # at least the tables of the streams the tests' settings run (a test that turns the sessions on has theirs too)
    assert {str(declared) for declared in written(make_config())} <= set(names), names
    frames = {name: spark.read.format("delta").load(f"{root}/{name}") for name in names}
    columns = {name: frame.columns for name, frame in frames.items()}
    done = subprocess.run([sys.executable, "-m", "tests.readers", root, json.dumps(columns)],
                          capture_output=True, text=True, timeout=300, cwd=PROJECT_ROOT, env=environment)
    assert done.returncode == 0, done.stderr[-2000:]
    outside = json.loads(done.stdout)
    for name, frame in frames.items():
        expected = rows_of([row.asDict() for row in frame.collect()], columns[name])
        assert expected or name != str(GOLD_PAGE_CLICKS_5S), "gold is empty: nothing compared"
        for reader, rows in outside[name].items():
            assert rows == expected, f"{reader} reads {name} differently from Spark: {str(rows)[:300]}"


if __name__ == "__main__":
    # argv: ROOT, then a JSON object {table: [column, ...]} (the columns in Spark's order)
    print(json.dumps(read_everything(sys.argv[1], json.loads(sys.argv[2]))))
