/**
 * The rule catalog the kernel sends in `hello` (newer kernels only), and one rule's doc as
 * the panel shows it under a finding: what, why, the flagged code and the fix. Code goes in
 * <pre> as text, like every other string from the kernel.
 */

import { h, withCode } from './dom';
import { IRuleDoc } from './types';

const TEXT_FIELDS = ['name', 'severity', 'what', 'why', 'example', 'fix', 'not_flagged'] as const;

/**
 * The catalog by rule ID. Entries that are not objects with a string `id` are dropped, and
 * fields of the wrong type are left out, so a malformed catalog costs its bad entries only.
 */
export function indexCatalog(raw: unknown): Map<string, IRuleDoc> {
  const catalog = new Map<string, IRuleDoc>();
  if (!Array.isArray(raw)) {
    return catalog;
  }
  for (const entry of raw) {
    if (!entry || typeof entry !== 'object' || typeof (entry as IRuleDoc).id !== 'string') {
      continue;
    }
    const source = entry as { [key: string]: unknown };
    const doc: IRuleDoc = { id: String(source.id) };
    for (const key of TEXT_FIELDS) {
      if (typeof source[key] === 'string') {
        doc[key] = source[key] as string;
      }
    }
    for (const key of ['evidence', 'overrides'] as const) {
      if (Array.isArray(source[key])) {
        doc[key] = (source[key] as unknown[]).filter((x): x is string => typeof x === 'string');
      }
    }
    catalog.set(doc.id, doc);
  }
  return catalog;
}

/** True when a doc has something to show beyond its ID and name. */
export function hasDoc(doc: IRuleDoc | undefined | null): doc is IRuleDoc {
  return !!doc && !!(doc.what || doc.why || doc.example || doc.fix);
}

/** The doc of one rule: what / why as sentences (backticks as code), example and fix as code. */
export function renderRuleDoc(doc: IRuleDoc): HTMLElement {
  const node = h('div', { className: 'tm-RuleDoc', 'data-rule': doc.id });
  if (doc.what) {
    node.appendChild(h('p', { className: 'tm-RuleDoc-what' }, ...withCode(doc.what)));
  }
  if (doc.why) {
    node.appendChild(h('p', { className: 'tm-RuleDoc-why' }, ...withCode(doc.why)));
  }
  if (doc.example) {
    node.appendChild(codeBlock('Flagged', 'example', doc.example));
  }
  if (doc.fix) {
    node.appendChild(codeBlock('Fix', 'fix', doc.fix));
  }
  if (doc.not_flagged) {
    node.appendChild(h('p', { className: 'tm-RuleDoc-not' }, h('span', { className: 'tm-RuleDoc-label' }, 'Not flagged: '), ...withCode(doc.not_flagged)));
  }
  const meta: string[] = [];
  if (doc.evidence?.length) {
    meta.push(`evidence: ${doc.evidence.join(', ')}`);
  }
  if (doc.overrides?.length) {
    meta.push(`takes precedence over ${doc.overrides.join(', ')}`);
  }
  if (meta.length) {
    node.appendChild(h('p', { className: 'tm-RuleDoc-meta' }, `${doc.id}${doc.name ? ` ${doc.name}` : ''} · ${meta.join(' · ')}`));
  }
  return node;
}

function codeBlock(label: string, kind: string, code: string): HTMLElement {
  return h(
    'figure',
    { className: `tm-RuleDoc-code tm-mod-${kind}` },
    h('figcaption', { className: 'tm-RuleDoc-label' }, label),
    h('pre', {}, h('code', {}, code.replace(/\s+$/, '')))
  );
}
