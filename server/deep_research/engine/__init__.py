"""The research engine: plain Python, no LSP, no network (tests/engine/test_boundaries.py).

Its modules stand in storeys, each importing only its own and those below it
(tests/test_layering.py; ARCHITECTURE.md says what each storey answers):

    core        text, names, state: the values everything shares
    store       the research folder on disk: paths, guard, cache, transaction, watch
    retrieval   a source's parts and their search: parts, layout_store, index, vectors, ranking
    settings    the settings table and the research's rules
    tree        the problem tree in markdown: model, formats, reader, walk, staleness, …
    execution   what commands do to a draft: protocol, draft, operations, evidence, reading
    language    the message language: parser, commands, binding, budgets, analysis, …
    views       what people and models are shown: prompt, reply, assist, check, repair
    (facade)    research, undo, tree_view: what the front ends drive

`API` names the modules the front ends (the command line, the terminal mock, `run`'s console,
the demo, the printouts, the language server, the MCP server) may import; the rest is the
engine's own. The libraries beside them (`app/`, `sources/`, `autopilot/`, `dossier/`,
`compiled/`) have their own lists in tests/test_layering.py.
"""

API = (
    "research", "tree_view", "undo",  # the facade
    "core.text", "core.state", "core.names",  # the values it speaks in
    "store", "store.watch",  # the layout's names, the guard; the language server starts the watch
    "settings.table",  # the settings a front end converts from its own options
    "retrieval.parts",  # an attachment's parts named (`NAME#N`)
    "tree.reader", "tree.accounting", "tree.citations",  # a problem named; the effort; `[[…]]` links
    "language.parser", "language.commands", "language.analysis", "language.incremental", "language.approval",
    "views.prompt", "views.reply", "views.assist", "views.check", "views.repair",
)
