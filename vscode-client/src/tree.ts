// The problem tree in the Explorer: titles, [met/total] criteria, done/failed/open icons,
// the focused problem highlighted; a click opens the problem's definition.
import * as vscode from 'vscode';
import { ResearchModel } from './model';
import { ProblemNode } from './protocol';

export const TREE_VIEW_ID = 'deepResearch.problems';

export interface TreeItemSnapshot {
  label: string;
  description: string;
  icon: string;
  focused: boolean;
  status: ProblemNode['status'];
  definitionUri?: string;
  children: TreeItemSnapshot[];
}

function statusIcon(node: ProblemNode): vscode.ThemeIcon {
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

function containsFocus(node: ProblemNode): boolean {
  return node.focused || node.children.some(containsFocus);
}

export function criteriaText(met: number, total: number): string {
  return `[${met}/${total}]`;
}

export class ProblemTreeProvider implements vscode.TreeDataProvider<ProblemNode>, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<ProblemNode | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  private readonly ids = new Map<ProblemNode, string>();
  private readonly subscription: vscode.Disposable;

  constructor(private readonly model: ResearchModel) {
    this.subscription = model.onDidChange(() => this.changed.fire(undefined));
  }

  getChildren(element?: ProblemNode): ProblemNode[] {
    if (!element) {
      this.ids.clear();
      const root = this.model.view?.tree;
      if (root) {
        this.ids.set(root, '0');
      }
      return root ? [root] : [];
    }
    const parentId = this.ids.get(element) ?? '?';
    element.children.forEach((child, i) => this.ids.set(child, `${parentId}/${i}`));
    return element.children;
  }

  getTreeItem(node: ProblemNode): vscode.TreeItem {
    const label: vscode.TreeItemLabel = node.focused
      ? { label: node.title, highlights: [[0, node.title.length]] }
      : { label: node.title };
    const collapsible =
      node.children.length === 0
        ? vscode.TreeItemCollapsibleState.None
        : containsFocus(node)
          ? vscode.TreeItemCollapsibleState.Expanded
          : vscode.TreeItemCollapsibleState.Collapsed;
    const item = new vscode.TreeItem(label, collapsible);
    // the id changes with the focus so that VS Code applies the new expansion state
    item.id = `${this.ids.get(node) ?? node.title}:${containsFocus(node) ? 'f' : ''}`;
    item.description = criteriaText(node.criteriaMet, node.criteriaTotal) + (node.focused ? ' · focus' : '');
    item.iconPath = statusIcon(node);
    item.contextValue = `problem.${node.status}${node.focused ? '.focused' : ''}`;
    const tooltip = new vscode.MarkdownString();
    tooltip.appendMarkdown(`**${escapeMd(node.title)}**\n\n`);
    tooltip.appendMarkdown(`${node.status}${node.focused ? ', in focus' : ''}; criteria done ${node.criteriaMet} of ${node.criteriaTotal}`);
    item.tooltip = tooltip;
    if (node.definitionUri) {
      const uri = vscode.Uri.parse(node.definitionUri);
      item.command = { command: 'vscode.open', title: 'Open Problem Definition', arguments: [uri] };
    }
    return item;
  }

  /** A plain copy of what the view shows (for tests and the API). */
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
        children: this.getChildren(node).map(walk),
      };
    };
    return this.getChildren().map(walk);
  }

  dispose(): void {
    this.subscription.dispose();
    this.changed.dispose();
  }
}

function escapeMd(text: string): string {
  return text.replace(/[\\`*_{}[\]()#+\-.!|<>]/g, '\\$&');
}
