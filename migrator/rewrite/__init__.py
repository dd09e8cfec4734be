"""The migrate engine: new bytes and findings for one file of any kind (Python, notebooks,
Markdown, reST, plain text), run over many files by `runner`. Serves `vam migrate`, `check`,
`explain` and the rewriting step of `vam refactor`; of the tool it imports only `migrator.core`
and `rules`."""
