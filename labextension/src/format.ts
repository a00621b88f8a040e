/** Small pure formatters shared by the views; no DOM, no JupyterLab. */

const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];

export function formatBytes(n: number | null | undefined): string {
  if (n === null || n === undefined || !isFinite(n)) {
    return '–';
  }
  let value = Math.max(0, n);
  let unit = 0;
  while (value >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit++;
  }
  const digits = unit === 0 || value >= 100 ? 0 : value >= 10 ? 1 : 2;
  return `${value.toFixed(digits)} ${UNITS[unit]}`;
}

export function formatShape(shape: number[] | null | undefined): string {
  if (!Array.isArray(shape)) {
    return '–';
  }
  return `(${shape.join(', ')}${shape.length === 1 ? ',' : ''})`;
}

export function formatShapes(shapes: number[][] | null | undefined): string {
  if (!Array.isArray(shapes) || shapes.length === 0) {
    return '–';
  }
  return shapes.map(formatShape).join(', ');
}

export function formatSeconds(s: number | null | undefined): string {
  if (s === null || s === undefined || !isFinite(s)) {
    return '–';
  }
  if (s === 0) {
    return '0 s';
  }
  if (s < 0.001) {
    return `${(s * 1e6).toFixed(0)} µs`;
  }
  if (s < 1) {
    return `${(s * 1000).toFixed(s < 0.01 ? 2 : 1)} ms`;
  }
  return `${s.toFixed(2)} s`;
}

export function formatCount(n: number | null | undefined): string {
  if (n === null || n === undefined || !isFinite(n)) {
    return '–';
  }
  return n.toLocaleString('en-US');
}

export function plural(n: number, word: string, many?: string): string {
  return `${n} ${n === 1 ? word : many ?? word + 's'}`;
}
