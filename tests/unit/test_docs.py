"""The documents a newcomer reads: a README they can finish, no link that leads nowhere, and no
`lakehouse` command line in a code block that the command line would refuse."""

from __future__ import annotations

import contextlib
import io
import re
import shlex

import pytest

from lakehouse.cli import build_parser

from shared import PROJECT_ROOT

DOCUMENTS = sorted(path for pattern in ("*.md", "*/README.md") for path in PROJECT_ROOT.glob(pattern)
                   if not path.parts[len(PROJECT_ROOT.parts)].startswith("."))


def test_the_readme_and_the_configuration_model_stay_short_enough_to_read():
    assert len((PROJECT_ROOT / "README.md").read_text().splitlines()) < 400
    assert len((PROJECT_ROOT / "shared" / "config.py").read_text().splitlines()) < 400


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: str(path.relative_to(PROJECT_ROOT)))
def test_every_relative_link_leads_to_a_file_of_the_repository(document):
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", document.read_text())
    missing = [target for target in targets if "://" not in target and not (document.parent / target).exists()]
    assert not missing, f"{document.name} links to {missing}"


_FENCE = re.compile(r"^```[a-z]*\n(.*?)^```", re.S | re.M)
_ASSIGNMENT = re.compile(r"^([A-Z_]+)=(\S.*)$")


def quoted_command_lines(text: str) -> list[list[str]]:
    """Every `lakehouse ...` command in the code blocks of `text`, as the shell would split it: lines
    joined at a trailing backslash and inside quotes, `NAME=value` lines of the block substituted for
    `$NAME`, comments, `&`, `&&`, `;` and pipes cut, `[--optional flags]` taken as given."""
    commands = []
    for block in _FENCE.findall(text):
        variables: dict[str, list[str]] = {}
        lines, pending = [], ""
        for line in block.replace("\\\n", " ").splitlines():
            pending = f"{pending}\n{line}" if pending else line
            try:
                lines.append(shlex.split(pending, comments=True))
                pending = ""
            except ValueError:  # a quote that the next line closes
                continue
        for words in lines:
            command: list[str] = []
            for word in [*words, ";"]:
                if word not in (";", "&", "&&", "|", "||"):
                    command += variables.get(word[1:], [word]) if word.startswith("$") else [word.strip("[]")]
                    continue
                assigned = _ASSIGNMENT.match(command[0]) if len(command) == 1 else None
                if assigned:
                    variables[assigned.group(1)] = shlex.split(assigned.group(2))
                elif command and command[0].rsplit("/", 1)[-1] == "lakehouse":
                    commands.append([word for word in command[1:] if word])
                command = []
    return commands


def test_the_command_lines_parse_a_quoted_command_line_as_the_shell_does():
    text = "```bash\nLOAD='--rate 5'\nlakehouse sql \"SELECT 1\n  FROM t\" --format json  # a comment\n" \
           "lakehouse bench latency $LOAD & lakehouse query top-pages [--engine spark]\n```\n"

    assert quoted_command_lines(text) == [["sql", "SELECT 1\n  FROM t", "--format", "json"],
                                          ["bench", "latency", "--rate", "5"],
                                          ["query", "top-pages", "--engine", "spark"]]


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: str(path.relative_to(PROJECT_ROOT)))
def test_every_lakehouse_command_line_in_the_documents_parses(document):
    parser = build_parser()
    refused = []
    for words in quoted_command_lines(document.read_text()):
        said = io.StringIO()
        try:
            with contextlib.redirect_stderr(said), contextlib.redirect_stdout(io.StringIO()):
                parser.parse_args(words)
        except SystemExit as exit_:
            if exit_.code:
                refused.append(f"lakehouse {shlex.join(words)}: {said.getvalue().strip().splitlines()[-1]}")
    assert not refused, "\n".join(refused)
