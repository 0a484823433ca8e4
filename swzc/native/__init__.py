"""C++ that swzc compiles at run time: the generated harness's host code and the launch observer."""
