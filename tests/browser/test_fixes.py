"""Apply fix in real JupyterLab and Notebook 7 (headless Chromium, see conftest.py): from the
sidebar, and from the widget under the cell through the kernel. The cell's source is edited
through the notebook model in one undo step, and the cell is not run.
"""

from __future__ import annotations

from typing import Any

import nbformat
import pytest

try:
    from playwright.sync_api import Page, expect
except ImportError:  # the `browser` fixture skips (or fails with CI=true) and says why
    Page, expect = Any, None

from .conftest import ARTIFACTS, LabServer
from .test_sidebar import KERNEL_TIMEOUT, NOTEBOOK, PANEL, open_panel, panel_state, run_cell, wait_restored

CHECK = """%%torchcheck
import torch
import torch.nn as nn
from torch.autograd import Variable

w = nn.Linear(2, 2).weight
nn.init.normal(w)
x = Variable(torch.ones(2))
"""
FIXED_INIT = CHECK.replace("nn.init.normal(w)", "nn.init.normal_(w)")
FIXED_BOTH = FIXED_INIT.replace("x = Variable(torch.ones(2))", "x = torch.ones(2)")


@pytest.fixture(scope="module")
def notebook(lab: LabServer) -> LabServer:
    for name in ("fix.ipynb", "fix7.ipynb"):
        nb = nbformat.v4.new_notebook()
        nb.metadata["kernelspec"] = {
            "name": "python3",
            "display_name": "Python 3 (ipykernel)",
            "language": "python",
        }
        nb.cells = [nbformat.v4.new_code_cell("%load_ext torchmagic"), nbformat.v4.new_code_cell(CHECK)]
        nbformat.write(nb, str(lab.root / name))
    return lab


def cell_source(page: Page, index: int) -> str:
    """The cell's source as the notebook model holds it (what is saved and what runs)."""
    return page.evaluate(
        """i => {
            const nb = window.jupyterapp.shell.currentWidget.content;
            return nb.model.cells.get(i).sharedModel.getSource();
        }""",
        index,
    )


def execution_count(page: Page, index: int) -> Any:
    return page.evaluate(
        "i => window.jupyterapp.shell.currentWidget.content.model.cells.get(i).executionCount", index
    )


def settled_count(page: Page, index: int) -> int:
    """The cell's execution count once the execute reply has set it: the findings can show
    before it does on a loaded machine."""
    page.wait_for_function(
        "i => window.jupyterapp.shell.currentWidget.content.model.cells.get(i).executionCount !== null",
        arg=index,
        timeout=KERNEL_TIMEOUT,
    )
    return execution_count(page, index)


def finding(page: Page, rule: str):
    return page.locator(f"{PANEL} .tm-Finding[data-rule='{rule}']")


def test_apply_fix_in_the_sidebar_edits_the_cell_in_one_undo_step(page: Page, notebook: LabServer) -> None:
    page.goto(notebook.lab_url("fix.ipynb"))
    expect(page.locator(f"{NOTEBOOK} .jp-Cell").first).to_be_visible(timeout=KERNEL_TIMEOUT)
    open_panel(page)
    panel_state(page, "not-loaded")  # the kernel is up (and has no torchmagic yet)
    run_cell(page, 0)
    panel_state(page, "attached")
    run_cell(page, 1)
    tm902 = finding(page, "TM902")
    expect(tm902).to_be_visible(timeout=KERNEL_TIMEOUT)
    expect(tm902.locator(".tm-Finding-fix")).to_contain_text("Fix: Call normal_")
    count = settled_count(page, 1)
    page.locator(f"{NOTEBOOK} .jp-Cell").nth(0).click()  # the checked cell is not the active one
    tm902.locator("button.tm-Finding-apply").click()
    expect(tm902.locator(".tm-Finding-fixStatus")).to_have_text("Applied — run the cell to check it again.")
    assert cell_source(page, 1) == FIXED_INIT
    assert execution_count(page, 1) == count  # edited, not run
    # the edited cell is revealed and shows the new text
    active = page.locator(f"{NOTEBOOK} .jp-Cell.jp-mod-active")
    expect(active).to_contain_text("nn.init.normal_(w)")
    page.locator(PANEL).screenshot(path=str(ARTIFACTS / "sidebar-apply-fix.png"))

    # one undo step takes the whole fix back
    active.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Control+z")
    page.wait_for_function(
        "src => window.jupyterapp.shell.currentWidget.content.model.cells.get(1).sharedModel.getSource() === src",
        arg=CHECK,
        timeout=10_000,
    )
    page.keyboard.press("Control+Shift+z")
    page.wait_for_function(
        "src => window.jupyterapp.shell.currentWidget.content.model.cells.get(1).sharedModel.getSource() === src",
        arg=FIXED_INIT,
        timeout=10_000,
    )


