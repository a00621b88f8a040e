/**
 * Renderers of one report (or the recent checked cells) into DOM nodes: the summary line,
 * the findings grouped by cell, and the column sets of the record tables. Pure functions of
 * their input; text goes in with `textContent` only (see dom.ts).
 */

import { h, withCode } from './dom';
import { hasDoc, renderRuleDoc } from './ruledoc';
import { formatBytes, formatCount, formatSeconds, formatShape, formatShapes, plural } from './format';
import { IColumn } from './tables';
import {
  ICheckedCell,
  ICompileRecord,
  IFinding,
  IFix,
  IFixOutcome,
  IModuleRecord,
  IReport,
  IRuleDoc,
  IShapeRecord,
  ISyncRecord,
  ITensorRecord
} from './types';

const SEVERITIES = ['error', 'warning', 'info'];

export function severityOf(finding: IFinding): string {
  return SEVERITIES.includes(finding.severity) ? finding.severity : 'info';
}

export function countFindings(findings: IFinding[] | undefined): { [severity: string]: number } {
  const counts: { [severity: string]: number } = { error: 0, warning: 0, info: 0 };
  for (const finding of findings ?? []) {
    counts[severityOf(finding)]++;
  }
  return counts;
}

/** Bytes of live tensors per device; the kernel's figure (storages counted once) when it sent one. */
export function memoryByDevice(report: IReport): { [device: string]: number } {
  if (report.memory_by_device && typeof report.memory_by_device === 'object') {
    return report.memory_by_device;
  }
  const totals: { [device: string]: number } = {};
  const seen = new Set<string>();
  for (const t of report.tensors ?? []) {
    if (t.storage_key) {
      if (seen.has(t.storage_key)) {
        continue;
      }
      seen.add(t.storage_key);
    }
    totals[t.device] = (totals[t.device] ?? 0) + (t.nbytes || 0);
  }
  return totals;
}

export function cellLabel(cell: { executionCount?: number | null; cellId?: string | null }): string {
  const count = cell.executionCount;
  return count === null || count === undefined ? 'Cell [ ]' : `Cell [${count}]`;
}

/**
 * The summary line: findings by severity · N syncs · X s waited · memory by device.
 */
export function renderSummary(report: IReport): HTMLElement {
  const counts = countFindings(report.findings);
  const syncCount = (report.syncs ?? []).reduce((n, s) => n + (s.count || 0), 0);
  const memory = memoryByDevice(report);
  const devices = Object.keys(memory).sort();

  const parts: HTMLElement[] = [];
  const findings = h('span', { className: 'tm-Summary-part tm-Summary-findings' });
  for (const severity of SEVERITIES) {
    findings.appendChild(
      h(
        'span',
        { className: `tm-Badge tm-mod-${severity}${counts[severity] ? '' : ' tm-mod-zero'}`, title: plural(counts[severity], severity) },
        `${counts[severity]} ${severity === 'error' ? 'E' : severity === 'warning' ? 'W' : 'I'}`
      )
    );
  }
  parts.push(findings);
  parts.push(
    h(
      'span',
      { className: 'tm-Summary-part tm-Summary-syncs', title: 'CPU–GPU synchronisations while the cell ran, and the time the CPU waited' },
      `${plural(syncCount, 'sync')} · ${formatSeconds(report.sync_s ?? 0)} waited`
    )
  );
  const compiled = report.compile ?? [];
  if (compiled.length) {
    const seconds = compiled.reduce((n, c) => n + (c.compile_s || 0), 0);
    parts.push(
      h(
        'span',
        { className: 'tm-Summary-part tm-Summary-compile', title: 'Functions torch.compile compiled in the cell, and the time it took' },
        `compiled ${plural(compiled.length, 'function')} · ${formatSeconds(seconds)}`
      )
    );
  }
  parts.push(
    h(
      'span',
      { className: 'tm-Summary-part tm-Summary-memory', title: 'Memory of live tensors by device (shared storages counted once)' },
      devices.length ? devices.map(d => `${d} ${formatBytes(memory[d])}`).join(' · ') : 'no tensors'
    )
  );
  return h('div', { className: 'tm-Summary', role: 'status' }, ...parts);
}

