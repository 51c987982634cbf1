"""The Python heap of a control plane: a big, long-lived object graph plus short bursts.

A PushContext and the inputs behind it are hundreds of thousands of objects that live until
the next push. Left in the collector's view, every full collection walks all of them while
generation allocates; freezing them once the push is built (gc.freeze) removed a third of
cold generation time in bench/translate.py.
"""

from __future__ import annotations

import gc

__all__ = ["FrozenSet", "settle_long_lived_objects"]


def settle_long_lived_objects() -> None:
    """Collect garbage, then exempt everything still alive from future collections.

    Call it after building a PushContext. Frozen objects are never collected, so a
    long-running process should call `gc.unfreeze()` when it drops an old push.
    """
    gc.collect()
    gc.freeze()


class FrozenSet:
    """The frozen part of a long-running server's heap, settled after each push.

    Dropping an old push frees it by reference counting even while frozen (pushes hold no
    reference cycles), so nothing is thawed per push. As a guard against cycles creeping
    in, the frozen set is thawed and collected once it has doubled since the last thaw,
    unless the proxies connected grew as much meanwhile (half again as many): their
    streams' state is what grew, and thawing then would be a stop-the-world collection of
    the whole heap for nothing; the count starts again from
    there instead.
    """

    def __init__(self) -> None:
        self.baseline = 0  # frozen objects after the last thaw (0: none yet)
        self.streams = 0  # proxies connected then
        self.thaws = 0

    def settle(self, collect: bool, streams: int) -> None:
        """After a push: collect (`collect`, or a thaw) and freeze what is left."""
        if self.baseline and gc.get_freeze_count() > 2 * self.baseline:
            if streams > 1.5 * self.streams:
                self.baseline = 0
            else:
                gc.unfreeze()
                self.baseline = 0
                self.thaws += 1
                collect = True
        if collect:
            settle_long_lived_objects()
        else:
            gc.freeze()
        if not self.baseline:
            self.baseline, self.streams = max(gc.get_freeze_count(), 1), streams
