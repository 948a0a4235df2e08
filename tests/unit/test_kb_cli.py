"""`chamvi kb`: an agent's wiki from the terminal, over a folder written by hand."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from chamvi.cli import cli


def kb(*args: str, env: dict[str, str] | None = None) -> Result:
    """Runs `chamvi kb ...` in a thread of its own, so its ``asyncio.run`` never touches the test's loop."""
    results: list[Result] = []
    thread = threading.Thread(target=lambda: results.append(CliRunner().invoke(cli, ["kb", *args], env=env)))
    thread.start()
    thread.join(60)
    assert results, "the command did not finish within 60 s"
    return results[0]


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture
def wiki(tmp_path: Path) -> Path:
    write(
        tmp_path,
        "concept/refunds.md",
        "---\ntitle: Refunds\nstatus: active\n---\n\n# Refunds\n\n"
        "Paid in 14 days, see [returns](returns.md).\n",
    )
    write(tmp_path, "concept/returns.md", "# Returns\n\nBack within 30 days. [Refunds](refunds.md)\n")
    write(
        tmp_path,
        "faq/late-parcel.md",
        "# Late parcel\n\nWait five days, then ask about [refunds](../concept/refunds.md).\n",
    )
    write(tmp_path, "home.md", "# Home\n\nStart with [the FAQ](faq/late-parcel.md).\n")
    return tmp_path


def test_index_lists_the_pages_by_id_including_the_folders_of_app_types(wiki: Path) -> None:
    result = kb("index", "--dir", str(wiki))
    assert result.exit_code == 0, result.output
    assert "- [Refunds](concept/refunds): Paid in 14 days, see returns." in result.output
    assert "## faq\n\n- [Late parcel](faq/late-parcel)" in result.output
    assert ".md)" not in result.output and "home" not in result.output
    with_root = kb("index", "--dir", str(wiki), "--root-type", "page")
    assert "- [Home](page/home)" in with_root.output


def test_read_prints_a_page_with_links_as_ids_and_who_links_to_it(wiki: Path) -> None:
    result = kb("read", "concept/refunds", env={"CHAMVI_KB_DIR": str(wiki)})
    assert result.exit_code == 0, result.output
    assert result.output == (
        "# Refunds\n"
        "id: concept/refunds | type: concept | status: active\n"
        "linked from: concept/returns, faq/late-parcel\n"
        "\n"
        "Paid in 14 days, see [returns](concept/returns).\n"
    )
    assert kb("read", "overview", "--dir", str(wiki)).output == "(the overview is empty)\n"
    assert kb("read", "log", "--dir", str(wiki)).output == "(the log is empty)\n"
    missing = kb("read", "concept/nope", "--dir", str(wiki))
    assert missing.exit_code == 1
    assert (
        "Error: no page 'concept/nope' in" in missing.output
        and "`chamvi kb index` lists them" in missing.output
    )
    bad = kb("read", "Refunds", "--dir", str(wiki))
    assert bad.exit_code == 1 and "Error: 'Refunds' is not a page id" in bad.output


def test_search_ranks_pages_and_prints_json_on_request(wiki: Path) -> None:
    result = kb("search", "refunds days", "--dir", str(wiki))
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split() == ["SCORE", "ID", "TITLE", "SNIPPET"]
    assert lines[1].split()[1] == "concept/refunds"
    hits = json.loads(kb("search", "parcel", "--dir", str(wiki), "--json", "--limit", "1").output)
    assert [h["id"] for h in hits] == ["faq/late-parcel"]
    assert set(hits[0]) == {"id", "type", "title", "score", "snippet", "status"}
    nothing = kb("search", "zebra", "--dir", str(wiki))
    assert nothing.exit_code == 0 and nothing.stdout == "" and "no page matches 'zebra'" in nothing.stderr


def test_check_exits_non_zero_on_a_broken_link(wiki: Path) -> None:
    clean = kb("check", "--dir", str(wiki), "--root-type", "page")
    assert clean.exit_code == 0, clean.output
    assert clean.output == "orphan pages (no other page links to them):\n  page/home\n"
    write(wiki, "concept/returns.md", "# Returns\n\nSee [the old rule](gone.md) and [refunds](refunds.md).\n")
    broken = kb("check", "--dir", str(wiki))
    assert broken.exit_code == 1
    assert broken.stdout.startswith("broken links:\n  concept/returns -> concept/gone\n")
    assert (
        "files that are no pages:\n  home.md: a file directly in the root folder is no page" in broken.stdout
    )
    assert broken.stderr.strip() == (
        "Error: 1 broken link(s): link pages that exist, or create the missing ones"
    )
    report = json.loads(kb("check", "--dir", str(wiki), "--json").stdout)
    assert report["ok"] is False
    assert report["broken_links"] == [{"source": "concept/returns", "target": "concept/gone"}]


def test_the_folder_must_be_named_and_exist(tmp_path: Path) -> None:
    unnamed = kb("index", env={"CHAMVI_KB_DIR": ""})
    assert unnamed.exit_code == 1
    assert "Error: which knowledge base? Give --dir DIR or set CHAMVI_KB_DIR" in unnamed.output
    missing = kb("check", "--dir", str(tmp_path / "nowhere"))
    assert missing.exit_code == 1 and "the folder does not exist" in missing.output


def test_the_example_wiki_is_clean() -> None:
    wiki = Path(__file__).resolve().parents[2] / "examples" / "support" / "wiki"
    result = kb("check", "--dir", str(wiki))
    assert result.exit_code == 0, result.output
    assert result.output == "5 page(s), nothing to fix\n"


def test_an_agent_kit_wiki_reads_with_its_plural_folders_and_typed_pages(tmp_path: Path) -> None:
    from tests.knowledge_store.test_agent_kit_layout import WIKI

    for rel, text in WIKI.items():
        write(tmp_path, rel, text)
    result = kb("index", "--dir", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert "- [Bowline](concept/bowline): A loop that does not slip" in result.output
    assert "- [Knots](topic/knots)" in result.output and "- [First lesson](lesson/first)" in result.output
    assert "concepts/" not in result.output and "topics/" not in result.output
    found = kb("search", "nautico", "--dir", str(tmp_path))
    assert found.exit_code == 0, found.output
    assert found.output.index("entity/club-nautico") < found.output.index("summary/sailing-manual")
