"""Two steps side by side: structure, code diff, timing, outputs."""
