"""The sidebar's settings, rule docs and restored layout in real JupyterLab, then the same
panel in Notebook 7 (headless Chromium, see conftest.py). Like test_sidebar.py the tests run
in file order on one server and one page.
"""

from __future__ import annotations

import json
import time
import urllib.request
from typing import Any

import nbformat
import pytest

try:
    from playwright.sync_api import Page, expect
except ImportError:  # the `browser` fixture skips (or fails with CI=true) and says why
    Page, expect = Any, None

from .conftest import ARTIFACTS, LabServer
from .test_sidebar import KERNEL_TIMEOUT, NOTEBOOK, PANEL, open_panel, panel_state, run_cell, wait_restored

TAB = f"li.lm-TabBar-tab[data-id='{PANEL[1:]}']"
PAGE_SIZE_INPUT = "[id='jp-SettingsEditor-torchmagic:sidebar_pageSize']"

CHECK = """%%torchcheck
import torch
import torch.nn as nn

class Net(nn.Module):
    def forward(self, x):
        return x * torch.ones(3)

xs = [torch.zeros(i + 1) for i in range(9)]
"""

# What a kernel whose torchmagic sends the rule catalog says in `hello` (the contract in
# types.ts, IHelloMessage). Run only when the kernel's own hello brought no catalog.
FIX = "self.register_buffer('ones', torch.ones(3))"
CATALOG_HELLO = f"""import comm
_hello = {{"type": "hello", "channel": "test-catalog", "catalog": [{{
    "id": "TM101", "name": "tensor-created-in-forward", "severity": "warning",
    "evidence": ["static"], "what": "Flags `torch.ones(...)` in `forward`.",
    "why": "It builds a new CPU tensor on every call.",
    "example": "def forward(self, x):\\n    return x * torch.ones(3)",
    "fix": {FIX!r}, "overrides": []}}]}}
_catalog_comm = comm.create_comm(target_name="torchmagic", data=_hello)
"""


@pytest.fixture(scope="module")
def notebook(lab: LabServer) -> LabServer:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
    }
    nb.cells = [
        nbformat.v4.new_markdown_cell("# c.ipynb"),
        nbformat.v4.new_code_cell("%load_ext torchmagic"),
        nbformat.v4.new_code_cell(CHECK),
        nbformat.v4.new_code_cell(CATALOG_HELLO),
    ]
    nbformat.write(nb, str(lab.root / "c.ipynb"))
    return lab


def tensors_status(page: Page):
    return page.locator(f"{PANEL} [data-section='tensors'] .tm-Table-status")


def test_page_size_setting_applies_live(page: Page, notebook: LabServer) -> None:
    page.goto(notebook.lab_url("c.ipynb"))
    expect(page.locator(f"{NOTEBOOK} .jp-Cell").first).to_be_visible(timeout=KERNEL_TIMEOUT)
    open_panel(page)
    panel_state(page, "not-loaded")  # the kernel is up and answered: cells may run
    run_cell(page, 1)
    panel_state(page, "attached")
    run_cell(page, 2)
    expect(page.locator(f"{PANEL} .tm-Finding[data-rule='TM101']")).to_be_visible(timeout=KERNEL_TIMEOUT)
    expect(tensors_status(page)).to_have_text("9 rows")

    # Settings Editor: torchmagic is listed with its two settings; a change reaches the open panel.
    page.keyboard.press("Control+,")
    page.locator(".jp-PluginList-entry", has_text="torchmagic").first.click()
    field = page.locator(PAGE_SIZE_INPUT)
    expect(field).to_have_value("50")
    expect(page.locator("[id='jp-SettingsEditor-torchmagic:sidebar_history']")).to_have_value("20")
    field.fill("5")
    field.press("Tab")
    expect(tensors_status(page)).to_have_text("1–5 of 9 rows", timeout=10_000)
    expect(page.locator(f"{PANEL} [data-section='tensors'] tbody tr")).to_have_count(5)
    page.locator(PANEL).screenshot(path=str(ARTIFACTS / "sidebar-page-size.png"))
    page.locator("#jp-main-dock-panel li.lm-TabBar-tab", has_text="c.ipynb").click()


