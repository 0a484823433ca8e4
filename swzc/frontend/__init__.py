"""Front end: source text and its parse, tree-sitter queries, syntax helpers, preprocessing, constant evaluation, scope."""
