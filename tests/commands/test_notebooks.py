"""The notebooks, executed top to bottom in order (each in its own kernel) against the run's broker."""

from __future__ import annotations

import time

import yaml

from shared import PROJECT_ROOT
from shared.config_layers import apply_override
from tests.conftest import COMMAND_JVMS, TEST_SETTINGS


NOTEBOOKS = sorted((PROJECT_ROOT / "notebooks").glob("*.ipynb"))


def test_every_notebook_runs_top_to_bottom(broker_overrides, tmp_path, monkeypatch):
    """Its time: four notebooks, each in a kernel of its own whose Spark JVM starts there (the fast path's
    stream, a backfill, the questions, the checks), run cell by cell as a reader runs them."""
    import nbformat
    from nbclient import NotebookClient

    settings: dict = {}
    for item in (*broker_overrides, *TEST_SETTINGS, *COMMAND_JVMS, f"storage.root={tmp_path / 'lakehouse'}"):
        apply_override(settings, item)
    layer = tmp_path / "notebooks.yaml"
    layer.write_text(yaml.safe_dump(settings))
    monkeypatch.setenv("LAKEHOUSE_CONFIG", str(layer))  # the kernels inherit it

    assert [path.name for path in NOTEBOOKS] == ["01_fast_path.ipynb", "02_medallion.ipynb", "03_trends.ipynb",
                                                 "04_quality.ipynb"]
    seconds, executed = {}, {}
    for path in NOTEBOOKS:
        book = nbformat.read(path, as_version=4)
        started = time.monotonic()
        NotebookClient(book, timeout=600, kernel_name="python3",
                       resources={"metadata": {"path": str(path.parent)}}).execute()
        seconds[path.name] = round(time.monotonic() - started, 1)
        executed[path.name] = book
    print(f"notebook run times (s): {seconds}")

    def outputs(name: str, kind: str) -> list:
        return [output for cell in executed[name].cells for output in cell.get("outputs", [])
                if kind in output.get("data", {})]

    assert len([o for o in outputs("03_trends.ipynb", "image/png")]) == 2  # the bar chart and the heatmap
    verdict = outputs("04_quality.ipynb", "text/plain")[-1]["data"]["text/plain"]  # the reconcile cell
    assert "'unexplained': 0" in verdict and "'consistent': True" in verdict


def test_notebooks_are_stored_without_outputs():
    import nbformat

    for path in NOTEBOOKS:
        book = nbformat.read(path, as_version=4)
        code = [cell for cell in book.cells if cell.cell_type == "code"]
        assert code and all(not cell.outputs and cell.execution_count is None for cell in code), path.name
