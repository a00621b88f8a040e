import { DataTable } from '../tables';
import { TENSOR_COLUMNS } from '../views';
import { ITensorRecord } from '../types';
import { EVIL } from './fixtures';

function tensors(n: number): ITensorRecord[] {
  return Array.from({ length: n }, (_, i) => ({
    name: `t${i}`,
    shape: [i + 1],
    dtype: i % 2 ? 'float16' : 'float32',
    device: i % 3 ? 'cpu' : 'cuda:0',
    nbytes: (i + 1) * 4
  }));
}

function names(table: DataTable<ITensorRecord>): string[] {
  return Array.from(table.node.querySelectorAll('tbody tr')).map(tr => tr.querySelector('td')!.textContent!);
}

describe('DataTable', () => {
  it('sorts by a column header, and flips on a second click', () => {
    const table = new DataTable<ITensorRecord>({ label: 'Tensors', columns: TENSOR_COLUMNS });
    table.setRows(tensors(5));
    const size = table.node.querySelector<HTMLButtonElement>('button[data-column="nbytes"]')!;
    size.click(); // numeric columns start descending
    expect(names(table)).toEqual(['t4', 't3', 't2', 't1', 't0']);
    expect(size.parentElement!.getAttribute('aria-sort')).toBe('descending');
    size.click();
    expect(names(table)).toEqual(['t0', 't1', 't2', 't3', 't4']);
    table.sortBy('name', true);
    expect(names(table)[0]).toBe('t4');
  });

  it('sorts names naturally (t2 before t10)', () => {
    const table = new DataTable<ITensorRecord>({ label: 'Tensors', columns: TENSOR_COLUMNS, sort: { column: 'name', descending: false } });
    table.setRows(tensors(12));
    expect(names(table).slice(0, 3)).toEqual(['t0', 't1', 't2']);
  });

  it('filters rows by text and reports the counts', () => {
    const table = new DataTable<ITensorRecord>({ label: 'Tensors', columns: TENSOR_COLUMNS, filterable: true });
    table.setRows(tensors(6));
    const input = table.node.querySelector<HTMLInputElement>('input.tm-Table-filter')!;
    input.value = 'CUDA';
    input.dispatchEvent(new Event('input'));
    expect(names(table)).toEqual(['t0', 't3']);
    expect(table.node.querySelector('.tm-Table-status')!.textContent).toBe('2 rows (6 in all)');
    input.value = 'nothing-like-this';
    input.dispatchEvent(new Event('input'));
    expect(table.node.querySelector('tbody')!.textContent).toBe('No rows match the filter');
  });

  it('paginates large tables and keeps the page across new rows', () => {
    const table = new DataTable<ITensorRecord>({ label: 'Tensors', columns: TENSOR_COLUMNS, pageSize: 10 });
    table.setRows(tensors(25));
    expect(names(table)).toHaveLength(10);
    expect(table.pageCount).toBe(3);
    const [prev, next] = Array.from(table.node.querySelectorAll<HTMLButtonElement>('.tm-Table-page'));
    expect(prev.disabled).toBe(true);
    next.click();
    next.click();
    expect(names(table)).toEqual(['t20', 't21', 't22', 't23', 't24']);
    expect(table.node.querySelector('.tm-Table-status')!.textContent).toBe('21–25 of 25 rows');
    expect(next.disabled).toBe(true);
    table.setRows(tensors(26));
    expect(table.page).toBe(2);
    table.setRows(tensors(3)); // fewer rows: the page is clamped, not blank
    expect(names(table)).toEqual(['t0', 't1', 't2']);
  });

  it('shows the empty text for no rows and escapes cell text', () => {
    const table = new DataTable<ITensorRecord>({ label: 'Tensors', columns: TENSOR_COLUMNS, emptyText: 'No tensors' });
    table.setRows([]);
    expect(table.node.querySelector('tbody')!.textContent).toBe('No tensors');
    table.setRows([{ name: EVIL, shape: [1], dtype: 'float32', device: 'cpu', nbytes: 4 }]);
    expect(table.node.querySelector('img')).toBeNull();
    expect(names(table)).toEqual([EVIL]);
  });
});

describe('DataTable row clicks', () => {
  it('calls back with the row on click and on Enter', () => {
    const onRowClick = jest.fn();
    const table = new DataTable<ITensorRecord>({ label: 'Tensors', columns: TENSOR_COLUMNS, onRowClick, rowClickable: t => t.name !== 't1' });
    table.setRows(tensors(2));
    const rows = table.node.querySelectorAll<HTMLTableRowElement>('tbody tr');
    rows[0].click();
    rows[0].dispatchEvent(new KeyboardEvent('keydown', { key: 'Enter' }));
    rows[1].click();
    expect(onRowClick.mock.calls.map(c => c[0].name)).toEqual(['t0', 't0']);
    expect(rows[1].classList.contains('tm-mod-clickable')).toBe(false);
  });
});

describe('DataTable page size', () => {
  it('applies a new page size at once, keeping the first row on screen on the page shown', () => {
    const table = new DataTable<ITensorRecord>({ label: 'Tensors', columns: TENSOR_COLUMNS, pageSize: 10 });
    table.setRows(tensors(45));
    table.setPage(2); // rows 21-30
    table.setPageSize(4);
    expect(table.pageSize).toBe(4);
    expect(names(table)).toEqual(['t20', 't21', 't22', 't23']);
    expect(table.node.querySelector('.tm-Table-status')!.textContent).toBe('21–24 of 45 rows');
    table.setPageSize(100);
    expect(names(table)).toHaveLength(45);
    expect(table.page).toBe(0);
  });
});
