"""Provider objects given where a model ref is expected, and the stable refs they are known by.

An agent's ``model=``, the App's ``model=`` and ``embedding_model=``, and a collection's ``model=``
take a ``<provider>/<model id>`` string or the provider's object itself (a ``ChatModel``, an
``Embedder``). The workflow never sees an object: the App registers each under a ref, and the
serialisable agent description carries that ref.

- An embedding model always has a ``ref`` (the ``Embedder`` protocol): it is the object's name. It
  names the collection's generation, so keep it stable: another ref re-embeds the collection.
- A chat model is known by its own ``ref`` attribute when it has one (``<provider>/<model id>``),
  else by ``object/<its class name in kebab case>`` (``ScriptedModel`` -> ``object/scripted-model``),
  with ``-2``, ``-3`` ... for a second and third object of one class, in the order the App meets them
  (its ``model=`` first, then each agent's). A chat model's ref is shown (activity summaries, spans),
  never stored as a key, so a new order costs nothing but a label.
"""

from __future__ import annotations

import re
from collections.abc import MutableMapping
from typing import Any

from chamvi.errors import InvalidAppError


def is_chat_model(value: Any) -> bool:
    """Whether ``value`` is a chat model object (it has ``complete(request)``)."""
    return not isinstance(value, str) and callable(getattr(value, "complete", None))


def is_embedder(value: Any) -> bool:
    """Whether ``value`` is an embedding model object (it has ``embed(texts)`` and a ``ref``)."""
    return not isinstance(value, str) and callable(getattr(value, "embed", None))


def _kebab(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "-", name).lower()


def chat_ref(model: Any, known: MutableMapping[str, Any]) -> str:
    """The ref ``model`` (an object) is registered under; ``known`` holds the objects given so far.

    The same object answers the same ref each time it is given.
    """
    for ref, seen in known.items():
        if seen is model:
            return ref
    own = getattr(model, "ref", None)
    base = own if isinstance(own, str) and "/" in own else f"object/{_kebab(type(model).__name__)}"
    ref, n = base, 1
    while ref in known:
        n += 1
        ref = f"{base}-{n}"
    known[ref] = model
    return ref


def embedder_ref(embedder: Any, known: MutableMapping[str, Any], what: str) -> str:
    """The ref of an embedding model object: its own ``ref``, which must be a ``<provider>/<model>``.

    Raises:
        InvalidAppError: the object has no such ref, or another object of the App has the same one.
    """
    ref = getattr(embedder, "ref", None)
    if not isinstance(ref, str) or "/" not in ref:
        raise InvalidAppError(
            f"{what}: the embedding model {embedder!r} has ref {ref!r}: give it a '<provider>/<model>' "
            "ref, which names the collection's generation"
        )
    seen = known.setdefault(ref, embedder)
    if seen is not embedder:
        raise InvalidAppError(
            f"{what}: two embedding model objects have the ref {ref!r}: give each its own ref"
        )
    return ref
