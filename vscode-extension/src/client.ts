// Builds the LanguageClient: how the server starts, which documents it sees, and the middleware
// that (1) answers workspace/configuration with workspace trust applied and (2) points the
// Compile/Run lenses at client commands that show their results in editors.

import * as vscode from "vscode";
import {
  LanguageClient,
  LanguageClientOptions,
  ServerOptions,
  TransportKind,
} from "vscode-languageclient/node";

import { clientCommandFor, configurationResult, readSettings, serverCommand, serverSettings } from "./config";

export function currentSettings() {
  const cfg = vscode.workspace.getConfiguration("tilelang");
  return readSettings((key) => cfg.get(key));
}

export function createClient(output: vscode.OutputChannel): LanguageClient {
  const settings = currentSettings();
  const { command, args } = serverCommand(settings);
  const serverOptions: ServerOptions = { command, args, transport: TransportKind.stdio };
  const clientOptions: LanguageClientOptions = {
    documentSelector: [
      { scheme: "file", language: "python" },
      { scheme: "untitled", language: "python" },
    ],
    initializationOptions: serverSettings(settings, vscode.workspace.isTrusted),
    outputChannel: output,
    middleware: {
      workspace: {
        configuration: (params) =>
          configurationResult(params.items.map((i) => i.section), currentSettings(), vscode.workspace.isTrusted),
      },
      provideCodeLenses: async (document, token, next) => {
        const lenses = await next(document, token);
        for (const lens of lenses ?? []) {
          if (lens.command) {
            lens.command.command = clientCommandFor(lens.command.command);
          }
        }
        return lenses;
      },
    },
  };
  return new LanguageClient("tilelang", "TileLang", serverOptions, clientOptions);
}
