"""LastingMemo: what generators keep from one push to the next.

`PushContext.memo` starts empty with every push, so a push after one VirtualService changed
rebuilt every virtual host of the changed port for every proxy class. A LastingMemo is handed
from a push to the next one (build_push_context with `prev`). It holds two generations: what
this push stored or used, and what the previous push did. An entry not used by a push is
gone after the next one, so memory stays bounded by what two pushes need. A push after a
change of endpoints alone keeps the very memo of the push before it (model/push_context.py
`_lasting`): it builds none of what the memo holds, and is not counted as a generation.

The memo never decides whether an entry is still right: whoever stores an entry keys it
on, or checks it against, everything it was made from (by object identity: the store keeps
the very objects it did not read again).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

__all__ = ["LastingMemo"]


@dataclass(slots=True)
class LastingMemo:
    current: dict[Hashable, object] = field(default_factory=dict)
    previous: dict[Hashable, object] = field(default_factory=dict)

    def get(self, key: Hashable) -> object | None:
        """This push's entry, else the previous push's (kept for this push on the way)."""
        found = self.current.get(key)
        if found is None:
            found = self.previous.get(key)
            if found is not None:
                self.current[key] = found
        return found

    def previous_entry(self, key: Hashable) -> object | None:
        """The previous push's entry only (for an entry that is rebuilt per push from it)."""
        return self.previous.get(key)

    def put(self, key: Hashable, value: object) -> None:
        self.current[key] = value

    def successor(self) -> LastingMemo:
        """The memo of the next push: this push's entries become its previous generation."""
        return LastingMemo({}, self.current)
