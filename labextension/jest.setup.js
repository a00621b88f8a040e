// jsdom lacks DragEvent, which @lumino/dragdrop touches at import time.
if (typeof globalThis.DragEvent === 'undefined') {
  globalThis.DragEvent = class DragEvent extends MouseEvent {};
}
