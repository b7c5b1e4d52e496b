"""A block of case results as a worker process sends it to the run's process (rageval.pipeline.workers).

What crosses is what the parent cannot rebuild at less cost than the pickle:

- a case's fields, in :class:`CaseResult`'s order, as a plain tuple: unpickled, it is one call of the
  class. (A frozen dataclass with slots is pickled through dataclasses' state functions, which
  read the class's fields and set them one by one: 20,000 cases over two workers spent about 0.5 s
  of the parent's CPU in them.)
- its retrieved chunks that are chunks of the index as (position in the index, score): the parent
  holds the same chunks, so their texts are neither pickled nor, once back, held once per case;
  any other retrieved item as it is.

Equal metric tables, check results, slices and usages are one object in the worker (``SHARED``),
so the pickle holds each once per block; the parent makes each the run's one object
(:meth:`Shared.mapping`, :meth:`Shared.check`) once per block, not once per case.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import fields
from typing import Any

from rageval.pipeline.chunking import Chunk
from rageval.records import CaseResult, Retrieved, Shared

FIELDS = tuple(f.name for f in fields(CaseResult))
RETRIEVED, METRICS, CHECKS = FIELDS.index("retrieved"), FIELDS.index("metrics"), FIELDS.index("checks")
SLICE, USAGE = FIELDS.index("slice"), FIELDS.index("usage")

#: a case result as sent: its fields in order, the retrieved chunks of the index as (position, score)
Sent = tuple[Any, ...]


class Handoff:
    """Packs a worker's results and unpacks them in the parent, over the same ``chunks`` (the index,
    in order: both processes hold it, inherited by fork)."""

    def __init__(self, chunks: Sequence[Chunk], shared: Shared) -> None:
        self.chunks, self.shared = chunks, shared
        self._at = {c.id: i for i, c in enumerate(chunks)}

    def packed(self, result: CaseResult) -> Sent:
        """``result`` as a worker sends it."""
        values = [getattr(result, name) for name in FIELDS]
        if result.retrieved is not None:
            values[RETRIEVED] = tuple(map(self._packed_item, result.retrieved))
        return tuple(values)

    def _packed_item(self, item: Retrieved) -> tuple[int, float | None] | Retrieved:
        at = self._at.get(item.chunk_id)
        if at is None:
            return item
        chunk = self.chunks[at]
        if item.text is chunk.text and item.sections == chunk.sections and item.tokens == chunk.tokens:
            return at, item.score
        return item

    def unpacked(self, block: list[Sent]) -> list[CaseResult]:
        """The results of one block as the worker held them, their equal values the run's one object."""
        chunks, shared = self.chunks, self.shared
        memo: dict[int, Any] = {}     # id of an object of this block (all alive here) -> the run's one

        def one(value: Any, share: Callable[[Any], Any]) -> Any:
            found = memo.get(id(value))
            if found is None:
                found = memo[id(value)] = share(value)
            return found

        out = []
        for sent in block:
            values = list(sent)
            retrieved = values[RETRIEVED]
            if retrieved is not None:
                values[RETRIEVED] = tuple(
                    item if isinstance(item, Retrieved) else chunks[item[0]].retrieved(item[1]) for item in retrieved)
            values[METRICS] = one(values[METRICS], shared.mapping)
            values[SLICE] = one(values[SLICE], shared.mapping)
            values[USAGE] = one(values[USAGE], shared.mapping)
            values[CHECKS] = {name: one(check, shared.check) for name, check in values[CHECKS].items()}
            out.append(CaseResult(*values))
        return out

