"""The old home of :class:`chamvi.Knowledge`, which now lives in ``chamvi.knowledge_standalone``.

It opens the index as the lifecycle does and checks collections as ``App`` does, both above this
package: the name is loaded on first use, and nothing in chamvi imports it from here.
"""

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "Knowledge":
        from chamvi.knowledge_standalone import Knowledge

        return Knowledge
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
