"""Timing: per-node profiles, the clock behind them, the ATen breakdown, interleaved A/B timing and timing diffs."""
