"""The layer map: which modules form each layer, top to bottom. A module may import modules of its own layer
and of the layers below it, never above; the ui layer reaches the api layer through public names only
(``sigconv`` and ``sigconv.bench``). ``tests/test_layers.py`` checks every import in sigconv/ and apps/
against this map and fails on a cycle. The README's "How the code is organised" describes the same map.
"""

#: (layer, module prefixes), top to bottom. A module belongs to the layer of its longest matching prefix.
LAYERS = (
    ("ui", ("sigconv.cli", "sigconv.__main__", "apps")),
    ("api", ("sigconv", "sigconv._api", "sigconv._conv2d", "sigconv.bench")),
    ("engine", ("sigconv.engine",)),
    ("backends", ("sigconv.backends",)),
    ("registry", ("sigconv.registry",)),
    ("kernels", ("sigconv._kernels",)),
    ("core", ("sigconv._core", "sigconv._version", "sigconv._layers")),
)

#: What the ui layer may import from the layers below it: public modules only.
UI_MAY_IMPORT = ("sigconv", "sigconv.bench")
