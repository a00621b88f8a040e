/**
 * The report contract (docs: shared/report.md): what `Report.to_dict()` sends over the
 * `torchmagic` comm. Every field is optional here because the panel renders whatever a
 * report has; more fields may be added on the kernel side, none are required.
 */

export type Severity = 'error' | 'warning' | 'info';

export interface IFinding {
  rule: string;
  name?: string;
  severity: Severity | string;
  line?: number | null;
  col?: number | null;
  message: string;
  hint?: string;
  object?: string | null;
  source?: string;
}

export interface ISyncRecord {
  line: number;
  count: number;
  seconds: number;
  ops?: { [op: string]: number };
  code?: string;
}

export interface ITensorRecord {
  name: string;
  shape: number[];
  dtype: string;
  device: string;
  nbytes: number;
  requires_grad?: boolean;
  grad_fn?: string | null;
  is_view?: boolean;
  changed?: boolean;
  storage_key?: string | null;
}

export interface IModuleRecord {
  name: string;
  type: string;
  params: number;
  trainable: number;
  devices: string[];
  dtypes: string[];
  training: boolean;
  nbytes: number;
  changed?: boolean;
}

export interface IShapeRecord {
  module: string;
  type: string;
  calls: number;
  inputs: number[][];
  outputs: number[][];
  device: string | null;
  dtype?: string | null;
  depth?: number;
}

export interface IMemoryRecord {
  device?: string;
  allocated_before?: number | null;
  allocated_after?: number | null;
  peak?: number | null;
}

export interface IReport {
  cell_id?: string | null;
  execution_count?: number | null;
  elapsed_s?: number;
  sync_s?: number;
  check_s?: number;
  findings?: IFinding[];
  syncs?: ISyncRecord[];
  tensors?: ITensorRecord[];
  modules?: IModuleRecord[];
  shape_trace?: IShapeRecord[];
  memory?: IMemoryRecord;
  memory_by_device?: { [device: string]: number };
  errors?: string[];
}

/** Messages the kernel side (`torchmagic/views/comm.py`) sends on the comm. */
export type KernelMessage =
  | { type: 'hello'; channel?: string; version?: string }
  | { type: 'report'; report: IReport; channel?: string; seq?: number; truncated?: { [list: string]: number } }
  | { type: 'closed'; channel?: string };

/** What the panel shows for one notebook's kernel. */
export type ConnectionState =
  | 'no-kernel' // no notebook, or a notebook without a kernel
  | 'connecting' // asked the kernel whether torchmagic is loaded, no answer yet
  | 'not-loaded' // the kernel has no `torchmagic` comm target: `%load_ext torchmagic`
  | 'attached' // torchmagic is loaded and talking to this panel
  | 'restarting' // the kernel is restarting; the panel was cleared
  | 'dead'; // the kernel died

/** One checked cell as the panel remembers it. */
export interface ICheckedCell {
  cellId: string | null;
  executionCount: number | null;
  report: IReport;
}
