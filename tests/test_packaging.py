"""pyproject.toml lists every package: `pip install .` (not editable, as the README's
quickstart runs) installs only the listed ones, so a package missing from the list works
in the editable test environment and fails for a user (fnad.optim did)."""
import pathlib
import tomllib

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_every_package_directory_is_listed_in_pyproject():
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(cfg["tool"]["setuptools"]["packages"])
    mapping = cfg["tool"]["setuptools"]["package-dir"]       # fnad.primitives -> primitives
    found = set()
    for init in ROOT.glob("fnad/**/__init__.py"):
        found.add(".".join(init.parent.relative_to(ROOT).parts))
    for name, folder in mapping.items():
        for init in (ROOT / folder).glob("**/__init__.py"):
            rel = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join((name,) + rel))
    assert found - listed == set(), f"packages missing from pyproject.toml: {found - listed}"
