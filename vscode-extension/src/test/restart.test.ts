// The server starts again after a failed first start, when `tilelang.pythonPath` changes or on
// "TileLang: Restart Language Server" (it used to stay down until the window reloaded).
//
// `node --test out/test/` runs this headless: the real `out/extension.js` is loaded with a
// stand-in `vscode` module (settings, commands, events) and a stand-in LanguageClient that keeps
// vscode-languageclient 9's rules (after a failed start it is `startFailed`: `start()` returns the
// same rejection, `stop()` throws) and really starts the server process and completes the LSP
// `initialize` handshake with it over stdio (vscode-jsonrpc). The server is
// `<repo>/.venv/bin/python -m tilelang_lsp.server` (or `$TILELANG_TEST_PYTHON`); without one the
// handshake tests are skipped.

import assert from "node:assert/strict";
import { ChildProcess, spawn } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { after, test } from "node:test";
import { createMessageConnection, MessageConnection, StreamMessageReader, StreamMessageWriter } from "vscode-jsonrpc/node";

import { ServerSupervisor } from "../supervisor";

const REPO = path.resolve(__dirname, "..", "..", "..");
const PYTHON = process.env.TILELANG_TEST_PYTHON ?? path.join(REPO, ".venv", "bin", "python");
const HAVE_PYTHON = fs.existsSync(PYTHON);
const MISSING = "/nonexistent/bin/python";

// ----- a LanguageClient with vscode-languageclient 9's start/stop rules ---------------------------

class FakeLanguageClient {
  static made: FakeLanguageClient[] = [];
  state: "initial" | "starting" | "running" | "startFailed" | "stopped" = "initial";
  initializeResult: { serverInfo?: { name: string } } | undefined;
  private onStart: Promise<void> | undefined;
  private proc: ChildProcess | undefined;
  private connection: MessageConnection | undefined;

  constructor(
    readonly id: string,
    readonly name: string,
    readonly serverOptions: { command: string; args: string[] },
    readonly clientOptions: unknown,
  ) {
    FakeLanguageClient.made.push(this);
  }

  start(): Promise<void> {
    if (this.onStart === undefined) {
      this.state = "starting";
      this.onStart = this.handshake().then(
        () => {
          this.state = "running";
        },
        (err) => {
          this.state = "startFailed";
          throw err;
        },
      );
    }
    return this.onStart;
  }

  async stop(): Promise<void> {
    if (this.state === "initial" || this.state === "stopped") {
      return;
    }
    if (this.state !== "running" || !this.connection) {
      throw new Error(`Client is not running and can't be stopped. It's current state is: ${this.state}`);
    }
    await this.connection.sendRequest("shutdown");
    await this.connection.sendNotification("exit");
    this.connection.dispose();
    this.proc?.kill();
    this.state = "stopped";
  }

  isRunning(): boolean {
    return this.state === "running";
  }

  async sendNotification(): Promise<void> {}

  private handshake(): Promise<void> {
    const { command, args } = this.serverOptions;
    return new Promise((resolve, reject) => {
      const proc = spawn(command, args, { cwd: REPO, stdio: ["pipe", "pipe", "ignore"] });
      this.proc = proc;
      proc.on("error", reject); // ENOENT: the configured python does not exist
      proc.on("spawn", () => {
        const connection = createMessageConnection(new StreamMessageReader(proc.stdout!),
                                                   new StreamMessageWriter(proc.stdin!));
        this.connection = connection;
        connection.onRequest(() => null);  // workspace/configuration and friends
        connection.listen();
        connection
          .sendRequest("initialize", { processId: process.pid, rootUri: null, capabilities: {} })
          .then((result) => {
            this.initializeResult = result as { serverInfo?: { name: string } };
            return connection.sendNotification("initialized", {});
          })
          .then(() => resolve(), reject);
      });
    });
  }
}

after(async () => {
  for (const c of FakeLanguageClient.made) {
    if (c.isRunning()) {
      await c.stop();
    }
  }
});

// ----- a stand-in `vscode` module ----------------------------------------------------------------

type Listener = (e: { affectsConfiguration(section: string): boolean }) => void;

function fakeVscode(settings: Record<string, unknown>) {
  const commands = new Map<string, (...args: unknown[]) => unknown>();
  const configListeners: Listener[] = [];
  const errors: string[] = [];
  const disposable = { dispose() {} };
  const vscode = {
    window: {
      createOutputChannel: () => ({ appendLine() {}, show() {}, dispose() {} }),
      showErrorMessage: async (message: string) => {
        errors.push(message);
        return undefined;
      },
      showInformationMessage: async () => undefined,
    },
    commands: {
      registerCommand: (name: string, fn: (...args: unknown[]) => unknown) => {
        commands.set(name, fn);
        return disposable;
      },
    },
    workspace: {
      isTrusted: true,
      getConfiguration: () => ({ get: (key: string) => settings[key] }),
      onDidChangeConfiguration: (fn: Listener) => {
        configListeners.push(fn);
        return disposable;
      },
      onDidGrantWorkspaceTrust: () => disposable,
    },
    ProgressLocation: { Notification: 15 },
    ViewColumn: { Beside: -2 },
  };
  const changed = (key: string) => {
    for (const fn of configListeners) {
      fn({ affectsConfiguration: (section) => section === key || key.startsWith(section + ".") });
    }
  };
  return { vscode, commands, errors, changed };
}

