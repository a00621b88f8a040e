/**
 * DOM building without `innerHTML`: every string that may come from a report goes in as
 * text, so a tensor called `<img onerror=…>` shows as those characters and runs nothing.
 */

export type Child = Node | string | null | undefined | false;

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: { [name: string]: string | number | boolean | null | undefined } = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) {
      continue;
    }
    if (name === 'className') {
      el.className = String(value);
    } else {
      el.setAttribute(name, value === true ? '' : String(value));
    }
  }
  append(el, ...children);
  return el;
}

export function append(el: Node, ...children: Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) {
      continue;
    }
    el.appendChild(typeof child === 'string' ? document.createTextNode(child) : child);
  }
}

/** Replace an element's children in one step (one reflow, no flash of emptiness). */
export function replaceChildren(el: Element, ...children: Child[]): void {
  const fragment = document.createDocumentFragment();
  append(fragment, ...children);
  while (el.firstChild) {
    el.removeChild(el.firstChild);
  }
  el.appendChild(fragment);
}

/**
 * Messages and hints quote code in backticks, as rule docs do: those spans become <code>
 * elements, built from text nodes like everything else.
 */
export function withCode(text: string): (Node | string)[] {
  const parts = String(text).split('`');
  if (parts.length < 3) {
    return [String(text)];
  }
  return parts.map((part, i) => (i % 2 === 1 && i < parts.length - 1 ? codeSpan(part) : i % 2 === 1 ? '`' + part : part));
}

/**
 * A <code> span that a narrow panel may wrap after `.`, `(`, `,` and `=` (as <wbr>), so
 * `torch.save(model.state_dict(), f)` breaks between names, not inside them.
 */
export function codeSpan(text: string): HTMLElement {
  const pieces = text.split(/(?<=[.(,=])/);
  const children: (Node | string)[] = [];
  pieces.forEach((piece, i) => {
    if (i > 0) {
      children.push(h('wbr'));
    }
    children.push(piece);
  });
  return h('code', {}, ...children);
}
