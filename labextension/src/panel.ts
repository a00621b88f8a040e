/**
 * The sidebar panel: a fixed skeleton (status, summary, one collapsible section per list)
 * whose contents are replaced when the followed client changes. Sections, tables and their
 * sort/filter/page state persist across reports, so new data does not make the layout jump.
 */

import { Message } from '@lumino/messaging';
import { ISignal } from '@lumino/signaling';
import { Widget } from '@lumino/widgets';

import { ReportClient } from './client';
import { h, replaceChildren } from './dom';
import { DataTable } from './tables';
import { ICompileRecord, IFix, IFixOutcome, IModuleRecord, IRuleDoc, IShapeRecord, ISyncRecord, ITensorRecord } from './types';
import {
  COMPILE_COLUMNS,
  MODULE_COLUMNS,
  RevealHandler,
  SHAPE_COLUMNS,
  SYNC_COLUMNS,
  TENSOR_COLUMNS,
  cellLabel,
  compileRowClass,
  compileRowTitle,
  renderFindings,
  renderMemoryTotals,
  renderSummary,
  tensorRowClass,
  tensorRowTitle
} from './views';

export const PANEL_ID = 'torchmagic-sidebar';

/** Rows per table page by default (setting `pageSize`). */
export const PAGE_SIZE = 50;

/** The piece of a client the panel reads; a ReportClient or a test double. */
export interface PanelSource extends Pick<ReportClient, 'state' | 'cells' | 'latest' | 'truncated' | 'unloaded' | 'kernelName'> {
  /** The kernel's rule catalog (absent or empty: rule IDs are plain badges). */
  readonly catalog?: ReadonlyMap<string, IRuleDoc>;
  readonly changed: ISignal<unknown, void>;
  /** Applies a fix to a cell of the notebook (absent: the panel shows no Apply fix button). */
  applyFix?(cellId: string, code: string | null | undefined, fix: IFix): IFixOutcome | null;
}

interface ISection {
  details: HTMLDetailsElement;
  count: HTMLSpanElement;
  body: HTMLDivElement;
}

export class TorchmagicPanel extends Widget {
  constructor(options: { reveal?: RevealHandler | null; pageSize?: number } = {}) {
    super();
    this.id = PANEL_ID;
    this.addClass('tm-Panel');
    this.title.caption = 'torchmagic';
    this._reveal = options.reveal ?? null;
    const pageSize = options.pageSize ?? PAGE_SIZE;

    this._status = h('div', { className: 'tm-Status', 'aria-live': 'polite' });
    this._summary = h('div', { className: 'tm-SummaryBox' });
    this._errors = h('div', { className: 'tm-Errors' });
    const header = h('header', { className: 'tm-Header' }, h('h3', { className: 'tm-Title' }, 'torchmagic'), this._status, this._summary, this._errors);
    this._content = h('div', { className: 'tm-Content' });

    this._findings = this._section('findings', 'Findings', true);
    this._tensors = this._section('tensors', 'Tensors', true);
    this._modules = this._section('modules', 'Modules', false);
    this._shapes = this._section('shapes', 'Shape trace', false);
    this._syncs = this._section('syncs', 'Sync stalls', false);
    this._compile = this._section('compile', 'Compile', false);

    this._totals = h('div', { className: 'tm-TotalsBox' });
    this._tensorTable = new DataTable<ITensorRecord>({
      label: 'Tensors',
      columns: TENSOR_COLUMNS,
      filterable: true,
      pageSize,
      sort: null,
      emptyText: 'No tensors in the namespace',
      rowClass: tensorRowClass,
      rowTitle: tensorRowTitle
    });
    this._tensors.body.append(this._totals, this._tensorTable.node);
    this._moduleTable = new DataTable<IModuleRecord>({ label: 'Modules', columns: MODULE_COLUMNS, filterable: true, pageSize, emptyText: 'No modules in the namespace' });
    this._modules.body.appendChild(this._moduleTable.node);
    this._shapeTable = new DataTable<IShapeRecord>({ label: 'Shape trace', columns: SHAPE_COLUMNS, filterable: true, pageSize, emptyText: 'No forward passes in the last checked cell' });
    this._shapes.body.appendChild(this._shapeTable.node);
    this._syncTable = new DataTable<ISyncRecord>({
      label: 'Sync stalls',
      columns: SYNC_COLUMNS,
      pageSize,
      sort: { column: 'seconds', descending: true },
      emptyText: 'No synchronisations in the last checked cell',
      rowTitle: s => `Line ${s.line}: ${s.count} syncs, ${s.seconds.toFixed(6)} s waited. Click to show the line.`,
      // A sync row reveals its line in the checked cell, like a finding does.
      onRowClick: s => {
        const cellId = this._source?.latest?.cell_id;
        if (cellId && this._reveal) {
          this._reveal(cellId, { rule: '', severity: 'info', message: '', line: s.line, col: 0 });
        }
      }
    });
    this._syncs.body.appendChild(this._syncTable.node);
    this._compileTable = new DataTable<ICompileRecord>({
      label: 'Compile',
      columns: COMPILE_COLUMNS,
      pageSize,
      sort: null,
      emptyText: 'Nothing was compiled in the last checked cell',
      rowClass: compileRowClass,
      rowTitle: compileRowTitle,
      // A compiled function reveals the cell line that compiled it.
      onRowClick: c => {
        const cellId = this._source?.latest?.cell_id;
        if (cellId && this._reveal && c.line !== null && c.line !== undefined) {
          this._reveal(cellId, { rule: '', severity: 'info', message: '', line: c.line, col: 0 });
        }
      },
      rowClickable: c => c.line !== null && c.line !== undefined
    });
    this._compile.body.appendChild(this._compileTable.node);

    this._content.append(
      this._findings.details,
      this._tensors.details,
      this._modules.details,
      this._shapes.details,
      this._syncs.details,
      this._compile.details
    );
    this.node.append(header, this._content);
    this.render();
  }

