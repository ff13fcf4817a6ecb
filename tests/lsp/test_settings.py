"""The server's settings: tolerant parsing, and the same approval modes as the engine's."""

from __future__ import annotations

from deep_research.engine.language.commands import DEFAULT_APPROVAL_MODE, ApprovalMode
from deep_research.lsp.config import DEFAULT_MODE, MODES, Settings


def test_modes_are_the_engines_approval_modes():
    assert MODES == tuple(mode.label for mode in ApprovalMode)
    assert DEFAULT_MODE == DEFAULT_APPROVAL_MODE.label


def test_settings_from_a_client_are_tolerant():
    assert Settings.from_client({"approvalMode": "Read "}).approval_mode is ApprovalMode.READ
    assert Settings.from_client({"deepResearch": {"approvalMode": "none"}}).approval_mode is ApprovalMode.NONE
    assert Settings.from_client({"approvalMode": "everything"}).approval_mode is DEFAULT_APPROVAL_MODE
    assert Settings.from_client(None) == Settings()
    odd = Settings.from_client({"executeOnSave": 1, "showPromptAfterExecute": 0})
    assert (odd.execute_on_save, odd.show_prompt) == (True, False)


def test_fetch_and_search_settings_override_the_research_file(tmp_path):
    from deep_research.engine.settings.table import Config, FetchConfig, SearchConfig

    nested = Settings.from_client({"fetch": {"allowPrivateNetworks": True},
                                   "search": {"provider": "SearXNG", "url": " http://127.0.0.1:8888 "}})
    dotted = Settings.from_client({"fetch.allowPrivateNetworks": True, "search.provider": "searxng",
                                   "search.url": "http://127.0.0.1:8888"})
    assert nested == dotted
    assert (nested.get("fetch.allow_private_networks"), nested.get("search.provider"), nested.get("search.url")) == (
        True, "searxng", "http://127.0.0.1:8888")
    from_file = Config(fetch=FetchConfig(allow_private_networks=True, allowed_roots=(tmp_path,)),
                       search=SearchConfig("tavily", "https://api.example/search"))
    # Unset editor settings leave the file's values; set ones win.
    assert Settings().overrides() and from_file.merged(**Settings().overrides()) == from_file
    refused = from_file.merged(**Settings.from_client({"fetch": {"allowPrivateNetworks": False}}).overrides())
    assert refused.fetch == FetchConfig(allow_private_networks=False, allowed_roots=(tmp_path,))
    assert from_file.merged(**nested.overrides()).search == SearchConfig("searxng", "http://127.0.0.1:8888")
    odd = Settings.from_client({"search": {"provider": "altavista", "url": 3}, "fetch": {"allowPrivateNetworks": None}})
    # a provider that is not one is kept, to be refused by the search (not replaced by the default, where
    # the queries would go to a provider the user did not choose); other bad values fall back
    assert odd.values == {"search.provider": "altavista"}
    from deep_research.engine.settings.table import search_provider

    assert search_provider(Config().merged(**odd.overrides())) is None


def test_the_report_limit_setting_is_the_engines_rule():
    assert Settings.from_client({"reportMaxWords": 800}).rule_overrides() == {"report_max_words": 800}
    assert Settings.from_client({"reportMaxWords": 5}).rule_overrides() == {}  # below the minimum: ignored
    assert Settings().rule_overrides() == {}
