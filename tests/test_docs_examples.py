"""Every ```python block in docs/ runs as it stands: each page's blocks in sequence, in a fresh
namespace, in a scratch directory (pages save pictures). Fragments that are not meant to run use
another fence (```text). The README's blocks are run by tests/test_cli.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted(p for p in (ROOT / "docs").rglob("*.md")
               if re.search(r"^```python\s*$", p.read_text(), re.M))
#: pages whose blocks need an optional extra, and which
NEEDS = {"dask.md": ("dask", "distributed"), "learners.md": ("sklearn",)}


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\s*\n(.*?)^```\s*$", text, re.S | re.M)


def test_pages_with_python_blocks_are_found():
    assert PAGES and all(python_blocks(p.read_text()) for p in PAGES)


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT / "docs")) for p in PAGES])
def test_page_code_blocks_run(page, tmp_path, monkeypatch):
    pytest.importorskip("matplotlib").use("Agg")
    for module in NEEDS.get(page.name, ()):
        pytest.importorskip(module)
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__docs__"}
    for k, block in enumerate(python_blocks(page.read_text()), 1):
        try:
            exec(compile(block, f"{page.name}[block {k}]", "exec"), namespace)  # noqa: S102
        except Exception as exc:
            raise AssertionError(f"{page.relative_to(ROOT)} block {k} fails: "
                                 f"{type(exc).__name__}: {exc}\n---\n{block}") from exc


def test_every_page_is_in_the_nav_and_linked_from_the_index():
    nav = (ROOT / "mkdocs.yml").read_text()
    index = (ROOT / "docs" / "index.md").read_text()
    for page in (ROOT / "docs").rglob("*.md"):
        rel = page.relative_to(ROOT / "docs").as_posix()
        assert f": {rel}" in nav, f"{rel} is not in mkdocs.yml's nav"
        if rel != "index.md":
            assert f"]({rel})" in index, f"docs/index.md does not link {rel}"


def test_docs_cite_only_files_in_the_repository():
    """Paths in backticks that look like repository files exist (no notes outside the repo)."""
    for page in [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]:
        for path in re.findall(r"`((?:specopt|benchmarks|tests|docs|examples|shared)/[\w/.-]+"
                               r"\.(?:py|md|json))", page.read_text()):
            if "*" in path:
                continue
            assert (ROOT / path).exists(), f"{page.relative_to(ROOT)} cites {path}"