/** `out/extension.js`, loaded fresh with the stand-ins in place of `vscode` and the client library. */
function loadExtension(vscode: unknown) {
  // eslint-disable-next-line @typescript-eslint/no-var-requires
  const Module = require("node:module");
  const original = Module._load;
  const languageclient = { LanguageClient: FakeLanguageClient, TransportKind: { stdio: 0 },
                           ExecuteCommandRequest: { type: "workspace/executeCommand" } };
  Module._load = function (request: string, ...rest: unknown[]) {
    if (request === "vscode") {
      return vscode;
    }
    if (request === "vscode-languageclient/node") {
      return languageclient;
    }
    return original.call(this, request, ...rest);
  };
  try {
    for (const name of ["../extension", "../client"]) {
      delete require.cache[require.resolve(name)];
    }
    return require("../extension") as { activate(ctx: unknown): Promise<void>; deactivate(): Promise<void> };
  } finally {
    Module._load = original;
  }
}

async function waitFor(what: string, ready: () => boolean, ms = 60000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!ready()) {
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${what}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

// ----- tests -------------------------------------------------------------------------------------

test("the supervisor replaces a client whose start failed, even though it cannot be stopped", async () => {
  const made: { ok: boolean; started: number; stopped: number }[] = [];
  const reasons: unknown[] = [];
  let ok = false;
  const supervisor = new ServerSupervisor(() => {
    const c = {
      ok,
      started: 0,
      stopped: 0,
      async start() {
        c.started += 1;
        if (!c.ok) {
          throw new Error("spawn ENOENT");
        }
      },
      async stop() {
        if (!c.ok) {
          throw new Error("Client is not running and can't be stopped. It's current state is: startFailed");
        }
        c.stopped += 1;
      },
    };
    made.push(c);
    return c;
  }, (err) => reasons.push(err));
  await supervisor.restart();
  assert.equal(reasons.length, 1);
  ok = true;
  await Promise.all([supervisor.restart(), supervisor.restart()]); // serialised: the last one wins
  assert.equal(made.length, 3);
  assert.deepEqual(made.map((c) => c.started), [1, 1, 1]);
  assert.equal(made[1].stopped, 1);
  assert.equal(supervisor.client, made[2]);
  await supervisor.stop();
  assert.equal(made[2].stopped, 1);
  assert.equal(supervisor.client, undefined);
});

test("after a failed start, changing tilelang.pythonPath starts the server", { skip: !HAVE_PYTHON && "no Python" },
  async () => {
    const settings: Record<string, unknown> = { pythonPath: MISSING };
    const fake = fakeVscode(settings);
    const extension = loadExtension(fake.vscode);
    FakeLanguageClient.made = [];
    await extension.activate({ subscriptions: [] });
    assert.equal(FakeLanguageClient.made.length, 1);
    assert.equal(FakeLanguageClient.made[0].state, "startFailed");
    assert.match(fake.errors[0], /the language server did not start/);

    settings.pythonPath = PYTHON;
    fake.changed("tilelang.pythonPath");
    await waitFor("a running server", () => FakeLanguageClient.made.at(-1)?.isRunning() ?? false);
    const client = FakeLanguageClient.made.at(-1)!;
    assert.equal(FakeLanguageClient.made.length, 2);
    assert.deepEqual(client.serverOptions.args, ["-m", "tilelang_lsp.server"]);
    assert.equal(client.initializeResult?.serverInfo?.name, "tilelang-lsp");
    await extension.deactivate();
    assert.equal(client.state, "stopped");
  });

test("after a failed start, Restart Language Server starts the server", { skip: !HAVE_PYTHON && "no Python" },
  async () => {
    const settings: Record<string, unknown> = { "server.command": [MISSING, "-m", "tilelang_lsp.server"] };
    const fake = fakeVscode(settings);
    const extension = loadExtension(fake.vscode);
    FakeLanguageClient.made = [];
    await extension.activate({ subscriptions: [] });
    assert.equal(FakeLanguageClient.made[0].state, "startFailed");

    settings["server.command"] = [PYTHON, "-m", "tilelang_lsp.server"];
    await fake.commands.get("tilelang.restartServer")!();
    const client = FakeLanguageClient.made.at(-1)!;
    assert.equal(FakeLanguageClient.made.length, 2);
    assert.ok(client.isRunning(), `state ${client.state}`);
    // and a second restart replaces the running server with a new one
    await fake.commands.get("tilelang.restartServer")!();
    assert.equal(client.state, "stopped");
    assert.ok(FakeLanguageClient.made.at(-1)!.isRunning());
    await extension.deactivate();
  });
