import { Signal } from '@lumino/signaling';

import { COMM_TARGET, ReportClient } from '../client';
import { sampleReport } from './fixtures';

/** A kernel connection double with just what ReportClient uses. */
class FakeComm {
  constructor(
    public targetName: string,
    public commId: string
  ) {}
  onMsg: (msg: any) => void = () => undefined;
  onClose: (msg: any) => void = () => undefined;
  opened: any = null;
  sent: any[] = [];
  closed = false;
  send(data: any) {
    this.sent.push(data);
  }
  isDisposed = false;
  open(data: any) {
    this.opened = data;
  }
  close() {
    this.closed = true;
    this.onClose({});
  }
  receive(data: any) {
    this.onMsg({ content: { data } });
  }
}

class FakeKernel {
  status = 'idle';
  isDisposed = false;
  statusChanged = new Signal<any, string>(this);
  connectionStatusChanged = new Signal<any, string>(this);
  disposed = new Signal<any, void>(this);
  targets = new Map<string, (comm: any, msg: any) => void>();
  comms: FakeComm[] = [];
  registerCommTarget(name: string, cb: any) {
    this.targets.set(name, cb);
  }
  removeCommTarget(name: string) {
    this.targets.delete(name);
  }
  createComm(target: string) {
    const comm = new FakeComm(target, `c${this.comms.length}`);
    this.comms.push(comm);
    return comm;
  }
  /** The kernel opening a comm to the frontend's target, as %load_ext does. */
  openFromKernel(data: any) {
    const comm = new FakeComm(COMM_TARGET, 'k');
    this.targets.get(COMM_TARGET)!(comm, { content: { data } });
    return comm;
  }
}

function session(kernel: FakeKernel | null) {
  return {
    session: kernel ? { kernel } : null,
    kernelChanged: new Signal<any, any>({}),
    disposed: new Signal<any, void>({}),
    kernelDisplayName: 'Python 3'
  } as any;
}

