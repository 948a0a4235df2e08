"""urls(): a no-op re-sync of 500 loopback pages against 500 conditional GETs made directly.

Issue 27's measure: the pass (stored versions looked up, conditional requests, 304s counted
unchanged, no embedding call) may cost at most 1.5x the same 500 conditional GETs sent with httpx
alone at the same concurrency, to the same server, in the same run. Median of ``--repeats``.

    python bench/sources.py [--pages 500] [--repeats 9]

The two are interleaved, so load from elsewhere on the machine falls on both alike.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from chamvi._lifecycle import memory_index
from chamvi.knowledge import knowledge_collection, urls
from chamvi.knowledge.embedders import EmbeddingRegistry
from chamvi.knowledge.embedders.hashing import HashEmbedder
from chamvi.knowledge.indexing import Indexer

BODY = (
    "<html><head><title>Page {n}</title></head><body><article><h1>Page {n}</h1>"
    "<p>This page explains topic number {n} in enough words for an extractor to keep it as the "
    "main text of the page, with a second sentence about the refund policy and shipping.</p>"
    "</article></body></html>"
)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        if self.path == "/robots.txt":
            self._send(404, b"", None)
            return
        etag = f'"{self.path}"'
        if self.headers.get("if-none-match") == etag:
            self._send(304, b"", etag)
            return
        self._send(200, BODY.format(n=self.path.strip("/")).encode(), etag)

    def _send(self, status: int, body: bytes, etag: str | None) -> None:
        self.send_response(status)
        self.send_header("content-type", "text/html; charset=utf-8")
        self.send_header("content-length", str(len(body)))
        if etag:
            self.send_header("etag", etag)
        self.end_headers()
        if status != 304:
            self.wfile.write(body)


async def direct(pages: list[str], concurrency: int) -> float:
    """500 conditional GETs with httpx alone, ``concurrency`` at a time, each answered 304."""
    semaphore = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=concurrency)) as client:

        async def get(url: str) -> None:
            # send, read, close: of the ways httpx offers, the one measured fastest here (client.get
            # was up to twice as slow on some runs), so the baseline is the harsher one
            request = client.build_request(
                "GET", url, headers={"if-none-match": f'"/{url.rsplit("/", 1)[1]}"'}
            )
            async with semaphore:
                response = await client.send(request, stream=True)
                await response.aread()
                await response.aclose()
                assert response.status_code == 304, response.status_code

        started = time.perf_counter()
        await asyncio.gather(*(get(url) for url in pages))
        return time.perf_counter() - started


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pages", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    pages = [f"{base}/{n}" for n in range(args.pages)]
    source = urls(pages, allow_private=True)
    embedders = EmbeddingRegistry()
    embedders.register("test/hash-64", HashEmbedder(64))
    collection = knowledge_collection("web", model="test/hash-64", sources=[source])
    indexer = Indexer(memory_index(), embedders)
    first = await indexer.run_pass(collection)
    assert first.last_stats is not None and first.last_stats.embedded == args.pages, first.last_stats

    resync: list[float] = []
    baseline: list[float] = []
    for _ in range(args.repeats):
        started = time.perf_counter()
        meta = await indexer.run_pass(collection)
        resync.append(time.perf_counter() - started)
        stats = meta.last_stats
        assert stats is not None and stats.unchanged == args.pages and stats.embedding_calls == 0, stats
        baseline.append(await direct(pages, source.concurrency))
    server.shutdown()
    ours, theirs = statistics.median(resync), statistics.median(baseline)
    print(
        f"urls() no-op re-sync of {args.pages} loopback pages (concurrency {source.concurrency}), median of "
        f"{args.repeats}:"
    )
    print(f"  re-sync pass, no embedding call      {ours * 1000:8.1f} ms")
    print(f"  {args.pages} conditional GETs with httpx   {theirs * 1000:8.1f} ms")
    print(f"  ratio                                {ours / theirs:8.2f}x  (target <= 1.5x)")
    print(f"  ratio of the fastest of each         {min(resync) / min(baseline):8.2f}x")


if __name__ == "__main__":
    asyncio.run(main())
