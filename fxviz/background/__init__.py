"""Background work: the one queue and worker, turns between kernel and worker, cancellation, and the measurements it schedules."""
