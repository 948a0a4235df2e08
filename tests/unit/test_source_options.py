"""urls() and git(): what they refuse at definition time, and that they are untrusted by default."""

from __future__ import annotations

import pytest

from chamvi.errors import InvalidAgentDefinitionError
from chamvi.knowledge import folder, git, knowledge_collection, urls


@pytest.mark.parametrize(
    ("pages", "options", "problem"),
    [
        ("https://example.com/", {}, "a list of URLs, not the string"),
        ([], {}, "got no URL"),
        (["example.com/page"], {}, "not an http(s) URL with a host"),
        (["https://example.com/#intro"], {}, "has a fragment"),
        (["https://example.com/", "https://example.com/"], {}, "lists a URL twice"),
        (["http://10.0.0.8/wiki"], {}, "allow_private=True"),
        (["http://localhost:8080/"], {}, "allow_private=True"),
        (["http://[::1]/"], {}, "allow_private=True"),
        (["https://example.com/"], {"max_pages": 0}, "max_pages must be a positive integer"),
        (["https://example.com/"], {"timeout": -1}, "timeout must be a positive number"),
        (["https://example.com/"], {"trusted": "yes"}, "trusted must be True, False or None"),
    ],
)
def test_urls_refuses_a_bad_definition_naming_the_problem(
    pages: object, options: dict[str, object], problem: str
) -> None:
    with pytest.raises(InvalidAgentDefinitionError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        urls(pages, **options)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "address",
    [
        "::ffff:127.0.0.1",  # IPv4-mapped
        "::127.0.0.1",  # IPv4-compatible, ::/96
        "::ffff:0:10.0.0.1",  # IPv4-translated
        "64:ff9b::10.0.0.1",  # NAT64
        "64:ff9b::169.254.169.254",  # NAT64 to the cloud metadata service
        "64:ff9b:1::1",  # local-use NAT64: never public
        "64:ff9b:1::8.8.8.8",
        "2002:7f00:1::",  # 6to4 of 127.0.0.1
        "2002:0a00:0001::",  # 6to4 of 10.0.0.1
    ],
)
def test_urls_refuses_a_private_ipv4_address_carried_inside_ipv6(address: str) -> None:
    with pytest.raises(InvalidAgentDefinitionError, match="private or loopback address"):
        urls([f"http://[{address}]/wiki"])


@pytest.mark.parametrize("address", ["::ffff:8.8.8.8", "64:ff9b::8.8.8.8", "2002:808:808::"])
def test_urls_accepts_a_public_ipv4_address_carried_inside_ipv6(address: str) -> None:
    assert urls([f"http://[{address}]/wiki"]).urls == (f"http://[{address}]/wiki",)


def test_urls_allows_an_internal_site_when_told() -> None:
    assert urls(["http://10.0.0.8/wiki"], allow_private=True).allow_private


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"ref": "main:docs"}, "is not a branch, tag or commit name"),
        ({"ref": "--upload-pack=evil"}, "is not a branch, tag or commit name"),
        ({"path": "../outside"}, "must be a folder relative to the repository root"),
        ({"path": "/etc"}, "must be a folder relative to the repository root"),
        ({"extensions": ".md"}, "not the string"),
        ({"extensions": ["md"]}, "name suffixes with their dot"),
    ],
)
def test_git_refuses_a_bad_definition_naming_the_problem(options: dict[str, object], problem: str) -> None:
    with pytest.raises(InvalidAgentDefinitionError, match=problem):
        git("https://example.com/repo.git", **options)  # type: ignore[arg-type]


def test_git_refuses_an_url_that_git_would_read_as_an_option() -> None:
    with pytest.raises(InvalidAgentDefinitionError, match="is not a repository URL"):
        git("--upload-pack=touch /tmp/x")


def test_urls_and_git_are_untrusted_by_default_so_a_search_over_them_taints_the_run(tmp_path) -> None:
    for source in (urls(["https://docs.example.com/"]), git("https://example.com/repo.git")):
        collection = knowledge_collection("docs", model="test/hash-64", sources=[folder(tmp_path), source])
        assert not collection.is_trusted
        assert knowledge_collection("docs", model="test/hash-64", sources=[source], trusted=True).is_trusted
    assert urls(["https://docs.example.com/"], trusted=True).trusted is True
