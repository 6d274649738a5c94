"""The engine: array operations, file, stream, spectral and batch pipelines."""
