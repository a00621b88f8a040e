/**
 * The comm client: follows one notebook's kernel and keeps what torchmagic reported there.
 *
 * Transport (kernel side: torchmagic/views/comm.py):
 * - the panel registers the comm target `torchmagic` on the kernel; `%load_ext torchmagic`
 *   opens a comm to it, so a notebook that loads torchmagic later attaches by itself;
 * - the panel also opens a comm to the kernel's `torchmagic` target with `{type: "request"}`
 *   (on attach, after a restart, after a reconnect, after a page reload); the kernel answers
 *   with `hello` and re-sends its recent reports. A kernel without torchmagic has no such
 *   target and closes the comm at once: that is how the panel knows to say `%load_ext`.
 * Several comms may be open to one kernel, so reports carry `(channel, seq)` and repeats are
 * dropped here.
 */

import type { ISessionContext } from '@jupyterlab/apputils';
import type { Kernel, KernelMessage as KM } from '@jupyterlab/services';
import { ISignal, Signal } from '@lumino/signaling';

import { indexCatalog } from './ruledoc';
import { CAPABILITIES, ConnectionState, ICheckedCell, IFix, IFixOutcome, IFixResultMessage, IReport, IRuleDoc, KernelMessage } from './types';

/** Applies a fix to a cell of this client's notebook (set where the notebook is known). */
export type FixApplier = (cellId: string, code: string | null | undefined, fix: IFix) => IFixOutcome;

export const COMM_TARGET = 'torchmagic';

/** How many recent checked cells the panel keeps by default (setting `history`). */
export const HISTORY_SIZE = 20;

export class ReportClient {
  constructor(session: ISessionContext, options: { historySize?: number; applyFix?: FixApplier | null } = {}) {
    this._session = session;
    this._applyFix = options.applyFix ?? null;
    this._historySize = clampHistory(options.historySize ?? HISTORY_SIZE);
    session.kernelChanged.connect(this._onKernelChanged, this);
    session.disposed.connect(this.dispose, this);
    this._attach(session.session?.kernel ?? null);
  }

  /** Emitted whenever the state or the reports change. */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  get state(): ConnectionState {
    return this._state;
  }

  /** Recent checked cells, newest first, one per cell. */
  get cells(): readonly ICheckedCell[] {
    return this._cells;
  }

  /** The newest report, or null before the first checked cell. */
  get latest(): IReport | null {
    return this._cells.length ? this._cells[0].report : null;
  }

  /** Lists the kernel cut short, e.g. {tensors: 12000} (the full length). */
  get truncated(): { [list: string]: number } {
    return this._truncated;
  }

  /** The kernel's rule catalog by rule ID; empty when its torchmagic sends none (older versions). */
  get catalog(): ReadonlyMap<string, IRuleDoc> {
    return this._catalog;
  }

  /** How many checked cells are kept, newest first. */
  get historySize(): number {
    return this._historySize;
  }

  /** Keep at most `size` checked cells; fewer than before drops the oldest at once. */
  setHistorySize(size: number): void {
    const next = clampHistory(size);
    if (next === this._historySize) {
      return;
    }
    this._historySize = next;
    if (this._cells.length > next) {
      this._cells = this._cells.slice(0, next);
      this._changed.emit();
    }
  }

  /** True when torchmagic was unloaded from this kernel (rather than never loaded). */
  get unloaded(): boolean {
    return this._unloaded;
  }

  get kernelName(): string {
    return this._session.kernelDisplayName ?? '';
  }

  get isDisposed(): boolean {
    return this._isDisposed;
  }

  /** Ask the kernel again (e.g. after torchmagic was loaded in a way we did not see). */
  refresh(): void {
    this._probe();
  }

  dispose(): void {
    if (this._isDisposed) {
      return;
    }
    this._isDisposed = true;
    this._session.kernelChanged.disconnect(this._onKernelChanged, this);
    this._session.disposed.disconnect(this.dispose, this);
    this._detach();
    Signal.clearData(this);
  }

  /** Apply a fix to a cell of this notebook; null when this client cannot edit. */
  applyFix(cellId: string, code: string | null | undefined, fix: IFix): IFixOutcome | null {
    return this._applyFix ? this._applyFix(cellId, code, fix) : null;
  }

  /** What this panel announces it can do (editing cells needs a notebook to apply fixes to). */
  get capabilities(): string[] {
    return this._applyFix ? [...CAPABILITIES] : [];
  }