export type RevealHandler = (cellId: string, finding: IFinding) => void;

/** What the findings list needs besides the cells. */
export interface IFindingsOptions {
  /** The kernel's rule catalog: a finding whose rule has a doc gets an expandable rule ID. */
  catalog?: ReadonlyMap<string, IRuleDoc> | null;
  /**
   * Keys (`findingKey`) of the findings whose rule doc is open. The panel keeps this set so a
   * doc stays open when the next report re-renders the list; toggling updates it.
   */
  expanded?: Set<string> | null;
  /** Applies a finding's fix to its cell; without it (no notebook to edit) there is no button. */
  applyFix?: ((cellId: string, code: string | null | undefined, fix: IFix) => IFixOutcome | null) | null;
  /** Outcomes of Apply fix clicks by `fixKey`, kept by the panel across re-renders. */
  fixOutcomes?: Map<string, IFixOutcome> | null;
}

/** Identifies one Apply fix click: the finding in one run of its cell. */
export function fixKey(finding: IFinding, cellId: string | null, executionCount: number | null): string {
  return `${findingKey(finding, cellId)}@${executionCount ?? ''}`;
}

/**
 * Findings of the recent checked cells, newest cell first, grouped by cell. A finding of a
 * cell with a `cell_id` reveals that cell when clicked.
 */
export function renderFindings(cells: ICheckedCell[], onReveal: RevealHandler | null, options: IFindingsOptions = {}): HTMLElement {
  const node = h('div', { className: 'tm-Findings' });
  const withFindings = cells.filter(c => (c.report.findings ?? []).length > 0);
  if (withFindings.length === 0) {
    node.appendChild(
      h('p', { className: 'tm-Empty' }, cells.length ? `No findings in the last ${plural(cells.length, 'checked cell')}.` : 'No findings.')
    );
    return node;
  }
  for (const cell of withFindings) {
    const findings = cell.report.findings ?? [];
    const counts = countFindings(findings);
    const group = h('section', { className: 'tm-FindingGroup', 'data-cell-id': cell.cellId ?? null });
    group.appendChild(
      h(
        'h4',
        { className: 'tm-FindingGroup-title' },
        h('span', {}, cellLabel(cell)),
        h(
          'span',
          { className: 'tm-FindingGroup-counts' },
          SEVERITIES.filter(s => counts[s])
            .map(s => plural(counts[s], s))
            .join(', ')
        )
      )
    );
    const list = h('ul', { className: 'tm-FindingList' });
    for (const finding of findings) {
      list.appendChild(
        h('li', {}, renderFinding(finding, cell.cellId ?? null, onReveal, options, { code: cell.report.code, executionCount: cell.executionCount }))
      );
    }
    group.appendChild(list);
    node.appendChild(group);
  }
  return node;
}

/** Identifies a finding across re-renders (for its open rule doc). */
export function findingKey(finding: IFinding, cellId: string | null): string {
  return JSON.stringify([cellId, finding.rule, finding.line ?? null, finding.col ?? null, finding.object ?? null]);
}

/** The kinds of evidence behind a finding: `evidence` from newer kernels, else its `source`. */
export function evidenceOf(finding: IFinding): string[] {
  const evidence = Array.isArray(finding.evidence) ? finding.evidence.filter(e => typeof e === 'string' && e) : [];
  if (evidence.length) {
    return Array.from(new Set(evidence));
  }
  return typeof finding.source === 'string' && finding.source ? [finding.source] : [];
}

const EVIDENCE_TEXT: { [kind: string]: string } = {
  static: "the cell's code",
  live: 'the live objects in the kernel',
  runtime: 'what happened while the cell ran'
};

