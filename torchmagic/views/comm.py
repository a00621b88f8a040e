"""The sidebar renderer: a `Report` as JSON over the Jupyter comm target ``torchmagic``.

Two directions meet here, so the JupyterLab panel survives reloads and restarts:

- at ``%load_ext torchmagic`` the kernel opens a comm to the frontend's ``torchmagic`` target
  (a panel that is already watching this kernel attaches at once);
- the kernel registers its own ``torchmagic`` target; a panel that appears later (page
  reload, a second browser tab, a reconnect) opens a comm to it and is answered with
  ``hello`` and the recent reports. A kernel without torchmagic has no such target and
  closes that comm, which tells the panel to suggest ``%load_ext torchmagic``.

Every report goes to every open comm; messages carry ``(channel, seq)`` so a panel that holds
two comms to one kernel drops the repeat. Nothing here may raise into the user's cell, and
outside a kernel (terminal IPython, tests) the channel does nothing.
"""

from __future__ import annotations

import logging
import math
import uuid
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from ..report import Finding, Report

TARGET = "torchmagic"

# Reports the kernel keeps for a panel that attaches later, one per cell.
HISTORY_SIZE = 20
# What a panel can do besides showing reports, as it announces it when it attaches.
APPLY_FIX = "apply-fix"
# Fix requests waiting for a panel's answer (a click whose answer never comes is forgotten).
MAX_PENDING = 64

# Rows per list a message carries; the panel paginates, but a namespace with a million
# tensors in a list must not become a 100 MB websocket frame.
MAX_ROWS = 5000

log = logging.getLogger(__name__)


def _in_kernel(shell: Any) -> bool:
    """True inside an ipykernel (where comms reach a frontend), False in terminal IPython."""
    return getattr(shell, "kernel", None) is not None


