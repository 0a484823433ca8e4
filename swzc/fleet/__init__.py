"""`swzc tune`: every kernel of a project searched and measured as a job of its own, on the local GPUs or a Ray
cluster, with each result kept in a SQLite store so that a rerun resumes where the last one stopped.

jobs: what a run asks (the settings, each kernel's job and its key); job: one job carried out, on whichever
machine holds the GPU; store: the results; local and cluster: where the jobs run.
"""
