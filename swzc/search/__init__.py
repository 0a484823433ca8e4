"""Search: where candidate orders come from, the built-in family and the LLM."""
