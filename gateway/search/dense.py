"""Dense ranking beside BM25, for ``tool_search: {dense: true}`` (the ``search-dense`` extra): WordLlama's static
token embeddings (``l2_supercat``, 256 dimensions), whose weights and tokenizer ship inside its wheel, so nothing is
ever downloaded. WordLlama looks for its tokenizer in ``wordllama/tokenizer/`` (and would fetch it from the
Hugging Face hub) while the wheel ships it in ``wordllama/tokenizers/``: both files are loaded here by their paths.

A text's vector is the mean of its tokens' embeddings, normalised: a query and a tool meet when their words are
near in meaning ("rain" and "weather forecast"), which BM25 cannot see. On the bench's BFCL pool, fused with BM25
by reciprocal rank, it adds about two points of recall (``docs/search.md``); alone it is weaker than BM25.
"""

from __future__ import annotations

import threading
from functools import lru_cache
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import numpy as np

DIMENSIONS = 256
_lock = threading.Lock()


def available() -> bool:
    """Whether the ``search-dense`` extra is installed (without importing it)."""
    return find_spec("wordllama") is not None


@lru_cache(maxsize=1)
def _model() -> Any:
    with _lock:
        import wordllama
        from safetensors import safe_open
        from wordllama import WordLlama
        from wordllama.inference import WordLlamaInference

        root = Path(wordllama.__file__).parent
        tokenizer = WordLlama.load_tokenizer(root / "tokenizers" / "l2_supercat_tokenizer_config.json",
                                             hf_model_id=None)
        with safe_open(str(root / "weights" / f"l2_supercat_{DIMENSIONS}.safetensors"), framework="np",
                       device="cpu") as weights:
            embedding = weights.get_tensor("embedding.weight")
        return WordLlamaInference(embedding, tokenizer, binary=False)


def embed(texts: list[str]) -> np.ndarray:
    """One normalised float32 row per text."""
    if not texts:
        return np.zeros((0, DIMENSIONS), dtype=np.float32)
    return np.asarray(_model().embed(texts, norm=True), dtype=np.float32)
