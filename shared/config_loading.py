"""Where a configuration comes from and goes. Layers, each on top of the one before:
  1. `conf/local.yaml`, the embedded default (the only place defaults are written);
  2. the file given with `--config` (or `$LAKEHOUSE_CONFIG`), stating only what differs;
  3. each `--set dotted.key=value`, the value read as YAML (`--set hot_pages.threshold=100`).
Then `${NAME}` in any string is replaced by the environment variable NAME, so secrets never sit in a
file. A child process is handed the layers as read, in one file (`write_for_child`).

    config = load_config("conf/s3.yaml", ["hot_pages.threshold=100"])
    child = ["--config", str(write_for_child(config))]
"""

from __future__ import annotations

import atexit
import copy
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import yaml
from pydantic import ValidationError

from shared import PROJECT_ROOT
from shared.config import Config
from shared.config_layers import Section, apply_override, deep_merge, describe, read_yaml, substitute_environment
from shared.errors import ConfigError

DEFAULT_CONFIG = PROJECT_ROOT / "conf" / "local.yaml"
CONFIG_ENV_VAR = "LAKEHOUSE_CONFIG"


def load_config(path: str | os.PathLike[str] | None = None, overrides: Sequence[str] = (),
                secrets: bool = True) -> Config:
    """Read the layers, substitute the environment, validate. Raises ConfigError.

    `secrets=False`: for commands that use no credential (stopping a broker, the cluster's commands),
    a `${NAME}` whose variable is not set stays as written instead of stopping the command."""
    raw = read_yaml(DEFAULT_CONFIG)
    path = path or os.environ.get(CONFIG_ENV_VAR) or None
    if path and Path(path).resolve() != DEFAULT_CONFIG:
        raw = deep_merge(raw, read_yaml(Path(path)))
    for item in overrides:
        apply_override(raw, item)
    document = copy.deepcopy(raw)
    raw = substitute_environment(raw, required=secrets)
    try:
        config = Config.model_validate(raw)
    except ValidationError as error:
        raise ConfigError(describe(error)) from None
    return _with_document(_resolve_local_paths(config), document)


def with_overrides(config: Config, overrides: Sequence[str]) -> Config:
    """`config` with `--set`-style overrides applied and validated again (e.g. a run's own topics)."""
    raw = config.model_dump()
    document = copy.deepcopy(config._document)
    for item in overrides:
        apply_override(raw, item)
        if document is not None:
            apply_override(document, item)
    try:
        return _with_document(_resolve_local_paths(Config.model_validate(raw)), document)
    except ValidationError as error:
        raise ConfigError(describe(error)) from None


def _with_document(config: Config, document: dict[str, Any] | None) -> Config:
    config._document = document
    return config


def write_for_child(config: Config) -> Path:
    """`config` as one file a child process reads with `--config FILE`, instead of the layers and
    `--set` items re-typed: the layers as read, with every override, `${NAME}` left for the child to
    take from the environment it inherits. Readable by this user only; removed when this process ends.
    """
    if config._document is None:
        raise ConfigError("this configuration was not read from its layers (load_config): it cannot be handed on")
    folder = Path(tempfile.mkdtemp(prefix="lakehouse-config-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(config._document, sort_keys=False), encoding="utf-8")
    return path


def render(config: Config) -> str:
    """The effective configuration as YAML, secrets masked."""
    data = config.model_dump(mode="json")
    return yaml.safe_dump(data, sort_keys=False)


def _resolve_local_paths(config: Config) -> Config:
    """Relative local paths taken from the project root, whatever the working folder."""
    root = config.storage.root
    if urlparse(root).scheme == "" and not Path(root).is_absolute():
        root = str(PROJECT_ROOT / root)
    security = config.kafka.security
    return config.model_copy(update={
        "kafka": config.kafka.model_copy(update={"security": _anchored(security, "ssl_cafile")}),
        "storage": config.storage.model_copy(update={"root": root}),
        "broker": _anchored(config.broker, "run_dir"),
        "object_store": _anchored(config.object_store, "run_dir"),
        "cluster": _anchored(config.cluster, "run_dir"),
        "alertmanager": _anchored(_anchored(config.alertmanager, "run_dir"), "config_file"),
        "quality": _anchored(config.quality, "docs_dir"),
    })


def _anchored(section: Section, key: str) -> Section:
    """`section` with its path `key`, when set and relative, taken from the project root."""
    path = getattr(section, key)
    if path is None or path.is_absolute():
        return section
    return section.model_copy(update={key: PROJECT_ROOT / path})
