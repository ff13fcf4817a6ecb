"""Helpers for Python LSP clients of this server (the demo, the tests)."""

from __future__ import annotations

from typing import Union

from lsprotocol import types
from pygls.protocol import default_converter


def converter_factory():
    """lsprotocol's client-side hook reads any code-action item with a "command" key as a
    Command, which breaks `CodeAction(command=...)`; decide by that key's type instead."""
    converter = default_converter()

    def command_or_action(obj, _):
        target = types.Command if isinstance(obj.get("command"), str) else types.CodeAction
        return converter.structure(obj, target)

    converter.register_structure_hook(Union[types.Command, types.CodeAction], command_or_action)
    return converter
