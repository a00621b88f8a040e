import { Signal } from '@lumino/signaling';
import { Widget } from '@lumino/widgets';

import { PanelSource, TorchmagicPanel } from '../panel';
import { ConnectionState, ICheckedCell, IRuleDoc } from '../types';
import { EVIL, sampleReport } from './fixtures';

class FakeSource implements PanelSource {
  state: ConnectionState = 'attached';
  cells: ICheckedCell[] = [];
  truncated: { [list: string]: number } = {};
  unloaded = false;
  kernelName = 'Python 3';
  catalog = new Map<string, IRuleDoc>();
  changed = new Signal<this, void>(this);
  get latest() {
    return this.cells.length ? this.cells[0].report : null;
  }
  push(report = sampleReport()) {
    this.cells = [{ cellId: report.cell_id ?? null, executionCount: report.execution_count ?? null, report }, ...this.cells];
    this.changed.emit();
  }
}

function mount(panel: TorchmagicPanel) {
  Widget.attach(panel, document.body);
  return panel;
}

describe('TorchmagicPanel', () => {
  afterEach(() => {
    document.body.textContent = '';
  });

  it('asks for a notebook when there is none', () => {
    const panel = mount(new TorchmagicPanel());
    expect(panel.node.textContent).toContain('Open a notebook');
    expect(panel.title.caption).toBe('torchmagic');
    expect(panel.node.querySelector<HTMLElement>('.tm-Content')!.hidden).toBe(true);
    panel.dispose();
  });

  it('tells how to load torchmagic in a kernel without it', () => {
    const panel = mount(new TorchmagicPanel());
    const source = new FakeSource();
    source.state = 'not-loaded';
    panel.setSource(source);
    expect(panel.node.querySelector('.tm-Status')!.textContent).toContain('%load_ext torchmagic');
    expect(panel.node.dataset.state).toBe('not-loaded');
    panel.dispose();
  });

  it('renders every list of a report live, keeping the table state', () => {
    const reveal = jest.fn();
    const panel = mount(new TorchmagicPanel({ reveal }));
    const source = new FakeSource();
    panel.setSource(source);
    expect(panel.node.textContent).toContain('torchmagic is loaded');
    source.push();
    const text = panel.node.textContent!;
    expect(text).toContain('Last checked: Cell [7]');
    expect(text).toContain('TM101');
    expect(panel.node.querySelector('[data-section="tensors"] tbody')!.textContent).toContain('(3, 4)');
    expect(panel.node.querySelector('[data-section="modules"] tbody')!.textContent).toContain('Sequential');
    expect(panel.node.querySelector('[data-section="shapes"] tbody')!.textContent).toContain('(5, 16)');
    expect(panel.node.querySelector('[data-section="syncs"] tbody')!.textContent).toContain('total += x[i].item()');
    expect(panel.node.querySelector('[data-section="tensors"] .tm-Section-count')!.textContent).toBe('2');
    expect(panel.node.querySelector('.tm-Totals')!.textContent).toContain('cuda:0 2.00 MiB in 1 tensor');

    const filter = panel.node.querySelector<HTMLInputElement>('[data-section="tensors"] input')!;
    filter.value = 'cuda';
    filter.dispatchEvent(new Event('input'));
    source.push(sampleReport({ cell_id: 'cell-2', execution_count: 8 }));
    expect(filter.value).toBe('cuda');
    expect(panel.node.querySelectorAll('[data-section="tensors"] tbody tr')).toHaveLength(1);
    expect(panel.node.querySelectorAll('.tm-FindingGroup')).toHaveLength(2);

    panel.node.querySelector<HTMLButtonElement>('.tm-Finding[data-rule="TM301"]')!.click();
    expect(reveal).toHaveBeenCalledWith('cell-2', expect.objectContaining({ rule: 'TM301' }));
    panel.node.querySelector<HTMLElement>('[data-section="syncs"] tbody tr')!.click();
    expect(reveal).toHaveBeenLastCalledWith('cell-2', expect.objectContaining({ line: 9 }));
    panel.dispose();
  });

  it('renders a report with empty lists', () => {
    const panel = mount(new TorchmagicPanel());
    const source = new FakeSource();
    panel.setSource(source);
    source.push({ cell_id: null, execution_count: 1 });
    expect(panel.node.textContent).toContain('No findings in the last 1 checked cell.');
    expect(panel.node.textContent).toContain('No tensors in the namespace');
    panel.dispose();
  });

  it('clears when the source leaves the attached state and follows a new source', () => {
    const panel = mount(new TorchmagicPanel());
    const a = new FakeSource();
    a.push();
    panel.setSource(a);
    expect(panel.node.textContent).toContain('TM101');
    a.state = 'restarting';
    a.cells = [];
    a.changed.emit();
    expect(panel.node.textContent).not.toContain('TM101');
    expect(panel.node.textContent).toContain('restarting');
    const b = new FakeSource();
    b.push(sampleReport({ findings: [], tensors: [{ name: 'only_in_b', shape: [2], dtype: 'int64', device: 'cpu', nbytes: 16 }] }));
    panel.setSource(b);
    expect(panel.node.textContent).toContain('only_in_b');
    a.changed.emit(); // the old source no longer drives the panel
    expect(panel.node.textContent).toContain('only_in_b');
    panel.dispose();
  });

  it('shows a Compile section only for a cell that compiled something', () => {
    const reveal = jest.fn();
    const panel = mount(new TorchmagicPanel({ reveal }));
    const source = new FakeSource();
    panel.setSource(source);
    source.push();
    const section = () => panel.node.querySelector<HTMLDetailsElement>('[data-section="compile"]')!;
    expect(section().hidden).toBe(true);
    source.push(
      sampleReport({
        cell_id: 'cell-3',
        compile: [
          { name: 'step', location: 'line 2', line: 9, graphs: 3, breaks: 2, recompiles: 1, compile_s: 1.5, limit_hit: false, reasons: ['`x.shape[0]` changed 8 → 9'] },
          { name: 'model', location: 'cell [4], line 3', line: 11, graphs: 1, breaks: 0, recompiles: 8, compile_s: 0.25, limit_hit: true, reasons: [] }
        ]
      })
    );
    expect(section().hidden).toBe(false);
    expect(section().querySelector('.tm-Section-count')!.textContent).toBe('2');
    const rows = section().querySelectorAll<HTMLElement>('tbody tr');
    expect(rows).toHaveLength(2);
    expect(rows[0].textContent).toContain('step');
    expect(rows[0].title).toContain('`x.shape[0]` changed 8 → 9');
    expect(rows[1].textContent).toContain('8 (limit)');
    expect(rows[1].className).toContain('tm-mod-error');
    expect(panel.node.querySelector('.tm-Summary')!.textContent).toContain('compiled 2 functions · 1.75 s');
    rows[0].click();
    expect(reveal).toHaveBeenLastCalledWith('cell-3', expect.objectContaining({ line: 9 }));
    source.push(sampleReport({ cell_id: 'cell-4' }));
    expect(section().hidden).toBe(true);
    panel.dispose();
  });

  it('escapes internal errors and everything else from the kernel', () => {
    const panel = mount(new TorchmagicPanel());
    const source = new FakeSource();
    source.kernelName = EVIL;
    panel.setSource(source);
    source.push(
      sampleReport({
        errors: [EVIL],
        modules: [{ name: EVIL, type: EVIL, params: 1, trainable: 1, devices: [EVIL], dtypes: [], training: false, nbytes: 0 }],
        compile: [{ name: EVIL, location: EVIL, line: 1, reasons: [EVIL] }]
      })
    );
    expect(panel.node.querySelector('img')).toBeNull();
    expect(panel.node.querySelector('.tm-Error')!.textContent).toBe(`torchmagic: ${EVIL}`);
    panel.dispose();
  });
});

