"""Errors a user can act on.

The CLI prints a `LakehouseError`'s message alone on stderr and exits non-zero; anything else is a
bug and keeps its traceback.
"""


class LakehouseError(Exception):
    """A failure with a message that says what is wrong and what to do about it."""

    exit_code = 2


class ConfigError(LakehouseError):
    """A configuration value is missing or wrong; the message names the dotted key."""


class MissingDependencyError(LakehouseError):
    """A tool, package or jar the command needs is not installed; the message says how to get it."""


class BrokerUnreachableError(LakehouseError):
    """No Kafka broker answers (`shared.kafka.require_reachable`). At a command's start it ends the
    command; to a running query's start it is a broker restarting, and the query is retried."""
