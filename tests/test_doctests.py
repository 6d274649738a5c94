"""The Examples in the public docstrings run and print what they say."""

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
