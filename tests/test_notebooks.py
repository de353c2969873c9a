"""The notebooks in notebooks/ run top to bottom and are saved clean.

One test per notebook (so `pytest -n 2` runs two at a time): each is executed with
nbclient in a fresh `python3` kernel whose working directory is a temporary directory
(notebooks that write files leave nothing in the repository); a cell that raises fails
the test with the cell's source and the error. The notebooks assert their own results, so
a silent regression in what they show fails here too. A second test per notebook checks
the saved file: valid nbformat 4, outputs stripped, the python3 kernel, jax imported only
under `except ImportError` (jax is optional for users), and listed in notebooks/README.md.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

# not optional: the notebooks run on every CI run (nbclient, nbformat and ipykernel are in
# the dev extras), so a missing one is an error here, not a skip
import ipykernel  # noqa: E402,F401
import nbclient  # noqa: E402
import nbformat  # noqa: E402

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
CELL_TIMEOUT_S = 300
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def test_there_are_notebooks():
    assert NOTEBOOKS, f"no notebooks found in {NOTEBOOK_DIR}"


def _failed_cell(nb) -> tuple[int, str, str] | None:
    """(index, source, error) of the cell whose output is an error, if any."""
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                tb = _ANSI.sub("", "\n".join(out.get("traceback", [])))
                return i, cell.source, f"{out.get('ename')}: {out.get('evalue')}\n{tb}"
    return None


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path: Path, tmp_path: Path):
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    try:
        client.execute()
    except nbclient.exceptions.CellTimeoutError as err:
        pytest.fail(f"{path.name}: a cell ran over {CELL_TIMEOUT_S} s:\n{_ANSI.sub('', str(err))}",
                    pytrace=False)
    except nbclient.exceptions.CellExecutionError as err:
        failed = _failed_cell(nb)
        if failed is None:
            pytest.fail(f"{path.name}: {_ANSI.sub('', str(err))}", pytrace=False)
        i, source, error = failed
        pytest.fail(f"{path.name}: cell {i} raised\n---- source ----\n{source}\n"
                    f"---- error ----\n{error}", pytrace=False)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_saved_clean(path: Path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert nb.nbformat == 4
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3", \
        f"{path.name}: the kernelspec must be python3"
    dirty = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"
             and (c.outputs or c.execution_count is not None)]
    assert not dirty, (f"{path.name}: cells {dirty} have outputs or an execution count; "
                       f"save the notebook with outputs stripped")
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and re.search(r"^\s*(import jax|from jax)\b", cell.source,
                                                  re.M):
            assert "except ImportError" in cell.source, \
                f"{path.name}: cell {i} imports jax without `except ImportError` (jax is optional)"
    index = (NOTEBOOK_DIR / "README.md").read_text()
    assert path.name in index, f"{path.name} is not listed in notebooks/README.md"
