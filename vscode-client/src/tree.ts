// The problem tree in the Explorer: titles, [met/total] criteria, done/failed/open icons,
// the focused problem highlighted; a click opens the problem's definition. A delegated
// problem shows its researcher's state, and a click opens that researcher's message
// document (its definition stays one right-click away).
// Lazy, like the server: the view's answer holds the root and the path to the focus; the
// children of any other problem are asked for when VS Code expands it (getChildren), a
// page at a time, with "Show more" rows for very wide problems.
import * as vscode from 'vscode';
import { ResearchModel } from './model';
import { ChildrenPage, ProblemNode } from './protocol';

export const TREE_VIEW_ID = 'deepResearch.problems';
/** The command behind a "Show more" row (internal: not in the palette). */
export const MORE_COMMAND = 'deep-research.treeMore';

export interface TreeItemSnapshot {
  label: string;
  description: string;
  icon: string;
  focused: boolean;
  status: ProblemNode['status'];
  definitionUri?: string;
  path: string[];
  hasChildren: boolean;
  /** A delegated problem's researcher (name and state), while it works. */
  researcher?: { name: string; state: string };
  /** What a click opens (a URI string), if anything. */
  opens?: string;
  /** The children listed so far (none for a problem never expanded). */
  children: TreeItemSnapshot[];
}

/** A row that loads the next (or previous) page of a wide problem's children. */
export interface MoreRow {
  more: 'before' | 'after';
  parent: ProblemNode;
}

export type TreeNode = ProblemNode | MoreRow;

function isMore(node: TreeNode): node is MoreRow {
  return (node as MoreRow).more !== undefined;
}

function statusIcon(node: ProblemNode): vscode.ThemeIcon {
  if (node.researcher && node.status === 'open') {
    return node.researcher.state === 'waiting'
      ? new vscode.ThemeIcon('watch', new vscode.ThemeColor('charts.blue'))
      : new vscode.ThemeIcon('account', new vscode.ThemeColor('charts.blue'));
  }
  if (node.status === 'done') {
    return new vscode.ThemeIcon('pass-filled', new vscode.ThemeColor('testing.iconPassed'));
  }
  if (node.status === 'failed') {
    return new vscode.ThemeIcon('error', new vscode.ThemeColor('testing.iconFailed'));
  }
  if (node.focused) {
    return new vscode.ThemeIcon('target', new vscode.ThemeColor('charts.yellow'));
  }
  return new vscode.ThemeIcon('circle-large-outline');
}

export function criteriaText(met: number, total: number): string {
  return `[${met}/${total}]`;
}

/** How a delegated problem's row says what its researcher does; exported for tests. */
export function researcherText(researcher: { state: string }): string {
  return researcher.state === 'waiting' ? 'researcher waits for its delegations' : 'researcher working';
}

const keyOf = (path: string[]): string => JSON.stringify(path);

