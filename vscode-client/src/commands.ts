// Palette commands (setting up a research: setup.ts). They call the server with `workspace/executeCommand` directly
// (see protocol.ts for why their ids differ from the server's).
import * as vscode from 'vscode';
import { ResearchModel } from './model';
import {
  ClientCommand,
  COMPILE_FORMATS,
  CompileResult,
  ExecutionResult,
  ExportResult,
  LANGUAGE_ID,
  ProblemNode,
  Researcher,
  runServerCommand,
  ServerCommand,
  ShowPromptResult,
  ShowReportResult,
  UndoResult,
} from './protocol';
import { ServerManager } from './server';

/** A command's argument as a URI: a Uri, a URI string or a file path. */
export function asUri(arg: unknown): vscode.Uri | undefined {
  if (arg instanceof vscode.Uri) {
    return arg;
  }
  if (typeof arg === 'string' && arg) {
    return arg.includes('://') ? vscode.Uri.parse(arg) : vscode.Uri.file(arg);
  }
  return undefined;
}

/** The message document a command is about: the argument, the active `.dr` editor, or the last one shown. */
export function messageDocumentOf(model: ResearchModel): (arg: unknown) => vscode.Uri | undefined {
  return (arg: unknown) => {
    const uri = asUri(arg);
    if (uri) {
      return uri;
    }
    const active = vscode.window.activeTextEditor?.document;
    if (active?.languageId === LANGUAGE_ID) {
      return active.uri;
    }
    return model.document;
  };
}

