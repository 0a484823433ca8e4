"""Report: findings, review formats, the run's report and the picture page, each through its emitter."""
