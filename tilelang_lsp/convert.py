"""Runs in the language-server process.

Conversions between TileLang's plain data and LSP types: the only module importing lsprotocol.

Positions: TileLang spans are 1-based lines and 1-based character (code point) columns with an
exclusive end (``tilelang.diagnostics.span``); LSP positions are 0-based lines and 0-based
columns in the negotiated encoding (UTF-16 unless the client offered UTF-8/UTF-32; pygls's
``PositionCodec`` counts the units). ``LineIndex`` does both directions for one document text;
it splits lines the way the Python tokenizer and LSP do (``\\n``, ``\\r\\n``, ``\\r``) and clamps
positions past the end of a line or of the file, so a stale span never produces an invalid range.

Diagnostics arrive from the worker as ``Diagnostic.to_dict()`` dicts with ``url``. Each becomes an
LSP diagnostic with ``code``, ``codeDescription.href``, ``source="tilelang"``, notes with a location
as ``relatedInformation`` (notes without one, and the binding, are appended to the message), and
``data = {"fix": Fix.to_dict()}`` when a quick fix exists (``code_actions`` reads it back).
"""

from __future__ import annotations

from typing import Any, Iterable
from urllib.parse import unquote, urlparse

from lsprotocol import types as lsp

SOURCE = "tilelang"
_UNNECESSARY = {"TL0403", "TL0901"}


# ----- positions ---------------------------------------------------------------------------------

def split_lines(text: str) -> list[str]:
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


class LineIndex:
    """Position conversions for one text (see the module docstring)."""

    def __init__(self, text: str, codec=None):
        self.lines = split_lines(text)
        self.codec = codec

    def _units(self, s: str) -> int:
        return self.codec.client_num_units(s) if self.codec is not None else len(s.encode("utf-16-le")) // 2

    def position(self, line: int, column: int) -> lsp.Position:
        """LSP position of 1-based ``line``:``column`` (code points), clamped into the text."""
        if line < 1:
            return lsp.Position(0, 0)
        if line > len(self.lines):
            return lsp.Position(len(self.lines) - 1, self._units(self.lines[-1]))
        text = self.lines[line - 1]
        col = min(max(column - 1, 0), len(text))
        return lsp.Position(line - 1, self._units(text[:col]))

    def range(self, line: int, column: int, end_line: int, end_column: int) -> lsp.Range:
        return lsp.Range(self.position(line, column), self.position(end_line, end_column))

    def span_range(self, span: dict | None) -> lsp.Range:
        if not span:
            return lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0))
        return self.range(span["line"], span["column"], span["end_line"], span["end_column"])

    def from_position(self, position) -> tuple[int, int]:
        """(1-based line, 0-based code-point column) of an LSP position, clamped into the text."""
        line = min(max(position.line, 0), len(self.lines) - 1)
        text = self.lines[line]
        units, col = 0, 0
        for ch in text:
            if units >= position.character:
                break
            units += self._units(ch)
            col += 1
        return line + 1, col


# ----- uris --------------------------------------------------------------------------------------

def uri_to_path(uri: str) -> str:
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        return uri
    return unquote(parsed.path)


def path_to_uri(path: str) -> str:
    from pathlib import Path

    try:
        return Path(path).resolve().as_uri()
    except ValueError:
        return path


# ----- diagnostics -------------------------------------------------------------------------------