def json_safe(value: Any) -> Any:
    """`value` with non-finite floats as None and unknown objects as strings.

    Jupyter's JSON packer refuses NaN (and browsers' JSON.parse would too), which would drop
    the whole message; a report must arrive even when one timing is NaN.
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return str(value)


def report_message(
    report: Report, *, channel: str = "", seq: int = 0, max_rows: int = MAX_ROWS
) -> dict[str, Any]:
    """The comm payload for one checked cell: ``{"type": "report", "report": ...}``."""
    data = report.to_dict(max_rows=max_rows)
    truncated: dict[str, int] = dict(data.pop("truncated", {}))
    for key in ("tensors", "modules", "shape_trace", "syncs", "findings", "compile"):
        rows = data.get(key)
        if isinstance(rows, list) and len(rows) > max_rows:
            truncated[key] = len(rows)
            data[key] = rows[:max_rows]
    msg: dict[str, Any] = {"type": "report", "report": json_safe(data), "channel": channel, "seq": seq}
    if truncated:
        msg["truncated"] = truncated
    return msg


class SidebarChannel:
    """Sends each checked cell's `Report` to the JupyterLab sidebar of this kernel."""

    def __init__(self, shell: Any) -> None:
        self.shell = shell
        self.channel = uuid.uuid4().hex
        self._seq = 0
        self._comms: dict[str, Any] = {}
        self._history: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._capabilities: dict[str, set[str]] = {}  # comm id -> what that panel can do
        self._pending: OrderedDict[str, Callable[[bool, str], None]] = OrderedDict()
        self._enabled = _in_kernel(shell)
        self._registered = False
        if not self._enabled:
            return
        try:
            import comm

            comm.get_comm_manager().register_target(TARGET, self._on_open)
            self._registered = True
        except Exception:
            log.debug("torchmagic: cannot register the comm target", exc_info=True)
        try:
            import comm

            c = comm.create_comm(target_name=TARGET, data=self._hello())
            self._adopt(c)
        except Exception:
            log.debug("torchmagic: cannot open the sidebar comm", exc_info=True)

    @property
    def enabled(self) -> bool:
        return self._enabled

    def send(self, report: Report) -> None:
        """Send one report to every attached panel and keep it for panels that attach later."""
        if not self._enabled:
            return
        try:
            self._seq += 1
            msg = report_message(report, channel=self.channel, seq=self._seq)
            key = report.cell_id or f"#{self._seq}"
            self._history.pop(key, None)
            self._history[key] = msg
            while len(self._history) > HISTORY_SIZE:
                self._history.popitem(last=False)
            for c in list(self._comms.values()):
                self._send_on(c, msg)
        except Exception:
            log.debug("torchmagic: cannot send the report", exc_info=True)

    @property
    def can_edit(self) -> bool:
        """A panel that can edit the notebook's cells is attached (JupyterLab, Notebook 7)."""
        return self._enabled and any(APPLY_FIX in caps for caps in self._capabilities.values())

    def apply_fix(
        self, cell_id: str | None, code: str, finding: Finding, on_result: Callable[[bool, str], None]
    ) -> bool:
        """Ask the panels that can edit to apply `finding`'s fix to the cell; `on_result(ok,
        reason)` runs when one answers. The message carries the edits and the source they were
        computed against, never code to run. False when no panel can take it."""
        if not self._enabled or finding.fix is None or not cell_id:
            return False
        targets = [c for cid, c in self._comms.items() if APPLY_FIX in self._capabilities.get(cid, ())]
        if not targets:
            return False
        request = uuid.uuid4().hex
        self._pending[request] = on_result
        while len(self._pending) > MAX_PENDING:
            self._pending.popitem(last=False)
        msg = {
            "type": APPLY_FIX,
            "id": request,
            "cell_id": cell_id,
            "code": code,
            "rule": finding.rule,
            "line": finding.line,
            "fix": finding.fix.to_dict(),
        }
        for c in targets:
            self._send_on(c, msg)
        return True

    def close(self) -> None:
        """Tell the panels torchmagic was unloaded, close the comms and the target."""
        if not self._enabled:
            return
        self._enabled = False
        for c in list(self._comms.values()):
            self._send_on(c, {"type": "closed", "channel": self.channel})
            try:
                c.close()
            except Exception:
                log.debug("torchmagic: cannot close a comm", exc_info=True)
        self._comms.clear()
        self._capabilities.clear()
        self._pending.clear()
        self._history.clear()
        if self._registered:
            try:
                import comm

                manager = comm.get_comm_manager()
                if manager.targets.get(TARGET) == self._on_open:
                    manager.unregister_target(TARGET, self._on_open)
            except Exception:
                log.debug("torchmagic: cannot unregister the comm target", exc_info=True)
            self._registered = False

    # ---- comm plumbing ----------------------------------------------------------------------
    def _hello(self) -> dict[str, Any]:
        from .. import __version__, catalog

        # the rule docs, so the panel can explain a finding's rule without asking again
        return {
            "type": "hello",
            "channel": self.channel,
            "version": __version__,
            "catalog": [r.to_dict() for r in catalog.all_rules()],
        }

    def _adopt(self, c: Any) -> str:
        comm_id = getattr(c, "comm_id", None) or uuid.uuid4().hex
        self._comms[comm_id] = c
        c.on_msg(self._on_msg)
        c.on_close(lambda _msg, comm_id=comm_id: self._forget(comm_id))
        return comm_id

    def _forget(self, comm_id: str) -> None:
        self._comms.pop(comm_id, None)
        self._capabilities.pop(comm_id, None)

    def _note_capabilities(self, comm_id: str, data: dict[str, Any]) -> None:
        caps = data.get("capabilities")
        if isinstance(caps, list):
            self._capabilities[comm_id] = {c for c in caps if isinstance(c, str)}

    def _on_open(self, c: Any, msg: dict[str, Any]) -> None:
        """A panel opened a comm to our target (page reload, new tab): answer with the history."""
        try:
            if not self._enabled:
                c.close()
                return
            comm_id = self._adopt(c)
            data = msg.get("content", {}).get("data") or {}
            if isinstance(data, dict):
                self._note_capabilities(comm_id, data)
            self._replay(c)
        except Exception:
            log.debug("torchmagic: cannot answer a panel", exc_info=True)

    def _on_msg(self, msg: dict[str, Any]) -> None:
        try:
            data = msg.get("content", {}).get("data") or {}
            comm_id = msg.get("content", {}).get("comm_id")
            if not isinstance(data, dict) or comm_id not in self._comms:
                return
            kind = data.get("type")
            if kind in ("request", "capabilities"):
                self._note_capabilities(comm_id, data)
            if kind == "request":
                self._replay(self._comms[comm_id])
            elif kind == "fix-result":
                callback = self._pending.pop(str(data.get("id")), None)
                if callback is not None:
                    callback(bool(data.get("ok")), str(data.get("reason") or ""))
        except Exception:
            log.debug("torchmagic: bad message from a panel", exc_info=True)

    def _replay(self, c: Any) -> None:
        self._send_on(c, self._hello())
        for msg in list(self._history.values()):
            self._send_on(c, msg)

    def _send_on(self, c: Any, msg: dict[str, Any]) -> None:
        try:
            c.send(msg)
        except Exception:
            log.debug("torchmagic: cannot send on a comm", exc_info=True)
