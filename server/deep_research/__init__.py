"""Deep Research: a workbench for deep research done by an LLM.

`deep_research.engine` is the plain-Python engine; `deep_research.lsp` the language
server over it; `deep_research.cli` the `deep-research` command line.
"""

__version__ = "0.1.0"