/** "static + live": shown unless the finding rests on the cell's code alone (the common case). */
export function renderEvidence(finding: IFinding): HTMLElement | null {
  const evidence = evidenceOf(finding);
  if (evidence.length === 0 || (evidence.length === 1 && evidence[0] === 'static')) {
    return null;
  }
  const explained = evidence.map(e => EVIDENCE_TEXT[e] ?? e);
  return h(
    'span',
    { className: 'tm-Evidence', title: `Found from ${explained.join(' and ')}`, 'data-evidence': evidence.join(' ') },
    evidence.join(' + ')
  );
}

/**
 * One finding: rule ID, name, evidence and where; the message, notes from other evidence and
 * the hint. With `cellId` and `onReveal` a click on it (or on "line N") reveals the cell; with
 * a catalog doc for its rule the rule ID is a button that opens the doc below.
 */
export function renderFinding(
  finding: IFinding,
  cellId: string | null,
  onReveal: RevealHandler | null,
  options: IFindingsOptions = {},
  run: { code?: string | null; executionCount?: number | null } = {}
): HTMLElement {
  const severity = severityOf(finding);
  const where =
    finding.line !== null && finding.line !== undefined
      ? `line ${finding.line}${finding.col !== null && finding.col !== undefined ? `:${finding.col + 1}` : ''}`
      : finding.object
        ? String(finding.object)
        : '';
  const clickable = !!(cellId && onReveal);
  const reveal = () => onReveal!(cellId!, finding);
  const node = h('div', {
    className: `tm-Finding tm-mod-${severity}${clickable ? ' tm-mod-clickable' : ''}`,
    title: clickable ? 'Show this cell' : null,
    'data-rule': finding.rule
  });

  const doc = options.catalog?.get(finding.rule);
  let rule: HTMLElement;
  let docNode: HTMLElement | null = null;
  if (hasDoc(doc)) {
    const key = findingKey(finding, cellId);
    const open = !!options.expanded?.has(key);
    docNode = renderRuleDoc(doc);
    docNode.id = `tm-RuleDoc-${++docCounter}`;
    docNode.hidden = !open;
    docNode.title = ''; // the finding's "Show this cell" tooltip does not apply here
    const button = h(
      'button',
      {
        className: `tm-Badge tm-mod-${severity} tm-Finding-rule`,
        type: 'button',
        'aria-expanded': open ? 'true' : 'false',
        'aria-controls': docNode.id,
        title: `What ${finding.rule} checks, and how to fix it`
      },
      finding.rule
    );
    const shown = docNode;
    button.addEventListener('click', event => {
      event.stopPropagation(); // the doc opens; the cell is not revealed
      const nowOpen = shown.hidden;
      shown.hidden = !nowOpen;
      button.setAttribute('aria-expanded', nowOpen ? 'true' : 'false');
      if (nowOpen) {
        options.expanded?.add(key);
      } else {
        options.expanded?.delete(key);
      }
    });
    rule = button;
  } else {
    rule = h('span', { className: `tm-Badge tm-mod-${severity}` }, finding.rule);
  }

  let whereNode: HTMLElement | null = null;
  if (clickable) {
    // The keyboard's way to the cell; a click anywhere else on the finding does the same.
    whereNode = h('button', { className: 'tm-Finding-where tm-Finding-reveal', type: 'button', title: 'Show this cell' }, where || 'show cell');
    whereNode.addEventListener('click', event => {
      event.stopPropagation();
      reveal();
    });
  } else if (where) {
    whereNode = h('span', { className: 'tm-Finding-where' }, where);
  }

  node.appendChild(
    h(
      'div',
      { className: 'tm-Finding-head' },
      rule,
      finding.name ? h('span', { className: 'tm-Finding-name' }, finding.name) : null,
      renderEvidence(finding),
      whereNode
    )
  );
  node.appendChild(h('div', { className: 'tm-Finding-message' }, ...withCode(finding.message ?? '')));
  const notes = Array.isArray(finding.notes) ? finding.notes.filter(n => typeof n === 'string' && n) : [];
  if (notes.length) {
    node.appendChild(h('ul', { className: 'tm-Finding-notes' }, ...notes.map(note => h('li', {}, ...withCode(note)))));
  }
  if (finding.hint) {
    node.appendChild(h('div', { className: 'tm-Finding-hint' }, ...withCode(finding.hint)));
  }
  const fixNode = renderFix(finding, cellId, onReveal, options, run);
  if (fixNode) {
    node.appendChild(fixNode);
  }
  if (docNode) {
    node.appendChild(docNode);
  }
  if (clickable) {
    node.addEventListener('click', event => {
      // Reading or copying the rule doc is not a request to jump to the cell.
      if (docNode && event.target instanceof Node && docNode.contains(event.target)) {
        return;
      }
      reveal();
    });
  }
  return node;
}

