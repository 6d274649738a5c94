"""Peers (baselines) registered as providers for benchmarks and the TUI: filled in with sigconv bench."""
