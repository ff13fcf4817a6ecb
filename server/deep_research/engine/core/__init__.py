"""What values does everything speak in? Positions, spans, diagnostics and fixes (`text`),
titles made safe names (`names`), phases, the focus and the persisted state (`state`).

Imports nothing of the engine: pure values and functions on them.
"""