def test_rule_id_expands_its_doc(page: Page) -> None:
    rule = page.locator(f"{PANEL} .tm-Finding[data-rule='TM101'] button.tm-Finding-rule")
    if rule.count() == 0:  # this kernel's torchmagic sends no catalog yet: say what a newer one says
        run_cell(page, 3)
    expect(rule).to_be_visible(timeout=KERNEL_TIMEOUT)
    expect(rule).to_have_attribute("aria-expanded", "false")
    page.locator(f"{NOTEBOOK} .jp-Cell").nth(0).click()  # the checked cell is not the active one
    rule.click()
    doc = page.locator(f"{PANEL} .tm-Finding[data-rule='TM101'] .tm-RuleDoc")
    expect(doc).to_be_visible()
    expect(rule).to_have_attribute("aria-expanded", "true")
    expect(doc.locator(".tm-RuleDoc-what")).not_to_be_empty()
    expect(doc.locator(".tm-mod-fix pre")).not_to_be_empty()
    if doc.locator(".tm-mod-fix pre").inner_text() == FIX:  # our stand-in catalog: exact text
        expect(doc.locator(".tm-RuleDoc-what code")).to_have_text(["torch.ones(...)", "forward"])
    # Opening the doc is not a jump to the cell.
    expect(page.locator(f"{NOTEBOOK} .jp-Cell.jp-mod-active")).not_to_contain_text("%%torchcheck")
    page.locator(PANEL).screenshot(path=str(ARTIFACTS / "sidebar-rule-doc.png"))
    rule.click()
    expect(doc).to_be_hidden()


def workspace(lab: LabServer) -> dict[str, Any]:
    url = f"{lab.url}/lab/api/workspaces/default?token={lab.token}"
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.load(r).get("data", {}).get("layout-restorer:data", {})


def wait_saved(lab: LabServer, side: str, *, open_: bool) -> None:
    """Wait until the workspace on the server has the panel on `side`, open or collapsed."""
    deadline = time.monotonic() + 20
    while True:
        area = workspace(lab).get(side) or {}
        held = PANEL[1:] in (area.get("widgets") or [])
        shown = area.get("current") == PANEL[1:] and not area.get("collapsed", False)
        if held and shown == open_:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"the workspace never saved the panel {side}, open={open_}: {area}")
        time.sleep(0.25)


def reload(page: Page, lab: LabServer) -> None:
    page.goto(lab.lab_url("c.ipynb", reset=False))
    expect(page.locator(f"{NOTEBOOK} .jp-Cell").first).to_be_visible(timeout=KERNEL_TIMEOUT)
    wait_restored(page)


def test_layout_is_restored_after_reload(page: Page, notebook: LabServer) -> None:
    # Move the open panel to the left side area, as a user does from its tab's context menu.
    page.locator(TAB).click(button="right")
    page.locator(".lm-Menu-itemLabel", has_text="Switch Sidebar Side").click()
    left_tab = page.locator(f".jp-SideBar.jp-mod-left {TAB}")
    expect(left_tab).to_be_visible()
    if not page.locator(PANEL).is_visible():
        left_tab.click()
    expect(page.locator(PANEL)).to_be_visible()
    wait_saved(notebook, "left", open_=True)

    reload(page, notebook)
    expect(left_tab).to_be_visible()
    expect(page.locator(PANEL)).to_be_visible()  # open, on the left, without a click
    # The reloaded panel is live: the kernel re-sends its report.
    expect(page.locator(f"{PANEL} .tm-Finding[data-rule='TM101']")).to_be_visible(timeout=KERNEL_TIMEOUT)
    # The page size set in the previous test came back with the settings.
    expect(tensors_status(page)).to_have_text("1–5 of 9 rows")

    left_tab.click()  # collapse
    expect(page.locator(PANEL)).to_be_hidden()
    wait_saved(notebook, "left", open_=False)
    reload(page, notebook)
    expect(left_tab).to_be_visible()
    expect(page.locator(PANEL)).to_be_hidden()

    # Back to the right, open, for the tests that follow.
    left_tab.click(button="right")
    page.locator(".lm-Menu-itemLabel", has_text="Switch Sidebar Side").click()
    open_panel(page)
    expect(page.locator(f".jp-SideBar.jp-mod-right {TAB}")).to_be_visible()


def test_notebook7_shows_the_panel_in_its_right_area(page: Page, notebook: LabServer) -> None:
    pytest.importorskip("notebook", reason="Notebook 7 is not installed (pip install 'notebook>=7')")
    page.goto(f"{notebook.url}/notebooks/c.ipynb?token={notebook.token}")
    expect(page.locator(".jp-Notebook .jp-Cell").first).to_be_visible(timeout=KERNEL_TIMEOUT)
    wait_restored(page)
    if not page.locator(PANEL).is_visible():
        page.locator(".lm-MenuBar-itemLabel", has_text="View").click()
        page.locator(".lm-Menu-itemLabel", has_text="Right Sidebar").hover()
        page.locator(".lm-Menu-itemLabel", has_text="Show torchmagic").click()
    expect(page.locator(PANEL)).to_be_visible()
    # The kernel of c.ipynb still has torchmagic loaded: its last report comes back.
    expect(page.locator(PANEL)).to_have_attribute("data-state", "attached", timeout=KERNEL_TIMEOUT)
    expect(page.locator(f"{PANEL} .tm-Finding[data-rule='TM101']")).to_be_visible(timeout=KERNEL_TIMEOUT)
    expect(tensors_status(page)).to_have_text("1–5 of 9 rows")  # the settings apply here too
    page.locator(PANEL).screenshot(path=str(ARTIFACTS / "sidebar-notebook7.png"))