def test_a_fix_for_a_cell_edited_since_is_refused(page: Page) -> None:
    tm404 = finding(page, "TM404")
    # the cell changed (the TM902 fix) since this report: the TM404 edits no longer apply
    tm404.locator("button.tm-Finding-apply").click()
    expect(tm404.locator(".tm-Finding-fixStatus")).to_contain_text("changed since it was checked")
    assert cell_source(page, 1) == FIXED_INIT


def test_apply_fix_in_the_widget_under_the_cell_goes_through_the_kernel(page: Page) -> None:
    run_cell(page, 1)  # a fresh report: the TM404 fix matches the cell again
    widget = page.locator(f"{NOTEBOOK} .jp-Cell").nth(1).locator(".jp-OutputArea-output")
    button = widget.locator("button", has_text="Apply fix")
    expect(button).to_have_count(1, timeout=KERNEL_TIMEOUT)  # only TM404 is left
    count = settled_count(page, 1)
    button.click()
    expect(widget.locator("button", has_text="Applied")).to_be_visible(timeout=KERNEL_TIMEOUT)
    expect(widget).to_contain_text("run it to check it again")
    assert cell_source(page, 1) == FIXED_BOTH
    assert execution_count(page, 1) == count
    page.locator(f"{NOTEBOOK} .jp-Cell").nth(1).screenshot(path=str(ARTIFACTS / "widget-apply-fix.png"))
    # the fixed cell runs and has nothing left to fix
    run_cell(page, 1)
    expect(page.locator(f"{PANEL} .tm-Finding")).to_have_count(0, timeout=KERNEL_TIMEOUT)


def test_notebook7_applies_a_fix_from_its_right_panel(page: Page, notebook: LabServer) -> None:
    pytest.importorskip("notebook", reason="Notebook 7 is not installed (pip install 'notebook>=7')")
    page.goto(f"{notebook.url}/notebooks/fix7.ipynb?token={notebook.token}")
    expect(page.locator(".jp-Notebook .jp-Cell").first).to_be_visible(timeout=KERNEL_TIMEOUT)
    wait_restored(page)
    if not page.locator(PANEL).is_visible():
        page.locator(".lm-MenuBar-itemLabel", has_text="View").click()
        page.locator(".lm-Menu-itemLabel", has_text="Right Sidebar").hover()
        page.locator(".lm-Menu-itemLabel", has_text="Show torchmagic").click()
    expect(page.locator(PANEL)).to_be_visible()
    panel_state(page, "not-loaded")
    for i in (0, 1):
        page.locator(".jp-Notebook .jp-Cell").nth(i).locator(".jp-InputArea-editor").click()
        page.keyboard.press("Shift+Enter")
    tm902 = finding(page, "TM902")
    expect(tm902).to_be_visible(timeout=KERNEL_TIMEOUT)
    tm902.locator("button.tm-Finding-apply").click()
    expect(tm902.locator(".tm-Finding-fixStatus")).to_have_text("Applied — run the cell to check it again.")
    assert cell_source(page, 1) == FIXED_INIT
