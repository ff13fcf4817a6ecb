"""How is a research set up? The settings table (`table`: every setting's key, type, bounds,
default, `run` option and editor key) and the research's rules derived from it (`rules`).

One table: every other form of a setting is derived from its row.
"""
