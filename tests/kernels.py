"""Driving a real ipykernel through jupyter_client, as a notebook frontend does."""

from __future__ import annotations

import queue
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.manager import start_new_kernel

TIMEOUT = 60


@contextmanager
def running_kernel(env: dict[str, str] | None = None) -> Iterator[BlockingKernelClient]:
    """A fresh python3 kernel; `env`: its whole environment (default: this process's)."""
    km, kc = start_new_kernel(kernel_name="python3", **({"env": env} if env is not None else {}))
    try:
        yield kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


@dataclass
class Execution:
    reply: dict[str, Any]  # the execute_reply content
    msgs: list[dict[str, Any]]  # iopub messages of this request, up to idle

    @property
    def stdout(self) -> str:
        return "".join(
            m["content"]["text"]
            for m in self.msgs
            if m["msg_type"] == "stream" and m["content"]["name"] == "stdout"
        )

    def of_type(self, msg_type: str) -> list[dict[str, Any]]:
        return [m for m in self.msgs if m["msg_type"] == msg_type]


def execute(kc: BlockingKernelClient, code: str, *, metadata: dict[str, Any] | None = None) -> Execution:
    """Run `code` (with the request metadata a frontend would send) and collect what it sent."""
    content = {
        "code": code,
        "silent": False,
        "store_history": True,
        "user_expressions": {},
        "allow_stdin": False,
    }
    msg = kc.session.msg("execute_request", content, metadata=metadata or {})
    kc.shell_channel.send(msg)
    msg_id = msg["header"]["msg_id"]
    reply = kc.get_shell_msg(timeout=TIMEOUT)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = kc.get_shell_msg(timeout=TIMEOUT)
    msgs = []
    while True:
        try:
            m = kc.get_iopub_msg(timeout=TIMEOUT)
        except queue.Empty:
            break
        if m["parent_header"].get("msg_id") != msg_id:
            continue
        if m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
            break
        msgs.append(m)
    return Execution(reply["content"], msgs)
