"""The research engine: parser, command table, tree store, execution, prompt.

Plain Python. Nothing in this package imports pygls or lsprotocol (a test checks it):
the language server, the command line and any LLM harness are thin layers on top.
"""
