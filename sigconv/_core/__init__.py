"""Foundations every layer may use: errors, argument checks, atomic output, devices."""
