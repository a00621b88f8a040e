/**
 * A small sortable, filterable, paginated table for the panel's record lists.
 *
 * The table keeps its sort, filter text and page across `setRows` calls, so a new report
 * refreshes the rows under the user's view instead of resetting it; only the body and the
 * footer text change, so the header, filter box (and its focus) and the layout stay put.
 */

import { h, replaceChildren } from './dom';

export type SortValue = string | number | boolean | null | undefined;

export interface IColumn<T> {
  id: string;
  label: string;
  /** Tooltip for the header. */
  title?: string;
  /** The sort key of a row in this column; also its text unless `text` is given. */
  value: (row: T) => SortValue;
  /** The cell's text. */
  text?: (row: T) => string;
  numeric?: boolean;
  /** Relative width of the column, e.g. '30%'. */
  width?: string;
  /** 1: always shown; 2: hidden when the panel is narrow; 3: shown only when it is wide. */
  priority?: 1 | 2 | 3;
  sortable?: boolean;
}

export interface ITableOptions<T> {
  columns: IColumn<T>[];
  /** Accessible name of the table, e.g. "Tensors". */
  label: string;
  pageSize?: number;
  /** Show a filter box matching rows by `filterText` (default: all cells' text). */
  filterable?: boolean;
  filterText?: (row: T) => string;
  sort?: { column: string; descending: boolean } | null;
  emptyText?: string;
  rowClass?: (row: T) => string;
  rowTitle?: (row: T) => string;
  /** Makes rows buttons (click, Enter or Space); return false for rows that are not. */
  onRowClick?: ((row: T) => void) | null;
  rowClickable?: (row: T) => boolean;
}

export class DataTable<T> {
  readonly node: HTMLDivElement;

  constructor(options: ITableOptions<T>) {
    this._options = options;
    this._pageSize = options.pageSize ?? 50;
    this._sort = options.sort ?? null;

    this.node = h('div', { className: 'tm-Table' });
    if (options.filterable) {
      this._filter = h('input', {
        className: 'tm-Table-filter jp-mod-styled',
        type: 'search',
        placeholder: `Filter ${options.label.toLowerCase()}…`,
        'aria-label': `Filter ${options.label.toLowerCase()}`,
        spellcheck: 'false'
      });
      this._filter.addEventListener('input', () => {
        this._filterText = this._filter!.value.trim().toLowerCase();
        this._page = 0;
        this._renderBody();
      });
      this.node.appendChild(this._filter);
    }
    const headRow = h('tr', {});
    for (const column of options.columns) {
      // Widths sit on the header cells (not a colgroup) so hiding a low-priority column
      // at narrow widths hands its share to the others.
      const th = h('th', {
        scope: 'col',
        className: columnClass(column),
        title: column.title ?? null,
        style: column.width ? `width: ${column.width}` : null
      });
      if (column.sortable === false) {
        th.textContent = column.label;
      } else {
        const button = h('button', { className: 'tm-Table-sort', type: 'button', 'data-column': column.id }, column.label);
        button.addEventListener('click', () => this.sortBy(column.id));
        th.appendChild(button);
      }
      this._headers.set(column.id, th);
      headRow.appendChild(th);
    }
    this._body = h('tbody', {});
    const table = h('table', { className: 'tm-Table-table', 'aria-label': options.label }, h('thead', {}, headRow), this._body);
    this.node.appendChild(h('div', { className: 'tm-Table-scroll' }, table));

    this._status = h('span', { className: 'tm-Table-status', 'aria-live': 'polite' });
    this._prev = h('button', { className: 'tm-Table-page', type: 'button', 'aria-label': 'Previous page', title: 'Previous page' }, '‹');
    this._next = h('button', { className: 'tm-Table-page', type: 'button', 'aria-label': 'Next page', title: 'Next page' }, '›');
    this._prev.addEventListener('click', () => this.setPage(this._page - 1));
    this._next.addEventListener('click', () => this.setPage(this._page + 1));
    this.node.appendChild(h('div', { className: 'tm-Table-footer' }, this._status, h('span', { className: 'tm-Table-pager' }, this._prev, this._next)));
    this._renderBody();
  }

  /** All rows (before filtering). */
  get rows(): readonly T[] {
    return this._rows;
  }

  /** Rows matching the filter, in sort order (all pages). */
  get visibleRows(): T[] {
    const { columns, filterText } = this._options;
    let rows = this._rows;
    if (this._filterText) {
      const needle = this._filterText;
      const text = filterText ?? ((row: T) => columns.map(c => cellText(c, row)).join(' '));
      rows = rows.filter(row => text(row).toLowerCase().includes(needle));
    }
    const sort = this._sort;
    const column = sort ? columns.find(c => c.id === sort.column) : undefined;
    if (sort && column) {
      const sign = sort.descending ? -1 : 1;
      // Stable: equal keys keep the kernel's order.
      rows = rows
        .map((row, index) => ({ row, index, key: column.value(row) }))
        .sort((a, b) => compare(a.key, b.key) * sign || a.index - b.index)
        .map(item => item.row);
    }
    return rows;
  }

  get page(): number {
    return this._page;
  }

  get pageCount(): number {
    return Math.max(1, Math.ceil(this.visibleRows.length / this._pageSize));
  }