describe('TorchmagicPanel settings and rule docs', () => {
  afterEach(() => {
    document.body.textContent = '';
  });

  it('applies a new page size to every table at once', () => {
    const panel = mount(new TorchmagicPanel({ pageSize: 50 }));
    const source = new FakeSource();
    panel.setSource(source);
    const many = Array.from({ length: 12 }, (_, i) => ({ name: `t${i}`, shape: [1], dtype: 'float32', device: 'cpu', nbytes: 4 }));
    source.push(sampleReport({ tensors: many }));
    const rows = () => panel.node.querySelectorAll('[data-section="tensors"] tbody tr').length;
    expect(rows()).toBe(12);
    panel.setPageSize(5);
    expect(panel.pageSize).toBe(5);
    expect(rows()).toBe(5);
    expect(panel.node.querySelector('[data-section="tensors"] .tm-Table-status')!.textContent).toBe('1–5 of 12 rows');
    source.push(sampleReport({ cell_id: 'next', tensors: many }));
    expect(rows()).toBe(5);
    panel.dispose();
  });

  it('opens a rule doc from the catalog and keeps it open when the next report arrives', () => {
    const panel = mount(new TorchmagicPanel({ reveal: jest.fn() }));
    const source = new FakeSource();
    source.catalog = new Map([['TM301', { id: 'TM301', name: 'sync-in-loop', what: 'Flags `.item()` in a loop.', fix: 'total = xs.sum().item()' }]]);
    panel.setSource(source);
    source.push();
    expect(panel.node.querySelector('.tm-Finding[data-rule="TM101"] .tm-Finding-rule')).toBeNull(); // no doc for TM101
    panel.node.querySelector<HTMLButtonElement>('.tm-Finding[data-rule="TM301"] button.tm-Finding-rule')!.click();
    source.push(sampleReport({ cell_id: 'cell-2', execution_count: 8 }));
    const docs = Array.from(panel.node.querySelectorAll<HTMLElement>('.tm-RuleDoc'));
    expect(docs.map(d => d.hidden)).toEqual([true, false]); // cell-2's TM301 closed, cell-1's still open
    expect(docs[1].querySelector('pre')!.textContent).toBe('total = xs.sum().item()');
    panel.dispose();
  });
});

describe('TorchmagicPanel while collapsed', () => {
  it('renders the latest state when it is shown again', () => {
    const panel = mount(new TorchmagicPanel());
    const source = new FakeSource();
    panel.setSource(source);
    panel.hide();
    source.push();
    expect(panel.node.textContent).not.toContain('TM101');
    panel.show();
    expect(panel.node.textContent).toContain('TM101');
    panel.dispose();
  });
});
