/**
 * Wiring only: one panel in the right side area that follows the current notebook, one
 * comm client per open notebook (so a notebook in the background keeps its reports).
 */

import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';

import { ReportClient } from './client';
import { torchmagicIcon } from './icon';
import { revealCell } from './navigate';
import { PANEL_ID, TorchmagicPanel } from './panel';

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'torchmagic:sidebar',
  description: 'A sidebar with torchmagic findings, tensors, modules, shape traces and sync stalls of the current notebook.',
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ICommandPalette],
  activate: (app: JupyterFrontEnd, tracker: INotebookTracker, palette: ICommandPalette | null) => {
    const clients = new Map<NotebookPanel, ReportClient>();

    const clientFor = (notebook: NotebookPanel): ReportClient => {
      let client = clients.get(notebook);
      if (!client || client.isDisposed) {
        client = new ReportClient(notebook.sessionContext);
        clients.set(notebook, client);
        notebook.disposed.connect(() => {
          clients.get(notebook)?.dispose();
          clients.delete(notebook);
        });
      }
      return client;
    };

    let panel: TorchmagicPanel | null = null;
    const follow = () => {
      const notebook = tracker.currentWidget;
      panel?.setSource(notebook ? clientFor(notebook) : null);
    };

    const createPanel = () => {
      panel = new TorchmagicPanel({
        reveal: (cellId, finding) => {
          const notebook = tracker.currentWidget;
          if (notebook) {
            app.shell.activateById(notebook.id);
            void revealCell(notebook, cellId, finding);
          }
        }
      });
      panel.title.icon = torchmagicIcon;
      panel.disposed.connect(() => {
        panel = null;
      });
      app.shell.add(panel, 'right', { rank: 900 });
      follow();
    };

    tracker.widgetAdded.connect((_, notebook) => {
      clientFor(notebook);
    });
    tracker.currentChanged.connect(follow);
    tracker.forEach(notebook => clientFor(notebook));
    createPanel();

    // Re-open the panel if it was closed (disposed) and bring it to the front.
    app.commands.addCommand('torchmagic:show-sidebar', {
      label: 'Show torchmagic sidebar',
      execute: () => {
        if (!panel || panel.isDisposed) {
          createPanel();
        } else if (!panel.isAttached) {
          app.shell.add(panel, 'right', { rank: 900 }); // closed, not disposed
        }
        app.shell.activateById(PANEL_ID);
      }
    });
    palette?.addItem({ command: 'torchmagic:show-sidebar', category: 'torchmagic' });
  }
};

export default plugin;
