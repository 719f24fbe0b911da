"""The documents a newcomer reads: a README they can finish, and no link that leads nowhere."""

from __future__ import annotations

import re

import pytest

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
