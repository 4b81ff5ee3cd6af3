// Unit tests of the extension's own logic; run with `node --test out/test/` (no VS Code needed).

import assert from "node:assert/strict";
import { test } from "node:test";

import {
  clientCommandFor,
  configurationResult,
  executeParams,
  lensArguments,
  parseResult,
  readSettings,
  serverCommand,
  serverCommandFor,
  serverSettings,
  sourceDocument,
  summaryLine,
} from "../config";

const getter = (values: Record<string, unknown>) => (key: string) => values[key];

test("settings have defaults and ignore values of the wrong type", () => {
  const s = readSettings(getter({ target: " sm_80 ", timeout: -3, allowExecution: "yes" }));
  assert.deepEqual(s, { pythonPath: "", serverCommand: [], target: "sm_80", allowExecution: true,
                        codeLens: true, timeout: 20 });
});

test("the server runs with the configured python, or the explicit command", () => {
  const s = readSettings(getter({ pythonPath: "/venv/bin/python" }));
  assert.deepEqual(serverCommand(s), { command: "/venv/bin/python", args: ["-m", "tilelang_lsp.server"] });
  assert.deepEqual(serverCommand(readSettings(getter({}))).command, "python3");
  const custom = readSettings(getter({ "server.command": ["tilelang-lsp", "--log-file", "/tmp/l.log"] }));
  assert.deepEqual(serverCommand(custom), { command: "tilelang-lsp", args: ["--log-file", "/tmp/l.log"] });
});

test("server settings: execution only in trusted workspaces, results shown by the client", () => {
  const s = readSettings(getter({ target: "sm_90a", "codeLens.enable": false }));
  assert.deepEqual(serverSettings(s, true), { allowExecution: true, target: "sm_90a", codeLens: false, timeout: 20,
                                             clientHandlesResults: true });
  assert.equal(serverSettings(s, false).allowExecution, false);
  assert.equal(serverSettings(readSettings(getter({ allowExecution: false })), true).allowExecution, false);
  assert.equal(serverSettings(readSettings(getter({})), true).target, null);
});

test("workspace/configuration answers only the tilelang section", () => {
  const s = readSettings(getter({}));
  const result = configurationResult(["tilelang", "python", undefined], s, false);
  assert.equal((result[0] as Record<string, unknown>).allowExecution, false);
  assert.deepEqual(result.slice(1), [null, null]);
});

test("lens commands map to client commands and back", () => {
  assert.equal(clientCommandFor("tilelang.compile"), "tilelang.client.compile");
  assert.equal(clientCommandFor("tilelang.run"), "tilelang.client.run");
  assert.equal(clientCommandFor("other.command"), "other.command");
  assert.equal(serverCommandFor("tilelang.client.run"), "tilelang.run");
  assert.equal(serverCommandFor("tilelang.restartServer"), undefined);
});

test("lens arguments are validated and become executeCommand params", () => {
  const a = lensArguments(["file:///k.py", "matmul"]);
  assert.deepEqual(executeParams("tilelang.compile", a), { command: "tilelang.compile",
                                                            arguments: ["file:///k.py", "matmul"] });
  assert.throws(() => lensArguments(["file:///k.py"]), /expected \[document uri, factory name\]/);
});

test("a compile result opens as CUDA with the report as a header comment", () => {
  const r = parseResult({ kind: "compile", ok: true, title: "TileLang compile: matmul",
                          report: "**matmul** compiled for sm_90a in 1.90 s\n\n- registers: **202**/thread",
                          cuda_source: "__global__ void k() {}", language: "cuda" });
  const doc = sourceDocument(r)!;
  assert.equal(doc.language, "cuda-cpp");
  assert.ok(doc.content.startsWith("// TileLang compile: matmul\n// matmul compiled for sm_90a in 1.90 s"));
  assert.ok(doc.content.endsWith("__global__ void k() {}"));
  assert.equal(summaryLine(r), "matmul compiled for sm_90a in 1.90 s");
  assert.equal(sourceDocument(parseResult({ kind: "run", ok: true, report: "no GPU" })), undefined);
  assert.throws(() => parseResult({ nope: 1 }), /not a TileLang command result/);
});