let docCounter = 0;

/** True for a fix object with at least one edit (older kernels send none, `null` means none). */
export function hasFix(fix: IFix | null | undefined): fix is IFix {
  return !!fix && typeof fix === 'object' && Array.isArray(fix.edits) && fix.edits.length > 0;
}

/**
 * The fix of a finding: its title, a warning when the edit may change behaviour, and an
 * Apply fix button where the panel can edit the cell (it edits the source; the cell is not run).
 */
function renderFix(
  finding: IFinding,
  cellId: string | null,
  onReveal: RevealHandler | null,
  options: IFindingsOptions,
  run: { code?: string | null; executionCount?: number | null }
): HTMLElement | null {
  const fix = finding.fix;
  if (!hasFix(fix)) {
    return null;
  }
  const unsafe = fix.applicability === 'unsafe';
  const node = h(
    'div',
    { className: 'tm-Finding-fix', 'data-applicability': unsafe ? 'unsafe' : 'safe' },
    h('span', { className: 'tm-Finding-fixTitle' }, 'Fix: ', ...withCode(fix.title ?? '')),
    unsafe ? h('span', { className: 'tm-Finding-unsafe', title: 'This edit may change what the code computes: read it before you run the cell' }, 'may change behaviour') : null
  );
  const applyFix = options.applyFix;
  if (!cellId || !applyFix) {
    return node;
  }
  const key = fixKey(finding, cellId, run.executionCount ?? null);
  const done = options.fixOutcomes?.get(key);
  const status = (outcome: IFixOutcome) =>
    h(
      'span',
      { className: `tm-Finding-fixStatus ${outcome.ok ? 'tm-mod-applied' : 'tm-mod-refused'}`, role: 'status' },
      outcome.ok ? 'Applied — run the cell to check it again.' : outcome.reason
    );
  if (done) {
    node.appendChild(status(done));
    return node;
  }
  const button = h(
    'button',
    {
      className: 'tm-Finding-apply jp-mod-styled',
      type: 'button',
      title: `${fix.title} (edits the cell; it is not run)${unsafe ? ' — this edit may change behaviour' : ''}`
    },
    'Apply fix'
  );
  button.addEventListener('click', event => {
    event.stopPropagation(); // applying is not a request to jump to the cell
    const outcome = applyFix(cellId, run.code, fix) ?? { ok: false, reason: 'This panel cannot edit the notebook.' };
    options.fixOutcomes?.set(key, outcome);
    button.replaceWith(status(outcome));
    if (outcome.ok && onReveal) {
      onReveal(cellId, finding); // show the edited cell
    }
  });
  node.appendChild(button);
  return node;
}

