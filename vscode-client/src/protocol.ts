// The server's protocol (docs/protocol.md): workspace commands, the notification and
// the shapes they return. Nothing here is private between this extension and the server.
import { ExecuteCommandRequest, NotificationType } from 'vscode-languageclient/node';
import type { LanguageClient } from 'vscode-languageclient/node';

/** Workspace commands of the server (`workspace/executeCommand`); each takes the URI string. */
export const ServerCommand = {
  execute: 'deepResearch.execute',
  executeOnSave: 'deepResearch.executeOnSave',
  showPrompt: 'deepResearch.showPrompt',
  showReport: 'deepResearch.showReport',
  tree: 'deepResearch.tree',
  newResearch: 'deepResearch.newResearch',
  continueResearch: 'deepResearch.continueResearch',
  undo: 'deepResearch.undo',
  export: 'deepResearch.export',
  compile: 'deepResearch.compile',
  run: 'deepResearch.run',
  stop: 'deepResearch.stop',
  researchers: 'deepResearch.researchers',
} as const;

/**
 * Commands this extension contributes to the palette. They use the `deep-research.`
 * prefix because vscode-languageclient registers every command of the server's
 * `executeCommandProvider` as a VS Code command under the server's own id
 * (`deepResearch.*`); registering the same id twice would fail.
 */
export const ClientCommand = {
  newResearch: 'deep-research.newResearch',
  continueResearch: 'deep-research.continueResearch',
  attachToResearch: 'deep-research.attachToResearch',
  addAsContext: 'deep-research.addAsContext',
  installPackages: 'deep-research.installPackages',
  executeMessage: 'deep-research.executeMessage',
  showPrompt: 'deep-research.showPrompt',
  showReport: 'deep-research.showReport',
  restartServer: 'deep-research.restartServer',
  refreshTree: 'deep-research.refreshTree',
  undoMessage: 'deep-research.undoMessage',
  exportDossier: 'deep-research.exportDossier',
  compileReport: 'deep-research.compileReport',
  runAutopilot: 'deep-research.runAutopilot',
  stopAutopilot: 'deep-research.stopAutopilot',
  setApiKey: 'deep-research.setApiKey',
  showResearchers: 'deep-research.showResearchers',
  openProblemDefinition: 'deep-research.openProblemDefinition',
} as const;

export const LANGUAGE_ID = 'deep-research';
export const EXECUTE_ACTION_KIND = 'source.deepResearch.execute';

export type Phase = 'no_problem' | 'in_focus' | 'finished' | 'shut_down';
export type ApprovalMode = 'none' | 'read' | 'create' | 'update' | 'delete';

export interface ExecutionResult {
  executed: boolean;
  reason: string | null;
  report?: string;
  ok?: number;
  failed?: number;
  skipped?: number;
  focusChanged?: boolean;
  phase?: Phase;
  promptUri?: string;
}

export interface UndoResult {
  undone: boolean;
  reason: 'nothing-to-undo' | 'refused' | 'error' | null;
  /** Why nothing was undone; or, when undone, the number of the message taken back. */
  message?: string | number;
  text?: string;
  files?: number;
  putBack?: boolean;
  left?: number;
  phase?: Phase;
  promptUri?: string;
}

export interface ExportResult {
  uri: string;
  problems: number;
  bytes: number;
  seconds: number;
  /** false: messages kept running while it was written; it may mix two moments */
  settled?: boolean;
}

/** `deepResearch.compile({uri, format})`: the research as one report, `<research>/report.<ext>` (SPEC §14). */
export interface CompileResult {
  uri: string;
  format: string;
  problems: number;
  references: number;
  /** the Citation check's errors (quotes found nowhere, citations of nothing) */
  errors: number;
  bytes: number;
  seconds: number;
  settled?: boolean;
}

/** The formats `deepResearch.compile` writes, as the Compile Report command offers them. */
export const COMPILE_FORMATS: ReadonlyArray<{ format: string; label: string; detail: string }> = [
  { format: 'md', label: 'Markdown', detail: 'report.md: the canonical text, opened in the editor' },
  { format: 'html', label: 'HTML', detail: 'report.html: one offline file with links between citations and references' },
  { format: 'pdf', label: 'PDF', detail: 'report.pdf (WeasyPrint)' },
  { format: 'docx', label: 'Word', detail: 'report.docx (pandoc)' },
  { format: 'odt', label: 'OpenDocument', detail: 'report.odt (pandoc)' },
  { format: 'csl-json', label: 'CSL-JSON', detail: 'report.json: the references alone, for Zotero or pandoc' },
  { format: 'bibtex', label: 'BibTeX', detail: 'report.bib: the references alone' },
];

export interface ShowPromptResult {
  uri: string;
  shown: boolean;
}

