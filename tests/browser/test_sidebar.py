"""The torchmagic sidebar in real JupyterLab, headless Chromium (see conftest.py).

The tests share one server and one page and run in file order, like a user session: load
torchmagic, check a cell, click a finding, switch notebooks, reload in the dark theme,
restart the kernel.
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

PANEL = "#torchmagic-sidebar"
NOTEBOOK = ".jp-NotebookPanel:not(.lm-mod-hidden)"
KERNEL_TIMEOUT = 60_000

CHECK_A = """%%torchcheck
import torch
import torch.nn as nn

class Net(nn.Module):
    def forward(self, x):
        return x * torch.ones(3)

x = torch.randn(3, 4)
net = Net()
out = net(torch.randn(2, 3))
total = 0.0
for i in range(3):
    total += x[i].sum().item()
"""

CHECK_B = """%%torchcheck
import torch
only_in_b = torch.zeros(5, 2, dtype=torch.int64)
d = {"<img src=x onerror=window.__pwned=1>": torch.ones(1)}
"""

CHECK_C = """%%torchcheck
import torch

@torch.compile(backend="eager")
def step(x):
    print("inside step")
    return x * 2

for n in (4, 5):
    out = step(torch.randn(n))
"""


def write_notebook(lab: LabServer, name: str, check: str) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
    }
    nb.cells = [
        nbformat.v4.new_markdown_cell(f"# {name}"),
        # CPU syncs are timed too, so the sync-stall table has rows on a machine without a GPU.
        nbformat.v4.new_code_cell("%load_ext torchmagic\n%config TorchCheck.sync_devices = ['cpu']"),
        nbformat.v4.new_code_cell(check),
    ]
    nbformat.write(nb, str(lab.root / name))


def panel_state(page: Page, state: str) -> None:
    expect(page.locator(PANEL)).to_have_attribute("data-state", state, timeout=KERNEL_TIMEOUT)


def run_cell(page: Page, index: int) -> None:
    """Select cell `index` of the visible notebook and run it with Shift+Enter."""
    cell = page.locator(f"{NOTEBOOK} .jp-Cell").nth(index)
    cell.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Shift+Enter")


def wait_restored(page: Page) -> None:
    """Wait until the app has put back the saved layout (panels open or collapsed, on their side)."""
    page.wait_for_function("() => !!window.jupyterapp", polling=500, timeout=KERNEL_TIMEOUT)
    page.evaluate("() => window.jupyterapp.restored.then(() => true)")


def open_panel(page: Page) -> None:
    """Open the panel from its tab unless it is open already (the layout restorer reopens it
    after a reload where the user left it open)."""
    wait_restored(page)
    tab = page.locator(f"li.lm-TabBar-tab[data-id='{PANEL[1:]}']")
    expect(tab).to_be_visible()
    if not page.locator(PANEL).is_visible():
        tab.click()
    expect(page.locator(PANEL)).to_be_visible()


@pytest.fixture(scope="module")
def notebooks(lab: LabServer) -> LabServer:
    write_notebook(lab, "a.ipynb", CHECK_A)
    write_notebook(lab, "b.ipynb", CHECK_B)
    write_notebook(lab, "c.ipynb", CHECK_C)
    return lab


def test_panel_asks_to_load_torchmagic(page: Page, notebooks: LabServer) -> None:
    page.goto(notebooks.lab_url("a.ipynb"))
    expect(page.locator(f"{NOTEBOOK} .jp-Cell").first).to_be_visible(timeout=KERNEL_TIMEOUT)
    tab = page.locator(f"li.lm-TabBar-tab[data-id='{PANEL[1:]}']")
    expect(tab).to_have_attribute("title", "torchmagic")
    open_panel(page)
    panel_state(page, "not-loaded")
    expect(page.locator(f"{PANEL} .tm-Status")).to_contain_text("%load_ext torchmagic")


def test_checked_cell_shows_finding_and_tensor(page: Page) -> None:
    run_cell(page, 1)
    panel_state(page, "attached")
    run_cell(page, 2)
    finding = page.locator(f"{PANEL} .tm-Finding[data-rule='TM101']")
    expect(finding).to_be_visible(timeout=KERNEL_TIMEOUT)
    expect(finding).to_contain_text("torch.ones")
    expect(page.locator(f"{PANEL} .tm-Summary")).to_contain_text("W")
    row = page.locator(f"{PANEL} [data-section='tensors'] tbody tr", has_text="(3, 4)")
    expect(row.locator("td").first).to_have_text("x")
    expect(row).to_contain_text("float32")
    expect(page.locator(f"{PANEL} .tm-Totals")).to_contain_text("cpu")
    page.locator(f"{PANEL} [data-section='shapes'] summary").click()
    shapes = page.locator(f"{PANEL} [data-section='shapes'] tbody")
    expect(shapes).to_contain_text("(2, 3)")
    page.locator(f"{PANEL} [data-section='syncs'] summary").click()
    expect(page.locator(f"{PANEL} [data-section='syncs'] tbody")).to_contain_text(".item()")
    page.locator(f"{PANEL} [data-section='modules'] summary").click()
    expect(page.locator(f"{PANEL} [data-section='modules'] tbody")).to_contain_text("Net")
    page.locator(PANEL).screenshot(path=str(ARTIFACTS / "sidebar-light.png"))
    widen_panel(page, 420)
    page.set_viewport_size({"width": 1400, "height": 1250})  # the whole panel, for docs/sidebar.png
    page.locator(PANEL).evaluate("n => { n.scrollTop = 0; }")
    page.locator(PANEL).screenshot(path=str(ARTIFACTS / "sidebar-light-wide.png"))
    page.set_viewport_size({"width": 1400, "height": 900})
    expect(page.locator(f"{PANEL} [data-section='tensors'] th", has_text="dtype")).to_be_visible()


def test_clicking_a_finding_selects_its_cell(page: Page) -> None:
    page.locator(f"{NOTEBOOK} .jp-Cell").nth(0).click()  # move away from the checked cell
    expect(page.locator(f"{NOTEBOOK} .jp-Cell.jp-mod-active")).not_to_contain_text("%%torchcheck")
    page.locator(f"{PANEL} .tm-Finding[data-rule='TM101']").click()
    active = page.locator(f"{NOTEBOOK} .jp-Cell.jp-mod-active")
    expect(active).to_have_count(1)
    expect(active).to_contain_text("%%torchcheck")
    expect(active).to_be_in_viewport()


def test_panel_follows_the_current_notebook(page: Page) -> None:
    page.locator(".jp-DirListing-item", has_text="b.ipynb").dblclick()
    expect(page.locator(f"{NOTEBOOK} .jp-Cell").first).to_contain_text("b.ipynb", timeout=KERNEL_TIMEOUT)
    panel_state(page, "not-loaded")  # b's own kernel has no torchmagic yet
    expect(page.locator(f"{PANEL} .tm-Finding")).to_have_count(0)
    run_cell(page, 1)
    panel_state(page, "attached")
    run_cell(page, 2)
    tensors = page.locator(f"{PANEL} [data-section='tensors'] tbody")
    expect(tensors).to_contain_text("only_in_b", timeout=KERNEL_TIMEOUT)
    expect(tensors).not_to_contain_text("(3, 4)")
    # Names from the kernel are text: a dict key holding markup shows as characters, runs nothing.
    expect(tensors).to_contain_text("<img src=x onerror=window.__pwned=1>")
    expect(page.locator(f"{PANEL} img")).to_have_count(0)
    assert page.evaluate("() => window.__pwned") is None

    # Back to a.ipynb: its report comes back without running anything.
    page.locator("#jp-main-dock-panel li.lm-TabBar-tab", has_text="a.ipynb").click()
    expect(page.locator(f"{PANEL} .tm-Finding[data-rule='TM101']")).to_be_visible()
    expect(tensors).not_to_contain_text("only_in_b")


def test_page_reload_reattaches_in_the_dark_theme(page: Page, notebooks: LabServer) -> None:
    notebooks.set_setting("@jupyterlab/apputils-extension:themes", {"theme": "JupyterLab Dark"})
    page.goto(notebooks.lab_url("a.ipynb", reset=False))
    expect(page.locator("body")).to_have_attribute("data-jp-theme-light", "false", timeout=KERNEL_TIMEOUT)
    open_panel(page)
    # The kernel re-sends its last report to the new page's panel.
    expect(page.locator(f"{PANEL} .tm-Finding[data-rule='TM101']")).to_be_visible(timeout=KERNEL_TIMEOUT)
    expect(page.locator(f"{PANEL} [data-section='tensors'] tbody")).to_contain_text("(3, 4)")
    background = page.locator(PANEL).evaluate("n => getComputedStyle(n).backgroundColor")
    text = page.locator(f"{PANEL} .tm-Finding-message").first.evaluate("n => getComputedStyle(n).color")
    assert luminance(background) < 0.3 < luminance(text), (background, text)
    page.locator(PANEL).screenshot(path=str(ARTIFACTS / "sidebar-dark.png"))

    # Collapse the panel, check the cell again, open the panel: it shows the new report.
    tab = page.locator(f"li.lm-TabBar-tab[data-id='{PANEL[1:]}']")
    tab.click()
    expect(page.locator(PANEL)).to_be_hidden()
    run_cell(page, 2)
    expect(page.locator(f"{NOTEBOOK} .jp-Cell").nth(2).locator(".jp-InputPrompt")).to_contain_text(
        "3", timeout=KERNEL_TIMEOUT
    )
    open_panel(page)
    expect(page.locator(f"{PANEL} .tm-SummaryCell")).to_contain_text("Cell [3]")
    expect(page.locator(f"{PANEL} .tm-FindingGroup")).to_have_count(1)
    notebooks.set_setting("@jupyterlab/apputils-extension:themes", {"theme": "JupyterLab Light"})


def test_kernel_restart_resets_the_panel(page: Page) -> None:
    page.locator(f"{NOTEBOOK} .jp-Cell").nth(0).click()
    page.keyboard.press("Escape")
    page.keyboard.press("0")
    page.keyboard.press("0")
    page.locator(".jp-Dialog .jp-mod-accept").click()
    expect(page.locator(f"{PANEL} .tm-Finding")).to_have_count(0, timeout=KERNEL_TIMEOUT)
    panel_state(page, "not-loaded")
    expect(page.locator(f"{PANEL} .tm-Status")).to_contain_text("%load_ext torchmagic")


def test_compiled_cell_fills_the_compile_section(page: Page) -> None:
    page.locator(".jp-DirListing-item", has_text="c.ipynb").dblclick()
    expect(page.locator(f"{NOTEBOOK} .jp-Cell").first).to_contain_text("c.ipynb", timeout=KERNEL_TIMEOUT)
    panel_state(page, "not-loaded")
    expect(page.locator(f"{PANEL} [data-section='compile']")).to_be_hidden()
    run_cell(page, 1)
    panel_state(page, "attached")
    run_cell(page, 2)
    finding = page.locator(f"{PANEL} .tm-Finding[data-rule='TM950']")
    expect(finding).to_be_visible(timeout=KERNEL_TIMEOUT)
    expect(finding).to_contain_text("print")
    section = page.locator(f"{PANEL} [data-section='compile']")
    expect(section).to_be_visible()
    section.locator("summary").click()
    row = section.locator("tbody tr", has_text="step")
    expect(row).to_be_visible()
    assert "x.shape[0]" in (row.get_attribute("title") or "")
    page.locator(PANEL).screenshot(path=str(ARTIFACTS / "sidebar-compile.png"))


def widen_panel(page: Page, width: int) -> None:
    """Drag the handle between the main area and the right side area."""
    box = page.locator(PANEL).bounding_box()
    assert box is not None
    x, y = box["x"] - 2, box["y"] + box["height"] / 2
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x - (width - box["width"]), y, steps=5)
    page.mouse.up()


def luminance(css_color: str) -> float:
    parts = css_color[css_color.index("(") + 1 : css_color.index(")")].split(",")
    r, g, b = (float(p) / 255 for p in parts[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b
