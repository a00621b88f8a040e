import { formatBytes, formatShape, formatSeconds } from '../format';
import { renderFinding, renderFindings, renderMemoryTotals, renderSummary, withCode } from '../views';
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

    const first = groups[0].querySelector<HTMLButtonElement>('button.tm-Finding[data-rule="TM101"]')!;
    expect(first.textContent).toContain('line 4:16');
    first.click();
    expect(reveal).toHaveBeenCalledWith('cell-1', expect.objectContaining({ rule: 'TM101' }));
  });

  it('says so when the recent cells have no findings', () => {
    const node = renderFindings([{ cellId: 'a', executionCount: 1, report: sampleReport({ findings: [] }) }], null);
    expect(node.textContent).toBe('No findings in the last 1 checked cell.');
  });

  it('does not make a finding clickable without a cell id', () => {
    const node = renderFinding({ rule: 'TM101', severity: 'warning', line: null, col: null, message: 'm', object: 'net.fc' }, null, jest.fn());
    expect(node.tagName).toBe('DIV');
    expect(node.textContent).toContain('net.fc');
  });
});

describe('escaping', () => {
  it('shows report strings as text and never creates elements from them', () => {
    (window as any).__pwned = 0;
    const report = sampleReport({
      findings: [{ rule: EVIL, name: EVIL, severity: EVIL, line: 1, col: 0, message: EVIL, hint: EVIL, object: EVIL }],
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
