import { formatBytes, formatShape, formatSeconds } from '../format';
import { withCode } from '../dom';
import { indexCatalog } from '../ruledoc';
import { IFinding, IRuleDoc } from '../types';
import {
  COMPILE_COLUMNS,
  compileRowClass,
  compileRowTitle,
  evidenceOf,
  findingKey,
  renderFinding,
  renderFindings,
  renderMemoryTotals,
  renderSummary,
  tensorRowTitle
} from '../views';
import { EVIL, sampleReport } from './fixtures';

describe('formatters', () => {
  it('formats bytes, shapes and seconds', () => {
    expect(formatBytes(48)).toBe('48 B');
    expect(formatBytes(2097152)).toBe('2.00 MiB');
    expect(formatBytes(null)).toBe('–');
    expect(formatShape([3, 4])).toBe('(3, 4)');
    expect(formatShape([3])).toBe('(3,)');
    expect(formatShape([])).toBe('()');
    expect(formatSeconds(0.91)).toBe('910.0 ms');
    expect(formatSeconds(2)).toBe('2.00 s');
  });
});

describe('renderSummary', () => {
  it('shows findings by severity, syncs, time waited and memory by device', () => {
    const text = renderSummary(sampleReport()).textContent!;
    expect(text).toContain('1 E');
    expect(text).toContain('1 W');
    expect(text).toContain('0 I');
    expect(text).toContain('50 syncs · 910.0 ms waited');
    expect(text).toContain('cpu 48 B');
    expect(text).toContain('cuda:0 2.00 MiB');
  });

  it('renders an empty report', () => {
    const text = renderSummary({}).textContent!;
    expect(text).toContain('0 syncs');
    expect(text).toContain('no tensors');
  });

  it('computes memory from tensors when the kernel sent no totals, counting shared storage once', () => {
    const report = sampleReport({
      memory_by_device: undefined,
      tensors: [
        { name: 'a', shape: [4], dtype: 'float32', device: 'cpu', nbytes: 16, storage_key: 's1' },
        { name: 'b', shape: [4], dtype: 'float32', device: 'cpu', nbytes: 16, storage_key: 's1' },
        { name: 'c', shape: [2], dtype: 'float32', device: 'cpu', nbytes: 8 }
      ]
    });
    expect(renderSummary(report).textContent).toContain('cpu 24 B');
  });
});

describe('renderFindings', () => {
  it('groups findings by cell, newest first, and reveals the cell on click', () => {
    const reveal = jest.fn();
    const older = sampleReport({ cell_id: 'old', execution_count: 3, findings: [{ rule: 'TM201', severity: 'info', line: 1, col: 0, message: 'old one' }] });
    const node = renderFindings(
      [
        { cellId: 'cell-1', executionCount: 7, report: sampleReport() },
        { cellId: 'quiet', executionCount: 5, report: sampleReport({ findings: [] }) },
        { cellId: 'old', executionCount: 3, report: older }
      ],
      reveal
    );
    const groups = node.querySelectorAll('.tm-FindingGroup');
    expect(groups).toHaveLength(2);
    expect(groups[0].querySelector('h4')!.textContent).toContain('Cell [7]');
    expect(groups[0].textContent).toContain('1 error, 1 warning');
    expect(groups[1].getAttribute('data-cell-id')).toBe('old');

    const first = groups[0].querySelector<HTMLElement>('.tm-Finding[data-rule="TM101"]')!;
    const line = first.querySelector<HTMLButtonElement>('button.tm-Finding-reveal')!;
    expect(line.textContent).toBe('line 4:16');
    first.querySelector<HTMLElement>('.tm-Finding-message')!.click();
    expect(reveal).toHaveBeenCalledWith('cell-1', expect.objectContaining({ rule: 'TM101' }));
    line.click(); // the keyboard's way: a real button
    expect(reveal).toHaveBeenCalledTimes(2);
  });

  it('says so when the recent cells have no findings', () => {
    const node = renderFindings([{ cellId: 'a', executionCount: 1, report: sampleReport({ findings: [] }) }], null);
    expect(node.textContent).toBe('No findings in the last 1 checked cell.');
  });

  it('does not make a finding clickable without a cell id', () => {
    const node = renderFinding({ rule: 'TM101', severity: 'warning', line: null, col: null, message: 'm', object: 'net.fc' }, null, jest.fn());
    expect(node.querySelector('button')).toBeNull();
    expect(node.querySelector('.tm-Finding-where')!.textContent).toBe('net.fc');
  });
});

