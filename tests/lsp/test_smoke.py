from pathlib import Path

from lsprotocol import types

from .helpers import DEFINE, diagnostics, execute, open_doc, text_of


async def test_define_execute_and_diagnose(client, research: Path):
    uri = open_doc(client, research / "message.dr", "///focus_upp\n")
    found = await diagnostics(client, uri)
    assert [d.code for d in found] == ["unknown-command"]
    assert "Did you mean `focus_up`?" in found[0].message
    from .helpers import change_doc
    change_doc(client, uri, DEFINE)
    result = await execute(client, uri)
    assert result["executed"] is True, result
    assert (research / "Problem Definition.md").is_file()
    assert text_of(client, uri) == ""
