/** Reveal a checked cell in its notebook: select it, scroll to it, put the cursor on the line. */

import type { NotebookPanel } from '@jupyterlab/notebook';

import type { IFinding } from './types';

/** Returns false when the notebook has no cell with that id (deleted since it was checked). */
export async function revealCell(panel: NotebookPanel, cellId: string, finding?: IFinding | null): Promise<boolean> {
  const notebook = panel.content;
  const index = notebook.widgets.findIndex(cell => cell.model.id === cellId);
  if (index < 0) {
    return false;
  }
  notebook.mode = 'command';
  notebook.deselectAll();
  notebook.activeCellIndex = index;
  try {
    await notebook.scrollToItem(index, 'smart');
  } catch {
    // scrolling is best effort; the cell is selected either way
  }
  const cell = notebook.widgets[index];
  const line = finding?.line;
  if (cell?.editor && typeof line === 'number' && line >= 1) {
    const lineCount = cell.editor.lineCount;
    cell.editor.setCursorPosition({ line: Math.min(line, lineCount) - 1, column: Math.max(0, finding?.col ?? 0) });
  }
  notebook.activate();
  return true;
}
