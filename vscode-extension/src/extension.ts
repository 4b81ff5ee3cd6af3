// Entry point: starts tilelang-lsp for Python files, restarts it when its command changes or on
// "Restart Language Server" (also after a failed start: `ServerSupervisor`), re-sends settings
// when they or the workspace trust change, and registers the commands behind the Compile/Run
// lenses. Diagnostics, hovers and completion come only from the server.

import * as vscode from "vscode";
import { ExecuteCommandRequest, LanguageClient } from "vscode-languageclient/node";

import { createClient } from "./client";
import { ServerSupervisor } from "./supervisor";
import {
  CommandResult,
  executeParams,
  lensArguments,
  parseResult,
  plainText,
  serverCommandFor,
  sourceDocument,
  summaryLine,
} from "./config";

let output: vscode.OutputChannel;
let supervisor: ServerSupervisor<LanguageClient> | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  output = vscode.window.createOutputChannel("TileLang");
  context.subscriptions.push(output);
  supervisor = new ServerSupervisor(() => createClient(output), reportStartFailure);
  for (const name of ["tilelang.client.compile", "tilelang.client.run"]) {
    context.subscriptions.push(vscode.commands.registerCommand(name, (...args: unknown[]) => runLens(name, args)));
  }
  context.subscriptions.push(
    vscode.commands.registerCommand("tilelang.restartServer", restart),
    vscode.commands.registerCommand("tilelang.showOutput", () => output.show()),
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (e.affectsConfiguration("tilelang.pythonPath") || e.affectsConfiguration("tilelang.server.command")) {
        void restart();
      } else if (e.affectsConfiguration("tilelang")) {
        notifySettingsChanged();
      }
    }),
    vscode.workspace.onDidGrantWorkspaceTrust(notifySettingsChanged),
  );
  await start();
}

export async function deactivate(): Promise<void> {
  await supervisor?.stop();
  supervisor = undefined;
}

/** Start the server, or replace the running (or failed) one with a new process. */
function start(): Promise<void> {
  return supervisor ? supervisor.restart() : Promise.resolve();
}

const restart = start;

function reportStartFailure(err: unknown): void {
  void vscode.window.showErrorMessage(
    `TileLang: the language server did not start (${String(err)}). Set tilelang.pythonPath to a Python ` +
      "with tilelang installed, or tilelang.server.command, or run TileLang: Restart Language Server.",
  );
}

function runningClient(): LanguageClient | undefined {
  const client = supervisor?.client;
  return client?.isRunning() ? client : undefined;
}

/** The server pulls the settings again (through the trust-applying middleware). */
function notifySettingsChanged(): void {
  void runningClient()?.sendNotification("workspace/didChangeConfiguration", { settings: null });
}

async function runLens(clientCommand: string, args: unknown[]): Promise<void> {
  const command = serverCommandFor(clientCommand);
  const client = runningClient();
  if (!client || !command) {
    void vscode.window.showErrorMessage("TileLang: the language server is not running (see Output > TileLang).");
    return;
  }
  const target = lensArguments(args);
  const title = `${command === "tilelang.compile" ? "Compiling" : "Running"} ${target.factory}`;
  try {
    const raw = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title, cancellable: false },
      () => client.sendRequest(ExecuteCommandRequest.type, executeParams(command, target)),
    );
    await show(parseResult(raw));
  } catch (err) {
    void vscode.window.showErrorMessage(`TileLang: ${String(err)}`);
  }
}

async function show(result: CommandResult): Promise<void> {
  output.appendLine(`== ${result.title}`);
  output.appendLine(plainText(result.report));
  const doc = sourceDocument(result);
  if (doc) {
    const editor = await vscode.workspace.openTextDocument(doc);
    await vscode.window.showTextDocument(editor, { viewColumn: vscode.ViewColumn.Beside, preview: false });
  }
  const line = summaryLine(result);
  const action = await (result.ok
    ? vscode.window.showInformationMessage(line, "Show Report")
    : vscode.window.showErrorMessage(line, "Show Report"));
  if (action === "Show Report") {
    output.show(true);
  }
}