def to_lsp_diagnostic(data: dict, index: LineIndex, path: str, uri: str) -> lsp.Diagnostic:
    span = data.get("span")
    here = span is not None and span.get("file") in (path, None)
    rng = index.span_range(span if here else None)
    message = data["message"]
    if span is not None and not here:
        message = f"{span['file']}:{span['line']}:{span['column']}: {message}"
    related, extra = [], []
    for note in data.get("notes") or ():
        note_span = note.get("span")
        if note_span is not None and note_span.get("file") == path:
            related.append(lsp.DiagnosticRelatedInformation(lsp.Location(uri, index.span_range(note_span)),
                                                            note["message"]))
        else:
            extra.append(f"note: {note['message']}")
    if data.get("binding"):
        extra.append(f"checked with {data['binding']}")
    if extra:
        message = "\n".join([message, *extra])
    return lsp.Diagnostic(
        range=rng, message=message, severity=lsp.DiagnosticSeverity(_rank(data.get("severity"))),
        code=data["code"], code_description=lsp.CodeDescription(href=data["url"]) if data.get("url") else None,
        source=SOURCE, related_information=related or None,
        tags=[lsp.DiagnosticTag.Unnecessary] if data["code"] in _UNNECESSARY else None,
        data={"fix": data["fix"]} if data.get("fix") else None)


def _rank(severity) -> int:
    return {"error": 1, "warning": 2, "info": 3, "hint": 4}.get(str(severity), 1)


def to_lsp_diagnostics(found: Iterable[dict], text: str, codec, path: str, uri: str) -> list[lsp.Diagnostic]:
    index = LineIndex(text, codec)
    return [to_lsp_diagnostic(d, index, path, uri) for d in found]


def publish_params(uri: str, version: int | None, diagnostics: list) -> lsp.PublishDiagnosticsParams:
    return lsp.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics, version=version)


def full_report(result_id: str, diagnostics: list) -> lsp.RelatedFullDocumentDiagnosticReport:
    return lsp.RelatedFullDocumentDiagnosticReport(items=diagnostics, result_id=result_id)


def unchanged_report(result_id: str) -> lsp.RelatedUnchangedDocumentDiagnosticReport:
    return lsp.RelatedUnchangedDocumentDiagnosticReport(result_id=result_id)


# ----- code actions ------------------------------------------------------------------------------

def fix_of(diagnostic) -> dict | None:
    """The ``Fix`` dict carried in an LSP diagnostic's ``data`` (as sent back by the client)."""
    data = getattr(diagnostic, "data", None)
    if isinstance(data, dict) and isinstance(data.get("fix"), dict):
        return data["fix"]
    return None


def to_lsp_code_action(fix: dict, diagnostic, index: LineIndex, uri: str, version) -> lsp.CodeAction:
    edits = [lsp.TextEdit(index.span_range(e["span"]), e["new_text"]) for e in fix.get("edits", ())]
    doc = lsp.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version)
    edit = lsp.WorkspaceEdit(document_changes=[lsp.TextDocumentEdit(text_document=doc, edits=edits)])
    return lsp.CodeAction(title=fix["title"], kind=lsp.CodeActionKind.QuickFix, diagnostics=[diagnostic],
                          edit=edit, is_preferred=True)


# ----- hover, completion, signatures -------------------------------------------------------------

def to_lsp_hover(markdown: str, rng: lsp.Range | None = None) -> lsp.Hover:
    return lsp.Hover(contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=markdown), range=rng)


_ITEM_KINDS = {"function": lsp.CompletionItemKind.Function, "class": lsp.CompletionItemKind.Class,
               "dtype": lsp.CompletionItemKind.TypeParameter, "value": lsp.CompletionItemKind.Constant,
               "keyword": lsp.CompletionItemKind.Property, "buffer": lsp.CompletionItemKind.Variable,
               "variable": lsp.CompletionItemKind.Variable, "module": lsp.CompletionItemKind.Module}


def to_lsp_completion_item(item: dict) -> lsp.CompletionItem:
    doc = item.get("doc")
    return lsp.CompletionItem(
        label=item["label"], kind=_ITEM_KINDS.get(item.get("kind"), lsp.CompletionItemKind.Text),
        detail=item.get("detail"), sort_text=item.get("sort"), insert_text=item.get("insert"),
        documentation=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=doc) if doc else None)


def to_lsp_completion_list(items: list[dict], incomplete: bool = False) -> lsp.CompletionList:
    return lsp.CompletionList(is_incomplete=incomplete, items=[to_lsp_completion_item(i) for i in items])


