"""Any agent as the researcher: a Model Context Protocol server (`deep-research mcp [ROOT]`).

Glue over the engine's facade, like `lsp/` and `cli.py`; the engine knows nothing of it.
`server.py` serves the tools (`tools.py`) and resources (`resources.py`) on stdio with the
official `mcp` SDK; `workspace.py` keeps every research inside ROOT; `approval.py` asks
the user (MCP elicitation) before commands above the approval mode run; `inputs.py`
gathers `new_research`'s attachments.
"""
