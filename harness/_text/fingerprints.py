"""A block's text as an anchor records it, without the text: normalisation, fingerprints and sketches.

Normalisation ``n1`` (the version every fingerprint names): Unicode NFC, then every run of
whitespace (what ``str.isspace`` calls whitespace, the line ends included) becomes one space and
the ends are stripped. Nothing else changes: case, punctuation, quotes and dashes are the author's.
A block's fingerprint is ``n1:`` and the first 16 hex digits of the SHA-256 of its normalised
text; its sketch (``m1:``) is 32 one-byte MinHash values of its casefolded character 5-grams, from
which the similarity of two blocks is estimated without either text.
"""

from __future__ import annotations

import hashlib
import unicodedata
import zlib

import numpy as np

NORMALISATION = "n1"
SKETCH = "m1"
SKETCH_VALUES = 32
_SHINGLE = 5


def normalise(text: str) -> str:
    """Normalisation n1: NFC, every run of whitespace one space, the ends stripped."""
    return " ".join(unicodedata.normalize("NFC", text).split())


def fingerprint(normalised: str) -> str:
    return f"{NORMALISATION}:{hashlib.sha256(normalised.encode('utf-8')).hexdigest()[:16]}"


_PRIME = 4294967291  # the largest prime below 2**32: a * h + b stays below 2**64 for 32-bit a, h and b
# The hash functions' constants: from SHA-256, not from a random generator, so that m1 sketches are the same in every
# version of NumPy.
_SEEDS = [int.from_bytes(hashlib.sha256(f"{SKETCH}:{index}".encode()).digest()[:8], "big")
          for index in range(2 * SKETCH_VALUES)]
_A = np.array([seed % (_PRIME - 1) + 1 for seed in _SEEDS[:SKETCH_VALUES]], dtype=np.uint64)
_B = np.array([seed % _PRIME for seed in _SEEDS[SKETCH_VALUES:]], dtype=np.uint64)


def sketch(normalised: str) -> str:
    """Sketch m1: 32 one-byte MinHash values of the casefolded character 5-grams (the whole text if shorter)."""
    text = normalised.casefold()
    shingles = {text[index:index + _SHINGLE] for index in range(max(1, len(text) - _SHINGLE + 1))}
    hashes = np.fromiter((zlib.crc32(shingle.encode("utf-8")) for shingle in shingles), dtype=np.uint64,
                         count=len(shingles))
    minima = ((hashes[:, None] * _A[None, :] + _B[None, :]) % np.uint64(_PRIME)).min(axis=0)
    return f"{SKETCH}:" + bytes(int(value) & 0xFF for value in minima).hex()


def similarity(one: str, other: str) -> float:
    """The estimated Jaccard similarity of two blocks' 5-gram sets, from their sketches (0 to 1)."""
    first, second = bytes.fromhex(one.partition(":")[2]), bytes.fromhex(other.partition(":")[2])
    agree = sum(x == y for x, y in zip(first, second, strict=True)) / len(first)
    return max(0.0, (agree - 1 / 256) / (1 - 1 / 256))
