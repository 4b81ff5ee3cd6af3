// Pure logic of the extension, with no `vscode` import so `node --test` can load it:
// settings -> server command and initializationOptions, workspace trust, lens command
// mapping, and the text shown for a lens result.

export const SERVER_MODULE = "tilelang_lsp.server";

/** Server commands behind the code lenses, and the client commands that show their results. */
export const LENS_COMMANDS: Record<string, string> = {
  "tilelang.compile": "tilelang.client.compile",
  "tilelang.run": "tilelang.client.run",
};

export interface Settings {
  pythonPath: string;
  serverCommand: string[];
  target: string;
  allowExecution: boolean;
  codeLens: boolean;
  timeout: number;
}

export type Getter = (key: string) => unknown;

function asString(value: unknown, fallback: string): string {
  return typeof value === "string" ? value : fallback;
}

function asBool(value: unknown, fallback: boolean): boolean {
  return typeof value === "boolean" ? value : fallback;
}

/** Read the `tilelang.*` settings through `get` (a WorkspaceConfiguration's `get`). */
export function readSettings(get: Getter): Settings {
  const command = get("server.command");
  const timeout = get("timeout");
  return {
    pythonPath: asString(get("pythonPath"), "").trim(),
    serverCommand: Array.isArray(command) ? command.filter((c): c is string => typeof c === "string") : [],
    target: asString(get("target"), "").trim(),
    allowExecution: asBool(get("allowExecution"), true),
    codeLens: asBool(get("codeLens.enable"), true),
    timeout: typeof timeout === "number" && timeout > 0 ? timeout : 20,
  };
}

/** The process that runs the server: `tilelang.server.command`, else `<python> -m tilelang_lsp.server`. */
export function serverCommand(s: Settings): { command: string; args: string[] } {
  if (s.serverCommand.length > 0) {
    return { command: s.serverCommand[0], args: s.serverCommand.slice(1) };
  }
  return { command: s.pythonPath || "python3", args: ["-m", SERVER_MODULE] };
}

/** The server's settings as it reads them (initializationOptions or workspace/configuration). */
export function serverSettings(s: Settings, trusted: boolean): Record<string, unknown> {
  return {
    allowExecution: s.allowExecution && trusted,
    target: s.target || null,
    codeLens: s.codeLens,
    timeout: s.timeout,
    clientHandlesResults: true,
  };
}

/** Answer a `workspace/configuration` request: the `tilelang` section with trust applied. */
export function configurationResult(sections: (string | undefined)[], s: Settings, trusted: boolean): unknown[] {
  return sections.map((section) => (section === "tilelang" ? serverSettings(s, trusted) : null));
}

/** The client command a lens should run (results shown in an editor), or the command itself. */
export function clientCommandFor(command: string): string {
  return LENS_COMMANDS[command] ?? command;
}

/** The server command to execute for a client command, or undefined. */
export function serverCommandFor(clientCommand: string): string | undefined {
  return Object.keys(LENS_COMMANDS).find((k) => LENS_COMMANDS[k] === clientCommand);
}

export interface LensArguments {
  uri: string;
  factory: string;
}

/** Validate the arguments a lens passes (`[uri, factory]`); throws a readable error otherwise. */
export function lensArguments(args: unknown[]): LensArguments {
  const [uri, factory] = args;
  if (typeof uri !== "string" || typeof factory !== "string" || !uri || !factory) {
    throw new Error(`expected [document uri, factory name], got ${JSON.stringify(args)}`);
  }
  return { uri, factory };
}

/** `workspace/executeCommand` parameters for a lens. */
export function executeParams(command: string, a: LensArguments): { command: string; arguments: unknown[] } {
  return { command, arguments: [a.uri, a.factory] };
}

export interface CommandResult {
  kind: string;
  ok: boolean;
  title: string;
  report: string;
  cuda_source?: string;
  language?: string;
  data?: Record<string, unknown>;
}

/** Check the shape of the server's answer to a lens command. */
export function parseResult(value: unknown): CommandResult {
  const r = value as Partial<CommandResult> | null;
  if (!r || typeof r !== "object" || typeof r.report !== "string" || typeof r.kind !== "string") {
    throw new Error("the server's answer to the command is not a TileLang command result");
  }
  return { kind: r.kind, ok: Boolean(r.ok), title: r.title ?? `TileLang ${r.kind}`, report: r.report,
           cuda_source: r.cuda_source, language: r.language, data: r.data };
}

/** The untitled document to open for a compile result: CUDA source with a header comment. */
export function sourceDocument(r: CommandResult): { content: string; language: string } | undefined {
  if (!r.cuda_source) {
    return undefined;
  }
  const header = `// ${r.title}\n// ${plainText(r.report).split("\n").join("\n// ")}\n\n`;
  return { content: header + r.cuda_source, language: "cuda-cpp" };
}

/** Markdown report -> plain text for the output channel and notifications. */
export function plainText(markdown: string): string {
  return markdown.replace(/\*\*/g, "").replace(/`/g, "").replace(/\n{3,}/g, "\n\n").trim();
}

/** One line for a notification: the report's first line. */
export function summaryLine(r: CommandResult): string {
  return plainText(r.report).split("\n")[0];
}
