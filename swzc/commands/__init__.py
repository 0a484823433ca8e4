"""Commands: the click command line only; each command builds options, calls the pipeline and picks an emitter."""
