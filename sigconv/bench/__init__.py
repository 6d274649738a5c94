"""The benchmark harness behind ``sigconv bench`` and the TUI's latency table.

- :mod:`~sigconv.bench.cases`: the shapes (:class:`Case1D`, :class:`Case2D`), their inputs and float64 references;
- :mod:`~sigconv.bench.harness`: the rows of one case on one backend, checked then timed (:class:`BenchOptions`,
  :func:`measure`); :mod:`~sigconv.bench.check` and :mod:`~sigconv.bench.timing` beneath it;
- :mod:`~sigconv.bench.report`: console lines, markdown, verdicts against the speed targets;
- :mod:`~sigconv.bench.suite`: a whole run (:class:`SuiteOptions`, :func:`run_suite`), its method and files.
"""

from sigconv.bench.cases import (CASES_2D, CPU_MAX_ELEMS, CPU_MAX_MACS, Case1D, Case2D, default_cases_1d,
                                 default_cases_2d, parse_shape2d)
from sigconv.bench.check import TOL, check_result, rounding_scale
from sigconv.bench.harness import BenchOptions, measure
from sigconv.bench.report import default_out_dir
from sigconv.bench.suite import SuiteOptions, backends_for, entry_lines, run_suite
from sigconv.bench.timing import cpu_copy_gbs, cpu_name, gpu_copy_gbs

__all__ = ["Case1D", "Case2D", "CASES_2D", "CPU_MAX_ELEMS", "CPU_MAX_MACS", "default_cases_1d", "default_cases_2d",
           "parse_shape2d", "TOL", "check_result", "rounding_scale", "BenchOptions", "measure", "SuiteOptions",
           "run_suite", "backends_for", "entry_lines", "default_out_dir", "gpu_copy_gbs", "cpu_copy_gbs", "cpu_name"]
