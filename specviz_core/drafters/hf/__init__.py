"""transformers' own assisted generation and prompt lookup, driven one SpecViz cycle at a time."""