/** "cpu 48 B · cuda:0 1.2 MiB" with the number of tensors, above the tensor table. */
export function renderMemoryTotals(report: IReport): HTMLElement {
  const memory = memoryByDevice(report);
  const counts: { [device: string]: number } = {};
  for (const t of report.tensors ?? []) {
    counts[t.device] = (counts[t.device] ?? 0) + 1;
  }
  const devices = Array.from(new Set([...Object.keys(memory), ...Object.keys(counts)])).sort();
  const node = h('div', { className: 'tm-Totals' });
  if (devices.length === 0) {
    return node;
  }
  for (const device of devices) {
    node.appendChild(
      h(
        'span',
        { className: 'tm-Totals-device', 'data-device': device },
        h('span', { className: 'tm-Totals-name' }, device),
        ` ${formatBytes(memory[device] ?? 0)} in ${plural(counts[device] ?? 0, 'tensor')}`
      )
    );
  }
  const mem = report.memory;
  if (mem && (mem.peak !== null && mem.peak !== undefined)) {
    node.appendChild(
      h('span', { className: 'tm-Totals-device', title: 'Allocator peak while the cell ran' }, `${mem.device ?? ''} peak ${formatBytes(mem.peak)}`)
    );
  }
  return node;
}

export const TENSOR_COLUMNS: IColumn<ITensorRecord>[] = [
  { id: 'name', label: 'Name', value: t => t.name, width: '22%' },
  { id: 'shape', label: 'Shape', value: t => (t.shape ?? []).reduce((a, b) => a * b, 1), text: t => formatShape(t.shape), width: '22%' },
  { id: 'dtype', label: 'dtype', priority: 2, value: t => t.dtype, width: '14%' },
  { id: 'device', label: 'Device', value: t => t.device, width: '16%' },
  { id: 'nbytes', label: 'Size', value: t => t.nbytes, text: t => formatBytes(t.nbytes), numeric: true, width: '18%' },
  {
    id: 'grad',
    priority: 3,
    label: 'Grad',
    title: 'requires_grad (and grad_fn)',
    value: t => (t.grad_fn ? `${t.grad_fn}` : t.requires_grad ? 'yes' : ''),
    width: '8%'
  }
];

export function tensorRowClass(t: ITensorRecord): string {
  return [t.changed ? 'tm-mod-changed' : '', t.is_view ? 'tm-mod-view' : ''].filter(Boolean).join(' ');
}

export function tensorRowTitle(t: ITensorRecord): string {
  const notes = [
    `${t.name}: ${t.kind && t.kind !== 'tensor' ? `${t.kind} ` : ''}${formatShape(t.shape)} ${t.dtype} on ${t.device}, ${formatBytes(t.nbytes)}${t.requires_grad ? ', requires grad' : ''}`,
    t.changed ? 'created or rebound by the last checked cell' : '',
    t.is_view ? 'a view: shares storage' : '',
    t.contiguous === false ? `not contiguous${Array.isArray(t.strides) ? `, strides ${formatShape(t.strides)}` : ''}` : '',
    t.grad_fn ? `grad_fn ${t.grad_fn}` : ''
  ];
  return notes.filter(Boolean).join('; ');
}

export const MODULE_COLUMNS: IColumn<IModuleRecord>[] = [
  { id: 'name', label: 'Name', value: m => m.name, width: '20%' },
  { id: 'type', label: 'Type', value: m => m.type, priority: 2, width: '20%' },
  { id: 'params', label: 'Params', value: m => m.params, text: m => formatCount(m.params), numeric: true, width: '14%' },
  {
    id: 'trainable',
    priority: 3,
    label: 'Train.',
    title: 'Trainable parameters',
    value: m => m.trainable,
    text: m => formatCount(m.trainable),
    numeric: true,
    width: '12%'
  },
  { id: 'devices', label: 'Device', priority: 2, value: m => (m.devices ?? []).join(', ') || '–', width: '14%' },
  { id: 'mode', label: 'Mode', priority: 3, value: m => (m.training ? 'train' : 'eval'), width: '8%' },
  { id: 'nbytes', label: 'Size', value: m => m.nbytes, text: m => formatBytes(m.nbytes), numeric: true, width: '12%' }
];

