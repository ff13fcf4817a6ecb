// Setting up and steering a research (seed 000: the instruction, context as files or text,
// attachments as files, folders or URLs):
// - New Research walks the user through the folder, the instruction, context and
//   attachments, every step but the folder skippable, then opens the message document
//   beside the prompt;
// - Continue Research… asks for the new instruction (a finished research reopens) and more
//   attachments;
// - the Explorer's context menu: Attach to Research (files and folders), Add as Context (files).
// A folder is passed as it is: the server takes every text, markdown, code, HTML and PDF file
// below it and says what it skipped (the answer's notes, shown as they come).
// The server reads, fetches and checks everything (deepResearch.newResearch and
// deepResearch.continueResearch); a refusal comes back as one sentence and is shown as is.
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { asUri, messageDocumentOf } from './commands';
import { registerInstallCommand } from './packages';
import { ResearchModel } from './model';
import { ClientCommand, NewResearchResult, ResearchOptions, runServerCommand, ServerCommand } from './protocol';
import { ServerManager } from './server';

const STEPS = 4;
const STATE_FILE = path.join('.deep-research', 'state.json');

function isResearch(folder: vscode.Uri): boolean {
  return fs.existsSync(path.join(folder.fsPath, STATE_FILE));
}

/** The server's sentence, without the JSON-RPC wrapping. */
function reason(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

function title(step: number, what: string): string {
  return `Deep Research: New Research (${step}/${STEPS}): ${what}`;
}

function shortText(text: string): string {
  const first = text.trim().split(/\r?\n/)[0];
  return first.length > 40 ? `“${first.slice(0, 39)}…”` : `“${first}”`;
}

type Pick<T> = vscode.QuickPickItem & { value: T };

async function askFolder(): Promise<vscode.Uri | undefined> {
  const folders = vscode.workspace.workspaceFolders ?? [];
  const items: Pick<() => Promise<vscode.Uri | undefined>>[] = [
    ...folders.map((f) => ({
      label: `$(new-folder) New folder in ${f.name}…`,
      value: () => askFolderName(f.uri),
    })),
    {
      label: '$(folder-opened) Choose a folder…',
      description: 'an empty folder, or one holding only its deep-research.toml',
      value: async () =>
        (await vscode.window.showOpenDialog({
          canSelectFiles: false,
          canSelectFolders: true,
          canSelectMany: false,
          defaultUri: folders[0]?.uri,
          openLabel: 'Start Research Here',
          title: title(1, 'the research folder'),
        }))?.[0],
    },
    ...folders.map((f) => ({ label: `$(root-folder) ${f.name}`, description: 'the workspace folder itself', value: async () => f.uri })),
  ];
  const picked = await vscode.window.showQuickPick(items, {
    title: title(1, 'the research folder'),
    placeHolder: 'Where does the research live? Its problem tree grows in this folder.',
    ignoreFocusOut: true,
  });
  return picked?.value();
}

async function askFolderName(parent: vscode.Uri): Promise<vscode.Uri | undefined> {
  const name = await vscode.window.showInputBox({
    title: title(1, 'the research folder'),
    prompt: `A new folder in ${parent.fsPath}`,
    placeHolder: 'e.g. cache-friendly matmul',
    ignoreFocusOut: true,
    validateInput: (value) => {
      const v = value.trim();
      if (!v) return 'Give the folder a name.';
      if (/[\\/]/.test(v) || v === '.' || v === '..') return 'One folder name, without slashes.';
      // eslint-disable-next-line no-control-regex
      if (/[\u0000-\u001f]/.test(v)) return 'No control characters in a folder name.';
      if (isResearch(vscode.Uri.joinPath(parent, v))) return 'That folder already holds a research.';
      return undefined;
    },
  });
  return name === undefined ? undefined : vscode.Uri.joinPath(parent, name.trim());
}

async function askInstruction(step: string, prompt: string): Promise<string | undefined> {
  return vscode.window.showInputBox({
    title: step,
    prompt,
    placeHolder: 'e.g. Which tile sizes make matrix multiplication cache friendly on x86? (Enter with nothing: skip)',
    ignoreFocusOut: true,
  });
}

async function pickFiles(what: string, folders = false): Promise<string[]> {
  const picked = await vscode.window.showOpenDialog({
    canSelectFiles: !folders,
    canSelectFolders: folders,
    canSelectMany: true,
    defaultUri: vscode.workspace.workspaceFolders?.[0]?.uri,
    openLabel: what,
    title: `Deep Research: ${what}`,
  });
  return (picked ?? []).map((u) => u.toString());
}

/** The attachments step (New Research's step 4, Continue Research's second): files, folders (the
 * server takes every text, markdown, code, HTML and PDF file below one) and web pages; false if cancelled. */
async function askAttachments(step: string, attachments: string[], named: (list: string[]) => string[]): Promise<boolean> {
  return askMany(
    step,
    () => (attachments.length ? `${attachments.length} added: ${named(attachments).join(', ')}` : 'none yet'),
    [
      { label: '$(file-add) Attach files…', value: async () => void attachments.push(...(await pickFiles('Attach'))) },
      {
        label: '$(folder) Attach a folder…',
        description: 'its text, markdown, code, HTML and PDF files',
        value: async () => void attachments.push(...(await pickFiles('Attach Folder', true))),
      },
      {
        label: '$(globe) Attach a web page…',
        value: async () => {
          const url = await vscode.window.showInputBox({
            title: `${step}: a web page`,
            prompt: 'Its address (http or https). It is fetched now, like ///attach_url.',
            placeHolder: 'https://example.org/article',
            ignoreFocusOut: true,
            validateInput: (v) => (!v.trim() || /^https?:\/\/\S+$/i.test(v.trim()) ? undefined : 'An http(s) address, without spaces.'),
          });
          if (url?.trim()) attachments.push(url.trim());
        },
      },
    ],
  );
}

const named = (list: string[]) => list.map((u) => (/^https?:/i.test(u) ? u : path.basename(vscode.Uri.parse(u).fsPath)));

/** A loop of choices until "Continue": returns false if the user cancelled the whole walk-through. */
async function askMany(
  step: string,
  describe: () => string,
  choices: Pick<() => Promise<void>>[],
): Promise<boolean> {
  for (;;) {
    const done: Pick<undefined> = { label: '$(arrow-right) Continue', description: describe(), value: undefined };
    const picked = await vscode.window.showQuickPick<Pick<(() => Promise<void>) | undefined>>([done, ...choices], {
      title: step,
      placeHolder: 'Add what helps, or Continue (nothing is needed)',
      ignoreFocusOut: true,
    });
    if (!picked) {
      return false;
    }
    if (!picked.value) {
      return true;
    }
    await picked.value();
  }
}

/** Steps 2-4: instruction, context, attachments; undefined if cancelled. */
async function askOptions(): Promise<ResearchOptions | undefined> {
  const instruction = await askInstruction(
    title(2, 'the instruction'),
    'What should the research find out? It heads every prompt. Leave it empty to skip.',
  );
  if (instruction === undefined) {
    return undefined;
  }
  const options: Required<ResearchOptions> = { instruction: instruction.trim(), context: [], contextText: [], attachments: [] };
  const contextOk = await askMany(
    title(3, 'context, shown in every prompt'),
    () => {
      const all = [...named(options.context), ...options.contextText.map(shortText)];
      return all.length ? `${all.length} added: ${all.join(', ')}` : 'none yet';
    },
    [
      { label: '$(file-add) Add context files…', value: async () => void options.context.push(...(await pickFiles('Add as Context'))) },
      {
        label: '$(edit) Type context text…',
        value: async () => {
          const text = await vscode.window.showInputBox({
            title: title(3, 'context text'),
            prompt: 'Background the assistant should always keep in mind (a constraint, a definition, what you know).',
            ignoreFocusOut: true,
          });
          if (text?.trim()) options.contextText.push(text.trim());
        },
      },
    ],
  );
  if (!contextOk) {
    return undefined;
  }
  const attachmentsOk = await askAttachments(title(4, 'attachments, for defining the problem'), options.attachments, named);
  return attachmentsOk ? options : undefined;
}

/** Opens the message document, and the prompt beside it. */
async function openResearch(result: NewResearchResult, model: ResearchModel): Promise<void> {
  const doc = await vscode.workspace.openTextDocument(vscode.Uri.parse(result.document));
  await vscode.window.showTextDocument(doc, { viewColumn: vscode.ViewColumn.One, preview: false });
  if (result.promptUri) {
    const prompt = await vscode.workspace.openTextDocument(vscode.Uri.parse(result.promptUri));
    await vscode.window.showTextDocument(prompt, { viewColumn: vscode.ViewColumn.Beside, preserveFocus: true, preview: false });
  }
  await model.setDocument(doc.uri);
}

export function registerSetupCommands(
  context: vscode.ExtensionContext,
  server: ServerManager,
  model: ResearchModel,
  output: vscode.LogOutputChannel,
): void {
  const messageDocument = messageDocumentOf(model);
  const client = async () => {
    const c = await server.start();
    if (!c) {
      void vscode.window.showErrorMessage('Deep Research: the language server is not running (see the "Deep Research" output).');
    }
    return c;
  };

  /** Sends a setup command with a notification while the sources are read; a refusal is shown as is. */
  const send = async (command: string, target: vscode.Uri, options: ResearchOptions, what: string): Promise<NewResearchResult | undefined> => {
    const c = await client();
    if (!c) {
      return undefined;
    }
    try {
      const result = await vscode.window.withProgress(
        { location: vscode.ProgressLocation.Notification, title: `Deep Research: ${what}` },
        () => runServerCommand<NewResearchResult>(c, command, target.toString(), options),
      );
      output.appendLine(`${command} ${target.toString()}: ${JSON.stringify(result)}`);
      for (const note of result.notes ?? []) {
        void vscode.window.showInformationMessage(`Deep Research: ${note}`);
      }
      return result.reason === 'cancelled' ? undefined : result;
    } catch (e) {
      output.appendLine(`${command} ${target.toString()} refused: ${reason(e)}`);
      void vscode.window.showErrorMessage(`Deep Research: ${reason(e)}`);
      return undefined;
    }
  };

  /** The research a command is about: the current message's, else the only one in the workspace, else a pick. */
  const researchOf = async (arg?: unknown): Promise<vscode.Uri | undefined> => {
    const given = asUri(arg) ?? messageDocument(undefined);
    if (given) {
      return given;
    }
    const found = await vscode.workspace.findFiles('**/.deep-research/state.json', '**/node_modules/**', 50);
    const roots = found.map((f) => vscode.Uri.file(path.dirname(path.dirname(f.fsPath))));
    if (roots.length <= 1) {
      if (!roots.length) {
        void vscode.window.showWarningMessage('Deep Research: no research in this workspace yet. Start one with "Deep Research: New Research".');
      }
      return roots[0];
    }
    const picked = await vscode.window.showQuickPick(
      roots.map((r) => ({ label: path.basename(r.fsPath), description: vscode.workspace.asRelativePath(r), value: r })),
      { title: 'Deep Research: which research?', ignoreFocusOut: true },
    );
    return picked?.value;
  };

  registerInstallCommand(context, server.packages, () => server.discovery?.found);

  context.subscriptions.push(
    vscode.commands.registerCommand(
      ClientCommand.newResearch,
      async (arg?: unknown, given?: ResearchOptions): Promise<NewResearchResult | undefined> => {
        const folder = asUri(arg) ?? (await askFolder());
        if (!folder) {
          return undefined;
        }
        if (isResearch(folder)) {
          const choice = await vscode.window.showInformationMessage(
            `Deep Research: ${folder.fsPath} already holds a research.`,
            'Continue It…',
            'Open Its Message',
          );
          if (choice === 'Continue It…') {
            return vscode.commands.executeCommand(ClientCommand.continueResearch, folder);
          }
          if (choice === 'Open Its Message') {
            const c = await client();
            const opened = c && (await runServerCommand<NewResearchResult>(c, ServerCommand.newResearch, folder.toString()));
            if (opened) {
              await openResearch({ ...opened, promptUri: vscode.Uri.joinPath(folder, '.deep-research', 'prompt.md').toString() }, model);
            }
            return opened || undefined;
          }
          return undefined;
        }
        const options = given ?? (await askOptions());
        if (!options) {
          return undefined;
        }
        const result = await send(ServerCommand.newResearch, folder, options, 'creating the research (reading its sources)');
        if (result) {
          await openResearch(result, model);
        }
        return result;
      },
    ),

    vscode.commands.registerCommand(
      ClientCommand.continueResearch,
      async (arg?: unknown, given?: ResearchOptions): Promise<NewResearchResult | undefined> => {
        const target = await researchOf(arg);
        if (!target) {
          return undefined;
        }
        let options = given;
        if (!options) {
          const instruction = await askInstruction(
            'Deep Research: Continue Research',
            'The new instruction: it replaces the current one in every prompt (empty: keep it). A finished research reopens at its root.',
          );
          if (instruction === undefined) {
            return undefined;
          }
          const attachments: string[] = [];
          if (!(await askAttachments('Deep Research: Continue Research: attachments, added to the root problem', attachments, named))) {
            return undefined;
          }
          options = { instruction: instruction.trim(), attachments };
        }
        const result = await send(ServerCommand.continueResearch, target, options, 'continuing the research');
        if (result) {
          await openResearch(result, model);
          vscode.window.setStatusBarMessage(`Deep Research: ${result.reopened ? 'research reopened' : 'research updated'}`, 6000);
        }
        return result;
      },
    ),

    ...(
      [
        [ClientCommand.attachToResearch, 'attachments', 'attached to'],
        [ClientCommand.addAsContext, 'context', 'added as context of'],
      ] as const
    ).map(([id, key, done]) =>
      vscode.commands.registerCommand(id, async (arg?: unknown, all?: unknown): Promise<NewResearchResult | undefined> => {
        // The Explorer passes the clicked file and every selected one.
        const files = (Array.isArray(all) && all.length ? all : [arg]).map(asUri).filter((u): u is vscode.Uri => !!u);
        if (!files.length) {
          void vscode.window.showWarningMessage('Deep Research: choose files in the Explorer first.');
          return undefined;
        }
        const target = await researchOf();
        if (!target) {
          return undefined;
        }
        const result = await send(ServerCommand.continueResearch, target, { [key]: files.map((f) => f.toString()) }, `reading ${files.length} file(s)`);
        if (result) {
          const names = files.map((f) => path.basename(f.fsPath)).join(', ');
          vscode.window.setStatusBarMessage(`Deep Research: ${names} ${done} the research`, 8000);
          await model.refresh();
        }
        return result;
      }),
    ),
  );
}
