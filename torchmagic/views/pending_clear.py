"""Whether the cell left a `clear_output(wait=True)` pending.

`clear_output(wait=True)` asks the frontend to clear the cell's outputs when the *next* output
arrives. A training loop that prints progress and then calls it leaves the last line on screen
with a clear still pending; any report displayed after the cell would be that next output and
erase the user's final line. While a checked cell runs, this watches the shell's display
publisher (and, between a pending clear and the next write, stdout and stderr) so that the
report is not displayed inline in that case (the sidebar still gets it).
"""

from __future__ import annotations

import sys
from typing import Any


class PendingClear:
    """Watches one cell; `stop()` says whether a wait-clear was still pending at its end."""

    def __init__(self) -> None:
        self.pending = False
        self._pub: Any = None
        self._streams: list[Any] = []

    def start(self, shell: Any) -> None:
        pub = getattr(shell, "display_pub", None)
        if pub is None or "clear_output" in vars(pub) or "publish" in vars(pub):
            return  # absent, or already wrapped by someone else: leave it alone
        clear, publish = pub.clear_output, pub.publish

        def clear_output(wait: bool = False) -> Any:
            result = clear(wait)
            self.pending = bool(wait)
            if wait:
                self._watch_streams()
            return result

        def publish_(data: Any, metadata: Any = None, *args: Any, **kwargs: Any) -> Any:
            # an update of an existing display is not an output that triggers the clear
            if not kwargs.get("update"):
                self._consumed()
            return publish(data, metadata, *args, **kwargs)

        pub.clear_output = clear_output
        pub.publish = publish_
        self._pub = pub

    def stop(self) -> bool:
        pending = self.pending
        self._unwatch_streams()
        pub, self._pub = self._pub, None
        if pub is not None:
            for name in ("clear_output", "publish"):
                vars(pub).pop(name, None)
        self.pending = False
        return pending

    def _consumed(self) -> None:
        self.pending = False
        self._unwatch_streams()

    def _watch_streams(self) -> None:
        for stream in (sys.stdout, sys.stderr):
            if stream is None or any(s is stream for s, _, _ in self._streams):
                continue
            try:
                own = vars(stream)  # ipykernel's OutStream keeps its own `write` here
                before = own.get("write", _MISSING)
                write = stream.write

                def watched(text: str, write: Any = write) -> Any:
                    if text:
                        self._consumed()
                    return write(text)

                stream.write = watched
                self._streams.append((stream, before, watched))
            except (TypeError, AttributeError):
                continue  # a stream without an instance dict: not watched

    def _unwatch_streams(self) -> None:
        for stream, before, watched in self._streams:
            try:
                if vars(stream).get("write") is watched:
                    if before is _MISSING:
                        del stream.write
                    else:
                        stream.write = before
            except (TypeError, AttributeError):
                pass
        self._streams = []


_MISSING = object()