/** `deepResearch.showReport(uri, problem?)`: a problem's report (the root's: the answer). */
export interface ShowReportResult {
  /** the problem's titles below the root, joined by " / " ("" for the root) */
  problem: string;
  title: string | null;
  exists: boolean;
  /** its Report 3 Pager.md, when it has a report */
  uri: string | null;
  shown: boolean;
  /** e.g. why there is none, or that it is stale */
  notes: string[];
  finished: boolean;
}

/** What the user gives a research (`deepResearch.newResearch` / `continueResearch`): URIs as strings. */
export interface ResearchOptions {
  instruction?: string;
  /** file URIs */
  context?: string[];
  contextText?: string[];
  /** file URIs or http(s) URLs */
  attachments?: string[];
}

export interface NewResearchResult {
  root: string;
  document: string;
  /** Set when options were given: whether a research was made, or `reason` (`cancelled`). */
  created?: boolean;
  reason?: string;
  promptUri?: string;
  /** Worth saying about the sources (a page cut short …). */
  notes?: string[];
  /** continueResearch: whether a finished research was reopened. */
  reopened?: boolean;
}

/** A researcher at work on a research (`deepResearch.researchers`, SPEC §12). */
export interface Researcher {
  /** `main`, or the titles below the root down to its delegated problem, joined by " / ". */
  name: string;
  /** Its message document's path. */
  document: string;
  /** The same as a URI, for opening it. */
  uri: string;
  /** Titles below the root down to its current problem, joined by " / " (empty at the root). */
  focus: string;
  /** `waiting`: its current problem waits for its own delegations to end. */
  state: 'working' | 'waiting';
}

export interface ProblemNode {
  title: string;
  status: 'open' | 'done' | 'failed';
  criteriaMet: number;
  /** Its report is out of date: written before its definition, criteria or a subproblem's report changed. */
  stale?: boolean;
  criteriaTotal: number;
  focused: boolean;
  definitionUri?: string;
  /** Folder names from the root problem ([] for the root): what `deepResearch.tree` takes. */
  path: string[];
  hasChildren: boolean;
  /** A delegated problem's researcher, while it works. */
  researcher?: { name: string; state: 'working' | 'waiting' };
  /** null: not listed (collapsed); ask for them with the path. */
  children: ProblemNode[] | null;
  /** When children are listed: where they start among all of them, and how many there are. */
  childrenOffset?: number;
  childrenTotal?: number;
}

export interface ResearchView {
  root: string;
  phase: Phase;
  approvalMode: ApprovalMode;
  focus: { title: string; criteriaMet: number; criteriaTotal: number } | null;
  /** The focused problem's path (null when no problem is in focus). */
  focusPath: string[] | null;
  /** Children listed per request at most. */
  pageSize: number;
  tree: ProblemNode | null;
}

/** `deepResearch.tree(uri, path, offset)`: one page of a problem's children, collapsed. */
export interface ChildrenPage {
  path: string[];
  offset: number;
  total: number;
  children: ProblemNode[];
}

export interface DidExecuteParams {
  uri: string;
  phase: Phase;
  focusChanged: boolean;
  /** Set when the notification follows an undo: the number of the message taken back. */
  undone?: number;
}

export const DidExecuteNotification = new NotificationType<DidExecuteParams>('deepResearch/didExecute');

export type AutopilotState = 'running' | 'waiting-approval' | 'finished' | 'stopped' | 'error';

/** `deepResearch/autopilot`: the state of the autopilot of one message document. */
export interface AutopilotParams {
  uri: string;
  state: AutopilotState;
  round: number;
  tokens: number;
  maxRounds?: number | null;
  maxTokens?: number | null;
  /** The problem in focus, when known. */
  problem?: string | null;
  /** What happened, in a sentence (why it stopped, what it waits for). */
  message?: string | null;
  /** The endpoint's error, once, in plain words with what to do. */
  error?: string | null;
  /** How many researchers are working (more than one once the research delegates). */
  researchers?: number | null;
  /** The researchers whose message waits for approval, each in its own document. */
  waiting?: { researcher: string; uri: string }[] | null;
}

/** `deepResearch.run(uri, options)`: what the editor asks of the run. */
export interface RunOptions {
  /** Researchers given rounds at once (the `deepResearch.parallel` setting). */
  parallel?: number;
}

export const AutopilotNotification = new NotificationType<AutopilotParams>('deepResearch/autopilot');

/** What `deepResearch.run` answers: whether a run started (its progress comes as notifications). */
export interface RunResult {
  started: boolean;
  reason?: string | null;
  message?: string | null;
}

/** Sends `workspace/executeCommand` straight to the server (not through VS Code's command registry). */
export async function runServerCommand<T>(client: LanguageClient, command: string, ...args: unknown[]): Promise<T> {
  return (await client.sendRequest(ExecuteCommandRequest.type, { command, arguments: args })) as T;
}
