"""`deep-research.toml`: defaults, types, precedence, and mistakes reported, never raised."""

from __future__ import annotations

from pathlib import Path

from deep_research.engine.settings.table import CONFIG_FILE, Config, load


def write(root: Path, text: str) -> None:
    (root / CONFIG_FILE).write_text(text, encoding="utf-8")


def test_no_file_gives_the_defaults(tmp_path: Path) -> None:
    config, problems = load(tmp_path, environ={})
    assert config == Config() and problems == []
    assert config.grammar == "auto" and config.fetch.allow_private_networks is False


def test_every_key_is_read(tmp_path: Path) -> None:
    write(tmp_path, '''
model = "smol"
base_url = "http://127.0.0.1:9/v1"
max_rounds = 12
max_tokens = 5000
max_prompt_tokens = 8000
max_reply_tokens = 300
approval_mode = "Create"
grammar = "on"
[fetch]
allow_private_networks = true
allowed_roots = ["papers", "/srv/data", "~/notes"]
[search]
provider = "searxng"
url = "http://127.0.0.1:8888"
''')
    config, problems = load(tmp_path, environ={})
    assert problems == []
    assert (config.model, config.base_url, config.max_rounds, config.max_tokens) == ("smol", "http://127.0.0.1:9/v1", 12, 5000)
    assert (config.max_prompt_tokens, config.approval_mode, config.grammar) == (8000, "create", "on")
    assert config.max_reply_tokens == 300
    assert config.fetch.allow_private_networks is True
    assert config.fetch.allowed_roots == (tmp_path / "papers", Path("/srv/data"), Path("~/notes").expanduser())
    assert (config.search.provider, config.search.url) == ("searxng", "http://127.0.0.1:8888")


def test_mistakes_are_reported_and_ignored(tmp_path: Path) -> None:
    write(tmp_path, 'max_rounds = "ten"\nmax_tokens = true\ngrammar = "maybe"\ncolour = 1\nfetch = 3\n')
    config, problems = load(tmp_path, environ={})
    assert config.max_rounds == 40 and config.max_tokens is None and config.grammar == "auto"  # the defaults
    joined = "\n".join(problems)
    for key in ("max_rounds", "max_tokens", "grammar", "colour", "fetch"):
        assert f"`{key}`" in joined


def test_a_broken_file_gives_the_defaults_and_says_so(tmp_path: Path) -> None:
    write(tmp_path, "model = \n[[[")
    config, problems = load(tmp_path, environ={})
    assert config == Config() and len(problems) == 1 and CONFIG_FILE in problems[0]


def test_precedence_file_then_environment_then_overrides(tmp_path: Path) -> None:
    write(tmp_path, 'base_url = "http://file/v1"\nmodel = "from-file"\n[fetch]\nallow_private_networks = false\n')
    config, _ = load(tmp_path, environ={"OPENAI_BASE_URL": "http://env/v1"})
    assert config.base_url == "http://env/v1" and config.model == "from-file"
    final = config.merged(model="cli", base_url=None, fetch={"allow_private_networks": True})
    assert final.model == "cli" and final.base_url == "http://env/v1" and final.fetch.allow_private_networks is True


def test_the_search_provider_is_duckduckgo_unless_offline_none_or_mistyped(tmp_path: Path) -> None:
    from deep_research.engine.settings.table import search_provider

    assert search_provider(load(tmp_path, environ={})[0]) == "duckduckgo"  # works from the first message
    for text, expected in (('[search]\nprovider = "ArXiv"\n', "arxiv"), ('[search]\nprovider = "none"\n', None),
                           ('[fetch]\noffline = true\n[search]\nprovider = "wikipedia"\n', None)):
        write(tmp_path, text)
        assert search_provider(load(tmp_path, environ={})[0]) == expected, text
    # a provider that is not one is kept and refused where it is used, never replaced by the default:
    # the queries would go to a provider the user did not choose
    write(tmp_path, '[search]\nprovider = "searxgn"\nwikipedia_language = "de"\n')
    config, problems = load(tmp_path, environ={})
    assert config.search.provider == "searxgn" and search_provider(config) is None
    assert config.search.wikipedia_language == "de"
    assert problems == [f"{tmp_path / CONFIG_FILE}: `search.provider` must be one of duckduckgo, wikipedia, arxiv, "
                        "searxng, tavily, brave, none, not 'searxgn'; what needs it is refused until it is corrected"]