describe('Apply fix', () => {
  const fixed: IFinding = {
    rule: 'TM404',
    severity: 'warning',
    line: 2,
    col: 4,
    message: 'Variable',
    fix: { title: 'Drop the `Variable` wrapper', applicability: 'safe', edits: [{ line: 2, col: 4, end_line: 2, end_col: 15, text: 't.detach()' }] }
  };
  const risky: IFinding = { ...fixed, rule: 'TM402', line: 3, fix: { ...fixed.fix!, title: 'Use `torch.inference_mode()`', applicability: 'unsafe' } };
  const cells = () => [{ cellId: 'c1', executionCount: 4, report: sampleReport({ cell_id: 'c1', code: 'CODE', findings: [fixed, risky, { rule: 'TM301', severity: 'warning', line: 5, message: 'no fix' }] }) }];

  it('offers a button per finding with a fix, marks the ones that may change behaviour, and applies on click', () => {
    const applyFix = jest.fn().mockReturnValue({ ok: true, reason: '' });
    const reveal = jest.fn();
    const outcomes = new Map();
    const node = renderFindings(cells(), reveal, { applyFix, fixOutcomes: outcomes });
    const buttons = node.querySelectorAll<HTMLButtonElement>('button.tm-Finding-apply');
    expect(buttons).toHaveLength(2);
    expect(node.querySelector('[data-rule="TM301"] .tm-Finding-fix')).toBeNull();
    const unsafe = node.querySelector('[data-rule="TM402"] .tm-Finding-fix')!;
    expect(unsafe.getAttribute('data-applicability')).toBe('unsafe');
    expect(unsafe.textContent).toContain('may change behaviour');
    expect(node.querySelector('[data-rule="TM404"] .tm-Finding-fix')!.textContent).toContain('Fix: Drop the Variable wrapper');

    buttons[0].click();
    expect(applyFix).toHaveBeenCalledWith('c1', 'CODE', fixed.fix);
    expect(reveal).toHaveBeenCalledTimes(1); // the edited cell is shown; the click did not also "reveal" twice
    expect(node.querySelector('[data-rule="TM404"] .tm-Finding-fixStatus')!.textContent).toBe('Applied — run the cell to check it again.');
    // a re-render (the next report of another cell) does not offer the same click again
    const again = renderFindings(cells(), reveal, { applyFix, fixOutcomes: outcomes });
    expect(again.querySelectorAll('button.tm-Finding-apply')).toHaveLength(1);
  });

  it('says why a fix was not applied', () => {
    const applyFix = jest.fn().mockReturnValue({ ok: false, reason: 'The cell changed since it was checked: run it again for a fresh fix.' });
    const node = renderFindings(cells(), jest.fn(), { applyFix, fixOutcomes: new Map() });
    node.querySelector<HTMLButtonElement>('button.tm-Finding-apply')!.click();
    expect(node.querySelector('.tm-Finding-fixStatus')!.textContent).toContain('changed since it was checked');
  });

  it('shows the fix but no button where the panel cannot edit or the cell has no id', () => {
    expect(renderFindings(cells(), jest.fn()).querySelectorAll('button.tm-Finding-apply')).toHaveLength(0);
    const node = renderFinding(fixed, null, null, { applyFix: jest.fn() });
    expect(node.querySelector('button.tm-Finding-apply')).toBeNull();
    expect(node.querySelector('.tm-Finding-fix')!.textContent).toContain('Drop the Variable wrapper');
    // an older kernel sends no fix, a newer one `null`
    expect(renderFinding({ ...fixed, fix: null }, 'c1', null, { applyFix: jest.fn() }).querySelector('.tm-Finding-fix')).toBeNull();
  });
});