  get source(): PanelSource | null {
    return this._source;
  }

  /** Follow another notebook's client (null: no notebook). */
  setSource(source: PanelSource | null): void {
    if (source === this._source) {
      return;
    }
    this._source?.changed.disconnect(this._onChanged, this);
    this._source = source;
    source?.changed.connect(this._onChanged, this);
    this.render();
  }

  /** Rows per page of every table (setting `pageSize`), applied at once. */
  setPageSize(size: number): void {
    for (const table of this._tables()) {
      table.setPageSize(size);
    }
  }

  get pageSize(): number {
    return this._tensorTable.pageSize;
  }

  setReveal(reveal: RevealHandler | null): void {
    this._reveal = reveal;
    this.render();
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._source?.changed.disconnect(this._onChanged, this);
    this._source = null;
    super.dispose();
  }

  /** Re-render from the source; cheap enough to call on every report. */
  render(): void {
    this._stale = false;
    const source = this._source;
    const state = source ? source.state : 'no-kernel';
    const latest = source?.latest ?? null;
    const attached = !!source && state === 'attached';
    this.node.dataset.state = source ? state : 'no-notebook';
    replaceChildren(this._status, ...this._statusContent(source));

    if (attached && latest) {
      const cell = source!.cells[0];
      replaceChildren(
        this._summary,
        h('div', { className: 'tm-SummaryCell' }, `Last checked: ${cellLabel(cell)}`, latest.elapsed_s !== undefined ? ` · ran ${formatElapsed(latest.elapsed_s)}` : ''),
        renderSummary(latest)
      );
    } else {
      replaceChildren(this._summary);
    }
    const errors = attached && latest ? latest.errors ?? [] : [];
    const truncated = attached ? Object.entries(source!.truncated) : [];
    replaceChildren(
      this._errors,
      ...errors.map(e => h('div', { className: 'tm-Error', title: 'An internal problem of torchmagic itself' }, `torchmagic: ${e}`)),
      ...truncated.map(([list, n]) => h('div', { className: 'tm-Note' }, `Showing the first rows of ${n} ${list}: the kernel sends a limited number.`))
    );

    this._content.hidden = !(attached && latest);
    const cells = attached ? source!.cells.slice() : [];
    const client = attached ? source! : null;
    replaceChildren(
      this._findings.body,
      renderFindings(cells, this._reveal, {
        catalog: client ? client.catalog : null,
        expanded: this._expanded,
        applyFix: client?.applyFix ? (cellId, code, fix) => client.applyFix!(cellId, code, fix) : null,
        fixOutcomes: this._fixOutcomes
      })
    );
    const findingCount = cells.reduce((n, c) => n + (c.report.findings ?? []).length, 0);
    this._findings.count.textContent = String(findingCount);

    const tensors = latest && attached ? latest.tensors ?? [] : [];
    replaceChildren(this._totals, latest && attached ? renderMemoryTotals(latest) : null);
    this._tensorTable.setRows(tensors);
    this._tensors.count.textContent = String(tensors.length);
    const modules = latest && attached ? latest.modules ?? [] : [];
    this._moduleTable.setRows(modules);
    this._modules.count.textContent = String(modules.length);
    const shapes = latest && attached ? latest.shape_trace ?? [] : [];
    this._shapeTable.setRows(shapes);
    this._shapes.count.textContent = String(shapes.length);
    const syncs = latest && attached ? latest.syncs ?? [] : [];
    this._syncTable.setRows(syncs);
    this._syncs.count.textContent = String(syncs.reduce((n, s) => n + (s.count || 0), 0));
    const compiled = latest && attached ? latest.compile ?? [] : [];
    this._compileTable.setRows(compiled);
    this._compile.count.textContent = String(compiled.length);
    // only for kernels that compile: most notebooks never do
    this._compile.details.hidden = compiled.length === 0;
  }

