"""The notebooks, executed top to bottom in order against the run's broker, as a reader runs them one
after another: in one kernel, each starting from an empty namespace (`%reset -f`), so a notebook that
leans on a name an earlier one defined fails here as it would in a kernel of its own, while the Spark JVM
the first one starts serves them all (`spark_session` finds it)."""

from __future__ import annotations

import time

import yaml

from shared import PROJECT_ROOT
from shared.config_layers import apply_override
from tests.conftest import COMMAND_JVMS, TEST_SETTINGS


NOTEBOOKS = sorted((PROJECT_ROOT / "notebooks").glob("*.ipynb"))


def test_every_notebook_runs_top_to_bottom(broker_overrides, tmp_path, monkeypatch):
    """Its time: four notebooks (the fast path's stream over 6 s of paced traffic, a backfill, the
    questions, the checks), run cell by cell as a reader runs them, in one kernel and one Spark JVM."""
    import nbformat
    from jupyter_client import KernelManager
    from nbclient import NotebookClient

    settings: dict = {}
    for item in (*broker_overrides, *TEST_SETTINGS, *COMMAND_JVMS, f"storage.root={tmp_path / 'lakehouse'}"):
        apply_override(settings, item)
    layer = tmp_path / "notebooks.yaml"
    layer.write_text(yaml.safe_dump(settings))
    monkeypatch.setenv("LAKEHOUSE_CONFIG", str(layer))  # the kernel inherits it

    assert [path.name for path in NOTEBOOKS] == ["01_fast_path.ipynb", "02_medallion.ipynb", "03_trends.ipynb",
                                                 "04_quality.ipynb"]
    seconds, executed = {}, {}
    kernel = KernelManager(kernel_name="python3")
    kernel.start_kernel(cwd=str(NOTEBOOKS[0].parent))
    try:
        for path in NOTEBOOKS:
            book = nbformat.read(path, as_version=4)
            book.cells.insert(0, nbformat.v4.new_code_cell("%reset -f"))
            started = time.monotonic()
            NotebookClient(book, km=kernel, timeout=600).execute()
            seconds[path.name] = round(time.monotonic() - started, 1)
            executed[path.name] = book
    finally:
        kernel.shutdown_kernel(now=True)
    print(f"notebook run times (s): {seconds}")

    def outputs(name: str, kind: str) -> list:
        return [output for cell in executed[name].cells for output in cell.get("outputs", [])
                if kind in output.get("data", {})]

    assert len([o for o in outputs("03_trends.ipynb", "image/png")]) == 3  # the bars, the heatmap, the conversion
    conversion = outputs("03_trends.ipynb", "text/plain")[-1]["data"]["text/plain"]  # the conversion cell's rows
    assert "'hotSessions'" in conversion and "/promo/flash-sale-" in conversion
    verdict = outputs("04_quality.ipynb", "text/plain")[-1]["data"]["text/plain"]  # the reconcile cell
    assert "'unexplained': 0" in verdict and "'consistent': True" in verdict


def test_notebooks_are_stored_without_outputs():
    import nbformat

    for path in NOTEBOOKS:
        book = nbformat.read(path, as_version=4)
        code = [cell for cell in book.cells if cell.cell_type == "code"]
        assert code and all(not cell.outputs and cell.execution_count is None for cell in code), path.name
