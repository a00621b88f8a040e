/**
 * The report contract (docs: shared/report.md): what `Report.to_dict()` sends over the
 * `torchmagic` comm. tests/test_report_types.py checks these interfaces against the
 * dataclasses of torchmagic/report.py: a field with a default there is optional here (an
 * older kernel may not send it), and `X | None` there is `x?: X | null` here.
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
  /** Every kind of evidence behind the finding, e.g. ['static', 'live']. */
  evidence?: string[];
  /** Extra sentences from the other evidence, shown under the message. */
  notes?: string[];
  /** Edits that resolve the finding (newer kernels; null when no edit is clearly right). */
  fix?: IFix | null;
}

/** Replace the text from (line, col) to (end_line, end_col): lines 1-based as the cell shows
 * them, columns 0-based characters. */
export interface IEdit {
  line: number;
  col: number;
  end_line: number;
  end_col: number;
  text: string;
}

/** 'safe': the program computes the same thing; 'unsafe': likely right, behaviour may change. */
export type Applicability = 'safe' | 'unsafe';

export interface IFix {
  title: string;
  edits: IEdit[];
  applicability?: Applicability;
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
  strides?: number[] | null;
  contiguous?: boolean | null;
  /** 'tensor', a layout ('sparse_coo', 'nested'), or a tensor subclass's name ('Parameter'). */
  kind?: string;
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
  /** How many submodules the module holds. */
  submodules?: number;
}

export interface IShapeRecord {
  module: string;
  type: string;
  calls: number;
  inputs: number[][];
  outputs: number[][];
  device?: string | null;
  dtype?: string | null;
  depth?: number;
}

/** One function (or module) torch.compile compiled while the cell ran. */
export interface ICompileRecord {
  /** As the user calls it: `step`, `model`, `Net.forward`. */
  name: string;
  /** Where it is defined: "line 3", "cell [4], line 2", "model.py:12", "torch.nn.Sequential". */
  location: string;
  /** The checked cell's line that compiled it first in this cell. */
  line?: number | null;
  graphs?: number;
  breaks?: number;
  recompiles?: number;
  compile_s?: number;
  /** The recompile limit was reached: new inputs run uncompiled. */
  limit_hit?: boolean;
  /** Why it was compiled again, in user terms. */
  reasons?: string[];
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
  /** What torch.compile did in the cell, one row per compiled function. */
  compile?: ICompileRecord[];
  memory_by_device?: { [device: string]: number };
  errors?: string[];
  /** The cell's source as it was checked: what finding lines and fix edits refer to. */
  code?: string;
}

/** One rule of the catalog, as the kernel sends it in `hello` (newer kernels only). */
export interface IRuleDoc {
  id: string;
  name?: string;
  severity?: Severity | string;
  /** The kinds of evidence the rule can fire on: 'static', 'live', 'runtime'. */
  evidence?: string[];
  /** One sentence: what the rule flags. */
  what?: string;
  /** One sentence: why that is a problem. */
  why?: string;
  /** Python code that the rule flags. */
  example?: string;
  /** The same code, fixed. */
  fix?: string;
  /** What the rule deliberately leaves alone (precision before recall). */
  not_flagged?: string;
  /** IDs of the rules this one takes precedence over on the same problem. */
  overrides?: string[];
  /** What `torchmagic check --fix` (and Apply fix) changes, and whether it is safe. */
  autofix?: string;
}

/** Messages the kernel side (`torchmagic/views/comm.py`) sends on the comm. */
export interface IHelloMessage {
  type: 'hello';
  channel?: string;
  version?: string;
  catalog?: IRuleDoc[];
}

export interface IReportMessage {
  type: 'report';
  report: IReport;
  channel?: string;
  seq?: number;
  /** Lists the kernel cut short, with their full lengths, e.g. {tensors: 12000}. */
  truncated?: { [list: string]: number };
}

export interface IClosedMessage {
  type: 'closed';
  channel?: string;
}

/** The widget under a cell asks the panel to apply a fix (its Apply fix button was clicked). */
export interface IApplyFixMessage {
  type: 'apply-fix';
  id: string;
  cell_id: string;
  /** The source the edits were computed against: applied only while the cell still reads it. */
  code: string;
  rule: string;
  line?: number | null;
  fix: IFix;
}

export type KernelMessage = IHelloMessage | IReportMessage | IClosedMessage | IApplyFixMessage;

/** What the panel can do besides showing reports, announced to the kernel when it attaches. */
export const CAPABILITIES = ['apply-fix'];

/** Messages the panel sends to the kernel. */
export interface IRequestMessage {
  type: 'request';
  capabilities?: string[];
}

export interface ICapabilitiesMessage {
  type: 'capabilities';
  capabilities: string[];
}

export interface IFixResultMessage {
  type: 'fix-result';
  id: string;
  ok: boolean;
  reason?: string;
}

/** The outcome of applying a fix to a cell. */
export interface IFixOutcome {
  ok: boolean;
  /** Why not, in a sentence the user can act on (empty when applied). */
  reason: string;
}

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
