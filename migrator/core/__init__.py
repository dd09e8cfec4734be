"""The kernel every `vam` command shares: the walk, file kinds and module names, decoding and
atomic writes, the resolver over a move table, what is reported and how it is rendered, the
`[tool.vam]` config, and the readers of releases. Imports nothing of the tool but `rules`."""