describe('escaping', () => {
  it('shows report strings as text and never creates elements from them', () => {
    (window as any).__pwned = 0;
    const report = sampleReport({
      findings: [
        { rule: EVIL, name: EVIL, severity: EVIL, line: 1, col: 0, message: EVIL, hint: EVIL, object: EVIL, fix: { title: EVIL, applicability: EVIL as any, edits: [{ line: 1, col: 0, end_line: 1, end_col: 0, text: EVIL }] } }
      ],
      tensors: [{ name: EVIL, shape: [1], dtype: EVIL, device: EVIL, nbytes: 4 }],
      memory_by_device: { [EVIL]: 4 },
      errors: [EVIL]
    });
    const host = document.createElement('div');
    host.append(renderSummary(report), renderFindings([{ cellId: EVIL, executionCount: 1, report }], jest.fn()), renderMemoryTotals(report));
    expect(host.querySelector('img')).toBeNull();
    expect(host.textContent).toContain(EVIL);
    // An unknown severity falls back to "info" instead of reaching a class name.
    expect(host.querySelector('.tm-Finding')!.className).toContain('tm-mod-info');
    expect((window as any).__pwned).toBe(0);
  });
});

describe('withCode', () => {
  it('turns backtick spans into code elements built from text', () => {
    const host = document.createElement('div');
    host.append(...withCode('use `<b>x.to(dev)</b>` not `y`, and a stray ` tick'));
    expect(host.querySelector('b')).toBeNull();
    const codes = Array.from(host.querySelectorAll('code')).map(c => c.textContent);
    expect(codes).toEqual(['<b>x.to(dev)</b>', 'y']);
    expect(host.textContent).toBe('use <b>x.to(dev)</b> not y, and a stray ` tick');
  });

  it('lets long code wrap between names, not inside them', () => {
    const host = document.createElement('div');
    host.append(...withCode('`torch.save(model.state_dict(), f)` pickles'));
    const code = host.querySelector('code')!;
    expect(code.textContent).toBe('torch.save(model.state_dict(), f)');
    const segments = Array.from(code.childNodes)
      .filter(n => n.nodeType === Node.TEXT_NODE)
      .map(n => n.textContent);
    expect(segments).toEqual(['torch.', 'save(', 'model.', 'state_dict(', '),', ' f)']);
    expect(code.querySelectorAll('wbr').length).toBe(5);
  });
});

describe('tensorRowTitle', () => {
  it('names the kind and the strides of a non-contiguous tensor', () => {
    const title = tensorRowTitle({
      name: 'p',
      shape: [4, 3],
      dtype: 'float32',
      device: 'cpu',
      nbytes: 48,
      kind: 'Parameter',
      contiguous: false,
      strides: [1, 4]
    });
    expect(title).toBe('p: Parameter (4, 3) float32 on cpu, 48 B; not contiguous, strides (1, 4)');
    expect(tensorRowTitle({ name: 'x', shape: [2], dtype: 'int64', device: 'cpu', nbytes: 16, kind: 'tensor', contiguous: true })).toBe(
      'x: (2,) int64 on cpu, 16 B'
    );
  });
});

describe('evidence and notes', () => {
  const finding: IFinding = {
    rule: 'TM405',
    name: 'numpy-on-grad-tensor',
    severity: 'error',
    line: 3,
    col: 0,
    message: '`x.numpy()` on a tensor that requires grad',
    hint: 'detach first',
    source: 'static',
    evidence: ['static', 'live', 'static'],
    notes: ['It failed when the cell ran: `RuntimeError`.', '']
  };

  it('shows every kind of evidence behind a finding as one badge', () => {
    const node = renderFinding(finding, null, null);
    const badge = node.querySelector('.tm-Evidence')!;
    expect(badge.textContent).toBe('static + live');
    expect(badge.getAttribute('title')).toBe("Found from the cell's code and the live objects in the kernel");
  });

  it('shows no badge for a finding from the code alone, and the source of an older kernel', () => {
    expect(renderFinding({ ...finding, evidence: ['static'] }, null, null).querySelector('.tm-Evidence')).toBeNull();
    expect(renderFinding({ ...finding, evidence: undefined }, null, null).querySelector('.tm-Evidence')).toBeNull();
    const older = renderFinding({ ...finding, evidence: undefined, source: 'runtime' }, null, null);
    expect(older.querySelector('.tm-Evidence')!.textContent).toBe('runtime');
    expect(evidenceOf({ ...finding, evidence: 'static' as any, source: 'live' })).toEqual(['live']);
  });

  it('lists the notes under the message, before the hint, with inline code', () => {
    const node = renderFinding(finding, null, null);
    const notes = node.querySelectorAll('.tm-Finding-notes li');
    expect(notes).toHaveLength(1); // the empty note is dropped
    expect(notes[0].textContent).toBe('It failed when the cell ran: RuntimeError.');
    expect(notes[0].querySelector('code')!.textContent).toBe('RuntimeError');
    const order = Array.from(node.children).map(c => c.className);
    expect(order).toEqual(['tm-Finding-head', 'tm-Finding-message', 'tm-Finding-notes', 'tm-Finding-hint']);
  });

  it('escapes notes and evidence', () => {
    const node = renderFinding({ ...finding, evidence: [EVIL, 'live'], notes: [EVIL] }, 'c', jest.fn());
    expect(node.querySelector('img')).toBeNull();
    expect(node.querySelector('.tm-Finding-notes')!.textContent).toBe(EVIL);
    expect(node.querySelector('.tm-Evidence')!.textContent).toBe(`${EVIL} + live`);
  });
});

