"""The Examples in the public docstrings run and print what they say; the READMEs cite only files of the repository."""

from __future__ import annotations

import doctest
import importlib

import numpy as np
import pytest


@pytest.mark.parametrize("module", ["sigconv._api", "sigconv._conv2d", "sigconv.engine.design", "sigconv.engine.stream",
                                    "sigconv.engine.spectral.arrays", "sigconv.registry.table"])
def test_docstring_examples(module):
    mod = importlib.import_module(module)
    with np.printoptions(legacy=False):
        res = doctest.testmod(mod, optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    assert res.attempted > 0, f"{module} has no examples"
    assert res.failed == 0


def test_readme_figures_come_from_files_in_the_repository():
    """The READMEs cite no file outside the repository, and every results file or folder they cite exists."""
    import re

    from conftest import ROOT

    for readme, base in ((ROOT / "README.md", ROOT), (ROOT / "benchmarks" / "README.md", ROOT / "benchmarks")):
        text = readme.read_text(encoding="utf-8")
        assert "../" not in text, f"{readme.name} cites a path outside the repository"
        cited = re.findall(r"`((?:benchmarks/)?results/[^`\s]*)`", text)
        assert cited, f"{readme.name} cites no results file"
        for path in cited:
            where = ROOT / path if path.startswith("benchmarks/") else base / path
            assert where.exists(), f"{readme.name} cites {path}, which is not in the repository"
