// Entry point: starts tilelang-lsp for Python files, re-sends settings when they or the
// workspace trust change, and registers the commands behind the Compile/Run lenses.
// Diagnostics, hovers and completion come only from the server.

import * as vscode from "vscode";
import { ExecuteCommandRequest, LanguageClient } from "vscode-languageclient/node";

import { createClient } from "./client";
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

let client: LanguageClient | undefined;
let output: vscode.OutputChannel;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  output = vscode.window.createOutputChannel("TileLang");
  context.subscriptions.push(output);
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
  await client?.stop();
  client = undefined;
}

async function start(): Promise<void> {
  client = createClient(output);
  try {
    await client.start();
  } catch (err) {
    void vscode.window.showErrorMessage(
      `TileLang: the language server did not start (${String(err)}). Set tilelang.pythonPath to a Python ` +
        "with tilelang installed, or tilelang.server.command.",
    );
  }
}

async function restart(): Promise<void> {
  await client?.stop();
  await start();
}

/** The server pulls the settings again (through the trust-applying middleware). */
function notifySettingsChanged(): void {
  void client?.sendNotification("workspace/didChangeConfiguration", { settings: null });
}

async function runLens(clientCommand: string, args: unknown[]): Promise<void> {
  const command = serverCommandFor(clientCommand);
  if (!client || !command) {
    return;
  }
  const target = lensArguments(args);
  const title = `${command === "tilelang.compile" ? "Compiling" : "Running"} ${target.factory}`;
  try {
    const raw = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title, cancellable: false },
      () => client!.sendRequest(ExecuteCommandRequest.type, executeParams(command, target)),
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
