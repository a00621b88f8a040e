/**
 * Apply a finding's fix to its cell through the notebook model: one transaction (one undo
 * step), the cell is not run. Edits come from the kernel as (line, column) ranges of the source
 * it checked, lines 1-based, columns counted in characters (code points, as Python counts).
 * A fix is applied only while the cell still reads exactly that source.
 */

import type { NotebookPanel } from '@jupyterlab/notebook';

import type { IEdit, IFix, IFixOutcome } from './types';

/** The offset in `source` (a JS string, UTF-16) of a 1-based line and a code-point column. */
export function offsetOf(source: string, line: number, col: number): number | null {
  if (!Number.isInteger(line) || !Number.isInteger(col) || line < 1 || col < 0) {
    return null;
  }
  let start = 0;
  for (let i = 1; i < line; i++) {
    const nl = source.indexOf('\n', start);
    if (nl < 0) {
      return null;
    }
    start = nl + 1;
  }
  let end = source.indexOf('\n', start);
  if (end < 0) {
    end = source.length;
  }
  let offset = start;
  let count = 0;
  for (const ch of source.slice(start, end)) {
    if (count === col) {
      break;
    }
    offset += ch.length;
    count++;
  }
  return count === col ? offset : null;
}

/** The edits as [start, end, text] offsets, last first; null when one does not fit or two overlap. */
export function editRanges(source: string, edits: IEdit[]): [number, number, string][] | null {
  const ranges: [number, number, string][] = [];
  for (const e of edits) {
    const start = offsetOf(source, e.line, e.col);
    const end = offsetOf(source, e.end_line, e.end_col);
    if (start === null || end === null || end < start || typeof e.text !== 'string') {
      return null;
    }
    ranges.push([start, end, e.text]);
  }
  ranges.sort((a, b) => b[0] - a[0] || b[1] - a[1]);
  for (let i = 1; i < ranges.length; i++) {
    if (ranges[i][1] > ranges[i - 1][0]) {
      return null;
    }
  }
  return ranges;
}

/** `source` with the edits applied, or null when they do not fit it. */
export function applyEdits(source: string, edits: IEdit[]): string | null {
  const ranges = editRanges(source, edits);
  if (ranges === null) {
    return null;
  }
  let out = source;
  for (const [start, end, text] of ranges) {
    out = out.slice(0, start) + text + out.slice(end);
  }
  return out;
}

export const CHANGED = 'The cell changed since it was checked: run it again for a fresh fix.';

/** Apply `fix` to the cell with id `cellId` in `panel`, if it still reads `code`. */
export function applyFixToCell(panel: NotebookPanel, cellId: string, code: string | undefined | null, fix: IFix): IFixOutcome {
  const cells = panel.content.model?.cells;
  let model = null;
  for (let i = 0; cells && i < cells.length; i++) {
    if (cells.get(i).id === cellId) {
      model = cells.get(i);
      break;
    }
  }
  if (!model) {
    return { ok: false, reason: 'The cell is no longer in this notebook.' };
  }
  if (panel.content.model?.readOnly) {
    return { ok: false, reason: 'The notebook is read-only.' };
  }
  const shared = model.sharedModel;
  const current = shared.getSource();
  if (typeof code !== 'string' || current !== code) {
    return { ok: false, reason: CHANGED };
  }
  const ranges = editRanges(current, Array.isArray(fix?.edits) ? fix.edits : []);
  if (ranges === null || ranges.length === 0) {
    return { ok: false, reason: 'The fix does not fit this cell.' };
  }
  shared.transact(() => {
    for (const [start, end, text] of ranges) {
      shared.updateSource(start, end, text);
    }
  });
  return { ok: true, reason: '' };
}