  /** Handle one message from the kernel (arriving on `comm`); public for tests. */
  handleMessage(data: unknown, comm: Kernel.IComm | null = null): void {
    if (!data || typeof data !== 'object') {
      return;
    }
    const msg = data as KernelMessage;
    if (msg.type === 'apply-fix') {
      this._onApplyFix(msg, comm);
      return;
    }
    if (msg.type === 'hello') {
      this._unloaded = false;
      // Only a kernel that sends a catalog changes it: a hello without one keeps the rule docs.
      if (msg.catalog !== undefined) {
        this._catalog = indexCatalog(msg.catalog);
      }
      this._setState('attached');
    } else if (msg.type === 'report') {
      if (!msg.report || typeof msg.report !== 'object') {
        return;
      }
      const channel = msg.channel ?? '';
      if (typeof msg.seq === 'number') {
        const last = this._seen.get(channel) ?? -1;
        if (msg.seq <= last) {
          return; // the same report on a second comm, or a replay we already have
        }
        this._seen.set(channel, msg.seq);
      }
      this._unloaded = false;
      this._addReport(msg.report);
      this._truncated = msg.truncated ?? {};
      this._state = 'attached';
      this._changed.emit();
    } else if (msg.type === 'closed') {
      this._unloaded = true;
      this._setState('not-loaded');
    }
  }

  /** The widget under a cell asked for its fix: apply it here and tell the kernel how it went. */
  private _onApplyFix(msg: { id?: unknown; cell_id?: unknown; code?: unknown; fix?: unknown }, comm: Kernel.IComm | null): void {
    let outcome: IFixOutcome;
    if (!this._applyFix) {
      outcome = { ok: false, reason: 'This panel cannot edit the notebook.' };
    } else if (typeof msg.cell_id !== 'string' || !msg.fix || typeof msg.fix !== 'object') {
      outcome = { ok: false, reason: 'The request names no cell or fix.' };
    } else {
      try {
        outcome = this._applyFix(msg.cell_id, typeof msg.code === 'string' ? msg.code : null, msg.fix as IFix);
      } catch (err) {
        outcome = { ok: false, reason: `The notebook refused the edit (${err}).` };
      }
    }
    if (comm && !comm.isDisposed && typeof msg.id === 'string') {
      const reply: IFixResultMessage = { type: 'fix-result', id: msg.id, ok: outcome.ok, reason: outcome.reason };
      try {
        comm.send(reply as any);
      } catch {
        // the kernel went away meanwhile
      }
    }
  }

  /** Forget reports (kernel restart or change) and the rule docs of that kernel's torchmagic. */
  clear(): void {
    this._cells = [];
    this._catalog = new Map();
    this._truncated = {};
    this._seen.clear();
  }

  private _addReport(report: IReport): void {
    const cellId = report.cell_id ?? null;
    const entry: ICheckedCell = { cellId, executionCount: report.execution_count ?? null, report };
    // A cell checked again replaces its old entry; cells without an id are kept apart.
    const rest = cellId === null ? this._cells : this._cells.filter(c => c.cellId !== cellId);
    this._cells = [entry, ...rest].slice(0, this._historySize);
  }

  private _onKernelChanged(_: ISessionContext, args: { oldValue: Kernel.IKernelConnection | null; newValue: Kernel.IKernelConnection | null }): void {
    this._detach();
    this.clear();
    this._attach(args.newValue);
    this._changed.emit();
  }

  private _attach(kernel: Kernel.IKernelConnection | null): void {
    this._kernel = kernel;
    if (!kernel || kernel.isDisposed) {
      this._kernel = null;
      this._setState('no-kernel');
      return;
    }
    try {
      kernel.registerCommTarget(COMM_TARGET, this._onCommOpen);
    } catch (err) {
      console.warn('torchmagic: cannot register the comm target', err);
    }
    kernel.statusChanged.connect(this._onStatus, this);
    kernel.connectionStatusChanged.connect(this._onConnection, this);
    kernel.disposed.connect(this._onKernelDisposed, this);
    if (kernel.status === 'dead') {
      this._setState('dead');
    } else {
      this._probe();
    }
  }

  private _detach(): void {
    const kernel = this._kernel;
    this._kernel = null;
    this._closeComms();
    if (!kernel) {
      return;
    }
    kernel.statusChanged.disconnect(this._onStatus, this);
    kernel.connectionStatusChanged.disconnect(this._onConnection, this);
    kernel.disposed.disconnect(this._onKernelDisposed, this);
    if (!kernel.isDisposed) {
      try {
        kernel.removeCommTarget(COMM_TARGET, this._onCommOpen);
      } catch {
        // the kernel went away meanwhile
      }
    }
  }

