"""The use cases: what the front ends (the command line, `run`'s console, the terminal mock,
the language server, the MCP server) do, each of which only converts to and from its own
forms.

- `setup.py`: `new` and `continue` (which folders, what the user gives, one transaction);
- `execute.py`: a message executed (checked and analysed once, approval, sources, one
  transaction) and what is reported of it;
- `run.py`: the autopilot's run built (settings, the model client with the API key, the
  fleet) for a front end to drive;
- `embed.py`: semantic search's vectors, in the background (`keep_embedding`) or at once
  (`embed`).

Below: the engine (`engine/`), the outside world (`sources/`) and the autopilot as a library
(`autopilot/`). Nothing here knows LSP, MCP or a terminal.
"""