describe('ReportClient', () => {
  it('says not-loaded when the kernel closes the probe comm', () => {
    const kernel = new FakeKernel();
    const client = new ReportClient(session(kernel));
    expect(kernel.targets.has(COMM_TARGET)).toBe(true);
    expect(client.state).toBe('connecting');
    expect(kernel.comms[0].opened).toEqual({ type: 'request', capabilities: [] });
    kernel.comms[0].onClose({}); // no `torchmagic` target in the kernel
    expect(client.state).toBe('not-loaded');
  });

  it('attaches when torchmagic is loaded later and drops repeated reports', () => {
    const kernel = new FakeKernel();
    const client = new ReportClient(session(kernel));
    kernel.comms[0].onClose({});
    const comm = kernel.openFromKernel({ type: 'hello', channel: 'ch' });
    expect(client.state).toBe('attached');
    const msg = { type: 'report', channel: 'ch', seq: 1, report: sampleReport() };
    comm.receive(msg);
    comm.receive(msg);
    expect(client.cells).toHaveLength(1);
    comm.receive({ ...msg, seq: 2, report: sampleReport({ execution_count: 8 }) });
    expect(client.cells).toHaveLength(1); // same cell id: replaced
    expect(client.latest!.execution_count).toBe(8);
    comm.receive({ ...msg, seq: 3, report: sampleReport({ cell_id: 'other' }) });
    expect(client.cells.map(c => c.cellId)).toEqual(['other', 'cell-1']);
  });

  it('clears on restart and asks again when the new kernel is idle', () => {
    const kernel = new FakeKernel();
    const client = new ReportClient(session(kernel));
    kernel.comms[0].receive({ type: 'hello' });
    kernel.comms[0].receive({ type: 'report', seq: 1, report: sampleReport() });
    expect(client.latest).not.toBeNull();
    kernel.statusChanged.emit('restarting');
    expect(client.state).toBe('restarting');
    expect(client.latest).toBeNull();
    kernel.statusChanged.emit('idle');
    expect(kernel.comms).toHaveLength(2);
    expect(client.state).toBe('connecting');
  });

  it('shows the unload and forgets the kernel on dispose', () => {
    const kernel = new FakeKernel();
    const client = new ReportClient(session(kernel));
    kernel.comms[0].receive({ type: 'hello' });
    kernel.comms[0].receive({ type: 'closed' });
    expect(client.state).toBe('not-loaded');
    expect(client.unloaded).toBe(true);
    client.dispose();
    expect(kernel.targets.has(COMM_TARGET)).toBe(false);
    expect(kernel.comms[0].closed).toBe(true);
  });

  it('keeps the rule catalog from hello until the kernel restarts', () => {
    const kernel = new FakeKernel();
    const client = new ReportClient(session(kernel));
    const catalog = [{ id: 'TM301', name: 'sync-in-loop', what: 'w', why: 'y', fix: 'f' }, { bad: true }];
    kernel.comms[0].receive({ type: 'hello', catalog });
    expect(Array.from(client.catalog.keys())).toEqual(['TM301']);
    kernel.comms[0].receive({ type: 'hello' }); // a hello without a catalog changes nothing
    expect(client.catalog.get('TM301')!.fix).toBe('f');
    kernel.statusChanged.emit('restarting');
    expect(client.catalog.size).toBe(0);
  });

  it('works with an older kernel that sends no catalog', () => {
    const kernel = new FakeKernel();
    const client = new ReportClient(session(kernel));
    kernel.comms[0].receive({ type: 'hello', channel: 'ch', version: '0.1.0' });
    kernel.comms[0].receive({ type: 'report', channel: 'ch', seq: 1, report: sampleReport() });
    expect(client.state).toBe('attached');
    expect(client.catalog.size).toBe(0);
    expect(client.latest!.findings).toHaveLength(2);
  });

  it('keeps as many checked cells as the history setting says, applied at once', () => {
    const kernel = new FakeKernel();
    const client = new ReportClient(session(kernel), { historySize: 3 });
    const changed = jest.fn();
    client.changed.connect(changed);
    kernel.comms[0].receive({ type: 'hello' });
    for (let i = 1; i <= 5; i++) {
      kernel.comms[0].receive({ type: 'report', seq: i, report: sampleReport({ cell_id: `c${i}`, execution_count: i }) });
    }
    expect(client.cells.map(c => c.cellId)).toEqual(['c5', 'c4', 'c3']);
    changed.mockClear();
    client.setHistorySize(2);
    expect(client.cells.map(c => c.cellId)).toEqual(['c5', 'c4']);
    expect(changed).toHaveBeenCalledTimes(1);
    client.setHistorySize(10);
    kernel.comms[0].receive({ type: 'report', seq: 6, report: sampleReport({ cell_id: 'c6' }) });
    expect(client.cells).toHaveLength(3);
    client.setHistorySize(0); // never fewer than one
    expect(client.historySize).toBe(1);
    expect(client.cells.map(c => c.cellId)).toEqual(['c6']);
    expect(new ReportClient(session(null)).historySize).toBe(20);
  });

  it('has no kernel state without a kernel', () => {
    const client = new ReportClient(session(null));
    expect(client.state).toBe('no-kernel');
  });

  it('announces that it can apply fixes, and applies one the widget under a cell asks for', () => {
    const kernel = new FakeKernel();
    const applied: any[] = [];
    const client = new ReportClient(session(kernel), {
      applyFix: (cellId, code, fix) => {
        applied.push([cellId, code, fix.title]);
        return code === 'x = 1' ? { ok: true, reason: '' } : { ok: false, reason: 'changed' };
      }
    });
    expect(kernel.comms[0].opened).toEqual({ type: 'request', capabilities: ['apply-fix'] });
    const fromKernel = kernel.openFromKernel({ type: 'hello', channel: 'k1' });
    expect(fromKernel.sent).toEqual([{ type: 'capabilities', capabilities: ['apply-fix'] }]);
    const fix = { title: 'T', applicability: 'safe', edits: [{ line: 1, col: 4, end_line: 1, end_col: 5, text: '2' }] };
    fromKernel.receive({ type: 'apply-fix', id: 'r1', cell_id: 'c1', code: 'x = 1', rule: 'TM902', line: 1, fix });
    fromKernel.receive({ type: 'apply-fix', id: 'r2', cell_id: 'c1', code: 'x = 3', rule: 'TM902', line: 1, fix });
    expect(applied).toEqual([
      ['c1', 'x = 1', 'T'],
      ['c1', 'x = 3', 'T']
    ]);
    expect(fromKernel.sent.slice(1)).toEqual([
      { type: 'fix-result', id: 'r1', ok: true, reason: '' },
      { type: 'fix-result', id: 'r2', ok: false, reason: 'changed' }
    ]);
    expect(client.state).toBe('attached'); // a fix request is not a report
    expect(client.cells).toEqual([]);
  });

  it('announces nothing and refuses fix requests when it has no notebook to edit', () => {
    const kernel = new FakeKernel();
    new ReportClient(session(kernel));
    expect(kernel.comms[0].opened).toEqual({ type: 'request', capabilities: [] });
    const fromKernel = kernel.openFromKernel({ type: 'hello' });
    expect(fromKernel.sent).toEqual([]);
    fromKernel.receive({ type: 'apply-fix', id: 'r1', cell_id: 'c1', code: 'x', rule: 'TM902', fix: { title: 'T', edits: [] } });
    expect(fromKernel.sent).toEqual([{ type: 'fix-result', id: 'r1', ok: false, reason: 'This panel cannot edit the notebook.' }]);
  });
});
