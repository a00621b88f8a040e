import { IReport } from '../types';

export const EVIL = '<img src=x onerror="window.__pwned=1">';

export function sampleReport(overrides: Partial<IReport> = {}): IReport {
  return {
    cell_id: 'cell-1',
    execution_count: 7,
    elapsed_s: 1.42,
    sync_s: 0.91,
    findings: [
      {
        rule: 'TM101',
        name: 'tensor-created-in-forward',
        severity: 'warning',
        line: 4,
        col: 15,
        message: 'torch.ones(3) in forward creates a CPU tensor on every call',
        hint: 'register a buffer',
        object: null,
        source: 'static'
      },
      { rule: 'TM301', name: 'sync-in-loop', severity: 'error', line: 9, col: 2, message: '.item() in a loop', hint: '', object: null, source: 'static' }
    ],
    syncs: [{ line: 9, count: 50, seconds: 0.88, ops: { 'aten::_local_scalar_dense': 50 }, code: 'total += x[i].item()' }],
    tensors: [
      { name: 'x', shape: [3, 4], dtype: 'float32', device: 'cpu', nbytes: 48, requires_grad: false, grad_fn: null, is_view: false, changed: true },
      { name: 'w', shape: [1024, 1024], dtype: 'float16', device: 'cuda:0', nbytes: 2097152, requires_grad: true, grad_fn: null, is_view: false, changed: false }
    ],
    modules: [{ name: 'net', type: 'Sequential', params: 1234, trainable: 1234, devices: ['cpu'], dtypes: ['float32'], training: true, nbytes: 4936 }],
    shape_trace: [{ module: 'net.0', type: 'Linear', calls: 1, inputs: [[5, 8]], outputs: [[5, 16]], device: 'cpu', depth: 1 }],
    memory: { device: 'cpu', allocated_before: null, allocated_after: null, peak: null },
    memory_by_device: { cpu: 48, 'cuda:0': 2097152 },
    errors: [],
    ...overrides
  };
}