def to_lsp_signature_help(label: str, params: list[str], doc: str, active: int) -> lsp.SignatureHelp:
    info = lsp.SignatureInformation(
        label=label, documentation=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=doc) if doc else None,
        parameters=[lsp.ParameterInformation(label=p) for p in params])
    return lsp.SignatureHelp(signatures=[info], active_signature=0, active_parameter=active)


# ----- navigation --------------------------------------------------------------------------------

def line_start_range(line: int) -> lsp.Range:
    """An empty range at the start of 1-based ``line`` (of a file the server has not opened)."""
    return lsp.Range(lsp.Position(max(line - 1, 0), 0), lsp.Position(max(line - 1, 0), 0))


def to_lsp_location(uri: str, rng: lsp.Range) -> lsp.Location:
    return lsp.Location(uri=uri, range=rng)


_SYMBOL_KINDS = {"factory": lsp.SymbolKind.Function, "kernel": lsp.SymbolKind.Function,
                 "buffer": lsp.SymbolKind.Variable, "param": lsp.SymbolKind.Variable,
                 "tensor": lsp.SymbolKind.Array}


def to_lsp_document_symbol(sym: dict, index: LineIndex) -> lsp.DocumentSymbol:
    return lsp.DocumentSymbol(
        name=sym["name"], detail=sym.get("detail"), kind=_SYMBOL_KINDS.get(sym["kind"], lsp.SymbolKind.Variable),
        range=index.range(*sym["range"]), selection_range=index.range(*sym["selection"]),
        children=[to_lsp_document_symbol(c, index) for c in sym.get("children", ())])


# ----- lenses, commands, messages ----------------------------------------------------------------

def to_lsp_code_lens(line: int, title: str, command: str, arguments: list) -> lsp.CodeLens:
    rng = lsp.Range(lsp.Position(line - 1, 0), lsp.Position(line - 1, 0))
    return lsp.CodeLens(range=rng, command=lsp.Command(title=title, command=command, arguments=arguments))


def show_message_params(message: str, kind: str = "info") -> lsp.ShowMessageParams:
    level = {"error": lsp.MessageType.Error, "warning": lsp.MessageType.Warning}.get(kind, lsp.MessageType.Info)
    return lsp.ShowMessageParams(type=level, message=message)


def log_message_params(message: str) -> lsp.LogMessageParams:
    return lsp.LogMessageParams(type=lsp.MessageType.Log, message=message)


def show_document_params(uri: str) -> lsp.ShowDocumentParams:
    return lsp.ShowDocumentParams(uri=uri, take_focus=False)


def configuration_params(scope_uri: str | None = None) -> lsp.ConfigurationParams:
    return lsp.ConfigurationParams(items=[lsp.ConfigurationItem(scope_uri=scope_uri, section="tilelang")])


# ----- capabilities ------------------------------------------------------------------------------

def completion_options() -> lsp.CompletionOptions:
    return lsp.CompletionOptions(trigger_characters=[".", "(", ",", " "], resolve_provider=False)


def signature_help_options() -> lsp.SignatureHelpOptions:
    return lsp.SignatureHelpOptions(trigger_characters=["(", ","], retrigger_characters=[","])


def diagnostic_options() -> lsp.DiagnosticOptions:
    return lsp.DiagnosticOptions(identifier=SOURCE, inter_file_dependencies=False, workspace_diagnostics=False)


def code_action_options() -> lsp.CodeActionOptions:
    return lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.QuickFix])


def code_lens_options() -> lsp.CodeLensOptions:
    return lsp.CodeLensOptions(resolve_provider=False)


def client_supports(capabilities, *path: str) -> Any:
    """The client capability at ``path`` (snake_case attribute names), or None."""
    node = capabilities
    for name in path:
        node = getattr(node, name, None)
        if node is None:
            return None
    return node
