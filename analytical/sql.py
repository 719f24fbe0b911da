"""Any read-only question in SQL over the product's tables, answered in this process without a JVM
(`lakehouse sql`).

Every Delta table under the storage root is registered by its contract name, a dot for the slash
(`gold/page_clicks_5s` is `gold.page_clicks_5s`), as delta-rs reads it at the version asked, and
DuckDB runs the query over them, reading only the files and columns the query needs. Only one
SELECT runs: anything else is refused before it runs, the connection is in memory and its own, and
it reads no file but the registered tables', so nothing a query says reaches the lake or the disk.

    >>> lake = SqlLake("/data/lake")
    >>> columns, rows = lake.answer("SELECT pageId, sum(clickCount) AS clicks "
    ...                             "FROM gold.page_clicks_5s GROUP BY pageId ORDER BY clicks DESC LIMIT 3")
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any

from analytical.delta_log import NO_COMMIT_YET, is_commit_or_checkpoint
from shared.errors import LakehouseError, MissingDependencyError
from shared.object_store import S3Access, S3Settings, is_s3, root_file_system

#: How a timestamp is printed: ISO-8601 in UTC to the millisecond, as the alerts print theirs.
TIMESTAMP_TEXT = "%Y-%m-%dT%H:%M:%S.%f"


class SqlError(LakehouseError):
    """A query that cannot run: not a SELECT, bad SQL, or a table that is not there."""


def sql_name(table: str) -> str:
    """The name a table has in SQL: `gold/page_clicks_5s` -> `gold.page_clicks_5s`."""
    return table.replace("/", ".")


def tables_under(files: Any, base: str) -> tuple[list[str], list[str]]:
    """The Delta tables under the storage root (`base` in the pyarrow file system `files`) by their
    path there (`gold/page_clicks_5s`), and apart from them the folders whose `_delta_log` holds no
    commit yet (a stream that failed before its first one): no reader can open those. The product's
    tables as CONTRACT.md names them, found in the store rather than imported from their modules
    (which would load pyspark: a second of the command's time). Checkpoints and a rebuild's staging
    folder are not tables."""
    from pyarrow import fs

    def folders(path: str) -> list[str]:
        return [info.base_name for info in files.get_file_info(fs.FileSelector(path, allow_not_found=True))
                if info.type == fs.FileType.Directory]

    layers = [layer for layer in folders(base) if not layer.startswith("_")]
    candidates = [f"{layer}/{table}" for layer in layers for table in folders(f"{base}/{layer}")]
    logs = files.get_file_info([f"{base}/{table}/_delta_log" for table in candidates])
    with_log = [table for table, log in zip(candidates, logs) if log.type == fs.FileType.Directory]
    committed = [table for table in with_log if any(
        is_commit_or_checkpoint(entry.base_name)
        for entry in files.get_file_info(fs.FileSelector(f"{base}/{table}/_delta_log")))]
    return sorted(committed), sorted(set(with_log) - set(committed))


class _Store:
    """Where the lake is, for the readers in this process: pyarrow's file system and the lake's
    folder in it, and the URI and storage options delta-rs opens a table with."""

    def __init__(self, root: str, s3: S3Settings | None):
        if is_s3(root) and s3 is None:
            raise SqlError(f"{root} is on S3: give its settings (storage.s3)")
        found = root_file_system(root, s3)
        if found is None:
            raise SqlError(f"{root}: SQL in this process reads a local folder or S3, not this file system")
        self.files, self.base = found
        self.options: dict[str, str] | None = S3Access.of(s3).delta_rs_options() if is_s3(root) else None
        self.uri_base = f"s3://{self.base}" if is_s3(root) else self.base

    def table(self, path: str) -> tuple[str, Any]:
        """delta-rs's URI for the table at `path` under the root, and the file system of its files."""
        from pyarrow import fs

        return f"{self.uri_base}/{path}", fs.SubTreeFileSystem(f"{self.base}/{path}", self.files)


#: A named parameter as Spark spells it (`:start`), not a cast (`::`).
_SPARK_MARKER = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


def duckdb_spelling(sql: str, **tables: str) -> str:
    """A query written once for both engines, with `{name}` for a table (Spark's DataFrame argument)
    and `:name` for a value, as DuckDB spells it: the table's SQL name, `$name`.

        >>> duckdb_spelling("SELECT * FROM {windows} WHERE pageId = :page", windows="gold/page_clicks_5s")
        'SELECT * FROM gold.page_clicks_5s WHERE pageId = $page'
    """
    return _SPARK_MARKER.sub(r"$\1", sql.format(**{key: sql_name(table) for key, table in tables.items()}))


class SqlLake:
    """The tables under `root` (a local folder, or S3 with its `s3` settings) at one moment (`as_of`)
    or version (`versions`: per SQL name), ready for read-only SQL; a table not written yet is
    simply not there, and one whose log has no commit yet is named in `uncommitted` (`note()`)."""

    def __init__(self, root: str, as_of: datetime | None = None, versions: dict[str, int] | None = None,
                 s3: S3Settings | None = None):
        try:
            import duckdb
            from deltalake import DeltaTable
        except ImportError as missing:
            raise MissingDependencyError(
                f"{missing.name} is not installed: `lakehouse sql` needs the readers extra (`make setup`, "
                "or pip install -e '.[readers]')") from None
        self.root = root
        self.connection = duckdb.connect()
        self.tables: dict[str, int] = {}  # SQL name -> the version registered
        versions = dict(versions or {})
        store = _Store(root, s3)
        committed, uncommitted = tables_under(store.files, store.base)
        self.uncommitted = [sql_name(table) for table in uncommitted]
        for table in committed:
            name = sql_name(table)
            uri, files = store.table(table)
            delta = DeltaTable(uri, storage_options=store.options)
            if name in versions:
                delta.load_as_version(versions.pop(name))
            elif as_of is not None:
                delta.load_as_version(as_of)
            self._register(name, delta, files)
        if versions:
            raise SqlError(f"--version names no table of this lake: {', '.join(sorted(versions))} "
                           f"(tables: {self._listed()})")
        self.connection.execute("SET TimeZone = 'UTC'")  # date_trunc to the UTC day, as Spark's session does
        # The registered tables are all a query may read: no file, URL or extension of its own.
        self.connection.execute("SET enable_external_access = false")
        self.connection.execute("SET lock_configuration = true")

    def note(self) -> str | None:
        """One line naming the tables left out for having no commit, or None when there are none."""
        if not self.uncommitted:
            return None
        return f"left out: {', '.join(self.uncommitted)} ({NO_COMMIT_YET})"

    def absent(self, name: str, otherwise: str) -> SqlError:
        """The error for a table a question needs and this lake lacks (SQL name): that it has no commit
        yet, when so, else `otherwise`."""
        return SqlError(f"{name} has {NO_COMMIT_YET}" if name in self.uncommitted else otherwise)

    def _listed(self) -> str:
        listed = ", ".join(self.tables) or "none yet"
        return f"{listed}; {', '.join(self.uncommitted)} with {NO_COMMIT_YET}" if self.uncommitted else listed

    def _register(self, name: str, delta: Any, files: Any) -> None:
        schema, table = name.split(".", 1)
        hidden = f"__{schema}__{table}"
        self.connection.register(hidden, delta.to_pyarrow_dataset(filesystem=files))
        self.connection.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        self.connection.execute(f'CREATE VIEW "{schema}"."{table}" AS SELECT * FROM "{hidden}"')
        self.tables[name] = delta.version()

    def answer(self, sql: str, parameters: dict[str, Any] | None = None) -> tuple[list[str], list[dict[str, Any]]]:
        """The result's column names and rows (timestamps as ISO-8601 UTC text) of `sql` with its
        named `parameters` (`$name`); SqlError with one line for anything but one SELECT, bad SQL or
        a missing table."""
        import duckdb

        try:
            statements = self.connection.extract_statements(sql)
        except duckdb.Error as bad:
            raise SqlError(f"bad SQL: {_first_line(bad)}") from None
        kinds = [statement.type.name for statement in statements]
        if kinds != ["SELECT"]:
            raise SqlError("lakehouse sql runs one read-only query (SELECT, WITH ... SELECT); got "
                           + (", ".join(kinds) or "nothing"))
        try:
            result = self.connection.execute(sql, parameters)
            columns = [column[0] for column in result.description]
            rows = result.to_arrow_table().to_pylist()
        except duckdb.CatalogException as missing:
            raise SqlError(f"{_first_line(missing)} (tables: {self._listed()})") from None
        except duckdb.Error as failed:
            raise SqlError(_gone(failed) or _first_line(failed)) from None
        return columns, [{key: _text(value) for key, value in row.items()} for row in rows]


#: How a read of a data file the table's log names, and the storage no longer holds, fails (local, S3).
_MISSING_FILE = re.compile(r"Failed to open .*(No such file or directory|NotFound|NoSuchKey|404)", re.S)


def _gone(failed: Exception) -> str | None:
    """One line for a version whose files are gone (None for any other failure): an erasure or a VACUUM
    deletes the files only older versions name, so reading one of those versions fails, as it should."""
    if not _MISSING_FILE.search(str(failed)):
        return None
    return ("a data file of the version asked is gone: an erasure (`lakehouse forget`, ops/erasure_requests) or a "
            "VACUUM (`lakehouse maintain`) deleted what only older versions read; ask for a later --version or --as-of")


def _text(value: Any) -> Any:
    """A value as JSON and CSV print it: timestamps as ISO-8601 UTC text, DuckDB's 128-bit sums
    (Arrow decimals) as the integers they are."""
    if isinstance(value, datetime):
        utc = value.astimezone(timezone.utc) if value.tzinfo else value
        return utc.strftime(TIMESTAMP_TEXT)[:-3] + "Z"
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return value


def _first_line(error: Exception) -> str:
    return str(error).strip().splitlines()[0]