  get pageSize(): number {
    return this._pageSize;
  }

  /** Rows per page; the first row on screen stays on the page shown. */
  setPageSize(size: number): void {
    const next = Number.isFinite(size) ? Math.max(1, Math.floor(size)) : this._pageSize;
    if (next === this._pageSize) {
      return;
    }
    this._page = Math.floor((this._page * this._pageSize) / next);
    this._pageSize = next;
    this._renderBody();
  }

  setRows(rows: readonly T[]): void {
    this._rows = rows.slice();
    this._renderBody();
  }

  setFilter(text: string): void {
    if (this._filter) {
      this._filter.value = text;
    }
    this._filterText = text.trim().toLowerCase();
    this._page = 0;
    this._renderBody();
  }

  /** Sort by a column; sorting by the current column again flips the direction. */
  sortBy(columnId: string, descending?: boolean): void {
    const column = this._options.columns.find(c => c.id === columnId);
    if (!column) {
      return;
    }
    if (descending === undefined) {
      descending = this._sort?.column === columnId ? !this._sort.descending : !!column.numeric;
    }
    this._sort = { column: columnId, descending };
    this._page = 0;
    this._renderBody();
  }

  setPage(page: number): void {
    this._page = page;
    this._renderBody();
  }

  private _renderBody(): void {
    const { columns, emptyText, rowClass, rowTitle } = this._options;
    const rows = this.visibleRows;
    const pages = Math.max(1, Math.ceil(rows.length / this._pageSize));
    this._page = Math.min(Math.max(0, this._page), pages - 1);
    const start = this._page * this._pageSize;
    const shown = rows.slice(start, start + this._pageSize);

    const trs: HTMLTableRowElement[] = shown.map(row => {
      const tr = h('tr', { className: rowClass ? rowClass(row) : null, title: rowTitle ? rowTitle(row) : null });
      const onClick = this._options.onRowClick;
      if (onClick && (this._options.rowClickable?.(row) ?? true)) {
        tr.classList.add('tm-mod-clickable');
        tr.tabIndex = 0;
        tr.addEventListener('click', () => onClick(row));
        tr.addEventListener('keydown', event => {
          if (event.key === 'Enter' || event.key === ' ') {
            event.preventDefault();
            onClick(row);
          }
        });
      }
      for (const column of columns) {
        const text = cellText(column, row);
        tr.appendChild(h('td', { className: columnClass(column), title: text }, text));
      }
      return tr;
    });
    if (trs.length === 0) {
      const message = this._rows.length === 0 ? emptyText ?? 'None' : 'No rows match the filter';
      trs.push(h('tr', { className: 'tm-Table-empty' }, h('td', { colspan: columns.length }, message)));
    }
    replaceChildren(this._body, ...trs);

    for (const [id, th] of this._headers) {
      if (this._sort?.column === id) {
        th.setAttribute('aria-sort', this._sort.descending ? 'descending' : 'ascending');
      } else {
        th.removeAttribute('aria-sort');
      }
    }
    const total = this._rows.length;
    let status: string;
    if (rows.length === 0) {
      status = total === 0 ? '0 rows' : `0 of ${total} rows`;
    } else {
      const range = rows.length > this._pageSize ? `${start + 1}–${start + shown.length} of ` : '';
      const filtered = rows.length < total ? ` (${total} in all)` : '';
      status = `${range}${rows.length} ${rows.length === 1 ? 'row' : 'rows'}${filtered}`;
    }
    this._status.textContent = status;
    this._prev.disabled = this._page <= 0;
    this._next.disabled = this._page >= pages - 1;
    // Hidden (not removed) on one page, so the footer keeps its height.
    this._prev.parentElement!.style.visibility = pages > 1 ? 'visible' : 'hidden';
  }

  private _options: ITableOptions<T>;
  private _pageSize: number;
  private _rows: T[] = [];
  private _sort: { column: string; descending: boolean } | null;
  private _filterText = '';
  private _page = 0;
  private _filter: HTMLInputElement | null = null;
  private _headers = new Map<string, HTMLTableCellElement>();
  private _body: HTMLTableSectionElement;
  private _status: HTMLSpanElement;
  private _prev: HTMLButtonElement;
  private _next: HTMLButtonElement;
}

function columnClass<T>(column: IColumn<T>): string | null {
  const classes = [column.numeric ? 'tm-mod-numeric' : '', column.priority && column.priority > 1 ? `tm-mod-priority${column.priority}` : ''];
  return classes.filter(Boolean).join(' ') || null;
}

function cellText<T>(column: IColumn<T>, row: T): string {
  if (column.text) {
    return column.text(row);
  }
  const value = column.value(row);
  return value === null || value === undefined ? '' : String(value);
}

function compare(a: SortValue, b: SortValue): number {
  // Missing values sort last in ascending order.
  const aMissing = a === null || a === undefined;
  const bMissing = b === null || b === undefined;
  if (aMissing || bMissing) {
    return aMissing === bMissing ? 0 : aMissing ? 1 : -1;
  }
  if (typeof a === 'number' && typeof b === 'number') {
    return a - b;
  }
  if (typeof a === 'boolean' && typeof b === 'boolean') {
    return Number(a) - Number(b);
  }
  return String(a).localeCompare(String(b), 'en', { numeric: true, sensitivity: 'base' });
}