export function registerCommands(
  context: vscode.ExtensionContext,
  server: ServerManager,
  model: ResearchModel,
  output: vscode.LogOutputChannel,
): void {
  const needClient = async () => {
    const client = await server.start();
    if (!client) {
      void vscode.window.showErrorMessage('Deep Research: the language server is not running (see the "Deep Research" output).');
    }
    return client;
  };
  const messageDocument = messageDocumentOf(model);

  context.subscriptions.push(
    vscode.commands.registerCommand(ClientCommand.executeMessage, async (arg?: unknown): Promise<ExecutionResult | undefined> => {
      const uri = messageDocument(arg);
      if (!uri) {
        void vscode.window.showWarningMessage('Deep Research: open a message (.dr) to execute it.');
        return undefined;
      }
      const client = await needClient();
      if (!client) {
        return undefined;
      }
      const result = await vscode.window.withProgress(
        { location: vscode.ProgressLocation.Window, title: 'Deep Research: executing' },
        () => runServerCommand<ExecutionResult>(client, ServerCommand.execute, uri.toString()),
      );
      output.appendLine(`execute ${uri.toString()}: ${JSON.stringify({ ...result, report: undefined })}`);
      if (!result?.executed) {
        void vscode.window.showInformationMessage(`Deep Research: nothing executed (${result?.reason ?? 'unknown reason'}).`);
      } else if (result.failed) {
        void vscode.window
          .showWarningMessage(`Deep Research: ${result.failed} command(s) failed, ${result.ok ?? 0} ran; see the Errors Report in the prompt.`, 'Show Prompt')
          .then((c) => c && vscode.commands.executeCommand(ClientCommand.showPrompt, uri));
      } else {
        vscode.window.setStatusBarMessage(`Deep Research: ${result.ok ?? 0} command(s) executed`, 5000);
      }
      await model.setDocument(uri);
      return result;
    }),

    vscode.commands.registerCommand(ClientCommand.showPrompt, async (arg?: unknown): Promise<ShowPromptResult | undefined> => {
      const uri = messageDocument(arg);
      if (!uri) {
        void vscode.window.showWarningMessage('Deep Research: open a message (.dr) first; its research has the prompt.');
        return undefined;
      }
      const client = await needClient();
      if (!client) {
        return undefined;
      }
      const result = await runServerCommand<ShowPromptResult>(client, ServerCommand.showPrompt, uri.toString());
      if (result && !result.shown && result.uri) {
        // the server could not show it: open it beside the message ourselves
        const doc = await vscode.workspace.openTextDocument(vscode.Uri.parse(result.uri));
        await vscode.window.showTextDocument(doc, { viewColumn: vscode.ViewColumn.Beside, preserveFocus: true, preview: false });
      }
      return result;
    }),

    vscode.commands.registerCommand(ClientCommand.showReport, async (arg?: unknown): Promise<ShowReportResult | undefined> => {
      const uri = messageDocument(arg);
      if (!uri) {
        void vscode.window.showWarningMessage('Deep Research: open a message (.dr) first; its research has the report.');
        return undefined;
      }
      const client = await needClient();
      if (!client) {
        return undefined;
      }
      // The root's report, the research's answer; a missing one is said by the server (window/showMessage).
      const result = await runServerCommand<ShowReportResult>(client, ServerCommand.showReport, uri.toString());
      output.appendLine(`report ${uri.toString()}: ${JSON.stringify(result)}`);
      if (result?.exists && !result.shown && result.uri) {
        const doc = await vscode.workspace.openTextDocument(vscode.Uri.parse(result.uri));
        await vscode.window.showTextDocument(doc, { preview: false });
      }
      return result;
    }),

    vscode.commands.registerCommand(ClientCommand.showResearchers, async (arg?: unknown): Promise<Researcher | undefined> => {
      const uri = messageDocument(arg);
      if (!uri) {
        void vscode.window.showWarningMessage('Deep Research: open a message (.dr) of the research to see its researchers.');
        return undefined;
      }
      const client = await needClient();
      if (!client) {
        return undefined;
      }
      const researchers = await runServerCommand<Researcher[]>(client, ServerCommand.researchers, uri.toString());
      const picked = await vscode.window.showQuickPick(
        researchers.map((r) => ({
          label: r.name,
          description: `${r.state === 'waiting' ? 'waits for its delegations' : 'working'} · ${r.focus ? `at ${r.focus}` : 'at the root'}`,
          detail: vscode.workspace.asRelativePath(vscode.Uri.parse(r.uri)),
          researcher: r,
        })),
        { title: 'Deep Research: Researchers', placeHolder: 'Open a researcher\'s message document', matchOnDetail: true },
      );
      if (!picked) {
        return undefined;
      }
      const doc = await vscode.workspace.openTextDocument(vscode.Uri.parse(picked.researcher.uri));
      await vscode.window.showTextDocument(doc, { preview: false });
      return picked.researcher;
    }),

    vscode.commands.registerCommand(ClientCommand.openProblemDefinition, async (node?: ProblemNode) => {
      if (node?.definitionUri) {
        await vscode.commands.executeCommand('vscode.open', vscode.Uri.parse(node.definitionUri));
      }
    }),

    vscode.commands.registerCommand(ClientCommand.restartServer, async () => {
      const client = await server.restart();
      if (client) {
        vscode.window.setStatusBarMessage('Deep Research: server restarted', 3000);
        await model.refresh();
      }
      return !!client;
    }),

    vscode.commands.registerCommand(ClientCommand.refreshTree, () => model.refresh()),

    vscode.commands.registerCommand(ClientCommand.undoMessage, async (arg?: unknown): Promise<UndoResult | undefined> => {
      const uri = messageDocument(arg);
      if (!uri) {
        void vscode.window.showWarningMessage('Deep Research: open a message (.dr) of the research to undo its last message.');
        return undefined;
      }
      const client = await needClient();
      if (!client) {
        return undefined;
      }
      // A refusal (a hand edit since, nothing left) is shown by the server (window/showMessage).
      const result = await runServerCommand<UndoResult>(client, ServerCommand.undo, uri.toString());
      output.appendLine(`undo ${uri.toString()}: ${JSON.stringify({ ...result, text: undefined })}`);
      if (result?.undone) {
        const back = result.putBack ? ' It is back in the message document.' : '';
        vscode.window.setStatusBarMessage(`Deep Research: message ${result.message} undone.${back}`, 8000);
      }
      await model.setDocument(uri);
      return result;
    }),

    vscode.commands.registerCommand(ClientCommand.exportDossier, async (arg?: unknown): Promise<(ExportResult & { opened: boolean }) | undefined> => {
      const uri = messageDocument(arg);
      if (!uri) {
        void vscode.window.showWarningMessage('Deep Research: open a message (.dr) of the research to export its dossier.');
        return undefined;
      }
      const client = await needClient();
      if (!client) {
        return undefined;
      }
      const result = await vscode.window.withProgress(
        { location: vscode.ProgressLocation.Window, title: 'Deep Research: exporting the dossier' },
        () => runServerCommand<ExportResult>(client, ServerCommand.export, uri.toString()),
      );
      const file = vscode.Uri.parse(result.uri);
      output.appendLine(`export ${uri.toString()}: ${JSON.stringify(result)}`);
      if (result.settled === false) {
        void vscode.window.showWarningMessage(
          'Deep Research: messages kept running while the dossier was written; it may mix two moments. Export again when they stop.',
        );
      }
      // On a desktop, the dossier opens in the default browser. Elsewhere (a remote or web
      // workbench) the file is on the server's disk, where a browser cannot reach it.
      let opened = false;
      if (vscode.env.uiKind === vscode.UIKind.Desktop && !vscode.env.remoteName) {
        opened = await vscode.env.openExternal(file);
      }
      if (!opened) {
        void vscode.window
          .showInformationMessage(`Deep Research: the dossier (${result.problems} problems) is in ${file.fsPath}.`, 'Reveal in Explorer')
          .then((choice) => choice && vscode.commands.executeCommand('revealInExplorer', file));
      }
      return { ...result, opened };
    }),

    vscode.commands.registerCommand(ClientCommand.compileReport, async (arg?: unknown, given?: unknown): Promise<(CompileResult & { opened: boolean }) | undefined> => {
      const uri = messageDocument(arg);
      if (!uri) {
        void vscode.window.showWarningMessage('Deep Research: open a message (.dr) of the research to compile its report.');
        return undefined;
      }
      let format = typeof given === 'string' ? given : undefined;
      if (!format) {
        const picked = await vscode.window.showQuickPick(
          COMPILE_FORMATS.map((f) => ({ label: f.label, description: f.format, detail: f.detail, format: f.format })),
          { title: 'Deep Research: Compile Report', placeHolder: 'The format of the whole research as one report' },
        );
        if (!picked) {
          return undefined;
        }
        format = picked.format;
      }
      const client = await needClient();
      if (!client) {
        return undefined;
      }
      let result: CompileResult;
      try {
        result = await vscode.window.withProgress(
          { location: vscode.ProgressLocation.Notification, title: `Deep Research: compiling the report (${format})` },
          () => runServerCommand<CompileResult>(client, ServerCommand.compile, { uri: uri.toString(), format }),
        );
      } catch (error) {
        // The server's sentence: an unknown format, a missing tool and what to install, no problem yet.
        const said = error instanceof Error ? error.message : String(error);
        if (/deep-research\[export\]/.test(said) && !/cannot load its libraries/.test(said)) {
          // pandoc or WeasyPrint missing: the pip line the server gives is for a person's own
          // Python; here the extension installs the export extra into its private environment.
          const choice = await vscode.window.showErrorMessage(
            `Deep Research: ${said.split(/: install /)[0]}. Install the export packages (pandoc, WeasyPrint) into a ` +
              'private environment of the extension? Your Python is not changed.',
            'Install',
            'Not Now',
          );
          if (choice === 'Install' && (await vscode.commands.executeCommand<boolean>(ClientCommand.installPackages, 'export'))) {
            return vscode.commands.executeCommand(ClientCommand.compileReport, uri, format);
          }
          return undefined;
        }
        void vscode.window.showErrorMessage(`Deep Research: ${said}`);
        return undefined;
      }
      const file = vscode.Uri.parse(result.uri);
      output.appendLine(`compile ${uri.toString()}: ${JSON.stringify(result)}`);
      if (result.settled === false) {
        void vscode.window.showWarningMessage(
          'Deep Research: messages kept running while the report was compiled; it may mix two moments. Compile again when they stop.',
        );
      }
      if (result.errors) {
        void vscode.window.showWarningMessage(
          `Deep Research: the Citation check found ${result.errors} error(s); see the report's last section.`,
        );
      }
      // Markdown opens in the editor; the rest with the system's application (a browser, a word
      // processor, a PDF viewer) on a desktop. A remote or web workbench cannot reach the server's disk.
      let opened = false;
      if (result.format === 'md') {
        await vscode.window.showTextDocument(file, { preview: false });
        opened = true;
      } else if (vscode.env.uiKind === vscode.UIKind.Desktop && !vscode.env.remoteName) {
        opened = await vscode.env.openExternal(file);
      }
      if (!opened) {
        void vscode.window
          .showInformationMessage(`Deep Research: the report (${result.problems} problems, ${result.references} references) is in ${file.fsPath}.`, 'Reveal in Explorer')
          .then((choice) => choice && vscode.commands.executeCommand('revealInExplorer', file));
      }
      return { ...result, opened };
    }),
  );
}
