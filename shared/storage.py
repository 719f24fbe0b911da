"""Where things live under a storage root: tables, checkpoints, and whether the root is a local folder.

A storage root is a local path or a URI of any Hadoop file system (`s3a://bucket/lake`). Every
location the product writes is built here, from a root: `storage.root` for the live tables, or
another one (a rebuild writes under `<root>/_rebuild` before it publishes).
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse

from shared import PROJECT_ROOT

#: Where the local companions of a remote root's (`local_side`) live on this machine.
REMOTE_ROOTS_HERE = PROJECT_ROOT / ".run" / "remote-roots"


def location(root: str, *parts: str) -> str:
    """A location under a storage root (a local path or a URI): the root's own, or another's
    (a rebuild writes under `<root>/_rebuild` before it publishes)."""
    return "/".join([root.rstrip("/"), *parts])


def checkpoint_location(root: str, query_name: str) -> str:
    """Where the query called `query_name` keeps its checkpoint under `root`: <root>/_checkpoints/<name>."""
    return location(root, "_checkpoints", query_name)


def scheme(root: str) -> str:
    """'s3a' for `s3a://bucket/x`, 'file' for `file:/x`, '' for a local path (a Windows drive letter
    is not a scheme)."""
    return urlparse(root).scheme if "://" in root or root.startswith("file:") else ""


def local_folder(root: str) -> Path | None:
    """The local folder a storage root names (`/x`, `relative/x`, `file:/x`, `file:///x`), or None
    when it is a URI of another file system (`s3a://bucket/x`, `hdfs://...`): the one test of
    "is this root local?" for everything that uses the local file system directly."""
    found = scheme(root)
    if found == "file":
        return Path(urlparse(root).path)
    return Path(root) if found == "" else None


def local_side(root: str, name: str) -> Path:
    """A local folder that goes with a storage root: `<root>/<name>` for a local root; for a remote
    one (`s3a://bucket/prefix`), `.run/remote-roots/s3a/bucket/prefix/<name>` on this machine. What
    must be a local file lives there: checkpoint locks (an OS file lock), the Great Expectations
    project and its Data Docs."""
    local = local_folder(root)
    if local is not None:
        return local / name
    parsed = urlparse(root)
    return REMOTE_ROOTS_HERE.joinpath(parsed.scheme, parsed.netloc, *parsed.path.strip("/").split("/")) / name