  private _onKernelDisposed(): void {
    this._detach();
    this.clear();
    this._setState('no-kernel');
  }

  private _onStatus(kernel: Kernel.IKernelConnection, status: Kernel.Status): void {
    if (status === 'restarting' || status === 'autorestarting') {
      // The new process has no torchmagic and Lab drops the old comms: start from scratch.
      this._comms.clear();
      this.clear();
      this._needProbe = true;
      this._setState('restarting');
    } else if (status === 'dead') {
      this._comms.clear();
      this.clear();
      this._needProbe = true;
      this._setState('dead');
    } else if (this._needProbe && (status === 'idle' || status === 'busy')) {
      this._needProbe = false;
      this._probe();
    }
  }

  private _onConnection(kernel: Kernel.IKernelConnection, status: Kernel.ConnectionStatus): void {
    // Comm messages sent while the websocket was down are lost: ask again.
    if (status === 'connected' && this._wasDisconnected) {
      this._wasDisconnected = false;
      this._probe();
    } else if (status !== 'connected') {
      this._wasDisconnected = true;
    }
  }

  private _onCommOpen = (comm: Kernel.IComm, msg: KM.ICommOpenMsg): void => {
    this._adopt(comm);
    const capabilities = this.capabilities;
    if (capabilities.length) {
      try {
        comm.send({ type: 'capabilities', capabilities } as any);
      } catch (err) {
        console.warn('torchmagic: cannot announce what the panel can do', err);
      }
    }
    this.handleMessage(msg.content.data, comm);
  };

  /** Open a comm to the kernel's `torchmagic` target: it answers with its recent reports. */
  private _probe(): void {
    const kernel = this._kernel;
    if (!kernel || kernel.isDisposed || this._isDisposed) {
      return;
    }
    // One probe comm at a time; comms the kernel opened stay.
    if (this._probeComm) {
      this._closeComm(this._probeComm);
      this._probeComm = null;
    }
    if (this._state !== 'attached') {
      this._setState('connecting');
    }
    try {
      const comm = kernel.createComm(COMM_TARGET);
      this._probeComm = comm;
      this._adopt(comm);
      comm.open({ type: 'request', capabilities: this.capabilities } as any);
    } catch (err) {
      console.warn('torchmagic: cannot open a comm', err);
    }
  }

  private _adopt(comm: Kernel.IComm): void {
    this._comms.add(comm);
    comm.onMsg = (msg: KM.ICommMsgMsg) => this.handleMessage(msg.content.data, comm);
    comm.onClose = () => {
      this._comms.delete(comm);
      if (this._probeComm === comm) {
        this._probeComm = null;
      }
      // Closed by the kernel: no `torchmagic` target (never loaded) or unloaded.
      if (this._comms.size === 0 && (this._state === 'connecting' || this._state === 'attached')) {
        this._setState('not-loaded');
      }
    };
  }

  private _closeComm(comm: Kernel.IComm): void {
    this._comms.delete(comm);
    comm.onClose = () => undefined;
    comm.onMsg = () => undefined;
    if (!comm.isDisposed) {
      try {
        comm.close();
      } catch {
        // already closed by the kernel or the kernel is gone
      }
    }
  }

  private _closeComms(): void {
    for (const comm of Array.from(this._comms)) {
      this._closeComm(comm);
    }
    this._probeComm = null;
  }

  private _setState(state: ConnectionState): void {
    // Reports belong to a live torchmagic; other states show no stale data.
    if (state !== 'attached' && state !== 'connecting') {
      this.clear();
    }
    this._state = state;
    this._changed.emit();
  }

  private _session: ISessionContext;
  private _applyFix: FixApplier | null;
  private _kernel: Kernel.IKernelConnection | null = null;
  private _comms = new Set<Kernel.IComm>();
  private _probeComm: Kernel.IComm | null = null;
  private _state: ConnectionState = 'no-kernel';
  private _cells: ICheckedCell[] = [];
  private _historySize: number;
  private _catalog: ReadonlyMap<string, IRuleDoc> = new Map();
  private _truncated: { [list: string]: number } = {};
  private _seen = new Map<string, number>();
  private _unloaded = false;
  private _needProbe = false;
  private _wasDisconnected = false;
  private _isDisposed = false;
  private _changed = new Signal<this, void>(this);
}

function clampHistory(size: number): number {
  return Number.isFinite(size) ? Math.max(1, Math.floor(size)) : HISTORY_SIZE;
}