export class ProblemTreeProvider implements vscode.TreeDataProvider<TreeNode>, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<TreeNode | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  private readonly rows = new Map<ProblemNode, { before?: MoreRow; after?: MoreRow }>();
  private readonly loading = new Map<ProblemNode, Promise<void>>();
  private readonly subscription: vscode.Disposable;

  constructor(private readonly model: ResearchModel) {
    this.subscription = model.onDidChange(() => {
      this.rows.clear();
      this.loading.clear();
      this.changed.fire(undefined);
    });
  }

  private onFocusPath(node: ProblemNode): boolean {
    const focus = this.model.view?.focusPath;
    return !!focus && node.path.length <= focus.length && node.path.every((name, i) => focus[i] === name);
  }

  async getChildren(element?: TreeNode): Promise<TreeNode[]> {
    if (!element) {
      const root = this.model.view?.tree;
      return root ? [root] : [];
    }
    if (isMore(element)) {
      return [];
    }
    if (element.children === null && element.hasChildren) {
      await this.load(element, 0, 'replace');
    }
    return this.listed(element);
  }

  /** A problem's rows: its loaded children, between "Show more" rows where pages are missing. */
  private listed(node: ProblemNode): TreeNode[] {
    const children = node.children ?? [];
    const offset = node.childrenOffset ?? 0;
    const total = node.childrenTotal ?? children.length;
    const rows = this.rows.get(node) ?? {};
    rows.before = offset > 0 ? (rows.before ?? { more: 'before', parent: node }) : undefined;
    rows.after = offset + children.length < total ? (rows.after ?? { more: 'after', parent: node }) : undefined;
    this.rows.set(node, rows);
    return [...(rows.before ? [rows.before] : []), ...children, ...(rows.after ? [rows.after] : [])];
  }

  /** Fetches a page of `node`'s children: the first one, or the one before or after those listed. */
  private load(node: ProblemNode, offset: number, how: 'replace' | 'before' | 'after'): Promise<void> {
    const pending = this.loading.get(node);
    if (pending) {
      return pending;
    }
    const done = (async () => {
      const page: ChildrenPage | undefined = await this.model.children(node.path, Math.max(0, offset));
      if (!page) {
        return;
      }
      const listed = node.children ?? [];
      if (how === 'replace' || node.children === null) {
        node.children = page.children;
        node.childrenOffset = page.offset;
      } else if (how === 'after') {
        node.children = [...listed, ...page.children];
      } else {
        const start = node.childrenOffset ?? 0;
        node.children = [...page.children.slice(0, start - page.offset), ...listed];
        node.childrenOffset = page.offset;
      }
      node.childrenTotal = page.total;
    })().finally(() => this.loading.delete(node));
    this.loading.set(node, done);
    return done;
  }

  /** What a "Show more" row runs. */
  async more(row: MoreRow): Promise<void> {
    const node = row.parent;
    const offset = node.childrenOffset ?? 0;
    const size = this.model.view?.pageSize ?? 200;
    if (row.more === 'after') {
      await this.load(node, offset + (node.children?.length ?? 0), 'after');
    } else {
      await this.load(node, offset - size, 'before');
    }
    this.changed.fire(node);
  }

  getParent(node: TreeNode): TreeNode | undefined {
    if (isMore(node)) {
      return node.parent;
    }
    return node.path.length ? this.node(node.path.slice(0, -1)) : undefined;
  }

  /** The problem at `path` among those the view has listed so far (for reveal). */
  node(path: string[]): ProblemNode | undefined {
    let node = this.model.view?.tree ?? undefined;
    for (const name of path) {
      node = node?.children?.find((c) => c.path[c.path.length - 1] === name);
    }
    return node;
  }

  getTreeItem(node: TreeNode): vscode.TreeItem {
    if (isMore(node)) {
      const listed = node.parent.children?.length ?? 0;
      const offset = node.parent.childrenOffset ?? 0;
      const left = node.more === 'before' ? offset : (node.parent.childrenTotal ?? 0) - offset - listed;
      const item = new vscode.TreeItem(
        node.more === 'before' ? `Show earlier subproblems (${left})…` : `Show more subproblems (${left})…`,
        vscode.TreeItemCollapsibleState.None,
      );
      item.id = `${keyOf(node.parent.path)}:${node.more}`;
      item.iconPath = new vscode.ThemeIcon('ellipsis');
      item.command = { command: MORE_COMMAND, title: 'Show more', arguments: [node] };
      item.contextValue = 'more';
      return item;
    }
    const onPath = this.onFocusPath(node);
    const label: vscode.TreeItemLabel = node.focused
      ? { label: node.title, highlights: [[0, node.title.length]] }
      : { label: node.title };
    const collapsible = !node.hasChildren
      ? vscode.TreeItemCollapsibleState.None
      : onPath
        ? vscode.TreeItemCollapsibleState.Expanded
        : vscode.TreeItemCollapsibleState.Collapsed;
    const item = new vscode.TreeItem(label, collapsible);
    // the id changes with the focus, and when a problem gets its first subproblem, so that
    // VS Code applies the new expansion state (it keeps the old one for a known id)
    item.id = `${keyOf(node.path)}:${onPath ? 'f' : ''}${node.hasChildren ? 'c' : ''}`;
    item.description = criteriaText(node.criteriaMet, node.criteriaTotal) + (node.stale ? ' · stale report' : '')
      + (node.focused ? ' · focus' : '') + (node.researcher ? ` · ${researcherText(node.researcher)}` : '');
    item.iconPath = statusIcon(node);
    item.contextValue = `problem.${node.status}${node.focused ? '.focused' : ''}${node.researcher ? '.delegated' : ''}`;
    const tooltip = new vscode.MarkdownString();
    tooltip.appendMarkdown(`**${escapeMd(node.title)}**\n\n`);
    tooltip.appendMarkdown(`${node.status}${node.focused ? ', in focus' : ''}; criteria done ${node.criteriaMet} of ${node.criteriaTotal}`);
    if (node.stale) {
      tooltip.appendMarkdown('\n\nThe report is out of date: its problem or a subproblem\'s report changed since it was written (`deep-research check` says what).');
    }
    const document = node.researcher ? this.model.researcher(node.researcher.name)?.uri : undefined;
    if (node.researcher) {
      tooltip.appendMarkdown(`\n\nDelegated to the researcher “${escapeMd(node.researcher.name)}”, ${researcherText(node.researcher)}.`);
      tooltip.appendMarkdown(document ? ' Click to open its message document.' : '');
    }
    item.tooltip = tooltip;
    if (document) {
      item.command = { command: 'vscode.open', title: 'Open the Researcher\'s Message', arguments: [vscode.Uri.parse(document)] };
    } else if (node.definitionUri) {
      const uri = vscode.Uri.parse(node.definitionUri);
      item.command = { command: 'vscode.open', title: 'Open Problem Definition', arguments: [uri] };
    }
    return item;
  }

  /** A plain copy of what the view holds now, without asking the server (for tests and the API). */
  snapshot(): TreeItemSnapshot[] {
    const walk = (node: ProblemNode): TreeItemSnapshot => {
      const item = this.getTreeItem(node);
      const label = typeof item.label === 'string' ? item.label : (item.label?.label ?? '');
      return {
        label,
        description: String(item.description ?? ''),
        icon: (item.iconPath as vscode.ThemeIcon).id,
        focused: node.focused,
        status: node.status,
        definitionUri: node.definitionUri,
        path: node.path,
        hasChildren: node.hasChildren,
        researcher: node.researcher,
        opens: item.command?.arguments?.[0]?.toString(),
        children: (node.children ?? []).map(walk),
      };
    };
    const root = this.model.view?.tree;
    return root ? [walk(root)] : [];
  }

  dispose(): void {
    this.subscription.dispose();
    this.changed.dispose();
  }
}

function escapeMd(text: string): string {
  return text.replace(/[\\`*_{}[\]()#+\-.!|<>]/g, '\\$&');
}
