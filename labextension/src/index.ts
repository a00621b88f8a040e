/**
 * Wiring only: one panel in the right side area that follows the current notebook, one
 * comm client per open notebook (so a notebook in the background keeps its reports), the
 * settings (schema/sidebar.json) applied live, and the panel's place restored on reload.
 */

import { ILayoutRestorer, JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { ISettingRegistry } from '@jupyterlab/settingregistry';

import { HISTORY_SIZE, ReportClient } from './client';
import { applyFixToCell } from './fixes';
import { torchmagicIcon } from './icon';
import { revealCell } from './navigate';
import { PAGE_SIZE, PANEL_ID, TorchmagicPanel } from './panel';

/** The plugin's ID; the settings registry finds its schema as schema/sidebar.json. */
const PLUGIN_ID = 'torchmagic:sidebar';

const plugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description: 'A sidebar with torchmagic findings, tensors, modules, shape traces and sync stalls of the current notebook.',
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ICommandPalette, ISettingRegistry, ILayoutRestorer],
  activate: (
    app: JupyterFrontEnd,
    tracker: INotebookTracker,
    palette: ICommandPalette | null,
    settingRegistry: ISettingRegistry | null,
    restorer: ILayoutRestorer | null
  ) => {
    const clients = new Map<NotebookPanel, ReportClient>();
    const config = { pageSize: PAGE_SIZE, history: HISTORY_SIZE };

    const clientFor = (notebook: NotebookPanel): ReportClient => {
      let client = clients.get(notebook);
      if (!client || client.isDisposed) {
        client = new ReportClient(notebook.sessionContext, {
          historySize: config.history,
          // Apply fix edits this notebook's cells (from the panel, or the widget under a cell)
          applyFix: (cellId, code, fix) => applyFixToCell(notebook, cellId, code, fix)
        });
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
        pageSize: config.pageSize,
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
      // The layout restorer puts it back where the user left it (side, open or collapsed).
      restorer?.add(panel, PANEL_ID);
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

    if (settingRegistry) {
      const apply = (settings: ISettingRegistry.ISettings) => {
        config.pageSize = numberSetting(settings, 'pageSize', PAGE_SIZE);
        config.history = numberSetting(settings, 'history', HISTORY_SIZE);
        panel?.setPageSize(config.pageSize);
        for (const client of clients.values()) {
          client.setHistorySize(config.history);
        }
      };
      settingRegistry
        .load(PLUGIN_ID)
        .then(settings => {
          apply(settings);
          settings.changed.connect(apply);
        })
        .catch(reason => console.warn('torchmagic: cannot load the sidebar settings', reason));
    }
  }
};

/** A positive whole number from the settings (the schema bounds it; this guards hand edits). */
function numberSetting(settings: ISettingRegistry.ISettings, key: string, fallback: number): number {
  const value = settings.composite[key];
  return typeof value === 'number' && Number.isFinite(value) && value >= 1 ? Math.floor(value) : fallback;
}

export default plugin;