  private _statusContent(source: PanelSource | null): (Node | string)[] {
    const code = (text: string) => h('code', {}, text);
    if (!source) {
      return [h('p', {}, 'Open a notebook to see what torchmagic finds in its cells.')];
    }
    const kernel = source.kernelName ? h('span', { className: 'tm-Kernel' }, source.kernelName) : null;
    switch (source.state) {
      case 'no-kernel':
        return [h('p', {}, 'This notebook has no kernel yet. Once it has one, run ', code('%load_ext torchmagic'), '.')];
      case 'connecting':
        return [h('p', {}, 'Asking the kernel for torchmagic… (it answers when no cell is running)')];
      case 'not-loaded':
        return [
          h(
            'p',
            { className: 'tm-LoadHint' },
            source.unloaded ? 'torchmagic was unloaded from this kernel. Run ' : 'torchmagic is not loaded in this kernel. Run ',
            code('%load_ext torchmagic'),
            ' in a cell, then check a cell with ',
            code('%%torchcheck'),
            '.'
          )
        ];
      case 'restarting':
        return [h('p', {}, 'The kernel is restarting…')];
      case 'dead':
        return [h('p', {}, 'The kernel has died. Restart it, then run ', code('%load_ext torchmagic'), '.')];
      case 'attached':
        if (!source.latest) {
          return [h('p', {}, 'torchmagic is loaded. Run a cell starting with ', code('%%torchcheck'), ' to see its report here.'), kernel ?? ''];
        }
        return [];
    }
    return [];
  }

  private _tables(): DataTable<any>[] {
    return [this._tensorTable, this._moduleTable, this._shapeTable, this._syncTable, this._compileTable];
  }

  private _section(key: string, title: string, open: boolean): ISection {
    const count = h('span', { className: 'tm-Section-count' }, '0');
    const details = h('details', { className: 'tm-Section', 'data-section': key, open }, h('summary', { className: 'tm-Section-title' }, h('span', {}, title), count));
    const body = h('div', { className: 'tm-Section-body' });
    details.appendChild(body);
    return { details, count, body };
  }

  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    if (this._stale) {
      this.render();
    }
  }

  private _onChanged(): void {
    // A collapsed panel renders when it is shown again, with the latest state.
    if (this.isAttached && !this.isVisible) {
      this._stale = true;
      return;
    }
    this.render();
  }

  private _source: PanelSource | null = null;
  private _stale = false;
  /** Findings whose rule doc the user opened; kept across reports. */
  private _expanded = new Set<string>();
  /** What each Apply fix click did; kept so a re-render does not offer the button again. */
  private _fixOutcomes = new Map<string, IFixOutcome>();
  private _reveal: RevealHandler | null;
  private _status: HTMLDivElement;
  private _summary: HTMLDivElement;
  private _errors: HTMLDivElement;
  private _content: HTMLDivElement;
  private _findings: ISection;
  private _tensors: ISection;
  private _modules: ISection;
  private _shapes: ISection;
  private _syncs: ISection;
  private _compile: ISection;
  private _totals: HTMLDivElement;
  private _tensorTable: DataTable<ITensorRecord>;
  private _moduleTable: DataTable<IModuleRecord>;
  private _shapeTable: DataTable<IShapeRecord>;
  private _syncTable: DataTable<ISyncRecord>;
  private _compileTable: DataTable<ICompileRecord>;
}

function formatElapsed(s: number): string {
  return s < 1 ? `${Math.round(s * 1000)} ms` : `${s.toFixed(2)} s`;
}
