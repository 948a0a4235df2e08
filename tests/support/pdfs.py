"""PDFs written byte by byte: page tree bombs and loops that no PDF library would write.

``page_tree_bomb()`` is the shape of the 1.6 KB file that expanded to 97 336 pages: each ``/Pages``
node lists the next one 46 times, three levels deep, above one page.
"""

from __future__ import annotations

from collections.abc import Sequence

_FONT = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"


def hand_pdf(objects: Sequence[bytes]) -> bytes:
    """A PDF of ``objects`` (object 1 is the catalog), with a correct cross-reference table."""
    out = b"%PDF-1.4\n"
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{offset:010d} 00000 n \n".encode() for offset in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return out


def _page(number: int, text: str) -> list[bytes]:
    """A page (object ``number``), its content stream and its font, drawing ``text``."""
    stream = f"BT /F1 12 Tf 20 100 Td ({text}) Tj ET".encode()
    return [
        f"<< /Type /Page /MediaBox [0 0 300 200] /Contents {number + 1} 0 R "
        f"/Resources << /Font << /F1 {number + 2} 0 R >> >> >>".encode(),
        f"<< /Length {len(stream)} >>\nstream\n".encode() + stream + b"\nendstream",
        _FONT,
    ]


def page_tree_bomb(fan: int = 46, levels: int = 3) -> bytes:
    """``fan ** levels`` pages (97 336 by default) from one page and ``levels`` nodes, about 1.5 KB.

    Its root claims ``/Count 1``: the count a reader trusts without walking the tree.
    """
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>"]
    for _ in range(levels):
        kids = " ".join([f"{len(objects) + 2} 0 R"] * fan)
        objects.append(f"<< /Type /Pages /Count 1 /Kids [{kids}] >>".encode())
    return hand_pdf([*objects, *_page(len(objects) + 1, "boom")])


def looping_page_tree() -> bytes:
    """A page tree whose node lists its own parent among its kids."""
    return hand_pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Count 1 /Kids [3 0 R] >>",
            b"<< /Type /Pages /Count 1 /Kids [2 0 R] >>",
        ]
    )


def empty_node_bomb(levels: int = 60) -> bytes:
    """No page at all, but ``2 ** levels`` ``/Pages`` nodes once expanded (each lists the next twice)."""
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>"]
    for _ in range(levels):
        objects.append(f"<< /Type /Pages /Kids [{len(objects) + 2} 0 R {len(objects) + 2} 0 R] >>".encode())
    return hand_pdf([*objects, b"<< /Type /Pages /Kids [] >>"])


def text_pdf(pages: Sequence[str]) -> bytes:
    """One page per text, in a flat page tree (ASCII text without parentheses)."""
    first = 3
    numbers = [first + 3 * i for i in range(len(pages))]
    kids = " ".join(f"{n} 0 R" for n in numbers)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Count {len(pages)} /Kids [{kids}] >>".encode(),
    ]
    for number, text in zip(numbers, pages, strict=True):
        objects.extend(_page(number, text))
    return hand_pdf(objects)
