"""What a failed query's error says, in one line, and what kind of failure it is: raised on purpose by
the query (a restart would raise it again), refused by Spark's analysis, or anything else (a storage
or broker hiccup, which a restart from the checkpoint rides out)."""

from __future__ import annotations

import re
from typing import Any

from shared.errors import LakehouseError

_RAISED = "[USER_RAISED_EXCEPTION]"
#: How a LakehouseError raised inside a query's foreachBatch reads in the query's error.
_REFUSED = f"{LakehouseError.__module__}.{LakehouseError.__qualname__}: "
#: The first line of an error a foreachBatch's Python raised: Py4J's wrapper of its traceback.
_FROM_PYTHON = "An exception was raised by the Python Proxy"
#: A JVM exception's line in that traceback (after Py4J's own, `: org.apache...Exception: message`).
_JVM_EXCEPTION = re.compile(r"^:?\s*(?:[a-z_]\w*\.)+([A-Z][\w$]*(?:Exception|Error)): (.+)$")


def raised_on_purpose(error: Any) -> bool:
    """An error the query raised itself, which a restart would raise again: `raise_error` (an
    expectation under the `fail` policy), or a LakehouseError of a batch function (a refusal)."""
    text = str(getattr(error, "desc", None) or error)
    return _RAISED in text or _REFUSED in text


def refused_by_analysis(error: BaseException) -> bool:
    """Spark's analysis refused the query (pyspark's AnalysisException or a subclass, Delta's included):
    its plan, its checkpoint or its table, which a retry meets again; named, not imported, so that this
    module loads without pyspark."""
    return any(cls.__name__ == "AnalysisException" for cls in type(error).__mro__)


def first_line(error: Any) -> str:
    """The line that says what went wrong: the error raised on purpose (an expectation under the
    `fail` policy, a batch function's refusal) when there is one, even inside a foreachBatch
    traceback; else the first line, and what it wraps at its root (`_root_cause`)."""
    text = str(getattr(error, "desc", None) or error)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    raised = [line for line in lines if _RAISED in line]
    if raised:
        return raised[-1].split(_RAISED, 1)[1].split(" SQLSTATE")[0].strip()
    refused = [line for line in lines if _REFUSED in line]
    if refused:
        return refused[-1].split(_REFUSED, 1)[1].strip()
    first = lines[0] if lines else type(error).__name__
    if _FROM_PYTHON in first:  # what the Spark job inside the batch function said, not the wrapper
        thrown = [match for match in map(_JVM_EXCEPTION.match, lines) if match and not match.group(0).startswith("py4j")]
        if thrown:
            return f"{thrown[0].group(1)}: {thrown[0].group(2)}"
    cause = _root_cause(error)
    return first if cause is None or cause in first else f"{first}: caused by {cause}"


def _root_cause(error: Any) -> str | None:
    """The first line of what a Spark error wraps at its root: the storage's or the broker's own words
    (an S3 refusal, a timeout), which Spark's own message names only as "Error writing state store
    files". Of a chain `... -> AccessDeniedException: <key>: ... S3Exception: Access Denied (403) ->
    S3Exception: Access Denied (403)`, the cause above the root when it holds the root's words and
    more (the key). pyspark keeps a captured exception's Java causes in `_cause`."""
    lines: list[str] = []
    cause = getattr(error, "_cause", None)
    while cause is not None and len(lines) < 32:
        text = [line.strip() for line in str(getattr(cause, "_desc", None) or cause).splitlines() if line.strip()]
        lines.append(text[0] if text else type(cause).__name__)
        cause = getattr(cause, "_cause", None)
    while len(lines) > 1 and lines[-1] in lines[-2]:
        lines.pop()
    return lines[-1] if lines else None