describe('rule docs', () => {
  const doc: IRuleDoc = {
    id: 'TM301',
    name: 'sync-in-loop',
    severity: 'warning',
    evidence: ['static', 'runtime'],
    what: 'Flags `.item()` inside a loop.',
    why: 'Each call waits for the GPU.',
    example: 'for x in xs:\n    total += x.item()\n',
    fix: 'total = torch.stack(xs).sum().item()',
    not_flagged: 'the same calls outside loops; `if step % N == 0:` reads are info',
    overrides: ['TM201']
  };
  const finding: IFinding = { rule: 'TM301', name: 'sync-in-loop', severity: 'warning', line: 9, col: 2, message: '.item() in a loop' };

  it('makes the rule ID a button that opens what, why, the flagged code and the fix', () => {
    const reveal = jest.fn();
    const expanded = new Set<string>();
    const node = renderFinding(finding, 'cell-1', reveal, { catalog: indexCatalog([doc]), expanded });
    const rule = node.querySelector<HTMLButtonElement>('button.tm-Finding-rule')!;
    const shown = node.querySelector<HTMLElement>('.tm-RuleDoc')!;
    expect(rule.textContent).toBe('TM301');
    expect(rule.getAttribute('aria-expanded')).toBe('false');
    expect(rule.getAttribute('aria-controls')).toBe(shown.id);
    expect(shown.hidden).toBe(true);

    rule.click();
    expect(shown.hidden).toBe(false);
    expect(rule.getAttribute('aria-expanded')).toBe('true');
    expect(reveal).not.toHaveBeenCalled(); // opening the doc does not jump to the cell
    expect(expanded.has(findingKey(finding, 'cell-1'))).toBe(true);
    expect(shown.querySelector('.tm-RuleDoc-what')!.textContent).toBe('Flags .item() inside a loop.');
    expect(shown.querySelector('.tm-RuleDoc-why')!.textContent).toBe('Each call waits for the GPU.');
    expect(shown.querySelector('.tm-mod-example pre')!.textContent).toBe('for x in xs:\n    total += x.item()');
    expect(shown.querySelector('.tm-mod-fix pre')!.textContent).toBe('total = torch.stack(xs).sum().item()');
    expect(shown.querySelector('.tm-RuleDoc-not')!.textContent).toBe('Not flagged: the same calls outside loops; if step % N == 0: reads are info');
    expect(shown.querySelector('.tm-RuleDoc-meta')!.textContent).toBe('TM301 sync-in-loop · evidence: static, runtime · takes precedence over TM201');
    shown.querySelector('pre')!.click(); // selecting code in the doc does not jump either
    expect(reveal).not.toHaveBeenCalled();

    rule.click();
    expect(shown.hidden).toBe(true);
    expect(expanded.size).toBe(0);
  });

  it('renders a doc open when its finding was open before', () => {
    const expanded = new Set([findingKey(finding, 'cell-1')]);
    const node = renderFindings([{ cellId: 'cell-1', executionCount: 1, report: sampleReport({ findings: [finding] }) }], null, {
      catalog: indexCatalog([doc]),
      expanded
    });
    expect(node.querySelector<HTMLElement>('.tm-RuleDoc')!.hidden).toBe(false);
  });

  it('leaves the rule ID a plain badge without a catalog or without a doc for the rule', () => {
    for (const catalog of [null, new Map(), indexCatalog([{ id: 'TM301', name: 'sync-in-loop' }]), indexCatalog([{ ...doc, id: 'TM999' }])]) {
      const node = renderFinding(finding, 'cell-1', jest.fn(), { catalog });
      expect(node.querySelector('.tm-Finding-rule')).toBeNull();
      expect(node.querySelector('.tm-Badge')!.textContent).toBe('TM301');
      expect(node.querySelector('.tm-RuleDoc')).toBeNull();
    }
  });

  it('shows the doc as text, never as markup', () => {
    (window as any).__pwned = 0;
    const evil = { id: 'TM301', name: EVIL, what: EVIL, why: EVIL, example: EVIL, fix: EVIL, not_flagged: EVIL, evidence: [EVIL], overrides: [EVIL] };
    const node = renderFinding(finding, 'cell-1', jest.fn(), { catalog: indexCatalog([evil]) });
    node.querySelector<HTMLButtonElement>('button.tm-Finding-rule')!.click();
    expect(node.querySelector('img')).toBeNull();
    expect(node.querySelector('.tm-mod-fix pre')!.textContent).toBe(EVIL);
    expect(node.querySelector('.tm-RuleDoc-what')!.textContent).toBe(EVIL);
    expect((window as any).__pwned).toBe(0);
  });
});

