"""The benchmark harness behind ``sigconv bench`` and the TUI's latency table.

- :mod:`~sigconv.bench.cases`: the shapes (:class:`Case1D`, :class:`Case2D`), their inputs and float64 references;
- :mod:`~sigconv.bench.harness`: the rows of one case on one backend, checked then timed (:class:`BenchOptions`,
  :func:`measure`); :mod:`~sigconv.bench.check` and :mod:`~sigconv.bench.timing` beneath it;
- :mod:`~sigconv.bench.report`: console lines, markdown, verdicts against the speed targets;
- :mod:`~sigconv.bench.suite`: a whole run (:class:`SuiteOptions`, :func:`run_suite`), its method and files.
"""

from sigconv._core.lazy import lazy_names

#: Public names -> the module that holds them, loaded on first use (``sigconv bench``'s options need the case names
#: only; the harness, its checks and its peers load when a run starts).
_HOME = {
    **dict.fromkeys(("CASES_2D", "CPU_MAX_ELEMS", "CPU_MAX_MACS", "Case1D", "Case2D", "default_cases_1d",
                     "default_cases_2d", "parse_shape2d"), "sigconv.bench.cases"),
    **dict.fromkeys(("TOL", "check_result", "rounding_scale"), "sigconv.bench.check"),
    **dict.fromkeys(("BenchOptions", "measure"), "sigconv.bench.harness"),
    "default_out_dir": "sigconv.bench.report",
    **dict.fromkeys(("SuiteOptions", "backends_for", "entry_lines", "run_suite"), "sigconv.bench.suite"),
    **dict.fromkeys(("cpu_copy_gbs", "cpu_name", "gpu_copy_gbs"), "sigconv.bench.timing"),
}

__all__ = ["Case1D", "Case2D", "CASES_2D", "CPU_MAX_ELEMS", "CPU_MAX_MACS", "default_cases_1d", "default_cases_2d",
           "parse_shape2d", "TOL", "check_result", "rounding_scale", "BenchOptions", "measure", "SuiteOptions",
           "run_suite", "backends_for", "entry_lines", "default_out_dir", "gpu_copy_gbs", "cpu_copy_gbs", "cpu_name"]


__getattr__, __dir__ = lazy_names(__name__, _HOME, globals())
del lazy_names
