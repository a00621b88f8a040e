import { applyEdits, applyFixToCell, CHANGED, editRanges, offsetOf } from '../fixes';
import { IFix } from '../types';

describe('offsetOf', () => {
  it('counts lines from 1 and columns in code points, as Python does', () => {
    const source = 'a = 1\nb = "😀" + x\n';
    expect(offsetOf(source, 1, 0)).toBe(0);
    expect(offsetOf(source, 2, 0)).toBe(6);
    // the emoji is one character for Python, two UTF-16 units for JavaScript
    expect(source.slice(offsetOf(source, 2, 10)!, offsetOf(source, 2, 11)!)).toBe('x');
    expect(offsetOf(source, 3, 0)).toBe(source.length);
    expect(offsetOf(source, 4, 0)).toBeNull();
    expect(offsetOf(source, 1, 6)).toBeNull(); // past the end of the line
    expect(offsetOf(source, 0, 0)).toBeNull();
  });
});

describe('applyEdits', () => {
  it('applies edits from the last up, inserts and multi-line replacements included', () => {
    const source = 'x = Variable(t)\nnn.init.normal(w)\n';
    const out = applyEdits(source, [
      { line: 1, col: 4, end_line: 1, end_col: 15, text: 't.detach()' },
      { line: 2, col: 8, end_line: 2, end_col: 14, text: 'normal_' }
    ]);
    expect(out).toBe('x = t.detach()\nnn.init.normal_(w)\n');
    expect(applyEdits('f(a)', [{ line: 1, col: 3, end_line: 1, end_col: 3, text: ', b=1' }])).toBe('f(a, b=1)');
    expect(applyEdits('a\nb\nc', [{ line: 1, col: 1, end_line: 3, end_col: 0, text: ' ' }])).toBe('a c');
  });

  it('refuses edits that do not fit the source or overlap', () => {
    expect(applyEdits('abc', [{ line: 2, col: 0, end_line: 2, end_col: 1, text: '' }])).toBeNull();
    expect(applyEdits('abc', [{ line: 1, col: 2, end_line: 1, end_col: 1, text: '' }])).toBeNull();
    expect(
      editRanges('abcdef', [
        { line: 1, col: 0, end_line: 1, end_col: 3, text: 'x' },
        { line: 1, col: 2, end_line: 1, end_col: 4, text: 'y' }
      ])
    ).toBeNull();
  });
});

/** A notebook panel double: cells with a shared model that records transactions. */
function panel(sources: { [id: string]: string }, readOnly = false) {
  const log: string[] = [];
  const cells = Object.entries(sources).map(([id, source]) => {
    const shared = {
      source,
      inTransaction: false,
      getSource() {
        return this.source;
      },
      updateSource(start: number, end: number, value: string) {
        log.push(this.inTransaction ? 'update in transaction' : 'update outside');
        this.source = this.source.slice(0, start) + value + this.source.slice(end);
      },
      transact(f: () => void) {
        log.push('transact');
        this.inTransaction = true;
        f();
        this.inTransaction = false;
      }
    };
    return { id, sharedModel: shared };
  });
  const model = { readOnly, cells: { length: cells.length, get: (i: number) => cells[i] } };
  return { panel: { content: { model } } as any, cells, log };
}

const FIX: IFix = {
  title: 'Drop the `Variable` wrapper',
  applicability: 'safe',
  edits: [
    { line: 2, col: 4, end_line: 2, end_col: 15, text: 't.detach()' },
    { line: 3, col: 8, end_line: 3, end_col: 14, text: 'normal_' }
  ]
};
const CODE = '%%torchcheck\nx = Variable(t)\nnn.init.normal(w)';

describe('applyFixToCell', () => {
  it('edits the right cell in one transaction (one undo step)', () => {
    const { panel: p, cells, log } = panel({ other: CODE, target: CODE });
    expect(applyFixToCell(p, 'target', CODE, FIX)).toEqual({ ok: true, reason: '' });
    expect(cells[1].sharedModel.getSource()).toBe('%%torchcheck\nx = t.detach()\nnn.init.normal_(w)');
    expect(cells[0].sharedModel.getSource()).toBe(CODE);
    expect(log).toEqual(['transact', 'update in transaction', 'update in transaction']);
  });

  it('refuses when the cell changed since it was checked, is gone, or the notebook is read-only', () => {
    const { panel: p, cells } = panel({ target: CODE + '\n# edited' });
    expect(applyFixToCell(p, 'target', CODE, FIX)).toEqual({ ok: false, reason: CHANGED });
    expect(cells[0].sharedModel.getSource()).toBe(CODE + '\n# edited');
    expect(applyFixToCell(p, 'gone', CODE, FIX).ok).toBe(false);
    expect(applyFixToCell(panel({ target: CODE }, true).panel, 'target', CODE, FIX).reason).toContain('read-only');
    expect(applyFixToCell(panel({ target: CODE }).panel, 'target', undefined, FIX).reason).toBe(CHANGED);
  });
});