describe('indexCatalog', () => {
  it('indexes rules by ID and drops what does not fit the contract', () => {
    const catalog = indexCatalog([
      { id: 'TM101', name: 'tensor-created-in-forward', severity: 'warning', what: 'w', evidence: ['static', 3, 'live'], fix: 42 },
      { name: 'no id' },
      null,
      'TM999',
      { id: 7 }
    ]);
    expect(Array.from(catalog.keys())).toEqual(['TM101']);
    expect(catalog.get('TM101')).toEqual({ id: 'TM101', name: 'tensor-created-in-forward', severity: 'warning', what: 'w', evidence: ['static', 'live'] });
    expect(indexCatalog(undefined).size).toBe(0);
    expect(indexCatalog({ TM101: {} }).size).toBe(0);
  });
});

describe('compile rows', () => {
  const step = { name: 'step', location: 'line 2', line: 9, graphs: 3, breaks: 2, recompiles: 2, compile_s: 1.5, reasons: ['`x.shape[0]` changed 8 → 9', '`self.flag` changed (was True)'] };

  it('says what Dynamo did, and why it recompiled, in the row title', () => {
    const title = compileRowTitle(step);
    expect(title).toContain('step (line 2), first compiled at line 9');
    expect(title).toContain('3 graphs, 2 breaks, 2 recompilations, 1.50 s compiling');
    expect(title).toContain('why: `x.shape[0]` changed 8 → 9; `self.flag` changed (was True)');
    expect(compileRowTitle({ name: 'm', location: 'torch.nn.Linear', limit_hit: true })).toContain('recompile limit reached');
  });

  it('marks functions that broke or recompiled, and the recompile limit', () => {
    expect(compileRowClass(step)).toBe('tm-mod-warning');
    expect(compileRowClass({ name: 'f', location: 'line 1', graphs: 1 })).toBe('');
    expect(compileRowClass({ name: 'f', location: 'line 1', limit_hit: true })).toBe('tm-mod-error');
    const recompiles = COMPILE_COLUMNS.find(c => c.id === 'recompiles')!;
    expect(recompiles.text!({ name: 'f', location: 'x', recompiles: 8, limit_hit: true })).toBe('8 (limit)');
  });

  it('adds the compile time to the summary only when something was compiled', () => {
    expect(renderSummary(sampleReport()).textContent).not.toContain('compiled');
    expect(renderSummary(sampleReport({ compile: [step] })).textContent).toContain('compiled 1 function · 1.50 s');
  });
});