export const SHAPE_COLUMNS: IColumn<IShapeRecord>[] = [
  {
    id: 'module',
    label: 'Module',
    value: s => s.module,
    text: s => `${'· '.repeat(Math.max(0, Math.min(s.depth ?? 0, 8)))}${s.module}`,
    width: '28%'
  },
  { id: 'type', label: 'Type', value: s => s.type, priority: 3, width: '18%' },
  { id: 'inputs', label: 'In', value: s => formatShapes(s.inputs), width: '20%', sortable: false },
  { id: 'outputs', label: 'Out', value: s => formatShapes(s.outputs), width: '20%', sortable: false },
  { id: 'calls', label: 'Calls', priority: 2, value: s => s.calls, numeric: true, width: '14%' }
];

export const SYNC_COLUMNS: IColumn<ISyncRecord>[] = [
  { id: 'line', label: 'Line', value: s => s.line, numeric: true, width: '12%' },
  { id: 'code', label: 'Code', value: s => s.code ?? '', width: '44%' },
  { id: 'count', label: 'Syncs', value: s => s.count, text: s => formatCount(s.count), numeric: true, width: '14%' },
  { id: 'seconds', label: 'Waited', value: s => s.seconds, text: s => formatSeconds(s.seconds), numeric: true, width: '16%' },
  {
    id: 'ops',
    priority: 3,
    label: 'Ops',
    value: s =>
      Object.entries(s.ops ?? {})
        .map(([op, n]) => `${op}×${n}`)
        .join(', '),
    width: '14%',
    sortable: false
  }
];

export const COMPILE_COLUMNS: IColumn<ICompileRecord>[] = [
  { id: 'name', label: 'Function', value: c => c.name, width: '30%' },
  { id: 'graphs', label: 'Graphs', priority: 2, value: c => c.graphs ?? 0, numeric: true, width: '14%' },
  {
    id: 'breaks',
    label: 'Breaks',
    title: 'Graph breaks Dynamo met while compiling it in this cell',
    value: c => c.breaks ?? 0,
    numeric: true,
    width: '14%'
  },
  {
    id: 'recompiles',
    label: 'Recomp.',
    title: 'Times it was compiled again for new inputs in this cell',
    value: c => c.recompiles ?? 0,
    text: c => `${c.recompiles ?? 0}${c.limit_hit ? ' (limit)' : ''}`,
    numeric: true,
    width: '16%'
  },
  { id: 'compile_s', label: 'Time', value: c => c.compile_s ?? 0, text: c => formatSeconds(c.compile_s ?? 0), numeric: true, width: '16%' },
  { id: 'location', label: 'Defined', priority: 3, value: c => c.location, width: '10%' }
];

export function compileRowClass(c: ICompileRecord): string {
  return c.limit_hit ? 'tm-mod-error' : c.breaks || c.recompiles ? 'tm-mod-warning' : '';
}

/** "step (line 3): 2 graphs, 1 break, recompiled twice: `x.shape[0]` changed 8 → 9". */
export function compileRowTitle(c: ICompileRecord): string {
  const parts = [
    `${c.name} (${c.location})${c.line !== null && c.line !== undefined ? `, first compiled at line ${c.line}` : ''}`,
    `${plural(c.graphs ?? 0, 'graph')}, ${plural(c.breaks ?? 0, 'break')}, ${plural(c.recompiles ?? 0, 'recompilation')}, ${formatSeconds(c.compile_s ?? 0)} compiling`
  ];
  if (c.limit_hit) {
    parts.push('recompile limit reached: new inputs run uncompiled');
  }
  const reasons = Array.isArray(c.reasons) ? c.reasons.filter(r => typeof r === 'string' && r) : [];
  if (reasons.length) {
    parts.push(`why: ${reasons.join('; ')}`);
  }
  return parts.join('\n');
}
