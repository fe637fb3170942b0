"""A Session as one self-contained HTML page, and the static copies notebooks show offline."""
