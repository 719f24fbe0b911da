"""The shipped alerting rules with time compressed, for tests that watch them fire in seconds.

conf/prometheus/rules.yml speaks in minutes (`deriv(...[5m])`, `for: 10m`). A test cannot wait that
long, so it runs the same expressions with every range selector shortened to 20 s and every `for:`
to 5 s, against a Prometheus that scrapes and evaluates every second. The expressions and thresholds
are the shipped ones; only the windows shrink.
"""

from __future__ import annotations

import re

RANGE = re.compile(r"\[\d+[smh]\]")
FOR = re.compile(r"for: \S+")


def compressed(rules_text: str) -> str:
    return FOR.sub("for: 5s", RANGE.sub("[20s]", rules_text))
