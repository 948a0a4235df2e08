"""The librarian: an agent that keeps the support team's wiki, a folder of linked markdown pages
(``examples/support/wiki/``) it reads and writes through the knowledge base tools.

It runs offline with the ``local/demo`` model, which calls each tool whose required arguments the
payload has, once, with arguments from the payload's fields of the same names, so a demo dispatch
only reads: with ``{"id": "concept/refund-window", "query": "refund", "type": "concept"}`` it reads
the index, the page and the search results and checks the wiki; the writing tools need fields that
payload lacks (a slug, a text, a reason), so it calls none of them. Set
``CHAMVI_WIKI_MODEL=openai/gpt-4o-mini`` (and ``OPENAI_API_KEY``) to let a real model keep the wiki;
``CHAMVI_SUPPORT_WIKI`` moves the folder (the default is the one in this repository, which a real
model then edits). Retiring a page asks a person first.
"""

from __future__ import annotations

import os
from pathlib import Path

from chamvi import Budget, define_agent
from chamvi.knowledge_store import FileKnowledgeStore, knowledge_store_tools

WIKI_DIR = Path(os.environ.get("CHAMVI_SUPPORT_WIKI") or Path(__file__).parent / "wiki")

wiki = FileKnowledgeStore(WIKI_DIR)

librarian = define_agent(
    name="librarian",
    model=os.environ.get("CHAMVI_WIKI_MODEL", "local/demo"),
    instructions=(
        "You keep the support team's wiki: what agents learn while answering customers, as linked pages. "
        "Start from knowledge_index (or knowledge_search) and read the pages you touch. Put each fact "
        "where it belongs: edit the page that holds it, create a page when none does, and link related "
        "pages by id, only to pages that exist. When a page is outdated, write the better page and "
        "supersede the old one; never delete. Run knowledge_check and fix broken links before you "
        "finish, then log the work with knowledge_log and answer with what changed."
    ),
    tools=knowledge_store_tools(wiki, interactive=True),
    budget=Budget(max_steps=30),
)
