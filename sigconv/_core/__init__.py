"""Foundations every layer may use: errors, argument checks, blocks, numpy-or-cupy, atomic output, devices."""
