-- Drives the configuration of docs/editors.md ("Neovim 0.7 to 0.10") headless: diagnostics, hover,
-- code lenses and the TL0401 quick fix on kernel.py; writes what it saw to result.txt.
-- Run by tests/lsp/test_lsp_neovim.py.
local out = {}
local function say(s) table.insert(out, s) end
local dir = vim.env.TILELANG_NVIM_DIR
vim.cmd('edit ' .. dir .. '/kernel.py')
say('version ' .. tostring(vim.version().major) .. '.' .. tostring(vim.version().minor) .. '.' .. tostring(vim.version().patch))
say('vim.lsp.start exists: ' .. tostring(vim.lsp.start ~= nil))
local got = vim.wait(180000, function() return #vim.diagnostic.get(0) > 0 end, 200)
local diags = vim.diagnostic.get(0)
for _, d in ipairs(diags) do say('diagnostic ' .. tostring(d.code or (d.user_data and d.user_data.lsp and d.user_data.lsp.code)) .. ' line ' .. (d.lnum + 1)) end
local clients = vim.lsp.get_active_clients()
say('clients ' .. #clients .. ' ' .. (clients[1] and clients[1].name or '-'))
-- hover on C_local (line 14, 0-based 13)
local line13 = vim.api.nvim_buf_get_lines(0, 13, 14, false)[1]
local col = line13:find('C_local') - 1
local r = vim.lsp.buf_request_sync(0, 'textDocument/hover', { textDocument = { uri = vim.uri_from_bufnr(0) }, position = { line = 13, character = col } }, 20000)
for _, res in pairs(r or {}) do if res.result then say('hover ' .. res.result.contents.value:sub(1, 60):gsub('\n', ' ')) end end
local lens = vim.lsp.buf_request_sync(0, 'textDocument/codeLens', { textDocument = { uri = vim.uri_from_bufnr(0) } }, 20000)
for _, res in pairs(lens or {}) do for _, l in ipairs(res.result or {}) do say('lens ' .. l.command.title) end end
-- quick fix for TL0401
local d = diags[1]
local lspdiags = vim.lsp.diagnostic.get_line_diagnostics(0, d.lnum)
local params = { textDocument = { uri = vim.uri_from_bufnr(0) }, range = { start = { line = d.lnum, character = 0 }, ['end'] = { line = d.lnum, character = 0 } }, context = { diagnostics = lspdiags } }
local acts = vim.lsp.buf_request_sync(0, 'textDocument/codeAction', params, 20000)
for _, res in pairs(acts or {}) do
  for _, a in ipairs(res.result or {}) do
    say('action ' .. a.title)
    vim.lsp.util.apply_workspace_edit(a.edit, 'utf-16')
  end
end
local cleared = vim.wait(120000, function() return #vim.diagnostic.get(0) == 0 end, 200)
say('cleared after the fix: ' .. tostring(cleared))
say('line 15 now: ' .. vim.api.nvim_buf_get_lines(0, 14, 15, false)[1])
vim.fn.writefile(out, dir .. '/result.txt')
vim.cmd('qa!')
